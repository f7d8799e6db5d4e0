//! spine's queue and stack maps against the running kernel's: creation errnos, and
//! random user-side sequences (update = push, lookup = peek, lookup-and-delete = pop,
//! delete and get-next-key) replayed on both through bpf(2) (`KernelMap`), comparing
//! every errno and every value read. Needs root; without bpf(2) each test says SKIP
//! loudly and passes.

mod common;

use common::{kerr, require_bpf, serr};
use proptest::prelude::*;
use spine_abi::map_flags as mf;
use spine_abi::map_type::{QUEUE, STACK};
use spine_maps::{Map, MapDef, MapOptions};
use spine_sys::KernelMap;

fn kdef(d: &MapDef) -> spine_sys::MapDef {
    let mut k = spine_sys::MapDef::new(d.map_type, d.key_size, d.value_size, d.max_entries);
    k.flags = d.flags;
    k
}

fn def(t: u32, k: u32, v: u32, n: u32, f: u32) -> MapDef {
    MapDef::new("q", t, k, v, n, f)
}

#[test]
fn queue_and_stack_creation_errnos_match_the_kernel() {
    require_bpf!();
    for t in [QUEUE, STACK] {
        let rows = [
            def(t, 0, 4, 8, 0),
            def(t, 0, 1, 1, 0),
            def(t, 0, 13, 3, mf::NUMA_NODE),
            def(t, 4, 4, 8, 0),
            def(t, 0, 0, 8, 0),
            def(t, 0, 4, 0, 0),
            def(t, 0, 4, 8, mf::RDONLY),
            def(t, 0, 4, 8, mf::WRONLY),
            def(t, 0, 4, 8, mf::RDONLY | mf::WRONLY),
            def(t, 0, 4, 8, mf::RDONLY_PROG),
            def(t, 0, 4, 8, mf::WRONLY_PROG),
            def(t, 0, 4, 8, mf::RDONLY_PROG | mf::WRONLY_PROG),
            def(t, 0, 4, 8, mf::NO_PREALLOC),
            def(t, 0, 4, 8, mf::ZERO_SEED),
            def(t, 0, 4, 8, mf::MMAPABLE),
            def(t, 0, 4, 8, mf::INNER_MAP),
            def(t, 0, 4, 8, mf::NO_COMMON_LRU),
            def(t, 0, (4 << 20) + 1, 1, 0),
        ];
        for d in rows {
            let k = KernelMap::create("q", kdef(&d), None);
            let s = Map::create(d.clone(), &MapOptions::default());
            assert_eq!(serr(s), kerr(k), "{d:?}");
        }
    }
}

/// 0, or the negative errno, `ENOENT` included, of a kernel read.
fn found(r: Result<bool, spine_sys::SysError>) -> i64 {
    match r {
        Ok(true) => 0,
        Ok(false) => -2,
        Err(e) => -i64::from(e.errno),
    }
}

/// One user-space operation.
#[derive(Debug, Clone)]
enum Op {
    Push { value: u8, flags: u64 },
    Peek,
    Pop { flags: u64 },
    Delete,
    NextKey,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<u8>(), prop_oneof![Just(0u64), Just(1), Just(2), Just(3), Just(4)])
            .prop_map(|(value, flags)| Op::Push { value, flags }),
        2 => Just(Op::Peek),
        3 => prop_oneof![4 => Just(0u64), 1 => Just(4), 1 => Just(1)]
            .prop_map(|flags| Op::Pop { flags }),
        1 => Just(Op::Delete),
        1 => Just(Op::NextKey),
    ]
}

/// Replays `ops` on a fresh kernel map and spine map of type `t`, comparing as it goes.
fn replay(t: u32, value_size: u32, max: u32, ops: &[Op]) {
    let d = def(t, 0, value_size, max, 0);
    let k = KernelMap::create("q", kdef(&d), None).expect("kernel map");
    let s = Map::create(d, &MapOptions::default()).expect("spine map");
    let n = value_size as usize;
    for (i, op) in ops.iter().enumerate() {
        match *op {
            Op::Push { value, flags } => {
                let v: Vec<u8> = (0..n).map(|j| value.wrapping_add(j as u8)).collect();
                let (ke, se) =
                    (kerr(k.update(&[], &v, flags)), serr(s.update_user(&[], &v, flags)));
                assert_eq!(se, ke, "op {i} {op:?}");
            }
            Op::Peek | Op::Pop { .. } => {
                let (mut kv, mut sv) = (vec![0xaa; n], vec![0xaa; n]);
                let (ke, se) = match *op {
                    Op::Peek => (found(k.lookup(&[], &mut kv)), serr(s.lookup_user(&[], &mut sv))),
                    Op::Pop { flags } => (
                        found(k.lookup_and_delete(&[], &mut kv, flags)),
                        serr(s.lookup_and_delete_user(&[], &mut sv, flags)),
                    ),
                    _ => unreachable!(),
                };
                assert_eq!(se, ke, "op {i} {op:?}");
                if ke == 0 {
                    assert_eq!(sv, kv, "op {i} {op:?}: value");
                }
            }
            Op::Delete => {
                assert_eq!(serr(s.delete_user(&[])), kerr(k.delete(&[])), "op {i} {op:?}");
            }
            Op::NextKey => {
                let ke = found(k.next_key(None, &mut []));
                assert_eq!(serr(s.next_key(None, &mut [])), ke, "op {i} {op:?}");
            }
        }
        assert!(s.len() <= max as usize);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn queue_sequences_match_the_kernel(
        value_size in prop_oneof![Just(1u32), Just(4), Just(13)],
        max in 1u32..6,
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        if spine_sys::probe().is_err() {
            return Ok(());
        }
        replay(QUEUE, value_size, max, &ops);
    }

    #[test]
    fn stack_sequences_match_the_kernel(
        value_size in prop_oneof![Just(1u32), Just(4), Just(13)],
        max in 1u32..6,
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        if spine_sys::probe().is_err() {
            return Ok(());
        }
        replay(STACK, value_size, max, &ops);
    }
}

#[test]
fn a_frozen_or_read_only_queue_refuses_pops_as_the_kernel() {
    require_bpf!();
    for flags in [0, mf::RDONLY, mf::WRONLY] {
        let d = def(QUEUE, 0, 4, 4, flags);
        let k = KernelMap::create("q", kdef(&d), None).expect("kernel map");
        let s = Map::create(d, &MapOptions::default()).expect("spine map");
        let v = 7u32.to_ne_bytes();
        assert_eq!(serr(s.update_user(&[], &v, 0)), kerr(k.update(&[], &v, 0)), "{flags:#x}");
        if flags == 0 {
            k.freeze().unwrap();
            s.try_freeze().unwrap();
        }
        let (mut kv, mut sv) = ([0u8; 4], [0u8; 4]);
        let ke = found(k.lookup_and_delete(&[], &mut kv, 0));
        assert_eq!(serr(s.lookup_and_delete_user(&[], &mut sv, 0)), ke, "{flags:#x}");
        let ke = found(k.lookup(&[], &mut kv));
        assert_eq!(serr(s.lookup_user(&[], &mut sv)), ke, "{flags:#x}");
        if ke == 0 {
            assert_eq!(sv, kv, "{flags:#x}");
        }
    }
}
