//! The abstract interpreter: explores every path of the program depth-first with
//! the abstract state of [`crate::state`], checking each instruction against the rules
//! in `alu`, `mem`, `jmp` and `call`.
//!
//! Loops: at a loop head (a back-edge target) the loop is first unrolled as the kernel
//! does, its states cached like at any prune point, and a state included in the one an
//! earlier iteration of the same path left there stops; past a number of iterations
//! per path (or of states at the head), and at callback call sites, states of the same
//! shape are joined instead, and widened after a few visits, so that every loop ends.
//! Elsewhere, at prune points (jump targets, the fall-through of register comparisons,
//! returns from calls), a state already covered by a cached one stops its path.
//! Pruning against a kept loop-head state whose exploration is still in progress is
//! sound here because only safety is proven, never termination (the run-time watchdog
//! owns that): the explored states form a set closed under successors.
//!
//! Precision (`crate::precise`): a cached state at a prune point compares only the
//! scalars marked precise in it, so it prunes only once every path below it has
//! finished (`Node::branches`), when its marks are final. A path stopped by an earlier
//! iteration's state, or arriving at a joining loop head, marks every number it holds
//! (those states are compared whole); the path leaving a joining head starts a fresh
//! chain of nodes.

mod alu;
mod call;
mod jmp;
mod mem;

use crate::cfg::{Cfg, ARG_REGS, CALLEE_SAVED};
use crate::env::{MapInfo, VerifyEnv};
use crate::error::{VerifyError, VerifyErrorKind};
use crate::info::{InsnInfo, SubprogInfo, Verified};
use crate::precise::{Hist, Marks};
use crate::reg::Reg;
use crate::state::{FrameKind, State};
use spine_isa::{op, Insn};
use std::collections::HashMap;

type K = VerifyErrorKind;

/// Joins at a loop head before widening starts.
const WIDEN_AFTER: u32 = 3;
/// Visits after which widening ignores the thresholds.
const HARD_WIDEN_AFTER: u32 = 24;
/// Instructions of the failing path a level-1 log shows (the last ones).
const PATH_KEPT: usize = 256;
/// Iterations of a loop one path unrolls (its states cached at the head as at any
/// prune point, compared by their precise numbers) before the head joins its states.
/// A program refused after such a join is verified again without this limit
/// ([`verify`]): a short body walked a thousand times (a scan for the packet's end
/// byte by byte) is then explored pass by pass as the kernel does, and only programs
/// that need it pay for it.
const MAX_UNROLL: u32 = 64;
/// States a loop head caches, all paths together, before it joins them instead (the
/// second verification: [`LONG_UNROLLED_STATES_PER_HEAD`]).
const UNROLLED_STATES_PER_HEAD: usize = 1024;
const LONG_UNROLLED_STATES_PER_HEAD: usize = 8192;
/// In the second verification, loops join past [`MAX_UNROLL`] passes once the program
/// has processed this many instructions (a refused program pays at most this much more).
const LONG_UNROLL_INSNS: u64 = 65_536;
/// Once this share (1/n) of the instruction budget is spent, loop heads join: a loop of
/// unknown count with a long, branchy body still converges within the budget.
const UNROLL_BUDGET_SHARE: u64 = 2;
/// Distinct shapes a loop head may collect before the program is too complex.
const MAX_SHAPES_PER_HEAD: usize = 512;
/// Up to this many shapes, a new state is checked against all of them.
const CROSS_SHAPE_CHECK: usize = 8;
/// Cached states kept per prune point. Unrolled parsers of real programs (a filter
/// walking up to five IPv6 extension headers, a load balancer's many encapsulations)
/// meet with a thousand and more distinct states at one instruction; joining them
/// instead loses the packet ranges those paths proved.
const MAX_CACHED_PER_PC: usize = 4096;
/// Cached states of another shape that one visit compares against: a state of another
/// shape covers the new one only where it knows less (an unwritten stack byte), so a
/// few recent ones are worth a look, all of them are not.
const CROSS_SHAPE_PER_VISIT: usize = 64;
pub(crate) use crate::reg::MAX_VAR_OFF;

/// What to do after an instruction.
pub(crate) enum Flow {
    Next(usize),
    Done,
}

/// A state cached at a prune point, with its [`State::shape`] and how often it covered
/// a later visit or failed to.
struct Cached {
    shape: u64,
    state: State,
    /// Its node in [`Verifier::nodes`]: the precision marks and whether every path
    /// below it has finished.
    node: u32,
    hits: u32,
    misses: u32,
}

/// A cached state that fails to cover more than `EVICT_MISSES * (hits + 1)` visits is
/// dropped, as the kernel drops its explored states (`miss_cnt > hit_cnt * 3 + 3`).
const EVICT_MISSES: u32 = 3;

/// No node (the parent of the first one and of loop-head continuations).
const NO_NODE: u32 = u32::MAX;

/// A state on the explored tree (cached at a prune point, or where exploration starts
/// anew: the entry and the joined state leaving a loop head), for precision tracking.
struct Node {
    parent: u32,
    /// The instructions executed from the parent's state to this one.
    hist: Vec<Hist>,
    /// Registers and slots of this state whose values the continuation depended on.
    marks: Marks,
    /// Paths below this state not yet finished (pending ones included).
    branches: u32,
    /// A joined loop-head state: compared whole, and marks stop here (the states
    /// arriving at the head were marked for every number they hold).
    barrier: bool,
    /// A state cached at a loop head while the loop is unrolled: the head and the
    /// state, which later iterations on the same path are compared with.
    unrolled: Option<Box<(usize, State)>>,
    /// The nearest node above this one (itself excluded) with `unrolled` set.
    unrolled_above: u32,
}

struct LoopEntry {
    state: State,
    visits: u32,
}

pub(crate) struct Verifier<'a> {
    insns: &'a [Insn],
    env: &'a VerifyEnv<'a>,
    /// The program's maps, then the inner-map templates of maps of maps.
    maps: Vec<MapInfo>,
    /// For each program map: index in `maps` of its inner template.
    inner: Vec<Option<u16>>,
    cfg: Cfg,
    /// Cached states at each prune point.
    cache: Vec<Vec<Cached>>,
    /// States ever cached at each prune point, evicted ones included: past
    /// [`MAX_CACHED_PER_PC`] the point joins states like a loop head.
    cached_total: Vec<usize>,
    /// Joined states at loop heads (and callback call sites, `true`), by shape.
    heads: HashMap<(bool, usize, u64), Vec<LoopEntry>>,
    /// The shapes seen at each loop head.
    head_shapes: HashMap<(bool, usize), Vec<u64>>,
    /// States still to explore, with their node and history since it, and (at log
    /// level 1 and up) the path that led there.
    pending: Vec<Pending>,
    /// The explored tree's states, for precision marks.
    nodes: Vec<Node>,
    /// The node of the path being explored, and the instructions since.
    cur_node: u32,
    hist: Vec<Hist>,
    /// Instructions of the path being explored (log level 1 and up).
    path: Vec<usize>,
    next_id: u32,
    info: Vec<InsnInfo>,
    processed: u64,
    states: usize,
    peak_states: usize,
    /// Bytes of states kept and pending.
    state_bytes: usize,
    log: String,
    log_full: bool,
    stack_zeroing: bool,
    /// Some `bpf_dynptr_slice_rdwr` was given a stack buffer: stores into the stack
    /// must look for live slices that may alias it (see `Slice::ReadWriteStack`).
    stack_slices: bool,
    sub_depth: Vec<u32>,
    sub_tail_call: Vec<bool>,
    /// (caller function, callee function, call site)
    call_edges: Vec<(usize, usize, usize)>,
    /// Timer callbacks queued: (callback entry, the timer's map).
    async_cbs: Vec<(usize, u16)>,
    /// Timer callbacks' functions and the `bpf_timer_set_callback` site naming them:
    /// roots of call chains of their own.
    async_roots: Vec<(usize, usize)>,
    /// Per `bpf_loop` call site: whether every visit had flags a known 0, and the
    /// callback (`None` once two visits named different ones).
    loop_sites: std::collections::BTreeMap<usize, (bool, Option<usize>)>,
    /// The second verification: loops unroll past [`MAX_UNROLL`] passes.
    long_unroll: bool,
    /// A loop head joined because a path reached [`MAX_UNROLL`] passes.
    joined_at_depth: bool,
}

struct Pending {
    pc: usize,
    state: State,
    node: u32,
    hist: Vec<Hist>,
    path: Vec<usize>,
}

/// An error with where it happened, before the state is printed.
pub(crate) struct Fail {
    pub pc: usize,
    pub kind: K,
    pub state: Option<String>,
}

/// Verifies `insns`. Loops unroll [`MAX_UNROLL`] passes per path, then join; a
/// program refused after such a join for a lost bound is verified once more with loops
/// unrolled pass by pass as the kernel explores them (until [`LONG_UNROLL_INSNS`]
/// instructions or [`LONG_UNROLLED_STATES_PER_HEAD`] states at a head), and accepted if
/// that proves it. The first refusal is the one reported.
pub(crate) fn verify(insns: &[Insn], env: &VerifyEnv) -> Result<Verified, VerifyError> {
    let mut joined = false;
    match verify_once(insns, env, false, &mut joined) {
        Err(e) if joined && lost_bounds(&e.kind) => {
            verify_once(insns, env, true, &mut joined).map_err(|_| e)
        }
        r => r,
    }
}

/// Refusals a join can cause by losing a number's bounds, which unrolling further may
/// keep (other refusals are not retried).
fn lost_bounds(kind: &K) -> bool {
    matches!(
        kind,
        K::PacketOutOfBounds { .. }
            | K::MapValueOutOfBounds { .. }
            | K::MemOutOfBounds { .. }
            | K::NegativeOffset { .. }
            | K::UnboundedAccess { .. }
            | K::PointerOffsetUnbounded { .. }
            | K::HelperSizeUnbounded { .. }
            | K::HelperSizeNegative { .. }
    )
}

/// One verification (`long_unroll`: loops unroll past [`MAX_UNROLL`]); `joined` tells
/// whether a loop head joined because a path reached [`MAX_UNROLL`] passes.
fn verify_once(
    insns: &[Insn],
    env: &VerifyEnv,
    long_unroll: bool,
    joined: &mut bool,
) -> Result<Verified, VerifyError> {
    let maps_for_msg = env.maps;
    let fail = |pc: usize, kind: K, state: String, log: String| VerifyError {
        pc,
        insn: crate::fmt::insn(insns, pc, maps_for_msg),
        kind,
        state,
        log,
    };
    if let Err(e) = spine_isa::validate(insns) {
        return Err(fail(e.pc, K::Isa(e.kind), String::new(), String::new()));
    }
    let cfg = Cfg::build(insns, env.helpers)
        .map_err(|(pc, kind)| fail(pc, kind, String::new(), String::new()))?;
    let mut maps: Vec<MapInfo> = env.maps.to_vec();
    let mut inner = vec![None; env.maps.len()];
    for (i, m) in env.maps.iter().enumerate() {
        if let Some(t) = &m.inner {
            inner[i] = Some(maps.len() as u16);
            maps.push((**t).clone());
        }
    }
    let n = insns.len();
    let nsub = cfg.subprogs.len();
    let mut v = Verifier {
        insns,
        env,
        maps,
        inner,
        cfg,
        cache: (0..n).map(|_| Vec::new()).collect(),
        cached_total: vec![0; n],
        heads: HashMap::new(),
        head_shapes: HashMap::new(),
        pending: Vec::new(),
        nodes: Vec::new(),
        cur_node: NO_NODE,
        hist: Vec::new(),
        path: Vec::new(),
        next_id: 0,
        info: vec![InsnInfo::default(); n],
        processed: 0,
        states: 0,
        peak_states: 0,
        state_bytes: 0,
        log: String::new(),
        log_full: false,
        stack_zeroing: false,
        stack_slices: false,
        sub_depth: vec![0; nsub],
        sub_tail_call: vec![false; nsub],
        call_edges: Vec::new(),
        async_cbs: Vec::new(),
        async_roots: Vec::new(),
        loop_sites: std::collections::BTreeMap::new(),
        long_unroll,
        joined_at_depth: false,
    };
    let ran = v.run();
    *joined = v.joined_at_depth;
    match ran {
        Ok(()) => {}
        Err(f) => {
            let state = f.state.unwrap_or_default();
            if env.log_level == 1 {
                let start = v.path.len().saturating_sub(PATH_KEPT);
                let mut msg = String::from("path to the error:\n");
                for &pc in &v.path[start..] {
                    msg.push_str(&format!("{pc}: {}\n", crate::fmt::insn(insns, pc, &v.maps)));
                }
                v.log_str(&msg);
            }
            if env.log_level >= 1 {
                let msg = format!("{}: {}\n{}\n", f.pc, f.kind, state);
                v.log_str(&msg);
            }
            return Err(fail(f.pc, f.kind, state, std::mem::take(&mut v.log)));
        }
    }
    if let Err((pc, kind)) = v.check_stack_chains() {
        return Err(fail(pc, kind, String::new(), std::mem::take(&mut v.log)));
    }
    let subprogs = v
        .cfg
        .subprogs
        .iter()
        .enumerate()
        .map(|(k, s)| SubprogInfo {
            entry: s.entry,
            end: s.end,
            stack_depth: v.sub_depth[k],
            is_callback: s.is_callback,
            has_tail_call: v.sub_tail_call[k],
        })
        .collect();
    Ok(Verified {
        insn_info: v.info,
        loop_heads: (0..n).filter(|&p| v.cfg.loop_head[p]).collect(),
        subprogs,
        stack_zeroing: v.stack_zeroing,
        inlined_loops: v
            .loop_sites
            .iter()
            .filter(|(_, &(zero, func))| zero && func.is_some())
            .map(|(&pc, _)| pc)
            .collect(),
        insns_processed: v.processed,
        peak_states: v.peak_states,
        log: v.log,
    })
}

impl<'a> Verifier<'a> {
    fn run(&mut self) -> Result<(), Fail> {
        self.nodes.push(Node {
            parent: NO_NODE,
            hist: Vec::new(),
            marks: Marks::default(),
            branches: 1,
            barrier: false,
            unrolled: None,
            unrolled_above: NO_NODE,
        });
        self.pending.push(Pending {
            pc: 0,
            state: State::entry(),
            node: 0,
            hist: Vec::new(),
            path: Vec::new(),
        });
        while let Some(p) = self.pending.pop() {
            let bytes = p.state.weight() + hist_bytes(&p.hist);
            self.state_bytes = self.state_bytes.saturating_sub(bytes);
            self.path = p.path;
            self.cur_node = p.node;
            // Into the buffer the walk keeps (its capacity survives from path to path).
            self.hist.clear();
            self.hist.extend_from_slice(&p.hist);
            self.walk(p.pc, p.state)?;
        }
        Ok(())
    }

    /// Queues the other side of a branch (or a callback invocation).
    fn push_pending(&mut self, pc: usize, st: State) -> Result<(), K> {
        // The history since the last cached state travels with it: counted too (a run
        // of branches with no prune point between them copies a growing history).
        self.state_bytes += st.weight() + hist_bytes(&self.hist);
        if self.state_bytes > self.env.limits.max_state_bytes {
            return Err(self.too_complex_kind("state memory limit reached"));
        }
        let path = if self.env.log_level >= 1 { self.path.clone() } else { Vec::new() };
        self.nodes[self.cur_node as usize].branches += 1;
        self.pending.push(Pending {
            pc,
            state: st,
            node: self.cur_node,
            hist: self.hist.clone(),
            path,
        });
        Ok(())
    }

    fn too_complex_kind(&self, reason: &'static str) -> K {
        K::TooComplex { reason, processed: self.processed, states: self.states }
    }

    fn fresh_id(&mut self) -> u32 {
        self.next_id += 1;
        self.next_id
    }

    fn walk(&mut self, mut pc: usize, mut st: State) -> Result<(), Fail> {
        loop {
            self.processed += 1;
            if self.processed > self.env.limits.max_insns {
                return Err(self.too_complex(pc, "instruction limit reached", &st));
            }
            if self.cfg.prune[pc] {
                self.sanitize(&mut st, pc);
                let next = if self.cfg.loop_head[pc] {
                    self.loop_head(pc, st)?
                } else {
                    self.visit(pc, st)?
                };
                match next {
                    Some(s) => st = s,
                    None => {
                        self.end_path();
                        return Ok(());
                    }
                }
            }
            self.info[pc].reached = true;
            if self.env.log_level >= 1 {
                if self.path.len() >= PATH_KEPT * 2 {
                    self.path.drain(..PATH_KEPT);
                }
                self.path.push(pc);
            }
            if self.env.log_level >= 2 && !self.log_full {
                let line = format!(
                    "{pc}: {} ; {}\n",
                    crate::fmt::insn(self.insns, pc, &self.maps),
                    crate::fmt::state(&st, &self.maps)
                );
                self.log_str(&line);
            }
            self.hist.push(Hist::new(pc, st.depth()));
            match self.step(pc, &mut st) {
                Ok(Flow::Next(n)) => pc = n,
                Ok(Flow::Done) => {
                    self.end_path();
                    return Ok(());
                }
                Err(kind) => {
                    let state = crate::fmt::state(&st, &self.maps);
                    return Err(Fail { pc, kind, state: Some(state) });
                }
            }
        }
    }

    fn log_str(&mut self, s: &str) {
        if self.log.len() + s.len() > self.env.limits.max_log {
            if !self.log_full {
                self.log.push_str("... log truncated\n");
                self.log_full = true;
            }
            return;
        }
        self.log.push_str(s);
    }

    fn too_complex(&self, pc: usize, reason: &'static str, st: &State) -> Fail {
        Fail {
            pc,
            kind: K::TooComplex { reason, processed: self.processed, states: self.states },
            state: Some(crate::fmt::state(st, &self.maps)),
        }
    }

    fn add_states(&mut self, n: usize, pc: usize, st: &State) -> Result<(), Fail> {
        self.states += n;
        self.peak_states = self.peak_states.max(self.states);
        self.state_bytes += n * st.weight();
        if self.states > self.env.limits.max_states {
            return Err(self.too_complex(pc, "too many states", st));
        }
        if self.state_bytes > self.env.limits.max_state_bytes {
            return Err(self.too_complex(pc, "state memory limit reached", st));
        }
        Ok(())
    }

    /// Forgets registers no path reads before writing them again, the values of scalars
    /// no safety check depends on, and scalar ids that link nothing, so that states with
    /// equal futures compare equal. Forgetting only over-approximates: always sound.
    fn sanitize(&self, st: &mut State, pc: usize) {
        let top = st.frames.len() - 1;
        for k in 0..=top {
            let (live, rel) = if k == top {
                (self.cfg.live[pc], self.cfg.relevant[pc])
            } else {
                let child = &st.frames[k + 1];
                let c = child.callsite;
                match child.kind {
                    FrameKind::Callback => (self.cfg.live[c], self.cfg.relevant[c] | ARG_REGS),
                    _ => (
                        self.cfg.live[c + 1] & CALLEE_SAVED,
                        self.cfg.relevant[c + 1] & CALLEE_SAVED,
                    ),
                }
            };
            for r in 0..10 {
                let reg = &mut st.frames[k].regs[r];
                if live & (1 << r) == 0 {
                    *reg = Reg::NOT_INIT;
                } else if rel & (1 << r) == 0
                    && reg.kind == crate::reg::Kind::Scalar
                    && reg.sym == 0
                {
                    *reg = Reg::unknown();
                }
            }
        }
        // Slots of the current frame no path reads again before overwriting them.
        // Spilled numbers whose value no safety check depends on are forgotten too.
        let dead = !self.cfg.stack_live[pc];
        let loose = !self.cfg.stack_relevant[pc];
        let f = st.cur_mut();
        for (i, s) in f.stack.iter_mut().enumerate().take(64) {
            if dead & (1 << i) != 0 {
                *s = crate::state::Slot::default();
            } else if loose & (1 << i) != 0 {
                s.forget_number();
            }
        }
        while f.stack.last().is_some_and(|s| *s == crate::state::Slot::default()) {
            f.stack.pop();
        }
        st.drop_lone_scalar_ids();
        st.drop_dead_facts();
    }

    /// Prune point: `None` if a cached state covers `st`; otherwise caches it and
    /// returns the state to continue with. Only states whose every path has finished
    /// prune (their precision marks are final then); pruning carries their marks back
    /// along the pruned path, whose future is theirs.
    fn visit(&mut self, pc: usize, st: State) -> Result<Option<State>, Fail> {
        let shape = st.shape();
        let mut cross = CROSS_SHAPE_PER_VISIT;
        let nodes = &self.nodes;
        let cache = &mut self.cache[pc];
        let mut stale = false;
        let hit = cache.iter_mut().rposition(|e| {
            let node = &nodes[e.node as usize];
            if node.branches > 0 {
                return false;
            }
            let covers = if e.shape == shape {
                e.state.includes_with(&st, Some(&node.marks))
            } else if cross > 0 {
                cross -= 1;
                e.state.includes_with(&st, Some(&node.marks))
            } else {
                return false;
            };
            if covers {
                e.hits += 1;
            } else {
                e.misses += 1;
                stale |= e.misses > e.hits * EVICT_MISSES + EVICT_MISSES;
            }
            covers
        });
        if let Some(i) = hit {
            let marks = self.nodes[cache[i].node as usize].marks;
            // The state that covered this visit is the likeliest to cover the next one:
            // it moves to where the scan starts.
            cache[i..].rotate_left(1);
            self.mark_chain(marks, false);
            return Ok(None);
        }
        if stale {
            cache.retain(|e| e.misses <= e.hits * EVICT_MISSES + EVICT_MISSES);
        }
        if self.cached_total[pc] >= MAX_CACHED_PER_PC {
            // Too many distinct paths meet here: join them like at a loop head.
            return self.head(pc, st, false);
        }
        self.cached_total[pc] += 1;
        let node = self.nodes.len() as u32;
        let unrolled_above = match self.nodes.get(self.cur_node as usize) {
            Some(p) if p.unrolled.is_some() => self.cur_node,
            Some(p) => p.unrolled_above,
            None => NO_NODE,
        };
        self.nodes.push(Node {
            parent: self.cur_node,
            hist: self.hist.clone(),
            marks: Marks::default(),
            branches: 1,
            barrier: false,
            unrolled: None,
            unrolled_above,
        });
        self.hist.clear();
        self.cur_node = node;
        self.cache[pc].push(Cached { shape, state: st.clone(), node, hits: 0, misses: 0 });
        self.add_states(1, pc, &st)?;
        Ok(Some(st))
    }

    /// The path being explored has finished (or was pruned): its nodes with no other
    /// path left below them are complete.
    fn end_path(&mut self) {
        let mut n = self.cur_node;
        while n != NO_NODE {
            let node = &mut self.nodes[n as usize];
            node.branches -= 1;
            if node.branches > 0 {
                break;
            }
            n = node.parent;
        }
        self.cur_node = NO_NODE;
    }

    /// Marks registers and slots precise at the current point of the path and carries
    /// the marks back to every cached state on it (the kernel's
    /// `mark_chain_precision`). With `in_step`, the marks are about the state before
    /// the instruction being checked (the last one in the history).
    fn mark_chain(&mut self, mut m: Marks, in_step: bool) {
        if m.is_empty() {
            return;
        }
        let upto = self.hist.len() - usize::from(in_step && !self.hist.is_empty());
        for h in self.hist[..upto].iter().rev() {
            crate::precise::back(self.insns, h, &mut m);
        }
        let mut n = self.cur_node;
        while n != NO_NODE && !m.is_empty() {
            let node = &mut self.nodes[n as usize];
            if node.barrier {
                break;
            }
            let new = m.minus(&node.marks);
            if new.is_empty() {
                break;
            }
            node.marks.union(&new);
            m = new;
            for h in node.hist.iter().rev() {
                crate::precise::back(self.insns, h, &mut m);
            }
            n = node.parent;
        }
    }

    /// Marks registers `regs` of the current frame precise where they hold a scalar
    /// that is not wholly unknown (an unknown value decides nothing), before the
    /// instruction being checked.
    pub(crate) fn need(&mut self, st: &State, regs: u16) {
        let d = st.depth();
        let mut m = Marks::default();
        for (r, reg) in st.cur().regs.iter().enumerate().take(10) {
            if regs & (1 << r) != 0 && reg.kind == crate::reg::Kind::Scalar && !is_top(reg) {
                m.set_reg(d, r);
            }
        }
        self.mark_chain(m, true);
    }

    /// Loop head: the loop is unrolled as the kernel does, its states cached like at
    /// any prune point, so that a bounded loop keeps what each iteration proved (a
    /// cursor advanced by a different length in each). A state included whole in the
    /// one an earlier iteration of this path cached here stops the path: that state's
    /// exploration, still in progress, covers it. Past [`MAX_UNROLL`] iterations of
    /// one path, [`UNROLLED_STATES_PER_HEAD`] states at the head, or half of the
    /// instruction budget, the states are joined instead ([`Self::head`]), so a loop
    /// of unknown or large count still ends.
    fn loop_head(&mut self, pc: usize, st: State) -> Result<Option<State>, Fail> {
        let mut depth = 0u32;
        let mut covered = false;
        let mut n = match self.nodes.get(self.cur_node as usize) {
            Some(c) if c.unrolled.is_some() => self.cur_node,
            Some(c) => c.unrolled_above,
            None => NO_NODE,
        };
        while n != NO_NODE {
            let node = &self.nodes[n as usize];
            if let Some(u) = &node.unrolled {
                if u.0 == pc {
                    depth += 1;
                    // The nearest passes only: a loop that comes back to a state it
                    // held repeats within a few passes, and comparing with every one
                    // of a thousand would make a long walk quadratic.
                    if depth <= MAX_UNROLL && u.1.includes(&st) {
                        covered = true;
                        break;
                    }
                }
            }
            n = node.unrolled_above;
        }
        if covered {
            // Compared whole with a state whose marks are not final: every number
            // this path holds mattered.
            self.mark_chain(all_numbers(&st), false);
            return Ok(None);
        }
        let per_head =
            if self.long_unroll { LONG_UNROLLED_STATES_PER_HEAD } else { UNROLLED_STATES_PER_HEAD };
        let deep =
            depth >= MAX_UNROLL && (!self.long_unroll || self.processed >= LONG_UNROLL_INSNS);
        if deep
            || self.cached_total[pc] >= per_head
            || self.processed >= self.env.limits.max_insns / UNROLL_BUDGET_SHARE
        {
            self.joined_at_depth |= deep && !self.long_unroll;
            return self.head(pc, st, false);
        }
        let before = self.nodes.len();
        let next = self.visit(pc, st)?;
        if let Some(s) = &next {
            let cached = self.nodes.len() > before;
            let node = &mut self.nodes[self.cur_node as usize];
            if cached && !node.barrier {
                node.unrolled = Some(Box::new((pc, s.clone())));
                self.state_bytes += s.weight();
            }
        }
        Ok(next)
    }

    /// Loop head (or, with `callback`, a callback call site): `None` if a kept state
    /// covers `st`; otherwise the state to continue with, joined (and widened) with the
    /// kept state of the same shape. Kept states are compared whole, so every number
    /// `st` holds is marked precise along the path that brought it; the path continues
    /// from a fresh node.
    fn head(&mut self, pc: usize, st: State, callback: bool) -> Result<Option<State>, Fail> {
        self.mark_chain(all_numbers(&st), callback);
        let next = self.head_join(pc, st, callback)?;
        if next.is_some() {
            self.end_path();
            self.cur_node = self.nodes.len() as u32;
            self.nodes.push(Node {
                parent: NO_NODE,
                hist: Vec::new(),
                marks: Marks::default(),
                branches: 1,
                barrier: true,
                unrolled: None,
                unrolled_above: NO_NODE,
            });
            self.hist.clear();
        }
        Ok(next)
    }

    fn head_join(&mut self, pc: usize, st: State, callback: bool) -> Result<Option<State>, Fail> {
        let shape = st.shape();
        let shapes = self.head_shapes.entry((callback, pc)).or_default();
        let covered = if shapes.len() <= CROSS_SHAPE_CHECK {
            shapes.iter().any(|&sh| {
                self.heads
                    .get(&(callback, pc, sh))
                    .is_some_and(|v| v.iter().any(|e| e.state.includes(&st)))
            })
        } else {
            self.heads
                .get(&(callback, pc, shape))
                .is_some_and(|v| v.iter().any(|e| e.state.includes(&st)))
        };
        if covered {
            return Ok(None);
        }
        let th = &self.cfg.thresholds;
        let entries = self.heads.entry((callback, pc, shape)).or_default();
        if let Some(e) = entries.iter_mut().find(|e| e.state.same_frames(&st)) {
            e.visits += 1;
            if let Some(j) = e.state.join(&st, &mut self.next_id) {
                let w = if e.visits > WIDEN_AFTER {
                    e.state.widen(&j, th, e.visits > HARD_WIDEN_AFTER)
                } else {
                    j
                };
                e.state = w.clone();
                return Ok(Some(w));
            }
        }
        if entries.is_empty() {
            if shapes.len() >= MAX_SHAPES_PER_HEAD {
                let reason = if callback || self.cfg.loop_head[pc] {
                    "too many distinct states at a loop head"
                } else {
                    "too many distinct states at one instruction"
                };
                return Err(self.too_complex(pc, reason, &st));
            }
            shapes.push(shape);
        }
        entries.push(LoopEntry { state: st.clone(), visits: 0 });
        self.add_states(1, pc, &st)?;
        Ok(Some(st))
    }

    /// One instruction: checks it against the rules, updates `st`, and says where the
    /// path goes (branches push their other side onto the pending stack).
    fn step(&mut self, pc: usize, st: &mut State) -> Result<Flow, K> {
        let i = self.insns[pc];
        match i.class() {
            op::ALU | op::ALU64 => {
                self.alu(i, st)?;
                Ok(Flow::Next(pc + 1))
            }
            op::LD => {
                if !i.is_lddw() {
                    return Err(K::LegacyPacketLoad);
                }
                self.lddw(pc, i, st)?;
                Ok(Flow::Next(pc + 2))
            }
            op::LDX => {
                self.load(pc, i, st)?;
                Ok(Flow::Next(pc + 1))
            }
            op::ST | op::STX => {
                if i.class() == op::STX && i.code & 0xe0 == op::ATOMIC {
                    self.atomic(pc, i, st)?;
                } else {
                    self.store(pc, i, st)?;
                }
                Ok(Flow::Next(pc + 1))
            }
            _ => self.jmp(pc, i, st),
        }
    }

    fn lddw(&mut self, pc: usize, i: Insn, st: &mut State) -> Result<(), K> {
        let hi = self.insns.get(pc + 1).map_or(0, |n| n.imm as u32);
        let map_idx = |idx: i32| -> Result<usize, K> {
            let idx = idx as u32;
            if (idx as usize) < self.env.maps.len() {
                Ok(idx as usize)
            } else {
                Err(K::BadMapIndex { index: idx, count: self.env.maps.len() })
            }
        };
        let r = match i.src {
            op::PSEUDO_MAP_FD => {
                let m = map_idx(i.imm)?;
                Reg::ptr(crate::reg::Kind::MapHandle { map: m as u16 }, 0)
            }
            op::PSEUDO_MAP_VALUE => {
                let m = map_idx(i.imm)?;
                let info = &self.maps[m];
                let ok = info.map_type == spine_abi::map_type::ARRAY
                    && info.max_entries == 1
                    && hi < info.value_size;
                if !ok {
                    return Err(K::BadMapValueRef { map: m as u32, off: hi });
                }
                Reg::ptr(crate::reg::Kind::MapValue { map: m as u16 }, hi as i32)
            }
            op::PSEUDO_FUNC => {
                let t = (pc as i64 + 1 + i64::from(i.imm)) as u32;
                Reg::ptr(crate::reg::Kind::Func { pc: t }, 0)
            }
            _ => Reg::constant(u64::from(i.imm as u32) | u64::from(hi) << 32),
        };
        st.cur_mut().regs[usize::from(i.dst)] = r;
        Ok(())
    }

    /// The register's value; reading an uninitialised one is an error.
    fn read(st: &State, r: u8) -> Result<Reg, K> {
        let v = st.cur().regs[usize::from(r)];
        if v.is_init() {
            Ok(v)
        } else {
            Err(K::UninitRegister { reg: r })
        }
    }

    /// Checks the combined stack of every call chain and the tail-call rule, as the
    /// kernel's `check_max_stack_depth` does after the main analysis.
    fn check_stack_chains(&self) -> Result<(), (usize, K)> {
        let round = |d: u32| d.div_ceil(16) * 16;
        // (subprog, depth before, frames, call site); a timer callback starts below the
        // runtime's empty wrapper frame.
        let mut work: Vec<(usize, u32, usize, usize)> = vec![(0, 0, 1, 0)];
        work.extend(self.async_roots.iter().map(|&(s, site)| (s, 0, 2, site)));
        let mut seen: Vec<(usize, u32, usize)> = Vec::new();
        while let Some((s, before, frames, site)) = work.pop() {
            if frames > self.env.limits.max_call_frames || seen.contains(&(s, before, frames)) {
                continue;
            }
            seen.push((s, before, frames));
            if s != 0 && self.sub_tail_call[s] && before >= 256 {
                return Err((site, K::TailCallStack { bytes: before }));
            }
            let depth = before + round(self.sub_depth[s]);
            if depth > self.env.limits.max_combined_stack {
                return Err((site, K::CombinedStackTooLarge { frames, bytes: depth }));
            }
            for &(from, to, at) in &self.call_edges {
                if from == s {
                    work.push((to, depth, frames + 1, at));
                }
            }
        }
        Ok(())
    }

    fn record_depth(&mut self, st: &State, frame: usize, lowest: i64) {
        if let Some(f) = st.frames.get(frame) {
            let d = (-lowest).clamp(0, i64::from(u32::MAX)) as u32;
            let s = &mut self.sub_depth[f.subprog];
            *s = (*s).max(d);
        }
    }

    fn record_access(&mut self, pc: usize, a: crate::info::MemAccess) -> Result<(), K> {
        self.info[pc].record(a).map_err(|()| K::MixedCtxAccess)
    }
}

/// A scalar about which nothing is known, linked to nothing.
fn is_top(r: &Reg) -> bool {
    r.id == 0 && r.sym == 0 && r.v.includes(&crate::scalar::Scalar::unknown())
}

/// Every register and slot of `st` holding a number something is known about.
fn all_numbers(st: &State) -> Marks {
    use crate::reg::Kind;
    use crate::state::Byte;
    let mut m = Marks::default();
    for (fi, f) in st.frames.iter().enumerate() {
        for (r, reg) in f.regs.iter().enumerate().take(10) {
            if reg.kind == Kind::Scalar && !is_top(reg) {
                m.set_reg(fi, r);
            }
        }
        for (i, s) in f.stack.iter().enumerate() {
            let spilled = s.bytes[0] == Byte::Spill && s.spill.kind == Kind::Scalar;
            if s.bytes.contains(&Byte::Zero) || spilled {
                m.set_slot(fi, i);
            }
        }
    }
    m
}

fn hist_bytes(h: &[Hist]) -> usize {
    std::mem::size_of_val(h)
}
