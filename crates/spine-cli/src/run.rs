//! `spine run adapter.toml`: builds the adapter the file describes, runs it on its
//! pinned workers, prints a live line every second, and on Ctrl-C, at `--duration` or
//! once every input is exhausted stops cleanly and prints the totals (text or JSON),
//! Prometheus text and the event trace where asked. The records of every `[[ringbuf]]`
//! are read while the adapter runs and written as JSON lines.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use spine_adapter::config::RingbufOutput;
use spine_adapter::{Adapter, AdapterOptions, Config, Running, Totals};

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
    /// Serve the control API (docs/API.md) on this Unix socket while running (without
    /// a PATH: /run/spine/spine.sock); `spine ext|map|stats --socket PATH` speak to it.
    #[arg(long, value_name = "PATH", num_args = 0..=1, default_missing_value = spine_control::DEFAULT_SOCKET)]
    pub socket: Option<PathBuf>,
    /// Also serve the control API remotely on this TCP address (HOST:PORT), over TLS
    /// only, with --tls-cert, --tls-key and --token-file; needs --socket.
    #[arg(long, value_name = "ADDR", requires_all = ["socket", "tls_cert", "tls_key", "token_file"])]
    pub tls_listen: Option<std::net::SocketAddr>,
    /// The remote API's certificate chain (PEM, leaf first).
    #[arg(long, value_name = "FILE", requires = "tls_listen")]
    pub tls_cert: Option<PathBuf>,
    /// The remote API's private key (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_listen")]
    pub tls_key: Option<PathBuf>,
    /// A file holding the bearer token remote clients must send (at least 16
    /// printable characters).
    #[arg(long, value_name = "FILE", requires = "tls_listen")]
    pub token_file: Option<PathBuf>,
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
    let server = match &args.socket {
        Some(path) => {
            // A client that hangs up before its answer must not take the adapter down.
            spine_sys::ignore_sigpipe();
            let mut cfg = spine_control::ServerConfig::new(path);
            cfg.log = !args.quiet;
            if let (Some(addr), Some(cert), Some(key), Some(token)) =
                (args.tls_listen, &args.tls_cert, &args.tls_key, &args.token_file)
            {
                let token = match crate::control::read_token(token) {
                    Ok(t) => t,
                    Err(e) => {
                        let _ = running.stop();
                        return Err(e);
                    }
                };
                cfg.tls = Some(spine_control::TlsConfig {
                    addr,
                    cert: cert.clone(),
                    key: key.clone(),
                    token,
                });
            }
            let server = match spine_control::serve(running.live(), cfg) {
                Ok(s) => s,
                Err(e) => {
                    let _ = running.stop();
                    return Err(e.into());
                }
            };
            if !args.quiet {
                eprintln!("spine: control API on {}", path.display());
                if let Some(ep) = server.endpoint_path() {
                    eprintln!("spine: endpoints on {}", ep.display());
                }
            }
            if let Some(addr) = server.tls_addr() {
                // Printed even with --quiet: with port 0 it is how a caller learns the port.
                eprintln!("spine: remote control API on https://{addr}");
            }
            Some(server)
        }
        None => None,
    };
    let started = Instant::now();
    let mut rings =
        cfg.ringbufs.iter().map(|r| RingSink::open(&running, r)).collect::<Result<Vec<_>>>()?;
    let limit = args.duration.map(Duration::from_secs_f64);
    let mut last = (Instant::now(), Totals::default());
    let mut next_tick = started + Duration::from_secs(1);
    let mut ring_error = None;
    let why = loop {
        std::thread::sleep(Duration::from_millis(20));
        if let Err(e) =
            rings.iter_mut().try_for_each(|r| r.drain(started.elapsed().as_secs_f64()).map(drop))
        {
            ring_error = Some(e);
            break "a ring buffer's records could not be written";
        }
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
    if let Some(s) = server {
        s.stop();
    }
    let report = running.stop()?;
    if let Some(e) = ring_error {
        return Err(e);
    }
    // The rings outlive the adapter: what the workers wrote last is read here.
    let mut records = 0;
    for r in &mut rings {
        r.drain(started.elapsed().as_secs_f64())?;
        records += r.seq;
    }
    if !args.quiet && !rings.is_empty() {
        eprintln!("spine: {records} ring-buffer records read");
    }
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

/// Passes each committed record of a ring to the callback; returns how many.
type Consume = dyn Fn(&mut dyn FnMut(&[u8])) -> usize;

/// One `[[ringbuf]]` being read: each record becomes a JSON line
/// `{"extension", "map", "seq", "time_s", "len", "data"}` (`data` in hex, `time_s` when
/// it was read), on standard output or in the configured file.
struct RingSink {
    extension: String,
    map: String,
    /// The ring's consumer (it keeps the ring alive after the adapter stops).
    consume: Box<Consume>,
    out: Box<dyn Write>,
    /// Where `out` goes, for errors.
    dest: String,
    /// Records written so far.
    seq: u64,
}

impl RingSink {
    fn open(running: &Running, r: &RingbufOutput) -> Result<RingSink> {
        let ring = running.ring_buffer(&r.extension, &r.map)?;
        let consume =
            Box::new(move |f: &mut dyn FnMut(&[u8])| ring.ringbuf().map_or(0, |rb| rb.consume(f)));
        let (out, dest): (Box<dyn Write>, String) = match &r.output {
            Some(p) => {
                let f = std::fs::File::create(p)
                    .with_context(|| format!("{}.output: creating {}", r.path, p.display()))?;
                (Box::new(std::io::BufWriter::new(f)), p.display().to_string())
            }
            None => (Box::new(std::io::stdout()), "standard output".to_string()),
        };
        let (extension, map) = (r.extension.clone(), r.map.clone());
        Ok(RingSink { extension, map, consume, out, dest, seq: 0 })
    }

    /// Writes every record committed so far; returns how many.
    fn drain(&mut self, time_s: f64) -> Result<usize> {
        let RingSink { extension, map, consume, out, dest, seq } = self;
        let mut written = Ok(());
        let n = consume(&mut |rec| {
            if written.is_ok() {
                let data: String = rec.iter().map(|b| format!("{b:02x}")).collect();
                let line = record_line(extension, map, *seq, time_s, rec.len(), &data);
                written = writeln!(out, "{line}");
                *seq += 1;
            }
        });
        written.and_then(|()| out.flush()).with_context(|| format!("writing records to {dest}"))?;
        Ok(n)
    }
}

/// One record as a JSON line (`data` is the record's `len` bytes in hex); what
/// `[[ringbuf]]` outputs and `spine log --ring` print.
pub(crate) fn record_line(
    extension: &str,
    map: &str,
    seq: u64,
    time_s: f64,
    len: usize,
    data: &str,
) -> String {
    let time_s = (time_s * 1e6).round() / 1e6;
    serde_json::json!({
        "extension": extension,
        "map": map,
        "seq": seq,
        "time_s": time_s,
        "len": len,
        "data": data,
    })
    .to_string()
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
pub fn live_line(then: &Totals, now: &Totals, secs: f64) -> String {
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
            let tunnel: String = (p.device.tunnel.list().iter())
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| format!(" tunnel_{r}={n}"))
                .collect();
            format!(" device_rx={} device_tx={}{tunnel}", p.device.rx_drops, p.device.tx_drops)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_line_is_one_json_object() {
        let line = record_line("log", "events", 7, 1.234_567_89, 3, "0aff00");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "extension": "log", "map": "events", "seq": 7, "time_s": 1.234568,
                "len": 3, "data": "0aff00",
            })
        );
        assert!(!line.contains('\n'));
    }

    /// Logs each frame's length and first 8 bytes, then drops it.
    const LOGGER: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

SEC("xdp")
int logger(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 rec[2];

	if (data + 8 > data_end)
		return XDP_ABORTED;
	rec[0] = data_end - data;
	__builtin_memcpy(&rec[1], data, 8);
	bpf_ringbuf_output(&events, rec, sizeof(rec), 0);
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
"#;

    #[test]
    fn spine_run_writes_ring_buffer_records_as_json_lines() {
        let dir = std::env::temp_dir().join(format!("spine-cli-run-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("logger.c"), LOGGER).unwrap();
        spine_progs::compile_c(&dir.join("logger.c"), &dir.join("logger.o"), &[]).unwrap();
        // 300 packets: far fewer than the ring holds, so every one is logged.
        let config = r#"
            [adapter]
            pin = false
            idle_sleep_us = 0

            [[port]]
            name = "wire"
            kind = "mem"
            udp4 = { flows = 3 }
            limit = 300

            [[extension]]
            name = "log"
            file = "logger.o"

            [[attach]]
            extension = "log"
            port = "wire"

            [[ringbuf]]
            extension = "log"
            name = "events"
            output = "events.jsonl"
        "#;
        std::fs::write(dir.join("adapter.toml"), config).unwrap();
        let args = RunArgs {
            config: dir.join("adapter.toml"),
            duration: Some(60.0),
            json: true,
            prometheus: None,
            trace: None,
            quiet: true,
            socket: None,
            tls_listen: None,
            tls_cert: None,
            tls_key: None,
            token_file: None,
        };
        let code = main(&args).unwrap();
        let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(code, std::process::ExitCode::SUCCESS);
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 300, "one line per packet");
        for (i, l) in lines.iter().enumerate() {
            assert_eq!(l["extension"], "log");
            assert_eq!(l["map"], "events");
            assert_eq!(l["seq"], i as u64);
            assert_eq!(l["len"], 16);
            let data = l["data"].as_str().unwrap();
            // 60-byte frames (length 0x3c, little endian), then the first 8 bytes: a
            // destination MAC and the start of the source MAC.
            assert!(data.starts_with("3c00000000000000"), "{data}");
            assert_eq!(data.len(), 32);
        }
    }
}
