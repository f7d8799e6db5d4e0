//! Precision marks: a cached state prunes a new one when they differ only in numbers
//! that the cached state's explored future never depended on, and never otherwise.
//!
//! Each refusal below has two paths meeting at a prune point; the first one explored
//! (the fall-through) is safe and gets cached, the second differs in a number that
//! later decides safety. Pruning the second against the first would accept an
//! unsafe program: the number must have been marked precise, through whatever carried
//! it (registers, stack spills, call frames, a comparison's other operand).

mod common;

use common::*;
use spine_verifier::VerifyErrorKind as K;

/// The packet prologue: r2 = data, r3 = data_end, 64 bytes proven; `r5` an unknown
/// packet byte to branch on.
const PROLOGUE: &str = "
         ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r4, %r2
         add %r4, 64
         jgt %r4, %r3, out
         ldxb %r5, [%r2+0]";

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

fn is_packet_oob(k: &K) -> bool {
    matches!(k, K::PacketOutOfBounds { .. })
}

#[test]
fn offset_constants_that_differ_at_a_prune_point_are_compared() {
    // Safe first: r6 = 4, cached at `join`; then r6 = 100 arrives there.
    let k = refused(
        "mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: mov %r0, 0
         add %r2, %r6
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn precision_follows_a_value_through_a_stack_spill() {
    let k = refused(
        "mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: stxdw [%r10-16], %r6
         mov %r6, 0
         ldxdw %r7, [%r10-16]
         jeq %r5, 7, use
         use: add %r2, %r7
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn precision_follows_a_spill_made_before_the_prune_point() {
    let k = refused(
        "mov %r6, 100
         jeq %r5, 1, set
         mov %r6, 4
         set: stxdw [%r10-8], %r6
         mov %r6, 0
         jeq %r5, 9, join
         join: ldxdw %r7, [%r10-8]
         add %r2, %r7
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn precision_follows_an_argument_into_a_callee() {
    let src = format!(
        "{PROLOGUE}
         mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: mov %r1, %r2
         mov %r2, %r6
         call local f
         out: mov %r0, 2
         exit
         f: add %r1, %r2
         ldxb %r0, [%r1+0]
         exit"
    );
    let k = verify_src(&src).expect_err("r6 = 100 reads past the proven 64 bytes").kind;
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn precision_follows_a_callee_return_value() {
    let src = format!(
        "{PROLOGUE}
         mov %r6, %r2
         mov %r1, 100
         jeq %r5, 1, join
         mov %r1, 4
         join: call local f
         add %r6, %r0
         ldxb %r0, [%r6+0]
         out: mov %r0, 2
         exit
         f: mov %r0, %r1
         exit"
    );
    let k = verify_src(&src).expect_err("r0 = 100 reads past the proven 64 bytes").kind;
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn a_branch_ruled_out_by_a_value_makes_it_precise() {
    // With r6 = 4 the unsafe side of `jgt %r6, 10` is never taken; with 100 it is.
    let k = refused(
        "mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: jgt %r6, 10, bad
         mov %r0, 0
         exit
         bad: ldxb %r0, [%r2+200]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn a_comparison_carries_precision_to_its_other_operand() {
    // `r9 < r6` bounds r9 by r6; r9 then moves a pointer, so r6 matters too.
    let k = refused(
        "ldxb %r9, [%r2+1]
         mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: jge %r9, %r6, out
         add %r2, %r9
         ldxb %r0, [%r2+60]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn a_link_between_scalars_must_hold_in_the_pruned_state() {
    // First path: r7 is a copy of r6, so `jgt %r7, 10` bounds r6. Second: r7 is
    // another byte and bounds nothing.
    let k = refused(
        "ldxb %r6, [%r2+1]
         ldxb %r7, [%r2+2]
         jeq %r5, 1, join
         mov %r7, %r6
         join: jgt %r7, 10, out
         add %r2, %r6
         ldxb %r0, [%r2+50]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn a_helper_size_argument_is_precise() {
    // bpf_csum_diff(from = fp-8, from_size = r6, NULL, 0, 0): 4 fits, 100 does not.
    let k = refused(
        "stdw [%r10-8], 0
         mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: mov %r1, %r10
         add %r1, -8
         mov %r2, %r6
         mov %r3, 0
         mov %r4, 0
         mov %r5, 0
         call 28
         exit",
    );
    assert!(matches!(k, K::StackOutOfBounds { .. } | K::UninitStack { .. }), "{k:?}");
}

/// `n` diamonds, each storing 1 or 2 in a stack slot of its own; at the end each slot
/// is compared with an unknown number, both outcomes possible, and nothing depends on
/// the result. The slots' values never matter, so the second side of each diamond is
/// pruned where they meet; comparing them would explore 2^n paths.
fn diamonds(n: usize) -> String {
    let mut s = String::from(PROLOGUE);
    for k in 1..=n {
        s.push_str(&format!(
            "
         stdw [%r10-{o}], 1
         jeq %r5, {k}, d{k}
         stdw [%r10-{o}], 2
         d{k}: mov %r0, 0",
            o = 8 * k
        ));
    }
    s.push_str("\n         ldxb %r9, [%r2+1]");
    for k in 1..=n {
        s.push_str(&format!(
            "
         ldxdw %r0, [%r10-{o}]
         jgt %r0, %r9, e{k}
         mov %r0, 0
         e{k}: mov %r0, 1",
            o = 8 * k
        ));
    }
    s.push_str("\n         out: mov %r0, 2\n         exit");
    s
}

#[test]
fn numbers_no_check_depends_on_do_not_multiply_states() {
    let v = accept(&diamonds(10));
    // Every diamond explored once per side: ~8 instructions each, and the tail
    // (40 instructions) a few times; 2^10 paths would be over 50,000 instructions.
    eprintln!("{} instructions processed, peak {} states", v.insns_processed, v.peak_states);
    assert!(v.insns_processed < 2_000, "{} instructions processed", v.insns_processed);
}

#[test]
fn an_imprecise_value_still_refuses_when_it_turns_out_to_matter_later() {
    // The diamonds' slots stay imprecise for the first full path; then the last slot
    // moves a pointer: every diamond must keep both of its values apart.
    let mut src = diamonds(4);
    src = src.replace(
        "\n         out: mov %r0, 2",
        "
         ldxdw %r8, [%r10-32]
         mov %r7, 2
         sub %r7, %r8
         lsh %r7, 6
         add %r2, %r7
         ldxb %r0, [%r2+0]
         exit
         out: mov %r0, 2",
    );
    let k = verify_src(&src).expect_err("slot 4 = 1 moves the pointer 64 bytes").kind;
    assert!(is_packet_oob(&k), "{k:?}");
}

/// A running sum of `n` packet bytes, tested after each addition (`if sum > 1000`, both
/// outcomes possible) and bumped on one side: the two sides meet with different ranges
/// for the sum. Nothing depends on the sum's value, so the second side is pruned each
/// time. Before precision marks the comparison alone kept the ranges apart and the
/// states at each meeting point grew with the number of tests (n = 16: 415
/// instructions processed, 95 states; now 103 and 17).
fn running_sum(n: usize) -> String {
    let mut s = String::from(
        "ldxw %r6, [%r1+0]
         ldxw %r7, [%r1+4]
         mov %r2, %r6
         add %r2, 64
         jgt %r2, %r7, out
         mov %r9, 0",
    );
    for k in 0..n {
        s.push_str(&format!(
            "
         ldxb %r3, [%r6+{o}]
         add %r9, %r3
         jsgt %r9, 1000, s{k}
         add %r9, 1
         s{k}: mov %r0, 0",
            o = k % 60
        ));
    }
    s.push_str(
        "
         ldxb %r0, [%r6+0]
         out: mov %r0, 2
         exit",
    );
    s
}

#[test]
fn a_comparison_with_both_outcomes_possible_does_not_keep_states_apart() {
    for n in [16, 48] {
        let v = accept(&running_sum(n));
        // Each test explored once per side: 5 instructions, plus the prologue.
        assert!(
            v.insns_processed < 7 * n as u64 + 20,
            "n = {n}: {} instructions processed, {} states",
            v.insns_processed,
            v.peak_states
        );
    }
}

#[test]
fn a_value_carried_through_a_loop_head_is_precise() {
    // The loop head keeps joined states and compares them whole; the use after the
    // loop is explored from the joined state. The path that brought r6 = 4 to the
    // head must have marked it, or r6 = 100 would be pruned at `join`.
    let k = refused(
        "mov %r6, 100
         jeq %r5, 1, join
         mov %r6, 4
         join: mov %r7, 0
         loop: add %r7, 1
         jlt %r7, 3, loop
         add %r2, %r6
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn a_callback_return_value_is_precise() {
    // bpf_loop(1, cb, &slot, 0): the callback returns the slot's value, which must be
    // 0 or 1; the first path stores 1, the second 7.
    let src = format!(
        "{PROLOGUE}
         mov %r6, 7
         jeq %r5, 1, join
         mov %r6, 1
         join: stxdw [%r10-8], %r6
         mov %r1, 1
         .insn 0x0000000700004218
         .insn 0
         mov %r3, %r10
         add %r3, -8
         mov %r4, 0
         call 181
         out: mov %r0, 2
         exit
         cb: ldxdw %r0, [%r2+0]
         exit"
    );
    let k = verify_src(&src).expect_err("the callback may return 7").kind;
    assert!(matches!(k, K::CallbackReturn { .. }), "{k:?}");
}

#[test]
fn a_state_still_being_explored_does_not_prune() {
    // In the loop, `p` is first cached with r6 = 4 while its taken side (`use`, where
    // r6 moves a pointer) is still pending. The next iteration arrives with r6 up to
    // 100; that state may not be pruned by the cached one, whose marks do not yet say
    // that r6 matters. (Each iteration reads a new byte into r5: with r5 the same in
    // every iteration, `use` could never see r6 = 100, and a verifier that unrolls
    // the loop rightly accepts.)
    let k = refused(
        "mov %r6, 4
         head: mov %r0, 0
         ldxb %r5, [%r2+1]
         jeq %r5, 200, p
         p: jeq %r5, 1, use
         mov %r6, 100
         jeq %r5, 2, head
         exit
         use: add %r2, %r6
         ldxb %r0, [%r2+0]
         exit",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}

#[test]
fn histories_copied_to_pending_paths_count_against_the_memory_limit() {
    // 3,000 branches to one far target, no prune point between them: each pending
    // side carries the history since the last cached state, which grows with every
    // branch (4.5 M entries, ~72 MB, in all). Within the default bound it verifies;
    // under a 16 MB bound the copies are what exceeds it (the 3,000 states alone take
    // ~5 MB).
    let mut s = String::from("ldxw %r2, [%r1+0]\nldxw %r3, [%r1+4]\n");
    s.push_str("mov %r4, %r2\nadd %r4, 8\njgt %r4, %r3, end\nldxdw %r5, [%r2+0]\n");
    for k in 0..3000 {
        s.push_str(&format!("jeq %r5, {k}, end\n"));
    }
    s.push_str("end: mov %r0, 2\nexit\n");
    let insns = asm(&s);
    verify_insns(&insns).expect("verifies within the default bounds");
    let ctx = spine_verifier::xdp_ctx();
    let maps = maps();
    let helpers = spine_verifier::KernelHelpers::xdp();
    let limits = spine_verifier::Limits { max_state_bytes: 16 << 20, ..Default::default() };
    let env = spine_verifier::VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &maps,
        limits,
        log_level: 0,
    };
    match spine_verifier::verify(&insns, &env) {
        Ok(v) => panic!("verified with {} insns processed", v.insns_processed),
        Err(e) => assert!(matches!(e.kind, K::TooComplex { .. }), "{:?}", e.kind),
    }
}

#[test]
fn a_loop_iteration_stopped_by_an_earlier_one_marks_what_it_holds() {
    // The loop is unrolled: the first path comes back to `head` with r6 = 0, a state
    // the first iteration's (still being explored) includes, and stops there. `x` was
    // cached on the way, and its only continuations have finished: the one that
    // stopped must have marked r6 in it, or the taken side of `jeq` (r6 = 100, which
    // the next iteration adds to the packet pointer) would be pruned at `x`.
    let k = refused(
        "mov %r6, 0
         head: mov %r7, %r2
         add %r7, %r6
         ldxb %r0, [%r7+0]
         ldxb %r5, [%r2+1]
         jeq %r5, 7, bad
         mov %r6, 0
         x: ldxb %r5, [%r2+2]
         jne %r5, 0, head
         exit
         bad: mov %r6, 100
         ja x",
    );
    assert!(is_packet_oob(&k), "{k:?}");
}
