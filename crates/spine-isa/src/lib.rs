//! The eBPF instruction set as RFC 9669 defines it: the 64-bit instruction word,
//! opcode constants, structural validation, and a uBPF-syntax assembler and
//! disassembler (the syntax of the conformance suite).
//!
//! Pure computation: no I/O, no allocation beyond the vectors it returns.
#![deny(unsafe_code)]

pub mod asm;
pub mod disasm;
mod insn;
pub mod op;
mod validate;

pub use asm::{assemble, AsmError, AsmErrorKind};
pub use disasm::{disassemble, disassemble_one};
pub use insn::{Insn, INSN_SIZE};
pub use validate::{validate, IsaError, IsaErrorKind};

/// Number of general-purpose registers r0..r10.
pub const NUM_REGS: usize = 11;
/// The read-only frame pointer.
pub const FP: u8 = 10;
/// Stack bytes available to each bpf-to-bpf frame.
pub const STACK_SIZE: usize = 512;
/// Deepest bpf-to-bpf call chain, counting the entry frame (the kernel's MAX_CALL_FRAMES).
pub const MAX_CALL_FRAMES: usize = 8;
