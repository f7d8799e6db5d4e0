//! Calls: helper calls checked against their prototypes (the kernel's
//! `check_helper_call`), callbacks verified as functions invoked any number of times,
//! and bpf-to-bpf calls with a frame of their own.

use super::mem::HelperAccess;
use super::{Flow, Verifier, K};
use crate::error::LeakTarget;
use crate::helpers::{map_func_compatible, ArgType, CallbackKind, RetType};
use crate::reg::{Kind, Reg, Slice};
use crate::scalar::Scalar;
use crate::state::{Byte, Frame, FrameKind, State};
use spine_abi::helper as h;
use spine_isa::Insn;

/// `bpf_loop` refuses more iterations than this (the kernel's `BPF_MAX_LOOPS`).
const MAX_LOOPS: u64 = 1 << 23;
/// Largest size a memory argument may have (the kernel's `BPF_MAX_VAR_SIZ`).
const MAX_VAR_SIZ: u64 = 1 << 29;

/// What the arguments established, for the checks that span several of them.
#[derive(Default)]
struct CallMeta {
    map: Option<usize>,
    /// The pointer argument waiting for its size: register, value, access, may be NULL.
    mem: Option<(u8, Reg, HelperAccess, bool)>,
    func: Option<usize>,
    release: Option<u32>,
    alloc_size: Option<u64>,
    /// The lock argument: its map and the value pointer's id.
    lock: Option<(u16, u32)>,
    /// The timer argument's map.
    timer_map: Option<u16>,
    /// A slice's buffer on the stack: its frame and offset.
    slice_buf: Option<(u8, i16)>,
}

impl Verifier<'_> {
    /// A bpf-to-bpf call. Allowed with a lock held, as the kernel allows a static
    /// function (the callee is verified in this state, so it may not call helpers
    /// either, and may release the lock).
    pub(super) fn call_local(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<Flow, K> {
        let target = i.branch_target(pc).unwrap_or(0) as usize;
        self.push_frame(st, pc, target, FrameKind::Call)?;
        let n = st.frames.len();
        let args: [Reg; 5] = std::array::from_fn(|k| st.frames[n - 2].regs[k + 1]);
        st.cur_mut().regs[1..6].copy_from_slice(&args);
        Ok(Flow::Next(target))
    }

    fn push_frame(
        &mut self,
        st: &mut State,
        pc: usize,
        target: usize,
        kind: FrameKind,
    ) -> Result<(), K> {
        let frames = st.frames.len() + 1;
        if frames > self.env.limits.max_call_frames {
            return Err(K::CallTooDeep { frames });
        }
        let caller = st.cur().subprog;
        let callee = self.cfg.subprog_of[target];
        if !self.call_edges.contains(&(caller, callee, pc)) {
            self.call_edges.push((caller, callee, pc));
        }
        st.frames.push(Frame::new(frames - 1, kind, pc, callee));
        Ok(())
    }

    pub(super) fn call_helper(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<Flow, K> {
        let id = i.imm as u32;
        let proto = match self.env.helpers.proto(id) {
            Some(p) => p.clone(),
            None => {
                return Err(match h::name(id) {
                    Some(name) => K::HelperNotAllowed { id, name },
                    None => K::UnknownHelper { id },
                })
            }
        };
        if st.lock.is_some() && !matches!(id, h::SPIN_LOCK | h::SPIN_UNLOCK) {
            return Err(K::CallWhileLocked);
        }
        // Every number passed to a helper is precise: sizes, flags, indexes and
        // constants its checks and its result depend on.
        let args = proto
            .args
            .iter()
            .enumerate()
            .filter(|(_, &a)| a != ArgType::DontCare)
            .fold(0u16, |m, (k, _)| m | 1 << (k + 1));
        self.need(st, args);
        let mut meta = CallMeta::default();
        for (k, &arg) in proto.args.iter().enumerate() {
            if arg == ArgType::DontCare {
                continue;
            }
            let reg = k as u8 + 1;
            let r = Self::read(st, reg)?;
            self.check_arg(st, id, reg, r, arg, &mut meta)?;
        }
        if let Some((reg, _, _, _)) = meta.mem {
            // A memory argument without a size after it: prototypes never do this.
            return Err(K::HelperArgType {
                helper: id,
                reg,
                expected: "sized memory",
                found: "no size",
            });
        }
        match id {
            h::TAIL_CALL => {
                if !st.refs.is_empty() {
                    return Err(K::TailCallWithReference);
                }
                if matches!(st.cur().kind, FrameKind::Callback | FrameKind::Async) {
                    return Err(K::TailCallInCallback);
                }
                let s = st.cur().subprog;
                self.sub_tail_call[s] = true;
            }
            h::SPIN_LOCK => {
                if st.lock.is_some() {
                    return Err(K::LockAlreadyHeld);
                }
                st.lock = meta.lock;
            }
            h::SPIN_UNLOCK => {
                let (Some(held), Some(given)) = (st.lock, meta.lock) else {
                    return Err(K::UnlockWithoutLock);
                };
                if held != given {
                    return Err(K::UnlockOtherLock {
                        held_map: held.0,
                        held_id: held.1,
                        given_map: given.0,
                        given_id: given.1,
                    });
                }
                st.lock = None;
            }
            _ => {}
        }
        if let Some(rid) = meta.release {
            if !st.refs.contains(&rid) {
                return Err(K::InvalidRelease { helper: id, reg: 1 });
            }
            st.refs.retain(|&x| x != rid);
            invalidate(st, |r| r.ref_id == rid);
        }
        if let Some(kind) = proto.callback {
            return self.call_with_callback(pc, st, kind, &meta);
        }
        self.finish_call(st, &proto.ret, proto.changes_pkt_data, id, &meta);
        Ok(Flow::Next(pc + 1))
    }

    /// r1-r5 clobbered, packet pointers gone if the packet may have moved, r0 set.
    fn finish_call(
        &mut self,
        st: &mut State,
        ret: &RetType,
        changes_pkt: bool,
        id: u32,
        meta: &CallMeta,
    ) {
        for r in &mut st.cur_mut().regs[1..6] {
            *r = Reg::NOT_INIT;
        }
        if changes_pkt {
            invalidate(st, |r| r.kind.is_packet_family() || r.kind.is_pkt_slice());
        }
        let r0 = match ret {
            RetType::Void => Reg::NOT_INIT,
            RetType::Integer => match id {
                h::GET_PRANDOM_U32 | h::GET_SMP_PROCESSOR_ID => {
                    Reg::scalar(Scalar::unknown_bytes(4))
                }
                _ => Reg::unknown(),
            },
            RetType::MapValueOrNull => {
                let m = meta.map.unwrap_or(0);
                let kind = match self.inner.get(m).copied().flatten() {
                    Some(inner) => Kind::MapHandleOrNull { map: inner },
                    None => Kind::MapValueOrNull { map: m as u16 },
                };
                Reg { id: self.fresh_id(), ..Reg::ptr(kind, 0) }
            }
            RetType::RingbufRecordOrNull => {
                let size = meta.alloc_size.unwrap_or(0) as u32;
                let rid = self.fresh_id();
                st.refs.push(rid);
                let kind = Kind::MemOrNull { size, slice: Slice::No };
                Reg { id: self.fresh_id(), ref_id: rid, ..Reg::ptr(kind, 0) }
            }
            RetType::SliceOrNull { rdonly } => {
                let size = meta.alloc_size.unwrap_or(0) as u32;
                self.stack_slices |= meta.slice_buf.is_some();
                let slice = match (meta.slice_buf, *rdonly) {
                    (Some((frame, off)), true) => Slice::ReadOnlyStack { frame, off },
                    (Some((frame, off)), false) => Slice::ReadWriteStack { frame, off },
                    (None, true) => Slice::ReadOnly,
                    (None, false) => Slice::ReadWrite,
                };
                Reg { id: self.fresh_id(), ..Reg::ptr(Kind::MemOrNull { size, slice }, 0) }
            }
        };
        st.cur_mut().regs[0] = r0;
    }

    /// `bpf_loop` and `bpf_for_each_map_elem`: the call site is a loop head whose body
    /// is one callback invocation; the helper may return after any number of them.
    fn call_with_callback(
        &mut self,
        pc: usize,
        st: &mut State,
        kind: CallbackKind,
        meta: &CallMeta,
    ) -> Result<Flow, K> {
        let Some(func) = meta.func else {
            return Err(K::HelperArgType { helper: 0, reg: 2, expected: "func", found: "none" });
        };
        if kind == CallbackKind::Timer {
            return self.set_timer_callback(pc, st, func, meta);
        }
        if kind == CallbackKind::Loop {
            let zero = st.cur().regs[4].is_null();
            let site = self.loop_sites.entry(pc).or_insert((true, Some(func)));
            site.0 &= zero;
            if site.1 != Some(func) {
                site.1 = None;
            }
        }
        let snapshot = st.clone();
        let Some(p) = self.head(pc, snapshot, true).map_err(|f| f.kind)? else {
            return Ok(Flow::Done);
        };
        let mut inv = p.clone();
        self.push_frame(&mut inv, pc, func, FrameKind::Callback)?;
        let n = inv.frames.len();
        let caller = inv.frames[n - 2].regs;
        let cb = &mut inv.cur_mut().regs;
        match kind {
            CallbackKind::Loop => {
                cb[1] = Reg::scalar(Scalar::urange(0, MAX_LOOPS - 1));
                cb[2] = caller[3];
            }
            CallbackKind::Timer => unreachable!("handled above"),
            CallbackKind::ForEachMapElem => {
                let m = meta.map.unwrap_or(0) as u16;
                cb[1] = Reg::ptr(Kind::MapHandle { map: m }, 0);
                cb[2] = Reg::ptr(Kind::MapKey { map: m }, 0);
                cb[3] = Reg::ptr(Kind::MapValue { map: m }, 0);
                cb[4] = caller[3];
            }
        }
        self.push_pending(func, inv)?;
        *st = p;
        let ret = RetType::Integer;
        self.finish_call(st, &ret, false, 0, meta);
        Ok(Flow::Next(pc + 1))
    }

    /// `bpf_timer_set_callback`: the callback runs later, on its own, as the kernel's
    /// async callbacks do: it is queued once per (callback, map) as a function entered
    /// with r1 = the timer's map, r2 = a key and r3 = a value of that map, below an
    /// empty frame (the runtime enters it through a one-call wrapper, so its call
    /// chain has a frame less to use). Its stack chain is checked from it alone.
    fn set_timer_callback(
        &mut self,
        pc: usize,
        st: &mut State,
        func: usize,
        meta: &CallMeta,
    ) -> Result<Flow, K> {
        let m = meta.timer_map.unwrap_or(0);
        if !self.async_cbs.contains(&(func, m)) {
            self.async_cbs.push((func, m));
            let callee = self.cfg.subprog_of[func];
            if !self.async_roots.contains(&(callee, pc)) {
                self.async_roots.push((callee, pc));
            }
            let wrapper = Frame::new(0, FrameKind::Main, usize::MAX, 0);
            let mut cb = Frame::new(1, FrameKind::Async, pc, callee);
            cb.regs[1] = Reg::ptr(Kind::MapHandle { map: m }, 0);
            cb.regs[2] = Reg::ptr(Kind::MapKey { map: m }, 0);
            cb.regs[3] = Reg::ptr(Kind::MapValue { map: m }, 0);
            let inv = State { frames: vec![wrapper, cb], refs: Vec::new(), lock: None };
            self.push_pending(func, inv)?;
        }
        self.finish_call(st, &RetType::Integer, false, h::TIMER_SET_CALLBACK, meta);
        Ok(Flow::Next(pc + 1))
    }

    #[allow(clippy::too_many_arguments)]
    fn check_arg(
        &mut self,
        st: &mut State,
        helper: u32,
        reg: u8,
        r: Reg,
        arg: ArgType,
        meta: &mut CallMeta,
    ) -> Result<(), K> {
        let wrong = |expected: &'static str| K::HelperArgType {
            helper,
            reg,
            expected,
            found: r.kind.name(),
        };
        match arg {
            ArgType::DontCare => {}
            ArgType::Anything => {
                if r.kind.is_pointer() {
                    return Err(K::PointerLeak { reg, into: LeakTarget::HelperArg });
                }
            }
            ArgType::ConstMapPtr => {
                let Kind::MapHandle { map } = r.kind else { return Err(wrong("map_ptr")) };
                let m = usize::from(map);
                let info = &self.maps[m];
                if !map_func_compatible(helper, info.map_type) {
                    return Err(K::MapTypeMismatch {
                        helper,
                        map: m as u32,
                        map_type: info.map_type,
                    });
                }
                // `record_func_map`: "write into map forbidden".
                if matches!(helper, h::MAP_PUSH_ELEM | h::MAP_POP_ELEM) && info.read_only {
                    return Err(K::ReadOnlyMap { map: m as u32, name: info.name.clone() });
                }
                // `bpf_timer_init`: the map must be the one the timer lives in.
                if let Some(timer_map) = meta.timer_map.filter(|&t| t != map) {
                    return Err(K::TimerMapMismatch { timer_map, map: m as u32 });
                }
                meta.map = Some(m);
            }
            ArgType::MapKey | ArgType::MapValue => {
                let Some(m) = meta.map else { return Err(wrong("map_ptr first")) };
                let info = &self.maps[m];
                let size = if arg == ArgType::MapKey { info.key_size } else { info.value_size };
                if !self.is_mem_kind(r.kind) {
                    return Err(wrong(if arg == ArgType::MapKey {
                        "map_key"
                    } else {
                        "map_value"
                    }));
                }
                self.helper_mem(
                    st,
                    helper,
                    reg,
                    r,
                    &Scalar::constant(size.into()),
                    HelperAccess::Read,
                )?;
            }
            ArgType::UninitMapValue => {
                let Some(m) = meta.map else { return Err(wrong("map_ptr first")) };
                // No packet either: the kernel's pop and peek prototypes lack
                // `pkt_access` ("helper access to the packet is not allowed").
                if !self.is_mem_kind(r.kind)
                    || matches!(r.kind, Kind::MapKey { .. } | Kind::Packet | Kind::PacketMeta)
                {
                    return Err(wrong("stack, map_value or mem (the packet is not allowed)"));
                }
                let size = self.maps[m].value_size;
                // A bloom filter's peek only reads the value it tests. The kernel's
                // prototype still says the buffer is filled; taking its word would let a
                // program read stack bytes nobody wrote. Unwritten bytes given here are
                // zeroed at each invocation instead, and stay unreadable afterwards.
                let access = if self.maps[m].map_type == spine_abi::map_type::BLOOM_FILTER {
                    HelperAccess::Read
                } else {
                    HelperAccess::Uninit
                };
                self.helper_mem(st, helper, reg, r, &Scalar::constant(size.into()), access)?;
            }
            ArgType::Mem { rdonly, maybe_null } => {
                if !(self.is_mem_kind(r.kind) || (maybe_null && r.is_null())) {
                    return Err(wrong("mem"));
                }
                if matches!(r.kind, Kind::MapKey { .. }) && !rdonly {
                    return Err(wrong("writable mem"));
                }
                let access = if rdonly { HelperAccess::Read } else { HelperAccess::ReadWrite };
                meta.mem = Some((reg, r, access, maybe_null));
            }
            ArgType::UninitMem => {
                if !self.is_mem_kind(r.kind) || matches!(r.kind, Kind::MapKey { .. }) {
                    return Err(wrong("mem"));
                }
                meta.mem = Some((reg, r, HelperAccess::Uninit, false));
            }
            ArgType::FixedUninitMem { size } => {
                if !self.is_mem_kind(r.kind) || matches!(r.kind, Kind::MapKey { .. }) {
                    return Err(wrong("mem"));
                }
                let total = i64::from(r.off);
                if !(crate::tnum::Tnum::constant(total as u64) + r.v.t).is_aligned(size.into()) {
                    return Err(K::MisalignedAccess { reg, off: total, size: size.into() });
                }
                self.helper_mem(
                    st,
                    helper,
                    reg,
                    r,
                    &Scalar::constant(size.into()),
                    HelperAccess::Uninit,
                )?;
            }
            ArgType::ConstSize | ArgType::ConstSizeOrZero => {
                if !r.is_scalar() {
                    return Err(wrong("scalar size"));
                }
                let Some((preg, ptr, access, maybe_null)) = meta.mem.take() else {
                    return Err(wrong("size after memory"));
                };
                let v = r.v;
                if v.smin < 0 {
                    return Err(K::HelperSizeNegative { helper, reg, smin: v.smin });
                }
                if v.umin == 0 && arg == ArgType::ConstSize {
                    return Err(K::HelperSizeZero { helper, reg });
                }
                if v.umax >= MAX_VAR_SIZ {
                    return Err(K::HelperSizeUnbounded { helper, reg, umax: v.umax });
                }
                if maybe_null && ptr.is_null() {
                    if v.umax != 0 {
                        return Err(K::HelperArgType {
                            helper,
                            reg: preg,
                            expected: "mem (NULL only with size 0)",
                            found: "scalar",
                        });
                    }
                } else {
                    self.helper_mem(st, helper, preg, ptr, &v, access)?;
                }
            }
            ArgType::ConstAllocSizeOrZero => {
                let Some(c) = r.v.const_value().filter(|_| r.is_scalar()) else {
                    return Err(K::HelperSizeNotConst { helper, reg });
                };
                if c >= MAX_VAR_SIZ {
                    return Err(K::HelperSizeUnbounded { helper, reg, umax: c });
                }
                meta.alloc_size = Some(c);
            }
            ArgType::Ctx => {
                if r.kind != Kind::Ctx || r.off != 0 || r.v.const_value() != Some(0) {
                    return Err(wrong("ctx"));
                }
            }
            ArgType::CtxOrNull => {
                let ctx = r.kind == Kind::Ctx && r.off == 0 && r.v.const_value() == Some(0);
                if !ctx && !r.is_null() {
                    return Err(wrong("ctx or NULL"));
                }
            }
            ArgType::Func => {
                let Kind::Func { pc } = r.kind else { return Err(wrong("func")) };
                meta.func = Some(pc as usize);
            }
            ArgType::StackOrNull => {
                if !(matches!(r.kind, Kind::Stack { .. }) || r.is_null()) {
                    return Err(wrong("fp or NULL"));
                }
            }
            ArgType::RingbufRecord => {
                if !matches!(r.kind, Kind::Mem { .. })
                    || r.ref_id == 0
                    || r.off != 0
                    || r.v.const_value() != Some(0)
                {
                    return Err(K::InvalidRelease { helper, reg });
                }
                meta.release = Some(r.ref_id);
            }
            ArgType::SpinLock => {
                let Kind::MapValue { map } = r.kind else {
                    return Err(wrong("map_value with a bpf_spin_lock"));
                };
                let Some(off) = r.const_off() else {
                    return Err(wrong("map_value at a constant offset"));
                };
                let info = &self.maps[usize::from(map)];
                let Some(at) = info.spin_lock else {
                    return Err(K::NoSpinLock { map: u32::from(map), name: info.name.clone() });
                };
                if off != i64::from(at) {
                    return Err(K::SpinLockOffset { off, at });
                }
                meta.lock = Some((map, r.id));
            }
            ArgType::Timer => {
                let Kind::MapValue { map } = r.kind else {
                    return Err(wrong("map_value with a bpf_timer"));
                };
                // spine's runtime finds a timer among the program's own maps only.
                if usize::from(map) >= self.env.maps.len() {
                    return Err(wrong("a value of the program's own map (not an inner map)"));
                }
                let Some(off) = r.const_off() else {
                    return Err(wrong("map_value at a constant offset"));
                };
                let info = &self.maps[usize::from(map)];
                let Some(at) = info.timer else {
                    return Err(K::NoTimer { map: u32::from(map), name: info.name.clone() });
                };
                if off != i64::from(at) {
                    return Err(K::TimerOffset { off, at });
                }
                meta.timer_map = Some(map);
            }
            ArgType::DynptrUninit => {
                let (frame, off) = self.dynptr_at(st, helper, reg, r)?;
                let f = &mut st.frames[frame];
                let (first, rest) = dynptr_slots(off);
                let same = f.slot(first).bytes == [Byte::DynptrStart; 8]
                    && f.slot(rest).bytes == [Byte::DynptrRest; 8];
                if !same {
                    // A dynptr only partly under the new one: refused by name.
                    super::mem::dynptr_guard(f, off, off + 16)?;
                }
                for (i, b) in [(first, Byte::DynptrStart), (rest, Byte::DynptrRest)] {
                    let s = f.slot_mut(i);
                    s.bytes = [b; 8];
                    s.spill = Reg::NOT_INIT;
                }
            }
            ArgType::Dynptr => {
                let (frame, off) = self.dynptr_at(st, helper, reg, r)?;
                let f = &st.frames[frame];
                let (first, rest) = dynptr_slots(off);
                if f.slot(first).bytes != [Byte::DynptrStart; 8]
                    || f.slot(rest).bytes != [Byte::DynptrRest; 8]
                {
                    return Err(K::DynptrUninit { helper, reg, off });
                }
            }
            ArgType::SliceBuffer => {
                let ok = r.is_null()
                    || (self.is_mem_kind(r.kind)
                        && !matches!(r.kind, Kind::MapKey { .. })
                        && !matches!(r.kind, Kind::Mem { slice, .. } if slice.is_rdonly()));
                if !ok {
                    return Err(wrong("writable mem or NULL"));
                }
                meta.mem = Some((reg, r, HelperAccess::Uninit, true));
            }
            ArgType::ConstSizeKnown => {
                let Some(c) = r.v.const_value().filter(|_| r.is_scalar()) else {
                    return Err(K::HelperSizeNotConst { helper, reg });
                };
                if c >= MAX_VAR_SIZ {
                    return Err(K::HelperSizeUnbounded { helper, reg, umax: c });
                }
                let Some((preg, ptr, access, _)) = meta.mem.take() else {
                    return Err(wrong("size after memory"));
                };
                if !ptr.is_null() {
                    self.helper_mem(st, helper, preg, ptr, &Scalar::constant(c), access)?;
                }
                if let Kind::Stack { frame } = ptr.kind {
                    // Only a buffer at a known place can be followed while the slice
                    // lives.
                    let Some(off) = ptr.const_off().and_then(|o| i16::try_from(o).ok()) else {
                        return Err(wrong("a stack buffer at a constant offset"));
                    };
                    meta.slice_buf = Some((frame, off));
                }
                meta.alloc_size = Some(c);
            }
        }
        Ok(())
    }

    /// Where a dynptr argument points: its frame and (constant, 8-aligned) offset,
    /// with 16 bytes of the frame there, as the kernel's `dynptr_get_spi` demands.
    /// Pointer kinds a helper may read or write through: not an XSKMAP entry (the
    /// kernel's `PTR_TO_XDP_SOCK` is no memory argument of any helper).
    fn is_mem_kind(&self, k: Kind) -> bool {
        match k {
            Kind::MapValue { map } => {
                !super::mem::is_socket_map(self.maps[usize::from(map)].map_type)
            }
            Kind::Stack { .. }
            | Kind::Packet
            | Kind::PacketMeta
            | Kind::Mem { .. }
            | Kind::MapKey { .. } => true,
            _ => false,
        }
    }

    fn dynptr_at(&mut self, st: &State, helper: u32, reg: u8, r: Reg) -> Result<(usize, i64), K> {
        let Kind::Stack { frame } = r.kind else {
            return Err(K::HelperArgType {
                helper,
                reg,
                expected: "fp (a struct bpf_dynptr on the stack)",
                found: r.kind.name(),
            });
        };
        let frame = usize::from(frame);
        let off = r.const_off().unwrap_or(i64::MAX);
        let limit = -i64::from(self.env.limits.stack_per_frame);
        if frame >= st.frames.len() || off % 8 != 0 || off > -16 || off < limit {
            return Err(K::DynptrOffset { helper, reg, off });
        }
        self.record_depth(st, frame, off);
        Ok((frame, off))
    }
}

/// The slots of a dynptr at frame offset `off`: (its first 8 bytes, its last 8).
fn dynptr_slots(off: i64) -> (usize, usize) {
    let first = (-off / 8 - 1) as usize;
    (first, first - 1)
}

/// Slices whose buffer lies in frame `frame` or deeper become unusable: that stack is
/// gone once the frame returns.
pub(super) fn invalidate_frame_slices(st: &mut State, frame: usize) {
    invalidate(st, |r| match r.kind {
        Kind::Mem { slice, .. } | Kind::MemOrNull { slice, .. } => {
            slice.stack_buffer().is_some_and(|(f, _)| usize::from(f) >= frame)
        }
        _ => false,
    });
}

/// Every register and spilled register matching `pred` becomes unusable.
/// Registers and spills that `pred` picks become [`Kind::Stale`]: never again a
/// pointer, still subtractable from one another (as the kernel, loading as root, keeps
/// them as unknown numbers).
fn invalidate(st: &mut State, pred: impl Fn(&Reg) -> bool) {
    let stale = |r: &Reg| Reg::ptr(r.kind.stale(), 0);
    for f in &mut st.frames {
        for r in &mut f.regs {
            if r.kind.is_pointer() && pred(r) {
                *r = stale(r);
            }
        }
        for s in &mut f.stack {
            if s.bytes[0] == Byte::Spill && s.spill.kind.is_pointer() && pred(&s.spill) {
                s.spill = stale(&s.spill);
            }
        }
    }
}
