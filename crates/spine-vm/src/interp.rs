//! The reference interpreter: RFC 9669 semantics, one `match` on the opcode byte per
//! instruction, every memory access checked against [`Memory`]. It allocates nothing
//! per run: the caller owns the [`Stack`] and the regions.

use crate::callback::{callback_entries, callback_pc, is_callback_helper, FUNC_BASE};
use crate::points::counted_calls;
use crate::{
    AccessKind, BudgetVerdict, CallAbort, Env, Fault, Iteration, Memory, Region, Step,
    NOT_A_CALLBACK,
};
use spine_isa::{op, validate, Insn, IsaError, MAX_CALL_FRAMES, STACK_SIZE};

/// Why a program cannot be prepared for the interpreter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Isa(#[from] IsaError),
    #[error("instruction {pc}: map reference (lddw pseudo source {src}) was not relocated")]
    UnresolvedMapRef { pc: usize, src: u8 },
    #[error("instruction {pc}: legacy packet load (ld_abs/ld_ind) is not supported")]
    LegacyPacketLoad { pc: usize },
}

/// How long one invocation may run, counted in *progress points*: every taken backward
/// jump and every bpf-to-bpf call except calls into leaf subprograms
/// ([`counted_calls`]). Straight-line code between two points, leaves included, is
/// bounded by the program's length squared, so counting points bounds the run without a
/// per-instruction cost.
///
/// When `points` are spent the engine asks [`Env::budget_expired`], which owns the clock
/// (the runtime's watchdog compares against a deadline there), whether to go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunLimits {
    /// Progress points before the first [`Env::budget_expired`] call.
    pub points: u32,
}

impl Default for RunLimits {
    /// 64 points between clock checks: a check costs a clock read, 64 loop iterations
    /// of a typical body take well under a microsecond.
    fn default() -> Self {
        RunLimits { points: 64 }
    }
}

/// Stack memory for all call frames of one invocation (8-byte aligned). A run uses the
/// top [`Stack::BYTES`] (8 frames of 512 bytes); a stack made with
/// [`Stack::with_tail_windows`] has that many more windows below, one for each program
/// a tail call from a bpf-to-bpf callee runs nested in its caller's run.
#[derive(Debug, Clone)]
pub struct Stack {
    words: Box<[u64]>,
}

impl Default for Stack {
    fn default() -> Self {
        Self::new()
    }
}

impl Stack {
    /// Bytes of one window: what one run may use.
    pub const BYTES: usize = STACK_SIZE * MAX_CALL_FRAMES;

    pub fn new() -> Self {
        Self::with_tail_windows(0)
    }

    /// A stack with `n` windows below the top one, for nested runs
    /// ([`Stack::window_top`]).
    pub fn with_tail_windows(n: usize) -> Self {
        Stack { words: vec![0u64; Self::BYTES * (n + 1) / 8].into_boxed_slice() }
    }

    /// Bytes of stack memory in all (a multiple of [`Stack::BYTES`]).
    pub fn len_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Windows below the top one.
    pub fn tail_windows(&self) -> usize {
        self.len_bytes() / Self::BYTES - 1
    }

    /// Lowest address of the stack memory; frames grow down from `as_mut_ptr() +
    /// len_bytes()`.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.words.as_mut_ptr().cast()
    }

    fn base(&mut self) -> u64 {
        self.as_mut_ptr() as u64
    }

    /// The initial r10 of a run in window `level` (0 is the top one), if there is one.
    pub fn window_top(&mut self, level: usize) -> Option<u64> {
        (level <= self.tail_windows())
            .then(|| self.base() + (self.len_bytes() - level * Self::BYTES) as u64)
    }

    /// Zeroes the `n` bytes below the top, where the entry frame and its callees' frames
    /// lie, so nothing of an earlier invocation can be read there.
    pub fn zero_top(&mut self, n: usize) {
        let words = n.div_ceil(8).min(self.words.len());
        let len = self.words.len();
        self.words[len - words..].fill(0);
    }
}

#[derive(Clone, Copy, Default)]
struct Frame {
    ret_pc: usize,
    saved: [u64; 4],
    fp: u64,
}

/// A callback helper call in progress: where it was called, what it calls, its state.
#[derive(Clone, Copy)]
struct CallbackFrame {
    site: usize,
    id: u32,
    entry: usize,
    it: Iteration,
}

/// How a helper's `CallAbort` ends the run: `Ok(r0)` for `Exit`, else the fault.
fn abort(pc: usize, id: u32, a: CallAbort) -> Result<u64, Fault> {
    match a {
        CallAbort::Exit(v) => Ok(v),
        // In the entry frame: the run ends, the environment runs the target next.
        CallAbort::Tail => Ok(0),
        CallAbort::Unknown => Err(Fault::UnknownHelper { pc, id }),
        CallAbort::Fault(reason) => Err(Fault::Helper { pc, id, reason }),
    }
}

/// A validated program, ready to run any number of times (shared between threads).
#[derive(Debug, Clone)]
pub struct Interpreter {
    insns: Vec<Insn>,
    /// Which bpf-to-bpf calls are progress points ([`counted_calls`]).
    call_points: Vec<bool>,
    /// The functions `lddw PSEUDO_FUNC` names, sorted ([`callback_entries`]).
    callbacks: Vec<usize>,
}

impl Interpreter {
    pub fn new(insns: Vec<Insn>) -> Result<Self, LoadError> {
        validate(&insns)?;
        let mut pc = 0;
        while pc < insns.len() {
            let i = insns[pc];
            if i.is_lddw() {
                if i.src != op::PSEUDO_NONE && i.src != op::PSEUDO_FUNC {
                    return Err(LoadError::UnresolvedMapRef { pc, src: i.src });
                }
                pc += 2;
                continue;
            }
            if i.class() == op::LD {
                return Err(LoadError::LegacyPacketLoad { pc });
            }
            pc += 1;
        }
        let call_points = counted_calls(&insns);
        let callbacks = callback_entries(&insns);
        Ok(Interpreter { insns, call_points, callbacks })
    }

    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Runs the program with r1..r5 = `args` and returns r0 at the final `exit`.
    ///
    /// The stack is registered as a region for the duration of the call; every other
    /// region (context, packet, maps) must already be in `mem`.
    pub fn run<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        let base_len = mem.len();
        let stack_base = stack.base();
        let len = stack.len_bytes() as u64;
        let stack_region = Region { start: stack_base, len, writable: true };
        // SAFETY: `stack` is borrowed mutably for the whole call and the region is removed
        // before returning, so the memory stays valid and unaliased while registered.
        if unsafe { mem.push(stack_region) }.is_none() {
            return Err(Fault::Helper { pc: 0, id: 0, reason: "no free region for the stack" });
        }
        let r = self.exec(args, mem, stack_base + len, env, limits);
        mem.truncate(base_len);
        r
    }

    /// As [`Interpreter::run`], with r10 starting at `stack_top`, for a run nested in
    /// another one (a tail call's target run from a bpf-to-bpf callee): the stack is not
    /// registered again. Regions helpers add during the run are removed before it
    /// returns.
    ///
    /// # Safety
    /// `[stack_top - Stack::BYTES, stack_top)` lies inside a writable region of `mem`
    /// that nothing else uses while this runs (a window of a [`Stack`] registered by the
    /// caller, [`Stack::window_top`]).
    pub unsafe fn run_on_registered_stack<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack_top: u64,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        let base_len = mem.len();
        let r = self.exec(args, mem, stack_top, env, limits);
        mem.truncate(base_len);
        r
    }

    fn exec<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack_top: u64,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        let insns = &self.insns[..];
        let mut reg = [0u64; 11];
        reg[1..6].copy_from_slice(&args);
        reg[10] = stack_top;
        let mut frames = [Frame::default(); MAX_CALL_FRAMES];
        // Set where the frame above runs a callback of a callback helper (apart from
        // `frames`, so a run without callbacks does not initialise their state).
        let mut cbs: [Option<CallbackFrame>; MAX_CALL_FRAMES] = [None; MAX_CALL_FRAMES];
        let mut depth = 0usize;
        let mut pc = 0usize;
        // `grant` is the size of the current countdown, `points` what is left of it and
        // `spent` the points of every countdown used up.
        let mut grant = limits.points;
        let mut points = grant;
        let mut spent: u64 = 0;
        // Called at every progress point; `cur` names the instruction for the fault.
        macro_rules! progress {
            ($cur:expr) => {
                if points == 0 {
                    spent += u64::from(grant);
                    match env.budget_expired() {
                        BudgetVerdict::Continue(n) if n > 0 => {
                            grant = n;
                            points = n;
                        }
                        _ => return Err(Fault::Budget { pc: $cur, points: spent }),
                    }
                }
                points -= 1;
            };
        }

        // Leaves the current frame with r0 as it is: `exit`, or a tail call made in a
        // callee, whose target's r0 the callee's caller gets.
        macro_rules! frame_exit {
            () => {
                if depth == 0 {
                    return Ok(reg[0]);
                }
                depth -= 1;
                let f = frames[depth];
                reg[6..10].copy_from_slice(&f.saved);
                reg[10] = f.fp;
                pc = f.ret_pc;
                if let Some(mut cb) = cbs[depth] {
                    match env.callback_next(cb.id, &mut cb.it, reg[0], depth, mem) {
                        Ok(Step::Done(v)) => reg[0] = v,
                        Ok(Step::Call(a)) => {
                            progress!(cb.site);
                            cbs[depth] = Some(cb);
                            depth += 1;
                            reg[1..6].copy_from_slice(&a);
                            reg[10] = f.fp.wrapping_sub(STACK_SIZE as u64);
                            pc = cb.entry;
                        }
                        Err(a) => return abort(cb.site, cb.id, a),
                    }
                }
            };
        }

        loop {
            let Some(&i) = insns.get(pc) else {
                return Err(Fault::PcOutOfRange { pc });
            };
            let cur = pc;
            pc += 1;
            let dst = i.dst as usize;
            let src = i.src as usize;
            let imm = i.imm as i64 as u64;
            match i.class() {
                op::ALU64 => {
                    let s = if i.code & op::X != 0 { reg[src] } else { imm };
                    reg[dst] = alu64(i, reg[dst], s);
                }
                op::ALU => {
                    let s = if i.code & op::X != 0 { reg[src] } else { imm } as u32;
                    reg[dst] = alu32(i, reg[dst], s);
                }
                class @ (op::JMP | op::JMP32) => match i.code & 0xf0 {
                    op::JA => {
                        let off = if class == op::JMP32 { i.imm as i64 } else { i.off as i64 };
                        if off < 0 {
                            progress!(cur);
                        }
                        pc = (pc as i64 + off) as usize;
                    }
                    op::EXIT if class == op::JMP => {
                        frame_exit!();
                    }
                    op::CALL if class == op::JMP => {
                        if i.code & op::X == 0 && i.src == op::PSEUDO_CALL {
                            if self.call_points[cur] {
                                progress!(cur);
                            }
                            if depth + 1 >= MAX_CALL_FRAMES {
                                return Err(Fault::CallDepth { pc: cur, max: MAX_CALL_FRAMES });
                            }
                            frames[depth] = Frame {
                                ret_pc: pc,
                                saved: [reg[6], reg[7], reg[8], reg[9]],
                                fp: reg[10],
                            };
                            cbs[depth] = None;
                            depth += 1;
                            reg[10] = reg[10].wrapping_sub(STACK_SIZE as u64);
                            pc = (pc as i64 + i.imm as i64) as usize;
                        } else if i.code & op::X == 0 && is_callback_helper(i.imm as u32) {
                            let id = i.imm as u32;
                            let args = [reg[1], reg[2], reg[3], reg[4], reg[5]];
                            let mut it = Iteration::default();
                            match env.callback_start(cur, id, args, &mut it, depth, mem) {
                                Ok(Step::Done(v)) => reg[0] = v,
                                Ok(Step::Call(a)) => {
                                    let Some(entry) = callback_pc(args[1], &self.callbacks) else {
                                        return Err(Fault::Helper {
                                            pc: cur,
                                            id,
                                            reason: NOT_A_CALLBACK,
                                        });
                                    };
                                    progress!(cur);
                                    if depth + 1 >= MAX_CALL_FRAMES {
                                        return Err(Fault::CallDepth {
                                            pc: cur,
                                            max: MAX_CALL_FRAMES,
                                        });
                                    }
                                    frames[depth] = Frame {
                                        ret_pc: pc,
                                        saved: [reg[6], reg[7], reg[8], reg[9]],
                                        fp: reg[10],
                                    };
                                    cbs[depth] = Some(CallbackFrame { site: cur, id, entry, it });
                                    depth += 1;
                                    reg[1..6].copy_from_slice(&a);
                                    reg[10] = reg[10].wrapping_sub(STACK_SIZE as u64);
                                    pc = entry;
                                }
                                Err(a) => return abort(cur, id, a),
                            }
                        } else {
                            let id =
                                if i.code & op::X != 0 { reg[dst] as u32 } else { i.imm as u32 };
                            let args = [reg[1], reg[2], reg[3], reg[4], reg[5]];
                            match env.call(id, args, mem) {
                                Ok(v) => reg[0] = v,
                                Err(CallAbort::Tail) if depth > 0 => {
                                    reg[0] = env.tail_call_in_subprog(cur, mem)?;
                                    frame_exit!();
                                }
                                Err(a) => return abort(cur, id, a),
                            }
                        }
                    }
                    _ => {
                        let (a, b) = if i.code & op::X != 0 {
                            (reg[dst], reg[src])
                        } else {
                            (reg[dst], imm)
                        };
                        let taken = if class == op::JMP32 {
                            cond32(i.code, a as u32, b as u32)
                        } else {
                            cond64(i.code, a, b)
                        };
                        if taken {
                            if i.off < 0 {
                                progress!(cur);
                            }
                            pc = (pc as i64 + i.off as i64) as usize;
                        }
                    }
                },
                op::LD => {
                    // Validated in `new`: only plain lddw and function addresses.
                    reg[dst] = if i.src == op::PSEUDO_FUNC {
                        FUNC_BASE + (pc as i64 + i64::from(i.imm)) as u64
                    } else {
                        let hi = insns.get(pc).map_or(0, |n| n.imm as u32 as u64);
                        (i.imm as u32 as u64) | (hi << 32)
                    };
                    pc += 1;
                }
                op::LDX => {
                    let addr = reg[src].wrapping_add(i.off as i64 as u64);
                    let size = op::size_bytes(i.code);
                    mem.access(cur, addr, size, AccessKind::Read)?;
                    // SAFETY: `access` proved [addr, addr+size) inside a readable region.
                    let v = unsafe { load(addr, size) };
                    reg[dst] = if i.code & 0xe0 == op::MEMSX { sign_extend(v, size) } else { v };
                }
                op::ST => {
                    let addr = reg[dst].wrapping_add(i.off as i64 as u64);
                    let size = op::size_bytes(i.code);
                    mem.access(cur, addr, size, AccessKind::Write)?;
                    // SAFETY: `access` proved [addr, addr+size) inside a writable region.
                    unsafe { store(addr, size, imm) };
                }
                op::STX => {
                    let addr = reg[dst].wrapping_add(i.off as i64 as u64);
                    let size = op::size_bytes(i.code);
                    mem.access(cur, addr, size, AccessKind::Write)?;
                    if i.code & 0xe0 == op::ATOMIC {
                        if addr % size as u64 != 0 {
                            return Err(Fault::Helper {
                                pc: cur,
                                id: 0,
                                reason: "misaligned atomic",
                            });
                        }
                        // SAFETY: checked writable (hence readable) and naturally aligned.
                        unsafe { atomic(i, addr, size, &mut reg) };
                    } else {
                        // SAFETY: `access` proved [addr, addr+size) inside a writable region.
                        unsafe { store(addr, size, reg[src]) };
                    }
                }
                _ => return Err(Fault::PcOutOfRange { pc: cur }),
            }
        }
    }
}

#[inline]
fn alu64(i: Insn, d: u64, s: u64) -> u64 {
    match i.code & 0xf0 {
        op::ADD => d.wrapping_add(s),
        op::SUB => d.wrapping_sub(s),
        op::MUL => d.wrapping_mul(s),
        op::DIV if i.off == 1 => {
            if s == 0 {
                0
            } else {
                (d as i64).wrapping_div(s as i64) as u64
            }
        }
        op::DIV => d.checked_div(s).unwrap_or(0),
        op::MOD if i.off == 1 => {
            if s == 0 {
                d
            } else {
                (d as i64).wrapping_rem(s as i64) as u64
            }
        }
        op::MOD => d.checked_rem(s).unwrap_or(d),
        op::OR => d | s,
        op::AND => d & s,
        op::XOR => d ^ s,
        op::LSH => d << (s & 63),
        op::RSH => d >> (s & 63),
        op::ARSH => ((d as i64) >> (s & 63)) as u64,
        op::NEG => (d as i64).wrapping_neg() as u64,
        op::MOV => match i.off {
            8 => s as i8 as i64 as u64,
            16 => s as i16 as i64 as u64,
            32 => s as i32 as i64 as u64,
            _ => s,
        },
        // ALU64|END: unconditional byte swap.
        _ => match i.imm {
            16 => (d as u16).swap_bytes() as u64,
            32 => (d as u32).swap_bytes() as u64,
            _ => d.swap_bytes(),
        },
    }
}

#[inline]
fn alu32(i: Insn, d64: u64, s: u32) -> u64 {
    let d = d64 as u32;
    let r = match i.code & 0xf0 {
        op::ADD => d.wrapping_add(s),
        op::SUB => d.wrapping_sub(s),
        op::MUL => d.wrapping_mul(s),
        op::DIV if i.off == 1 => {
            if s == 0 {
                0
            } else {
                (d as i32).wrapping_div(s as i32) as u32
            }
        }
        op::DIV => d.checked_div(s).unwrap_or(0),
        op::MOD if i.off == 1 => {
            if s == 0 {
                d
            } else {
                (d as i32).wrapping_rem(s as i32) as u32
            }
        }
        op::MOD => d.checked_rem(s).unwrap_or(d),
        op::OR => d | s,
        op::AND => d & s,
        op::XOR => d ^ s,
        op::LSH => d << (s & 31),
        op::RSH => d >> (s & 31),
        op::ARSH => ((d as i32) >> (s & 31)) as u32,
        op::NEG => (d as i32).wrapping_neg() as u32,
        op::MOV => match i.off {
            8 => s as i8 as i32 as u32,
            16 => s as i16 as i32 as u32,
            _ => s,
        },
        // ALU|END: conversion to little endian (a truncation on this host) or big endian.
        _ => {
            return if i.code & op::TO_BE != 0 {
                match i.imm {
                    16 => (d64 as u16).swap_bytes() as u64,
                    32 => (d64 as u32).swap_bytes() as u64,
                    _ => d64.swap_bytes(),
                }
            } else {
                match i.imm {
                    16 => d64 as u16 as u64,
                    32 => d64 as u32 as u64,
                    _ => d64,
                }
            }
        }
    };
    r as u64
}

#[inline]
fn cond64(code: u8, a: u64, b: u64) -> bool {
    match code & 0xf0 {
        op::JEQ => a == b,
        op::JNE => a != b,
        op::JGT => a > b,
        op::JGE => a >= b,
        op::JLT => a < b,
        op::JLE => a <= b,
        op::JSET => a & b != 0,
        op::JSGT => (a as i64) > (b as i64),
        op::JSGE => (a as i64) >= (b as i64),
        op::JSLT => (a as i64) < (b as i64),
        _ => (a as i64) <= (b as i64),
    }
}

#[inline]
fn cond32(code: u8, a: u32, b: u32) -> bool {
    match code & 0xf0 {
        op::JEQ => a == b,
        op::JNE => a != b,
        op::JGT => a > b,
        op::JGE => a >= b,
        op::JLT => a < b,
        op::JLE => a <= b,
        op::JSET => a & b != 0,
        op::JSGT => (a as i32) > (b as i32),
        op::JSGE => (a as i32) >= (b as i32),
        op::JSLT => (a as i32) < (b as i32),
        _ => (a as i32) <= (b as i32),
    }
}

#[inline]
fn sign_extend(v: u64, size: usize) -> u64 {
    match size {
        1 => v as i8 as i64 as u64,
        2 => v as i16 as i64 as u64,
        4 => v as i32 as i64 as u64,
        _ => v,
    }
}

/// # Safety
/// `[addr, addr + size)` must be readable.
#[inline]
unsafe fn load(addr: u64, size: usize) -> u64 {
    let p = addr as *const u8;
    // SAFETY: caller guarantees the range is readable; unaligned reads are allowed.
    unsafe {
        match size {
            1 => p.read() as u64,
            2 => (p as *const u16).read_unaligned() as u64,
            4 => (p as *const u32).read_unaligned() as u64,
            _ => (p as *const u64).read_unaligned(),
        }
    }
}

/// # Safety
/// `[addr, addr + size)` must be writable.
#[inline]
unsafe fn store(addr: u64, size: usize, v: u64) {
    let p = addr as *mut u8;
    // SAFETY: caller guarantees the range is writable; unaligned writes are allowed.
    unsafe {
        match size {
            1 => p.write(v as u8),
            2 => (p as *mut u16).write_unaligned(v as u16),
            4 => (p as *mut u32).write_unaligned(v as u32),
            _ => (p as *mut u64).write_unaligned(v),
        }
    }
}

/// Executes STX|ATOMIC on `addr` with real atomics (maps are shared between workers).
///
/// # Safety
/// `[addr, addr + size)` must be writable and `addr` aligned to `size` (4 or 8).
unsafe fn atomic(i: Insn, addr: u64, size: usize, reg: &mut [u64; 11]) {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
    let src = i.src as usize;
    let v = reg[src];
    let fetch = i.imm & op::FETCH != 0;
    if size == 8 {
        // SAFETY: caller guarantees validity and 8-byte alignment for the duration.
        let a = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
        let old = match i.imm {
            op::ATOMIC_XCHG => a.swap(v, SeqCst),
            op::ATOMIC_CMPXCHG => {
                let old = match a.compare_exchange(reg[0], v, SeqCst, SeqCst) {
                    Ok(o) | Err(o) => o,
                };
                reg[0] = old;
                return;
            }
            x => match x & !op::FETCH {
                op::ATOMIC_ADD => a.fetch_add(v, SeqCst),
                op::ATOMIC_OR => a.fetch_or(v, SeqCst),
                op::ATOMIC_AND => a.fetch_and(v, SeqCst),
                _ => a.fetch_xor(v, SeqCst),
            },
        };
        if fetch {
            reg[src] = old;
        }
    } else {
        // SAFETY: caller guarantees validity and 4-byte alignment for the duration.
        let a = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
        let v = v as u32;
        let old = match i.imm {
            op::ATOMIC_XCHG => a.swap(v, SeqCst),
            op::ATOMIC_CMPXCHG => {
                let old = match a.compare_exchange(reg[0] as u32, v, SeqCst, SeqCst) {
                    Ok(o) | Err(o) => o,
                };
                reg[0] = old as u64;
                return;
            }
            x => match x & !op::FETCH {
                op::ATOMIC_ADD => a.fetch_add(v, SeqCst),
                op::ATOMIC_OR => a.fetch_or(v, SeqCst),
                op::ATOMIC_AND => a.fetch_and(v, SeqCst),
                _ => a.fetch_xor(v, SeqCst),
            },
        };
        if fetch {
            reg[src] = old as u64;
        }
    }
}

#[cfg(test)]
mod tests;
