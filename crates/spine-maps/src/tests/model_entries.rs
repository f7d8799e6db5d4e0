//! Random user-side sequences on devmaps, devmap_hash maps, cpumaps and maps in maps,
//! against models that spell out the kernel's rules (`tests/kernel.rs` holds the same
//! kind of sequences against the kernel itself).

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use spine_abi::map_type::*;

use super::{errno, get, k32, keys, map, opts};
use crate::{Map, MapDef};

const NCPUS: usize = 3;

#[derive(Debug, Clone)]
enum Op {
    /// `first` is the ifindex or qsize; `fd` the program fd of an 8-byte value.
    Update {
        key: u32,
        first: u32,
        fd: i32,
        flags: u64,
    },
    Delete {
        key: u32,
    },
    Lookup {
        key: u32,
    },
    Keys,
}

fn ops(keys: u32, firsts: Vec<u32>) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (0..keys, prop::sample::select(firsts), prop::sample::select(vec![0, -1, 3]),
              prop_oneof![6 => 0..3u64, 1 => 3..6u64])
            .prop_map(|(key, first, fd, flags)| Op::Update { key, first, fd, flags }),
        2 => (0..keys).prop_map(|key| Op::Delete { key }),
        3 => (0..keys).prop_map(|key| Op::Lookup { key }),
        1 => Just(Op::Keys),
    ];
    prop::collection::vec(op, 1..80)
}

fn value(first: u32, fd: i32) -> Vec<u8> {
    let mut v = first.to_ne_bytes().to_vec();
    v.extend(fd.to_ne_bytes());
    v
}

/// What user space and a program see for `key`, given the model's entry.
fn check_lookup(m: &Map, key: u32, entry: Option<u32>) -> Result<(), TestCaseError> {
    let want = entry.map(|e| value(e, 0));
    prop_assert_eq!(get(m, &k32(key)).ok(), want.clone(), "user lookup of {}", key);
    let prog = m.lookup(&k32(key), key as usize % NCPUS).map(|p| m.peek(p, 8));
    prop_assert_eq!(prog, want, "program lookup of {}", key);
    Ok(())
}

/// devmap and cpumap: array slots; `update` gives the kernel's errno and the new entry.
fn slots_case(
    t: u32,
    ops: Vec<Op>,
    update: impl Fn(u32, u32, i32, u64) -> (i64, Option<Option<u32>>),
) -> Result<(), TestCaseError> {
    const MAX: u32 = 5;
    let m = map(t, 4, 8, MAX, 0, NCPUS);
    let mut model = vec![None; MAX as usize];
    for op in ops {
        match op {
            Op::Update { key, first, fd, flags } => {
                let got = errno(m.update_user(&k32(key), &value(first, fd), flags));
                let (want, entry) = update(key, first, fd, flags);
                prop_assert_eq!(got, want, "{:?}", op);
                if let Some(e) = entry {
                    model[key as usize] = e;
                }
            }
            Op::Delete { key } => {
                let want = if key < MAX { 0 } else { -22 };
                prop_assert_eq!(errno(m.delete_user(&k32(key))), want, "{:?}", op);
                if key < MAX {
                    model[key as usize] = None;
                }
            }
            Op::Lookup { key } => {
                check_lookup(&m, key, model.get(key as usize).copied().flatten())?
            }
            Op::Keys => {
                let all: Vec<Vec<u8>> = (0..MAX).map(|i| k32(i).to_vec()).collect();
                prop_assert_eq!(keys(&m), all);
            }
        }
    }
    prop_assert_eq!(m.len(), model.iter().flatten().count());
    Ok(())
}

fn devmap_update(key: u32, ifindex: u32, fd: i32, flags: u64) -> (i64, Option<Option<u32>>) {
    match () {
        _ if flags > 2 => (-22, None),
        _ if key >= 5 => (-7, None),
        _ if flags == 1 => (-17, None),
        _ if fd > 0 => (-22, None),
        _ => (0, Some((ifindex != 0).then_some(ifindex))),
    }
}

fn cpumap_update(cpu: u32, qsize: u32, fd: i32, flags: u64) -> (i64, Option<Option<u32>>) {
    match () {
        _ if flags > 2 => (-22, None),
        _ if cpu >= 5 => (-7, None),
        _ if flags == 1 => (-17, None),
        _ if qsize > 16384 => (-75, None),
        _ if cpu as usize >= NCPUS => (-19, None),
        _ if qsize == 0 => (0, Some(None)),
        _ if fd > 0 => (-12, None),
        _ => (0, Some(Some(qsize))),
    }
}

/// devmap_hash: entries and the stamp of their last update; the kernel's `next_key`
/// order is by bucket (`key & 3` for 4 entries), newest first within one.
fn devmap_hash_case(ops: Vec<Op>) -> Result<(), TestCaseError> {
    const MAX: usize = 4;
    let m = map(DEVMAP_HASH, 4, 8, MAX as u32, 0, NCPUS);
    let mut model: BTreeMap<u32, (u32, u64)> = BTreeMap::new();
    let mut stamp = 0u64;
    for op in ops {
        match op {
            Op::Update { key, first, fd, flags } => {
                let got = errno(m.update_user(&k32(key), &value(first, fd), flags));
                let present = model.contains_key(&key);
                let want = match () {
                    _ if flags > 2 || first == 0 => -22,
                    _ if flags == 1 && present => -17,
                    _ if fd > 0 => -22,
                    _ if !present && model.len() == MAX => -7,
                    _ => 0,
                };
                prop_assert_eq!(got, want, "{:?}", op);
                if want == 0 {
                    stamp += 1;
                    model.insert(key, (first, stamp));
                }
            }
            Op::Delete { key } => {
                let want = if model.remove(&key).is_some() { 0 } else { -2 };
                prop_assert_eq!(errno(m.delete_user(&k32(key))), want, "{:?}", op);
            }
            Op::Lookup { key } => check_lookup(&m, key, model.get(&key).map(|e| e.0))?,
            Op::Keys => {
                let mut order: Vec<(u32, u64, u32)> =
                    model.iter().map(|(&k, &(_, s))| (k & 3, u64::MAX - s, k)).collect();
                order.sort();
                let want: Vec<Vec<u8>> = order.iter().map(|o| k32(o.2).to_vec()).collect();
                prop_assert_eq!(keys(&m), want);
            }
        }
    }
    prop_assert_eq!(m.check_consistency(), model.len());
    Ok(())
}

/// Maps in maps: updates pick one of four inner maps (the last does not match the
/// template); the model holds which one each key has.
fn outer_case(t: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    const MAX: u32 = 3;
    let template = MapDef::new("i", ARRAY, 4, 8, 2, 0);
    let def = MapDef::new("o", t, 4, 4, MAX, 0);
    let o = Map::create_outer(def, &template, &opts(NCPUS)).unwrap();
    let pool: Vec<Arc<Map>> =
        (0..4).map(|i| Arc::new(map(ARRAY, 4, 8, if i == 3 { 3 } else { 2 }, 0, NCPUS))).collect();
    let hash = t == HASH_OF_MAPS;
    let mut model: BTreeMap<u32, usize> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Update { key, first, flags, .. } => {
                let inner = first as usize % pool.len();
                let got = errno(o.set_inner(&k32(key), Some(pool[inner].clone()), flags));
                let present = model.contains_key(&key);
                let want = match () {
                    _ if flags & 4 != 0 => -22,
                    _ if !hash && flags != 0 => -22,
                    _ if !hash && key >= MAX => -7,
                    _ if inner == 3 => -22,
                    _ if flags > 2 => -22,
                    _ if present && flags == 1 => -17,
                    _ if !present && flags == 2 => -2,
                    _ if !present && model.len() == MAX as usize => -7,
                    _ => 0,
                };
                prop_assert_eq!(got, want, "{:?}", op);
                if want == 0 {
                    model.insert(key, inner);
                }
            }
            Op::Delete { key } => {
                let want = match model.remove(&key) {
                    Some(_) => 0,
                    None if !hash && key >= MAX => -7,
                    None => -2,
                };
                prop_assert_eq!(errno(o.delete_user(&k32(key))), want, "{:?}", op);
            }
            Op::Lookup { key } => {
                let want = model.get(&key).map(|&i| pool[i].id().to_ne_bytes().to_vec());
                prop_assert_eq!(get(&o, &k32(key)).ok(), want.clone(), "{:?}", op);
                let prog = o.lookup_inner(&k32(key)).map(|r| r.map.id().to_ne_bytes().to_vec());
                prop_assert_eq!(prog, want, "{:?}", op);
            }
            Op::Keys => {
                let mut got = keys(&o);
                if hash {
                    got.sort();
                    let want: Vec<Vec<u8>> = model.keys().map(|&k| k32(k).to_vec()).collect();
                    prop_assert_eq!(got, want);
                } else {
                    prop_assert_eq!(got.len(), MAX as usize);
                }
            }
        }
    }
    prop_assert_eq!(o.len(), model.len());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn devmap_matches_model(ops in ops(7, vec![0, 1, 7])) {
        slots_case(DEVMAP, ops, devmap_update)?;
    }

    #[test]
    fn cpumap_matches_model(ops in ops(7, vec![0, 1, 64, 16384, 16385])) {
        slots_case(CPUMAP, ops, cpumap_update)?;
    }

    #[test]
    fn devmap_hash_matches_model(ops in ops(10, vec![0, 1, 7])) {
        devmap_hash_case(ops)?;
    }

    #[test]
    fn array_of_maps_matches_model(ops in ops(5, vec![0, 1, 2, 3])) {
        outer_case(ARRAY_OF_MAPS, ops)?;
    }

    #[test]
    fn hash_of_maps_matches_model(ops in ops(6, vec![0, 1, 2, 3])) {
        outer_case(HASH_OF_MAPS, ops)?;
    }
}
