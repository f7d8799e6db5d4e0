//! The host router's four data paths through one adapter: the same IPv4 traffic (64 to
//! 1514-byte frames, two routes) goes in on port `a` and must leave on ports `b` and
//! `c` as the same frames, byte for byte, whichever path forwards it (the bundled
//! router over a FIB, or the host application over copy, header-copy or in-place
//! endpoints), and as computed here independently; every pool buffer comes back.
//! Header-copy handles a hostile client forges, repeats or lets go stale are refused
//! and counted, a bad egress port too, and the buffers a client never returns go
//! back to the pool when its endpoint goes.
//!
//! Ports `a`, `b` and `c` are endpoint ports driven by the test (the "wire side").

use spine_testnet::daemons::TempDir;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spine_adapter::{AdapterBuilder, AdapterOptions, Device, Live, Running};
use spine_client::{Channel, DataPath, Desc, Endpoint, Match};
use spine_control::{serve, Server, ServerConfig};
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_fib::{FibOp, FibWriter, Neigh, NextHop, NudState, Route};
use spine_ports::{EndpointPort, Pool, PoolConfig};
use spine_router_host::{PathKind, Router, RouterConfig};
use spine_runtime::fib_lookup::{FibEnv, Iface};
use spine_runtime::DomainSpec;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
const NEXT_B: [u8; 6] = [2, 0, 0, 0, 1, 0x0b];
const NEXT_C: [u8; 6] = [2, 0, 0, 0, 1, 0x0c];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The offload path's FIB: ports a (10), b (11), c (12); 10.1/16 out of b, 10.2/16 out
/// of c, each through a gateway with a permanent neighbour.
fn fib() -> FibEnv {
    let (mut w, r) = FibWriter::new();
    let route = |p: &str, nh: Vec<NextHop>| Route::unicast(p.parse().unwrap(), nh);
    w.add(route("10.1.0.0/16", vec![NextHop::via(ip("192.0.2.1"), 11)])).unwrap();
    w.add(route("10.2.0.0/16", vec![NextHop::via(ip("198.51.100.1"), 12)])).unwrap();
    for (ifindex, a, mac) in [(11, "192.0.2.1", NEXT_B), (12, "198.51.100.1", NEXT_C)] {
        let neigh = Neigh { mac, state: NudState::PERMANENT };
        w.apply(FibOp::SetNeigh { ifindex, ip: ip(a), neigh }).unwrap();
    }
    w.publish();
    let iface = |ifindex, mac, a: &str| Iface {
        ifindex,
        mtu: 1500,
        mac,
        forward_v4: true,
        forward_v6: true,
        addrs: vec![(ip(a), 24)],
    };
    let ifaces = vec![
        iface(10, MAC_A, "10.0.0.1"),
        iface(11, MAC_B, "192.0.2.7"),
        iface(12, MAC_C, "198.51.100.7"),
    ];
    FibEnv::new(r, ifaces)
}

/// The host application's table: the same routes.
const HOST_TABLE: &str = r#"
path = "copy"
ports = ["a", "b", "c"]

[[route]]
prefix = "10.1.0.0/16"
port = "b"
next_hop_mac = "02:00:00:00:01:0b"
src_mac = "02:00:00:00:00:0b"

[[route]]
prefix = "10.2.0.0/16"
port = "c"
next_hop_mac = "02:00:00:00:01:0c"
src_mac = "02:00:00:00:00:0c"
"#;

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(c[1])).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An Ethernet/IPv4/UDP frame of `len` bytes to `dst`.
fn v4(dst: [u8; 4], len: usize, id: u16) -> Vec<u8> {
    let mut f = [MAC_A.as_slice(), &[2, 0, 0, 0, 9, 9], &[0x08, 0x00]].concat();
    let total = (len - 14) as u16;
    let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 5];
    h[2..4].copy_from_slice(&total.to_be_bytes());
    h[4..6].copy_from_slice(&id.to_be_bytes());
    h.extend_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0x30, 0x39, 0x1f, 0x90]);
    f.extend_from_slice(&(total - 20).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend((0..len - 42).map(|i| (i as u16 ^ id) as u8));
    f
}

/// What a router makes of `f` (checksum recomputed from scratch here).
fn forwarded(f: &[u8], dmac: [u8; 6], smac: [u8; 6]) -> Vec<u8> {
    let mut o = [dmac.as_slice(), &smac, &[0x08, 0x00]].concat();
    let mut h = f[14..].to_vec();
    h[8] -= 1;
    h[10..12].copy_from_slice(&[0, 0]);
    let c = csum(&h[..20]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    o.extend_from_slice(&h);
    o
}

struct Traffic {
    input: Vec<Vec<u8>>,
    b: Vec<Vec<u8>>,
    c: Vec<Vec<u8>>,
}

fn traffic() -> Traffic {
    let (mut input, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    let mut id = 0u16;
    for len in [64, 65, 100, 128, 256, 512, 1024, 1500, 1514] {
        for dst in [[10, 1, 2, 3], [10, 2, 7, 9], [10, 1, 200, 1]] {
            id = id.wrapping_add(0x1111);
            let f = v4(dst, len, id);
            if dst[1] == 1 {
                b.push(forwarded(&f, NEXT_B, MAC_B));
            } else {
                c.push(forwarded(&f, NEXT_C, MAC_C));
            }
            input.push(f);
        }
    }
    Traffic { input, b, c }
}

fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

struct Rig {
    running: Option<Running>,
    server: Option<Server>,
    live: Live,
    /// The wire sides of ports a, b, c.
    wires: Vec<ClientEnd>,
    pool: Arc<Pool>,
    sock: PathBuf,
    _dir: TempDir,
}

impl Rig {
    /// `workers` workers (ports go to them in turn); the bundled router attached to `a`
    /// when `offload`.
    fn new(offload: bool, workers: usize) -> Rig {
        let opts = AdapterOptions {
            workers,
            pool: PoolConfig::new(1024),
            fib: Some(fib()),
            ..Default::default()
        };
        let mut b = AdapterBuilder::new(opts).unwrap();
        // A domain that may use ports a and b only.
        let ports = Some(vec!["a".to_string(), "b".to_string()]);
        b.add_domain(DomainSpec { name: "tenant".into(), ports, ..DomainSpec::default_domain() })
            .unwrap();
        let mut wires = Vec::new();
        let mut ids = Vec::new();
        for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
            let end = AdapterEnd::create(Layout::new(256, 2048, 512).unwrap()).unwrap();
            wires.push(ClientEnd::open(end.shm().fd().try_clone_to_owned().unwrap()).unwrap());
            let port = EndpointPort::new(name, end, None, i as u32);
            ids.push(b.add_port(name, Device::Other(Box::new(port)), Some(10 + i as u32)).unwrap());
        }
        if offload {
            let obj = spine_progs::get("router").expect("the bundled router").object;
            let e = b.load_extension("router", obj, None, "default", "test").unwrap();
            b.attach(e, ids[0]).unwrap();
        }
        let adapter = b.build().unwrap();
        let pool = adapter.pool().clone();
        let running = adapter.start().unwrap();
        let dir = TempDir::new("rig");
        let sock = dir.join("spine.sock");
        let server = serve(running.live(), ServerConfig::new(&sock)).unwrap();
        let live = running.live();
        Rig { running: Some(running), server: Some(server), live, wires, pool, sock, _dir: dir }
    }

    fn inject(&mut self, frames: &[Vec<u8>]) {
        for f in frames {
            until("room on wire a", || self.wires[0].send(f));
        }
    }

    /// What left on port `w` (1: b, 2: c), once `n` frames have.
    fn out(&mut self, w: usize, n: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        until("the forwarded frames", || {
            self.wires[w].recv(64, |m| got.push(m.to_vec()));
            got.len() >= n
        });
        got
    }

    fn served(&self, n: usize) {
        until("the endpoints served", || {
            let eps = self.live.endpoints();
            eps.len() == n && eps.iter().all(|e| e.served)
        });
    }

    /// Stops the server and the adapter; checks every pool buffer came back.
    fn finish(mut self) -> spine_adapter::Totals {
        self.server.take().unwrap().stop();
        let report = self.running.take().unwrap().stop().unwrap();
        assert_eq!(self.pool.shared_free(), self.pool.capacity(), "every pool buffer back");
        report.totals
    }
}

/// The host application on its own thread until `stop`; its router's counters.
fn host_router(
    sock: &Path,
    path: PathKind,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<spine_router_host::RouterStats> {
    let mut cfg = RouterConfig::parse(HOST_TABLE).unwrap();
    cfg.path = path;
    let sock = sock.to_path_buf();
    std::thread::spawn(move || {
        let mut r = Router::open(&sock, &cfg).unwrap();
        while !stop.load(Ordering::Relaxed) {
            if r.poll() == 0 {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        r.stats
    })
}

/// Runs `path` over the traffic; returns what left on b and c.
fn run(path: PathKind, workers: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let t = traffic();
    let mut rig = Rig::new(path == PathKind::Offload, workers);
    let stop = Arc::new(AtomicBool::new(false));
    let host = (path != PathKind::Offload).then(|| host_router(&rig.sock, path, stop.clone()));
    if host.is_some() {
        rig.served(3);
    }
    rig.inject(&t.input);
    let b = rig.out(1, t.b.len());
    let c = rig.out(2, t.c.len());
    stop.store(true, Ordering::Relaxed);
    if let Some(h) = host {
        let s = h.join().unwrap();
        assert_eq!(
            (s.forwarded, s.not_routed, s.no_room),
            (t.input.len() as u64, 0, 0),
            "{path:?}"
        );
        let eps = rig.live.endpoints();
        assert!(eps.iter().all(|e| e.counters.bad_desc == 0 && e.counters.bad_handle == 0));
        if path == PathKind::HeaderCopy {
            let held: u64 = eps.iter().map(|e| e.counters.held).sum();
            assert_eq!(held, 0, "every handle returned");
        }
    }
    let totals = rig.finish();
    assert_eq!(totals.port("a").unwrap().rx_packets, t.input.len() as u64);
    assert_eq!(totals.port("b").unwrap().tx_packets, t.b.len() as u64);
    assert_eq!(totals.port("c").unwrap().tx_packets, t.c.len() as u64);
    if workers > 1 && path != PathKind::Copy {
        // Port b's home is worker 1; a's is worker 0: b's frames crossed over.
        let handed: u64 = totals.workers.iter().map(|w| w.peer_in).sum();
        assert!(handed >= t.b.len() as u64, "{path:?}: {handed} frames handed between workers");
    }
    (b, c)
}

fn same_frames(workers: usize) {
    let t = traffic();
    let (ob, oc) = run(PathKind::Offload, workers);
    assert_eq!(ob, t.b, "offload: out of b, byte for byte");
    assert_eq!(oc, t.c, "offload: out of c, byte for byte");
    for path in [PathKind::Copy, PathKind::HeaderCopy, PathKind::InPlace] {
        let (b, c) = run(path, workers);
        assert_eq!(b, ob, "{path:?}: out of b as offload");
        assert_eq!(c, oc, "{path:?}: out of c as offload");
    }
}

#[test]
fn the_four_paths_forward_the_same_traffic_to_the_same_frames() {
    same_frames(1);
}

/// Egress ports on another worker than the ingress port's: header-copy and in-place
/// buffers are handed over between workers, the copy path's sends leave from the
/// egress endpoint's own worker.
#[test]
fn the_four_paths_agree_across_two_workers() {
    same_frames(2);
}

#[test]
fn header_copy_refuses_forged_stale_and_duplicated_handles_and_loses_no_buffer() {
    let mut rig = Rig::new(false, 1);
    let chan = Channel {
        matches: Match { ethertype: Some(0x0800), ..Match::default() },
        path: Some(DataPath::HeaderCopy),
        header_bytes: Some(42),
        ..Channel::port("a")
    };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    assert_eq!(ep.port_index(), Some(0));
    rig.served(1);
    let frames: Vec<Vec<u8>> =
        (0..6u16).map(|i| v4([10, 1, 0, 1], 300 + 100 * i as usize, i)).collect();
    rig.inject(&frames);
    let mut got: Vec<(u64, usize, Vec<u8>)> = Vec::new();
    until("six headers", || {
        ep.recv_headers(64, |h| got.push((h.handle, h.total, h.header.to_vec())));
        got.len() >= 6
    });
    for (k, (_, total, hdr)) in got.iter().enumerate() {
        assert_eq!(*total, frames[k].len(), "the whole length is told");
        assert_eq!(hdr, &frames[k][..42], "42 header bytes, as asked");
    }
    let h = |k: usize| got[k].0;
    let (b, c) = (1u16, 2u16);
    // A good return: the header comes back rewritten; the rest of the frame is spliced.
    let mut hdr0 = got[0].2.clone();
    hdr0[0..6].copy_from_slice(&NEXT_B);
    assert!(ep.return_header(h(0), b, &hdr0));
    let mut want0 = frames[0].clone();
    want0[0..6].copy_from_slice(&NEXT_B);
    assert_eq!(rig.out(1, 1), vec![want0], "header spliced before the kept payload");
    // Hostile returns, each refused: a duplicate, two forgeries, a bad egress port
    // (which frees the buffer), the same handle again (now stale).
    assert!(ep.return_header(h(0), b, &hdr0), "duplicated");
    assert!(ep.return_header(h(1) ^ 1 << 40, b, &got[1].2), "another generation");
    assert!(ep.return_header(0xdead_beef_0000_0007, b, &got[1].2), "made up");
    assert!(ep.return_header(h(1), 99, &got[1].2), "no port 99");
    assert!(ep.return_header(h(1), b, &got[1].2), "stale after the bad egress");
    // A drop, and a shorter header (14 bytes standing for 42) out of c.
    assert!(ep.return_header(h(2), Desc::EGRESS_DROP, &got[2].2));
    let short = [NEXT_C.as_slice(), &MAC_C, &[0x08, 0x00]].concat();
    assert!(ep.return_header(h(3), c, &short));
    let want3 = [short.as_slice(), &frames[3][42..]].concat();
    assert_eq!(rig.out(2, 1), vec![want3], "a shorter header spliced");
    // Handles 4 and 5 are never returned.
    until("the counters", || {
        let e = &rig.live.endpoints()[0];
        e.counters.bad_handle == 5 && e.counters.held == 2
    });
    let e = &rig.live.endpoints()[0];
    assert_eq!(e.counters.rx_delivered, 6);
    assert_eq!(e.counters.bad_desc, 0);
    // Nothing else left on b or c.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(rig.wires[1].recv(64, |_| {}) + rig.wires[2].recv(64, |_| {}), 0);
    // The adapter still forwards after all that: one more round trip.
    rig.inject(&frames[..1]);
    let mut again = Vec::new();
    until("a seventh header", || {
        ep.recv_headers(64, |h| again.push((h.handle, h.header.to_vec())));
        !again.is_empty()
    });
    assert!(ep.return_header(again[0].0, b, &again[0].1));
    assert_eq!(rig.out(1, 1), vec![frames[0].clone()]);
    // The client goes with two buffers held: they go back to the pool (finish counts).
    drop(ep);
    until("the endpoint reclaimed", || rig.live.endpoints().is_empty());
    rig.finish();
}

#[test]
fn in_place_frames_never_travel_inline_and_bad_egress_is_dropped() {
    let mut rig = Rig::new(false, 1);
    let chan = Channel {
        path: Some(DataPath::InPlace),
        domain: Some("tenant".into()),
        ..Channel::port("a")
    };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let small = v4([10, 1, 0, 1], 60, 1);
    let big = v4([10, 1, 0, 1], 800, 2);
    let third = v4([10, 1, 0, 1], 300, 3);
    rig.inject(&[small.clone(), big.clone(), third.clone()]);
    let mut seen = Vec::new();
    until("three frames in place", || {
        ep.forward_in_place(64, |f| {
            seen.push(f.to_vec());
            // The first out of b; the second to c, which the endpoint's domain may not
            // use; the third to a port that does not exist.
            Some([1, 2, 77][seen.len() - 1])
        });
        seen.len() >= 3
    });
    assert_eq!(seen, vec![small.clone(), big, third], "a 60-byte frame arrives in a frame too");
    assert_eq!(rig.out(1, 1), vec![small]);
    until("the bad egresses dropped", || {
        rig.live.totals().port("a").unwrap().drops.redirect_no_target == 2
    });
    assert_eq!(rig.wires[2].recv(64, |_| {}), 0, "nothing left on c");
    drop(ep);
    until("the endpoint reclaimed", || rig.live.endpoints().is_empty());
    rig.finish();
}
