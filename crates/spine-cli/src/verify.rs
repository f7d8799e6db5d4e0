//! `spine prog verify`: the load-time verifier on its own, with a log like the kernel's.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Result};
use serde_json::json;
use spine_obj::{Object, ProgType};
use spine_runtime::{verify_program, LoadError, LoadOptions};

use crate::prog::chosen;

/// Verifies the program in `section` (every XDP program when `None`) and reports each.
pub fn main(
    obj: &Object,
    file: &Path,
    section: Option<&str>,
    log_level: u8,
    json: bool,
) -> Result<ExitCode> {
    let progs: Vec<_> = match section {
        Some(s) => vec![chosen(obj, file, Some(s))?],
        None => obj
            .programs
            .iter()
            .filter(|p| matches!(p.prog_type, ProgType::Xdp | ProgType::XdpFrags))
            .collect(),
    };
    if progs.is_empty() {
        bail!("{} has no XDP program", file.display());
    }
    let opts = LoadOptions { log_level, ..LoadOptions::default() };
    let mut all_ok = true;
    let mut reports = Vec::new();
    for p in progs {
        let t = Instant::now();
        let r = verify_program(obj, p, &opts);
        let us = t.elapsed().as_secs_f64() * 1e6;
        all_ok &= r.is_ok();
        match r {
            Ok(v) => {
                let depths: Vec<u32> = v.subprogs.iter().map(|s| s.stack_depth).collect();
                if json {
                    reports.push(json!({
                        "program": p.name, "section": p.section, "verified": true,
                        "insns": p.insns.len(), "insns_processed": v.insns_processed,
                        "peak_states": v.peak_states, "loop_heads": v.loop_heads.len(),
                        "stack_depths": depths, "time_us": us,
                    }));
                } else {
                    if log_level >= 2 {
                        print!("{}", v.log);
                    }
                    println!(
                        "{}: verified ({} insns, {} processed, {} loop heads, peak {} states, stack {:?}) in {:.0} µs",
                        p.name,
                        p.insns.len(),
                        v.insns_processed,
                        v.loop_heads.len(),
                        v.peak_states,
                        depths,
                        us
                    );
                }
            }
            Err(LoadError::Verify { error, .. }) => {
                if json {
                    reports.push(json!({
                        "program": p.name, "section": p.section, "verified": false,
                        "error": {"pc": error.pc, "insn": error.insn, "reason": error.kind.to_string(),
                                  "state": error.state},
                        "log": error.log, "time_us": us,
                    }));
                } else {
                    if log_level >= 1 && !error.log.is_empty() {
                        print!("{}", error.log);
                    }
                    println!("{}: REFUSED\n{error}", p.name);
                }
            }
            Err(e) => {
                if json {
                    reports
                        .push(json!({"program": p.name, "section": p.section, "verified": false,
                                        "error": {"reason": e.to_string()}}));
                } else {
                    println!("{}: REFUSED: {e}", p.name);
                }
            }
        }
    }
    if json {
        let skipped: Vec<_> = obj
            .skipped
            .iter()
            .map(|k| json!({"program": k.name, "section": k.section, "reason": k.reason}))
            .collect();
        println!("{}", json!({ "programs": reports, "skipped": skipped }));
    } else if section.is_none() {
        for k in &obj.skipped {
            println!("{}: skipped: {}", k.name, k.reason);
        }
    }
    Ok(if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}
