//! The abstract machine state at one instruction: a stack of call frames (registers and
//! per-byte stack knowledge each), held references and the held spin lock; and the
//! lattice operations on it: subsumption (`includes`, the kernel's `states_equal`),
//! join and widening (used at loop heads), and the shape that decides which states may
//! be joined.

use crate::precise::Marks;
use crate::reg::{Kind, MapIdx, Reg};
use crate::scalar::{Scalar, Thresholds};
use smallvec::SmallVec;
use std::hash::{Hash, Hasher};

/// Largest `data_end - data` the runtime ever presents (the kernel's `MAX_PACKET_OFF`).
/// A proven range `base + var + r <= data_end` therefore bounds `var` by this minus `r`.
pub const MAX_PACKET_LEN: u64 = 0xffff;

/// The hash of [`State::shape`]: a multiply-rotate mix (FxHash's) over the few small
/// integers a shape is made of, finished with a 64-bit avalanche. Shapes only group
/// states inside one verification, so it needs speed, not resistance to chosen input:
/// two shapes that collide are merely joined, which blurs but stays sound.
struct ShapeHasher(u64);

impl ShapeHasher {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for ShapeHasher {
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        // splitmix64's finaliser: every input bit reaches every output bit.
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Ids collected while sanitizing a state at a prune point: inline, since a state holds
/// only a handful (sanitizing runs at every prune point of every path).
type Scratch = SmallVec<[u32; 16]>;

/// What is known about one stack byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Byte {
    /// Never written in this frame: may not be read into a register.
    #[default]
    Invalid,
    /// Holds some number.
    Misc,
    /// Holds zero.
    Zero,
    /// Part of the spilled register of its slot.
    Spill,
    /// The first (lowest-addressed) 8 bytes of a 16-byte `struct bpf_dynptr` that
    /// `bpf_dynptr_from_xdp` or `bpf_dynptr_clone` initialised: only dynptr helpers
    /// and kfuncs may use it (no load, store or other helper may touch its bytes).
    DynptrStart,
    /// The second 8 bytes of such a dynptr.
    DynptrRest,
}

impl Byte {
    pub fn is_dynptr(self) -> bool {
        matches!(self, Byte::DynptrStart | Byte::DynptrRest)
    }
}

/// Eight stack bytes at an 8-aligned offset. A spill covers bytes `0..n` (the low,
/// first-addressed bytes) and `spill` is then the value stored, truncated to `n` bytes
/// for scalars; pointers are always spilled whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Slot {
    pub bytes: [Byte; 8],
    pub spill: Reg,
}

impl Slot {
    /// Bytes held by the spill (0 when none).
    pub fn spill_size(&self) -> usize {
        self.bytes.iter().take_while(|b| **b == Byte::Spill).count()
    }

    pub fn has_pointer_spill(&self) -> bool {
        self.bytes[0] == Byte::Spill && self.spill.kind.is_pointer()
    }

    /// Forgets the value of a spilled number and of zero bytes (what is initialised
    /// stays so): an over-approximation, for slots whose value matters to no check.
    /// A number with a symbolic fact about it keeps its value, as registers do.
    pub fn forget_number(&mut self) {
        if self.bytes[0] == Byte::Spill && self.spill.kind == Kind::Scalar && self.spill.sym == 0 {
            let size = self.spill_size() as u32;
            self.spill = Reg::scalar(Scalar::unknown_bytes(size));
        }
        for b in self.bytes.iter_mut().filter(|b| **b == Byte::Zero) {
            *b = Byte::Misc;
        }
    }

    /// Forgets the value of a spilled number (keeping its links and symbolic facts:
    /// those stay compared) and of zero bytes: for a slot no check depended on.
    pub fn loosen(&mut self) {
        if self.bytes[0] == Byte::Spill && self.spill.kind == Kind::Scalar && self.spill.sym == 0 {
            self.spill.v = Scalar::unknown_bytes(self.spill_size() as u32);
        }
        for b in self.bytes.iter_mut().filter(|b| **b == Byte::Zero) {
            *b = Byte::Misc;
        }
    }

    /// Forgets the spilled register: its bytes become plain data, or invalid for a
    /// pointer (whose bits must never be read as a number).
    pub fn scrub_spill(&mut self) {
        if self.bytes[0] != Byte::Spill {
            return;
        }
        let to = if self.spill.kind.is_pointer() {
            Byte::Invalid
        } else if self.spill.v.const_value() == Some(0) {
            Byte::Zero
        } else {
            Byte::Misc
        };
        for b in self.bytes.iter_mut().filter(|b| **b == Byte::Spill) {
            *b = to;
        }
        self.spill = Reg::NOT_INIT;
    }
}

/// Why a frame exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameKind {
    Main,
    /// A bpf-to-bpf call from instruction `callsite`.
    Call,
    /// A callback invoked by the helper call at `callsite`.
    Callback,
    /// A timer callback set by the `bpf_timer_set_callback` call at `callsite`: it runs
    /// later, on its own, below a frame that holds nothing (the runtime's entry into
    /// it); its exit ends the run.
    Async,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub regs: [Reg; 11],
    /// Slot `i` covers `fp - 8(i+1) .. fp - 8i`.
    pub stack: Vec<Slot>,
    pub kind: FrameKind,
    pub callsite: usize,
    pub subprog: usize,
}

impl Frame {
    pub fn new(index: usize, kind: FrameKind, callsite: usize, subprog: usize) -> Frame {
        let mut regs = [Reg::NOT_INIT; 11];
        regs[10] = Reg::ptr(Kind::Stack { frame: index as u8 }, 0);
        Frame { regs, stack: Vec::new(), kind, callsite, subprog }
    }

    pub fn slot(&self, i: usize) -> Slot {
        self.stack.get(i).copied().unwrap_or_default()
    }

    pub fn slot_mut(&mut self, i: usize) -> &mut Slot {
        if self.stack.len() <= i {
            self.stack.resize(i + 1, Slot::default());
        }
        &mut self.stack[i]
    }

    /// The byte at frame offset `off` (negative).
    pub fn byte(&self, off: i64) -> (usize, usize) {
        let slot = ((-off - 1) / 8) as usize;
        let idx = (off + 8 * (slot as i64 + 1)) as usize;
        (slot, idx)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub frames: Vec<Frame>,
    /// Acquired references (ring-buffer records) not yet released.
    pub refs: Vec<u32>,
    /// The spin lock held: its map and the id of the value pointer it was taken
    /// through (the kernel's `active_lock` ptr and id; every copy of that pointer
    /// carries the id, so only the same element can be unlocked). Id 0: a pointer
    /// with no identity (a callback's value argument), as in the kernel.
    pub lock: Option<(MapIdx, u32)>,
}

impl State {
    /// The state at program entry: r1 = context, r10 = frame pointer.
    pub fn entry() -> State {
        let mut f = Frame::new(0, FrameKind::Main, usize::MAX, 0);
        f.regs[1] = Reg::ptr(Kind::Ctx, 0);
        State { frames: vec![f], refs: Vec::new(), lock: None }
    }

    /// Bytes this state occupies, for the verifier's memory bound.
    pub fn weight(&self) -> usize {
        std::mem::size_of::<State>()
            + self
                .frames
                .iter()
                .map(|f| std::mem::size_of::<Frame>() + f.stack.len() * std::mem::size_of::<Slot>())
                .sum::<usize>()
    }

    pub fn cur(&self) -> &Frame {
        &self.frames[self.frames.len() - 1]
    }

    pub fn cur_mut(&mut self) -> &mut Frame {
        let i = self.frames.len() - 1;
        &mut self.frames[i]
    }

    pub fn depth(&self) -> usize {
        self.frames.len() - 1
    }

    /// Every register and spilled register of every frame.
    pub fn for_each_reg_mut(&mut self, mut f: impl FnMut(&mut Reg)) {
        for fr in &mut self.frames {
            fr.regs.iter_mut().for_each(&mut f);
            for s in &mut fr.stack {
                if s.bytes[0] == Byte::Spill {
                    f(&mut s.spill);
                }
            }
        }
    }

    pub fn for_each_reg(&self, mut f: impl FnMut(&Reg)) {
        for fr in &self.frames {
            fr.regs.iter().for_each(&mut f);
            for s in &fr.stack {
                if s.bytes[0] == Byte::Spill {
                    f(&s.spill);
                }
            }
        }
    }

    /// Clears scalar ids that no other register shares: a lone id links nothing, and
    /// keeping it would only make equal states look different.
    pub fn drop_lone_scalar_ids(&mut self) {
        let mut ids: Scratch = SmallVec::new();
        self.for_each_reg(|r| {
            if r.kind == Kind::Scalar && r.id != 0 {
                ids.push(r.id);
            }
        });
        if ids.is_empty() {
            return;
        }
        ids.sort_unstable();
        self.for_each_reg_mut(|r| {
            if r.kind == Kind::Scalar && r.id != 0 {
                let lo = ids.partition_point(|&x| x < r.id);
                let hi = ids.partition_point(|&x| x <= r.id);
                if hi - lo < 2 {
                    r.id = 0;
                    r.off = 0;
                    r.link32 = false;
                }
            }
        });
    }

    /// Drops symbolic facts and derivations that nothing can use any more: a fact
    /// about a number no register holds (and no derivation names), a derivation from a
    /// group no register belongs to, and names no fact refers to.
    pub fn drop_dead_facts(&mut self) {
        // Most states hold no symbolic fact or derivation at all: nothing to drop.
        let mut any = false;
        self.for_each_reg(|r| any |= r.sym != 0 || r.from_s != 0);
        if !any {
            return;
        }
        let mut groups: Scratch = SmallVec::new();
        let mut held: Scratch = SmallVec::new();
        self.for_each_reg(|r| {
            if matches!(r.kind, Kind::Packet | Kind::PacketMeta) {
                groups.push(r.id);
            } else if r.kind == Kind::Scalar && r.sym != 0 {
                held.push(r.sym);
            }
        });
        let mut named: Scratch = SmallVec::new();
        self.for_each_reg_mut(|r| {
            if !matches!(r.kind, Kind::Packet | Kind::PacketMeta) {
                return;
            }
            if r.from_s != 0 && !groups.contains(&r.from_g) {
                r.from_s = 0;
            }
            if r.from_s != 0 {
                named.push(r.from_s);
            }
        });
        self.for_each_reg_mut(|r| {
            if matches!(r.kind, Kind::Packet | Kind::PacketMeta) && r.sym != 0 {
                if held.contains(&r.sym) || named.contains(&r.sym) {
                    named.push(r.sym);
                } else {
                    r.sym = 0;
                }
            }
        });
        self.for_each_reg_mut(|r| {
            if r.kind == Kind::Scalar && r.sym != 0 && !named.contains(&r.sym) {
                r.sym = 0;
                r.sym_d = 0;
            }
        });
    }

    /// Frames match in number, kind and call sites: only such states can be compared.
    pub fn same_frames(&self, o: &State) -> bool {
        self.frames.len() == o.frames.len()
            && self.frames.iter().zip(&o.frames).all(|(a, b)| {
                a.kind == b.kind && a.callsite == b.callsite && a.subprog == b.subprog
            })
    }

    /// A hash of what a join would otherwise have to blur: register kinds, which stack
    /// bytes are initialised, which hold pointers, the references and the lock. States
    /// of one shape are joined at loop heads; states of different shapes are kept apart.
    pub fn shape(&self) -> u64 {
        let mut h = ShapeHasher(0);
        self.frames.len().hash(&mut h);
        for f in &self.frames {
            (f.kind, f.callsite).hash(&mut h);
            for r in &f.regs {
                r.kind.hash(&mut h);
            }
            let used = f.stack.iter().rposition(|s| s.bytes.iter().any(|b| *b != Byte::Invalid));
            for s in &f.stack[..used.map_or(0, |u| u + 1)] {
                for b in s.bytes {
                    match b {
                        Byte::Invalid => 0u8,
                        Byte::Misc | Byte::Zero => 1,
                        Byte::Spill => 2,
                        Byte::DynptrStart => 3,
                        Byte::DynptrRest => 4,
                    }
                    .hash(&mut h);
                }
                if s.bytes[0] == Byte::Spill {
                    (s.spill.kind, s.spill_size()).hash(&mut h);
                }
            }
        }
        self.refs.len().hash(&mut h);
        // Whether a lock is held and in which map; its id differs from path to path.
        self.lock.map(|(m, _)| m).hash(&mut h);
        h.finish()
    }

    /// True if every concrete state `new` describes is described by `self`, so that
    /// exploring `new` can find nothing that exploring `self` does not.
    pub fn includes(&self, new: &State) -> bool {
        self.includes_with(new, None)
    }

    /// [`State::includes`] where only the scalars `marks` names (and those tied to
    /// others by an id or a symbolic fact) must include the new ones; any other scalar
    /// of `self` matches any scalar.
    pub fn includes_with(&self, new: &State, marks: Option<&Marks>) -> bool {
        if !self.same_frames(new) || self.refs.len() != new.refs.len() {
            return false;
        }
        // Necessary conditions first, with no id bookkeeping: a cached state that fails
        // to cover a visit most often differs in a register's kind or a packet range.
        for (fo, fnew) in self.frames.iter().zip(&new.frames) {
            if !fo.regs.iter().zip(&fnew.regs).all(|(o, n)| reg_may_include(o, n)) {
                return false;
            }
        }
        let mut ids = IdMap::default();
        match (self.lock, new.lock) {
            (None, None) => {}
            (Some((m, a)), Some((n, b))) if m == n && ids.check_both(a, b) => {}
            _ => return false,
        }
        for (a, b) in self.refs.iter().zip(&new.refs) {
            if !ids.refs(*a, *b) {
                return false;
            }
        }
        // Named numbers first (counters, then the ones derivations refer to), so that
        // the facts about them can be compared below.
        for (fi, (fo, fnew)) in self.frames.iter().zip(&new.frames).enumerate() {
            for (x, (o, n)) in fo.regs.iter().zip(&fnew.regs).enumerate() {
                if o.kind == Kind::Scalar
                    && o.sym != 0
                    && (n.kind != Kind::Scalar
                        || n.sym == 0
                        || !ids.sym(o.sym, n.sym, n.sym_d - o.sym_d, Some((fi, x))))
                {
                    return false;
                }
            }
        }
        for (fo, fnew) in self.frames.iter().zip(&new.frames) {
            for (o, n) in fo.regs.iter().zip(&fnew.regs) {
                if o.from_s != 0
                    && (n.from_s == 0
                        || n.off != o.off
                        || !ids.check_shifted(o.from_g, n.from_g, 0)
                        || !ids.sym(o.from_s, n.from_s, n.from_d - o.from_d, None))
                {
                    return false;
                }
            }
        }
        for (fi, (fo, fnew)) in self.frames.iter().zip(&new.frames).enumerate() {
            for (x, (o, n)) in fo.regs.iter().zip(&fnew.regs).enumerate() {
                let loose =
                    o.kind == Kind::Scalar && o.sym == 0 && marks.is_some_and(|m| !m.reg(fi, x));
                let ok = if loose {
                    // Imprecise: any scalar, linked as the old one was (a link carries
                    // a jump's refinement to a register that may be precise).
                    n.kind == Kind::Scalar && scalar_link_ok(o, n, &mut ids)
                } else {
                    reg_includes(o, n, &mut ids)
                };
                if !ok || !sym_includes(o, n, &ids, self, new) {
                    return false;
                }
            }
            let len = fo.stack.len().max(fnew.stack.len());
            for i in 0..len {
                let mut os = fo.slot(i);
                if marks.is_some_and(|m| !m.slot(fi, i)) {
                    os.loosen();
                }
                if !slot_includes(&os, &fnew.slot(i), &mut ids) {
                    return false;
                }
            }
        }
        true
    }

    /// The least state (in this domain) describing both; `None` if the frames differ.
    pub fn join(&self, o: &State, next_id: &mut u32) -> Option<State> {
        let lock_map = |s: &State| s.lock.map(|(m, _)| m);
        if !self.same_frames(o) || lock_map(self) != lock_map(o) || self.refs.len() != o.refs.len()
        {
            return None;
        }
        let mut ids = JoinIds { pairs: Vec::new(), next_id };
        let lock = match (self.lock, o.lock) {
            (Some((m, a)), Some((_, b))) => Some((m, ids.fresh_both(a, b))),
            _ => None,
        };
        let refs = self.refs.iter().zip(&o.refs).map(|(a, b)| ids.fresh(*a, *b, 0, 0)).collect();
        let frames = self
            .frames
            .iter()
            .zip(&o.frames)
            .map(|(a, b)| {
                let mut regs = [Reg::NOT_INIT; 11];
                for (r, (x, y)) in regs.iter_mut().zip(a.regs.iter().zip(&b.regs)) {
                    *r = join_reg(x, y, &mut ids);
                }
                let len = a.stack.len().max(b.stack.len());
                let stack = (0..len).map(|i| join_slot(&a.slot(i), &b.slot(i), &mut ids)).collect();
                discover_facts(a, b, &mut regs, ids.next_id);
                Frame { regs, stack, kind: a.kind, callsite: a.callsite, subprog: a.subprog }
            })
            .collect();
        Some(State { frames, refs, lock })
    }

    /// Widening of `self` (the old loop-head state) by `joined` (`self` joined with a new
    /// state). `hard` ignores the thresholds, for loops that keep refusing to settle.
    pub fn widen(&self, joined: &State, th: &Thresholds, hard: bool) -> State {
        let empty = Thresholds::default();
        let th = if hard { &empty } else { th };
        let mut out = joined.clone();
        for (fo, fj) in self.frames.iter().zip(&mut out.frames) {
            for (o, j) in fo.regs.iter().zip(fj.regs.iter_mut()) {
                widen_reg(o, j, th);
            }
            // A symbolic fact that got weaker could keep weakening: drop it.
            let snapshot = fj.regs;
            for p in 0..10 {
                let j = snapshot[p];
                if j.sym == 0 || !matches!(j.kind, Kind::Packet | Kind::PacketMeta) {
                    continue;
                }
                let Some(x) =
                    (0..10).find(|&x| snapshot[x].kind == Kind::Scalar && snapshot[x].sym == j.sym)
                else {
                    continue;
                };
                let d = i64::from(fo.regs[p].off) - i64::from(j.off);
                let old_c = fact_through(&fo.regs[p], &fo.regs[x], d);
                let new_c = fact_through(&j, &snapshot[x], 0);
                if let (Some(o), Some(n)) = (old_c, new_c) {
                    if n < o {
                        fj.regs[p].sym = 0;
                    }
                }
            }
            for (i, sj) in fj.stack.iter_mut().enumerate() {
                let so = fo.slot(i);
                if sj.bytes[0] == Byte::Spill && so.bytes[0] == Byte::Spill {
                    widen_reg(&so.spill, &mut sj.spill, th);
                }
            }
        }
        out
    }
}

/// A named number of the old state matched to the new state's: old name, new name,
/// `new - old` offset, and a register (frame, number) holding it.
type SymMatch = (u32, u32, i64, Option<(usize, usize)>);

/// Old-to-new id correspondence while checking subsumption. Scalar, packet and
/// nullable ids need only be functional (registers linked in the old state must be
/// linked in the new one); references must correspond one to one.
/// Inline capacities cover what real states link (a few scalar ids, one or two packet
/// groups): a comparison, done thousands of times per load, allocates nothing.
#[derive(Default)]
struct IdMap {
    map: SmallVec<[(u32, u32); 8]>,
    shifted: SmallVec<[(u32, u32, i64); 4]>,
    refs: SmallVec<[(u32, u32); 2]>,
    syms: SmallVec<[SymMatch; 4]>,
}

impl IdMap {
    /// [`IdMap::check`] for ids that may be 0 (no identity): both or neither.
    fn check_both(&mut self, old: u32, new: u32) -> bool {
        if old == 0 || new == 0 {
            return old == new;
        }
        self.check(old, new)
    }

    fn check(&mut self, old: u32, new: u32) -> bool {
        match self.map.iter().find(|(o, _)| *o == old) {
            Some(&(_, n)) => n == new,
            None => {
                self.map.push((old, new));
                true
            }
        }
    }

    /// Packet groups: the new group must be the old one shifted by one fixed amount.
    fn check_shifted(&mut self, old: u32, new: u32, d: i64) -> bool {
        match self.shifted.iter().find(|(o, _, _)| *o == old) {
            Some(&(_, n, e)) => n == new && e == d,
            None => {
                self.shifted.push((old, new, d));
                true
            }
        }
    }

    /// `b_old(old) == b_new(new) + delta`, consistently.
    fn sym(&mut self, old: u32, new: u32, delta: i64, at: Option<(usize, usize)>) -> bool {
        match self.syms.iter_mut().find(|e| e.0 == old) {
            Some(e) => {
                if e.3.is_none() {
                    e.3 = at;
                }
                e.1 == new && e.2 == delta
            }
            None => {
                self.syms.push((old, new, delta, at));
                true
            }
        }
    }

    fn refs(&mut self, old: u32, new: u32) -> bool {
        for &(o, n) in &self.refs {
            if o == old || n == new {
                return o == old && n == new;
            }
        }
        self.refs.push((old, new));
        true
    }
}

/// What [`reg_includes`] (and the comparison of an imprecise scalar) requires of the
/// kinds and packet ranges alone: false only where both would be false.
fn reg_may_include(o: &Reg, n: &Reg) -> bool {
    match o.kind {
        Kind::NotInit => true,
        k if k != n.kind => false,
        Kind::Packet | Kind::PacketMeta => packet_range_ok(o, n),
        _ => true,
    }
}

/// The new packet pointer has at least the old one's proven range, measured from where
/// each points.
fn packet_range_ok(o: &Reg, n: &Reg) -> bool {
    let d = i64::from(n.off) - i64::from(o.off);
    match (o.range, n.range) {
        (None, _) => true,
        (Some(r), Some(s)) => i64::from(s) - d >= i64::from(r),
        (Some(_), None) => false,
    }
}

/// A scalar linked in the old state is linked in the new one, to registers the same
/// distances apart (`off`, the offset from the link's base, may shift by one amount
/// for the whole group, as a packet group's).
fn scalar_link_ok(o: &Reg, n: &Reg, ids: &mut IdMap) -> bool {
    let d = i64::from(n.off) - i64::from(o.off);
    // A 32-bit link's group is compared unshifted (its base must fit in 32 bits).
    o.id == 0
        || (n.id != 0
            && o.link32 == n.link32
            && (d == 0 || !o.link32)
            && ids.check_shifted(o.id, n.id, d))
}

fn reg_includes(o: &Reg, n: &Reg, ids: &mut IdMap) -> bool {
    match o.kind {
        Kind::NotInit => true,
        Kind::Scalar => n.kind == Kind::Scalar && o.v.includes(&n.v) && scalar_link_ok(o, n, ids),
        _ => {
            if o.kind != n.kind {
                return false;
            }
            if (o.ref_id != 0 || n.ref_id != 0) && !ids.refs(o.ref_id, n.ref_id) {
                return false;
            }
            if !movable(o.kind) {
                return o.off == n.off
                    && o.v.includes(&n.v)
                    && (!o.kind.is_nullable() || ids.check(o.id, n.id));
            }
            // Compare where the pointers point, not how the offset is split.
            let d = i64::from(n.off) - i64::from(o.off);
            if !o.v.includes(&shifted(&n.v, d)) {
                return false;
            }
            match o.kind {
                Kind::Packet | Kind::PacketMeta => {
                    packet_range_ok(o, n) && (o.id == 0 || ids.check_shifted(o.id, n.id, d))
                }
                // Map values keep an id only where a lock may be taken through them.
                Kind::MapValue { .. } => ids.check_both(o.id, n.id),
                _ => true,
            }
        }
    }
}

/// Pointer kinds whose offset may move (fixed and variable parts).
fn movable(k: Kind) -> bool {
    matches!(
        k,
        Kind::Packet
            | Kind::PacketMeta
            | Kind::Stack { .. }
            | Kind::MapValue { .. }
            | Kind::Mem { .. }
            | Kind::MapKey { .. }
    )
}

fn slot_includes(o: &Slot, n: &Slot, ids: &mut IdMap) -> bool {
    let mut from = 0;
    if o.bytes[0] == Byte::Spill {
        let size = o.spill_size();
        if n.bytes[0] == Byte::Spill && n.spill_size() == size {
            if !reg_includes(&o.spill, &n.spill, ids) {
                return false;
            }
            from = size;
        } else if o.spill.kind == Kind::Scalar
            && o.spill.id == 0
            && o.spill.v.includes(&Scalar::unknown_bytes(size as u32))
        {
            // An unknown spilled number is as good as plain data.
            return (0..8).all(|j| {
                let ob = if o.bytes[j] == Byte::Spill { Byte::Misc } else { o.bytes[j] };
                byte_includes(ob, n, j)
            });
        } else {
            return false;
        }
    }
    (from..8).all(|j| byte_includes(o.bytes[j], n, j))
}

fn byte_includes(o: Byte, n: &Slot, j: usize) -> bool {
    let nb = n.bytes[j];
    let n_ptr = nb == Byte::Spill && n.spill.kind.is_pointer();
    match o {
        Byte::Invalid => !n_ptr,
        Byte::Misc => matches!(nb, Byte::Misc | Byte::Zero) || (nb == Byte::Spill && !n_ptr),
        Byte::Zero => {
            nb == Byte::Zero
                || (nb == Byte::Spill
                    && n.spill.kind == Kind::Scalar
                    && n.spill.v.const_value() == Some(0))
        }
        Byte::Spill => false,
        Byte::DynptrStart | Byte::DynptrRest => nb == o,
    }
}

/// A packet pointer's symbolic fact, expressed through register `x`'s value:
/// `base + var' + x + c <= end`, where `var' = var + d` (a fold of `d` fixed bytes).
/// Uses the pointer's own fact when `x` holds its named number, else its range and the
/// largest value `x` may have.
pub fn fact_through(p: &Reg, x: &Reg, d: i64) -> Option<i64> {
    if x.kind != Kind::Scalar {
        return None;
    }
    let by_sym = (p.sym != 0 && x.sym == p.sym).then(|| p.sym_d - x.sym_d - d);
    let by_range = p
        .range
        .filter(|_| x.v.smax < crate::reg::MAX_VAR_OFF && x.v.smin > -crate::reg::MAX_VAR_OFF)
        .map(|r| i64::from(r) - d - x.v.smax);
    match (by_sym, by_range) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// The old pointer's symbolic fact must hold in the new state too.
fn sym_includes(o: &Reg, n: &Reg, ids: &IdMap, old: &State, new: &State) -> bool {
    if o.sym == 0 || !matches!(o.kind, Kind::Packet | Kind::PacketMeta) {
        return true;
    }
    let Some(&(_, _, _, Some((fi, x)))) = ids.syms.iter().find(|e| e.0 == o.sym) else {
        return false;
    };
    let (ox, nx) = (&old.frames[fi].regs[x], &new.frames[fi].regs[x]);
    let d = i64::from(n.off) - i64::from(o.off);
    match (fact_through(o, ox, 0), fact_through(n, nx, d)) {
        (Some(co), Some(cn)) => cn >= co,
        (None, _) => true,
        (Some(_), None) => false,
    }
}

/// Fresh ids for the join, one per combination of the two sides' ids (and, for packet
/// pointers, of how far each side's fixed offset was folded into the variable part), so
/// registers linked on both sides stay linked.
struct JoinIds<'a> {
    pairs: Vec<((u32, u32, i64, i64), u32)>,
    next_id: &'a mut u32,
}

impl JoinIds<'_> {
    /// A joined id for ids that may be 0 (no identity): 0 only if both are.
    fn fresh_both(&mut self, a: u32, b: u32) -> u32 {
        if a == 0 && b == 0 {
            0
        } else {
            self.fresh(a, b, 0, 0)
        }
    }

    fn fresh(&mut self, a: u32, b: u32, da: i64, db: i64) -> u32 {
        let key = (a, b, da, db);
        if let Some(&(_, id)) = self.pairs.iter().find(|(k, _)| *k == key) {
            return id;
        }
        *self.next_id += 1;
        let id = *self.next_id;
        self.pairs.push((key, id));
        id
    }
}

/// A range as stored: `None` when too far from the packet to mean anything.
pub fn range_of(r: i64) -> Option<i32> {
    (r.unsigned_abs() < crate::reg::MAX_VAR_OFF as u64).then_some(r as i32)
}

/// Bounds a packet pointer's variable part by what its proven range implies.
pub fn clamp_packet_var(r: &mut Reg) {
    if let Some(range) = r.range {
        if r.v.smin >= 0 {
            let cap = (MAX_PACKET_LEN as i64 - i64::from(range)).max(0) as u64;
            if r.v.umax > cap {
                let mut v = r.v;
                v.umax = cap;
                v.sync();
                if !v.is_empty() {
                    r.v = v;
                }
            }
        }
    }
}

fn shifted(v: &Scalar, d: i64) -> Scalar {
    if d == 0 {
        *v
    } else {
        v.add(&Scalar::constant(d as u64))
    }
}

fn join_reg(a: &Reg, b: &Reg, ids: &mut JoinIds) -> Reg {
    if a.kind != b.kind {
        return Reg::NOT_INIT;
    }
    match a.kind {
        Kind::NotInit => Reg::NOT_INIT,
        Kind::Scalar => {
            // Registers keep one link when their distance is the same on both sides:
            // the key holds the shift between the sides' offsets, the link a's offsets.
            let d = i64::from(a.off) - i64::from(b.off);
            if a.id != 0 && b.id != 0 && a.link32 == b.link32 && (d == 0 || !a.link32) {
                let id = ids.fresh(a.id, b.id, d, 0);
                Reg { id, off: a.off, link32: a.link32, ..Reg::scalar(a.v.join(&b.v)) }
            } else {
                Reg::scalar(a.v.join(&b.v))
            }
        }
        Kind::Packet
        | Kind::PacketMeta
        | Kind::Stack { .. }
        | Kind::MapValue { .. }
        | Kind::Mem { .. }
        | Kind::MapKey { .. } => {
            let off = a.off.min(b.off);
            let (da, db) = (i64::from(a.off - off), i64::from(b.off - off));
            let v = shifted(&a.v, da).join(&shifted(&b.v, db));
            let mut r = Reg { kind: a.kind, off, v, ..Reg::NOT_INIT };
            if matches!(a.kind, Kind::Packet | Kind::PacketMeta) {
                let ra = a.range.map(|x| i64::from(x) - da);
                let rb = b.range.map(|x| i64::from(x) - db);
                r.range = match (ra, rb) {
                    (Some(x), Some(y)) => range_of(x.min(y)),
                    _ => None,
                };
                r.id = if a.id == 0 && b.id == 0 && da == 0 && db == 0 {
                    0
                } else {
                    ids.fresh(a.id, b.id, da, db)
                };
                clamp_packet_var(&mut r);
            }
            if matches!(a.kind, Kind::MapValue { .. }) {
                r.id = ids.fresh_both(a.id, b.id);
            }
            if a.ref_id != 0 || b.ref_id != 0 {
                r.ref_id = ids.fresh(a.ref_id, b.ref_id, 0, 0);
            }
            r
        }
        k if k.is_nullable() => {
            if a.off != b.off {
                return Reg::NOT_INIT;
            }
            let mut r = *a;
            r.v = a.v.join(&b.v);
            r.id = ids.fresh(a.id, b.id, 0, 0);
            if a.ref_id != 0 || b.ref_id != 0 {
                r.ref_id = ids.fresh(a.ref_id, b.ref_id, 0, 0);
            }
            r
        }
        _ => {
            if a.off != b.off || a.v != b.v {
                return Reg::NOT_INIT;
            }
            *a
        }
    }
}

/// After a join: for each packet pointer, the best fact `base + var + x + c <= end`
/// that holds on both sides through some scalar register `x` that differs between them
/// (a loop counter). The counter gets a fresh name; the pointer's group the fact.
fn discover_facts(a: &Frame, b: &Frame, regs: &mut [Reg; 11], next_id: &mut u32) {
    let mut names = [0u32; 10];
    for p in 0..10 {
        let j = regs[p];
        if !matches!(j.kind, Kind::Packet | Kind::PacketMeta) {
            continue;
        }
        let (da, db) = (i64::from(a.regs[p].off - j.off), i64::from(b.regs[p].off - j.off));
        let mut best: Option<(usize, i64)> = None;
        for (x, (xa, xb)) in a.regs.iter().zip(&b.regs).enumerate().take(10) {
            if regs[x].kind != Kind::Scalar || (xa.v == xb.v && xa.sym == 0 && xb.sym == 0) {
                continue;
            }
            let c = match (fact_through(&a.regs[p], xa, da), fact_through(&b.regs[p], xb, db)) {
                (Some(ca), Some(cb)) => ca.min(cb),
                _ => continue,
            };
            if best.is_none_or(|(_, bc)| c > bc) {
                best = Some((x, c));
            }
        }
        if let Some((x, c)) = best {
            if names[x] == 0 {
                *next_id += 1;
                names[x] = *next_id;
            }
            regs[p].sym = names[x];
            regs[p].sym_d = c;
        }
    }
    for (x, &name) in names.iter().enumerate() {
        if name != 0 {
            regs[x].sym = name;
            regs[x].sym_d = 0;
        }
    }
}

fn join_slot(a: &Slot, b: &Slot, ids: &mut JoinIds) -> Slot {
    if a.bytes[0] == Byte::Spill && b.bytes[0] == Byte::Spill && a.spill_size() == b.spill_size() {
        let spill = join_reg(&a.spill, &b.spill, ids);
        if spill.kind != Kind::NotInit {
            let mut out = Slot { bytes: a.bytes, spill };
            for j in a.spill_size()..8 {
                out.bytes[j] = join_byte(a.bytes[j], b.bytes[j]);
            }
            return out;
        }
    }
    let (mut a, mut b) = (*a, *b);
    a.scrub_spill();
    b.scrub_spill();
    let mut out = Slot::default();
    for j in 0..8 {
        out.bytes[j] = join_byte(a.bytes[j], b.bytes[j]);
    }
    out
}

fn join_byte(a: Byte, b: Byte) -> Byte {
    match (a, b) {
        (Byte::Invalid, _) | (_, Byte::Invalid) => Byte::Invalid,
        (a, b) if a.is_dynptr() || b.is_dynptr() => {
            if a == b {
                a
            } else {
                Byte::Invalid
            }
        }
        (Byte::Zero, Byte::Zero) => Byte::Zero,
        (Byte::Spill, _) | (_, Byte::Spill) => Byte::Invalid,
        _ => Byte::Misc,
    }
}

fn widen_reg(o: &Reg, j: &mut Reg, th: &Thresholds) {
    if o.kind != j.kind {
        return;
    }
    match j.kind {
        Kind::NotInit => {}
        Kind::Scalar => j.v = o.v.widen(&j.v, th),
        _ => {
            let d = i64::from(o.off) - i64::from(j.off);
            j.v = shifted(&o.v, d).widen(&j.v, th);
            if matches!(j.kind, Kind::Packet | Kind::PacketMeta) {
                // A range that moved widens to the weakest fact still true (`base + var
                // <= end`), which keeps `var` bounded by the packet length.
                // Negative ranges that keep shrinking are dropped.
                let old_range = o.range.map(|x| i64::from(x) - d);
                if old_range != j.range.map(i64::from) {
                    j.range = j.range.filter(|r| *r >= 0).map(|_| 0);
                }
                clamp_packet_var(j);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(off: i32, id: u32, range: Option<i32>, v: Scalar) -> Reg {
        Reg { kind: Kind::Packet, off, range, id, v, ..Reg::NOT_INIT }
    }

    #[test]
    fn join_folds_differing_offsets_into_the_variable_part() {
        let mut a = State::entry();
        let mut b = State::entry();
        a.cur_mut().regs[2] = pkt(0, 0, Some(0), Scalar::constant(0));
        b.cur_mut().regs[2] = pkt(1, 0, Some(1), Scalar::constant(0));
        let mut next = 100;
        let j = a.join(&b, &mut next).expect("same frames");
        let r = j.cur().regs[2];
        assert_eq!(r.off, 0);
        assert_eq!((r.v.umin, r.v.umax), (0, 1));
        assert_eq!(r.range, Some(0));
        assert_ne!(r.id, 0);
        assert!(j.includes(&a) && j.includes(&b));
        assert!(!a.includes(&j));
    }

    #[test]
    fn widening_then_range_clamp_settles() {
        let mut a = State::entry();
        a.cur_mut().regs[2] = pkt(0, 7, Some(0), Scalar::urange(0, 1));
        let mut b = a.clone();
        b.cur_mut().regs[2] = pkt(1, 7, Some(1), Scalar::urange(0, 1));
        let mut next = 100;
        let j = a.join(&b, &mut next).expect("join");
        let w = a.widen(&j, &Thresholds::default(), false);
        let r = w.cur().regs[2];
        assert_eq!(r.range, Some(0));
        assert_eq!(r.v.umax, MAX_PACKET_LEN);
        // One more iteration changes nothing.
        let mut c = w.clone();
        c.cur_mut().regs[2].off = 1;
        c.cur_mut().regs[2].range = Some(1);
        let j2 = w.join(&c, &mut next).expect("join");
        assert!(w.includes(&j2) || w.widen(&j2, &Thresholds::default(), false).includes(&j2));
    }

    #[test]
    fn stack_subsumption_rules() {
        let mut old = State::entry();
        let mut new = State::entry();
        // Old never initialised the slot: anything but a pointer is fine.
        new.cur_mut().slot_mut(0).bytes = [Byte::Misc; 8];
        assert!(old.includes(&new));
        new.cur_mut().slot_mut(0).bytes = [Byte::Spill; 8];
        new.cur_mut().slot_mut(0).spill = Reg::ptr(Kind::Ctx, 0);
        assert!(!old.includes(&new));
        // Old had data: new must too.
        old.cur_mut().slot_mut(0).bytes = [Byte::Misc; 8];
        new.cur_mut().slot_mut(0).bytes = [Byte::Zero; 8];
        assert!(old.includes(&new));
        new.cur_mut().slot_mut(0).bytes = [Byte::Invalid; 8];
        assert!(!old.includes(&new));
    }

    #[test]
    fn unmarked_numbers_match_any_number_but_keep_their_links() {
        use crate::precise::Marks;
        let mut old = State::entry();
        old.cur_mut().regs[2] = Reg::constant(4);
        old.cur_mut().slot_mut(0).bytes = [Byte::Spill; 8];
        old.cur_mut().slot_mut(0).spill = Reg::constant(4);
        let mut new = old.clone();
        new.cur_mut().regs[2] = Reg::constant(100);
        new.cur_mut().slot_mut(0).spill = Reg::constant(100);
        let none = Marks::default();
        assert!(!old.includes(&new), "all numbers compared");
        assert!(old.includes_with(&new, Some(&none)));
        let mut r2 = Marks::default();
        r2.set_reg(0, 2);
        assert!(!old.includes_with(&new, Some(&r2)));
        let mut slot = Marks::default();
        slot.set_slot(0, 0);
        assert!(!old.includes_with(&new, Some(&slot)));
        // A pointer never matches a number, marked or not.
        new.cur_mut().regs[2] = Reg::ptr(Kind::Ctx, 0);
        assert!(!old.includes_with(&new, Some(&none)));
        // Linked registers must be linked in the new state too.
        old.cur_mut().regs[3] = Reg { id: 5, ..Reg::unknown() };
        old.cur_mut().regs[4] = Reg { id: 5, ..Reg::unknown() };
        new.cur_mut().regs[2] = Reg::unknown();
        new.cur_mut().regs[3] = Reg::unknown();
        new.cur_mut().regs[4] = Reg::unknown();
        assert!(!old.includes_with(&new, Some(&none)));
        new.cur_mut().regs[3].id = 9;
        new.cur_mut().regs[4].id = 9;
        assert!(old.includes_with(&new, Some(&none)));
    }

    #[test]
    fn linked_scalars_must_stay_linked() {
        let mut old = State::entry();
        old.cur_mut().regs[2] = Reg { id: 5, ..Reg::unknown() };
        old.cur_mut().regs[3] = Reg { id: 5, ..Reg::unknown() };
        let mut new = old.clone();
        new.cur_mut().regs[2].id = 8;
        new.cur_mut().regs[3].id = 8;
        assert!(old.includes(&new));
        new.cur_mut().regs[3].id = 9;
        assert!(!old.includes(&new));
    }
}
