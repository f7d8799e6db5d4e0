//! Queue and stack maps against the kernel (`tests/fixtures/queue.c`): pushes, pops
//! and peeks driven by the packet on a queue of `u64` (4 entries) and a stack of
//! 12-byte values (3 entries): full (`-E2BIG`), empty (`-ENOENT`, the buffer zeroed),
//! `BPF_EXIST` dropping the oldest element, bad flags (`-EINVAL`), values from the
//! stack, the packet and an array value, and results into the stack and an array value.
//! Verdicts, bytes and maps (the next element and the counters) are compared after
//! every packet on both engines, and the elements left are drained and compared at the
//! end. The verifier's verdicts are compared too: a pop into the packet, and a push or
//! a pop on a `BPF_F_RDONLY_PROG` queue, are refused by both. Needs root (bpf(2)); without it each test says SKIP loudly and passes.

mod common;

use common::{kernel_available, packet, ENGINES};
use spine_difftest::Pair;

const XDP_DROP: usize = 1;
const XDP_PASS: usize = 2;
const XDP_TX: usize = 3;

/// `struct probe` of the fixture: op, map, where, flags, a 16-byte value, then room for
/// the result and the value read.
fn probe(op: u8, which: u8, whence: u8, flags: u64, value: [u8; 16]) -> Vec<u8> {
    let mut v = vec![op, which, whence, 0, 0, 0, 0, 0];
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&value);
    v.extend_from_slice(&[0xee; 24]);
    packet(&v, 4)
}

fn packets() -> Vec<Vec<u8>> {
    let mut pkts = Vec::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..480u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Runs of pushes and runs of pops, so both maps fill up and empty often.
        let phase = (i / 24) % 3;
        let op = match (phase, x % 10) {
            (0, 0..=6) | (1, 0..=2) => 0,
            (2, 0..=5) | (1, 3..=5) => 1,
            _ => 2,
        };
        let flags = match (x >> 8) % 16 {
            0..=8 => 0,
            9..=12 => 2,
            13 => 1,
            14 => 3,
            _ => 1 << 32 | 2,
        };
        let value: [u8; 16] = std::array::from_fn(|j| (x >> (j % 8 * 8)) as u8 ^ j as u8);
        pkts.push(probe(op, (x >> 16) as u8 & 1, (x >> 20) as u8 % 3, flags, value));
    }
    pkts.push(packet(&[1, 2, 3], 0));
    pkts
}

#[test]
fn queue_and_stack_helpers_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("queue", "ops", &[]);
    let pkts = packets();
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    for engine in ENGINES {
        let mut pair = Pair::load(&object, Some("queue_ops"), 0, engine).expect("load");
        let report = pair.run(&pkts, 5).expect("run");
        println!("queue_ops ({engine:?}): {report}");
        for m in &report.mismatches {
            println!("  {m}");
        }
        assert!(report.mismatches.is_empty(), "{engine:?}: spine and the kernel disagree");
        assert_eq!(report.packets, pkts.len());
        let v = report.verdicts;
        // Successes (TX), empty pops and peeks (PASS), full pushes and bad flags (DROP).
        assert!(v[XDP_TX] > 100 && v[XDP_PASS] > 20 && v[XDP_DROP] > 20, "{v:?}");
        // Per operation, map and outcome: every kind was seen.
        let counts = pair.spine_map_u64("results");
        for (slot, n) in counts.iter().enumerate().take(12) {
            assert!(*n > 0, "no packet exercised result slot {slot}: {counts:?}");
        }
        for map in ["fifo", "lifo"] {
            let (ours, theirs) = pair.drain(map).expect("drain");
            assert_eq!(ours, theirs, "{map} ({engine:?}): elements left");
        }
    }
}

#[test]
fn an_uninitialised_stack_buffer_is_filled_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("queue", "uninit", &[]);
    let pkts: Vec<_> = (0..40u64).map(|i| packet(&(i % 3).to_le_bytes(), 16)).collect();
    let (report, _) = common::check(&object, "queue_uninit", &pkts, |_| {});
    assert!(report.verdicts[XDP_TX] > 0 && report.verdicts[XDP_PASS] > 0, "{report}");
}

#[test]
fn a_pop_into_the_packet_is_refused_by_both() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("queue", "refused", &["-DPOP_TO_PACKET"]);
    let obj = spine_obj::parse(&object).expect("parse");
    let prog = obj.program(Some("queue_pop_to_packet")).expect("program");
    let kernel = spine_sys::load_object_program(&obj, prog);
    assert!(kernel.is_err(), "the kernel accepted a pop into the packet");
    for engine in ENGINES {
        let r = Pair::load(&object, Some("queue_pop_to_packet"), 0, engine);
        let e = r.expect_err("spine accepted a pop into the packet");
        assert!(e.to_string().contains("packet is not allowed"), "{engine:?}: {e}");
    }
    // The object's other programs still load on both sides.
    let ok = obj.program(Some("queue_ops")).expect("program");
    spine_sys::load_object_program(&obj, ok).expect("kernel loads queue_ops");
}

#[test]
fn a_read_only_queue_is_peeked_but_not_written_by_both() {
    if !kernel_available() {
        return;
    }
    for (n, program, accepted) in
        [(1, "ro_peek", true), (2, "ro_push", false), (3, "ro_pop", false)]
    {
        let object = common::fixture("queue", program, &[&format!("-DRO_PROG={n}")]);
        let obj = spine_obj::parse(&object).expect("parse");
        let prog = obj.program(Some(program)).expect("program");
        let kernel = spine_sys::load_object_program(&obj, prog);
        assert_eq!(kernel.is_ok(), accepted, "kernel on {program}");
        for engine in ENGINES {
            match Pair::load(&object, Some(program), 0, engine) {
                Ok(_) => assert!(accepted, "{engine:?}: spine accepted {program}"),
                Err(e) => {
                    assert!(!accepted, "{engine:?}: spine refused {program}: {e}");
                    assert!(e.to_string().contains("read-only map 'ro'"), "{e}");
                }
            }
        }
    }
}
