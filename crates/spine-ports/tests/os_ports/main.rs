//! Ports on real interfaces: veth pairs and TAP devices in network namespaces each test
//! creates (unique names, removed when the test ends, also on failure). Frames are
//! injected and observed with a plain AF_PACKET socket, independent of the port tested.

mod afpacket;
mod afxdp;
mod tap;
mod udp;

use std::time::{Duration, Instant};

use spine_ports::{Buf, Burst, Pool, PoolCache, PoolConfig, Port};

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

/// Like [`rx_n`], but each frame whole (head and fragments); also returns how many of
/// them came as chains.
pub fn rx_whole(
    port: &mut dyn Port,
    cache: &mut PoolCache,
    n: usize,
    wait: Duration,
) -> (Vec<Vec<u8>>, usize) {
    let deadline = Instant::now() + wait;
    let pool = cache.pool().clone();
    let mut burst = Burst::with_capacity(32);
    let (mut out, mut chains) = (Vec::new(), 0);
    while out.len() < n && Instant::now() < deadline {
        port.rx_burst(cache, &mut burst).unwrap();
        for b in burst.iter() {
            assert!(burst.has_chains() || !pool.has_frags(b), "a chain in an unmarked burst");
            let mut f = pool.data(b).unwrap().to_vec();
            chains += usize::from(pool.has_frags(b));
            pool.frags(b).for_each(|p| f.extend_from_slice(p));
            out.push(f);
        }
        cache.free_burst(&mut burst).unwrap();
        if burst.is_empty() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    (out, chains)
}

/// `bytes` in a buffer, or in a chain of buffers of `piece` bytes when longer.
pub fn chain_of(cache: &mut PoolCache, bytes: &[u8], piece: usize) -> Buf {
    let pool = cache.pool().clone();
    let mut head = cache.alloc().expect("pool has room");
    pool.write(&mut head, &bytes[..bytes.len().min(piece)]).unwrap();
    for p in bytes[bytes.len().min(piece)..].chunks(piece) {
        let mut f = cache.alloc().expect("pool has room");
        pool.write(&mut f, p).unwrap();
        pool.chain(&mut head, f).unwrap();
    }
    head
}

/// Transmits `frames` through `port` in one chained burst (frames longer than 1,792
/// bytes as chains of 1,792-byte pieces), retrying while its queue is full.
pub fn tx_chains(port: &mut dyn Port, cache: &mut PoolCache, frames: &[Vec<u8>]) {
    let mut burst = Burst::with_capacity(frames.len());
    burst.set_chained();
    for f in frames {
        let b = chain_of(cache, f, 1792);
        burst.push(b).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !burst.is_empty() {
        assert!(Instant::now() < deadline, "transmit queue never drained");
        port.tx_burst(cache, &mut burst).unwrap();
        port.flush(cache).unwrap();
    }
}
