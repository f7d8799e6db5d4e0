//! Buffers passed between threads: each stage checks what the previous one wrote, then
//! hands the buffer on; the last stage frees it into its own cache. Nothing is lost.

use std::sync::mpsc;
use std::thread;

use spine_pool::{Buf, Pool, PoolConfig};

const PACKETS: u32 = 20_000;

#[test]
fn pass_the_buffer_through_three_threads() {
    let pool = Pool::new(PoolConfig::new(256)).unwrap();
    let (to_mid, mid_rx) = mpsc::sync_channel::<Buf>(64);
    let (to_last, last_rx) = mpsc::sync_channel::<Buf>(64);
    let (back, back_rx) = mpsc::channel::<u32>();

    let p = pool.clone();
    let first = thread::spawn(move || {
        let mut cache = p.cache();
        let mut sent = 0;
        let mut exhausted = 0u64;
        while sent < PACKETS {
            let Some(mut b) = cache.alloc() else {
                exhausted += 1;
                // Buffers are in flight in other threads; they come back.
                thread::yield_now();
                continue;
            };
            let bytes = sent.to_le_bytes();
            p.write(&mut b, &[bytes[0], bytes[1], bytes[2], bytes[3], 0xaa]).unwrap();
            to_mid.send(b).unwrap();
            sent += 1;
        }
        exhausted
    });
    let p = pool.clone();
    let mid = thread::spawn(move || {
        let mut cache = p.cache();
        let mut expect = 0u32;
        for mut b in mid_rx {
            let d = p.data_mut(&mut b).unwrap();
            assert_eq!(u32::from_le_bytes(d[..4].try_into().unwrap()), expect);
            assert_eq!(d[4], 0xaa);
            d[4] = 0xbb;
            // Every fourth packet is also "sent twice": a second reference, freed here.
            if expect.is_multiple_of(4) {
                let extra = p.share(&b).unwrap();
                assert_eq!(p.data(&extra).unwrap()[4], 0xbb);
                cache.free(extra).unwrap();
            }
            expect += 1;
            to_last.send(b).unwrap();
        }
        expect
    });
    let p = pool.clone();
    let last = thread::spawn(move || {
        let mut cache = p.cache();
        let mut n = 0u32;
        for b in last_rx {
            let d = p.data(&b).unwrap();
            assert_eq!(u32::from_le_bytes(d[..4].try_into().unwrap()), n);
            assert_eq!(d[4], 0xbb);
            assert_eq!(p.refs(&b).unwrap(), 1);
            cache.free(b).unwrap();
            n += 1;
        }
        back.send(n).unwrap();
    });
    first.join().unwrap();
    assert_eq!(mid.join().unwrap(), PACKETS);
    last.join().unwrap();
    assert_eq!(back_rx.recv().unwrap(), PACKETS);
    assert_eq!(pool.shared_free(), 256, "every buffer is back once the caches are gone");
}

#[test]
fn concurrent_alloc_free_never_hands_out_one_buffer_twice() {
    let pool = Pool::new(PoolConfig { cache_batch: 8, ..PoolConfig::new(64) }).unwrap();
    let workers: Vec<_> = (0..4u8)
        .map(|t| {
            let p = pool.clone();
            thread::spawn(move || {
                let mut cache = p.cache();
                let mut held = Vec::new();
                for round in 0..5_000u32 {
                    if let Some(mut b) = cache.alloc() {
                        // Stamp with our id; if another thread had it too, its stamp shows.
                        p.write(&mut b, &[t; 16]).unwrap();
                        held.push(b);
                    }
                    if held.len() > 10 || round.is_multiple_of(3) {
                        if let Some(b) = held.pop() {
                            assert!(p.data(&b).unwrap().iter().all(|&x| x == t));
                            cache.free(b).unwrap();
                        }
                    }
                }
                for b in held {
                    assert!(p.data(&b).unwrap().iter().all(|&x| x == t));
                    cache.free(b).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(pool.shared_free(), 64);
}
