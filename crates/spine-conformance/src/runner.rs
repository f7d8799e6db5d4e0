//! Running test cases on an [`Engine`] and collecting the verdicts.

use std::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};

use spine_isa::{assemble, disassemble_one, AsmError, Insn};

use crate::engine::{Engine, Outcome};
use crate::parse::{parse, Expected, ParseError, TestCase};

/// Why one test file failed.
#[derive(Debug, thiserror::Error)]
pub enum FailReason {
    #[error("cannot read the file: {0}")]
    Io(#[source] std::io::Error),
    #[error("malformed test file: {0}")]
    Parse(#[from] ParseError),
    #[error("-- asm does not assemble: {0}")]
    Assemble(#[from] AsmError),
    #[error("-- asm assembles to {assembled} slot(s), -- raw has {raw}")]
    RawLength { assembled: usize, raw: usize },
    #[error("slot {slot}: -- asm gives `{assembled}`, -- raw has `{raw}`")]
    RawMismatch { slot: usize, assembled: String, raw: String },
    #[error("expected r0 = {expected:#x}, got {got:#x}")]
    WrongResult { expected: u64, got: u64 },
    #[error("expected an error ({hint}), but the program returned {got:#x}")]
    NoError { hint: String, got: u64 },
    #[error("expected r0 = {expected:#x}, but the engine refused the program: {reason}")]
    Refused { expected: u64, reason: Box<dyn Error + Send + Sync> },
    #[error("expected r0 = {expected:#x}, but the program faulted: {reason}")]
    Faulted { expected: u64, reason: Box<dyn Error + Send + Sync> },
}

/// A failed file, by name.
#[derive(Debug)]
pub struct Failure {
    pub file: String,
    pub reason: FailReason,
}

/// The verdicts of one run over a set of files.
#[derive(Debug)]
pub struct Report {
    pub engine: &'static str,
    /// Names of the files that passed, in run order.
    pub passed: Vec<String>,
    pub failures: Vec<Failure>,
}

impl Report {
    pub fn new(engine: &'static str) -> Self {
        Report { engine, passed: Vec::new(), failures: Vec::new() }
    }

    /// Records one file's verdict.
    pub fn record(&mut self, file: String, verdict: Result<(), FailReason>) {
        match verdict {
            Ok(()) => self.passed.push(file),
            Err(reason) => self.failures.push(Failure { file, reason }),
        }
    }
}

impl fmt::Display for Report {
    /// One `FAIL` line per failure, then exactly `conformance: N passed, M failed`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "engine: {}", self.engine)?;
        for fail in &self.failures {
            writeln!(f, "FAIL {}: {}", fail.file, fail.reason)?;
        }
        write!(f, "conformance: {} passed, {} failed", self.passed.len(), self.failures.len())
    }
}

/// Why a directory could not be run at all.
#[derive(Debug, thiserror::Error)]
#[error("cannot list conformance directory {}: {source}", dir.display())]
pub struct DirError {
    pub dir: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// Runs one parsed case. Where the file has `-- raw`, the assembled `-- asm` must equal it
/// (a check on the assembler) and the raw words are what runs, as in the suite's runner.
pub fn run_case(case: &TestCase, engine: &mut dyn Engine) -> Result<(), FailReason> {
    let assembled = assemble(&case.asm)?;
    let insns: &[Insn] = match &case.raw {
        Some(raw) => {
            check_raw(&assembled, raw)?;
            raw
        }
        None => &assembled,
    };
    let mut mem = case.mem.clone();
    let outcome = engine.run(insns, &mut mem);
    match (&case.expected, outcome) {
        (Expected::Result(want), Outcome::Returned(got)) if *want == got => Ok(()),
        (Expected::Result(want), Outcome::Returned(got)) => {
            Err(FailReason::WrongResult { expected: *want, got })
        }
        (Expected::Result(want), Outcome::Refused(reason)) => {
            Err(FailReason::Refused { expected: *want, reason })
        }
        (Expected::Result(want), Outcome::Faulted(reason)) => {
            Err(FailReason::Faulted { expected: *want, reason })
        }
        (Expected::Error(_), Outcome::Refused(_) | Outcome::Faulted(_)) => Ok(()),
        (Expected::Error(hint), Outcome::Returned(got)) => {
            Err(FailReason::NoError { hint: hint.clone(), got })
        }
    }
}

fn check_raw(assembled: &[Insn], raw: &[Insn]) -> Result<(), FailReason> {
    if let Some(slot) = (0..assembled.len().min(raw.len())).find(|&i| assembled[i] != raw[i]) {
        return Err(FailReason::RawMismatch {
            slot,
            assembled: disassemble_one(assembled, slot),
            raw: disassemble_one(raw, slot),
        });
    }
    if assembled.len() != raw.len() {
        return Err(FailReason::RawLength { assembled: assembled.len(), raw: raw.len() });
    }
    Ok(())
}

/// The file's name without its `.data` extension.
fn case_name(path: &Path) -> String {
    path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into())
}

/// Reads, parses and runs one test file.
pub fn run_file(path: &Path, engine: &mut dyn Engine) -> Result<(), FailReason> {
    let text = std::fs::read_to_string(path).map_err(FailReason::Io)?;
    run_case(&parse(case_name(path), &text)?, engine)
}

/// Runs every `*.data` file of `dir`, in name order.
pub fn run_dir(dir: &Path, engine: &mut dyn Engine) -> Result<Report, DirError> {
    let dir_err = |source| DirError { dir: dir.to_path_buf(), source };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(dir_err)? {
        let path = entry.map_err(dir_err)?.path();
        if path.extension().is_some_and(|e| e == "data") {
            files.push(path);
        }
    }
    files.sort();
    let mut report = Report::new(engine.name());
    for path in files {
        let verdict = run_file(&path, engine);
        report.record(case_name(&path), verdict);
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Interp;

    /// Returns a fixed outcome and records what it was given.
    struct Fake {
        outcome: fn() -> Outcome,
        seen: Vec<(Vec<Insn>, Vec<u8>)>,
    }

    impl Engine for Fake {
        fn name(&self) -> &'static str {
            "fake"
        }
        fn run(&mut self, insns: &[Insn], mem: &mut [u8]) -> Outcome {
            self.seen.push((insns.to_vec(), mem.to_vec()));
            (self.outcome)()
        }
    }

    fn fake(outcome: fn() -> Outcome) -> Fake {
        Fake { outcome, seen: Vec::new() }
    }

    fn case(text: &str) -> TestCase {
        parse("t", text).unwrap()
    }

    #[test]
    fn result_tests_need_the_exact_r0() {
        let c = case("-- asm\nmov %r0, 1\nexit\n-- mem\n01 02\n-- result\n0x1\n");
        let mut e = fake(|| Outcome::Returned(1));
        assert!(run_case(&c, &mut e).is_ok());
        assert_eq!(e.seen[0].1, [1, 2]);
        assert_eq!(e.seen[0].0, assemble("mov %r0, 1\nexit").unwrap());
        let r = run_case(&c, &mut fake(|| Outcome::Returned(2)));
        assert!(matches!(r, Err(FailReason::WrongResult { expected: 1, got: 2 })));
        let r = run_case(&c, &mut fake(|| Outcome::Faulted("boom".into())));
        assert!(matches!(r, Err(FailReason::Faulted { expected: 1, .. })));
        let r = run_case(&c, &mut fake(|| Outcome::Refused("no".into())));
        assert!(matches!(r, Err(FailReason::Refused { expected: 1, .. })));
    }

    #[test]
    fn error_tests_need_a_refusal_or_fault() {
        let c = case("-- asm\nmov %r11, 1\nexit\n-- error\ninvalid register\n");
        assert!(run_case(&c, &mut fake(|| Outcome::Refused("no".into()))).is_ok());
        assert!(run_case(&c, &mut fake(|| Outcome::Faulted("boom".into()))).is_ok());
        let r = run_case(&c, &mut fake(|| Outcome::Returned(0)));
        assert!(matches!(r, Err(FailReason::NoError { got: 0, .. })));
        assert!(run_case(&c, &mut Interp::new()).is_ok());
    }

    #[test]
    fn raw_must_match_the_assembly() {
        let good = "-- asm\nexit\n-- raw\n0x0000000000000095\n-- result\n0x0\n";
        assert!(run_case(&case(good), &mut Interp::new()).is_ok());
        let wrong = "-- asm\nexit\n-- raw\n0x0000000100000095\n-- result\n0x0\n";
        let mut e = fake(|| Outcome::Returned(0));
        match run_case(&case(wrong), &mut e) {
            Err(FailReason::RawMismatch { slot: 0, assembled, raw }) => {
                assert_eq!(assembled, "exit");
                assert_eq!(raw, ".insn 0x0000000100000095");
            }
            other => panic!("{other:?}"),
        }
        assert!(e.seen.is_empty(), "a mismatching file is not run");
        let short = "-- asm\nmov %r0, 0\nexit\n-- raw\n0x00000000000000b7\n-- result\n0x0\n";
        let r = run_case(&case(short), &mut Interp::new());
        assert!(matches!(r, Err(FailReason::RawLength { assembled: 2, raw: 1 })));
    }

    #[test]
    fn unassemblable_asm_fails() {
        let c = case("-- asm\nfrob %r0\n-- result\n0x0\n");
        assert!(matches!(run_case(&c, &mut Interp::new()), Err(FailReason::Assemble(_))));
    }

    #[test]
    fn report_ends_with_the_figure_line() {
        let mut r = Report::new("fake");
        r.record("a".into(), Ok(()));
        r.record("b".into(), Err(FailReason::WrongResult { expected: 1, got: 2 }));
        r.record("c".into(), Ok(()));
        let text = r.to_string();
        assert!(text.contains("FAIL b: expected r0 = 0x1, got 0x2"), "{text}");
        assert_eq!(text.lines().last(), Some("conformance: 2 passed, 1 failed"));
    }

    #[test]
    fn run_dir_reads_data_files_in_order_and_reports_missing_dirs() {
        let dir = std::env::temp_dir().join(format!("spine-conformance-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.data"), "-- asm\nmov %r0, 2\nexit\n-- result\n0x2\n").unwrap();
        std::fs::write(dir.join("a.data"), "-- asm\nmov %r0, 2\nexit\n-- result\n0x3\n").unwrap();
        std::fs::write(dir.join("notes.txt"), "not a test").unwrap();
        let report = run_dir(&dir, &mut Interp::new()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(report.passed, ["b"]);
        assert_eq!(report.failures.len(), 1);
        assert_eq!(report.failures[0].file, "a");
        assert!(run_dir(&dir, &mut Interp::new()).is_err());
    }
}
