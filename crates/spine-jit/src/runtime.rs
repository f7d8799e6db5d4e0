//! The per-run context the generated code sees, and the `extern "C"` functions it calls
//! on its slow paths: helper calls through [`Env`], memory checks against [`Memory`],
//! the budget renewal, and fault recording.
//!
//! Generated code only reads the `repr(C)` fields before `frames` (at the offsets below)
//! and `mem` (passed to native helpers that take the memory), except `points`, which the
//! budget trampoline writes, and reads/writes `frames`; everything else after `frames` is
//! touched by Rust alone.

use spine_isa::MAX_CALL_FRAMES;
use spine_vm::{AccessKind, BudgetVerdict, CallAbort, Env, Fault, Iteration, Memory, Step};
use std::any::Any;
use std::ffi::c_void;
use std::mem::{offset_of, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Words saved per bpf-to-bpf frame: return-site index, r6..r9, r10.
pub(crate) const FRAME_WORDS: usize = 6;

/// A fault the generated code detects itself (passed to [`jit_fault`]).
pub(crate) const FAULT_CALL_DEPTH: u64 = 1;
pub(crate) const FAULT_MISALIGNED_ATOMIC: u64 = 2;
pub(crate) const FAULT_BAD_RETURN: u64 = 3;
/// r2 of a callback helper names no callback; the helper id is `code >> 8`.
pub(crate) const FAULT_NOT_A_CALLBACK: u64 = 4;

/// What [`callback_start`] and [`callback_next`] return: the helper call is over (r0 in
/// `cb_ret`), the callback runs with r1..r5 from `cb_args`, or the run stops (the
/// outcome recorded, `aborted` set).
pub(crate) const CB_DONE: u64 = 0;
pub(crate) const CB_CALL: u64 = 1;
pub(crate) const CB_ABORT: u64 = 2;

/// `aborted` after a helper answered `CallAbort::Tail` (the outcome, `Ok(0)`, is what the
/// run returns if the call was made in the entry frame).
pub(crate) const ABORTED_TAIL: u64 = 2;

/// `budget_expired` return value meaning "stop": no countdown is ever this large.
pub(crate) const BUDGET_ABORT: u64 = u64::MAX;

/// State of one invocation, on the Rust stack of [`crate::JitProgram::run`].
#[repr(C)]
pub(crate) struct RunCtx {
    /// Lowest byte of the [`spine_vm::Stack`] (the fast path of the bounds check).
    pub stack_base: u64,
    /// Initial r10: one past the highest stack byte.
    pub stack_top: u64,
    /// The first countdown, read once at entry; afterwards where the budget trampoline
    /// leaves each renewal's answer (the countdown itself lives in a register).
    pub points: u64,
    /// Passed to native helpers as their last argument.
    pub rt: *mut c_void,
    /// `helper_call::<E>`, monomorphised for this run's environment.
    pub helper_fn: usize,
    /// `budget_expired::<E>`.
    pub budget_fn: usize,
    /// Non-zero once a helper call ended the invocation (`outcome` or `panic` is set).
    pub aborted: u64,
    /// `callback_start::<E>` and `callback_next::<E>`.
    pub cb_start_fn: usize,
    pub cb_next_fn: usize,
    /// `tail_in_subprog::<E>`.
    pub tail_fn: usize,
    /// A callback helper's answer: r0 when done, r1..r5 for the next callback (written
    /// by `callback_start`/`callback_next` before the generated code reads them).
    pub cb_ret: MaybeUninit<u64>,
    pub cb_args: MaybeUninit<[u64; 5]>,
    /// Saved state of the bpf-to-bpf frames, indexed by call depth. Generated code
    /// writes a frame before it reads it, so it starts uninitialised (no per-run memset).
    pub frames: MaybeUninit<[[u64; FRAME_WORDS]; MAX_CALL_FRAMES]>,
    // Rust-only from here.
    pub mem: *mut Memory,
    pub env: *mut c_void,
    pub limit_points: u32,
    pub spent: u64,
    /// How the invocation ended when it did not reach `exit` normally.
    pub outcome: Option<Result<u64, Fault>>,
    pub panic: Option<Box<dyn Any + Send>>,
    /// The state of the callback helper call made at each frame depth, written by
    /// `callback_start` before `callback_next` reads it (no per-run initialisation).
    pub cb_iters: MaybeUninit<[Iteration; MAX_CALL_FRAMES]>,
}

impl RunCtx {
    /// A context for runs with an environment of type `E`: its trampolines set, no
    /// stack, memory or environment yet (each run writes those).
    #[inline(always)]
    pub(crate) fn new<E: Env>() -> RunCtx {
        RunCtx {
            stack_base: 0,
            stack_top: 0,
            points: 0,
            rt: std::ptr::null_mut(),
            helper_fn: helper_call::<E> as *const () as usize,
            budget_fn: budget_expired::<E> as *const () as usize,
            aborted: 0,
            cb_start_fn: callback_start::<E> as *const () as usize,
            cb_next_fn: callback_next::<E> as *const () as usize,
            tail_fn: tail_in_subprog::<E> as *const () as usize,
            cb_ret: MaybeUninit::uninit(),
            cb_args: MaybeUninit::uninit(),
            frames: MaybeUninit::uninit(),
            mem: std::ptr::null_mut(),
            env: std::ptr::null_mut(),
            limit_points: 0,
            spent: 0,
            outcome: None,
            panic: None,
            cb_iters: MaybeUninit::uninit(),
        }
    }
}

pub(crate) const OFF_STACK_BASE: i32 = offset_of!(RunCtx, stack_base) as i32;
pub(crate) const OFF_STACK_TOP: i32 = offset_of!(RunCtx, stack_top) as i32;
pub(crate) const OFF_POINTS: i32 = offset_of!(RunCtx, points) as i32;
pub(crate) const OFF_RT: i32 = offset_of!(RunCtx, rt) as i32;
pub(crate) const OFF_HELPER_FN: i32 = offset_of!(RunCtx, helper_fn) as i32;
pub(crate) const OFF_BUDGET_FN: i32 = offset_of!(RunCtx, budget_fn) as i32;
pub(crate) const OFF_ABORTED: i32 = offset_of!(RunCtx, aborted) as i32;
pub(crate) const OFF_FRAMES: i32 = offset_of!(RunCtx, frames) as i32;
pub(crate) const OFF_CB_START_FN: i32 = offset_of!(RunCtx, cb_start_fn) as i32;
pub(crate) const OFF_CB_NEXT_FN: i32 = offset_of!(RunCtx, cb_next_fn) as i32;
pub(crate) const OFF_TAIL_FN: i32 = offset_of!(RunCtx, tail_fn) as i32;
pub(crate) const OFF_CB_RET: i32 = offset_of!(RunCtx, cb_ret) as i32;
pub(crate) const OFF_CB_ARGS: i32 = offset_of!(RunCtx, cb_args) as i32;
/// Read by a call of a [`crate::NativeMemHelperFn`], never written by generated code.
pub(crate) const OFF_MEM: i32 = offset_of!(RunCtx, mem) as i32;

/// Signature of the entry point: `(ctx, r1..r5) -> r0`.
pub(crate) type EntryFn = unsafe extern "C" fn(*mut RunCtx, u64, u64, u64, u64, u64) -> u64;

/// Calls helper `id_pc as u32` through the environment; `id_pc >> 32` is the calling
/// instruction. On anything but a plain return it records the outcome, sets `aborted`
/// and returns 0; the generated code then leaves at once.
///
/// # Safety
/// `ctx` must be the live context of a run whose `env` is an `E` and whose `mem` is valid.
pub(crate) unsafe extern "C" fn helper_call<E: Env>(
    ctx: *mut RunCtx,
    id_pc: u64,
    r1: u64,
    r2: u64,
    r3: u64,
    r4: u64,
    r5: u64,
) -> u64 {
    // SAFETY: the caller guarantees `ctx` is live; no Rust reference to it exists while
    // generated code runs, so this is the only one.
    let ctx = unsafe { &mut *ctx };
    let id = id_pc as u32;
    let pc = (id_pc >> 32) as usize;
    // SAFETY: `env` and `mem` come from the `&mut E` / `&mut Memory` that `run` holds
    // for the whole invocation and does not use while generated code runs.
    let (env, mem) = unsafe { (&mut *ctx.env.cast::<E>(), &mut *ctx.mem) };
    match catch_unwind(AssertUnwindSafe(|| env.call(id, [r1, r2, r3, r4, r5], mem))) {
        Ok(Ok(v)) => v,
        Ok(Err(a)) => {
            record_abort(ctx, pc, id, Ok(a));
            0
        }
        Err(payload) => {
            record_abort(ctx, pc, id, Err(payload));
            0
        }
    }
}

/// Records a `CallAbort` (or a panic) of helper `id` at `pc`; the run stops.
fn record_abort(ctx: &mut RunCtx, pc: usize, id: u32, r: std::thread::Result<CallAbort>) {
    match r {
        Ok(CallAbort::Exit(v)) => ctx.outcome = Some(Ok(v)),
        Ok(CallAbort::Tail) => {
            ctx.outcome = Some(Ok(0));
            ctx.aborted = ABORTED_TAIL;
            return;
        }
        Ok(CallAbort::Unknown) => ctx.outcome = Some(Err(Fault::UnknownHelper { pc, id })),
        Ok(CallAbort::Fault(reason)) => ctx.outcome = Some(Err(Fault::Helper { pc, id, reason })),
        Err(payload) => ctx.panic = Some(payload),
    }
    ctx.aborted = 1;
}

fn callback_step(
    ctx: &mut RunCtx,
    pc: usize,
    id: u32,
    r: std::thread::Result<Result<Step, CallAbort>>,
) -> u64 {
    match r {
        Ok(Ok(Step::Done(v))) => {
            ctx.cb_ret.write(v);
            CB_DONE
        }
        Ok(Ok(Step::Call(a))) => {
            ctx.cb_args.write(a);
            CB_CALL
        }
        Ok(Err(a)) => {
            record_abort(ctx, pc, id, Ok(a));
            CB_ABORT
        }
        Err(payload) => {
            record_abort(ctx, pc, id, Err(payload));
            CB_ABORT
        }
    }
}

/// A static call of callback helper `id_pc as u32` at instruction `id_pc >> 32`, made
/// at frame `depth`: [`Env::callback_start`], its answer as a `CB_*` code.
///
/// # Safety
/// As for [`helper_call`]; `depth` is below `MAX_CALL_FRAMES`.
pub(crate) unsafe extern "C" fn callback_start<E: Env>(
    ctx: *mut RunCtx,
    id_pc: u64,
    depth: u64,
    r1: u64,
    r2: u64,
    r3: u64,
    r4: u64,
    r5: u64,
) -> u64 {
    // SAFETY: as in `helper_call`.
    let ctx = unsafe { &mut *ctx };
    let (id, pc, depth) = (id_pc as u32, (id_pc >> 32) as usize, depth as usize);
    // SAFETY: as in `helper_call`.
    let (env, mem) = unsafe { (&mut *ctx.env.cast::<E>(), &mut *ctx.mem) };
    // SAFETY: `depth < MAX_CALL_FRAMES` (the caller's contract); the slot is written
    // whole here before `callback_next` reads it.
    let it = unsafe { &mut (*ctx.cb_iters.as_mut_ptr())[depth] };
    *it = Iteration::default();
    let r = catch_unwind(AssertUnwindSafe(|| {
        env.callback_start(pc, id, [r1, r2, r3, r4, r5], it, depth, mem)
    }));
    callback_step(ctx, pc, id, r)
}

/// The callback of the callback helper call at frame `depth` returned `r0`:
/// [`Env::callback_next`], its answer as a `CB_*` code.
///
/// # Safety
/// As for [`helper_call`]; [`callback_start`] ran for this `depth` and answered
/// `CB_CALL`.
pub(crate) unsafe extern "C" fn callback_next<E: Env>(
    ctx: *mut RunCtx,
    id_pc: u64,
    depth: u64,
    r0: u64,
) -> u64 {
    // SAFETY: as in `helper_call`.
    let ctx = unsafe { &mut *ctx };
    let (id, pc, depth) = (id_pc as u32, (id_pc >> 32) as usize, depth as usize);
    // SAFETY: as in `helper_call`.
    let (env, mem) = unsafe { (&mut *ctx.env.cast::<E>(), &mut *ctx.mem) };
    // SAFETY: `callback_start` initialised this slot (the caller's contract).
    let it = unsafe { &mut (*ctx.cb_iters.as_mut_ptr())[depth] };
    let r = catch_unwind(AssertUnwindSafe(|| env.callback_next(id, it, r0, depth, mem)));
    callback_step(ctx, pc, id, r)
}

/// A helper at instruction `pc` answered `CallAbort::Tail` in a bpf-to-bpf callee:
/// [`Env::tail_call_in_subprog`] runs the target; returns its r0 (the run goes on,
/// `aborted` cleared) or records its fault (`aborted` set to 1).
///
/// # Safety
/// As for [`helper_call`].
pub(crate) unsafe extern "C" fn tail_in_subprog<E: Env>(ctx: *mut RunCtx, pc: u64) -> u64 {
    // SAFETY: as in `helper_call`.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as in `helper_call`.
    let (env, mem) = unsafe { (&mut *ctx.env.cast::<E>(), &mut *ctx.mem) };
    ctx.outcome = None;
    ctx.aborted = 0;
    match catch_unwind(AssertUnwindSafe(|| env.tail_call_in_subprog(pc as usize, mem))) {
        Ok(Ok(v)) => v,
        Ok(Err(fault)) => {
            ctx.outcome = Some(Err(fault));
            ctx.aborted = 1;
            0
        }
        Err(payload) => {
            ctx.panic = Some(payload);
            ctx.aborted = 1;
            0
        }
    }
}

/// The countdown reached zero at a progress point of instruction `pc`: asks the
/// environment for more, exactly as the interpreter does. Returns the new countdown,
/// or [`BUDGET_ABORT`] after recording [`Fault::Budget`].
///
/// # Safety
/// As for [`helper_call`].
pub(crate) unsafe extern "C" fn budget_expired<E: Env>(ctx: *mut RunCtx, pc: u64) -> u64 {
    // SAFETY: as in `helper_call`.
    let ctx = unsafe { &mut *ctx };
    // SAFETY: as in `helper_call`.
    let env = unsafe { &mut *ctx.env.cast::<E>() };
    ctx.spent += u64::from(ctx.limit_points);
    match catch_unwind(AssertUnwindSafe(|| env.budget_expired())) {
        Ok(BudgetVerdict::Continue(n)) if n > 0 => {
            ctx.limit_points = n;
            u64::from(n)
        }
        Ok(_) => {
            ctx.outcome = Some(Err(Fault::Budget { pc: pc as usize, points: ctx.spent }));
            BUDGET_ABORT
        }
        Err(payload) => {
            ctx.panic = Some(payload);
            BUDGET_ABORT
        }
    }
}

/// Slow path of an unproven access: checks `[addr, addr + len)` against every region.
/// `meta` is `len | write << 8`. Returns 1 if allowed, else records
/// [`Fault::OutOfBounds`] and returns 0.
///
/// # Safety
/// `ctx` must be the live context of a run with a valid `mem`.
pub(crate) unsafe extern "C" fn mem_check(ctx: *mut RunCtx, addr: u64, pc: u64, meta: u64) -> u64 {
    // SAFETY: as in `helper_call`.
    let ctx = unsafe { &mut *ctx };
    let len = (meta & 0xff) as usize;
    let kind = if meta & 0x100 != 0 { AccessKind::Write } else { AccessKind::Read };
    // SAFETY: `mem` is valid for the run (see `helper_call`); only read here.
    let mem = unsafe { &*ctx.mem };
    if mem.check(addr, len, kind) {
        return 1;
    }
    ctx.outcome = Some(Err(Fault::OutOfBounds { pc: pc as usize, addr, len, kind }));
    0
}

/// Records a fault the generated code detected itself (`code` is a `FAULT_*`).
///
/// # Safety
/// `ctx` must be the live context of a run.
pub(crate) unsafe extern "C" fn jit_fault(ctx: *mut RunCtx, code: u64, pc: u64) {
    // SAFETY: as in `helper_call`.
    let ctx = unsafe { &mut *ctx };
    let pc = pc as usize;
    ctx.outcome = Some(Err(match code {
        FAULT_CALL_DEPTH => Fault::CallDepth { pc, max: MAX_CALL_FRAMES },
        FAULT_MISALIGNED_ATOMIC => Fault::Helper { pc, id: 0, reason: "misaligned atomic" },
        c if c & 0xff == FAULT_NOT_A_CALLBACK => {
            Fault::Helper { pc, id: (c >> 8) as u32, reason: spine_vm::NOT_A_CALLBACK }
        }
        _ => Fault::PcOutOfRange { pc },
    }));
}
