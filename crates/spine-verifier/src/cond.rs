//! Conditional jumps on scalars: deciding a branch from the operands' bounds, and
//! narrowing both operands on each side of it (the kernel's `is_scalar_branch_taken`
//! and `regs_refine_cond_op`), for JMP (64-bit) and JMP32 (low 32 bits).

use crate::scalar::Scalar;
use spine_isa::op;

/// A comparison, already split by which side of the branch is being followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Sgt,
    Sge,
    Slt,
    Sle,
    /// `a & b != 0`.
    Set,
    /// `a & b == 0`.
    NotSet,
}

impl Cmp {
    /// The comparison a conditional jump opcode makes when taken; `None` for JA,
    /// CALL and EXIT.
    pub fn from_opcode(code: u8) -> Option<Cmp> {
        Some(match code & 0xf0 {
            op::JEQ => Cmp::Eq,
            op::JNE => Cmp::Ne,
            op::JGT => Cmp::Gt,
            op::JGE => Cmp::Ge,
            op::JLT => Cmp::Lt,
            op::JLE => Cmp::Le,
            op::JSGT => Cmp::Sgt,
            op::JSGE => Cmp::Sge,
            op::JSLT => Cmp::Slt,
            op::JSLE => Cmp::Sle,
            op::JSET => Cmp::Set,
            _ => return None,
        })
    }

    /// The condition that holds on the fall-through side.
    pub fn negate(self) -> Cmp {
        match self {
            Cmp::Eq => Cmp::Ne,
            Cmp::Ne => Cmp::Eq,
            Cmp::Gt => Cmp::Le,
            Cmp::Le => Cmp::Gt,
            Cmp::Ge => Cmp::Lt,
            Cmp::Lt => Cmp::Ge,
            Cmp::Sgt => Cmp::Sle,
            Cmp::Sle => Cmp::Sgt,
            Cmp::Sge => Cmp::Slt,
            Cmp::Slt => Cmp::Sge,
            Cmp::Set => Cmp::NotSet,
            Cmp::NotSet => Cmp::Set,
        }
    }

    /// The same condition with the operands swapped (`a < b` is `b > a`).
    pub fn flip(self) -> Cmp {
        match self {
            Cmp::Gt => Cmp::Lt,
            Cmp::Lt => Cmp::Gt,
            Cmp::Ge => Cmp::Le,
            Cmp::Le => Cmp::Ge,
            Cmp::Sgt => Cmp::Slt,
            Cmp::Slt => Cmp::Sgt,
            Cmp::Sge => Cmp::Sle,
            Cmp::Sle => Cmp::Sge,
            c => c,
        }
    }

    /// Evaluates the comparison on concrete values.
    pub fn eval(self, a: u64, b: u64, jmp32: bool) -> bool {
        let (a, b) = if jmp32 { (a as u32 as u64, b as u32 as u64) } else { (a, b) };
        let (sa, sb) = if jmp32 {
            (a as u32 as i32 as i64, b as u32 as i32 as i64)
        } else {
            (a as i64, b as i64)
        };
        match self {
            Cmp::Eq => a == b,
            Cmp::Ne => a != b,
            Cmp::Gt => a > b,
            Cmp::Ge => a >= b,
            Cmp::Lt => a < b,
            Cmp::Le => a <= b,
            Cmp::Sgt => sa > sb,
            Cmp::Sge => sa >= sb,
            Cmp::Slt => sa < sb,
            Cmp::Sle => sa <= sb,
            Cmp::Set => a & b != 0,
            Cmp::NotSet => a & b == 0,
        }
    }
}

/// Unsigned and signed bounds and tnum of the compared width.
struct View {
    t: crate::tnum::Tnum,
    umin: u64,
    umax: u64,
    smin: i64,
    smax: i64,
}

fn view(s: &Scalar, jmp32: bool) -> View {
    if jmp32 {
        View {
            t: s.t.subreg(),
            umin: s.u32min.into(),
            umax: s.u32max.into(),
            smin: s.s32min.into(),
            smax: s.s32max.into(),
        }
    } else {
        View { t: s.t, umin: s.umin, umax: s.umax, smin: s.smin, smax: s.smax }
    }
}

/// `Some(true)` if `a cmp b` holds for every pair of values, `Some(false)` if for none.
pub fn branch_taken(a: &Scalar, b: &Scalar, cmp: Cmp, jmp32: bool) -> Option<bool> {
    let (x, y) = (view(a, jmp32), view(b, jmp32));
    match cmp {
        Cmp::Eq | Cmp::Ne => {
            let eq = if x.t.is_const() && y.t.is_const() {
                Some(x.t.value == y.t.value)
            } else if x.umin > y.umax
                || x.umax < y.umin
                || x.smin > y.smax
                || x.smax < y.smin
                || x.t.intersect(y.t).is_none()
            {
                Some(false)
            } else {
                None
            };
            eq.map(|e| e == (cmp == Cmp::Eq))
        }
        Cmp::Set | Cmp::NotSet => {
            let set = if x.t.value & y.t.value != 0 {
                Some(true)
            } else if x.t.max() & y.t.max() == 0 {
                Some(false)
            } else {
                None
            };
            set.map(|s| s == (cmp == Cmp::Set))
        }
        Cmp::Gt => decide(x.umin > y.umax, x.umax <= y.umin),
        Cmp::Ge => decide(x.umin >= y.umax, x.umax < y.umin),
        Cmp::Lt => decide(x.umax < y.umin, x.umin >= y.umax),
        Cmp::Le => decide(x.umax <= y.umin, x.umin > y.umax),
        Cmp::Sgt => decide(x.smin > y.smax, x.smax <= y.smin),
        Cmp::Sge => decide(x.smin >= y.smax, x.smax < y.smin),
        Cmp::Slt => decide(x.smax < y.smin, x.smin >= y.smax),
        Cmp::Sle => decide(x.smax <= y.smin, x.smin > y.smax),
    }
}

fn decide(always: bool, never: bool) -> Option<bool> {
    if always {
        Some(true)
    } else if never {
        Some(false)
    } else {
        None
    }
}

/// Narrows `a` and `b` to the values for which `a cmp b` holds. Returns false when no
/// such values exist (the branch cannot be taken).
pub fn refine(a: &mut Scalar, b: &mut Scalar, cmp: Cmp, jmp32: bool) -> bool {
    match cmp {
        Cmp::Gt | Cmp::Ge | Cmp::Sgt | Cmp::Sge => return refine(b, a, cmp.flip(), jmp32),
        _ => {}
    }
    match (cmp, jmp32) {
        (Cmp::Eq, false) => {
            a.umin = a.umin.max(b.umin);
            a.umax = a.umax.min(b.umax);
            a.smin = a.smin.max(b.smin);
            a.smax = a.smax.min(b.smax);
            let Some(t) = a.t.intersect(b.t) else { return false };
            a.t = t;
            a.u32min = a.u32min.max(b.u32min);
            a.u32max = a.u32max.min(b.u32max);
            a.s32min = a.s32min.max(b.s32min);
            a.s32max = a.s32max.min(b.s32max);
            *b = *a;
        }
        (Cmp::Eq, true) => {
            a.u32min = a.u32min.max(b.u32min);
            a.u32max = a.u32max.min(b.u32max);
            a.s32min = a.s32min.max(b.s32min);
            a.s32max = a.s32max.min(b.s32max);
            let Some(t) = a.t.subreg().intersect(b.t.subreg()) else { return false };
            a.t = a.t.with_subreg(t);
            b.t = b.t.with_subreg(t);
            b.u32min = a.u32min;
            b.u32max = a.u32max;
            b.s32min = a.s32min;
            b.s32max = a.s32max;
        }
        (Cmp::Ne, _) => {
            if let Some(v) = const_of(b, jmp32) {
                exclude_edge(a, v, jmp32);
            } else if let Some(v) = const_of(a, jmp32) {
                exclude_edge(b, v, jmp32);
            }
        }
        (Cmp::Set, _) => {
            let (r, v) = match (const_of(b, jmp32), const_of(a, jmp32)) {
                (Some(v), _) => (&mut *a, v),
                (None, Some(v)) => (&mut *b, v),
                _ => return true,
            };
            if v.is_power_of_two() {
                let bit = crate::tnum::Tnum::constant(v);
                r.t = if jmp32 { r.t.with_subreg(r.t.subreg().or(bit)) } else { r.t.or(bit) };
            }
        }
        (Cmp::NotSet, _) => {
            let (r, v) = match (const_of(b, jmp32), const_of(a, jmp32)) {
                (Some(v), _) => (&mut *a, v),
                (None, Some(v)) => (&mut *b, v),
                _ => return true,
            };
            let keep = crate::tnum::Tnum::constant(!v);
            r.t = if jmp32 { r.t.with_subreg(r.t.subreg().and(keep)) } else { r.t.and(keep) };
        }
        (Cmp::Le, false) => {
            a.umax = a.umax.min(b.umax);
            b.umin = b.umin.max(a.umin);
        }
        (Cmp::Le, true) => {
            a.u32max = a.u32max.min(b.u32max);
            b.u32min = b.u32min.max(a.u32min);
        }
        (Cmp::Lt, false) => {
            if b.umax == 0 || a.umin == u64::MAX {
                return false;
            }
            a.umax = a.umax.min(b.umax - 1);
            b.umin = b.umin.max(a.umin + 1);
        }
        (Cmp::Lt, true) => {
            if b.u32max == 0 || a.u32min == u32::MAX {
                return false;
            }
            a.u32max = a.u32max.min(b.u32max - 1);
            b.u32min = b.u32min.max(a.u32min + 1);
        }
        (Cmp::Sle, false) => {
            a.smax = a.smax.min(b.smax);
            b.smin = b.smin.max(a.smin);
        }
        (Cmp::Sle, true) => {
            a.s32max = a.s32max.min(b.s32max);
            b.s32min = b.s32min.max(a.s32min);
        }
        (Cmp::Slt, false) => {
            if b.smax == i64::MIN || a.smin == i64::MAX {
                return false;
            }
            a.smax = a.smax.min(b.smax - 1);
            b.smin = b.smin.max(a.smin + 1);
        }
        (Cmp::Slt, true) => {
            if b.s32max == i32::MIN || a.s32min == i32::MAX {
                return false;
            }
            a.s32max = a.s32max.min(b.s32max - 1);
            b.s32min = b.s32min.max(a.s32min + 1);
        }
        (Cmp::Gt | Cmp::Ge | Cmp::Sgt | Cmp::Sge, _) => unreachable!("flipped above"),
    }
    if a.is_empty() || b.is_empty() {
        return false;
    }
    a.sync();
    b.sync();
    !a.is_empty() && !b.is_empty()
}

fn const_of(s: &Scalar, jmp32: bool) -> Option<u64> {
    if jmp32 {
        s.const32().map(u64::from)
    } else {
        s.const_value()
    }
}

/// `a != v`: moves a bound that sits exactly on `v` by one.
fn exclude_edge(a: &mut Scalar, v: u64, jmp32: bool) {
    if jmp32 {
        let v32 = v as u32;
        if a.u32min == v32 {
            a.u32min = a.u32min.wrapping_add(1);
            if a.u32min == 0 {
                a.u32min = u32::MAX; // was MAX: now empty
                a.u32max = 0;
            }
        }
        if a.u32max == v32 {
            a.u32max = a.u32max.wrapping_sub(1);
            if a.u32max == u32::MAX {
                a.u32min = u32::MAX;
                a.u32max = 0;
            }
        }
        let s = v32 as i32;
        if a.s32min == s {
            match a.s32min.checked_add(1) {
                Some(n) => a.s32min = n,
                None => (a.s32min, a.s32max) = (i32::MAX, i32::MIN),
            }
        }
        if a.s32max == s {
            match a.s32max.checked_sub(1) {
                Some(n) => a.s32max = n,
                None => (a.s32min, a.s32max) = (i32::MAX, i32::MIN),
            }
        }
    } else {
        if a.umin == v {
            match a.umin.checked_add(1) {
                Some(n) => a.umin = n,
                None => (a.umin, a.umax) = (u64::MAX, 0),
            }
        }
        if a.umax == v {
            match a.umax.checked_sub(1) {
                Some(n) => a.umax = n,
                None => (a.umin, a.umax) = (u64::MAX, 0),
            }
        }
        let s = v as i64;
        if a.smin == s {
            match a.smin.checked_add(1) {
                Some(n) => a.smin = n,
                None => (a.smin, a.smax) = (i64::MAX, i64::MIN),
            }
        }
        if a.smax == s {
            match a.smax.checked_sub(1) {
                Some(n) => a.smax = n,
                None => (a.smin, a.smax) = (i64::MAX, i64::MIN),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Cmp; 12] = [
        Cmp::Eq,
        Cmp::Ne,
        Cmp::Gt,
        Cmp::Ge,
        Cmp::Lt,
        Cmp::Le,
        Cmp::Sgt,
        Cmp::Sge,
        Cmp::Slt,
        Cmp::Sle,
        Cmp::Set,
        Cmp::NotSet,
    ];

    fn arb() -> impl Strategy<Value = (Scalar, u64)> {
        let x = prop_oneof![any::<u64>(), 0u64..40, (0u64..40).prop_map(|v| v.wrapping_neg())];
        (x, 0u64..50, 0u64..50, 0u8..4).prop_map(|(x, a, b, shape)| {
            let s = match shape {
                0 => Scalar::constant(x),
                1 => Scalar::urange(x.saturating_sub(a), x.saturating_add(b)),
                2 => Scalar::srange(
                    (x as i64).saturating_sub(a as i64),
                    (x as i64).saturating_add(b as i64),
                ),
                _ => Scalar::unknown(),
            };
            (s, x)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Both sides of every comparison keep the concrete values that take that side.
        #[test]
        fn refinement_is_sound((a, x) in arb(), (b, y) in arb(), ci in 0usize..12, jmp32: bool) {
            let cmp = ALL[ci];
            let holds = cmp.eval(x, y, jmp32);
            if let Some(t) = branch_taken(&a, &b, cmp, jmp32) {
                prop_assert_eq!(t, holds, "{:?} {:?} {:?}", a, cmp, b);
            }
            let side = if holds { cmp } else { cmp.negate() };
            let (mut ra, mut rb) = (a, b);
            let feasible = refine(&mut ra, &mut rb, side, jmp32);
            prop_assert!(feasible, "{:?} {:?} {:?} judged infeasible for {:#x},{:#x}", a, side, b, x, y);
            prop_assert!(ra.contains(x), "{:?} -> {:?} lost {:#x}", a, ra, x);
            prop_assert!(rb.contains(y), "{:?} -> {:?} lost {:#x}", b, rb, y);
        }
    }

    #[test]
    fn narrows_like_the_kernel() {
        let mut a = Scalar::unknown();
        let mut b = Scalar::constant(10);
        assert!(refine(&mut a, &mut b, Cmp::Lt, false));
        assert_eq!((a.umin, a.umax), (0, 9));
        let mut c = Scalar::urange(0, 10);
        let mut z = Scalar::constant(10);
        assert!(refine(&mut c, &mut z, Cmp::Ne, false));
        assert_eq!(c.umax, 9);
        let mut d = Scalar::constant(3);
        let mut e = Scalar::constant(3);
        assert!(!refine(&mut d, &mut e, Cmp::Ne, false));
        assert_eq!(
            branch_taken(&Scalar::urange(0, 9), &Scalar::constant(10), Cmp::Lt, false),
            Some(true)
        );
        let mut f = Scalar::unknown();
        let mut g = Scalar::constant(0x7);
        assert!(refine(&mut f, &mut g, Cmp::NotSet, false));
        assert!(f.t.is_aligned(8));
        let mut h = Scalar::unknown();
        let mut k = Scalar::constant(5);
        assert!(refine(&mut h, &mut k, Cmp::Slt, true));
        assert_eq!(h.s32max, 4);
    }
}
