//! eBPF to x86-64 JIT on Cranelift: a second engine with exactly the interpreter's
//! semantics (same results, same faults with the same instruction numbers, same
//! progress-point budget), several times faster.
//!
//! # Design
//!
//! - **One Cranelift function per program.** BPF registers r0-r10 are Cranelift
//!   variables. bpf-to-bpf calls keep the interpreter's model: a call saves r6-r9, r10
//!   and a return-site index in a frame array of the run context and jumps; `exit` at
//!   depth > 0 pops and dispatches through a jump table. The depth limit (8 frames),
//!   r10 moving down 512 bytes per frame and every fault pc follow by construction.
//! - **Memory.** An access the verifier proved ([`JitOptions::proven`]) is a plain
//!   machine load/store, and so is `r10 + off` inside the current frame while r10 can
//!   only be a frame pointer (checked statically). Any other access is checked: inline
//!   when it falls inside the stack, else through `Memory::check` in an `extern "C"` slow
//!   path, which records [`Fault::OutOfBounds`] exactly as the interpreter would.
//! - **Helpers.** By default one `extern "C"` trampoline per [`Env`] type calls
//!   [`Env::call`]; `CallAbort` outcomes are recorded and the code leaves through a
//!   shared abort path. Two faster paths, for the runtime: [`NativeHelper`] (a direct
//!   call with a per-run runtime pointer, for helpers that cannot fail) and
//!   [`InlineArrayLookup`] (an array-map lookup expanded inline when the map handle in
//!   r1 is a constant loaded in the same basic block and the call is proven).
//! - **Budget.** With [`JitOptions::budget`], a countdown variable (a register where
//!   one is free) is decremented at each progress point (taken backward jump, counted
//!   bpf-to-bpf call, callback invocation); at zero a `preserve_all` trampoline calls
//!   the `extern "C"` slow path that asks [`Env::budget_expired`], reproducing
//!   [`Fault::Budget`] exactly, without clobbering any register of the program.
//! - **W^X.** Code is copied into fresh pages that are then made read+execute, never
//!   writable and executable at once, and unmapped when the [`JitProgram`] drops.
//!
//! Compilation allocates; running allocates nothing.
//!
//! Unsafe code is confined to `code_mem` (the mapping), `runtime` (the functions the
//! generated code calls) and the entry into the generated code in [`JitProgram`].
#![deny(unsafe_code)]

mod backend;
#[expect(unsafe_code, reason = "mmap/mprotect/munmap of the executable pages")]
mod code_mem;
#[expect(unsafe_code, reason = "extern \"C\" functions that receive raw run-context pointers")]
mod runtime;
mod translate;

use spine_isa::Insn;
use spine_vm::{Env, Fault, Interpreter, LoadError, Memory, Region, RunLimits, Stack};
use std::ffi::c_void;
use std::marker::PhantomData;

/// A run context kept between runs, for a caller that runs code many times with one
/// environment type (a per-worker runner): the trampolines' addresses are written once,
/// when it is made, and each [`JitProgram::run_in`] writes only what a run changes (the
/// stack, the budget, the memory and environment pointers, the abort flag). Used by one
/// run at a time; a run nested in another (a tail call's target run from a callee) has
/// its own context.
pub struct RunSlot<E> {
    ctx: Box<runtime::RunCtx>,
    _env: PhantomData<fn(&mut E)>,
}

// SAFETY: the context's pointers (memory, environment, runtime) are written by each run
// before the generated code starts and only dereferenced while that run lasts; between
// runs they are stale and never used, so the slot may move to another thread.
#[expect(unsafe_code, reason = "Send for a struct of pointers used only during a run")]
unsafe impl<E> Send for RunSlot<E> {}

impl<E> std::fmt::Debug for RunSlot<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunSlot").finish_non_exhaustive()
    }
}

impl<E: Env> Default for RunSlot<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Env> RunSlot<E> {
    pub fn new() -> Self {
        RunSlot { ctx: Box::new(runtime::RunCtx::new::<E>()), _env: PhantomData }
    }

    /// Binds the slot to the stack of the runs that follow (a burst of packets on one
    /// runner): [`JitProgram::run_bound`] then writes no stack bounds. The bounds are
    /// addresses the generated code checks its frame accesses against, as the regions
    /// of a [`Memory`] are; nothing dereferences them as a Rust reference.
    #[inline(always)]
    pub fn bind(&mut self, stack: &mut Stack) {
        let stack_top = stack.as_mut_ptr() as u64 + stack.len_bytes() as u64;
        let ctx = &mut *self.ctx;
        ctx.stack_base = stack_top - Stack::BYTES as u64;
        ctx.stack_top = stack_top;
    }
}

/// A helper implemented as a native function, called directly instead of through
/// [`Env::call`]: `f(r1, r2, r3, r4, r5, rt) -> r0`, where `rt` is the pointer given to
/// [`JitProgram::run_with_runtime`] (null under [`JitProgram::run`]).
///
/// A native helper cannot abort the program, and `callx` still goes through the
/// [`Env`]; it must therefore compute exactly what the run's `Env` computes for `id`.
#[derive(Debug, Clone, Copy)]
pub struct NativeHelper {
    id: u32,
    f: NativeFn,
}

/// Native helper entry point (System V ABI on x86-64).
pub type NativeHelperFn = unsafe extern "C" fn(u64, u64, u64, u64, u64, *mut c_void) -> u64;

/// Native helper entry point that also gets the run's [`Memory`] (the one `Env::call`
/// would get), for helpers that move a region (`bpf_xdp_adjust_head`):
/// `f(r1, r2, r3, r4, r5, rt, mem) -> r0`.
pub type NativeMemHelperFn =
    unsafe extern "C" fn(u64, u64, u64, u64, u64, *mut c_void, *mut Memory) -> u64;

#[derive(Debug, Clone, Copy)]
pub(crate) enum NativeFn {
    Plain(NativeHelperFn),
    WithMemory(NativeMemHelperFn),
}

impl NativeHelper {
    /// Registers `f` for static calls of helper `id`.
    ///
    /// # Safety
    /// `f` runs with whatever arguments the (possibly unverified) program passes, and with
    /// the `rt` of each run: it must be sound for all of them, checking any pointer
    /// argument itself, and it must not unwind.
    #[expect(unsafe_code, reason = "registering native code is a promise the JIT cannot check")]
    pub unsafe fn new(id: u32, f: NativeHelperFn) -> Self {
        NativeHelper { id, f: NativeFn::Plain(f) }
    }

    /// Registers `f`, which also receives the run's [`Memory`], for static calls of
    /// helper `id`. The memory pointer is the one the run was given, valid for the call
    /// and referenced by nothing else while `f` runs.
    ///
    /// # Safety
    /// As [`NativeHelper::new`].
    #[expect(unsafe_code, reason = "registering native code is a promise the JIT cannot check")]
    pub unsafe fn with_memory(id: u32, f: NativeMemHelperFn) -> Self {
        NativeHelper { id, f: NativeFn::WithMemory(f) }
    }

    pub fn id(&self) -> u32 {
        self.id
    }
}

/// Inline expansion of an array-map lookup, the kernel's `bpf_map_lookup_elem` on an
/// array: `r0 = key < max_entries ? base + key * value_size : 0`, `key = *(u32 *)r2`
/// (plus `cpu * cpu_stride` for a per-CPU array).
///
/// Applied to a static call of `helper_id` only when r1 provably holds `map_handle`
/// (an `lddw`/`mov` of that constant earlier in the same basic block) and
/// [`JitOptions::proven`] marks the call instruction (the verifier proved the key
/// pointer). Elsewhere the call goes through the usual path, so results never differ.
/// The value memory must be a registered region (or proven) for the program to use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineArrayLookup {
    pub helper_id: u32,
    pub map_handle: u64,
    pub base: u64,
    pub value_size: u32,
    pub max_entries: u32,
    /// For a per-CPU array: each worker's copy lies `cpu_stride` further, the worker's
    /// CPU index being the `u64` at `cpu_offset` in the runtime pointer of the run.
    pub per_cpu: Option<PerCpuLookup>,
}

/// Where a per-CPU array's copies lie; see [`InlineArrayLookup::per_cpu`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PerCpuLookup {
    pub cpu_stride: u64,
    pub cpu_offset: i32,
}

/// How to compile a program.
#[derive(Debug, Clone)]
pub struct JitOptions {
    /// Per instruction: the verifier proved this load/store (and, for a helper call, its
    /// memory arguments) in bounds, so no runtime check. `None` = check every access
    /// against `Memory` (like the interpreter), for unverified code.
    pub proven: Option<Vec<bool>>,
    /// Emit the progress-point countdown (every taken back-edge and every bpf-to-bpf
    /// call), calling `Env::budget_expired` when it reaches zero: exactly the
    /// interpreter's `RunLimits` semantics. Without it `limits` is ignored and only a
    /// verifier's termination proof bounds the run.
    pub budget: bool,
    /// Helpers called natively by static id; the first entry for an id wins.
    pub native_helpers: Vec<NativeHelper>,
    /// Array-map lookups to expand inline where the map is known at compile time.
    pub inline_array_lookups: Vec<InlineArrayLookup>,
}

impl Default for JitOptions {
    /// Unverified code: every access checked, budget on, all helpers through `Env`.
    fn default() -> Self {
        JitOptions {
            proven: None,
            budget: true,
            native_helpers: Vec::new(),
            inline_array_lookups: Vec::new(),
        }
    }
}

/// Why a program cannot be compiled.
#[derive(Debug, thiserror::Error)]
pub enum JitError {
    /// The interpreter would refuse it too (structure, unrelocated map reference,
    /// legacy packet load): the same load-time refusals on both engines.
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("`proven` has {got} entries for a program of {expected} instructions")]
    ProvenLength { expected: usize, got: usize },
    #[error("program of {0} instructions is too large for the JIT")]
    TooLarge(usize),
    #[error("host not supported by the code generator: {0}")]
    UnsupportedHost(&'static str),
    /// Cranelift failed; a JIT bug or a host limit, never a property of the program.
    #[error("code generation failed")]
    Codegen(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The generated code would need relocating (a JIT bug: it must be self-contained).
    #[error("generated code needs {0} relocation(s)")]
    Relocations(usize),
    #[error("cannot map executable memory: {0}")]
    CodeMemory(#[from] std::io::Error),
}

/// Largest program accepted: pcs must fit the 32 bits the helper trampoline gets.
const MAX_INSNS: usize = 1 << 24;

/// Compiles a program. Refuses exactly what [`Interpreter::new`] refuses.
pub fn compile(insns: &[Insn], opts: &JitOptions) -> Result<JitProgram, JitError> {
    Interpreter::new(insns.to_vec())?;
    if insns.len() > MAX_INSNS {
        return Err(JitError::TooLarge(insns.len()));
    }
    if let Some(p) = &opts.proven {
        if p.len() != insns.len() {
            return Err(JitError::ProvenLength { expected: insns.len(), got: p.len() });
        }
    }
    let code = backend::compile(insns, opts)?;
    let code = code_mem::CodeMem::new(&code)?;
    Ok(JitProgram { code })
}

/// How a run in a kept context ended when a helper, the budget or a check recorded
/// something: takes both (the next run starts with neither) before anything unwinds.
#[cold]
#[inline(never)]
fn ended(ctx: &mut runtime::RunCtx, r0: u64) -> Result<u64, Fault> {
    let outcome = ctx.outcome.take();
    if let Some(payload) = ctx.panic.take() {
        std::panic::resume_unwind(payload);
    }
    outcome.unwrap_or(Ok(r0))
}

/// A compiled program, ready to run any number of times (shared between threads).
#[derive(Debug)]
pub struct JitProgram {
    code: code_mem::CodeMem,
}

impl JitProgram {
    /// Runs the program with r1..r5 = `args` and returns r0 at the final `exit`.
    /// Same contract as [`Interpreter::run`]: the stack is registered as a region for
    /// the duration of the call; every other region must already be in `mem`.
    #[expect(unsafe_code, reason = "forwards to run_with_runtime with a null runtime pointer")]
    pub fn run<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        // SAFETY: native helpers are registered under the contract that they accept the
        // null runtime pointer of plain `run`.
        unsafe { self.run_with_runtime(args, mem, stack, env, limits, std::ptr::null_mut()) }
    }

    /// As [`JitProgram::run`], passing `rt` to every [`NativeHelper`] call.
    ///
    /// # Safety
    /// `rt` must be what the registered native helpers expect, valid for the whole call.
    #[expect(unsafe_code, reason = "forwards to enter with an explicit runtime pointer")]
    pub unsafe fn run_with_runtime<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
        rt: *mut c_void,
    ) -> Result<u64, Fault> {
        // SAFETY: the caller's contract.
        unsafe { self.enter(args, mem, stack, env, limits, Some(rt), true) }
    }

    /// As [`JitProgram::run`], passing `env` itself (as `*mut E`) to every
    /// [`NativeHelper`] call, so native helpers and `Env::call` share one environment.
    ///
    /// # Safety
    /// The registered native helpers must expect `rt` to be a `*mut E`.
    #[expect(unsafe_code, reason = "forwards to enter with the environment as runtime pointer")]
    #[inline]
    pub unsafe fn run_with_env_runtime<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        // SAFETY: the caller's contract.
        unsafe { self.enter(args, mem, stack, env, limits, None, true) }
    }

    /// As [`JitProgram::run_with_env_runtime`], for a caller that keeps `stack` registered
    /// in `mem` for as long as it runs this code (a per-worker runner): the stack region
    /// is not added and removed on every run. Regions helpers add during the run are
    /// still removed before it returns.
    ///
    /// # Safety
    /// As for [`JitProgram::run_with_env_runtime`]; and `mem` holds a region covering
    /// exactly `stack`.
    #[expect(unsafe_code, reason = "forwards to enter with the environment as runtime pointer")]
    #[inline]
    pub unsafe fn run_with_env_runtime_on_registered_stack<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        // SAFETY: the caller's contract.
        unsafe { self.enter(args, mem, stack, env, limits, None, false) }
    }

    /// As [`JitProgram::run_with_env_runtime`], with r10 starting at `stack_top`, for a
    /// run nested in another one (a tail call's target run from a bpf-to-bpf callee):
    /// nothing is registered. Regions helpers add during the run are removed before it
    /// returns.
    ///
    /// # Safety
    /// As for [`JitProgram::run_with_env_runtime`]; and `[stack_top - Stack::BYTES,
    /// stack_top)` lies inside a writable region of `mem` that nothing else uses while
    /// this runs (a window of a registered [`Stack`], [`Stack::window_top`]).
    #[expect(unsafe_code, reason = "enters the generated code on a caller-provided stack")]
    pub unsafe fn run_with_env_runtime_on_registered_window<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack_top: u64,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        let base_len = mem.len();
        // SAFETY: the caller's contract.
        unsafe { self.enter_at(args, mem, stack_top, env, limits, None, base_len) }
    }

    /// As [`JitProgram::run_with_env_runtime_on_registered_stack`], in a run context kept
    /// between runs (see [`RunSlot`]): the same run, with less set up per call.
    ///
    /// # Safety
    /// As for [`JitProgram::run_with_env_runtime_on_registered_stack`].
    #[expect(unsafe_code, reason = "enters the generated code in a kept run context")]
    #[inline]
    pub unsafe fn run_in<E: Env>(
        &self,
        slot: &mut RunSlot<E>,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        slot.bind(stack);
        let base_len = mem.len();
        let env_ptr: *mut c_void = (env as *mut E).cast();
        let ctx = &mut *slot.ctx;
        // What a run may have changed, and the pointers of this call; `outcome` and
        // `panic` are `None` (every run takes them before it returns).
        ctx.rt = env_ptr;
        ctx.env = env_ptr;
        ctx.mem = mem as *mut Memory;
        ctx.points = u64::from(limits.points);
        ctx.limit_points = limits.points;
        ctx.spent = 0;
        ctx.aborted = 0;
        // SAFETY: as in `enter_at`.
        let entry: runtime::EntryFn = unsafe { std::mem::transmute(self.code.as_ptr()) };
        // SAFETY: as in `enter_at`; the slot's trampolines are `E`'s (its type says so).
        let r0 = unsafe { entry(ctx, args[0], args[1], args[2], args[3], args[4]) };
        if mem.len() > base_len {
            mem.truncate(base_len);
        }
        // The common end: `exit` reached, nothing recorded. Two compares, no store; the
        // rest (taking the outcome apart, resuming a panic) is out of line.
        if ctx.outcome.is_none() && ctx.panic.is_none() {
            return Ok(r0);
        }
        ended(ctx, r0)
    }

    /// As [`JitProgram::run_in`] with r1 = `r1` and r2..r5 = 0 (a packet program's
    /// entry; no argument array goes through memory), in a slot [`RunSlot::bind`] bound
    /// to this run's stack: the stack bounds are not written again. Every run is still
    /// an invocation of its own (its own countdown from `limits`, nothing recorded by
    /// an earlier run, the memory and environment pointers of this call).
    ///
    /// # Safety
    /// As for [`JitProgram::run_in`], and `slot` was last bound with [`RunSlot::bind`]
    /// to the stack that `mem` holds a region of (exactly that stack), which has not
    /// moved since.
    #[expect(unsafe_code, reason = "enters the generated code in a bound run context")]
    #[inline(always)]
    pub unsafe fn run_bound<E: Env>(
        &self,
        slot: &mut RunSlot<E>,
        r1: u64,
        mem: &mut Memory,
        env: &mut E,
        limits: RunLimits,
    ) -> Result<u64, Fault> {
        let base_len = mem.len();
        let env_ptr: *mut c_void = (env as *mut E).cast();
        let ctx = &mut *slot.ctx;
        ctx.rt = env_ptr;
        ctx.env = env_ptr;
        ctx.mem = mem as *mut Memory;
        ctx.points = u64::from(limits.points);
        ctx.limit_points = limits.points;
        ctx.spent = 0;
        ctx.aborted = 0;
        // SAFETY: as in `enter_at`.
        let entry: runtime::EntryFn = unsafe { std::mem::transmute(self.code.as_ptr()) };
        // SAFETY: as in `enter_at`; the slot's trampolines are `E`'s (its type says so),
        // its stack bounds this run's stack's (the caller's contract).
        let r0 = unsafe { entry(ctx, r1, 0, 0, 0, 0) };
        if mem.len() > base_len {
            mem.truncate(base_len);
        }
        // The common end: `exit` reached, nothing recorded. Two compares, no store; the
        // rest (taking the outcome apart, resuming a panic) is out of line.
        if ctx.outcome.is_none() && ctx.panic.is_none() {
            return Ok(r0);
        }
        ended(ctx, r0)
    }

    /// Runs the code; `rt: None` passes the environment pointer as the runtime pointer
    /// (derived once, so the trampoline's and the native helpers' uses never conflict).
    ///
    /// # Safety
    /// `rt` (or `env`, when `None`) must be what the registered native helpers expect;
    /// without `push_stack`, `mem` must already cover `stack`.
    #[expect(unsafe_code, reason = "registers the stack region and enters the generated code")]
    #[expect(clippy::too_many_arguments, reason = "the public entry points' shared body")]
    #[inline]
    unsafe fn enter<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack: &mut Stack,
        env: &mut E,
        limits: RunLimits,
        rt: Option<*mut c_void>,
        push_stack: bool,
    ) -> Result<u64, Fault> {
        let stack_base = stack.as_mut_ptr() as u64;
        let len = stack.len_bytes() as u64;
        let stack_top = stack_base + len;
        let base_len = mem.len();
        let stack_region = Region { start: stack_base, len, writable: true };
        // SAFETY: `stack` is borrowed mutably for the whole call and the region is removed
        // before returning (by `enter_at`), so the memory stays valid and unaliased while
        // registered.
        if push_stack && unsafe { mem.push(stack_region) }.is_none() {
            return Err(Fault::Helper { pc: 0, id: 0, reason: "no free region for the stack" });
        }
        // SAFETY: the caller's contract; the top window of `stack` is registered now.
        unsafe { self.enter_at(args, mem, stack_top, env, limits, rt, base_len) }
    }

    /// Runs the code with r10 starting at `stack_top`; `mem` is cut back to `base_len`
    /// regions when it returns or unwinds.
    ///
    /// # Safety
    /// As for [`JitProgram::enter`]; `[stack_top - Stack::BYTES, stack_top)` is inside a
    /// writable region of `mem` nothing else uses while this runs.
    #[expect(unsafe_code, reason = "enters the generated code")]
    #[expect(clippy::too_many_arguments, reason = "the entry points' shared body")]
    #[inline]
    unsafe fn enter_at<E: Env>(
        &self,
        args: [u64; 5],
        mem: &mut Memory,
        stack_top: u64,
        env: &mut E,
        limits: RunLimits,
        rt: Option<*mut c_void>,
        base_len: usize,
    ) -> Result<u64, Fault> {
        let env_ptr: *mut c_void = (env as *mut E).cast();
        let rt = rt.unwrap_or(env_ptr);
        // The window the run's frames lie in; the inline stack check compares against it.
        let stack_base = stack_top - Stack::BYTES as u64;
        // A literal, not `RunCtx::new` and field writes: that compiles to a memset of
        // the whole context (its uninitialised frames included) on every run.
        let mut ctx = runtime::RunCtx {
            stack_base,
            stack_top,
            points: u64::from(limits.points),
            rt,
            helper_fn: runtime::helper_call::<E> as *const () as usize,
            budget_fn: runtime::budget_expired::<E> as *const () as usize,
            aborted: 0,
            cb_start_fn: runtime::callback_start::<E> as *const () as usize,
            cb_next_fn: runtime::callback_next::<E> as *const () as usize,
            tail_fn: runtime::tail_in_subprog::<E> as *const () as usize,
            cb_ret: std::mem::MaybeUninit::uninit(),
            cb_args: std::mem::MaybeUninit::uninit(),
            frames: std::mem::MaybeUninit::uninit(),
            mem: mem as *mut Memory,
            env: env_ptr,
            limit_points: limits.points,
            spent: 0,
            outcome: None,
            panic: None,
            cb_iters: std::mem::MaybeUninit::uninit(),
        };
        // SAFETY: the code was generated by `translate` with `entry_signature`, i.e.
        // this ABI, and stays mapped while `self` is borrowed.
        let entry: runtime::EntryFn = unsafe { std::mem::transmute(self.code.as_ptr()) };
        // SAFETY: the generated code only touches `ctx`, the regions of `mem` (checked,
        // or proven by the verifier when `proven` was given) and the stack; `mem`, `env`
        // and `stack` are not used by this function until it returns.
        let r0 = unsafe { entry(&mut ctx, args[0], args[1], args[2], args[3], args[4]) };
        mem.truncate(base_len);
        if let Some(payload) = ctx.panic.take() {
            std::panic::resume_unwind(payload);
        }
        ctx.outcome.take().unwrap_or(Ok(r0))
    }

    /// The machine code (x86-64), for disassembly and profilers.
    pub fn code(&self) -> &[u8] {
        self.code.bytes()
    }

    /// Bytes of machine code.
    pub fn code_size(&self) -> usize {
        self.code.len()
    }

    /// Where the machine code lies, for profilers (perf maps) and diagnostics.
    pub fn code_range(&self) -> std::ops::Range<usize> {
        let start = self.code.as_ptr() as usize;
        start..start + self.code.len()
    }
}
