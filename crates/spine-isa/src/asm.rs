//! Assembler for the uBPF syntax of the `bpf_conformance` suite, extended to every
//! RFC 9669 instruction and to spine's map references.
//!
//! One statement per line; `#` or `;` starts a comment; a line may begin with labels
//! (`name:`). Registers are `%r0`..`%r10` (`%` optional; `%r11`..`%r15` also assemble,
//! since the field can hold them, and [`crate::validate`] refuses them). Numbers are
//! decimal or `0x` hex with an optional sign; a 32-bit immediate may be spelled signed or
//! unsigned (`-1` = `0xffffffff`). Branch targets are a label or a slot distance from
//! the next instruction (`+2`, `-1`); the label `exit`, unless defined, names the first
//! `exit` instruction (as the suite's own assembler does).
//!
//! | form | encodes |
//! | --- | --- |
//! | `add %r0, 1`, `add64 ..`, `add32 %r0, %r1` | ALU64 / ALU, K or X (also `sub mul div or and lsh rsh mod xor mov arsh`) |
//! | `sdiv`, `smod` (`32` too) | DIV / MOD with `off = 1` |
//! | `neg %r0`, `neg32 %r0` | NEG |
//! | `movsx832 %r0, %r1` (`movsx{8,16,32}{32,64}`) | MOV X with `off` 8/16/32 |
//! | `le16`/`be32`.. `%r0`; `bswap64 %r0` (alias `swap64`) | ALU\|END to LE/BE; ALU64\|END |
//! | `jeq %r1, 5, +2`, `jne32 %r1, %r2, label` (`jeq jgt jge jset jne jsgt jsge jlt jle jslt jsle`) | JMP / JMP32 |
//! | `ja +1` / `ja32 label` | JMP\|JA (`off`) / JMP32\|JA (`imm`) |
//! | `call 5`, `call helper 5`, `call local label`, `call %r2` | helper by id, bpf-to-bpf (`src = 1`, `imm` relative), callx (`dst`) |
//! | `exit` | EXIT |
//! | `lddw %r0, 0x1122334455667788` | LD\|IMM\|DW, two slots |
//! | `ldxw %r0, [%r1+2]`, `ldxsb %r0, [%r10-1]` | LDX MEM / MEMSX (`b h w dw`; signed `b h w`) |
//! | `stw [%r10-4], 5`, `stxdw [%r10-8], %r1` | ST / STX MEM |
//! | `lock add [%r10-8], %r1`, `lock fetch or32 ..`, `lock xchg ..`, `lock cmpxchg32 ..` | STX\|ATOMIC (`add or and xor`, optional `fetch`) |
//! | `ldabsh 12`, `ldindw %r1, 4` | legacy packet loads (decoded, refused by engines) |
//! | `.insn 0x0000000100000095` | one raw slot: the little-endian word, as in the suite's `-- raw` |
//!
//! spine extensions, for programs that use maps (the forms `spine_obj` produces):
//! `lddw %r1, map[3]` is `lddw` with `src = PSEUDO_MAP_FD`, `imm = 3` (map index 3), and
//! `lddw %r1, map_value[3]+16` is `src = PSEUDO_MAP_VALUE`, `imm = 3`, second slot
//! `imm = 16` (the address of byte 16 of map 3's value).

mod encode;
pub(crate) mod names;
mod operand;

use std::collections::HashMap;

use crate::Insn;
use encode::Field;
use operand::Target;

/// Why a source line could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct AsmError {
    /// 1-based line number in the source.
    pub line: usize,
    pub kind: AsmErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AsmErrorKind {
    #[error("unknown mnemonic `{0}`")]
    UnknownMnemonic(String),
    #[error("`{mnemonic}` takes {expected} operand(s), found {found}")]
    OperandCount { mnemonic: String, expected: usize, found: usize },
    #[error("bad register `{0}` (expected %r0..%r15)")]
    BadRegister(String),
    #[error("bad operand `{0}`")]
    BadOperand(String),
    #[error("immediate `{text}` does not fit in {bits} bits")]
    ImmOutOfRange { text: String, bits: u8 },
    #[error("offset `{0}` does not fit in 16 signed bits")]
    OffsetOutOfRange(String),
    #[error("bad label name `{0}`")]
    BadLabel(String),
    #[error("label `{0}` is defined twice")]
    DuplicateLabel(String),
    #[error("label `{0}` is not defined")]
    UndefinedLabel(String),
    #[error("branch distance {distance} does not fit in the {bits}-bit field")]
    TargetOutOfRange { distance: i128, bits: u8 },
}

/// A branch whose distance is known only once every label is.
struct Fixup {
    pc: usize,
    line: usize,
    target: Target,
    field: Field,
}

/// Assembles a whole program. Returns the first error, with its line.
pub fn assemble(src: &str) -> Result<Vec<Insn>, AsmError> {
    let mut insns = Vec::new();
    let mut labels: HashMap<&str, usize> = HashMap::new();
    let mut fixups = Vec::new();
    let mut first_exit = None;
    for (idx, raw) in src.lines().enumerate() {
        let line = idx + 1;
        let err = |kind| AsmError { line, kind };
        let mut text = raw.split(['#', ';']).next().unwrap_or("").trim();
        while let Some((name, rest)) = text.split_once(':') {
            let name = name.trim();
            if !operand::is_label(name) {
                return Err(err(AsmErrorKind::BadLabel(name.to_string())));
            }
            if labels.insert(name, insns.len()).is_some() {
                return Err(err(AsmErrorKind::DuplicateLabel(name.to_string())));
            }
            text = rest.trim();
        }
        if text.is_empty() {
            continue;
        }
        let (mnemonic, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let stmt = encode::statement(mnemonic, rest).map_err(err)?;
        let pc = insns.len();
        if mnemonic == "exit" && first_exit.is_none() {
            first_exit = Some(pc);
        }
        if let Some((target, field)) = stmt.target {
            fixups.push(Fixup { pc, line, target, field });
        }
        insns.extend_from_slice(&stmt.slots[..stmt.len]);
    }
    for f in fixups {
        let err = |kind| AsmError { line: f.line, kind };
        let distance = match f.target {
            Target::Rel(d) => d,
            Target::Label(name) => {
                let to = labels
                    .get(name.as_str())
                    .copied()
                    .or(if name == "exit" { first_exit } else { None })
                    .ok_or_else(|| err(AsmErrorKind::UndefinedLabel(name.clone())))?;
                to as i128 - f.pc as i128 - 1
            }
        };
        let slot = &mut insns[f.pc];
        match f.field {
            Field::Off => {
                slot.off = i16::try_from(distance)
                    .map_err(|_| err(AsmErrorKind::TargetOutOfRange { distance, bits: 16 }))?;
            }
            Field::Imm => {
                slot.imm = i32::try_from(distance)
                    .map_err(|_| err(AsmErrorKind::TargetOutOfRange { distance, bits: 32 }))?;
            }
        }
    }
    Ok(insns)
}

#[cfg(test)]
mod tests;
