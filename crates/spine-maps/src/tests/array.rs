//! Array and per-CPU array maps.

use spine_abi::map_flags as mf;
use spine_abi::map_type::{ARRAY, HASH, PERCPU_ARRAY};

use super::{errno, get, k32, keys, map, opts};
use crate::{Map, MapDef, MapError, ReadOnlyReason};

#[test]
fn lookups_are_zeroed_aligned_in_bounds_and_strided() {
    let m = map(ARRAY, 4, 12, 4, 0, 2);
    let span = m.value_spans()[0];
    assert!(span.writable && span.readable);
    let p0 = m.lookup(&k32(0), 0).unwrap();
    let p3 = m.lookup(&k32(3), 1).unwrap();
    assert_eq!(p0.as_ptr() as usize % 8, 0);
    assert_eq!(p3.as_ptr() as usize - p0.as_ptr() as usize, 3 * 16, "stride round_up(12, 8)");
    assert!(span.contains(p3.as_ptr() as u64, 12));
    assert_eq!(m.peek(p3, 12), vec![0; 12]);
    assert_eq!(m.lookup(&k32(4), 0), None, "index == max_entries");
    assert_eq!(m.lookup(&k32(u32::MAX), 0), None);
    assert_eq!(m.lookup(&[0; 8], 0), None, "wrong key length");
    assert_eq!(m.lookup(&k32(0), 2), None, "cpu out of range");
    let layout = m.array_layout().unwrap();
    assert_eq!(layout.base, p0.as_ptr() as u64);
    assert_eq!((layout.elem_stride, layout.cpu_stride, layout.max_entries), (16, None, 4));
}

#[test]
fn program_updates_are_seen_through_pointers_and_user_lookups() {
    let m = map(ARRAY, 4, 12, 4, 0, 2);
    let v: Vec<u8> = (1..=12).collect();
    m.update(&k32(2), &v, 0, 1).unwrap();
    let p = m.lookup(&k32(2), 0).unwrap();
    assert_eq!(m.peek(p, 12), v, "one copy shared by all CPUs");
    assert_eq!(get(&m, &k32(2)).unwrap(), v);
    m.store_u64(p, 0x1122_3344_5566_7788);
    assert_eq!(&get(&m, &k32(2)).unwrap()[..8], &0x1122_3344_5566_7788u64.to_ne_bytes());
}

/// Measured on 6.18: user-side updates of a 4-entry array, in this order.
#[test]
fn user_update_errnos_match_the_kernel() {
    let m = map(ARRAY, 4, 12, 4, 0, 2);
    let v = [1u8; 12];
    let rows: &[(u32, u64, i64)] = &[
        (4, 0, -7),
        (4, 1, -7),
        (4, 3, -22),
        (4, 4, -22),
        (4, 5, -22),
        (1, 1, -17),
        (1, 2, 0),
        (1, 3, -22),
        (1, 4, -22),
        (1, 5, -22),
        (1, 6, -22),
        (1, 8, -22),
    ];
    for &(k, flags, want) in rows {
        assert_eq!(errno(m.update_user(&k32(k), &v, flags)), want, "key {k} flags {flags}");
    }
    assert_eq!(errno(m.delete_user(&k32(1))), -22);
    assert_eq!(errno(m.delete_user(&k32(9))), -22);
    assert_eq!(get(&m, &k32(9)), Err(-2));
}

/// `array_map_update_elem` from a program: the spin-lock check comes after the index
/// and `NOEXIST` checks (the syscall path rejects `BPF_F_LOCK` first). The first three
/// rows were measured on 6.18 with BPF_PROG_TEST_RUN.
#[test]
fn program_update_errnos_follow_the_kernels_order() {
    let m = map(ARRAY, 4, 8, 4, 0, 2);
    let v = [1u8; 8];
    assert_eq!(errno(m.update(&k32(4), &v, 5, 0)), -7, "LOCK|NOEXIST out of range");
    assert_eq!(errno(m.update(&k32(1), &v, 5, 0)), -17, "LOCK|NOEXIST in range");
    assert_eq!(errno(m.update(&k32(1), &v, 4, 0)), -22, "LOCK without a spin lock");
    assert_eq!(errno(m.update(&k32(1), &v, 6, 0)), -22, "LOCK|EXIST");
    assert_eq!(errno(m.update(&k32(1), &v, 3, 0)), -22);
    assert_eq!(errno(m.update(&k32(1), &v, 2, 0)), 0);
    assert_eq!(errno(m.update(&k32(1), &v, 0, 0)), 0);
    assert_eq!(errno(m.delete(&k32(1), 0)), -22);
    assert!(matches!(m.delete(&k32(1), 0), Err(MapError::DeleteFromArray { .. })));
    assert_eq!(errno(m.update(&k32(1), &v, 0, 2)), -22, "cpu out of range");
    assert_eq!(errno(m.update(&k32(1), &v[..4], 0, 0)), -22, "short value");
    assert_eq!(errno(m.update(&[1, 0], &v, 0, 0)), -22, "short key");
}

/// Measured on 6.18: GET_NEXT_KEY on a 4-entry array.
#[test]
fn next_key_walks_indices() {
    let m = map(ARRAY, 4, 12, 4, 0, 1);
    let mut out = [0u8; 4];
    m.next_key(None, &mut out).unwrap();
    assert_eq!(out, k32(0));
    m.next_key(Some(&k32(9)), &mut out).unwrap();
    assert_eq!(out, k32(0), "out of range restarts");
    m.next_key(Some(&k32(2)), &mut out).unwrap();
    assert_eq!(out, k32(3));
    assert_eq!(errno(m.next_key(Some(&k32(3)), &mut out)), -2);
    assert_eq!(keys(&m), (0..4).map(|i| k32(i).to_vec()).collect::<Vec<_>>());
    assert_eq!(errno(m.next_key(None, &mut [0u8; 8])), -22);
}

/// Measured on 6.18: after BPF_MAP_FREEZE every user-side write is EPERM, checked
/// before the flags and the index; lookups work; a second freeze is EPERM.
#[test]
fn freeze_blocks_user_writes_only() {
    let m = map(ARRAY, 4, 12, 4, 0, 1);
    let v = [1u8; 12];
    m.try_freeze().unwrap();
    assert!(m.is_frozen());
    assert_eq!(errno(m.try_freeze()), -1);
    assert_eq!(errno(m.update_user(&k32(1), &v, 0)), -1);
    assert_eq!(errno(m.update_user(&k32(1), &v, 8)), -1);
    assert_eq!(errno(m.update_user(&k32(1), &v, 4)), -1);
    assert_eq!(errno(m.update_user(&k32(9), &v, 0)), -1);
    assert_eq!(errno(m.delete_user(&k32(1))), -1);
    assert_eq!(get(&m, &k32(9)), Err(-2));
    assert_eq!(get(&m, &k32(1)).unwrap(), vec![0; 12]);
    m.update(&k32(1), &v, 0, 0).unwrap();
    assert_eq!(get(&m, &k32(1)).unwrap(), v);
    let e = m.update_user(&k32(1), &v, 0).unwrap_err();
    assert!(matches!(e, MapError::ReadOnly { why: ReadOnlyReason::Frozen, .. }));
}

/// Measured on 6.18: BPF_F_RDONLY and BPF_F_WRONLY restrict the user side.
#[test]
fn rdonly_and_wronly_restrict_user_space() {
    let v = [1u8; 12];
    let ro = map(ARRAY, 4, 12, 4, mf::RDONLY, 1);
    assert_eq!(errno(ro.update_user(&k32(1), &v, 0)), -1);
    assert!(get(&ro, &k32(1)).is_ok());
    assert_eq!(errno(ro.delete_user(&k32(1))), -1);
    assert_eq!(errno(ro.try_freeze()), -1);
    ro.update(&k32(1), &v, 0, 0).unwrap();

    let wo = map(ARRAY, 4, 12, 4, mf::WRONLY, 1);
    assert_eq!(errno(wo.update_user(&k32(1), &v, 0)), 0);
    assert_eq!(get(&wo, &k32(1)), Err(-1));
    assert_eq!(errno(wo.next_key(Some(&k32(1)), &mut [0; 4])), -1);
    assert_eq!(errno(wo.delete_user(&k32(1))), -22);
    assert_eq!(errno(wo.try_freeze()), 0);
    assert_eq!(errno(wo.update_user(&k32(1), &v, 0)), -1);
}

/// The kernel's verifier refuses programs that write to a BPF_F_RDONLY_PROG map
/// ("write into map forbidden", EACCES at load); spine reports EPERM at run time and
/// marks the value span read-only.
#[test]
fn rdonly_prog_maps_refuse_program_writes() {
    let m = map(ARRAY, 4, 8, 2, mf::RDONLY_PROG, 1);
    assert!(!m.value_spans()[0].writable);
    assert!(m.value_spans()[0].readable);
    let v = [7u8; 8];
    assert_eq!(errno(m.update(&k32(0), &v, 0, 0)), -1);
    assert_eq!(errno(m.delete(&k32(0), 0)), -1);
    assert!(m.lookup(&k32(0), 0).is_some());
    m.update_user(&k32(0), &v, 0).unwrap();
    assert_eq!(m.peek(m.lookup(&k32(0), 0).unwrap(), 8), v);
    let wo = map(ARRAY, 4, 8, 2, mf::WRONLY_PROG, 1);
    assert!(wo.value_spans()[0].writable && !wo.value_spans()[0].readable);
}

#[test]
fn per_cpu_program_writes_touch_one_cpu_and_user_sees_all() {
    let m = map(PERCPU_ARRAY, 4, 12, 4, 0, 3);
    assert_eq!(m.user_value_size(), 3 * 16);
    let v: Vec<u8> = (1..=12).collect();
    m.update(&k32(1), &v, 0, 1).unwrap();
    let all = get(&m, &k32(1)).unwrap();
    assert_eq!(&all[..16], &[0; 16]);
    assert_eq!(&all[16..28], &v[..]);
    assert_eq!(&all[28..48], &[0; 20]);
    assert_eq!(m.peek(m.lookup(&k32(1), 1).unwrap(), 12), v);
    assert_eq!(m.peek(m.lookup(&k32(1), 2).unwrap(), 12), vec![0; 12]);
    let layout = m.array_layout().unwrap();
    let cs = layout.cpu_stride.unwrap();
    assert_eq!(cs % 64, 0);
    assert!(cs >= 4 * 16);
    let p = |cpu| m.lookup(&k32(3), cpu).unwrap().as_ptr() as u64;
    assert_eq!(p(0), layout.base + 3 * 16);
    assert_eq!(p(2) - p(0), 2 * cs);
    for cpu in 0..3 {
        assert!(m.value_spans()[0].contains(p(cpu), 12));
    }
}

/// Measured on 6.18: a user update of a per-CPU array copies each CPU's whole padded
/// slot (padding bytes included), and a lookup returns them.
#[test]
fn per_cpu_user_update_copies_padded_slots() {
    let m = map(PERCPU_ARRAY, 4, 12, 4, 0, 2);
    let buf: Vec<u8> = (0..32).map(|i| 0xa0 + i as u8).collect();
    m.update_user(&k32(1), &buf, 0).unwrap();
    assert_eq!(get(&m, &k32(1)).unwrap(), buf);
    assert_eq!(m.peek(m.lookup(&k32(1), 1).unwrap(), 12), buf[16..28].to_vec());
    assert_eq!(errno(m.update_user(&k32(1), &buf[..16], 0)), -22, "one CPU's worth");
    // bpf_percpu_array_update: flags > BPF_EXIST first, then the index, then NOEXIST.
    assert_eq!(errno(m.update_user(&k32(1), &buf, 4)), -22);
    assert_eq!(errno(m.update_user(&k32(1), &buf, 1)), -17);
    assert_eq!(errno(m.update_user(&k32(7), &buf, 5)), -22);
    assert_eq!(errno(m.update_user(&k32(7), &buf, 1)), -7);
    assert_eq!(errno(m.delete_user(&k32(1))), -22);
}

#[test]
fn write_initial_sets_global_data() {
    let m = map(ARRAY, 4, 10, 1, mf::RDONLY_PROG, 2);
    m.write_initial(&[1, 2, 3]).unwrap();
    assert_eq!(get(&m, &k32(0)).unwrap(), [1, 2, 3, 0, 0, 0, 0, 0, 0, 0]);
    assert!(matches!(m.write_initial(&[0; 11]), Err(MapError::InitialTooLong { len: 11, .. })));
    m.freeze();
    assert_eq!(errno(m.write_initial(&[1])), -1);
    let two = map(ARRAY, 4, 8, 2, 0, 1);
    assert!(matches!(two.write_initial(&[1]), Err(MapError::InitialNotArray { .. })));
    let pc = map(PERCPU_ARRAY, 4, 8, 1, 0, 1);
    assert!(matches!(pc.write_initial(&[1]), Err(MapError::InitialNotArray { .. })));
    let h = map(HASH, 4, 8, 1, 0, 1);
    assert!(matches!(h.write_initial(&[1]), Err(MapError::InitialNotArray { .. })));
}

#[test]
fn storage_beyond_max_bytes_is_too_large() {
    let def = MapDef::new("big", ARRAY, 4, 1 << 20, 4096, 0);
    let o = crate::MapOptions { max_bytes: 1 << 30, ..opts(1) };
    let e = Map::create(def.clone(), &o).unwrap_err();
    assert!(matches!(e, MapError::TooLarge { bytes, .. } if bytes == 4 << 30));
    assert_eq!(e.errno(), -12);
    let o = crate::MapOptions { max_bytes: 5 << 30, ..o };
    let pc = MapDef::new("pc", PERCPU_ARRAY, 4, 32 << 10, 1 << 16, 0);
    assert_eq!(errno(Map::create(pc, &crate::MapOptions { ncpus: 4, ..o })), -12);
}
