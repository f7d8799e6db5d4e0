//! Structural validation: every slot a known opcode with sane fields, every jump
//! inside the program and never into the second slot of an `lddw`. Memory safety is
//! the verifier's job; this is what any engine needs before it may decode a program.

use crate::{op, Insn, FP};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {pc}: {kind}")]
pub struct IsaError {
    pub pc: usize,
    pub kind: IsaErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IsaErrorKind {
    #[error("empty program")]
    Empty,
    #[error("unknown opcode {0:#04x}")]
    UnknownOpcode(u8),
    #[error("invalid register r{0}")]
    BadRegister(u8),
    #[error("write to the read-only frame pointer r10")]
    WriteToFp,
    #[error("reserved field set: {0}")]
    Reserved(&'static str),
    #[error("lddw without its second slot")]
    TruncatedLddw,
    #[error("malformed second slot of lddw")]
    BadLddwSlot,
    #[error("unsupported lddw pseudo source {0}")]
    BadPseudo(u8),
    #[error("jump to {0}, outside the program")]
    JumpOutOfRange(i64),
    #[error("jump into the middle of lddw at {0}")]
    JumpIntoLddw(usize),
    #[error("function address {0} (lddw with the pseudo-function source) is outside the program")]
    FuncAddrOutOfRange(i64),
    #[error("function address points into the middle of lddw at {0}")]
    FuncAddrIntoLddw(usize),
    #[error("invalid byte-swap width {0}")]
    BadSwapWidth(i32),
    #[error("invalid atomic operation {0:#x}")]
    BadAtomic(i32),
    #[error("unsupported call kind (src {0})")]
    BadCall(u8),
    #[error("last instruction is neither exit nor a jump: execution would fall off the end")]
    FallsOffEnd,
}

/// Checks the structure of a whole program. Returns the first problem found.
pub fn validate(insns: &[Insn]) -> Result<(), IsaError> {
    let err = |pc, kind| Err(IsaError { pc, kind });
    if insns.is_empty() {
        return err(0, IsaErrorKind::Empty);
    }
    // Pass 1: mark second slots of lddw and check each instruction alone.
    let mut second_slot = vec![false; insns.len()];
    let mut pc = 0;
    while pc < insns.len() {
        let i = insns[pc];
        if let Err(kind) = check_one(i) {
            return err(pc, kind);
        }
        if i.is_lddw() {
            let Some(next) = insns.get(pc + 1) else {
                return err(pc, IsaErrorKind::TruncatedLddw);
            };
            if next.code != 0 || next.dst != 0 || next.src != 0 || next.off != 0 {
                return err(pc + 1, IsaErrorKind::BadLddwSlot);
            }
            second_slot[pc + 1] = true;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    // Pass 2: branch targets, and the callbacks that `lddw` with `PSEUDO_FUNC` names
    // (relative like a local call: target = pc + imm + 1).
    for (pc, i) in insns.iter().enumerate() {
        if second_slot[pc] {
            continue;
        }
        if i.is_lddw() && i.src == op::PSEUDO_FUNC {
            let t = pc as i64 + 1 + i64::from(i.imm);
            if t < 0 || t as usize >= insns.len() {
                return err(pc, IsaErrorKind::FuncAddrOutOfRange(t));
            }
            if second_slot[t as usize] {
                return err(pc, IsaErrorKind::FuncAddrIntoLddw(t as usize));
            }
        }
        if let Some(t) = i.branch_target(pc) {
            if t < 0 || t as usize >= insns.len() {
                return err(pc, IsaErrorKind::JumpOutOfRange(t));
            }
            if second_slot[t as usize] {
                return err(pc, IsaErrorKind::JumpIntoLddw(t as usize));
            }
        }
    }
    let last = insns.len() - 1;
    let tail = if second_slot[last] { insns[last - 1] } else { insns[last] };
    let ends = tail.is_exit()
        || (tail.code & 0xf0 == op::JA && matches!(tail.class(), op::JMP | op::JMP32));
    if !ends || second_slot[last] {
        return err(last, IsaErrorKind::FallsOffEnd);
    }
    Ok(())
}

fn reg(r: u8) -> Result<(), IsaErrorKind> {
    if r as usize >= crate::NUM_REGS {
        Err(IsaErrorKind::BadRegister(r))
    } else {
        Ok(())
    }
}

fn dst_writable(r: u8) -> Result<(), IsaErrorKind> {
    reg(r)?;
    if r == FP {
        Err(IsaErrorKind::WriteToFp)
    } else {
        Ok(())
    }
}

fn check_one(i: Insn) -> Result<(), IsaErrorKind> {
    use IsaErrorKind::*;
    let unknown = Err(UnknownOpcode(i.code));
    match i.class() {
        op::ALU | op::ALU64 => {
            dst_writable(i.dst)?;
            let o = i.code & 0xf0;
            let x = i.code & op::X != 0;
            if x {
                reg(i.src)?;
            } else if i.src != 0 {
                return Err(Reserved("src of immediate ALU"));
            }
            match o {
                op::DIV | op::MOD => {
                    if i.off != 0 && i.off != 1 {
                        return Err(Reserved("offset of div/mod"));
                    }
                }
                op::MOV => {
                    let ok = match (i.class(), x) {
                        (op::ALU64, true) => matches!(i.off, 0 | 8 | 16 | 32),
                        (op::ALU, true) => matches!(i.off, 0 | 8 | 16),
                        _ => i.off == 0,
                    };
                    if !ok {
                        return Err(Reserved("offset of mov"));
                    }
                }
                op::END => {
                    if i.class() == op::ALU64 && x {
                        return unknown;
                    }
                    if i.src != 0 {
                        return Err(Reserved("src of byte swap"));
                    }
                    if !matches!(i.imm, 16 | 32 | 64) {
                        return Err(BadSwapWidth(i.imm));
                    }
                }
                op::NEG => {
                    if x {
                        return unknown;
                    }
                }
                op::ADD
                | op::SUB
                | op::MUL
                | op::OR
                | op::AND
                | op::LSH
                | op::RSH
                | op::XOR
                | op::ARSH => {
                    if i.off != 0 {
                        return Err(Reserved("offset of ALU"));
                    }
                }
                _ => return unknown,
            }
            Ok(())
        }
        op::JMP | op::JMP32 => {
            let o = i.code & 0xf0;
            let x = i.code & op::X != 0;
            match o {
                op::JA => {
                    if x || i.dst != 0 || i.src != 0 {
                        return unknown;
                    }
                    Ok(())
                }
                op::CALL if i.class() == op::JMP => {
                    if x {
                        // callx: target helper id in dst.
                        return reg(i.dst);
                    }
                    match i.src {
                        0 | op::PSEUDO_CALL => Ok(()),
                        s => Err(BadCall(s)),
                    }
                }
                op::EXIT if i.class() == op::JMP => {
                    if x || i.dst != 0 || i.src != 0 {
                        return unknown;
                    }
                    Ok(())
                }
                op::JEQ
                | op::JGT
                | op::JGE
                | op::JSET
                | op::JNE
                | op::JSGT
                | op::JSGE
                | op::JLT
                | op::JLE
                | op::JSLT
                | op::JSLE => {
                    reg(i.dst)?;
                    if x {
                        reg(i.src)
                    } else if i.src != 0 {
                        Err(Reserved("src of immediate jump"))
                    } else {
                        Ok(())
                    }
                }
                _ => unknown,
            }
        }
        op::LD => {
            if i.code == op::LD | op::IMM | op::DW {
                dst_writable(i.dst)?;
                match i.src {
                    op::PSEUDO_NONE
                    | op::PSEUDO_MAP_FD
                    | op::PSEUDO_MAP_VALUE
                    | op::PSEUDO_FUNC => Ok(()),
                    s => Err(BadPseudo(s)),
                }
            } else if matches!(i.code & 0xe0, op::ABS | op::IND) && i.code & 0x18 != op::DW {
                // Legacy packet loads: decoded and disassembled, refused by engines.
                reg(i.src)
            } else {
                unknown
            }
        }
        op::LDX => {
            let mode = i.code & 0xe0;
            if mode != op::MEM && !(mode == op::MEMSX && i.code & 0x18 != op::DW) {
                return unknown;
            }
            dst_writable(i.dst)?;
            reg(i.src)
        }
        op::ST => {
            if i.code & 0xe0 != op::MEM {
                return unknown;
            }
            if i.src != 0 {
                return Err(Reserved("src of st"));
            }
            reg(i.dst)
        }
        op::STX => {
            let mode = i.code & 0xe0;
            reg(i.dst)?;
            reg(i.src)?;
            match mode {
                op::MEM => Ok(()),
                op::ATOMIC => {
                    if !matches!(i.code & 0x18, op::W | op::DW) {
                        return unknown;
                    }
                    // Fetching forms (and xchg/cmpxchg) write their result back to `src`.
                    if i.imm & op::FETCH != 0 && i.src == FP {
                        return Err(WriteToFp);
                    }
                    match i.imm {
                        op::ATOMIC_ADD | op::ATOMIC_OR | op::ATOMIC_AND | op::ATOMIC_XOR => Ok(()),
                        v if v & !op::FETCH == op::ATOMIC_ADD
                            || v & !op::FETCH == op::ATOMIC_OR
                            || v & !op::FETCH == op::ATOMIC_AND
                            || v & !op::FETCH == op::ATOMIC_XOR =>
                        {
                            Ok(())
                        }
                        op::ATOMIC_XCHG | op::ATOMIC_CMPXCHG => Ok(()),
                        v => Err(BadAtomic(v)),
                    }
                }
                _ => unknown,
            }
        }
        _ => unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit() -> Insn {
        Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
    }

    #[test]
    fn accepts_minimal_program() {
        assert_eq!(validate(&[exit()]), Ok(()));
    }

    #[test]
    fn rejects_jump_into_lddw() {
        let [a, b] = Insn::lddw(0, 0, 7);
        let p = [Insn::new(op::JMP | op::JA, 0, 0, 1, 0), a, b, exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::JumpIntoLddw(2));
    }

    #[test]
    fn checks_pseudo_func_targets() {
        let [a, b] = Insn::lddw(1, op::PSEUDO_FUNC, 1);
        let p = [a, b, exit(), exit()];
        assert_eq!(validate(&p), Ok(()));
        let [a, b] = Insn::lddw(1, op::PSEUDO_FUNC, 3);
        let p = [a, b, exit(), exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::FuncAddrOutOfRange(4));
        let [a, b] = Insn::lddw(1, op::PSEUDO_FUNC, -2i64 as u32 as u64);
        let p = [exit(), a, b, exit()];
        assert_eq!(validate(&p), Ok(()), "backwards to slot 0");
        let [a, b] = Insn::lddw(1, op::PSEUDO_FUNC, -3i64 as u32 as u64);
        let p = [exit(), a, b, exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::FuncAddrOutOfRange(-1));
        let [a, b] = Insn::lddw(1, op::PSEUDO_FUNC, 1);
        let [c, d] = Insn::lddw(1, 0, 0);
        let p = [a, b, c, d, exit()];
        assert_eq!(validate(&p), Ok(()));
        let [a, b] = Insn::lddw(1, op::PSEUDO_FUNC, 2);
        let p = [a, b, c, d, exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::FuncAddrIntoLddw(3));
    }

    #[test]
    fn rejects_write_to_fp_and_bad_register() {
        let p = [Insn::new(op::ALU64 | op::MOV | op::K, 10, 0, 0, 1), exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::WriteToFp);
        let p = [Insn::new(op::ALU64 | op::MOV | op::K, 11, 0, 0, 1), exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::BadRegister(11));
    }

    #[test]
    fn rejects_fall_off_and_out_of_range() {
        let p = [Insn::new(op::ALU64 | op::MOV | op::K, 0, 0, 0, 1)];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::FallsOffEnd);
        let p = [Insn::new(op::JMP | op::JA, 0, 0, 5, 0), exit()];
        assert_eq!(validate(&p).unwrap_err().kind, IsaErrorKind::JumpOutOfRange(6));
    }

    #[test]
    fn rejects_atomic_fetch_into_fp() {
        let fetch = Insn::new(op::STX | op::ATOMIC | op::DW, 1, 10, 0, op::ATOMIC_ADD | op::FETCH);
        assert_eq!(validate(&[fetch, exit()]).unwrap_err().kind, IsaErrorKind::WriteToFp);
        let plain = Insn::new(op::STX | op::ATOMIC | op::DW, 1, 10, 0, op::ATOMIC_ADD);
        assert_eq!(validate(&[plain, exit()]), Ok(()));
    }

    #[test]
    fn rejects_unknown_opcodes() {
        for code in [0xffu8, 0x8e, 0xe7, 0x8f, 0xf7, 0x9e] {
            let p = [Insn::new(code, 0, 0, 0, 0), exit()];
            assert!(validate(&p).is_err(), "{code:#x}");
        }
    }
}
