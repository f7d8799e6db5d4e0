//! The eBPF execution core: checked memory regions, the helper environment, and the
//! interpreter. Engines (this interpreter now, the JIT later) share [`Memory`],
//! [`Env`] and [`Fault`], so a program behaves the same on each.
//!
//! No I/O, no threads, no clock: helpers that need the world get it through [`Env`].

mod callback;
mod interp;
mod memory;
mod points;

pub use callback::{
    callback_entries, callback_pc, is_callback_helper, Iteration, Step, FUNC_BASE, NOT_A_CALLBACK,
};
pub use interp::{Interpreter, LoadError, RunLimits, Stack};
pub use memory::{Memory, Region, MAX_REGIONS};
pub use points::counted_calls;

/// `bpf_tail_call`'s helper id (for the fault of an environment without tail calls).
const TAIL_CALL: u32 = 12;

/// Why an invocation stopped before `exit`. Every variant names the instruction.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fault {
    #[error("instruction {pc}: {kind} access of {len} bytes at {addr:#x} outside every region")]
    OutOfBounds { pc: usize, addr: u64, len: usize, kind: AccessKind },
    #[error("instruction {pc}: run-time budget exhausted after {points} progress points")]
    Budget { pc: usize, points: u64 },
    #[error("instruction {pc}: call depth exceeds {max} frames")]
    CallDepth { pc: usize, max: usize },
    #[error("instruction {pc}: unknown helper {id}")]
    UnknownHelper { pc: usize, id: u32 },
    #[error("instruction {pc}: helper {id} failed: {reason}")]
    Helper { pc: usize, id: u32, reason: &'static str },
    #[error("instruction {pc}: legacy packet load (ld_abs/ld_ind) is not supported")]
    Unsupported { pc: usize },
    #[error("instruction {pc}: execution left the program")]
    PcOutOfRange { pc: usize },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessKind {
    Read,
    Write,
}

impl std::fmt::Display for AccessKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AccessKind::Read => "read",
            AccessKind::Write => "write",
        })
    }
}

/// How a helper call ended, when it did not simply return a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallAbort {
    /// End the whole invocation now with this r0 (the conformance suite's `unwind`).
    Exit(u64),
    /// No helper with this id exists in the environment.
    Unknown,
    /// The helper refused its arguments (a pointer outside every region, ...).
    Fault(&'static str),
    /// `bpf_tail_call` found its target (the environment keeps it): the current frame
    /// is replaced by the target program. In the entry frame (depth 0) the run ends as
    /// with `Exit(0)` and the environment runs the target next; in a bpf-to-bpf callee
    /// the engine asks [`Env::tail_call_in_subprog`] for the target's r0 and returns it
    /// to the callee's caller, as the kernel's JIT does.
    Tail,
}

/// What a program can reach beyond its registers: helpers by number.
///
/// `mem` holds the regions of this invocation; a helper must check every pointer it
/// is given against it (`Memory::slice` / `Memory::slice_mut`) and may change regions
/// (the packet region after `xdp_adjust_head`).
pub trait Env {
    fn call(&mut self, id: u32, args: [u64; 5], mem: &mut Memory) -> Result<u64, CallAbort>;

    /// The invocation spent its [`RunLimits::points`]: return `Continue(n)` to grant `n`
    /// more, `Abort` to stop it with [`Fault::Budget`]. The default aborts, so an
    /// environment without a clock bounds every run by its points alone.
    fn budget_expired(&mut self) -> BudgetVerdict {
        BudgetVerdict::Abort
    }

    /// A static call of a callback helper ([`is_callback_helper`]) at instruction `pc`
    /// with r1..r5 = `args`:
    /// fill `it` with whatever [`Env::callback_next`] needs and say what comes first.
    /// `depth` is the caller's frame depth (below `MAX_CALL_FRAMES`): callback helpers
    /// active at once have distinct depths, so memory the environment lends a callback
    /// (a map key) can be kept per depth. The engine checks r2 names a callback before
    /// the first [`Step::Call`]. The default knows no callback helper.
    fn callback_start(
        &mut self,
        _pc: usize,
        _id: u32,
        _args: [u64; 5],
        _it: &mut Iteration,
        _depth: usize,
        _mem: &mut Memory,
    ) -> Result<Step, CallAbort> {
        Err(CallAbort::Unknown)
    }

    /// A helper answered [`CallAbort::Tail`] at instruction `pc` in a bpf-to-bpf callee:
    /// run the tail call's target (and the targets it tail-calls from its entry frame)
    /// in place of the callee's frame and return the last one's r0, which the engine
    /// then returns to the callee's caller. A fault of the target is the invocation's
    /// fault. The default refuses (an environment without tail calls never answers
    /// `Tail`).
    fn tail_call_in_subprog(&mut self, pc: usize, _mem: &mut Memory) -> Result<u64, Fault> {
        Err(Fault::Helper { pc, id: TAIL_CALL, reason: "tail call from a subprogram" })
    }

    /// The callback returned `ret`: the next step of the iteration `it` (started by
    /// [`Env::callback_start`] at the same `depth`).
    fn callback_next(
        &mut self,
        _id: u32,
        _it: &mut Iteration,
        _ret: u64,
        _depth: usize,
        _mem: &mut Memory,
    ) -> Result<Step, CallAbort> {
        Err(CallAbort::Unknown)
    }
}

/// Answer of [`Env::budget_expired`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetVerdict {
    Continue(u32),
    Abort,
}

/// An environment with no helpers at all.
#[derive(Debug, Default)]
pub struct NoHelpers;

impl Env for NoHelpers {
    fn call(&mut self, _id: u32, _args: [u64; 5], _mem: &mut Memory) -> Result<u64, CallAbort> {
        Err(CallAbort::Unknown)
    }
}
