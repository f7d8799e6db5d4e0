//! Ring buffers: positions and capacity as the kernel's (the numbers were measured with
//! BPF_PROG_TEST_RUN on Linux 6.18, and `tests/kernel.rs` replays scripts against it),
//! record order, wrap-around, the checks on submit and discard, and many producers with
//! one consumer.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::thread;

use spine_abi::map_type::RINGBUF;

use super::{errno, get, map};
use crate::ringbuf::RB_RING_SIZE;
use crate::ringbuf::{RB_AVAIL_DATA, RB_CONS_POS, RB_FORCE_WAKEUP, RB_NO_WAKEUP, RB_PROD_POS};
use crate::{Map, MapError, RingBuf};

fn ring(size: u32) -> Map {
    map(RINGBUF, 0, 0, size, 0, 2)
}

fn drain(rb: &RingBuf) -> Vec<Vec<u8>> {
    let mut out = vec![];
    rb.consume(|r| out.push(r.to_vec()));
    out
}

/// Writes `bytes` into a reserved record through its pointer, as a program would.
fn fill(m: &Map, rec: std::ptr::NonNull<u8>, bytes: &[u8]) {
    let (arena, off) = m.resolve(rec, bytes.len());
    arena.write_bytes(off, bytes);
}

#[test]
fn positions_and_query_are_the_kernels() {
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    assert!(m.ringbuf().is_some() && ring(8192).ringbuf().unwrap().size() == 8192);
    rb.output(&[1; 8], 0).unwrap();
    let q = |f| rb.query(f);
    assert_eq!(
        (q(RB_AVAIL_DATA), q(RB_RING_SIZE), q(RB_CONS_POS), q(RB_PROD_POS)),
        (16, 4096, 0, 16)
    );
    assert_eq!(q(4), 0, "unknown flag");
    rb.output(&[2], 0).unwrap();
    rb.output(&[], 0).unwrap();
    rb.output(&[3; 3], RB_NO_WAKEUP).unwrap();
    rb.output(&[3; 3], RB_FORCE_WAKEUP).unwrap();
    rb.output(&[3; 3], RB_NO_WAKEUP | RB_FORCE_WAKEUP).unwrap();
    assert_eq!(errno(rb.output(&[3; 3], 4)), -22);
    assert_eq!(errno(rb.output(&[3; 3], 8)), -22);
    assert_eq!(q(RB_PROD_POS), 88, "measured");
    assert!(rb.reserve(5, 1).is_none(), "reserve takes no flags");
    let r = rb.reserve(5, 0).unwrap();
    rb.submit(r.as_ptr() as u64, 0).unwrap();
    let r = rb.reserve(5, 0).unwrap();
    rb.discard(r.as_ptr() as u64, 0).unwrap();
    let r = rb.reserve(0, 0).unwrap();
    rb.discard(r.as_ptr() as u64, 0).unwrap();
    assert_eq!((q(RB_AVAIL_DATA), q(RB_PROD_POS)), (128, 128), "measured");
    let got = drain(rb);
    assert_eq!(got.len(), 7, "the two discarded records are skipped");
    assert_eq!(got[0], [1; 8]);
    assert_eq!(got[1], [2]);
    assert_eq!(got[2], [0u8; 0]);
    assert_eq!(got[3], [3; 3]);
    assert_eq!(got[6].len(), 5);
    assert_eq!((q(RB_AVAIL_DATA), q(RB_CONS_POS)), (0, 128));
    assert!(!rb.has_data());
}

/// Measured: a 4,096-byte ring takes a 4,080-byte record (4,088 with its header) but not
/// a 4,081-byte one, and 36 records of 100 bytes (112 each), then EAGAIN.
#[test]
fn capacity_is_size_minus_one() {
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    let r = rb.reserve(4080, 0).unwrap();
    assert!(rb.reserve(0, 0).is_none(), "full: 4,088 + 8 > 4,095");
    rb.discard(r.as_ptr() as u64, 0).unwrap();
    assert_eq!(rb.query(RB_AVAIL_DATA), 4088);
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    assert!(rb.reserve(4081, 0).is_none());
    assert!(rb.reserve(4096, 0).is_none());
    assert!(rb.reserve(u64::MAX, 0).is_none());
    assert!(rb.reserve(1 << 31, 0).is_none());
    assert_eq!(errno(rb.output(&[0; 4096], 0)), -11);
    assert!(matches!(rb.output(&[0; 8000], 0), Err(MapError::RingFull { .. })));
    let ok = (0..40).filter(|_| rb.output(&[7; 100], 0).is_ok()).count();
    assert_eq!(ok, 36);
    assert_eq!(rb.query(RB_AVAIL_DATA), 4032);
    // Consuming frees the room again.
    assert_eq!(rb.consume(|r| assert_eq!(r, [7; 100])), 36);
    assert_eq!(rb.query(RB_AVAIL_DATA), 0);
    assert_eq!((0..40).filter(|_| rb.output(&[7; 100], 0).is_ok()).count(), 36);
}

/// Records that cross the end of the ring are contiguous through the pointer and come
/// out whole; the ring goes round many times.
#[test]
fn records_crossing_the_end_are_contiguous() {
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    let span = m.value_spans()[0];
    assert!(span.writable && span.readable);
    assert_eq!(span.len, 8192, "the ring and its run-on area");
    let mut next = 0u32;
    let mut seen = 0u32;
    for round in 0..200u32 {
        let len = 1 + (round * 37 % 700) as usize;
        let bytes: Vec<u8> = (0..len).map(|i| (i as u32 ^ next) as u8).collect();
        let rec = rb.reserve(len as u64, 0).unwrap();
        assert_eq!(rec.as_ptr() as usize % 8, 0);
        assert!(span.contains(rec.as_ptr() as u64, len as u64));
        fill(&m, rec, &bytes);
        rb.submit(rec.as_ptr() as u64, 0).unwrap();
        next += 1;
        if round % 3 == 2 {
            rb.consume(|r| {
                let want: Vec<u8> = (0..r.len()).map(|i| (i as u32 ^ seen) as u8).collect();
                assert_eq!(r, &want[..], "record {seen}");
                seen += 1;
            });
        }
    }
    rb.consume(|_| seen += 1);
    assert_eq!(seen, next);
    assert!(rb.query(RB_PROD_POS) > 15 * 4096, "went round many times");
}

/// The consumer stops at a record still reserved, even when later ones are committed;
/// they come out in reservation order once it is submitted.
#[test]
fn consumer_waits_for_the_oldest_reservation() {
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    let a = rb.reserve(4, 0).unwrap();
    rb.output(b"bbbb", 0).unwrap();
    let c = rb.reserve(4, 0).unwrap();
    fill(&m, c, b"cccc");
    rb.submit(c.as_ptr() as u64, 0).unwrap();
    assert!(!rb.has_data());
    assert_eq!(rb.consume(|_| panic!("nothing is ready")), 0);
    assert_eq!(rb.query(RB_AVAIL_DATA), 48);
    fill(&m, a, b"aaaa");
    rb.submit(a.as_ptr() as u64, 0).unwrap();
    assert!(rb.has_data());
    assert_eq!(drain(rb), [b"aaaa".to_vec(), b"bbbb".to_vec(), b"cccc".to_vec()]);
}

#[test]
fn submit_and_discard_refuse_what_is_not_reserved() {
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    let r = rb.reserve(16, 0).unwrap();
    let a = r.as_ptr() as u64;
    let base = m.value_spans()[0].start;
    for bad in [0, 1, a + 4, a + 8, a - 8, base, base + 4096 + 8, base + 8192, u64::MAX] {
        let e = rb.submit(bad, 0).unwrap_err();
        assert_eq!(e, MapError::NotReserved { map: "t".into(), addr: bad });
        assert_eq!(e.errno(), -22);
        assert_eq!(errno(rb.discard(bad, 0)), -22);
    }
    assert_eq!(rb.query(RB_AVAIL_DATA), 24, "nothing changed");
    rb.submit(a, 0).unwrap();
    assert_eq!(errno(rb.submit(a, 0)), -22, "twice");
    assert_eq!(errno(rb.discard(a, 0)), -22, "discard after submit");
    let other = ring(4096);
    let o = other.ringbuf().unwrap().reserve(16, 0).unwrap();
    assert_eq!(errno(rb.submit(o.as_ptr() as u64, 0)), -22, "another ring's record");
    other.ringbuf().unwrap().discard(o.as_ptr() as u64, 0).unwrap();
    assert_eq!(drain(rb).len(), 1);
}

/// The kernel wakes the consumer when a submit commits the record it waits at, or when
/// forced; `BPF_RB_NO_WAKEUP` suppresses the first.
#[test]
fn wakeups_follow_the_kernels_rule() {
    let m = ring(4096);
    let rb = m.ringbuf().unwrap();
    assert!(!rb.take_wakeup());
    rb.output(&[1], 0).unwrap();
    assert!(rb.take_wakeup(), "the consumer waited at this record");
    assert!(!rb.take_wakeup(), "taken once");
    rb.output(&[2], 0).unwrap();
    assert!(!rb.take_wakeup(), "not at the consumer: it has data to read already");
    rb.output(&[3], RB_FORCE_WAKEUP).unwrap();
    assert!(rb.take_wakeup());
    drain(rb);
    rb.output(&[4], RB_NO_WAKEUP).unwrap();
    assert!(!rb.take_wakeup());
    let r = rb.reserve(1, 0).unwrap();
    rb.discard(r.as_ptr() as u64, RB_FORCE_WAKEUP).unwrap();
    assert!(rb.take_wakeup());
}

/// Measured: element operations on a ring buffer are ENOTSUPP from user space; freezing
/// works and then writes are EPERM first.
#[test]
fn element_operations_are_not_supported() {
    let m = ring(4096);
    assert_eq!(m.user_value_size(), 0);
    assert_eq!(get(&m, &[]), Err(-524));
    assert_eq!(errno(m.update_user(&[], &[], 0)), -524);
    assert_eq!(errno(m.delete_user(&[])), -524);
    assert_eq!(errno(m.next_key(None, &mut [])), -524);
    assert_eq!(m.lookup(&[], 0), None);
    assert_eq!(errno(m.update(&[], &[], 0, 0)), -22, "the kernel's verifier refuses it");
    assert_eq!(errno(m.delete(&[], 0)), -22);
    assert_eq!(m.len(), 0);
    assert_eq!(m.array_layout(), None);
    m.try_freeze().unwrap();
    assert_eq!(errno(m.update_user(&[], &[], 0)), -1);
    assert!(m.ringbuf().unwrap().output(&[1], 0).is_ok(), "programs are unaffected");
    assert!(map(spine_abi::map_type::ARRAY, 4, 4, 1, 0, 1).ringbuf().is_none());
}

#[test]
fn ring_storage_is_budgeted() {
    let def = crate::MapDef::new("big", RINGBUF, 0, 0, 1 << 30, 0);
    let e = Map::create(def, &super::opts(1)).unwrap_err();
    assert!(matches!(e, MapError::TooLarge { bytes, .. } if bytes == (5u64 << 29)));
    assert_eq!(ring(4096).storage_bytes(), 8192 + 2048);
}

// ---- many producers, one consumer ----

const PRODUCERS: usize = 4;
const RECORDS: u32 = 20_000;

/// The record a producer writes for its `seq`-th event: a header and a pattern whose
/// length and bytes depend on both, so any torn or misplaced byte shows.
fn record(p: usize, seq: u32) -> Vec<u8> {
    let len = 8 + (seq as usize * 13 + p * 7) % 180;
    let mut v = vec![0u8; len];
    v[..4].copy_from_slice(&seq.to_le_bytes());
    v[4] = p as u8;
    for (i, b) in v[8..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq).wrapping_add(p as u32 * 101) as u8;
    }
    v
}

/// Every third record is discarded; the others alternate between reserve + in-place
/// writes + submit and output. A full ring is retried, so every committed record is
/// eventually produced.
fn produce(m: &Map, p: usize) {
    let rb = m.ringbuf().unwrap();
    for seq in 0..RECORDS {
        let bytes = record(p, seq);
        loop {
            let done = if seq % 3 == 1 {
                rb.output(&bytes, 0).is_ok()
            } else if let Some(rec) = rb.reserve(bytes.len() as u64, 0) {
                fill(m, rec, &bytes);
                let a = rec.as_ptr() as u64;
                if seq % 3 == 2 { rb.discard(a, 0) } else { rb.submit(a, 0) }.unwrap();
                true
            } else {
                false
            };
            if done {
                break;
            }
            thread::yield_now();
        }
    }
}

#[test]
fn many_producers_one_consumer() {
    let m = Arc::new(ring(8192));
    let done = Arc::new(AtomicBool::new(false));
    let consumer = {
        let (m, done) = (m.clone(), done.clone());
        thread::spawn(move || {
            let rb = m.ringbuf().unwrap();
            let mut next: BTreeMap<u8, u32> = BTreeMap::new();
            let mut count = 0usize;
            let mut check = |r: &[u8]| {
                let seq = u32::from_le_bytes(r[..4].try_into().unwrap());
                let p = r[4];
                assert_eq!(r, &record(p as usize, seq)[..], "record intact");
                assert_ne!(seq % 3, 2, "a discarded record came out");
                let want = next.entry(p).or_insert(0);
                assert!(seq >= *want, "producer {p}: {seq} after {want}: out of order or twice");
                for missed in *want..seq {
                    assert_eq!(missed % 3, 2, "producer {p}: committed record {missed} lost");
                }
                *want = seq + 1;
                count += 1;
            };
            loop {
                let finished = done.load(Acquire);
                if rb.consume(&mut check) == 0 {
                    if finished {
                        break;
                    }
                    thread::yield_now();
                }
            }
            (count, next)
        })
    };
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let m = m.clone();
            thread::spawn(move || produce(&m, p))
        })
        .collect();
    for t in producers {
        t.join().expect("producer panicked");
    }
    done.store(true, Release);
    let (count, next) = consumer.join().expect("consumer panicked");
    let committed = (0..RECORDS).filter(|s| s % 3 != 2).count();
    assert_eq!(count, PRODUCERS * committed, "every committed record exactly once");
    for (&p, &last) in &next {
        assert!(last >= RECORDS - 2, "producer {p} ends at {last}");
    }
    let rb = m.ringbuf().unwrap();
    assert_eq!(rb.query(RB_AVAIL_DATA), 0);
    assert_eq!(rb.query(RB_CONS_POS), rb.query(RB_PROD_POS));
}
