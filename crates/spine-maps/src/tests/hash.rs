//! Hash and per-CPU hash maps.

use std::collections::BTreeSet;

use spine_abi::map_flags as mf;
use spine_abi::map_type::{HASH, PERCPU_HASH};

use super::{errno, get, k32, keys, map, opts};
use crate::{Map, MapDef, MapError};

/// Measured on 6.18: user-side updates of a 2-entry hash map, in this order.
#[test]
fn user_update_errnos_match_the_kernel() {
    let m = map(HASH, 4, 12, 2, 0, 2);
    let v = [1u8; 12];
    let rows: &[(u32, u64, i64)] = &[
        (1, 2, -2),
        (1, 3, -22),
        (1, 4, -22),
        (1, 8, -22),
        (1, 1, 0),
        (1, 1, -17),
        (2, 0, 0),
        (3, 0, -7),
        (3, 2, -2),
        (3, 1, -7),
        (2, 0, 0),
        (2, 2, 0),
        (2, 1, -17),
    ];
    for &(k, flags, want) in rows {
        assert_eq!(errno(m.update_user(&k32(k), &v, flags)), want, "key {k} flags {flags}");
    }
    assert_eq!(errno(m.delete_user(&k32(3))), -2);
    assert_eq!(get(&m, &k32(3)), Err(-2));
    assert_eq!(m.len(), 2);
    assert_eq!(m.check_consistency(), 2);
    m.freeze();
    assert_eq!(errno(m.delete_user(&k32(3))), -1);
    assert_eq!(errno(m.delete_user(&k32(2))), -1);
    m.delete(&k32(2), 0).unwrap();
    assert_eq!(m.len(), 1);
}

#[test]
fn program_update_errnos() {
    let m = map(HASH, 4, 8, 2, 0, 2);
    let v = [1u8; 8];
    assert_eq!(errno(m.update(&k32(1), &v, 4, 0)), -22, "BPF_F_LOCK without a spin lock");
    assert!(matches!(m.update(&k32(1), &v, 4, 0), Err(MapError::NoSpinLock { .. })));
    assert_eq!(errno(m.update(&k32(1), &v, 3, 0)), -22);
    assert_eq!(errno(m.update(&k32(1), &v, 2, 0)), -2);
    assert_eq!(errno(m.update(&k32(1), &v, 1, 0)), 0);
    assert_eq!(errno(m.update(&k32(1), &v, 1, 1)), -17);
    assert_eq!(errno(m.update(&k32(2), &v, 0, 1)), 0);
    assert_eq!(errno(m.update(&k32(3), &v, 0, 1)), -7);
    assert!(matches!(m.update(&k32(3), &v, 0, 1), Err(MapError::Full { max_entries: 2, .. })));
    assert_eq!(errno(m.delete(&k32(3), 0)), -2);
    assert_eq!(errno(m.delete(&k32(1), 0)), 0);
    assert_eq!(errno(m.delete(&k32(1), 0)), -2);
    assert_eq!(errno(m.update(&k32(3), &v, 0, 1)), 0, "room again after a delete");
    assert_eq!(errno(m.update(&k32(3), &v, 0, 2)), -22, "cpu out of range");
    assert_eq!(errno(m.delete(&k32(3), 9)), -22);
    assert_eq!(errno(m.update(&[0; 3], &v, 0, 0)), -22);
    assert_eq!(m.lookup(&[0; 3], 0), None);
}

/// The kernel keeps one spare element per CPU so that replacing a key works in a full
/// map, and links a fresh element for every replacement: a pointer obtained before the
/// update keeps showing the old value (measured on 6.18 with BPF_PROG_TEST_RUN: a
/// program that looks up a key, replaces it and reads through the old pointer gets the
/// old value).
#[test]
fn replacing_in_a_full_map_uses_a_fresh_element() {
    let m = map(HASH, 4, 8, 2, 0, 2);
    m.update(&k32(1), &1u64.to_ne_bytes(), 0, 0).unwrap();
    m.update(&k32(2), &2u64.to_ne_bytes(), 0, 0).unwrap();
    let before = m.lookup(&k32(1), 0).unwrap();
    m.update(&k32(1), &10u64.to_ne_bytes(), 0, 0).unwrap();
    let after = m.lookup(&k32(1), 0).unwrap();
    assert_ne!(before, after);
    assert_eq!(m.load_u64(before), 1, "the old element still holds the old value");
    assert_eq!(m.load_u64(after), 10);
    for round in 0..50u64 {
        for cpu in 0..2 {
            m.update(&k32(2), &round.to_ne_bytes(), 2, cpu).unwrap();
            m.update_user(&k32(1), &round.to_ne_bytes(), 0).unwrap();
        }
    }
    assert_eq!(get(&m, &k32(2)).unwrap(), 49u64.to_ne_bytes());
    assert_eq!(m.check_consistency(), 2);
}

#[test]
fn program_writes_through_pointers_are_the_value() {
    let m = map(HASH, 13, 16, 8, 0, 1);
    let key = *b"thirteen-byte";
    m.update(&key, &[0; 16], 0, 0).unwrap();
    let p = m.lookup(&key, 0).unwrap();
    assert_eq!(p.as_ptr() as usize % 8, 0);
    m.store_u64(p, 0xfeed);
    assert_eq!(&get(&m, &key).unwrap()[..8], &0xfeedu64.to_ne_bytes());
    let mut other = key;
    other[12] ^= 1;
    assert_eq!(m.lookup(&other, 0), None, "the last (partial-word) key byte counts");
    assert_eq!(m.array_layout(), None);
}

/// Measured on 6.18 with BPF_F_ZERO_SEED (hashrnd 0): the kernel's GET_NEXT_KEY order.
#[test]
fn zero_seed_next_key_order_is_the_kernels() {
    let m = map(HASH, 4, 4, 8, mf::ZERO_SEED, 2);
    for k in 100..106 {
        m.update_user(&k32(k), &[0; 4], 0).unwrap();
    }
    m.update_user(&k32(102), &[0; 4], 0).unwrap();
    m.delete_user(&k32(103)).unwrap();
    let order: Vec<u32> =
        keys(&m).iter().map(|k| u32::from_ne_bytes(k[..].try_into().unwrap())).collect();
    assert_eq!(order, [102, 101, 100, 104, 105]);
    let mut first = [0u8; 4];
    m.next_key(Some(&k32(999)), &mut first).unwrap();
    assert_eq!(first, k32(102), "a missing key restarts from the first");

    // 6-byte keys go through jhash rather than jhash2.
    let m = map(HASH, 6, 4, 16, mf::ZERO_SEED, 2);
    for i in 0..10u8 {
        m.update_user(&[i.wrapping_mul(37), 2, 3, 4, 5, i], &[0; 4], 0).unwrap();
    }
    let order: Vec<(u8, u8)> = keys(&m).iter().map(|k| (k[0], k[5])).collect();
    let kernel = [
        (74, 2),
        (185, 5),
        (3, 7),
        (0, 0),
        (77, 9),
        (111, 3),
        (222, 6),
        (37, 1),
        (40, 8),
        (148, 4),
    ];
    assert_eq!(order, kernel);
}

#[test]
fn next_key_visits_every_key_once() {
    let m = map(HASH, 8, 8, 64, 0, 2);
    assert_eq!(errno(m.next_key(None, &mut [0; 8])), -2, "empty map");
    let want: BTreeSet<Vec<u8>> = (0..40u64).map(|i| (i * 7919).to_ne_bytes().to_vec()).collect();
    for k in &want {
        m.update_user(k, &[0; 8], 0).unwrap();
    }
    let got = keys(&m);
    assert_eq!(got.len(), want.len());
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
}

#[test]
fn seeds_change_placement_but_not_contents() {
    let mk = |seed| {
        let o = crate::MapOptions { seed, ..opts(1) };
        let m = Map::create(MapDef::new("s", HASH, 4, 4, 64, 0), &o).unwrap();
        for k in 0..32 {
            m.update_user(&k32(k), &[0; 4], 0).unwrap();
        }
        keys(&m)
    };
    let (a, b) = (mk(1), mk(2));
    assert_ne!(a, b, "different seeds, different bucket order");
    assert_eq!(a.iter().collect::<BTreeSet<_>>(), b.iter().collect::<BTreeSet<_>>());
}

/// Measured on 6.18 with BPF_PROG_TEST_RUN: a program's insert into a per-CPU hash
/// sets its CPU's value and zeros the others, even over an element that user space had
/// filled with 0xee before deleting it.
#[test]
fn per_cpu_program_insert_zeroes_other_cpus() {
    let m = map(PERCPU_HASH, 4, 12, 4, 0, 3);
    assert_eq!(m.user_value_size(), 48);
    let v: Vec<u8> = (1..=12).collect();
    m.update(&k32(5), &v, 0, 1).unwrap();
    let all = get(&m, &k32(5)).unwrap();
    assert_eq!(&all[..16], &[0; 16]);
    assert_eq!(&all[16..28], &v[..]);
    assert_eq!(&all[28..], &[0; 20]);
    // An existing element: only this CPU's copy changes, in place.
    let p2 = m.lookup(&k32(5), 2).unwrap();
    m.update(&k32(5), &[9; 12], 2, 2).unwrap();
    assert_eq!(m.lookup(&k32(5), 2), Some(p2));
    assert_eq!(m.peek(p2, 12), vec![9; 12]);
    assert_eq!(m.peek(m.lookup(&k32(5), 1).unwrap(), 12), v);
    assert_eq!(m.peek(m.lookup(&k32(5), 0).unwrap(), 12), vec![0; 12]);
    // A reused element gets zeros on the other CPUs again.
    m.update_user(&k32(5), &[0xee; 48], 0).unwrap();
    m.delete(&k32(5), 0).unwrap();
    m.update(&k32(6), &[1; 12], 0, 0).unwrap();
    let all = get(&m, &k32(6)).unwrap();
    assert_eq!(&all[..12], &[1; 12]);
    assert_eq!(&all[16..28], &[0; 12]);
    assert_eq!(&all[32..44], &[0; 12]);
}

/// Measured on 6.18: a user update sets every CPU's padded slot; BPF_F_LOCK is EINVAL.
#[test]
fn per_cpu_user_update_sets_every_cpu() {
    let m = map(PERCPU_HASH, 4, 12, 2, 0, 2);
    m.update_user(&k32(1), &[0xcd; 32], 0).unwrap();
    assert_eq!(get(&m, &k32(1)).unwrap(), vec![0xcd; 32]);
    assert_eq!(errno(m.update_user(&k32(1), &[0; 32], 4)), -22);
    assert_eq!(errno(m.update_user(&k32(1), &[0; 32], 5)), -22);
    assert_eq!(errno(m.update_user(&k32(1), &[0; 32], 3)), -22);
    assert_eq!(errno(m.update(&k32(1), &[0; 12], 4, 0)), -22, "flags > BPF_EXIST");
    assert_eq!(errno(m.update_user(&k32(1), &[0; 12], 0)), -22, "one CPU's worth");
    m.update_user(&k32(2), &[0; 32], 1).unwrap();
    assert_eq!(errno(m.update(&k32(3), &[0; 12], 0, 0)), -7, "full; no spare elements");
    m.update(&k32(2), &[1; 12], 0, 1).unwrap();
    assert_eq!(m.check_consistency(), 2);
}

#[test]
fn no_prealloc_is_accepted_and_behaves_the_same() {
    let m = map(HASH, 4, 8, 3, mf::NO_PREALLOC, 1);
    for k in 0..3 {
        m.update(&k32(k), &[k as u8; 8], 0, 0).unwrap();
    }
    assert_eq!(errno(m.update(&k32(3), &[0; 8], 0, 0)), -7);
    m.update(&k32(1), &[7; 8], 0, 0).unwrap();
    assert_eq!(get(&m, &k32(1)).unwrap(), [7; 8]);
}

#[test]
fn big_keys_and_budget() {
    let m = map(HASH, 600, 4, 4, 0, 1);
    let key: Vec<u8> = (0..600).map(|i| i as u8).collect();
    m.update_user(&key, &[1; 4], 0).unwrap();
    assert_eq!(get(&m, &key).unwrap(), [1; 4]);
    let def = MapDef::new("big", HASH, 8, 8, 1 << 27, 0);
    let e = Map::create(def, &crate::MapOptions { max_bytes: 1 << 30, ..opts(1) }).unwrap_err();
    assert!(matches!(e, MapError::TooLarge { .. }));
}

/// Measured on 6.18 with BPF_F_ZERO_SEED: 400 pseudo-random user-side updates (flags
/// 0..=4) and deletes over 40 keys on a 16-entry map (`x = x * 6364136223846793005 +
/// 1442695040888963407`, seed 7). Every errno and the final `next_key` order must be
/// the kernel's: 4-byte keys (jhash2), 6-byte keys (jhash), and a per-CPU map, whose
/// in-place updates leave a replaced key where it was instead of moving it to the head
/// of its bucket.
#[test]
fn random_sequences_match_the_kernel() {
    const KERNEL_ERRNOS: &str = concat!(
        "-22,0,-22,-2,-2,0,-22,-2,0,0,0,-22,0,-22,0,-22,-22,0,-2,0,-2,-2,-22,-2,",
        "-17,0,-22,-22,0,0,0,-22,-22,-17,0,-22,0,0,0,-2,-22,-17,-22,-22,-22,0,-2,-2,",
        "0,-17,0,-2,-2,0,0,-22,0,0,0,-2,0,-2,-22,-2,-22,-2,-22,-22,-17,-17,-22,0,",
        "0,-7,-2,-2,-22,-22,-7,-7,-7,-17,-22,-22,0,-22,-22,-2,-22,0,0,-22,0,-7,-2,-22,",
        "-22,-2,-22,0,0,0,-22,-2,-22,-22,0,-2,-22,-7,-2,-2,-7,-2,-22,0,-17,-22,-7,-2,",
        "-22,0,-22,-22,-2,0,-22,0,0,-2,-22,0,-2,0,0,-2,0,-22,0,-2,-22,-22,-2,-2,",
        "-22,0,-22,-22,-7,-22,-22,-2,-22,0,-2,0,0,0,-7,-22,-22,-7,-2,-2,-17,-22,-2,0,",
        "-17,-2,-7,-22,-22,-7,-7,0,0,0,-2,0,-22,-2,-22,-17,0,-2,0,0,-22,0,-22,0,",
        "-2,-7,-22,-2,-22,-22,0,-17,-22,-22,-7,-2,-22,-2,-7,0,-2,0,0,-22,-22,0,-22,-17,",
        "0,0,-2,-22,-22,-2,-2,-22,0,-7,0,-7,0,-2,0,0,-22,0,-7,0,-22,-7,-22,-22,",
        "-2,-22,-22,-2,0,-22,-2,-22,-22,-22,0,-2,-22,-22,-2,-17,-17,-2,-2,-22,-7,-7,-22,-7,",
        "-22,0,-22,-7,-22,0,0,-2,0,0,-2,-17,-22,-22,-22,0,0,-22,0,0,-22,-22,-7,-2,",
        "-2,0,-7,-7,-22,-7,-22,-7,-17,-7,-7,-7,-22,-2,-2,0,0,0,-22,-22,0,-17,-22,0,",
        "0,0,-2,0,0,-2,0,-22,0,-2,-17,0,-22,-2,-22,-2,-2,0,-22,0,-22,-2,0,-22,",
        "0,-22,0,-2,-2,-2,-22,-2,-22,-17,-2,0,-2,0,-2,-2,0,-7,0,-22,-22,-22,-7,0,",
        "-2,0,-22,-17,-22,-22,-2,-22,0,-22,0,-22,-17,-7,-22,-22,0,0,-22,-22,-22,-17,-2,0,",
        "-22,0,-17,-2,-22,-22,-2,0,-2,-2,0,0,0,-2,-22,-2",
    );
    let runs: [(u32, u32, &str); 3] = [
        (HASH, 4, "29,32,30,23,17,26,39,7,1,12,20,36,24"),
        (HASH, 6, "12,7,29,24,23,36,1,39,17,30,20,32,26"),
        (PERCPU_HASH, 4, "29,32,30,23,17,26,39,7,1,20,12,36,24"),
    ];
    for (t, ks, kernel_order) in runs {
        let m = map(t, ks, 8, 16, mf::ZERO_SEED, 2);
        let value = vec![0u8; m.user_value_size()];
        let mut x: u64 = 7;
        let mut errnos = vec![];
        for _ in 0..400 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = x >> 16;
            let mut key = vec![0u8; ks as usize];
            key[..4].copy_from_slice(&(((r >> 8) % 40) as u32).to_ne_bytes());
            if ks > 4 {
                key[4] = 0x5a;
            }
            let res = if r % 4 == 3 {
                m.delete_user(&key)
            } else {
                m.update_user(&key, &value, (r >> 32) % 5)
            };
            errnos.push(errno(res).to_string());
        }
        assert_eq!(errnos.join(","), KERNEL_ERRNOS, "type {t} key_size {ks}");
        let order: Vec<String> = keys(&m)
            .iter()
            .map(|k| u32::from_ne_bytes(k[..4].try_into().unwrap()).to_string())
            .collect();
        assert_eq!(order.join(","), kernel_order, "type {t} key_size {ks}");
        assert_eq!(m.check_consistency(), order.len());
    }
}
