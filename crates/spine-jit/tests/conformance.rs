//! The `bpf_conformance` suite on the JIT: every file must pass, and on every file the
//! JIT must end exactly as the interpreter does (same r0, or the same `Fault`).

use std::path::PathBuf;

use spine_conformance::{run_dir, with_mem, Jit, Unwind, MAX_POINTS};
use spine_jit::{compile, JitOptions};
use spine_vm::{Interpreter, RunLimits, Stack};

/// `SPINE_CONFORMANCE_DIR`, else `shared/conformance/tests` beside the workspace.
fn suite_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SPINE_CONFORMANCE_DIR") {
        return d.into();
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/tests")
}

#[test]
fn jit_passes_the_whole_suite() {
    let dir = suite_dir();
    assert!(dir.is_dir(), "conformance suite not found at {}", dir.display());
    let report = run_dir(&dir, &mut Jit::default()).unwrap_or_else(|e| panic!("{e}"));
    println!("{report}");
    assert_eq!(
        (report.passed.len(), report.failures.len()),
        (313, 0),
        "expected every one of the 313 files to pass:\n{report}"
    );
}

/// Stricter than pass/fail: the same refusal, the same `Fault` (variant, pc, address),
/// the same r0 and the same final memory bytes as the interpreter, file by file; and
/// the same again with every access marked proven and the budget off.
#[test]
fn jit_ends_every_suite_file_exactly_as_the_interpreter() {
    let dir = suite_dir();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("conformance suite not found at {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    files.sort();
    let mut compared = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable test file");
        let case = spine_conformance::parse("t", &text).expect("well-formed test file");
        let insns = match &case.raw {
            Some(raw) => raw.clone(),
            None => spine_isa::assemble(&case.asm).expect("suite program assembles"),
        };
        let name = path.display();
        let limits = RunLimits { points: MAX_POINTS };
        let vm = Interpreter::new(insns.clone());
        let jit = compile(&insns, &JitOptions::default());
        let (vm, jit) = match (vm, jit) {
            (Err(a), Err(spine_jit::JitError::Load(b))) => {
                assert_eq!(a, b, "{name}: different refusals");
                compared += 1;
                continue;
            }
            (Ok(vm), Ok(jit)) => (vm, jit),
            (a, b) => panic!("{name}: interpreter {a:?}, JIT {b:?}"),
        };
        let mut mem_i = case.mem.clone();
        let mut mem_j = case.mem.clone();
        let ri = with_mem(&mut mem_i, |a, m| vm.run(a, m, &mut Stack::new(), &mut Unwind, limits));
        let rj = with_mem(&mut mem_j, |a, m| jit.run(a, m, &mut Stack::new(), &mut Unwind, limits));
        assert_eq!(ri, rj, "{name}");
        assert_eq!(mem_i, mem_j, "{name}: final memory");
        // A run without faults touched only memory in bounds, so the same run may take the
        // verified-code path: no checks, no budget countdown.
        if ri.is_ok() {
            let opts = JitOptions {
                proven: Some(vec![true; insns.len()]),
                budget: false,
                ..JitOptions::default()
            };
            let fast = compile(&insns, &opts).expect("compiles");
            let mut mem_f = case.mem.clone();
            let rf =
                with_mem(&mut mem_f, |a, m| fast.run(a, m, &mut Stack::new(), &mut Unwind, limits));
            assert_eq!(ri, rf, "{name}: proven");
            assert_eq!(mem_i, mem_f, "{name}: final memory, proven");
        }
        compared += 1;
    }
    assert_eq!((files.len(), compared), (313, 313));
}
