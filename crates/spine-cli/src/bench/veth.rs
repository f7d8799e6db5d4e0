//! `spine bench veth`: spine forwarding between two veth interfaces (afxdp and afpacket
//! ports) next to the kernel's XDP running the same program on the same veth, Linux IP
//! forwarding, and DPDK testpmd (`net_af_xdp` and `net_af_packet`), all driven by the
//! same trafgen load, in one run: packets per second and CPU seconds per million packets.
//!
//! Each competitor gets a fresh network (`topo.rs`), removed afterwards, also on errors
//! and Ctrl-C. trafgen sends 64-byte frames flat out (or `--rate`) into g1; the
//! competitor forwards them to o1; the sink counts what arrives on o0. After the first
//! frame reaches the sink and a warm-up, one window of `--seconds` is measured:
//!
//! - **packets per second**: o0's received-packet counter over the window (forwarded),
//!   and g0's sent + dropped (offered);
//! - **CPU seconds**: the exact run time (`/proc/<tid>/schedstat`) of every thread of
//!   the competitor's processes plus g1's NAPI kernel thread, where the kernel does its
//!   share (XDP, AF_XDP copies, AF_PACKET rings, IP forwarding). Work the kernel does
//!   in other contexts is not counted: the `sendto` kicks of a user-space forwarder's
//!   transmit are in its own thread (counted), the sink's XDP_DROP in o0's thread (not).
//!   Interrupts that land on a counted thread are charged to it. The generator's and
//!   the sink's CPU are shown beside, and "other": the machine's busy time no one of
//!   the three used (other programs), a measure of how disturbed the window was.
//!
//! Limits: on veth the offered load is bounded by what one trafgen thread sends (a few
//! hundred kpps on a small machine), so forwarded pps often says "kept up" rather than
//! "maximum"; CPU per packet is then the comparison. A poll-mode forwarder (testpmd)
//! burns its core whatever the load, and that is what it costs. Figures from one run
//! on a shared machine move by tens of percent; nothing here is a pass/fail test.

mod dut;
mod gen;
mod parse;
mod proc;
mod progs;
mod sample;
mod topo;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

pub use dut::Competitor;
use dut::{Dut, Env};
use sample::{Measured, Sample};
use topo::Topology;

use super::{progress, svg};

/// How long the first forwarded frame may take (testpmd needs a few seconds to start).
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Running time before the measured window.
const WARMUP: Duration = Duration::from_secs(1);
/// Busy time of other programs (% of one CPU) above which a row says it was disturbed.
const BUSY_PCT: f64 = 10.0;

#[derive(Debug, clap::Args)]
pub struct VethArgs {
    /// Seconds each competitor is measured (after a one-second warm-up).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Offered load in packets per second (default: as fast as trafgen sends).
    #[arg(long)]
    pub rate: Option<u64>,
    /// Measure each competitor this many times (a fresh topology each time); the table
    /// shows the median trial by CPU per packet, with the min-max spread.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat_trials: u32,
    /// Run only these competitors (comma-separated; default all).
    #[arg(long, value_enum, value_delimiter = ',')]
    pub only: Vec<Competitor>,
    #[arg(long)]
    pub json: bool,
    /// Also write bench-veth.json and bench-veth.svg here.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One competitor's line of the result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub competitor: Competitor,
    pub label: &'static str,
    /// `ok`, `skipped: <why>` or `failed: <why>`.
    pub status: String,
    #[serde(flatten)]
    pub measured: Option<Measured>,
    /// Packets the competitor itself says it sent over its whole run (spine, testpmd).
    pub dut_reported_tx: Option<u64>,
    pub note: Option<String>,
    /// Trials measured (the row is the median one).
    pub trials: usize,
    /// CPU s/Mpkt over the trials: (min, max), with two or more.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_spread: Option<(f64, f64)>,
}

impl Row {
    fn without(c: Competitor, status: String) -> Row {
        Row {
            competitor: c,
            label: c.label(),
            status,
            measured: None,
            dut_reported_tx: None,
            note: None,
            trials: 0,
            cpu_spread: None,
        }
    }

    /// The median of `runs` by CPU per packet (runs without that figure sort last), with
    /// the spread over all of them.
    fn median(mut runs: Vec<Row>) -> Row {
        let per = |r: &Row| r.measured.and_then(|m| m.cpu_s_per_mpkt);
        runs.sort_by(|a, b| match (per(a), per(b)) {
            (Some(x), Some(y)) => x.total_cmp(&y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        let values: Vec<f64> = runs.iter().filter_map(per).collect();
        let n = runs.len();
        let mut row = runs.swap_remove(n.saturating_sub(1) / 2);
        row.trials = n;
        if values.len() >= 2 {
            row.cpu_spread = Some((values[0], values[values.len() - 1]));
        }
        row
    }
}

/// Ctrl-C (or SIGTERM) during a run: the networks and children are cleaned up by their
/// guards on the way out.
#[derive(Debug)]
struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted; every namespace and process of the bench was removed")
    }
}

impl std::error::Error for Interrupted {}

/// A folder for configurations, objects and the children's output; removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn main(args: &VethArgs) -> Result<()> {
    anyhow::ensure!(
        args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 3600.0,
        "--seconds: {} is not in (0, 3600]",
        args.seconds
    );
    anyhow::ensure!(args.rate != Some(0), "--rate: 0 packets per second sends nothing");
    check_prerequisites()?;
    if !spine_adapter::sys::catch_sigint() {
        eprintln!("bench: could not catch Ctrl-C; interrupting may leave namespaces behind");
    }
    topo::remove_stale();
    let ncpu = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let scratch =
        Scratch(std::env::temp_dir().join(format!("spine-bench-veth-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0)?;
    let env = Env {
        dir: scratch.0.clone(),
        exe: std::env::current_exe().context("finding the spine binary")?,
        dut_cpu: usize::from(ncpu > 1),
        limit_s: READY_TIMEOUT.as_secs_f64() + WARMUP.as_secs_f64() + args.seconds + 30.0,
    };
    let sink_obj = progs::sink(&env.dir)?;
    let list: Vec<Competitor> =
        if args.only.is_empty() { Competitor::ALL.to_vec() } else { args.only.clone() };
    let mut rows = Vec::new();
    for (k, c) in list.iter().enumerate() {
        progress(k, list.len(), c.label());
        let row = match c.unavailable(ncpu) {
            Some(why) => Row::without(*c, format!("skipped: {why}")),
            None => {
                let mut runs = Vec::new();
                for t in 0..args.repeat_trials as usize {
                    // A fresh topology per trial: indices keep their names apart.
                    match run_one(*c, k * 20 + t, &env, &sink_obj, args) {
                        Ok(r) => runs.push(r),
                        Err(e) if e.is::<Interrupted>() => {
                            eprintln!();
                            return Err(e);
                        }
                        Err(e) => {
                            runs.push(Row::without(*c, format!("failed: {e:#}")));
                            break;
                        }
                    }
                }
                Row::median(runs)
            }
        };
        rows.push(row);
    }
    progress(list.len(), list.len(), "done");
    eprintln!();
    report(&rows, args)
}

/// Root, and the tools every competitor needs; a clear list of what is missing.
fn check_prerequisites() -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    anyhow::ensure!(
        parse::effective_uid(&status) == Some(0),
        "spine bench veth needs root: it creates network namespaces, veth pairs and XDP \
         attachments (all removed when it ends)"
    );
    let needed = [
        ("ip", "apt-get install -y iproute2"),
        ("ethtool", "apt-get install -y ethtool"),
        ("trafgen", "apt-get install -y netsniff-ng"),
        ("sysctl", "apt-get install -y procps"),
        ("kill", "apt-get install -y procps"),
        ("timeout", "apt-get install -y coreutils"),
    ];
    let clang = spine_progs::clang();
    let mut missing: Vec<String> = needed
        .iter()
        .filter(|(tool, _)| proc::which(tool).is_none())
        .map(|(tool, how)| format!("{tool} ({how})"))
        .collect();
    if proc::which(&clang).is_none() && !Path::new(&clang).is_file() {
        missing.push(format!("{clang} (apt-get install -y clang)"));
    }
    anyhow::ensure!(missing.is_empty(), "spine bench veth needs: {}", missing.join(", "));
    Ok(())
}

/// Sleeps `d`, watching for Ctrl-C and for the competitor or the generator ending.
fn pause(d: Duration, dut: &mut Dut, trafgen: &mut proc::Proc) -> Result<()> {
    let end = Instant::now() + d;
    loop {
        if spine_adapter::sys::sigint_received() {
            return Err(Interrupted.into());
        }
        if let Some(why) = dut.died() {
            anyhow::bail!("the competitor {why}");
        }
        if let Some(status) = trafgen.exited() {
            anyhow::bail!("trafgen exited ({status}): {}", trafgen.tail(4));
        }
        let now = Instant::now();
        if now >= end {
            return Ok(());
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
}

/// The tasks whose CPU time is charged to each party, fixed at the window's start.
struct Tasks {
    dut: Vec<u32>,
    gen: Vec<u32>,
    sink: Vec<u32>,
}

fn sample(topo: &Topology, tasks: &Tasks, epoch: Instant) -> Result<Sample> {
    let t0 = epoch.elapsed().as_secs_f64();
    let g0 = topo.counters(&topo.gen, &topo.g0)?;
    let o0 = topo.counters(&topo.sink, &topo.o0)?;
    let machine = proc::machine_cpu();
    let s = Sample {
        at_s: (t0 + epoch.elapsed().as_secs_f64()) / 2.0,
        offered: g0.tx_packets.saturating_add(g0.tx_dropped),
        arrived: o0.rx_packets,
        dut_ns: proc::runtimes_ns(&tasks.dut),
        gen_ns: proc::runtimes_ns(&tasks.gen),
        sink_ns: proc::runtimes_ns(&tasks.sink),
        machine,
    };
    Ok(s)
}

fn run_one(c: Competitor, k: usize, env: &Env, sink_obj: &Path, args: &VethArgs) -> Result<Row> {
    // Declared first, dropped last: children stop before their namespaces go.
    let topo = Topology::create(k, sink_obj)?;
    let forward = progs::forward(&env.dir, k, topo.o1_ifindex)?;
    let mut dut = Dut::start(c, &topo, &forward, env, k)?;
    let mut trafgen = gen::start(&topo, &env.dir, k, args.rate, env.limit_s)?;
    let epoch = Instant::now();
    let before = topo.counters(&topo.sink, &topo.o0)?.rx_packets;
    while topo.counters(&topo.sink, &topo.o0)?.rx_packets == before {
        anyhow::ensure!(
            epoch.elapsed() < READY_TIMEOUT,
            "no frame reached the sink within {READY_TIMEOUT:?}"
        );
        pause(Duration::from_millis(100), &mut dut, &mut trafgen)?;
    }
    pause(WARMUP, &mut dut, &mut trafgen)?;
    let mut dut_tasks: Vec<u32> = dut.pids().into_iter().flat_map(proc::tree_tids).collect();
    dut_tasks.extend(proc::napi_threads(&topo.g1));
    dut_tasks.extend(proc::napi_threads(&topo.o1));
    let tasks = Tasks {
        dut: dut_tasks,
        gen: proc::tree_tids(trafgen.pid()),
        sink: proc::napi_threads(&topo.o0),
    };
    let a = sample(&topo, &tasks, epoch)?;
    pause(Duration::from_secs_f64(args.seconds), &mut dut, &mut trafgen)?;
    let b = sample(&topo, &tasks, epoch)?;
    trafgen.stop();
    let reported = dut.stop();
    let measured = Measured::between(&a, &b).context("an empty measurement window")?;
    let mut notes = Vec::new();
    if !topo.threaded {
        notes.push("g1 has no threaded NAPI here: the kernel's share is not counted".to_string());
    }
    if !topo.sink_threaded {
        notes.push("o0 has no threaded NAPI here: the sink's drops are charged to the DUT".into());
    }
    if measured.other_cpu_pct > BUSY_PCT {
        notes.push(format!(
            "other programs used {:.0}% of a CPU during the window: figures disturbed",
            measured.other_cpu_pct
        ));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    Ok(Row {
        competitor: c,
        label: c.label(),
        status: "ok".into(),
        measured: Some(measured),
        dut_reported_tx: reported,
        note,
        trials: 1,
        cpu_spread: None,
    })
}

const METHOD: &str = "one fresh veth topology per competitor (gen netns -> g1 -> competitor -> \
o1 -> sink netns, XDP_DROP on o0); trafgen sends 64-byte UDP frames from CPU 0, the \
competitor's own thread is pinned to CPU 1; pps = frames arriving at o0 in the window; \
CPU = exact run time of the competitor's threads + g1's threaded-NAPI kernel thread; \
CPU s/Mpkt = that / forwarded packets (= CPU us per packet); 'other' = busy machine time \
outside generator, competitor and sink";

fn report(rows: &[Row], args: &VethArgs) -> Result<()> {
    let kernel = rows
        .iter()
        .find(|r| r.competitor == Competitor::KernelXdp)
        .and_then(|r| r.measured?.cpu_s_per_mpkt);
    let doc = json!({
        "benchmark": "veth",
        "frame_bytes": gen::FRAME_BYTES,
        "seconds_per_run": args.seconds,
        "trials": args.repeat_trials,
        "offered": args.rate.map_or("flat out".to_string(), |r| format!("{r} pps")),
        "machine": super::machine(),
        "method": METHOD,
        "rows": rows,
    });
    if args.json {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", table(rows, kernel));
        println!("machine: {}", super::machine_line(&doc["machine"]));
        println!("({METHOD})");
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("bench-veth.json"), serde_json::to_string_pretty(&doc)?)?;
        let ok: Vec<(&Row, Measured)> =
            rows.iter().filter_map(|r| Some((r, r.measured?))).collect();
        let labels: Vec<&str> = ok.iter().map(|(r, _)| r.label).collect();
        let series = vec![
            ("forwarded kpps", ok.iter().map(|(_, m)| m.forwarded_pps / 1e3).collect()),
            (
                "CPU µs per packet",
                ok.iter().map(|(_, m)| m.cpu_s_per_mpkt.unwrap_or(0.0)).collect(),
            ),
        ];
        let plot = svg::bars("veth forwarding, 64-byte frames (log scale)", &labels, &series, true);
        std::fs::write(dir.join("bench-veth.svg"), plot)?;
        eprintln!("bench: wrote {}/bench-veth.json and bench-veth.svg", dir.display());
    }
    Ok(())
}

/// The result as a text table; `kernel` is kernel XDP's CPU s per Mpkt, the reference
/// of the ratio column.
fn table(rows: &[Row], kernel: Option<f64>) -> String {
    use std::fmt::Write as _;
    let mut s = format!(
        "{:<22} {:>9} {:>9} {:>6} {:>8} {:>10} {:>9} {:>6} {:>6} {:>6}\n",
        "competitor",
        "offered",
        "fwd kpps",
        "loss%",
        "DUT CPU%",
        "CPU s/Mpkt",
        "÷kern XDP",
        "gen%",
        "sink%",
        "other%"
    );
    let spread = rows.iter().any(|r| r.cpu_spread.is_some());
    if spread {
        s.insert_str(s.len() - 1, &format!(" {:>15}", "s/Mpkt min-max"));
    }
    for r in rows {
        let Some(m) = r.measured else {
            let _ = writeln!(s, "{:<22} {}", r.label, r.status);
            continue;
        };
        let per = m.cpu_s_per_mpkt;
        let ratio = per.zip(kernel).map_or("-".into(), |(p, k)| format!("{:.2}×", p / k));
        let _ = writeln!(
            s,
            "{:<22} {:>9.1} {:>9.1} {:>6.1} {:>8.1} {:>10} {:>9} {:>6.1} {:>6.1} {:>6.1}",
            r.label,
            m.offered_pps / 1e3,
            m.forwarded_pps / 1e3,
            m.loss_pct,
            m.dut_cpu_pct,
            per.map_or("-".into(), |p| format!("{p:.3}")),
            ratio,
            m.gen_cpu_pct,
            m.sink_cpu_pct,
            m.other_cpu_pct,
        );
        if let Some((lo, hi)) = r.cpu_spread {
            s.insert_str(s.len() - 1, &format!(" {:>15}", format!("{lo:.3}-{hi:.3}")));
        }
        if let Some(n) = &r.note {
            let _ = writeln!(s, "{:<22} note: {n}", "");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(fwd: f64, per: Option<f64>) -> Measured {
        Measured {
            seconds: 5.0,
            offered_pps: 500e3,
            forwarded_pps: fwd,
            loss_pct: 0.0,
            dut_cpu_s: 1.0,
            dut_cpu_pct: 20.0,
            cpu_s_per_mpkt: per,
            gen_cpu_pct: 90.0,
            sink_cpu_pct: 10.0,
            other_cpu_pct: 3.0,
        }
    }

    #[test]
    fn the_table_shows_skips_and_ratios_to_kernel_xdp() {
        let mut spine = Row::without(Competitor::SpineAfxdp, "ok".into());
        spine.measured = Some(measured(400e3, Some(1.5)));
        let mut kern = Row::without(Competitor::KernelXdp, "ok".into());
        kern.measured = Some(measured(500e3, Some(0.5)));
        let skipped = Row::without(
            Competitor::TestpmdAfXdp,
            "skipped: dpdk-testpmd not found (install: …)".into(),
        );
        let t = table(&[spine, kern, skipped], Some(0.5));
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].starts_with("spine afxdp") && lines[1].contains("3.00×"), "{t}");
        assert!(lines[1].contains(" 400.0 ") && lines[1].contains("1.500"), "{t}");
        assert!(lines[2].contains("1.00×"), "{t}");
        assert!(lines[3].contains("testpmd net_af_xdp") && lines[3].contains("skipped: dpdk"));
    }

    #[test]
    fn trials_give_the_median_row_and_the_spread() {
        let run = |per: Option<f64>| {
            let mut r = Row::without(Competitor::SpineAfxdp, "ok".into());
            r.measured = Some(measured(400e3, per));
            r
        };
        let m = Row::median(vec![run(Some(3.0)), run(None), run(Some(1.0)), run(Some(2.0))]);
        assert_eq!((m.trials, m.cpu_spread), (4, Some((1.0, 3.0))));
        assert_eq!(m.measured.unwrap().cpu_s_per_mpkt, Some(2.0), "the median of 1, 2, 3 and none");
        let t = table(&[m], Some(1.0));
        assert!(t.lines().next().unwrap().ends_with("s/Mpkt min-max"), "{t}");
        assert!(t.lines().nth(1).unwrap().ends_with("1.000-3.000"), "{t}");
        let one = Row::median(vec![run(Some(5.0))]);
        assert_eq!((one.trials, one.cpu_spread), (1, None));
    }

    #[test]
    fn rows_serialise_flat_with_the_competitor_id() {
        let mut r = Row::without(Competitor::LinuxForward, "ok".into());
        r.measured = Some(measured(1.0, None));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["competitor"], "linux-forward");
        assert_eq!(v["forwarded_pps"], 1.0);
        assert!(v["cpu_s_per_mpkt"].is_null());
        let s =
            serde_json::to_value(Row::without(Competitor::TestpmdAfPacket, "x".into())).unwrap();
        assert_eq!(s["competitor"], "testpmd-af-packet");
        assert!(s.get("forwarded_pps").is_none(), "nothing measured, nothing invented");
    }
}
