//! The program's static structure, computed once before the abstract interpretation:
//! functions (bpf-to-bpf callees and callbacks) and their boundaries, loop heads (the
//! targets of back-edges found by depth-first search), prune points, the registers live
//! at each instruction, and the constants widening may stop at.

use crate::error::VerifyErrorKind;
use crate::helpers::{ArgType, HelperTable};
use crate::scalar::Thresholds;
use spine_isa::{op, Insn};

/// One function of the program: the entry, a bpf-to-bpf callee or a callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subprog {
    pub entry: usize,
    /// One past the last instruction.
    pub end: usize,
    /// Named by an `lddw` with `PSEUDO_FUNC` (a callback).
    pub is_callback: bool,
}

#[derive(Debug)]
pub struct Cfg {
    pub subprogs: Vec<Subprog>,
    /// Per instruction: index into `subprogs`.
    pub subprog_of: Vec<usize>,
    /// Per instruction: states are cached here for pruning (loop heads, jump targets,
    /// the fall-through of register comparisons, returns from local calls).
    pub prune: Vec<bool>,
    /// Per instruction: the target of a back-edge; states are joined and widened here.
    pub loop_head: Vec<bool>,
    /// Per instruction: registers r0..r9 that may be read before written from here.
    pub live: Vec<u16>,
    /// Per instruction: registers whose value may matter for safety from here on.
    pub relevant: Vec<u16>,
    /// Per instruction: slots of its function's frame that may be read from here on
    /// (see [`crate::stack_live`]).
    pub stack_live: Vec<u64>,
    /// Per instruction: slots whose value may matter for safety from here on.
    pub stack_relevant: Vec<u64>,
    pub thresholds: Thresholds,
}

/// Registers r1..r5 as a mask.
pub const ARG_REGS: u16 = 0b11_1110;
/// Registers r6..r9 as a mask.
pub const CALLEE_SAVED: u16 = 0b11_1100_0000;

type CfgError = (usize, VerifyErrorKind);

impl Cfg {
    pub fn build(insns: &[Insn], helpers: &dyn HelperTable) -> Result<Cfg, CfgError> {
        let n = insns.len();
        let mut second_slot = vec![false; n];
        let mut pc = 0;
        while pc < n {
            if insns[pc].is_lddw() && pc + 1 < n {
                second_slot[pc + 1] = true;
                pc += 2;
            } else {
                pc += 1;
            }
        }
        let mut entries = vec![(0usize, false)];
        for (pc, i) in insns.iter().enumerate() {
            if second_slot[pc] {
                continue;
            }
            if i.is_local_call() {
                if let Some(t) = i.branch_target(pc) {
                    entries.push((t as usize, false));
                }
            }
            if i.is_lddw() && i.src == op::PSEUDO_FUNC {
                entries.push(((pc as i64 + 1 + i64::from(i.imm)) as usize, true));
            }
        }
        entries.sort_unstable();
        let mut subprogs: Vec<Subprog> = Vec::new();
        for (e, cb) in entries {
            match subprogs.last_mut() {
                Some(s) if s.entry == e => s.is_callback |= cb,
                _ => subprogs.push(Subprog { entry: e, end: n, is_callback: cb }),
            }
        }
        for i in 0..subprogs.len().saturating_sub(1) {
            subprogs[i].end = subprogs[i + 1].entry;
        }
        let mut subprog_of = vec![0; n];
        for (k, s) in subprogs.iter().enumerate() {
            subprog_of[s.entry..s.end].fill(k);
        }
        // Boundaries: jumps stay inside their function, which ends in exit or ja.
        for s in &subprogs {
            let last = if s.end >= 2 && second_slot[s.end - 1] { s.end - 2 } else { s.end - 1 };
            let t = insns[last];
            let ends = t.is_exit()
                || (t.code & 0xf0 == op::JA && matches!(t.class(), op::JMP | op::JMP32));
            if !ends {
                return Err((last, VerifyErrorKind::SubprogFallsThrough { entry: s.entry }));
            }
            for pc in s.entry..s.end {
                if second_slot[pc] || insns[pc].is_local_call() {
                    continue;
                }
                if let Some(t) = insns[pc].branch_target(pc) {
                    let t = t as usize;
                    if t < s.entry || t >= s.end {
                        return Err((pc, VerifyErrorKind::JumpOutOfSubprog { from: pc, to: t }));
                    }
                }
            }
        }
        let succs = |pc: usize| -> [Option<usize>; 2] {
            let i = insns[pc];
            if i.is_lddw() {
                return [Some(pc + 2).filter(|&p| p < n), None];
            }
            match i.class() {
                op::JMP | op::JMP32 => match i.code & 0xf0 {
                    op::EXIT if i.class() == op::JMP => [None, None],
                    op::CALL if i.class() == op::JMP => [Some(pc + 1).filter(|&p| p < n), None],
                    op::JA => [i.branch_target(pc).map(|t| t as usize), None],
                    _ => [Some(pc + 1).filter(|&p| p < n), i.branch_target(pc).map(|t| t as usize)],
                },
                _ => [Some(pc + 1).filter(|&p| p < n), None],
            }
        };

        // Back-edges by iterative depth-first search from every function entry.
        let mut loop_head = vec![false; n];
        let mut color = vec![0u8; n]; // 0 white, 1 on stack, 2 done
        for s in &subprogs {
            if color[s.entry] != 0 {
                continue;
            }
            let mut stack: Vec<(usize, usize)> = vec![(s.entry, 0)];
            color[s.entry] = 1;
            while let Some(top) = stack.last_mut() {
                let (pc, k) = *top;
                let next = succs(pc);
                if k < 2 {
                    top.1 += 1;
                    if let Some(t) = next[k] {
                        match color[t] {
                            0 => {
                                color[t] = 1;
                                stack.push((t, 0));
                            }
                            1 => loop_head[t] = true,
                            _ => {}
                        }
                    }
                } else {
                    color[pc] = 2;
                    stack.pop();
                }
            }
        }

        let mut prune = loop_head.clone();
        for pc in 0..n {
            if second_slot[pc] {
                continue;
            }
            let i = insns[pc];
            if i.is_local_call() && pc + 1 < n {
                prune[pc + 1] = true;
            } else if let Some(t) = i.branch_target(pc) {
                prune[t as usize] = true;
                // The fall-through of a conditional jump too: the paths that meet at a
                // check's target differ in what they proved before it, but the check
                // refines each of them alike on its fall-through side (a packet range, a
                // non-null pointer), where they may then prune each other.
                if i.code & 0xf0 != op::JA && i.code & op::X != 0 && pc + 1 < n {
                    prune[pc + 1] = true;
                }
            }
        }

        let live = liveness(insns, &second_slot, helpers, &succs);
        let relevant = relevance(insns, &second_slot, &subprog_of, helpers, &succs);
        let entries: Vec<usize> = subprogs.iter().map(|s| s.entry).collect();
        let facts = crate::stack_live::stack_facts(
            insns,
            &second_slot,
            &entries,
            helpers,
            &succs,
            &relevant,
        );
        let (stack_live, stack_relevant) = (facts.live, facts.relevant);

        let mut consts = vec![0i64];
        for (pc, i) in insns.iter().enumerate() {
            if !second_slot[pc]
                && matches!(i.class(), op::JMP | op::JMP32)
                && i.code & op::X == 0
                && Cmp::is_cond(i.code)
            {
                consts.push(i64::from(i.imm));
            }
        }
        let thresholds = Thresholds::new(consts);
        Ok(Cfg {
            subprogs,
            subprog_of,
            prune,
            loop_head,
            live,
            relevant,
            stack_live,
            stack_relevant,
            thresholds,
        })
    }
}

struct Cmp;

impl Cmp {
    fn is_cond(code: u8) -> bool {
        !matches!(code & 0xf0, op::JA | op::CALL | op::EXIT)
    }
}

fn bit(r: u8) -> u16 {
    if r < 10 {
        1 << r
    } else {
        0
    }
}

/// Registers an instruction reads and writes.
fn use_def(i: Insn, helpers: &dyn HelperTable) -> (u16, u16) {
    let x = i.code & op::X != 0;
    match i.class() {
        op::ALU | op::ALU64 => {
            let o = i.code & 0xf0;
            let src = if x { bit(i.src) } else { 0 };
            let dst = if o == op::MOV { 0 } else { bit(i.dst) };
            (src | dst, bit(i.dst))
        }
        op::LD => {
            if i.is_lddw() {
                (0, bit(i.dst))
            } else {
                (bit(i.src) | bit(6), 0b11_1111)
            }
        }
        op::LDX => (bit(i.src), bit(i.dst)),
        op::ST => (bit(i.dst), 0),
        op::STX => {
            let mut u = bit(i.dst) | bit(i.src);
            let mut d = 0;
            if i.code & 0xe0 == op::ATOMIC {
                if i.imm == op::ATOMIC_CMPXCHG {
                    u |= 1;
                    d |= 1;
                } else if i.imm & op::FETCH != 0 {
                    d |= bit(i.src);
                }
            }
            (u, d)
        }
        op::JMP | op::JMP32 => match i.code & 0xf0 {
            op::JA => (0, 0),
            op::EXIT => (1, 0),
            op::CALL => {
                // Local calls: the callee's live arguments, added by `liveness`.
                let args = if i.is_helper_call() {
                    helpers.proto(i.imm as u32).map_or(5, |p| p.nargs())
                } else {
                    0
                };
                let used = ((1u16 << (args + 1)) - 1) & ARG_REGS;
                (used | if x { bit(i.dst) } else { 0 }, 0b11_1111)
            }
            _ => (bit(i.dst) | if x { bit(i.src) } else { 0 }, 0),
        },
        _ => (0, 0),
    }
}

/// Solves a backward dataflow problem over register sets: `transfer(pc, out, sol)`
/// gives the set before `pc` from the set after it (`sol` holds the current solution,
/// for calls that consult their callee's entry).
fn backward(
    insns: &[Insn],
    second_slot: &[bool],
    succs: &dyn Fn(usize) -> [Option<usize>; 2],
    transfer: &dyn Fn(usize, u16, &[u16]) -> u16,
) -> Vec<u16> {
    let n = insns.len();
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for pc in 0..n {
        if second_slot[pc] {
            continue;
        }
        for t in succs(pc).into_iter().flatten() {
            if t < n {
                preds[t].push(pc);
            }
        }
        // A call's set depends on its callee's entry.
        if insns[pc].is_local_call() {
            if let Some(t) = insns[pc].branch_target(pc) {
                preds[t as usize].push(pc);
            }
        }
    }
    let mut sol = vec![0u16; n];
    let mut work: Vec<usize> = (0..n).filter(|&p| !second_slot[p]).collect();
    let mut queued = vec![true; n];
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        let out = succs(pc).into_iter().flatten().fold(0u16, |a, t| a | sol[t]);
        let inn = transfer(pc, out, &sol);
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

/// Registers that may be read before written: a bpf-to-bpf call reads the arguments
/// its callee reads.
fn liveness(
    insns: &[Insn],
    second_slot: &[bool],
    helpers: &dyn HelperTable,
    succs: &dyn Fn(usize) -> [Option<usize>; 2],
) -> Vec<u16> {
    let ud: Vec<(u16, u16)> = insns.iter().map(|&i| use_def(i, helpers)).collect();
    backward(insns, second_slot, succs, &|pc, out, sol| {
        let (mut u, d) = ud[pc];
        let i = insns[pc];
        if i.is_local_call() {
            u |= i.branch_target(pc).map_or(ARG_REGS, |t| sol[t as usize] & ARG_REGS);
        }
        u | (out & !d)
    })
}

/// Registers whose *value* may matter for safety: it may flow into a comparison, an
/// address, a size argument, a store (through the frame pointer, or through a pointer
/// that may lead into another frame's stack), pointer arithmetic (whose other operand
/// may be a pointer), or a function's return value. Any other scalar may be forgotten at a prune point without losing a
/// program the verifier could otherwise accept, which lets states that differ only in
/// such values (counters, checksums, verdicts) prune each other.
fn relevance(
    insns: &[Insn],
    second_slot: &[bool],
    subprog_of: &[usize],
    helpers: &dyn HelperTable,
    succs: &dyn Fn(usize) -> [Option<usize>; 2],
) -> Vec<u16> {
    backward(insns, second_slot, succs, &|pc, out, sol| {
        let i = insns[pc];
        let x = i.code & op::X != 0;
        let src = if x { bit(i.src) } else { 0 };
        let dst_rel = out & bit(i.dst) != 0;
        match i.class() {
            op::ALU | op::ALU64 => {
                if i.code & 0xf0 == op::MOV {
                    (out & !bit(i.dst)) | if dst_rel { src } else { 0 }
                } else if x && i.class() == op::ALU64 && matches!(i.code & 0xf0, op::ADD | op::SUB)
                {
                    // Pointer arithmetic: when one operand is a pointer, the other's
                    // bounds are checked here and become the result's offset, which
                    // matters wherever the pointer goes (a store into another frame's
                    // stack or a map keeps it), not only through this register.
                    out | bit(i.dst) | src
                } else {
                    out | if dst_rel { src } else { 0 }
                }
            }
            op::LD => out & !bit(i.dst),
            op::LDX => (out & !bit(i.dst)) | bit(i.src),
            op::ST => out | bit(i.dst),
            op::STX => {
                let mut inn = out | bit(i.dst);
                let atomic = i.code & 0xe0 == op::ATOMIC;
                if atomic && i.imm & op::FETCH != 0 {
                    inn &= !bit(i.src);
                }
                if !atomic {
                    // Through the frame pointer, or through a pointer that may lead
                    // to another frame's stack (a caller's struct filled by a callee):
                    // the slot keeps the value, and it may be read back.
                    inn |= bit(i.src);
                } else if i.dst == spine_isa::FP {
                    inn |= bit(i.src);
                }
                if atomic && i.imm == op::ATOMIC_CMPXCHG {
                    inn |= 1;
                }
                inn
            }
            op::JMP | op::JMP32 => match i.code & 0xf0 {
                op::JA => out,
                op::EXIT => {
                    if subprog_of[pc] == 0 {
                        0
                    } else {
                        1
                    }
                }
                op::CALL if i.is_local_call() => {
                    (out & !0b11_1111)
                        | i.branch_target(pc).map_or(ARG_REGS, |t| sol[t as usize] & ARG_REGS)
                }
                op::CALL => {
                    let sizes = helpers.proto(i.imm as u32).map_or(ARG_REGS, |p| {
                        p.args.iter().enumerate().fold(0u16, |m, (k, a)| {
                            let sized = matches!(
                                a,
                                ArgType::ConstSize
                                    | ArgType::ConstSizeOrZero
                                    | ArgType::ConstAllocSizeOrZero
                                    | ArgType::ConstSizeKnown
                            );
                            m | if sized { 1 << (k + 1) } else { 0 }
                        })
                    });
                    (out & !0b11_1111) | sizes | if x { bit(i.dst) } else { 0 }
                }
                _ => out | bit(i.dst) | src,
            },
            _ => out,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::helpers::KernelHelpers;
    use spine_isa::assemble;

    fn cfg(src: &str) -> Result<Cfg, CfgError> {
        Cfg::build(&assemble(src).expect("asm"), &KernelHelpers::xdp())
    }

    #[test]
    fn finds_loops_functions_and_liveness() {
        let c = cfg("mov %r0, 0
             mov %r1, 10
             loop: add %r0, 1
             jlt %r0, %r1, loop
             call local f
             exit
             f: mov %r0, 2
             exit")
        .expect("valid");
        assert_eq!(c.subprogs.len(), 2);
        assert_eq!(c.subprogs[1].entry, 6);
        assert!(c.loop_head[2] && !c.loop_head[0]);
        assert!(c.prune[2] && c.prune[5]);
        assert_eq!(c.live[2], 0b11, "r0 and r1 live in the loop");
        assert_eq!(c.live[0], 0, "nothing live at entry but what is written first");
    }

    #[test]
    fn values_stored_or_added_to_a_pointer_stay_relevant() {
        // r3 is a packet pointer, r7 points into a caller's stack: the length in r1 is
        // added to r3, which leaves only through the store; the length in r2 is itself
        // stored through r7 (an out-parameter). Both must be kept at the prune points.
        let c = cfg("ldxdw %r3, [%r1+0]
             ldxb %r1, [%r3+1]
             ldxb %r2, [%r3+2]
             jeq %r2, 0, +0
             add %r3, %r1
             stxdw [%r7+16], %r3
             stxdw [%r7+8], %r2
             mov %r0, 0
             exit")
        .expect("valid");
        assert!(c.prune[4]);
        assert_ne!(c.relevant[4] & (1 << 1), 0, "the length added to a pointer");
        assert_ne!(c.relevant[4] & (1 << 2), 0, "the value stored through a pointer");
        // A number whose value nothing depends on is still forgotten.
        let c = cfg("mov %r2, 5
             jeq %r1, 0, +0
             add %r2, 1
             mov %r0, 0
             exit")
        .expect("valid");
        assert_eq!(c.relevant[2] & (1 << 2), 0);
    }

    #[test]
    fn a_kfunc_constant_size_stays_relevant() {
        // One bpf_dynptr_slice call reached with r4 = 6 or r4 = 20 (clang's shape of
        // Linux's test_xdp_dynptr.c): the size, `buffer__szk`, must be kept where the
        // paths meet, as a helper's constant size is; the offset in r2 need not be.
        let c = cfg(&format!(
            "mov %r4, 6
             jeq %r1, 0, +1
             mov %r4, 20
             call {}
             mov %r0, 0
             exit",
            spine_abi::helper::KFUNC_DYNPTR_SLICE
        ))
        .expect("valid");
        assert!(c.prune[3], "the call is where the paths meet");
        assert_ne!(c.relevant[3] & (1 << 4), 0, "the slice's size");
        assert_eq!(c.relevant[3] & (1 << 2), 0, "the offset is only passed on");
    }

    #[test]
    fn a_register_comparison_prunes_on_both_sides() {
        // A packet check (register against register): its target and its fall-through
        // are prune points. A comparison with an immediate prunes at its target only.
        let c = cfg("ldxw %r2, [%r1+0]
             ldxw %r3, [%r1+4]
             jgt %r2, %r3, +2
             jeq %r2, 0, +1
             mov %r0, 1
             mov %r0, 2
             exit")
        .expect("valid");
        assert!(c.prune[3] && c.prune[5], "both sides of the register comparison");
        assert!(!c.prune[4], "an immediate comparison's fall-through");
        assert!(!c.prune[2], "straight-line code");
    }

    #[test]
    fn jumps_may_not_leave_their_function() {
        let e = cfg("call local f
             exit
             f: ja +0
             jeq %r1, 0, -3
             exit")
        .expect_err("crosses");
        assert_eq!(e.1, VerifyErrorKind::JumpOutOfSubprog { from: 3, to: 1 });
        let e = cfg("call local f
             exit
             f: mov %r0, 0
             f2: exit");
        assert!(e.is_ok());
        let e = cfg("call local f
             mov %r0, 1
             f: exit")
        .expect_err("falls into f");
        assert_eq!(e.1, VerifyErrorKind::SubprogFallsThrough { entry: 0 });
    }
}
