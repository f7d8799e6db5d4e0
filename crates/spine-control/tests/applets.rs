//! Endpoint applets (U-Net/SLE), end to end: the bundled applets of `bpf/applets/`
//! loaded into a running adapter, an application opening an endpoint that names them,
//! and the frames it sends and receives going through the applets on the adapter.
//!
//! As in `endpoints.rs`, the port `wire` is an endpoint port driven by the test (what the
//! test sends into it the adapter receives on `wire`; what the adapter sends on `wire`
//! comes out of it); the host path is a mem sink, `host`. The ping-pong tests (applets,
//! and active messages between adapters) join two adapters by a UDP tunnel port on the
//! loopback interface.

mod common;
#[path = "applets/retx.rs"]
mod retx;

use common::c_client;
use spine_testnet::daemons::TempDir;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spine_adapter::{AdapterBuilder, AdapterOptions, Assign, Device, Live, Running};
use spine_client::{Channel, Endpoint, OpenError};
use spine_control::{serve, Client, Server, ServerConfig};
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{EndpointPort, MemPort, Pool, PoolConfig, UdpPort};
use spine_runtime::DomainSpec;

/// Builds `bpf/applets/<name>.c` (or a fixture of this crate's `tests/fixtures`).
fn applet(name: &str) -> Vec<u8> {
    build("../../bpf/applets", name)
}

fn build(dir: &str, name: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!("spine-app-{}-{seq}-{name}.o", std::process::id()));
    let obj = spine_progs::compile_c(&dir.join(format!("{name}.c")), &out, &[]).unwrap();
    let _ = std::fs::remove_file(out);
    obj
}

/// An Ethernet/IPv4/UDP frame to `dport` carrying `payload`.
fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let total = (28 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// Waits (generously) for `cond`; panics naming `what`. Not a timing: the condition is
/// what is checked, the deadline only bounds a broken run.
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn refused(r: Result<Endpoint, OpenError>) -> (String, String) {
    match r {
        Err(OpenError::Refused { kind, message }) => (kind, message),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, got an endpoint"),
    }
}

fn recv_n(ep: &mut Endpoint, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    until("the endpoint's frames", || {
        ep.recv(64, |m| got.push(m.to_vec()));
        got.len() >= n
    });
    got
}

/// A `u64` at `at` of a map value.
fn u64_at(v: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(v[at..at + 8].try_into().unwrap())
}

/// A running adapter with its control server.
struct Running1 {
    running: Option<Running>,
    server: Option<Server>,
    live: Live,
    pool: Arc<Pool>,
    sock: PathBuf,
    _dir: TempDir,
}

impl Running1 {
    fn start(b: AdapterBuilder, tag: &str) -> Running1 {
        let adapter = b.build().unwrap();
        let pool = adapter.pool().clone();
        let running = adapter.start().unwrap();
        let dir = TempDir::new(tag);
        let sock = dir.join("spine.sock");
        let server = serve(running.live(), ServerConfig::new(&sock)).unwrap();
        let live = running.live();
        Running1 { running: Some(running), server: Some(server), live, pool, sock, _dir: dir }
    }

    fn served(&self, n: usize) {
        until("the endpoints served by a worker", || {
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

fn options() -> AdapterOptions {
    options_with(1)
}

fn options_with(workers: usize) -> AdapterOptions {
    AdapterOptions {
        workers,
        assign: Assign::Rss,
        pool: PoolConfig::new(1024),
        ..Default::default()
    }
}

/// An adapter with port `wire` (driven by the test through the returned end) whose host
/// path is the mem sink `host`, and domain `other` besides `default`.
fn wired() -> (Running1, ClientEnd) {
    wired_with(1)
}

/// As `wired`, on `workers` workers with software RSS.
fn wired_with(workers: usize) -> (Running1, ClientEnd) {
    let mut b = AdapterBuilder::new(options_with(workers)).unwrap();
    let end = AdapterEnd::create(Layout::new(256, 2048, 512).unwrap()).unwrap();
    let wire = ClientEnd::open(end.shm().fd().try_clone_to_owned().unwrap()).unwrap();
    let w = b
        .add_port("wire", Device::Other(Box::new(EndpointPort::new("wire", end, None, 0))), None)
        .unwrap();
    let h =
        b.add_port("host", Device::Mem { port: MemPort::sink("host"), sink: true }, None).unwrap();
    b.set_host_path(w, h).unwrap();
    b.add_domain(DomainSpec { name: "other".into(), ..DomainSpec::default_domain() }).unwrap();
    (Running1::start(b, "wired"), wire)
}

fn inject(wire: &mut ClientEnd, frames: &[Vec<u8>]) {
    for f in frames {
        until("room on the wire", || wire.send(f));
    }
}

/// The raw pass-through applet (`bpf/applets/passthru.c`): every frame the client sends
/// goes through `doTx` and leaves on the port unchanged, every frame for the endpoint
/// goes through `doRx` and is delivered unchanged, in order; the applet's map counts
/// exactly those frames and bytes (read over the API), the endpoint's counters show the
/// runs; frames for other tags never reach the applet. Requests naming no extension, an
/// extension without applets, or one of another domain are refused by kind.
#[test]
fn pass_through_applets_see_every_frame_and_deliver_exactly() {
    pass_through(1);
}

/// As above on two workers with software RSS: frames received on either worker are
/// handed to the endpoint's home worker, which runs doRx.
#[test]
fn pass_through_applets_see_frames_from_any_worker() {
    pass_through(2);
}

fn pass_through(workers: usize) {
    let (rig, mut wire) = wired_with(workers);
    rig.live.load("pt", &applet("passthru"), None, "default").unwrap();
    rig.live.load("plain", &build("tests/fixtures", "odd_drop"), None, "default").unwrap();
    let chan =
        |applets: &str| Channel { applets: Some(applets.into()), ..Channel::udp4("wire", 7777) };
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &chan("nope")));
    assert_eq!(kind, "no_extension", "{msg}");
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &chan("plain")));
    assert_eq!(kind, "no_applets", "{msg}");
    assert!(msg.contains("plain") && msg.contains("spine/applet"), "{msg}");
    let other = Channel { domain: Some("other".into()), ..chan("pt") };
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &other));
    assert_eq!(kind, "refused", "{msg}");
    assert!(msg.contains("'pt'") && msg.contains("'other'"), "{msg}");
    assert!(rig.live.endpoints().is_empty(), "refusals leave nothing behind");

    let mut ep = Endpoint::open(&rig.sock, &chan("pt")).unwrap();
    rig.served(1);
    assert_eq!(rig.live.endpoints()[0].applets.as_deref(), Some("pt"));
    let mine: Vec<Vec<u8>> = (0..10u8).map(|i| udp(7777, &vec![i; 4 + 40 * i as usize])).collect();
    let others: Vec<Vec<u8>> = (0..4u8).map(|i| udp(8888, &[i; 30])).collect();
    let mut all = mine.clone();
    all.extend(others.iter().cloned());
    inject(&mut wire, &all);
    assert_eq!(recv_n(&mut ep, 10), mine, "exactly the tagged frames, in order");
    let sent: Vec<Vec<u8>> =
        (0..6u8).map(|i| udp(5000, &vec![0xa0 + i; 20 + 90 * i as usize])).collect();
    assert_eq!(ep.send_batch(&sent), 6);
    let mut out = Vec::new();
    until("the client's frames on the wire", || {
        wire.recv(64, |m| out.push(m.to_vec()));
        out.len() >= 6
    });
    assert_eq!(out, sent, "the client's frames leave unchanged, in order");
    let bytes = |v: &[Vec<u8>]| v.iter().map(|f| f.len() as u64).sum::<u64>();
    let tx = rig.live.map_lookup("pt", "counts", &0u32.to_ne_bytes()).unwrap();
    let rx = rig.live.map_lookup("pt", "counts", &1u32.to_ne_bytes()).unwrap();
    assert_eq!((u64_at(&tx, 0), u64_at(&tx, 8)), (6, bytes(&sent)), "doTx saw each sent frame");
    assert_eq!((u64_at(&rx, 0), u64_at(&rx, 8)), (10, bytes(&mine)), "doRx saw each tagged frame");
    let mut api = Client::new(&rig.sock);
    until("the counters published", || {
        let c = api.endpoints().unwrap()[0].counters;
        c.rx_delivered == 10 && c.tx_sent == 6 && c.applets.passed == 16
    });
    let c = api.endpoints().unwrap()[0].counters;
    assert_eq!((c.applets.tx_runs, c.applets.rx_runs), (6, 10));
    assert_eq!((c.applets.dropped, c.applets.faults, c.applets.reflected), (0, 0, 0));
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    drop(ep);
    let t = rig.finish();
    assert_eq!(t.port("wire").unwrap().to_host, others.len() as u64);
}

/// The burst applet (`bpf/applets/burst.c`): each frame the client sends becomes one copy
/// per entry of the `fanout` devmap. With three entries naming `wire` and one naming
/// `host`, 7 sends give exactly 21 frames on the wire (each three times, in order) and 7
/// on the host port; with the map emptied a send is dropped by the applet.
#[test]
fn the_burst_applet_fans_one_send_out_to_every_entry() {
    let (rig, mut wire) = wired();
    rig.live.load("burst", &applet("burst"), None, "default").unwrap();
    let ifindex =
        |name: &str| rig.live.ports().into_iter().find(|p| p.name == name).unwrap().ifindex;
    let (w, h) = (ifindex("wire"), ifindex("host"));
    for (k, i) in [(0u32, w), (1, w), (5, w), (9, h)] {
        rig.live.map_update("burst", "fanout", &k.to_ne_bytes(), &i.to_ne_bytes(), 0).unwrap();
    }
    let chan = Channel { applets: Some("burst".into()), ..Channel::udp4("wire", 7777) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let sent: Vec<Vec<u8>> = (0..7u8).map(|i| udp(5000, &vec![i; 30 + 50 * i as usize])).collect();
    for f in &sent {
        until("room on the transmit ring", || ep.send_batch(std::slice::from_ref(f)) == 1);
    }
    let mut out = Vec::new();
    until("the copies on the wire", || {
        wire.recv(64, |m| out.push(m.to_vec()));
        out.len() >= 21
    });
    let want: Vec<Vec<u8>> = sent.iter().flat_map(|f| [f.clone(), f.clone(), f.clone()]).collect();
    assert_eq!(out, want, "three copies of each send, in order");
    until("the copies on the host port", || {
        rig.live.totals().port("host").unwrap().tx_packets == 7
    });
    let n = rig.live.map_lookup("burst", "sends", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64_at(&n, 0), 7);
    let mut api = Client::new(&rig.sock);
    until("the counters published", || api.endpoints().unwrap()[0].counters.applets.tx_runs == 7);
    let c = api.endpoints().unwrap()[0].counters;
    assert_eq!((c.tx_sent, c.applets.redirected, c.applets.dropped), (7, 7, 0));
    // An empty fanout map: nothing to send to, the applet's broadcast drops the frame.
    for k in [0u32, 1, 5, 9] {
        rig.live.map_delete("burst", "fanout", &k.to_ne_bytes()).unwrap();
    }
    assert_eq!(ep.send_batch(&sent[..2]), 2);
    until("the drops counted", || api.endpoints().unwrap()[0].counters.applets.dropped == 2);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(wire.recv(64, |_| {}), 0, "nothing more on the wire");
    drop(ep);
    let t = rig.finish();
    assert_eq!(t.port("host").unwrap().tx_packets, 7);
}

/// Two free UDP ports on the loopback interface (bound by the kernel, then let go).
fn free_ports() -> (SocketAddr, SocketAddr) {
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    (a.local_addr().unwrap(), b.local_addr().unwrap())
}

/// An adapter whose one port, `tun`, is a UDP tunnel from `local` to `peer`.
fn tunnel_end(local: SocketAddr, peer: SocketAddr, tag: &str) -> Running1 {
    let mut b = AdapterBuilder::new(options()).unwrap();
    let port = UdpPort::open("tun", local, peer, 0).unwrap();
    b.add_port("tun", Device::Udp(port), None).unwrap();
    Running1::start(b, tag)
}

/// Applet ping-pong (`bpf/applets/pingpong.c`) between two adapters joined by a UDP
/// tunnel: the application on adapter A sends one frame whose payload asks for 2N hops;
/// from then on the two endpoints' `doRx` applets send it back and forth over the tunnel
/// with no host involved, and only the frame that completes the 2N-th hop is delivered,
/// to A's application. Each adapter's map counts exactly its bounces (A: N-1 sent back
/// and 1 delivered, B: N sent back), and B's application, idle all along, never gets a
/// frame.
#[test]
fn applet_ping_pong_runs_n_round_trips_with_the_hosts_idle() {
    const N: u32 = 300;
    let (la, lb) = free_ports();
    let a = tunnel_end(la, lb, "pp-a");
    let b = tunnel_end(lb, la, "pp-b");
    let obj = applet("pingpong");
    a.live.load("pp", &obj, None, "default").unwrap();
    b.live.load("pp", &obj, None, "default").unwrap();
    let chan = Channel { applets: Some("pp".into()), ..Channel::udp4("tun", 7000) };
    let mut ea = Endpoint::open(&a.sock, &chan).unwrap();
    let mut eb = Endpoint::open(&b.sock, &chan).unwrap();
    a.served(1);
    b.served(1);
    let mut payload = 0u32.to_ne_bytes().to_vec();
    payload.extend_from_slice(&(2 * N).to_ne_bytes());
    payload.extend_from_slice(&[0x5a; 24]);
    assert_eq!(ea.send_batch(&[udp(7000, &payload)]), 1);
    let got = recv_n(&mut ea, 1);
    assert_eq!(got.len(), 1);
    let f = &got[0];
    let hops = u32::from_ne_bytes(f[42..46].try_into().unwrap());
    assert_eq!(hops, 2 * N, "the frame came back after 2N hops");
    assert_eq!(&f[50..], &[0x5a; 24][..], "the rest of the payload unchanged");
    let count = |r: &Running1, k: u32| {
        u64_at(&r.live.map_lookup("pp", "bounces", &k.to_ne_bytes()).unwrap(), 0)
    };
    assert_eq!((count(&a, 0), count(&a, 1)), (u64::from(N) - 1, 1), "A: N-1 bounces, 1 delivery");
    assert_eq!((count(&b, 0), count(&b, 1)), (u64::from(N), 0), "B: N bounces, no delivery");
    assert_eq!(eb.recv(64, |_| {}), 0, "B's application got nothing");
    until("A's counters published", || {
        a.live.endpoints()[0].counters.applets.rx_runs == u64::from(N)
    });
    let ca = a.live.endpoints()[0].counters;
    assert_eq!((ca.tx_sent, ca.rx_delivered), (1, 1), "A's application: one send, one frame");
    let cb = b.live.endpoints()[0].counters;
    assert_eq!((cb.tx_sent, cb.rx_delivered), (0, 0), "B's application: idle");
    drop((ea, eb));
    a.finish();
    b.finish();
}

/// Applets are verified like any extension: an applet that reads the frame without a
/// bounds check is refused at load, naming it; and one calling a helper its domain does
/// not grant (`spine_msg_send` in the default domain) is refused too.
#[test]
fn applets_are_verified_at_load() {
    let (rig, _wire) = wired();
    let err =
        rig.live.load("bad", &build("tests/fixtures", "bad_applet"), None, "default").unwrap_err();
    assert_eq!(err.kind(), "load_failed", "{err}");
    assert!(err.to_string().contains("unchecked_rx"), "{err}");
    let err =
        rig.live.load("msg", &build("tests/fixtures", "msg_applet"), None, "default").unwrap_err();
    assert_eq!(err.kind(), "load_failed", "{err}");
    assert!(err.to_string().contains("sends"), "{err}");
    rig.finish();
}

/// Applet verdicts (`tests/fixtures/reflect_applet.c`): on doTx, `XDP_TX` reflects the
/// client's frame into its own endpoint (through doRx) and `XDP_DROP` drops it, only the
/// passed one leaves on the wire; on doRx, `XDP_DROP` keeps a received frame from the
/// endpoint. The endpoint's counters add up and the pool is whole.
#[test]
fn applet_verdicts_reflect_drop_and_pass() {
    let (rig, mut wire) = wired();
    rig.live.load("rf", &build("tests/fixtures", "reflect_applet"), None, "default").unwrap();
    let chan = Channel { applets: Some("rf".into()), ..Channel::udp4("wire", 7777) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let (passed, reflected, dropped) =
        (udp(7777, &[0; 40]), udp(7777, &[1; 50]), udp(7777, &[2; 60]));
    for f in [&dropped, &reflected, &passed] {
        until("room on the transmit ring", || ep.send_batch(std::slice::from_ref(f)) == 1);
    }
    let mut out = Vec::new();
    until("the passed frame on the wire", || {
        wire.recv(64, |m| out.push(m.to_vec()));
        !out.is_empty()
    });
    assert_eq!(out, vec![passed.clone()], "only the passed frame left");
    assert_eq!(recv_n(&mut ep, 1), vec![reflected.clone()], "the reflected frame came back");
    let (keep, lose) = (udp(7777, &[4; 30]), udp(7777, &[3; 30]));
    inject(&mut wire, &[lose.clone(), keep.clone(), lose]);
    assert_eq!(recv_n(&mut ep, 1), vec![keep], "doRx dropped the 3s");
    until("the counters published", || rig.live.endpoints()[0].counters.applets.rx_runs == 4);
    let c = rig.live.endpoints()[0].counters;
    assert_eq!(c.applets.tx_runs, 3);
    assert_eq!((c.applets.reflected, c.applets.dropped, c.applets.passed), (1, 3, 3));
    assert_eq!(c.rx_delivered, 2, "the reflected frame and the kept one");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!((ep.recv(64, |_| {}), wire.recv(64, |_| {})), (0, 0), "nothing more");
    drop(ep);
    rig.finish();
}

/// Applets are bounded by the watchdog: in a domain with a budget no run of the looping
/// doRx (`tests/fixtures/slow_applet.c`) can meet and three faults to detach, the first
/// three frames are stopped, counted as faults and dropped; the applet is then detached
/// and the hook lets the next frames through to the endpoint.
#[test]
fn the_watchdog_stops_applets_and_detaches_them() {
    let mut b = AdapterBuilder::new(options()).unwrap();
    let end = AdapterEnd::create(Layout::new(256, 2048, 512).unwrap()).unwrap();
    let mut wire = ClientEnd::open(end.shm().fd().try_clone_to_owned().unwrap()).unwrap();
    b.add_port("wire", Device::Other(Box::new(EndpointPort::new("wire", end, None, 0))), None)
        .unwrap();
    let tight = DomainSpec {
        name: "tight".into(),
        budget: spine_runtime::Budget { ns: 1, points: 1 },
        faults: spine_runtime::FaultPolicy { max_faults: 3, window_ns: 3_600_000_000_000 },
        ..DomainSpec::default_domain()
    };
    b.add_domain(tight).unwrap();
    let rig = Running1::start(b, "watchdog");
    rig.live.load("slow", &build("tests/fixtures", "slow_applet"), None, "tight").unwrap();
    let chan = Channel {
        applets: Some("slow".into()),
        domain: Some("tight".into()),
        ..Channel::udp4("wire", 7777)
    };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let frames: Vec<Vec<u8>> = (0..5u8).map(|i| udp(7777, &[i; 32])).collect();
    inject(&mut wire, &frames);
    assert_eq!(recv_n(&mut ep, 2), frames[3..].to_vec(), "the frames after the detach");
    until("the counters published", || rig.live.endpoints()[0].counters.applets.rx_runs == 3);
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.applets.faults, c.applets.dropped, c.rx_delivered), (3, 3, 2));
    drop(ep);
    rig.finish();
}

/// Token-based flow control (`bpf/applets/flowctl.c`) between two adapters joined by a
/// UDP tunnel, with 5 % of the frames dropped at random on each side (the object's XDP
/// program on each tunnel port: data one way, acknowledgements the other): the
/// application on A sends 250 frames once (the applet keeps at most 256 unacknowledged:
/// there is no backpressure to the application yet); the applets number them, keep them until
/// acknowledged, retransmit on loss (go-back-N from the tick hook) and deliver exactly the
/// next expected one, so B's application receives all 250, in order, each exactly once,
/// with no host sending anything again. The injected losses and the retransmissions are
/// counted in the maps (both certainly above zero over this many frames).
#[test]
fn flow_control_delivers_exactly_in_order_through_5_percent_loss() {
    const N: usize = 250;
    let (la, lb) = free_ports();
    let a = tunnel_end(la, lb, "fc-a");
    let b = tunnel_end(lb, la, "fc-b");
    let obj = applet("flowctl");
    for r in [&a, &b] {
        r.live.load("fc", &obj, None, "default").unwrap();
        r.live.attach("fc", "tun").unwrap();
        r.live.map_update("fc", "loss_pct", &0u32.to_ne_bytes(), &5u32.to_ne_bytes(), 0).unwrap();
    }
    let chan = Channel { applets: Some("fc".into()), ..Channel::udp4("tun", 7000) };
    let mut ea = Endpoint::open(&a.sock, &chan).unwrap();
    let mut eb = Endpoint::open(&b.sock, &chan).unwrap();
    a.served(1);
    b.served(1);
    let payload = |i: usize, hdr: [u8; 8]| {
        let mut p = hdr.to_vec();
        p.extend_from_slice(&(i as u32).to_ne_bytes());
        p.extend((0..60 + i % 50).map(|j| (i + j) as u8));
        p
    };
    let sent: Vec<Vec<u8>> = (0..N).map(|i| udp(7000, &payload(i, [0; 8]))).collect();
    for f in &sent {
        until("room on the transmit ring", || ea.send_batch(std::slice::from_ref(f)) == 1);
    }
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while got.len() < N && Instant::now() < deadline {
        eb.recv(64, |m| got.push(m.to_vec()));
        std::thread::sleep(Duration::from_millis(2));
    }
    if got.len() < N {
        // What each side's applet and endpoint saw, for the failure's report.
        for r in [&a, &b] {
            let v = r.live.map_lookup("fc", "state", &0u32.to_ne_bytes()).unwrap();
            let w: Vec<u32> =
                v[..40].chunks(4).map(|c| u32::from_ne_bytes(c.try_into().unwrap())).collect();
            let c: Vec<u64> = (0..8).map(|n| u64_at(&v, 40 + 8 * n)).collect();
            eprintln!("state {w:?} {c:?} {:?}", r.live.endpoints()[0].counters);
        }
        panic!("got {} of {N}", got.len());
    }
    let want: Vec<Vec<u8>> = (0..N)
        .map(|i| {
            let mut h = [1u8, 0, 0, 0, 0, 0, 0, 0];
            h[4..].copy_from_slice(&(i as u32).to_ne_bytes());
            udp(7000, &payload(i, h))
        })
        .collect();
    assert_eq!(got.len(), N);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "frame {i}: exactly the next frame, marked DATA with its number");
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(eb.recv(64, |_| {}), 0, "nothing delivered twice");
    assert_eq!(ea.recv(64, |_| {}), 0, "the sender's application gets no acknowledgements");
    let st = |r: &Running1| r.live.map_lookup("fc", "state", &0u32.to_ne_bytes()).unwrap();
    // struct state: counters from byte 40 on.
    let (sa, sb) = (st(&a), st(&b));
    let field = |v: &[u8], n: usize| u64_at(v, 40 + 8 * n);
    assert_eq!(field(&sb, 2), N as u64, "B delivered N");
    assert_eq!(field(&sa, 6), 0, "A never overflowed its window");
    let lost = field(&sa, 7) + field(&sb, 7);
    assert!(lost > 0, "loss was injected ({lost})");
    assert!(field(&sa, 0) > 0, "A went back to retransmit ({} go-backs)", field(&sa, 0));
    let ca = a.live.endpoints()[0].counters;
    assert_eq!(ca.tx_sent, N as u64, "A's application sent each frame once");
    drop((ea, eb));
    a.finish();
    b.finish();
}

/// An adapter whose one port, `tun`, is a UDP tunnel from `local` to `peer`, with a
/// domain `msgs` granting the active-message helpers (every port allowed).
fn tunnel_end_msgs(local: SocketAddr, peer: SocketAddr, tag: &str) -> Running1 {
    let mut b = AdapterBuilder::new(options()).unwrap();
    let port = UdpPort::open("tun", local, peer, 0).unwrap();
    b.add_port("tun", Device::Udp(port), None).unwrap();
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    b.add_domain(DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() })
        .unwrap();
    Running1::start(b, tag)
}

/// Active messages adapter → adapter over a UDP tunnel: the application on adapter A
/// sends N message frames (`spine_client::remote::frame`, ethertype 0x88B6, to B's
/// handlers, from its endpoint's id) through its endpoint bound to the tunnel port; B
/// recognises them on the tunnel's receive path and runs handler 7 of the extension of
/// its domain `msgs` (`spine-runtime/tests/fixtures/handler.c`), which counts each in a
/// map and replies to the message's (remote) source with `spine_msg_send`: the reply
/// goes back over the tunnel to A's endpoint. B's map counts exactly N, A's application
/// gets exactly the N replies, in order, marked with handler 7 and B's extension id.
/// Malformed message frames (bad version, a length past the frame) are counted and
/// dropped, a message for a handler nobody registered is counted unhandled, and an
/// ordinary frame still reaches B's endpoint, and a frame of the same ethertype without
/// the magic is an ordinary frame (B's port passes it; having no host path, counts it).
#[test]
fn active_messages_cross_a_tunnel_to_a_handler_and_the_replies_come_back() {
    use spine_client::remote;
    const N: usize = 50;
    let (la, lb) = free_ports();
    let a = tunnel_end_msgs(la, lb, "rm-a");
    let b = tunnel_end_msgs(lb, la, "rm-b");
    let obj = build("../spine-runtime/tests/fixtures", "handler");
    b.live.load("echo", &obj, None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    let mut eb = Endpoint::open(&b.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    b.served(1);
    let me = ea.id().unwrap() as u32;
    let msgs: Vec<Vec<u8>> =
        (0..N).map(|i| (0..1 + (i * 5) % 240).map(|b| (b ^ i) as u8).collect()).collect();
    let mut replies = Vec::new();
    for m in &msgs {
        let f = remote::frame(7, remote::TO_HANDLERS, me, m).unwrap();
        until("room on A's transmit ring", || ea.send_batch(std::slice::from_ref(&f)) == 1);
        ea.recv_marked(64, |d, mark| replies.push((d.to_vec(), mark)));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while replies.len() < N && Instant::now() < deadline {
        ea.recv_marked(64, |d, mark| replies.push((d.to_vec(), mark)));
        std::thread::sleep(Duration::from_millis(2));
    }
    if replies.len() < N {
        // Where the missing ones stopped, for the failure's report.
        for (side, r) in [("A", &a), ("B", &b)] {
            let t = r.live.totals();
            eprintln!("{side}: {:?}\n{side}: {:?}", t.workers[0], t.port("tun"));
            eprintln!(
                "{side}: {:?}",
                r.live.endpoints().iter().map(|e| e.counters).collect::<Vec<_>>()
            );
        }
        panic!("got {} of {N} replies", replies.len());
    }
    let ext = replies[0].1.unwrap().1;
    type Marked = (Vec<u8>, Option<(u8, u16)>);
    let want: Vec<Marked> =
        msgs.iter().map(|m| (m.iter().map(|b| b ^ 0x20).collect(), Some((7, ext)))).collect();
    assert_eq!(replies, want, "exactly the replies, in order");
    let count = b.live.map_lookup("echo", "counts", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64_at(&count, 0), N as u64, "handler 7 on B ran exactly N times");

    // Malformed: a bad version, and a length past the frame's end.
    let mut bad = remote::frame(7, remote::TO_HANDLERS, me, b"xy").unwrap();
    bad[16] = 9;
    let mut long = remote::frame(7, remote::TO_HANDLERS, me, b"xy").unwrap();
    long[26..28].copy_from_slice(&200u16.to_be_bytes());
    let nobody = remote::frame(9, remote::TO_HANDLERS, me, b"nobody").unwrap();
    assert_eq!(ea.send_batch(&[bad, long, nobody]), 3);
    until("B counts the malformed and the unhandled", || {
        let w = b.live.totals().workers[0];
        w.msg_remote_bad == 2 && w.msg_remote_unhandled == 1
    });
    // Someone else's frame of the ethertype (no magic), then an ordinary frame, which
    // still crosses to B's endpoint.
    let mut theirs = remote::frame(7, remote::TO_HANDLERS, me, b"not ours").unwrap();
    theirs[14..16].copy_from_slice(b"XY");
    let plain = udp(7000, &[0x11; 40]);
    assert_eq!(ea.send_batch(&[theirs, plain.clone()]), 2);
    assert_eq!(recv_n(&mut eb, 1), vec![plain]);
    assert_eq!(ea.recv(64, |_| {}), 0, "no reply to a malformed or unhandled message");
    drop((ea, eb));
    let (ta, tb) = (a.finish(), b.finish());
    let (wa, wb) = (&ta.workers[0], &tb.workers[0]);
    assert_eq!(tb.port("tun").unwrap().drops.no_host_path, 1, "the frame without magic");
    assert_eq!(
        (wb.msg_remote_in, wb.msg_remote_runs, wb.msg_remote_out),
        (N as u64 + 3, N as u64, N as u64)
    );
    assert_eq!((wb.msg_remote_bad, wb.msg_remote_unhandled, wb.msg_remote_out_dropped), (2, 1, 0));
    assert_eq!((wa.msg_remote_in, wa.msg_delivered, wa.msg_remote_bad), (N as u64, N as u64, 0));
}

/// Message ping-pong between two adapters over a UDP tunnel with no host involved after
/// the first message: handler 4 (`tests/fixtures/remote_pp.c`) on each adapter counts
/// its run and, while hops are left, sends the count less one to the handlers of the
/// adapter the message came from (`spine_msg_send` to its remote source with the low 16
/// bits `SPINE_MSG_REMOTE_HANDLERS`). A's application sends one message asking for
/// 2K - 1 further hops to B's handlers: B's handler runs exactly K times, A's exactly K,
/// and A's application gets nothing back.
#[test]
fn handlers_on_two_adapters_play_message_ping_pong_over_a_tunnel() {
    use spine_client::remote;
    const K: u64 = 100;
    let (la, lb) = free_ports();
    let a = tunnel_end_msgs(la, lb, "rpp-a");
    let b = tunnel_end_msgs(lb, la, "rpp-b");
    let obj = build("tests/fixtures", "remote_pp");
    a.live.load("pp", &obj, None, "msgs").unwrap();
    b.live.load("pp", &obj, None, "msgs").unwrap();
    until("the handler tables", || a.live.handlers_settled() && b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    // From "an extension" (SPINE_MSG_SOURCE_EXT): B's replies go to A's handlers.
    let hops = (2 * K as u32 - 1).to_ne_bytes();
    let first = remote::frame(4, remote::TO_HANDLERS, 0x8000_0000, &hops).unwrap();
    assert_eq!(ea.send_batch(&[first]), 1);
    let runs =
        |r: &Running1| u64_at(&r.live.map_lookup("pp", "runs", &0u32.to_ne_bytes()).unwrap(), 0);
    until("2K handler runs", || runs(&a) + runs(&b) == 2 * K);
    assert_eq!((runs(&a), runs(&b)), (K, K), "K runs on each adapter");
    assert_eq!(ea.recv(64, |_| {}), 0, "A's application got nothing");
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    let (wa, wb) = (&ta.workers[0], &tb.workers[0]);
    assert_eq!((wb.msg_remote_in, wb.msg_remote_runs, wb.msg_remote_out), (K, K, K));
    assert_eq!((wa.msg_remote_in, wa.msg_remote_runs, wa.msg_remote_out), (K, K, K - 1));
    assert_eq!((wa.msg_remote_bad + wb.msg_remote_bad, wa.msg_remote_out_dropped), (0, 0));
}

/// Active messages to another adapter from the C and the Python client libraries
/// (`spine_remote_frame` / `remote_frame`, `clients/{c,python}/remote_echo`): each opens
/// an endpoint on adapter A's tunnel port, sends 40 message frames for handler 7 of
/// adapter B (`spine-runtime/tests/fixtures/handler.c`) from its endpoint's id, and gets
/// exactly the 40 replies, in order, marked with handler 7. The first frame each library
/// builds is byte for byte the Rust client's (`spine_client::remote::frame`); B's
/// handler counted 80 runs.
#[test]
fn the_c_and_python_clients_send_active_messages_to_another_adapter() {
    use spine_client::remote;
    const N: usize = 40;
    let (la, lb) = free_ports();
    let a = tunnel_end_msgs(la, lb, "rc-a");
    let b = tunnel_end_msgs(lb, la, "rc-b");
    let obj = build("../spine-runtime/tests/fixtures", "handler");
    b.live.load("echo", &obj, None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let dir = TempDir::new("remote-c");
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/remote_echo.py");
    let mut python = std::process::Command::new("python3");
    python.arg(py);
    let apps =
        [(std::process::Command::new(c_client(&dir, "remote_echo")), "C"), (python, "Python")];
    for (mut app, who) in apps {
        let out = app
            .args([a.sock.to_str().unwrap(), "tun", &N.to_string()])
            .output()
            .unwrap_or_else(|e| panic!("the {who} client: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "the {who} client: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(&format!("replies {N}")), "{who}: {stdout}");
        // Its first frame, byte for byte the Rust client's for the same endpoint id.
        let hex = stdout.lines().find_map(|l| l.strip_prefix("frame0 ")).expect("frame0");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let me = u32::from_be_bytes(bytes[22..26].try_into().unwrap());
        // (The replies reaching the endpoint show `me` was its id.) Message 0: one byte, 0.
        assert_eq!(bytes, remote::frame(7, remote::TO_HANDLERS, me, &[0]).unwrap(), "{who}");
    }
    let count = b.live.map_lookup("echo", "counts", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64_at(&count, 0), 2 * N as u64, "handler 7 on B ran once per message");
    a.finish();
    b.finish();
}

/// An adapter whose one port, `tun`, is a UDP tunnel from `local` to `peer`, with a
/// domain `msgs` granting the active-message helpers and the bulk reads.
fn tunnel_end_bulk(local: SocketAddr, peer: SocketAddr, tag: &str) -> Running1 {
    tunnel_end_bulk_with(local, peer, tag, options())
}

/// As [`tunnel_end_bulk`], with `opts`.
fn tunnel_end_bulk_with(
    local: SocketAddr,
    peer: SocketAddr,
    tag: &str,
    opts: AdapterOptions,
) -> Running1 {
    let mut b = AdapterBuilder::new(opts).unwrap();
    let port = UdpPort::open("tun", local, peer, 0).unwrap();
    b.add_port("tun", Device::Udp(port), None).unwrap();
    let names: Vec<String> = [
        "map_lookup_elem",
        "map_update_elem",
        "spine_msg_send",
        "spine_msg_bulk_len",
        "spine_msg_bulk_read",
        "spine_msg_send_bulk",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    b.add_domain(DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() })
        .unwrap();
    Running1::start(b, tag)
}

/// What `tests/fixtures/bulk_sum.c` answers for `data`: (sum, mix, len, past_end).
fn bulk_sum(data: &[u8]) -> (u64, u64, u32, i32) {
    let (mut sum, mut mix) = (0u64, 0u64);
    for chunk in data.chunks(64) {
        let mut padded = [0u8; 64];
        padded[..chunk.len()].copy_from_slice(chunk);
        let s = padded.chunks(8).fold(0u64, |s, w| s.wrapping_add(u64_at(w, 0)));
        sum = sum.wrapping_add(s);
        mix = mix.wrapping_mul(1_000_003).wrapping_add(s);
    }
    (sum, mix, data.len() as u32, -14)
}

/// A reply of `bulk_sum.c` as (sum, mix, len, past_end).
fn bulk_answer(r: &[u8]) -> (u64, u64, u32, i32) {
    assert_eq!(r.len(), 24, "the answer's size");
    let u32_at = |at: usize| u32::from_ne_bytes(r[at..at + 4].try_into().unwrap());
    (u64_at(r, 0), u64_at(r, 8), u32_at(16), u32_at(20) as i32)
}

/// Sends `frames` through `ep`, waiting for room.
fn send_all(ep: &mut Endpoint, frames: &[Vec<u8>]) {
    for f in frames {
        until("room on the transmit ring", || ep.send_batch(std::slice::from_ref(f)) == 1);
    }
}

/// A received message and its mark (handler, source).
type MarkedMsg = (Vec<u8>, Option<(u8, u16)>);

/// Waits for `n` marked messages on `ep`.
fn replies_n(ep: &mut Endpoint, n: usize) -> Vec<MarkedMsg> {
    let mut got = Vec::new();
    until("the replies", || {
        ep.recv_marked(64, |d, mark| got.push((d.to_vec(), mark)));
        got.len() >= n
    });
    got
}

/// Bulk messages adapter → adapter over a UDP tunnel: the application on adapter A
/// splits each message into pieces (`spine_client::remote::bulk_frames`, version 2
/// frames of at most 1,024 bytes of data) and sends them through its endpoint bound to
/// the tunnel port; B reassembles them in the port's slots and, only when all of a
/// message has arrived, runs handler 12 (`tests/fixtures/bulk_sum.c`), which reads the
/// whole data with `spine_msg_bulk_read` and replies with its length and checksums.
/// Messages of 3,000 and 8,000 bytes (and 1, 1,024 and 1,025: piece boundaries) each
/// give exactly one run and a reply with the right checksums; a read past the end is
/// refused; nothing is refused or discarded, and both pools are whole at the end.
#[test]
fn bulk_messages_cross_a_tunnel_in_pieces_and_the_handler_reads_all_of_them() {
    use spine_client::remote;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "rb-a");
    let b = tunnel_end_bulk(lb, la, "rb-b");
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    let me = ea.id().unwrap() as u32;
    let sizes = [3000usize, 8000, 1, 1024, 1025];
    for (id, &size) in sizes.iter().enumerate() {
        let data: Vec<u8> = (0..size).map(|i| (i * 31 + i / 251 + id) as u8).collect();
        let frames = remote::bulk_frames(12, remote::TO_HANDLERS, me, id as u32, &data).unwrap();
        assert_eq!(frames.len(), size.div_ceil(remote::PIECE_MAX));
        send_all(&mut ea, &frames);
        let got = replies_n(&mut ea, 1);
        assert_eq!(got.len(), 1, "one reply to a {size}-byte message");
        assert_eq!(got[0].1.map(|m| m.0), Some(12), "marked with handler 12");
        assert_eq!(bulk_answer(&got[0].0), bulk_sum(&data), "the {size}-byte message");
    }
    let runs = b.live.map_lookup("sum", "runs", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64_at(&runs, 0), sizes.len() as u64, "one run per whole message");
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    let wb = &tb.workers[0];
    let pieces: usize = sizes.iter().map(|s| s.div_ceil(remote::PIECE_MAX)).sum();
    assert_eq!(
        (wb.msg_bulk_pieces_in, wb.msg_bulk_remote_in, wb.msg_remote_runs, wb.msg_remote_out),
        (pieces as u64, sizes.len() as u64, sizes.len() as u64, sizes.len() as u64)
    );
    assert_eq!((wb.msg_bulk_piece_refused, wb.msg_bulk_discarded, wb.msg_remote_bad), (0, 0, 0));
    assert_eq!(wb.msg_bulk_expired, 0);
    assert_eq!(ta.workers[0].msg_delivered, sizes.len() as u64);
}

/// Hostile pieces at the frame level, sent by A's application straight into the
/// tunnel: a piece off a piece boundary (overlapping its neighbours), one past the
/// total, a total over 16 KiB, a zero total, a length that is not the piece's, a frame
/// cut inside the header, a duplicate, and a piece whose total differs from its
/// message's first piece — each refused and counted on B, and the message they were
/// mixed into still arrives exactly (one run, the right checksums); two messages with
/// interleaved pieces both arrive exactly; five incomplete messages (one more than the
/// port's reassembly slots) are each discarded exactly once: one by eviction, the four
/// others expiring after the default second with no further piece (the sweep). Nothing runs for a refused
/// or incomplete message; a whole one addressed to an endpoint B does not have is
/// counted unhandled; both pools are whole at the end.
#[test]
fn hostile_bulk_pieces_are_refused_and_counted_and_the_pools_stay_whole() {
    use spine_client::remote;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "rh-a");
    let b = tunnel_end_bulk(lb, la, "rh-b");
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    let me = ea.id().unwrap() as u32;
    let msg = |id: u32, n: usize| -> (Vec<u8>, Vec<Vec<u8>>) {
        let data: Vec<u8> = (0..n).map(|i| (i * 7 + id as usize) as u8).collect();
        let f = remote::bulk_frames(12, remote::TO_HANDLERS, me, id, &data).unwrap();
        (data, f)
    };
    let set = |f: &[u8], at: usize, v: u32| {
        let mut g = f.to_vec();
        g[at..at + 4].copy_from_slice(&v.to_be_bytes());
        g
    };
    // Header offsets in the frame: length 26..28, id 28..32, total 32..36, offset 36..40.
    let (x, fx) = msg(1, 3000);
    let mut wrong_len = fx[2].clone();
    wrong_len[26..28].copy_from_slice(&100u16.to_be_bytes());
    let (_, other_total) = msg(1, 2500);
    let hostile = vec![
        set(&fx[1], 36, 512),                         // overlapping pieces 0 and 1
        set(&fx[2], 36, 3072),                        // past the total
        set(&fx[0], 32, remote::BULK_MAX as u32 + 1), // over the limit
        set(&fx[0], 32, 0),                           // empty
        wrong_len,                                    // not the last piece's length
        fx[1][..30].to_vec(),                         // cut inside the header
        fx[0].clone(),                                // a duplicate of piece 0
        other_total[1].clone(),                       // the same id, another total
    ];
    let refused = hostile.len() as u64;
    let mut frames = vec![fx[0].clone()];
    frames.extend(hostile);
    frames.extend([fx[1].clone(), fx[2].clone()]);
    send_all(&mut ea, &frames);
    let got = replies_n(&mut ea, 1);
    assert_eq!(bulk_answer(&got[0].0), bulk_sum(&x), "the message the hostile pieces hit");
    // Two messages, pieces interleaved.
    let ((y, fy), (z, fz)) = (msg(2, 5000), msg(3, 4000));
    let mut inter = Vec::new();
    for (i, f) in fy.iter().enumerate() {
        inter.push(f.clone());
        if let Some(f) = fz.get(i) {
            inter.push(f.clone());
        }
    }
    send_all(&mut ea, &inter);
    let got = replies_n(&mut ea, 2);
    let mut answers: Vec<_> = got.iter().map(|g| bulk_answer(&g.0)).collect();
    answers.sort_by_key(|a| a.2);
    assert_eq!(answers, vec![bulk_sum(&z), bulk_sum(&y)], "both interleaved messages");
    until("B counts the refused pieces", || {
        b.live.totals().workers[0].msg_bulk_piece_refused == refused
    });
    // A whole bulk message for an endpoint B does not have: reassembled, not
    // delivered, counted unhandled.
    send_all(&mut ea, &remote::bulk_frames(12, 1, me, 300, b"for an endpoint").unwrap());
    until("B counts it unhandled", || b.live.totals().workers[0].msg_remote_unhandled == 1);
    // Five incomplete messages: the fifth evicts the oldest; the four others expire
    // (the default second) with no piece arriving; then a whole one-piece message runs.
    let firsts: Vec<Vec<u8>> = (100..105).map(|id| msg(id, 3000).1.remove(0)).collect();
    send_all(&mut ea, &firsts);
    until("B takes the five first pieces", || {
        b.live.totals().workers[0].msg_bulk_pieces_in == 3 + refused + 9 + 1 + 5
    });
    until("B expires the four left", || b.live.totals().workers[0].msg_bulk_expired == 4);
    let (w, fw) = msg(200, 10);
    send_all(&mut ea, &fw);
    let got = replies_n(&mut ea, 1);
    assert_eq!(bulk_answer(&got[0].0), bulk_sum(&w));
    let runs = b.live.map_lookup("sum", "runs", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64_at(&runs, 0), 4, "runs only for whole messages");
    drop(ea);
    let (_ta, tb) = (a.finish(), b.finish());
    let wb = &tb.workers[0];
    assert_eq!((wb.msg_bulk_piece_refused, wb.msg_bulk_discarded), (refused, 1));
    assert_eq!(wb.msg_bulk_expired, 4);
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_remote_runs, wb.msg_remote_unhandled), (5, 4, 1));
    assert_eq!(wb.msg_bulk_pieces_in, 3 + refused + 9 + 1 + 5 + 1);
}

/// Bulk messages over a tunnel to an endpoint: B's application reserves 16 KiB of its
/// endpoint's area and grants it (`Endpoint::grant_area`) for one bulk message; A's
/// application sends bulk messages in pieces addressed to that endpoint's id. B
/// reassembles each and, once whole, writes it into the granted region and posts it on
/// the endpoint's receive ring as a bulk message marked with handler 12 and A's
/// endpoint id; B's application reads exactly the bytes sent (1, 1,025, 8,000 and
/// 16,384 bytes), granting the region again after each. Grants past the area,
/// wrapping or empty are refused (`bad_desc`). A message with no grant
/// outstanding, and one longer than the only grant, are counted unhandled and not
/// delivered (the grant is kept and the next message that fits uses it); a message to
/// an endpoint id B does not have is unhandled too. Nothing runs on B (no handler is
/// loaded), no piece is refused, both pools are whole.
#[test]
fn bulk_messages_over_a_tunnel_reach_an_endpoint_in_the_region_it_granted() {
    use spine_client::remote;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "re-a");
    let b = tunnel_end_bulk(lb, la, "re-b");
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    let mut eb = Endpoint::open(&b.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    b.served(1);
    let me = ea.id().unwrap() as u32;
    let to = eb.id().unwrap() as u32;
    let frames_of = eb.layout().frame_size;
    let region = eb.reserve_area(remote::BULK_MAX as u32 / frames_of).expect("16 KiB of area");
    let data_of = |id: u32, n: usize| -> Vec<u8> {
        (0..n).map(|i| (i * 29 + i / 509 + id as usize) as u8).collect()
    };
    let worker = |r: &Running1| r.live.totals().workers[0];
    let recv_bulk = |ep: &mut Endpoint| -> (Vec<u8>, Option<(u8, u16)>) {
        let mut got = Vec::new();
        until("the bulk message on B's endpoint", || {
            ep.recv_marked(8, |d, m| got.push((d.to_vec(), m)));
            !got.is_empty()
        });
        assert_eq!(got.len(), 1, "exactly one message");
        got.remove(0)
    };
    let mut delivered = 0;
    for (id, size) in [(1u32, 1usize), (2, 1025), (3, 8000), (4, remote::BULK_MAX)] {
        assert!(eb.grant_area(region, remote::BULK_MAX as u32));
        let data = data_of(id, size);
        send_all(&mut ea, &remote::bulk_frames(12, to, me, id, &data).unwrap());
        let (got, mark) = recv_bulk(&mut eb);
        delivered += 1;
        assert_eq!(mark, Some((12, me as u16)), "marked with the handler and the sender");
        assert_eq!(got.len(), size);
        assert!(got == data, "exactly the {size} bytes sent");
    }
    // Hostile grants (past the area, wrapping, empty) are refused; with no grant
    // outstanding a message is reassembled, not delivered.
    let area = eb.layout().area_bytes() as u64;
    for (off, len) in [(area - 10, 100), (u64::MAX - 4, 10), (region, 0)] {
        assert!(eb.grant_area(off, len));
    }
    send_all(&mut ea, &remote::bulk_frames(12, to, me, 10, &data_of(10, 3000)).unwrap());
    until("B counts it unhandled", || worker(&b).msg_remote_unhandled == 1);
    assert_eq!(b.live.endpoints()[0].counters.bad_desc, 3, "the hostile grants");
    // A grant of 2,000 bytes: 3,000 do not fit (kept), 2,000 then do.
    assert!(eb.grant_area(region, 2000));
    send_all(&mut ea, &remote::bulk_frames(12, to, me, 11, &data_of(11, 3000)).unwrap());
    until("B counts it unhandled", || worker(&b).msg_remote_unhandled == 2);
    let fits = data_of(12, 2000);
    send_all(&mut ea, &remote::bulk_frames(12, to, me, 12, &fits).unwrap());
    let (got, _) = recv_bulk(&mut eb);
    delivered += 1;
    assert!(got == fits, "the message that fits the kept grant");
    // An endpoint id B does not have.
    assert!(eb.grant_area(region, remote::BULK_MAX as u32));
    send_all(&mut ea, &remote::bulk_frames(12, to + 100, me, 13, b"nobody").unwrap());
    until("B counts it unhandled", || worker(&b).msg_remote_unhandled == 3);
    assert_eq!(eb.recv(8, |_| {}), 0, "nothing else arrived");
    eb.release_area(region, remote::BULK_MAX as u32 / frames_of);
    let eps = b.live.endpoints();
    assert_eq!(eps[0].counters.msg_delivered, delivered);
    drop((ea, eb));
    let (_ta, tb) = (a.finish(), b.finish());
    let wb = &tb.workers[0];
    assert_eq!(
        (wb.msg_bulk_remote_in, wb.msg_delivered, wb.msg_remote_unhandled),
        (8, delivered, 3)
    );
    assert_eq!((wb.msg_bulk_piece_refused, wb.msg_bulk_discarded, wb.msg_remote_runs), (0, 0, 0));
}

/// A host's bulk message over a tunnel: A's application writes data into a region of
/// its endpoint's area and sends one `Desc::REMOTE` descriptor
/// (`Endpoint::send_bulk_remote`); A's adapter reads the region out in pieces and sends
/// them from the endpoint's id. To B's handlers: handler 12 (`bulk_sum.c`) runs once
/// per message with the whole data and its answer comes back to A's endpoint (3,000
/// and 8,000 bytes, the right checksums). To B's endpoint: the 16,384 bytes land in
/// the region B's application granted, marked with handler 9 and A's endpoint id. An
/// empty reference and one past the area are refused by A's endpoint (`bad_desc`),
/// one over 16 KiB inside the area by A's worker (`msg_bulk_remote_refused`); nothing
/// of them is sent. Both pools whole.
#[test]
fn a_hosts_bulk_descriptor_crosses_a_tunnel_in_pieces_to_handlers_and_to_an_endpoint() {
    use spine_client::remote;
    use spine_endpoint::Desc;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "rd-a");
    let b = tunnel_end_bulk(lb, la, "rd-b");
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    let mut eb = Endpoint::open(&b.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    b.served(1);
    let me = ea.id().unwrap() as u16;
    let to = eb.id().unwrap() as u16;
    let frame = ea.layout().frame_size;
    let frames = 2 * remote::BULK_MAX as u32 / frame;
    let src = ea.reserve_area(frames).expect("32 KiB of A's area");
    let dst = eb.reserve_area(remote::BULK_MAX as u32 / frame).expect("16 KiB of B's area");
    let data_of = |seed: usize, n: usize| -> Vec<u8> {
        (0..n).map(|i| (i * 37 + i / 311 + seed) as u8).collect()
    };
    // (bulk_sum.c reads at most 8 KiB.)
    for (seed, size) in [(1usize, 3000usize), (2, 8000)] {
        let data = data_of(seed, size);
        assert!(ea.write_area(src, &data));
        until("room on A's ring", || {
            ea.send_bulk_remote(Desc::REMOTE_HANDLERS, 12, src, size as u32)
        });
        let got = replies_n(&mut ea, 1);
        assert_eq!(got[0].1.map(|m| m.0), Some(12));
        assert_eq!(bulk_answer(&got[0].0), bulk_sum(&data), "the {size}-byte message");
    }
    let data = data_of(3, remote::BULK_MAX);
    assert!(ea.write_area(src + 100, &data));
    assert!(eb.grant_area(dst, remote::BULK_MAX as u32));
    until("room on A's ring", || ea.send_bulk_remote(to, 9, src + 100, data.len() as u32));
    let mut got = Vec::new();
    until("the message on B's endpoint", || {
        eb.recv_marked(8, |d, m| got.push((d.to_vec(), m)));
        !got.is_empty()
    });
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Some((9, me)), "marked with the handler and A's endpoint");
    assert!(got[0].0 == data, "exactly the 16,384 bytes");
    // Refused on A: empty, past the area, over 16 KiB.
    let area = ea.layout().area_bytes() as u64;
    for (off, len) in [(src, 0u32), (area - 10, 11), (src, remote::BULK_MAX as u32 + 1)] {
        until("room on A's ring", || ea.send_bulk_remote(Desc::REMOTE_HANDLERS, 12, off, len));
    }
    until("A refuses the three", || {
        let w = a.live.totals().workers[0];
        let e = a.live.endpoints()[0].counters;
        w.msg_bulk_remote_refused == 1 && e.bad_desc == 2
    });
    assert_eq!(ea.recv(64, |_| {}), 0, "no answer to a refused message");
    drop((ea, eb));
    let (ta, tb) = (a.finish(), b.finish());
    let (wa, wb) = (&ta.workers[0], &tb.workers[0]);
    assert_eq!((wa.msg_bulk_remote_out, wa.msg_bulk_remote_refused), (3, 1));
    let pieces: usize =
        [3000, 8000, remote::BULK_MAX].iter().map(|s| s.div_ceil(remote::PIECE_MAX)).sum();
    let pieces = pieces as u64;
    assert_eq!((wb.msg_bulk_pieces_in, wb.msg_bulk_remote_in, wb.msg_remote_runs), (pieces, 3, 2));
    assert_eq!((wb.msg_bulk_piece_refused, wb.msg_remote_unhandled, wb.msg_delivered), (0, 0, 1));
}

/// The C and Python clients send and receive bulk messages over a tunnel
/// (`clients/c/remote_bulk.c`, `clients/python/remote_bulk.py`): in `send` mode each,
/// on adapter A, writes a 3,000- and an 8,000-byte message into its area and sends it
/// with one descriptor (`spine_ep_send_bulk_remote`, `send_bulk_remote`) to B's handler
/// 12 (`bulk_sum.c`), and prints the answers, which match the test's checksums of the
/// same bytes; in `recv` mode each, on B, grants 16 KiB (`spine_ep_grant_area`,
/// `grant_area`) and prints its endpoint id, and the 10,000 bytes A's Rust application
/// then sends to that id arrive exactly, marked with handler 9 and A's endpoint id.
#[test]
fn the_c_and_python_clients_send_and_receive_bulk_messages_over_a_tunnel() {
    use std::io::BufRead;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "rcb-a");
    let b = tunnel_end_bulk(lb, la, "rcb-b");
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let dir = TempDir::new("remote-bulk");
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/remote_bulk.py");
    let c_exe = c_client(&dir, "remote_bulk");
    let app = |who: &str| {
        if who == "C" {
            std::process::Command::new(&c_exe)
        } else {
            let mut p = std::process::Command::new("python3");
            p.arg(&py);
            p
        }
    };
    let data_of =
        |i: usize, n: usize| -> Vec<u8> { (0..n).map(|b| (b * 31 + b / 251 + i) as u8).collect() };
    for (k, who) in ["C", "Python"].into_iter().enumerate() {
        // Each run its own tag (the previous endpoint may still be being reclaimed).
        let dport = (7100 + k).to_string();
        let out = app(who)
            .args(["send", a.sock.to_str().unwrap(), "tun", &dport])
            .output()
            .unwrap_or_else(|e| panic!("the {who} client: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{who}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
        let answers: Vec<(u64, u64, u32, i32)> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("answer "))
            .map(|l| {
                let f: Vec<&str> = l.split(' ').collect();
                (
                    f[0].parse().unwrap(),
                    f[1].parse().unwrap(),
                    f[2].parse().unwrap(),
                    f[3].parse().unwrap(),
                )
            })
            .collect();
        let want: Vec<_> =
            [3000, 8000].iter().enumerate().map(|(i, &n)| bulk_sum(&data_of(i, n))).collect();
        assert_eq!(answers, want, "{who}: the answers to its two messages");
    }
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    let me = ea.id().unwrap() as u16;
    let src = ea.reserve_area(5).expect("10 KiB of A's area");
    for (k, who) in ["C", "Python"].into_iter().enumerate() {
        let dport = (7200 + k).to_string();
        let mut child = app(who)
            .args(["recv", b.sock.to_str().unwrap(), "tun", &dport])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("the {who} client: {e}"));
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("a first line").unwrap();
        let id: u16 = first
            .strip_prefix("granted ")
            .unwrap_or_else(|| panic!("{who}: {first}"))
            .parse()
            .unwrap();
        let data = data_of(40 + k, 10_000);
        assert!(ea.write_area(src, &data));
        until("room on A's ring", || ea.send_bulk_remote(id, 9, src, data.len() as u32));
        let rest: Vec<String> = lines.map(Result::unwrap).collect();
        assert!(child.wait().unwrap().success(), "{who}: {rest:?}");
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(rest, vec![format!("bulk 9 {me} {hex}")], "{who}: the message it received");
    }
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    assert_eq!(ta.workers[0].msg_bulk_remote_out, 2 * 2 + 2);
    let wb = &tb.workers[0];
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_remote_runs, wb.msg_delivered), (6, 4, 2));
    assert_eq!((wb.msg_bulk_piece_refused, wb.msg_remote_unhandled), (0, 0));
}

/// Partial bulk messages that never complete do not hold their reassembly slots: B's
/// expiry is set to 200 ms (`bulk_expiry_ms`); A's application sends the first piece
/// of four 3,000-byte messages (every slot of B's tunnel port busy) and nothing more.
/// With no further piece arriving, B's worker expires all four (`msg_bulk_expired` 4,
/// waited for with a generous bound, not timed); nothing runs for them and nothing is
/// evicted. A whole message then arrives and runs (the right checksums), and four new
/// partial messages take the four slots again without evicting anything
/// (`msg_bulk_discarded` stays 0: every slot had been freed), and expire in turn.
#[test]
fn partial_bulk_messages_expire_and_free_their_reassembly_slots() {
    use spine_client::remote;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "rx-a");
    let b =
        tunnel_end_bulk_with(lb, la, "rx-b", AdapterOptions { bulk_expiry_ms: 200, ..options() });
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    let me = ea.id().unwrap() as u32;
    let msg = |id: u32, n: usize| -> (Vec<u8>, Vec<Vec<u8>>) {
        let data: Vec<u8> = (0..n).map(|i| (i * 11 + id as usize) as u8).collect();
        let f = remote::bulk_frames(12, remote::TO_HANDLERS, me, id, &data).unwrap();
        (data, f)
    };
    let worker = |r: &Running1| r.live.totals().workers[0];
    let firsts: Vec<Vec<u8>> = (100..104).map(|id| msg(id, 3000).1.remove(0)).collect();
    send_all(&mut ea, &firsts);
    until("B expires the four partial messages", || worker(&b).msg_bulk_expired == 4);
    let wb = worker(&b);
    assert_eq!((wb.msg_bulk_pieces_in, wb.msg_bulk_remote_in, wb.msg_bulk_discarded), (4, 0, 0));
    assert_eq!(ea.recv(64, |_| {}), 0, "nothing ran for a partial message");
    // A whole message: delivered and run.
    let (w, fw) = msg(200, 700);
    send_all(&mut ea, &fw);
    let got = replies_n(&mut ea, 1);
    assert_eq!(bulk_answer(&got[0].0), bulk_sum(&w), "the whole message after the expiry");
    // Four new partial messages take the four slots: nothing evicted.
    let again: Vec<Vec<u8>> = (300..304).map(|id| msg(id, 5000).1.remove(0)).collect();
    send_all(&mut ea, &again);
    until("B takes them", || worker(&b).msg_bulk_pieces_in == 4 + 1 + 4);
    assert_eq!(worker(&b).msg_bulk_discarded, 0, "every slot had been freed");
    until("B expires them in turn", || worker(&b).msg_bulk_expired == 8);
    let runs = b.live.map_lookup("sum", "runs", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64_at(&runs, 0), 1, "one run: the whole message");
    drop(ea);
    let (_ta, tb) = (a.finish(), b.finish());
    let wb = &tb.workers[0];
    assert_eq!((wb.msg_bulk_expired, wb.msg_bulk_discarded, wb.msg_bulk_piece_refused), (8, 0, 0));
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_remote_runs), (1, 1));
}

/// Bulk messages sent by the adapter itself: on adapter A, handler 13
/// (`tests/fixtures/bulk_fwd.c`), run on a small message from A's application naming a
/// region of its endpoint's buffer area (reserved and written by the application),
/// sends that region with `spine_msg_send_bulk` to the handlers over the tunnel. A's
/// worker reads the region out of the area piece by piece into pool buffers and sends
/// the pieces; B reassembles them and runs handler 12 (`bulk_sum.c`), whose answer goes
/// back to A's handler 12, which hands it to the application. 3,000 and 8,000 bytes
/// arrive with the right checksums; a region past the area's end and one over 16 KiB are
/// refused on A (`msg_bulk_remote_refused`) and nothing of them is sent; pools whole.
#[test]
fn a_handler_sends_a_region_of_its_endpoints_area_as_a_bulk_message_over_a_tunnel() {
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "rs-a");
    let b = tunnel_end_bulk(lb, la, "rs-b");
    a.live.load("fwd", &build("tests/fixtures", "bulk_fwd"), None, "msgs").unwrap();
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("the workers run the handler tables", || {
        a.live.handlers_settled() && b.live.handlers_settled()
    });
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("tun", 7000) };
    let mut ea = Endpoint::open(&a.sock, &chan).unwrap();
    a.served(1);
    let request = |off: u64, len: u32| {
        let mut r = off.to_ne_bytes().to_vec();
        r.extend_from_slice(&len.to_ne_bytes());
        r.extend_from_slice(&[0; 4]);
        r
    };
    let sent = |r: &Running1| {
        let v = r.live.map_lookup("fwd", "sent", &0u32.to_ne_bytes()).unwrap();
        i64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    let off = ea.reserve_area(5).expect("area frames for the data");
    for (i, size) in [3000usize, 8000].into_iter().enumerate() {
        let data: Vec<u8> = (0..size).map(|j| (j * 13 + j / 97 + i) as u8).collect();
        assert!(ea.write_area(off, &data));
        until("room for the request", || ea.send_message(13, &request(off, size as u32)));
        let got = replies_n(&mut ea, 1);
        assert_eq!(got[0].1.map(|m| m.0), Some(12));
        assert_eq!(bulk_answer(&got[0].0), bulk_sum(&data), "the {size}-byte region");
        assert_eq!(sent(&a), 0);
    }
    // Past the area's end, and over the 16 KiB a tunnel carries: refused on A.
    let area = ea.layout().area_bytes() as u64;
    for (o, len) in [(area - 100, 200), (0, 16 * 1024 + 1)] {
        until("room for the request", || ea.send_message(13, &request(o, len)));
    }
    until("A refuses both", || a.live.totals().workers[0].msg_bulk_remote_refused == 2);
    assert_eq!(ea.recv(64, |_| {}), 0, "no answer to a refused message");
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    let (wa, wb) = (&ta.workers[0], &tb.workers[0]);
    assert_eq!((wa.msg_bulk_remote_out, wa.msg_bulk_remote_refused), (2, 2));
    assert_eq!(
        (wb.msg_bulk_pieces_in, wb.msg_bulk_remote_in, wb.msg_bulk_piece_refused),
        (3 + 8, 2, 0)
    );
}

/// An adapter with `opts` (two workers or more, software RSS) whose port 0, `tun`, is a
/// UDP tunnel from `local` to `peer` (worker 0 receives from it) and whose port 1,
/// `side`, is a mem sink (worker 1 serves its endpoints); domain `closed` may use
/// `side` only.
fn tunnel_end_side(
    local: SocketAddr,
    peer: SocketAddr,
    tag: &str,
    opts: AdapterOptions,
) -> Running1 {
    assert!(opts.workers >= 2);
    let mut b = AdapterBuilder::new(opts).unwrap();
    let port = UdpPort::open("tun", local, peer, 0).unwrap();
    b.add_port("tun", Device::Udp(port), None).unwrap();
    let side = Device::Mem { port: MemPort::sink("side"), sink: true };
    b.add_port("side", side, None).unwrap();
    let ports = Some(vec!["side".to_string()]);
    b.add_domain(DomainSpec { name: "closed".into(), ports, ..DomainSpec::default_domain() })
        .unwrap();
    Running1::start(b, tag)
}

/// Small active messages over a UDP tunnel to an endpoint that another worker serves:
/// adapter B has two workers, worker 0 receives from the tunnel port `tun` and worker 1
/// serves the endpoints bound to port `side`. A's application sends N messages (1 to
/// 240 bytes, each different) addressed to B's endpoint on `side` (default domain, which
/// may use `tun`): worker 0 hands each over through the worker ring, worker 1 delivers
/// it. B's application gets exactly the N messages, in order, bytes exact, marked with
/// the handler and A's endpoint id. Messages to an endpoint of domain `closed` (which
/// may not use `tun`) are handed over too and refused by worker 1
/// (`msg_remote_unhandled` there); messages to an id B does not have are unhandled on
/// worker 0. The counters add up on both workers; both pools are whole.
#[test]
fn tunneled_messages_for_an_endpoint_another_worker_serves_are_handed_over() {
    use spine_client::remote;
    const N: usize = 60;
    let (la, lb) = free_ports();
    let a = tunnel_end_msgs(la, lb, "hr-a");
    let b = tunnel_end_side(lb, la, "hr-b", options_with(2));
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    let mut eb = Endpoint::open(&b.sock, &Channel::udp4("side", 7000)).unwrap();
    let closed = Channel { domain: Some("closed".into()), ..Channel::udp4("side", 7001) };
    let mut ec = Endpoint::open(&b.sock, &closed).unwrap();
    a.served(1);
    b.served(2);
    let me = ea.id().unwrap() as u32;
    let (to, to_closed) = (eb.id().unwrap() as u32, ec.id().unwrap() as u32);
    let msgs: Vec<Vec<u8>> =
        (0..N).map(|i| (0..1 + (i * 7) % 240).map(|b| ((b * 3) ^ i) as u8).collect()).collect();
    let frames: Vec<Vec<u8>> = msgs.iter().map(|m| remote::frame(3, to, me, m).unwrap()).collect();
    send_all(&mut ea, &frames);
    let got = replies_n(&mut eb, N);
    let want: Vec<MarkedMsg> = msgs.iter().map(|m| (m.clone(), Some((3, me as u16)))).collect();
    assert_eq!(got, want, "every message once, in order, bytes exact, marked");
    // To the endpoint whose domain may not use the tunnel, and to no endpoint.
    let refused: Vec<Vec<u8>> =
        (0..3u8).map(|i| remote::frame(3, to_closed, me, &[i; 20]).unwrap()).collect();
    send_all(&mut ea, &refused);
    let nobody: Vec<Vec<u8>> =
        (0..2u8).map(|i| remote::frame(3, to + 100, me, &[i; 20]).unwrap()).collect();
    send_all(&mut ea, &nobody);
    let workers = |r: &Running1| r.live.totals().workers;
    until("B counts the refused and the unaddressed", || {
        let w = workers(&b);
        w[1].msg_remote_unhandled == 3 && w[0].msg_remote_unhandled == 2
    });
    assert_eq!(eb.recv(64, |_| {}), 0, "nothing more for the open endpoint");
    assert_eq!(ec.recv(64, |_| {}), 0, "nothing for the closed domain's endpoint");
    let eps = b.live.endpoints();
    let of = |id: u32| eps.iter().find(|e| e.id as u32 == id).unwrap().counters;
    assert_eq!((of(to).msg_delivered, of(to_closed).msg_delivered), (N as u64, 0));
    drop((ea, eb, ec));
    let (_ta, tb) = (a.finish(), b.finish());
    let (w0, w1) = (&tb.workers[0], &tb.workers[1]);
    assert_eq!(w0.msg_remote_in, N as u64 + 5, "worker 0 received every message");
    assert_eq!(w0.msg_handed, N as u64 + 3, "handed: the open and the closed endpoint's");
    assert_eq!((w0.msg_delivered, w1.msg_delivered), (0, N as u64));
    assert_eq!((w0.msg_remote_unhandled, w1.msg_remote_unhandled), (2, 3));
    assert_eq!((w0.msg_handoff_dropped, w1.msg_handoff_dropped), (0, 0));
    assert_eq!((w1.msg_remote_in, w1.msg_handed, w0.msg_remote_bad), (0, 0, 0));
}

/// Bulk messages over a UDP tunnel to an endpoint that another worker serves: adapter B
/// has two workers, worker 0 receives from `tun` and reassembles, worker 1 serves the
/// endpoint bound to `side`, which granted a region of its area. Each whole message is
/// copied out of worker 0's reassembly slot into a chain of pool buffers handed over
/// through the worker ring; worker 1 writes it into the endpoint's grant (only the
/// serving worker touches its grants). B's application reads exactly the bytes sent (1,
/// 1,025, 8,000 and 16,384 bytes), marked with handler 12 and A's endpoint id. A message
/// with no grant outstanding is handed over and counted unhandled by worker 1; one to an
/// endpoint of domain `closed` (not allowed the tunnel) too; one to an unknown id is
/// unhandled on worker 0. Counters exact on both workers; both pools whole (the chains
/// all came back).
#[test]
fn tunneled_bulk_messages_for_an_endpoint_another_worker_serves_land_in_its_grant() {
    use spine_client::remote;
    let (la, lb) = free_ports();
    let a = tunnel_end_bulk(la, lb, "hb-a");
    let b = tunnel_end_side(lb, la, "hb-b", options_with(2));
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    let mut eb = Endpoint::open(&b.sock, &Channel::udp4("side", 7000)).unwrap();
    let closed = Channel { domain: Some("closed".into()), ..Channel::udp4("side", 7001) };
    let mut ec = Endpoint::open(&b.sock, &closed).unwrap();
    a.served(1);
    b.served(2);
    let me = ea.id().unwrap() as u32;
    let (to, to_closed) = (eb.id().unwrap() as u32, ec.id().unwrap() as u32);
    let frames_of = eb.layout().frame_size;
    let n_frames = remote::BULK_MAX as u32 / frames_of;
    let region = eb.reserve_area(n_frames).expect("16 KiB of area");
    let closed_region = ec.reserve_area(n_frames).expect("16 KiB of area");
    let data_of = |id: u32, n: usize| -> Vec<u8> {
        (0..n).map(|i| (i * 31 + i / 257 + id as usize) as u8).collect()
    };
    let workers = |r: &Running1| r.live.totals().workers;
    let mut delivered = 0u64;
    for (id, size) in [(1u32, 1usize), (2, 1025), (3, 8000), (4, remote::BULK_MAX)] {
        assert!(eb.grant_area(region, remote::BULK_MAX as u32));
        let data = data_of(id, size);
        send_all(&mut ea, &remote::bulk_frames(12, to, me, id, &data).unwrap());
        let got = replies_n(&mut eb, 1);
        delivered += 1;
        assert_eq!(got.len(), 1, "exactly one message");
        assert_eq!(got[0].1, Some((12, me as u16)), "marked with the handler and the sender");
        assert!(got[0].0 == data, "exactly the {size} bytes sent");
    }
    // No grant outstanding: handed over, unhandled on worker 1.
    send_all(&mut ea, &remote::bulk_frames(12, to, me, 10, &data_of(10, 3000)).unwrap());
    until("worker 1 counts it unhandled", || workers(&b)[1].msg_remote_unhandled == 1);
    // The closed domain's endpoint, granted: handed over, refused by worker 1.
    assert!(ec.grant_area(closed_region, remote::BULK_MAX as u32));
    send_all(&mut ea, &remote::bulk_frames(12, to_closed, me, 11, &data_of(11, 2000)).unwrap());
    until("worker 1 refuses it", || workers(&b)[1].msg_remote_unhandled == 2);
    // An unknown endpoint id: unhandled on worker 0.
    send_all(&mut ea, &remote::bulk_frames(12, to + 100, me, 12, b"nobody").unwrap());
    until("worker 0 counts it unhandled", || workers(&b)[0].msg_remote_unhandled == 1);
    assert_eq!(eb.recv(8, |_| {}), 0, "nothing else arrived");
    assert_eq!(ec.recv(8, |_| {}), 0, "nothing for the closed domain's endpoint");
    let eps = b.live.endpoints();
    let of = |id: u32| eps.iter().find(|e| e.id as u32 == id).unwrap().counters;
    assert_eq!((of(to).msg_delivered, of(to_closed).msg_delivered), (delivered, 0));
    eb.release_area(region, n_frames);
    ec.release_area(closed_region, n_frames);
    drop((ea, eb, ec));
    let (_ta, tb) = (a.finish(), b.finish());
    let (w0, w1) = (&tb.workers[0], &tb.workers[1]);
    assert_eq!(w0.msg_bulk_remote_in, 7, "worker 0 reassembled every message");
    assert_eq!(w0.msg_handed, 6, "the open endpoint's 5 and the closed one's");
    assert_eq!((w0.msg_delivered, w1.msg_delivered), (0, delivered));
    assert_eq!((w0.msg_remote_unhandled, w1.msg_remote_unhandled), (1, 2));
    assert_eq!((w0.msg_handoff_dropped, w1.msg_handoff_dropped), (0, 0));
    assert_eq!((w0.msg_bulk_piece_refused, w0.msg_bulk_discarded, w0.msg_remote_runs), (0, 0, 0));
}
