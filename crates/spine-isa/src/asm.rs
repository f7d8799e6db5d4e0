//! Assembler for the uBPF syntax of the conformance suite. (being written)
use crate::Insn;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct AsmError {
    pub line: usize,
    pub msg: String,
}

pub fn assemble(_src: &str) -> Result<Vec<Insn>, AsmError> {
    todo!("assembler")
}
