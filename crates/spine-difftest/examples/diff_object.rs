//! Runs any XDP object through spine and the kernel side by side on generated packets:
//! the check a program written elsewhere gets before it is trusted to run unchanged.
//!
//! `cargo run --release -p spine-difftest --example diff_object -- OBJ [SECTION] [PACKETS]`
//! (needs root for bpf(2)). Exits non-zero on any disagreement.

use std::process::ExitCode;

use spine_difftest::Pair;
use spine_ports::gen::{GenConfig, Generator};
use spine_runtime::EngineKind;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: diff_object OBJ [SECTION] [PACKETS]");
        return ExitCode::from(2);
    };
    let section = args.get(1).map(String::as_str).filter(|s| !s.is_empty());
    let count = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(2_000);
    let object = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    // Within one frame: the kernel splits longer test frames into fragments.
    let cfg = GenConfig { seed: 9, max_len: 3520, ..GenConfig::default() };
    let packets = match Generator::new(cfg) {
        Ok(mut g) => g.take(count),
        Err(e) => {
            eprintln!("generator: {e}");
            return ExitCode::from(2);
        }
    };
    // The kernel runs a test on the calling CPU; spine must fill the same per-CPU slots.
    if let Err(e) = spine_sys::pin_current_thread(0) {
        eprintln!("pinning to CPU 0: {e}");
        return ExitCode::from(2);
    }
    let mut ok = true;
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let report = Pair::load(&object, section, 0, engine).and_then(|mut p| p.run(&packets, 5));
        match report {
            Ok(r) => {
                println!("{path} ({engine:?}): {r}");
                for m in &r.mismatches {
                    println!("  {m}");
                }
                ok &= r.mismatches.is_empty();
            }
            Err(e) => {
                println!("{path} ({engine:?}): {e}");
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
