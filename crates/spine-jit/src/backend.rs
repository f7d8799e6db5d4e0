//! Cranelift setup: the host ISA and the budget trampoline (each built once per
//! process), and the compilation of the translated function to position-independent
//! machine code without relocations.

use crate::code_mem::CodeMem;
use crate::runtime::{OFF_BUDGET_FN, OFF_POINTS};
use crate::{translate, JitError, JitOptions};
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, MemFlagsData, Signature, UserFuncName,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use spine_isa::Insn;
use std::cell::RefCell;
use std::sync::OnceLock;

static ISA: OnceLock<Result<OwnedTargetIsa, &'static str>> = OnceLock::new();

fn host_isa() -> Result<&'static dyn TargetIsa, JitError> {
    let isa = ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v).map_err(|_| "cranelift rejected a setting")
        };
        // "none" (no e-graph pass) saves ~6 M instructions of a 1,000-instruction load but
        // costs up to 3.6 % more instructions per run (calls, global_data); see
        // docs/ARCHITECTURE.md, load time.
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "unwind_info", "false")?;
        // The IR verifier doubles compile time; tests (debug builds) keep it on.
        set(&mut flags, "enable_verifier", if cfg!(debug_assertions) { "true" } else { "false" })?;
        let builder = cranelift_native::builder()?;
        builder.finish(settings::Flags::new(flags)).map_err(|_| "cranelift cannot target this host")
    });
    match isa {
        Ok(isa) => Ok(&**isa),
        Err(why) => Err(JitError::UnsupportedHost(why)),
    }
}

static BUDGET_TRAMPOLINE: OnceLock<Result<CodeMem, &'static str>> = OnceLock::new();

/// Signature of the budget trampoline: `(ctx, pc)`, nothing returned, every register
/// preserved ([`CallConv::PreserveAll`]).
pub(crate) fn trampoline_signature() -> Signature {
    let mut s = Signature::new(CallConv::PreserveAll);
    s.params.extend([AbiParam::new(I64), AbiParam::new(I64)]);
    s
}

/// The address of the budget trampoline: `(ctx, pc)` calls `ctx.budget_fn(ctx, pc)` (the
/// System V `runtime::budget_expired::<E>`) and stores its answer in `ctx.points`,
/// saving and restoring every register it or the callee may touch. A progress point's
/// slow path calls it, so the rare renewal clobbers nothing and the register allocator
/// keeps values in caller-saved registers across progress points instead of spilling
/// them on the hot path. Built once, mapped for the life of the process.
pub(crate) fn budget_trampoline() -> Result<usize, JitError> {
    let t = BUDGET_TRAMPOLINE.get_or_init(|| {
        let isa = host_isa().map_err(|_| "cranelift cannot target this host")?;
        let mut func =
            Function::with_name_signature(UserFuncName::user(0, 1), trampoline_signature());
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let (ctx, pc) = (b.block_params(entry)[0], b.block_params(entry)[1]);
        let mut sysv = Signature::new(isa.default_call_conv());
        sysv.params.extend([AbiParam::new(I64), AbiParam::new(I64)]);
        sysv.returns.push(AbiParam::new(I64));
        let sig = b.import_signature(sysv);
        let f = b.ins().load(I64, MemFlagsData::trusted(), ctx, OFF_BUDGET_FN);
        let call = b.ins().call_indirect(sig, f, &[ctx, pc]);
        let r = b.inst_results(call)[0];
        b.ins().store(MemFlagsData::trusted(), r, ctx, OFF_POINTS);
        b.ins().return_(&[]);
        b.finalize(isa.frontend_config());
        let mut ctx = Context::for_function(func);
        let code = ctx
            .compile(isa, &mut ControlPlane::default())
            .map_err(|_| "cranelift cannot compile the budget trampoline")?;
        if !code.buffer.relocs().is_empty() {
            return Err("the budget trampoline needs relocating");
        }
        CodeMem::new(code.code_buffer()).map_err(|_| "cannot map the budget trampoline")
    });
    match t {
        Ok(mem) => Ok(mem.as_ptr() as usize),
        Err(why) => Err(JitError::UnsupportedHost(why)),
    }
}

thread_local! {
    /// Cranelift's context, reused by every compilation on its thread: its buffers (the
    /// register allocator's among them) keep their capacity from one program to the
    /// next instead of being allocated again. It holds the largest function compiled
    /// on the thread until the thread ends.
    static CONTEXT: RefCell<Context> = RefCell::new(Context::new());
}

/// Translates and compiles `insns` (already validated) to machine code whose first byte
/// is the entry point ([`crate::runtime::EntryFn`]).
pub(crate) fn compile(insns: &[Insn], opts: &JitOptions) -> Result<Vec<u8>, JitError> {
    let isa = host_isa()?;
    let trampoline = if opts.budget { budget_trampoline()? } else { 0 };
    CONTEXT.with(|cell| match cell.try_borrow_mut() {
        Ok(mut ctx) => compile_in(&mut ctx, insns, opts, isa, trampoline),
        // Not reentered today; a fresh context keeps it correct if it ever is.
        Err(_) => compile_in(&mut Context::new(), insns, opts, isa, trampoline),
    })
}

fn compile_in(
    ctx: &mut Context,
    insns: &[Insn],
    opts: &JitOptions,
    isa: &dyn TargetIsa,
    trampoline: usize,
) -> Result<Vec<u8>, JitError> {
    ctx.clear();
    ctx.func.name = UserFuncName::user(0, 0);
    ctx.func.signature = translate::entry_signature(isa.default_call_conv());
    let mut fctx = FunctionBuilderContext::new();
    translate::build(&mut ctx.func, &mut fctx, insns, opts, isa, trampoline);
    let code = ctx
        .compile(isa, &mut ControlPlane::default())
        .map_err(|e| JitError::Codegen(Box::new(e.inner)))?;
    // Runtime functions are called through absolute addresses in registers, so the code
    // must need no relocation to run where it is copied.
    if !code.buffer.relocs().is_empty() {
        return Err(JitError::Relocations(code.buffer.relocs().len()));
    }
    Ok(code.code_buffer().to_vec())
}
