//! Helpers that call back into the program: the kernel's `bpf_loop` (181) and
//! `bpf_for_each_map_elem` (164), both with the callback in r2.
//!
//! The engine owns the control flow and the environment the arithmetic: at such a call
//! the engine asks [`Env::callback_start`](crate::Env::callback_start) what to do, and
//! after each return of the callback [`Env::callback_next`](crate::Env::callback_next),
//! passing the callback's r0. Each answer is a [`Step`]: call the callback again with
//! these r1..r5, or finish the helper call with this r0. The callback runs as a
//! bpf-to-bpf call (a new frame, r10 one frame down, r6-r9 restored on return), so the
//! frame limit applies, and every invocation of the callback is a progress point of the
//! calling instruction: the watchdog bounds the total work of any loop, nested or not.
//!
//! The iteration's state lives in an [`Iteration`] the engine keeps in the caller's
//! frame, so nesting needs no allocation and the environment keeps nothing between
//! calls.

use spine_isa::{op, Insn};

/// `bpf_for_each_map_elem`.
pub const FOR_EACH_MAP_ELEM: u32 = 164;
/// `bpf_loop`.
pub const LOOP: u32 = 181;

/// True for the helpers the engines run callbacks for (static calls only: a `callx` of
/// these ids goes to [`Env::call`](crate::Env::call) like any other).
#[inline]
pub const fn is_callback_helper(id: u32) -> bool {
    id == FOR_EACH_MAP_ELEM || id == LOOP
}

/// What `lddw rX, PSEUDO_FUNC, f` loads: `FUNC_BASE + pc` of the function's first
/// instruction. No region covers it; only the callback helpers decode it, and only to a
/// pc some `lddw PSEUDO_FUNC` of the program names.
pub const FUNC_BASE: u64 = 0xfffc_0000_0000_0000;

/// The iteration state of one callback helper call, kept by the engine between the
/// environment's steps (opaque to the engine).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Iteration {
    pub words: [u64; 6],
}

/// The environment's answer at a callback helper call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Run the callback (once more) with r1..r5 = these.
    Call([u64; 5]),
    /// The helper call is over and returns this r0.
    Done(u64),
}

/// The pcs that `lddw PSEUDO_FUNC` names (callback entries), sorted.
/// `insns` must have passed [`spine_isa::validate`].
pub fn callback_entries(insns: &[Insn]) -> Vec<usize> {
    let mut v: Vec<usize> = insns
        .iter()
        .enumerate()
        .filter(|(_, i)| i.is_lddw() && i.src == op::PSEUDO_FUNC)
        .map(|(pc, i)| (pc as i64 + 1 + i64::from(i.imm)) as usize)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The callback entry a function value names, if it is one of `entries`.
#[inline]
pub fn callback_pc(value: u64, entries: &[usize]) -> Option<usize> {
    let pc = usize::try_from(value.checked_sub(FUNC_BASE)?).ok()?;
    entries.binary_search(&pc).ok().map(|_| pc)
}

/// The reason of the fault when r2 of a callback helper names no callback.
pub const NOT_A_CALLBACK: &str = "argument 2 is not a callback";
