//! Bloom filter maps against the kernel (`tests/fixtures/bloom.c`): pushes and peeks
//! driven by the packet on a filter of 4-byte values (3 hash functions, `jhash2`) and
//! one of 6-byte values (the default 5, `jhash`), both with `BPF_F_ZERO_SEED` and small
//! enough to fill up, so that many peeks of values never pushed answer 0 (a false
//! positive) — spine must give the same answer for every one. Values from the stack,
//! the packet and an array value; bad flags (`-EINVAL`). Verdicts and bytes (the
//! helper's return value written into the packet) are compared after every packet on
//! both engines; then the filters are asked about 2,000 more values from user space
//! on both sides. The verifier's verdicts too: lookup, update, delete and pop on a
//! bloom filter are refused by both. Needs root (bpf(2)); without it each test says
//! SKIP loudly and passes.

mod common;

use common::{kernel_available, packet, ENGINES};
use spine_difftest::Pair;

const XDP_DROP: usize = 1;
const XDP_PASS: usize = 2;
const XDP_TX: usize = 3;

/// `struct probe` of the fixture: op, filter, where, flags, an 8-byte value, then room
/// for the result.
fn probe(op: u8, which: u8, whence: u8, flags: u64, value: [u8; 8]) -> Vec<u8> {
    let mut v = vec![op, which, whence, 0, 0, 0, 0, 0];
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&value);
    v.extend_from_slice(&[0xee; 8]);
    packet(&v, 4)
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn packets() -> Vec<Vec<u8>> {
    let mut pkts = Vec::new();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for i in 0..400u32 {
        let r = xorshift(&mut x);
        // Few pushes early, more later: the filters go from sparse to nearly full.
        let push = r % 10 < if i < 200 { 1 } else { 3 };
        let flags = match (r >> 8) % 16 {
            0 => 1,
            1 => 1 << 32,
            _ => 0,
        };
        let value = xorshift(&mut x).to_le_bytes();
        pkts.push(probe(u8::from(!push), (r >> 16) as u8 & 1, (r >> 20) as u8 % 3, flags, value));
    }
    pkts.push(packet(&[1, 2, 3], 0));
    pkts
}

#[test]
fn bloom_push_and_peek_match_the_kernel_false_positives_included() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("bloom", "ops", &[]);
    let pkts = packets();
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    for engine in ENGINES {
        let mut pair = Pair::load(&object, Some("bloom_ops"), 0, engine).expect("load");
        let report = pair.run(&pkts, 5).expect("run");
        println!("bloom_ops ({engine:?}): {report}");
        for m in &report.mismatches {
            println!("  {m}");
        }
        assert!(report.mismatches.is_empty(), "{engine:?}: spine and the kernel disagree");
        assert_eq!(report.packets, pkts.len());
        let v = report.verdicts;
        // Found (TX), absent (PASS), bad flags (DROP).
        assert!(v[XDP_TX] > 50 && v[XDP_PASS] > 50 && v[XDP_DROP] > 0, "{v:?}");
        let counts = pair.spine_map_u64("results");
        for (slot, n) in counts.iter().enumerate() {
            assert!(*n > 0, "no packet exercised result slot {slot}: {counts:?}");
        }
        // Every packet names a fresh 64-bit value, so a peek that answered 0 (slots 5
        // and 7: peek, found) was a false positive; the kernel gave each of them too.
        println!("bloom_ops ({engine:?}): in-program false positives {}, {}", counts[5], counts[7]);
        assert!(counts[5] > 10 && counts[7] > 10, "{counts:?}");
        // User space asks both sides about values the packets never named.
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut maybe = [0usize; 2];
        for (f, (name, size)) in [("words", 4usize), ("bytes6", 6)].into_iter().enumerate() {
            let ours = pair.spine_map(name).expect("spine filter").clone();
            let kernel = pair.kernel().maps.iter().find(|m| m.name() == name).expect("kernel");
            for _ in 0..1000 {
                let v = xorshift(&mut x).to_le_bytes()[..size].to_vec();
                let (mut a, mut b) = (v.clone(), v.clone());
                let theirs = kernel.lookup(&[], &mut a).expect("kernel peek");
                let mine = ours.lookup_user(&[], &mut b).is_ok();
                assert_eq!(mine, theirs, "{engine:?}: {name} on {v:02x?}");
                maybe[f] += usize::from(mine);
            }
        }
        println!(
            "bloom_ops ({engine:?}): user-side maybe answers of 1000 unnamed values: {maybe:?}"
        );
        // Both filters are full enough to answer "maybe" for many values never pushed,
        // and not so full that every answer is "maybe".
        for (f, n) in maybe.iter().enumerate() {
            assert!(*n > 20 && *n < 1000, "filter {f}: {n} of 1000 maybe");
        }
    }
}

#[test]
fn lookup_update_delete_and_pop_on_a_bloom_filter_are_refused_by_both() {
    if !kernel_available() {
        return;
    }
    for n in 1..=4 {
        let object = common::fixture("bloom", &format!("refused{n}"), &[&format!("-DREFUSED={n}")]);
        let obj = spine_obj::parse(&object).expect("parse");
        let prog = obj.program(Some("bloom_refused")).expect("program");
        assert!(spine_sys::load_object_program(&obj, prog).is_err(), "kernel accepted {n}");
        for engine in ENGINES {
            let e = Pair::load(&object, Some("bloom_refused"), 0, engine)
                .expect_err("spine accepted an operation the kernel refuses");
            assert!(e.to_string().contains("bloom_filter"), "{engine:?} {n}: {e}");
        }
        // The object's other program loads on both sides.
        let ok = obj.program(Some("bloom_ops")).expect("program");
        spine_sys::load_object_program(&obj, ok).expect("kernel loads bloom_ops");
        Pair::load(&object, Some("bloom_ops"), 0, ENGINES[0]).expect("spine loads bloom_ops");
    }
}
