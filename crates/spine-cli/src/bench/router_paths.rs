//! `spine bench router-paths`: the host router's four data paths side by side (the
//! peer-DMA host-router study's comparison). IPv4/UDP frames of one size, half to
//! 10.1/16 (out of port b) and half to 10.2/16 (out of c), replayed on mem port a as
//! fast as the adapter takes them, through one worker; forwarded by the bundled router
//! over a FIB (`offload`), or by the host application (`spine-router-host`'s
//! [`Router`], on its own thread, over endpoints) copying whole frames (`copy`),
//! headers only (`header-copy`) or rewriting frames in the endpoint's area
//! (`in-place`). For each path and size: frames forwarded per second (out of b and c)
//! and the host application's CPU time per forwarded frame (its thread's
//! `CLOCK_THREAD_CPUTIME_ID`; it sleeps 20 µs after a visit that found nothing, so a
//! host that keeps up is charged little for waiting, and one that does not (the
//! endpoint drops frames: `dropped_per_forwarded` above 0) never sleeps). Ratios are to offload in the same run. Writes JSON and an SVG in the
//! shape of the study's figure 5 (throughput against packet size, one line per path),
//! with the host CPU per packet beside it.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use spine_adapter::{AdapterBuilder, AdapterOptions, Assign, Device};
use spine_control::{serve, ServerConfig};
use spine_fib::{FibOp, FibWriter, Neigh, NextHop, NudState, Route};
use spine_ports::{MemPort, PoolConfig};
use spine_router_host::{thread_cpu_ns, PathKind, Router, RouterConfig};
use spine_runtime::fib_lookup::{FibEnv, Iface};

use super::progress;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
const NEXT_B: [u8; 6] = [2, 0, 0, 0, 1, 0x0b];
const NEXT_C: [u8; 6] = [2, 0, 0, 0, 1, 0x0c];
const SIZES: [usize; 6] = [64, 128, 256, 512, 1024, 1500];

const HOST_TABLE: &str = r#"
path = "copy"
ports = ["a", "b", "c"]
ring_entries = 1024
frames = 2048
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

#[derive(Debug, clap::Args)]
pub struct RouterPathsArgs {
    /// Seconds each path runs at each size.
    #[arg(long, default_value_t = 0.5)]
    pub seconds: f64,
    /// Frame sizes (bytes, Ethernet header included; 64..=1514).
    #[arg(long, value_delimiter = ',', default_values_t = SIZES)]
    pub sizes: Vec<usize>,
    #[arg(long)]
    pub json: bool,
    /// Also write bench-router-paths.json and bench-router-paths.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("a literal address")
}

fn fib() -> Result<FibEnv> {
    let (mut w, r) = FibWriter::new();
    let route = |p: &str, nh: Vec<NextHop>| -> Result<Route> { Ok(Route::unicast(p.parse()?, nh)) };
    w.add(route("10.1.0.0/16", vec![NextHop::via(ip("192.0.2.1"), 11)])?)?;
    w.add(route("10.2.0.0/16", vec![NextHop::via(ip("198.51.100.1"), 12)])?)?;
    for (ifindex, a, mac) in [(11, "192.0.2.1", NEXT_B), (12, "198.51.100.1", NEXT_C)] {
        let neigh = Neigh { mac, state: NudState::PERMANENT };
        w.apply(FibOp::SetNeigh { ifindex, ip: ip(a), neigh })?;
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
    Ok(FibEnv::new(
        r,
        vec![
            iface(10, MAC_A, "10.0.0.1"),
            iface(11, MAC_B, "192.0.2.7"),
            iface(12, MAC_C, "198.51.100.7"),
        ],
    ))
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(c[1])).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// 64 frames of `len` bytes, alternating between the two routes.
fn frames(len: usize) -> Vec<Vec<u8>> {
    (0..64u16)
        .map(|i| {
            let mut f = [MAC_A.as_slice(), &[2, 0, 0, 0, 9, 9], &[0x08, 0x00]].concat();
            let total = (len - 14) as u16;
            let mut h = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 5];
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[4..6].copy_from_slice(&i.to_be_bytes());
            h.extend_from_slice(&[10, 1 + (i % 2) as u8, 0, i as u8]);
            let c = csum(&h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
            f.extend_from_slice(&[0x30, 0x39, 0x1f, 0x90]);
            f.extend_from_slice(&(total - 20).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
            f.resize(len, 0x5a);
            f
        })
        .collect()
}

#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    path: &'static str,
    size: usize,
    /// Frames out of b and c per second.
    kpps: f64,
    /// Bits per second of those frames (Ethernet header included).
    mbps: f64,
    /// The host application's CPU ns per forwarded frame (0 for offload).
    host_cpu_ns_per_packet: f64,
    /// Frames the host paths' endpoints dropped for want of room (the host was the
    /// bottleneck), per forwarded frame.
    dropped_per_forwarded: f64,
}

fn measure(path: PathKind, size: usize, secs: f64) -> Result<Row> {
    let opts = AdapterOptions {
        workers: 1,
        burst: 32,
        assign: Assign::Partition,
        idle_sleep_us: 0,
        pool: PoolConfig::new(8192),
        fib: Some(fib()?),
        ..AdapterOptions::default()
    };
    let mut b = AdapterBuilder::new(opts)?;
    let a = b.add_port(
        "a",
        Device::Mem { port: MemPort::replay("a", frames(size))?, sink: false },
        Some(10),
    )?;
    for (name, ifindex) in [("b", 11), ("c", 12)] {
        b.add_port(name, Device::Mem { port: MemPort::sink(name), sink: true }, Some(ifindex))?;
    }
    if path == PathKind::Offload {
        let obj = spine_progs::get("router").context("the bundled router")?.object;
        let e = b.load_extension("router", obj, None, "default", "bench")?;
        b.attach(e, a)?;
    }
    let running = b.build()?.start()?;
    let dir = std::env::temp_dir().join(format!("spine-bench-rp-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let sock = dir.join("spine.sock");
    let server = serve(running.live(), ServerConfig::new(&sock))?;
    let stop = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let host = (path != PathKind::Offload).then(|| {
        let mut cfg = RouterConfig::parse(HOST_TABLE).expect("the bench's table parses");
        cfg.path = path;
        let (sock, stop, go) = (sock.clone(), stop.clone(), go.clone());
        std::thread::spawn(move || -> Result<(u64, u64)> {
            let mut r = Router::open(&sock, &cfg)?;
            while !go.load(Ordering::Acquire) {
                r.poll();
            }
            let (cpu0, fwd0) = (thread_cpu_ns(), r.stats.forwarded);
            while !stop.load(Ordering::Relaxed) {
                // An empty visit sleeps a little (as `spine-router-host` does), so that
                // a host that keeps up is not charged for spinning.
                if r.poll() == 0 {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
            Ok((thread_cpu_ns() - cpu0, r.stats.forwarded - fwd0))
        })
    });
    let live = running.live();
    if host.is_some() {
        let t = Instant::now();
        while !(live.endpoints().len() == 3 && live.endpoints().iter().all(|e| e.served)) {
            anyhow::ensure!(t.elapsed() < Duration::from_secs(10), "the host router's endpoints");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // Warm up, then count what left b and c over the run.
    std::thread::sleep(Duration::from_millis(100));
    let out = |live: &spine_adapter::Live| -> (u64, u64) {
        let t = live.totals();
        let tx = ["b", "c"].iter().filter_map(|p| t.port(p)).map(|p| p.tx_packets).sum();
        let dropped = live.endpoints().iter().map(|e| e.counters.rx_dropped).sum();
        (tx, dropped)
    };
    go.store(true, Ordering::Release);
    let (tx0, d0) = out(&live);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (tx1, d1) = out(&live);
    let seconds = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let host = match host {
        Some(h) => Some(h.join().map_err(|_| anyhow::anyhow!("the host router panicked"))??),
        None => None,
    };
    server.stop();
    running.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    let forwarded = tx1 - tx0;
    anyhow::ensure!(forwarded > 0, "{}: nothing forwarded at {size} bytes", path.name());
    let host_ns = host.map_or(0.0, |(cpu, fwd)| cpu as f64 / fwd.max(1) as f64);
    Ok(Row {
        path: path.name(),
        size,
        kpps: forwarded as f64 / seconds / 1e3,
        mbps: forwarded as f64 * size as f64 * 8.0 / seconds / 1e6,
        host_cpu_ns_per_packet: host_ns,
        dropped_per_forwarded: (d1 - d0) as f64 / forwarded as f64,
    })
}

const COLOURS: [&str; 4] = ["#4e79a7", "#59a14f", "#f28e2b", "#e15759"];

/// One panel: a line per path of `value` against frame size.
fn panel(
    s: &mut String,
    x0: f64,
    title: &str,
    rows: &[Row],
    sizes: &[usize],
    value: fn(&Row) -> f64,
) {
    use std::fmt::Write;
    let (w, h, top, left) = (440.0, 300.0, 50.0, 60.0);
    let max = rows.iter().map(value).fold(1e-9, f64::max) * 1.1;
    let xmax = *sizes.iter().max().unwrap_or(&1500) as f64;
    let px = |size: usize| x0 + left + size as f64 / xmax * (w - left - 20.0);
    let py = |v: f64| top + h - v / max * h;
    let _ = write!(
        s,
        r#"<text x="{}" y="35" font-size="13" text-anchor="middle">{title}</text>"#,
        x0 + w / 2.0
    );
    let _ = write!(
        s,
        r#"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="black"/><line x1="{0}" y1="{3}" x2="{0}" y2="{1}" stroke="black"/>"#,
        x0 + left,
        top + h,
        x0 + w - 10.0,
        top
    );
    for k in 0..=4 {
        let v = max * f64::from(k) / 4.0;
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{v:.0}</text>"#,
            x0 + left - 4.0,
            py(v) + 4.0
        );
    }
    for &size in sizes {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" text-anchor="middle">{size}</text>"#,
            px(size),
            top + h + 16.0
        );
    }
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">frame size (bytes)</text>"#,
        x0 + w / 2.0,
        top + h + 34.0
    );
    for (i, p) in PathKind::ALL.iter().enumerate() {
        let pts: Vec<String> = rows
            .iter()
            .filter(|r| r.path == p.name())
            .map(|r| format!("{:.1},{:.1}", px(r.size), py(value(r))))
            .collect();
        if pts.is_empty() {
            continue;
        }
        let c = COLOURS[i % COLOURS.len()];
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        for pt in &pts {
            let (x, y) = pt.split_once(',').unwrap_or(("0", "0"));
            let _ = write!(s, r#"<circle cx="{x}" cy="{y}" r="3" fill="{c}"/>"#);
        }
    }
}

fn svg(rows: &[Row], sizes: &[usize]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="920" height="440" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        s,
        r#"<text x="460" y="18" font-size="14" text-anchor="middle">The host router's four data paths (spine bench router-paths)</text>"#
    );
    panel(&mut s, 0.0, "throughput (Mbit/s)", rows, sizes, |r| r.mbps);
    panel(&mut s, 460.0, "host CPU per packet (ns)", rows, sizes, |r| r.host_cpu_ns_per_packet);
    for (i, p) in PathKind::ALL.iter().enumerate() {
        let x = 120.0 + i as f64 * 180.0;
        let c = COLOURS[i % COLOURS.len()];
        let _ = write!(
            s,
            r#"<rect x="{x}" y="418" width="12" height="12" fill="{c}"/><text x="{}" y="428">{}</text>"#,
            x + 16.0,
            p.name()
        );
    }
    s.push_str("</svg>\n");
    s
}

pub fn main(a: &RouterPathsArgs) -> Result<()> {
    anyhow::ensure!(
        a.sizes.iter().all(|s| (64..=1514).contains(s)),
        "sizes must be within 64..=1514 bytes"
    );
    let total = a.sizes.len() * PathKind::ALL.len();
    let mut rows = Vec::new();
    for (si, &size) in a.sizes.iter().enumerate() {
        for (pi, &path) in PathKind::ALL.iter().enumerate() {
            progress(si * PathKind::ALL.len() + pi, total, &format!("{} {size} B", path.name()));
            rows.push(measure(path, size, a.seconds.max(0.05))?);
        }
    }
    progress(total, total, "done");
    eprintln!();
    let ratio = |r: &Row| {
        let off = rows.iter().find(|o| o.path == "offload" && o.size == r.size);
        off.map(|o| r.kpps / o.kpps)
    };
    let ratios: Vec<_> = rows
        .iter()
        .map(|r| json!({ "path": r.path, "size": r.size, "throughput_over_offload": ratio(r) }))
        .collect();
    let doc = json!({
        "benchmark": "router-paths",
        "machine": super::machine(),
        "seconds_per_run": a.seconds,
        "rows": rows,
        "ratios": ratios,
        "note": "one worker, mem ports, 64 frames replayed as fast as taken, two routes; host CPU: the host application's thread CPU time per forwarded frame (it sleeps 20 us after an empty visit); ratios are to offload at the same size in this run",
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "{:<12} {:>6} {:>10} {:>10} {:>14} {:>12} {:>10}",
            "path", "bytes", "kpps", "Mbit/s", "host ns/pkt", "÷ offload", "drop/fwd"
        );
        for r in &rows {
            println!(
                "{:<12} {:>6} {:>10.1} {:>10.1} {:>14.1} {:>12.3} {:>10.2}",
                r.path,
                r.size,
                r.kpps,
                r.mbps,
                r.host_cpu_ns_per_packet,
                ratio(r).unwrap_or(f64::NAN),
                r.dropped_per_forwarded
            );
        }
        println!("machine: {}", super::machine_line(&doc["machine"]));
        println!("({})", doc["note"].as_str().unwrap_or_default());
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("bench-router-paths.json"), serde_json::to_string_pretty(&doc)?)?;
        std::fs::write(dir.join("bench-router-paths.svg"), svg(&rows, &a.sizes))?;
    }
    Ok(())
}
