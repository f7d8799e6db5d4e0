//! `BPF_F_LOCK` updates of an array whose value holds a `bpf_spin_lock`: they write
//! around the lock word, and when the word stays taken (a host application keeping a
//! shared segment's lock) they give up with `EBUSY`: a program's update within the
//! runtime's spin limit (10 ms, spinning), user space's after a second.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use spine_abi::map_type;
use spine_abi::update_flags::LOCK;
use spine_maps::{Map, MapDef, MapError, MapOptions};

#[test]
fn locked_updates_write_around_the_lock_and_give_up_on_a_kept_one() {
    let def = MapDef::new("locked", map_type::ARRAY, 4, 16, 2, 0).with_spin_lock(Some(4));
    let map = Map::create(def, &MapOptions::default()).unwrap();
    let key = 1u32.to_le_bytes();
    let ptr = map.lookup(&key, 0).unwrap();
    // SAFETY: the value's lock word, 4-aligned inside a live 16-byte value; accessed
    // only atomically here, as the map does.
    let word = unsafe { AtomicU32::from_ptr(ptr.as_ptr().add(4).cast()) };
    let mut v = [7u8; 16];
    map.update(&key, &v, LOCK, 0).unwrap();
    map.update_user(&key, &v, LOCK).unwrap();
    assert_eq!(word.load(Ordering::Relaxed), 0, "taken and released");
    let mut out = [0u8; 16];
    map.lookup_user(&key, &mut out).unwrap();
    assert_eq!(out, [7, 7, 7, 7, 0, 0, 0, 0, 7, 7, 7, 7, 7, 7, 7, 7], "the lock reads as 0");

    word.store(1, Ordering::Relaxed);
    v[0] = 8;
    let e = map.update(&key, &v, LOCK, 0).unwrap_err();
    assert!(matches!(e, MapError::LockTimeout { .. }), "{e}");
    assert_eq!(e.errno(), -16);
    let t0 = Instant::now();
    let e = map.update_user(&key, &v, LOCK).unwrap_err();
    assert!(matches!(e, MapError::LockTimeout { .. }), "{e}");
    assert!(t0.elapsed() >= Duration::from_secs(1), "user space waits a second");
    // Without BPF_F_LOCK the value is written around the kept word.
    map.update_user(&key, &v, 0).unwrap();
    assert_eq!(word.load(Ordering::Relaxed), 1, "never written");
    map.lookup_user(&key, &mut out).unwrap();
    assert_eq!(out[0], 8);
}
