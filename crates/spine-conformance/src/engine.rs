//! The engine interface the runner drives, and the interpreter behind it.

use std::error::Error;

use spine_isa::Insn;
use spine_vm::{CallAbort, Env, Interpreter, Memory, Region, RunLimits, Stack};

/// Helper id of the suite's `unwind(x)`: returns `x`; `x == 0` ends the program with r0 = 0.
pub const UNWIND: u32 = 5;

/// How one run ended.
#[derive(Debug)]
pub enum Outcome {
    /// The program exited with this r0.
    Returned(u64),
    /// The engine would not load the program.
    Refused(Box<dyn Error + Send + Sync>),
    /// The program was loaded but stopped abnormally.
    Faulted(Box<dyn Error + Send + Sync>),
}

/// An execution engine under test: the interpreter or the JIT.
pub trait Engine {
    fn name(&self) -> &'static str;
    /// Loads and runs `insns` once with r1 = address of `mem` and r2 = its length (both 0
    /// when `mem` is empty); `mem` is the only memory besides the stack the program may
    /// touch, and it may write it. Helper [`UNWIND`] is the suite's `unwind`; any other
    /// helper id is unknown.
    fn run(&mut self, insns: &[Insn], mem: &mut [u8]) -> Outcome;
}

/// The suite's helper environment: only [`UNWIND`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Unwind;

impl Env for Unwind {
    fn call(&mut self, id: u32, args: [u64; 5], _mem: &mut Memory) -> Result<u64, CallAbort> {
        match (id, args[0]) {
            (UNWIND, 0) => Err(CallAbort::Exit(0)),
            (UNWIND, x) => Ok(x),
            _ => Err(CallAbort::Unknown),
        }
    }
}

/// Progress points (taken back-edges and calls) one run may spend. The runner has no
/// clock, so this fixed figure is what stops a runaway program (a tight loop spends
/// them in about 0.1 s; every suite file needs far fewer).
pub const MAX_POINTS: u32 = 1 << 24;

/// [`spine_vm::Interpreter`] as an [`Engine`], reusing one stack across runs.
#[derive(Debug, Default)]
pub struct Interp {
    stack: Stack,
}

impl Interp {
    pub fn new() -> Self {
        Self::default()
    }
}

/// Runs `f` with r1 = the address of `mem` and r2 its length (both 0 when `mem` is
/// empty), `mem` being the only region besides the stack, as the suite defines it.
#[expect(unsafe_code, reason = "registering `mem` as a region is unsafe by contract")]
pub fn with_mem<T>(mem: &mut [u8], f: impl FnOnce([u64; 5], &mut Memory) -> T) -> T {
    let mut regions = Memory::new();
    let args = if mem.is_empty() {
        [0; 5]
    } else {
        let r = Region { start: mem.as_mut_ptr() as u64, len: mem.len() as u64, writable: true };
        // SAFETY: `mem` is exclusively borrowed for this whole call and not touched through
        // the slice while `regions` (dropped before returning) holds it.
        unsafe { regions.push(r) };
        [r.start, r.len, 0, 0, 0]
    };
    f(args, &mut regions)
}

fn outcome(r: Result<u64, spine_vm::Fault>) -> Outcome {
    match r {
        Ok(r0) => Outcome::Returned(r0),
        Err(fault) => Outcome::Faulted(Box::new(fault)),
    }
}

impl Engine for Interp {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn run(&mut self, insns: &[Insn], mem: &mut [u8]) -> Outcome {
        let vm = match Interpreter::new(insns.to_vec()) {
            Ok(vm) => vm,
            Err(e) => return Outcome::Refused(Box::new(e)),
        };
        let limits = RunLimits { points: MAX_POINTS };
        outcome(with_mem(mem, |args, m| vm.run(args, m, &mut self.stack, &mut Unwind, limits)))
    }
}

/// [`spine_jit`] as an [`Engine`]: unverified code, so every access outside the stack
/// frame is checked, as the interpreter checks it.
#[derive(Debug, Default)]
pub struct Jit {
    stack: Stack,
}

impl Engine for Jit {
    fn name(&self) -> &'static str {
        "jit"
    }

    fn run(&mut self, insns: &[Insn], mem: &mut [u8]) -> Outcome {
        let prog = match spine_jit::compile(insns, &spine_jit::JitOptions::default()) {
            Ok(p) => p,
            Err(e) => return Outcome::Refused(Box::new(e)),
        };
        let limits = RunLimits { points: MAX_POINTS };
        outcome(with_mem(mem, |args, m| prog.run(args, m, &mut self.stack, &mut Unwind, limits)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_isa::assemble;

    fn run(src: &str, mem: &mut [u8]) -> Outcome {
        Interp::new().run(&assemble(src).unwrap(), mem)
    }

    #[test]
    fn passes_memory_and_length() {
        let mut mem = [1u8, 2, 3, 4];
        let o = run("ldxb %r0, [%r1+3]\nstb [%r1], 9\nadd %r0, %r2\nexit", &mut mem);
        assert!(matches!(o, Outcome::Returned(8)), "{o:?}");
        assert_eq!(mem[0], 9);
        assert!(matches!(run("mov %r0, %r1\nadd %r0, %r2\nexit", &mut []), Outcome::Returned(0)));
    }

    #[test]
    fn refuses_faults_and_unwinds() {
        assert!(matches!(run("mov %r11, 1\nexit", &mut []), Outcome::Refused(_)));
        assert!(matches!(run("ldxb %r0, [%r1+4]\nexit", &mut [0; 4]), Outcome::Faulted(_)));
        assert!(matches!(run("call 6\nexit", &mut []), Outcome::Faulted(_)));
        // unwind(7) returns 7; unwind(0) ends the program with r0 = 0.
        assert!(matches!(run("mov %r1, 7\ncall 5\nexit", &mut []), Outcome::Returned(7)));
        let o = run("mov %r0, 3\nmov %r1, 0\ncall 5\nmov %r0, 2\nexit", &mut []);
        assert!(matches!(o, Outcome::Returned(0)), "{o:?}");
    }

    #[test]
    fn runaway_loops_stop_at_the_point_budget() {
        let o = run("mov %r0, 0\nloop:\nadd %r0, 1\nja loop", &mut []);
        assert!(matches!(o, Outcome::Faulted(_)), "{o:?}");
    }

    #[test]
    fn reuses_its_stack_across_runs() {
        let mut e = Interp::new();
        let p = assemble("stdw [%r10-8], 42\nldxdw %r0, [%r10-8]\nexit").unwrap();
        for _ in 0..3 {
            assert!(matches!(e.run(&p, &mut []), Outcome::Returned(42)));
        }
    }
}
