//! Runner for the `bpf_conformance` ISA suite: parses its `.data` files, assembles
//! them with [`spine_isa::assemble`], runs them on any [`Engine`] and reports
//! `conformance: N passed, M failed`.
//!
//! Engine-agnostic: the interpreter ([`Interp`]) is one implementation; the JIT plugs in
//! by implementing [`Engine`].
#![deny(unsafe_code)]

mod engine;
mod parse;
mod runner;

pub use engine::{with_mem, Engine, Interp, Jit, Outcome, Unwind, MAX_POINTS, UNWIND};
pub use parse::{parse, Expected, ParseError, ParseErrorKind, TestCase};
pub use runner::{run_case, run_dir, run_file, DirError, FailReason, Failure, Report};
