//! Several workers and a control thread hammering one map at once: no crash, no lost
//! element, every returned pointer inside the value spans, and entries nobody touches
//! stay visible to lock-free readers however much the elements around them churn.

use std::sync::atomic::{AtomicI64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread;

use spine_abi::map_flags as mf;
use spine_abi::map_type::{HASH, LPM_TRIE, LRU_HASH, PERCPU_HASH};
use spine_abi::update_flags::{ANY, EXIST, NOEXIST};

use super::map;
use crate::Map;

const WORKERS: usize = 4;
const OPS: usize = 200_000;

/// xorshift64*: a tiny deterministic generator per thread.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn in_spans(m: &Map, p: std::ptr::NonNull<u8>, len: u64) -> bool {
    m.value_spans().iter().any(|s| s.contains(p.as_ptr() as u64, len))
}

/// Keys `STABLE..STABLE + 8` are inserted first and never touched again.
const STABLE: u64 = 1 << 40;
const CHURN_KEYS: u64 = 48;

fn stable_value(k: u64) -> u64 {
    k ^ 0xabcd
}

/// Returns (inserts, deletes) that succeeded, for the element count check.
fn churn_hash(m: &Map, cpu: usize, seed: u64, lru: bool) -> (i64, i64) {
    let mut rng = Rng(seed);
    let (mut ins, mut del) = (0, 0);
    let vs = m.def().value_size as usize;
    for _ in 0..OPS {
        let r = rng.next();
        let k = (r >> 8) % CHURN_KEYS;
        let key = k.to_ne_bytes();
        match r % 16 {
            0..=5 => {
                if let Some(p) = m.lookup(&key, cpu) {
                    assert!(in_spans(m, p, vs as u64));
                    assert_eq!(p.as_ptr() as usize % 8, 0);
                    m.store_u64(p, (k << 8) | cpu as u64);
                    let _ = m.load_u64(p);
                }
                // An LRU map may evict even a key that is looked up often.
                let s = STABLE + (r >> 20) % 8;
                match m.lookup(&s.to_ne_bytes(), cpu) {
                    Some(p) if !lru => assert_eq!(m.load_u64(p), stable_value(s)),
                    Some(_) => {}
                    None => assert!(lru, "untouched key {s:#x} not found"),
                }
            }
            6..=8 => match m.update(&key, &vec![cpu as u8; vs], NOEXIST, cpu) {
                Ok(()) => ins += 1,
                Err(e) => assert!(matches!(e.errno(), -17 | -7), "{e}"),
            },
            9..=10 => {
                if let Err(e) = m.update(&key, &vec![1; vs], EXIST, cpu) {
                    assert_eq!(e.errno(), -2, "{e}");
                }
            }
            _ => match m.delete(&key, cpu) {
                Ok(()) => del += 1,
                Err(e) => assert_eq!(e.errno(), -2, "{e}"),
            },
        }
    }
    (ins, del)
}

/// The control plane: user-side updates, deletes, lookups and full key walks.
fn control_hash(m: &Map, seed: u64) -> (i64, i64) {
    let mut rng = Rng(seed);
    let (mut ins, mut del) = (0, 0);
    let mut out = vec![0u8; m.user_value_size()];
    let mut next = [0u8; 8];
    for i in 0..OPS / 4 {
        let r = rng.next();
        let key = ((r >> 8) % CHURN_KEYS).to_ne_bytes();
        match r % 8 {
            0 => {
                // A key walk must end. As in the kernel, a walk whose current key
                // is deleted under it starts again from the first bucket, so under
                // churn a walk may restart many times (a preempted walker on a busy
                // machine): the bound only catches a cycle in the chains, which
                // would never end even after the churners stop.
                let mut cur: Option<[u8; 8]> = None;
                let mut n = 0u64;
                while m.next_key(cur.as_ref().map(|k| &k[..]), &mut next).is_ok() {
                    cur = Some(next);
                    n += 1;
                    assert!(n < 50_000_000, "key walk does not end");
                }
            }
            1..=2 => match m.update_user(&key, &vec![9; m.user_value_size()], NOEXIST) {
                Ok(()) => ins += 1,
                Err(e) => assert!(matches!(e.errno(), -17 | -7), "{e}"),
            },
            3 => {
                let _ = m.update_user(&key, &vec![8; m.user_value_size()], EXIST);
            }
            4..=5 => match m.delete_user(&key) {
                Ok(()) => del += 1,
                Err(e) => assert_eq!(e.errno(), -2, "{e}"),
            },
            _ => {
                let _ = m.lookup_user(&key, &mut out);
            }
        }
        if i % 64 == 0 {
            thread::yield_now();
        }
    }
    (ins, del)
}

fn run_hash(t: u32, max: u32, lru: bool) {
    let m = Arc::new(map(t, 8, 8, max, 0, WORKERS));
    for s in STABLE..STABLE + 8 {
        let v = stable_value(s).to_ne_bytes().repeat(m.user_value_size() / 8);
        m.update_user(&s.to_ne_bytes(), &v, ANY).unwrap();
    }
    let (ins, del) = (Arc::new(AtomicI64::new(8)), Arc::new(AtomicI64::new(0)));
    let mut threads = vec![];
    for cpu in 0..WORKERS {
        let (m, ins, del) = (m.clone(), ins.clone(), del.clone());
        threads.push(thread::spawn(move || {
            let (i, d) = churn_hash(&m, cpu, 0x9e37_79b9 + cpu as u64, lru);
            ins.fetch_add(i, Relaxed);
            del.fetch_add(d, Relaxed);
        }));
    }
    {
        let (m, ins, del) = (m.clone(), ins.clone(), del.clone());
        threads.push(thread::spawn(move || {
            let (i, d) = control_hash(&m, 0x1234_5678);
            ins.fetch_add(i, Relaxed);
            del.fetch_add(d, Relaxed);
        }));
    }
    for t in threads {
        t.join().expect("worker panicked");
    }
    let linked = m.check_consistency();
    assert_eq!(linked, m.len());
    if !lru {
        assert_eq!(linked as i64, ins.load(Relaxed) - del.load(Relaxed), "element count");
    }
    assert!(linked <= max as usize);
    if !lru {
        for s in STABLE..STABLE + 8 {
            assert!(m.lookup(&s.to_ne_bytes(), 0).is_some());
        }
    }
}

#[test]
fn hash_under_concurrent_churn() {
    run_hash(HASH, 32, false);
}

#[test]
fn percpu_hash_under_concurrent_churn() {
    run_hash(PERCPU_HASH, 32, false);
}

/// LRU updates evict instead of failing (even a stable key may go), so only the
/// structure and the error kinds are checked.
#[test]
fn lru_hash_under_concurrent_churn() {
    run_hash(LRU_HASH, 32, true);
}

fn v4(plen: u32, a: [u8; 4]) -> [u8; 8] {
    let mut k = [0u8; 8];
    k[..4].copy_from_slice(&plen.to_ne_bytes());
    k[4..].copy_from_slice(&a);
    k
}

/// 10.0.0.0/8 and 10.1.0.0/16 never change while workers add and remove prefixes
/// under 10.1.0.0/20, reshaping the trie (and reusing its nodes) around them.
#[test]
fn lpm_under_concurrent_churn() {
    let m = Arc::new(map(LPM_TRIE, 8, 8, 48, mf::NO_PREALLOC, WORKERS));
    m.update_user(&v4(8, [10, 0, 0, 0]), &8u64.to_ne_bytes(), ANY).unwrap();
    m.update_user(&v4(16, [10, 1, 0, 0]), &16u64.to_ne_bytes(), ANY).unwrap();
    let threads: Vec<_> = (0..WORKERS)
        .map(|cpu| {
            let m = m.clone();
            thread::spawn(move || {
                let mut rng = Rng(0xfeed + cpu as u64);
                for _ in 0..OPS / 2 {
                    let r = rng.next();
                    let x = ((r >> 8) % 16) as u8;
                    let y = ((r >> 16) % 4) as u8;
                    let key =
                        if r & 1 == 0 { v4(24, [10, 1, x, 0]) } else { v4(32, [10, 1, x, y]) };
                    match (r >> 4) % 4 {
                        0 => match m.update(&key, &[x; 8], ANY, cpu) {
                            Ok(()) => {}
                            Err(e) => assert_eq!(e.errno(), -28, "{e}"),
                        },
                        1 => {
                            let _ = m.delete(&key, cpu);
                        }
                        _ => {
                            let q = v4(32, [10, 1, x, y]);
                            let p = m.lookup(&q, cpu).expect("covered by 10.1.0.0/16");
                            assert!(in_spans(&m, p, 8));
                            let far = m.lookup(&v4(32, [10, 1, 200, y]), cpu).unwrap();
                            assert_eq!(m.load_u64(far), 16);
                            let top = m.lookup(&v4(32, [10, 9, x, y]), cpu).unwrap();
                            assert_eq!(m.load_u64(top), 8);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("worker panicked");
    }
    let n = super::keys(&m).len();
    assert_eq!(n, m.len());
    assert!((2..=48).contains(&n));
}
