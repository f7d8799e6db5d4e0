//! Maps in maps: the kernel's update, lookup and delete rules (the rows marked
//! "measured" were observed with `bpf(2)` on Linux 6.18, template `ARRAY(4, 4, 2)`),
//! template matching, handles, lifetimes, and readers racing with replacements.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Weak};
use std::thread;

use spine_abi::map_flags as mf;
use spine_abi::map_type::*;

use super::{errno, get, k32, keys, map, opts};
use crate::{Map, MapDef, MapError, ProgOp};

const NCPUS: usize = 2;

fn arc(t: u32, k: u32, v: u32, n: u32, f: u32) -> Arc<Map> {
    Arc::new(map(t, k, v, n, f, NCPUS))
}

fn outer(t: u32, max: u32, flags: u32, template: &MapDef) -> Map {
    let def = MapDef::new("o", t, 4, 4, max, flags);
    Map::create_outer(def, template, &opts(NCPUS)).expect("create_outer")
}

fn tmpl(t: u32, k: u32, v: u32, n: u32, f: u32) -> MapDef {
    MapDef::new("tmpl", t, k, v, n, f)
}

/// The inner maps of the measured sequence.
struct Inners {
    a1: Arc<Map>,
    a3: Arc<Map>,
    a_vs8: Arc<Map>,
    a_ro: Arc<Map>,
    a_inner: Arc<Map>,
    h: Arc<Map>,
    tmpl_like: Arc<Map>,
}

fn inners() -> Inners {
    Inners {
        a1: arc(ARRAY, 4, 4, 2, 0),
        a3: arc(ARRAY, 4, 4, 3, 0),
        a_vs8: arc(ARRAY, 4, 8, 2, 0),
        a_ro: arc(ARRAY, 4, 4, 2, mf::RDONLY_PROG),
        a_inner: arc(ARRAY, 4, 4, 5, mf::INNER_MAP),
        h: arc(HASH, 4, 4, 2, 0),
        tmpl_like: arc(ARRAY, 4, 4, 2, 0),
    }
}

fn set(o: &Map, k: u32, m: &Arc<Map>, flags: u64) -> i64 {
    errno(o.set_inner(&k32(k), Some(m.clone()), flags))
}

/// Measured: the array_of_maps sequence of the probe, in order.
#[test]
fn array_of_maps_matches_the_kernel() {
    let o = outer(ARRAY_OF_MAPS, 2, 0, &tmpl(ARRAY, 4, 4, 2, 0));
    let i = inners();
    assert_eq!(get(&o, &k32(0)), Err(-2));
    assert_eq!(set(&o, 0, &i.a1, 0), 0);
    assert_eq!(get(&o, &k32(0)).unwrap(), i.a1.id().to_ne_bytes(), "the inner map's id");
    for bad in [&i.a3, &i.a_vs8, &i.a_ro, &i.a_inner, &i.h] {
        assert_eq!(set(&o, 0, bad, 0), -22, "{:?}", bad.def());
    }
    assert_eq!(errno(o.update_user(&k32(0), &3u32.to_ne_bytes(), 0)), -9, "no fds");
    assert_eq!(set(&o, 0, &i.a1, 1), -22, "only BPF_ANY");
    assert_eq!(set(&o, 0, &i.a1, 2), -22);
    assert_eq!(set(&o, 1, &i.a1, 2), -22);
    assert_eq!(set(&o, 1, &i.a1, 3), -22);
    assert_eq!(set(&o, 1, &i.a1, 4), -22);
    assert_eq!(set(&o, 1, &i.a3, 3), -22);
    assert_eq!(set(&o, 9, &i.a1, 0), -7);
    assert_eq!(set(&o, 9, &i.a3, 0), -7, "the index before the inner map");
    assert_eq!(set(&o, 9, &i.a1, 1), -22, "the flags before the index");
    assert_eq!(set(&o, 1, &i.a1, 0), 0);
    assert_eq!(set(&o, 5, &i.a1, 0), -7);
    assert_eq!(set(&o, 5, &i.a3, 0), -7);
    assert_eq!(set(&o, 1, &i.tmpl_like, 0), 0);
    assert_eq!(o.inner(&k32(1)).unwrap().id(), i.tmpl_like.id());
    assert_eq!(o.inner(&k32(0)).unwrap().id(), i.a1.id());
    assert_eq!(keys(&o), [k32(0).to_vec(), k32(1).to_vec()]);
    assert_eq!(errno(o.delete_user(&k32(9))), -7);
    assert_eq!(errno(o.delete_user(&k32(0))), 0);
    assert_eq!(errno(o.delete_user(&k32(0))), -2);
    assert_eq!(errno(o.set_inner(&k32(0), None, 0)), -2);
    assert_eq!(errno(o.set_inner(&k32(1), None, 1)), -22, "a delete takes no flags");
    assert_eq!(keys(&o), [k32(0).to_vec(), k32(1).to_vec()], "every index");
    assert_eq!(o.len(), 1);
    o.try_freeze().unwrap();
    assert_eq!(set(&o, 1, &i.a1, 0), -1);
    assert_eq!(errno(o.delete_user(&k32(1))), -1);
    assert_eq!(errno(o.set_inner(&k32(1), None, 0)), -1);
    assert!(o.inner(&k32(1)).is_some());
}

/// Measured: the hash_of_maps sequence of the probe, in order.
#[test]
fn hash_of_maps_matches_the_kernel() {
    let o = outer(HASH_OF_MAPS, 2, 0, &tmpl(ARRAY, 4, 4, 2, 0));
    let i = inners();
    assert_eq!(get(&o, &k32(0)), Err(-2));
    assert_eq!(set(&o, 0, &i.a1, 0), 0);
    assert_eq!(get(&o, &k32(0)).unwrap(), i.a1.id().to_ne_bytes());
    for bad in [&i.a3, &i.a_vs8, &i.a_ro, &i.a_inner, &i.h] {
        assert_eq!(set(&o, 0, bad, 0), -22, "{:?}", bad.def());
    }
    assert_eq!(set(&o, 0, &i.a1, 1), -17);
    assert_eq!(set(&o, 0, &i.a1, 2), 0);
    assert_eq!(set(&o, 1, &i.a1, 2), -2);
    assert_eq!(set(&o, 1, &i.a1, 3), -22);
    assert_eq!(set(&o, 1, &i.a1, 4), -22);
    assert_eq!(set(&o, 1, &i.a3, 3), -22);
    assert_eq!(set(&o, 9, &i.a1, 0), 0);
    assert_eq!(set(&o, 9, &i.a3, 0), -22, "the inner map before the flags and the key");
    assert_eq!(set(&o, 9, &i.a1, 1), -17);
    assert_eq!(set(&o, 1, &i.a1, 0), -7, "full");
    assert_eq!(set(&o, 5, &i.a1, 0), -7);
    assert_eq!(set(&o, 5, &i.a3, 0), -22);
    assert_eq!(set(&o, 1, &i.tmpl_like, 0), -7);
    assert_eq!(set(&o, 9, &i.tmpl_like, 0), 0, "replacing in a full map");
    assert_eq!(o.inner(&k32(9)).unwrap().id(), i.tmpl_like.id());
    let mut ks = keys(&o);
    ks.sort();
    assert_eq!(ks, [k32(0).to_vec(), k32(9).to_vec()]);
    assert_eq!(errno(o.delete_user(&k32(9))), 0);
    assert_eq!(errno(o.delete_user(&k32(0))), 0);
    assert_eq!(errno(o.delete_user(&k32(0))), -2);
    assert!(keys(&o).is_empty());
    assert_eq!(o.len(), 0);
    o.try_freeze().unwrap();
    assert_eq!(set(&o, 1, &i.a1, 0), -1);
    assert_eq!(errno(o.delete_user(&k32(1))), -1);
}

/// Measured: only a plain array template without `BPF_F_INNER_MAP` fixes `max_entries`;
/// flags are compared exactly (the inner map must carry `INNER_MAP` too).
#[test]
fn template_matching_is_the_kernels() {
    for t in [ARRAY_OF_MAPS, HASH_OF_MAPS] {
        let o = outer(t, 2, 0, &tmpl(ARRAY, 4, 4, 5, mf::INNER_MAP));
        assert_eq!(set(&o, 0, &arc(ARRAY, 4, 4, 5, mf::INNER_MAP), 0), 0);
        assert_eq!(set(&o, 0, &arc(ARRAY, 4, 4, 9, mf::INNER_MAP), 0), 0);
        assert_eq!(set(&o, 0, &arc(ARRAY, 4, 4, 2, 0), 0), -22);
        let o = outer(t, 2, 0, &tmpl(HASH, 4, 4, 2, 0));
        assert_eq!(set(&o, 0, &arc(HASH, 4, 4, 9, 0), 0), 0);
        assert_eq!(set(&o, 0, &arc(HASH, 4, 4, 2, mf::ZERO_SEED), 0), -22);
        assert_eq!(set(&o, 0, &arc(LRU_HASH, 4, 4, 2, 0), 0), -22);
        let same_type_other_size: &[(MapDef, Arc<Map>)] = &[
            (tmpl(RINGBUF, 0, 0, 4096, 0), arc(RINGBUF, 0, 0, 8192, 0)),
            (tmpl(DEVMAP, 4, 4, 2, 0), arc(DEVMAP, 4, 4, 9, 0)),
            (tmpl(DEVMAP_HASH, 4, 4, 2, 0), arc(DEVMAP_HASH, 4, 4, 9, 0)),
            (tmpl(CPUMAP, 4, 4, 2, 0), arc(CPUMAP, 4, 4, 9, 0)),
            (tmpl(PERCPU_ARRAY, 4, 4, 2, 0), arc(PERCPU_ARRAY, 4, 4, 9, 0)),
            (tmpl(LPM_TRIE, 8, 4, 2, mf::NO_PREALLOC), arc(LPM_TRIE, 8, 4, 9, mf::NO_PREALLOC)),
        ];
        for (tm, inner) in same_type_other_size {
            let o = outer(t, 2, 0, tm);
            assert_eq!(set(&o, 0, inner, 0), 0, "{tm:?}");
        }
        // A devmap template is kept with the BPF_F_RDONLY_PROG its creation adds.
        let o = outer(t, 2, 0, &tmpl(DEVMAP, 4, 4, 2, 0));
        assert_eq!(o.inner_template().unwrap().flags, mf::RDONLY_PROG);
        // spine's addition: the inner map must have the outer map's CPUs.
        let o = outer(t, 2, 0, &tmpl(PERCPU_ARRAY, 4, 4, 2, 0));
        let three = Arc::new(map(PERCPU_ARRAY, 4, 4, 2, 0, 3));
        let e = o.set_inner(&k32(0), Some(three), 0).unwrap_err();
        assert!(matches!(e, MapError::InnerMismatch { .. }), "{e}");
        // A map-in-map cannot hold one (nor itself).
        let nested = Arc::new(outer(ARRAY_OF_MAPS, 2, 0, &tmpl(ARRAY, 4, 4, 2, 0)));
        let o = outer(t, 2, 0, &tmpl(ARRAY, 4, 4, 2, 0));
        assert_eq!(set(&o, 0, &nested, 0), -22);
    }
}

/// Maps are shared between workers and the control plane.
#[test]
fn maps_are_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Map>();
    shared::<crate::RingBuf>();
}

#[test]
fn creation_needs_a_template_of_a_nestable_type() {
    let def = MapDef::new("o", ARRAY_OF_MAPS, 4, 4, 2, 0);
    let e = Map::create(def.clone(), &opts(NCPUS)).unwrap_err();
    assert!(matches!(e, MapError::NoInnerTemplate { .. }));
    let pa = tmpl(PROG_ARRAY, 4, 4, 2, 0);
    assert_eq!(errno(Map::create_outer(def.clone(), &pa, &opts(NCPUS))), -524);
    let bad = MapDef::new("h", HASH, 4, 4, 2, 0);
    let e = Map::create_outer(bad, &tmpl(ARRAY, 4, 4, 2, 0), &opts(NCPUS)).unwrap_err();
    assert!(matches!(e, MapError::NotOuter { .. }));
    let plain = map(ARRAY, 4, 4, 2, 0, NCPUS);
    assert_eq!(plain.inner_template(), None);
    let e = plain.set_inner(&k32(0), None, 0).unwrap_err();
    assert!(matches!(e, MapError::NotOuter { .. }));
    assert!(plain.inner(&k32(0)).is_none() && plain.lookup_inner(&k32(0)).is_none());
    assert!(plain.inner_by_slot(plain.lookup(&k32(0), 0).unwrap().as_ptr() as u64).is_none());
    // Too many slots for the byte budget.
    let big = MapDef::new("big", ARRAY_OF_MAPS, 4, 4, 1 << 30, 0);
    let e = Map::create_outer(big, &tmpl(ARRAY, 4, 4, 2, 0), &opts(NCPUS)).unwrap_err();
    assert_eq!(e.errno(), -12);
}

#[test]
fn program_lookups_return_opaque_handles() {
    for t in [ARRAY_OF_MAPS, HASH_OF_MAPS] {
        let o = outer(t, 4, 0, &tmpl(ARRAY, 4, 8, 1, 0));
        assert!(o.value_spans().is_empty(), "programs cannot dereference a handle");
        assert_eq!(o.array_layout(), None);
        let (x, y) = (arc(ARRAY, 4, 8, 1, 0), arc(ARRAY, 4, 8, 1, 0));
        x.update_user(&k32(0), &1u64.to_ne_bytes(), 0).unwrap();
        y.update_user(&k32(0), &2u64.to_ne_bytes(), 0).unwrap();
        assert_eq!(o.lookup(&k32(1), 0), None);
        o.set_inner(&k32(1), Some(x.clone()), 0).unwrap();
        o.set_inner(&k32(3), Some(y.clone()), 0).unwrap();
        let hx = o.lookup(&k32(1), 1).unwrap();
        let hy = o.lookup(&k32(3), 0).unwrap();
        assert_ne!(hx, hy);
        assert_eq!(hx.as_ptr() as usize % 8, 0);
        assert!(Arc::ptr_eq(&o.inner_by_slot(hx.as_ptr() as u64).unwrap(), &x));
        assert!(Arc::ptr_eq(&o.inner_by_slot(hy.as_ptr() as u64).unwrap(), &y));
        let r = o.lookup_inner(&k32(3)).unwrap();
        assert_eq!((r.handle, r.map.id()), (hy, y.id()));
        for bad in [0, 1, hx.as_ptr() as u64 + 1, hx.as_ptr() as u64 + 8, u64::MAX] {
            assert!(o.inner_by_slot(bad).is_none(), "{bad:#x}");
        }
        assert_eq!(o.lookup(&k32(1), 2), None, "cpu out of range");
        assert_eq!(o.lookup(&[1, 2], 0), None, "short key");
        let e = o.update(&k32(1), &[0; 4], 0, 0).unwrap_err();
        assert_eq!(e, MapError::NotFromProgram { map: "o".into(), op: ProgOp::Update });
        assert_eq!(errno(o.delete(&k32(1), 0)), -22);
        // The same key keeps its array handle across replacements.
        o.set_inner(&k32(1), Some(y.clone()), 0).unwrap();
        let again = o.lookup(&k32(1), 0).unwrap();
        if t == ARRAY_OF_MAPS {
            assert_eq!(again, hx);
        }
        assert!(Arc::ptr_eq(&o.inner_by_slot(again.as_ptr() as u64).unwrap(), &y));
        o.delete_user(&k32(1)).unwrap();
        assert!(o.inner_by_slot(again.as_ptr() as u64).is_none(), "emptied");
        assert_eq!(o.lookup(&k32(1), 0), None);
    }
}

/// Replaced and deleted inner maps are freed unless someone still holds them, and the
/// outer map releases the rest when it goes.
#[test]
fn inner_maps_live_as_long_as_their_holders() {
    for t in [ARRAY_OF_MAPS, HASH_OF_MAPS] {
        let o = outer(t, 2, 0, &tmpl(ARRAY, 4, 4, 1, 0));
        let first = arc(ARRAY, 4, 4, 1, 0);
        let w_first: Weak<Map> = Arc::downgrade(&first);
        o.set_inner(&k32(0), Some(first), 0).unwrap();
        let held = o.lookup_inner(&k32(0)).unwrap();
        o.set_inner(&k32(0), Some(arc(ARRAY, 4, 4, 1, 0)), 0).unwrap();
        assert!(w_first.upgrade().is_some(), "a worker still holds it");
        drop(held);
        assert!(w_first.upgrade().is_none(), "freed once released");
        let second = o.inner(&k32(0)).unwrap();
        let w_second = Arc::downgrade(&second);
        drop(second);
        let third = arc(ARRAY, 4, 4, 1, 0);
        let w_third = Arc::downgrade(&third);
        o.set_inner(&k32(1), Some(third), 0).unwrap();
        o.delete_user(&k32(0)).unwrap();
        assert!(w_second.upgrade().is_none(), "deleted and freed");
        assert!(w_third.upgrade().is_some());
        drop(o);
        assert!(w_third.upgrade().is_none(), "the outer map released it");
    }
}

/// Measured with BPF_F_ZERO_SEED: a hash_of_maps rewrites an existing key's entry where
/// it is (keys 6 and 5 share a bucket; a plain hash map would move 6 to its head).
#[test]
fn hash_of_maps_replaces_in_place() {
    let t = tmpl(ARRAY, 4, 4, 2, 0);
    let o =
        Map::create_outer(MapDef::new("o", HASH_OF_MAPS, 4, 4, 3, mf::ZERO_SEED), &t, &opts(NCPUS))
            .unwrap();
    let h = map(HASH, 4, 4, 3, mf::ZERO_SEED, NCPUS);
    let order = |m: &Map| -> Vec<u32> {
        keys(m).iter().map(|k| u32::from_ne_bytes(k[..].try_into().unwrap())).collect()
    };
    for k in [6, 0, 5] {
        o.set_inner(&k32(k), Some(arc(ARRAY, 4, 4, 2, 0)), 0).unwrap();
        h.update_user(&k32(k), &[0; 4], 0).unwrap();
    }
    assert_eq!((order(&o), order(&h)), (vec![0, 5, 6], vec![0, 5, 6]));
    o.set_inner(&k32(6), Some(arc(ARRAY, 4, 4, 2, 0)), 2).unwrap();
    h.update_user(&k32(6), &[0; 4], 2).unwrap();
    assert_eq!((order(&o), order(&h)), (vec![0, 5, 6], vec![0, 6, 5]));
    // The user-space access flags are not part of the match (the kernel drops them
    // from map_flags).
    assert_eq!(set(&o, 0, &arc(ARRAY, 4, 4, 2, mf::RDONLY), 0), 0);
    assert_eq!(set(&o, 0, &arc(ARRAY, 4, 4, 2, mf::WRONLY), 0), 0);
}

/// A hash_of_maps gives a key a fresh slot on every update; failed updates give theirs
/// back, so a full map keeps working through thousands of replacements.
#[test]
fn hash_of_maps_slots_are_recycled() {
    let o = outer(HASH_OF_MAPS, 3, 0, &tmpl(ARRAY, 4, 4, 1, 0));
    for k in 0..3 {
        o.set_inner(&k32(k), Some(arc(ARRAY, 4, 4, 1, 0)), 0).unwrap();
    }
    for round in 0..2000u32 {
        let m = arc(ARRAY, 4, 4, 1, 0);
        assert_eq!(set(&o, round % 3, &m, 0), 0);
        assert_eq!(set(&o, 100 + round, &m, 0), -7, "full");
        assert_eq!(set(&o, round % 3, &m, 1), -17);
        assert!(Arc::ptr_eq(&o.inner(&k32(round % 3)).unwrap(), &m));
    }
    assert_eq!(o.len(), 3);
}

/// Workers resolve inner maps and read their values while the control plane keeps
/// replacing them: every value read belongs to the map the worker resolved (a freed or
/// reused map would show another map's tag), and every map is freed at the end.
#[test]
fn readers_never_see_a_freed_inner_map() {
    for t in [ARRAY_OF_MAPS, HASH_OF_MAPS] {
        let o = Arc::new(outer(t, 4, 0, &tmpl(ARRAY, 4, 8, 16, 0)));
        let made = Arc::new(std::sync::Mutex::new(Vec::<Weak<Map>>::new()));
        let next_tag = Arc::new(AtomicU64::new(1));
        let fresh = {
            let (made, next_tag) = (made.clone(), next_tag.clone());
            move || {
                let m = arc(ARRAY, 4, 8, 16, 0);
                let tag = next_tag.fetch_add(1, Relaxed);
                for i in 0..16 {
                    m.update_user(&k32(i), &(tag << 8 | u64::from(i)).to_ne_bytes(), 0).unwrap();
                }
                made.lock().unwrap().push(Arc::downgrade(&m));
                m
            }
        };
        for k in 0..4 {
            o.set_inner(&k32(k), Some(fresh()), 0).unwrap();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..NCPUS)
            .map(|cpu| {
                let (o, stop) = (o.clone(), stop.clone());
                thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Relaxed) || n < 1000 {
                        let key = k32((n % 4) as u32);
                        let r = o.lookup_inner(&key).expect("every key always holds a map");
                        let first = r.map.lookup(&k32(0), cpu).unwrap();
                        let tag = r.map.load_u64(first) >> 8;
                        for i in 0..16u32 {
                            let p = r.map.lookup(&k32(i), cpu).unwrap();
                            assert_eq!(r.map.load_u64(p), tag << 8 | u64::from(i));
                        }
                        // An array slot always holds a map here; a hash_of_maps slot is
                        // emptied when its key moves to a fresh one.
                        let again = o.inner_by_slot(r.handle.as_ptr() as u64);
                        assert!(t == HASH_OF_MAPS || again.is_some(), "an occupied slot");
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for round in 0..3000u32 {
            o.set_inner(&k32(round % 4), Some(fresh()), 0).unwrap();
            if round % 64 == 0 {
                thread::yield_now();
            }
        }
        stop.store(true, Relaxed);
        for r in readers {
            assert!(r.join().expect("reader panicked") >= 1000);
        }
        drop(o);
        let made = made.lock().unwrap();
        assert_eq!(made.len(), 3004);
        assert!(made.iter().all(|w| w.upgrade().is_none()), "every inner map freed");
    }
}
