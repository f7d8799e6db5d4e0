//! Per-packet paths allocate nothing once warm: the generator writes into the caller's
//! buffer, and the streaming capture reader reuses the caller's packet.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use spine_ports::craft::{udp4, Flow4};
use spine_ports::gen::{GenConfig, Generator};
use spine_ports::{CaptureReader, Packet, PcapWriter};

thread_local! {
    /// Allocations made by this thread; other test-harness threads do not count.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // try_with: the slot may be gone while the thread is being torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

struct Counting;

// SAFETY: every method forwards to the system allocator with the caller's arguments;
// counting touches only a const-initialised thread-local that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, passed on as is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: `ptr` came from this allocator (hence from `System`) with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (hence from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn generator_and_reader_do_not_allocate_per_packet() {
    // The counter itself works.
    let probe = allocations();
    std::hint::black_box(Vec::<u8>::with_capacity(16));
    assert_eq!(allocations() - probe, 1);

    let cfg = GenConfig { seed: 11, max_len: 3520, ..GenConfig::default() };
    let mut g = Generator::new(cfg.clone()).expect("valid");
    let mut buf = Vec::with_capacity(cfg.max_len);
    let before = allocations();
    for _ in 0..20_000 {
        g.next_into(&mut buf);
    }
    assert_eq!(allocations() - before, 0, "allocations while generating");

    // A capture whose first packet is the largest, then a generated mix.
    let mut w = PcapWriter::ethernet(Vec::new()).expect("vec");
    udp4(&mut buf, &Flow4::default(), 3520 - 42).expect("fits");
    w.write(0, &buf).expect("vec");
    for i in 0..5000 {
        g.next_into(&mut buf);
        w.write(i, &buf).expect("vec");
    }
    let file = w.finish().expect("vec");
    let mut reader = CaptureReader::new(&file[..]).expect("valid");
    let mut packet = Packet::default();
    assert!(reader.read_next(&mut packet).expect("valid"));
    let before = allocations();
    let mut n = 0;
    while reader.read_next(&mut packet).expect("valid") {
        n += 1;
    }
    assert_eq!(n, 5000);
    assert_eq!(allocations() - before, 0, "allocations while reading");
}

/// A keyed tunnel's per-frame path (seal on transmit, sender check, tag and window on
/// receive) allocates nothing once the ports are open.
#[test]
fn an_authenticated_tunnel_does_not_allocate_per_frame() {
    use spine_ports::{Burst, Pool, PoolConfig, Port, TunnelKey, UdpPort};
    use spine_testnet::netns::NetNs;
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = Pool::new(PoolConfig::new(256)).unwrap();
        let mut cache = pool.cache();
        let key = TunnelKey::from_bytes([9; 32]);
        let (x, y) = ("127.0.0.1:4000".parse().unwrap(), "127.0.0.1:4001".parse().unwrap());
        let mut a = UdpPort::open("ta", x, y, 1).unwrap().with_key(&key);
        let mut b = UdpPort::open("tb", y, x, 2).unwrap().with_key(&key);
        let mut tx = Burst::with_capacity(32);
        let mut rx = Burst::with_capacity(32);
        let frame = [0x11u8; 300];
        let mut round = || {
            for _ in 0..32 {
                let mut buf = cache.alloc().unwrap();
                pool.write(&mut buf, &frame).unwrap();
                tx.push(buf).unwrap();
            }
            while !tx.is_empty() {
                a.tx_burst(&mut cache, &mut tx).unwrap();
            }
            let mut got = 0;
            for _ in 0..100_000 {
                got += b.rx_burst(&mut cache, &mut rx).unwrap();
                cache.free_burst(&mut rx).unwrap();
                if got == 32 {
                    break;
                }
            }
            got
        };
        assert_eq!(round(), 32, "warm-up");
        let before = allocations();
        for _ in 0..10 {
            assert_eq!(round(), 32);
        }
        assert_eq!(allocations() - before, 0, "allocations on the keyed tunnel path");
        assert_eq!(b.stats().rx_packets, 11 * 32);
        assert_eq!(b.stats().rx_drops.total(), 0);
    });
}
