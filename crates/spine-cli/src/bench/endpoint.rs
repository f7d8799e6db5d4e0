//! `spine bench endpoint`: round-trip latency of a 64-byte frame through one adapter to
//! an application's endpoint and back, next to kernel UDP sockets on loopback, in one
//! run.
//!
//! The spine path: the bench thread plays the wire of port `wire` (an endpoint port it
//! drives) and sends a 64-byte Ethernet/IPv4/UDP frame into it; the adapter's worker
//! passes it (no extension) and, the tag matching, copies it into the application's
//! endpoint (opened through the endpoint socket with `spine_client::Endpoint::open`);
//! the application, on its own thread, sleeps on the endpoint's eventfd until it is
//! signalled and sends the frame back; the worker takes it and sends it out of `wire`,
//! where the bench thread receives it (polling, yielding its CPU between polls). The
//! worker never sleeps. The kernel references: a 64-byte UDP payload sent between two
//! sockets on 127.0.0.1 and echoed by a thread, once with the receivers busy-polling
//! non-blocking sockets and once blocking in `recv`.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use spine_adapter::{AdapterBuilder, AdapterOptions, Device};
use spine_client::{Channel, Endpoint};
use spine_control::{serve, ServerConfig};
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{EndpointPort, MemPort, PoolConfig};

#[derive(Debug, clap::Args)]
pub struct EndpointArgs {
    /// Round trips measured per path (after 1,000 not measured).
    #[arg(long, default_value_t = 20_000)]
    pub count: usize,
    #[arg(long)]
    pub json: bool,
}

/// A 64-byte Ethernet/IPv4/UDP frame to port 7777, numbered `i`.
fn frame(i: u32) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1]);
    f.extend_from_slice(&[0x13, 0x88, 0x1e, 0x61, 0, 30, 0, 0]);
    f.extend_from_slice(&i.to_le_bytes());
    f.resize(64, 0x5a);
    f
}

/// Median and 99th percentile, in µs, of `ns`.
fn stats(mut ns: Vec<u64>) -> (f64, f64) {
    ns.sort_unstable();
    let at = |p: f64| ns[((ns.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    (at(0.5), at(0.99))
}

const WARMUP: usize = 1_000;

fn spine_path(count: usize) -> Result<Vec<u64>> {
    let opts = AdapterOptions {
        workers: 1,
        idle_sleep_us: 0,
        pool: PoolConfig::new(1024),
        ..Default::default()
    };
    let mut b = AdapterBuilder::new(opts)?;
    let end = AdapterEnd::create(Layout::new(256, 2048, 256)?)?;
    let mut wire = ClientEnd::open(end.shm().fd().try_clone_to_owned()?)?;
    let w =
        b.add_port("wire", Device::Other(Box::new(EndpointPort::new("wire", end, None, 0))), None)?;
    let h = b.add_port("host", Device::Mem { port: MemPort::sink("host"), sink: true }, None)?;
    b.set_host_path(w, h)?;
    let running = b.build()?.start()?;
    let dir = std::env::temp_dir().join(format!("spine-bench-ep-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sock = dir.join("spine.sock");
    let server = serve(running.live(), ServerConfig::new(&sock))?;
    let stop = Arc::new(AtomicBool::new(false));
    let mut ep =
        Endpoint::open(&sock, &Channel::udp4("wire", 7777)).context("opening the endpoint")?;
    let live = running.live();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !live.endpoints().iter().all(|e| e.served) {
        if Instant::now() > deadline {
            bail!("the worker never picked the endpoint up");
        }
        std::thread::yield_now();
    }
    let stop2 = stop.clone();
    let app = std::thread::spawn(move || {
        let mut held: Vec<u8> = Vec::with_capacity(2048);
        while !stop2.load(Ordering::Relaxed) {
            held.clear();
            // Sleeps on the eventfd when nothing is there (the adapter signals it after
            // a round that delivered): on a machine with few cores a third spinning
            // thread would only take the worker's CPU.
            let got = ep.recv_blocking(1, 50, |m| held.extend_from_slice(m)).unwrap_or(0);
            if got == 1 {
                while !ep.send_with(held.len(), |b| b.copy_from_slice(&held)) {
                    std::hint::spin_loop();
                }
            }
        }
    });
    let mut rtts = Vec::with_capacity(count);
    let mut err = None;
    for i in 0..(WARMUP + count) as u32 {
        let f = frame(i);
        let t0 = Instant::now();
        if !wire.send(&f) {
            err = Some("the wire's transmit ring is full");
            break;
        }
        let mut back = false;
        while !back {
            if wire.recv(1, |m| back = m == &f[..]) == 0 {
                std::thread::yield_now();
            }
            if !back && t0.elapsed() > Duration::from_secs(10) {
                err = Some("a frame did not come back within 10 s");
                break;
            }
        }
        if err.is_some() {
            break;
        }
        if i as usize >= WARMUP {
            rtts.push(t0.elapsed().as_nanos() as u64);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = app.join();
    server.stop();
    running.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    if let Some(e) = err {
        bail!("spine path: {e}");
    }
    Ok(rtts)
}

fn kernel_udp(count: usize, busy: bool) -> Result<Vec<u64>> {
    let a = UdpSocket::bind("127.0.0.1:0")?;
    let b = UdpSocket::bind("127.0.0.1:0")?;
    a.connect(b.local_addr()?)?;
    b.connect(a.local_addr()?)?;
    a.set_nonblocking(busy)?;
    b.set_nonblocking(busy)?;
    b.set_read_timeout(if busy { None } else { Some(Duration::from_millis(50)) })?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop2.load(Ordering::Relaxed) {
            if let Ok(n) = b.recv(&mut buf) {
                let _ = b.send(&buf[..n]);
            }
        }
    });
    let mut rtts = Vec::with_capacity(count);
    let mut buf = [0u8; 2048];
    for i in 0..(WARMUP + count) as u32 {
        let msg = frame(i);
        let t0 = Instant::now();
        a.send(&msg)?;
        loop {
            match a.recv(&mut buf) {
                Ok(n) if buf[..n] == msg[..] => break,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => return Err(e.into()),
            }
            if t0.elapsed() > Duration::from_secs(10) {
                bail!("kernel UDP: a message did not come back within 10 s");
            }
        }
        if i as usize >= WARMUP {
            rtts.push(t0.elapsed().as_nanos() as u64);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = echo.join();
    Ok(rtts)
}

pub fn main(args: &EndpointArgs) -> Result<()> {
    if args.count == 0 {
        bail!("--count must be at least 1");
    }
    let machine = super::machine::machine();
    let rows = [
        ("spine endpoint (one adapter, app on eventfd)", spine_path(args.count)?),
        ("kernel UDP loopback, busy-polling", kernel_udp(args.count, true)?),
        ("kernel UDP loopback, blocking", kernel_udp(args.count, false)?),
    ];
    let rows: Vec<(&str, f64, f64)> = rows
        .into_iter()
        .map(|(n, r)| {
            let (m, p) = stats(r);
            (n, m, p)
        })
        .collect();
    let (spine_med, kernel_med) = (rows[0].1, rows[1].1);
    if args.json {
        let out = serde_json::json!({
            "machine": machine,
            "bytes": 64,
            "round_trips": args.count,
            "paths": rows.iter().map(|(n, m, p)| serde_json::json!({
                "path": n, "median_us": m, "p99_us": p,
            })).collect::<Vec<_>>(),
            "spine_over_kernel_busy_median": spine_med / kernel_med,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", super::machine::line(&machine));
        println!("64-byte round trips, {} each (after {WARMUP} not measured):", args.count);
        for (n, m, p) in &rows {
            println!("  {n:<45} median {m:>8.2} µs   p99 {p:>8.2} µs");
        }
        println!("  spine / kernel busy-polling, median: {:.2}", spine_med / kernel_med);
    }
    Ok(())
}
