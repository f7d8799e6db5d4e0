//! `spine bench control`: the control API's cost, next to the kernel's. Map lookups per
//! second through the client library (HTTP over the Unix socket, connection kept alive)
//! beside `bpf(BPF_MAP_LOOKUP_ELEM)` on a kernel hash map of the same shape, and the
//! same through the remote API (TLS over loopback TCP, bearer token); one
//! `spine map lookup` command beside one `bpftool map lookup` (a process each); and the
//! time to replace an extension while traffic flows (p50/p99 of the API call), with the
//! packets the replacements affected (the target: none).

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use spine_adapter::{Adapter, AdapterOptions, Config};
use spine_control::{serve, Client, ServerConfig};

#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// Seconds each lookup loop runs.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// Commands run for each of `spine map lookup` and `bpftool map lookup`.
    #[arg(long, default_value_t = 100)]
    pub commands: u32,
    /// Replacements under load.
    #[arg(long, default_value_t = 1000)]
    pub replacements: u32,
    #[arg(long)]
    pub json: bool,
}

/// Operations per second of `op` run for `secs`.
fn rate(secs: f64, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed().as_secs_f64() < secs {
        for _ in 0..64 {
            op()?;
        }
        n += 64;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn commands_per_second(n: u32, mut cmd: impl FnMut() -> Command) -> Result<f64> {
    let t0 = Instant::now();
    for _ in 0..n {
        let o = cmd().output().context("running the command")?;
        if !o.status.success() {
            bail!("{}", String::from_utf8_lossy(&o.stderr));
        }
    }
    Ok(f64::from(n) / t0.elapsed().as_secs_f64())
}

pub fn main(a: &ControlArgs) -> Result<()> {
    let machine = super::machine();
    let dir = std::env::temp_dir().join(format!("spine-bench-control-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let r = run(a, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let report = r?;
    if a.json {
        let mut v = report;
        v["machine"] = machine;
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        eprintln!("{}", super::machine_line(&machine));
        let f = |k: &str| report[k].as_f64().unwrap_or(0.0);
        println!(
            "map lookups, hash map (key {} B, value {} B):",
            report["key_size"], report["value_size"]
        );
        println!(
            "  client library over the socket  {:>12.0} /s   bpf(2) syscall {:>12.0} /s   ratio {:.3}",
            f("library_per_s"),
            f("syscall_per_s"),
            f("library_per_s") / f("syscall_per_s")
        );
        println!(
            "  client library over TLS (lo)     {:>12.0} /s   bpf(2) syscall {:>12.0} /s   ratio {:.3}",
            f("remote_per_s"),
            f("syscall_per_s"),
            f("remote_per_s") / f("syscall_per_s")
        );
        println!(
            "  `spine map lookup` command      {:>12.1} /s   `bpftool map lookup` {:>6.1} /s   ratio {:.3}",
            f("cli_per_s"),
            f("bpftool_per_s"),
            f("cli_per_s") / f("bpftool_per_s")
        );
        println!(
            "replace under load ({} replacements): p50 {:.1} µs, p99 {:.1} µs, max {:.1} µs; packets {} received, {} unhandled, {} under neither program",
            report["replacements"],
            f("replace_p50_us"),
            f("replace_p99_us"),
            f("replace_max_us"),
            report["rx_packets"],
            report["unhandled"],
            report["lost"]
        );
    }
    Ok(())
}

fn run(a: &ControlArgs, dir: &Path) -> Result<serde_json::Value> {
    let text = "[adapter]\npin = false\n\n[[port]]\nname = \"wire\"\nkind = \"mem\"\nudp4 = { flows = 16 }\n";
    let cfg = Config::parse(text, dir)?;
    let running = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter))?.start()?;
    let sock = dir.join("spine.sock");
    let pki = spine_control::tls::generate(dir, &[std::net::Ipv4Addr::LOCALHOST.into()], &[])?;
    let mut random = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut random)?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut scfg = ServerConfig::new(&sock);
    scfg.tls = Some(spine_control::TlsConfig {
        addr: "127.0.0.1:0".parse()?,
        cert: pki.cert.clone(),
        key: pki.key.clone(),
        token: token.clone(),
    });
    let server = serve(running.live(), scfg)?;
    let url = format!("https://{}", server.tls_addr().context("the remote address")?);
    let mut c = Client::new(&sock);
    let obj = spine_progs::get("hash_map").context("the bundled hash_map program")?.object;
    c.load("a", obj, None, None)?;
    c.load("b", obj, None, None)?;
    c.attach("a", "wire")?;

    // Lookups of one present key in a hash map of the same shape on both sides.
    let m = c.map_info("a", "flows")?;
    let key: Vec<u8> = (0..m.key_size).map(|i| i as u8).collect();
    let value: Vec<u8> = (0..m.value_size).map(|i| (i * 3) as u8).collect();
    c.update("a", "flows", &key, &value, 0)?;
    let kdef =
        spine_sys::MapDef::new(spine_abi::map_type::HASH, m.key_size, m.value_size, m.max_entries);
    let kmap = spine_sys::KernelMap::create("flows", kdef, None)?;
    kmap.update(&key, &value, 0)?;
    let library = rate(a.seconds, || {
        let v = c.lookup("a", "flows", &key)?;
        anyhow::ensure!(v == value, "the value read back differs");
        Ok(())
    })?;
    let mut rc = Client::remote(&url, &token, &pki.ca)?;
    let remote = rate(a.seconds, || {
        let v = rc.lookup("a", "flows", &key)?;
        anyhow::ensure!(v == value, "the value read back remotely differs");
        Ok(())
    })?;
    let mut out = vec![0u8; value.len()];
    let syscall = rate(a.seconds, || {
        anyhow::ensure!(kmap.lookup(&key, &mut out)?, "the kernel lost the key");
        Ok(())
    })?;
    let exe = std::env::current_exe()?;
    let hexkey: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let cli = commands_per_second(a.commands, || {
        let mut cmd = Command::new(&exe);
        cmd.args(["map", "lookup", "a", "flows", &hexkey, "--socket"]).arg(&sock);
        cmd
    })?;
    let id = kmap.info()?.id.to_string();
    let key_words: Vec<String> = key.iter().map(|b| format!("{b:02x}")).collect();
    let bpftool = commands_per_second(a.commands, || {
        let mut cmd = Command::new("bpftool");
        cmd.args(["map", "lookup", "id", &id, "key", "hex"]).args(&key_words);
        cmd
    })
    .context("bpftool map lookup (bpftool installed, root)")?;

    // Replacements while traffic flows.
    let before = running.totals();
    let mut times = Vec::with_capacity(a.replacements as usize);
    for i in 0..a.replacements {
        let new = if i % 2 == 0 { "b" } else { "a" };
        let t0 = Instant::now();
        c.replace("wire", new)?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    std::thread::sleep(Duration::from_millis(50));
    server.stop();
    let report = running.stop()?;
    let t = &report.totals;
    let w = t.port("wire").context("port wire")?;
    let runs: u64 = t.extensions.iter().map(|e| e.runs).sum();
    times.sort_by(f64::total_cmp);
    let unhandled = w.unhandled - before.port("wire").map_or(0, |p| p.unhandled);
    Ok(serde_json::json!({
        "key_size": m.key_size,
        "value_size": m.value_size,
        "library_per_s": library,
        "syscall_per_s": syscall,
        "remote_per_s": remote,
        "cli_per_s": cli,
        "bpftool_per_s": bpftool,
        "replacements": a.replacements,
        "replace_p50_us": percentile(&times, 0.50),
        "replace_p99_us": percentile(&times, 0.99),
        "replace_max_us": times.last().copied().unwrap_or(0.0),
        "rx_packets": w.rx_packets,
        "unhandled": unhandled,
        "lost": w.rx_packets as i64 - runs as i64 - w.unhandled as i64,
    }))
}
