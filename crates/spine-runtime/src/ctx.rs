//! The XDP context. Programs read `struct xdp_md`: six `u32` fields, three of them packet
//! pointers. spine hands programs a pointer to its own [`XdpCtx`] with full 64-bit
//! pointers and rewrites every context load to read the real field, as the kernel's
//! `convert_ctx_accesses` does.
//!
//! Finding the context loads needs to know which register holds the context at each
//! instruction. [`rewrite`] computes that with a small dataflow pass over registers and
//! 8-byte stack spill slots, across bpf-to-bpf calls. It refuses what the kernel refuses
//! (writes, wrong sizes, arithmetic on the context) and anything it cannot decide. Memory
//! safety never rests on this pass: every access is still checked against the
//! invocation's regions.

use spine_abi::xdp_md;
use spine_isa::{op, Insn, FP, STACK_SIZE};

/// What a rewritten program's context pointer points at. The packet pointers are
/// addresses; the program sees this struct read-only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct XdpCtx {
    pub data: u64,
    pub data_end: u64,
    pub data_meta: u64,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
    pub _pad: u32,
}

/// Bytes of [`XdpCtx`] the program may read.
pub const XDP_CTX_SIZE: usize = std::mem::size_of::<XdpCtx>();

/// Why a program's context accesses cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instruction {pc}: {kind}")]
pub struct CtxError {
    pub pc: usize,
    pub kind: CtxErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtxErrorKind {
    #[error("write to the read-only context (struct xdp_md)")]
    Write,
    #[error("invalid context access: offset {off}, size {size} (fields are 4-byte loads)")]
    BadAccess { off: i16, size: usize },
    #[error("egress_ifindex can only be read by devmap programs")]
    EgressIfindex,
    #[error("arithmetic on the context pointer in r{reg}")]
    Arithmetic { reg: u8 },
    #[error("r{reg} holds the context on some paths only; cannot rewrite the access")]
    Ambiguous { reg: u8 },
    #[error("the context pointer in r{reg} is stored outside the stack frame")]
    Escapes { reg: u8 },
}

/// Where a load of `struct xdp_md` at `off` goes in [`XdpCtx`]: (offset, size code).
fn field(off: i16) -> Option<(i16, u8)> {
    Some(match off {
        xdp_md::DATA => (0, op::DW),
        xdp_md::DATA_END => (8, op::DW),
        xdp_md::DATA_META => (16, op::DW),
        xdp_md::INGRESS_IFINDEX => (24, op::W),
        xdp_md::RX_QUEUE_INDEX => (28, op::W),
        xdp_md::EGRESS_IFINDEX => (32, op::W),
        _ => return None,
    })
}

/// What a register or spill slot holds, as far as the context is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not reached yet.
    Unreached,
    Other,
    Ctx,
    /// The context on some paths, something else on others.
    Mixed,
}

impl Kind {
    fn join(self, o: Kind) -> Kind {
        match (self, o) {
            (Kind::Unreached, x) | (x, Kind::Unreached) => x,
            (a, b) if a == b => a,
            _ => Kind::Mixed,
        }
    }
    fn maybe_ctx(self) -> bool {
        matches!(self, Kind::Ctx | Kind::Mixed)
    }
}

const SLOTS: usize = STACK_SIZE / 8;

#[derive(Debug, Clone, PartialEq, Eq)]
struct State {
    regs: [Kind; 11],
    /// 8-byte slots below the frame pointer: `slots[i]` is `[fp - 8(i+1), fp - 8i)`.
    slots: [Kind; SLOTS],
}

impl State {
    fn unreached() -> Self {
        State { regs: [Kind::Unreached; 11], slots: [Kind::Unreached; SLOTS] }
    }
    fn entry(args: [Kind; 5]) -> Self {
        let mut s = State { regs: [Kind::Other; 11], slots: [Kind::Other; SLOTS] };
        s.regs[1..6].copy_from_slice(&args);
        s
    }
    /// Joins `o` into `self`; true if `self` changed.
    fn join_from(&mut self, o: &State) -> bool {
        let before = self.clone();
        for (a, b) in self.regs.iter_mut().zip(o.regs) {
            *a = a.join(b);
        }
        for (a, b) in self.slots.iter_mut().zip(o.slots) {
            *a = a.join(b);
        }
        *self != before
    }
    /// A store of `size` bytes at `fp + off` overwrote these slots with non-pointers.
    fn clobber(&mut self, off: i16, size: usize) {
        let lo = i64::from(off);
        let hi = lo + size as i64;
        for (i, slot) in self.slots.iter_mut().enumerate() {
            let s_lo = -8 * (i as i64 + 1);
            if lo < s_lo + 8 && hi > s_lo {
                *slot = Kind::Other;
            }
        }
    }
    fn slot(off: i16) -> Option<usize> {
        let off = i64::from(off);
        (off < 0 && off >= -(STACK_SIZE as i64) && off % 8 == 0).then(|| ((-off) / 8 - 1) as usize)
    }
}

/// Facts about one function found so far.
#[derive(Debug, Clone)]
struct Func {
    start: usize,
    end: usize,
    entry: [Kind; 5],
    ret: Kind,
}

/// Rewrites every context load of an XDP program in place. `functions` are the entry
/// slots of the program's functions (the first is the program's entry).
pub fn rewrite(insns: &mut [Insn], functions: &[usize]) -> Result<(), CtxError> {
    let mut starts: Vec<usize> = functions.to_vec();
    if starts.first() != Some(&0) {
        starts.insert(0, 0);
    }
    starts.sort_unstable();
    starts.dedup();
    let mut funcs: Vec<Func> = starts
        .iter()
        .enumerate()
        .map(|(i, &s)| Func {
            start: s,
            end: starts.get(i + 1).copied().unwrap_or(insns.len()),
            entry: [Kind::Unreached; 5],
            ret: Kind::Unreached,
        })
        .collect();
    funcs[0].entry = [Kind::Ctx, Kind::Other, Kind::Other, Kind::Other, Kind::Other];

    // Interprocedural fixpoint: analyse every function from its current entry facts until
    // neither entry facts nor return facts change. The lattice is finite, so this ends.
    let mut states = vec![State::unreached(); insns.len()];
    loop {
        let mut changed = false;
        for f in 0..funcs.len() {
            if funcs[f].entry.iter().all(|k| *k == Kind::Unreached) && f != 0 {
                continue;
            }
            changed |= analyse(insns, f, &mut funcs, &mut states)?;
        }
        if !changed {
            break;
        }
    }

    // Apply: every load through a definite context pointer is redirected.
    for pc in 0..insns.len() {
        let i = insns[pc];
        if i.class() != op::LDX {
            continue;
        }
        let base = states[pc].regs[i.src as usize];
        match base {
            Kind::Ctx => {
                let size = op::size_bytes(i.code);
                if i.code & 0xe0 != op::MEM || size != 4 || i.off < 0 || i.off % 4 != 0 {
                    return Err(CtxError {
                        pc,
                        kind: CtxErrorKind::BadAccess { off: i.off, size },
                    });
                }
                let Some((off, sz)) = field(i.off) else {
                    return Err(CtxError {
                        pc,
                        kind: CtxErrorKind::BadAccess { off: i.off, size },
                    });
                };
                if i.off == xdp_md::EGRESS_IFINDEX {
                    return Err(CtxError { pc, kind: CtxErrorKind::EgressIfindex });
                }
                insns[pc] = Insn::new(op::LDX | op::MEM | sz, i.dst, i.src, off, 0);
            }
            Kind::Mixed => {
                return Err(CtxError { pc, kind: CtxErrorKind::Ambiguous { reg: i.src } })
            }
            Kind::Other | Kind::Unreached => {}
        }
    }
    Ok(())
}

/// One pass over function `f`; true if any facts (states, callee entries, returns) grew.
fn analyse(
    insns: &[Insn],
    f: usize,
    funcs: &mut [Func],
    states: &mut [State],
) -> Result<bool, CtxError> {
    let (start, end) = (funcs[f].start, funcs[f].end);
    let mut changed = states[start].join_from(&State::entry(funcs[f].entry));
    // Revisit every reached instruction: facts from callees (return kinds) may have grown
    // since the last pass without any state in this function changing.
    let mut work: Vec<usize> =
        (start..end).rev().filter(|&pc| states[pc].regs[FP as usize] != Kind::Unreached).collect();
    let mut queued = vec![false; end - start];
    for &pc in &work {
        queued[pc - start] = true;
    }
    while let Some(pc) = work.pop() {
        queued[pc - start] = false;
        let mut s = states[pc].clone();
        let i = insns[pc];
        let mut succ: [Option<usize>; 2] = [Some(pc + 1), None];
        let dst = i.dst as usize;
        let src = i.src as usize;
        let err = |kind| Err(CtxError { pc, kind });
        match i.class() {
            op::ALU | op::ALU64 => {
                let x = i.code & op::X != 0;
                let o = i.code & 0xf0;
                if i.class() == op::ALU64 && o == op::MOV && x && i.off == 0 {
                    s.regs[dst] = s.regs[src];
                } else {
                    let reads_dst = o != op::MOV;
                    if reads_dst && s.regs[dst].maybe_ctx() {
                        return err(CtxErrorKind::Arithmetic { reg: i.dst });
                    }
                    if x && o != op::MOV && s.regs[src].maybe_ctx() {
                        return err(CtxErrorKind::Arithmetic { reg: i.src });
                    }
                    s.regs[dst] = Kind::Other;
                }
            }
            op::LD => {
                s.regs[dst] = Kind::Other;
                succ[0] = Some(pc + 2);
            }
            op::LDX => {
                if i.src == FP && op::size_bytes(i.code) == 8 && i.code & 0xe0 == op::MEM {
                    s.regs[dst] = State::slot(i.off).map_or(Kind::Other, |k| s.slots[k]);
                } else {
                    s.regs[dst] = Kind::Other;
                }
            }
            op::ST | op::STX => {
                if s.regs[dst].maybe_ctx() {
                    return err(CtxErrorKind::Write);
                }
                let size = op::size_bytes(i.code);
                let atomic = i.class() == op::STX && i.code & 0xe0 == op::ATOMIC;
                let stored = if i.class() == op::STX { s.regs[src] } else { Kind::Other };
                if i.dst == FP {
                    match State::slot(i.off) {
                        Some(k) if size == 8 && !atomic => s.slots[k] = stored,
                        _ => s.clobber(i.off, size),
                    }
                } else if stored.maybe_ctx() {
                    return err(CtxErrorKind::Escapes { reg: i.src });
                }
                if atomic {
                    if i.imm & op::FETCH != 0 {
                        s.regs[src] = Kind::Other;
                    }
                    if i.imm == op::ATOMIC_CMPXCHG {
                        s.regs[0] = Kind::Other;
                    }
                }
            }
            op::JMP | op::JMP32 => match i.code & 0xf0 {
                op::EXIT if i.class() == op::JMP => {
                    let r = funcs[f].ret.join(s.regs[0]);
                    changed |= r != funcs[f].ret;
                    funcs[f].ret = r;
                    succ[0] = None;
                }
                op::CALL if i.class() == op::JMP => {
                    if i.is_local_call() {
                        let target = (pc as i64 + 1 + i64::from(i.imm)) as usize;
                        if let Some(g) = funcs.iter().position(|g| g.start == target) {
                            let mut args = funcs[g].entry;
                            for (a, r) in args.iter_mut().zip(&s.regs[1..6]) {
                                *a = a.join(*r);
                            }
                            changed |= args != funcs[g].entry;
                            funcs[g].entry = args;
                            // Unreached until the callee's exits are analysed: joins
                            // only grow, so a guess now would poison the fixpoint.
                            s.regs[0] = funcs[g].ret;
                        } else {
                            s.regs[0] = Kind::Other;
                        }
                    } else {
                        s.regs[0] = Kind::Other;
                    }
                    for r in &mut s.regs[1..6] {
                        *r = Kind::Other;
                    }
                }
                op::JA => {
                    let off =
                        if i.class() == op::JMP32 { i64::from(i.imm) } else { i64::from(i.off) };
                    succ[0] = Some((pc as i64 + 1 + off) as usize);
                }
                _ => succ[1] = Some((pc as i64 + 1 + i64::from(i.off)) as usize),
            },
            _ => {}
        }
        for t in succ.into_iter().flatten() {
            // Structural validation already proved targets in range; a jump leaving its
            // function is not followed (the engine faults on it at run time).
            if t < start || t >= end {
                continue;
            }
            if states[t].join_from(&s) {
                changed = true;
                if !queued[t - start] {
                    queued[t - start] = true;
                    work.push(t);
                }
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests;
