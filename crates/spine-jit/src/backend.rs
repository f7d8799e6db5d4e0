//! Cranelift setup: the host ISA (built once per process) and the compilation of the
//! translated function to position-independent machine code without relocations.

use crate::{translate, JitError, JitOptions};
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::{Function, UserFuncName};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use spine_isa::Insn;
use std::sync::OnceLock;

static ISA: OnceLock<Result<OwnedTargetIsa, &'static str>> = OnceLock::new();

fn host_isa() -> Result<&'static dyn TargetIsa, JitError> {
    let isa = ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v).map_err(|_| "cranelift rejected a setting")
        };
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

/// Translates and compiles `insns` (already validated) to machine code whose first byte
/// is the entry point ([`crate::runtime::EntryFn`]).
pub(crate) fn compile(insns: &[Insn], opts: &JitOptions) -> Result<Vec<u8>, JitError> {
    let isa = host_isa()?;
    let call_conv = isa.default_call_conv();
    let mut func = Function::with_name_signature(
        UserFuncName::user(0, 0),
        translate::entry_signature(call_conv),
    );
    let mut fctx = FunctionBuilderContext::new();
    translate::build(&mut func, &mut fctx, insns, opts, isa);
    let mut ctx = Context::for_function(func);
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
