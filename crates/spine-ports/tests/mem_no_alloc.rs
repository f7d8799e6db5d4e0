//! The mem port's receive and the sink's transmit allocate nothing once warm: the
//! benchmark path measures packet work, not the allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use spine_ports::{Burst, MemPort, Pool, PoolConfig, Port};

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
fn mem_replay_and_sink_do_not_allocate_per_packet() {
    let pool = Pool::new(PoolConfig::new(1024)).unwrap();
    let mut cache = pool.cache();
    let frames: Vec<Vec<u8>> = (0..8).map(|i| vec![i as u8; 60]).collect();
    let mut src = MemPort::replay("src", &frames).unwrap();
    let mut sink = MemPort::sink("sink");
    let mut burst = Burst::with_capacity(32);
    // Warm up: the cache takes its first batch.
    src.rx_burst(&mut cache, &mut burst).unwrap();
    sink.tx_burst(&mut cache, &mut burst).unwrap();
    let before = ALLOCATIONS.with(Cell::get);
    for _ in 0..1_000 {
        assert_eq!(src.rx_burst(&mut cache, &mut burst).unwrap(), 32);
        assert_eq!(sink.tx_burst(&mut cache, &mut burst).unwrap(), 32);
    }
    assert_eq!(ALLOCATIONS.with(Cell::get), before, "the packet path allocated");
    assert_eq!(sink.stats().tx_packets, 32 * 1001);
}
