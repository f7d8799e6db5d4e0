//! `spine conformance DIR`: the bpf_conformance suite on spine's engines.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueEnum;
use spine_conformance::{run_dir, Engine, Interp, Jit};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Engines {
    Interp,
    Jit,
    /// Both engines, one report each.
    All,
}

/// Prints every failure and, per engine, the closing line `conformance: N passed, M failed`.
pub fn main(dir: &Path, engines: Engines) -> Result<ExitCode> {
    let mut chosen: Vec<Box<dyn Engine>> = Vec::new();
    if matches!(engines, Engines::Interp | Engines::All) {
        chosen.push(Box::new(Interp::default()));
    }
    if matches!(engines, Engines::Jit | Engines::All) {
        chosen.push(Box::new(Jit::default()));
    }
    let mut ok = true;
    for mut e in chosen {
        let report = run_dir(dir, e.as_mut())?;
        println!("{report}");
        ok &= report.failures.is_empty();
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
