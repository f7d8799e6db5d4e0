//! ALU instructions: scalar arithmetic through [`Scalar`], and the pointer-arithmetic
//! rules (the kernel's `adjust_ptr_min_max_vals`): only `+`/`-` of a scalar, only on
//! pointers into memory with bounds, and `pointer - pointer` within one region.

use super::{Verifier, K, MAX_VAR_OFF};
use crate::reg::{Kind, Reg};
use crate::scalar::Scalar;
use crate::state::State;
use spine_isa::{op, Insn};

fn op_name(o: u8) -> &'static str {
    match o {
        op::ADD => "+=",
        op::SUB => "-=",
        op::MUL => "*=",
        op::DIV => "/=",
        op::OR => "|=",
        op::AND => "&=",
        op::LSH => "<<=",
        op::RSH => ">>=",
        op::NEG => "neg",
        op::MOD => "%=",
        op::XOR => "^=",
        op::MOV => "mov",
        op::ARSH => "s>>=",
        _ => "byte swap",
    }
}

/// 64-bit operation on scalars.
pub(crate) fn op64(i: Insn, a: &Scalar, b: &Scalar) -> Scalar {
    match i.code & 0xf0 {
        op::ADD => a.add(b),
        op::SUB => a.sub(b),
        op::MUL => a.mul(b),
        op::DIV if i.off == 1 => a.sdiv(b),
        op::DIV => a.udiv(b),
        op::MOD if i.off == 1 => a.smod(b),
        op::MOD => a.umod(b),
        op::OR => a.or(b),
        op::AND => a.and(b),
        op::XOR => a.xor(b),
        op::LSH => a.lsh(b),
        op::RSH => a.rsh(b),
        op::ARSH => a.arsh(b),
        op::NEG => a.neg(),
        op::END => a.swap_bytes((i.imm / 8) as u32),
        _ => Scalar::unknown(),
    }
}

/// 32-bit operation on scalars: computed on the low halves, zero-extended.
pub(crate) fn op32(i: Insn, a: &Scalar, b: &Scalar) -> Scalar {
    let (a4, b4) = (a.truncate(4), b.truncate(4));
    let sh = b4.and(&Scalar::constant(31));
    let r = match i.code & 0xf0 {
        op::ADD => a4.add(&b4),
        op::SUB => a4.sub(&b4),
        op::MUL => a4.mul(&b4),
        op::DIV if i.off == 1 => a.sext32().sdiv(&b.sext32()),
        op::DIV => a4.udiv(&b4),
        op::MOD if i.off == 1 => a.sext32().smod(&b.sext32()),
        op::MOD => a4.umod(&b4),
        op::OR => a4.or(&b4),
        op::AND => a4.and(&b4),
        op::XOR => a4.xor(&b4),
        op::LSH => a4.lsh(&sh),
        op::RSH => a4.rsh(&sh),
        op::ARSH => a.sext32().arsh(&sh),
        op::NEG => a4.neg(),
        op::END => {
            let bytes = (i.imm / 8) as u32;
            return if i.code & op::TO_BE != 0 { a.swap_bytes(bytes) } else { a.truncate(bytes) };
        }
        _ => Scalar::unknown(),
    };
    r.truncate(4)
}

impl Verifier<'_> {
    pub(super) fn alu(&mut self, i: Insn, st: &mut State) -> Result<(), K> {
        let is64 = i.class() == op::ALU64;
        let o = i.code & 0xf0;
        let x = i.code & op::X != 0;
        let dst = usize::from(i.dst);
        let imm = Reg::constant(i.imm as i64 as u64);
        if o == op::MOV {
            let src = if x { Self::read(st, i.src)? } else { imm };
            let out = if src.kind.is_pointer() {
                match (is64, i.off, src.kind.region()) {
                    (true, 0, _) => src,
                    (false, 0, Some(region)) => Reg::ptr(Kind::Trunc32 { region }, 0),
                    _ => {
                        let what = if is64 { "sign-extending mov" } else { "32-bit mov" };
                        return Err(K::PointerOpProhibited { reg: i.src, op: what });
                    }
                }
            } else if is64 && i.off != 0 {
                Reg::scalar(src.v.sext(i.off as u32))
            } else if is64 || (x && i.off == 0 && src.v.umax <= u64::from(u32::MAX)) {
                // A 32-bit copy of a number that fits in 32 bits is the number: linked
                // as a 64-bit copy, as the kernel does.
                let mut s = src;
                if x && s.id == 0 && !s.v.is_const() {
                    s.id = self.fresh_id();
                    st.cur_mut().regs[usize::from(i.src)].id = s.id;
                }
                s
            } else if i.off != 0 {
                Reg::scalar(src.v.sext(i.off as u32).truncate(4))
            } else {
                Reg::scalar(src.v.truncate(4))
            };
            st.cur_mut().regs[dst] = out;
            return Ok(());
        }
        let d = Self::read(st, i.dst)?;
        let s = if matches!(o, op::NEG | op::END) {
            Reg::constant(0)
        } else if x {
            Self::read(st, i.src)?
        } else {
            imm
        };
        if d.kind.is_pointer() || s.kind.is_pointer() {
            // The scalar that moves a pointer is precise.
            let mut regs = if d.kind.is_pointer() { 0 } else { 1 << i.dst };
            if x && !s.kind.is_pointer() {
                regs |= 1 << i.src;
            }
            self.need(st, regs);
            let reg = if d.kind.is_pointer() { i.dst } else { i.src };
            if !is64 && o == op::SUB && same_region(d.kind, s.kind) {
                // `w2 -= w3` on packet pointers: clang's 32-bit packet length.
                st.cur_mut().regs[dst] = Reg::scalar(Scalar::unknown_bytes(4));
                return Ok(());
            }
            if !is64 {
                return Err(K::PointerOpProhibited { reg, op: "32-bit arithmetic" });
            }
            let out = self.ptr_arith(i, d, s, st)?;
            st.cur_mut().regs[dst] = out;
            return Ok(());
        }
        let v = if is64 { op64(i, &d.v, &s.v) } else { op32(i, &d.v, &s.v) };
        let mut out = Reg::scalar(v);
        // `r2 = r1; r2 += k`: r2 stays linked to r1, `k` apart (the kernel's
        // BPF_ADD_CONST), so a check on r2 (clang's `x - lo > hi - lo` for `x < lo ||
        // x > hi`) also bounds r1. Any other write breaks the link (a new `Reg`).
        // A 32-bit add links `(base + k) mod 2^32`: only on the base itself (no offset
        // yet) when it fits in 32 bits; a link made so takes no further add.
        let linkable = if is64 {
            !d.link32
        } else {
            d.off == 0 && !d.link32 && d.v.umax <= u64::from(u32::MAX)
        };
        if linkable && d.id != 0 && matches!(o, op::ADD | op::SUB) {
            let k = if is64 {
                s.v.const_value().map(|k| k as i64)
            } else {
                s.v.const32().map(|k| i64::from(k as i32))
            };
            let k = if o == op::SUB { k.and_then(i64::checked_neg) } else { k };
            if let Some(off) = k
                .and_then(|k| i64::from(d.off).checked_add(k))
                .and_then(|off| i32::try_from(off).ok())
            {
                out.id = d.id;
                out.off = off;
                out.link32 = !is64;
            }
        }
        // `i += k` keeps the counter's relation to the fixed number it was based on.
        if is64 && d.sym != 0 && matches!(o, op::ADD | op::SUB) {
            let k = s.v.const_value().map(|k| k as i64);
            let k = if o == op::SUB { k.and_then(i64::checked_neg) } else { k };
            if let Some(k) = k {
                let fits = d.v.smin.checked_add(k).is_some() && d.v.smax.checked_add(k).is_some();
                let nd = d.sym_d.saturating_add(k);
                if fits && nd.unsigned_abs() < MAX_VAR_OFF as u64 {
                    out.sym = d.sym;
                    out.sym_d = nd;
                }
            }
        }
        st.cur_mut().regs[dst] = out;
        Ok(())
    }

    fn ptr_arith(&mut self, i: Insn, d: Reg, s: Reg, st: &mut State) -> Result<Reg, K> {
        let o = i.code & 0xf0;
        // An invalidated pointer moved by a number stays an invalidated pointer of its
        // region (the kernel, as root, adds to the unknown number it keeps): clang may
        // form `iph + 1` after the helper call as well as before it.
        match (d.kind, s.kind) {
            (Kind::Stale { .. }, _) if s.is_scalar() && (o == op::ADD || o == op::SUB) => {
                return Ok(Reg::ptr(d.kind, 0));
            }
            (_, Kind::Stale { .. }) if d.is_scalar() && o == op::ADD => {
                return Ok(Reg::ptr(s.kind, 0));
            }
            _ => {}
        }
        let trunc = |k: Kind| matches!(k, Kind::Trunc32 { .. } | Kind::Stale { .. });
        let stale_diff =
            o == op::SUB && matches!(d.kind, Kind::Stale { .. }) && same_region(d.kind, s.kind);
        if (trunc(d.kind) || trunc(s.kind)) && !stale_diff {
            return Err(K::PointerPointerArith {
                reg: i.dst,
                op: o,
                left: d.kind.name(),
                right: s.kind.name(),
            });
        }
        if d.kind.is_pointer() && s.kind.is_pointer() {
            if o == op::SUB && same_region(d.kind, s.kind) {
                return Ok(Reg::unknown());
            }
            return Err(K::PointerPointerArith {
                reg: i.dst,
                op: o,
                left: d.kind.name(),
                right: s.kind.name(),
            });
        }
        let (ptr, off_reg, preg) = if d.kind.is_pointer() { (d, s, i.dst) } else { (s, d, i.src) };
        if o != op::ADD && o != op::SUB {
            return Err(K::PointerOpProhibited { reg: preg, op: op_name(o) });
        }
        if o == op::SUB && !d.kind.is_pointer() {
            return Err(K::PointerOpProhibited { reg: preg, op: "subtraction from a scalar" });
        }
        let c = off_reg.v.const_value().map(|c| c as i64);
        let movable = match ptr.kind {
            // An XSKMAP entry is the kernel's `PTR_TO_XDP_SOCK`: no arithmetic.
            Kind::MapValue { map } => {
                !super::mem::is_socket_map(self.maps[usize::from(map)].map_type)
            }
            Kind::Packet
            | Kind::PacketMeta
            | Kind::Stack { .. }
            | Kind::Mem { .. }
            | Kind::MapKey { .. } => true,
            _ => false,
        };
        if !movable {
            if c == Some(0) {
                return Ok(ptr);
            }
            let kind = if matches!(ptr.kind, Kind::MapValue { .. }) {
                "xdp_sock"
            } else {
                ptr.kind.name()
            };
            return Err(K::PointerArithProhibited { reg: preg, kind });
        }
        let unbounded = K::PointerOffsetUnbounded { reg: preg, kind: ptr.kind.name() };
        let mut out = ptr;
        if let Some(c) = c {
            let c = if o == op::SUB { c.checked_neg().ok_or(unbounded.clone())? } else { c };
            if c.unsigned_abs() >= MAX_VAR_OFF as u64 {
                return Err(unbounded);
            }
            let off = i64::from(ptr.off) + c;
            if off.unsigned_abs() >= MAX_VAR_OFF as u64 {
                return Err(unbounded);
            }
            out.off = off as i32;
            return Ok(out);
        }
        let sv = off_reg.v;
        if sv.smin == i64::MIN || sv.smin <= -MAX_VAR_OFF || sv.smin >= MAX_VAR_OFF {
            return Err(unbounded);
        }
        let v = if o == op::ADD { ptr.v.add(&sv) } else { ptr.v.sub(&sv) };
        if v.smin == i64::MIN || v.smin <= -MAX_VAR_OFF || v.smin >= MAX_VAR_OFF {
            return Err(unbounded);
        }
        out.v = v;
        if matches!(ptr.kind, Kind::Packet | Kind::PacketMeta) {
            // `base + var + r <= end` and the new variable part is `var ± s`: the proven
            // range shrinks by the most `s` can add (the kernel drops it entirely).
            out.id = self.fresh_id();
            out.sym = 0;
            out.sym_d = 0;
            out.from_s = 0;
            let shrink = if o == op::ADD { sv.smax } else { sv.smin.saturating_neg() };
            let mut range = ptr.range.and_then(|r| i64::from(r).checked_sub(shrink));
            if o == op::ADD && ptr.from_s == 0 && i.code & op::X != 0 {
                // Name the scalar, so checks on the new pointer teach the old group, and
                // use what the old group knows about it: with `s = b(S) + d_s`,
                // `base + var + b(S) + c <= end` gives `base + var' + (c - d_s) <= end`.
                let sreg = if d.kind.is_pointer() { i.src } else { i.dst };
                let mut sym = off_reg.sym;
                if sym == 0 {
                    sym = self.fresh_id();
                    let r = &mut st.cur_mut().regs[usize::from(sreg)];
                    r.sym = sym;
                    r.sym_d = 0;
                }
                let sd = if off_reg.sym == 0 { 0 } else { off_reg.sym_d };
                out.from_g = ptr.id;
                out.from_s = sym;
                out.from_d = sd;
                if ptr.sym == sym && sym != 0 {
                    let c = ptr.sym_d - sd;
                    range = Some(range.map_or(c, |r| r.max(c)));
                }
            }
            out.range = range.and_then(crate::state::range_of);
            crate::state::clamp_packet_var(&mut out);
        }
        Ok(out)
    }
}

/// Pointers whose difference is a plain number about one region.
fn same_region(a: Kind, b: Kind) -> bool {
    a.region().is_some() && a.region() == b.region()
}
