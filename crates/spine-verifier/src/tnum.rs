//! Tristate numbers: each of the 64 bits is known 0, known 1 or unknown, as in the
//! kernel's `kernel/bpf/tnum.c`. A tnum `(value, mask)` stands for every `x` with
//! `x & !mask == value`; `value & mask == 0` always holds for a well-formed tnum.

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Tnum {
    pub value: u64,
    pub mask: u64,
}

impl fmt::Debug for Tnum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:#x}; {:#x})", self.value, self.mask)
    }
}

impl Tnum {
    pub const UNKNOWN: Tnum = Tnum { value: 0, mask: u64::MAX };

    pub const fn constant(v: u64) -> Tnum {
        Tnum { value: v, mask: 0 }
    }

    /// The smallest tnum holding every value of `[min, max]` (`min <= max`).
    pub fn range(min: u64, max: u64) -> Tnum {
        let chi = min ^ max;
        let bits = 64 - chi.leading_zeros();
        if bits > 63 {
            return Tnum::UNKNOWN;
        }
        let delta = (1u64 << bits) - 1;
        Tnum { value: min & !delta, mask: delta }
    }

    pub fn is_const(self) -> bool {
        self.mask == 0
    }

    /// True if `v` is one of the values this tnum stands for.
    pub fn contains(self, v: u64) -> bool {
        v & !self.mask == self.value
    }

    /// True if every value of `b` is a value of `self` (the kernel's `tnum_in(self, b)`).
    pub fn includes(self, b: Tnum) -> bool {
        if b.mask & !self.mask != 0 {
            return false;
        }
        self.value == b.value & !self.mask
    }

    /// The smallest value and the largest.
    pub fn min(self) -> u64 {
        self.value
    }

    pub fn max(self) -> u64 {
        self.value | self.mask
    }

    pub fn lshift(self, s: u32) -> Tnum {
        Tnum { value: self.value << s, mask: self.mask << s }
    }

    pub fn rshift(self, s: u32) -> Tnum {
        Tnum { value: self.value >> s, mask: self.mask >> s }
    }

    pub fn arshift(self, s: u32) -> Tnum {
        Tnum { value: ((self.value as i64) >> s) as u64, mask: ((self.mask as i64) >> s) as u64 }
    }

    fn add_t(self, b: Tnum) -> Tnum {
        let sm = self.mask.wrapping_add(b.mask);
        let sv = self.value.wrapping_add(b.value);
        let sigma = sm.wrapping_add(sv);
        let chi = sigma ^ sv;
        let mu = chi | self.mask | b.mask;
        Tnum { value: sv & !mu, mask: mu }
    }

    fn sub_t(self, b: Tnum) -> Tnum {
        let dv = self.value.wrapping_sub(b.value);
        let alpha = dv.wrapping_add(self.mask);
        let beta = dv.wrapping_sub(b.mask);
        let chi = alpha ^ beta;
        let mu = chi | self.mask | b.mask;
        Tnum { value: dv & !mu, mask: mu }
    }

    pub fn and(self, b: Tnum) -> Tnum {
        let alpha = self.value | self.mask;
        let beta = b.value | b.mask;
        let v = self.value & b.value;
        Tnum { value: v, mask: alpha & beta & !v }
    }

    pub fn or(self, b: Tnum) -> Tnum {
        let v = self.value | b.value;
        let mu = self.mask | b.mask;
        Tnum { value: v, mask: mu & !v }
    }

    pub fn xor(self, b: Tnum) -> Tnum {
        let v = self.value ^ b.value;
        let mu = self.mask | b.mask;
        Tnum { value: v & !mu, mask: mu }
    }

    fn mul_t(self, b: Tnum) -> Tnum {
        let acc_v = self.value.wrapping_mul(b.value);
        let mut acc_m = Tnum::constant(0);
        let (mut a, mut b) = (self, b);
        while a.value != 0 || a.mask != 0 {
            if a.value & 1 != 0 {
                acc_m = acc_m.add_t(Tnum { value: 0, mask: b.mask });
            } else if a.mask & 1 != 0 {
                acc_m = acc_m.add_t(Tnum { value: 0, mask: b.value | b.mask });
            }
            a = a.rshift(1);
            b = b.lshift(1);
        }
        Tnum::constant(acc_v).add_t(acc_m)
    }

    /// The values both tnums allow; `None` when their known bits disagree.
    pub fn intersect(self, b: Tnum) -> Option<Tnum> {
        if (self.value ^ b.value) & !self.mask & !b.mask != 0 {
            return None;
        }
        let v = self.value | b.value;
        let mu = self.mask & b.mask;
        Some(Tnum { value: v & !mu, mask: mu })
    }

    /// The least tnum holding every value of both (bits that differ become unknown).
    pub fn union(self, b: Tnum) -> Tnum {
        let mu = self.mask | b.mask | (self.value ^ b.value);
        Tnum { value: self.value & !mu, mask: mu }
    }

    /// Keeps the low `bytes` bytes (zero-extension of a truncation).
    pub fn cast(self, bytes: u32) -> Tnum {
        if bytes >= 8 {
            return self;
        }
        let m = (1u64 << (bytes * 8)) - 1;
        Tnum { value: self.value & m, mask: self.mask & m }
    }

    /// Sign-extends from the low `bits` bits.
    pub fn sext(self, bits: u32) -> Tnum {
        if bits >= 64 {
            return self;
        }
        let sh = 64 - bits;
        Tnum {
            value: (((self.value << sh) as i64) >> sh) as u64,
            mask: (((self.mask << sh) as i64) >> sh) as u64,
        }
    }

    /// Reverses the byte order of the low `bytes` bytes; the result has only those bytes.
    pub fn swap_bytes(self, bytes: u32) -> Tnum {
        let t = self.cast(bytes);
        match bytes {
            2 => Tnum {
                value: (t.value as u16).swap_bytes() as u64,
                mask: (t.mask as u16).swap_bytes() as u64,
            },
            4 => Tnum {
                value: (t.value as u32).swap_bytes() as u64,
                mask: (t.mask as u32).swap_bytes() as u64,
            },
            _ => Tnum { value: t.value.swap_bytes(), mask: t.mask.swap_bytes() },
        }
    }

    pub fn subreg(self) -> Tnum {
        self.cast(4)
    }

    pub fn clear_subreg(self) -> Tnum {
        self.rshift(32).lshift(32)
    }

    pub fn with_subreg(self, sub: Tnum) -> Tnum {
        self.clear_subreg().or(sub.subreg())
    }

    /// True if every value is a multiple of `size` (a power of two).
    pub fn is_aligned(self, size: u64) -> bool {
        size == 0 || (self.value | self.mask) & (size - 1) == 0
    }
}

impl std::ops::Add for Tnum {
    type Output = Tnum;
    fn add(self, b: Tnum) -> Tnum {
        self.add_t(b)
    }
}

impl std::ops::Sub for Tnum {
    type Output = Tnum;
    fn sub(self, b: Tnum) -> Tnum {
        self.sub_t(b)
    }
}

impl std::ops::Mul for Tnum {
    type Output = Tnum;
    fn mul(self, b: Tnum) -> Tnum {
        self.mul_t(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_tnum_and_member() -> impl Strategy<Value = (Tnum, u64)> {
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(v, m, x)| {
            let t = Tnum { value: v & !m, mask: m };
            (t, t.value | (x & m))
        })
    }

    proptest! {
        #[test]
        fn ops_are_sound((a, x) in arb_tnum_and_member(), (b, y) in arb_tnum_and_member(), s in 0u32..64) {
            prop_assert!(a.contains(x));
            prop_assert!((a + b).contains(x.wrapping_add(y)));
            prop_assert!((a - b).contains(x.wrapping_sub(y)));
            prop_assert!((a * b).contains(x.wrapping_mul(y)));
            prop_assert!(a.and(b).contains(x & y));
            prop_assert!(a.or(b).contains(x | y));
            prop_assert!(a.xor(b).contains(x ^ y));
            prop_assert!(a.lshift(s).contains(x << s));
            prop_assert!(a.rshift(s).contains(x >> s));
            prop_assert!(a.arshift(s).contains(((x as i64) >> s) as u64));
            prop_assert!(a.union(b).contains(x) && a.union(b).contains(y));
            prop_assert!(a.cast(2).contains(x as u16 as u64));
            prop_assert!(a.sext(8).contains(x as i8 as i64 as u64));
            prop_assert!(a.swap_bytes(4).contains((x as u32).swap_bytes() as u64));
            prop_assert!(a.swap_bytes(8).contains(x.swap_bytes()));
            if let Some(i) = a.intersect(Tnum::constant(x)) {
                prop_assert!(i.contains(x));
            } else {
                prop_assert!(false, "member intersection empty");
            }
            prop_assert!(a.includes(Tnum::constant(x)));
            prop_assert!(Tnum::range(x.min(y), x.max(y)).contains(x));
            prop_assert!(Tnum::range(x.min(y), x.max(y)).contains(y));
        }
    }

    #[test]
    fn range_and_includes() {
        let t = Tnum::range(0, 7);
        assert_eq!(t, Tnum { value: 0, mask: 7 });
        assert!(t.includes(Tnum::constant(5)));
        assert!(!t.includes(Tnum::constant(8)));
        assert_eq!(Tnum::range(3, 3), Tnum::constant(3));
        assert_eq!(Tnum::range(0, u64::MAX), Tnum::UNKNOWN);
        assert!(Tnum::constant(1).intersect(Tnum::constant(2)).is_none());
    }
}
