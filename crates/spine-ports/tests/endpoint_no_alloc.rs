//! An endpoint port's receive and transmit allocate nothing once warm, inline messages
//! and frames alike (and neither does the Rust client's send and receive).

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::cell::Cell;

use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{Burst, EndpointPort, Pool, PoolConfig, Port};

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: forwards to the system allocator; counting touches only a const thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn endpoint_receive_and_transmit_do_not_allocate_per_packet() {
    let pool = Pool::new(PoolConfig::new(1024)).unwrap();
    let mut cache = pool.cache();
    let end = AdapterEnd::create(Layout::new(64, 2048, 128).unwrap()).unwrap();
    let fd = end.shm().fd().try_clone_to_owned().unwrap();
    let mut port = EndpointPort::new("ep", end, None, 1);
    let mut client = ClientEnd::open(fd).unwrap();
    let mut burst = Burst::with_capacity(32);
    let (small, large) = ([5u8; 40], [6u8; 1000]);
    let mut round = |port: &mut EndpointPort, cache: &mut spine_ports::PoolCache| {
        for i in 0..16 {
            assert!(client.send(if i % 2 == 0 { &small[..] } else { &large[..] }));
        }
        assert_eq!(port.rx_burst(cache, &mut burst).unwrap(), 16);
        assert_eq!(port.tx_burst(cache, &mut burst).unwrap(), 16);
        assert_eq!(client.recv(64, |m| assert!(m.len() == 40 || m.len() == 1000)), 16);
    };
    // Warm up: the cache takes its first batch.
    round(&mut port, &mut cache);
    let before = ALLOCATIONS.with(Cell::get);
    for _ in 0..1_000 {
        round(&mut port, &mut cache);
    }
    assert_eq!(ALLOCATIONS.with(Cell::get), before, "the endpoint path allocated");
    let s = port.endpoint_stats();
    assert_eq!((s.tx_inline, s.rx_inline), (8 * 1001, 8 * 1001));
}
