use super::*;
use proptest::prelude::*;

/// A scalar holding `x`, of one of several shapes (constant, ranges, partial tnum).
fn arb_scalar() -> impl Strategy<Value = (Scalar, u64)> {
    let x = prop_oneof![
        any::<u64>(),
        0u64..300,
        (0u64..300).prop_map(|v| v.wrapping_neg()),
        (0u64..0x1_0000_0010).prop_map(|v| v.wrapping_add(0xffff_fff0)),
    ];
    (x, any::<u64>(), any::<u64>(), any::<u64>(), 0u8..5).prop_map(|(x, a, b, m, shape)| {
        let s = match shape {
            0 => Scalar::constant(x),
            1 => Scalar::urange(x.saturating_sub(a % 1000), x.saturating_add(b % 1000)),
            2 => {
                let x = x as i64;
                Scalar::srange(
                    x.saturating_sub((a % 5000) as i64),
                    x.saturating_add((b % 5000) as i64),
                )
            }
            3 => {
                let mut s = Scalar::unknown();
                s.t = Tnum { value: x & !m, mask: m };
                s.synced()
            }
            _ => {
                let mut s = Scalar::urange(x.saturating_sub(a), x.saturating_add(b));
                let t = Tnum { value: x & !(m | 0xff), mask: m | 0xff };
                s.t = s.t.intersect(t).unwrap_or(s.t);
                s.synced()
            }
        };
        (s, x)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn shapes_hold_their_member((a, x) in arb_scalar()) {
        prop_assert!(a.contains(x), "{a:?} lost {x:#x}");
        prop_assert!(!a.is_empty());
    }

    #[test]
    fn ops_are_sound((a, x) in arb_scalar(), (b, y) in arb_scalar()) {
        let check = |name: &str, r: Scalar, v: u64| {
            assert!(r.contains(v), "{name}: {a:?} op {b:?} = {r:?} lacks {v:#x} (x={x:#x} y={y:#x})");
        };
        check("add", a.add(&b), x.wrapping_add(y));
        check("sub", a.sub(&b), x.wrapping_sub(y));
        check("mul", a.mul(&b), x.wrapping_mul(y));
        check("and", a.and(&b), x & y);
        check("or", a.or(&b), x | y);
        check("xor", a.xor(&b), x ^ y);
        check("lsh", a.lsh(&b), x << (y & 63));
        check("rsh", a.rsh(&b), x >> (y & 63));
        check("arsh", a.arsh(&b), ((x as i64) >> (y & 63)) as u64);
        check("udiv", a.udiv(&b), x.checked_div(y).unwrap_or(0));
        check("umod", a.umod(&b), x.checked_rem(y).unwrap_or(x));
        let (sx, sy) = (x as i64, y as i64);
        check("sdiv", a.sdiv(&b), if sy == 0 { 0 } else { sx.wrapping_div(sy) } as u64);
        check("smod", a.smod(&b), if sy == 0 { sx } else { sx.wrapping_rem(sy) } as u64);
        check("neg", a.neg(), x.wrapping_neg());
        check("swap16", a.swap_bytes(2), (x as u16).swap_bytes() as u64);
        check("swap32", a.swap_bytes(4), (x as u32).swap_bytes() as u64);
        check("swap64", a.swap_bytes(8), x.swap_bytes());
        check("trunc1", a.truncate(1), x as u8 as u64);
        check("trunc2", a.truncate(2), x as u16 as u64);
        check("trunc4", a.truncate(4), x as u32 as u64);
        check("sext8", a.sext(8), x as i8 as i64 as u64);
        check("sext16", a.sext(16), x as i16 as i64 as u64);
        check("sext32", a.sext(32), x as i32 as i64 as u64);
        let j = a.join(&b);
        check("join-x", j, x);
        check("join-y", j, y);
        prop_assert!(j.includes(&a) && j.includes(&b));
        let th = Thresholds::new([0, 4, 64, 1500, -1]);
        let w = a.widen(&j, &th);
        check("widen-x", w, x);
        check("widen-y", w, y);
        prop_assert!(w.includes(&j), "widen {w:?} must include {j:?}");
    }

    #[test]
    fn shifts_by_constants_are_sound((a, x) in arb_scalar(), s in 0u64..64) {
        let b = Scalar::constant(s);
        prop_assert!(a.lsh(&b).contains(x << s));
        prop_assert!(a.rsh(&b).contains(x >> s));
        prop_assert!(a.arsh(&b).contains(((x as i64) >> s) as u64));
    }

    #[test]
    fn small_constant_divisors((a, x) in arb_scalar(), c in -20i64..20) {
        let b = Scalar::constant(c as u64);
        let sx = x as i64;
        let q = if c == 0 { 0 } else { sx.wrapping_div(c) } as u64;
        prop_assert!(a.sdiv(&b).contains(q));
        let r = if c == 0 { sx } else { sx.wrapping_rem(c) } as u64;
        prop_assert!(a.smod(&b).contains(r));
        let cu = c as u64;
        prop_assert!(a.udiv(&b).contains(x.checked_div(cu).unwrap_or(0)));
        prop_assert!(a.umod(&b).contains(x.checked_rem(cu).unwrap_or(x)));
    }
}

#[test]
fn constants_fold() {
    let a = Scalar::constant(6);
    let b = Scalar::constant(4);
    assert_eq!(a.add(&b).const_value(), Some(10));
    assert_eq!(a.sub(&b).const_value(), Some(2));
    assert_eq!(b.sub(&a).const_value(), Some(u64::MAX - 1));
    assert_eq!(a.mul(&b).const_value(), Some(24));
    assert_eq!(a.and(&b).const_value(), Some(4));
    assert_eq!(a.udiv(&Scalar::constant(0)).const_value(), Some(0));
    assert_eq!(a.umod(&Scalar::constant(0)).const_value(), Some(6));
}

#[test]
fn ranges_track_masks_and_shifts() {
    let x = Scalar::unknown().and(&Scalar::constant(0xff));
    assert_eq!((x.umin, x.umax), (0, 0xff));
    assert_eq!((x.smin, x.smax), (0, 0xff));
    let y = x.lsh(&Scalar::constant(2));
    assert_eq!((y.umin, y.umax), (0, 0x3fc));
    assert!(y.t.is_aligned(4));
    let z = Scalar::unknown_bytes(1).mul(&Scalar::constant(4));
    assert_eq!(z.umax, 0x3fc);
}

#[test]
fn widening_jumps_to_thresholds() {
    let th = Thresholds::new([64]);
    let old = Scalar::constant(0);
    let new = old.join(&Scalar::constant(1));
    let w = old.widen(&new, &th);
    assert_eq!((w.umin, w.umax), (0, 63));
    let w2 = w.widen(&w.join(&Scalar::urange(0, 64)), &th);
    assert_eq!(w2.umax, 64);
    let w3 = w2.widen(&w2.join(&Scalar::urange(0, 65)), &th);
    assert_eq!(w3.umax, 65);
    // Past the last threshold the bound is limited only by the known tnum bits ...
    let w4 = w3.widen(&w3.join(&Scalar::urange(0, 66)), &th);
    assert_eq!(w4.umax, 127);
    // ... and once a higher bit changes, every bit above it becomes unknown.
    let w5 = w4.widen(&w4.join(&Scalar::urange(0, 128)), &th);
    assert!(w5.umax > 1 << 62, "{w5:?}");
}
