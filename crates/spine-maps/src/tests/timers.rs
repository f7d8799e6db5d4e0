//! `bpf_timer`s through [`Map`]: a timer pointer names its element, and every way an
//! element goes frees its timer (the kernel's `bpf_obj_free_fields`).

use super::{k32, opts};
use crate::{Map, MapDef, TimerCallback};
use spine_abi::map_type as mt;
use spine_abi::timer::CLOCK_MONOTONIC;

const CB: TimerCallback = TimerCallback { owner: 1, pc: 3 };

fn timer_map(t: u32, value: u32, max: u32, off: u32) -> Map {
    let def = MapDef::new("timers", t, 4, value, max, 0).with_timer(Some(off));
    Map::create(def, &opts(2)).expect("create")
}

/// Arms the timer of `key`'s value (which must exist), returning its element.
fn arm(m: &Map, key: u32) -> u32 {
    let v = m.lookup(&k32(key), 0).expect("element");
    let elem = m.timer_elem(v.as_ptr() as u64 + u64::from(m.def().timer.unwrap())).expect("elem");
    let t = m.timers().expect("timers");
    assert_eq!(t.init(elem, CLOCK_MONOTONIC), 0);
    assert_eq!(t.set_callback(elem, CB), 0);
    assert_eq!(t.start(elem, 10, 0, 0, 0), 0);
    elem
}

#[test]
fn a_timer_pointer_names_its_element_only_at_the_timer_offset() {
    let m = timer_map(mt::ARRAY, 40, 4, 16);
    let v2 = m.lookup(&k32(2), 0).expect("element 2").as_ptr() as u64;
    assert_eq!(m.timer_elem(v2 + 16), Some(2));
    assert_eq!(m.timer_elem(v2), None, "the value's start is not its timer");
    assert_eq!(m.timer_elem(v2 + 8), None);
    assert_eq!(m.timer_elem(v2 + 16 + 40 * 4), None, "past the last element");
    let mut key = [0u8; 4];
    assert_eq!(m.timer_target(2, &mut key).map(|p| p.as_ptr() as u64), Some(v2));
    assert_eq!(key, k32(2));
    let plain = super::map(mt::ARRAY, 4, 40, 4, 0, 1);
    assert!(plain.timers().is_none() && plain.timer_elem(v2 + 16).is_none());
}

#[test]
fn an_array_update_frees_the_elements_timer() {
    let m = timer_map(mt::ARRAY, 24, 4, 8);
    let t = m.timers().expect("timers");
    let e1 = arm(&m, 1);
    let e3 = arm(&m, 3);
    m.update(&k32(1), &[0xff; 24], 0, 0).expect("program update");
    assert!(!t.is_armed(e1) && t.is_armed(e3));
    assert_eq!(t.init(e1, CLOCK_MONOTONIC), 0, "uninitialised by the update");
    m.update_user(&k32(3), &[0xff; 24], 0).expect("user update");
    assert!(!t.is_armed(e3));
    assert_eq!(t.next_expiry(), None);
    // The timer field reads as zeros from user space, whatever was written over it.
    let mut v = [0u8; 24];
    m.lookup_user(&k32(3), &mut v).expect("lookup");
    assert_eq!(v[..8], [0xff; 8]);
    assert_eq!(v[8..24], [0; 16]);
}

#[test]
fn hash_elements_take_their_timers_when_deleted_replaced_or_evicted() {
    let m = timer_map(mt::HASH, 24, 8, 0);
    let t = m.timers().expect("timers");
    for k in 0..3 {
        m.update_user(&k32(k), &[0; 24], 0).expect("insert");
    }
    let e0 = arm(&m, 0);
    let e1 = arm(&m, 1);
    let e2 = arm(&m, 2);
    m.delete(&k32(0), 0).expect("delete");
    assert!(!t.is_armed(e0) && t.is_armed(e1));
    m.update(&k32(1), &[1; 24], 0, 0).expect("replace");
    assert!(!t.is_armed(e1), "the replaced element took its timer");
    let mut key = [0u8; 4];
    assert!(m.timer_target(e2, &mut key).is_some());
    assert_eq!(key, k32(2), "a callback gets the element's key");
    m.delete_user(&k32(2)).expect("delete");
    assert_eq!(t.next_expiry(), None);

    // An LRU map evicts to make room: the evicted element's timer goes with it.
    let lru = timer_map(mt::LRU_HASH, 24, 4, 8);
    let lt = lru.timers().expect("timers");
    for k in 0..4 {
        lru.update(&k32(k), &[0; 24], 0, 0).expect("insert");
    }
    let armed: Vec<u32> = (0..4).map(|k| arm(&lru, k)).collect();
    assert!(armed.iter().all(|&e| lt.is_armed(e)));
    for k in 4..64 {
        lru.update(&k32(k), &[0; 24], 0, 0).expect("insert");
    }
    assert!(armed.iter().all(|&e| !lt.is_armed(e)), "every early element was evicted");
}
