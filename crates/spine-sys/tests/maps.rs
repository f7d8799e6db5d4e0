//! Kernel map semantics through `KernelMap`: needs root and bpf(2).

mod common;

use common::require_bpf;
use spine_abi::{map_flags, map_type, update_flags};
use spine_sys::{possible_cpus, KernelMap, MapDef};

fn def(map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapDef {
    MapDef::new(map_type, key_size, value_size, max_entries)
}

fn k(i: u32) -> [u8; 4] {
    i.to_ne_bytes()
}

fn v8(x: u64) -> [u8; 8] {
    x.to_ne_bytes()
}

#[test]
fn array_semantics() {
    require_bpf!();
    let m = KernelMap::create("arr", def(map_type::ARRAY, 4, 8, 4), None).unwrap();
    assert_eq!(m.user_value_size(), 8);

    // Array elements always exist and start zeroed.
    for i in 0..4 {
        assert_eq!(m.lookup_vec(&k(i)).unwrap(), Some(vec![0u8; 8]));
    }
    // Out of range: no element, and updates are E2BIG.
    let mut out = [0u8; 8];
    assert!(!m.lookup(&k(4), &mut out).unwrap());
    assert_eq!(m.update(&k(4), &v8(1), update_flags::ANY).unwrap_err().errno, libc::E2BIG);

    m.update(&k(2), &v8(0xdead_beef), update_flags::ANY).unwrap();
    assert!(m.lookup(&k(2), &mut out).unwrap());
    assert_eq!(u64::from_ne_bytes(out), 0xdead_beef);
    // EXIST succeeds on an array; NOEXIST never does.
    m.update(&k(2), &v8(5), update_flags::EXIST).unwrap();
    assert_eq!(m.update(&k(1), &v8(5), update_flags::NOEXIST).unwrap_err().errno, libc::EEXIST);
    // Array elements cannot be deleted.
    assert_eq!(m.delete(&k(2)).unwrap_err().errno, libc::EINVAL);

    // Iteration: 0, 1, 2, 3, then done; an out-of-range key restarts at 0.
    let mut next = [0u8; 4];
    assert!(m.next_key(None, &mut next).unwrap());
    assert_eq!(next, k(0));
    assert!(m.next_key(Some(&k(2)), &mut next).unwrap());
    assert_eq!(next, k(3));
    assert!(!m.next_key(Some(&k(3)), &mut next).unwrap());
    assert!(m.next_key(Some(&k(99)), &mut next).unwrap());
    assert_eq!(next, k(0));
    let keys = m.keys().unwrap();
    assert_eq!(keys, (0..4).map(|i| k(i).to_vec()).collect::<Vec<_>>());
    let entries = m.entries().unwrap();
    assert_eq!(entries[2], (k(2).to_vec(), v8(5).to_vec()));
    assert_eq!(entries[3], (k(3).to_vec(), v8(0).to_vec()));
}

#[test]
fn hash_semantics() {
    require_bpf!();
    let m = KernelMap::create("h", def(map_type::HASH, 4, 8, 2), None).unwrap();
    let mut out = [0u8; 8];
    assert!(!m.lookup(&k(7), &mut out).unwrap());
    let mut next = [0u8; 4];
    assert!(!m.next_key(None, &mut next).unwrap(), "empty map has no first key");

    assert_eq!(m.update(&k(7), &v8(1), update_flags::EXIST).unwrap_err().errno, libc::ENOENT);
    m.update(&k(7), &v8(1), update_flags::NOEXIST).unwrap();
    assert_eq!(m.update(&k(7), &v8(2), update_flags::NOEXIST).unwrap_err().errno, libc::EEXIST);
    m.update(&k(7), &v8(3), update_flags::EXIST).unwrap();
    assert!(m.lookup(&k(7), &mut out).unwrap());
    assert_eq!(u64::from_ne_bytes(out), 3);

    m.update(&k(9), &v8(4), update_flags::ANY).unwrap();
    // Full: a third key is E2BIG, replacing an existing one is fine.
    assert_eq!(m.update(&k(11), &v8(5), update_flags::ANY).unwrap_err().errno, libc::E2BIG);
    m.update(&k(9), &v8(6), update_flags::ANY).unwrap();

    let mut keys = m.keys().unwrap();
    keys.sort();
    let mut want = vec![k(7).to_vec(), k(9).to_vec()];
    want.sort();
    assert_eq!(keys, want);
    // A missing key restarts iteration at the first key.
    assert!(m.next_key(Some(&k(1234)), &mut next).unwrap());
    assert!(next == k(7) || next == k(9));

    m.delete(&k(7)).unwrap();
    assert_eq!(m.delete(&k(7)).unwrap_err().errno, libc::ENOENT);
    assert!(!m.lookup(&k(7), &mut out).unwrap());
    assert_eq!(m.entries().unwrap(), vec![(k(9).to_vec(), v8(6).to_vec())]);
}

#[test]
fn percpu_array_values_have_one_slot_per_possible_cpu() {
    require_bpf!();
    let ncpu = possible_cpus();
    // value_size 4 is padded to 8 per CPU from user space.
    let m = KernelMap::create("pcpu", def(map_type::PERCPU_ARRAY, 4, 4, 2), None).unwrap();
    assert_eq!(m.user_value_size(), ncpu * 8);

    let mut value = vec![0u8; ncpu * 8];
    for cpu in 0..ncpu {
        value[cpu * 8..cpu * 8 + 4].copy_from_slice(&(100 + cpu as u32).to_ne_bytes());
    }
    m.update(&k(1), &value, update_flags::ANY).unwrap();
    let got = m.lookup_vec(&k(1)).unwrap().unwrap();
    for cpu in 0..ncpu {
        let slot = &got[cpu * 8..cpu * 8 + 8];
        assert_eq!(u32::from_ne_bytes(slot[..4].try_into().unwrap()), 100 + cpu as u32);
        assert_eq!(&slot[4..], &[0, 0, 0, 0], "padding of slot {cpu}");
    }
    assert_eq!(m.lookup_vec(&k(0)).unwrap(), Some(vec![0u8; ncpu * 8]));

    // A buffer sized by value_size alone is refused before reaching the kernel.
    let mut small = [0u8; 4];
    assert_eq!(m.lookup(&k(1), &mut small).unwrap_err().errno, libc::EINVAL);
    assert_eq!(m.update(&k(1), &[0u8; 4], update_flags::ANY).unwrap_err().errno, libc::EINVAL);
}

#[test]
fn percpu_hash_value_size_rounds_up() {
    require_bpf!();
    let m = KernelMap::create("ph", def(map_type::PERCPU_HASH, 2, 12, 4), None).unwrap();
    assert_eq!(m.user_value_size(), possible_cpus() * 16);
    let value: Vec<u8> = (0..m.user_value_size()).map(|i| (i % 16 < 12) as u8 * i as u8).collect();
    m.update(&[1, 2], &value, update_flags::NOEXIST).unwrap();
    assert_eq!(m.lookup_vec(&[1, 2]).unwrap(), Some(value));
}

#[test]
fn wrong_buffer_sizes_are_einval() {
    require_bpf!();
    let m = KernelMap::create("sz", def(map_type::HASH, 4, 8, 4), None).unwrap();
    let mut out = [0u8; 8];
    assert_eq!(m.lookup(&[1, 2, 3], &mut out).unwrap_err().errno, libc::EINVAL);
    assert_eq!(m.lookup(&k(1), &mut [0u8; 9]).unwrap_err().errno, libc::EINVAL);
    assert_eq!(m.update(&k(1), &[0u8; 7], 0).unwrap_err().errno, libc::EINVAL);
    assert_eq!(m.delete(&[0u8; 5]).unwrap_err().errno, libc::EINVAL);
    assert_eq!(m.next_key(None, &mut [0u8; 3]).unwrap_err().errno, libc::EINVAL);
    let e = m.lookup(&[1], &mut out).unwrap_err();
    assert_eq!(e.op, "BPF_MAP_LOOKUP_ELEM");
}

#[test]
fn freeze_blocks_user_updates() {
    require_bpf!();
    let m = KernelMap::create("frz", def(map_type::ARRAY, 4, 4, 1), None).unwrap();
    m.update(&k(0), &k(42), update_flags::ANY).unwrap();
    m.freeze().unwrap();
    let e = m.update(&k(0), &k(43), update_flags::ANY).unwrap_err();
    assert_eq!((e.op, e.errno), ("BPF_MAP_UPDATE_ELEM", libc::EPERM));
    assert_eq!(m.lookup_vec(&k(0)).unwrap(), Some(k(42).to_vec()), "still readable");
    // A frozen map is no longer writable from user space, so a second freeze is EPERM.
    assert_eq!(m.freeze().unwrap_err().errno, libc::EPERM, "already frozen");
}

#[test]
fn create_errors_come_back_as_errno() {
    require_bpf!();
    // A hash map needs a key; an array needs 4-byte keys.
    let e = KernelMap::create("bad", def(map_type::HASH, 0, 8, 4), None).unwrap_err();
    assert_eq!((e.op, e.errno), ("BPF_MAP_CREATE", libc::EINVAL));
    let e = KernelMap::create("bad", def(map_type::ARRAY, 8, 8, 4), None).unwrap_err();
    assert_eq!(e.errno, libc::EINVAL);
    // A map-in-map without an inner template.
    let e = KernelMap::create("bad", def(map_type::ARRAY_OF_MAPS, 4, 4, 4), None).unwrap_err();
    assert!(e.errno == libc::EBADF || e.errno == libc::EINVAL, "{e}");
    // Unknown flag bits.
    let mut d = def(map_type::ARRAY, 4, 4, 1);
    d.flags = 1 << 30;
    assert_eq!(KernelMap::create("bad", d, None).unwrap_err().errno, libc::EINVAL);
}

#[test]
fn names_and_flags_reach_the_kernel() {
    require_bpf!();
    let mut d = def(map_type::ARRAY, 4, 16, 3);
    d.flags = map_flags::RDONLY_PROG;
    let m = KernelMap::create("my-long.map-name!", d, None).unwrap();
    assert_eq!(m.name(), "my_long.map_nam");
    let info = m.info().unwrap();
    assert_eq!(info.name, "my_long.map_nam");
    assert_eq!(
        (info.map_type, info.key_size, info.value_size, info.max_entries, info.flags),
        (map_type::ARRAY, 4, 16, 3, map_flags::RDONLY_PROG)
    );
    assert_ne!(info.id, 0);
}

#[test]
fn map_in_map_holds_inner_maps() {
    require_bpf!();
    let inner_def = def(map_type::ARRAY, 4, 4, 1);
    let template = KernelMap::create("tmpl", inner_def, None).unwrap();
    let outer =
        KernelMap::create("outer", def(map_type::ARRAY_OF_MAPS, 4, 4, 2), Some(template.fd()))
            .unwrap();
    drop(template);
    let inner = KernelMap::create("inner", inner_def, None).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&inner.fd()) as u32;
    outer.update(&k(1), &fd.to_ne_bytes(), update_flags::ANY).unwrap();
    // From user space a map-in-map value reads back as the inner map's id.
    let id = outer.lookup_vec(&k(1)).unwrap().unwrap();
    assert_eq!(u32::from_ne_bytes(id.try_into().unwrap()), inner.info().unwrap().id);
    assert_eq!(outer.lookup_vec(&k(0)).unwrap(), None);
    // An inner map of another shape is refused.
    let odd = KernelMap::create("odd", def(map_type::ARRAY, 4, 8, 1), None).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&odd.fd()) as u32;
    assert_eq!(outer.update(&k(0), &fd.to_ne_bytes(), 0).unwrap_err().errno, libc::EINVAL);
}
