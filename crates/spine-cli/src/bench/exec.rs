//! `spine bench exec`: the cost of running each bundled program on the interpreter, on the
//! JIT (with and without the watchdog's countdown) and in the kernel
//! (`BPF_PROG_TEST_RUN`), on the same packets, in one run; and the time to load, verify
//! and compile a 1,000-instruction program.
//!
//! Each side runs every packet `repeat` times on one buffer, the way the kernel's test
//! run repeats (changes pile up identically on both sides, since spine matches the
//! kernel's semantics); a figure is the median over `trials` of the mean ns per run. The
//! thread is pinned to one CPU, where the kernel also runs its test.

use std::time::Instant;

use anyhow::{Context, Result};
use serde_json::json;
use spine_obj::Object;
use spine_runtime::{
    load_object, Budget, EngineKind, FixedHost, Frame, Geometry, LoadOptions, RxInfo, XdpRunner,
};

use super::{median, progress, svg, Stat};

/// Packets each program runs on: the generator's mix, well-formed and malformed.
const PACKETS: usize = 8;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub program: String,
    pub interp_ns: f64,
    pub jit_ns: f64,
    pub jit_no_watchdog_ns: f64,
    pub kernel_ns: Option<f64>,
    /// min/median/max over the trials of the JIT (with watchdog) and of the kernel.
    pub jit_stat: Stat,
    pub kernel_stat: Option<Stat>,
}

impl Row {
    fn kernel_over_jit(&self) -> Option<f64> {
        self.kernel_ns.map(|k| k / self.jit_ns)
    }
    fn interp_over_jit(&self) -> f64 {
        self.interp_ns / self.jit_ns
    }
    fn watchdog_pct(&self) -> f64 {
        (self.jit_ns / self.jit_no_watchdog_ns - 1.0) * 100.0
    }
}

/// `only`: one bundled program's row, or `"load"` for the load time alone.
pub fn main(
    repeat: u32,
    trials: usize,
    only: Option<&str>,
    json: bool,
    out: Option<&std::path::Path>,
) -> Result<()> {
    if let Err(e) = spine_sys::pin_current_thread(0) {
        eprintln!("bench: could not pin to CPU 0 ({e}); figures will be noisier");
    }
    let kernel = match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("bench: the kernel side needs bpf(2) (root); skipping it: {e}");
            false
        }
    };
    let gen = spine_ports::gen::GenConfig { seed: 42, ..Default::default() };
    let packets = spine_ports::gen::Generator::new(gen)?.take(PACKETS);
    let all: Vec<_> =
        spine_progs::all().iter().filter(|b| only.is_none_or(|o| o == b.name)).collect();
    if let Some(o) = only.filter(|&o| o != "load" && all.is_empty()) {
        anyhow::bail!("no bundled program `{o}` (or `load` for the load time alone)");
    }
    let mut rows = Vec::new();
    for (i, b) in all.iter().enumerate() {
        progress(i, all.len(), b.name);
        let obj = spine_obj::parse(b.object).with_context(|| b.name.to_string())?;
        let mut interp = Vec::new();
        let mut jit = Vec::new();
        let mut jit_bare = Vec::new();
        let mut kern = Vec::new();
        for _ in 0..trials {
            interp.push(spine_ns(&obj, EngineKind::Interpreter, true, &packets, repeat)?);
            jit.push(spine_ns(&obj, EngineKind::Jit, true, &packets, repeat)?);
            jit_bare.push(spine_ns(&obj, EngineKind::Jit, false, &packets, repeat)?);
            if kernel {
                kern.push(kernel_ns(&obj, &packets, repeat)?);
            }
        }
        let jit_stat = Stat::of(jit.clone());
        let kernel_stat = kernel.then(|| Stat::of(kern.clone()));
        rows.push(Row {
            program: b.name.to_string(),
            jit_stat,
            kernel_stat,
            interp_ns: median(&mut interp),
            jit_ns: median(&mut jit),
            jit_no_watchdog_ns: median(&mut jit_bare),
            kernel_ns: kernel.then(|| median(&mut kern)),
        });
    }
    progress(all.len(), all.len(), "load + verify + JIT");
    let load = match only {
        None | Some("load") => Some(load_time(trials.max(5))?),
        Some(_) => None,
    };
    eprintln!();

    if json {
        let programs: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "program": r.program, "interp_ns": r.interp_ns, "jit_ns": r.jit_ns,
                    "jit_no_watchdog_ns": r.jit_no_watchdog_ns, "kernel_ns": r.kernel_ns,
                    "kernel_over_jit": r.kernel_over_jit(), "interp_over_jit": r.interp_over_jit(),
                    "watchdog_overhead_pct": r.watchdog_pct(),
                    "jit_ns_stat": r.jit_stat, "kernel_ns_stat": r.kernel_stat,
                })
            })
            .collect();
        println!(
            "{}",
            json!({"machine": super::machine(), "repeat": repeat, "trials": trials, "packets": PACKETS, "programs": programs,
                   "load_verify_jit": load.map(|(insns, ms)| json!({"insns": insns, "ms": ms}))})
        );
    } else {
        if !rows.is_empty() {
            println!(
                "{:<12} {:>10} {:>10} {:>10} {:>10}   {:>10} {:>10} {:>9}",
                "program",
                "interp ns",
                "jit ns",
                "no-wd ns",
                "kernel ns",
                "kernel/jit",
                "interp/jit",
                "watchdog"
            );
            for r in &rows {
                println!(
                    "{:<12} {:>10.1} {:>10.1} {:>10.1} {:>10}   {:>10} {:>10.1} {:>8.1}%",
                    r.program,
                    r.interp_ns,
                    r.jit_ns,
                    r.jit_no_watchdog_ns,
                    r.kernel_ns.map_or("-".into(), |k| format!("{k:.1}")),
                    r.kernel_over_jit().map_or("-".into(), |x| format!("{x:.2}")),
                    r.interp_over_jit(),
                    r.watchdog_pct()
                );
            }
        }
        if let Some((insns, ms)) = load {
            println!(
                "load + verify + JIT of a {insns}-instruction program: {ms:.2} ms (median of {})",
                trials.max(5)
            );
        }
        if !rows.is_empty() {
            println!("\nspread over the trials, ns per run: median [min-max]");
            println!("{:<12} {:>24} {:>24}", "program", "jit", "kernel");
            for r in &rows {
                let k = r.kernel_stat.map_or("-".into(), |k| k.to_string());
                println!("{:<12} {:>24} {:>24}", r.program, r.jit_stat.to_string(), k);
            }
        }
        println!("machine: {}", super::machine_line(&super::machine()));
        println!("(ns per run, median of {trials} trials × {PACKETS} packets × {repeat} runs; kernel/jit > 1 means the JIT is faster)");
    }
    if let Some(dir) = out {
        std::fs::create_dir_all(dir)?;
        let doc = json!({"machine": super::machine(), "rows": rows});
        let j = serde_json::to_string_pretty(&doc)?;
        std::fs::write(dir.join("bench-exec.json"), j)?;
        let series: Vec<(&str, Vec<f64>)> = vec![
            ("interpreter", rows.iter().map(|r| r.interp_ns).collect()),
            ("JIT", rows.iter().map(|r| r.jit_ns).collect()),
            ("kernel JIT", rows.iter().map(|r| r.kernel_ns.unwrap_or(0.0)).collect()),
        ];
        let labels: Vec<&str> = rows.iter().map(|r| r.program.as_str()).collect();
        let plot = svg::bars("ns per run (log scale)", &labels, &series, true);
        std::fs::write(dir.join("bench-exec.svg"), plot)?;
        eprintln!("bench: wrote {}/bench-exec.json and bench-exec.svg", dir.display());
    }
    Ok(())
}

/// Mean ns per run of `obj`'s first program over `packets`, each run `repeat` times.
fn spine_ns(
    obj: &Object,
    engine: EngineKind,
    watchdog: bool,
    packets: &[Vec<u8>],
    repeat: u32,
) -> Result<f64> {
    let loaded = load_object(obj, &LoadOptions { engine, watchdog, ..LoadOptions::default() })?;
    let ext = loaded.program(None)?.clone();
    // Timing must not depend on the fault path: a generous budget, checked as usual.
    let mut runner =
        XdpRunner::new(ext, 0)?.with_budget(Budget { ns: 1_000_000_000, ..Budget::default() });
    let mut host = FixedHost::new(1);
    let mut frame = Frame::new(Geometry::TEST_RUN);
    let mut total = 0.0;
    for p in packets {
        frame.load(p)?;
        let t = Instant::now();
        for _ in 0..repeat {
            let _ = std::hint::black_box(runner.run(&mut frame, RxInfo::default(), &mut host));
        }
        total += t.elapsed().as_nanos() as f64 / f64::from(repeat);
    }
    Ok(total / packets.len() as f64)
}

/// The kernel's own mean ns per run (its test run's `duration`), over the same packets.
fn kernel_ns(obj: &Object, packets: &[Vec<u8>], repeat: u32) -> Result<f64> {
    let prog = obj.program(None).context("no program")?;
    let k = spine_sys::load_object_program(obj, prog)?;
    let mut total = 0.0;
    for p in packets {
        let out = k.prog.test_run(&spine_sys::TestRun { repeat, ..spine_sys::TestRun::new(p) })?;
        total += f64::from(out.duration_ns);
    }
    Ok(total / packets.len() as f64)
}

/// A 1,000-instruction XDP program of the usual shape: bounds-checked packet reads,
/// arithmetic, branches and array-map lookups; and the median ms to load, verify and
/// compile it.
fn load_time(trials: usize) -> Result<(usize, f64)> {
    let obj = spine_obj::synthetic(1000);
    let insns = obj.programs[0].insns.len();
    let mut ms = Vec::new();
    for _ in 0..trials {
        let t = Instant::now();
        let loaded = load_object(&obj, &LoadOptions::default())?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        drop(loaded);
    }
    Ok((insns, median(&mut ms)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_synthetic_program_has_exactly_the_size_asked_and_loads() {
        let obj = spine_obj::synthetic(1000);
        assert_eq!(obj.programs[0].insns.len(), 1000);
        let loaded = spine_runtime::load_object(&obj, &Default::default()).expect("verifies");
        assert_eq!(loaded.programs[0].insns().len(), 1000);
    }
}
