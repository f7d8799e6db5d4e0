//! Endpoints handed out by a running adapter, end to end: an application opens an
//! endpoint through the endpoint socket with the client library, frames received on the
//! tag's port that match go to it and the others to the host path, what it sends leaves
//! on the port; a client that is SIGKILLed or drops its endpoint is reclaimed and the
//! pool counted whole; hostile requests get clear errors while the adapter forwards.
//!
//! The port, `wire`, is itself an endpoint port driven by the test (the "wire side"):
//! frames the test sends into it are what the adapter receives on `wire`, and frames the
//! adapter transmits on `wire` come out of it. The host path is a mem sink, `host`.

mod common;

use common::c_client;
use spine_testnet::daemons::TempDir;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::UdpSocket;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spine_adapter::{
    AdapterBuilder, AdapterOptions, Assign, Device, EndpointLimits, Live, Running,
};
use spine_client::{Channel, DataPath, Endpoint, Match, OpenError};
use spine_control::{endpoint_socket, serve, Client, Server, ServerConfig};
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{EndpointPort, MemPort, Pool, PoolConfig, UdpPort, TUNNEL_HEADER};
use spine_runtime::DomainSpec;

/// An Ethernet/IPv4/UDP frame to `dport` carrying `payload`, from a source port that
/// follows the payload's length (so that software RSS spreads frames over workers).
fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let total = (28 + payload.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&(1000 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

fn arp() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 0x08, 0x06]);
    f.resize(60, 0);
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

struct Rig {
    running: Option<Running>,
    server: Option<Server>,
    live: Live,
    /// The wire side of port `wire`.
    wire: ClientEnd,
    pool: Arc<Pool>,
    sock: PathBuf,
    _dir: TempDir,
}

impl Rig {
    fn new(workers: usize) -> Rig {
        Rig::with_extension(workers, None)
    }

    /// As `new`, with extension `(name, object)` loaded and attached to `wire`.
    fn with_extension(workers: usize, ext: Option<(&str, &[u8])>) -> Rig {
        Rig::build(workers, ext, None)
    }

    /// As `with_extension`, the extension loaded into `domain` (added) when given.
    fn build(workers: usize, ext: Option<(&str, &[u8])>, domain: Option<DomainSpec>) -> Rig {
        let opts = AdapterOptions {
            workers,
            assign: Assign::Rss,
            pool: PoolConfig::new(1024),
            ..Default::default()
        };
        Rig::build_with(opts, ext, domain)
    }

    /// As `build`, with the adapter's options given.
    fn build_with(
        opts: AdapterOptions,
        ext: Option<(&str, &[u8])>,
        domain: Option<DomainSpec>,
    ) -> Rig {
        Rig::build_more(opts, ext, domain, |_| {})
    }

    /// As `build_with`; `more` adds ports (and extensions on them) before the adapter
    /// is built.
    fn build_more(
        opts: AdapterOptions,
        ext: Option<(&str, &[u8])>,
        domain: Option<DomainSpec>,
        more: impl FnOnce(&mut AdapterBuilder),
    ) -> Rig {
        let mut b = AdapterBuilder::new(opts).unwrap();
        let end = AdapterEnd::create(Layout::new(256, 2048, 512).unwrap()).unwrap();
        let wire = ClientEnd::open(end.shm().fd().try_clone_to_owned().unwrap()).unwrap();
        let port = EndpointPort::new("wire", end, None, 0);
        let w = b.add_port("wire", Device::Other(Box::new(port)), None).unwrap();
        let sink = Device::Mem { port: MemPort::sink("host"), sink: true };
        let h = b.add_port("host", sink, None).unwrap();
        b.set_host_path(w, h).unwrap();
        let dom = domain.as_ref().map_or("default".to_string(), |d| d.name.clone());
        if let Some(d) = domain {
            b.add_domain(d).unwrap();
        }
        if let Some((name, obj)) = ext {
            let e = b.load_extension(name, obj, None, &dom, "test").unwrap();
            b.attach(e, w).unwrap();
        }
        more(&mut b);
        let adapter = b.build().unwrap();
        let pool = adapter.pool().clone();
        let running = adapter.start().unwrap();
        let dir = TempDir::new("rig");
        let sock = dir.join("spine.sock");
        let server = serve(running.live(), ServerConfig::new(&sock)).unwrap();
        let live = running.live();
        Rig { running: Some(running), server: Some(server), live, wire, pool, sock, _dir: dir }
    }

    fn inject(&mut self, frames: &[Vec<u8>]) {
        for f in frames {
            // The wire side's transmit ring has room for a burst; wait for the adapter.
            until("room on the wire", || self.wire.send(f));
        }
    }

    /// Injects `frame` until the host path has had `want` frames of `wire` (a closed
    /// endpoint may still take frames for one worker round after it leaves the list);
    /// returns how many were injected.
    fn until_host(&mut self, frame: &[u8], want: u64) -> u64 {
        let mut n = 0;
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.to_host() < want {
            assert!(Instant::now() < deadline, "the host path never got {want} frames");
            if n < 64 {
                self.inject(&[frame.to_vec()]);
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        n
    }

    fn to_host(&self) -> u64 {
        self.live.totals().port("wire").unwrap().to_host
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

fn recv_n(ep: &mut Endpoint, n: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    until("the endpoint's messages", || {
        ep.recv(64, |m| got.push(m.to_vec()));
        got.len() >= n
    });
    got
}

fn delivery_is_exact(workers: usize) {
    let mut rig = Rig::new(workers);
    let mut ep = Endpoint::open(&rig.sock, &Channel::udp4("wire", 7777)).unwrap();
    let id = ep.id().expect("an id from the adapter");
    rig.served(1);
    // Ten for the endpoint (small ones inline in the ring, larger ones in frames), and
    // eight others: another UDP port, and ARP.
    let mine: Vec<Vec<u8>> = (0..10u8).map(|i| udp(7777, &vec![i; 4 + 40 * i as usize])).collect();
    let mut others: Vec<Vec<u8>> = (0..5u8).map(|i| udp(8888, &[i; 30])).collect();
    others.extend((0..3).map(|_| arp()));
    let mut all = Vec::new();
    for (i, m) in mine.iter().enumerate() {
        all.push(m.clone());
        if let Some(o) = others.get(i) {
            all.push(o.clone());
        }
    }
    rig.inject(&all);
    let mut got = recv_n(&mut ep, 10);
    if workers > 1 {
        // Flows handled on two workers keep their own order, not each other's.
        got.sort();
        let mut mine = mine.clone();
        mine.sort();
        assert_eq!(got, mine, "exactly the tagged frames, byte for byte");
    } else {
        assert_eq!(got, mine, "exactly the tagged frames, in order, byte for byte");
    }
    until("the others on the host path", || rig.to_host() == others.len() as u64);
    // Nothing more arrives for the endpoint.
    assert_eq!(ep.recv(64, |_| {}), 0);
    // What the client sends leaves on the tag's port.
    let sent: Vec<Vec<u8>> =
        (0..4u8).map(|i| udp(5000, &vec![0xa0 + i; 20 + 100 * i as usize])).collect();
    assert_eq!(ep.send_batch(&sent), 4);
    let mut out = Vec::new();
    until("the client's frames on the wire", || {
        rig.wire.recv(64, |m| out.push(m.to_vec()));
        out.len() >= 4
    });
    assert_eq!(out, sent, "the client's frames leave on port 'wire' unchanged");
    // The API lists it with its counters.
    let mut api = Client::new(&rig.sock);
    let listed = api.endpoints().unwrap();
    assert_eq!(listed.len(), 1);
    let e = &listed[0];
    assert_eq!((e.id, e.port.as_str()), (id, "wire"));
    assert_eq!(e.matches.unwrap().dst_port, Some(7777));
    assert_eq!(e.map, None);
    assert_eq!(e.pid, Some(std::process::id() as i32));
    until("the counters published", || {
        let c = api.endpoints().unwrap()[0].counters;
        c.rx_delivered == 10 && c.tx_sent == 4
    });
    let c = api.endpoints().unwrap()[0].counters;
    assert_eq!((c.rx_dropped, c.bad_desc, c.bad_index), (0, 0, 0));
    drop(ep);
    let t = rig.finish();
    let wire = t.port("wire").unwrap();
    assert_eq!(wire.rx_packets, all.len() as u64);
    assert_eq!(wire.to_host, others.len() as u64);
    if workers > 1 {
        // Worker 0 is `wire`'s home; all it gets from worker 1 are the tagged frames
        // worker 1 ran (the host path's port lives on worker 1).
        assert!(t.workers[0].peer_in > 0, "some tagged frames were handed to the home worker");
    }
}

#[test]
fn an_endpoint_gets_exactly_its_tagged_frames_and_sends_on_its_port() {
    delivery_is_exact(1);
}

/// Two workers with software RSS: packets of `wire` run on either worker, and those
/// that match are handed to the port's home worker, which serves the endpoint.
#[test]
fn tagged_frames_reach_the_endpoint_from_any_worker() {
    delivery_is_exact(2);
}

/// Not a test by itself: the child process of the SIGKILL test (run with its env set).
#[test]
fn child_endpoint() {
    let Ok(sock) = std::env::var("SPINE_EP_CHILD_SOCKET") else { return };
    let ep = Endpoint::open(&sock, &Channel::udp4("wire", 9000)).unwrap();
    println!("open {}", ep.id().unwrap());
    std::io::stdout().flush().unwrap();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn a_killed_or_dropped_client_is_reclaimed_and_the_pool_is_whole() {
    let mut rig = Rig::new(1);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_endpoint", "--nocapture", "--test-threads=1"])
        .env("SPINE_EP_CHILD_SOCKET", &rig.sock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // libtest prints "test child_endpoint ... " before the child's own line.
    let opened = lines.by_ref().map_while(Result::ok).find(|l| l.contains("open "));
    assert!(opened.is_some(), "the child opened its endpoint");
    rig.served(1);
    assert_eq!(rig.live.endpoints()[0].pid, Some(child.id() as i32));
    // The child never reads: the frames sit in its rings and its buffer area.
    let frames: Vec<Vec<u8>> = (0..40u8).map(|i| udp(9000, &vec![i; 10 * i as usize])).collect();
    rig.inject(&frames);
    until("the child's frames delivered", || {
        rig.live.endpoints().first().is_some_and(|e| e.counters.rx_delivered == 40)
    });
    child.kill().unwrap();
    child.wait().unwrap();
    until("the killed client reclaimed", || rig.live.endpoints().is_empty());
    assert_eq!(rig.live.endpoints_reclaimed(), 1);
    let stats = rig.server.as_ref().unwrap().endpoint_stats();
    assert_eq!(stats.reclaimed.load(Ordering::Relaxed), 1);
    // Its tag is free again: its traffic goes to the host path now.
    let probes = rig.until_host(&frames[0], 1);
    // A client that drops its endpoint is reclaimed too, and its tag can be taken again.
    let ep = Endpoint::open(&rig.sock, &Channel::udp4("wire", 9000)).unwrap();
    rig.served(1);
    drop(ep);
    until("the dropped endpoint reclaimed", || rig.live.endpoints().is_empty());
    assert_eq!(rig.live.endpoints_reclaimed(), 2);
    let mut again = Endpoint::open(&rig.sock, &Channel::udp4("wire", 9000)).unwrap();
    rig.served(1);
    rig.inject(&frames[5..8]);
    assert_eq!(recv_n(&mut again, 3), frames[5..8].to_vec());
    drop(again);
    // `finish` counts the pool whole.
    let t = rig.finish();
    assert_eq!(t.port("wire").unwrap().rx_packets, 43 + probes);
}

fn refused(r: Result<Endpoint, OpenError>) -> (String, String) {
    match r {
        Err(OpenError::Refused { kind, message }) => (kind, message),
        Err(e) => panic!("expected a refusal, got {e}"),
        Ok(_) => panic!("expected a refusal, got an endpoint"),
    }
}

/// Writes `bytes` to the endpoint socket and returns the answer line.
fn raw(rig: &Rig, bytes: &[u8]) -> String {
    let mut s = UnixStream::connect(endpoint_socket(&rig.sock)).unwrap();
    let _ = s.write_all(bytes);
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn hostile_requests_get_clear_errors_and_the_adapter_keeps_forwarding() {
    let mut rig = Rig::new(1);
    let chan =
        |port: &str, m: Match| Channel { port: port.into(), matches: m, ..Default::default() };
    // A bad tag names the field.
    let (kind, msg) = refused(Endpoint::open(
        &rig.sock,
        &chan("wire", Match { dst_port: Some(53), ..Default::default() }),
    ));
    assert_eq!(kind, "bad_tag");
    assert!(msg.contains("dst_port") && msg.contains("'wire'"), "{msg}");
    let (kind, msg) = refused(Endpoint::open(
        &rig.sock,
        &chan("wire", Match { vlan: Some(5000), ..Default::default() }),
    ));
    assert_eq!(kind, "bad_tag");
    assert!(msg.contains("vlan 5000"), "{msg}");
    // An unknown port is named.
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &Channel::udp4("nope", 1)));
    assert_eq!(kind, "no_port");
    assert!(msg.contains("'nope'"), "{msg}");
    // Rings over the limit, and a geometry that is no layout.
    let big = Channel { ring_entries: Some(1 << 20), ..Channel::udp4("wire", 1) };
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &big));
    assert_eq!(kind, "bad_size");
    assert!(msg.contains("ring_entries") && msg.contains("4096"), "{msg}");
    let odd = Channel { frame_size: Some(1000), ..Channel::udp4("wire", 1) };
    assert_eq!(refused(Endpoint::open(&rig.sock, &odd)).0, "bad_size");
    // Per-client limit, and one tag per endpoint.
    rig.live.set_endpoint_limits(EndpointLimits { max_per_client: 2, ..Default::default() });
    let mut a = Endpoint::open(&rig.sock, &Channel::udp4("wire", 7)).unwrap();
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &Channel::udp4("wire", 7)));
    assert_eq!(kind, "tag_taken");
    assert!(msg.contains(&format!("endpoint {}", a.id().unwrap())), "{msg}");
    let b = Endpoint::open(&rig.sock, &Channel::udp4("wire", 8)).unwrap();
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &Channel::udp4("wire", 9)));
    assert_eq!(kind, "too_many");
    assert!(msg.contains("one client") && msg.contains('2'), "{msg}");
    // Garbage on the endpoint socket.
    let ans = raw(&rig, b"hello\n");
    assert!(ans.contains("\"bad_json\""), "{ans}");
    let ans = raw(&rig, b"{\"port\":\"wire\",\"bogus\":1}\n");
    assert!(ans.contains("\"bad_json\"") && ans.contains("bogus"), "{ans}");
    let ans = raw(&rig, &vec![b'x'; 10_000]);
    assert!(ans.contains("\"too_large\""), "{ans}");
    let silent = UnixStream::connect(endpoint_socket(&rig.sock)).unwrap();
    let mut ans = String::new();
    (&silent).read_to_string(&mut ans).unwrap();
    assert!(ans.contains("\"timeout\""), "a client that never speaks is cut off: {ans}");
    drop(UnixStream::connect(endpoint_socket(&rig.sock)).unwrap());
    // Through all of it the adapter forwards and the good endpoints work.
    rig.served(2);
    rig.inject(&[udp(7, b"to a"), udp(8, b"to b"), udp(9, b"to host")]);
    assert_eq!(recv_n(&mut a, 1), vec![udp(7, b"to a")]);
    until("the rest on the host path", || rig.to_host() == 1);
    // Closing over HTTP: the endpoint leaves the list, its client's connection closes,
    // and closing it again is a clear 404.
    let mut api = Client::new(&rig.sock);
    let id = b.id().unwrap();
    assert_eq!(api.endpoint_close(id).unwrap().id, id);
    until("the closed endpoint gone", || rig.live.endpoints().len() == 1);
    let err = api.endpoint_close(id).unwrap_err();
    assert_eq!(err.api().map(|e| e.kind.as_str()), Some("no_endpoint"), "{err}");
    rig.until_host(&udp(8, b"to host now"), 2);
    let refusals = rig.server.as_ref().unwrap().endpoint_stats().refused.load(Ordering::Relaxed);
    assert!(refusals >= 12, "every refusal counted: {refusals}");
    drop((a, b));
    rig.finish();
}

/// The pure-Python client (`clients/python`) opens an endpoint on the running adapter by
/// its tag, is refused a bad tag with its kind, and sends back what it receives.
#[test]
fn a_python_application_opens_a_tagged_endpoint_and_echoes() {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/tag_echo.py");
    let mut py = Command::new("python3");
    py.arg(script);
    echo_app(py, "the Python client");
}

/// The same with the C client (`clients/c`, `spine_ep_request`), built warning-free.
#[test]
fn a_c_application_opens_a_tagged_endpoint_and_echoes() {
    let dir = TempDir::new("c-client");
    echo_app(Command::new(c_client(&dir, "tag_echo")), "the C client");
}

/// Runs `app` (argv: control socket, port, UDP port, count) against a rig: it must open
/// an endpoint for UDP port 6000 on `wire` and echo 20 frames, while other traffic goes
/// to the host path.
fn echo_app(mut app: Command, who: &str) {
    let mut rig = Rig::new(1);
    let mut child = app
        .args([rig.sock.to_str().unwrap(), "wire", "6000", "20"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let opened = lines.by_ref().map_while(Result::ok).find(|l| l.starts_with("open "));
    assert!(opened.is_some(), "{who} opened its endpoint");
    rig.served(1);
    let frames: Vec<Vec<u8>> =
        (0..20u8).map(|i| udp(6000, &vec![i; 5 + 50 * i as usize])).collect();
    let mut noise: Vec<Vec<u8>> = (0..20u8).map(|i| udp(6001, &[i; 8])).collect();
    noise.push(arp());
    for (f, n) in frames.iter().zip(&noise) {
        rig.inject(&[f.clone(), n.clone()]);
    }
    let mut out = Vec::new();
    until("the echoes on the wire", || {
        rig.wire.recv(64, |m| out.push(m.to_vec()));
        out.len() >= frames.len()
    });
    assert_eq!(out, frames, "exactly the tagged frames came back, in order ({who})");
    assert!(child.wait().unwrap().success(), "{who} echoed all 20");
    until("the closed endpoint reclaimed", || rig.live.endpoints().is_empty());
    until("the noise on the host path", || rig.to_host() == 20);
    rig.finish();
}

/// Only frames whose verdict is `XDP_PASS` reach an endpoint: with an extension on the
/// port that drops frames whose first payload byte is odd, the endpoint gets exactly the
/// even ones; detached again, it gets them all.
#[test]
fn only_frames_the_extension_passes_reach_the_endpoint() {
    let mut rig = Rig::new(1);
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/odd_drop.c");
    let dir = TempDir::new("odd-drop");
    let obj = spine_progs::compile_c(&src, &dir.join("odd_drop.o"), &[]).unwrap();
    rig.live.load("odd", &obj, Some("odd_drop"), "default").unwrap();
    rig.live.attach("odd", "wire").unwrap();
    let mut ep = Endpoint::open(&rig.sock, &Channel::udp4("wire", 4000)).unwrap();
    rig.served(1);
    let frames: Vec<Vec<u8>> =
        (0..10u8).map(|i| udp(4000, &vec![i; 3 + 20 * i as usize])).collect();
    rig.inject(&frames);
    let even: Vec<Vec<u8>> = frames.iter().step_by(2).cloned().collect();
    assert_eq!(recv_n(&mut ep, 5), even, "exactly the frames the extension passed");
    until("the drops counted", || rig.live.totals().port("wire").unwrap().verdicts.drop == 5);
    rig.live.detach("wire").unwrap();
    // Detached: the port's frames are unhandled, passed, and so all delivered. A round
    // that began before the detach still runs the program: probe with odd frames until
    // one comes through, so the worker is known to run detached.
    let probe = udp(4000, &[1; 9]);
    let mut probes = 0u64;
    loop {
        rig.inject(std::slice::from_ref(&probe));
        probes += 1;
        std::thread::sleep(Duration::from_millis(5));
        if ep.recv(64, |m| assert_eq!(m, &probe[..])) == 1 {
            break;
        }
        assert!(probes < 4000, "the detach never took effect");
    }
    rig.inject(&frames);
    assert_eq!(recv_n(&mut ep, 10), frames);
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    drop(ep);
    let t = rig.finish();
    let wire = t.port("wire").unwrap();
    // The probes before the detach took effect were dropped; the last one passed.
    assert_eq!(wire.rx_packets, 20 + probes);
    assert_eq!((wire.verdicts.drop, wire.to_host), (5 + probes - 1, 0));
}

/// Builds a C fixture of this folder with clang; the object's bytes.
fn fixture(name: &str) -> Vec<u8> {
    fixture_in("tests/fixtures", name)
}

/// Builds C fixture `name` of folder `dir` (relative to this crate) with clang.
fn fixture_in(dir: &str, name: &str) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let out = std::env::temp_dir().join(format!("spine-ep-{}-{seq}-{name}.o", std::process::id()));
    let obj = spine_progs::compile_c(&dir.join(format!("{name}.c")), &out, &[]).unwrap();
    let _ = std::fs::remove_file(out);
    obj
}

/// The endpoint map: an extension steers UDP port 7001 to slot 1 and 7002 to slot 2
/// (`bpf_redirect_map(&eps, n, XDP_DROP)`); two endpoints bound to those slots receive
/// exactly their frames, the rest passes to the host path; user space cannot write a
/// slot; a taken slot, one out of range, and a map that is no endpoint map are refused;
/// once an endpoint is reclaimed its slot is empty and its frames follow the empty-slot
/// rule (the flags' `XDP_DROP`), while the other endpoint keeps its own; the pool is
/// whole at the end.
fn endpoint_map_steers(workers: usize) {
    let obj = fixture("ep_steer");
    let mut rig = Rig::with_extension(workers, Some(("steer", &obj)));
    let mut one =
        Endpoint::open(&rig.sock, &Channel::slot("wire", Some("steer"), "eps", 1)).unwrap();
    // Without the extension's name: the one extension with an endpoint map `eps`.
    let mut two = Endpoint::open(&rig.sock, &Channel::slot("wire", None, "eps", 2)).unwrap();
    rig.served(2);
    let views = rig.live.endpoints();
    assert_eq!(views[0].matches, None, "a slot's endpoint takes no passed frames");
    let slot = views[1].map.clone().unwrap();
    assert_eq!(
        (slot.extension.as_deref(), slot.name.as_str(), slot.index),
        (Some("steer"), "eps", 2)
    );
    let k = |i: u32| i.to_ne_bytes();
    assert_eq!(
        rig.live.map_lookup("steer", "eps", &k(1)).unwrap(),
        (one.id().unwrap() as u32).to_ne_bytes()
    );
    assert!(rig.live.map_lookup("steer", "eps", &k(3)).is_err(), "slot 3 is empty");
    let err = rig.live.map_update("steer", "eps", &k(3), &k(1), 0).unwrap_err();
    assert_eq!(err.errno(), Some(1), "user space may not write a slot: EPERM ({err})");
    assert!(rig.live.map_delete("steer", "eps", &k(1)).is_err());

    let (kind, msg) = refused(Endpoint::open(&rig.sock, &Channel::slot("wire", None, "eps", 1)));
    assert_eq!(kind, "slot_taken", "{msg}");
    assert!(msg.contains("eps") && msg.contains("slot 1"), "{msg}");
    let (kind, msg) = refused(Endpoint::open(&rig.sock, &Channel::slot("wire", None, "eps", 4)));
    assert_eq!(kind, "bad_slot", "{msg}");
    let (kind, _) = refused(Endpoint::open(&rig.sock, &Channel::slot("wire", None, "nope", 0)));
    assert_eq!(kind, "no_map");
    let (kind, _) =
        refused(Endpoint::open(&rig.sock, &Channel::slot("wire", Some("other"), "eps", 0)));
    assert_eq!(kind, "no_extension");
    assert_eq!(rig.live.endpoints().len(), 2, "refusals leave nothing behind");

    let a: Vec<Vec<u8>> = (0..6u8).map(|i| udp(7001, &vec![i; 10 + 50 * i as usize])).collect();
    let b: Vec<Vec<u8>> =
        (0..6u8).map(|i| udp(7002, &vec![0x80 + i; 20 + 40 * i as usize])).collect();
    let others: Vec<Vec<u8>> = vec![udp(8888, &[1; 30]), arp(), udp(7003, &[2; 40])];
    let mut all = Vec::new();
    for i in 0..6 {
        all.push(a[i].clone());
        all.push(b[i].clone());
        if let Some(o) = others.get(i) {
            all.push(o.clone());
        }
    }
    rig.inject(&all);
    let (mut got_a, mut got_b) = (recv_n(&mut one, 6), recv_n(&mut two, 6));
    if workers > 1 {
        got_a.sort();
        got_b.sort();
    }
    let sorted = |mut v: Vec<Vec<u8>>| {
        if workers > 1 {
            v.sort();
        }
        v
    };
    assert_eq!(got_a, sorted(a.clone()), "slot 1's endpoint: exactly the 7001 frames");
    assert_eq!(got_b, sorted(b.clone()), "slot 2's endpoint: exactly the 7002 frames");
    until("the others on the host path", || rig.to_host() == others.len() as u64);
    assert_eq!((one.recv(64, |_| {}), two.recv(64, |_| {})), (0, 0), "nothing more");

    // The endpoint of slot 1 goes away: the slot is empty once it is reclaimed.
    let id_one = one.id().unwrap();
    drop(one);
    until("slot 1's endpoint reclaimed", || rig.live.endpoints().len() == 1);
    assert!(rig.live.map_lookup("steer", "eps", &k(1)).is_err(), "slot 1 emptied");
    assert!(rig.live.endpoints().iter().all(|e| e.id != id_one));
    rig.inject(&a[..3]);
    rig.inject(&b[..2]);
    assert_eq!(recv_n(&mut two, 2), b[..2].to_vec(), "slot 2 unaffected");
    until("slot 1's frames dropped by the flags' verdict", || {
        rig.live.totals().port("wire").unwrap().drops.verdict == 3
    });
    // The slot can be bound again.
    let mut again = Endpoint::open(&rig.sock, &Channel::slot("wire", None, "eps", 1)).unwrap();
    rig.served(2);
    rig.inject(&a[3..4]);
    assert_eq!(recv_n(&mut again, 1), a[3..4].to_vec());
    drop((two, again));
    let t = rig.finish();
    let wire = t.port("wire").unwrap();
    assert_eq!(wire.rx_packets, all.len() as u64 + 6);
    assert_eq!(wire.verdicts.redirect, 6 + 6 + 2 + 1);
    assert_eq!(wire.drops.verdict, 3);
    assert_eq!(wire.drops.redirect_no_target, 0);
}

#[test]
fn endpoint_map_slots_steer_frames_to_their_endpoints() {
    endpoint_map_steers(1);
}

/// Two workers with software RSS: the frames run on either worker and those redirected
/// into a slot are handed to the worker serving its endpoint.
#[test]
fn endpoint_map_slots_steer_frames_from_any_worker() {
    endpoint_map_steers(2);
}

/// An AF_XDP program as libxdp writes it (`bpf_redirect_map(&xsks_map,
/// ctx->rx_queue_index, XDP_PASS)`) feeds a spine endpoint bound to its receive queue's
/// XSKMAP slot, as the kernel feeds the AF_XDP socket whose fd the slot holds: with no
/// endpoint bound the frames pass to the host path; bound, the endpoint receives exactly
/// them; user space may not forge an endpoint entry; once the endpoint is gone the slot
/// is empty and frames pass again.
#[test]
fn an_af_xdp_program_feeds_the_endpoint_bound_to_its_xskmap_slot() {
    let obj = fixture("xsk_default");
    let mut rig = Rig::with_extension(1, Some(("xsk", &obj)));
    let before: Vec<Vec<u8>> = (0..3u8).map(|i| udp(6000, &[i; 20])).collect();
    rig.inject(&before);
    until("frames pass while no endpoint is bound", || rig.to_host() == 3);

    let mut ep = Endpoint::open(&rig.sock, &Channel::slot("wire", None, "xsks_map", 0)).unwrap();
    rig.served(1);
    let k = |i: u32| i.to_ne_bytes();
    let slot = rig.live.map_lookup("xsk", "xsks_map", &k(0)).unwrap();
    let want = (ep.id().unwrap() as u32 | spine_maps::XSK_ENDPOINT).to_ne_bytes();
    assert_eq!(slot, want, "slot 0 holds the endpoint, marked");
    let forged = (ep.id().unwrap() as u32 | spine_maps::XSK_ENDPOINT).to_ne_bytes();
    let err = rig.live.map_update("xsk", "xsks_map", &k(1), &forged, 0).unwrap_err();
    assert_eq!(err.errno(), Some(22), "no endpoint entry from user space: EINVAL ({err})");
    let (kind, _) = refused(Endpoint::open(&rig.sock, &Channel::slot("wire", None, "xsks_map", 0)));
    assert_eq!(kind, "slot_taken");

    let frames: Vec<Vec<u8>> =
        (0..8u8).map(|i| udp(6000 + u16::from(i), &vec![i; 10 + 60 * usize::from(i)])).collect();
    rig.inject(&frames);
    assert_eq!(recv_n(&mut ep, 8), frames, "the endpoint receives every frame, in order");
    assert_eq!(rig.to_host(), 3, "none passed while bound");

    drop(ep);
    until("the endpoint reclaimed", || rig.live.endpoints().is_empty());
    assert!(rig.live.map_lookup("xsk", "xsks_map", &k(0)).is_err(), "slot 0 emptied");
    rig.inject(&before);
    until("frames pass again", || rig.to_host() == 6);
    let t = rig.finish();
    let wire = t.port("wire").unwrap();
    assert_eq!((wire.verdicts.redirect, wire.drops.redirect_no_target), (8, 0));
}

/// A client that writes garbage into its rings (here an impossible transmit producer
/// index, failing every check) is reclaimed once it passes the adapter's garbage limit,
/// as a client that died: its endpoint leaves the table, its tag's frames pass to the
/// host path again, the other endpoint keeps getting exactly its frames, and every pool
/// buffer comes back.
#[test]
fn a_client_that_writes_garbage_is_reclaimed_and_the_others_are_served() {
    let mut rig = Rig::new(1);
    rig.live.set_endpoint_limits(EndpointLimits { garbage_limit: 64, ..Default::default() });
    let mut good = Endpoint::open(&rig.sock, &Channel::udp4("wire", 7001)).unwrap();
    let mut bad = Endpoint::open(&rig.sock, &Channel::udp4("wire", 7002)).unwrap();
    rig.served(2);
    let to_bad: Vec<Vec<u8>> = (0..3u8).map(|i| udp(7002, &[i; 30])).collect();
    rig.inject(&to_bad);
    assert_eq!(recv_n(&mut bad, 3), to_bad, "served while it behaves");
    bad.raw().poke_u32(4096, 0x7fff_ffff);
    until("the garbage writer reclaimed", || rig.live.endpoints().len() == 1);
    assert_eq!(rig.live.endpoints_reclaimed_for_garbage(), 1);
    assert_eq!(rig.live.endpoints_reclaimed(), 1);
    assert_eq!(rig.live.endpoints()[0].id, good.id().unwrap(), "the good one stays");

    let to_good: Vec<Vec<u8>> =
        (0..5u8).map(|i| udp(7001, &vec![i; 20 + 100 * usize::from(i)])).collect();
    rig.inject(&to_good);
    assert_eq!(recv_n(&mut good, 5), to_good, "the other endpoint unaffected");
    let before = rig.to_host();
    rig.inject(&to_bad[..2]);
    until("the reclaimed tag's frames on the host path", || rig.to_host() == before + 2);
    drop((good, bad));
    rig.finish();
}

/// A received payload with its marking (handler and source for a message).
type Marked = (Vec<u8>, Option<(u8, u16)>);

/// Active messages host → extension → host: a client sends messages for handler 7 on its
/// endpoint's transmit ring; the adapter runs handler 7 of the extension in the
/// endpoint's domain (`spine-runtime/tests/fixtures/handler.c`), which counts each in a
/// map and replies to the sender with `spine_msg_send` (every byte XOR 0x20). The client
/// receives exactly the replies, in order, marked with handler 7 and the extension's id;
/// messages for a handler no extension registered are counted and dropped; frames sent
/// between the messages still leave on the port; the pool is whole at the end.
#[test]
fn active_messages_run_handler_7_which_replies_to_the_sender() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let mut rig = Rig::build(1, Some(("echo", &obj)), Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    assert_eq!(rig.live.endpoints()[0].domain, "msgs");
    let msgs: Vec<Vec<u8>> =
        (0..20u8).map(|i| (0..1 + 12 * usize::from(i)).map(|b| b as u8 ^ i).collect()).collect();
    assert!(msgs.iter().all(|m| m.len() <= spine_client::MSG_MAX));
    assert!(!ep.send_message(7, &[0; 241]), "over 240 bytes: refused by the client");
    let mut replies = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        until("room on the transmit ring", || ep.send_message(7, m));
        if i == 5 {
            // A frame between messages leaves on the port as usual.
            until("room for a frame", || ep.send_batch(&[udp(5000, &[7; 30])]) == 1);
        }
        ep.recv_marked(64, |d, mark| replies.push((d.to_vec(), mark)));
    }
    until("every reply", || {
        ep.recv_marked(64, |d, mark| replies.push((d.to_vec(), mark)));
        replies.len() >= msgs.len()
    });
    let ext_id = replies[0].1.map(|(_, src)| src);
    let want: Vec<Marked> = msgs
        .iter()
        .map(|m| (m.iter().map(|b| b ^ 0x20).collect(), Some((7, ext_id.unwrap()))))
        .collect();
    assert_eq!(replies, want, "exactly the replies, transformed, in order");
    let count = rig.live.map_lookup("echo", "counts", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64::from_ne_bytes(count[..8].try_into().unwrap()), 20, "handler 7 ran 20 times");
    let mut out = Vec::new();
    until("the frame on the wire", || {
        rig.wire.recv(64, |m| out.push(m.to_vec()));
        !out.is_empty()
    });
    assert_eq!(out, vec![udp(5000, &[7; 30])]);
    // Handler 9 is registered by no extension: counted and dropped.
    for _ in 0..3 {
        until("room on the transmit ring", || ep.send_message(9, b"nobody"));
    }
    until("the unhandled messages counted", || {
        let c = rig.live.endpoints()[0].counters;
        c.msg_taken == 23 && c.msg_unhandled == 3
    });
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_delivered, c.bad_desc, c.tx_sent), (20, 0, 1));
    assert_eq!(ep.recv(64, |_| {}), 0, "no reply to an unhandled message");
    drop(ep);
    rig.finish();
}

/// Active messages extension → host from an XDP program: with its `target` map naming an
/// endpoint of its domain, the program turns each received frame into a message for
/// handler 5 carrying the frame's first 16 bytes (`spine_msg_send`) and drops the frame;
/// the endpoint receives exactly those messages, in order, marked with handler 5 and the
/// extension's id; with a target no endpoint has, the messages are counted undelivered.
#[test]
fn an_xdp_program_sends_messages_to_an_endpoint_of_its_domain() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let mut rig = Rig::build(1, Some(("echo", &obj)), Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id = ep.id().unwrap() as u32;
    rig.live.map_update("echo", "target", &0u32.to_ne_bytes(), &id.to_ne_bytes(), 0).unwrap();
    let frames: Vec<Vec<u8>> = (0..12u8).map(|i| udp(6000 + u16::from(i), &[i; 40])).collect();
    rig.inject(&frames);
    let mut got = Vec::new();
    until("the messages", || {
        ep.recv_marked(64, |d, mark| got.push((d.to_vec(), mark)));
        got.len() >= frames.len()
    });
    let src = got[0].1.unwrap().1;
    let want: Vec<Marked> = frames.iter().map(|f| (f[..16].to_vec(), Some((5, src)))).collect();
    assert_eq!(got, want, "one message per frame, in order");
    // A target that is no endpoint: counted, not delivered.
    rig.live.map_update("echo", "target", &0u32.to_ne_bytes(), &999u32.to_ne_bytes(), 0).unwrap();
    rig.inject(&frames[..3]);
    until("the undelivered messages counted", || {
        let w = &rig.live.totals().workers[0];
        w.msg_undelivered == 3
    });
    assert_eq!(rig.live.totals().workers[0].msg_delivered, 12);
    assert_eq!(ep.recv(64, |_| {}), 0);
    drop(ep);
    let t = rig.finish();
    assert_eq!(t.port("wire").unwrap().drops.verdict, 15, "every frame became a message");
}

/// Active messages extension → host endpoint from another worker: two workers with
/// software RSS, the endpoint served by worker 0 (the home of its port); the XDP program
/// (`fixtures/msg_udp.c`) turns every UDP frame into a message for handler 5 carrying the
/// UDP header and a sequence number, on whichever worker the frame's flow runs. Messages
/// sent on worker 1 are handed to worker 0 through the worker rings: the endpoint gets
/// every message exactly once, marked with handler 5 and the extension's id, each flow's
/// in its order; the counters add up (handed = delivered by worker 0 from the ring).
#[test]
fn messages_for_an_endpoint_another_worker_serves_are_handed_over() {
    let obj = fixture("msg_udp");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let mut rig = Rig::build(2, Some(("fwd", &obj)), Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id = ep.id().unwrap() as u32;
    rig.live.map_update("fwd", "target", &0u32.to_ne_bytes(), &id.to_ne_bytes(), 0).unwrap();
    // 8 flows (the source port follows the payload's length), 25 frames each,
    // interleaved; the payload starts with the frame's sequence number.
    let (flows, per) = (8usize, 25u32);
    let mut frames = Vec::new();
    for seq in 0..per * flows as u32 {
        let flow = seq as usize % flows;
        let mut payload = vec![0u8; 8 + 4 * flow];
        payload[..4].copy_from_slice(&seq.to_be_bytes());
        frames.push(udp(7000, &payload));
    }
    rig.inject(&frames);
    let mut got = Vec::new();
    until("every message", || {
        ep.recv_marked(64, |d, mark| got.push((d.to_vec(), mark)));
        got.len() >= frames.len()
    });
    let src = got[0].1.unwrap().1;
    assert!(got.iter().all(|(d, m)| d.len() == 16 && *m == Some((5, src))), "marked 5, one source");
    // Per flow (source port), the sequence numbers in the order they were sent.
    let mut by_flow: std::collections::BTreeMap<u16, Vec<u32>> = Default::default();
    for (d, _) in &got {
        let sport = u16::from_be_bytes([d[0], d[1]]);
        by_flow.entry(sport).or_default().push(u32::from_be_bytes(d[8..12].try_into().unwrap()));
    }
    assert_eq!(by_flow.len(), flows);
    for (i, (_, seqs)) in by_flow.iter().enumerate() {
        let want: Vec<u32> = (0..per).map(|k| k * flows as u32 + i as u32).collect();
        assert_eq!(seqs, &want, "flow {i}: every message once, in order");
    }
    drop(ep);
    let t = rig.finish();
    let (w0, w1) = (&t.workers[0], &t.workers[1]);
    assert!(w1.msg_handed > 0, "some flows ran on worker 1 and were handed over");
    assert_eq!(w0.msg_handed, 0, "worker 0 serves the endpoint: nothing to hand");
    assert_eq!((w0.msg_handoff_dropped, w1.msg_handoff_dropped), (0, 0));
    assert_eq!((w0.msg_undelivered, w1.msg_undelivered), (0, 0));
    assert_eq!(w1.msg_delivered, 0, "worker 1 serves no endpoint");
    assert_eq!(w0.msg_delivered, frames.len() as u64, "all delivered by worker 0");
    assert_eq!(t.port("wire").unwrap().drops.verdict, frames.len() as u64);
}

/// Bulk messages extension → host endpoint from another worker: two workers with
/// software RSS, the endpoint served by worker 0; the XDP program (`fixtures/bulk_udp.c`)
/// turns each UDP frame into a bulk message for handler 6 referring to the region of the
/// endpoint's area the frame names, on whichever worker the frame's flow runs. The client
/// wrote 8 regions (one per flow) into frames it reserved; references sent on worker 1 are
/// handed to worker 0 through the worker rings and checked there against the area. The
/// client receives every message exactly once with exactly its region's bytes; a reference
/// past the area's end is counted `bad_desc` (`msg_undelivered` on worker 0) whichever
/// worker sent it; a bulk message to a remote source (a tunnel) is refused and counted
/// `msg_bulk_remote_refused`; nothing is dropped on the hand-over and the pool is whole.
#[test]
fn bulk_messages_for_an_endpoint_another_worker_serves_are_handed_over_and_checked() {
    let obj = fixture("bulk_udp");
    let names: Vec<String> = ["spine_msg_send_bulk"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let mut rig = Rig::build(2, Some(("fwd", &obj)), Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id = ep.id().unwrap() as u32;
    let layout = ep.layout();
    let area = u64::from(layout.frames) * u64::from(layout.frame_size);
    let at = ep.reserve_area(2).expect("two free frames");
    let flows = 8usize;
    let region = |i: usize| (at + 400 * i as u64, 100 + 37 * i as u32);
    let bytes = |i: usize| -> Vec<u8> {
        (0..region(i).1).map(|p| (p as usize * 7 + i * 31) as u8).collect()
    };
    for i in 0..flows {
        assert!(ep.write_area(region(i).0, &bytes(i)));
    }
    // The frame for flow i: {target, offset, len}, padded to 12 + 4 * i bytes so that
    // the source port (and so the worker) follows the flow.
    let frame = |target: u32, off: u64, len: u32, flow: usize| {
        let mut p = target.to_be_bytes().to_vec();
        p.extend_from_slice(&(off as u32).to_be_bytes());
        p.extend_from_slice(&len.to_be_bytes());
        p.resize(12 + 4 * flow, 0);
        udp(7000, &p)
    };
    let per = 20;
    let mut frames = Vec::new();
    for k in 0..per * flows {
        let (off, len) = region(k % flows);
        frames.push(frame(id, off, len, k % flows));
    }
    rig.inject(&frames);
    let mut got = Vec::new();
    until("every bulk message", || {
        ep.recv_marked(64, |d, mark| got.push((d.to_vec(), mark)));
        got.len() >= frames.len()
    });
    let src = got[0].1.unwrap().1;
    assert!(got.iter().all(|(_, m)| *m == Some((6, src))), "marked 6, one source");
    for i in 0..flows {
        let n = got.iter().filter(|(d, _)| *d == bytes(i)).count();
        assert_eq!(n, per, "region {i}: every message once, exactly its bytes");
    }
    // Bad references from every flow (past the area's end, and wrapping), then bulk
    // messages to a remote source: none arrives.
    let mut bad = Vec::new();
    for i in 0..flows {
        bad.push(frame(id, area - 10, 11, i));
        bad.push(frame(0x4000_0000 | 5, region(i).0, region(i).1, i));
    }
    rig.inject(&bad);
    until("the bad references counted", || {
        rig.live.endpoints()[0].counters.bad_desc == flows as u64
    });
    until("the remote sends refused", || {
        rig.live.totals().workers.iter().map(|w| w.msg_bulk_remote_refused).sum::<u64>()
            == flows as u64
    });
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    ep.release_area(at, 2);
    drop(ep);
    let t = rig.finish();
    let (w0, w1) = (&t.workers[0], &t.workers[1]);
    assert!(w1.msg_handed > 0, "some flows ran on worker 1 and were handed over");
    assert_eq!(w0.msg_handed, 0, "worker 0 serves the endpoint: nothing to hand");
    assert_eq!((w0.msg_handoff_dropped, w1.msg_handoff_dropped), (0, 0));
    assert_eq!(w1.msg_delivered + w1.msg_undelivered, 0, "worker 1 serves no endpoint");
    assert_eq!(w0.msg_delivered, frames.len() as u64, "all delivered by worker 0");
    assert_eq!(w0.msg_undelivered, flows as u64, "the bad references, refused by worker 0");
    let verdicts = t.port("wire").unwrap().drops.verdict;
    assert_eq!(verdicts, (frames.len() + bad.len()) as u64, "every frame became a message");
}

/// The cross-worker hand-over queue overflowing (`msg_handoff_dropped`): two workers
/// with software RSS, bursts of one frame and the smallest worker rings (16 slots;
/// a worker drains at most a burst from each ring per round), the endpoint served by
/// worker 0; the XDP program (`fixtures/msg_fanout.c`) turns each UDP frame into 64
/// messages for the endpoint, so worker 1 hands 64 messages at once into a 16-slot ring.
/// Frames are injected until worker 1 has counted hand-overs dropped. Then everything
/// is accounted: every message the program queued (its map counts them) was delivered,
/// counted undelivered or counted `msg_handoff_dropped`, and nothing else; the client
/// received exactly the delivered ones, none twice; every frame was processed; the pool
/// is whole.
#[test]
fn a_full_handoff_ring_drops_counted_messages_and_loses_nothing_else() {
    let obj = fixture("msg_fanout");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let opts = AdapterOptions {
        workers: 2,
        assign: Assign::Rss,
        burst: 1,
        peer_ring: 16,
        pool: PoolConfig::new(1024),
        ..Default::default()
    };
    let mut rig = Rig::build_with(opts, Some(("fan", &obj)), Some(domain));
    let chan = Channel {
        domain: Some("msgs".into()),
        ring_entries: Some(4096),
        ..Channel::udp4("wire", 9999)
    };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id = ep.id().unwrap() as u32;
    rig.live.map_update("fan", "target", &0u32.to_ne_bytes(), &id.to_ne_bytes(), 0).unwrap();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let workers = |live: &Live| live.totals().workers;
    let mut frames = 0u32;
    let deadline = Instant::now() + Duration::from_secs(30);
    while workers(&rig.live)[1].msg_handoff_dropped == 0 {
        assert!(Instant::now() < deadline, "the hand-over ring never overflowed");
        // 8 flows (the source port follows the payload's length); the payload starts
        // with the frame's number.
        let batch: Vec<Vec<u8>> = (frames..frames + 16)
            .map(|n| {
                let mut p = vec![0u8; 8 + 4 * (n as usize % 8)];
                p[..4].copy_from_slice(&n.to_be_bytes());
                udp(7000, &p)
            })
            .collect();
        frames += 16;
        rig.inject(&batch);
        ep.recv(4096, |m| got.push(m.to_vec()));
    }
    let sent = || {
        let v = rig.live.map_lookup("fan", "sent", &0u32.to_ne_bytes()).unwrap();
        u64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    until("every frame processed", || {
        rig.live.totals().port("wire").unwrap().drops.verdict == u64::from(frames)
    });
    until("every message accounted", || {
        ep.recv(4096, |m| got.push(m.to_vec()));
        let w = workers(&rig.live);
        let fate: u64 =
            w.iter().map(|w| w.msg_delivered + w.msg_undelivered + w.msg_handoff_dropped).sum();
        fate == sent() && got.len() as u64 == w[0].msg_delivered + w[1].msg_delivered
    });
    let w = workers(&rig.live);
    assert!(w[1].msg_handoff_dropped > 0);
    assert_eq!(w[0].msg_handoff_dropped, 0, "worker 0 serves the endpoint: nothing to hand");
    assert_eq!(w[1].msg_delivered, 0, "worker 1 serves no endpoint");
    assert!(
        w[0].msg_delivered + w[0].msg_undelivered >= w[1].msg_handed,
        "every message handed over reached worker 0"
    );
    let unique: std::collections::HashSet<&Vec<u8>> = got.iter().collect();
    assert_eq!(unique.len(), got.len(), "no message twice");
    assert!(got.iter().all(|m| m.len() == 8 && m[4] < 64), "only the program's messages");
    drop(ep);
    let t = rig.finish();
    assert_eq!(t.port("wire").unwrap().drops.verdict, u64::from(frames));
}

/// Sends one message for handler 7 on `ep` and waits until it is answered (a marked reply
/// comes back) or counted as unhandled; returns the reply.
fn ask(live: &Live, ep: &mut Endpoint, m: &[u8]) -> Option<Marked> {
    let unhandled = live.endpoints()[0].counters.msg_unhandled;
    until("room on the transmit ring", || ep.send_message(7, m));
    let mut reply = None;
    until("a reply or the message counted unhandled", || {
        ep.recv_marked(1, |d, mark| reply = Some((d.to_vec(), mark)));
        reply.is_some() || live.endpoints()[0].counters.msg_unhandled > unhandled
    });
    reply
}

/// Handlers follow the live extension set, not the one an endpoint opened with: an
/// endpoint opened with no extension in its domain gets its message counted unhandled;
/// an extension loaded afterwards through `Live` (handler 7: replies XOR 0x20) answers
/// the next ones; a second version loaded and the first unloaded (the replacement),
/// only the second answers (XOR 0x40, its own extension id as the source); once it is
/// unloaded too, messages are counted unhandled and get no reply. Each step waits until
/// every worker runs the new handler table (`Live::handlers_settled`), so every count is
/// exact; two workers.
#[test]
fn handlers_loaded_replaced_and_unloaded_after_the_endpoint_opened() {
    let v1 = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let v2 = fixture("handler_v2");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(2, None, Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    assert_eq!(ask(&rig.live, &mut ep, b"before"), None, "no handler yet");
    let xor = |m: &[u8], x: u8| m.iter().map(|b| b ^ x).collect::<Vec<u8>>();
    let id1 = rig.live.load("v1", &v1, None, "msgs").unwrap().id;
    until("every worker runs v1", || rig.live.handlers_settled());
    for m in [&b"one"[..], b"two", b"three"] {
        assert_eq!(ask(&rig.live, &mut ep, m), Some((xor(m, 0x20), Some((7, id1)))));
    }
    let count = |ext: &str| {
        let v = rig.live.map_lookup(ext, "counts", &0u32.to_ne_bytes()).unwrap();
        u64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    assert_eq!(count("v1"), 3);
    // The replacement: v2 loaded, then v1 unloaded.
    let id2 = rig.live.load("v2", &v2, None, "msgs").unwrap().id;
    rig.live.unload("v1", false).unwrap();
    assert_ne!(id1, id2);
    until("every worker runs v2 alone", || rig.live.handlers_settled());
    for m in [&b"four"[..], b"five"] {
        assert_eq!(ask(&rig.live, &mut ep, m), Some((xor(m, 0x40), Some((7, id2)))));
    }
    assert_eq!(count("v2"), 2);
    rig.live.unload("v2", false).unwrap();
    until("every worker runs no handler", || rig.live.handlers_settled());
    assert_eq!(ask(&rig.live, &mut ep, b"after"), None, "unloaded: unhandled");
    assert_eq!(ask(&rig.live, &mut ep, b"again"), None);
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_taken, c.msg_unhandled, c.msg_delivered), (8, 3, 5));
    assert_eq!(ep.recv(64, |_| {}), 0, "no reply to an unhandled message");
    drop(ep);
    rig.finish();
}

/// Active messages from the pure-Python client (`clients/python/msg_echo.py`): it opens
/// an endpoint in the handler's domain, sends 30 messages for handler 7 and checks the
/// 30 replies, in order and transformed; the adapter counts them.
#[test]
fn a_python_application_sends_active_messages_and_gets_the_replies() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/msg_echo.py");
    let mut py = Command::new("python3");
    py.arg(script);
    message_app(py, "the Python client");
}

/// The same with the C client (`clients/c/msg_echo.c`, `spine_ep_send_message` and
/// `spine_ep_recv_marked`).
#[test]
fn a_c_application_sends_active_messages_and_gets_the_replies() {
    let dir = TempDir::new("c-msg");
    message_app(Command::new(c_client(&dir, "msg_echo")), "the C client");
}

/// Runs `app` (argv: control socket, port, domain, count) against a rig whose domain
/// `msgs` runs the test handler 7 (it replies to the sender with every byte XOR 0x20):
/// 30 messages must come back right, and the handler must have counted 30.
fn message_app(mut app: Command, who: &str) {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, Some(("echo", &obj)), Some(domain));
    let out = app
        .args([rig.sock.to_str().unwrap(), "wire", "msgs", "30"])
        .output()
        .unwrap_or_else(|e| panic!("{who}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{who}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("replies 30"), "{stdout}");
    let count = rig.live.map_lookup("echo", "counts", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64::from_ne_bytes(count[..8].try_into().unwrap()), 30);
    rig.finish();
}

/// `stats` of extension `ext` (u64 slots `0..n`).
fn stats(live: &Live, ext: &str, n: u32) -> Vec<u64> {
    (0..n)
        .map(|k| {
            let v = live.map_lookup(ext, "stats", &k.to_ne_bytes()).unwrap();
            u64::from_ne_bytes(v[..8].try_into().unwrap())
        })
        .collect()
}

/// Extension → extension messages on one adapter (`spine_msg_post`): extension A
/// (`post_a.c`, attached to `wire`) turns each of 40 frames into a message for handler 9
/// of its domain carrying the frame's first 16 bytes; extension B (`post_b.c`, loaded
/// into the same domain afterwards) counts them in its map: exactly 40, 640 bytes, the
/// first bytes summed, and A's id (with `SPINE_MSG_SOURCE_EXT`) as the source; the same
/// object loaded into another domain never runs. A handler reached from an endpoint
/// posts too (A's handler 8 forwards to 9), a chain of 50 posts (`post_chain.c`,
/// handler 10 posting to itself) runs exactly 51 times, one hop per queued message, and
/// a fan-out of 64 posts per message (handler 11, 8 messages) is fully accounted: every
/// post either ran handler 9 once or was counted dropped. The worker's counters agree
/// throughout; the pool is whole at the end.
#[test]
fn an_extension_posts_messages_to_another_extensions_handler() {
    let dir = "../spine-runtime/tests/fixtures";
    let (a, b, chain) =
        (fixture_in(dir, "post_a"), fixture_in(dir, "post_b"), fixture_in(dir, "post_chain"));
    let names: Vec<String> = ["map_lookup_elem", "spine_msg_post", "spine_msg_send"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let mut rig = Rig::build(1, Some(("a", &a)), Some(domain));
    let a_id = rig.live.extensions().iter().find(|e| e.name == "a").unwrap().id;
    rig.live.load("b", &b, None, "msgs").unwrap();
    rig.live.load("b_elsewhere", &b, None, "default").unwrap();
    let refused = rig.live.load("a_elsewhere", &a, None, "default").unwrap_err().to_string();
    assert!(refused.contains("spine_msg_post"), "the default domain does not grant it: {refused}");
    until("every worker runs b's handler", || rig.live.handlers_settled());
    let frames: Vec<Vec<u8>> = (0..40u8).map(|i| udp(6000 + u16::from(i), &[i; 40])).collect();
    rig.inject(&frames);
    until("b counted 40 messages", || stats(&rig.live, "b", 1)[0] >= 40);
    let first_bytes: u64 = frames.iter().map(|f| u64::from(f[0])).sum();
    let source = u64::from(spine_runtime::SOURCE_EXTENSION | u32::from(a_id));
    assert_eq!(stats(&rig.live, "b", 4), [40, 40 * 16, first_bytes, source]);
    assert_eq!(stats(&rig.live, "b_elsewhere", 1), [0], "another domain's handler 9");
    // Worker counters are published a little after the runs.
    let posts = |live: &Live| {
        let w = live.totals().workers[0];
        (w.msg_posted, w.msg_post_runs, w.msg_post_dropped, w.msg_post_unhandled)
    };
    until("the worker's counters", || posts(&rig.live).0 >= 40);
    assert_eq!(posts(&rig.live), (40, 40, 0, 0));
    // From a handler an endpoint's message ran: A's handler 8 forwards to handler 9.
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    until("room on the transmit ring", || ep.send_message(8, b"from the host"));
    until("b counted the forwarded message", || stats(&rig.live, "b", 1)[0] >= 41);
    // A chain: handler 10 posts to itself until the hop count is 0.
    rig.live.load("chain", &chain, None, "msgs").unwrap();
    until("every worker runs the chain", || rig.live.handlers_settled());
    until("room on the transmit ring", || ep.send_message(10, &[50]));
    until("the chain ran to its end", || stats(&rig.live, "chain", 1)[0] >= 51);
    until("the worker's counters", || posts(&rig.live).1 >= 41 + 50);
    assert_eq!(posts(&rig.live), (41 + 50, 41 + 50, 0, 0));
    // A fan-out: 8 messages for handler 11, each posting 64 messages to handler 9.
    for _ in 0..8 {
        until("room on the transmit ring", || ep.send_message(11, &[0]));
    }
    until("every post ran or was dropped", || {
        let (posted, runs, dropped, _) = posts(&rig.live);
        posted + dropped == 41 + 50 + 8 * 64 && runs == posted
    });
    let (posted, _, _, unhandled) = posts(&rig.live);
    let fanned = posted - 41 - 50;
    assert_eq!(stats(&rig.live, "b", 1)[0], 41 + fanned, "handler 9 ran once per queued post");
    assert_eq!(stats(&rig.live, "chain", 2), [51, 8 * 64], "the helper queued every post");
    assert_eq!(unhandled, 0);
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_taken, c.msg_unhandled), (10, 0));
    drop(ep);
    rig.finish();
}

/// `spine_msg_post_to` from an extension to one named extension: `sender`
/// (`post_to.c`, domain `msgs`) posts, for each message an endpoint sends its handler 8,
/// to the `to` the message carries. `b1` and `b2` (both `post_b.c`, handler 9) are of
/// `msgs`, `b_other` (the same object) of the default domain. A post to `b2` alone runs
/// only `b2`'s handler, then one to `b1` only `b1`'s; a post to every extension of the
/// domain runs both; `b_other`'s id (another domain's extension) and an id no extension
/// has are refused `-ENOENT` at the call and counted `msg_post_refused`, a reserved bit
/// of `to` is refused `-EINVAL`; `b_other`'s handler never runs. A domain that does not
/// grant `spine_msg_post_to` refuses the object.
#[test]
fn an_extension_posts_a_message_to_one_named_extension() {
    let dir = "../spine-runtime/tests/fixtures";
    let (sender, b) = (fixture_in(dir, "post_to"), fixture_in(dir, "post_b"));
    let names: Vec<String> = ["map_lookup_elem", "ktime_get_ns", "spine_msg_post_to"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, None, Some(domain));
    rig.live.load("sender", &sender, None, "msgs").unwrap();
    let b1 = rig.live.load("b1", &b, None, "msgs").unwrap().id;
    let b2 = rig.live.load("b2", &b, None, "msgs").unwrap().id;
    let other = rig.live.load("b_other", &b, None, "default").unwrap().id;
    let refused = rig.live.load("sender_elsewhere", &sender, None, "default").unwrap_err();
    assert!(refused.to_string().contains("spine_msg_post_to"), "not granted: {refused}");
    until("every worker runs the handlers", || rig.live.handlers_settled());
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let mut sent = 0u64;
    // Sends `to` to the sender's handler 8 and returns the post's return code.
    let mut post = |ep: &mut Endpoint, to: u64| {
        let mut order = to.to_ne_bytes().to_vec();
        order.extend_from_slice(&0u64.to_ne_bytes());
        until("room on the transmit ring", || ep.send_message(8, &order));
        sent += 1;
        until("the sender posted", || stats(&rig.live, "sender", 1)[0] == sent);
        stats(&rig.live, "sender", 2)[1] as i64
    };
    let count = |ext: &str| stats(&rig.live, ext, 1)[0];
    let to = spine_abi::msg_post::to;
    assert_eq!(post(&mut ep, to(b2, 9)), 0);
    until("b2 ran", || count("b2") == 1);
    assert_eq!(post(&mut ep, to(b1, 9)), 0);
    until("b1 ran", || count("b1") == 1);
    assert_eq!(count("b2"), 1, "the post to b1 did not run b2");
    let source = u64::from(spine_runtime::SOURCE_EXTENSION | u32::from(sender_id(&rig.live)));
    assert_eq!(stats(&rig.live, "b1", 4)[3], source, "the sender's id as the source");
    // Every extension of the domain.
    assert_eq!(post(&mut ep, 9), 0);
    until("both ran", || count("b1") == 2 && count("b2") == 2);
    // Another domain's extension, and an id no extension has: refused at the call.
    assert_eq!(post(&mut ep, to(other, 9)), -spine_abi::errno::ENOENT);
    assert_eq!(post(&mut ep, to(60_000, 9)), -spine_abi::errno::ENOENT);
    assert_eq!(post(&mut ep, to(b1, 9) | 1 << 8), -spine_abi::errno::EINVAL);
    assert_eq!(post(&mut ep, to(b1, 9) | 1 << 40), -spine_abi::errno::EINVAL);
    let w = |live: &Live| live.totals().workers[0];
    until("the worker's counters", || w(&rig.live).msg_post_refused >= 2);
    let c = w(&rig.live);
    assert_eq!((c.msg_post_refused, c.msg_posted, c.msg_post_runs), (2, 3, 4));
    assert_eq!((count("b1"), count("b2"), count("b_other")), (2, 2, 0));
    drop(ep);
    rig.finish();
}

/// Delayed posts (`spine_msg_post_to` with `delay_ns`): `sender` (`post_to.c`) posts to
/// its own handler 5 a message stamped with `bpf_ktime_get_ns()` read just before the
/// call; handler 5 counts the runs that came sooner than the delay after that stamp. For
/// delays of 1, 20 and 50 ms each post runs exactly once (polled with the generous
/// bound of `until`), never sooner than its delay (the observed delay ≥ the asked one,
/// no early run counted); a delay past `DELAY_MAX_NS` is refused `-EINVAL`, a delayed
/// post to another domain's extension `-ENOENT`. The worker's queue of delayed posts
/// holds 64: 70 posts of 10 s (made well within those 10 s) give 64 accepted and 6
/// refused `-ENOSPC`, counted `msg_post_delay_full`; the pool is whole at the end with
/// those 64 still queued (a delayed post holds no buffer).
#[test]
fn a_delayed_post_runs_its_handler_no_sooner_than_its_delay() {
    let dir = "../spine-runtime/tests/fixtures";
    let (sender, b) = (fixture_in(dir, "post_to"), fixture_in(dir, "post_b"));
    let names: Vec<String> = ["map_lookup_elem", "ktime_get_ns", "spine_msg_post_to"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, None, Some(domain));
    let me = rig.live.load("sender", &sender, None, "msgs").unwrap().id;
    let other = rig.live.load("b_other", &b, None, "default").unwrap().id;
    until("every worker runs the handlers", || rig.live.handlers_settled());
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let mut sent = 0u64;
    let mut post = |ep: &mut Endpoint, to: u64, delay: u64| {
        let mut order = to.to_ne_bytes().to_vec();
        order.extend_from_slice(&delay.to_ne_bytes());
        until("room on the transmit ring", || ep.send_message(8, &order));
        sent += 1;
        until("the sender posted", || stats(&rig.live, "sender", 1)[0] == sent);
        stats(&rig.live, "sender", 2)[1] as i64
    };
    let to = spine_abi::msg_post::to;
    for (n, delay) in [1_000_000u64, 20_000_000, 50_000_000].into_iter().enumerate() {
        assert_eq!(post(&mut ep, to(me, 5), delay), 0);
        until("the delayed post ran", || stats(&rig.live, "sender", 3)[2] == n as u64 + 1);
        let s = stats(&rig.live, "sender", 5);
        assert_eq!(s[3], 0, "no run sooner than its delay");
        assert!(s[4] >= delay, "observed {} ns after the post, asked {delay}", s[4]);
    }
    let max = spine_abi::msg_post::DELAY_MAX_NS;
    assert_eq!(post(&mut ep, to(me, 5), max + 1), -spine_abi::errno::EINVAL);
    assert_eq!(post(&mut ep, to(other, 9), 1_000_000), -spine_abi::errno::ENOENT);
    let rcs: Vec<i64> = (0..70).map(|_| post(&mut ep, to(me, 5), max)).collect();
    assert_eq!(rcs.iter().filter(|&&r| r == 0).count(), 64, "{rcs:?}");
    assert_eq!(rcs[64..], [-spine_abi::errno::ENOSPC; 6], "{rcs:?}");
    let w = |live: &Live| live.totals().workers[0];
    until("the worker's counters", || w(&rig.live).msg_post_delay_full >= 6);
    let c = w(&rig.live);
    assert_eq!((c.msg_post_delayed, c.msg_post_delay_full, c.msg_post_runs), (3 + 64, 6, 3));
    assert_eq!(stats(&rig.live, "sender", 3)[2], 3, "the 10 s posts have not run");
    assert_eq!(stats(&rig.live, "b_other", 1)[0], 0);
    drop(ep);
    rig.finish();
}

fn sender_id(live: &Live) -> u16 {
    live.extensions().iter().find(|e| e.name == "sender").unwrap().id
}

/// Bulk active messages end to end: a client reserves two frames of its buffer area,
/// writes 1,000 bytes across the frame boundary and sends a bulk message for handler 12
/// (`bulk.c`, loaded after the endpoint opened), which reads them with
/// `spine_msg_bulk_read` and replies with their word sum, their length and its probe
/// reads (past the end, at the end, at a wrapping offset: -EFAULT; the first byte: 0).
/// References outside the area (past it, straddling its end, wrapping, empty) are
/// counted `bad_desc` and run nothing; the endpoint keeps working after them.
#[test]
fn bulk_messages_reference_the_endpoints_area_and_are_checked() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "bulk");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send", "spine_msg_bulk_len", "spine_msg_bulk_read"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, None, Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    rig.live.load("bulk", &obj, None, "msgs").unwrap();
    until("every worker runs the bulk handler", || rig.live.handlers_settled());
    let view = rig.live.endpoints()[0].clone();
    let area = u64::from(view.frames) * u64::from(view.frame_size);
    let at = ep.reserve_area(2).expect("two free frames");
    let data: Vec<u8> = (0..1000u32).map(|i| (i * 31 + 7) as u8).collect();
    let start = at + u64::from(view.frame_size) - 300;
    assert!(ep.write_area(start, &data));
    let ask = |ep: &mut Endpoint, off: u64, len: u32| {
        until("room on the transmit ring", || ep.send_bulk_message(12, off, len));
        let mut reply = None;
        until("the handler's answer", || {
            ep.recv_marked(1, |d, mark| reply = Some((d.to_vec(), mark)));
            reply.is_some()
        });
        reply.unwrap()
    };
    let (answer, mark) = ask(&mut ep, start, 1000);
    assert_eq!(mark.map(|m| m.0), Some(12));
    let sum = data
        .chunks(64)
        .flat_map(|c| {
            let mut p = [0u8; 64];
            p[..c.len()].copy_from_slice(c);
            (0..8).map(move |i| u64::from_ne_bytes(p[i * 8..i * 8 + 8].try_into().unwrap()))
        })
        .fold(0u64, u64::wrapping_add);
    let word = |i: usize| i32::from_ne_bytes(answer[8 + i * 4..12 + i * 4].try_into().unwrap());
    assert_eq!(u64::from_ne_bytes(answer[..8].try_into().unwrap()), sum, "the data, exactly");
    assert_eq!([word(0), word(1), word(2), word(3), word(4)], [1000, -14, -14, -14, 0]);
    // Hostile references: refused when taken, counted, nothing runs.
    for (off, len) in [(area, 1u32), (area - 10, 11), (u64::MAX - 4, 10), (1 << 62, 64), (start, 0)]
    {
        until("room on the transmit ring", || ep.send_bulk_message(12, off, len));
    }
    until("the hostile references counted", || rig.live.endpoints()[0].counters.bad_desc == 5);
    // The endpoint still works: one byte at the very end of the area.
    assert!(ep.write_area(area - 1, &[200]));
    let (answer, _) = ask(&mut ep, area - 1, 1);
    assert_eq!(u64::from_ne_bytes(answer[..8].try_into().unwrap()), 200);
    let runs = rig.live.map_lookup("bulk", "stats", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(u64::from_ne_bytes(runs[..8].try_into().unwrap()), 2, "only the good ones ran");
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_taken, c.msg_unhandled, c.msg_delivered, c.bad_desc), (2, 0, 2, 5));
    ep.release_area(at, 2);
    drop(ep);
    rig.finish();
}

/// The domain `timed` for `timers_handler.c`: what its handler and applet call.
fn timers_domain() -> DomainSpec {
    let names: Vec<String> = [
        "map_lookup_elem",
        "spine_msg_send",
        "timer_init",
        "timer_set_callback",
        "timer_start",
        "timer_cancel",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    DomainSpec { name: "timed".into(), helpers, ..DomainSpec::default_domain() }
}

/// `runs` of slot `slot` of `timers_handler.c`'s map in extension `ext`.
fn timer_runs(live: &Live, ext: &str, slot: u32) -> u32 {
    let v = live.map_lookup(ext, "timers", &slot.to_ne_bytes()).unwrap();
    u32::from_ne_bytes(v[24..28].try_into().unwrap())
}

/// Receives marked messages until `n` have come.
fn recv_marked_n(ep: &mut Endpoint, n: usize) -> Vec<Marked> {
    let mut got = Vec::new();
    until("the timer's messages", || {
        ep.recv_marked(64, |d, mark| got.push((d.to_vec(), mark)));
        got.len() >= n
    });
    got
}

/// Timers armed by an active-message handler (`timers_handler.c`, handler 3): a message
/// arms a one-shot timer whose callback sends one message to the endpoint: exactly one
/// arrives; another arms a periodic one that re-arms itself until it has run 5 times:
/// exactly 5 arrive, numbered 1..5. The callbacks run on the worker serving the
/// endpoint (two workers), counted to the extension (`timers`, no faults); once the
/// callbacks stopped re-arming (their count says so) nothing more comes.
#[test]
fn a_handler_arms_one_shot_and_periodic_timers_whose_callbacks_message_the_host() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "timers_handler");
    let rig = Rig::build(2, None, Some(timers_domain()));
    let chan = Channel { domain: Some("timed".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id = rig.live.load("tm", &obj, None, "timed").unwrap().id;
    until("every worker runs the handler", || rig.live.handlers_settled());
    until("room on the transmit ring", || ep.send_message(3, &[0, 1]));
    let got = recv_marked_n(&mut ep, 1);
    assert_eq!(got, [(vec![0, 1], Some((3, id)))], "the one-shot's message");
    until("room on the transmit ring", || ep.send_message(3, &[1, 5]));
    let got = recv_marked_n(&mut ep, 5);
    let want: Vec<Marked> = (1..=5u8).map(|n| (vec![1, n], Some((3, id)))).collect();
    assert_eq!(got, want, "the periodic timer's 5 messages, in order");
    assert_eq!((timer_runs(&rig.live, "tm", 0), timer_runs(&rig.live, "tm", 1)), (1, 5));
    until("the timer counters published", || {
        rig.live.totals().extension("tm").is_some_and(|e| e.timers == 6)
    });
    let t = rig.live.totals();
    let e = t.extension("tm").unwrap();
    assert_eq!((e.timers, e.faults), (6, 0));
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more: the callbacks stopped re-arming");
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_taken, c.msg_unhandled), (2, 0));
    drop(ep);
    let t = rig.finish();
    assert_eq!(t.workers.iter().map(|w| w.msg_delivered).sum::<u64>(), 6);
}

/// Timers armed by an endpoint applet (`timers_handler.c`'s `doTx`): each frame the
/// client sends arms slot `data[0]` for `data[1]` runs, whose callback messages the
/// endpoint (marked handler 4). A one-shot and a 3-run periodic timer: exactly 1 and 3
/// messages; the endpoint's applet counters count the 4 timer runs.
#[test]
fn an_applet_arms_timers_whose_callbacks_message_its_endpoint() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "timers_handler");
    let rig = Rig::build(1, None, Some(timers_domain()));
    let id = rig.live.load("tm", &obj, None, "timed").unwrap().id;
    let chan = Channel {
        domain: Some("timed".into()),
        applets: Some("tm".into()),
        ..Channel::udp4("wire", 9999)
    };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let mut frame = vec![2u8, 1];
    frame.resize(60, 0);
    until("room for a frame", || ep.send_batch(std::slice::from_ref(&frame)) == 1);
    assert_eq!(recv_marked_n(&mut ep, 1), [(vec![2, 1], Some((4, id)))]);
    frame[..2].copy_from_slice(&[3, 3]);
    until("room for a frame", || ep.send_batch(std::slice::from_ref(&frame)) == 1);
    let want: Vec<Marked> = (1..=3u8).map(|n| (vec![3, n], Some((4, id)))).collect();
    assert_eq!(recv_marked_n(&mut ep, 3), want);
    assert_eq!((timer_runs(&rig.live, "tm", 2), timer_runs(&rig.live, "tm", 3)), (1, 3));
    until("the applet counters published", || {
        rig.live.endpoints()[0].counters.applets.timer_runs == 4
    });
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.applets.tx_runs, c.applets.dropped, c.applets.faults), (2, 2, 0));
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    drop(ep);
    let t = rig.finish();
    assert_eq!(t.extension("tm").map(|e| (e.timers, e.faults)), Some((4, 0)));
}

/// Bulk messages from an extension (extension → host): the client reserves two frames
/// of its buffer area and asks handler 13 (`bulk_reply.c`) for 2,000 bytes at an offset
/// that crosses the frames' boundary; the handler writes them there
/// (`spine_msg_bulk_write`, 256 bytes a call, a probe past the area's end answered
/// -EFAULT) and sends a bulk message referring to them (`spine_msg_send_bulk`): the
/// client receives exactly those bytes in place, marked with handler 13 and the
/// extension's id. A write outside the area fails (-EFAULT) and sends nothing; a
/// reference outside the area is refused on delivery (`bad_desc`, `msg_undelivered`).
#[test]
fn a_handler_sends_a_bulk_message_referring_to_data_it_wrote_into_the_endpoints_area() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "bulk_reply");
    let names: Vec<String> = ["map_lookup_elem", "spine_msg_bulk_write", "spine_msg_send_bulk"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, None, Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id = rig.live.load("bulk", &obj, None, "msgs").unwrap().id;
    until("every worker runs the handler", || rig.live.handlers_settled());
    let view = rig.live.endpoints()[0].clone();
    let area = u64::from(view.frames) * u64::from(view.frame_size);
    let at = ep.reserve_area(2).expect("two free frames");
    let start = at + u64::from(view.frame_size) - 700;
    let request = |off: u64, len: u32, seed: u8| {
        let mut r = off.to_ne_bytes().to_vec();
        r.extend_from_slice(&len.to_ne_bytes());
        r.extend_from_slice(&[seed, 0, 0, 0]);
        r
    };
    let stat = |k: u32| {
        let v = rig.live.map_lookup("bulk", "stats", &k.to_ne_bytes()).unwrap();
        i64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    until("room on the transmit ring", || ep.send_message(13, &request(start, 2000, 5)));
    let got = recv_marked_n(&mut ep, 1);
    let want: Vec<u8> = (0..2000u32).map(|p| (p * 13 + 5) as u8).collect();
    assert_eq!(got, [(want, Some((13, id)))], "the bytes the handler wrote, in place");
    assert_eq!((stat(0), stat(1), stat(2), stat(3)), (1, -14, 0, 0));
    // A write outside the area: -EFAULT, nothing sent.
    until("room on the transmit ring", || ep.send_message(13, &request(area - 100, 300, 1)));
    until("the failed write recorded", || stat(3) == -14);
    // A reference outside the area (sent without writing): refused on delivery.
    until("room on the transmit ring", || ep.send_message(13, &request(area - 10, 11, 0xff)));
    until("the bad reference counted", || rig.live.endpoints()[0].counters.bad_desc == 1);
    assert_eq!(stat(0), 2, "the handler sent it");
    until("the worker's counters", || rig.live.totals().workers[0].msg_undelivered == 1);
    assert_eq!(rig.live.totals().workers[0].msg_delivered, 1);
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_taken, c.msg_unhandled, c.msg_delivered), (3, 0, 1));
    ep.release_area(at, 2);
    drop(ep);
    rig.finish();
}

/// The same bulk messages received by the C client (`clients/c/bulk_recv.c`:
/// `spine_ep_reserve_area`, `spine_ep_recv_marked` with the mark's `bulk` and `addr`):
/// exactly the 2,000 bytes the handler wrote, at the offset it was asked for; a reference
/// past the area's end never arrives (the next message is the answer to the request after
/// it) and is counted `bad_desc`; the library refuses hostile bulk descriptors on a region
/// of the program's own.
#[test]
fn a_c_application_receives_the_bulk_messages_a_handler_sends() {
    let dir = TempDir::new("c-bulk");
    bulk_app(Command::new(c_client(&dir, "bulk_recv")), "the C client");
}

/// The same with the pure-Python client (`clients/python/bulk_recv.py`).
#[test]
fn a_python_application_receives_the_bulk_messages_a_handler_sends() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/bulk_recv.py");
    let mut py = Command::new("python3");
    py.arg(script);
    bulk_app(py, "the Python client");
}

/// Runs `app` (argv: control socket, port, domain) against a rig whose domain `msgs`
/// runs `bulk_reply.c` (handler 13): the app checks what it receives and prints the
/// source it saw, which must be the extension's id; the adapter counts three bulk
/// sends, two delivered and one bad reference refused.
fn bulk_app(mut app: Command, who: &str) {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "bulk_reply");
    let names: Vec<String> = ["map_lookup_elem", "spine_msg_bulk_write", "spine_msg_send_bulk"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, None, Some(domain));
    let id = rig.live.load("bulk", &obj, None, "msgs").unwrap().id;
    until("every worker runs the handler", || rig.live.handlers_settled());
    let out = app
        .args([rig.sock.to_str().unwrap(), "wire", "msgs"])
        .output()
        .unwrap_or_else(|e| panic!("{who}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{who}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("bulk 2000 source {id}")), "{who}: {stdout}");
    // The counters are published a little after the fact: wait for both at once.
    until("the worker's counters: 2 delivered, 1 undelivered", || {
        let w = rig.live.totals().workers[0];
        (w.msg_delivered, w.msg_undelivered) == (2, 1)
    });
    let runs = rig.live.map_lookup("bulk", "stats", &0u32.to_ne_bytes()).unwrap();
    assert_eq!(i64::from_ne_bytes(runs[..8].try_into().unwrap()), 3, "{who}: three sends");
    rig.finish();
}

/// Messages addressed to one named extension: two extensions of one domain (`echo_a`,
/// attached to `wire`, and `echo_b`, loaded afterwards, both `handler.c`) register
/// handler 7. The client asks the endpoint socket for `echo_b`'s id
/// (`spine_client::extension`; an unknown name is refused `no_extension`). A message for
/// handler 7 runs both (two replies, one from each id); one sent with
/// `send_message_to(b)` runs only `echo_b` (one reply, marked with its id; its map counts
/// it, `echo_a`'s does not), the same for `a`; a bulk message to `b` alone is counted by
/// `echo_b` only; an id no
/// extension has, and `b`'s id once `echo_b` is unloaded, reach no handler and are
/// counted `msg_unhandled`, while messages for every extension still reach `echo_a`.
#[test]
fn a_message_addressed_to_one_named_extension_runs_only_its_handler() {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, Some(("echo_a", &obj)), Some(domain));
    let b_id = rig.live.load("echo_b", &obj, None, "msgs").unwrap().id;
    until("every worker runs both handlers", || rig.live.handlers_settled());
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9998) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let a = spine_client::extension(&rig.sock, "echo_a").unwrap();
    let b = spine_client::extension(&rig.sock, "echo_b").unwrap();
    assert_eq!((b.id, b.name.as_str(), b.domain.as_str()), (b_id, "echo_b", "msgs"));
    assert_ne!(a.id, b.id);
    match spine_client::extension(&rig.sock, "nope") {
        Err(OpenError::Refused { kind, .. }) => assert_eq!(kind, "no_extension"),
        other => panic!("an unknown extension named: {other:?}"),
    }
    let count = |ext: &str| {
        let v = rig.live.map_lookup(ext, "counts", &0u32.to_ne_bytes()).unwrap();
        u64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    let sources = |got: &[Marked]| {
        let mut s: Vec<u16> = got.iter().map(|(_, m)| m.unwrap().1).collect();
        s.sort_unstable();
        s
    };
    // Every extension registering handler 7.
    until("room on the transmit ring", || ep.send_message(7, b"all"));
    let got = recv_marked_n(&mut ep, 2);
    assert_eq!(sources(&got), [a.id.min(b.id), a.id.max(b.id)]);
    assert!(got.iter().all(|(d, m)| d == b"ALL" && m.unwrap().0 == 7));
    // Only echo_b, then only echo_a.
    for i in 0..5u8 {
        until("room on the transmit ring", || ep.send_message_to(b.id, 7, &[b'b', i]));
    }
    let got = recv_marked_n(&mut ep, 5);
    assert_eq!(sources(&got), [b.id; 5], "only echo_b answered");
    until("room on the transmit ring", || ep.send_message_to(a.id, 7, b"a"));
    assert_eq!(recv_marked_n(&mut ep, 1), [(b"A".to_vec(), Some((7, a.id)))]);
    assert_eq!((count("echo_a"), count("echo_b")), (2, 6));
    // A bulk message for echo_b alone (handler.c counts it and, its payload being
    // empty, does not reply).
    let at = ep.reserve_area(1).unwrap();
    until("room on the transmit ring", || ep.send_bulk_message_to(b.id, 7, at, 100));
    until("echo_b counted the bulk message", || count("echo_b") == 7);
    assert_eq!(count("echo_a"), 2);
    // An id no extension has: no handler, counted.
    let unhandled = || rig.live.endpoints()[0].counters.msg_unhandled;
    until("room on the transmit ring", || ep.send_message_to(b.id + 100, 7, b"x"));
    until("the message counted unhandled", || unhandled() == 1);
    assert!(!ep.send_message_to(0xffff, 7, b"x"), "id 0xffff cannot be named");
    // echo_b unloaded: its id reaches nothing; messages for all reach echo_a only.
    rig.live.unload("echo_b", false).unwrap();
    until("every worker let echo_b go", || rig.live.handlers_settled());
    until("room on the transmit ring", || ep.send_message_to(b.id, 7, b"y"));
    until("the message counted unhandled", || unhandled() == 2);
    until("room on the transmit ring", || ep.send_message(7, b"z"));
    assert_eq!(recv_marked_n(&mut ep, 1), [(b"Z".to_vec(), Some((7, a.id)))]);
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    assert_eq!(count("echo_a"), 3);
    ep.release_area(at, 1);
    drop(ep);
    rig.finish();
}

/// The same from the C client (`clients/c/msg_to.c`: `spine_ep_extension_id`,
/// `spine_ep_send_message_to`): 3 messages to `echo_a` only, 2 to `echo_b` only, each
/// answered once by the one it was sent to; the maps count 3 and 2.
#[test]
fn a_c_application_addresses_one_named_extension() {
    let dir = TempDir::new("c-msg-to");
    named_app(Command::new(c_client(&dir, "msg_to")), "the C client");
}

/// The same from the Python client (`clients/python/msg_to.py`: `extension`,
/// `send_message(..., ext=id)`).
#[test]
fn a_python_application_addresses_one_named_extension() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/msg_to.py");
    let mut py = Command::new("python3");
    py.arg(script);
    named_app(py, "the Python client");
}

/// Runs `app` (argv: control socket, port, domain, two extension names) against a rig
/// whose domain `msgs` holds `echo_a` and `echo_b`, both `handler.c` (handler 7).
fn named_app(mut app: Command, who: &str) {
    let obj = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(1, Some(("echo_a", &obj)), Some(domain));
    let b = rig.live.load("echo_b", &obj, None, "msgs").unwrap().id;
    until("every worker runs both handlers", || rig.live.handlers_settled());
    let a = rig.live.extensions().iter().find(|e| e.name == "echo_a").unwrap().id;
    let out = app
        .args([rig.sock.to_str().unwrap(), "wire", "msgs", "echo_a", "echo_b"])
        .output()
        .unwrap_or_else(|e| panic!("{who}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{who}: {stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("to {a} {b} replies 5")), "{who}: {stdout}");
    let count = |ext: &str| {
        let v = rig.live.map_lookup(ext, "counts", &0u32.to_ne_bytes()).unwrap();
        u64::from_ne_bytes(v[..8].try_into().unwrap())
    };
    assert_eq!((count("echo_a"), count("echo_b")), (3, 2), "{who}");
    rig.finish();
}

/// Atomic replacement of a handler (`Live::load_replacing`, over the control API
/// `POST /v1/extensions?replaces=`): while a client has 200
/// messages for handler 7 in flight (two workers), v1 (replies XOR 0x20) is replaced by
/// v2 (XOR 0x40) in one publish of the handler table. Every message is answered exactly
/// once, by v1 or by v2, never both and never neither (exactly 200 replies, each one
/// of the two transforms of its message, none unhandled), and once v2 answers, v1 never
/// does again (the replies switch once, in order). Replacing an extension of another
/// domain, or one attached to a port, is refused by kind.
#[test]
fn a_handler_replaced_atomically_answers_every_message_once_by_the_old_or_the_new() {
    let v1 = fixture_in("../spine-runtime/tests/fixtures", "handler");
    let v2 = fixture("handler_v2");
    let names: Vec<String> =
        ["map_lookup_elem", "spine_msg_send"].iter().map(|s| s.to_string()).collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain = DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() };
    let rig = Rig::build(2, None, Some(domain));
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("wire", 9999) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let id1 = rig.live.load("v1", &v1, None, "msgs").unwrap().id;
    until("every worker runs v1", || rig.live.handlers_settled());
    let err = rig.live.load_replacing("v1", "v2", &v2, None, "default").unwrap_err();
    assert_eq!(err.kind(), "refused", "another domain: {err}");
    let msgs: Vec<Vec<u8>> = (0..200u32).map(|i| i.to_be_bytes().to_vec()).collect();
    let mut replies = Vec::new();
    let mut id2 = None;
    for (i, m) in msgs.iter().enumerate() {
        until("room on the transmit ring", || ep.send_message(7, m));
        if i == 100 {
            // Through the control API: `POST /v1/extensions?name=v2&replaces=v1`.
            let mut api = Client::new(&rig.sock);
            id2 = Some(api.load_replacing("v1", "v2", &v2, None, Some("msgs")).unwrap().id);
        }
        ep.recv_marked(64, |d, mark| replies.push((d.to_vec(), mark)));
    }
    until("every reply", || {
        ep.recv_marked(64, |d, mark| replies.push((d.to_vec(), mark)));
        replies.len() >= msgs.len()
    });
    until("every worker runs v2 alone", || rig.live.handlers_settled());
    let id2 = id2.unwrap();
    let xor = |m: &[u8], x: u8| m.iter().map(|b| b ^ x).collect::<Vec<u8>>();
    // One reply per message, in order: the first k from v1, the rest from v2.
    let k = replies.iter().take_while(|(_, mark)| *mark == Some((7, id1))).count();
    let want: Vec<Marked> =
        msgs.iter()
            .enumerate()
            .map(|(i, m)| {
                if i < k {
                    (xor(m, 0x20), Some((7, id1)))
                } else {
                    (xor(m, 0x40), Some((7, id2)))
                }
            })
            .collect();
    assert_eq!(replies, want, "each message answered once, by v1 up to the switch, then v2");
    assert_eq!(ask(&rig.live, &mut ep, b"after"), Some((xor(b"after", 0x40), Some((7, id2)))));
    let c = rig.live.endpoints()[0].counters;
    assert_eq!((c.msg_taken, c.msg_unhandled, c.msg_delivered), (201, 0, 201));
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing more");
    // An extension attached to a port cannot be replaced this way.
    rig.live.load("v3", &v1, None, "msgs").unwrap();
    rig.live.attach("v3", "wire").unwrap();
    let err = rig.live.load_replacing("v3", "v4", &v2, None, "msgs").unwrap_err();
    assert_eq!(err.kind(), "attached", "{err}");
    assert!(rig.live.extensions().iter().all(|e| e.name != "v4"), "nothing loaded");
    drop(ep);
    rig.finish();
}

/// A rig (one worker) with a second port, `tun`, a UDP tunnel on the loopback whose peer
/// is the returned socket: what the test sends there the adapter receives on `tun`, a
/// frame longer than a pool buffer (2,048 bytes, 1,792 after the headroom) as a chain.
/// `tun` has no host path; it runs extension `ext` when given.
fn tunnel_rig(ext: Option<(&str, &[u8])>) -> (Rig, UdpSocket) {
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    let local = "127.0.0.1:0".parse().unwrap();
    let port = UdpPort::open("tun", local, peer.local_addr().unwrap(), 0).unwrap();
    peer.connect(port.local_addr().unwrap()).unwrap();
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(1024), ..Default::default() };
    let rig = Rig::build_more(opts, None, None, |b| {
        let t = b.add_port("tun", Device::Udp(port), None).unwrap();
        if let Some((name, obj)) = ext {
            let e = b.load_extension(name, obj, None, "default", "test").unwrap();
            b.attach(e, t).unwrap();
        }
    });
    (rig, peer)
}

/// Sends `frame` into the adapter's port `tun`.
fn tunnel_send(peer: &UdpSocket, frame: &[u8]) {
    let mut d = TUNNEL_HEADER.to_vec();
    d.extend_from_slice(frame);
    assert_eq!(peer.send(&d).unwrap(), d.len());
}

/// A UDP frame to `dport` of `len` bytes in all, its payload depending on `len`.
fn udp_of_len(dport: u16, len: usize) -> Vec<u8> {
    let payload: Vec<u8> = (0..len - 42).map(|i| (i * 7 + i / 251 + len) as u8).collect();
    udp(dport, &payload)
}

/// Reads `n` frames as their pieces: each frame's (bytes, more-follows) entries.
fn recv_pieces_n(ep: &mut Endpoint, n: usize) -> Vec<Vec<(Vec<u8>, bool)>> {
    let mut frames: Vec<Vec<(Vec<u8>, bool)>> = Vec::new();
    let mut cur = Vec::new();
    until("the endpoint's frames", || {
        ep.recv_pieces(64, |d, mark, more| {
            assert!(mark.is_none(), "a frame, not a message");
            cur.push((d.to_vec(), more));
            if !more {
                frames.push(std::mem::take(&mut cur));
            }
        });
        frames.len() >= n
    });
    assert!(cur.is_empty(), "no frame left half read");
    frames
}

fn counters(rig: &Rig) -> spine_adapter::EndpointCounters {
    rig.live.endpoints()[0].counters
}

/// Multi-buffer frames on an endpoint that asked for them (AF_XDP's `XDP_USE_SG`): a
/// jumbo frame the UDP tunnel port received as a chain of pool buffers, passed with no
/// program, arrives as several receive descriptors, each a whole 2,048-byte area frame
/// but the last, every one but the last marked `CONTD`, and the bytes are the frame's;
/// frames of one area frame or less arrive as before (in one frame, or inline).
/// `recv_frames` gathers a multi-buffer frame. The pool is whole at the end.
#[test]
fn a_jumbo_frame_reaches_a_multi_buffer_endpoint_as_several_descriptors() {
    let (rig, peer) = tunnel_rig(None);
    let chan = Channel { multi_buffer: true, ..Channel::udp4("tun", 7777) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    assert!(rig.live.endpoints()[0].multi_buffer);
    let lens = [9000, 2100, 1500, 60];
    let frames: Vec<Vec<u8>> = lens.iter().map(|&n| udp_of_len(7777, n)).collect();
    for f in &frames {
        tunnel_send(&peer, f);
    }
    let got = recv_pieces_n(&mut ep, 4);
    let shape: Vec<Vec<(usize, bool)>> =
        got.iter().map(|f| f.iter().map(|(d, m)| (d.len(), *m)).collect()).collect();
    let want_shape: Vec<Vec<(usize, bool)>> = vec![
        vec![(2048, true), (2048, true), (2048, true), (2048, true), (808, false)],
        vec![(2048, true), (52, false)],
        vec![(1500, false)],
        vec![(60, false)],
    ];
    assert_eq!(shape, want_shape);
    for (f, want) in got.iter().zip(&frames) {
        let whole: Vec<u8> = f.iter().flat_map(|(d, _)| d.iter().copied()).collect();
        assert!(whole == *want, "the frame's bytes, in order");
    }
    until("the counters published", || counters(&rig).rx_delivered == 4);
    let c = counters(&rig);
    assert_eq!((c.rx_multi_buffer, c.rx_dropped, c.bad_desc), (2, 0, 0));
    // Gathered whole by the client library.
    tunnel_send(&peer, &frames[0]);
    let mut whole = Vec::new();
    until("the gathered frame", || {
        ep.recv_frames(8, |f| whole.push(f.to_vec()));
        !whole.is_empty()
    });
    assert!(whole == vec![frames[0].clone()]);
    drop(ep);
    let t = rig.finish();
    let tun = t.port("tun").unwrap();
    assert_eq!((tun.rx_packets, tun.drops.total()), (5, 0), "{tun:?}");
}

/// An AF_XDP program loaded as `xdp.frags` redirects a jumbo frame into its XSKMAP
/// slot; the endpoint bound there with multi-buffer frames gets it whole, in pieces.
#[test]
fn an_xdp_frags_program_redirects_a_jumbo_frame_to_its_xskmap_endpoint() {
    let obj = fixture("xsk_frags");
    let (rig, peer) = tunnel_rig(Some(("xsk", &obj)));
    let chan = Channel { multi_buffer: true, ..Channel::slot("tun", None, "xsks_map", 0) };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let frames: Vec<Vec<u8>> = [9000, 3000, 200].iter().map(|&n| udp_of_len(6000, n)).collect();
    for f in &frames {
        tunnel_send(&peer, f);
    }
    let got = recv_pieces_n(&mut ep, 3);
    assert_eq!(got.iter().map(Vec::len).collect::<Vec<_>>(), [5, 2, 1]);
    for (f, want) in got.iter().zip(&frames) {
        let whole: Vec<u8> = f.iter().flat_map(|(d, _)| d.iter().copied()).collect();
        assert!(whole == *want);
    }
    drop(ep);
    let t = rig.finish();
    let tun = t.port("tun").unwrap();
    assert_eq!((tun.verdicts.redirect, tun.drops.total()), (3, 0), "{tun:?}");
}

/// All or nothing: an endpoint of 8 frames (4 on the fill ring) whose client does not
/// read. A 9,000-byte frame needs 5 fill frames: dropped and counted, no fill frame
/// taken, nothing posted; a 7,000-byte frame then takes exactly the 4; one more frame
/// finds none. The client reads exactly the 7,000-byte frame, and no pool buffer is lost.
#[test]
fn a_multi_buffer_frame_without_room_for_every_piece_is_dropped_whole() {
    let (rig, peer) = tunnel_rig(None);
    let chan = Channel {
        multi_buffer: true,
        ring_entries: Some(8),
        frames: Some(8),
        ..Channel::udp4("tun", 7777)
    };
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    let big = udp_of_len(7777, 9000);
    let four = udp_of_len(7777, 7000);
    tunnel_send(&peer, &big);
    until("the first frame dropped", || counters(&rig).rx_dropped == 1);
    tunnel_send(&peer, &four);
    until("the second frame delivered", || counters(&rig).rx_delivered == 1);
    tunnel_send(&peer, &udp_of_len(7777, 3000));
    until("the third frame dropped", || counters(&rig).rx_dropped == 2);
    let got = recv_pieces_n(&mut ep, 1);
    assert_eq!(got[0].len(), 4);
    let whole: Vec<u8> = got[0].iter().flat_map(|(d, _)| d.iter().copied()).collect();
    assert!(whole == four);
    assert_eq!(ep.recv(64, |_| {}), 0, "nothing half delivered");
    // Read, its frames are back on the fill ring: a 3-piece frame arrives.
    let three = udp_of_len(7777, 5000);
    tunnel_send(&peer, &three);
    let got = recv_pieces_n(&mut ep, 1);
    let whole: Vec<u8> = got[0].iter().flat_map(|(d, _)| d.iter().copied()).collect();
    assert!(whole == three);
    let c = counters(&rig);
    assert_eq!((c.rx_delivered, c.rx_dropped, c.rx_multi_buffer), (2, 2, 2));
    drop(ep);
    // `finish` counts the pool whole: every buffer of the dropped chains came back.
    let t = rig.finish();
    assert_eq!(t.port("tun").unwrap().rx_packets, 4);
}

/// An endpoint that did not ask for multi-buffer frames gets a chained frame copied
/// into one area frame when it fits (here 4,096-byte frames), unmarked; one longer is
/// dropped and counted, no fill frame used. Multi-buffer needs the frames path.
#[test]
fn an_endpoint_not_opted_in_gets_a_chained_frame_in_one_area_frame_or_not_at_all() {
    let (rig, peer) = tunnel_rig(None);
    let chan = Channel { frame_size: Some(4096), frames: Some(16), ..Channel::udp4("tun", 7777) };
    let bad = Channel { multi_buffer: true, path: Some(DataPath::HeaderCopy), ..chan.clone() };
    assert_eq!(refused(Endpoint::open(&rig.sock, &bad)).0, "bad_size");
    let mut ep = Endpoint::open(&rig.sock, &chan).unwrap();
    rig.served(1);
    assert!(!rig.live.endpoints()[0].multi_buffer);
    let fits = udp_of_len(7777, 4000);
    tunnel_send(&peer, &fits);
    let got = recv_pieces_n(&mut ep, 1);
    assert_eq!(got, vec![vec![(fits, false)]], "one descriptor, the whole frame");
    tunnel_send(&peer, &udp_of_len(7777, 9000));
    until("the long frame dropped", || counters(&rig).rx_dropped == 1);
    let after = udp_of_len(7777, 2500);
    tunnel_send(&peer, &after);
    assert_eq!(recv_pieces_n(&mut ep, 1), vec![vec![(after, false)]]);
    let c = counters(&rig);
    assert_eq!((c.rx_delivered, c.rx_dropped, c.rx_multi_buffer), (2, 1, 0));
    drop(ep);
    rig.finish();
}

/// The Python client (`clients/python/jumbo_recv.py`) reads multi-buffer frames whole.
#[test]
fn a_python_application_reads_multi_buffer_frames_whole() {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/jumbo_recv.py");
    let mut py = Command::new("python3");
    py.arg(script);
    jumbo_app(py, "the Python client");
}

/// The same with the C client (`clients/c/jumbo_recv.c`, `spine_ep_recv_frame`).
#[test]
fn a_c_application_reads_multi_buffer_frames_whole() {
    let dir = TempDir::new("c-client");
    jumbo_app(Command::new(c_client(&dir, "jumbo_recv")), "the C client");
}

fn fnv1a(data: &[u8]) -> u32 {
    data.iter().fold(2_166_136_261u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(16_777_619))
}

/// Runs `app` (argv: control socket, port, UDP port, count) against a tunnel rig: it
/// must open a multi-buffer endpoint for UDP port 7777 on `tun` and print each frame's
/// length and FNV-1a hash, for frames of one to five area frames.
fn jumbo_app(mut app: Command, who: &str) {
    let (rig, peer) = tunnel_rig(None);
    let mut child = app
        .args([rig.sock.to_str().unwrap(), "tun", "7777", "4"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let opened = lines.by_ref().map_while(Result::ok).find(|l| l.starts_with("open "));
    assert!(opened.is_some(), "{who} opened its endpoint");
    rig.served(1);
    assert!(rig.live.endpoints()[0].multi_buffer);
    let frames: Vec<Vec<u8>> =
        [9000, 60, 2100, 1500].iter().map(|&n| udp_of_len(7777, n)).collect();
    for f in &frames {
        tunnel_send(&peer, f);
    }
    let got: Vec<String> =
        lines.map_while(Result::ok).filter(|l| l.starts_with("frame ")).collect();
    let want: Vec<String> =
        frames.iter().map(|f| format!("frame {} {:08x}", f.len(), fnv1a(f))).collect();
    assert_eq!(got, want, "{who} read every frame whole");
    assert!(child.wait().unwrap().success(), "{who} read all 4");
    until("the closed endpoint reclaimed", || rig.live.endpoints().is_empty());
    rig.finish();
}
