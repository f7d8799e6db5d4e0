use super::*;
use crate::NoHelpers;

fn mov64(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::K, dst, 0, 0, imm)
}
fn exit() -> Insn {
    Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
}

fn run(p: Vec<Insn>) -> Result<u64, Fault> {
    run_limited(p, RunLimits::default())
}

fn run_limited(p: Vec<Insn>, limits: RunLimits) -> Result<u64, Fault> {
    let vm = Interpreter::new(p).expect("valid");
    vm.run([0; 5], &mut Memory::new(), &mut Stack::new(), &mut NoHelpers, limits)
}

#[test]
fn division_and_modulo_by_zero_follow_rfc9669() {
    // r0 = 7; r1 = 0; r0 /= r1 -> 0
    let p =
        vec![mov64(0, 7), mov64(1, 0), Insn::new(op::ALU64 | op::DIV | op::X, 0, 1, 0, 0), exit()];
    assert_eq!(run(p), Ok(0));
    // r0 = 7; r0 %= r1 (0) -> 7
    let p =
        vec![mov64(0, 7), mov64(1, 0), Insn::new(op::ALU64 | op::MOD | op::X, 0, 1, 0, 0), exit()];
    assert_eq!(run(p), Ok(7));
    // 32-bit mod by zero keeps dst but zero-extends it.
    let p =
        vec![mov64(0, -1), mov64(1, 0), Insn::new(op::ALU | op::MOD | op::X, 0, 1, 0, 0), exit()];
    assert_eq!(run(p), Ok(0xffff_ffff));
    // sdiv INT_MIN / -1 wraps.
    let [a, b] = Insn::lddw(0, 0, i64::MIN as u64);
    let p = vec![a, b, Insn::new(op::ALU64 | op::DIV | op::K, 0, 0, 1, -1), exit()];
    assert_eq!(run(p), Ok(i64::MIN as u64));
}

#[test]
fn out_of_bounds_access_faults_with_pc() {
    // r0 = *(u64 *)(r10 + 0): just above the stack.
    let p = vec![Insn::new(op::LDX | op::MEM | op::DW, 0, 10, 0, 0), exit()];
    match run(p) {
        Err(Fault::OutOfBounds { pc: 0, len: 8, kind: AccessKind::Read, .. }) => {}
        other => panic!("{other:?}"),
    }
    // A wild pointer.
    let p = vec![mov64(1, 0x1000), Insn::new(op::ST | op::MEM | op::B, 1, 0, 0, 1), exit()];
    assert!(matches!(run(p), Err(Fault::OutOfBounds { pc: 1, kind: AccessKind::Write, .. })));
}

#[test]
fn stack_round_trip_and_region_is_removed_after_run() {
    let p = vec![
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -8, -2),
        Insn::new(op::LDX | op::MEM | op::DW, 0, 10, -8, 0),
        exit(),
    ];
    let vm = Interpreter::new(p).unwrap();
    let mut mem = Memory::new();
    let r = vm.run([0; 5], &mut mem, &mut Stack::new(), &mut NoHelpers, RunLimits::default());
    assert_eq!(r, Ok(-2i64 as u64));
    assert!(mem.is_empty());
}

#[test]
fn infinite_loop_stops_at_budget() {
    let p = vec![Insn::new(op::JMP | op::JA, 0, 0, -1, 0), exit()];
    assert_eq!(
        run_limited(p, RunLimits { points: 1000 }),
        Err(Fault::Budget { pc: 0, points: 1000 })
    );
}

/// An environment that grants `refills` more countdowns of `n` points, then aborts.
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
fn budget_counts_back_edges_and_calls_and_asks_the_env() {
    // r0 = 0; loop: r0 += 1; if r0 < 10 goto loop; exit  -> 9 taken back-edges.
    let counted = vec![
        mov64(0, 0),
        Insn::new(op::ALU64 | op::ADD | op::K, 0, 0, 0, 1),
        Insn::new(op::JMP | op::JLT | op::K, 0, 0, -2, 10),
        exit(),
    ];
    let vm = Interpreter::new(counted.clone()).unwrap();
    let mut env = Refill { n: 0, refills: 0, asked: 0 };
    let run = |vm: &Interpreter, env: &mut Refill, points| {
        vm.run([0; 5], &mut Memory::new(), &mut Stack::new(), env, RunLimits { points })
    };
    assert_eq!(run(&vm, &mut env, 9), Ok(10), "9 back-edges fit in 9 points");
    assert_eq!(env.asked, 0);
    assert_eq!(run(&vm, &mut env, 8), Err(Fault::Budget { pc: 2, points: 8 }));
    assert_eq!(env.asked, 1);
    // Refills: 4 + 4 + 4 points cover the 9 back-edges.
    let mut env = Refill { n: 4, refills: 2, asked: 0 };
    assert_eq!(run(&vm, &mut env, 4), Ok(10));
    assert_eq!(env.asked, 2);
    // The fault counts every countdown used up: the first 5 points, then a refill of 3.
    let mut env = Refill { n: 3, refills: 1, asked: 0 };
    assert_eq!(run(&vm, &mut env, 5), Err(Fault::Budget { pc: 2, points: 8 }));
    // Forward jumps cost nothing: 1,000 of them with a budget of 1 point.
    let mut fwd: Vec<Insn> = (0..1000).map(|_| Insn::new(op::JMP | op::JA, 0, 0, 0, 0)).collect();
    fwd.push(exit());
    let vm = Interpreter::new(fwd).unwrap();
    assert_eq!(run(&vm, &mut Refill { n: 0, refills: 0, asked: 0 }, 1), Ok(0));
    // A call into a subprogram that calls (or loops) is a point, the fault naming it; a
    // call into a leaf is not (its straight-line body bounds it).
    let calls = vec![
        Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 1),
        exit(),
        Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 1),
        exit(),
        mov64(0, 3),
        exit(),
    ];
    let vm = Interpreter::new(calls).unwrap();
    assert_eq!(run(&vm, &mut Refill { n: 0, refills: 0, asked: 0 }, 1), Ok(3));
    assert!(matches!(
        run(&vm, &mut Refill { n: 0, refills: 0, asked: 0 }, 0),
        Err(Fault::Budget { pc: 0, .. })
    ));
    let leaf =
        vec![Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 1), exit(), mov64(0, 4), exit()];
    let vm = Interpreter::new(leaf).unwrap();
    assert_eq!(run(&vm, &mut Refill { n: 0, refills: 0, asked: 0 }, 0), Ok(4));
}

#[test]
fn call_depth_is_bounded() {
    // Recursion: call itself forever.
    let p = vec![Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, -1), exit()];
    assert!(matches!(run(p), Err(Fault::CallDepth { .. })));
}

#[test]
fn local_call_preserves_callee_saved_registers_and_frames() {
    // main: r6 = 6; store 1 at fp-8; call f; r0 += r6; r0 += *(fp-8); exit
    // f: r6 = 100; store 50 at its own fp-8; r0 = 10; exit
    let p = vec![
        mov64(6, 6),
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -8, 1),
        Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 4),
        Insn::new(op::ALU64 | op::ADD | op::X, 0, 6, 0, 0),
        Insn::new(op::LDX | op::MEM | op::DW, 1, 10, -8, 0),
        Insn::new(op::ALU64 | op::ADD | op::X, 0, 1, 0, 0),
        exit(),
        mov64(6, 100),
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -8, 50),
        mov64(0, 10),
        exit(),
    ];
    assert_eq!(run(p), Ok(17));
}

#[test]
fn unknown_helper_and_unrelocated_map_are_refused() {
    let p = vec![Insn::new(op::JMP | op::CALL, 0, 0, 0, 1), exit()];
    assert_eq!(run(p), Err(Fault::UnknownHelper { pc: 0, id: 1 }));
    let [a, b] = Insn::lddw(1, op::PSEUDO_MAP_FD, 0);
    assert_eq!(
        Interpreter::new(vec![a, b, exit()]).unwrap_err(),
        LoadError::UnresolvedMapRef { pc: 0, src: 1 }
    );
}

#[test]
fn atomics_on_stack() {
    // *(u64*)(fp-8) = 5; r1 = 3; lock fetch add; r0 = r1 (old = 5) + *(fp-8) (8) = 13
    let p = vec![
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -8, 5),
        mov64(1, 3),
        Insn::new(op::STX | op::ATOMIC | op::DW, 10, 1, -8, op::ATOMIC_ADD | op::FETCH),
        Insn::new(op::LDX | op::MEM | op::DW, 0, 10, -8, 0),
        Insn::new(op::ALU64 | op::ADD | op::X, 0, 1, 0, 0),
        exit(),
    ];
    assert_eq!(run(p), Ok(13));
    // Misaligned atomic faults instead of invoking undefined behaviour.
    let p = vec![
        mov64(1, 3),
        Insn::new(op::STX | op::ATOMIC | op::DW, 10, 1, -12, op::ATOMIC_ADD),
        exit(),
    ];
    assert!(matches!(run(p), Err(Fault::Helper { pc: 1, .. })));
}
