//! spine's bloom filter against the running kernel's: creation errnos (`map_extra`
//! included, on bloom filters and on other types), and user-side pushes (update with
//! no key) and peeks (lookup with the value as the question) replayed on both through
//! bpf(2) with `BPF_F_ZERO_SEED`, comparing every answer, false positives included;
//! delete, get-next-key and lookup-and-delete errnos too. Needs root; without bpf(2)
//! each test says SKIP loudly and passes.

mod common;

use common::{kerr, require_bpf, serr};
use spine_abi::map_flags as mf;
use spine_abi::map_type::{BLOOM_FILTER, HASH, QUEUE};
use spine_maps::{Map, MapDef, MapOptions};
use spine_sys::KernelMap;

fn kdef(d: &MapDef) -> spine_sys::MapDef {
    let mut k = spine_sys::MapDef::new(d.map_type, d.key_size, d.value_size, d.max_entries);
    k.flags = d.flags;
    k.map_extra = d.map_extra;
    k
}

fn def(k: u32, v: u32, n: u32, f: u32, extra: u64) -> MapDef {
    MapDef::new("b", BLOOM_FILTER, k, v, n, f).with_map_extra(extra)
}

#[test]
fn bloom_creation_errnos_match_the_kernel() {
    require_bpf!();
    let rows = [
        def(0, 4, 8, 0, 0),
        def(0, 1, 1, 0, 3),
        def(0, 13, 100, mf::ZERO_SEED | mf::NUMA_NODE, 15),
        def(0, 4, 8, 0, 16),
        def(0, 4, 8, 0, 1 << 40),
        def(4, 4, 8, 0, 0),
        def(0, 0, 8, 0, 0),
        def(0, 4, 0, 0, 0),
        def(4, (4 << 20) + 1, 0, 0, 0),
        def(0, 4, 8, mf::RDONLY, 0),
        def(0, 4, 8, mf::WRONLY, 0),
        def(0, 4, 8, mf::RDONLY | mf::WRONLY, 0),
        def(0, 4, 8, mf::RDONLY_PROG, 0),
        def(0, 4, 8, mf::RDONLY_PROG | mf::WRONLY_PROG, 0),
        def(0, 4, 8, mf::NO_PREALLOC, 0),
        def(0, 4, 8, mf::MMAPABLE, 0),
        def(0, 4, 8, mf::INNER_MAP, 0),
        // map_extra on other types.
        MapDef::new("h", HASH, 4, 4, 8, 0).with_map_extra(5),
        MapDef::new("q", QUEUE, 0, 4, 8, 0).with_map_extra(1),
    ];
    for d in rows {
        let k = KernelMap::create("b", kdef(&d), None);
        let s = Map::create(d.clone(), &MapOptions::default());
        assert_eq!(serr(s), kerr(k), "{d:?}");
    }
}

/// 0 or the negative errno of a kernel peek.
fn found(r: Result<bool, spine_sys::SysError>) -> i64 {
    match r {
        Ok(true) => 0,
        Ok(false) => -2,
        Err(e) => -i64::from(e.errno),
    }
}

/// Pushes every other value of a pseudo-random sequence into small filters (so they
/// fill up and answer falsely often) and peeks every value, on both sides.
#[test]
fn pushes_and_peeks_give_the_kernels_answers_false_positives_included() {
    require_bpf!();
    let mut false_positives = 0;
    for (value_size, max, extra) in [(4u32, 16u32, 0u64), (6, 8, 3), (8, 64, 1), (13, 4, 15)] {
        let d = def(0, value_size, max, mf::ZERO_SEED, extra);
        let k = KernelMap::create("b", kdef(&d), None).expect("kernel map");
        // A seed that must be ignored.
        let opts = MapOptions { seed: 0x1234_5678, ..MapOptions::default() };
        let s = Map::create(d.clone(), &opts).expect("spine map");
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(value_size);
        let mut pushed = Vec::new();
        for i in 0..400 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v: Vec<u8> = (0..value_size as usize).map(|j| (x >> (j % 8 * 8)) as u8).collect();
            if i % 2 == 0 && pushed.len() < 3 * max as usize {
                let flags = if i % 14 == 0 { 2 } else { 0 };
                let ke = kerr(k.update(&[], &v, flags));
                assert_eq!(serr(s.update_user(&[], &v, flags)), ke, "{d:?} push {i}");
                if ke == 0 {
                    pushed.push(v.clone());
                }
            }
            let (mut kv, mut sv) = (v.clone(), v.clone());
            let ke = found(k.lookup(&[], &mut kv));
            let se = match s.lookup_user(&[], &mut sv) {
                Ok(()) => 0,
                Err(e) => e.errno(),
            };
            assert_eq!(se, ke, "{d:?} peek {i}");
            assert_eq!(sv, v, "the question is left as it was");
            if ke == 0 && !pushed.contains(&v) {
                false_positives += 1;
            }
        }
        for p in &pushed {
            let mut sv = p.clone();
            assert!(s.lookup_user(&[], &mut sv).is_ok(), "a pushed value is always found");
        }
        // Operations a bloom filter does not have.
        assert_eq!(serr(s.delete_user(&[])), kerr(k.delete(&[])), "delete");
        let ke = found(k.next_key(None, &mut []));
        assert_eq!(serr(s.next_key(None, &mut [])), ke, "next_key");
        let (mut kv, mut sv) = (vec![0; value_size as usize], vec![0; value_size as usize]);
        let ke = found(k.lookup_and_delete(&[], &mut kv, 0));
        assert_eq!(serr(s.lookup_and_delete_user(&[], &mut sv, 0)), ke, "lookup_and_delete");
    }
    // The filters are small: the kernel answered "maybe" for values never pushed, and
    // so did spine.
    assert!(false_positives > 20, "{false_positives} false positives");
}
