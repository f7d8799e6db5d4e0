//! Scalars linked a constant apart (`r6 = r1; r6 += k`, the kernel's BPF_ADD_CONST):
//! clang compiles a range check `x < lo || x > hi` into `x - lo > hi - lo` on a copy,
//! and the kernel (6.10 on) carries what that check proves back to `x`. Each program
//! bounds a packet offset only through such a check.

mod common;

use common::*;
use spine_verifier::VerifyErrorKind as K;

/// r2 = data, 64 bytes proven; r1 = an unknown packet byte & 0x3f (0..63); r7 = another
/// packet byte to branch on.
const PROLOGUE: &str = "
         ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r4, %r2
         add %r4, 64
         jgt %r4, %r3, out
         ldxb %r1, [%r2+0]
         and %r1, 63
         ldxb %r7, [%r2+1]";

fn program(body: &str) -> String {
    format!(
        "{PROLOGUE}
{body}
         out: mov %r0, 2
         exit"
    )
}

fn refused(body: &str) -> K {
    match verify_src(&program(body)) {
        Ok(v) => panic!("accepted ({} insns processed):\n{}", v.insns_processed, program(body)),
        Err(e) => e.kind,
    }
}

#[test]
fn a_range_check_on_a_shifted_copy_bounds_the_original() {
    // 10 <= r1 <= 40 through r6 = r1 - 10 <= 30 (unsigned): data + r1 + 23 is inside
    // the 64 proven bytes, and r1 - 10 is no negative offset.
    accept(&program(
        "mov %r6, %r1
         add %r6, -10
         jgt %r6, 30, out
         mov %r8, %r2
         add %r2, %r1
         ldxb %r0, [%r2+23]
         mov %r9, %r1
         sub %r9, 10
         add %r8, %r9
         ldxb %r0, [%r8+33]
         exit",
    ));
    // The same with `sub`, and checked on the signed side.
    accept(&program(
        "mov %r6, %r1
         sub %r6, 10
         jsgt %r6, 30, out
         jslt %r6, 0, out
         add %r2, %r1
         ldxb %r0, [%r2+23]
         exit",
    ));
}

#[test]
fn the_bound_carried_back_is_exact() {
    // r1 <= 40: one byte further is past the proven 64.
    let k = refused(
        "mov %r6, %r1
         add %r6, -10
         jgt %r6, 30, out
         add %r2, %r1
         ldxb %r0, [%r2+24]
         exit",
    );
    assert!(matches!(k, K::PacketOutOfBounds { .. }), "{k:?}");
    // r1 >= 10: r1 - 11 may be negative, an offset no packet pointer may take.
    let k = refused(
        "mov %r6, %r1
         add %r6, -10
         jgt %r6, 30, out
         mov %r9, %r1
         sub %r9, 11
         add %r2, %r9
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(matches!(k, K::NegativeOffset { min: -1, .. }), "{k:?}");
}

#[test]
fn any_other_operation_breaks_the_link() {
    // A multiplication, a register operand or a 32-bit add: r6 is no longer r1 plus a
    // constant, and the check says nothing about r1 (0..63).
    for op in ["mul %r6, 1", "add %r6, %r7", "add32 %r6, 0"] {
        let k = refused(&format!(
            "mov %r6, %r1
             add %r6, -10
             {op}
             jgt %r6, 30, out
             add %r2, %r1
             ldxb %r0, [%r2+23]
             exit"
        ));
        assert!(matches!(k, K::PacketOutOfBounds { .. }), "{op}: {k:?}");
    }
}

#[test]
fn a_copy_linked_at_another_distance_is_not_pruned() {
    // Both paths meet at `join` with r6 linked to r1: 10 apart on the first (safe: r1
    // <= 40), 20 apart on the second (r1 <= 50, reads past the 64 bytes). Pruning the
    // second against the first would accept it.
    let k = refused(
        "mov %r6, %r1
         add %r6, -20
         jeq %r7, 1, join
         mov %r6, %r1
         add %r6, -10
         join: jgt %r6, 30, out
         add %r2, %r1
         ldxb %r0, [%r2+23]
         exit",
    );
    assert!(matches!(k, K::PacketOutOfBounds { .. }), "{k:?}");
}

#[test]
fn a_32_bit_copy_and_add_link_modulo_2_to_the_32() {
    // clang -mcpu=v3: `w6 = w1; w6 += -10; if w6 > 30`: r1 fits in 32 bits, so the copy
    // is r1 and the add is (r1 - 10) mod 2^32; the check bounds r1 to 10..40.
    accept(&program(
        "mov32 %r6, %r1
         add32 %r6, -10
         jgt32 %r6, 30, out
         add %r2, %r1
         ldxb %r0, [%r2+23]
         exit",
    ));
    let k = refused(
        "mov32 %r6, %r1
         add32 %r6, -10
         jgt32 %r6, 30, out
         add %r2, %r1
         ldxb %r0, [%r2+24]
         exit",
    );
    assert!(matches!(k, K::PacketOutOfBounds { .. }), "{k:?}");
}

#[test]
fn a_32_bit_link_wraps() {
    // r8 is any u32; (r8 + 1) mod 2^32 <= 64 leaves r8 = 0xffffffff possible, which a
    // 64-bit reading of the link (r8 = r6 - 1 in -1..63, then >= 0) would rule out.
    let k = refused(
        "ldxw %r8, [%r2+4]
         mov32 %r6, %r8
         add32 %r6, 1
         jgt %r6, 64, out
         jslt %r8, 0, out
         add %r2, %r8
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(!matches!(k, K::NegativeOffset { .. }), "{k:?}");
}
