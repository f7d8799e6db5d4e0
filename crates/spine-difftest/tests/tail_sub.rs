//! Tail calls made from bpf-to-bpf callees against the kernel
//! (`tests/fixtures/tail_sub.c`): the target replaces only the callee's frame, so its
//! return value reaches the callee's caller, whose registers and stack are intact; the
//! count of 33 tail calls is shared by the whole chain (entry frame, callees, targets,
//! nested targets); a callee that tail-calls may run from a `bpf_loop` callback, a tail
//! call straight in a callback is refused. Verdicts, bytes and maps on both engines.
//! Needs root (bpf(2));
//! without it each test says SKIP loudly and passes.

mod common;

use common::{kernel_available, ENGINES};
use spine_difftest::Pair;

const XDP_DROP: usize = 1;
const XDP_PASS: usize = 2;
const XDP_TX: usize = 3;

fn object_with(program: &str, extra: &[&str]) -> Vec<u8> {
    common::fixture("tail_sub", program, extra)
}

/// An Ethernet header and the probe: jump slot, times, seed; room for the outputs.
fn probe(slot: u8, times: u8, seed: u32) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend_from_slice(&[slot, times, 0, 0]);
    p.extend_from_slice(&seed.to_le_bytes());
    p.extend_from_slice(&[0xee; 24]);
    p.extend_from_slice(&[0x11; 6]);
    p
}

/// Runs `pkts` through `program` on both engines and the kernel; every verdict, byte and
/// map must agree. Returns the verdict counts and the `trace` map of the last engine.
fn check(program: &str, pkts: &[Vec<u8>]) -> ([usize; 6], Vec<u64>) {
    let (report, pair) = common::check(&object_with(program, &[]), program, pkts, |_| {});
    (report.verdicts, pair.spine_map_u64("trace"))
}

fn slots_and_seeds() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for slot in [0u8, 1, 2, 3, 4, 7, 8, 200] {
        for seed in [0u32, 1, 0xdead_beef] {
            v.push(probe(slot, 1, seed));
        }
    }
    v.push(probe(0, 1, 5)[..20].to_vec());
    v
}

#[test]
fn tail_call_from_a_callee_returns_to_its_caller() {
    if !kernel_available() {
        return;
    }
    let pkts = slots_and_seeds();
    let (v, trace) = check("sub_tail", &pkts);
    // Slot 0's XDP_TX and slot 1's 7 came back through the callee; empty slots drop.
    assert!(v[XDP_TX] > 0 && v[XDP_DROP] > 0 && v[5] > 0, "{v:?}");
    assert_eq!(trace[0], (pkts.len() - 1) as u64, "the caller ran on after every call");
    assert!(trace[2] > 0 && trace[3] > 0 && trace[4] > 0, "{trace:?}");
}

#[test]
fn tail_call_from_a_nested_callee_replaces_only_its_frame() {
    if !kernel_available() {
        return;
    }
    let pkts = slots_and_seeds();
    let (v, trace) = check("nested", &pkts);
    assert_eq!(v[XDP_TX], pkts.len() - 1, "{v:?}");
    assert!(trace[1] > 0, "{trace:?}");
}

#[test]
fn tail_calls_from_callees_share_the_invocations_count() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for times in [0u8, 1, 2, 32, 33, 34, 40, 64] {
        for slot in [1u8, 2, 5] {
            pkts.push(probe(slot, times, 0));
        }
    }
    let (v, trace) = check("multi", &pkts);
    assert_eq!(v[XDP_PASS], pkts.len(), "{v:?}");
    // Slot 1 runs at most 33 times per packet: 0+1+2+32+33+33+33+33.
    assert_eq!(trace[3], 167, "{trace:?}");
}

#[test]
fn tail_calls_from_callees_loop_to_the_limit() {
    if !kernel_available() {
        return;
    }
    // One packet: the run counter is the map's, not the packet's.
    let (v, trace) = check("again", &[probe(0, 0, 0)]);
    assert_eq!(v[XDP_PASS], 1, "{v:?}");
    // 34 runs (the entry and 33 targets), each nested one deeper.
    assert_eq!(trace[5], 34, "{trace:?}");
    assert_eq!(trace[8 + 34], 103, "the innermost run's tail call failed");
    assert_eq!(trace[8 + 33], 2, "its XDP_PASS reached the run above");
    assert_eq!(trace[8 + 1], 2, "and every run above, up to the entry");
}

#[test]
fn a_tail_call_below_a_large_frame_is_refused_as_the_kernel_refuses_it() {
    if !kernel_available() {
        return;
    }
    // 200 bytes below the callee: both accept; 256 and more: both refuse at load.
    for (bytes, accepted) in [(200usize, true), (256, false), (400, false)] {
        let def = format!("-DBIG_STACK={bytes}");
        let object = object_with(&format!("big{bytes}"), &[&def]);
        let obj = spine_obj::parse(&object).expect("parse");
        let prog = obj.program(Some("big")).expect("big");
        let kernel = spine_sys::load_object_program(&obj, prog);
        assert_eq!(kernel.is_ok(), accepted, "kernel, {bytes} bytes: {:?}", kernel.err());
        for engine in ENGINES {
            let spine = Pair::load(&object, Some("big"), 0, engine);
            assert_eq!(spine.is_ok(), accepted, "spine ({engine:?}), {bytes} bytes");
            if let Err(e) = spine {
                assert!(e.to_string().contains("tail_calls are not allowed"), "{e}");
            }
        }
    }
}

#[test]
fn a_callee_tail_calls_from_a_loop_callback_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for times in [0u8, 1, 3, 7] {
        for slot in [0u8, 1, 2, 3, 5] {
            pkts.push(probe(slot, times, 0));
        }
    }
    let (v, trace) = check("looped", &pkts);
    assert_eq!(v[XDP_PASS], pkts.len(), "{v:?}");
    // Every round of every packet came back to the callback: 5 slots × (0+1+3+7).
    assert_eq!(trace[6], 55, "{trace:?}");
    assert!(trace[2] > 0 && trace[3] > 0, "the targets ran: {trace:?}");
}

#[test]
fn a_tail_call_straight_in_a_callback_is_refused_as_the_kernel_refuses_it() {
    if !kernel_available() {
        return;
    }
    let object = object_with("direct", &["-DDIRECT_IN_CALLBACK"]);
    let obj = spine_obj::parse(&object).expect("parse");
    let prog = obj.program(Some("direct")).expect("direct");
    assert!(spine_sys::load_object_program(&obj, prog).is_err(), "the kernel refuses it");
    for engine in ENGINES {
        let err = Pair::load(&object, Some("direct"), 0, engine).expect_err("spine refuses it");
        assert!(err.to_string().contains("tail call within a callback"), "{err}");
    }
}
