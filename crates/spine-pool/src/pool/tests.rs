use super::*;
use crate::Burst;

fn small(buffers: u32) -> Arc<Pool> {
    Pool::new(PoolConfig { cache_batch: 4, ..PoolConfig::new(buffers) }).unwrap()
}

#[test]
fn config_is_checked() {
    let bad = |cfg: PoolConfig| matches!(Pool::new(cfg), Err(PoolError::BadConfig { .. }));
    assert!(bad(PoolConfig::new(0)));
    assert!(bad(PoolConfig { buf_size: 2000, ..PoolConfig::new(4) }));
    assert!(bad(PoolConfig { headroom: 1900, ..PoolConfig::new(4) }));
    assert!(bad(PoolConfig { cache_batch: 0, ..PoolConfig::new(4) }));
    assert!(Pool::new(PoolConfig { buf_size: 4096, ..PoolConfig::new(4) }).is_ok());
}

#[test]
fn memory_is_page_aligned_and_zeroed() {
    let pool = small(8);
    let (base, len) = pool.memory();
    assert_eq!(base.as_ptr() as usize % 4096, 0);
    assert_eq!(len, 8 * 2048);
    let mut c = pool.cache();
    let b = c.alloc().unwrap();
    assert!(pool.frame(&b).unwrap().iter().all(|&x| x == 0));
    c.free(b).unwrap();
}

#[test]
fn fresh_buffer_layout_and_write() {
    let pool = small(4);
    let mut c = pool.cache();
    let mut b = c.alloc().unwrap();
    let m = pool.meta(&b).unwrap();
    assert_eq!((m.data_off, m.len, m.meta_len), (256, 0, 0));
    pool.write(&mut b, b"hello").unwrap();
    assert_eq!(pool.data(&b).unwrap(), b"hello");
    assert_eq!(&pool.frame(&b).unwrap()[256..261], b"hello");
    pool.data_mut(&mut b).unwrap()[0] = b'j';
    assert_eq!(pool.data(&b).unwrap(), b"jello");
    // Too long for the space after the headroom.
    let big = vec![0u8; 2048 - 256 + 1];
    assert!(matches!(pool.write(&mut b, &big), Err(PoolError::BadRange { .. })));
    assert_eq!(pool.data(&b).unwrap(), b"jello", "a refused write changes nothing");
    c.free(b).unwrap();
}

#[test]
fn set_meta_checks_ranges() {
    let pool = small(2);
    let mut c = pool.cache();
    let mut b = c.alloc().unwrap();
    let ok = BufMeta { data_off: 200, len: 100, meta_len: 8, port: 3, ts_ns: 42 };
    pool.set_meta(&mut b, ok).unwrap();
    assert_eq!(pool.meta(&b).unwrap(), ok);
    let meta_too_long = BufMeta { meta_len: 201, ..ok };
    assert!(pool.set_meta(&mut b, meta_too_long).is_err());
    let past_end = BufMeta { data_off: 2000, len: 49, ..ok };
    assert!(pool.set_meta(&mut b, past_end).is_err());
    assert!(pool.set_meta(&mut b, BufMeta { data_off: 2000, len: 48, ..ok }).is_ok());
    assert!(pool.set_data(&mut b, u32::MAX, u32::MAX).is_err());
    c.free(b).unwrap();
}

#[test]
fn shared_buffers_are_read_only_until_one_ref_is_left() {
    let pool = small(2);
    let mut c = pool.cache();
    let mut a = c.alloc().unwrap();
    pool.write(&mut a, b"xy").unwrap();
    let b = pool.share(&a).unwrap();
    assert_eq!(pool.refs(&a).unwrap(), 2);
    assert_eq!(pool.data(&b).unwrap(), b"xy");
    let index = a.index();
    assert_eq!(pool.data_mut(&mut a), Err(PoolError::Shared { index, refs: 2 }));
    assert!(matches!(pool.frame_and_meta_mut(&mut a), Err(PoolError::Shared { refs: 2, .. })));
    let lender = pool.new_lender();
    let back = pool.lend(b, lender).unwrap_err();
    assert!(matches!(back.error, PoolError::Shared { .. }));
    c.free(back.buf).unwrap();
    assert_eq!(pool.refs(&a).unwrap(), 1);
    assert!(pool.data_mut(&mut a).is_ok());
    let (frame, meta) = pool.frame_and_meta_mut(&mut a).unwrap();
    assert_eq!(frame.len(), pool.buf_size() as usize);
    assert_eq!(&frame[meta.data_off as usize..][..meta.len as usize], b"xy");
    // The last holder's free (no locked read-modify-write) leaves it free for reuse.
    c.free(a).unwrap();
    assert_eq!(pool.refs(&Buf { index, tag: pool.tag }).unwrap(), 0);
    drop(c);
    assert_eq!(pool.shared_free(), 2);
}

#[test]
fn foreign_handles_are_refused() {
    let p1 = small(2);
    let p2 = small(2);
    let mut c1 = p1.cache();
    let mut c2 = p2.cache();
    let b = c1.alloc().unwrap();
    assert_eq!(p2.data(&b).unwrap_err(), PoolError::Foreign { index: 0 });
    assert_eq!(p2.share(&b).unwrap_err(), PoolError::Foreign { index: 0 });
    let other = c2.alloc().unwrap();
    assert_eq!(c2.free(b), Err(PoolError::Foreign { index: 0 }));
    // The buffer of the same index in p2 is untouched.
    assert_eq!(p2.refs(&other).unwrap(), 1);
    c2.free(other).unwrap();
}

#[test]
fn offsets_map_to_handles_and_back() {
    let pool = small(16);
    let mut c = pool.cache();
    let lender = pool.new_lender();
    let mut bufs: Vec<Buf> = (0..16).map(|_| c.alloc().unwrap()).collect();
    let mut offsets = Vec::new();
    for (i, b) in bufs.iter_mut().enumerate() {
        pool.write(b, &[i as u8; 10]).unwrap();
        offsets.push(pool.offset(b).unwrap());
    }
    let mut sorted = offsets.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..16u64).map(|i| i * 2048).collect::<Vec<_>>());
    let lent: Vec<u64> = bufs.drain(..).map(|b| pool.lend(b, lender).unwrap()).collect();
    assert_eq!(lent, offsets);
    assert_eq!(pool.lent_by(lender), 16);
    for (i, off) in lent.iter().enumerate() {
        // Any offset inside the chunk names it, as a descriptor's data address does.
        let mut b = pool.reclaim(off + 256 + 7, lender).unwrap();
        assert_eq!(pool.offset(&b).unwrap(), *off);
        assert_eq!(pool.data(&b).unwrap(), &[i as u8; 10]);
        assert!(pool.data_mut(&mut b).is_ok());
        c.free(b).unwrap();
    }
    assert_eq!(pool.lent_by(lender), 0);
}

#[test]
fn untrusted_offsets_are_checked() {
    let pool = small(4);
    let mut c = pool.cache();
    let (l1, l2) = (pool.new_lender(), pool.new_lender());
    let b = c.alloc().unwrap();
    let off = pool.lend(b, l1).unwrap();
    assert_eq!(
        pool.reclaim(4 * 2048, l1).unwrap_err(),
        PoolError::OffsetOutOfRange { offset: 8192, len: 8192 }
    );
    assert!(matches!(pool.reclaim(u64::MAX, l1), Err(PoolError::OffsetOutOfRange { .. })));
    assert_eq!(pool.reclaim(off, l2).unwrap_err(), PoolError::WrongLender { index: 0 });
    // A buffer that was never lent (free, or owned by a handle) cannot be claimed.
    assert_eq!(pool.reclaim(2048, l1).unwrap_err(), PoolError::NotLent { index: 1 });
    let held = c.alloc().unwrap();
    let held_off = pool.offset(&held).unwrap();
    assert_eq!(pool.reclaim(held_off, l1).unwrap_err(), PoolError::NotLent { index: held.index() });
    let b = pool.reclaim(off, l1).unwrap();
    // The same descriptor twice: the second is refused.
    assert_eq!(pool.reclaim(off, l1).unwrap_err(), PoolError::NotLent { index: 0 });
    c.free(b).unwrap();
    c.free(held).unwrap();
}

#[test]
fn reclaim_all_returns_a_lenders_buffers() {
    let pool = small(8);
    let mut c = pool.cache();
    let (l1, l2) = (pool.new_lender(), pool.new_lender());
    for i in 0..6 {
        let b = c.alloc().unwrap();
        pool.lend(b, if i % 2 == 0 { l1 } else { l2 }).unwrap();
    }
    drop(c);
    assert_eq!(pool.shared_free(), 2);
    assert_eq!(pool.reclaim_all(l1), 3);
    assert_eq!(pool.shared_free(), 5);
    assert_eq!(pool.lent_by(l2), 3);
    assert_eq!(pool.reclaim_all(l1), 0);
    assert_eq!(pool.reclaim_all(l2), 3);
    assert_eq!(pool.shared_free(), 8);
}

#[test]
fn exhaustion_returns_none_and_recovers() {
    let pool = small(5);
    let mut c1 = pool.cache();
    let mut c2 = pool.cache();
    let mut held = Vec::new();
    while let Some(b) = c1.alloc() {
        held.push(b);
    }
    assert_eq!(held.len(), 5);
    assert!(c2.alloc().is_none());
    c2.free(held.pop().unwrap()).unwrap();
    let b = c2.alloc().expect("freed into this cache");
    c2.free(b).unwrap();
    for b in held {
        c1.free(b).unwrap();
    }
    drop((c1, c2));
    assert_eq!(pool.shared_free(), 5);
}

#[test]
fn caches_flush_in_batches() {
    let pool = small(64);
    let mut c = pool.cache();
    let bufs: Vec<Buf> = (0..40).map(|_| c.alloc().unwrap()).collect();
    assert_eq!(pool.shared_free(), 24, "refills come in batches of 4");
    for b in bufs {
        c.free(b).unwrap();
        assert!(c.cached() <= 8, "a cache holds at most two batches");
    }
    assert_eq!(pool.shared_free() as usize + c.cached(), 64);
}

#[test]
fn write_rx_fills_packet_and_metadata_at_once() {
    let pool = small(2);
    let mut c = pool.cache();
    let mut b = c.alloc().unwrap();
    pool.write_rx(&mut b, b"abc", 4, 99).unwrap();
    assert_eq!(pool.data(&b).unwrap(), b"abc");
    let m = pool.meta(&b).unwrap();
    assert_eq!(m, BufMeta { data_off: 256, len: 3, meta_len: 0, port: 4, ts_ns: 99 });
    assert!(matches!(pool.write_rx(&mut b, &[0; 1793], 0, 0), Err(PoolError::BadRange { .. })));
    assert_eq!(pool.data(&b).unwrap(), b"abc", "a refused write changes nothing");
    let s = pool.share(&b).unwrap();
    assert!(matches!(pool.write_rx(&mut b, b"x", 0, 0), Err(PoolError::Shared { .. })));
    c.free(s).unwrap();
    c.free(b).unwrap();
}

#[test]
fn a_chain_frees_with_its_head_and_keeps_its_fragments_bytes() {
    let pool = small(32);
    let mut c = pool.cache();
    let mut head = c.alloc().unwrap();
    pool.write(&mut head, b"head").unwrap();
    for part in [&b"one"[..], b"two", b"three"] {
        let mut f = c.alloc().unwrap();
        pool.write(&mut f, part).unwrap();
        pool.chain(&mut head, f).unwrap();
    }
    assert!(pool.has_frags(&head));
    assert_eq!(pool.frag_count(&head), 3);
    assert_eq!(pool.frame_len(&head), 4 + 3 + 3 + 5);
    let parts: Vec<&[u8]> = pool.frags(&head).collect();
    assert_eq!(parts, [&b"one"[..], b"two", b"three"]);
    // A shared head keeps the chain until its last reference goes.
    let other = pool.share(&head).unwrap();
    c.free(head).unwrap();
    assert_eq!(pool.frag_count(&other), 3);
    c.free(other).unwrap();
    c.flush();
    assert_eq!(pool.shared_free(), 32, "head and fragments all free again");
}

#[test]
fn unchain_gives_fragments_back_as_owned_handles() {
    let pool = small(8);
    let mut c = pool.cache();
    let mut head = c.alloc().unwrap();
    let f1 = c.alloc().unwrap();
    let f2 = c.alloc().unwrap();
    pool.chain(&mut head, f1).unwrap();
    pool.chain(&mut head, f2).unwrap();
    let mut first = pool.unchain(&mut head).unwrap().unwrap();
    assert!(!pool.has_frags(&head));
    assert_eq!(pool.frag_count(&first), 1, "the rest stays chained to the first");
    let second = pool.unchain(&mut first).unwrap().unwrap();
    assert!(pool.unchain(&mut first).unwrap().is_none());
    for b in [head, first, second] {
        c.free(b).unwrap();
    }
    c.flush();
    assert_eq!(pool.shared_free(), 8);
}

#[test]
fn chains_refuse_shared_buffers_overlong_chains_and_lending() {
    let pool = small(40);
    let mut c = pool.cache();
    let mut head = c.alloc().unwrap();
    let f = c.alloc().unwrap();
    let extra = pool.share(&f).unwrap();
    let e = pool.chain(&mut head, f).unwrap_err();
    assert!(matches!(e.error, PoolError::Shared { .. }));
    c.free(e.buf).unwrap();
    c.free(extra).unwrap();
    for _ in 1..MAX_CHAIN {
        let f = c.alloc().unwrap();
        pool.chain(&mut head, f).unwrap();
    }
    let f = c.alloc().unwrap();
    let e = pool.chain(&mut head, f).unwrap_err();
    assert_eq!(e.error, PoolError::ChainTooLong { max: MAX_CHAIN });
    c.free(e.buf).unwrap();
    let lender = pool.new_lender();
    let e = pool.lend(head, lender).unwrap_err();
    assert!(matches!(e.error, PoolError::Chained { .. }));
    c.free(e.buf).unwrap();
    c.flush();
    assert_eq!(pool.shared_free(), 40);
}

#[test]
fn free_burst_frees_chains() {
    let pool = small(16);
    let mut c = pool.cache();
    let mut burst = Burst::with_capacity(4);
    for _ in 0..4 {
        let mut h = c.alloc().unwrap();
        let f = c.alloc().unwrap();
        pool.chain(&mut h, f).unwrap();
        burst.push(h).unwrap();
    }
    c.free_burst(&mut burst).unwrap();
    c.flush();
    assert_eq!(pool.shared_free(), 16);
}

#[test]
fn alloc_rx_burst_writes_each_packet_and_its_metadata_once_filled() {
    let pool = small(6);
    let mut c = pool.cache();
    // A buffer used before, with other metadata, comes back as a fresh receive.
    let mut old = c.alloc().unwrap();
    pool.set_meta(&mut old, BufMeta { data_off: 300, len: 9, meta_len: 40, port: 7, ts_ns: 5 })
        .unwrap();
    c.free(old).unwrap();
    let packets: [&[u8]; 3] = [&[1, 2, 3], &[4; 60], &[]];
    let mut k = 0;
    let mut burst = Burst::with_capacity(4);
    let got = c
        .alloc_rx_burst(&mut burst, 3, 60, 9, 77, || {
            k += 1;
            packets[k - 1]
        })
        .unwrap();
    assert_eq!((got, k), (3, 3));
    for (b, p) in burst.iter().zip(packets) {
        let m = pool.meta(b).unwrap();
        let fresh = BufMeta { data_off: 256, len: p.len() as u32, meta_len: 0, port: 9, ts_ns: 77 };
        assert_eq!(m, fresh);
        assert_eq!(pool.data(b).unwrap(), p);
        assert_eq!(pool.refs(b).unwrap(), 1);
    }
    // Fewer than asked when the burst fills or the pool runs short; `next` is called
    // only for buffers handed out.
    let got = c.alloc_rx_burst(&mut burst, 5, 1, 0, 0, || &[8]).unwrap();
    assert_eq!((got, burst.len()), (1, 4), "the burst's room");
    let mut other = Burst::with_capacity(8);
    let mut calls = 0;
    let got = c
        .alloc_rx_burst(&mut other, 8, 1, 0, 0, || {
            calls += 1;
            &[8]
        })
        .unwrap();
    assert_eq!((got, calls), (2, 2), "the pool's last two buffers");
    // A longest packet that would not fit after the headroom is refused up front.
    let e = c.alloc_rx_burst(&mut other, 1, 2048 - 256 + 1, 0, 0, || &[]).unwrap_err();
    assert!(matches!(e, PoolError::BadRange { len: 1793, .. }), "{e:?}");
    c.free_burst(&mut burst).unwrap();
    c.free_burst(&mut other).unwrap();
    c.flush();
    assert_eq!(pool.shared_free(), 6);
}

#[test]
#[should_panic(expected = "checked by the caller")]
fn alloc_rx_burst_refuses_a_packet_longer_than_it_was_told() {
    let pool = small(2);
    let mut c = pool.cache();
    let mut burst = Burst::with_capacity(1);
    let long = vec![0u8; 2000];
    let _ = c.alloc_rx_burst(&mut burst, 1, 60, 0, 0, || &long[..]);
}

#[test]
fn free_burst_frees_sole_shared_chained_and_refuses_foreign_buffers() {
    let pool = small(16);
    let other = small(2);
    let mut c = pool.cache();
    let mut oc = other.cache();
    let mut burst = Burst::with_capacity(5);
    let sole = c.alloc().unwrap();
    let shared = c.alloc().unwrap();
    let second = pool.share(&shared).unwrap();
    let mut head = c.alloc().unwrap();
    let frag = c.alloc().unwrap();
    pool.chain(&mut head, frag).unwrap();
    let foreign = oc.alloc().unwrap();
    let foreign_index = foreign.index();
    for b in [sole, shared, head, foreign] {
        burst.push(b).unwrap();
    }
    let e = c.free_burst(&mut burst).unwrap_err();
    assert_eq!(e, PoolError::Foreign { index: foreign_index });
    assert!(burst.is_empty());
    // The shared buffer keeps its other reference; the rest (and the fragment) are free.
    assert_eq!(pool.refs(&second).unwrap(), 1);
    c.flush();
    assert_eq!(pool.shared_free(), 15);
    c.free(second).unwrap();
    c.flush();
    assert_eq!(pool.shared_free(), 16);
    drop(oc);
}

#[test]
fn clone_frame_copies_head_metadata_and_fragments_into_buffers_of_its_own() {
    let pool = small(16);
    let mut c = pool.cache();
    let mut head = c.alloc().unwrap();
    pool.write(&mut head, b"the head").unwrap();
    let meta = BufMeta { data_off: 300, len: 8, meta_len: 16, port: 7, ts_ns: 99 };
    pool.frame_mut(&mut head).unwrap()[284..300].copy_from_slice(&[0xee; 16]);
    pool.frame_mut(&mut head).unwrap()[300..308].copy_from_slice(b"the head");
    pool.set_meta(&mut head, meta).unwrap();
    for (i, part) in [&b"one"[..], b"two", b"three"].into_iter().enumerate() {
        let mut f = c.alloc().unwrap();
        pool.set_data(&mut f, i as u32 * 10, part.len() as u32).unwrap();
        pool.data_mut(&mut f).unwrap().copy_from_slice(part);
        pool.chain(&mut head, f).unwrap();
    }
    // The source may be shared (a broadcast holds it once per target).
    let other = pool.share(&head).unwrap();
    let mut copy = c.clone_frame(&head).unwrap();
    assert_ne!(copy.index(), head.index());
    assert_eq!(pool.meta(&copy).unwrap(), meta);
    assert_eq!(pool.frame(&copy).unwrap()[284..308], pool.frame(&head).unwrap()[284..308]);
    let parts: Vec<&[u8]> = pool.frags(&copy).collect();
    assert_eq!(parts, [&b"one"[..], b"two", b"three"]);
    assert_eq!(pool.frame_len(&copy), pool.frame_len(&head));
    assert_eq!(pool.refs(&copy).unwrap(), 1, "the copy is its own: writable");
    // Writing the copy's fragments leaves the source's alone.
    let mut f = pool.unchain(&mut copy).unwrap().unwrap();
    assert_eq!(pool.meta(&f).unwrap().data_off, 0, "offsets are kept");
    pool.data_mut(&mut f).unwrap().copy_from_slice(b"ONE");
    assert_eq!(pool.frags(&head).next().unwrap(), b"one");
    pool.chain(&mut copy, f).unwrap();
    assert_eq!(pool.frame_len(&copy), pool.frame_len(&head));
    for b in [copy, head, other] {
        c.free(b).unwrap();
    }
    c.flush();
    assert_eq!(pool.shared_free(), 16);
}

#[test]
fn clone_frame_gives_every_buffer_back_when_the_pool_runs_short() {
    // A chain of four buffers, then a pool with room for the head and `k` fragments of
    // the copy only, for every `k` short of the whole.
    for spare in 0..4u32 {
        let pool = small(8);
        let mut c = pool.cache();
        let mut head = c.alloc().unwrap();
        pool.write(&mut head, b"head").unwrap();
        for part in [&b"a"[..], b"bb", b"ccc"] {
            let mut f = c.alloc().unwrap();
            pool.write(&mut f, part).unwrap();
            pool.chain(&mut head, f).unwrap();
        }
        let held: Vec<Buf> = (0..4 - spare).map(|_| c.alloc().unwrap()).collect();
        assert!(c.clone_frame(&head).is_none(), "{spare} buffers cannot hold four");
        // Exactly `spare` buffers are free again: all the failed copy took.
        let more: Vec<Buf> = std::iter::from_fn(|| c.alloc()).collect();
        assert_eq!(more.len() as u32, spare);
        for b in more.into_iter().chain(held) {
            c.free(b).unwrap();
        }
        let copy = c.clone_frame(&head).unwrap();
        assert_eq!(pool.frags(&copy).collect::<Vec<_>>(), [&b"a"[..], b"bb", b"ccc"]);
        c.free(copy).unwrap();
        c.free(head).unwrap();
        c.flush();
        assert_eq!(pool.shared_free(), 8, "every buffer is back");
    }
}
