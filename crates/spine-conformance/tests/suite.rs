//! The whole `bpf_conformance` suite on the interpreter: every file must pass.

use std::path::PathBuf;

use spine_conformance::{run_dir, Interp};

/// `SPINE_CONFORMANCE_DIR`, else `shared/conformance/tests` beside the workspace.
fn suite_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SPINE_CONFORMANCE_DIR") {
        return d.into();
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tests")
}

#[test]
fn interpreter_passes_the_whole_suite() {
    let dir = suite_dir();
    assert!(
        dir.is_dir(),
        "conformance suite not found at {} (set SPINE_CONFORMANCE_DIR to its tests/ folder)",
        dir.display()
    );
    let report = run_dir(&dir, &mut Interp::new()).unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
    assert_eq!(
        (report.passed.len(), report.failures.len()),
        (313, 0),
        "expected every one of the 313 files to pass:\n{report}"
    );
}

/// Every suite program survives assemble → disassemble → assemble unchanged, and the
/// disassembler spells all of them with mnemonics (none needs a raw `.insn`).
#[test]
fn every_suite_program_round_trips_through_the_disassembler() {
    let dir = suite_dir();
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("conformance suite not found at {}: {e}", dir.display()));
    let mut checked = 0;
    for entry in entries {
        let path = entry.expect("directory entry").path();
        if path.extension().is_none_or(|e| e != "data") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable test file");
        let case = spine_conformance::parse("t", &text).expect("well-formed test file");
        let p = spine_isa::assemble(&case.asm).expect("suite program assembles");
        let listing = spine_isa::disassemble(&p);
        assert!(!listing.contains(".insn"), "{}:\n{listing}", path.display());
        assert_eq!(spine_isa::assemble(&listing), Ok(p), "{}:\n{listing}", path.display());
        checked += 1;
    }
    assert_eq!(checked, 313);
}
