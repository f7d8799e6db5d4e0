//! Readers hammer lookups while the writer replays the IPv4 mutation trace in batches;
//! every answer must be one a single published version could give.
//!
//! A value is `version << 20 | h20(prefix)`. Each batch of the trace is applied with
//! its batch number as version, together with a set of canary prefixes at several
//! depths (and in several direct-index regions), all set to the version, then
//! published once. A reader, holding one copy, checks that
//! - every canary reports the same version `V` (a batch is never half visible),
//! - `V` never goes backwards between its loads,
//! - every answer for a random address has a version at most `V`, and its `h20` is the
//!   hash of a prefix that covers the address (no answer from a reused or foreign node).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::Arc;

use common::Rng;
use spine_fib::parse::ris::Mutation;
use spine_fib::publish::{LpmOp, Writer};
use spine_fib::{IpPrefix, Lpm, Lpm4, Prefix, Prefix4};

const BATCH: usize = 500;
const OPS: usize = 150_000;

fn h20(p: Prefix4) -> u32 {
    ((u64::from(p.addr()) ^ u64::from(p.len())).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 44) as u32
}

fn value(version: u32, p: Prefix4) -> u32 {
    version << 20 | h20(p)
}

/// Canaries in 240.0.0.0/4 (never announced): nested, and spread over regions.
fn canaries() -> Vec<(Prefix4, u32)> {
    let specs = [
        ("240.0.0.0/8", 0xf0ff_0000u32),
        ("240.0.0.0/16", 0xf000_ff00),
        ("240.0.0.0/24", 0xf000_00ff),
        ("240.0.0.0/32", 0xf000_0000),
        ("241.2.3.0/25", 0xf102_0301),
        ("250.0.0.0/12", 0xfa0f_0000),
        ("255.255.255.254/31", 0xffff_fffe),
    ];
    specs.iter().map(|(p, probe)| (p.parse().unwrap(), *probe)).collect()
}

#[test]
fn readers_see_whole_batches_while_the_trace_replays() {
    if common::routes_dir().is_none() {
        return;
    }
    let table: Vec<Prefix4> = common::table(common::V4_TABLE)
        .into_iter()
        .filter_map(|p| Prefix4::try_from(p).ok())
        .collect();
    let trace: Vec<(bool, Prefix4)> = common::trace(common::V4_TRACE)
        .into_iter()
        .take(OPS)
        .filter_map(|m| match m {
            Mutation::Announce(IpPrefix::V4(p)) => Some((true, p)),
            Mutation::Withdraw(IpPrefix::V4(p)) => Some((false, p)),
            _ => None,
        })
        .collect();
    let canaries = canaries();
    let mut initial = Lpm4::new();
    initial
        .extend(
            table
                .iter()
                .map(|&p| (p, value(0, p)))
                .chain(canaries.iter().map(|&(c, _)| (c, value(0, c)))),
        )
        .unwrap();
    let (mut w, r) = Writer::<Lpm4, LpmOp<u32>>::new(initial);
    let done = Arc::new(AtomicBool::new(false));
    let checked = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|seed| {
            let (r, done, checked, canaries) =
                (r.clone(), done.clone(), checked.clone(), canaries.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(0x1234 + seed);
                let mut last = 0;
                let mut loads = 0u64;
                while !done.load(Relaxed) || loads < 10 {
                    let g = r.load();
                    let v = g.lookup(canaries[0].1).unwrap() >> 20;
                    for &(c, probe) in &canaries {
                        let got = g.lookup(probe).unwrap();
                        assert_eq!(got, value(v, c), "canary {c} in version {v}: torn batch");
                    }
                    assert!(v >= last, "version went back from {last} to {v}");
                    last = v;
                    for _ in 0..256 {
                        let a = rng.next() as u32;
                        if let Some(x) = g.lookup(a) {
                            assert!(
                                x >> 20 <= v,
                                "{a:#x}: version {} from the future of {v}",
                                x >> 20
                            );
                            let h = x & 0xf_ffff;
                            let covers =
                                (0..=32).any(|l| h20(Prefix::truncating(a, l).unwrap()) == h);
                            assert!(covers, "{a:#x}: answer {x:#x} is no prefix covering it");
                        }
                    }
                    drop(g);
                    loads += 1;
                }
                checked.fetch_add(loads, Relaxed);
                last
            })
        })
        .collect();
    let mut version = 0;
    for batch in trace.chunks(BATCH) {
        version += 1;
        for &(ann, p) in batch {
            let op = if ann { LpmOp::Insert(p, value(version, p)) } else { LpmOp::Remove(p) };
            w.apply(op).unwrap();
        }
        for &(c, _) in &canaries {
            w.apply(LpmOp::Insert(c, value(version, c))).unwrap();
        }
        w.publish();
    }
    done.store(true, Relaxed);
    for t in readers {
        let last = t.join().expect("a reader found an inconsistent answer");
        assert!(last <= version);
    }
    assert!(checked.load(Relaxed) >= 20);
    // The writer's two copies converged on the final state.
    let g = r.load();
    let v = w.view();
    for &(_, p) in trace.iter().rev().take(1000) {
        assert_eq!(g.get(p), v.get(p));
        assert_eq!(g.lookup(p.addr()), v.lookup(p.addr()));
    }
}
