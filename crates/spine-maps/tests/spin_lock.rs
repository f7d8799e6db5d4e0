//! `bpf_spin_lock` in map values and `BPF_F_LOCK`: updates and lookups write and read
//! around the lock word, under the lock; when the word stays taken (a host application
//! keeping a shared segment's lock) they give up with `EBUSY`: a program's update within
//! the runtime's spin limit (10 ms, spinning), user space's after a second. Arrays and
//! plain hash maps, whose elements may be replaced or deleted while their lock is held.

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

fn locked_hash() -> Map {
    let def = MapDef::new("hlocked", map_type::HASH, 4, 24, 4, 0).with_spin_lock(Some(8));
    Map::create(def, &MapOptions::default()).unwrap()
}

/// The lock word of `key`'s current element.
fn word_of(map: &Map, key: &[u8]) -> &'static AtomicU32 {
    let ptr = map.lookup(key, 0).unwrap();
    // SAFETY: the value's lock word, 4-aligned inside a live 24-byte value of a map
    // that outlives every use in these tests (each test keeps the map until its end and
    // touches the word only atomically, as the map does).
    unsafe { AtomicU32::from_ptr(ptr.as_ptr().add(8).cast()) }
}

#[test]
fn hash_values_hold_a_lock_that_copies_never_write() {
    let map = locked_hash();
    let (k1, k2) = (1u32.to_le_bytes(), 2u32.to_le_bytes());
    map.update_user(&k1, &[1; 24], 0).unwrap();
    let word = word_of(&map, &k1);
    assert_eq!(word.load(Ordering::Relaxed), 0, "a new element's lock is free");
    // A BPF_F_LOCK update of an existing key writes in place, under the lock.
    let before = map.lookup(&k1, 0).unwrap();
    map.update(&k1, &[2; 24], LOCK, 0).unwrap();
    map.update_user(&k1, &[3; 24], LOCK).unwrap();
    assert_eq!(map.lookup(&k1, 0).unwrap(), before, "same element");
    assert_eq!(word.load(Ordering::Relaxed), 0, "taken and released");
    let mut out = [0u8; 24];
    map.lookup_user_flags(&k1, &mut out, LOCK).unwrap();
    let mut want = [3u8; 24];
    want[8..12].fill(0);
    assert_eq!(out, want, "the lock reads as 0");

    // A program holds the lock (the word is taken): locked updates give up, plain
    // ones replace the element and leave the held word alone.
    word.store(1, Ordering::Relaxed);
    let e = map.update(&k1, &[4; 24], LOCK, 0).unwrap_err();
    assert!(matches!(e, MapError::LockTimeout { .. }), "{e}");
    map.update_user(&k1, &[5; 24], 0).unwrap();
    assert_ne!(map.lookup(&k1, 0).unwrap(), before, "replaced by a new element");
    assert_eq!(word.load(Ordering::Relaxed), 1, "the old element's word is still held");
    map.lookup_user(&k1, &mut out).unwrap();
    assert_eq!(out[0], 5);
    assert_eq!(&out[8..12], &[0; 4]);
    // The holder's element is deleted and reused for another key: its word stays
    // taken until the holder releases it, so no one else can take it meanwhile.
    map.delete_user(&k1).unwrap();
    map.update_user(&k1, &[6; 24], 0).unwrap();
    map.update_user(&k2, &[7; 24], 0).unwrap();
    assert_eq!(word.load(Ordering::Relaxed), 1, "never written by a copy");
    word.store(0, Ordering::Release);
    for k in [k1, k2] {
        map.update(&k, &[8; 24], LOCK, 0).unwrap();
        assert_eq!(word_of(&map, &k).load(Ordering::Relaxed), 0);
    }
}

#[test]
fn lock_flag_errnos_on_hash_maps() {
    let map = locked_hash();
    let k = 9u32.to_le_bytes();
    let mut out = [0u8; 24];
    let errno = |r: Result<(), MapError>| r.err().map_or(0, |e| e.errno());
    assert_eq!(errno(map.update_user(&k, &[1; 24], LOCK | 2)), -2, "EXIST on a missing key");
    assert_eq!(errno(map.update_user(&k, &[1; 24], LOCK | 1)), 0, "NOEXIST inserts");
    assert_eq!(errno(map.update_user(&k, &[1; 24], LOCK | 1)), -17, "NOEXIST on a present key");
    assert_eq!(errno(map.update(&k, &[1; 24], LOCK | 1, 0)), -17);
    assert_eq!(errno(map.update_user(&k, &[1; 24], LOCK | 8)), -22, "unknown flag");
    assert_eq!(errno(map.lookup_user_flags(&k, &mut out, 1)), -22, "lookup flags: LOCK only");
    assert_eq!(errno(map.lookup_user_flags(&8u32.to_le_bytes(), &mut out, LOCK)), -2);

    let plain = MapDef::new("plain", map_type::HASH, 4, 24, 4, 0);
    let plain = Map::create(plain, &MapOptions::default()).unwrap();
    plain.update_user(&k, &[1; 24], 0).unwrap();
    assert_eq!(errno(plain.update_user(&k, &[1; 24], LOCK)), -22, "no lock in the value");
    assert_eq!(errno(plain.update(&k, &[1; 24], LOCK, 0)), -22);
    assert_eq!(errno(plain.lookup_user_flags(&k, &mut out, LOCK)), -22);
    let lru = MapDef::new("lru", map_type::LRU_HASH, 4, 24, 4, 0).with_spin_lock(Some(8));
    let e = Map::create(lru, &MapOptions::default()).unwrap_err();
    assert_eq!(e.errno(), -95, "the kernel refuses a lock in an LRU hash: EOPNOTSUPP");
}

/// Writers fill the whole value with one byte under the lock, from programs and from
/// user space; locked readers must never see two different bytes.
#[test]
fn locked_copies_of_a_hash_value_are_never_torn() {
    let map = std::sync::Arc::new(locked_hash());
    let k = 3u32.to_le_bytes();
    map.update_user(&k, &[0; 24], 0).unwrap();
    let writers: Vec<_> = (0..2u8)
        .map(|t| {
            let map = map.clone();
            std::thread::spawn(move || {
                for n in 0..2000u32 {
                    let b = (n as u8) | (t << 7);
                    if t == 0 {
                        map.update(&k, &[b; 24], LOCK, 0).unwrap();
                    } else {
                        map.update_user(&k, &[b; 24], LOCK).unwrap();
                    }
                }
            })
        })
        .collect();
    let mut out = [0u8; 24];
    for _ in 0..2000 {
        map.lookup_user_flags(&k, &mut out, LOCK).unwrap();
        let b = out[0];
        assert!(out[..8].iter().chain(&out[12..]).all(|&x| x == b), "torn value {out:?}");
    }
    for w in writers {
        w.join().unwrap();
    }
}
