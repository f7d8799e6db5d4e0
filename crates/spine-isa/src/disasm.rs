//! Disassembler to the uBPF syntax of the conformance suite. (being written)
use crate::Insn;

pub fn disassemble(_insns: &[Insn]) -> String {
    todo!("disassembler")
}

pub fn disassemble_one(_insns: &[Insn], _pc: usize) -> String {
    todo!("disassembler")
}
