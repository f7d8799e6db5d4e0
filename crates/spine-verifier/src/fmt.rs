//! Printing in the style of the kernel verifier log: instructions as
//! `(61) r3 = *(u32 *)(r2 +8)` and states as `R1=ctx() R2=pkt(off=0,r=14) fp-8=mmmmmmmm`,
//! so that people who know the kernel's messages can read spine's.

use crate::env::MapInfo;
use crate::reg::{Kind, Reg};
use crate::scalar::Scalar;
use crate::state::{Byte, State};
use spine_isa::{op, Insn};
use std::fmt::Write;

fn size_name(code: u8) -> &'static str {
    match code & 0x18 {
        op::B => "u8",
        op::H => "u16",
        op::W => "u32",
        _ => "u64",
    }
}

fn alu_op(i: Insn) -> &'static str {
    match i.code & 0xf0 {
        op::ADD => "+=",
        op::SUB => "-=",
        op::MUL => "*=",
        op::DIV if i.off == 1 => "s/=",
        op::DIV => "/=",
        op::OR => "|=",
        op::AND => "&=",
        op::LSH => "<<=",
        op::RSH => ">>=",
        op::MOD if i.off == 1 => "s%=",
        op::MOD => "%=",
        op::XOR => "^=",
        op::MOV => "=",
        op::ARSH => "s>>=",
        _ => "?=",
    }
}

fn jmp_op(code: u8) -> &'static str {
    match code & 0xf0 {
        op::JEQ => "==",
        op::JNE => "!=",
        op::JGT => ">",
        op::JGE => ">=",
        op::JLT => "<",
        op::JLE => "<=",
        op::JSGT => "s>",
        op::JSGE => "s>=",
        op::JSLT => "s<",
        op::JSLE => "s<=",
        op::JSET => "&",
        _ => "?",
    }
}

fn off(o: i16) -> String {
    if o < 0 {
        format!("{o}")
    } else {
        format!("+{o}")
    }
}

/// The instruction at `pc` as the kernel log prints it.
pub fn insn(insns: &[Insn], pc: usize, maps: &[MapInfo]) -> String {
    let Some(&i) = insns.get(pc) else {
        return format!("<pc {pc} outside the program>");
    };
    let mut s = format!("({:02x}) ", i.code);
    let w = |r: u8, is32: bool| if is32 { format!("w{r}") } else { format!("r{r}") };
    match i.class() {
        op::ALU | op::ALU64 => {
            let is32 = i.class() == op::ALU;
            let d = w(i.dst, is32);
            let src = if i.code & op::X != 0 { w(i.src, is32) } else { format!("{}", i.imm) };
            match i.code & 0xf0 {
                op::NEG => write!(s, "{d} = -{d}"),
                op::END => {
                    let kind = if i.class() == op::ALU64 {
                        "bswap"
                    } else if i.code & op::TO_BE != 0 {
                        "be"
                    } else {
                        "le"
                    };
                    write!(s, "r{} = {kind}{} r{}", i.dst, i.imm, i.dst)
                }
                op::MOV if i.off != 0 && i.code & op::X != 0 => {
                    write!(s, "{d} = (s{}){}", i.off, src)
                }
                _ => write!(s, "{d} {} {src}", alu_op(i)),
            }
        }
        op::LD if i.is_lddw() => {
            let hi = insns.get(pc + 1).map_or(0, |n| n.imm as u32);
            let name = |m: u32| maps.get(m as usize).map_or("?".to_string(), |m| m.name.clone());
            match i.src {
                op::PSEUDO_MAP_FD => {
                    write!(s, "r{} = map[id:{}]({})", i.dst, i.imm, name(i.imm as u32))
                }
                op::PSEUDO_MAP_VALUE => {
                    write!(s, "r{} = map[id:{}][0]+{}({})", i.dst, i.imm, hi, name(i.imm as u32))
                }
                op::PSEUDO_FUNC => write!(s, "r{} = func pc{}", i.dst, off(i.imm as i16)),
                _ => write!(s, "r{} = {:#x}", i.dst, u64::from(i.imm as u32) | u64::from(hi) << 32),
            }
        }
        op::LD => write!(s, "r0 = *({} *)skb[{}]", size_name(i.code), i.imm),
        op::LDX => {
            let sz = size_name(i.code);
            let sz =
                if i.code & 0xe0 == op::MEMSX { sz.replacen('u', "s", 1) } else { sz.to_string() };
            write!(s, "r{} = *({sz} *)(r{} {})", i.dst, i.src, off(i.off))
        }
        op::ST => write!(s, "*({} *)(r{} {}) = {}", size_name(i.code), i.dst, off(i.off), i.imm),
        op::STX if i.code & 0xe0 == op::ATOMIC => {
            let bits = if i.code & 0x18 == op::DW { 64 } else { 32 };
            let m = format!("({} *)(r{} {})", size_name(i.code), i.dst, off(i.off));
            let opn = match i.imm & !op::FETCH {
                op::ATOMIC_ADD => "add",
                op::ATOMIC_OR => "or",
                op::ATOMIC_AND => "and",
                op::ATOMIC_XOR => "xor",
                _ => "",
            };
            match i.imm {
                op::ATOMIC_XCHG => write!(s, "r{} = atomic{bits}_xchg({m}, r{})", i.src, i.src),
                op::ATOMIC_CMPXCHG => write!(s, "r0 = atomic{bits}_cmpxchg({m}, r0, r{})", i.src),
                v if v & op::FETCH != 0 => {
                    write!(s, "r{} = atomic{bits}_fetch_{opn}({m}, r{})", i.src, i.src)
                }
                _ => write!(
                    s,
                    "lock *{m} {}= r{}",
                    match opn {
                        "add" => "+",
                        "or" => "|",
                        "and" => "&",
                        _ => "^",
                    },
                    i.src
                ),
            }
        }
        op::STX => write!(s, "*({} *)(r{} {}) = r{}", size_name(i.code), i.dst, off(i.off), i.src),
        _ => {
            let is32 = i.class() == op::JMP32;
            match i.code & 0xf0 {
                op::JA => {
                    let o = if is32 { i.imm as i64 } else { i64::from(i.off) };
                    write!(s, "goto pc{}", if o < 0 { format!("{o}") } else { format!("+{o}") })
                }
                op::EXIT => write!(s, "exit"),
                op::CALL if i.src == op::PSEUDO_CALL => write!(s, "call pc{}", off(i.imm as i16)),
                op::CALL if i.code & op::X != 0 => write!(s, "callx r{}", i.dst),
                op::CALL => {
                    let id = i.imm as u32;
                    write!(s, "call {}#{id}", spine_abi::helper::name(id).unwrap_or("unknown"))
                }
                _ => {
                    let src =
                        if i.code & op::X != 0 { w(i.src, is32) } else { format!("{:#x}", i.imm) };
                    write!(
                        s,
                        "if {} {} {src} goto pc{}",
                        w(i.dst, is32),
                        jmp_op(i.code),
                        off(i.off)
                    )
                }
            }
        }
    }
    .ok();
    s
}

/// The whole program, one instruction per line with its index.
pub fn insn_listing(insns: &[Insn], maps: &[MapInfo]) -> String {
    let mut out = String::new();
    let mut pc = 0;
    while pc < insns.len() {
        writeln!(out, "{pc}: {}", insn(insns, pc, maps)).ok();
        pc += if insns[pc].is_lddw() { 2 } else { 1 };
    }
    out
}

/// The non-trivial parts of a scalar: `umax=255,var_off=(0x0; 0xff)`.
pub fn scalar_parts(v: &Scalar) -> String {
    let mut p: Vec<String> = Vec::new();
    let full = Scalar::unknown();
    if v.smin != full.smin && v.smin as u64 != v.umin {
        p.push(format!("smin={}", v.smin));
    }
    if v.smax != full.smax && v.smax as u64 != v.umax {
        p.push(format!("smax={}", v.smax));
    }
    if v.umin != 0 {
        p.push(format!("umin={}", v.umin));
    }
    if v.umax != u64::MAX {
        p.push(format!("umax={}", v.umax));
    }
    if v.s32min != full.s32min && v.s32min as u32 != v.u32min {
        p.push(format!("smin32={}", v.s32min));
    }
    if v.s32max != full.s32max && v.s32max as u32 != v.u32max {
        p.push(format!("smax32={}", v.s32max));
    }
    if v.u32min != 0 && u64::from(v.u32min) != v.umin {
        p.push(format!("umin32={}", v.u32min));
    }
    if v.u32max != u32::MAX && u64::from(v.u32max) != v.umax {
        p.push(format!("umax32={}", v.u32max));
    }
    if v.t.mask != u64::MAX && !v.t.is_const() && v.t != crate::tnum::Tnum::range(v.umin, v.umax) {
        p.push(format!("var_off=({:#x}; {:#x})", v.t.value, v.t.mask));
    }
    p.join(",")
}

fn map_desc(maps: &[MapInfo], m: u16) -> String {
    match maps.get(usize::from(m)) {
        Some(mi) => format!("map={},ks={},vs={}", mi.name, mi.key_size, mi.value_size),
        None => format!("map={m}"),
    }
}

/// One register as the kernel log prints it (`pkt(off=14,r=34)`, `scalar(umax=255)`).
pub fn reg(r: &Reg, maps: &[MapInfo]) -> String {
    if r.kind == Kind::Scalar {
        if let Some(c) = r.v.const_value() {
            return format!("{}", c as i64);
        }
        let mut parts = Vec::new();
        if r.id != 0 && r.off != 0 {
            parts.push(format!("id={}{:+}", r.id, r.off));
        } else if r.id != 0 {
            parts.push(format!("id={}", r.id));
        }
        let s = scalar_parts(&r.v);
        if !s.is_empty() {
            parts.push(s);
        }
        if r.sym != 0 {
            parts.push(format!("n{}{:+}", r.sym, r.sym_d));
        }
        return format!("scalar({})", parts.join(","));
    }
    if let Kind::Stack { .. } = r.kind {
        if r.v.const_value() == Some(0) {
            return format!("fp{}", r.off);
        }
    }
    let mut parts: Vec<String> = Vec::new();
    if r.id != 0 {
        parts.push(format!("id={}", r.id));
    }
    if r.ref_id != 0 {
        parts.push(format!("ref_obj_id={}", r.ref_id));
    }
    match r.kind {
        Kind::MapValue { map }
        | Kind::MapValueOrNull { map }
        | Kind::MapHandle { map }
        | Kind::MapHandleOrNull { map }
        | Kind::MapKey { map } => parts.push(map_desc(maps, map)),
        Kind::Mem { size, .. } | Kind::MemOrNull { size, .. } => parts.push(format!("sz={size}")),
        Kind::Func { pc } => parts.push(format!("pc={pc}")),
        Kind::Stack { frame } => parts.push(format!("frame={frame}")),
        _ => {}
    }
    if r.off != 0 || matches!(r.kind, Kind::Packet | Kind::PacketMeta) {
        parts.push(format!("off={}", r.off));
    }
    if let Some(range) = r.range {
        parts.push(format!("r={range}"));
    }
    if r.sym != 0 {
        // The fact `base + var + n<sym> + d <= end`.
        parts.push(format!("r=n{}{:+}", r.sym, r.sym_d));
    }
    if r.from_s != 0 {
        parts.push(format!("from=id{}+n{}{:+}", r.from_g, r.from_s, r.from_d));
    }
    if r.kind.is_pointer() && r.v.const_value() != Some(0) && !matches!(r.kind, Kind::Func { .. }) {
        let s = scalar_parts(&r.v);
        parts.push(if s.is_empty() { "var_off=unknown".to_string() } else { s });
    }
    format!("{}({})", r.kind.name(), parts.join(","))
}

/// Every initialised register and stack slot, frame by frame.
pub fn state(st: &State, maps: &[MapInfo]) -> String {
    let mut out = String::new();
    for (k, f) in st.frames.iter().enumerate() {
        if st.frames.len() > 1 {
            write!(out, "{}frame{k}: ", if k > 0 { "\n" } else { "" }).ok();
        }
        let mut first = true;
        let mut sep = |out: &mut String| {
            if !first {
                out.push(' ');
            }
            first = false;
        };
        for (i, r) in f.regs.iter().enumerate() {
            if r.kind == Kind::NotInit {
                continue;
            }
            sep(&mut out);
            write!(out, "R{i}={}", reg(r, maps)).ok();
        }
        for (i, s) in f.stack.iter().enumerate() {
            if s.bytes.iter().all(|b| *b == Byte::Invalid) {
                continue;
            }
            sep(&mut out);
            let o = -8 * (i as i64 + 1);
            if s.spill_size() == 8 {
                write!(out, "fp{o}={}", reg(&s.spill, maps)).ok();
                continue;
            }
            // Kernel order: highest address first.
            let chars: String = s
                .bytes
                .iter()
                .rev()
                .map(|b| match b {
                    Byte::Invalid => '?',
                    Byte::Misc => 'm',
                    Byte::Zero => '0',
                    Byte::Spill => 'r',
                    Byte::DynptrStart | Byte::DynptrRest => 'd',
                })
                .collect();
            write!(out, "fp{o}={chars}").ok();
            if s.bytes[0] == Byte::Spill {
                write!(out, "({})", reg(&s.spill, maps)).ok();
            }
        }
    }
    if !st.refs.is_empty() {
        write!(out, " refs={:?}", st.refs).ok();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_isa::assemble;

    #[test]
    fn prints_like_the_kernel() {
        let p = assemble(
            "ldxw %r3, [%r2+8]
             stw [%r10-4], 0
             add %r1, 8
             jgt %r2, %r3, +1
             call 1
             exit",
        )
        .expect("asm");
        let maps = [];
        assert_eq!(insn(&p, 0, &maps), "(61) r3 = *(u32 *)(r2 +8)");
        assert_eq!(insn(&p, 1, &maps), "(62) *(u32 *)(r10 -4) = 0");
        assert_eq!(insn(&p, 2, &maps), "(07) r1 += 8");
        assert_eq!(insn(&p, 3, &maps), "(2d) if r2 > r3 goto pc+1");
        assert_eq!(insn(&p, 4, &maps), "(85) call bpf_map_lookup_elem#1");
        assert_eq!(insn(&p, 5, &maps), "(95) exit");
        let mut st = State::entry();
        st.cur_mut().regs[2] = Reg { range: Some(14), ..Reg::ptr(Kind::Packet, 0) };
        st.cur_mut().regs[3] = Reg::scalar(Scalar::urange(0, 255));
        st.cur_mut().slot_mut(0).bytes = [Byte::Misc; 8];
        assert_eq!(
            state(&st, &maps),
            "R1=ctx() R2=pkt(off=0,r=14) R3=scalar(umax=255) R10=fp0 fp-8=mmmmmmmm"
        );
    }
}
