//! `spine bench endpoint`: round-trip latency and streaming throughput of UDP messages
//! through one adapter to an application's endpoint and back, against message size,
//! next to kernel UDP sockets on loopback, in one run.
//!
//! The spine path: the bench thread plays the wire of port `wire` (an endpoint port it
//! drives) and sends an Ethernet/IPv4/UDP frame carrying the message into it; the
//! adapter's worker passes it (no extension) and, the tag matching, copies it into the
//! application's endpoint (opened through the endpoint socket with
//! `spine_client::Endpoint::open`); the application, on its own thread, sleeps on the
//! endpoint's eventfd until it is signalled and sends the frame back; the worker takes it
//! and sends it out of `wire`, where the bench thread receives it (polling, yielding its
//! CPU between polls). The worker never sleeps. The kernel references: the same message
//! as a UDP payload between two sockets on 127.0.0.1, echoed by a thread, once with the
//! receivers busy-polling non-blocking sockets and once blocking in `recv`. Then the
//! same across two adapters joined by a UDP tunnel on loopback: the bench thread is an
//! application with an endpoint on adapter A, the echoing one has its endpoint on
//! adapter B (each adapter one worker; on a machine with fewer than four cores the two
//! workers sleep 20 µs when idle, see [`tunnel_idle_sleep_us`]). Then across two
//! adapters joined by a veth pair in a namespace the bench makes and removes, each with
//! an AF_XDP port on one end (copy mode), and, as that wire's reference, two AF_XDP
//! sockets on the same pair driven directly by the bench thread and a busy-polling echo
//! thread (no adapter). The veth paths need root; without it they are left out, saying
//! why. The veth's MTU is [`VETH_MTU`] (native XDP on veth without multi-buffer frames),
//! so larger messages are not carried there.
//!
//! Per size: the round trips' median and 99th percentile (one message in flight), and
//! the echo throughput with up to [`WINDOW`] messages in flight (fewer above 2 KiB, see
//! [`window`]; messages per second and payload Gbit/s one way). A message travels in one frame of the endpoint (at most
//! 4,096 bytes with its 42 bytes of headers); larger sizes are measured on the kernel
//! paths only and reported as not carried by spine (bulk messages are not built yet).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use spine_adapter::{AdapterBuilder, AdapterOptions, Device};
use spine_client::{Channel, Endpoint};
use spine_control::{serve, ServerConfig};
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{
    AfXdpConfig, AfXdpPort, Burst, EndpointPort, MemPort, Pool, PoolCache, PoolConfig, Port as _,
    UdpPort,
};

#[derive(Debug, clap::Args)]
pub struct EndpointArgs {
    /// Round trips measured per path (after 1,000 not measured).
    #[arg(long, default_value_t = 20_000)]
    pub count: usize,
    /// UDP payload sizes in bytes (each 16..=65,000).
    #[arg(long, value_delimiter = ',', default_value = "16,64,256,1024,1472,4000,8192")]
    pub sizes: Vec<usize>,
    #[arg(long)]
    pub json: bool,
    /// Also write `endpoint.json` and `endpoint.svg` (median round trip per size) here.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
}

/// Ethernet, IPv4 and UDP headers in front of each message on the spine path.
const HEADERS: usize = 42;
/// The largest frame an endpoint carries (the endpoint socket's frame-size limit).
const MAX_FRAME: usize = 4096;
/// Most messages in flight in the throughput runs.
pub const WINDOW: usize = 32;

/// Messages in flight at `size`: [`WINDOW`], fewer for large messages so that what is in
/// flight (64 KiB at most) fits a loopback socket's default receive buffer, where the
/// kernel path would otherwise drop them.
fn window(size: usize) -> usize {
    (65_536 / size).clamp(1, WINDOW)
}

/// A message of `size` bytes numbered `i` (its first four bytes).
fn message(i: u32, size: usize) -> Vec<u8> {
    let mut m = i.to_le_bytes().to_vec();
    m.resize(size, 0x5a);
    m
}

/// An Ethernet/IPv4/UDP frame to port 7777 carrying message `i` of `size` bytes.
fn frame(i: u32, size: usize) -> Vec<u8> {
    let (ip_len, udp_len) = ((size + 28) as u16, (size + 8) as u16);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f.extend_from_slice(&[0x13, 0x88, 0x1e, 0x61, 0, 0, 0, 0]);
    f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&message(i, size));
    f
}

/// What one path measured at one size.
struct Measured {
    rtts: Vec<u64>,
    /// Messages echoed per second with [`window`] in flight.
    msgs_per_s: f64,
}

/// Streams `count` messages with up to `window` in flight through `send`/`recv`
/// (`recv` returns how many of ours came back); messages echoed per second.
fn stream(
    count: usize,
    window: usize,
    mut send: impl FnMut(u32) -> Result<bool>,
    mut recv: impl FnMut() -> Result<usize>,
) -> Result<f64> {
    let (mut sent, mut back) = (0usize, 0usize);
    let t0 = Instant::now();
    let mut last = Instant::now();
    while back < count {
        while sent < count && sent - back < window && send(sent as u32)? {
            sent += 1;
        }
        let n = recv()?;
        if n > 0 {
            back += n;
            last = Instant::now();
        } else if last.elapsed() > Duration::from_secs(10) {
            bail!("{} of {count} messages did not come back within 10 s", count - back);
        } else {
            std::thread::yield_now();
        }
    }
    Ok(count as f64 / t0.elapsed().as_secs_f64())
}

/// Median and 99th percentile, in µs, of `ns`.
fn stats(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    let at = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    (at(0.5), at(0.99))
}

const WARMUP: usize = 1_000;

/// One side of a measured path: sends a frame (false: no room now) and receives up to
/// `max` frames, passing each to the callback (how many).
trait Wire {
    fn send(&mut self, f: &[u8]) -> bool;
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize;
}

impl Wire for ClientEnd {
    fn send(&mut self, f: &[u8]) -> bool {
        ClientEnd::send(self, f)
    }
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        ClientEnd::recv(self, max, f)
    }
}

impl Wire for Endpoint {
    fn send(&mut self, f: &[u8]) -> bool {
        self.send_with(f.len(), |b| b.copy_from_slice(f))
    }
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        Endpoint::recv(self, max, f)
    }
}

/// Round trips and streaming throughput of frames through `wire` at every size (`None`
/// for sizes whose frame is longer than `max_frame`, what the path carries).
fn measure(
    what: &str,
    wire: &mut dyn Wire,
    sizes: &[usize],
    count: usize,
    max_frame: usize,
) -> Result<Vec<Option<Measured>>> {
    let mut out = Vec::new();
    for &size in sizes {
        if size + HEADERS > max_frame {
            out.push(None);
            continue;
        }
        let mut rtts = Vec::with_capacity(count);
        for i in 0..(WARMUP + count) as u32 {
            let f = frame(i, size);
            let t0 = Instant::now();
            if !wire.send(&f) {
                bail!("{what}: the transmit ring is full");
            }
            let mut back = false;
            while !back {
                if wire.recv(1, &mut |m| back = m == &f[..]) == 0 {
                    std::thread::yield_now();
                }
                if !back && t0.elapsed() > Duration::from_secs(10) {
                    bail!("{what}: a {size}-byte message did not come back within 10 s");
                }
            }
            if i as usize >= WARMUP {
                rtts.push(t0.elapsed().as_nanos() as u64);
            }
        }
        let f = frame(0, size);
        let wire = std::cell::RefCell::new(&mut *wire);
        let msgs_per_s = stream(
            count,
            window(size),
            |_| Ok(wire.borrow_mut().send(&f)),
            || Ok(wire.borrow_mut().recv(WINDOW, &mut |_| {})),
        )
        .context(what.to_string())?;
        out.push(Some(Measured { rtts, msgs_per_s }));
    }
    Ok(out)
}

/// An adapter of one worker that never sleeps, serving its control socket in `dir`.
struct Served {
    running: Option<spine_adapter::Running>,
    server: Option<spine_control::Server>,
    sock: std::path::PathBuf,
}

impl Served {
    fn start(b: AdapterBuilder, dir: &std::path::Path, name: &str) -> Result<Served> {
        let running = b.build()?.start()?;
        let sock = dir.join(format!("{name}.sock"));
        let server = serve(running.live(), ServerConfig::new(&sock))?;
        Ok(Served { running: Some(running), server: Some(server), sock })
    }

    /// Opens an endpoint for UDP port 7777 on `port` and waits for the worker to serve it.
    fn endpoint(&self, port: &str) -> Result<Endpoint> {
        let channel = Channel { frame_size: Some(MAX_FRAME as u32), ..Channel::udp4(port, 7777) };
        let ep = Endpoint::open(&self.sock, &channel).context("opening the endpoint")?;
        let live = self.running.as_ref().expect("running").live();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !live.endpoints().iter().all(|e| e.served) {
            if Instant::now() > deadline {
                bail!("the worker never picked the endpoint up");
            }
            std::thread::yield_now();
        }
        Ok(ep)
    }

    fn stop(mut self) -> Result<()> {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        if let Some(r) = self.running.take() {
            r.stop()?;
        }
        Ok(())
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
        }
        if let Some(r) = self.running.take() {
            let _ = r.stop();
        }
    }
}

/// An adapter of one worker; `idle_sleep_us` 0: it never sleeps.
fn builder(idle_sleep_us: u64) -> Result<AdapterBuilder> {
    builder_of(idle_sleep_us, 8192)
}

/// The same with pool buffers of `buf_size` bytes (AF_XDP takes 2,048 or 4,096).
fn builder_of(idle_sleep_us: u64, buf_size: u32) -> Result<AdapterBuilder> {
    let mut pool = PoolConfig::new(1024);
    pool.buf_size = buf_size;
    let opts = AdapterOptions { workers: 1, idle_sleep_us, pool, ..Default::default() };
    Ok(AdapterBuilder::new(opts)?)
}

/// The application: echoes every message of its endpoint, sleeping on the eventfd when
/// nothing is there (the adapter signals it after a round that delivered): on a machine
/// with few cores another spinning thread would only take the workers' CPU.
fn echo_app(mut ep: Endpoint, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut held: Vec<Vec<u8>> = Vec::with_capacity(WINDOW);
        while !stop.load(Ordering::Relaxed) {
            held.clear();
            let got = ep.recv_blocking(WINDOW, 50, |m| held.push(m.to_vec())).unwrap_or(0);
            for m in &held[..got] {
                while !Wire::send(&mut ep, m) {
                    std::hint::spin_loop();
                }
            }
        }
    })
}

/// A temporary folder for the control sockets, removed when dropped.
struct SockDir(std::path::PathBuf);

impl SockDir {
    fn new(tag: &str) -> Result<SockDir> {
        let d = std::env::temp_dir().join(format!("spine-bench-ep-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d)?;
        Ok(SockDir(d))
    }
}

impl Drop for SockDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The bench thread plays the wire of port `wire`; the application's endpoint on the
/// same adapter echoes.
fn spine_path(sizes: &[usize], count: usize) -> Result<Vec<Option<Measured>>> {
    let dir = SockDir::new("one")?;
    let mut b = builder(0)?;
    let end = AdapterEnd::create(Layout::new(256, MAX_FRAME as u32, 256)?)?;
    let mut wire = ClientEnd::open(end.shm().fd().try_clone_to_owned()?)?;
    let w =
        b.add_port("wire", Device::Other(Box::new(EndpointPort::new("wire", end, None, 0))), None)?;
    let h = b.add_port("host", Device::Mem { port: MemPort::sink("host"), sink: true }, None)?;
    b.set_host_path(w, h)?;
    let adapter = Served::start(b, &dir.0, "one")?;
    let stop = Arc::new(AtomicBool::new(false));
    let app = echo_app(adapter.endpoint("wire")?, stop.clone());
    let out = measure("spine path", &mut wire, sizes, count, MAX_FRAME);
    stop.store(true, Ordering::Relaxed);
    let _ = app.join();
    adapter.stop()?;
    out
}

/// The tunnel path's workers sleep this long when a round found nothing, on machines
/// with fewer than four cores: two workers that never sleep would hold both CPUs of a
/// two-core machine, and the applications would run only when the scheduler preempts
/// them (round trips of a scheduler tick, ~4 ms, measured so).
fn tunnel_idle_sleep_us() -> u64 {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if cores < 4 {
        20
    } else {
        0
    }
}

/// Two adapters joined by a UDP tunnel on loopback: the bench thread is an application
/// with an endpoint on adapter A's tunnel port; the echoing application's endpoint is on
/// adapter B's. A frame crosses A, the tunnel, B, and back.
fn tunnel_path(sizes: &[usize], count: usize) -> Result<Vec<Option<Measured>>> {
    let dir = SockDir::new("two")?;
    let any: std::net::SocketAddr = "127.0.0.1:0".parse()?;
    // Bound first to learn the ports, then connected each to the other.
    let (pa, pb) = (UdpSocket::bind(any)?, UdpSocket::bind(any)?);
    let (la, lb) = (pa.local_addr()?, pb.local_addr()?);
    drop((pa, pb));
    let idle = tunnel_idle_sleep_us();
    let side = |name: &str, local, peer| -> Result<Served> {
        let mut b = builder(idle)?;
        let t = b.add_port("tun", Device::Udp(UdpPort::open("tun", local, peer, 0)?), None)?;
        let h =
            b.add_port("host", Device::Mem { port: MemPort::sink("host"), sink: true }, None)?;
        b.set_host_path(t, h)?;
        Served::start(b, &dir.0, name)
    };
    let a = side("a", la, lb)?;
    let b = side("b", lb, la)?;
    let stop = Arc::new(AtomicBool::new(false));
    let app = echo_app(b.endpoint("tun")?, stop.clone());
    let mut mine = a.endpoint("tun")?;
    let out = measure("two adapters over a tunnel", &mut mine, sizes, count, MAX_FRAME);
    stop.store(true, Ordering::Relaxed);
    let _ = app.join();
    drop(mine);
    a.stop()?;
    b.stop()?;
    out
}

/// The veth pair's MTU: as large as native XDP on veth allows without multi-buffer
/// frames (a page less the headroom and the shared info).
const VETH_MTU: usize = 3500;
/// The largest frame the veth paths carry.
const VETH_FRAME: usize = VETH_MTU + 14;

/// A network namespace of this run holding one veth pair, `va` and `vb`, IPv6 off;
/// deleted when dropped (also on errors).
struct VethNs(String);

impl VethNs {
    fn new() -> Result<VethNs> {
        let ns = VethNs(format!("spine-be{}", std::process::id()));
        ip(&["netns", "add", &ns.0])?;
        for key in ["all", "default"] {
            let set = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            ip(&["netns", "exec", &ns.0, "sysctl", "-qw", &set])?;
        }
        let mtu = VETH_MTU.to_string();
        ip(&["-n", &ns.0, "link", "add", "va", "mtu", &mtu, "type", "veth", "peer", "name", "vb"])?;
        ip(&["-n", &ns.0, "link", "set", "vb", "mtu", &mtu])?;
        ip(&["-n", &ns.0, "link", "set", "va", "up"])?;
        ip(&["-n", &ns.0, "link", "set", "vb", "up"])?;
        Ok(ns)
    }

    /// Runs `f` on a thread inside the namespace: what it opens there (sockets bound to
    /// the pair, XDP attachments) keeps working from any thread afterwards.
    fn enter<T: Send>(&self, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
        std::thread::scope(|s| {
            s.spawn(|| {
                spine_sys::enter_netns(&self.0).context("entering the bench's namespace")?;
                f()
            })
            .join()
            .unwrap_or_else(|_| bail!("a thread in the bench's namespace panicked"))
        })
    }
}

impl Drop for VethNs {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.0]);
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = std::process::Command::new("ip").args(args).output().context("running ip")?;
    if !out.status.success() {
        bail!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Two adapters joined by a veth pair in a namespace of their own, each with an AF_XDP
/// port on one end (copy mode: veth has no zero-copy): the bench thread is an
/// application with an endpoint on adapter A, the echoing one has its endpoint on
/// adapter B.
fn veth_path(ns: &VethNs, sizes: &[usize], count: usize) -> Result<Vec<Option<Measured>>> {
    let dir = SockDir::new("veth")?;
    let idle = tunnel_idle_sleep_us();
    let side = |name: &str, ifname: &str| -> Result<Served> {
        let mut b = builder_of(idle, 4096)?;
        let cfg = AfXdpConfig::new(ifname);
        let port = ns.enter(|| Ok(AfXdpPort::open(cfg, b.cache())?))?;
        let w = b.add_port("wire", Device::AfXdp(port), None)?;
        let h =
            b.add_port("host", Device::Mem { port: MemPort::sink("host"), sink: true }, None)?;
        b.set_host_path(w, h)?;
        Served::start(b, &dir.0, name)
    };
    let a = side("a", "va")?;
    let b = side("b", "vb")?;
    let stop = Arc::new(AtomicBool::new(false));
    let app = echo_app(b.endpoint("wire")?, stop.clone());
    let mut mine = a.endpoint("wire")?;
    let out = measure("two adapters over a veth pair", &mut mine, sizes, count, VETH_FRAME);
    stop.store(true, Ordering::Relaxed);
    let _ = app.join();
    drop(mine);
    a.stop()?;
    b.stop()?;
    out
}

/// An AF_XDP socket of its own pool, driven directly: the reference for the veth path.
struct XskWire {
    port: AfXdpPort,
    cache: PoolCache,
    rx: Burst,
    tx: Burst,
}

impl XskWire {
    fn open(ns: &VethNs, ifname: &str) -> Result<XskWire> {
        let mut pool = PoolConfig::new(2048);
        pool.buf_size = 4096;
        let mut cache = Pool::new(pool)?.cache();
        let port = ns.enter(|| Ok(AfXdpPort::open(AfXdpConfig::new(ifname), &mut cache)?))?;
        Ok(XskWire { port, cache, rx: Burst::with_capacity(WINDOW), tx: Burst::with_capacity(1) })
    }
}

impl Wire for XskWire {
    fn send(&mut self, f: &[u8]) -> bool {
        let Some(mut b) = self.cache.alloc() else { return false };
        let pool = self.cache.pool().clone();
        if pool.write(&mut b, f).is_err() || self.tx.push(b).is_err() {
            return false;
        }
        let sent = self.port.tx_burst(&mut self.cache, &mut self.tx).unwrap_or(0) == 1;
        // A buffer the queue did not take goes back to the pool: the caller retries.
        let _ = self.cache.free_burst(&mut self.tx);
        let _ = self.port.flush(&mut self.cache);
        sent
    }
    fn recv(&mut self, max: usize, f: &mut dyn FnMut(&[u8])) -> usize {
        let room = max.min(self.rx.capacity());
        let mut n = 0;
        if self.port.rx_burst(&mut self.cache, &mut self.rx).is_ok() {
            let pool = self.cache.pool().clone();
            for b in self.rx.iter().take(room) {
                if let Ok(d) = pool.data(b) {
                    f(d);
                    n += 1;
                }
            }
        }
        let _ = self.cache.free_burst(&mut self.rx);
        let _ = self.port.flush(&mut self.cache);
        n
    }
}

/// The reference: the same frames between two AF_XDP sockets on the same veth pair, no
/// adapter; the echoing side busy-polls (an AF_XDP socket's owner polls its rings).
fn xsk_path(ns: &VethNs, sizes: &[usize], count: usize) -> Result<Vec<Option<Measured>>> {
    let mut mine = XskWire::open(ns, "va")?;
    let mut peer = XskWire::open(ns, "vb")?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut held: Vec<Vec<u8>> = Vec::with_capacity(WINDOW);
        while !stop2.load(Ordering::Relaxed) {
            held.clear();
            if peer.recv(WINDOW, &mut |m| held.push(m.to_vec())) == 0 {
                std::thread::yield_now();
            }
            for m in &held {
                while !peer.send(m) && !stop2.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            }
        }
    });
    let out = measure("AF_XDP over a veth pair", &mut mine, sizes, count, VETH_FRAME);
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    out
}

fn kernel_udp(sizes: &[usize], count: usize, busy: bool) -> Result<Vec<Measured>> {
    let a = UdpSocket::bind("127.0.0.1:0")?;
    let b = UdpSocket::bind("127.0.0.1:0")?;
    a.connect(b.local_addr()?)?;
    b.connect(a.local_addr()?)?;
    a.set_nonblocking(busy)?;
    b.set_nonblocking(busy)?;
    let wait = if busy { None } else { Some(Duration::from_millis(50)) };
    a.set_read_timeout(wait)?;
    b.set_read_timeout(wait)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = vec![0u8; 65_536];
        while !stop2.load(Ordering::Relaxed) {
            if let Ok(n) = b.recv(&mut buf) {
                let _ = b.send(&buf[..n]);
            }
        }
    });
    let idle = |e: &std::io::Error| {
        matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
    };
    let run = || -> Result<Vec<Measured>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65_536];
        for &size in sizes {
            let mut rtts = Vec::with_capacity(count);
            for i in 0..(WARMUP + count) as u32 {
                let msg = message(i, size);
                let t0 = Instant::now();
                a.send(&msg)?;
                loop {
                    match a.recv(&mut buf) {
                        Ok(n) if buf[..n] == msg[..] => break,
                        Ok(_) => {}
                        Err(e) if idle(&e) => std::hint::spin_loop(),
                        Err(e) => return Err(e.into()),
                    }
                    if t0.elapsed() > Duration::from_secs(10) {
                        bail!("kernel UDP: a {size}-byte message did not come back within 10 s");
                    }
                }
                if i as usize >= WARMUP {
                    rtts.push(t0.elapsed().as_nanos() as u64);
                }
            }
            let msg = message(0, size);
            let sock = &a;
            let mut rbuf = vec![0u8; 65_536];
            let msgs_per_s = stream(
                count,
                window(size),
                |_| match sock.send(&msg) {
                    Ok(_) => Ok(true),
                    Err(e) if idle(&e) => Ok(false),
                    Err(e) => Err(e.into()),
                },
                || match sock.recv(&mut rbuf) {
                    Ok(_) => Ok(1),
                    Err(e) if idle(&e) => Ok(0),
                    Err(e) => Err(e.into()),
                },
            )
            .context("kernel UDP")?;
            out.push(Measured { rtts, msgs_per_s });
        }
        Ok(out)
    };
    let out = run();
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    out
}

/// One path's figures at one size, as printed and written.
#[derive(serde::Serialize)]
struct Row {
    path: &'static str,
    bytes: usize,
    median_us: f64,
    p99_us: f64,
    msgs_per_s: f64,
    /// Payload bits per second, one way.
    gbit_s: f64,
}

pub fn main(args: &EndpointArgs) -> Result<()> {
    if args.count == 0 {
        bail!("--count must be at least 1");
    }
    if let Some(s) = args.sizes.iter().find(|s| !(16..=65_000).contains(*s)) {
        bail!("--sizes: {s} is outside 16..=65000");
    }
    let machine = super::machine::machine();
    let some = |v: Vec<Measured>| v.into_iter().map(Some).collect();
    let mut paths: Vec<(&'static str, Vec<Option<Measured>>)> = vec![
        (paths_name(0), spine_path(&args.sizes, args.count)?),
        (paths_name(1), some(kernel_udp(&args.sizes, args.count, true)?)),
        (paths_name(2), some(kernel_udp(&args.sizes, args.count, false)?)),
        (paths_name(3), tunnel_path(&args.sizes, args.count)?),
    ];
    // The veth paths need root (a namespace, XDP, AF_XDP): without it they are left out,
    // saying why.
    let mut not_measured = Vec::new();
    match VethNs::new() {
        Ok(ns) => {
            paths.push((paths_name(4), veth_path(&ns, &args.sizes, args.count)?));
            paths.push((paths_name(5), xsk_path(&ns, &args.sizes, args.count)?));
        }
        Err(e) => not_measured.push(format!("the veth paths: {e:#}")),
    }
    let paths_count = paths.len();
    let mut rows = Vec::new();
    for (path, per_size) in paths {
        for (m, &bytes) in per_size.into_iter().zip(&args.sizes) {
            let Some(m) = m else { continue };
            let (median_us, p99_us) = stats(m.rtts);
            let gbit_s = m.msgs_per_s * bytes as f64 * 8.0 / 1e9;
            rows.push(Row { path, bytes, median_us, p99_us, msgs_per_s: m.msgs_per_s, gbit_s });
        }
    }
    // spine / kernel busy-polling per size, where spine carries the size.
    let find = |path: &str, b: usize| rows.iter().find(|r| r.path == path && r.bytes == b);
    let ratios: Vec<serde_json::Value> = args
        .sizes
        .iter()
        .filter_map(|&b| {
            let (s, k) = (find(paths_name(0), b)?, find(paths_name(1), b)?);
            let t = find(paths_name(3), b)?;
            // Two adapters over veth / AF_XDP sockets on the same veth, where measured.
            let veth = find(paths_name(4), b)
                .zip(find(paths_name(5), b))
                .map(|(v, x)| (v.median_us / x.median_us, v.msgs_per_s / x.msgs_per_s));
            Some(serde_json::json!({
                "bytes": b,
                "median_ratio": s.median_us / k.median_us,
                "throughput_ratio": s.msgs_per_s / k.msgs_per_s,
                "tunnel_median_ratio": t.median_us / k.median_us,
                "veth_over_af_xdp_median_ratio": veth.map(|v| v.0),
                "veth_over_af_xdp_throughput_ratio": veth.map(|v| v.1),
            }))
        })
        .collect();
    let not_carried: Vec<usize> =
        args.sizes.iter().copied().filter(|b| b + HEADERS > MAX_FRAME).collect();
    let out = serde_json::json!({
        "machine": machine,
        "round_trips": args.count,
        "window": WINDOW,
        "rows": rows,
        "spine_over_kernel_busy": ratios,
        "not_carried_by_spine": not_carried,
        "tunnel_idle_sleep_us": tunnel_idle_sleep_us(),
        "veth_mtu": VETH_MTU,
        "not_measured": not_measured,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", super::machine::line(&machine));
        println!(
            "UDP messages, {} round trips per size (after {WARMUP} not measured), then {} \
             streamed with up to {WINDOW} in flight (64 KiB at most):",
            args.count, args.count
        );
        for r in &rows {
            println!(
                "  {:<45} {:>5} B  median {:>8.2} µs  p99 {:>9.2} µs  {:>10.0} msg/s  {:>6.2} Gbit/s",
                r.path, r.bytes, r.median_us, r.p99_us, r.msgs_per_s, r.gbit_s
            );
        }
        for r in &ratios {
            println!(
                "  spine / kernel busy-polling at {:>5} B: median {:.2}, throughput {:.2}",
                r["bytes"],
                r["median_ratio"].as_f64().unwrap_or(0.0),
                r["throughput_ratio"].as_f64().unwrap_or(0.0)
            );
            if let Some(m) = r["veth_over_af_xdp_median_ratio"].as_f64() {
                println!(
                    "  two adapters over veth / AF_XDP sockets on it at {:>5} B: median {m:.2}, throughput {:.2}",
                    r["bytes"],
                    r["veth_over_af_xdp_throughput_ratio"].as_f64().unwrap_or(0.0)
                );
            }
        }
        for why in &not_measured {
            println!("  not measured: {why}");
        }
        if tunnel_idle_sleep_us() > 0 {
            println!(
                "  (two adapters: fewer than 4 cores here, so their workers sleep {} µs when idle)",
                tunnel_idle_sleep_us()
            );
        }
        for b in &not_carried {
            println!("  {b} B: not carried by spine (one endpoint frame holds at most {MAX_FRAME} B; bulk messages are not built)");
        }
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("endpoint.json"), serde_json::to_string_pretty(&out)?)?;
        let labels: Vec<String> = args.sizes.iter().map(|b| format!("{b} B")).collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let series: Vec<(&str, Vec<f64>)> = (0..paths_count)
            .map(|p| {
                let name = paths_name(p);
                let v = args.sizes.iter().map(|&b| find(name, b).map_or(0.0, |r| r.median_us));
                (name, v.collect())
            })
            .collect();
        let plot = super::svg::bars("median round trip, µs (log scale)", &labels, &series, true);
        std::fs::write(dir.join("endpoint.svg"), plot)?;
    }
    Ok(())
}

/// The paths' names, in the order measured.
fn paths_name(i: usize) -> &'static str {
    [
        "spine endpoint (one adapter, app on eventfd)",
        "kernel UDP loopback, busy-polling",
        "kernel UDP loopback, blocking",
        "spine, two adapters over a UDP tunnel",
        "spine, two adapters over a veth pair (AF_XDP)",
        "AF_XDP sockets over the same veth, busy-polling",
    ][i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_the_message_with_consistent_lengths() {
        for size in [16, 64, 1472, MAX_FRAME - HEADERS] {
            let f = frame(7, size);
            assert_eq!(f.len(), HEADERS + size);
            assert_eq!(usize::from(u16::from_be_bytes([f[16], f[17]])), size + 28, "IPv4 length");
            assert_eq!(usize::from(u16::from_be_bytes([f[38], f[39]])), size + 8, "UDP length");
            assert_eq!(f[HEADERS..], message(7, size)[..]);
            assert_eq!(u16::from_be_bytes([f[36], f[37]]), 7777, "the endpoint's tag");
        }
    }

    #[test]
    fn large_messages_have_a_smaller_window() {
        assert_eq!((window(16), window(1472), window(4000), window(8192)), (32, 32, 16, 8));
        assert_eq!(window(65_000), 1);
    }
}
