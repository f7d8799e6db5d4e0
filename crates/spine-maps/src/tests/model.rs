//! Random operation sequences, program side and user side, against simple models
//! (a `Vec` for arrays, a `BTreeMap` for the others) that spell out the kernel's rules.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use spine_abi::map_flags as mf;
use spine_abi::map_type::*;

use super::{errno, keys, map};
use crate::Map;

const NCPUS: usize = 3;
const VS: usize = 12;
const STRIDE: usize = 16;

#[derive(Debug, Clone, Copy)]
enum Side {
    Prog(usize),
    User,
}

#[derive(Debug, Clone)]
enum Op {
    Update { key: u8, val: u8, flags: u64, side: Side },
    Delete { key: u8, side: Side },
    Lookup { key: u8, side: Side },
    Keys,
}

fn side() -> impl Strategy<Value = Side> {
    prop_oneof![3 => (0..NCPUS).prop_map(Side::Prog), 1 => Just(Side::User)]
}

fn flags() -> impl Strategy<Value = u64> {
    prop_oneof![6 => 0..3u64, 1 => 3..9u64]
}

fn ops(keys: u8) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        6 => (0..keys, any::<u8>(), flags(), side())
            .prop_map(|(key, val, flags, side)| Op::Update { key, val, flags, side }),
        2 => (0..keys, side()).prop_map(|(key, side)| Op::Delete { key, side }),
        4 => (0..keys, side()).prop_map(|(key, side)| Op::Lookup { key, side }),
        1 => Just(Op::Keys),
    ];
    prop::collection::vec(op, 1..80)
}

/// The value a program writes, and the padded per-CPU buffer user space writes.
fn prog_value(val: u8) -> Vec<u8> {
    (0..VS as u8).map(|i| val.wrapping_add(i)).collect()
}

fn user_value(val: u8, percpu: bool) -> Vec<u8> {
    if percpu {
        (0..NCPUS * STRIDE).map(|i| val.wrapping_mul(3).wrapping_add(i as u8)).collect()
    } else {
        prog_value(val)
    }
}

fn do_update(m: &Map, key: &[u8], val: u8, flags: u64, side: Side) -> i64 {
    let percpu = map_type::is_percpu(m.def().map_type);
    match side {
        Side::Prog(cpu) => errno(m.update(key, &prog_value(val), flags, cpu)),
        Side::User => errno(m.update_user(key, &user_value(val, percpu), flags)),
    }
}

fn do_delete(m: &Map, key: &[u8], side: Side) -> i64 {
    match side {
        Side::Prog(cpu) => errno(m.delete(key, cpu)),
        Side::User => errno(m.delete_user(key)),
    }
}

/// What a lookup shows: the program's view (`value_size` bytes through the pointer) or
/// the user's (the whole user value).
fn do_lookup(m: &Map, key: &[u8], side: Side) -> Option<Vec<u8>> {
    match side {
        Side::Prog(cpu) => m.lookup(key, cpu).map(|p| m.peek(p, VS)),
        Side::User => super::get(m, key).ok(),
    }
}

/// The kernel's flag checks for an update of a missing or present element; `None` when
/// the flags allow the update. `lock_ok` is false where `BPF_F_LOCK` is refused with the
/// other unknown flags (per-CPU and LRU maps, and every user-side update).
fn flag_errno(flags: u64, present: bool, lock_ok: bool) -> Option<i64> {
    let f = if lock_ok { flags & !4 } else { flags };
    if f > 2 || flags & 4 != 0 {
        return Some(-22);
    }
    match (present, f) {
        (true, 1) => Some(-17),
        (false, 2) => Some(-2),
        _ => None,
    }
}

// ---- arrays ----

fn array_case(percpu: bool, ops: Vec<Op>) -> Result<(), TestCaseError> {
    const MAX: u32 = 5;
    let t = if percpu { PERCPU_ARRAY } else { ARRAY };
    let m = map(t, 4, VS as u32, MAX, 0, NCPUS);
    let ncopies = if percpu { NCPUS } else { 1 };
    let mut model = vec![vec![vec![0u8; STRIDE]; ncopies]; MAX as usize];
    for op in ops {
        match op {
            Op::Update { key, val, flags, side } => {
                let k = (key as u32).to_ne_bytes();
                let i = key as usize;
                let got = do_update(&m, &k, val, flags, side);
                let want = match side {
                    Side::Prog(_) if flags & !4 > 2 => -22,
                    Side::User if flags & 4 != 0 || flags > 2 => -22,
                    _ if i >= MAX as usize => -7,
                    _ if flags & 1 != 0 => -17,
                    _ if flags & 4 != 0 => -22,
                    _ => 0,
                };
                prop_assert_eq!(got, want, "{:?}", op);
                if want == 0 {
                    match side {
                        Side::Prog(cpu) => {
                            let c = if percpu { cpu } else { 0 };
                            model[i][c][..VS].copy_from_slice(&prog_value(val));
                        }
                        Side::User if percpu => {
                            for (c, slot) in user_value(val, true).chunks(STRIDE).enumerate() {
                                model[i][c].copy_from_slice(slot);
                            }
                        }
                        Side::User => model[i][0][..VS].copy_from_slice(&prog_value(val)),
                    }
                }
            }
            Op::Delete { key, side } => {
                prop_assert_eq!(do_delete(&m, &(key as u32).to_ne_bytes(), side), -22);
            }
            Op::Lookup { key, side } => {
                let got = do_lookup(&m, &(key as u32).to_ne_bytes(), side);
                let want = model.get(key as usize).map(|slots| match side {
                    Side::Prog(cpu) => slots[if percpu { cpu } else { 0 }][..VS].to_vec(),
                    Side::User if percpu => slots.concat(),
                    Side::User => slots[0][..VS].to_vec(),
                });
                prop_assert_eq!(got, want, "{:?}", op);
            }
            Op::Keys => {
                let want: Vec<Vec<u8>> = (0..MAX).map(|i| i.to_ne_bytes().to_vec()).collect();
                prop_assert_eq!(keys(&m), want);
            }
        }
    }
    Ok(())
}

// ---- hash maps (plain, per-CPU, LRU) ----

/// Five-byte keys, so the last key word is partial.
fn hkey(k: u8) -> Vec<u8> {
    vec![k, 0xaa, k ^ 0x55, 0, 1]
}

/// Per key, each CPU's first `value_size` bytes (per-CPU padding of reused elements is
/// whatever it was, as in the kernel, so the model does not track it).
type HashModel = BTreeMap<u8, Vec<Vec<u8>>>;

fn user_view(slots: &[Vec<u8>], percpu: bool) -> Vec<u8> {
    if percpu {
        slots.iter().flat_map(|s| s.iter().copied().chain([0; STRIDE - VS])).collect()
    } else {
        slots[0].clone()
    }
}

fn strip_padding(v: Vec<u8>, percpu: bool) -> Vec<u8> {
    if percpu {
        v.chunks(STRIDE).flat_map(|s| s[..VS].iter().copied().chain([0; STRIDE - VS])).collect()
    } else {
        v
    }
}

/// Applies a successful update to the model (`present`: whether the key existed).
fn model_update(model: &mut HashModel, key: u8, val: u8, side: Side, percpu: bool) {
    let n = if percpu { NCPUS } else { 1 };
    let present = model.contains_key(&key);
    let slots = model.entry(key).or_insert_with(|| vec![vec![0; VS]; n]);
    match side {
        Side::Prog(cpu) if percpu => {
            if !present {
                slots.iter_mut().for_each(|s| s.fill(0));
            }
            slots[cpu] = prog_value(val);
        }
        Side::User if percpu => {
            for (c, chunk) in user_value(val, true).chunks(STRIDE).enumerate() {
                slots[c] = chunk[..VS].to_vec();
            }
        }
        _ => slots[0] = prog_value(val),
    }
}

fn hash_case(t: u32, flags: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    const MAX: usize = 6;
    let m = map(t, 5, VS as u32, MAX as u32, flags, NCPUS);
    let percpu = map_type::is_percpu(t);
    let lru = matches!(t, LRU_HASH | LRU_PERCPU_HASH);
    let per_cpu_lists = flags & mf::NO_COMMON_LRU != 0;
    let mut model = HashModel::new();
    for op in ops {
        match op {
            Op::Update { key, val, flags, side } => {
                let present = model.contains_key(&key);
                let full = model.len() == MAX;
                let lock_ok = matches!(side, Side::Prog(_)) && !percpu && !lru;
                let want = |present: bool| {
                    flag_errno(flags, present, lock_ok).unwrap_or(if !present && full && !lru {
                        -7
                    } else {
                        0
                    })
                };
                let got = do_update(&m, &hkey(key), val, flags, side);
                if lru {
                    // Drop what the map evicted. Only an update evicts, at most one
                    // element, and with one common list only when the map was full.
                    let now: BTreeSet<u8> = keys(&m).iter().map(|k| k[0]).collect();
                    let lost: Vec<u8> =
                        model.keys().copied().filter(|k| !now.contains(k) && *k != key).collect();
                    prop_assert!(
                        lost.is_empty() || full || per_cpu_lists,
                        "evicted early: {:?}",
                        lost
                    );
                    prop_assert!(lost.len() <= 1, "one update evicted {:?}", lost);
                    for k in lost {
                        model.remove(&k);
                    }
                    // The victim may have been the key itself, taken before the flags
                    // were checked (as in the kernel).
                    let may_self_evict = present && (full || per_cpu_lists);
                    let self_evicted = may_self_evict && got == want(false) && got != want(true);
                    if self_evicted {
                        model.remove(&key);
                    }
                    prop_assert!(got == want(present) || self_evicted, "{:?}: {}", op, got);
                    if got == 0 {
                        if may_self_evict && percpu && matches!(side, Side::Prog(_)) {
                            // In place, or a fresh element if the key evicted itself.
                            let mut fresh = model.clone();
                            fresh.remove(&key);
                            model_update(&mut fresh, key, val, side, percpu);
                            model_update(&mut model, key, val, side, percpu);
                            let actual = super::get(&m, &hkey(key)).map(|v| strip_padding(v, true));
                            if actual.as_ref() == Ok(&user_view(&fresh[&key], true)) {
                                model = fresh;
                            }
                        } else {
                            model_update(&mut model, key, val, side, percpu);
                        }
                    }
                    prop_assert!(model.len() <= MAX);
                } else {
                    prop_assert_eq!(got, want(present), "{:?}", op);
                    if got == 0 {
                        model_update(&mut model, key, val, side, percpu);
                    }
                }
            }
            Op::Delete { key, side } => {
                let want = if model.remove(&key).is_some() { 0 } else { -2 };
                prop_assert_eq!(do_delete(&m, &hkey(key), side), want, "{:?}", op);
            }
            Op::Lookup { key, side } => {
                let got = do_lookup(&m, &hkey(key), side);
                let want = model.get(&key).map(|slots| match side {
                    Side::Prog(cpu) => slots[if percpu { cpu } else { 0 }].clone(),
                    Side::User => user_view(slots, percpu),
                });
                let got = match side {
                    Side::User => got.map(|v| strip_padding(v, percpu)),
                    Side::Prog(_) => got,
                };
                prop_assert_eq!(got, want, "{:?}", op);
            }
            Op::Keys => {
                let got = keys(&m);
                let set: BTreeSet<Vec<u8>> = got.iter().cloned().collect();
                prop_assert_eq!(set.len(), got.len(), "a key listed twice");
                let want: BTreeSet<Vec<u8>> = model.keys().map(|k| hkey(*k)).collect();
                prop_assert_eq!(set, want);
            }
        }
    }
    prop_assert_eq!(m.check_consistency(), model.len());
    Ok(())
}

// ---- LPM trie ----

const LPM_DATA: usize = 2;
const LPM_MAX: usize = 6;

fn lpm_key(plen: u32, data: [u8; LPM_DATA]) -> Vec<u8> {
    let mut k = plen.to_ne_bytes().to_vec();
    k.extend_from_slice(&data);
    k
}

fn masked(plen: u32, data: [u8; LPM_DATA]) -> u16 {
    let v = u16::from_be_bytes(data);
    if plen == 0 {
        0
    } else {
        v & (u16::MAX << (16 - plen.min(16)))
    }
}

#[derive(Debug, Clone)]
enum LpmOp {
    Update { plen: u32, data: [u8; LPM_DATA], val: u8, flags: u64, side: Side },
    Delete { plen: u32, data: [u8; LPM_DATA], side: Side },
    Lookup { plen: u32, data: [u8; LPM_DATA], side: Side },
    Keys,
}

fn lpm_ops() -> impl Strategy<Value = Vec<LpmOp>> {
    // Few distinct data values, so prefixes nest and collide often.
    let data = prop_oneof![
        Just([0x00, 0x00]),
        Just([0x80, 0x00]),
        Just([0xc0, 0xa8]),
        Just([0xc0, 0xa9]),
        Just([0xc0, 0x28]),
        any::<[u8; LPM_DATA]>(),
    ];
    let plen = prop_oneof![8 => 0..=16u32, 1 => 17..20u32];
    let op = prop_oneof![
        6 => (plen.clone(), data.clone(), any::<u8>(), prop_oneof![5 => 0..3u64, 1 => 3..5u64], side())
            .prop_map(|(plen, data, val, flags, side)| LpmOp::Update { plen, data, val, flags, side }),
        3 => (plen.clone(), data.clone(), side()).prop_map(|(plen, data, side)| LpmOp::Delete { plen, data, side }),
        4 => (prop_oneof![0..=16u32, Just(16u32)], data, side())
            .prop_map(|(plen, data, side)| LpmOp::Lookup { plen, data, side }),
        1 => Just(LpmOp::Keys),
    ];
    prop::collection::vec(op, 1..100)
}

fn lpm_case(ops: Vec<LpmOp>) -> Result<(), TestCaseError> {
    let m = map(LPM_TRIE, 4 + LPM_DATA as u32, VS as u32, LPM_MAX as u32, mf::NO_PREALLOC, NCPUS);
    // (prefix length, masked data) -> (data as given, value)
    let mut model: BTreeMap<(u32, u16), ([u8; LPM_DATA], Vec<u8>)> = BTreeMap::new();
    for op in ops {
        match op {
            LpmOp::Update { plen, data, val, flags, side } => {
                let id = (plen, masked(plen, data));
                let present = model.contains_key(&id);
                let want =
                    if flags > 2 || (matches!(side, Side::User) && flags & 4 != 0) || plen > 16 {
                        -22
                    } else if present && flags == 1 {
                        -17
                    } else if !present && flags == 2 {
                        -2
                    } else if !present && model.len() == LPM_MAX {
                        -28
                    } else {
                        0
                    };
                prop_assert_eq!(
                    do_update(&m, &lpm_key(plen, data), val, flags, side),
                    want,
                    "{:?}",
                    op
                );
                if want == 0 {
                    model.insert(id, (data, prog_value(val)));
                }
            }
            LpmOp::Delete { plen, data, side } => {
                let want = if plen > 16 {
                    -22
                } else if model.remove(&(plen, masked(plen, data))).is_some() {
                    0
                } else {
                    -2
                };
                prop_assert_eq!(do_delete(&m, &lpm_key(plen, data), side), want, "{:?}", op);
            }
            LpmOp::Lookup { plen, data, side } => {
                let want = model
                    .iter()
                    .filter(|((p, d), _)| *p <= plen && masked(*p, data) == *d)
                    .max_by_key(|((p, _), _)| *p)
                    .map(|(_, (_, v))| v.clone());
                prop_assert_eq!(do_lookup(&m, &lpm_key(plen, data), side), want, "{:?}", op);
            }
            LpmOp::Keys => {
                let got = keys(&m);
                let ids: Vec<(u32, u16)> = got
                    .iter()
                    .map(|k| {
                        let plen = u32::from_ne_bytes(k[..4].try_into().unwrap());
                        (plen, masked(plen, [k[4], k[5]]))
                    })
                    .collect();
                let want: BTreeSet<Vec<u8>> =
                    model.iter().map(|((p, _), (d, _))| lpm_key(*p, *d)).collect();
                prop_assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), want);
                prop_assert_eq!(got.len(), model.len());
                // Post-order: a prefix comes after every more specific prefix inside it.
                for (i, a) in ids.iter().enumerate() {
                    for b in &ids[i + 1..] {
                        let b_inside_a = b.0 > a.0 && masked(a.0, b.1.to_be_bytes()) == a.1;
                        prop_assert!(!b_inside_a, "{:?} listed before {:?}", a, b);
                    }
                }
            }
        }
    }
    prop_assert_eq!(m.len(), model.len());
    Ok(())
}

use spine_abi::map_type;

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn array_matches_model(ops in ops(7)) {
        array_case(false, ops)?;
    }

    #[test]
    fn percpu_array_matches_model(ops in ops(7)) {
        array_case(true, ops)?;
    }

    #[test]
    fn hash_matches_model(ops in ops(10)) {
        hash_case(HASH, 0, ops)?;
    }

    #[test]
    fn percpu_hash_matches_model(ops in ops(10)) {
        hash_case(PERCPU_HASH, 0, ops)?;
    }

    #[test]
    fn lru_hash_matches_model(ops in ops(10)) {
        hash_case(LRU_HASH, 0, ops)?;
    }

    #[test]
    fn lru_percpu_hash_matches_model(ops in ops(10)) {
        hash_case(LRU_PERCPU_HASH, 0, ops)?;
    }

    #[test]
    fn lru_hash_with_per_cpu_lists_matches_model(ops in ops(10)) {
        hash_case(LRU_HASH, mf::NO_COMMON_LRU, ops)?;
    }

    #[test]
    fn lpm_trie_matches_model(ops in lpm_ops()) {
        lpm_case(ops)?;
    }
}
