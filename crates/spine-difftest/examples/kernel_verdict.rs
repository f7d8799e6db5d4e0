//! The kernel's verdict alone on one program of an object, loaded as `prog test --kernel`
//! loads it (spine's own loader conventions, legacy `maps` sections included): the
//! check for "does the kernel accept it" when spine refuses the program first.
//!
//! `cargo run -p spine-difftest --example kernel_verdict -- OBJ SECTION [MAP=N]...` (root,
//! bpf(2)); `MAP=N` sizes a map as `--max-entries` does.
//! Prints `kernel: loaded` or `kernel: refused: <reason>`; exits 1 when refused.

use std::process::ExitCode;

use spine_obj::{ParseOptions, ProgType};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(section)) = (args.first(), args.get(1)) else {
        eprintln!("usage: kernel_verdict OBJ SECTION");
        return ExitCode::from(2);
    };
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let opts = ParseOptions {
        section_types: vec![(section.clone(), ProgType::Xdp)],
        target_btf: spine_sys::kernel_btf(),
        max_entries: args[2..]
            .iter()
            .filter_map(|a| {
                let (name, n) = a.split_once('=')?;
                Some((name.to_string(), n.parse().ok()?))
            })
            .collect(),
    };
    // SECTION may name a function in a known section (the selftests' many programs under
    // one `SEC("xdp")`): then no type is forced on it, as `prog verify --section` does.
    let parsed = match spine_obj::parse_with(&bytes, &opts) {
        Err(spine_obj::ObjError::NoSuchSection { .. }) => {
            spine_obj::parse_with(&bytes, &ParseOptions { section_types: Vec::new(), ..opts })
        }
        r => r,
    };
    let obj = match parsed {
        Ok(o) => o,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let Ok(prog) = spine_runtime::select_program(&obj, Some(section)) else {
        eprintln!("{path}: no program '{section}'");
        return ExitCode::from(2);
    };
    match spine_sys::load_object_program(&obj, prog) {
        Ok(_) => {
            println!("kernel: loaded");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("kernel: refused: {e}");
            ExitCode::from(1)
        }
    }
}
