//! Abstract scalars: a tnum plus unsigned and signed bounds on the full 64 bits and on
//! the low 32 bits, kept mutually consistent by [`Scalar::sync`] (the kernel's
//! `reg_bounds_sync`). Every operation over-approximates: if `a` holds `x` and `b`
//! holds `y`, `a.op(b)` holds `x op y` under RFC 9669 semantics (wrapping arithmetic,
//! masked shift amounts, division by zero gives 0, modulo by zero keeps the dividend).

use crate::tnum::Tnum;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Scalar {
    pub t: Tnum,
    pub umin: u64,
    pub umax: u64,
    pub smin: i64,
    pub smax: i64,
    pub u32min: u32,
    pub u32max: u32,
    pub s32min: i32,
    pub s32max: i32,
}

impl Default for Scalar {
    fn default() -> Self {
        Scalar::unknown()
    }
}

/// Bounds of a value that may be anything.
const FULL: Scalar = Scalar {
    t: Tnum::UNKNOWN,
    umin: 0,
    umax: u64::MAX,
    smin: i64::MIN,
    smax: i64::MAX,
    u32min: 0,
    u32max: u32::MAX,
    s32min: i32::MIN,
    s32max: i32::MAX,
};

impl Scalar {
    pub const fn unknown() -> Scalar {
        FULL
    }

    pub fn constant(v: u64) -> Scalar {
        Scalar {
            t: Tnum::constant(v),
            umin: v,
            umax: v,
            smin: v as i64,
            smax: v as i64,
            u32min: v as u32,
            u32max: v as u32,
            s32min: v as i32,
            s32max: v as i32,
        }
    }

    /// Any value in `[min, max]` (unsigned).
    pub fn urange(min: u64, max: u64) -> Scalar {
        let mut s = FULL;
        s.umin = min;
        s.umax = max;
        s.t = Tnum::range(min, max);
        s.synced()
    }

    /// Any value in `[min, max]` (signed).
    pub fn srange(min: i64, max: i64) -> Scalar {
        let mut s = FULL;
        s.smin = min;
        s.smax = max;
        s.synced()
    }

    /// Any value of `bytes` bytes, zero-extended.
    pub fn unknown_bytes(bytes: u32) -> Scalar {
        if bytes >= 8 {
            return FULL;
        }
        Scalar::urange(0, (1u64 << (bytes * 8)) - 1)
    }

    fn from_tnum(t: Tnum) -> Scalar {
        let mut s = FULL;
        s.t = t;
        s.synced()
    }

    pub fn is_const(&self) -> bool {
        self.t.is_const()
    }

    pub fn const_value(&self) -> Option<u64> {
        self.t.is_const().then_some(self.t.value)
    }

    /// The low 32 bits, when they are known.
    pub fn const32(&self) -> Option<u32> {
        self.t.subreg().is_const().then_some(self.t.value as u32)
    }

    /// True if `v` is a possible value.
    pub fn contains(&self, v: u64) -> bool {
        self.t.contains(v)
            && (self.umin..=self.umax).contains(&v)
            && (self.smin..=self.smax).contains(&(v as i64))
            && (self.u32min..=self.u32max).contains(&(v as u32))
            && (self.s32min..=self.s32max).contains(&(v as i32))
    }

    /// True when no value satisfies every component (a contradiction from a branch).
    pub fn is_empty(&self) -> bool {
        self.t.value & self.t.mask != 0
            || self.umin > self.umax
            || self.smin > self.smax
            || self.u32min > self.u32max
            || self.s32min > self.s32max
            || self.t.min() > self.umax
            || self.t.max() < self.umin
    }

    /// Every value of `other` is a value of `self`.
    pub fn includes(&self, other: &Scalar) -> bool {
        self.t.includes(other.t)
            && self.umin <= other.umin
            && other.umax <= self.umax
            && self.smin <= other.smin
            && other.smax <= self.smax
            && self.u32min <= other.u32min
            && other.u32max <= self.u32max
            && self.s32min <= other.s32min
            && other.s32max <= self.s32max
    }

    /// The least scalar holding the values of both.
    pub fn join(&self, o: &Scalar) -> Scalar {
        Scalar {
            t: self.t.union(o.t),
            umin: self.umin.min(o.umin),
            umax: self.umax.max(o.umax),
            smin: self.smin.min(o.smin),
            smax: self.smax.max(o.smax),
            u32min: self.u32min.min(o.u32min),
            u32max: self.u32max.max(o.u32max),
            s32min: self.s32min.min(o.s32min),
            s32max: self.s32max.max(o.s32max),
        }
        .synced()
    }

    /// Widening of `self` (the old loop-head value) by `new` (already joined with it):
    /// every bound that moved jumps to the next threshold or to the type's limit, and
    /// every tnum bit from the highest one that changed upward becomes unknown. Each
    /// component can move only finitely often, so loop analysis terminates.
    pub fn widen(&self, new: &Scalar, th: &Thresholds) -> Scalar {
        let changed = (self.t.value ^ new.t.value) | (self.t.mask ^ new.t.mask);
        let t = if changed == 0 {
            new.t
        } else {
            let up = u64::MAX << (63 - changed.leading_zeros());
            Tnum { value: new.t.value & !up, mask: new.t.mask | up }
        };
        let umax = if new.umax > self.umax { th.u_above(new.umax) } else { new.umax };
        let umin = if new.umin < self.umin { th.u_below(new.umin) } else { new.umin };
        let smax = if new.smax > self.smax { th.s_above(new.smax) } else { new.smax };
        let smin = if new.smin < self.smin { th.s_below(new.smin) } else { new.smin };
        let u32max = if new.u32max > self.u32max {
            th.u_above(new.u32max.into()).min(u32::MAX.into()) as u32
        } else {
            new.u32max
        };
        let u32min = if new.u32min < self.u32min {
            th.u_below(new.u32min.into()) as u32
        } else {
            new.u32min
        };
        let s32max = if new.s32max > self.s32max {
            th.s_above(new.s32max.into()).min(i32::MAX.into()) as i32
        } else {
            new.s32max
        };
        let s32min = if new.s32min < self.s32min {
            th.s_below(new.s32min.into()).max(i32::MIN.into()) as i32
        } else {
            new.s32min
        };
        Scalar { t, umin, umax, smin, smax, u32min, u32max, s32min, s32max }.synced()
    }

    pub fn synced(mut self) -> Scalar {
        self.sync();
        self
    }

    /// Makes every component as tight as the others allow (the kernel's
    /// `reg_bounds_sync`). Leaves an empty scalar empty.
    pub fn sync(&mut self) {
        // A known number inside every bound: the deduction below would arrive at exactly
        // this constant in every component (most synced results are constants).
        if self.t.mask == 0 {
            let v = self.t.value;
            if (self.umin..=self.umax).contains(&v)
                && (self.smin..=self.smax).contains(&(v as i64))
                && (self.u32min..=self.u32max).contains(&(v as u32))
                && (self.s32min..=self.s32max).contains(&(v as i32))
            {
                *self = Scalar::constant(v);
                return;
            }
        }
        self.update_bounds();
        self.deduce_bounds();
        self.deduce_bounds();
        self.bound_offset();
        self.update_bounds();
    }

    fn update_bounds(&mut self) {
        let t32 = self.t.subreg();
        self.s32min = self.s32min.max((t32.value | (t32.mask & 0x8000_0000)) as u32 as i32);
        self.s32max = self.s32max.min((t32.value | (t32.mask & 0x7fff_ffff)) as u32 as i32);
        self.u32min = self.u32min.max(t32.value as u32);
        self.u32max = self.u32max.min((t32.value | t32.mask) as u32);
        let t = self.t;
        self.smin = self.smin.max((t.value | (t.mask & (1 << 63))) as i64);
        self.smax = self.smax.min((t.value | (t.mask & (i64::MAX as u64))) as i64);
        self.umin = self.umin.max(t.value);
        self.umax = self.umax.min(t.value | t.mask);
    }

    fn deduce32(&mut self) {
        if self.umin >> 32 == self.umax >> 32 {
            self.u32min = self.u32min.max(self.umin as u32);
            self.u32max = self.u32max.min(self.umax as u32);
            if (self.umin as i32) <= (self.umax as i32) {
                self.s32min = self.s32min.max(self.umin as i32);
                self.s32max = self.s32max.min(self.umax as i32);
            }
        }
        if self.smin >> 32 == self.smax >> 32 {
            if (self.smin as u32) <= (self.smax as u32) {
                self.u32min = self.u32min.max(self.smin as u32);
                self.u32max = self.u32max.min(self.smax as u32);
            }
            if (self.smin as i32) <= (self.smax as i32) {
                self.s32min = self.s32min.max(self.smin as i32);
                self.s32max = self.s32max.min(self.smax as i32);
            }
        }
        if ((self.umin >> 32) as u32).wrapping_add(1) == (self.umax >> 32) as u32
            && (self.umin as i32) < 0
            && (self.umax as i32) >= 0
        {
            self.s32min = self.s32min.max(self.umin as i32);
            self.s32max = self.s32max.min(self.umax as i32);
        }
        if ((self.smin >> 32) as u32).wrapping_add(1) == (self.smax >> 32) as u32
            && (self.smin as i32) < 0
            && (self.smax as i32) >= 0
        {
            self.s32min = self.s32min.max(self.smin as i32);
            self.s32max = self.s32max.min(self.smax as i32);
        }
        if (self.u32min as i32) <= (self.u32max as i32) {
            self.s32min = self.s32min.max(self.u32min as i32);
            self.s32max = self.s32max.min(self.u32max as i32);
        }
        if (self.s32min as u32) <= (self.s32max as u32) {
            self.u32min = self.u32min.max(self.s32min as u32);
            self.u32max = self.u32max.min(self.s32max as u32);
        }
    }

    fn deduce64(&mut self) {
        if (self.umin as i64) <= (self.umax as i64) {
            self.smin = self.smin.max(self.umin as i64);
            self.smax = self.smax.min(self.umax as i64);
        }
        if (self.smin as u64) <= (self.smax as u64) {
            self.umin = self.umin.max(self.smin as u64);
            self.umax = self.umax.min(self.smax as u64);
        }
    }

    fn deduce_mixed(&mut self) {
        const HI: u64 = !0xffff_ffff;
        let new_umin = (self.umin & HI) | u64::from(self.u32min);
        let new_umax = (self.umax & HI) | u64::from(self.u32max);
        self.umin = self.umin.max(new_umin);
        self.umax = self.umax.min(new_umax);
        let new_smin = ((self.smin as u64 & HI) | u64::from(self.u32min)) as i64;
        let new_smax = ((self.smax as u64 & HI) | u64::from(self.u32max)) as i64;
        self.smin = self.smin.max(new_smin);
        self.smax = self.smax.min(new_smax);
        if (self.s32min as u32) <= (self.s32max as u32) {
            let lo = u64::from(self.s32min as u32);
            let hi = u64::from(self.s32max as u32);
            self.umin = self.umin.max((self.umin & HI) | lo);
            self.umax = self.umax.min((self.umax & HI) | hi);
            self.smin = self.smin.max(((self.smin as u64 & HI) | lo) as i64);
            self.smax = self.smax.min(((self.smax as u64 & HI) | hi) as i64);
        }
        if self.s32min >= 0 && self.smin >= i64::from(i32::MIN) && self.smax <= i64::from(i32::MAX)
        {
            self.smin = self.s32min.into();
            self.smax = self.s32max.into();
            self.umin = self.s32min as u64;
            self.umax = self.s32max as u64;
            if self.umin <= self.umax {
                if let Some(t) = self.t.intersect(Tnum::range(self.umin, self.umax)) {
                    self.t = t;
                }
            }
        }
    }

    fn deduce_bounds(&mut self) {
        if self.is_empty() {
            return;
        }
        self.deduce32();
        self.deduce64();
        self.deduce_mixed();
    }

    fn bound_offset(&mut self) {
        if self.umin > self.umax || self.u32min > self.u32max {
            return;
        }
        let Some(t64) = self.t.intersect(Tnum::range(self.umin, self.umax)) else {
            self.t = Tnum { value: 1, mask: 1 }; // marks the contradiction
            return;
        };
        let Some(t32) = t64.subreg().intersect(Tnum::range(self.u32min.into(), self.u32max.into()))
        else {
            self.t = Tnum { value: 1, mask: 1 };
            return;
        };
        self.t = t64.clear_subreg().or(t32);
    }

    // ---- arithmetic -----------------------------------------------------------------

    pub fn add(&self, b: &Scalar) -> Scalar {
        let mut r = FULL;
        r.t = self.t + b.t;
        if let (Some(lo), Some(hi)) = (self.smin.checked_add(b.smin), self.smax.checked_add(b.smax))
        {
            r.smin = lo;
            r.smax = hi;
        }
        if let (Some(lo), Some(hi)) = (self.umin.checked_add(b.umin), self.umax.checked_add(b.umax))
        {
            r.umin = lo;
            r.umax = hi;
        }
        let lo = u64::from(self.u32min) + u64::from(b.u32min);
        let hi = u64::from(self.u32max) + u64::from(b.u32max);
        // Neither end wraps, or both wrap once (then the range stays contiguous).
        if hi <= u64::from(u32::MAX) || lo > u64::from(u32::MAX) {
            (r.u32min, r.u32max) = (lo as u32, hi as u32);
        }
        let lo = i64::from(self.s32min) + i64::from(b.s32min);
        let hi = i64::from(self.s32max) + i64::from(b.s32max);
        if lo >= i64::from(i32::MIN) && hi <= i64::from(i32::MAX) {
            (r.s32min, r.s32max) = (lo as i32, hi as i32);
        }
        r.synced()
    }

    pub fn sub(&self, b: &Scalar) -> Scalar {
        let mut r = FULL;
        r.t = self.t - b.t;
        if let (Some(lo), Some(hi)) = (self.smin.checked_sub(b.smax), self.smax.checked_sub(b.smin))
        {
            r.smin = lo;
            r.smax = hi;
        }
        if self.umin >= b.umax {
            r.umin = self.umin - b.umax;
            r.umax = self.umax - b.umin;
        }
        if self.u32min >= b.u32max {
            r.u32min = self.u32min - b.u32max;
            r.u32max = self.u32max - b.u32min;
        }
        let lo = i64::from(self.s32min) - i64::from(b.s32max);
        let hi = i64::from(self.s32max) - i64::from(b.s32min);
        if lo >= i64::from(i32::MIN) && hi <= i64::from(i32::MAX) {
            (r.s32min, r.s32max) = (lo as i32, hi as i32);
        }
        r.synced()
    }

    pub fn mul(&self, b: &Scalar) -> Scalar {
        let mut r = FULL;
        r.t = self.t * b.t;
        if let (Some(lo), Some(hi)) = (self.umin.checked_mul(b.umin), self.umax.checked_mul(b.umax))
        {
            r.umin = lo;
            r.umax = hi;
        }
        let c = [
            self.smin.checked_mul(b.smin),
            self.smin.checked_mul(b.smax),
            self.smax.checked_mul(b.smin),
            self.smax.checked_mul(b.smax),
        ];
        if c.iter().all(Option::is_some) {
            let v = c.map(|x| x.unwrap_or(0));
            r.smin = v.iter().copied().min().unwrap_or(i64::MIN);
            r.smax = v.iter().copied().max().unwrap_or(i64::MAX);
        }
        r.synced()
    }

    /// Signed bounds from unsigned ones when they do not cross the sign boundary.
    fn signed_from_unsigned(r: &mut Scalar) {
        if (r.umin as i64) <= (r.umax as i64) {
            r.smin = r.umin as i64;
            r.smax = r.umax as i64;
        } else {
            r.smin = i64::MIN;
            r.smax = i64::MAX;
        }
    }

    pub fn and(&self, b: &Scalar) -> Scalar {
        let t = self.t.and(b.t);
        if t.is_const() {
            return Scalar::constant(t.value);
        }
        let mut r = FULL;
        r.t = t;
        r.umin = t.value;
        r.umax = self.umax.min(b.umax);
        Scalar::signed_from_unsigned(&mut r);
        r.synced()
    }

    pub fn or(&self, b: &Scalar) -> Scalar {
        let t = self.t.or(b.t);
        if t.is_const() {
            return Scalar::constant(t.value);
        }
        let mut r = FULL;
        r.t = t;
        r.umin = self.umin.max(b.umin);
        r.umax = t.value | t.mask;
        Scalar::signed_from_unsigned(&mut r);
        r.synced()
    }

    pub fn xor(&self, b: &Scalar) -> Scalar {
        let t = self.t.xor(b.t);
        if t.is_const() {
            return Scalar::constant(t.value);
        }
        let mut r = FULL;
        r.t = t;
        r.umin = t.value;
        r.umax = t.value | t.mask;
        Scalar::signed_from_unsigned(&mut r);
        r.synced()
    }

    /// `self << (b & 63)`.
    pub fn lsh(&self, b: &Scalar) -> Scalar {
        let Some(s) = b.const_value().map(|v| (v & 63) as u32) else {
            return FULL;
        };
        if s == 0 {
            return *self;
        }
        let mut r = FULL;
        r.t = self.t.lshift(s);
        if self.umax >> (64 - s) == 0 {
            r.umin = self.umin << s;
            r.umax = self.umax << s;
        }
        if s == 32 && self.s32min >= 0 {
            r.smin = i64::from(self.s32min) << 32;
            r.smax = i64::from(self.s32max) << 32;
        }
        r.synced()
    }

    /// `self >> (b & 63)` (logical).
    pub fn rsh(&self, b: &Scalar) -> Scalar {
        let Some(s) = b.const_value().map(|v| (v & 63) as u32) else {
            return Scalar::urange(0, self.umax);
        };
        let mut r = FULL;
        r.t = self.t.rshift(s);
        r.umin = self.umin >> s;
        r.umax = self.umax >> s;
        r.synced()
    }

    /// `self >> (b & 63)` (arithmetic).
    pub fn arsh(&self, b: &Scalar) -> Scalar {
        let Some(s) = b.const_value().map(|v| (v & 63) as u32) else {
            let lo = if self.smin < 0 { self.smin } else { 0 };
            let hi = if self.smax >= 0 { self.smax } else { -1 };
            return Scalar::srange(lo, hi);
        };
        let mut r = FULL;
        r.t = self.t.arshift(s);
        r.smin = self.smin >> s;
        r.smax = self.smax >> s;
        r.synced()
    }

    /// Unsigned division; division by zero gives zero.
    pub fn udiv(&self, b: &Scalar) -> Scalar {
        if let (Some(x), Some(y)) = (self.const_value(), b.const_value()) {
            return Scalar::constant(x.checked_div(y).unwrap_or(0));
        }
        match self.umax.checked_div(b.umin) {
            Some(hi) => Scalar::urange(self.umin.checked_div(b.umax).unwrap_or(0), hi),
            None => Scalar::urange(0, self.umax),
        }
    }

    /// Unsigned remainder; modulo zero gives the dividend.
    pub fn umod(&self, b: &Scalar) -> Scalar {
        if let (Some(x), Some(y)) = (self.const_value(), b.const_value()) {
            return Scalar::constant(x.checked_rem(y).unwrap_or(x));
        }
        if b.umin > 0 {
            if self.umax < b.umin {
                return *self;
            }
            Scalar::urange(0, self.umax.min(b.umax - 1))
        } else {
            Scalar::urange(0, self.umax)
        }
    }

    /// Signed division (RFC 9669: zero divisor gives zero, `MIN / -1` wraps).
    pub fn sdiv(&self, b: &Scalar) -> Scalar {
        let Some(c) = b.const_value().map(|v| v as i64) else {
            return FULL;
        };
        if let Some(x) = self.const_value() {
            let x = x as i64;
            return Scalar::constant(if c == 0 { 0 } else { x.wrapping_div(c) } as u64);
        }
        match c {
            0 => Scalar::constant(0),
            -1 => Scalar::constant(0).sub(self),
            c if c > 0 => Scalar::srange(self.smin / c, self.smax / c),
            c => Scalar::srange(self.smax / c, self.smin / c),
        }
    }

    /// Signed remainder (RFC 9669: zero divisor keeps the dividend).
    pub fn smod(&self, b: &Scalar) -> Scalar {
        let Some(c) = b.const_value().map(|v| v as i64) else {
            return FULL;
        };
        if let Some(x) = self.const_value() {
            let x = x as i64;
            return Scalar::constant(if c == 0 { x } else { x.wrapping_rem(c) } as u64);
        }
        if c == 0 {
            return *self;
        }
        let Some(m) = c.checked_abs().map(|a| a - 1) else {
            return FULL;
        };
        if self.smin >= 0 {
            Scalar::srange(0, self.smax.min(m))
        } else if self.smax <= 0 {
            Scalar::srange(self.smin.max(-m), 0)
        } else {
            Scalar::srange(-m, m)
        }
    }

    pub fn neg(&self) -> Scalar {
        Scalar::constant(0).sub(self)
    }

    /// Reverses the low `bytes` bytes (`be16`/`be32`/`bswap64` on this little-endian
    /// model); the result has only those bytes.
    pub fn swap_bytes(&self, bytes: u32) -> Scalar {
        Scalar::from_tnum(self.t.swap_bytes(bytes))
    }

    /// Keeps the low `bytes` bytes, zero-extended.
    pub fn truncate(&self, bytes: u32) -> Scalar {
        if bytes >= 8 {
            return *self;
        }
        if bytes == 4 {
            let mut r = FULL;
            r.t = self.t.subreg();
            r.umin = self.u32min.into();
            r.umax = self.u32max.into();
            return r.synced();
        }
        let bits = bytes * 8;
        let m = (1u64 << bits) - 1;
        let mut r = FULL;
        r.t = self.t.cast(bytes);
        if self.umin >> bits == self.umax >> bits {
            r.umin = self.umin & m;
            r.umax = self.umax & m;
        } else {
            r.umax = m;
        }
        r.synced()
    }

    /// Sign-extends the low `bits` bits (8, 16, 32).
    pub fn sext(&self, bits: u32) -> Scalar {
        if bits >= 64 {
            return *self;
        }
        let z = self.truncate(bits / 8);
        let half = 1u64 << (bits - 1);
        if z.umax < half {
            return z;
        }
        let hi = !((1u64 << bits) - 1);
        let mut r = FULL;
        r.t = z.t.sext(bits);
        if z.umin >= half {
            r.umin = z.umin | hi;
            r.umax = z.umax | hi;
        } else {
            r.smin = -(half as i64);
            r.smax = (half - 1) as i64;
        }
        r.synced()
    }

    /// The low 32 bits sign-extended: how `sdiv32`, `smod32` and `arsh32` see an operand.
    pub fn sext32(&self) -> Scalar {
        self.sext(32)
    }
}

/// Constants of the program that widening jumps to before giving up to the type's
/// limit: the immediates of conditional jumps (and their neighbours), so a loop bounded
/// by `i < 64` widens `i` to 64 rather than to `u64::MAX`.
#[derive(Debug, Clone, Default)]
pub struct Thresholds {
    u: Vec<u64>,
    s: Vec<i64>,
}

impl Thresholds {
    pub fn new(consts: impl IntoIterator<Item = i64>) -> Thresholds {
        let mut u = Vec::new();
        let mut s = Vec::new();
        for c in consts {
            for d in [c.wrapping_sub(1), c, c.wrapping_add(1)] {
                u.push(d as u64);
                s.push(d);
            }
        }
        u.sort_unstable();
        u.dedup();
        s.sort_unstable();
        s.dedup();
        Thresholds { u, s }
    }

    fn u_above(&self, v: u64) -> u64 {
        let i = self.u.partition_point(|&x| x < v);
        self.u.get(i).copied().unwrap_or(u64::MAX)
    }

    fn u_below(&self, v: u64) -> u64 {
        let i = self.u.partition_point(|&x| x <= v);
        if i == 0 {
            0
        } else {
            self.u[i - 1]
        }
    }

    fn s_above(&self, v: i64) -> i64 {
        let i = self.s.partition_point(|&x| x < v);
        self.s.get(i).copied().unwrap_or(i64::MAX)
    }

    fn s_below(&self, v: i64) -> i64 {
        let i = self.s.partition_point(|&x| x <= v);
        if i == 0 {
            i64::MIN
        } else {
            self.s[i - 1]
        }
    }
}

#[cfg(test)]
mod tests;
