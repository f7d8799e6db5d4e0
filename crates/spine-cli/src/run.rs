//! `spine run adapter.toml`: builds the adapter the file describes, runs it on its
//! pinned workers, prints a live line every second, and on Ctrl-C, at `--duration` or
//! once every input is exhausted stops cleanly and prints the totals (text or JSON),
//! Prometheus text and the event trace where asked.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use spine_adapter::{Adapter, AdapterOptions, Config, Totals};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The adapter's configuration (docs/CONFIG.md).
    pub config: PathBuf,
    /// Stop after this many seconds (default: at Ctrl-C, or when every input is done).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print the final totals as JSON.
    #[arg(long)]
    pub json: bool,
    /// Write the counters in the Prometheus text format to FILE, every second and at exit.
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<PathBuf>,
    /// Record each worker's events and write them to FILE (Chrome/Perfetto trace format).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// No live line.
    #[arg(long, short)]
    pub quiet: bool,
}

pub fn main(args: &RunArgs) -> Result<std::process::ExitCode> {
    let cfg = Config::load(&args.config).with_context(|| format!("{}", args.config.display()))?;
    let mut opts = AdapterOptions::from_config(&cfg.adapter);
    opts.log = true;
    if args.trace.is_some() {
        opts.trace_events = Some(cfg.adapter.trace_events);
    }
    if !spine_adapter::sys::catch_sigint() {
        eprintln!("spine: could not catch Ctrl-C; stop with --duration");
    }
    let adapter =
        Adapter::from_config(&cfg, opts).with_context(|| format!("{}", args.config.display()))?;
    let running = adapter.start()?;
    let started = Instant::now();
    let limit = args.duration.map(Duration::from_secs_f64);
    let mut last = (Instant::now(), Totals::default());
    let mut next_tick = started + Duration::from_secs(1);
    let why = loop {
        std::thread::sleep(Duration::from_millis(20));
        if spine_adapter::sys::sigint_received() {
            break "interrupted";
        }
        if limit.is_some_and(|l| started.elapsed() >= l) {
            break "duration reached";
        }
        if running.exhausted() {
            break "every input done";
        }
        if Instant::now() >= next_tick {
            next_tick += Duration::from_secs(1);
            let now = running.totals();
            if !args.quiet {
                eprintln!("{}", live_line(&last.1, &now, last.0.elapsed().as_secs_f64()));
            }
            if let Some(p) = &args.prometheus {
                write_prometheus(p, &now)?;
            }
            last = (Instant::now(), now);
        }
    };
    if !args.quiet {
        eprintln!("spine: stopping ({why})");
    }
    let report = running.stop()?;
    for e in &report.close_errors {
        eprintln!("spine: closing {e}");
    }
    if let Some(p) = &args.prometheus {
        write_prometheus(p, &report.totals)?;
    }
    if let (Some(path), Some(trace)) = (&args.trace, &report.trace) {
        std::fs::write(path, serde_json::to_vec(trace)?)
            .with_context(|| format!("writing the trace to {}", path.display()))?;
        if !args.quiet {
            eprintln!("spine: trace written to {}", path.display());
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.totals)?);
    } else {
        print!("{}", totals_text(&report.totals));
    }
    Ok(if report.close_errors.is_empty() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// Replaces `path` atomically (written beside it, then renamed), as a Prometheus
/// textfile collector expects.
fn write_prometheus(path: &Path, t: &Totals) -> Result<()> {
    let tmp = path.with_extension("prom.tmp");
    std::fs::write(&tmp, t.prometheus())
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("writing {}", path.display()))
}

fn rate(now: u64, then: u64, secs: f64) -> f64 {
    now.saturating_sub(then) as f64 / secs.max(1e-9)
}

fn mpps(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{pps:.0} pps")
    }
}

/// One line: totals and rates since the last line.
fn live_line(then: &Totals, now: &Totals, secs: f64) -> String {
    let faults: u64 = now.extensions.iter().map(|e| e.faults).sum();
    let detached = now.extensions.iter().filter(|e| e.detached).count();
    let to_host: u64 = now.ports.iter().map(|p| p.to_host).sum();
    let mut s = format!(
        "{:>6.1}s  rx {} ({})  tx {} ({})  to host {}  drops {}  faults {}",
        now.elapsed_s,
        now.rx_packets(),
        mpps(rate(now.rx_packets(), then.rx_packets(), secs)),
        now.tx_packets(),
        mpps(rate(now.tx_packets(), then.tx_packets(), secs)),
        to_host,
        now.drops(),
        faults,
    );
    if detached > 0 {
        s += &format!("  detached {detached}");
    }
    s
}

/// The final totals as tables: ports, extensions, workers.
pub fn totals_text(t: &Totals) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(s, "ran {:.2} s", t.elapsed_s);
    let _ = writeln!(
        s,
        "{:<12} {:<8} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10}  drops by reason",
        "port", "kind", "rx packets", "rx bytes", "tx packets", "tx bytes", "to host", "drops"
    );
    for p in &t.ports {
        let reasons = serde_json::to_value(p.drops)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| v.as_u64().unwrap_or(0) > 0)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        let device = if p.device.rx_drops + p.device.tx_drops > 0 {
            format!(" device_rx={} device_tx={}", p.device.rx_drops, p.device.tx_drops)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "{:<12} {:<8} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10}  {reasons}{device}",
            p.name,
            p.kind,
            p.rx_packets,
            p.rx_bytes,
            p.tx_packets,
            p.tx_bytes,
            p.to_host,
            p.drops.total() + p.device.rx_drops + p.device.tx_drops,
        );
    }
    if !t.extensions.is_empty() {
        let _ = writeln!(
            s,
            "{:<12} {:<10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
            "extension", "domain", "runs", "pass", "tx", "drop", "redirect", "aborted", "faults"
        );
        for e in &t.extensions {
            let _ = writeln!(
                s,
                "{:<12} {:<10} {:>12} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}{}",
                e.name,
                e.domain,
                e.runs,
                e.verdicts.pass,
                e.verdicts.tx,
                e.verdicts.drop,
                e.verdicts.redirect,
                e.verdicts.aborted,
                e.faults,
                if e.detached { "  DETACHED" } else { "" },
            );
        }
    }
    for (i, w) in t.workers.iter().enumerate() {
        let busy = w.rounds - w.idle_rounds;
        let _ = writeln!(
            s,
            "worker {i}: {} rounds ({busy} with work), {} packets from and {} to other workers",
            w.rounds, w.peer_in, w.peer_out
        );
    }
    s
}
