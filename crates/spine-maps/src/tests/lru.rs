//! LRU hash and LRU per-CPU hash maps.

use std::collections::BTreeSet;

use spine_abi::map_flags as mf;
use spine_abi::map_type::{LRU_HASH, LRU_PERCPU_HASH};

use super::{errno, get, k32, keys, map};

fn present(m: &crate::Map) -> BTreeSet<u32> {
    keys(m).iter().map(|k| u32::from_ne_bytes(k[..].try_into().unwrap())).collect()
}

#[test]
fn updates_never_fail_for_fullness() {
    let m = map(LRU_HASH, 4, 8, 16, 0, 2);
    for k in 0..100u32 {
        m.update(&k32(k), &u64::from(k).to_ne_bytes(), 0, (k % 2) as usize).unwrap();
        assert_eq!(get(&m, &k32(k)).unwrap(), u64::from(k).to_ne_bytes(), "just inserted");
    }
    assert_eq!(m.len(), 16);
    assert_eq!(m.check_consistency(), 16);
    for k in 100..200u32 {
        m.update_user(&k32(k), &[0; 8], 1).unwrap();
    }
    assert_eq!(m.len(), 16);
}

#[test]
fn program_lookups_protect_elements_from_eviction() {
    let m = map(LRU_HASH, 4, 8, 8, 0, 1);
    for k in 0..8 {
        m.update(&k32(k), &[0; 8], 0, 0).unwrap();
    }
    for k in 0..4 {
        assert!(m.lookup(&k32(k), 0).is_some());
    }
    for k in 8..12 {
        m.update(&k32(k), &[0; 8], 0, 0).unwrap();
    }
    let want: BTreeSet<u32> = (0..4).chain(8..12).collect();
    assert_eq!(present(&m), want, "the unreferenced keys 4..8 went first");
}

#[test]
fn user_lookups_do_not_count_as_use() {
    let m = map(LRU_HASH, 4, 8, 8, 0, 1);
    for k in 0..8 {
        m.update(&k32(k), &[0; 8], 0, 0).unwrap();
    }
    for k in 4..8 {
        assert!(m.lookup(&k32(k), 0).is_some());
    }
    for k in 0..4 {
        assert!(get(&m, &k32(k)).is_ok());
    }
    for k in 8..12 {
        m.update(&k32(k), &[0; 8], 0, 0).unwrap();
    }
    let want: BTreeSet<u32> = (4..12).collect();
    assert_eq!(present(&m), want);
}

#[test]
fn flag_errnos() {
    let m = map(LRU_HASH, 4, 8, 4, 0, 1);
    assert_eq!(errno(m.update(&k32(1), &[0; 8], 4, 0)), -22);
    assert_eq!(errno(m.update(&k32(1), &[0; 8], 3, 0)), -22);
    assert_eq!(errno(m.update(&k32(1), &[0; 8], 2, 0)), -2);
    assert_eq!(errno(m.update(&k32(1), &[0; 8], 1, 0)), 0);
    assert_eq!(errno(m.update(&k32(1), &[0; 8], 1, 0)), -17);
    assert_eq!(errno(m.update(&k32(1), &[1; 8], 2, 0)), 0);
    assert_eq!(get(&m, &k32(1)).unwrap(), [1; 8]);
    assert_eq!(errno(m.delete(&k32(2), 0)), -2);
    assert_eq!(errno(m.delete(&k32(1), 0)), 0);
    assert_eq!(m.check_consistency(), 0);
}

#[test]
fn per_cpu_lists_evict_only_their_own_elements() {
    let m = map(LRU_HASH, 4, 8, 5, mf::NO_COMMON_LRU, 2);
    assert_eq!(m.def().max_entries, 6, "rounded up to a multiple of the CPU count");
    for k in 0..3 {
        m.update(&k32(k), &[0; 8], 0, 0).unwrap();
    }
    for k in 100..110 {
        m.update(&k32(k), &[0; 8], 0, 1).unwrap();
    }
    let got = present(&m);
    assert!((0..3).all(|k| got.contains(&k)), "CPU 0's elements survive CPU 1's churn");
    assert_eq!(got.len(), 6);
    assert!(got.contains(&109));
}

#[test]
fn per_cpu_values_follow_per_cpu_hash_semantics() {
    let m = map(LRU_PERCPU_HASH, 4, 4, 2, 0, 2);
    assert_eq!(m.user_value_size(), 16);
    m.update(&k32(1), &[1; 4], 0, 1).unwrap();
    assert_eq!(get(&m, &k32(1)).unwrap(), [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]);
    m.update(&k32(1), &[2; 4], 2, 0).unwrap();
    assert_eq!(get(&m, &k32(1)).unwrap(), [2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0]);
    m.update_user(&k32(2), &[3; 16], 0).unwrap();
    // Full: BPF_EXIST on a missing key takes no element, so it evicts nothing.
    assert_eq!(errno(m.update(&k32(3), &[0; 4], 2, 0)), -2);
    assert_eq!(present(&m), BTreeSet::from([1, 2]));
    m.update(&k32(3), &[4; 4], 0, 0).unwrap();
    assert_eq!(m.len(), 2);
    assert_eq!(m.check_consistency(), 2);
}
