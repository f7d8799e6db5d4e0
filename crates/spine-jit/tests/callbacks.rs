//! Callback helpers on both engines: the JIT runs the `Env::callback_start/next`
//! protocol exactly as the interpreter (same r0, same faults at the same pcs, same
//! progress points), for loops, nesting, a function value that names no callback, the
//! frame limit and the budget.

use spine_isa::{op, Insn};
use spine_jit::{compile, JitOptions};
use spine_vm::{
    BudgetVerdict, CallAbort, Env, Fault, Interpreter, Iteration, Memory, RunLimits, Stack, Step,
    FUNC_BASE,
};

/// `bpf_loop(n, cb, ctx, flags)` with the kernel's arithmetic, and a budget of
/// `renewals` extra countdowns.
struct LoopEnv {
    renewals: u32,
    log: Vec<(usize, u32)>,
}

impl Env for LoopEnv {
    fn call(&mut self, _id: u32, _a: [u64; 5], _mem: &mut Memory) -> Result<u64, CallAbort> {
        Err(CallAbort::Unknown)
    }
    fn budget_expired(&mut self) -> BudgetVerdict {
        if self.renewals == 0 {
            return BudgetVerdict::Abort;
        }
        self.renewals -= 1;
        BudgetVerdict::Continue(16)
    }
    fn callback_start(
        &mut self,
        pc: usize,
        id: u32,
        a: [u64; 5],
        it: &mut Iteration,
        depth: usize,
        _mem: &mut Memory,
    ) -> Result<Step, CallAbort> {
        self.log.push((pc, depth as u32));
        if id != 181 {
            return Err(CallAbort::Fault("not bpf_loop"));
        }
        if a[3] != 0 {
            return Ok(Step::Done(-22i64 as u64));
        }
        if a[0] == 0 {
            return Ok(Step::Done(0));
        }
        it.words = [a[0], 0, a[2], 0, 0, 0];
        Ok(Step::Call([0, a[2], 0, 0, 0]))
    }
    fn callback_next(
        &mut self,
        _id: u32,
        it: &mut Iteration,
        ret: u64,
        _depth: usize,
        _mem: &mut Memory,
    ) -> Result<Step, CallAbort> {
        let i = it.words[1] + 1;
        if ret != 0 || i >= it.words[0] {
            return Ok(Step::Done(i));
        }
        it.words[1] = i;
        Ok(Step::Call([i, it.words[2], 0, 0, 0]))
    }
}

/// `lddw rD, PSEUDO_FUNC` of the instruction at `target`, placed at `at`.
fn func(dst: u8, at: usize, target: usize) -> [Insn; 2] {
    Insn::lddw(dst, op::PSEUDO_FUNC, (target as i64 - at as i64 - 1) as u32 as u64)
}

fn asm(src: &str) -> Vec<Insn> {
    spine_isa::assemble(src).expect("assembles")
}

/// Runs `insns` on both engines with `renewals`; they must agree on everything.
fn both(insns: &[Insn], renewals: u32) -> Result<u64, Fault> {
    let interp = Interpreter::new(insns.to_vec()).expect("loads");
    let jit = compile(insns, &JitOptions::default()).expect("compiles");
    let limits = RunLimits { points: 16 };
    let mut e1 = LoopEnv { renewals, log: Vec::new() };
    let r1 = interp.run([7, 0, 0, 0, 0], &mut Memory::new(), &mut Stack::new(), &mut e1, limits);
    let mut e2 = LoopEnv { renewals, log: Vec::new() };
    let r2 = jit.run([7, 0, 0, 0, 0], &mut Memory::new(), &mut Stack::new(), &mut e2, limits);
    assert_eq!(r1, r2, "interpreter and JIT differ");
    assert_eq!(e1.log, e2.log, "callback_start calls differ");
    assert_eq!(e1.renewals, e2.renewals, "budget renewals differ");
    r1
}

/// main: r6 = 0 (sum in a stack slot), bpf_loop(n, cb, r10-8, flags); returns
/// `ret * 1000 + sum`. cb: *ctx += i + 1.
fn sum_program(n: i32, flags: i32) -> Vec<Insn> {
    let mut v = asm("stdw [%r10-8], 0\nmov %r1, 0");
    v[1] = Insn { imm: n, ..v[1] };
    let at = v.len();
    v.extend(func(2, at, 0)); // patched below
    v.extend(asm(&format!(
        "mov %r3, %r10\nadd %r3, -8\nmov %r4, {flags}\ncall 181\nmul %r0, 1000\n\
         ldxdw %r1, [%r10-8]\nadd %r0, %r1\nexit"
    )));
    let cb = v.len();
    let [a, b] = func(2, at, cb);
    v[at] = a;
    v[at + 1] = b;
    v.extend(asm("ldxdw %r3, [%r2]\nadd %r3, %r1\nadd %r3, 1\nstxdw [%r2], %r3\nmov %r0, 0\nexit"));
    v
}

#[test]
fn loops_run_their_callbacks_on_both_engines() {
    // 10 iterations: sum of 1..=10 = 55, ret 10.
    assert_eq!(both(&sum_program(10, 0), 100), Ok(10 * 1000 + 55));
    assert_eq!(both(&sum_program(0, 0), 100), Ok(0));
    // Flags: -EINVAL, no callback.
    assert_eq!(both(&sum_program(10, 1), 100), Ok((-22i64 as u64).wrapping_mul(1000)));
}

#[test]
fn every_callback_is_a_progress_point_of_the_call() {
    // 16 points per countdown and no renewal: the 17th callback is refused at the call.
    let r = both(&sum_program(1000, 0), 0);
    let Err(Fault::Budget { pc, points }) = r else { panic!("{r:?}") };
    assert_eq!((pc, points), (7, 16));
    // Enough renewals: it finishes.
    assert_eq!(both(&sum_program(1000, 0), 100), Ok(1000 * 1000 + 500_500));
}

#[test]
fn a_function_value_that_is_no_callback_faults() {
    // r2 = FUNC_BASE + 1 (not a PSEUDO_FUNC target): a fault at the call.
    let mut v = asm("mov %r1, 3");
    v.extend(Insn::lddw(2, op::PSEUDO_NONE, FUNC_BASE + 1));
    v.extend(asm("mov %r3, 0\nmov %r4, 0\ncall 181\nexit"));
    let at = v.len();
    v.extend(func(5, at, at + 2));
    v.extend(asm("mov %r0, 0\nexit"));
    let r = both(&v, 10);
    assert!(matches!(r, Err(Fault::Helper { pc: 5, id: 181, .. })), "{r:?}");
}

#[test]
fn a_callback_that_recurses_hits_the_frame_limit() {
    // The callback (at 3) loads itself and calls bpf_loop on itself: the depth grows
    // until the 8-frame limit. main falls through into the same code.
    let mut v = asm("mov %r1, 1");
    v.extend(func(2, 1, 3));
    v.extend(func(2, 3, 3));
    v.extend(asm("mov %r1, 1\nmov %r3, 0\nmov %r4, 0\ncall 181\nexit"));
    let r = both(&v, 1000);
    assert!(matches!(r, Err(Fault::CallDepth { pc: 8, .. })), "{r:?}");
}

/// A [`spine_jit::RunSlot`] is reused run after run: a budget fault, a helper that aborts
/// the run, the countdown left by a long loop, must never reach the next run in it.
/// Every run in one slot ends exactly as a plain run with a context of its own.
#[test]
fn a_kept_run_context_carries_nothing_from_one_run_to_the_next() {
    // r1 back-edges (progress points), then helper 1 (unknown to `LoopEnv`: the run
    // stops) when r2 is not 0; returns r3.
    let p = asm("mov %r0, %r3\njeq %r1, 0, +2\nadd %r1, -1\nja -3\njeq %r2, 0, +1\ncall 1\nexit");
    let jit = compile(&p, &JitOptions::default()).expect("compiles");
    let limits = RunLimits { points: 16 };
    let mut slot = spine_jit::RunSlot::<LoopEnv>::new();
    let (mut mem, mut stack) = (Memory::new(), Stack::new());
    // 40 back-edges need two renewals; 10 fit the first countdown.
    let runs: [([u64; 5], u32); 8] = [
        ([40, 0, 1, 0, 0], 0),
        ([10, 0, 2, 0, 0], 0),
        ([0, 1, 3, 0, 0], 0),
        ([0, 0, 4, 0, 0], 0),
        ([40, 0, 5, 0, 0], 2),
        ([15, 0, 6, 0, 0], 0),
        ([40, 1, 7, 0, 0], 0),
        ([5, 0, 8, 0, 0], 0),
    ];
    let mut outcomes = Vec::new();
    for (i, (args, renewals)) in runs.into_iter().enumerate() {
        let mut e1 = LoopEnv { renewals, log: Vec::new() };
        // SAFETY: no native helpers are registered; `LoopEnv` is the slot's type.
        let kept = unsafe { jit.run_in(&mut slot, args, &mut mem, &mut stack, &mut e1, limits) };
        let mut e2 = LoopEnv { renewals, log: Vec::new() };
        let fresh = jit.run(args, &mut Memory::new(), &mut Stack::new(), &mut e2, limits);
        let same_fault = match (&kept, &fresh) {
            // The stack addresses differ: compare what the fault is, not where.
            (Err(a), Err(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
            (a, b) => a == b,
        };
        assert!(same_fault, "run {i}: kept context {kept:?}, fresh {fresh:?}");
        assert_eq!(e1.renewals, e2.renewals, "run {i}: budget renewals");
        assert!(mem.is_empty(), "run {i}: regions left registered");
        outcomes.push(kept.map_err(|f| std::mem::discriminant(&f)));
    }
    let budget = Err(std::mem::discriminant(&Fault::Budget { pc: 0, points: 0 }));
    let unknown = Err(std::mem::discriminant(&Fault::UnknownHelper { pc: 0, id: 0 }));
    assert_eq!(
        outcomes,
        [budget, Ok(2), unknown, Ok(4), Ok(5), Ok(6), budget, Ok(8)],
        "the runs' outcomes"
    );
}

/// [`spine_jit::JitProgram::run_bound`] in a slot bound once to a stack, run after run
/// (as a runner's burst runs packets): each run ends exactly as a plain run with a
/// context of its own, whatever the run before it left (a budget fault, renewals, a
/// helper that stopped the run, a `run_in` with other arguments in the same slot), and
/// r2..r5 start at 0 every time.
#[test]
fn a_bound_run_context_carries_nothing_from_one_run_to_the_next() {
    // r1's low 16 bits: back-edges (progress points); bit 16: call helper 1 (unknown to
    // `LoopEnv`: the run stops); r1 >> 20, ORed with r2..r5, is returned.
    let p = asm("mov %r0, %r1\nrsh %r0, 20\nor %r0, %r2\nor %r0, %r3\nor %r0, %r4\nor %r0, %r5\n\
         mov %r6, %r1\nrsh %r6, 16\nand %r6, 1\nand %r1, 65535\n\
         jeq %r1, 0, +2\nadd %r1, -1\nja -3\njeq %r6, 0, +1\ncall 1\nexit");
    let jit = compile(&p, &JitOptions::default()).expect("compiles");
    let limits = RunLimits { points: 16 };
    let mut slot = spine_jit::RunSlot::<LoopEnv>::new();
    let (mut mem, mut stack) = (Memory::new(), Stack::new());
    slot.bind(&mut stack);
    let r1 = |loops: u64, abort: bool, ret: u64| loops | (u64::from(abort) << 16) | (ret << 20);
    // 40 back-edges need two renewals; 10 fit the first countdown.
    let runs: [(u64, u32); 8] = [
        (r1(40, false, 1), 0),
        (r1(10, false, 2), 0),
        (r1(0, true, 3), 0),
        (r1(0, false, 4), 0),
        (r1(40, false, 5), 2),
        (r1(15, false, 6), 0),
        (r1(40, true, 7), 0),
        (r1(5, false, 8), 0),
    ];
    let mut outcomes = Vec::new();
    for (i, (r1, renewals)) in runs.into_iter().enumerate() {
        // Before runs 2 and 3, a run with r2..r5 set in the same slot (`run_in` writes
        // its stack bounds too: bound to the same stack, they are the same); runs 4 to
        // 7 follow each other in the slot with nothing in between.
        if i == 2 || i == 3 {
            let mut e0 = LoopEnv { renewals: 0, log: Vec::new() };
            // SAFETY: no native helpers are registered; `LoopEnv` is the slot's type.
            let other = unsafe {
                jit.run_in(
                    &mut slot,
                    [0, 1 << 8, 1 << 9, 1 << 10, 1 << 11],
                    &mut mem,
                    &mut stack,
                    &mut e0,
                    limits,
                )
            };
            assert_eq!(other, Ok(0xf00), "run {i}: r2..r5 of run_in");
        }
        let mut e1 = LoopEnv { renewals, log: Vec::new() };
        // SAFETY: as above; the slot was bound to `stack`, which has not moved.
        let bound = unsafe { jit.run_bound(&mut slot, r1, &mut mem, &mut e1, limits) };
        let mut e2 = LoopEnv { renewals, log: Vec::new() };
        let fresh =
            jit.run([r1, 0, 0, 0, 0], &mut Memory::new(), &mut Stack::new(), &mut e2, limits);
        assert_eq!(bound, fresh, "run {i}: bound context vs fresh");
        assert_eq!(e1.renewals, e2.renewals, "run {i}: budget renewals");
        assert!(mem.is_empty(), "run {i}: regions left registered");
        outcomes.push(bound.map_err(|f| std::mem::discriminant(&f)));
    }
    let budget = Err(std::mem::discriminant(&Fault::Budget { pc: 0, points: 0 }));
    let unknown = Err(std::mem::discriminant(&Fault::UnknownHelper { pc: 0, id: 0 }));
    assert_eq!(
        outcomes,
        [budget, Ok(2), unknown, Ok(4), Ok(5), Ok(6), budget, Ok(8)],
        "the runs' outcomes"
    );
}
