//! `bpf_timer` against the kernel (`tests/fixtures/timers.c`): every helper's return
//! code, in the kernel's order of checks, on fresh and on already initialised timers,
//! with good and bad clock ids and start flags: `-EINVAL` for a bad clock, `-EBUSY` for
//! a second init, `-EINVAL` for a start without a callback or with an unknown flag, 0
//! for cancelling an un-armed timer and 1 for an armed one, and what a cancel does to
//! the callback. On both engines; verdicts, bytes and the map must agree after every
//! packet (the kernel finds the timer through the object's BTF, loaded by spine-sys).
//! Needs root (bpf(2)); without it the test says SKIP loudly and passes.
//!
//! Timer callbacks never fire here: `BPF_PROG_TEST_RUN` cannot show when they run.

mod common;

use spine_runtime::LoadError;

use common::{kernel_available, packet};

/// Probes: element key, clock id (1 CLOCK_MONOTONIC, 0 REALTIME, 7 BOOTTIME, and
/// invalid ids); each element is run on several times.
fn packets() -> Vec<Vec<u8>> {
    let clocks = [1u8, 0, 7, 2, 5, 255];
    let mut pkts = Vec::new();
    for round in 0..3 {
        for (i, &clock) in clocks.iter().enumerate() {
            let key = ((i + round) % 4) as u8;
            pkts.push(packet(&[key, clock], 8));
        }
    }
    pkts.push(packet(&[1], 0));
    pkts
}

#[test]
fn timer_helpers_return_the_kernels_codes() {
    if !kernel_available() {
        return;
    }
    let obj = common::fixture("timers", "rcs", &[]);
    let pkts = packets();
    let (r, pair) = common::check(&obj, "xdp", &pkts, |_| {});
    assert_eq!(r.verdicts[0], 1, "the short probe aborted");
    let runs: u64 = pair.spine_map_u64("timers").iter().sum();
    assert_eq!(runs, pkts.len() as u64 - 1, "no callback ran: every probe counted once");
}

/// What the kernel and spine make of each program: accepted, or refused by the
/// verifier, as the kernel does.
#[test]
fn the_verifier_accepts_and_refuses_timer_programs_as_the_kernel_does() {
    if !kernel_available() {
        return;
    }
    let cases = [
        ("rcs", true),
        ("BAD_offset", false),
        ("BAD_map", false),
        ("BAD_touch", false),
        ("BAD_store", false),
        ("BAD_cb_ret", false),
        ("BAD_plain_field", false),
    ];
    for (program, accepted) in cases {
        let obj = common::fixture("timers", program, &[&format!("-DPROG_{program}")]);
        let obj = spine_obj::parse(&obj).expect("parses");
        let section = if accepted { "rcs" } else { "bad" };
        let prog = obj.programs.iter().find(|p| p.name == section).expect("the program");
        let kernel = spine_sys::load_object_program(&obj, prog);
        let opts = spine_runtime::LoadOptions {
            ncpus: spine_sys::possible_cpus(),
            ..spine_runtime::LoadOptions::default()
        };
        let spine = spine_runtime::load_selected(&obj, Some(section), &opts);
        let kernel_why = kernel.as_ref().map(drop).map_err(ToString::to_string);
        let spine_why = spine.as_ref().map(drop).map_err(ToString::to_string);
        println!("{program}: kernel {kernel_why:?}\n{program}: spine  {spine_why:?}");
        assert_eq!(kernel.is_ok(), accepted, "{program}: the kernel: {kernel_why:?}");
        assert_eq!(spine.is_ok(), accepted, "{program}: spine: {spine_why:?}");
        if !accepted {
            assert!(
                matches!(spine, Err(LoadError::Verify { .. })),
                "{program}: refused by the verifier: {spine_why:?}"
            );
        }
    }
}
