//! Ports on real interfaces: veth pairs and TAP devices in network namespaces each test
//! creates (unique names, removed when the test ends, also on failure). Frames are
//! injected and observed with a plain AF_PACKET socket, independent of the port tested.

mod afpacket;
mod afxdp;
mod tap;
mod udp;

use std::time::{Duration, Instant};

use spine_ports::{Burst, Pool, PoolCache, PoolConfig, Port};

/// Receives until `n` packets arrived or `wait` passed; returns their bytes and frees
/// the buffers.
pub fn rx_n(port: &mut dyn Port, cache: &mut PoolCache, n: usize, wait: Duration) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + wait;
    let mut burst = Burst::with_capacity(32);
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        port.rx_burst(cache, &mut burst).unwrap();
        for b in burst.iter() {
            out.push(cache.pool().data(b).unwrap().to_vec());
        }
        cache.free_burst(&mut burst).unwrap();
        if burst.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    out
}

/// Transmits `frames` through `port`, retrying while its queue is full.
pub fn tx_all(port: &mut dyn Port, cache: &mut PoolCache, frames: &[Vec<u8>]) {
    let pool = cache.pool().clone();
    let mut burst = Burst::with_capacity(32);
    let deadline = Instant::now() + Duration::from_secs(5);
    for chunk in frames.chunks(32) {
        for f in chunk {
            let mut b = cache.alloc().expect("pool has room");
            pool.write(&mut b, f).unwrap();
            burst.push(b).unwrap();
        }
        while !burst.is_empty() {
            assert!(Instant::now() < deadline, "transmit queue never drained");
            port.tx_burst(cache, &mut burst).unwrap();
            port.flush(cache).unwrap();
        }
    }
}

pub fn pool(buffers: u32) -> std::sync::Arc<Pool> {
    Pool::new(PoolConfig::new(buffers)).unwrap()
}

pub fn skip(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "SKIP: {why}");
}
