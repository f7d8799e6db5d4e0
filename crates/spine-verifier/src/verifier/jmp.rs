//! Jumps: conditional branches on scalars (refining both sides, and every scalar linked
//! to the compared ones), null checks, packet-range checks, and `exit`.

use super::{Flow, Verifier, K, MAX_VAR_OFF};
use crate::cond::{branch_taken, refine, Cmp};
use crate::error::LeakTarget;
use crate::reg::{Kind, Reg};
use crate::scalar::Scalar;
use crate::state::{FrameKind, State, MAX_PACKET_LEN};
use spine_isa::{op, Insn};

/// A packet-family pointer a helper invalidated.
fn stale_packet(k: Kind) -> bool {
    k == Kind::Packet.stale()
}

/// What a comparison involving pointers allows on each side.
enum PtrCmp {
    /// `a == 0` / `a != 0` on a nullable pointer with this id and reference.
    Null { id: u32, ref_id: u32, null_when_taken: bool },
    /// Decided: only this side is possible.
    Known(bool),
    /// Packet pointers: refine ranges on each side.
    Packet,
    /// Allowed, teaches nothing.
    Opaque,
    /// A nullable map value (this id) compared for equality with a value of the same
    /// map known not to be null: where they are equal it is not null either.
    SameAs { id: u32, equal_when_taken: bool },
}

impl Verifier<'_> {
    pub(super) fn jmp(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<Flow, K> {
        let class = i.class();
        match i.code & 0xf0 {
            op::JA => Ok(Flow::Next(i.branch_target(pc).unwrap_or(0) as usize)),
            op::EXIT if class == op::JMP => self.exit(st),
            op::CALL if class == op::JMP => {
                if i.code & op::X != 0 {
                    Err(K::UnsupportedInsn("callx"))
                } else if i.is_local_call() {
                    self.call_local(pc, i, st)
                } else {
                    self.call_helper(pc, i, st)
                }
            }
            _ => self.cond(pc, i, st),
        }
    }

    fn cond(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<Flow, K> {
        let jmp32 = i.class() == op::JMP32;
        let x = i.code & op::X != 0;
        let Some(cmp) = Cmp::from_opcode(i.code) else {
            return Err(K::UnsupportedInsn("unknown jump"));
        };
        let target = (pc as i64 + 1 + i64::from(i.off)) as usize;
        let a = Self::read(st, i.dst)?;
        let b = if x { Self::read(st, i.src)? } else { Reg::constant(i.imm as i64 as u64) };
        let operands = 1 << i.dst | if x { 1 << i.src } else { 0 };
        // Each side is first worked out as an edit of the state (`None`: impossible), so
        // the state is cloned only when both sides are explored, and edited in place for
        // the side this path continues with.
        let (taken, fall) = if a.is_scalar() && b.is_scalar() {
            let known = branch_taken(&a.v, &b.v, cmp, jmp32);
            let side = |c: Cmp| {
                let (mut va, mut vb) = (a.v, b.v);
                refine(&mut va, &mut vb, c, jmp32).then_some(Edit::Scalar { va, vb })
            };
            let taken = if known == Some(false) { None } else { side(cmp) };
            let fall = if known == Some(true) { None } else { side(cmp.negate()) };
            if taken.is_none() || fall.is_none() {
                // A side was ruled out by the operands' values: they are precise.
                self.need(st, operands);
            }
            (taken, fall)
        } else {
            // A scalar compared with a pointer (a null test) decides by its value.
            self.need(st, operands);
            let how = Self::classify_ptr_cmp(i, cmp, jmp32, &a, &b)?;
            // A value that may hold a lock keeps its id, which names the element a lock
            // is taken through (`reg_may_point_to_spin_lock`).
            let keep = [&a, &b].iter().any(|r| match r.kind {
                Kind::MapValueOrNull { map } => {
                    self.maps.get(usize::from(map)).is_some_and(|m| m.spin_lock.is_some())
                }
                _ => false,
            });
            match how {
                PtrCmp::Known(true) => (Some(Edit::Keep), None),
                PtrCmp::Known(false) => (None, Some(Edit::Keep)),
                PtrCmp::Opaque => (Some(Edit::Keep), Some(Edit::Keep)),
                PtrCmp::Null { id, ref_id, null_when_taken } => {
                    let null = |is_null| Edit::Null { id, ref_id, is_null, keep };
                    (Some(null(null_when_taken)), Some(null(!null_when_taken)))
                }
                PtrCmp::Packet => (
                    packet_side(&a, &b, cmp).map(Edit::Packet),
                    packet_side(&a, &b, cmp.negate()).map(Edit::Packet),
                ),
                PtrCmp::SameAs { id, equal_when_taken } => {
                    let not_null = Edit::Null { id, ref_id: 0, is_null: false, keep };
                    if equal_when_taken {
                        (Some(not_null), Some(Edit::Keep))
                    } else {
                        (Some(Edit::Keep), Some(not_null))
                    }
                }
            }
        };
        match (taken, fall) {
            (Some(t), Some(f)) => {
                let mut other = st.clone();
                t.apply(&mut other, i, &a, &b);
                self.push_pending(target, other)?;
                f.apply(st, i, &a, &b);
                Ok(Flow::Next(pc + 1))
            }
            (Some(t), None) => {
                t.apply(st, i, &a, &b);
                Ok(Flow::Next(target))
            }
            (None, Some(f)) => {
                f.apply(st, i, &a, &b);
                Ok(Flow::Next(pc + 1))
            }
            (None, None) => Ok(Flow::Done),
        }
    }

    fn classify_ptr_cmp(i: Insn, cmp: Cmp, jmp32: bool, a: &Reg, b: &Reg) -> Result<PtrCmp, K> {
        let prohibited =
            || K::PointerComparison { reg: i.dst, left: a.kind.name(), right: b.kind.name() };
        let eq = matches!(cmp, Cmp::Eq | Cmp::Ne);
        if jmp32 {
            // clang tests a pointer loaded from a 32-bit context field for NULL with
            // `if w4 == 0`. A valid pointer's low half may be zero, so both sides stay
            // possible (the kernel assumes it never is); the pointer is unchanged.
            let vs_null =
                |p: &Reg, o: &Reg| p.kind.is_pointer() && !p.kind.is_nullable() && o.is_null();
            if eq && (vs_null(a, b) || vs_null(b, a)) {
                return Ok(PtrCmp::Opaque);
            }
            return Err(prohibited());
        }
        // Null checks, in either operand order.
        for (p, other) in [(a, b), (b, a)] {
            if eq && other.is_null() {
                if p.kind.is_nullable() {
                    return Ok(PtrCmp::Null {
                        id: p.id,
                        ref_id: p.ref_id,
                        null_when_taken: cmp == Cmp::Eq,
                    });
                }
                // Valid addresses are never 0 (the low half of one may be).
                if p.kind.is_pointer() && !matches!(p.kind, Kind::Trunc32 { .. }) {
                    return Ok(PtrCmp::Known(cmp == Cmp::Ne));
                }
            }
        }
        // As the kernel's `check_cond_jmp_op` for a maybe-null pointer compared with one
        // that is not: the equal side proves the nullable one not null. Only values of
        // one map here (spine refuses comparing pointers of different regions).
        for (p, other) in [(a, b), (b, a)] {
            if let (Kind::MapValueOrNull { map: m }, Kind::MapValue { map: n }) =
                (p.kind, other.kind)
            {
                if eq && m == n && p.ref_id == 0 {
                    return Ok(PtrCmp::SameAs { id: p.id, equal_when_taken: cmp == Cmp::Eq });
                }
            }
        }
        let same = match (a.kind, b.kind) {
            (x, y) if x.is_packet_family() && y.is_packet_family() => return Ok(PtrCmp::Packet),
            // A packet pointer kept across a helper that may move the packet, compared
            // with the packet's new bounds or pointers (katran-style encapsulators that
            // check the old `iph + 1` against the new `data_end`): the kernel, loading
            // as root, holds the old one as an unknown number and lets it be compared.
            // Both sides stay possible and nothing is learned; the answer is an order
            // of packet positions, never an address.
            (x, y) if stale_packet(x) && (y.is_packet_family() || stale_packet(y)) => true,
            (x, y) if stale_packet(y) && x.is_packet_family() => true,
            (Kind::Stack { frame: f }, Kind::Stack { frame: g }) => f == g,
            (Kind::MapValue { map: m }, Kind::MapValue { map: n }) => m == n,
            (Kind::Mem { .. }, Kind::Mem { .. }) => true,
            (Kind::Ctx, Kind::Ctx) => true,
            // A dynptr slice is its buffer or the packet: `if (p == buf)
            // bpf_dynptr_write(...)` writes a copy back, as the kernel's docs advise.
            (Kind::Mem { slice, .. }, Kind::Stack { .. } | Kind::Packet)
            | (Kind::Stack { .. } | Kind::Packet, Kind::Mem { slice, .. })
                if eq && slice != crate::reg::Slice::No =>
            {
                true
            }
            _ => false,
        };
        if same {
            Ok(PtrCmp::Opaque)
        } else {
            Err(prohibited())
        }
    }

    /// A function's exit. The program, and a callback, must have released the lock;
    /// a bpf-to-bpf callee may return with it held, as in the kernel.
    fn exit(&mut self, st: &mut State) -> Result<Flow, K> {
        if st.lock.is_some() && st.cur().kind != FrameKind::Call {
            return Err(K::ExitWithLock);
        }
        let f = st.cur();
        match f.kind {
            FrameKind::Main => {
                let r0 = Self::read(st, 0)?;
                if r0.kind.is_pointer() {
                    return Err(K::PointerLeak { reg: 0, into: LeakTarget::Return });
                }
                if let Some(&id) = st.refs.first() {
                    return Err(K::UnreleasedReference { id });
                }
                Ok(Flow::Done)
            }
            FrameKind::Call => {
                if let Some(h) = self.hist.last_mut() {
                    h.exit = crate::precise::EXIT_CALL;
                }
                let r0 = f.regs[0];
                if let Kind::Stack { frame } = r0.kind {
                    if usize::from(frame) >= st.depth() {
                        return Err(K::ReturnStackPointer);
                    }
                }
                let site = f.callsite;
                let gone = st.depth();
                st.frames.pop();
                let c = st.cur_mut();
                c.regs[0] = r0;
                for r in &mut c.regs[1..6] {
                    *r = Reg::NOT_INIT;
                }
                if self.stack_slices {
                    super::call::invalidate_frame_slices(st, gone);
                }
                Ok(Flow::Next(site + 1))
            }
            FrameKind::Callback => {
                if let Some(h) = self.hist.last_mut() {
                    h.exit = crate::precise::EXIT_CALLBACK;
                }
                self.need(st, 1);
                let r0 = Self::read(st, 0)?;
                if !(r0.is_scalar() && r0.v.umax <= 1) {
                    return Err(K::CallbackReturn { found: crate::fmt::reg(&r0, &self.maps) });
                }
                let site = f.callsite;
                let gone = st.depth();
                st.frames.pop();
                if self.stack_slices {
                    super::call::invalidate_frame_slices(st, gone);
                }
                // Back to the helper call: it may invoke the callback again or return.
                Ok(Flow::Next(site))
            }
            FrameKind::Async => {
                if let Some(h) = self.hist.last_mut() {
                    h.exit = crate::precise::EXIT_CALLBACK;
                }
                self.need(st, 1);
                let r0 = Self::read(st, 0)?;
                if !(r0.is_scalar() && r0.v.const_value() == Some(0)) {
                    return Err(K::AsyncCallbackReturn { found: crate::fmt::reg(&r0, &self.maps) });
                }
                if let Some(&id) = st.refs.first() {
                    return Err(K::UnreleasedReference { id });
                }
                Ok(Flow::Done)
            }
        }
    }
}

/// Sets a compared scalar and every scalar linked to it (same id: the values are
/// `base + off` for one base, so a register `d` apart gets `v + d`, as the kernel's
/// `sync_linked_regs`).
fn set_scalar(st: &mut State, reg: u8, known: &Reg, v: Scalar) {
    st.cur_mut().regs[usize::from(reg)].v = v;
    if known.id == 0 {
        return;
    }
    let shift = |v: &Scalar, d: i64| if d == 0 { *v } else { v.add(&Scalar::constant(d as u64)) };
    // The base: `v - off`, modulo 2^32 for a 32-bit link (whose base fits in 32 bits).
    let base = shift(&v, -i64::from(known.off));
    let base = if known.link32 { base.truncate(4) } else { base };
    st.for_each_reg_mut(|r| {
        if r.kind == Kind::Scalar && r.id == known.id {
            r.v = if r.off == known.off && r.link32 == known.link32 {
                v
            } else {
                let x = shift(&base, i64::from(r.off));
                if r.link32 {
                    x.truncate(4)
                } else {
                    x
                }
            };
        }
    });
}

/// A null check's outcome on one side, applied to every copy of the pointer.
fn mark_null(st: &mut State, id: u32, ref_id: u32, is_null: bool, keep_id: bool) {
    st.for_each_reg_mut(|r| {
        if r.kind.is_nullable() && r.id == id {
            if is_null {
                *r = Reg::constant(0);
            } else {
                r.kind = r.kind.non_null();
                if !keep_id {
                    r.id = 0;
                }
            }
        }
    });
    if is_null && ref_id != 0 {
        st.refs.retain(|&x| x != ref_id);
    }
}

/// What `a cmp b` on packet pointers proves on its side: with `p` the pointer bounded
/// by `e` (the packet end, or the packet start for a metadata pointer), `p <= e` proves
/// `p.off` bytes from `p`'s base and `p < e` one more (`Some((kind, id, range))` to
/// mark). `None` when the side is impossible given ranges already proven.
fn packet_side(a: &Reg, b: &Reg, cmp: Cmp) -> Option<Option<(Kind, u32, i32)>> {
    let is_start = |r: &Reg| r.kind == Kind::Packet && r.off == 0 && r.v.const_value() == Some(0);
    let (p, c) = match (a.kind, b.kind) {
        (Kind::Packet, Kind::PacketEnd) => (a, cmp),
        (Kind::PacketEnd, Kind::Packet) => (b, cmp.flip()),
        (Kind::PacketMeta, Kind::Packet) if is_start(b) => (a, cmp),
        (Kind::Packet, Kind::PacketMeta) if is_start(a) => (b, cmp.flip()),
        _ => return Some(None),
    };
    let off = i64::from(p.off);
    let known_le = p.range.is_some_and(|r| off <= i64::from(r));
    let known_lt = p.range.is_some_and(|r| off < i64::from(r));
    let impossible = match c {
        Cmp::Gt => known_le,
        Cmp::Ge | Cmp::Eq => known_lt,
        _ => false,
    };
    if impossible {
        return None;
    }
    let fact = match c {
        Cmp::Le | Cmp::Eq => Some(off),
        Cmp::Lt => Some(off + 1),
        _ => None,
    };
    // As the kernel's `find_good_pkt_pointers`, nothing is learned from a pointer whose
    // fixed offset exceeds `MAX_PACKET_LEN` (its `MAX_PACKET_OFF`): `meta + 0x10000 <=
    // data` proves nothing, and a read through `meta` after it is refused as in the
    // kernel. The kernel also gives up when the variable part may exceed it, alone or with
    // the offset; spine keeps the range there (the comparison is exact in 64 bits below
    // `MAX_VAR_OFF`, and its widened loop pointers, past `MAX_PACKET_LEN` after a step,
    // need it), which is how it accepts packet walks the kernel can only unroll.
    let no_wrap = p.v.smax < MAX_VAR_OFF && p.v.smin > -MAX_VAR_OFF;
    let near = (0..=MAX_PACKET_LEN as i64).contains(&off) && no_wrap;
    Some(fact.filter(|r| *r >= 0 && near).map(|r| (p.kind, p.id, r as i32)))
}

/// What a conditional jump teaches on one of its sides, applied to the state that
/// continues there.
enum Edit {
    /// Nothing.
    Keep,
    /// The compared scalars' refined values (`vb` only for a register operand).
    Scalar { va: Scalar, vb: Scalar },
    /// A null check's outcome.
    Null { id: u32, ref_id: u32, is_null: bool, keep: bool },
    /// A packet range proven, if any.
    Packet(Option<(Kind, u32, i32)>),
}

impl Edit {
    fn apply(self, st: &mut State, i: Insn, a: &Reg, b: &Reg) {
        match self {
            Edit::Keep | Edit::Packet(None) => {}
            Edit::Scalar { va, vb } => {
                set_scalar(st, i.dst, a, va);
                if i.code & op::X != 0 {
                    set_scalar(st, i.src, b, vb);
                }
            }
            Edit::Null { id, ref_id, is_null, keep } => mark_null(st, id, ref_id, is_null, keep),
            Edit::Packet(Some((kind, id, r))) => Verifier::mark_packet_range(st, kind, id, r),
        }
    }
}
