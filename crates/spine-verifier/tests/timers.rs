//! `bpf_timer`: programs the verifier accepts (the kernel's idioms: init, set the
//! callback, start, cancel; a callback that re-arms its own timer) and what it proves
//! about the callback. Refusals are in the attack corpus (`attacks/timer_*.s`).

mod common;

use common::{accept, verify_src};
use spine_verifier::VerifyErrorKind as K;

/// Looks up key 0 of `map[N]` into r6 (jumps to `out` when missing).
fn lookup(map: usize) -> String {
    format!(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[{map}]
         call 1
         jeq %r0, 0, out
         mov %r6, %r0\n"
    )
}

/// `lddw %r2, <callback>` with the callback `imm` instructions after the lddw's second
/// half.
fn func(imm: u32) -> String {
    format!(".insn 0x{imm:08x}00004218\n.insn 0\n")
}

#[test]
fn init_set_callback_start_cancel_on_an_array_value() {
    // pc: lookup 0..=7; init 8..=13; set_callback 14..=18; start 19..=23; cancel 24..=26;
    // out 27, exit 28; cb 29.
    let src = format!(
        "{}
         mov %r1, %r6
         add %r1, 8
         lddw %r2, map[{t}]
         mov %r3, 1
         call 169
         mov %r1, %r6
         add %r1, 8
         {}call 170
         mov %r1, %r6
         add %r1, 8
         mov %r2, 1000
         mov %r3, 0
         call 171
         mov %r1, %r6
         add %r1, 8
         call 172
         out: mov %r0, 2
         exit
         cb: ldxw %r4, [%r2+0]
         ldxdw %r5, [%r3+0]
         add %r5, %r4
         stxdw [%r3+0], %r5
         ldxdw %r5, [%r3+24]
         mov %r1, %r3
         add %r1, 8
         mov %r2, 5000
         mov %r3, 0
         call 171
         mov %r0, 0
         exit",
        lookup(common::TIMERS),
        func(29 - 17),
        t = common::TIMERS,
    );
    accept(&src);
}

#[test]
fn a_timer_in_a_hash_value_at_offset_zero() {
    // lookup 0..=7; init 8..=12; set_callback 13..=16; out 17; exit 18; cb 19.
    let src = format!(
        "{}
         mov %r1, %r6
         lddw %r2, map[{t}]
         mov %r3, 1
         call 169
         mov %r1, %r6
         {}call 170
         out: mov %r0, 2
         exit
         cb: ldxdw %r4, [%r3+16]
         add %r4, 1
         stxdw [%r3+16], %r4
         mov %r0, 0
         exit",
        lookup(common::TIMER_HASH),
        func(19 - 15),
        t = common::TIMER_HASH,
    );
    accept(&src);
}

/// The callback's value argument is the timer's map's value: its timer field is
/// as untouchable there as through a lookup.
#[test]
fn the_callback_may_not_touch_its_own_timer_field() {
    let src = format!(
        "{}
         mov %r1, %r6
         add %r1, 8
         {}call 170
         out: mov %r0, 2
         exit
         cb: stdw [%r3+8], 0
         mov %r0, 0
         exit",
        lookup(common::TIMERS),
        func(15 - 11),
    );
    let e = verify_src(&src).expect_err("the timer field is not the program's");
    assert!(matches!(e.kind, K::TimerAccess { at: 8, .. }), "{e}");
}

/// The callback may not hold a lock, a reference, or any pointer of its setter: it
/// starts from nothing but its three arguments.
#[test]
fn the_callback_starts_from_its_arguments_alone() {
    let src = format!(
        "{}
         mov %r7, %r6
         mov %r1, %r6
         add %r1, 8
         {}call 170
         out: mov %r0, 2
         exit
         cb: ldxdw %r0, [%r7+0]
         mov %r0, 0
         exit",
        lookup(common::TIMERS),
        func(16 - 12),
    );
    let e = verify_src(&src).expect_err("r7 is not the callback's");
    assert!(matches!(e.kind, K::UninitRegister { reg: 7 }), "{e}");
}

/// A timer in an inner map's value is refused: the runtime reaches timers in the
/// program's own maps only (the kernel allows them).
#[test]
fn a_timer_in_an_inner_maps_value_is_refused() {
    use spine_abi::map_type as mt;
    use spine_verifier::{verify, xdp_ctx, KernelHelpers, Limits, MapInfo, VerifyEnv};
    let mut inner = MapInfo::new("inner", mt::ARRAY, 4, 24, 4);
    inner.timer = Some(8);
    let mut outer = MapInfo::new("outer", mt::ARRAY_OF_MAPS, 4, 4, 4);
    outer.inner = Some(Box::new(inner));
    let maps = [outer];
    let insns = common::asm(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[0]
         call 1
         jeq %r0, 0, out
         mov %r1, %r0
         mov %r2, %r10
         add %r2, -4
         call 1
         jeq %r0, 0, out
         mov %r1, %r0
         add %r1, 8
         call 172
         out: mov %r0, 2
         exit",
    );
    let ctx = xdp_ctx();
    let helpers = KernelHelpers::xdp();
    let env = VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &maps,
        limits: Limits::default(),
        log_level: 0,
    };
    let e = verify(&insns, &env).expect_err("an inner map's timer");
    assert!(matches!(e.kind, K::HelperArgType { helper: 172, reg: 1, .. }), "{e}");
}
