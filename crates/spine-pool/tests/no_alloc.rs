//! The per-packet path allocates nothing: a warm cache allocates and frees buffers, and
//! bursts fill and drain, without touching the heap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use spine_pool::{Burst, Pool, PoolConfig};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: forwards to the system allocator; counting touches only a const thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warm_cache_and_bursts_do_not_allocate() {
    let pool = Pool::new(PoolConfig { cache_batch: 16, ..PoolConfig::new(256) }).unwrap();
    let mut cache = pool.cache();
    let mut burst = Burst::with_capacity(32);
    let frame = [0x5au8; 64];
    let before = ALLOCATIONS.with(Cell::get);
    for _ in 0..1_000 {
        while !burst.is_full() {
            let mut b = cache.alloc().unwrap();
            pool.write(&mut b, &frame).unwrap();
            burst.push(b).unwrap();
        }
        for b in burst.iter() {
            assert_eq!(pool.data(b).unwrap().len(), 64);
        }
        cache.free_burst(&mut burst).unwrap();
    }
    assert_eq!(ALLOCATIONS.with(Cell::get), before, "the packet path allocated");
}

#[test]
fn bulk_alloc_and_free_do_not_allocate_and_keep_every_buffer() {
    let pool = Pool::new(PoolConfig { cache_batch: 16, ..PoolConfig::new(256) }).unwrap();
    let mut cache = pool.cache();
    let mut burst = Burst::with_capacity(32);
    // Warm up: the cache's stack reaches its working size once.
    assert_eq!(cache.alloc_burst(&mut burst, 32), 32);
    cache.free_burst(&mut burst).unwrap();
    let before = ALLOCATIONS.with(Cell::get);
    for _ in 0..1_000 {
        assert_eq!(cache.alloc_burst(&mut burst, 64), 32, "limited by the burst's room");
        for b in burst.iter() {
            pool.prefetch(b);
            assert_eq!(pool.refs(b).unwrap(), 1);
        }
        cache.free_burst(&mut burst).unwrap();
    }
    assert_eq!(ALLOCATIONS.with(Cell::get), before, "the packet path allocated");
    cache.flush();
    assert_eq!(pool.shared_free(), 256, "every buffer came back");
    // A pool that runs short fills what it can.
    let mut big = Burst::with_capacity(300);
    assert_eq!(cache.alloc_burst(&mut big, 300), 256);
    assert_eq!(cache.alloc_burst(&mut big, 1), 0);
    cache.free_burst(&mut big).unwrap();
    cache.flush();
    assert_eq!(pool.shared_free(), 256);
}
