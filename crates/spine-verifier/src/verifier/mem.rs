//! Loads, stores and atomics: which pointer kinds may be dereferenced and where
//! (the kernel's `check_mem_access`), spill and fill of registers on the stack, and
//! the memory checks of helper arguments (`check_helper_mem_access`).

use super::{Verifier, K, MAX_VAR_OFF};
use crate::ctx::CtxFieldKind;
use crate::error::LeakTarget;
use crate::info::MemAccess;
use crate::reg::{Kind, Reg};
use crate::scalar::Scalar;
use crate::state::{clamp_packet_var, Byte, State};
use crate::tnum::Tnum;
use crate::MapInfo;
use spine_isa::{op, Insn};

/// The memory an access was proven to stay inside.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Region {
    /// Bytes `[lo, hi)` of frame `frame`'s stack may be touched; `fixed`: exactly those.
    Stack {
        frame: usize,
        lo: i64,
        hi: i64,
        fixed: bool,
    },
    Packet,
    PacketMeta,
    MapValue {
        map: usize,
    },
    Ctx {
        field: usize,
    },
    Mem,
    MapKey,
}

impl Region {
    fn access(self) -> MemAccess {
        match self {
            Region::Stack { .. } => MemAccess::Stack,
            Region::Packet => MemAccess::Packet,
            Region::PacketMeta => MemAccess::PacketMeta,
            Region::MapValue { map } => MemAccess::MapValue { map },
            Region::Ctx { field } => MemAccess::Ctx { field },
            Region::Mem => MemAccess::Mem,
            Region::MapKey => MemAccess::MapKey,
        }
    }
}

/// How a helper uses memory it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HelperAccess {
    Read,
    /// Read and written (`ARG_PTR_TO_MEM` without `MEM_RDONLY`).
    ReadWrite,
    /// Only written, at least `size.umin` bytes (`ARG_PTR_TO_UNINIT_MEM`).
    Uninit,
}

/// A value being stored.
#[derive(Clone, Copy)]
enum Val {
    Reg(Reg),
    Imm(i64),
}

impl Val {
    fn scalar(self) -> Option<Scalar> {
        match self {
            Val::Reg(r) if r.kind == Kind::Scalar => Some(r.v),
            Val::Reg(_) => None,
            Val::Imm(c) => Some(Scalar::constant(c as u64)),
        }
    }
}

impl Verifier<'_> {
    /// Bounds of `[ptr + off, ptr + off + size)` inside `[0, limit)`, with the variable
    /// part's signed range.
    fn bounded(
        ptr: &Reg,
        reg: u8,
        off: i64,
        size: u64,
        limit: u32,
        oob: impl Fn(i64) -> K,
    ) -> Result<(), K> {
        let fixed = i64::from(ptr.off) + off;
        let v = &ptr.v;
        if v.smax >= MAX_VAR_OFF || v.smin <= -MAX_VAR_OFF {
            return Err(K::UnboundedAccess { reg });
        }
        let lo = fixed + v.smin;
        if lo < 0 {
            return Err(if v.is_const() {
                oob(lo)
            } else {
                K::NegativeOffset { reg, min: v.smin }
            });
        }
        let hi = fixed + v.smax + size as i64;
        if hi > i64::from(limit) {
            return Err(oob(if v.is_const() { lo } else { fixed + v.smax }));
        }
        Ok(())
    }

    /// A map value's `bpf_spin_lock` word and `bpf_timer` are only ever touched by
    /// their helpers: any access whose possible bytes overlap them is refused (the
    /// kernel's `check_map_access` for special fields), by loads, stores and helpers
    /// reading or writing value memory alike. Runs after [`Self::bounded`].
    fn avoid_lock(info: &MapInfo, ptr: &Reg, reg: u8, off: i64, size: u64) -> Result<(), K> {
        let fixed = i64::from(ptr.off) + off;
        let lo = fixed + ptr.v.smin;
        let hi = fixed + ptr.v.smax + size as i64;
        let overlaps =
            |at: u32, len: u32| lo < i64::from(at) + i64::from(len) && hi > i64::from(at);
        if let Some(at) = info.spin_lock.filter(|&at| overlaps(at, 4)) {
            return Err(K::SpinLockAccess { reg, name: info.name.clone(), at });
        }
        if let Some(at) = info.timer.filter(|&at| overlaps(at, spine_abi::timer::SIZE)) {
            return Err(K::TimerAccess { reg, name: info.name.clone(), at });
        }
        Ok(())
    }

    fn packet_bounds(ptr: &Reg, reg: u8, off: i64, size: u64) -> Result<(), K> {
        if ptr.v.smin < 0 {
            return Err(K::NegativeOffset { reg, min: ptr.v.smin });
        }
        let fixed = i64::from(ptr.off) + off;
        let ok = fixed >= 0 && ptr.range.is_some_and(|r| fixed + size as i64 <= i64::from(r));
        if !ok {
            return Err(K::PacketOutOfBounds {
                reg,
                off: fixed,
                size,
                id: ptr.id,
                ptr_off: i64::from(ptr.off),
                range: ptr.range.map_or(-1, i64::from),
            });
        }
        Ok(())
    }

    fn stack_bounds(
        &mut self,
        st: &State,
        ptr: &Reg,
        frame: usize,
        off: i64,
        size: u64,
    ) -> Result<Region, K> {
        let fixed = i64::from(ptr.off) + off;
        let limit = -i64::from(self.env.limits.stack_per_frame);
        let size_i = size as i64;
        if frame >= st.frames.len() {
            return Err(K::StackOutOfBounds { off: fixed, size });
        }
        let (lo, hi, exact) = match ptr.v.const_value() {
            Some(c) => {
                let o = fixed.saturating_add(c as i64);
                (o, o.saturating_add(size_i), true)
            }
            None => {
                if ptr.v.smin <= -MAX_VAR_OFF || ptr.v.smax >= MAX_VAR_OFF {
                    return Err(K::StackOutOfBounds { off: fixed, size });
                }
                (fixed + ptr.v.smin, fixed + ptr.v.smax + size_i, false)
            }
        };
        if lo < limit || hi > 0 {
            return Err(K::StackOutOfBounds {
                off: if lo < limit { lo } else { hi - size_i },
                size,
            });
        }
        let aligned = (Tnum::constant(fixed as u64) + ptr.v.t).is_aligned(size);
        if !aligned {
            return Err(K::MisalignedStack { off: lo, size });
        }
        self.record_depth(st, frame, lo);
        Ok(Region::Stack { frame, lo, hi, fixed: exact })
    }

    /// Where `ptr + off` may be accessed with `size` bytes.
    fn check_access(
        &mut self,
        st: &State,
        reg: u8,
        ptr: Reg,
        off: i64,
        size: u64,
        write: bool,
    ) -> Result<Region, K> {
        match ptr.kind {
            Kind::NotInit => Err(K::UninitRegister { reg }),
            Kind::Scalar | Kind::PacketEnd | Kind::MapHandle { .. } | Kind::Func { .. } => {
                Err(K::InvalidMemAccess { reg, kind: ptr.kind.name() })
            }
            k if k.is_nullable() => Err(K::NullableDeref { reg, kind: k.name() }),
            Kind::Ctx => {
                let o = i64::from(ptr.off) + off;
                if !ptr.v.is_const() || ptr.v.const_value() != Some(0) {
                    return Err(K::CtxAccess { off: o, size });
                }
                let (idx, f) = self.env.ctx.field_at(o).ok_or(K::CtxAccess { off: o, size })?;
                if u64::from(f.size) != size {
                    return Err(K::CtxAccess { off: o, size });
                }
                if write && (!f.writable || f.kind != CtxFieldKind::Scalar) {
                    return Err(K::ReadOnlyCtx { off: o, field: f.name });
                }
                Ok(Region::Ctx { field: idx })
            }
            Kind::Stack { frame } => self.stack_bounds(st, &ptr, usize::from(frame), off, size),
            Kind::Packet => Self::packet_bounds(&ptr, reg, off, size).map(|()| Region::Packet),
            Kind::PacketMeta => {
                Self::packet_bounds(&ptr, reg, off, size).map(|()| Region::PacketMeta)
            }
            Kind::MapValue { map } if is_socket_map(self.maps[usize::from(map)].map_type) => {
                // The kernel's `PTR_TO_XDP_SOCK` (`check_sock_access`,
                // `bpf_xdp_sock_is_valid_access`): no write, and the one read of
                // `queue_id`, 4 bytes at offset 0 of the entry's record.
                let m = usize::from(map);
                let name = self.maps[m].name.clone();
                if write {
                    return Err(K::XdpSockWrite { reg, name });
                }
                let o = i64::from(ptr.off) + off;
                if ptr.v.const_value() != Some(0) || o != 0 || size != 4 {
                    let o = o.saturating_add(ptr.v.smin).clamp(i32::MIN.into(), i32::MAX.into());
                    return Err(K::XdpSockAccess { reg, name, off: o as i32, size: size as u8 });
                }
                Ok(Region::MapValue { map: m })
            }
            Kind::MapValue { map } => {
                let m = usize::from(map);
                let info = &self.maps[m];
                let vs = info.value_size;
                Self::bounded(&ptr, reg, off, size, vs, |o| K::MapValueOutOfBounds {
                    reg,
                    map: m as u32,
                    off: o,
                    size,
                    value_size: vs,
                })?;
                Self::avoid_lock(info, &ptr, reg, off, size)?;
                if write && self.map_read_only(m) {
                    return Err(K::ReadOnlyMap { map: m as u32, name: info.name.clone() });
                }
                Ok(Region::MapValue { map: m })
            }
            Kind::Mem { size: ms, slice } => {
                if write && slice.is_rdonly() {
                    return Err(K::ReadOnlySlice { reg });
                }
                Self::bounded(&ptr, reg, off, size, ms, |o| K::MemOutOfBounds {
                    reg,
                    off: o,
                    size,
                    mem_size: ms,
                })?;
                Ok(Region::Mem)
            }
            Kind::MapKey { map } => {
                if write {
                    return Err(K::InvalidMemAccess { reg, kind: "map_key (read-only)" });
                }
                let ks = self.maps[usize::from(map)].key_size;
                Self::bounded(&ptr, reg, off, size, ks, |o| K::MemOutOfBounds {
                    reg,
                    off: o,
                    size,
                    mem_size: ks,
                })?;
                Ok(Region::MapKey)
            }
            _ => Err(K::InvalidMemAccess { reg, kind: ptr.kind.name() }),
        }
    }

    /// Records in the path's history which stack bytes the instruction being checked
    /// touches, for precision marks to follow values through spills.
    fn note_stack(&mut self, region: &Region) {
        if let Region::Stack { frame, lo, hi, .. } = *region {
            if let Some(h) = self.hist.last_mut() {
                h.stack_access(frame, lo, hi);
            }
        }
    }

    /// Map values the program may not write: read-only maps, and device maps whose
    /// lookups return the kernel's own entry.
    pub(super) fn map_read_only(&self, m: usize) -> bool {
        use spine_abi::map_type as mt;
        let info = &self.maps[m];
        info.read_only
            || matches!(
                info.map_type,
                mt::DEVMAP | mt::DEVMAP_HASH | mt::XSKMAP | mt::SPINE_ENDPOINT
            )
    }

    pub(super) fn load(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<(), K> {
        let ptr = Self::read(st, i.src)?;
        let size = op::size_bytes(i.code) as u64;
        let sx = i.code & 0xe0 == op::MEMSX;
        let region = self.check_access(st, i.src, ptr, i64::from(i.off), size, false)?;
        self.record_access(pc, region.access())?;
        self.note_stack(&region);
        let ext = |v: Scalar| if sx { v.sext(size as u32 * 8) } else { v };
        let value = match region {
            Region::Stack { frame, lo, hi, fixed } => {
                if fixed {
                    self.stack_read_fixed(st, frame, lo, size, sx)?
                } else {
                    self.stack_read_range(st, frame, lo, hi)?;
                    Reg::scalar(ext(Scalar::unknown_bytes(size as u32)))
                }
            }
            Region::Ctx { field } => {
                if sx {
                    return Err(K::CtxAccess { off: i64::from(ptr.off) + i64::from(i.off), size });
                }
                match self.env.ctx.fields[field].kind {
                    CtxFieldKind::PacketStart => {
                        Reg { range: Some(0), ..Reg::ptr(Kind::Packet, 0) }
                    }
                    CtxFieldKind::PacketMeta => {
                        Reg { range: Some(0), ..Reg::ptr(Kind::PacketMeta, 0) }
                    }
                    CtxFieldKind::PacketEnd => Reg::ptr(Kind::PacketEnd, 0),
                    CtxFieldKind::Scalar => Reg::scalar(Scalar::unknown_bytes(size as u32)),
                    CtxFieldKind::ScalarMax(max) => Reg::scalar(Scalar::urange(0, u64::from(max))),
                }
            }
            Region::MapValue { map } if sx && is_socket_map(self.maps[map].map_type) => {
                // The kernel rewrites the load into a zero-extending one; a sign-extending
                // load of `queue_id` is refused here rather than given another meaning.
                let name = self.maps[map].name.clone();
                let off = ptr.off.saturating_add(i32::from(i.off));
                return Err(K::XdpSockAccess { reg: i.src, name, off, size: size as u8 });
            }
            Region::MapValue { map } => match self.frozen_read(map, &ptr, i.off, size) {
                Some(v) => Reg::scalar(ext(Scalar::constant(v))),
                None => Reg::scalar(ext(Scalar::unknown_bytes(size as u32))),
            },
            _ => Reg::scalar(ext(Scalar::unknown_bytes(size as u32))),
        };
        st.cur_mut().regs[usize::from(i.dst)] = value;
        Ok(())
    }

    /// The number a load of `size` bytes at `ptr + off` reads from a frozen read-only
    /// map value ([`crate::MapInfo::frozen`]), when the offset is constant.
    fn frozen_read(&self, map: usize, ptr: &Reg, off: i16, size: u64) -> Option<u64> {
        let info = self.maps.get(map)?;
        let bytes = info.frozen.as_deref().filter(|_| info.read_only)?;
        let at = i64::from(ptr.off) + ptr.v.const_value()? as i64 + i64::from(off);
        let at = usize::try_from(at).ok()?;
        let b = bytes.get(at..at.checked_add(size as usize)?)?;
        let mut le = [0u8; 8];
        le[..b.len()].copy_from_slice(b);
        Some(u64::from_le_bytes(le))
    }

    pub(super) fn store(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<(), K> {
        let ptr = Self::read(st, i.dst)?;
        let size = op::size_bytes(i.code) as u64;
        let val = if i.class() == op::STX {
            Val::Reg(Self::read(st, i.src)?)
        } else {
            Val::Imm(i64::from(i.imm))
        };
        let region = self.check_access(st, i.dst, ptr, i64::from(i.off), size, true)?;
        self.record_access(pc, region.access())?;
        self.note_stack(&region);
        let leak = |into| K::PointerLeak { reg: i.src, into };
        let is_ptr = matches!(val, Val::Reg(r) if r.kind.is_pointer());
        match region {
            Region::Stack { frame, lo, hi, fixed } => {
                if fixed {
                    self.stack_write_fixed(st, frame, lo, size, val)?;
                } else {
                    if is_ptr {
                        return Err(K::InvalidSpillSize { off: lo, size });
                    }
                    let zero = val.scalar().and_then(|s| s.const_value()) == Some(0);
                    self.stack_write_range(st, frame, lo, hi, zero)?;
                }
            }
            Region::Packet | Region::PacketMeta if is_ptr => return Err(leak(LeakTarget::Packet)),
            Region::MapValue { .. } if is_ptr => return Err(leak(LeakTarget::MapValue)),
            Region::Mem if is_ptr => return Err(leak(LeakTarget::Mem)),
            Region::Ctx { .. } if is_ptr => return Err(leak(LeakTarget::Ctx)),
            _ => {}
        }
        Ok(())
    }

    pub(super) fn atomic(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<(), K> {
        let ptr = Self::read(st, i.dst)?;
        let src = Self::read(st, i.src)?;
        let size = op::size_bytes(i.code) as u64;
        if src.kind.is_pointer() {
            return Err(K::PointerLeak { reg: i.src, into: LeakTarget::Scalar });
        }
        let cmpxchg = i.imm == op::ATOMIC_CMPXCHG;
        if cmpxchg {
            let r0 = Self::read(st, 0)?;
            if r0.kind.is_pointer() {
                return Err(K::PointerLeak { reg: 0, into: LeakTarget::Scalar });
            }
        }
        if matches!(ptr.kind, Kind::Ctx | Kind::Packet | Kind::PacketMeta) {
            return Err(K::AtomicNotAllowed { reg: i.dst, kind: ptr.kind.name() });
        }
        let region = self.check_access(st, i.dst, ptr, i64::from(i.off), size, true)?;
        let total = i64::from(ptr.off) + i64::from(i.off);
        if !(Tnum::constant(total as u64) + ptr.v.t).is_aligned(size) {
            return Err(K::MisalignedAccess { reg: i.dst, off: total, size });
        }
        self.record_access(pc, region.access())?;
        self.note_stack(&region);
        if let Region::Stack { frame, lo, hi, fixed } = region {
            self.stack_read_range(st, frame, lo, hi)?;
            if fixed {
                self.stack_write_fixed(st, frame, lo, size, Val::Reg(Reg::unknown()))?;
            } else {
                self.stack_write_range(st, frame, lo, hi, false)?;
            }
        }
        let old = Reg::scalar(Scalar::unknown_bytes(size as u32));
        if cmpxchg {
            st.cur_mut().regs[0] = old;
        } else if i.imm & op::FETCH != 0 {
            st.cur_mut().regs[usize::from(i.src)] = old;
        }
        Ok(())
    }

    /// A fill: the spilled register back when the read matches the spill, else a number
    /// built from the bytes (all of which must be initialised data).
    fn stack_read_fixed(
        &mut self,
        st: &State,
        frame: usize,
        o: i64,
        size: u64,
        sx: bool,
    ) -> Result<Reg, K> {
        let f = &st.frames[frame];
        dynptr_guard(f, o, o + size as i64)?;
        let (slot, idx) = f.byte(o);
        let s = f.slot(slot);
        let n = size as usize;
        let spill = s.spill_size();
        if s.bytes[0] == Byte::Spill && idx + n <= spill {
            if s.spill.kind.is_pointer() {
                if n != 8 {
                    return Err(K::InvalidSpillSize { off: o, size });
                }
                return Ok(s.spill);
            }
            let mut r = s.spill;
            if idx == 0 && n == spill {
                // Exact fill: keeps the value and its links.
            } else {
                r = Reg::scalar(
                    s.spill.v.rsh(&Scalar::constant(8 * idx as u64)).truncate(size as u32),
                );
            }
            if sx {
                r = Reg::scalar(r.v.sext(size as u32 * 8));
            }
            return Ok(r);
        }
        let mut all_zero = true;
        for j in idx..idx + n {
            match s.bytes[j] {
                Byte::Invalid => return Err(K::UninitStack { off: o, size }),
                Byte::Spill if s.spill.kind.is_pointer() => {
                    return Err(K::InvalidSpillSize { off: o, size })
                }
                Byte::Zero => {}
                Byte::Spill if s.spill.v.const_value() == Some(0) => {}
                _ => all_zero = false,
            }
        }
        let v = if all_zero { Scalar::constant(0) } else { Scalar::unknown_bytes(size as u32) };
        Ok(Reg::scalar(if sx { v.sext(size as u32 * 8) } else { v }))
    }

    /// Every byte of `[lo, hi)` holds initialised data (no pointer bits).
    fn stack_read_range(&mut self, st: &State, frame: usize, lo: i64, hi: i64) -> Result<(), K> {
        let f = &st.frames[frame];
        dynptr_guard(f, lo, hi)?;
        for o in lo..hi {
            let (slot, idx) = f.byte(o);
            let s = f.slot(slot);
            match s.bytes[idx] {
                Byte::Invalid => return Err(K::UninitStack { off: o, size: (hi - lo) as u64 }),
                Byte::Spill if s.spill.kind.is_pointer() => {
                    return Err(K::InvalidSpillSize { off: o, size: (hi - lo) as u64 })
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn stack_write_fixed(
        &mut self,
        st: &mut State,
        frame: usize,
        o: i64,
        size: u64,
        val: Val,
    ) -> Result<(), K> {
        let n = size as usize;
        if let Val::Reg(r) = val {
            if r.kind.is_pointer() {
                if n != 8 {
                    return Err(K::InvalidSpillSize { off: o, size });
                }
                if let Kind::Stack { frame: pf } = r.kind {
                    if usize::from(pf) > frame {
                        return Err(K::StackPointerToCaller { frame });
                    }
                }
            }
        }
        let mut val = val;
        if let Some(rw) =
            self.stack_slices.then(|| under_slice(st, frame, o, o + n as i64)).flatten()
        {
            if matches!(val, Val::Reg(r) if r.kind.is_pointer()) {
                return Err(K::SpillUnderSlice { off: o });
            }
            if rw {
                // A number stored under a live writable slice keeps no value.
                val = Val::Reg(Reg::scalar(Scalar::unknown_bytes(size as u32)));
            }
        }
        let f = &mut st.frames[frame];
        dynptr_destroy(f, o, o + n as i64);
        let (slot, idx) = f.byte(o);
        let s = f.slot_mut(slot);
        if idx == 0 {
            // A pointer partly overwritten leaves its other bytes unreadable (scrubbed
            // to invalid), so no pointer bits can be read back as a number.
            s.scrub_spill();
            let spilled = match val {
                Val::Reg(r) if r.kind.is_pointer() => Reg { sym: 0, sym_d: 0, from_s: 0, ..r },
                Val::Reg(r) => {
                    let t = r.v.truncate(size as u32);
                    Reg { id: if t == r.v { r.id } else { 0 }, ..Reg::scalar(t) }
                }
                Val::Imm(c) => Reg::constant(c as u64).with_truncated(size),
            };
            for b in &mut s.bytes[..n] {
                *b = Byte::Spill;
            }
            s.spill = spilled;
            return Ok(());
        }
        let zero = val.scalar().and_then(|v| v.const_value()) == Some(0);
        s.scrub_spill();
        for b in &mut s.bytes[idx..idx + n] {
            *b = if zero { Byte::Zero } else { Byte::Misc };
        }
        Ok(())
    }

    /// A store at a variable offset: every byte it may hit loses any spill; bytes it
    /// may miss are not thereby initialised.
    fn stack_write_range(
        &mut self,
        st: &mut State,
        frame: usize,
        lo: i64,
        hi: i64,
        zero: bool,
    ) -> Result<(), K> {
        let zero = zero && !(self.stack_slices && under_slice(st, frame, lo, hi) == Some(true));
        let f = &mut st.frames[frame];
        dynptr_guard(f, lo, hi)?;
        for o in lo..hi {
            let (slot, idx) = f.byte(o);
            if f.slot(slot).has_pointer_spill() {
                return Err(K::VarOffsetOverSpill { off: o });
            }
            let s = f.slot_mut(slot);
            s.scrub_spill();
            s.bytes[idx] = match s.bytes[idx] {
                Byte::Zero if zero => Byte::Zero,
                Byte::Invalid => Byte::Invalid,
                _ => Byte::Misc,
            };
        }
        Ok(())
    }

    /// Checks memory a helper reads or writes: `[ptr, ptr + size)` for every size in
    /// `size`'s range.
    pub(super) fn helper_mem(
        &mut self,
        st: &mut State,
        helper: u32,
        reg: u8,
        ptr: Reg,
        size: &Scalar,
        access: HelperAccess,
    ) -> Result<(), K> {
        let max = size.umax;
        let write = access != HelperAccess::Read;
        match ptr.kind {
            Kind::Stack { frame } => {
                let frame = usize::from(frame);
                if frame >= st.frames.len() {
                    return Err(K::StackOutOfBounds { off: i64::from(ptr.off), size: max });
                }
                let fixed = i64::from(ptr.off);
                if ptr.v.smin <= -MAX_VAR_OFF || ptr.v.smax >= MAX_VAR_OFF {
                    return Err(K::StackOutOfBounds { off: fixed, size: max });
                }
                let lo = fixed + ptr.v.smin;
                let hi = fixed + ptr.v.smax + max as i64;
                let limit = -i64::from(self.env.limits.stack_per_frame);
                if max > 0 && (lo < limit || hi > 0) {
                    return Err(K::StackOutOfBounds { off: lo, size: max });
                }
                if max == 0 {
                    return Ok(());
                }
                self.record_depth(st, frame, lo);
                // Bytes every call writes: only when the start and a minimum size are known.
                let sure = match ptr.v.const_value() {
                    Some(c) if access == HelperAccess::Uninit => (
                        fixed.saturating_add(c as i64),
                        fixed.saturating_add(c as i64).saturating_add(size.umin as i64),
                    ),
                    _ => (0, 0),
                };
                let f = &mut st.frames[frame];
                dynptr_guard(f, lo, hi)?;
                for o in lo..hi {
                    let (slot, idx) = f.byte(o);
                    let s = f.slot(slot);
                    if s.bytes[idx] == Byte::Spill && s.spill.kind.is_pointer() {
                        return Err(K::PointerLeak { reg, into: LeakTarget::HelperMem });
                    }
                    if s.bytes[idx] == Byte::Invalid && access != HelperAccess::Uninit {
                        self.stack_zeroing = true;
                    }
                    if write {
                        let s = f.slot_mut(slot);
                        s.scrub_spill();
                        let definitely = o >= sure.0 && o < sure.1;
                        s.bytes[idx] = match s.bytes[idx] {
                            Byte::Invalid if !definitely => Byte::Invalid,
                            _ => Byte::Misc,
                        };
                    }
                }
                Ok(())
            }
            Kind::Packet | Kind::PacketMeta => {
                if max == 0 {
                    return Ok(());
                }
                Self::packet_bounds(&ptr, reg, 0, max)
            }
            Kind::MapValue { map } if is_socket_map(self.maps[usize::from(map)].map_type) => {
                // The callers refuse these pointers as helper memory already
                // (`Verifier::is_mem_kind`); the kernel passes a `PTR_TO_XDP_SOCK` to no
                // helper that reads or writes memory through it.
                Err(K::InvalidMemAccess { reg, kind: "xdp_sock (an XSKMAP entry)" })
            }
            Kind::MapValue { map } => {
                let m = usize::from(map);
                let info = &self.maps[m];
                let vs = info.value_size;
                Self::bounded(&ptr, reg, 0, max, vs, |o| K::MapValueOutOfBounds {
                    reg,
                    map: m as u32,
                    off: o,
                    size: max,
                    value_size: vs,
                })?;
                if max > 0 {
                    Self::avoid_lock(info, &ptr, reg, 0, max)?;
                }
                if write && self.map_read_only(m) {
                    return Err(K::ReadOnlyMap { map: m as u32, name: info.name.clone() });
                }
                Ok(())
            }
            Kind::Mem { size: ms, slice } => {
                if write && slice.is_rdonly() {
                    return Err(K::ReadOnlySlice { reg });
                }
                Self::bounded(&ptr, reg, 0, max, ms, |o| K::MemOutOfBounds {
                    reg,
                    off: o,
                    size: max,
                    mem_size: ms,
                })
            }
            Kind::MapKey { map } if !write => {
                let ks = self.maps[usize::from(map)].key_size;
                Self::bounded(&ptr, reg, 0, max, ks, |o| K::MemOutOfBounds {
                    reg,
                    off: o,
                    size: max,
                    mem_size: ks,
                })
            }
            k => Err(K::HelperArgType {
                helper,
                reg,
                expected: "pointer to memory",
                found: k.name(),
            }),
        }
    }

    /// After a successful `p op end` style comparison: every packet pointer sharing
    /// `p`'s variable part may now be accessed up to `range` bytes from it.
    pub(super) fn mark_packet_range(st: &mut State, kind: Kind, id: u32, range: i32) {
        let mut from = None;
        st.for_each_reg_mut(|r| {
            if r.kind == kind && r.id == id {
                r.range = Some(r.range.map_or(range, |x| x.max(range)));
                clamp_packet_var(r);
                if r.from_s != 0 {
                    from = Some((r.from_g, r.from_s, r.from_d));
                }
            }
        });
        // This group is `group g + b(s) + d`: the group learns `base + var + b(s) +
        // d + range <= end`.
        if let Some((g, s, d)) = from {
            let c = d + i64::from(range);
            st.for_each_reg_mut(|r| {
                if r.kind == kind && r.id == g {
                    if r.sym == s {
                        r.sym_d = r.sym_d.max(c);
                    } else {
                        r.sym = s;
                        r.sym_d = c;
                    }
                }
            });
        }
    }
}

impl Reg {
    /// A constant truncated to a store of `size` bytes.
    fn with_truncated(self, size: u64) -> Reg {
        Reg::scalar(self.v.truncate(size as u32))
    }
}

/// An xskmap or spine's endpoint map: a lookup gives a pointer the kernel types
/// `PTR_TO_XDP_SOCK`: the program may test it for NULL, compare it, and read `queue_id`
/// (a `u32` at offset 0 of the entry's record) through it, nothing else.
pub(super) fn is_socket_map(t: u32) -> bool {
    matches!(t, spine_abi::map_type::XSKMAP | spine_abi::map_type::SPINE_ENDPOINT)
}

/// Refuses a load, a variable-offset store or a helper access touching the bytes
/// `[lo, hi)` of frame `f` where they hold a dynptr (the kernel refuses reads of them
/// as uninitialised stack, and helpers' writes to them), naming the dynptr.
pub(super) fn dynptr_guard(f: &crate::state::Frame, lo: i64, hi: i64) -> Result<(), K> {
    // Dynptrs are rare: look at the slots only when the frame holds one.
    if !f.stack.iter().any(|s| s.bytes[0].is_dynptr()) {
        return Ok(());
    }
    for o in lo..hi {
        let (slot, idx) = f.byte(o);
        let b = f.slot(slot).bytes[idx];
        if b.is_dynptr() {
            let start = -8 * (slot as i64 + 1);
            let dynptr = if b == Byte::DynptrStart { start } else { start - 8 };
            return Err(K::DynptrAccess { off: o, dynptr });
        }
    }
    Ok(())
}

/// Whether bytes `[lo, hi)` of frame `frame` may be the buffer of a live slice given a
/// stack buffer (held in any register or spill of the state): `Some(true)` if one such
/// slice is writable, `Some(false)` if all are read-only, `None` if there is none.
fn under_slice(st: &State, frame: usize, lo: i64, hi: i64) -> Option<bool> {
    let mut hit = None;
    st.for_each_reg(|r| {
        if let Kind::Mem { size, slice } | Kind::MemOrNull { size, slice } = r.kind {
            if let Some((f, off)) = slice.stack_buffer() {
                let (b_lo, b_hi) = (i64::from(off), i64::from(off) + i64::from(size));
                if usize::from(f) == frame && lo < b_hi && b_lo < hi {
                    hit = Some(hit.unwrap_or(false) || !slice.is_rdonly());
                }
            }
        }
    });
    hit
}

/// A store at a fixed offset over a dynptr destroys it, as the kernel's
/// `destroy_if_dynptr_stack_slot` does: both its slots become unwritten stack, so the
/// store's other bytes are unreadable and the dynptr can no longer be used.
fn dynptr_destroy(f: &mut crate::state::Frame, lo: i64, hi: i64) {
    if !f.stack.iter().any(|s| s.bytes[0].is_dynptr()) {
        return;
    }
    for o in lo..hi {
        let (slot, idx) = f.byte(o);
        let first = match f.slot(slot).bytes[idx] {
            Byte::DynptrStart => slot,
            Byte::DynptrRest => slot + 1,
            _ => continue,
        };
        for i in [first, first - 1] {
            *f.slot_mut(i) = crate::state::Slot::default();
        }
    }
}
