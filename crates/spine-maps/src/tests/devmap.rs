//! Devmaps, devmap_hash maps and cpumaps: the rows marked "measured" were observed with
//! `bpf(2)` on Linux 6.18 (2 possible CPUs, ifindex 1 = `lo`; an fd > 0 there named an
//! array map, which is no program). `tests/kernel.rs` replays random sequences against
//! the kernel itself.

use spine_abi::map_flags as mf;
use spine_abi::map_type::{CPUMAP, DEVMAP, DEVMAP_HASH};

use super::{errno, get, k32, keys, map};
use crate::{MapError, ProgOp, ReadOnlyReason};

/// An 8-byte entry value: the ifindex (or qsize) and the program fd.
fn v8(first: u32, fd: i32) -> Vec<u8> {
    let mut v = first.to_ne_bytes().to_vec();
    v.extend(fd.to_ne_bytes());
    v
}

fn u32s(keys: Vec<Vec<u8>>) -> Vec<u32> {
    keys.iter().map(|k| u32::from_ne_bytes(k[..4].try_into().unwrap())).collect()
}

/// Measured: the devmap sequence of the probe, in order.
#[test]
fn devmap_user_side_matches_the_kernel() {
    let m = map(DEVMAP, 4, 8, 4, 0, 2);
    assert_eq!(m.def().flags, mf::RDONLY_PROG);
    let up = |k: u32, v: Vec<u8>, f: u64| errno(m.update_user(&k32(k), &v, f));
    assert_eq!(get(&m, &k32(0)), Err(-2), "empty slot");
    assert_eq!(up(1, v8(1, 0), 0), 0);
    assert_eq!(get(&m, &k32(1)).unwrap(), v8(1, 0));
    assert_eq!(up(1, v8(1, -1), 0), 0, "a negative fd is no program");
    assert_eq!(get(&m, &k32(1)).unwrap(), v8(1, 0), "and reads back as id 0");
    assert_eq!(up(1, v8(1, 5), 0), -22, "program fd");
    assert_eq!(up(1, v8(999, 0), 0), 0, "no device check at this layer (the kernel: -22)");
    assert_eq!(up(1, v8(0, 5), 0), -22, "ifindex 0 with an fd");
    assert_eq!(get(&m, &k32(1)).unwrap(), v8(999, 0), "failed updates change nothing");
    assert_eq!(up(1, v8(0, 0), 0), 0, "ifindex 0 empties the slot");
    assert_eq!(get(&m, &k32(1)), Err(-2));
    assert_eq!(up(2, v8(1, 0), 1), -17, "NOEXIST, as an array");
    assert_eq!(up(2, v8(1, 0), 2), 0, "EXIST on an empty slot");
    assert_eq!(up(2, v8(1, 0), 3), -22);
    assert_eq!(up(2, v8(1, 0), 4), -22, "BPF_F_LOCK");
    assert_eq!(up(2, v8(1, 5), 1), -17, "NOEXIST before the program");
    assert_eq!(up(9, v8(1, 0), 0), -7);
    assert_eq!(up(9, v8(1, 0), 1), -7, "the index before NOEXIST");
    assert_eq!(up(9, v8(1, 0), 3), -22, "flags first");
    assert_eq!(up(9, v8(0, 0), 0), -7);
    assert_eq!(up(9, v8(1, 5), 0), -7);
    assert_eq!(u32s(keys(&m)), [0, 1, 2, 3], "every index, as an array");
    assert_eq!(errno(m.delete_user(&k32(3))), 0, "deleting an empty slot");
    assert_eq!(errno(m.delete_user(&k32(9))), -22, "out of range: EINVAL, not E2BIG");
    assert!(matches!(m.delete_user(&k32(9)), Err(MapError::DeleteOutOfRange { index: 9, .. })));
    assert_eq!(errno(m.delete_user(&k32(2))), 0);
    assert_eq!(get(&m, &k32(2)), Err(-2));
    assert_eq!(errno(m.delete_user(&k32(2))), 0);
    assert_eq!(get(&m, &k32(9)), Err(-2));
    assert_eq!(m.len(), 0);
    let mut out = [0u8; 4];
    assert_eq!(errno(m.next_key(Some(&k32(3)), &mut out)), -2);
    m.next_key(Some(&k32(77)), &mut out).unwrap();
    assert_eq!(out, k32(0));
    m.try_freeze().unwrap();
    assert_eq!(up(1, v8(1, 0), 0), -1);
    assert_eq!(errno(m.delete_user(&k32(1))), -1);
    let m4 = map(DEVMAP, 4, 4, 4, 0, 2);
    assert_eq!(m4.user_value_size(), 4);
    assert_eq!(errno(m4.update_user(&k32(1), &1u32.to_ne_bytes(), 0)), 0);
    assert_eq!(get(&m4, &k32(1)).unwrap(), 1u32.to_ne_bytes());
}

#[test]
fn devmap_program_side_reads_the_ifindex_and_cannot_write() {
    let m = map(DEVMAP, 4, 8, 4, 0, 2);
    let span = m.value_spans()[0];
    assert!(!span.writable && span.readable, "programs only read devmap entries");
    assert_eq!(m.lookup(&k32(1), 0), None, "empty");
    m.update_user(&k32(1), &v8(7, -1), 0).unwrap();
    let p = m.lookup(&k32(1), 1).unwrap();
    assert!(span.contains(p.as_ptr() as u64, 8));
    assert_eq!(p.as_ptr() as usize % 8, 0);
    assert_eq!(m.peek(p, 8), v8(7, 0), "ifindex first, then the program id");
    assert_eq!(m.lookup(&k32(4), 0), None);
    assert_eq!(m.lookup(&k32(1), 2), None, "cpu out of range");
    m.update_user(&k32(1), &v8(8, 0), 0).unwrap();
    assert_eq!(m.lookup(&k32(1), 0), Some(p), "entries are updated in place");
    assert_eq!(m.peek(p, 4), 8u32.to_ne_bytes());
    let rdonly = MapError::ReadOnly { map: "t".into(), why: ReadOnlyReason::RdonlyProg };
    assert_eq!(m.update(&k32(1), &v8(9, 0), 0, 0), Err(rdonly.clone()));
    assert_eq!(m.delete(&k32(1), 0), Err(rdonly));
    assert_eq!(m.array_layout(), None, "a lookup checks presence: not inlinable");
}

/// Measured: the devmap_hash sequence of the probe, in order.
#[test]
fn devmap_hash_user_side_matches_the_kernel() {
    let m = map(DEVMAP_HASH, 4, 8, 4, 0, 2);
    assert_eq!(m.def().flags, mf::RDONLY_PROG);
    let up = |k: u32, v: Vec<u8>, f: u64| errno(m.update_user(&k32(k), &v, f));
    assert_eq!(up(1, v8(1, 0), 0), 0);
    assert_eq!(up(1, v8(1, -1), 0), 0);
    assert_eq!(get(&m, &k32(1)).unwrap(), v8(1, 0));
    assert_eq!(up(1, v8(1, 5), 0), -22);
    assert_eq!(up(1, v8(0, 0), 0), -22, "ifindex 0 is refused, not a delete");
    assert!(matches!(m.update_user(&k32(1), &v8(0, 0), 0), Err(MapError::ZeroIfindex { .. })));
    assert_eq!(up(1, v8(0, 5), 0), -22);
    assert_eq!(get(&m, &k32(1)).unwrap(), v8(1, 0));
    assert_eq!(up(2, v8(1, 0), 1), 0);
    assert_eq!(up(2, v8(1, 0), 2), 0);
    assert_eq!(up(2, v8(1, 0), 3), -22);
    assert_eq!(up(2, v8(1, 0), 4), -22);
    assert_eq!(up(2, v8(1, 0), 1), -17);
    assert_eq!(up(2, v8(1, 5), 1), -17, "EEXIST before the program");
    assert_eq!(up(9, v8(1, 0), 0), 0);
    assert_eq!(up(9, v8(1, 0), 1), -17);
    assert_eq!(up(9, v8(1, 0), 3), -22);
    assert_eq!(up(9, v8(0, 0), 0), -22);
    assert_eq!(up(9, v8(1, 5), 0), -22);
    assert_eq!(u32s(keys(&m)), [9, 1, 2], "identity hash, 4 buckets");
    assert_eq!(errno(m.delete_user(&k32(3))), -2);
    assert_eq!(errno(m.delete_user(&k32(9))), 0);
    assert_eq!(errno(m.delete_user(&k32(2))), 0);
    assert_eq!(errno(m.delete_user(&k32(2))), -2);
    for i in 0..4 {
        assert_eq!(up(i, v8(1, 0), 0), 0);
    }
    assert_eq!(up(100, v8(1, 0), 0), -7, "full");
    assert_eq!(up(100, v8(1, 5), 0), -22, "the program before fullness");
    assert_eq!(up(100, v8(1, 0), 1), -7);
    assert_eq!(up(2, v8(3, 0), 0), 0, "replacing works when full");
    assert_eq!(up(6, v8(3, 0), 2), -7, "EXIST inserts, so a full map refuses it");
    assert_eq!(u32s(keys(&m)), [0, 1, 2, 3]);
    assert_eq!(m.check_consistency(), 4);
    let mut out = [0u8; 4];
    assert_eq!(errno(m.next_key(Some(&k32(3)), &mut out)), -2);
    m.next_key(Some(&k32(77)), &mut out).unwrap();
    assert_eq!(out, k32(0), "a missing key restarts");
    m.try_freeze().unwrap();
    assert_eq!(up(1, v8(1, 0), 0), -1);
    assert_eq!(errno(m.delete_user(&k32(1))), -1);
}

/// Measured: keys 5, 13, 3, 21, 100, 7, 8, then 13 again, in an 8-entry devmap_hash;
/// then an 8th key fits and a 9th is E2BIG.
#[test]
fn devmap_hash_order_is_the_kernels() {
    let m = map(DEVMAP_HASH, 4, 4, 8, 0, 2);
    for k in [5u32, 13, 3, 21, 100, 7, 8, 13] {
        m.update_user(&k32(k), &1u32.to_ne_bytes(), 0).unwrap();
    }
    assert_eq!(u32s(keys(&m)), [8, 3, 100, 13, 21, 5, 7]);
    assert_eq!(errno(m.update_user(&k32(200), &1u32.to_ne_bytes(), 0)), 0);
    assert_eq!(errno(m.update_user(&k32(400), &1u32.to_ne_bytes(), 0)), -7);
    assert_eq!(errno(m.update_user(&k32(5), &1u32.to_ne_bytes(), 2)), 0);
    let p = m.lookup(&k32(100), 0).unwrap();
    assert!(m.value_spans()[0].contains(p.as_ptr() as u64, 4));
    assert!(!m.value_spans()[0].writable);
    assert_eq!(m.peek(p, 4), 1u32.to_ne_bytes());
    assert_eq!(m.lookup(&k32(101), 0), None);
    let e = m.update(&k32(1), &[1, 0, 0, 0], 0, 0).unwrap_err();
    assert!(matches!(e, MapError::ReadOnly { why: ReadOnlyReason::RdonlyProg, .. }));
}

/// Measured: the cpumap sequence of the probe, in order (2 possible CPUs).
#[test]
fn cpumap_user_side_matches_the_kernel() {
    let m = map(CPUMAP, 4, 8, 4, 0, 2);
    assert_eq!(m.def().flags, 0);
    let up = |k: u32, v: Vec<u8>, f: u64| errno(m.update_user(&k32(k), &v, f));
    assert_eq!(get(&m, &k32(0)), Err(-2));
    assert_eq!(up(0, v8(64, 0), 0), 0);
    assert_eq!(get(&m, &k32(0)).unwrap(), v8(64, 0));
    assert_eq!(up(0, v8(64, -1), 0), 0);
    assert_eq!(get(&m, &k32(0)).unwrap(), v8(64, 0));
    assert_eq!(up(0, v8(64, 5), 0), -12, "a program fd: ENOMEM, as the kernel");
    assert_eq!(up(0, v8(0, 5), 0), 0, "qsize 0 deletes, the fd unread");
    assert_eq!(get(&m, &k32(0)), Err(-2));
    assert_eq!(up(0, v8(16384, 0), 0), 0);
    assert_eq!(up(0, v8(16385, 0), 0), -75);
    assert_eq!(up(0, v8(16385, 0), 1), -17);
    assert_eq!(up(0, v8(16385, 0), 3), -22);
    assert_eq!(up(0, v8(8, 0), 2), 0);
    assert_eq!(up(1, v8(8, 0), 2), 0, "EXIST on an empty slot");
    assert_eq!(up(1, v8(8, 0), 1), -17);
    assert_eq!(up(2, v8(8, 0), 1), -17);
    assert_eq!(up(2, v8(0, 0), 0), -19, "CPU 2 does not exist");
    assert_eq!(up(2, v8(8, 0), 0), -19);
    assert_eq!(up(2, v8(16385, 0), 0), -75, "qsize before the CPU");
    assert_eq!(up(9, v8(8, 0), 0), -7);
    assert_eq!(up(9, v8(8, 0), 4), -22);
    assert_eq!(up(9, v8(16385, 0), 0), -7);
    assert_eq!(up(0, v8(8, 0), 4), -22);
    assert_eq!(get(&m, &k32(1)).unwrap(), v8(8, 0));
    assert_eq!(up(1, v8(0, 0), 0), 0);
    assert_eq!(get(&m, &k32(1)), Err(-2));
    assert_eq!(get(&m, &k32(9)), Err(-2));
    assert_eq!(errno(m.delete_user(&k32(0))), 0);
    assert_eq!(errno(m.delete_user(&k32(0))), 0);
    assert_eq!(errno(m.delete_user(&k32(3))), 0, "no CPU check on delete");
    assert_eq!(errno(m.delete_user(&k32(4))), -22);
    assert_eq!(u32s(keys(&m)), [0, 1, 2, 3]);
    let m4 = map(CPUMAP, 4, 4, 4, 0, 2);
    assert_eq!(errno(m4.update_user(&k32(1), &7u32.to_ne_bytes(), 0)), 0);
    assert_eq!(get(&m4, &k32(1)).unwrap(), 7u32.to_ne_bytes());
    m4.try_freeze().unwrap();
    assert_eq!(errno(m4.update_user(&k32(1), &7u32.to_ne_bytes(), 0)), -1);
    assert_eq!(errno(m4.delete_user(&k32(1))), -1);
}

#[test]
fn cpumap_program_side_is_lookup_only() {
    let m = map(CPUMAP, 4, 8, 8, 0, 4);
    m.update_user(&k32(3), &v8(128, 0), 0).unwrap();
    assert_eq!(errno(m.update_user(&k32(4), &v8(128, 0), 0)), -19, "4 workers");
    let p = m.lookup(&k32(3), 0).unwrap();
    assert_eq!(m.peek(p, 4), 128u32.to_ne_bytes());
    assert!(!m.value_spans()[0].writable);
    assert_eq!(m.lookup(&k32(2), 0), None);
    assert_eq!(m.len(), 1);
    let e = m.update(&k32(3), &v8(1, 0), 0, 0).unwrap_err();
    assert_eq!(e, MapError::NotFromProgram { map: "t".into(), op: ProgOp::Update });
    assert_eq!(errno(m.delete(&k32(3), 0)), -22);
}

#[test]
fn entry_storage_is_budgeted() {
    let o = super::opts(2);
    for t in [DEVMAP, DEVMAP_HASH] {
        let def = crate::MapDef::new("big", t, 4, 8, 1 << 30, 0);
        assert_eq!(errno(crate::Map::create(def, &o)), -12, "type {t}");
    }
    assert_eq!(map(DEVMAP, 4, 4, 16, 0, 2).storage_bytes(), 16 * 9);
    assert_eq!(map(CPUMAP, 4, 8, 256, 0, 2).storage_bytes(), 256 * 9);
}

/// Workers redirecting through a devmap entry while the control plane rewrites and
/// empties it see a whole entry every time through the pointer they looked up: one of
/// the entries written (never half of one, never the empty entry), program id 0.
#[test]
fn entries_are_never_torn() {
    use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
    use std::sync::Arc;
    for t in [DEVMAP, CPUMAP] {
        // Values differing in several bytes (a cpumap's qsize is at most 16,384).
        let (a, b) = if t == CPUMAP { (0x0101, 0x3fff) } else { (0x0101_0101, 0x3fff) };
        let m = Arc::new(map(t, 4, 8, 2, 0, 2));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|cpu| {
                let (m, stop) = (m.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    while !stop.load(Relaxed) || seen < 100 {
                        if let Some(p) = m.lookup(&k32(1), cpu) {
                            let w = m.load_u64(p).to_ne_bytes();
                            let first = u32::from_ne_bytes(w[..4].try_into().unwrap());
                            assert!(first == a || first == b, "torn entry {first:#x}");
                            assert_eq!(&w[4..], &[0; 4]);
                            seen += 1;
                        }
                    }
                })
            })
            .collect();
        for i in 0..20_000u32 {
            let first = [a, b, 0][i as usize % 3];
            m.update_user(&k32(1), &v8(first, 0), 0).unwrap();
        }
        m.update_user(&k32(1), &v8(b, 0), 0).unwrap();
        stop.store(true, Relaxed);
        for r in readers {
            r.join().expect("reader panicked");
        }
    }
}

/// XSKMAP: the kernel's update checks (flags, range, NOEXIST/EXIST) with spine's value,
/// the ifindex of the port bound for the socket; programs look entries up and never
/// write them.
#[test]
fn xskmap_entries_bind_ports_with_the_kernels_update_checks() {
    use spine_abi::map_type::XSKMAP;
    let m = map(XSKMAP, 4, 4, 4, 0, 1);
    assert_eq!(m.def().flags & mf::RDONLY_PROG, mf::RDONLY_PROG);
    let up = |k: u32, v: u32, f: u64| errno(m.update_user(&k32(k), &v.to_ne_bytes(), f));
    assert_eq!(m.lookup(&k32(0), 0), None, "an empty queue has no socket");
    assert_eq!(up(0, 7, 3), -22, "flags above BPF_EXIST");
    assert_eq!(up(4, 7, 0), -7, "index out of range: E2BIG");
    assert_eq!(up(0, 0, 0), -22, "no port");
    assert_eq!(up(0, 7, 2), -2, "BPF_EXIST on an empty slot");
    assert_eq!(up(0, 7, 1), 0);
    assert_eq!(up(0, 8, 1), -17, "BPF_NOEXIST on a bound slot");
    assert_eq!(up(0, 9, 2), 0);
    assert_eq!(get(&m, &k32(0)), Ok(9u32.to_ne_bytes().to_vec()));
    assert!(m.lookup(&k32(0), 0).is_some(), "bound");
    assert!(m.update(&k32(1), &7u32.to_ne_bytes(), 0, 0).is_err(), "programs do not write");
    assert_eq!(errno(m.delete_user(&k32(4))), -22);
    assert_eq!(errno(m.delete_user(&k32(0))), 0);
    assert_eq!(m.lookup(&k32(0), 0), None);
    assert_eq!(keys(&m).len(), 4, "every index is listed, as an array's");
}

/// spine's endpoint map: the xskmap's creation checks and program side, slots bound and
/// emptied only by the adapter (user space is refused with `EPERM`), an unbind that names
/// a stale endpoint leaving a re-bound slot alone.
#[test]
fn endpoint_map_slots_are_bound_by_the_adapter_only() {
    use spine_abi::map_type::SPINE_ENDPOINT;
    let m = map(SPINE_ENDPOINT, 4, 4, 4, 0, 1);
    assert_eq!(m.def().flags & mf::RDONLY_PROG, mf::RDONLY_PROG);
    let bad = crate::MapDef::new("t", SPINE_ENDPOINT, 4, 8, 4, 0);
    assert!(crate::Map::create(bad, &crate::MapOptions::default()).is_err(), "value 8");
    assert_eq!(errno(m.update_user(&k32(0), &7u32.to_ne_bytes(), 0)), -1, "user space: EPERM");
    assert_eq!(errno(m.delete_user(&k32(0))), -1);
    assert_eq!(m.lookup(&k32(0), 0), None, "empty");
    m.bind_endpoint(0, 7).unwrap();
    assert!(matches!(m.bind_endpoint(0, 8), Err(MapError::Exists { .. })), "taken");
    assert!(matches!(m.bind_endpoint(4, 8), Err(MapError::IndexOutOfRange { .. })));
    assert_eq!(get(&m, &k32(0)), Ok(7u32.to_ne_bytes().to_vec()));
    assert!(m.lookup(&k32(0), 0).is_some());
    assert!(m.update(&k32(0), &9u32.to_ne_bytes(), 0, 0).is_err(), "programs do not write");
    assert!(!m.unbind_endpoint(0, 8), "another endpoint's id leaves the slot alone");
    assert!(m.unbind_endpoint(0, 7));
    assert_eq!(m.lookup(&k32(0), 0), None);
    m.bind_endpoint(0, 9).unwrap();
    assert!(!m.unbind_endpoint(0, 7), "a stale unbind does not empty a re-bound slot");
    // An XSKMAP slot takes an endpoint too, marked; user space may write ifindexes
    // but never a marked value.
    let x = map(spine_abi::map_type::XSKMAP, 4, 4, 4, 0, 1);
    x.bind_endpoint(0, 5).unwrap();
    assert_eq!(get(&x, &k32(0)), Ok((5 | crate::XSK_ENDPOINT).to_ne_bytes().to_vec()));
    assert!(matches!(x.bind_endpoint(0, 6), Err(MapError::Exists { .. })), "taken");
    assert!(matches!(x.bind_endpoint(1, crate::XSK_ENDPOINT | 1), Err(MapError::Exists { .. })));
    let marked = (crate::XSK_ENDPOINT | 6).to_ne_bytes();
    assert_eq!(errno(x.update_user(&k32(1), &marked, 0)), -22, "a forged endpoint: EINVAL");
    x.update_user(&k32(1), &3u32.to_ne_bytes(), 0).unwrap();
    assert!(!x.unbind_endpoint(1, 3), "an ifindex is no endpoint");
    assert!(x.unbind_endpoint(0, 5));
    assert_eq!(x.lookup(&k32(0), 0), None);
    let arr = map(spine_abi::map_type::ARRAY, 4, 4, 4, 0, 1);
    assert!(matches!(arr.bind_endpoint(0, 1), Err(MapError::Unsupported { .. })));
}

/// What a program's lookup of an XSKMAP or endpoint-map entry points at: the record
/// `{ queue_id, target }`, whose `queue_id` (a `u32` at offset 0, the kernel's
/// `struct bpf_xdp_sock`) is the entry's index, and whose target (offset 4) is the port's
/// ifindex or the marked endpoint id; user space reads the target back.
#[test]
fn xskmap_lookup_points_at_a_queue_id_record() {
    use spine_abi::map_type::{SPINE_ENDPOINT, XSKMAP};
    let record = |m: &crate::Map, k: u32| {
        let p = m.lookup(&k32(k), 0).expect("bound");
        let (arena, off) = m.resolve(p, 8);
        let mut w = [0u8; 8];
        arena.read(off, &mut w);
        let half = |i: usize| u32::from_ne_bytes(w[i..i + 4].try_into().unwrap());
        (half(0), half(4))
    };
    let x = map(XSKMAP, 4, 4, 4, 0, 1);
    x.update_user(&k32(3), &7u32.to_ne_bytes(), 0).unwrap();
    x.bind_endpoint(2, 5).unwrap();
    x.update_user(&k32(0), &9u32.to_ne_bytes(), 0).unwrap();
    assert_eq!(record(&x, 3), (3, 7), "a port at index 3: queue 3");
    assert_eq!(record(&x, 2), (2, 5 | crate::XSK_ENDPOINT), "an endpoint at slot 2: queue 2");
    assert_eq!(record(&x, 0), (0, 9));
    assert_eq!(get(&x, &k32(3)), Ok(7u32.to_ne_bytes().to_vec()), "user space reads the port");
    x.update_user(&k32(3), &8u32.to_ne_bytes(), 2).unwrap();
    assert_eq!(record(&x, 3), (3, 8), "an update keeps the queue");
    let e = map(SPINE_ENDPOINT, 4, 4, 4, 0, 1);
    e.bind_endpoint(1, 6).unwrap();
    assert_eq!(record(&e, 1), (1, 6));
    assert_eq!(get(&e, &k32(1)), Ok(6u32.to_ne_bytes().to_vec()));
}
