//! `spine demo`: the main job on its built-in default — the bundled header parser over
//! the bundled capture — and `spine gen`, which made that capture.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use spine_adapter::AdapterOptions;
use spine_runtime::{load_object, EngineKind, Frame, Geometry, LoadOptions, RxInfo, XdpRunner};

use crate::host::CliHost;
use crate::prog::Counts;

/// 1,000 packets from `spine gen --count 1000 --seed 1`: a realistic mix of IPv4, IPv6,
/// VLAN and ARP traffic with truncated and malformed packets among them.
const CAPTURE: &[u8] = include_bytes!("../../../data/demo.pcap");
const PROGRAM: &str = "parser";
/// Passes over the capture when measuring the per-packet cost.
const TIMING_PASSES: usize = 20;

pub fn main(json: bool) -> Result<ExitCode> {
    let bundled = spine_progs::get(PROGRAM).context("bundled program missing")?;
    let obj = spine_obj::parse(bundled.object).context("parsing the bundled program")?;
    let loaded =
        load_object(&obj, &LoadOptions { engine: EngineKind::Jit, ..LoadOptions::default() })?;
    let ext = loaded.program(None)?.clone();
    let mut runner = XdpRunner::new(ext.clone(), 0)?;
    let capture = spine_ports::read_capture(CAPTURE).context("reading the bundled capture")?;
    let mut host = CliHost::new();
    host.echo = false;
    let mut frame = Frame::new(Geometry::TEST_RUN);

    let mut counts = Counts::default();
    for pkt in &capture.packets {
        if frame.load(&pkt.data).is_err() {
            counts.unfit += 1;
            continue;
        }
        counts.add(&runner.run(&mut frame, RxInfo::default(), &mut host));
    }

    // Cost: further passes, timing only the program runs.
    let mut busy = std::time::Duration::ZERO;
    let mut runs = 0u64;
    for _ in 0..TIMING_PASSES {
        for pkt in &capture.packets {
            if frame.load(&pkt.data).is_err() {
                continue;
            }
            let t = Instant::now();
            let _ = runner.run(&mut frame, RxInfo::default(), &mut host);
            busy += t.elapsed();
            runs += 1;
        }
    }
    let ns = busy.as_nanos() as f64 / runs.max(1) as f64;

    if json {
        let mut v = counts.to_json(capture.packets.len(), ns);
        v["program"] = json!(PROGRAM);
        v["summary"] = json!(bundled.summary);
        v["engine"] = json!("jit");
        println!("{v}");
        return Ok(ExitCode::SUCCESS);
    }
    println!("spine demo: bundled program '{PROGRAM}', verified and compiled by the JIT");
    println!("  {}", bundled.summary);
    println!(
        "capture: {} packets (bundled: `spine gen --count 1000 --seed 1`)",
        capture.packets.len()
    );
    counts.print(capture.packets.len(), ns, false);
    for m in ext.maps().data_maps() {
        let d = m.def();
        println!(
            "map {}: {} ({} entries max)",
            d.name,
            spine_abi::map_type::name(d.map_type),
            d.max_entries
        );
    }
    adapter()?;
    Ok(ExitCode::SUCCESS)
}

/// The adapter the demo runs for a second: two pinned workers, the same parser on a port
/// replaying the generator's mix (what it passes goes to a sink standing in for the host),
/// and mac_swap reflecting minimum-size UDP frames (XDP_TX), each in its own domain.
const ADAPTER: &str = r#"
[adapter]
workers = 2
[[port]]
name = "edge"
kind = "mem"
generate = { count = 1000, seed = 1 }
host_path = "host"
[[port]]
name = "host"
kind = "mem"
[[port]]
name = "reflector"
kind = "mem"
udp4 = { flows = 64, size = 60 }
[[domain]]
name = "firewall"
helpers = ["map_lookup_elem", "map_update_elem"]
[[domain]]
name = "lab"
ports = ["reflector"]
[[extension]]
bundled = "parser"
domain = "firewall"
[[extension]]
bundled = "mac_swap"
domain = "lab"
[[attach]]
extension = "parser"
port = "edge"
[[attach]]
extension = "mac_swap"
port = "reflector"
"#;

/// Runs [`ADAPTER`] for a second and prints its totals, as `spine run` does.
fn adapter() -> Result<()> {
    let cfg = spine_adapter::Config::parse(ADAPTER, Path::new("."))
        .context("the demo's built-in adapter configuration")?;
    let adapter =
        spine_adapter::Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter))?;
    let running = adapter.start()?;
    std::thread::sleep(std::time::Duration::from_secs(1));
    let report = running.stop()?;
    println!();
    println!(
        "the adapter (`spine run`, built-in configuration): 2 workers, parser on generated \
         traffic, mac_swap reflecting 64-byte UDP frames"
    );
    print!("{}", crate::run::totals_text(&report.totals));
    Ok(())
}

pub fn gen(out: &Path, count: usize, seed: u64, max_len: usize) -> Result<ExitCode> {
    let cfg = spine_ports::gen::GenConfig { seed, max_len, ..Default::default() };
    let mut g = spine_ports::gen::Generator::new(cfg)?;
    let f = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut w = spine_ports::PcapWriter::new(std::io::BufWriter::new(f), 1, 65535)?;
    let mut buf = Vec::new();
    for i in 0..count {
        g.next_into(&mut buf);
        w.write(i as u64 * 1_000, &buf)?;
    }
    w.finish()?;
    println!("wrote {count} packets to {}", out.display());
    Ok(ExitCode::SUCCESS)
}
