//! One statement (a line without its labels) to one or two instruction slots.

use super::names::{self, ALU_OPS, ATOMIC_OPS, JMP_CONDS};
use super::operand::{self, Target};
use super::AsmErrorKind;
use crate::{op, Insn};

/// Which field of the first slot a branch distance goes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    /// `off` (jumps): 16 bits.
    Off,
    /// `imm` (`ja32`, `call local`): 32 bits.
    Imm,
}

/// The encoding of one statement; `target` is filled in once labels are known.
#[derive(Debug)]
pub(crate) struct Stmt {
    pub slots: [Insn; 2],
    pub len: usize,
    pub target: Option<(Target, Field)>,
}

impl Stmt {
    fn one(i: Insn) -> Self {
        Stmt { slots: [i, Insn::default()], len: 1, target: None }
    }

    fn branch(i: Insn, t: Target, f: Field) -> Self {
        Stmt { slots: [i, Insn::default()], len: 1, target: Some((t, f)) }
    }
}

/// Splits `a, b, c` into trimmed operands; no text gives no operands.
fn split(rest: &str) -> Vec<&str> {
    if rest.trim().is_empty() {
        Vec::new()
    } else {
        rest.split(',').map(str::trim).collect()
    }
}

fn want<'a>(mnemonic: &str, rest: &'a str, n: usize) -> Result<Vec<&'a str>, AsmErrorKind> {
    let ops = split(rest);
    if ops.len() != n {
        return Err(AsmErrorKind::OperandCount {
            mnemonic: mnemonic.to_string(),
            expected: n,
            found: ops.len(),
        });
    }
    if let Some(e) = ops.iter().find(|o| o.is_empty()) {
        return Err(AsmErrorKind::BadOperand((*e).to_string()));
    }
    Ok(ops)
}

/// Encodes `mnemonic rest`, where `rest` is everything after the first word.
pub(crate) fn statement(mnemonic: &str, rest: &str) -> Result<Stmt, AsmErrorKind> {
    let m = mnemonic;
    match m {
        ".insn" => {
            let o = want(m, rest, 1)?;
            let w = operand::imm64(o[0])?;
            return Ok(Stmt::one(Insn::from_bytes(w.to_le_bytes())));
        }
        "exit" => {
            want(m, rest, 0)?;
            return Ok(Stmt::one(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)));
        }
        "ja" | "ja32" => {
            let o = want(m, rest, 1)?;
            let (class, field) =
                if m == "ja" { (op::JMP, Field::Off) } else { (op::JMP32, Field::Imm) };
            return Ok(Stmt::branch(
                Insn::new(class | op::JA, 0, 0, 0, 0),
                operand::target(o[0])?,
                field,
            ));
        }
        "call" => return call(rest),
        "lock" => return lock(rest),
        "lddw" => return lddw(rest),
        _ => {}
    }
    if let Some(s) = mem_insn(m, rest)? {
        return Ok(s);
    }
    if let Some(s) = jump(m, rest)? {
        return Ok(s);
    }
    if let Some(s) = alu(m, rest)? {
        return Ok(s);
    }
    Err(AsmErrorKind::UnknownMnemonic(m.to_string()))
}

/// `call 5` (helper), `call helper 5`, `call local <target>`, `call %rN` (callx).
fn call(rest: &str) -> Result<Stmt, AsmErrorKind> {
    let rest = rest.trim();
    let (mode, arg) = match rest.split_once(char::is_whitespace) {
        Some((w @ ("local" | "helper"), a)) => (w, a),
        _ => ("", rest),
    };
    let o = want("call", arg, 1)?;
    let base = op::JMP | op::CALL;
    Ok(match mode {
        "local" => Stmt::branch(
            Insn::new(base, 0, op::PSEUDO_CALL, 0, 0),
            operand::target(o[0])?,
            Field::Imm,
        ),
        "" if operand::is_reg(o[0]) => {
            Stmt::one(Insn::new(base | op::X, operand::reg(o[0])?, 0, 0, 0))
        }
        _ => Stmt::one(Insn::new(base, 0, 0, 0, operand::imm32(o[0])?)),
    })
}

/// `lock [fetch] add[32] [%rD+off], %rS`, `lock xchg[32] ...`, `lock cmpxchg[32] ...`.
fn lock(rest: &str) -> Result<Stmt, AsmErrorKind> {
    let rest = rest.trim();
    let (fetch, rest) = match rest.strip_prefix("fetch") {
        Some(r) if r.starts_with(char::is_whitespace) => (true, r.trim_start()),
        _ => (false, rest),
    };
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let full = format!("lock {}{name}", if fetch { "fetch " } else { "" });
    let unknown = || AsmErrorKind::UnknownMnemonic(full.clone());
    let (base, size) = match name.strip_suffix("32") {
        Some(b) => (b, op::W),
        None => (name.strip_suffix("64").unwrap_or(name), op::DW),
    };
    let imm = match base {
        "xchg" if !fetch => op::ATOMIC_XCHG,
        "cmpxchg" if !fetch => op::ATOMIC_CMPXCHG,
        _ => {
            let (_, a) = ATOMIC_OPS.iter().find(|(n, _)| *n == base).ok_or_else(unknown)?;
            if fetch {
                a | op::FETCH
            } else {
                *a
            }
        }
    };
    let o = want(&full, args, 2)?;
    let (dst, off) = operand::mem(o[0])?;
    let src = operand::reg(o[1])?;
    Ok(Stmt::one(Insn::new(op::STX | op::ATOMIC | size, dst, src, off, imm)))
}

/// `lddw %rD, imm64`, `lddw %rD, map[N]`, `lddw %rD, map_value[N]+off`.
fn lddw(rest: &str) -> Result<Stmt, AsmErrorKind> {
    let o = want("lddw", rest, 2)?;
    let dst = operand::reg(o[0])?;
    let v: String = o[1].chars().filter(|c| !c.is_whitespace()).collect();
    let bad = || AsmErrorKind::BadOperand(o[1].to_string());
    let [a, b] = if let Some(r) = v.strip_prefix("map_value[") {
        let (idx, tail) = r.split_once(']').ok_or_else(bad)?;
        let offset = match tail {
            "" => 0,
            t => operand::uimm32(t.strip_prefix('+').ok_or_else(bad)?)?,
        };
        let idx = operand::uimm32(idx)?;
        Insn::lddw(dst, op::PSEUDO_MAP_VALUE, u64::from(idx) | u64::from(offset) << 32)
    } else if let Some(r) = v.strip_prefix("map[") {
        let idx = r.strip_suffix(']').ok_or_else(bad)?;
        Insn::lddw(dst, op::PSEUDO_MAP_FD, operand::uimm32(idx)?.into())
    } else {
        Insn::lddw(dst, op::PSEUDO_NONE, operand::imm64(o[1])?)
    };
    Ok(Stmt { slots: [a, b], len: 2, target: None })
}

/// Loads and stores: `ldx{b,h,w,dw}`, `ldxs{b,h,w}`, `st*`, `stx*`, `ldabs*`, `ldind*`.
fn mem_insn(m: &str, rest: &str) -> Result<Option<Stmt>, AsmErrorKind> {
    let sized = |prefix: &str| m.strip_prefix(prefix).and_then(names::size_code);
    let insn = if let Some(sz) = sized("ldxs").filter(|&s| s != op::DW) {
        let o = want(m, rest, 2)?;
        let (src, off) = operand::mem(o[1])?;
        Insn::new(op::LDX | op::MEMSX | sz, operand::reg(o[0])?, src, off, 0)
    } else if let Some(sz) = sized("ldx") {
        let o = want(m, rest, 2)?;
        let (src, off) = operand::mem(o[1])?;
        Insn::new(op::LDX | op::MEM | sz, operand::reg(o[0])?, src, off, 0)
    } else if let Some(sz) = sized("stx") {
        let o = want(m, rest, 2)?;
        let (dst, off) = operand::mem(o[0])?;
        Insn::new(op::STX | op::MEM | sz, dst, operand::reg(o[1])?, off, 0)
    } else if let Some(sz) = sized("st") {
        let o = want(m, rest, 2)?;
        let (dst, off) = operand::mem(o[0])?;
        Insn::new(op::ST | op::MEM | sz, dst, 0, off, operand::imm32(o[1])?)
    } else if let Some(sz) = sized("ldabs").filter(|&s| s != op::DW) {
        let o = want(m, rest, 1)?;
        Insn::new(op::LD | op::ABS | sz, 0, 0, 0, operand::imm32(o[0])?)
    } else if let Some(sz) = sized("ldind").filter(|&s| s != op::DW) {
        let o = want(m, rest, 2)?;
        Insn::new(op::LD | op::IND | sz, 0, operand::reg(o[0])?, 0, operand::imm32(o[1])?)
    } else {
        return Ok(None);
    };
    Ok(Some(Stmt::one(insn)))
}

/// Conditional jumps: `jeq %rD, imm|%rS, target`, and the `32` forms (JMP32).
fn jump(m: &str, rest: &str) -> Result<Option<Stmt>, AsmErrorKind> {
    let (base, class) = match m.strip_suffix("32") {
        Some(b) => (b, op::JMP32),
        None => (m, op::JMP),
    };
    let Some(&(_, cond)) = JMP_CONDS.iter().find(|(n, _)| *n == base) else {
        return Ok(None);
    };
    let o = want(m, rest, 3)?;
    let dst = operand::reg(o[0])?;
    let insn = if operand::is_reg(o[1]) {
        Insn::new(class | cond | op::X, dst, operand::reg(o[1])?, 0, 0)
    } else {
        Insn::new(class | cond | op::K, dst, 0, 0, operand::imm32(o[1])?)
    };
    Ok(Some(Stmt::branch(insn, operand::target(o[2])?, Field::Off)))
}

/// ALU and ALU64: `add %rD, imm|%rS` (`add64` is the same), `add32`, `sdiv`/`smod`,
/// `neg`, `movsx{8,16,32}{32,64}`, `le16`..`be64`, `bswap16`..`bswap64` (alias `swap*`).
fn alu(m: &str, rest: &str) -> Result<Option<Stmt>, AsmErrorKind> {
    if let Some(s) = byte_swap(m, rest)? {
        return Ok(Some(s));
    }
    let (base, class) = if let Some(b) = m.strip_suffix("32") {
        (b, op::ALU)
    } else {
        (m.strip_suffix("64").unwrap_or(m), op::ALU64)
    };
    if base == "neg" {
        let o = want(m, rest, 1)?;
        return Ok(Some(Stmt::one(Insn::new(class | op::NEG, operand::reg(o[0])?, 0, 0, 0))));
    }
    if let Some(width) = base.strip_prefix("movsx") {
        let off = match width {
            "8" => 8,
            "16" => 16,
            "32" => 32,
            _ => return Ok(None),
        };
        let o = want(m, rest, 2)?;
        if !operand::is_reg(o[1]) {
            return Err(AsmErrorKind::BadRegister(o[1].to_string()));
        }
        let insn =
            Insn::new(class | op::MOV | op::X, operand::reg(o[0])?, operand::reg(o[1])?, off, 0);
        return Ok(Some(Stmt::one(insn)));
    }
    let (code_op, off) = match base {
        "sdiv" => (op::DIV, 1),
        "smod" => (op::MOD, 1),
        _ => match ALU_OPS.iter().find(|(n, _)| *n == base) {
            Some(&(_, o)) => (o, 0),
            None => return Ok(None),
        },
    };
    let o = want(m, rest, 2)?;
    let dst = operand::reg(o[0])?;
    let insn = if operand::is_reg(o[1]) {
        Insn::new(class | code_op | op::X, dst, operand::reg(o[1])?, off, 0)
    } else {
        Insn::new(class | code_op | op::K, dst, 0, off, operand::imm32(o[1])?)
    };
    Ok(Some(Stmt::one(insn)))
}

fn byte_swap(m: &str, rest: &str) -> Result<Option<Stmt>, AsmErrorKind> {
    let (code, width) = if let Some(w) = m.strip_prefix("be") {
        (op::ALU | op::END | op::TO_BE, w)
    } else if let Some(w) = m.strip_prefix("le") {
        (op::ALU | op::END | op::TO_LE, w)
    } else if let Some(w) = m.strip_prefix("bswap").or_else(|| m.strip_prefix("swap")) {
        (op::ALU64 | op::END | op::TO_LE, w)
    } else {
        return Ok(None);
    };
    let imm = match width {
        "16" => 16,
        "32" => 32,
        "64" => 64,
        _ => return Ok(None),
    };
    let o = want(m, rest, 1)?;
    Ok(Some(Stmt::one(Insn::new(code, operand::reg(o[0])?, 0, 0, imm))))
}
