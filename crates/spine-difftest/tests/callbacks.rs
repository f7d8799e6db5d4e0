//! `bpf_loop` and `bpf_for_each_map_elem` against the kernel (`tests/fixtures/callbacks.c`):
//! the helpers' return values (flags ⇒ `-EINVAL`, more than 2^23 loops ⇒ `-E2BIG`, a
//! callback returning 1 stops early), what the callbacks saw, nesting, and the maps the
//! callbacks changed, on both engines. Needs root (bpf(2)); without it each test says
//! SKIP loudly and passes.

mod common;

use common::{kernel_available, packet};
use spine_difftest::Pair;

fn object(program: &str) -> Vec<u8> {
    common::fixture("callbacks", program, &[])
}

/// Runs `pkts` through `program` on both engines and the kernel; every verdict, byte and
/// map must agree. Returns the verdict counts of the last engine.
fn check(program: &str, pkts: &[Vec<u8>], setup: impl Fn(&mut Pair)) -> [usize; 6] {
    common::check(&object(program), program, pkts, setup).0.verdicts
}

fn loop_probe(nr: u32, stop: u32, flags: u64) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&nr.to_le_bytes());
    v.extend_from_slice(&stop.to_le_bytes());
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&[0xa5; 24]);
    packet(&v, 8)
}

const XDP_DROP: usize = 1;
const XDP_PASS: usize = 2;
const XDP_TX: usize = 3;

#[test]
fn bpf_loop_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for nr in [0u32, 1, 2, 3, 7, 64, 1000, (1 << 23) - 1, 1 << 23, (1 << 23) + 1, u32::MAX] {
        for stop in [0u32, 1, 5, 999, 1 << 22, u32::MAX] {
            // The full 2^23 iterations once (2^23 without a stop); 2^23 - 1 stops early.
            if nr == (1 << 23) - 1 && stop == u32::MAX {
                continue;
            }
            pkts.push(loop_probe(nr, stop, 0));
        }
        for flags in [1u64, 2, 1 << 63] {
            pkts.push(loop_probe(nr, 0, flags));
        }
    }
    // The packet too short for the probe.
    pkts.push(packet(&[1, 2, 3], 0));
    let v = check("loop_flags", &pkts, |_| {});
    // -EINVAL and -E2BIG are drops; odd counts are XDP_TX, even ones XDP_PASS.
    assert!(v[XDP_DROP] >= 33, "flags and too many loops: {v:?}");
    assert!(v[XDP_TX] > 0 && v[XDP_PASS] > 0, "{v:?}");
}

#[test]
fn bpf_loop_inlined_by_the_kernel_matches() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    let wide = |nr: u64, stop: u32| {
        let mut v = Vec::new();
        v.extend_from_slice(&nr.to_le_bytes());
        v.extend_from_slice(&stop.to_le_bytes());
        v.extend_from_slice(&[0x5a; 28]);
        packet(&v, 0)
    };
    for nr in [0u64, 1, 9, 1 << 23, (1 << 23) + 1, 1 << 32, (1 << 32) + 3, u64::MAX] {
        for stop in [0u32, 4, 100] {
            pkts.push(wide(nr, stop));
        }
    }
    let v = check("loop_wide", &pkts, |_| {});
    // A count over 2^23, upper 32 bits included, is -E2BIG as the kernel's inlined loop
    // makes it: a 32-bit move, so r0 = 0xffff_fff9, positive as a `long` (the bytes
    // written back are compared above).
    assert_eq!(v[XDP_PASS], pkts.len(), "{v:?}");
}

#[test]
fn nested_bpf_loop_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let pkts: Vec<_> =
        (0..64u32).flat_map(|nr| [loop_probe(nr, nr / 2, 0), loop_probe(nr, 100, 0)]).collect();
    let v = check("loop_nested", &pkts, |_| {});
    assert_eq!(v[XDP_PASS], pkts.len());
}

#[test]
fn bpf_for_each_map_elem_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..400u32 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = (x % 97) as u32;
        let stop = match i % 4 {
            0 => (x >> 8) as u32 % 20,
            1 => u32::MAX,
            2 => 15,
            _ => (x >> 16) as u32 % 8,
        };
        let flags: u64 = if i % 50 == 7 { 1 } else { 0 };
        let value = (x >> 24) % 1000;
        let mut v = Vec::new();
        v.extend_from_slice(&key.to_le_bytes());
        v.extend_from_slice(&stop.to_le_bytes());
        v.extend_from_slice(&flags.to_le_bytes());
        v.extend_from_slice(&value.to_le_bytes());
        v.extend_from_slice(&[0xc3; 64]);
        pkts.push(packet(&v, 4));
    }
    let v = check("each", &pkts, |pair| {
        for k in 0..8u32 {
            pair.update("pcpu", &k.to_le_bytes(), &(u64::from(k) * 1000).to_le_bytes())
                .expect("pcpu");
        }
        for k in [3u32, 50, 51, 400] {
            pair.update("tab", &k.to_le_bytes(), &u64::from(k).to_le_bytes()).expect("tab");
        }
    });
    assert_eq!(v[XDP_DROP], 8, "flags ⇒ -EINVAL: {v:?}");
    assert!(v[XDP_TX] > 0 && v[XDP_PASS] > 0, "{v:?}");
}
