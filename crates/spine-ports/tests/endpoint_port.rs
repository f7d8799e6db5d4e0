//! An endpoint as a port: frames flow client → port → worker burst → port → client,
//! and a hostile or vanished client leaves every pool buffer accounted for.

use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{Burst, EndpointPort, Pool, PoolConfig, Port};

fn open() -> (EndpointPort, ClientEnd) {
    let end = AdapterEnd::create(Layout::new(64, 2048, 128).unwrap()).unwrap();
    let fd = end.shm().fd().try_clone_to_owned().unwrap();
    (EndpointPort::new("ep0", end, None, 3), ClientEnd::open(fd).unwrap())
}

#[test]
fn frames_loop_through_the_port_and_the_pool_stays_whole() {
    let pool = Pool::new(PoolConfig::new(256)).unwrap();
    let mut cache = pool.cache();
    let (mut port, mut client) = open();
    let mut burst = Burst::with_capacity(32);
    let mut echoed = 0;
    for round in 0..10u8 {
        for i in 0..20u8 {
            assert!(client.send(&[round, i, 0xaa, 0xbb]));
        }
        assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 20);
        assert_eq!(port.tx_burst(&mut cache, &mut burst).unwrap(), 20);
        let mut i = 0;
        echoed += client.recv(64, |m| {
            assert_eq!(m, &[round, i, 0xaa, 0xbb]);
            i += 1;
        });
    }
    assert_eq!(echoed, 200);
    let s = port.stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.tx_drops.total()), (200, 200, 0));
    cache.flush();
    assert_eq!(pool.shared_free(), pool.capacity(), "every pool buffer back");
}

#[test]
fn a_client_that_stops_reading_or_writes_garbage_costs_no_pool_buffer() {
    let pool = Pool::new(PoolConfig::new(256)).unwrap();
    let mut cache = pool.cache();
    let (mut port, client) = open();
    let mut burst = Burst::with_capacity(32);
    // Never reads: deliveries beyond its fill frames are dropped, buffers freed.
    for _ in 0..10 {
        for _ in 0..32 {
            let mut b = cache.alloc().unwrap();
            pool.write(&mut b, &[1; 60]).unwrap();
            burst.push(b).unwrap();
        }
        port.tx_burst(&mut cache, &mut burst).unwrap();
    }
    let s = port.stats();
    assert_eq!(s.tx_packets, 64, "the ring's worth of fill frames given at open");
    assert_eq!(s.tx_drops.kernel, 320 - 64);
    // Garbage over its transmit ring's producer index and descriptors, then death.
    let tx_ring = 4096;
    client.poke_u32(tx_ring, 0x7fff_ffff);
    for w in 0..64 {
        client.poke_u64(tx_ring + 128 + w * 8, 0xdead_beef_dead_beef);
    }
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    client.poke_u32(tx_ring, 5);
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    assert!(port.stats().rx_drops.bad_desc >= 5);
    drop(client);
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    cache.flush();
    assert_eq!(pool.shared_free(), pool.capacity(), "every pool buffer back");
}
