//! The JIT's own contract: load-time refusals, the run contract shared with the
//! interpreter, the fast helper paths, panics, and W^X code pages.

use spine_isa::{op, Insn};
use spine_jit::{compile, InlineArrayLookup, JitError, JitOptions, NativeHelper};
use spine_vm::{
    BudgetVerdict, CallAbort, Env, Fault, Interpreter, LoadError, Memory, NoHelpers, Region,
    RunLimits, Stack, MAX_REGIONS,
};
use std::ffi::c_void;

fn mov64(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::K, dst, 0, 0, imm)
}
fn exit() -> Insn {
    Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
}
fn call(id: i32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, 0, 0, id)
}

fn run_with<E: Env>(p: &[Insn], opts: &JitOptions, env: &mut E, points: u32) -> Result<u64, Fault> {
    let jit = compile(p, opts).expect("compiles");
    jit.run([0; 5], &mut Memory::new(), &mut Stack::new(), env, RunLimits { points })
}

/// Runs `p` on the interpreter and the JIT, on one stack (faults carry its addresses).
fn both<E: Env + Default>(p: &[Insn], points: u32) -> (Result<u64, Fault>, Result<u64, Fault>) {
    let vm = Interpreter::new(p.to_vec()).expect("valid");
    let jit = compile(p, &JitOptions::default()).expect("compiles");
    let (limits, mut stack) = (RunLimits { points }, Stack::new());
    let i = vm.run([0; 5], &mut Memory::new(), &mut stack, &mut E::default(), limits);
    let j = jit.run([0; 5], &mut Memory::new(), &mut stack, &mut E::default(), limits);
    (i, j)
}

#[test]
fn refuses_what_the_interpreter_refuses() {
    let [a, b] = Insn::lddw(1, op::PSEUDO_MAP_FD, 0);
    let cases: Vec<Vec<Insn>> = vec![
        vec![],
        vec![mov64(0, 1)],
        vec![a, b, exit()],
        vec![Insn::new(op::LD | op::ABS | op::W, 0, 0, 0, 12), exit()],
        vec![Insn::new(op::ALU64 | op::MOV | op::K, 10, 0, 0, 1), exit()],
    ];
    for p in cases {
        let want = Interpreter::new(p.clone()).expect_err("interpreter refuses");
        match compile(&p, &JitOptions::default()) {
            Err(JitError::Load(got)) => assert_eq!(got, want),
            other => panic!("{p:?}: {other:?}"),
        }
    }
    assert!(matches!(
        compile(&[Insn::new(op::LD | op::IND | op::B, 0, 1, 0, 0), exit()], &JitOptions::default()),
        Err(JitError::Load(LoadError::LegacyPacketLoad { pc: 0 }))
    ));
    let opts = JitOptions { proven: Some(vec![true]), ..JitOptions::default() };
    assert!(matches!(
        compile(&[mov64(0, 1), exit()], &opts),
        Err(JitError::ProvenLength { expected: 2, got: 1 })
    ));
}

#[test]
fn faults_name_the_same_instruction() {
    // Out of bounds just above the stack, at pc 1.
    let p = [mov64(0, 0), Insn::new(op::LDX | op::MEM | op::DW, 0, 10, 0, 0), exit()];
    let (i, j) = both::<NoHelpers>(&p, 64);
    assert!(matches!(j, Err(Fault::OutOfBounds { pc: 1, len: 8, .. })), "{j:?}");
    assert_eq!(i, j);
    // Recursion past 8 frames.
    let p = [Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, -1), exit()];
    let (i, j) = both::<NoHelpers>(&p, 1000);
    assert_eq!(j, Err(Fault::CallDepth { pc: 0, max: 8 }));
    assert_eq!(i, j);
    // Misaligned atomic on the stack, at pc 1.
    let p =
        [mov64(1, 3), Insn::new(op::STX | op::ATOMIC | op::DW, 10, 1, -12, op::ATOMIC_ADD), exit()];
    let (i, j) = both::<NoHelpers>(&p, 64);
    assert_eq!(j, Err(Fault::Helper { pc: 1, id: 0, reason: "misaligned atomic" }));
    assert_eq!(i, j);
    // Unknown helper.
    let (i, j) = both::<NoHelpers>(&[mov64(0, 0), call(7), exit()], 64);
    assert_eq!(j, Err(Fault::UnknownHelper { pc: 1, id: 7 }));
    assert_eq!(i, j);
}

/// Grants `refills` more countdowns of `n` points, then aborts.
#[derive(Default)]
struct Refill {
    n: u32,
    refills: u32,
    asked: u32,
}

impl Env for Refill {
    fn call(&mut self, _: u32, _: [u64; 5], _: &mut Memory) -> Result<u64, CallAbort> {
        Err(CallAbort::Unknown)
    }
    fn budget_expired(&mut self) -> BudgetVerdict {
        self.asked += 1;
        if self.refills == 0 {
            return BudgetVerdict::Abort;
        }
        self.refills -= 1;
        BudgetVerdict::Continue(self.n)
    }
}

#[test]
fn budget_counts_progress_points_like_the_interpreter() {
    // r0 = 0; loop: r0 += 1; if r0 < 10 goto loop; exit  -> 9 taken back-edges.
    let p = [
        mov64(0, 0),
        Insn::new(op::ALU64 | op::ADD | op::K, 0, 0, 0, 1),
        Insn::new(op::JMP | op::JLT | op::K, 0, 0, -2, 10),
        exit(),
    ];
    let o = JitOptions::default();
    let mut env = Refill::default();
    assert_eq!(run_with(&p, &o, &mut env, 9), Ok(10));
    assert_eq!(env.asked, 0);
    assert_eq!(run_with(&p, &o, &mut env, 8), Err(Fault::Budget { pc: 2, points: 8 }));
    assert_eq!(env.asked, 1);
    let mut env = Refill { n: 4, refills: 2, asked: 0 };
    assert_eq!(run_with(&p, &o, &mut env, 4), Ok(10));
    assert_eq!(env.asked, 2);
    // `points` in the fault counts every countdown used up: the first 5, then a refill of 3.
    let mut env = Refill { n: 3, refills: 1, asked: 0 };
    assert_eq!(run_with(&p, &o, &mut env, 5), Err(Fault::Budget { pc: 2, points: 8 }));
    // Zero initial points: the first progress point asks at once.
    let mut env = Refill { n: 100, refills: 1, asked: 0 };
    assert_eq!(run_with(&p, &o, &mut env, 0), Ok(10));
    assert_eq!(env.asked, 1);
    // Without the countdown the limits are ignored.
    let off = JitOptions { budget: false, ..JitOptions::default() };
    assert_eq!(run_with(&p, &off, &mut Refill::default(), 1), Ok(10));
    // Calls into subprograms that call or loop are progress points (the fault names the
    // call); calls into leaves are not.
    let calls = [
        Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 1),
        exit(),
        Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 1),
        exit(),
        mov64(0, 3),
        exit(),
    ];
    assert_eq!(run_with(&calls, &o, &mut Refill::default(), 1), Ok(3));
    assert_eq!(
        run_with(&calls, &o, &mut Refill::default(), 0),
        Err(Fault::Budget { pc: 0, points: 0 })
    );
    let leaf =
        [Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 1), exit(), mov64(0, 4), exit()];
    assert_eq!(run_with(&leaf, &o, &mut Refill::default(), 0), Ok(4));
}

#[test]
fn run_registers_the_stack_only_for_the_call() {
    let p = [
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -8, -2),
        Insn::new(op::LDX | op::MEM | op::DW, 0, 10, -8, 0),
        exit(),
    ];
    let jit = compile(&p, &JitOptions::default()).unwrap();
    let mut mem = Memory::new();
    let r = jit.run([0; 5], &mut mem, &mut Stack::new(), &mut NoHelpers, RunLimits::default());
    assert_eq!(r, Ok(-2i64 as u64));
    assert!(mem.is_empty());
    // With every region slot taken there is no room for the stack: the interpreter's fault.
    let mut full = Memory::new();
    let mut byte = [0u8; 1];
    for _ in 0..MAX_REGIONS {
        let r = Region { start: byte.as_mut_ptr() as u64, len: 1, writable: false };
        // SAFETY: `byte` outlives `full`; the region is read-only.
        unsafe { full.push(r) };
    }
    let r = jit.run([0; 5], &mut full, &mut Stack::new(), &mut NoHelpers, RunLimits::default());
    assert_eq!(r, Err(Fault::Helper { pc: 0, id: 0, reason: "no free region for the stack" }));
    assert_eq!(full.len(), MAX_REGIONS);
}

/// Helper 1 is an array-map lookup over `values` (4 entries of 8 bytes); counts calls.
struct ArrayEnv {
    base: u64,
    calls: u32,
}

const HANDLE: u64 = 0xfeed_0000_0000_0001;

impl Env for ArrayEnv {
    fn call(&mut self, id: u32, a: [u64; 5], mem: &mut Memory) -> Result<u64, CallAbort> {
        self.calls += 1;
        if id != 1 || a[0] != HANDLE {
            return Err(CallAbort::Unknown);
        }
        let key = mem.slice(a[1], 4).ok_or(CallAbort::Fault("bad key pointer"))?;
        let key = u32::from_le_bytes(key.try_into().expect("4 bytes"));
        Ok(if key < 4 { self.base + u64::from(key) * 8 } else { 0 })
    }
}

#[test]
fn inline_array_lookup_matches_the_helper_and_skips_the_call() {
    // The key arrives in r1. *(u32 *)(fp - 4) = key; r1 = map; r2 = fp - 4;
    // r0 = lookup(r1, r2); if r0 == 0 return 999; return *(u64 *)r0
    let [m0, m1] = Insn::lddw(1, 0, HANDLE);
    let prog = vec![
        Insn::new(op::STX | op::MEM | op::W, 10, 1, -4, 0),
        m0,
        m1,
        Insn::new(op::ALU64 | op::MOV | op::X, 2, 10, 0, 0),
        Insn::new(op::ALU64 | op::ADD | op::K, 2, 0, 0, -4),
        call(1),
        Insn::new(op::JMP | op::JNE | op::K, 0, 0, 2, 0),
        mov64(0, 999),
        exit(),
        Insn::new(op::LDX | op::MEM | op::DW, 0, 0, 0, 0),
        exit(),
    ];
    let values = [11u64, 22, 33, 44];
    let base = values.as_ptr() as u64;
    let lookup = InlineArrayLookup {
        helper_id: 1,
        map_handle: HANDLE,
        base,
        value_size: 8,
        max_entries: 4,
        per_cpu: None,
    };
    let inline = JitOptions {
        proven: Some(vec![true; prog.len()]),
        inline_array_lookups: vec![lookup],
        ..JitOptions::default()
    };
    let not_proven = JitOptions { inline_array_lookups: vec![lookup], ..JitOptions::default() };
    let vm = Interpreter::new(prog.clone()).unwrap();
    let fast = compile(&prog, &inline).unwrap();
    let slow = compile(&prog, &not_proven).unwrap();
    for key in [0u64, 3, 4, 0xffff_ffff, 0x1_0000_0002] {
        let mut runs = Vec::new();
        for engine in 0..3 {
            let mut mem = Memory::new();
            let r = Region { start: base, len: 32, writable: false };
            // SAFETY: `values` outlives `mem`; read-only.
            unsafe { mem.push(r) };
            let mut env = ArrayEnv { base, calls: 0 };
            let (args, st, lim) = ([key, 0, 0, 0, 0], &mut Stack::new(), RunLimits::default());
            let res = match engine {
                0 => vm.run(args, &mut mem, st, &mut env, lim),
                1 => fast.run(args, &mut mem, st, &mut env, lim),
                _ => slow.run(args, &mut mem, st, &mut env, lim),
            };
            runs.push((res, env.calls));
        }
        let want = match key as u32 {
            k @ 0..=3 => values[k as usize],
            _ => 999,
        };
        assert_eq!(runs[0], (Ok(want), 1), "key {key:#x}");
        assert_eq!(runs[1], (Ok(want), 0), "inline lookup calls no helper");
        assert_eq!(runs[2], (Ok(want), 1), "unproven call keeps the helper");
    }
}

extern "C" fn native_add(a: u64, b: u64, _: u64, _: u64, _: u64, rt: *mut c_void) -> u64 {
    // SAFETY: every run in this test passes a pointer to a live `u64` counter.
    unsafe { *rt.cast::<u64>() += 1 };
    a.wrapping_add(b)
}

#[test]
fn native_helpers_get_the_runtime_pointer() {
    let p = [mov64(1, 40), mov64(2, 2), call(9), call(9), exit()];
    // SAFETY: `native_add` is sound for every argument and for the counter passed as
    // `rt` below; this test never uses plain `run`.
    let h = unsafe { NativeHelper::new(9, native_add) };
    let jit =
        compile(&p, &JitOptions { native_helpers: vec![h], ..JitOptions::default() }).unwrap();
    let mut counter = 0u64;
    let rt = (&mut counter as *mut u64).cast();
    let (mut mem, mut st, lim) = (Memory::new(), Stack::new(), RunLimits::default());
    // SAFETY: `rt` points to `counter`, what `native_add` expects, for the whole call.
    let r = unsafe { jit.run_with_runtime([0; 5], &mut mem, &mut st, &mut NoHelpers, lim, rt) };
    assert_eq!(r, Ok(42));
    assert_eq!(counter, 2);
}

/// Answers the run memory's region count and all five arguments' sum, and counts calls in `rt`.
extern "C" fn native_mem_len(
    a: u64,
    b: u64,
    c: u64,
    d: u64,
    e: u64,
    rt: *mut c_void,
    mem: *mut Memory,
) -> u64 {
    // SAFETY: every run in this test passes a pointer to a live `u64` counter as `rt`,
    // and the JIT passes the run's memory, which nothing else uses during the call.
    let regions = unsafe {
        *rt.cast::<u64>() += 1;
        (*mem).len() as u64
    };
    regions * 1000 + a + b + c + d + e
}

#[test]
fn native_helpers_with_memory_get_the_runs_memory_and_all_arguments() {
    let p = [mov64(1, 1), mov64(2, 2), mov64(3, 3), mov64(4, 4), mov64(5, 5), call(9), exit()];
    // SAFETY: `native_mem_len` is sound for every argument, for the counter passed as
    // `rt` below and for the memory the JIT passes.
    let h = unsafe { NativeHelper::with_memory(9, native_mem_len) };
    let jit =
        compile(&p, &JitOptions { native_helpers: vec![h], ..JitOptions::default() }).unwrap();
    let mut counter = 0u64;
    let rt = (&mut counter as *mut u64).cast();
    let (mut mem, mut st, lim) = (Memory::new(), Stack::new(), RunLimits::default());
    let mut other = [0u8; 16];
    // SAFETY: `other` outlives `mem`'s use below and nothing else touches it.
    unsafe {
        mem.push(Region { start: other.as_mut_ptr() as u64, len: 16, writable: true }).unwrap()
    };
    // SAFETY: `rt` points to `counter`, what `native_mem_len` expects, for the whole call.
    let r = unsafe { jit.run_with_runtime([0; 5], &mut mem, &mut st, &mut NoHelpers, lim, rt) };
    // The run's memory: the region pushed above and the stack the run registers.
    assert_eq!(r, Ok(2015));
    assert_eq!(counter, 1);
    assert_eq!(mem.len(), 1, "the stack region is removed after the run");
}

#[derive(Default)]
struct Panics;

impl Env for Panics {
    fn call(&mut self, id: u32, _: [u64; 5], _: &mut Memory) -> Result<u64, CallAbort> {
        panic!("helper {id} panicked");
    }
}

#[test]
fn a_panicking_helper_unwinds_through_the_jit() {
    let jit = compile(&[call(3), exit()], &JitOptions::default()).unwrap();
    let mut mem = Memory::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        jit.run([0; 5], &mut mem, &mut Stack::new(), &mut Panics, RunLimits::default())
    }));
    let payload = r.expect_err("the panic reaches the caller");
    assert_eq!(payload.downcast_ref::<String>().map(String::as_str), Some("helper 3 panicked"));
    assert!(mem.is_empty(), "the stack region is removed on the way out");
}

/// Permissions of the `/proc/self/maps` line containing `addr`.
fn perms_of(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("procfs");
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else { continue };
        let (lo, hi) = range.split_once('-').expect("range");
        let lo = usize::from_str_radix(lo, 16).expect("hex");
        let hi = usize::from_str_radix(hi, 16).expect("hex");
        if (lo..hi).contains(&addr) {
            return perms.to_string();
        }
    }
    panic!("{addr:#x} is not mapped");
}

#[test]
fn code_pages_are_executable_and_never_writable() {
    let jit = compile(&[mov64(0, 5), exit()], &JitOptions::default()).unwrap();
    let code = jit.code_range();
    assert!(jit.code_size() > 0 && code.len() == jit.code_size());
    assert_eq!(perms_of(code.start), "r-xp");
    assert_eq!(perms_of(code.end - 1), "r-xp");
    let r = jit.run(
        [0; 5],
        &mut Memory::new(),
        &mut Stack::new(),
        &mut NoHelpers,
        RunLimits::default(),
    );
    assert_eq!(r, Ok(5));
    assert_eq!(perms_of(code.start), "r-xp", "running does not change the protection");
}

/// Compilations on one thread share Cranelift's context (its buffers are kept): a
/// program compiled after a larger, different one gets the same code as on a thread
/// that compiled nothing before.
#[test]
fn a_reused_context_compiles_the_same_code() {
    let small = spine_isa::assemble(
        "mov %r0, 0
         jeq %r1, 0, +2
         add %r0, %r1
         rsh %r0, 3
         exit",
    )
    .expect("assembles");
    let mut big = String::new();
    for k in 0..200 {
        big.push_str(&format!("jgt %r1, {k}, +1\nadd %r2, {k}\nxor %r3, %r2\n"));
    }
    big.push_str("mov %r0, %r3\nexit\n");
    let big = spine_isa::assemble(&big).expect("assembles");
    let opts = JitOptions::default();
    let fresh = std::thread::spawn({
        let small = small.clone();
        move || compile(&small, &JitOptions::default()).expect("compiles").code().to_vec()
    })
    .join()
    .expect("thread");
    let first = compile(&small, &opts).expect("compiles").code().to_vec();
    let other = compile(&big, &opts).expect("compiles");
    assert_ne!(other.code(), &first[..]);
    let again = compile(&small, &opts).expect("compiles").code().to_vec();
    assert_eq!(first, again);
    assert_eq!(first, fresh);
}
