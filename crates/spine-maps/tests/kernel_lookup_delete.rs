//! `BPF_MAP_LOOKUP_AND_DELETE_ELEM` on hash maps (plain, per-CPU, LRU, LRU per-CPU)
//! against the running kernel's: random sequences of updates, lookups,
//! lookup-and-deletes (flags 0, `BPF_F_LOCK` without a lock, and invalid ones) and
//! deletes replayed on both through bpf(2), comparing every errno and every value read
//! (every CPU's for per-CPU maps); then a frozen map, and `BPF_F_RDONLY` and
//! `BPF_F_WRONLY` maps (`EPERM`), and a type without the operation (`ENOTSUPP`). Needs
//! root; without bpf(2) each test says SKIP loudly and passes.

mod common;

use common::{kerr, require_bpf, serr};
use proptest::prelude::*;
use spine_abi::map_flags as mf;
use spine_abi::map_type::{ARRAY, HASH, LRU_HASH, LRU_PERCPU_HASH, PERCPU_HASH};
use spine_maps::{Map, MapDef, MapOptions};
use spine_sys::KernelMap;

fn kdef(d: &MapDef) -> spine_sys::MapDef {
    let mut k = spine_sys::MapDef::new(d.map_type, d.key_size, d.value_size, d.max_entries);
    k.flags = d.flags;
    k
}

fn opts() -> MapOptions {
    MapOptions { ncpus: spine_sys::possible_cpus(), seed: 7, ..MapOptions::default() }
}

/// 0, or the negative errno, `ENOENT` included, of a kernel read.
fn found(r: Result<bool, spine_sys::SysError>) -> i64 {
    match r {
        Ok(true) => 0,
        Ok(false) => -2,
        Err(e) => -i64::from(e.errno),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Update { key: u8, value: u8 },
    Lookup { key: u8 },
    LookupAndDelete { key: u8, flags: u64 },
    Delete { key: u8 },
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0u8..8;
    prop_oneof![
        4 => (key.clone(), any::<u8>()).prop_map(|(key, value)| Op::Update { key, value }),
        2 => key.clone().prop_map(|key| Op::Lookup { key }),
        4 => (key.clone(), prop_oneof![6 => Just(0u64), 1 => Just(4), 1 => Just(1), 1 => Just(8)])
            .prop_map(|(key, flags)| Op::LookupAndDelete { key, flags }),
        1 => key.prop_map(|key| Op::Delete { key }),
    ]
}

/// Replays `ops` on a fresh kernel map and spine map of type `t` (6-byte keys, 12-byte
/// values; room for every key, so no LRU eviction is involved).
fn replay(t: u32, ops: &[Op]) {
    let d = MapDef::new("h", t, 6, 12, 64, 0);
    let k = KernelMap::create("h", kdef(&d), None).expect("kernel map");
    let s = Map::create(d, &opts()).expect("spine map");
    let n = s.user_value_size();
    assert_eq!(n, k.user_value_size());
    let key = |b: u8| [b, 0, 0, b ^ 0x5a, 1, 2];
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Update { key: kb, value } => {
                let v: Vec<u8> = (0..n).map(|j| value.wrapping_add(j as u8)).collect();
                let (ke, se) =
                    (kerr(k.update(&key(kb), &v, 0)), serr(s.update_user(&key(kb), &v, 0)));
                assert_eq!(se, ke, "op {i} {op:?}");
            }
            Op::Lookup { key: kb } | Op::LookupAndDelete { key: kb, .. } => {
                let (mut kv, mut sv) = (vec![0xaa; n], vec![0xaa; n]);
                let (ke, se) = match *op {
                    Op::Lookup { .. } => {
                        (found(k.lookup(&key(kb), &mut kv)), serr(s.lookup_user(&key(kb), &mut sv)))
                    }
                    Op::LookupAndDelete { flags, .. } => (
                        found(k.lookup_and_delete(&key(kb), &mut kv, flags)),
                        serr(s.lookup_and_delete_user(&key(kb), &mut sv, flags)),
                    ),
                    _ => unreachable!("reads only"),
                };
                assert_eq!(se, ke, "op {i} {op:?}");
                if ke == 0 {
                    assert_eq!(sv, kv, "op {i} {op:?}: value");
                }
            }
            Op::Delete { key: kb } => {
                assert_eq!(
                    serr(s.delete_user(&key(kb))),
                    kerr(k.delete(&key(kb))),
                    "op {i} {op:?}"
                );
            }
        }
    }
    // What is left is the same set of keys.
    let mut left = Vec::new();
    for kb in 0..8u8 {
        let (mut kv, mut sv) = (vec![0; n], vec![0; n]);
        let ke = found(k.lookup(&key(kb), &mut kv));
        assert_eq!(serr(s.lookup_user(&key(kb), &mut sv)), ke, "key {kb} at the end");
        left.push(ke == 0);
    }
    assert_eq!(s.len(), left.iter().filter(|l| **l).count());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn hash_lookup_and_delete_sequences_match_the_kernel(
        t in prop_oneof![Just(HASH), Just(PERCPU_HASH), Just(LRU_HASH), Just(LRU_PERCPU_HASH)],
        ops in proptest::collection::vec(op(), 1..80),
    ) {
        if spine_sys::probe().is_err() {
            return Ok(());
        }
        replay(t, &ops);
    }
}

#[test]
fn frozen_one_way_and_unsupported_maps_refuse_as_the_kernel() {
    require_bpf!();
    for (t, flags, freeze) in [
        (HASH, 0, true),
        (LRU_HASH, 0, true),
        (HASH, mf::RDONLY, false),
        (HASH, mf::WRONLY, false),
        (PERCPU_HASH, mf::WRONLY, false),
        (ARRAY, 0, false),
    ] {
        let key_size = if t == ARRAY { 4 } else { 6 };
        let d = MapDef::new("h", t, key_size, 8, 16, flags);
        let k = KernelMap::create("h", kdef(&d), None).expect("kernel map");
        let s = Map::create(d, &opts()).expect("spine map");
        let key = vec![1u8; key_size as usize];
        let v = vec![3u8; s.user_value_size()];
        assert_eq!(serr(s.update_user(&key, &v, 0)), kerr(k.update(&key, &v, 0)), "{t} {flags:#x}");
        if freeze {
            k.freeze().unwrap();
            s.try_freeze().unwrap();
        }
        for f in [0, 4, 1] {
            let (mut kv, mut sv) = (vec![0u8; v.len()], vec![0u8; v.len()]);
            let ke = found(k.lookup_and_delete(&key, &mut kv, f));
            assert_eq!(serr(s.lookup_and_delete_user(&key, &mut sv, f)), ke, "{t} {flags:#x} {f}");
        }
    }
}
