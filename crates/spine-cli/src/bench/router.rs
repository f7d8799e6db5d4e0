//! `spine bench router`: the bundled router (`bpf/router.c`) forwarding 64-byte IPv4
//! frames through the adapter over mem ports with the full IPv4 table of
//! `../shared/data/routes` (1.04 M prefixes) in its FIB, on one worker; and in
//! the same run, the same object in the kernel: `BPF_PROG_TEST_RUN` in a namespace whose
//! main table holds the same routes (installed with `ip -batch`), as ns per run.
//!
//! The tables carry no next hops: each prefix gets one of 16 gateways on the egress port,
//! chosen by a hash of the prefix, each with a permanent neighbour. Destinations are
//! drawn inside the table's prefixes, so every frame is forwarded (XDP_REDIRECT).
//! spine's figure is the whole path per packet (receive, the router with its lookup,
//! the redirect, transmit); the kernel's is the program alone, so the ratio is
//! conservative for spine.

use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use spine_adapter::{AdapterBuilder, AdapterOptions, Assign, Device};
use spine_fib::{FibOp, FibWriter, IpPrefix, Neigh, NextHop, NudState, Prefix4, Route};
use spine_ports::{MemPort, PoolConfig};
use spine_runtime::fib_lookup::{FibEnv, Iface};

use super::{progress, Stat};

const TABLE: &str = "20260511-initial-state-peer-193.0.0.56AS3333.txt.gz";
const GATEWAYS: u32 = 16;
/// Distinct frames replayed (destinations inside the table).
const FRAMES: usize = 4096;
/// Frames the kernel's test runs go through (each repeated 200 times in a row, so its
/// caches are warm): the first of [`FRAMES`].
const KERNEL_FRAMES: usize = 256;
const IN_MAC: [u8; 6] = [2, 0, 0, 0, 0xaa, 1];
const OUT_MAC: [u8; 6] = [2, 0, 0, 0, 0xbb, 1];

#[derive(Debug, clap::Args)]
pub struct RouterArgs {
    /// Folder with the route tables.
    #[arg(long, default_value = "../shared/data/routes")]
    pub routes: PathBuf,
    /// Seconds each spine configuration runs.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Trials per configuration (median [min-max] shown).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat_trials: u32,
    #[arg(long)]
    pub json: bool,
    /// Also write bench-router.json here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

fn gateway(i: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 200, 0, 1 + (i % GATEWAYS) as u8)
}

fn gateway_mac(i: u32) -> [u8; 6] {
    [2, 0, 0, 0, 0xcc, 1 + (i % GATEWAYS) as u8]
}

/// The next hop of `p`: a hash of the prefix modulo 16.
fn pick(p: &Prefix4) -> u32 {
    (p.addr().wrapping_mul(0x9e37_79b1) ^ p.len()).rotate_left(7) % GATEWAYS
}

fn load_table(dir: &Path) -> Result<Vec<Prefix4>> {
    let path = dir.join(TABLE);
    let f = std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(f), &mut text)
        .with_context(|| format!("gunzip {}", path.display()))?;
    let mut t: Vec<Prefix4> = spine_fib::parse::routes::parse(&text)
        .filter_map(|r| r.ok().and_then(|r| Prefix4::try_from(r.prefix).ok()))
        .filter(|p| p.len() >= 8)
        .collect();
    t.sort();
    t.dedup();
    Ok(t)
}

/// 60-byte UDP frames to addresses inside random prefixes of `table`, TTL 255.
fn frames(table: &[Prefix4]) -> Vec<Vec<u8>> {
    let mut x = 0x5eed_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..FRAMES)
        .map(|i| {
            let p = table[(next() % table.len() as u64) as usize];
            let host = next() as u32 & !(u32::MAX.checked_shl(32 - p.len()).unwrap_or(0));
            let dst = (p.addr() | host).to_be_bytes();
            let mut f = IN_MAC.to_vec();
            f.extend_from_slice(&[2, 0, 0, 0, 0xdd, 1, 8, 0]);
            let mut ip = vec![0x45, 0, 0, 46, 0, 1, 0, 0, 255, 17, 0, 0, 10, 100, 0, 2];
            ip.extend_from_slice(&dst);
            let sum = ip.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
            let fold = |s: u32| (s & 0xffff) + (s >> 16);
            ip[10..12].copy_from_slice(&(!(fold(fold(sum)) as u16)).to_be_bytes());
            f.extend_from_slice(&ip);
            let sport = 1024 + i as u16;
            f.extend_from_slice(&sport.to_be_bytes());
            f.extend_from_slice(&[0x30, 0x39, 0, 26, 0, 0]);
            f.resize(60, 0);
            f
        })
        .collect()
}

/// spine's FIB: every prefix via its gateway out of `out`, the gateways' neighbours.
fn fib(table: &[Prefix4], inp: u32, out: u32) -> Result<FibEnv> {
    let (mut w, r) = FibWriter::new();
    for p in table {
        let nh = NextHop::via(IpAddr::V4(gateway(pick(p))), out);
        w.add(Route::unicast(IpPrefix::V4(*p), vec![nh]))?;
    }
    w.add(Route::unicast("10.200.0.0/24".parse()?, vec![NextHop::dev(out)]))?;
    for g in 0..GATEWAYS {
        let neigh = Neigh { mac: gateway_mac(g), state: NudState::PERMANENT };
        w.apply(FibOp::SetNeigh { ifindex: out, ip: IpAddr::V4(gateway(g)), neigh })?;
    }
    w.publish();
    let iface = |ifindex, mac, addr: [u8; 4]| Iface {
        ifindex,
        mtu: 1500,
        mac,
        forward_v4: true,
        forward_v6: true,
        addrs: vec![(IpAddr::from(addr), 24)],
    };
    let ifaces = vec![iface(inp, IN_MAC, [10, 100, 0, 1]), iface(out, OUT_MAC, [10, 200, 0, 254])];
    Ok(FibEnv::new(r, ifaces))
}

#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    workers: usize,
    /// Distinct destinations replayed (the kernel's run uses the first 256).
    destinations: usize,
    mpps: Stat,
    mpps_per_core: f64,
    ns_per_packet: f64,
}

fn measure(
    obj: &spine_obj::Object,
    table: &[Prefix4],
    workers: usize,
    secs: f64,
    frames: &[Vec<u8>],
) -> Result<f64> {
    let ncpu = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    // Port ids are fixed by order: in0 out0 in1 out1 …; the FIB names them by ifindex.
    let ifx = |id: usize| spine_adapter::VIRTUAL_IFINDEX_BASE + id as u32;
    let env = fib(table, ifx(0), ifx(1))?;
    let opts = AdapterOptions {
        workers,
        cpus: Some((0..workers).map(|w| w % ncpu).collect()),
        burst: 32,
        assign: Assign::Partition,
        idle_sleep_us: 0,
        pool: PoolConfig::new(8192),
        fib: Some(env),
        ..AdapterOptions::default()
    };
    let mut b = AdapterBuilder::new(opts)?;
    for w in 0..workers {
        let port = MemPort::replay(&format!("in{w}"), frames)?;
        // Every worker's input has the first input's ifindex, so that one FIB serves all.
        let src = b.add_port(
            &format!("in{w}"),
            Device::Mem { port, sink: false },
            (w > 0).then(|| ifx(0) + 100 * w as u32),
        )?;
        b.set_worker(src, w)?;
        let out = b.add_port(
            &format!("out{w}"),
            Device::Mem { port: MemPort::sink("out"), sink: true },
            (w > 0).then(|| ifx(1) + 100 * w as u32),
        )?;
        b.set_worker(out, w)?;
        let e = b.load_parsed(&format!("router{w}"), obj, None, "default", "bench")?;
        b.attach(e, src)?;
    }
    let running = b.build()?.start()?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let seconds = t0.elapsed().as_secs_f64();
    let report = running.stop()?;
    let t = &report.totals;
    let packets: u64 =
        t.ports.iter().filter(|p| p.name.starts_with("in")).map(|p| p.rx_packets).sum();
    let redirected: u64 = t.ports.iter().map(|p| p.verdicts.redirect).sum();
    anyhow::ensure!(
        packets > 0 && redirected + 64 * workers as u64 >= packets,
        "{packets} received, only {redirected} forwarded"
    );
    Ok(packets as f64 / seconds / 1e6)
}

/// Kernel ns per run of the router over `frames`, in a namespace whose main table holds
/// `table`; `None` without root.
fn kernel_ns(
    obj: &spine_obj::Object,
    table: &[Prefix4],
    frames: &[Vec<u8>],
) -> Result<Option<Stat>> {
    if spine_sys::probe().is_err() {
        return Ok(None);
    }
    let ns = format!("spine-br{}", std::process::id());
    let ip = |args: &[&str]| -> Result<()> {
        let ok = Command::new("ip").args(args).status().context("ip")?.success();
        anyhow::ensure!(ok, "ip {}", args.join(" "));
        Ok(())
    };
    ip(&["netns", "add", &ns])?;
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
    }
    let _gone = Gone(ns.clone());
    let batch = std::env::temp_dir().join(format!("{ns}.batch"));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&batch)?);
        writeln!(f, "link add ri type veth peer name rpi")?;
        writeln!(f, "link add ro type veth peer name rpo")?;
        for d in ["ri", "rpi", "ro", "rpo"] {
            writeln!(f, "link set {d} up")?;
        }
        writeln!(f, "addr add 10.100.0.1/24 dev ri")?;
        writeln!(f, "addr add 10.200.0.254/24 dev ro")?;
        for g in 0..GATEWAYS {
            let m = gateway_mac(g).map(|b| format!("{b:02x}")).join(":");
            writeln!(f, "neigh add {} lladdr {m} dev ro nud permanent", gateway(g))?;
        }
        for p in table {
            writeln!(f, "route add {p} via {} dev ro", gateway(pick(p)))?;
        }
    }
    let status = Command::new("ip").args(["-n", &ns, "-batch"]).arg(&batch).status();
    std::fs::remove_file(&batch).ok();
    anyhow::ensure!(status.context("ip -batch")?.success(), "installing the routes with ip -batch");
    for s in [
        "net.ipv4.conf.all.forwarding=1",
        "net.ipv4.conf.ri.forwarding=1",
        "net.ipv4.conf.ro.forwarding=1",
    ] {
        ip(&["netns", "exec", &ns, "sysctl", "-qw", s])?;
    }
    let obj = obj.clone();
    let frames = frames.to_vec();
    // One thread enters the namespace (bpf_fib_lookup reads the caller's) and stays on CPU 0.
    let runs = std::thread::spawn(move || -> Result<Vec<f64>> {
        spine_sys::enter_netns(&ns)?;
        spine_sys::pin_current_thread(0)?;
        let ifindex = spine_adapter::sys::ifindex("ri").context("no interface ri")?;
        let k = spine_sys::load_object_program(&obj, &obj.programs[0])?;
        let mut out = Vec::new();
        for round in 0..3 {
            let mut total = 0f64;
            for f in &frames[..KERNEL_FRAMES] {
                let mut run = spine_sys::TestRun::new(f);
                run.ctx_in = Some(spine_sys::XdpMd {
                    ingress_ifindex: ifindex,
                    ..spine_sys::XdpMd::for_packet(f.len() as u32, 0)
                });
                // The router lowers the TTL in place: 200 runs from 255 never expire it.
                run.repeat = 200;
                let r = k.prog.test_run(&run)?;
                anyhow::ensure!(
                    round > 0 || r.retval == 4,
                    "the kernel did not forward (verdict {})",
                    r.retval
                );
                total += f64::from(r.duration_ns);
            }
            out.push(total / KERNEL_FRAMES as f64);
        }
        Ok(out)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the kernel thread panicked"))??;
    Ok(Some(Stat::of(runs)))
}

pub fn main(a: &RouterArgs) -> Result<()> {
    progress(0, 4, "loading the table");
    let table = load_table(&a.routes)?;
    let frames = frames(&table);
    let b = spine_progs::get("router").context("the bundled router")?;
    let obj = spine_obj::parse(b.object)?;
    let mut rows = Vec::new();
    // One worker: the FIB's routes leave by one egress port, which belongs to one worker;
    // two workers would measure the worker-to-worker ring as much as the router. First
    // the kernel's own 256 destinations (the ratio compares like working sets), then all
    // 4,096, whose routes, next hops and neighbours no longer sit in the L1/L2 caches.
    for (i, (workers, n)) in [(1usize, KERNEL_FRAMES), (1, FRAMES)].into_iter().enumerate() {
        progress(1 + i, 4, &format!("spine, {workers} worker(s), {n} destinations"));
        let v: Vec<f64> = (0..a.repeat_trials)
            .map(|_| measure(&obj, &table, workers, a.seconds, &frames[..n]))
            .collect::<Result<_>>()?;
        let mpps = Stat::of(v);
        rows.push(Row {
            workers,
            destinations: n,
            mpps,
            mpps_per_core: mpps.median / workers as f64,
            ns_per_packet: 1e3 * workers as f64 / mpps.median,
        });
    }
    progress(3, 4, "kernel (ip -batch, test runs)");
    let kernel = kernel_ns(&obj, &table, &frames)?;
    progress(4, 4, "done");
    eprintln!();
    let one = rows[0].ns_per_packet;
    let doc = json!({
        "benchmark": "router",
        "machine": super::machine(),
        "table": TABLE,
        "prefixes": table.len(),
        "next_hops": format!("{GATEWAYS} gateways, chosen by a hash of the prefix"),
        "frames": FRAMES,
        "seconds_per_run": a.seconds,
        "trials": a.repeat_trials,
        "rows": rows,
        "kernel_ns_per_run": kernel,
        "spine_over_kernel": kernel.map(|k| one / k.median),
        "note": "spine: whole adapter path per packet over mem ports (receive, router + bpf_fib_lookup, redirect, transmit); kernel: BPF_PROG_TEST_RUN ns per run of the same object in a namespace with the same routes (execution only), 256 frames x 200 runs, 3 rounds",
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "{} IPv4 prefixes, {GATEWAYS} next hops, destinations inside the table",
            table.len()
        );
        println!(
            "{:<8} {:>12} {:>24} {:>10} {:>12}",
            "workers", "destinations", "Mpps", "Mpps/core", "ns/packet"
        );
        for r in &rows {
            println!(
                "{:<8} {:>12} {:>24} {:>10.2} {:>12.1}",
                r.workers,
                r.destinations,
                r.mpps.to_string(),
                r.mpps_per_core,
                r.ns_per_packet
            );
        }
        match kernel {
            Some(k) => println!(
                "kernel test run ({KERNEL_FRAMES} destinations): {k} ns/run; spine (1 worker, same destinations) ÷ kernel: {:.2}",
                one / k.median
            ),
            None => println!("kernel test run: skipped (needs root)"),
        }
        println!("machine: {}", super::machine_line(&doc["machine"]));
        println!("({})", doc["note"].as_str().unwrap_or_default());
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("bench-router.json"), serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(())
}
