//! The cost of tunnel peer authentication per frame, measured against the same tunnel
//! without a key in the same run (release build, loopback):
//!
//! ```text
//! cargo run --release -p spine-ports --example tunnel_auth_cost
//! ```
//!
//! Prints, for 64- and 1,500-byte frames, the median over rounds of (1) a frame through
//! two tunnel ports on loopback, `tx_burst` on one end to `rx_burst` on the other, bursts
//! of 32, without and with a key, rounds interleaved; (2) `seal` plus `open` alone.
//!
//! `tunnel_auth_cost mac SIZE N` runs only N seal+open pairs of a SIZE-byte frame, for an
//! instruction count independent of the machine's load: run it under
//! `valgrind --tool=callgrind` with N and with 0 and divide the difference by N.

use std::hint::black_box;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use spine_ports::{Burst, Pool, PoolConfig, Port, TunnelAuth, TunnelKey, UdpPort, AUTH_HEADER_LEN};

const BURST: usize = 32;
const BURSTS: usize = 200;
const ROUNDS: usize = 15;

fn free_addr() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
}

fn pair(key: Option<&TunnelKey>) -> (UdpPort, UdpPort) {
    let (x, y) = (free_addr(), free_addr());
    let a = UdpPort::open("a", x, y, 1).unwrap();
    let b = UdpPort::open("b", y, x, 2).unwrap();
    match key {
        Some(k) => (a.with_key(k), b.with_key(k)),
        None => (a, b),
    }
}

/// Nanoseconds per frame, tx on `a` to rx on `b`.
fn through(a: &mut UdpPort, b: &mut UdpPort, pool: &Arc<Pool>, frame: &[u8]) -> f64 {
    let mut cache = pool.cache();
    let mut tx = Burst::with_capacity(BURST);
    let mut rx = Burst::with_capacity(BURST);
    let t = Instant::now();
    for _ in 0..BURSTS {
        for _ in 0..BURST {
            let mut buf = cache.alloc().unwrap();
            pool.write(&mut buf, frame).unwrap();
            tx.push(buf).unwrap();
        }
        while !tx.is_empty() {
            a.tx_burst(&mut cache, &mut tx).unwrap();
        }
        let mut got = 0;
        while got < BURST {
            got += b.rx_burst(&mut cache, &mut rx).unwrap();
            cache.free_burst(&mut rx).unwrap();
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (BURSTS * BURST) as f64;
    assert_eq!(b.stats().rx_drops.total(), 0);
    ns
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// N seal+open pairs of one frame, nothing else.
fn mac_only(size: usize, n: usize) {
    let key = TunnelKey::from_bytes([0x5a; 32]);
    let frame: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let (mut s, mut o) = (TunnelAuth::new(&key, 1), TunnelAuth::new(&key, 2));
    let mut hdr = [0u8; AUTH_HEADER_LEN];
    for _ in 0..n {
        s.seal(&mut hdr, |h| {
            h.update(black_box(&frame));
        });
        o.open(black_box(&hdr), |h| {
            h.update(black_box(&frame));
        })
        .unwrap();
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("mac") {
        let size = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(64);
        let n = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(10_000);
        mac_only(size, n);
        return;
    }
    let pool = Pool::new(PoolConfig::new(1024)).unwrap();
    let key = TunnelKey::from_bytes([0x5a; 32]);
    for size in [64usize, 1500] {
        let frame: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let (mut a0, mut b0) = pair(None);
        let (mut a1, mut b1) = pair(Some(&key));
        let (mut plain, mut keyed) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            plain.push(through(&mut a0, &mut b0, &pool, &frame));
            keyed.push(through(&mut a1, &mut b1, &pool, &frame));
        }
        let (p, k) = (median(plain), median(keyed));
        // The MAC and window alone: seal on one end, open on the other.
        let (mut s, mut o) = (TunnelAuth::new(&key, 1), TunnelAuth::new(&key, 2));
        let mut hdr = [0u8; AUTH_HEADER_LEN];
        let n = 200_000;
        let mut alone = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..n {
                s.seal(&mut hdr, |h| {
                    h.update(black_box(&frame));
                });
                o.open(black_box(&hdr), |h| {
                    h.update(black_box(&frame));
                })
                .unwrap();
            }
            alone.push(t.elapsed().as_nanos() as f64 / n as f64);
        }
        println!(
            "{size:>5} B: tunnel tx+rx per frame {p:.0} ns without key, {k:.0} ns with key \
             (+{:.0} ns, x{:.3}); seal+open alone {:.0} ns",
            k - p,
            k / p,
            median(alone)
        );
    }
}
