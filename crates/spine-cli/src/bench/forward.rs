//! `spine bench forward`: packets per second through the whole adapter (mem port
//! receive, the extension on the pool buffer, the verdict acted on, transmit), 64-byte
//! frames, for XDP_DROP, XDP_TX (mac_swap) and port-to-port XDP_REDIRECT, with one
//! worker and with two (each with its own port pair, pinned to its own CPU). Next to
//! each: the kernel's cost of the same program from `BPF_PROG_TEST_RUN` in the same run
//! (program execution only: the kernel's test run moves no packet).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;
use spine_adapter::{AdapterBuilder, AdapterOptions, Assign, Device};
use spine_obj::{Object, ProgType, Program};
use spine_ports::{MemPort, PoolConfig};

use super::{progress, Stat};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Drop,
    Tx,
    Redirect,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::Drop => "XDP_DROP",
            Scenario::Tx => "XDP_TX (mac_swap)",
            Scenario::Redirect => "XDP_REDIRECT port→port",
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    scenario: &'static str,
    workers: usize,
    packets: u64,
    seconds: f64,
    mpps: f64,
    mpps_per_core: f64,
    ns_per_packet: f64,
    /// The kernel's `BPF_PROG_TEST_RUN` ns per run of the same program (median of trials).
    kernel_test_run_ns: Option<f64>,
    /// Over the trials: spine's ns per packet, and the kernel's ns per run.
    trials: usize,
    ns_per_packet_stat: Stat,
    kernel_test_run_ns_stat: Option<Stat>,
    /// spine ns per packet / kernel ns per run, both medians of the trials.
    ratio_to_kernel: Option<f64>,
}

fn asm_object(name: &str, src: &str) -> Result<Object> {
    let insns = spine_isa::assemble(src).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    Ok(Object {
        license: "GPL".into(),
        skipped: Vec::new(),
        btf: None,
        programs: vec![Program {
            name: name.into(),
            section: "xdp".into(),
            prog_type: ProgType::Xdp,
            insns,
            functions: vec![(0, name.into())],
        }],
        maps: Vec::new(),
    })
}

fn program(s: Scenario, ifindex: u32) -> Result<Object> {
    match s {
        Scenario::Drop => asm_object("drop", "mov r0, 1\nexit"),
        Scenario::Tx => {
            Ok(spine_obj::parse(spine_progs::get("mac_swap").context("mac_swap")?.object)?)
        }
        // bpf_redirect(ifindex, 0) is helper 23.
        Scenario::Redirect => {
            asm_object("redirect", &format!("mov r1, {ifindex}\nmov r2, 0\ncall 23\nexit"))
        }
    }
}

/// Kernel ns per run of `obj`'s program on `pkt`, or `None` without bpf(2).
/// Runs on a thread of its own pinned to CPU 0 (the kernel runs the test on the calling
/// CPU), so the caller's affinity is left alone for the workers.
fn kernel_ns(obj: &Object, pkt: &[u8]) -> Option<f64> {
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let _ = spine_sys::pin_current_thread(0);
            let k = spine_sys::load_object_program(obj, &obj.programs[0]).ok()?;
            let run = spine_sys::TestRun { repeat: 1_000_000, ..spine_sys::TestRun::new(pkt) };
            let mut v: Vec<f64> = (0..3)
                .filter_map(|_| k.prog.test_run(&run).ok())
                .map(|o| f64::from(o.duration_ns))
                .collect();
            (!v.is_empty()).then(|| super::median(&mut v))
        })
        .join()
        .ok()
        .flatten()
    })
}

fn measure(s: Scenario, workers: usize, secs: f64, frames: &[Vec<u8>]) -> Result<Row> {
    let ncpu = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let opts = AdapterOptions {
        workers,
        cpus: Some((0..workers).map(|w| w % ncpu).collect()),
        burst: 32,
        assign: Assign::Partition,
        idle_sleep_us: 0,
        pool: PoolConfig::new(8192),
        ..AdapterOptions::default()
    };
    let mut b = AdapterBuilder::new(opts)?;
    for w in 0..workers {
        let port = MemPort::replay(&format!("in{w}"), frames)?;
        let src = b.add_port(&format!("in{w}"), Device::Mem { port, sink: false }, None)?;
        b.set_worker(src, w)?;
        let target = spine_adapter::VIRTUAL_IFINDEX_BASE + src as u32 + 1;
        if s == Scenario::Redirect {
            let out = b.add_port(
                &format!("out{w}"),
                Device::Mem { port: MemPort::sink("out"), sink: true },
                None,
            )?;
            b.set_worker(out, w)?;
        }
        let e =
            b.load_parsed(&format!("ext{w}"), &program(s, target)?, None, "default", "bench")?;
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
    let handled = match s {
        Scenario::Drop => t.ports.iter().map(|p| p.verdicts.drop).sum::<u64>(),
        Scenario::Tx | Scenario::Redirect => t.tx_packets(),
    };
    // Packets received in the last batch before stopping may not have left yet.
    anyhow::ensure!(
        packets.abs_diff(handled) <= 64 * workers as u64,
        "{}: {packets} received but {handled} handled",
        s.name()
    );
    let mpps = packets as f64 / seconds / 1e6;
    Ok(Row {
        scenario: s.name(),
        workers,
        packets,
        seconds,
        mpps,
        mpps_per_core: mpps / workers as f64,
        ns_per_packet: 1e3 / (mpps / workers as f64),
        kernel_test_run_ns: None,
        trials: 1,
        ns_per_packet_stat: Stat::of(vec![1e3 / (mpps / workers as f64)]),
        kernel_test_run_ns_stat: None,
        ratio_to_kernel: None,
    })
}

/// `trials` runs of `s` on `workers` workers, each trial next to a kernel test run of the
/// same program (so a machine that slows down mid-run slows both columns): the row of
/// the median trial, with min/median/max of both figures.
fn measure_trials(
    s: Scenario,
    workers: usize,
    secs: f64,
    frames: &[Vec<u8>],
    kernel: bool,
    trials: usize,
) -> Result<Row> {
    let mut runs = Vec::with_capacity(trials);
    let mut kns = Vec::with_capacity(trials);
    for _ in 0..trials {
        if kernel {
            let obj = program(s, spine_adapter::VIRTUAL_IFINDEX_BASE + 1)?;
            kns.extend(kernel_ns(&obj, &frames[0]));
        }
        runs.push(measure(s, workers, secs, frames)?);
    }
    let ns = Stat::of(runs.iter().map(|r| r.ns_per_packet).collect());
    let k = (!kns.is_empty()).then(|| Stat::of(kns));
    runs.sort_by(|a, b| a.ns_per_packet.total_cmp(&b.ns_per_packet));
    let mut row = runs.swap_remove(runs.len() / 2);
    row.trials = trials;
    row.ns_per_packet_stat = ns;
    row.kernel_test_run_ns = k.map(|k| k.median);
    row.kernel_test_run_ns_stat = k;
    row.ratio_to_kernel = k.filter(|k| k.median > 0.0).map(|k| ns.median / k.median);
    Ok(row)
}

/// `only`: run just this scenario (`drop`, `tx` or `redirect`), e.g. under a profiler;
/// `trials`: how many times each configuration runs (min/median/max shown).
pub fn main(
    seconds: f64,
    trials: usize,
    only: Option<&str>,
    json_out: bool,
    out: Option<&std::path::Path>,
) -> Result<()> {
    let frames: Vec<Vec<u8>> = (0..64u16)
        .map(|i| {
            let flow = spine_ports::craft::Flow4 { src_port: 1000 + i, ..Default::default() };
            let mut f = Vec::new();
            spine_ports::craft::udp4(&mut f, &flow, 18).map(|()| f)
        })
        .collect::<Result<_, _>>()?;
    let kernel = spine_sys::probe().is_ok();
    if !kernel {
        eprintln!("bench: no bpf(2) (root needed); the kernel column stays empty");
    }
    let all = [(Scenario::Drop, "drop"), (Scenario::Tx, "tx"), (Scenario::Redirect, "redirect")];
    let scenarios: Vec<Scenario> =
        all.iter().filter(|(_, n)| only.is_none_or(|o| o == *n)).map(|(s, _)| *s).collect();
    if scenarios.is_empty() {
        anyhow::bail!("--only: no scenario {:?} (drop, tx or redirect)", only.unwrap_or(""));
    }
    let mut rows = Vec::new();
    let total = scenarios.len() * 2;
    for (i, s) in scenarios.iter().enumerate() {
        for (j, workers) in [1, 2].into_iter().enumerate() {
            progress(i * 2 + j, total, s.name());
            rows.push(measure_trials(*s, workers, seconds, &frames, kernel, trials)?);
        }
    }
    progress(total, total, "done");
    eprintln!();
    let doc = json!({
        "benchmark": "forward",
        "frame_bytes": 60,
        "machine": super::machine(),
        "seconds_per_run": seconds,
        "trials": trials,
        "rows": rows,
        "note": "spine: whole path per packet (mem port receive copies a 60-byte template into a pool buffer, JIT run, verdict, transmit/free); kernel: BPF_PROG_TEST_RUN ns per run of the same program (execution only, repeat 1e6, median of 3)",
    });
    if json_out {
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print_table(&rows);
        println!("machine: {}", super::machine_line(&doc["machine"]));
        println!(
            "(median [min-max] of {trials} trial(s); {})",
            doc["note"].as_str().unwrap_or_default()
        );
    }
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("bench-forward.json"), serde_json::to_string_pretty(&doc)?)?;
    }
    Ok(())
}

/// The text table: figures as `median [min-max]` over the trials, the ratio of medians
/// to the kernel, and for two workers the speed-up over one.
fn print_table(rows: &[Row]) {
    println!(
        "{:<24} {:>7} {:>8} {:>24} {:>24} {:>9} {:>8}",
        "scenario", "workers", "Mpps", "ns/packet", "kernel ns/run", "÷kernel", "scaling"
    );
    for r in rows {
        let one = rows.iter().find(|o| o.scenario == r.scenario && o.workers == 1);
        let scaling = match one {
            Some(o) if r.workers > 1 && o.mpps > 0.0 => format!("{:.2}×", r.mpps / o.mpps),
            _ => "-".into(),
        };
        println!(
            "{:<24} {:>7} {:>8.2} {:>24} {:>24} {:>9} {:>8}",
            r.scenario,
            r.workers,
            r.mpps,
            r.ns_per_packet_stat.to_string(),
            r.kernel_test_run_ns_stat.map_or("-".into(), |k| k.to_string()),
            r.ratio_to_kernel.map_or("-".into(), |x| format!("{x:.2}")),
            scaling,
        );
    }
}
