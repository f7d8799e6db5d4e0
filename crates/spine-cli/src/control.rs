//! `spine ext …`, `spine map …` and `spine stats`: the control API of a running adapter
//! (`spine run adapter.toml --socket PATH`) from the command line, shaped like
//! `bpftool`: keys and values as hex bytes in memory order (`0a 00 00 01`, `0a000001`)
//! or a decimal integer stored little-endian in the key's or value's size; `--json` for
//! machines. Errors name the extension, port, map or key.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use spine_control::proto::{hex, Totals};
use spine_control::{Client, DEFAULT_SOCKET};

use crate::mapargs;

/// Where the adapter serves its API, and how to print.
#[derive(Debug, Clone, clap::Args)]
pub struct Conn {
    /// The adapter's control socket.
    #[arg(long, global = true, value_name = "PATH", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
    /// A remote adapter's API instead of the socket: https://HOST:PORT (TLS only;
    /// `spine run … --tls-listen`), with --token or --token-file and --cacert.
    #[arg(long, global = true, value_name = "URL")]
    pub remote: Option<String>,
    /// The remote adapter's bearer token.
    #[arg(long, global = true, value_name = "T", conflicts_with = "token_file")]
    pub token: Option<String>,
    /// A file holding the remote adapter's bearer token (kept off the command line).
    #[arg(long, global = true, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The certificate authorities (PEM) that the remote adapter's certificate must
    /// chain to.
    #[arg(long, global = true, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
}

impl Conn {
    /// A client of the local socket, or of the remote adapter with `--remote`.
    pub fn client(&self) -> Result<Client> {
        let Some(url) = &self.remote else {
            if self.token.is_some() || self.token_file.is_some() || self.cacert.is_some() {
                bail!("--token, --token-file and --cacert go with --remote");
            }
            return Ok(Client::new(&self.socket));
        };
        let token = match (&self.token, &self.token_file) {
            (Some(t), _) => t.clone(),
            (None, Some(f)) => read_token(f)?,
            (None, None) => bail!("--remote {url} needs --token or --token-file"),
        };
        let Some(ca) = &self.cacert else {
            bail!("--remote {url} needs --cacert (the authority its certificate chains to)")
        };
        Ok(Client::remote(url, &token, ca)?)
    }
}

/// A bearer token from a file: its first line, without surrounding white space.
pub fn read_token(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the token file {}", path.display()))?;
    Ok(text.lines().next().unwrap_or("").trim().to_string())
}

#[derive(Debug, clap::Subcommand)]
pub enum ExtCmd {
    /// Every loaded extension: domain, program, size, engine, ports and maps.
    List,
    /// Load the program in SECTION (or the first XDP program) of an ELF object as
    /// extension NAME, verified against its domain exactly as at start-up.
    Load {
        name: String,
        object: PathBuf,
        #[arg(long)]
        section: Option<String>,
        #[arg(long, default_value = "default")]
        domain: String,
    },
    /// Attach extension NAME to PORT's receive hook (the port must have none).
    Attach { name: String, port: String },
    /// Detach whatever runs on PORT.
    Detach { port: String },
    /// Replace the extension on PORT by NAME atomically: every packet runs under one.
    Replace { port: String, name: String },
    /// Unload extension NAME (refused while attached unless --force, which detaches).
    Unload {
        name: String,
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, clap::Subcommand)]
pub enum TlsCmd {
    /// Write a new certificate authority (ca.pem) and a server certificate it signed
    /// (cert.pem, key.pem, ECDSA P-256) for the adapter's addresses and names into OUT:
    /// `spine run … --tls-cert OUT/cert.pem --tls-key OUT/key.pem`, clients
    /// `--cacert OUT/ca.pem`.
    Init {
        /// An IP address the adapter is reached at (repeatable).
        #[arg(long, value_name = "ADDR")]
        ip: Vec<std::net::IpAddr>,
        /// A DNS name the adapter is reached at (repeatable).
        #[arg(long, value_name = "NAME")]
        name: Vec<String>,
        /// The folder to write into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

pub fn tls(cmd: TlsCmd) -> Result<()> {
    match cmd {
        TlsCmd::Init { ip, name, out } => {
            if ip.is_empty() && name.is_empty() {
                bail!("give the adapter's address (--ip) or name (--name) for its certificate");
            }
            std::fs::create_dir_all(&out).with_context(|| format!("{}", out.display()))?;
            let pki = spine_control::tls::generate(&out, &ip, &name)?;
            println!(
                "wrote {} (trust this), {} and {} (mode 0600)",
                pki.ca.display(),
                pki.cert.display(),
                pki.key.display()
            );
            Ok(())
        }
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum MapCmd {
    /// Every map of every loaded extension.
    List,
    /// Every entry of a map.
    Dump { ext: String, map: String },
    /// The value of KEY.
    Lookup { ext: String, map: String, key: String },
    /// Write KEY=VALUE.
    Update {
        ext: String,
        map: String,
        key: String,
        value: String,
        /// any, noexist or exist (BPF_ANY, BPF_NOEXIST, BPF_EXIST).
        #[arg(long, default_value = "any")]
        flags: String,
    },
    /// Delete KEY.
    Delete { ext: String, map: String, key: String },
    /// The value of KEY in a hash map, and the entry deleted at once
    /// (BPF_MAP_LOOKUP_AND_DELETE_ELEM).
    LookupAndDelete {
        ext: String,
        map: String,
        key: String,
        /// Read the value under its bpf_spin_lock (BPF_F_LOCK).
        #[arg(long)]
        lock: bool,
    },
    /// The key after KEY (the first one without KEY).
    NextKey { ext: String, map: String, key: Option<String> },
    /// Take the next element of a queue or stack (push with `update EXT MAP '' VALUE`,
    /// peek with `lookup EXT MAP ''`).
    Pop { ext: String, map: String },
}

pub fn ext(cmd: ExtCmd, conn: &Conn) -> Result<()> {
    let mut c = conn.client()?;
    match cmd {
        ExtCmd::List => {
            let exts = c.extensions()?;
            if conn.json {
                return print_json(&exts);
            }
            println!(
                "{:<4} {:<16} {:<10} {:<20} {:>6} {:<6} {:<16} MAPS",
                "ID", "NAME", "DOMAIN", "PROGRAM", "INSNS", "ENGINE", "PORTS"
            );
            for e in exts {
                println!(
                    "{:<4} {:<16} {:<10} {:<20} {:>6} {:<6} {:<16} {}{}",
                    e.id,
                    e.name,
                    e.domain,
                    e.program,
                    e.insns,
                    e.engine,
                    if e.ports.is_empty() { "-".to_string() } else { e.ports.join(",") },
                    e.maps.join(","),
                    if e.detached { "  (detached by the watchdog)" } else { "" }
                );
            }
        }
        ExtCmd::Load { name, object, section, domain } => {
            let bytes =
                std::fs::read(&object).with_context(|| format!("reading {}", object.display()))?;
            let v = c.load(&name, &bytes, section.as_deref(), Some(&domain)).map_err(|e| {
                let log = e.api().and_then(|a| a.log.clone());
                let e = anyhow::Error::new(e);
                match log {
                    Some(l) => e.context(format!("the verifier's log:\n{l}")),
                    None => e,
                }
            })?;
            if conn.json {
                return print_json(&v);
            }
            println!(
                "loaded '{}' (program {}, {} insns, {}) into domain '{}'",
                v.name, v.program, v.insns, v.engine, v.domain
            );
        }
        ExtCmd::Attach { name, port } => {
            let a = c.attach(&name, &port)?;
            if conn.json {
                return print_json(&a);
            }
            println!("'{name}' attached to port '{port}'");
        }
        ExtCmd::Detach { port } => {
            let a = c.detach(&port)?;
            if conn.json {
                return print_json(&a);
            }
            println!("'{}' detached from port '{port}'", a.previous.unwrap_or_default());
        }
        ExtCmd::Replace { port, name } => {
            let a = c.replace(&port, &name)?;
            if conn.json {
                return print_json(&a);
            }
            println!("port '{port}': '{}' replaced by '{name}'", a.previous.unwrap_or_default());
        }
        ExtCmd::Unload { name, force } => {
            c.unload(&name, force)?;
            if conn.json {
                return print_json(&serde_json::json!({ "unloaded": name }));
            }
            println!("'{name}' unloaded");
        }
    }
    Ok(())
}

/// A key or value from the command line, sized for the map.
fn arg_bytes(s: &str, size: usize, what: &str, ext: &str, map: &str) -> Result<Vec<u8>> {
    // A queue's or stack's key: none (`''` on the command line).
    if size == 0 && s.trim().is_empty() {
        return Ok(Vec::new());
    }
    let b = mapargs::bytes(s).with_context(|| {
        format!(
            "extension '{ext}', map '{map}': {what} '{s}' is neither a decimal integer nor hex bytes"
        )
    })?;
    b.to_size(size).with_context(|| {
        format!("extension '{ext}', map '{map}': {what} '{s}' does not fit its {size} bytes")
    })
}

fn flags(s: &str) -> Result<u64> {
    Ok(match s {
        "any" => 0,
        "noexist" => 1,
        "exist" => 2,
        other => bail!("--flags '{other}': expected any, noexist or exist"),
    })
}

pub fn map(cmd: MapCmd, conn: &Conn) -> Result<()> {
    let mut c = conn.client()?;
    match cmd {
        MapCmd::List => {
            let maps = c.maps()?;
            if conn.json {
                return print_json(&maps);
            }
            println!(
                "{:<16} {:<16} {:<14} {:>5} {:>6} {:>8} FLAGS",
                "EXTENSION", "MAP", "TYPE", "KEY", "VALUE", "ENTRIES"
            );
            for m in maps {
                println!(
                    "{:<16} {:<16} {:<14} {:>5} {:>6} {:>8} {:#x}",
                    m.extension,
                    m.name,
                    m.map_type,
                    m.key_size,
                    m.value_size,
                    m.max_entries,
                    m.flags
                );
            }
        }
        MapCmd::Dump { ext, map } => {
            let d = c.dump(&ext, &map)?;
            if conn.json {
                return print_json(&d);
            }
            for e in &d.entries {
                println!("key: {}  value: {}", e.key, e.value);
                // From the object's BTF, as bpftool prints it.
                if let Some(f) = &e.formatted {
                    println!("  {f}");
                }
            }
            println!(
                "Found {} element{}",
                d.entries.len(),
                if d.entries.len() == 1 { "" } else { "s" }
            );
        }
        MapCmd::Lookup { ext, map, key } => {
            let info = c.map_info(&ext, &map)?;
            let k = arg_bytes(&key, info.key_size as usize, "key", &ext, &map)?;
            let v = c.lookup(&ext, &map, &k)?;
            if conn.json {
                return print_json(&serde_json::json!({ "key": hex(&k), "value": hex(&v) }));
            }
            println!("key: {}  value: {}", hex(&k), hex(&v));
        }
        MapCmd::Update { ext, map, key, value, flags: f } => {
            let info = c.map_info(&ext, &map)?;
            let k = arg_bytes(&key, info.key_size as usize, "key", &ext, &map)?;
            let v = arg_bytes(&value, info.value_size as usize, "value", &ext, &map)?;
            c.update(&ext, &map, &k, &v, flags(&f)?)?;
            if conn.json {
                return print_json(&serde_json::json!({ "key": hex(&k), "value": hex(&v) }));
            }
        }
        MapCmd::Delete { ext, map, key } => {
            let info = c.map_info(&ext, &map)?;
            let k = arg_bytes(&key, info.key_size as usize, "key", &ext, &map)?;
            c.delete(&ext, &map, &k)?;
            if conn.json {
                return print_json(&serde_json::json!({ "deleted": hex(&k) }));
            }
        }
        MapCmd::LookupAndDelete { ext, map, key, lock } => {
            let info = c.map_info(&ext, &map)?;
            let k = arg_bytes(&key, info.key_size as usize, "key", &ext, &map)?;
            let f = if lock { spine_abi::update_flags::LOCK } else { 0 };
            let v = c.lookup_and_delete(&ext, &map, &k, f)?;
            if conn.json {
                return print_json(&serde_json::json!({ "key": hex(&k), "value": hex(&v) }));
            }
            println!("key: {}  value: {}  (deleted)", hex(&k), hex(&v));
        }
        MapCmd::NextKey { ext, map, key } => {
            let info = c.map_info(&ext, &map)?;
            let k = key
                .map(|k| arg_bytes(&k, info.key_size as usize, "key", &ext, &map))
                .transpose()?;
            let next = c.next_key(&ext, &map, k.as_deref())?;
            if conn.json {
                return print_json(&serde_json::json!({ "next_key": next.as_deref().map(hex) }));
            }
            match next {
                Some(n) => println!("next key: {}", hex(&n)),
                None => println!("no next key"),
            }
        }
        MapCmd::Pop { ext, map } => {
            let v = c.pop(&ext, &map)?;
            if conn.json {
                return print_json(&serde_json::json!({ "value": v.as_deref().map(hex) }));
            }
            match v {
                Some(v) => println!("value: {}", hex(&v)),
                None => println!("empty"),
            }
        }
    }
    Ok(())
}

#[derive(Debug, clap::Subcommand)]
pub enum TraceCmd {
    /// Start recording every worker's events (packets then run one by one).
    Start {
        /// Events kept per worker (the oldest are overwritten).
        #[arg(long, default_value_t = 65_536)]
        events: usize,
    },
    /// Stop recording; the trace is kept for `get`.
    Stop,
    /// The last stopped trace in the Chrome/Perfetto trace format (ui.perfetto.dev).
    Get {
        /// Write it to FILE instead of standard output.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

pub fn trace(cmd: TraceCmd, conn: &Conn) -> Result<()> {
    let mut c = conn.client()?;
    match cmd {
        TraceCmd::Start { events } => {
            c.trace_start(Some(events))?;
            if !conn.json {
                println!("tracing ({events} events per worker)");
            }
        }
        TraceCmd::Stop => {
            c.trace_stop()?;
            if !conn.json {
                println!("trace stopped");
            }
        }
        TraceCmd::Get { out } => {
            let t = c.trace_get()?;
            let text = serde_json::to_string(&t)?;
            match out {
                Some(p) => {
                    std::fs::write(&p, text)
                        .with_context(|| format!("writing the trace to {}", p.display()))?;
                    let n = t["traceEvents"].as_array().map_or(0, Vec::len);
                    eprintln!("{n} trace events written to {}", p.display());
                }
                None => println!("{text}"),
            }
        }
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Keep printing new lines until Ctrl-C.
    #[arg(long, short)]
    pub follow: bool,
    /// Print the records of ring buffer MAP of extension EXT instead (one JSON line each,
    /// as a `[[ringbuf]]` output writes them); the adapter consumes the ring for its
    /// followers.
    #[arg(long, value_name = "EXT/MAP")]
    pub ring: Option<String>,
}

/// `spine log [-f] [--ring EXT/MAP]`: the adapter's `bpf_trace_printk` lines and watchdog
/// events, or a ring buffer's records.
pub fn log(args: &LogArgs, conn: &Conn) -> Result<()> {
    let ring = match &args.ring {
        Some(r) => match r.split_once('/') {
            Some((e, m)) if !e.is_empty() && !m.is_empty() => Some((e, m)),
            _ => anyhow::bail!("--ring {r}: expected EXT/MAP"),
        },
        None => None,
    };
    let mut c = conn.client()?;
    if args.follow && !spine_adapter::sys::catch_sigint() {
        eprintln!("spine: could not catch Ctrl-C");
    }
    let mut after = 0;
    loop {
        // (sequence numbers, lines to print, next) of one page.
        let (seqs, lines, next): (Vec<u64>, Vec<String>, u64) = match ring {
            Some((ext, map)) => {
                let page = c.ring_since(ext, map, after)?;
                let lines = page
                    .records
                    .iter()
                    .map(|r| {
                        crate::run::record_line(
                            ext,
                            map,
                            r.seq,
                            r.time_s,
                            r.data.len() / 2,
                            &r.data,
                        )
                    })
                    .collect();
                (page.records.iter().map(|r| r.seq).collect(), lines, page.next)
            }
            None => {
                let page = c.log_since(after)?;
                let lines = page
                    .lines
                    .iter()
                    .map(|l| {
                        if conn.json {
                            serde_json::to_string(l).map_err(anyhow::Error::from)
                        } else {
                            Ok(format!(
                                "[{:12.6}] worker{} {}: {}",
                                l.time_s, l.worker, l.kind, l.text
                            ))
                        }
                    })
                    .collect::<Result<_>>()?;
                (page.lines.iter().map(|l| l.seq).collect(), lines, page.next)
            }
        };
        for (seq, line) in seqs.iter().zip(&lines) {
            if after != 0 && *seq > after + 1 {
                let what = if ring.is_some() { "records" } else { "lines" };
                eprintln!(
                    "spine: {} {what} were overwritten before they were read",
                    seq - after - 1
                );
            }
            after = *seq;
            println!("{line}");
        }
        after = after.max(next);
        if !args.follow || spine_adapter::sys::sigint_received() {
            break;
        }
        if lines.is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Ok(())
}

#[derive(Debug, clap::Args)]
pub struct StatsArgs {
    /// Print a line every SECS seconds until Ctrl-C.
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "1")]
    pub watch: Option<f64>,
    /// The Prometheus text (GET /metrics) instead.
    #[arg(long)]
    pub prometheus: bool,
}

pub fn stats(args: &StatsArgs, conn: &Conn) -> Result<()> {
    let mut c = conn.client()?;
    if args.prometheus {
        print!("{}", c.metrics()?);
        return Ok(());
    }
    let Some(every) = args.watch else {
        let t = c.stats()?;
        if conn.json {
            return print_json(&t);
        }
        print!("{}", crate::run::totals_text(&t));
        return Ok(());
    };
    if !spine_adapter::sys::catch_sigint() {
        eprintln!("spine: could not catch Ctrl-C");
    }
    let every = Duration::from_secs_f64(every.max(0.1));
    let mut last: (Instant, Totals) = (Instant::now(), c.stats()?);
    while !spine_adapter::sys::sigint_received() {
        std::thread::sleep(every);
        let now = c.stats()?;
        if conn.json {
            println!("{}", serde_json::to_string(&now)?);
        } else {
            println!("{}", crate::run::live_line(&last.1, &now, last.0.elapsed().as_secs_f64()));
        }
        last = (Instant::now(), now);
    }
    Ok(())
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}
