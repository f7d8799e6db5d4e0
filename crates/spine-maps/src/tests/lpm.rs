//! LPM trie.

use spine_abi::map_flags as mf;
use spine_abi::map_type::LPM_TRIE;

use super::{errno, get, keys, map};
use crate::Map;

/// An IPv4 LPM key: prefix length and address bytes.
fn v4(plen: u32, a: [u8; 4]) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&plen.to_ne_bytes());
    k[4..].copy_from_slice(&a);
    k
}

fn trie(max: u32) -> Map {
    map(LPM_TRIE, 8, 4, max, mf::NO_PREALLOC, 2)
}

fn value_at(m: &Map, key: &[u8]) -> Option<u32> {
    let p = m.lookup(key, 0)?;
    Some(u32::from_ne_bytes(m.peek(p, 4).try_into().unwrap()))
}

/// The example at the top of `kernel/bpf/lpm_trie.c`, including the intermediate node
/// 192.168.0.0/23 and its documented `next_key` (post-)order.
#[test]
fn kernel_example_lookups_and_order() {
    let m = trie(16);
    m.update_user(&v4(16, [192, 168, 0, 0]), &1u32.to_ne_bytes(), 0).unwrap();
    m.update_user(&v4(24, [192, 168, 0, 0]), &2u32.to_ne_bytes(), 0).unwrap();
    m.update_user(&v4(24, [192, 168, 128, 0]), &3u32.to_ne_bytes(), 0).unwrap();
    m.update_user(&v4(24, [192, 168, 1, 0]), &5u32.to_ne_bytes(), 0).unwrap();
    assert_eq!(m.len(), 4);
    assert_eq!(value_at(&m, &v4(32, [192, 168, 1, 5])), Some(5));
    assert_eq!(value_at(&m, &v4(32, [192, 168, 0, 255])), Some(2));
    assert_eq!(value_at(&m, &v4(32, [192, 168, 2, 1])), Some(1));
    assert_eq!(value_at(&m, &v4(32, [192, 168, 128, 77])), Some(3));
    assert_eq!(value_at(&m, &v4(32, [10, 0, 0, 1])), None);
    assert_eq!(value_at(&m, &v4(20, [192, 168, 1, 0])), Some(1), "the key's own length bounds");
    assert_eq!(value_at(&m, &v4(33, [192, 168, 1, 0])), None);
    assert_eq!(get(&m, &v4(32, [192, 168, 1, 9])).unwrap(), 5u32.to_ne_bytes());
    let order = keys(&m);
    let want = [
        v4(24, [192, 168, 0, 0]),
        v4(24, [192, 168, 1, 0]),
        v4(24, [192, 168, 128, 0]),
        v4(16, [192, 168, 0, 0]),
    ];
    assert_eq!(order, want.map(|k| k.to_vec()));
    // The intermediate /23 is not an entry.
    assert_eq!(errno(m.delete_user(&v4(23, [192, 168, 0, 0]))), -2);
    let mut out = [0u8; 8];
    m.next_key(Some(&v4(23, [192, 168, 0, 0])), &mut out).unwrap();
    assert_eq!(out, want[0], "a missing key restarts from the first");
    assert_eq!(errno(m.next_key(Some(&want[3]), &mut out)), -2);
}

#[test]
fn errnos_match_the_kernels_code() {
    let m = trie(2);
    let v = 7u32.to_ne_bytes();
    assert_eq!(errno(m.update_user(&v4(8, [10, 0, 0, 0]), &v, 3)), -22);
    assert_eq!(errno(m.update(&v4(33, [10, 0, 0, 0]), &v, 0, 0)), -22);
    assert_eq!(errno(m.update(&v4(8, [10, 0, 0, 0]), &v, 2, 0)), -2);
    assert_eq!(errno(m.update(&v4(8, [10, 0, 0, 0]), &v, 1, 0)), 0);
    assert_eq!(errno(m.update(&v4(8, [10, 0, 0, 0]), &v, 1, 0)), -17);
    assert_eq!(errno(m.update(&v4(8, [10, 9, 9, 9]), &v, 2, 0)), 0, "same prefix, other host bits");
    assert_eq!(errno(m.update(&v4(16, [10, 1, 0, 0]), &v, 0, 0)), 0);
    assert_eq!(errno(m.update(&v4(16, [10, 2, 0, 0]), &v, 0, 0)), -28, "full: ENOSPC");
    assert_eq!(errno(m.update(&v4(16, [10, 1, 0, 0]), &v, 0, 0)), 0, "replacing when full");
    assert_eq!(errno(m.delete(&v4(33, [10, 0, 0, 0]), 0)), -22);
    assert_eq!(errno(m.delete(&v4(24, [10, 0, 0, 0]), 0)), -2);
    assert_eq!(errno(m.delete(&v4(8, [10, 0, 0, 0]), 0)), 0);
    assert_eq!(errno(m.delete(&v4(8, [10, 0, 0, 0]), 0)), -2);
    assert_eq!(m.len(), 1);
    let e = m.update(&v4(33, [0; 4]), &v, 0, 0).unwrap_err();
    assert!(matches!(e, crate::MapError::PrefixLen { prefixlen: 33, max: 32, .. }));
}

/// The kernel stores the data bits past the prefix as given and returns them from
/// `next_key`; the latest update's bits win.
#[test]
fn host_bits_are_kept() {
    let m = trie(4);
    m.update_user(&v4(24, [192, 168, 1, 77]), &[1; 4], 0).unwrap();
    assert_eq!(keys(&m), vec![v4(24, [192, 168, 1, 77]).to_vec()]);
    m.update_user(&v4(24, [192, 168, 1, 9]), &[2; 4], 0).unwrap();
    assert_eq!(keys(&m), vec![v4(24, [192, 168, 1, 9]).to_vec()]);
    assert_eq!(value_at(&m, &v4(32, [192, 168, 1, 200])), Some(0x0202_0202));
}

#[test]
fn deletes_keep_the_trie_minimal() {
    let m = trie(8);
    let ks = [
        v4(8, [10, 0, 0, 0]),
        v4(24, [10, 1, 1, 0]),
        v4(24, [10, 1, 2, 0]),
        v4(32, [10, 1, 2, 3]),
        v4(0, [0; 4]),
    ];
    for (i, k) in ks.iter().enumerate() {
        m.update_user(k, &(i as u32).to_ne_bytes(), 0).unwrap();
    }
    assert_eq!(value_at(&m, &v4(32, [10, 1, 2, 3])), Some(3));
    assert_eq!(value_at(&m, &v4(32, [11, 0, 0, 0])), Some(4), "default route");
    // A node with two children becomes intermediate; one with one child is spliced.
    m.delete_user(&ks[0]).unwrap();
    assert_eq!(value_at(&m, &v4(32, [10, 9, 9, 9])), Some(4));
    m.delete_user(&ks[2]).unwrap();
    assert_eq!(value_at(&m, &v4(32, [10, 1, 2, 3])), Some(3));
    assert_eq!(value_at(&m, &v4(32, [10, 1, 2, 4])), Some(4));
    m.delete_user(&ks[3]).unwrap();
    m.delete_user(&ks[1]).unwrap();
    assert_eq!(keys(&m), vec![ks[4].to_vec()]);
    m.delete_user(&ks[4]).unwrap();
    assert!(m.is_empty());
    assert_eq!(errno(m.next_key(None, &mut [0; 8])), -2);
    // Every node went back to the pool: the trie fills up again.
    for i in 0..8u8 {
        m.update_user(&v4(32, [i, i, i, i]), &[i; 4], 0).unwrap();
    }
    assert_eq!(m.len(), 8);
}

#[test]
fn wide_keys() {
    let m = map(LPM_TRIE, 4 + 16, 8, 8, mf::NO_PREALLOC, 1);
    let mut k = [0u8; 20];
    k[..4].copy_from_slice(&48u32.to_ne_bytes());
    k[4..10].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34]);
    m.update_user(&k, &[6; 8], 0).unwrap();
    let mut q = k;
    q[..4].copy_from_slice(&128u32.to_ne_bytes());
    q[19] = 0xff;
    assert_eq!(get(&m, &q).unwrap(), [6; 8]);
    q[9] ^= 0x01;
    assert_eq!(get(&m, &q), Err(-2));
}

/// Measured on 6.18: 400 pseudo-random updates and deletes (`x = x * 6364136223846793005
/// + 1442695040888963407`, seed 42) on a 24-entry trie with 2 data bytes; every errno
/// and the final `next_key` order (`prefixlen/data`) must be the kernel's.
#[test]
fn random_sequence_matches_the_kernel() {
    const KERNEL_ERRNOS: &str = concat!(
        "0,0,-2,-2,0,-2,-2,0,-2,-2,0,-2,-2,-2,0,0,0,-2,-2,-2,0,-2,0,-2,",
        "0,0,-2,0,-2,-2,0,0,-2,-2,-2,0,-2,0,-2,0,-22,-17,-2,-2,0,0,-2,-2,",
        "-2,0,-2,-2,-2,-2,-2,-2,-2,-2,0,-2,-2,0,0,0,0,-2,-2,0,-2,-2,-2,-2,",
        "0,0,-22,-2,-2,0,0,0,-2,0,-2,0,0,-2,-22,0,-2,0,-2,0,-2,-2,-2,-2,",
        "0,0,0,0,0,-2,0,-2,-2,-2,-2,-22,-17,0,-2,-28,0,-2,-28,0,-17,-22,-28,-17,",
        "-2,-28,0,-2,-2,0,0,-22,-17,-28,-22,-2,-28,-17,0,-28,-28,-28,-2,-2,-17,0,-28,-28,",
        "0,-2,-2,-2,0,-28,-28,-28,-28,-2,-2,-17,-2,-2,0,0,-2,-2,-17,0,-22,-2,-2,-2,",
        "0,-22,-17,0,-2,0,0,0,-2,-28,0,-2,0,-17,-28,-17,0,-22,0,0,0,0,0,0,",
        "-28,-2,-2,0,-2,-28,0,-28,-28,-28,-2,-22,0,0,-2,-2,-28,0,-28,0,-2,-2,0,-2,",
        "0,0,-2,0,0,-2,-2,0,-2,-28,0,-28,-28,-28,-28,-2,0,-2,-2,-2,0,0,-28,0,",
        "-2,-2,-2,0,0,-2,-28,-28,-2,-2,-2,-28,0,0,-2,0,-2,-2,-2,0,-28,-28,-22,-2,",
        "-28,0,-2,-17,-2,-28,-2,-2,-28,0,-28,0,-28,-2,0,0,-2,0,0,0,0,0,0,0,",
        "-28,-22,0,0,-2,-2,-2,-28,-2,0,-28,-2,-2,-2,-28,-2,-2,-28,0,-2,-2,-28,-2,0,",
        "-17,-2,-28,-28,-28,-22,-17,-28,0,0,-28,-2,-17,0,0,-2,0,-28,0,-2,0,-2,0,-28,",
        "-2,-2,-2,0,-2,-17,-2,-2,0,0,-17,-28,0,-2,0,0,-2,-2,-2,-28,-2,0,0,-2,",
        "-2,-2,-2,0,-2,-2,-28,0,-17,-17,-2,-2,-2,0,-2,0,0,-22,-2,0,0,-17,-2,0,",
        "-28,-22,-2,-28,-28,-17,-2,0,-2,-2,-2,-2,-28,-28,-2,-28",
    );
    const KERNEL_ORDER: &str = concat!(
        "16/0002,14/0001,12/0002,8/0001,15/0a00,16/0a03,15/0a03,11/0a03,",
        "10/0a03,9/0a02,7/0a02,6/0a01,3/0a02,16/8000,15/8003,9/8000,",
        "8/8000,6/8000,5/8003,16/c02a,13/c02b,12/c02b,16/c0ab,9/c0ab",
    );
    let m = map(LPM_TRIE, 6, 4, 24, mf::NO_PREALLOC, 1);
    const BASE: [[u8; 2]; 6] =
        [[0, 0], [0x80, 0], [0xc0, 0xa8], [0xc0, 0xa9], [0xc0, 0x28], [0x0a, 0x01]];
    let mut x: u64 = 42;
    let mut errnos = vec![];
    for i in 0..400u32 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let r = x >> 16;
        let mut data = BASE[((r >> 16) % 6) as usize];
        data[1] ^= ((r >> 24) & 3) as u8;
        let mut key = (((r >> 8) % 18) as u32).to_ne_bytes().to_vec();
        key.extend_from_slice(&data);
        let res = if r % 3 == 2 {
            m.delete_user(&key)
        } else {
            m.update_user(&key, &i.to_ne_bytes(), (r >> 32) % 3)
        };
        errnos.push(errno(res).to_string());
    }
    assert_eq!(errnos.join(","), KERNEL_ERRNOS);
    let order: Vec<String> = keys(&m)
        .iter()
        .map(|k| {
            format!("{}/{:02x}{:02x}", u32::from_ne_bytes(k[..4].try_into().unwrap()), k[4], k[5])
        })
        .collect();
    assert_eq!(order.join(","), KERNEL_ORDER);
}

/// The Poptrie index answers exactly as the trie walk: a trie indexed from its first
/// entry and one never indexed go through the same random updates and deletes (IPv4
/// and IPv6, prefixes that nest, host bits set), and every lookup of every length
/// returns the same value, or the same miss, from both. The index is also built late,
/// over a trie that already holds entries.
#[test]
fn the_index_answers_as_the_trie_walk() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};

    let mut runner = TestRunner::new(Config { cases: 64, ..Config::default() });
    for data in [4usize, 16] {
        let op = (
            0..4u8,
            prop::collection::vec(any::<u8>(), data),
            0..=(data as u32 * 8),
            any::<bool>(),
        );
        runner
            .run(&(prop::collection::vec(op, 1..200), 0..40u32), |(ops, late)| {
                let create = |at| {
                    let def =
                        crate::MapDef::new("t", LPM_TRIE, 4 + data as u32, 4, 256, mf::NO_PREALLOC);
                    let opts = crate::MapOptions { lpm_index_at: at, ..super::opts(1) };
                    Map::create(def, &opts).unwrap()
                };
                let (indexed, walked, late_ix) =
                    (create(Some(0)), create(None), create(Some(late)));
                let key = |plen: u32, bytes: &[u8]| {
                    let mut k = plen.to_ne_bytes().to_vec();
                    k.extend_from_slice(bytes);
                    k
                };
                for (i, (base, mut bytes, plen, delete)) in ops.into_iter().enumerate() {
                    // Few distinct prefixes, so updates replace and deletes hit.
                    bytes[0] = [0x0a, 0xc0, 0x20, 0][base as usize];
                    let k = key(plen, &bytes);
                    let res: Vec<i64> = [&indexed, &walked, &late_ix]
                        .iter()
                        .map(|m| {
                            errno(if delete {
                                m.delete_user(&k)
                            } else {
                                m.update_user(&k, &(i as u32).to_ne_bytes(), 0)
                            })
                        })
                        .collect();
                    prop_assert!(res.iter().all(|&e| e == res[1]), "{:?}", res);
                    for probe in [&bytes, &vec![0xff; data]] {
                        for l in [data as u32 * 8, plen, 0] {
                            let q = key(l, probe);
                            let want = value_at(&walked, &q);
                            prop_assert_eq!(value_at(&indexed, &q), want);
                            prop_assert_eq!(value_at(&late_ix, &q), want);
                        }
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}
