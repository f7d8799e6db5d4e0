//! Mnemonic tables shared by the assembler and the disassembler, so that the two can
//! never disagree on a name.

use crate::op;

/// Two-operand ALU operations whose name is the plain mnemonic (`add`, `add32`, ...).
/// `sdiv`/`smod` (DIV/MOD with `off = 1`), `neg`, `movsx*` and byte swaps are spelled
/// separately.
pub(crate) const ALU_OPS: [(&str, u8); 12] = [
    ("add", op::ADD),
    ("sub", op::SUB),
    ("mul", op::MUL),
    ("div", op::DIV),
    ("or", op::OR),
    ("and", op::AND),
    ("lsh", op::LSH),
    ("rsh", op::RSH),
    ("mod", op::MOD),
    ("xor", op::XOR),
    ("mov", op::MOV),
    ("arsh", op::ARSH),
];

/// Conditional jumps (`jeq`, `jeq32`, ...).
pub(crate) const JMP_CONDS: [(&str, u8); 11] = [
    ("jeq", op::JEQ),
    ("jgt", op::JGT),
    ("jge", op::JGE),
    ("jset", op::JSET),
    ("jne", op::JNE),
    ("jsgt", op::JSGT),
    ("jsge", op::JSGE),
    ("jlt", op::JLT),
    ("jle", op::JLE),
    ("jslt", op::JSLT),
    ("jsle", op::JSLE),
];

/// Atomic read-modify-write operations (`lock [fetch] add [..], %rS`).
pub(crate) const ATOMIC_OPS: [(&str, i32); 4] = [
    ("add", op::ATOMIC_ADD),
    ("or", op::ATOMIC_OR),
    ("and", op::ATOMIC_AND),
    ("xor", op::ATOMIC_XOR),
];

/// Load/store size suffixes.
pub(crate) const SIZES: [(&str, u8); 4] =
    [("b", op::B), ("h", op::H), ("w", op::W), ("dw", op::DW)];

pub(crate) fn alu_name(code_op: u8) -> Option<&'static str> {
    ALU_OPS.iter().find(|(_, o)| *o == code_op).map(|(n, _)| *n)
}

pub(crate) fn cond_name(code_op: u8) -> Option<&'static str> {
    JMP_CONDS.iter().find(|(_, o)| *o == code_op).map(|(n, _)| *n)
}

pub(crate) fn atomic_name(imm: i32) -> Option<&'static str> {
    ATOMIC_OPS.iter().find(|(_, o)| *o == imm).map(|(n, _)| *n)
}

pub(crate) fn size_name(code: u8) -> &'static str {
    SIZES.iter().find(|(_, s)| *s == code & 0x18).map_or("dw", |(n, _)| *n)
}

/// Looks a size suffix up (`"dw"` → `DW`).
pub(crate) fn size_code(suffix: &str) -> Option<u8> {
    SIZES.iter().find(|(n, _)| *n == suffix).map(|(_, s)| *s)
}
