//! Disassembler to the syntax [`crate::assemble`] reads (see the `asm` module doc).
//!
//! The output re-assembles to exactly the input: branch targets are printed as slot
//! distances (`+N`/`-N`), and every line is checked by assembling it again; an
//! instruction the mnemonic syntax cannot express bit for bit (an unknown opcode, a
//! reserved field set, a malformed `lddw` pair) is printed raw as `.insn 0x...`. Only
//! slots whose `dst`/`src` exceed 4 bits (never produced by [`Insn::from_bytes`]) cannot
//! round-trip.

use crate::asm::names;
use crate::{assemble, op, Insn};

/// The whole program, one instruction per line (an `lddw` pair is one line).
pub fn disassemble(insns: &[Insn]) -> String {
    let mut out = String::new();
    let mut pc = 0;
    while pc < insns.len() {
        let (text, slots) = line(insns, pc);
        out.push_str(&text);
        out.push('\n');
        pc += slots;
    }
    out
}

/// The instruction at `pc` (both slots of an `lddw`), for listings and verifier logs.
/// Returns an empty string if `pc` is past the end.
pub fn disassemble_one(insns: &[Insn], pc: usize) -> String {
    if pc >= insns.len() {
        return String::new();
    }
    line(insns, pc).0
}

/// The text for the instruction at `pc` (in bounds) and how many slots it covers.
fn line(insns: &[Insn], pc: usize) -> (String, usize) {
    if let Some((text, slots)) = render(insns, pc) {
        let exact = assemble(&text)
            .is_ok_and(|back| back.len() == slots && insns.get(pc..pc + slots) == Some(&back[..]));
        if exact {
            return (text, slots);
        }
    }
    (raw(insns[pc]), 1)
}

/// `.insn` with the little-endian word of the slot, as the suite's `-- raw` writes it.
fn raw(i: Insn) -> String {
    format!(".insn {:#018x}", u64::from_le_bytes(i.to_bytes()))
}

fn reg(r: u8) -> String {
    format!("%r{r}")
}

/// Small immediates in decimal, the rest as unsigned 32-bit hex (`0xffff0000`).
fn imm(v: i32) -> String {
    if (-4096..=4096).contains(&v) {
        v.to_string()
    } else {
        format!("{:#x}", v as u32)
    }
}

fn rel(d: i64) -> String {
    format!("{d:+}")
}

fn mem(r: u8, off: i16) -> String {
    match off {
        0 => format!("[%r{r}]"),
        _ => format!("[%r{r}{off:+}]"),
    }
}

fn src_operand(i: Insn) -> String {
    if i.code & op::X != 0 {
        reg(i.src)
    } else {
        imm(i.imm)
    }
}

/// The mnemonic form of the instruction at `pc`, if it has one; the caller checks it.
fn render(insns: &[Insn], pc: usize) -> Option<(String, usize)> {
    let i = insns[pc];
    let text = match i.class() {
        op::ALU | op::ALU64 => alu(i)?,
        op::JMP | op::JMP32 => jmp(i)?,
        op::LD if i.is_lddw() => return lddw(i, insns.get(pc + 1)?).map(|t| (t, 2)),
        op::LD => {
            let sz = names::size_name(i.code);
            match i.code & 0xe0 {
                op::ABS => format!("ldabs{sz} {}", imm(i.imm)),
                op::IND => format!("ldind{sz} {}, {}", reg(i.src), imm(i.imm)),
                _ => return None,
            }
        }
        op::LDX => {
            let s = if i.code & 0xe0 == op::MEMSX { "s" } else { "" };
            format!("ldx{s}{} {}, {}", names::size_name(i.code), reg(i.dst), mem(i.src, i.off))
        }
        op::ST => format!("st{} {}, {}", names::size_name(i.code), mem(i.dst, i.off), imm(i.imm)),
        _ => stx(i)?,
    };
    Some((text, 1))
}

fn alu(i: Insn) -> Option<String> {
    let sfx = if i.class() == op::ALU { "32" } else { "" };
    let d = reg(i.dst);
    let x = i.code & op::X != 0;
    Some(match i.code & 0xf0 {
        op::END => {
            let name = match (i.class(), x) {
                (op::ALU, false) => "le",
                (op::ALU, true) => "be",
                _ => "bswap",
            };
            format!("{name}{} {d}", i.imm)
        }
        op::NEG => format!("neg{sfx} {d}"),
        op::MOV if x && i.off != 0 => {
            let to = if i.class() == op::ALU { "32" } else { "64" };
            format!("movsx{}{to} {d}, {}", i.off, reg(i.src))
        }
        o @ (op::DIV | op::MOD) if i.off == 1 => {
            let name = if o == op::DIV { "sdiv" } else { "smod" };
            format!("{name}{sfx} {d}, {}", src_operand(i))
        }
        o => format!("{}{sfx} {d}, {}", names::alu_name(o)?, src_operand(i)),
    })
}

fn jmp(i: Insn) -> Option<String> {
    let jmp32 = i.class() == op::JMP32;
    Some(match i.code & 0xf0 {
        op::JA if jmp32 => format!("ja32 {}", rel(i.imm.into())),
        op::JA => format!("ja {}", rel(i.off.into())),
        op::EXIT => "exit".to_string(),
        op::CALL if i.code & op::X != 0 => format!("call {}", reg(i.dst)),
        op::CALL if i.src == op::PSEUDO_CALL => format!("call local {}", rel(i.imm.into())),
        op::CALL => format!("call {}", i.imm),
        o => {
            let sfx = if jmp32 { "32" } else { "" };
            let name = names::cond_name(o)?;
            format!("{name}{sfx} {}, {}, {}", reg(i.dst), src_operand(i), rel(i.off.into()))
        }
    })
}

fn lddw(i: Insn, hi: &Insn) -> Option<String> {
    let d = reg(i.dst);
    Some(match i.src {
        op::PSEUDO_NONE => {
            format!("lddw {d}, {:#x}", u64::from(i.imm as u32) | u64::from(hi.imm as u32) << 32)
        }
        op::PSEUDO_MAP_FD => format!("lddw {d}, map[{}]", i.imm as u32),
        op::PSEUDO_MAP_VALUE => match hi.imm as u32 {
            0 => format!("lddw {d}, map_value[{}]", i.imm as u32),
            off => format!("lddw {d}, map_value[{}]+{off}", i.imm as u32),
        },
        _ => return None,
    })
}

fn stx(i: Insn) -> Option<String> {
    let sz = names::size_name(i.code);
    let (m, s) = (mem(i.dst, i.off), reg(i.src));
    match i.code & 0xe0 {
        op::MEM => Some(format!("stx{sz} {m}, {s}")),
        op::ATOMIC => {
            let sfx = match i.code & 0x18 {
                op::W => "32",
                op::DW => "",
                _ => return None,
            };
            let name = match i.imm {
                op::ATOMIC_XCHG => "xchg".to_string(),
                op::ATOMIC_CMPXCHG => "cmpxchg".to_string(),
                v if v & op::FETCH != 0 => format!("fetch {}", names::atomic_name(v & !op::FETCH)?),
                v => names::atomic_name(v)?.to_string(),
            };
            Some(format!("lock {name}{sfx} {m}, {s}"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
