//! `spine conformance DIR`: the bpf_conformance suite on spine's engines.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;

/// Prints every failure and the closing line `conformance: N passed, M failed`.
pub fn main(dir: &Path) -> Result<ExitCode> {
    let report = spine_conformance::run_dir(dir, &mut spine_conformance::Interp::default())?;
    println!("{report}");
    Ok(if report.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
