//! Shared by the kernel tests: the skip guard and a few instruction builders (the
//! assembler lives in spine-isa and these tests must not depend on its progress).
#![allow(dead_code, reason = "each test binary uses a different subset")]

use spine_isa::{op, Insn};

/// Returns from the test, loudly, when this process cannot use bpf(2). Writes to the
/// stderr handle itself: `eprintln!` would be swallowed by the test harness's capture.
macro_rules! require_bpf {
    () => {
        if let Err(e) = spine_sys::probe() {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIP: bpf(2) unavailable: {e}");
            return;
        }
    };
}
pub(crate) use require_bpf;

pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R10: u8 = 10;

pub fn mov_imm(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::K, dst, 0, 0, imm)
}

pub fn mov_reg(dst: u8, src: u8) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::X, dst, src, 0, 0)
}

pub fn add_imm(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::ADD | op::K, dst, 0, 0, imm)
}

/// `dst = *(size *)(src + off)`.
pub fn ldx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::LDX | op::MEM | size, dst, src, off, 0)
}

/// `*(size *)(dst + off) = src`.
pub fn stx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::STX | op::MEM | size, dst, src, off, 0)
}

/// `*(size *)(dst + off) = imm`.
pub fn st(size: u8, dst: u8, off: i16, imm: i32) -> Insn {
    Insn::new(op::ST | op::MEM | size, dst, 0, off, imm)
}

/// `lock *(u64 *)(dst + off) += src`.
pub fn atomic_add64(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::STX | op::ATOMIC | op::DW, dst, src, off, op::ATOMIC_ADD)
}

/// `if dst > src goto +off`.
pub fn jgt_reg(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::JMP | op::JGT | op::X, dst, src, off, 0)
}

/// `if dst == imm goto +off`.
pub fn jeq_imm(dst: u8, imm: i32, off: i16) -> Insn {
    Insn::new(op::JMP | op::JEQ | op::K, dst, 0, off, imm)
}

pub fn call(helper: u32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, 0, 0, helper as i32)
}

pub fn exit() -> Insn {
    Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
}

/// `dst = map` (map index, linked to an fd by the loader).
pub fn ld_map(dst: u8, index: u32) -> [Insn; 2] {
    Insn::lddw(dst, op::PSEUDO_MAP_FD, index as u64)
}

/// `dst = &value(map)[off]`.
pub fn ld_map_value(dst: u8, index: u32, off: u32) -> [Insn; 2] {
    Insn::lddw(dst, op::PSEUDO_MAP_VALUE, index as u64 | (off as u64) << 32)
}

/// `r0 = imm; exit`.
pub fn ret(imm: i32) -> [Insn; 2] {
    [mov_imm(R0, imm), exit()]
}

/// A 60-byte Ethernet frame with distinct bytes everywhere.
pub fn frame() -> Vec<u8> {
    (0..60u8).map(|i| i.wrapping_mul(7).wrapping_add(1)).collect()
}
