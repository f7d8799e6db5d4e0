//! spine's devmaps, cpumaps and maps in maps against the running kernel's: creation
//! errnos and random user-side sequences, replayed on both (`KernelMap`, bpf(2)). Needs
//! root; without bpf(2) each test says SKIP loudly and passes.
//!
//! Known differences, left out of the sequences: spine accepts any non-zero ifindex
//! (the kernel wants a device; only `lo`, ifindex 1, is used here), and a map-in-map
//! value is set with `set_inner` rather than an fd.
//!
//! Every kernel map here is small (the machine has limited memory for BPF objects):
//! rows with huge `max_entries` are only those the kernel refuses before allocating.

mod common;

use std::os::fd::AsRawFd;
use std::sync::Arc;

use common::{kerr, require_bpf, serr};
use proptest::prelude::*;
use spine_abi::map_flags as mf;
use spine_abi::map_type::*;
use spine_maps::{Map, MapDef, MapOptions};
use spine_sys::KernelMap;

fn kdef(d: &MapDef) -> spine_sys::MapDef {
    let mut k = spine_sys::MapDef::new(d.map_type, d.key_size, d.value_size, d.max_entries);
    k.flags = d.flags;
    k
}

/// Options with the kernel's possible CPUs, so per-CPU rules and cpumap keys agree.
fn opts() -> MapOptions {
    MapOptions { ncpus: spine_sys::possible_cpus(), seed: 7, ..MapOptions::default() }
}

fn def(t: u32, k: u32, v: u32, n: u32, f: u32) -> MapDef {
    MapDef::new("d", t, k, v, n, f)
}

fn k32(i: u32) -> [u8; 4] {
    i.to_ne_bytes()
}

/// Creates `d` on both sides and compares the errno and, on success, the flags the
/// kernel keeps.
fn compare_create(d: &MapDef, template: Option<&MapDef>) {
    let kt = template.map(|t| KernelMap::create("t", kdef(t), None).expect("template"));
    let k = KernelMap::create("d", kdef(d), kt.as_ref().map(|t| t.fd()));
    let s = match template {
        Some(t) => Map::create_outer(d.clone(), t, &opts()),
        None => Map::create(d.clone(), &opts()),
    };
    let ke = k.as_ref().map_or_else(|e| -i64::from(e.errno), |_| 0);
    let se = s.as_ref().map_or_else(spine_maps::MapError::errno, |_| 0);
    assert_eq!(se, ke, "{d:?} template {template:?}");
    if let (Ok(k), Ok(s)) = (k, s) {
        // The kernel keeps the user-space access flags on the file, not in map_flags.
        let kept = s.def().flags & !(mf::RDONLY | mf::WRONLY);
        assert_eq!(kept, k.info().unwrap().flags, "{d:?}");
    }
}

#[test]
fn creation_errnos_match_the_kernel() {
    require_bpf!();
    let rows = [
        def(DEVMAP, 4, 4, 4, 0),
        def(DEVMAP, 4, 8, 4, mf::NUMA_NODE),
        def(DEVMAP, 4, 12, 4, 0),
        def(DEVMAP, 4, 0, 4, 0),
        def(DEVMAP, 8, 4, 4, 0),
        def(DEVMAP, 4, 4, 0, 0),
        def(DEVMAP, 4, 4, 4, mf::RDONLY),
        def(DEVMAP, 4, 4, 4, mf::WRONLY),
        def(DEVMAP, 4, 4, 4, mf::RDONLY | mf::WRONLY),
        def(DEVMAP, 4, 4, 4, mf::RDONLY_PROG),
        def(DEVMAP, 4, 4, 4, mf::WRONLY_PROG),
        def(DEVMAP, 4, 4, 4, mf::NO_PREALLOC),
        def(DEVMAP, 4, 4, 4, mf::ZERO_SEED),
        def(DEVMAP, 4, 4, 4, mf::MMAPABLE),
        def(DEVMAP, 4, 4, 4, mf::INNER_MAP),
        def(DEVMAP_HASH, 4, 4, 4, 0),
        def(DEVMAP_HASH, 4, 8, 4, mf::RDONLY),
        def(DEVMAP_HASH, 4, 12, 4, 0),
        def(DEVMAP_HASH, 8, 4, 4, 0),
        def(DEVMAP_HASH, 4, 4, 0, 0),
        def(DEVMAP_HASH, 4, 4, 4, mf::RDONLY_PROG),
        def(DEVMAP_HASH, 4, 4, 4, mf::NO_PREALLOC),
        def(DEVMAP_HASH, 4, 4, (1 << 31) + 1, 0),
        def(DEVMAP_HASH, 4, 4, u32::MAX, 0),
        def(CPUMAP, 4, 4, 4, 0),
        def(CPUMAP, 4, 8, 4, mf::NUMA_NODE),
        def(CPUMAP, 4, 12, 4, 0),
        def(CPUMAP, 4, 0, 4, 0),
        def(CPUMAP, 8, 4, 4, 0),
        def(CPUMAP, 4, 4, 0, 0),
        def(CPUMAP, 4, 4, 256, 0),
        def(CPUMAP, 4, 4, 257, 0),
        def(CPUMAP, 4, 4, u32::MAX, 0),
        def(CPUMAP, 4, 4, 4, mf::RDONLY),
        def(CPUMAP, 4, 4, 4, mf::WRONLY),
        def(CPUMAP, 4, 4, 4, mf::RDONLY_PROG),
        def(CPUMAP, 8, 4, 257, 0),
        def(CPUMAP, 4, 4, 257, mf::RDONLY),
        def(RINGBUF, 0, 0, 4096, 0),
        def(RINGBUF, 0, 0, 8192, mf::NUMA_NODE),
        def(RINGBUF, 0, 0, 2048, 0),
        def(RINGBUF, 0, 0, 12288, 0),
        def(RINGBUF, 0, 0, 0, 0),
        def(RINGBUF, 4, 0, 4096, 0),
        def(RINGBUF, 0, 4, 4096, 0),
        def(RINGBUF, 4, 0, 100, 0),
        def(RINGBUF, 0, 0, 4096, mf::RDONLY),
        def(RINGBUF, 0, 0, 4096, mf::WRONLY),
        def(RINGBUF, 0, 0, 4096, mf::RDONLY_PROG),
        def(RINGBUF, 0, 0, 4096, mf::MMAPABLE),
        def(RINGBUF, 0, 0, 4096, mf::NO_PREALLOC),
        def(RINGBUF, 0, 0, 4096, 1 << 16),
        def(ARRAY_OF_MAPS, 4, 4, 4, 0),
        def(HASH_OF_MAPS, 4, 4, 4, 0),
    ];
    for d in &rows {
        compare_create(d, None);
    }
}

#[test]
fn outer_creation_errnos_match_the_kernel() {
    require_bpf!();
    let array = def(ARRAY, 4, 4, 1, 0);
    let outers = [
        def(ARRAY_OF_MAPS, 4, 4, 4, 0),
        def(ARRAY_OF_MAPS, 4, 8, 4, 0),
        def(ARRAY_OF_MAPS, 8, 4, 4, 0),
        def(ARRAY_OF_MAPS, 4, 4, 0, 0),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::RDONLY),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::RDONLY | mf::WRONLY),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::RDONLY_PROG),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::WRONLY_PROG),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::NUMA_NODE),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::MMAPABLE),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::INNER_MAP),
        def(ARRAY_OF_MAPS, 4, 4, 4, mf::NO_PREALLOC),
        def(HASH_OF_MAPS, 4, 4, 4, 0),
        def(HASH_OF_MAPS, 8, 4, 4, mf::ZERO_SEED),
        def(HASH_OF_MAPS, 0, 4, 4, 0),
        def(HASH_OF_MAPS, 4, 8, 4, 0),
        def(HASH_OF_MAPS, 4, 4, 0, 0),
        def(HASH_OF_MAPS, 4, 4, 4, mf::RDONLY_PROG),
        def(HASH_OF_MAPS, 4, 4, 4, mf::WRONLY_PROG),
        def(HASH_OF_MAPS, 4, 4, 4, mf::NO_PREALLOC),
        def(HASH_OF_MAPS, 4, 4, 4, mf::NO_COMMON_LRU),
        def(HASH_OF_MAPS, 4, 4, 4, mf::INNER_MAP),
        def(HASH_OF_MAPS, 4, 4, (1 << 27) + 1, mf::NO_PREALLOC),
    ];
    for d in &outers {
        compare_create(d, Some(&array));
    }
    let templates = [
        def(HASH, 4, 4, 4, 0),
        def(PERCPU_ARRAY, 4, 4, 4, 0),
        def(PERCPU_HASH, 4, 4, 4, 0),
        def(LRU_HASH, 4, 4, 4, mf::NO_COMMON_LRU),
        def(LRU_PERCPU_HASH, 4, 4, 4, 0),
        def(LPM_TRIE, 8, 4, 4, mf::NO_PREALLOC),
        def(DEVMAP, 4, 4, 4, 0),
        def(DEVMAP_HASH, 4, 8, 4, 0),
        def(CPUMAP, 4, 4, 4, 0),
        def(RINGBUF, 0, 0, 4096, 0),
        def(PROG_ARRAY, 4, 4, 4, 0),
        def(ARRAY, 4, 4, 4, mf::INNER_MAP),
    ];
    for t in &templates {
        compare_create(&def(ARRAY_OF_MAPS, 4, 4, 2, 0), Some(t));
        compare_create(&def(HASH_OF_MAPS, 4, 4, 2, 0), Some(t));
        // The template's own errors come after the outer map's.
        compare_create(&def(HASH_OF_MAPS, 4, 4, (1 << 27) + 1, mf::NO_PREALLOC), Some(t));
    }
}

// ---- random user-side sequences ----

#[derive(Debug, Clone)]
enum Op {
    /// `first` is the ifindex or qsize (or, for maps in maps, the inner map's pool
    /// index); `fd > 0` stands for an fd that names no program.
    Update {
        key: u32,
        first: u32,
        fd: bool,
        neg_fd: bool,
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
        6 => (0..keys, prop::sample::select(firsts), any::<bool>(), any::<bool>(),
              prop_oneof![6 => 0..3u64, 1 => 3..6u64])
            .prop_map(|(key, first, fd, neg_fd, flags)| {
                // A program fd only one time in four.
                let fd = fd && neg_fd;
                Op::Update { key, first, fd, neg_fd: neg_fd && !fd, flags }
            }),
        2 => (0..keys).prop_map(|key| Op::Delete { key }),
        3 => (0..keys).prop_map(|key| Op::Lookup { key }),
        1 => Just(Op::Keys),
    ];
    prop::collection::vec(op, 1..60)
}

/// Every key in `next_key` order, from the kernel.
fn kernel_keys(k: &KernelMap) -> Vec<Vec<u8>> {
    k.keys().expect("kernel next_key")
}

fn spine_keys(m: &Map) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![];
    let mut next = vec![0u8; m.def().key_size as usize];
    while m.next_key(out.last().map(Vec::as_slice), &mut next).is_ok() {
        out.push(next.clone());
        assert!(out.len() <= 1 << 16, "next_key does not end");
    }
    out
}

/// devmap, devmap_hash and cpumap: both sides get the same bytes.
fn entries_case(t: u32, value_size: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let d = MapDef::new("e", t, 4, value_size, 5, 0);
    let k = KernelMap::create("e", kdef(&d), None).expect("kernel map");
    let s = Map::create(d, &opts()).expect("spine map");
    // An fd that is open but names a map, not a program.
    let not_prog = k.fd().as_raw_fd();
    for op in &ops {
        match *op {
            Op::Update { key, first, fd, neg_fd, flags } => {
                let mut v = first.to_ne_bytes().to_vec();
                if value_size == 8 {
                    let fd = if fd {
                        not_prog
                    } else if neg_fd {
                        -1
                    } else {
                        0
                    };
                    v.extend(fd.to_ne_bytes());
                }
                let ke = kerr(k.update(&k32(key), &v, flags));
                prop_assert_eq!(serr(s.update_user(&k32(key), &v, flags)), ke, "{:?}", op);
            }
            Op::Delete { key } => {
                let ke = kerr(k.delete(&k32(key)));
                prop_assert_eq!(serr(s.delete_user(&k32(key))), ke, "{:?}", op);
            }
            Op::Lookup { key } => {
                let kv = k.lookup_vec(&k32(key)).expect("kernel lookup");
                let mut out = vec![0u8; value_size as usize];
                let sv = s.lookup_user(&k32(key), &mut out).ok().map(|()| out);
                prop_assert_eq!(sv, kv, "{:?}", op);
            }
            Op::Keys => prop_assert_eq!(spine_keys(&s), kernel_keys(&k)),
        }
    }
    prop_assert_eq!(spine_keys(&s), kernel_keys(&k));
    Ok(())
}

/// Maps in maps: a pool of four inner maps on each side; lookups compare which pool map
/// a key holds.
fn outer_case(t: u32, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let template = def(ARRAY, 4, 8, 2, 0);
    let d = MapDef::new("o", t, 4, 4, 3, mf::ZERO_SEED * u32::from(t == HASH_OF_MAPS));
    let kt = KernelMap::create("t", kdef(&template), None).expect("template");
    let k = KernelMap::create("o", kdef(&d), Some(kt.fd())).expect("kernel outer");
    let s = Map::create_outer(d, &template, &opts()).expect("spine outer");
    // The second differs from the template only in a user-space access flag, which the
    // kernel does not compare; the last has another size.
    let shapes = [(2, 0), (2, mf::RDONLY), (2, mf::WRONLY), (3, 0)];
    let kpool: Vec<KernelMap> = shapes
        .iter()
        .map(|&(n, f)| KernelMap::create("i", kdef(&def(ARRAY, 4, 8, n, f)), None).unwrap())
        .collect();
    let spool: Vec<Arc<Map>> = shapes
        .iter()
        .map(|&(n, f)| Arc::new(Map::create(def(ARRAY, 4, 8, n, f), &opts()).unwrap()))
        .collect();
    let kids: Vec<u32> = kpool.iter().map(|m| m.info().unwrap().id).collect();
    let sids: Vec<u32> = spool.iter().map(|m| m.id()).collect();
    let which = |ids: &[u32], v: &[u8]| ids.iter().position(|&i| i.to_ne_bytes() == v);
    for op in &ops {
        match *op {
            Op::Update { key, first, flags, .. } => {
                let i = first as usize % 4;
                let fd = (kpool[i].fd().as_raw_fd() as u32).to_ne_bytes();
                let ke = kerr(k.update(&k32(key), &fd, flags));
                let se = serr(s.set_inner(&k32(key), Some(spool[i].clone()), flags));
                prop_assert_eq!(se, ke, "{:?}", op);
            }
            Op::Delete { key } => {
                let ke = kerr(k.delete(&k32(key)));
                prop_assert_eq!(serr(s.delete_user(&k32(key))), ke, "{:?}", op);
            }
            Op::Lookup { key } => {
                let kv = k.lookup_vec(&k32(key)).expect("kernel lookup");
                let mut out = [0u8; 4];
                let sv = s.lookup_user(&k32(key), &mut out).ok().map(|()| out);
                let kw = kv.map(|v| which(&kids, &v));
                let sw = sv.map(|v| which(&sids, &v));
                prop_assert_eq!(sw, kw, "{:?}", op);
            }
            Op::Keys => prop_assert_eq!(spine_keys(&s), kernel_keys(&k)),
        }
    }
    prop_assert_eq!(spine_keys(&s), kernel_keys(&k));
    Ok(())
}

/// Whether the kernel is usable (said once, loudly, when not): a proptest body cannot
/// `return` a SKIP itself.
fn kernel() -> bool {
    static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *USABLE.get_or_init(|| match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIP: bpf(2) unavailable: {e}");
            false
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn devmap_sequences_match_the_kernel(ops in ops(7, vec![0, 1])) {
        if kernel() {
            entries_case(DEVMAP, 8, ops.clone())?;
            entries_case(DEVMAP, 4, ops)?;
        }
    }

    #[test]
    fn devmap_hash_sequences_match_the_kernel(ops in ops(12, vec![0, 1])) {
        if kernel() {
            entries_case(DEVMAP_HASH, 8, ops.clone())?;
            entries_case(DEVMAP_HASH, 4, ops)?;
        }
    }

    #[test]
    fn cpumap_sequences_match_the_kernel(ops in ops(7, vec![0, 1, 64, 16384, 16385])) {
        if kernel() {
            entries_case(CPUMAP, 8, ops.clone())?;
            entries_case(CPUMAP, 4, ops)?;
        }
    }

    #[test]
    fn array_of_maps_sequences_match_the_kernel(ops in ops(5, vec![0, 1, 2, 3])) {
        if kernel() {
            outer_case(ARRAY_OF_MAPS, ops)?;
        }
    }

    #[test]
    fn hash_of_maps_sequences_match_the_kernel(ops in ops(8, vec![0, 1, 2, 3])) {
        if kernel() {
            outer_case(HASH_OF_MAPS, ops)?;
        }
    }
}
