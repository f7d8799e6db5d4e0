//! Stack-slot liveness: for each instruction, the 8-byte slots of its function's own
//! frame that some path from there may read before writing them whole. A slot that is
//! dead may be forgotten at a prune point (the kernel's `clean_live_states`): spilled
//! temporaries of finished parse steps then no longer keep apart states whose futures
//! are the same, which is what lets large unrolled programs converge.
//!
//! Reads are found through a first, forward pass that follows which registers hold
//! `fp + c` (a known slot), may hold some stack address (`Any`: an unknown offset, a
//! pointer reloaded from the stack, a pointer argument), or hold no address of this
//! frame at all. Everything uncertain counts as reading every slot, and only a full,
//! aligned 8-byte store through a known `fp + c` kills one: the result over-approximates
//! liveness, so forgetting dead slots never hides a read.

use crate::cfg::ARG_REGS;
use crate::helpers::{ArgType, HelperTable};
use spine_isa::{op, Insn, FP};

/// Slots of one frame (512 bytes).
const SLOTS: usize = 64;
const ALL: u64 = u64::MAX;

/// What a register may hold, as far as this frame's stack is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    /// Not yet reached.
    Bottom,
    /// No address of this frame.
    No,
    /// Exactly `fp + c`.
    Fp(i64),
    /// Possibly an address of this frame, offset unknown.
    Any,
}

impl Val {
    fn join(self, o: Val) -> Val {
        match (self, o) {
            (Val::Bottom, x) | (x, Val::Bottom) => x,
            (a, b) if a == b => a,
            (Val::No, Val::No) => Val::No,
            _ => Val::Any,
        }
    }

    fn is_stack(self) -> bool {
        matches!(self, Val::Fp(_) | Val::Any)
    }
}

type Regs = [Val; 11];

/// Slots covering bytes `[at, at + size)` of the frame (`at` negative); every slot if
/// the range leaves the frame (the access is refused anyway).
fn slots(at: i64, size: i64) -> u64 {
    let (lo, hi) = (at, at + size);
    if size <= 0 || lo < -(SLOTS as i64) * 8 || hi > 0 {
        return ALL;
    }
    let first = ((-hi) / 8) as usize; // slot holding byte hi - 1
    let last = ((-lo - 1) / 8) as usize;
    (first..=last).fold(0, |m, s| m | 1 << s)
}

/// Slots at and above `fp + at` (a helper reads from there, at most to the frame's top).
fn slots_from(at: i64) -> u64 {
    if at >= 0 || at < -(SLOTS as i64) * 8 {
        return ALL;
    }
    let last = ((-at - 1) / 8) as usize;
    if last >= SLOTS - 1 {
        ALL
    } else {
        (1u64 << (last + 1)) - 1
    }
}

fn reach(v: Val, off: i64, size: i64) -> u64 {
    match v {
        Val::Fp(c) => slots(c + off, size),
        Val::Any => ALL,
        _ => 0,
    }
}

/// The registers after `pc`, given those before it.
fn forward_step(i: Insn, r: &Regs) -> Regs {
    let mut o = *r;
    let x = i.code & op::X != 0;
    let dst = usize::from(i.dst).min(10);
    let src = usize::from(i.src).min(10);
    match i.class() {
        op::ALU64 => {
            o[dst] = match i.code & 0xf0 {
                op::MOV if x && i.off == 0 => r[src],
                op::MOV => Val::No,
                op::ADD | op::SUB if !x => match r[dst] {
                    Val::Fp(c) => {
                        let k = i64::from(i.imm);
                        Val::Fp(if i.code & 0xf0 == op::ADD { c + k } else { c - k })
                    }
                    v => v,
                },
                _ if r[dst].is_stack() || (x && r[src].is_stack()) => Val::Any,
                _ => Val::No,
            };
        }
        op::ALU | op::LD => o[dst] = Val::No,
        op::LDX => o[dst] = if r[src] == Val::No { Val::No } else { Val::Any },
        op::STX if i.code & 0xe0 == op::ATOMIC => {
            let loaded = if r[dst] == Val::No { Val::No } else { Val::Any };
            if i.imm == op::ATOMIC_CMPXCHG {
                o[0] = loaded;
            } else if i.imm & op::FETCH != 0 {
                o[src] = loaded;
            }
        }
        op::JMP if i.code & 0xf0 == op::CALL => {
            for v in &mut o[1..6] {
                *v = Val::No;
            }
            // A callee may hand back its caller's stack address; helpers do not.
            o[0] = if i.is_local_call() { Val::Any } else { Val::No };
        }
        _ => {}
    }
    o
}

/// Slots `pc` reads (`gen`) and slots it overwrites whole (`kill`).
fn gen_kill(i: Insn, r: &Regs, helpers: &dyn HelperTable) -> (u64, u64) {
    let dst = usize::from(i.dst).min(10);
    let src = usize::from(i.src).min(10);
    let size = op::size_bytes(i.code) as i64;
    let off = i64::from(i.off);
    match i.class() {
        op::LDX => (reach(r[src], off, size), 0),
        op::ST | op::STX => {
            if i.class() == op::STX && i.code & 0xe0 == op::ATOMIC {
                return (reach(r[dst], off, size), 0);
            }
            let kill = match r[dst] {
                Val::Fp(c) if size == 8 && (c + off) % 8 == 0 => {
                    let s = slots(c + off, 8);
                    if s == ALL {
                        0
                    } else {
                        s
                    }
                }
                _ => 0,
            };
            (0, kill)
        }
        op::LD if !i.is_lddw() => (ALL, 0),
        op::JMP if i.code & 0xf0 == op::CALL => {
            let proto = if i.is_helper_call() { helpers.proto(i.imm as u32) } else { None };
            let nargs = proto.map_or(5, |p| p.nargs());
            // A helper reads its memory arguments from the address up; a callback
            // handed a stack address may reach anywhere in the frame.
            let bounded = proto.is_some_and(|p| {
                !p.args.iter().any(|a| matches!(a, ArgType::Func | ArgType::StackOrNull))
            });
            let mut g = 0;
            for (k, v) in r[1..=nargs.min(5)].iter().enumerate() {
                if ARG_REGS & (1 << (k + 1)) == 0 {
                    continue;
                }
                g |= match v {
                    Val::Fp(c) if bounded => slots_from(*c),
                    v if v.is_stack() => ALL,
                    _ => 0,
                };
            }
            if i.code & op::X != 0 {
                g = ALL;
            }
            (g, 0)
        }
        _ => (0, 0),
    }
}

/// Per instruction, slots of its function's frame (bit `i`: bytes `fp - 8(i+1) .. fp -
/// 8i`): those live, and those whose value may matter for safety (see [`StackFacts`]).
/// `entries` are the function entries (the main one first), `succs` the intra-function
/// successors, `reg_relevant` the registers whose value may matter (`Cfg::relevant`).
pub fn stack_facts(
    insns: &[Insn],
    second_slot: &[bool],
    entries: &[usize],
    helpers: &dyn HelperTable,
    succs: &dyn Fn(usize) -> [Option<usize>; 2],
    reg_relevant: &[u16],
) -> StackFacts {
    let n = insns.len();
    // Forward: what each register may hold before each instruction.
    let mut regs: Vec<Regs> = vec![[Val::Bottom; 11]; n];
    let mut work = Vec::new();
    for (k, &e) in entries.iter().enumerate() {
        if e >= n {
            continue;
        }
        let mut r = [Val::No; 11];
        r[usize::from(FP)] = Val::Fp(0);
        if k > 0 {
            // Arguments may point into a caller's frame, which may hold addresses of
            // this one only if this frame wrote them there: treat them as unknown.
            for v in &mut r[1..6] {
                *v = Val::Any;
            }
        }
        regs[e] = r;
        work.push(e);
    }
    let mut guard = 0usize;
    while let Some(pc) = work.pop() {
        guard += 1;
        if guard > 64 * n + 1024 {
            // Cannot happen (the lattice has height 3 per register); stay sound anyway.
            return StackFacts { live: vec![ALL; n], relevant: vec![ALL; n] };
        }
        let out = forward_step(insns[pc], &regs[pc]);
        for t in succs(pc).into_iter().flatten() {
            if t >= n || second_slot[t] {
                continue;
            }
            let mut j = regs[t];
            for (a, b) in j.iter_mut().zip(out.iter()) {
                *a = a.join(*b);
            }
            if j != regs[t] {
                regs[t] = j;
                work.push(t);
            }
        }
    }
    // Backward: live = gen | (live after & !kill).
    let gk: Vec<(u64, u64)> = (0..n)
        .map(|pc| {
            if second_slot[pc] || regs[pc][usize::from(FP)] == Val::Bottom {
                (ALL, 0)
            } else {
                gen_kill(insns[pc], &regs[pc], helpers)
            }
        })
        .collect();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (pc, &second) in second_slot.iter().enumerate() {
        if second {
            continue;
        }
        for t in succs(pc).into_iter().flatten() {
            if t < n {
                preds[t].push(pc);
            }
        }
    }
    let live = backward(n, second_slot, succs, &preds, &gk);
    // Relevance: a slot's value matters where it may be loaded into a register whose
    // value matters, or where a callee or callback may reach it.
    let gk: Vec<(u64, u64)> = (0..n)
        .map(|pc| {
            if second_slot[pc] || regs[pc][usize::from(FP)] == Val::Bottom {
                return (ALL, 0);
            }
            let i = insns[pc];
            let (_, kill) = gen_kill(i, &regs[pc], helpers);
            let after = succs(pc).into_iter().flatten().fold(0u16, |a, t| a | reg_relevant[t]);
            let g = match i.class() {
                op::LDX if after & (1 << i.dst.min(15)) != 0 => {
                    let (g, _) = gen_kill(i, &regs[pc], helpers);
                    g
                }
                op::STX if i.code & 0xe0 == op::ATOMIC => gen_kill(i, &regs[pc], helpers).0,
                op::LD if !i.is_lddw() => ALL,
                op::JMP if i.code & 0xf0 == op::CALL => {
                    let (g, _) = gen_kill(i, &regs[pc], helpers);
                    let proto = if i.is_helper_call() { helpers.proto(i.imm as u32) } else { None };
                    // A helper only reads the bytes; a callee or callback may load them.
                    if proto.is_some_and(|p| {
                        !p.args.iter().any(|a| matches!(a, ArgType::Func | ArgType::StackOrNull))
                    }) {
                        0
                    } else {
                        g
                    }
                }
                _ => 0,
            };
            (g, kill)
        })
        .collect();
    let relevant = backward(n, second_slot, succs, &preds, &gk);
    StackFacts { live, relevant }
}

/// What [`stack_facts`] finds.
pub struct StackFacts {
    /// Slots some path may read before overwriting them whole.
    pub live: Vec<u64>,
    /// Slots whose value (not just whether they are initialised) may matter for safety:
    /// a spilled number in any other slot may be forgotten at a prune point.
    pub relevant: Vec<u64>,
}

/// Solves `in = gen | (out & !kill)` backwards over slot sets.
fn backward(
    n: usize,
    second_slot: &[bool],
    succs: &dyn Fn(usize) -> [Option<usize>; 2],
    preds: &[Vec<usize>],
    gk: &[(u64, u64)],
) -> Vec<u64> {
    let mut sol = vec![0u64; n];
    let mut work: Vec<usize> = (0..n).filter(|&p| !second_slot[p]).collect();
    let mut queued = vec![true; n];
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        let out = succs(pc).into_iter().flatten().fold(0u64, |a, t| a | sol[t]);
        let (g, k) = gk[pc];
        let inn = g | (out & !k);
        if inn != sol[pc] {
            sol[pc] = inn;
            for &p in &preds[pc] {
                if !queued[p] {
                    queued[p] = true;
                    work.push(p);
                }
            }
        }
    }
    sol
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_masks() {
        assert_eq!(slots(-8, 8), 1);
        assert_eq!(slots(-16, 8), 2);
        assert_eq!(slots(-12, 8), 0b11);
        assert_eq!(slots(-1, 1), 1);
        assert_eq!(slots(-512, 8), 1 << 63);
        assert_eq!(slots(-520, 8), ALL);
        assert_eq!(slots(-4, 8), ALL);
        assert_eq!(slots_from(-16), 0b11);
        assert_eq!(slots_from(-9), 0b11);
        assert_eq!(slots_from(-512), ALL);
    }
}
