//! eBPF → Cranelift IR, one function for the whole program.
//!
//! The eleven BPF registers, the call depth and the budget countdown are Cranelift
//! variables, so the register allocator places them. bpf-to-bpf calls do not become
//! Cranelift calls: like the interpreter, a call saves r6-r9, r10 and a return-site
//! index in the run context's frame array, moves r10 down one frame and jumps; `exit`
//! at depth > 0 pops the frame and dispatches on the return-site index (`br_table`).
//! Registers are therefore shared between caller and callee exactly as in the
//! interpreter, including r0-r5 flowing both ways, and the depth limit, fault pcs and
//! progress points are the interpreter's by construction.
//!
//! Every slow path (memory check outside the stack, helper call, budget renewal, fault)
//! is a call to an `extern "C"` function of `runtime.rs`; when it reports failure the
//! code jumps to one shared abort block that returns, the outcome already recorded.

use crate::runtime::{
    self, ABORTED_TAIL, CB_ABORT, CB_DONE, FAULT_BAD_RETURN, FAULT_CALL_DEPTH,
    FAULT_MISALIGNED_ATOMIC, FAULT_NOT_A_CALLBACK, FRAME_WORDS, OFF_ABORTED, OFF_CB_ARGS,
    OFF_CB_NEXT_FN, OFF_CB_RET, OFF_CB_START_FN, OFF_FRAMES, OFF_HELPER_FN, OFF_MEM, OFF_POINTS,
    OFF_RT, OFF_STACK_BASE, OFF_STACK_TOP, OFF_TAIL_FN,
};
use crate::{InlineArrayLookup, JitOptions, NativeFn, NativeHelper};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::{I16, I32, I64, I8};
use cranelift_codegen::ir::{
    AbiParam, AtomicRmwOp, Block, BlockArg, Function, InstBuilder, JumpTableData, MemFlagsData,
    SigRef, Signature, Type, Value,
};
use cranelift_codegen::isa::{CallConv, TargetFrontendConfig, TargetIsa};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use spine_isa::{op, Insn, FP, MAX_CALL_FRAMES, NUM_REGS, STACK_SIZE};
use spine_vm::{is_callback_helper, AccessKind, Stack, FUNC_BASE};

/// `bpf_tail_call`'s helper id.
const TAIL_CALL: u32 = 12;

/// Instruction-level facts the translation needs before it starts.
struct Shape {
    /// Instruction starts a Cranelift block (jump target, fall-through after a branch,
    /// return site of a local call).
    leader: Vec<bool>,
    /// Block gets a predecessor only after its own instructions are emitted (a backward
    /// jump or call, or the return dispatch): it can be sealed only at the end.
    late: Vec<bool>,
    has_local_calls: bool,
    /// Some atomic fetch may overwrite r10 (validation allows it as the fetch register).
    r10_written: bool,
}

fn shape(insns: &[Insn]) -> Shape {
    let n = insns.len();
    let mut leader = vec![false; n];
    let mut late = vec![false; n];
    leader[0] = true;
    let mut has_local_calls = false;
    let mut r10_written = false;
    // Callbacks are entered from their helper's call site, before or after them.
    for e in spine_vm::callback_entries(insns) {
        leader[e] = true;
        late[e] = true;
    }
    let mut pc = 0;
    while pc < n {
        let i = insns[pc];
        if i.is_lddw() {
            pc += 2;
            continue;
        }
        if i.is_helper_call() && is_callback_helper(i.imm as u32) {
            // Runs its callback like a local call: the code after it is a new block,
            // reached once the helper is done.
            has_local_calls = true;
            if pc + 1 < n {
                leader[pc + 1] = true;
            }
        }
        if let Some(t) = i.branch_target(pc) {
            // Validated: inside the program.
            leader[t as usize] = true;
            late[t as usize] |= t as usize <= pc;
        }
        if i.class() == op::STX && i.code & 0xe0 == op::ATOMIC {
            r10_written |= i.src == FP && i.imm & op::FETCH != 0;
        }
        // Helper calls do not end a block; jumps, exits and local calls do.
        let helper = i.code & 0xf0 == op::CALL && !i.is_local_call();
        if matches!(i.class(), op::JMP | op::JMP32) && !helper {
            has_local_calls |= i.is_local_call();
            if pc + 1 < n {
                leader[pc + 1] = true;
                late[pc + 1] |= i.is_local_call();
            }
        }
        pc += 1;
    }
    Shape { leader, late, has_local_calls, r10_written }
}

/// Whether any instruction is a progress point: a backward jump, a counted bpf-to-bpf
/// call or a callback helper call. A program without one never reads its countdown.
fn has_progress_points(insns: &[Insn], call_points: &[bool]) -> bool {
    call_points.iter().any(|&c| c)
        || insns.iter().enumerate().any(|(pc, i)| {
            (i.is_helper_call() && is_callback_helper(i.imm as u32))
                || (!i.is_local_call() && i.branch_target(pc).is_some_and(|t| t as usize <= pc))
        })
}

/// The import signatures of the runtime functions.
struct Sigs {
    helper: SigRef,
    check: SigRef,
    fault: SigRef,
    budget: SigRef,
    native: SigRef,
    native_mem: SigRef,
    cb_start: SigRef,
    cb_next: SigRef,
    tail: SigRef,
}

fn sig(call_conv: CallConv, params: usize, ret: bool) -> Signature {
    let mut s = Signature::new(call_conv);
    s.params.extend((0..params).map(|_| AbiParam::new(I64)));
    if ret {
        s.returns.push(AbiParam::new(I64));
    }
    s
}

/// Signature of the generated entry point: `(ctx, r1..r5) -> r0`.
pub(crate) fn entry_signature(call_conv: CallConv) -> Signature {
    sig(call_conv, 6, true)
}

/// Flags for the run context (always valid, 8-byte aligned, never trapping).
fn ctx_flags() -> MemFlagsData {
    MemFlagsData::trusted()
}

/// Flags for the run-context fields read once at entry (stack bounds, initial countdown):
/// nothing writes them while the code runs, so the load is pure and Cranelift drops it
/// where the program never uses the value (no stack check, no progress point).
fn ctx_fixed_flags() -> MemFlagsData {
    MemFlagsData::trusted().with_readonly().with_can_move()
}

/// Flags for program memory: checked or proven in bounds, but of any alignment.
fn mem_flags() -> MemFlagsData {
    MemFlagsData::new().with_notrap()
}

/// Fills `func` (whose signature is [`entry_signature`]) with the translation of `insns`.
/// `insns` must already have passed `Interpreter::new`'s checks.
pub(crate) fn build(
    func: &mut Function,
    fctx: &mut FunctionBuilderContext,
    insns: &[Insn],
    opts: &JitOptions,
    isa: &dyn TargetIsa,
    trampoline: usize,
) {
    let call_conv = isa.default_call_conv();
    let shape = shape(insns);
    let mut b = FunctionBuilder::new(func, fctx);
    let sigs = Sigs {
        helper: b.import_signature(sig(call_conv, 7, true)),
        check: b.import_signature(sig(call_conv, 4, true)),
        fault: b.import_signature(sig(call_conv, 3, false)),
        budget: b.import_signature(crate::backend::trampoline_signature()),
        native: b.import_signature(sig(call_conv, 6, true)),
        native_mem: b.import_signature(sig(call_conv, 7, true)),
        cb_start: b.import_signature(sig(call_conv, 8, true)),
        cb_next: b.import_signature(sig(call_conv, 4, true)),
        tail: b.import_signature(sig(call_conv, 2, true)),
    };
    let reg: [Variable; NUM_REGS] = std::array::from_fn(|_| b.declare_var(I64));
    let depth = b.declare_var(I64);
    let points = b.declare_var(I64);

    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    b.seal_block(entry);
    let params = b.block_params(entry).to_vec();
    let ctx = params[0];
    let zero = b.ins().iconst(I64, 0);
    for r in [0, 6, 7, 8, 9] {
        b.def_var(reg[r], zero);
    }
    for (r, &v) in params[1..6].iter().enumerate() {
        b.def_var(reg[r + 1], v);
    }
    let stack_base = b.ins().load(I64, ctx_fixed_flags(), ctx, OFF_STACK_BASE);
    let top = b.ins().load(I64, ctx_fixed_flags(), ctx, OFF_STACK_TOP);
    b.def_var(reg[10], top);
    b.def_var(depth, zero);
    let call_points = spine_vm::counted_calls(insns);
    if opts.budget && has_progress_points(insns, &call_points) {
        let p = b.ins().load(I64, ctx_flags(), ctx, OFF_POINTS);
        b.def_var(points, p);
    } else {
        b.def_var(points, zero);
    }

    let blocks: Vec<Option<Block>> =
        shape.leader.iter().map(|&l| if l { Some(b.create_block()) } else { None }).collect();
    let first = blocks[0].expect("pc 0 is a leader");
    b.ins().jump(first, &[]);

    let abort = b.create_block();
    b.set_cold_block(abort);
    let dispatch = shape.has_local_calls.then(|| b.create_block());

    let mut t = Translator {
        b,
        insns,
        opts,
        reg,
        depth,
        points,
        trampoline,
        ctx,
        stack_base,
        blocks,
        abort,
        dispatch,
        late: shape.late,
        return_sites: Vec::new(),
        call_points,
        callbacks: spine_vm::callback_entries(insns),
        fp_exact: !shape.r10_written,
        known: [None; NUM_REGS],
        sigs,
        filled: true,
    };
    t.body();
    t.finish(isa.frontend_config());
}

struct Translator<'a> {
    b: FunctionBuilder<'a>,
    insns: &'a [Insn],
    opts: &'a JitOptions,
    reg: [Variable; NUM_REGS],
    depth: Variable,
    /// The budget countdown: progress points left before the next renewal.
    points: Variable,
    /// Address of the budget trampoline (`backend::budget_trampoline`), when budgeted.
    trampoline: usize,
    /// The run context (entry parameter, dominates every block).
    ctx: Value,
    /// Lowest stack address (loaded in the entry block).
    stack_base: Value,
    blocks: Vec<Option<Block>>,
    abort: Block,
    dispatch: Option<Block>,
    /// See [`Shape::late`].
    late: Vec<bool>,
    /// Where each local call returns to (the block of the pc after it, or a callback
    /// helper's continuation), indexed by return-site number.
    return_sites: Vec<Block>,
    /// Which bpf-to-bpf calls are progress points (the interpreter's analysis).
    call_points: Vec<bool>,
    /// The callback entries (`lddw PSEUDO_FUNC` targets), sorted.
    callbacks: Vec<usize>,
    /// r10 is always `stack top - 512 * depth` (only calls and returns change it).
    fp_exact: bool,
    /// Registers holding a compile-time constant since the start of the current block
    /// (for the inline array-map lookup).
    known: [Option<u64>; NUM_REGS],
    sigs: Sigs,
    /// The current block already ends in a terminator.
    filled: bool,
}

impl Translator<'_> {
    fn body(&mut self) {
        let n = self.insns.len();
        let mut pc = 0;
        while pc < n {
            if let Some(blk) = self.blocks[pc] {
                if !self.filled {
                    self.b.ins().jump(blk, &[]);
                }
                self.b.switch_to_block(blk);
                if !self.late[pc] {
                    // Every predecessor is emitted: sealing now spares the SSA builder
                    // (and the optimiser) a block parameter per variable.
                    self.b.seal_block(blk);
                }
                self.filled = false;
                self.known = [None; NUM_REGS];
            }
            // Every instruction after a terminator is a leader (see `shape`).
            debug_assert!(!self.filled);
            let i = self.insns[pc];
            self.insn(pc, i);
            pc += if i.is_lddw() { 2 } else { 1 };
        }
        if !self.filled {
            // Validation makes this unreachable (the last instruction is exit or ja);
            // kept so the IR is well formed whatever happens.
            self.fault(runtime::FAULT_BAD_RETURN, n);
        }
    }

    fn finish(mut self, config: TargetFrontendConfig) {
        self.b.switch_to_block(self.abort);
        let z = self.b.ins().iconst(I64, 0);
        self.b.ins().return_(&[z]);
        if let Some(d) = self.dispatch {
            self.b.switch_to_block(d);
            let depth = self.b.use_var(self.depth);
            let pop = self.b.create_block();
            let ret = self.b.create_block();
            self.b.ins().brif(depth, pop, &[], ret, &[]);
            self.enter(ret);
            let r0 = self.b.use_var(self.reg[0]);
            self.b.ins().return_(&[r0]);
            self.enter(pop);
            let d1 = self.b.ins().iadd_imm_s(depth, -1);
            self.b.def_var(self.depth, d1);
            let fa = self.frame_addr(d1);
            let idx = self.b.ins().load(I64, ctx_flags(), fa, OFF_FRAMES);
            for (k, r) in [6usize, 7, 8, 9, 10].into_iter().enumerate() {
                let v = self.b.ins().load(I64, ctx_flags(), fa, OFF_FRAMES + 8 * (k as i32 + 1));
                self.b.def_var(self.reg[r], v);
            }
            let bad = self.b.create_block();
            self.b.set_cold_block(bad);
            let targets: Vec<_> =
                self.return_sites.iter().map(|&blk| self.b.func.dfg.block_call(blk, &[])).collect();
            let def = self.b.func.dfg.block_call(bad, &[]);
            let jt = self.b.create_jump_table(JumpTableData::new(def, &targets));
            let idx32 = self.b.ins().ireduce(I32, idx);
            self.b.ins().br_table(idx32, jt);
            self.enter(bad);
            self.fault(FAULT_BAD_RETURN, 0);
        }
        self.b.seal_all_blocks();
        self.b.finalize(config);
    }

    /// Switches to a block whose predecessors are all emitted, and seals it.
    fn enter(&mut self, blk: Block) {
        self.b.switch_to_block(blk);
        self.b.seal_block(blk);
    }

    fn block(&self, pc: usize) -> Block {
        self.blocks[pc].expect("branch targets and fall-throughs are leaders")
    }

    fn get(&mut self, r: u8) -> Value {
        self.b.use_var(self.reg[r as usize])
    }

    fn set(&mut self, r: u8, v: Value) {
        self.b.def_var(self.reg[r as usize], v);
        self.known[r as usize] = None;
    }

    fn set_const(&mut self, r: u8, k: u64) {
        let v = self.b.ins().iconst(I64, k as i64);
        self.b.def_var(self.reg[r as usize], v);
        self.known[r as usize] = Some(k);
    }

    fn proven(&self, pc: usize) -> bool {
        self.opts.proven.as_ref().is_some_and(|p| p[pc])
    }

    /// True if the access needs no run-time check: proven by the verifier, or inside the
    /// current frame (`r10 + off` with `-512 <= off`, `off + len <= 0`) while r10 can only
    /// be a frame pointer, which at any depth below 8 lies inside the stack region,
    /// so `Memory::check` would pass.
    fn unchecked(&self, pc: usize, base_reg: u8, off: i16, len: usize) -> bool {
        let in_frame = base_reg == FP
            && self.fp_exact
            && i64::from(off) >= -(STACK_SIZE as i64)
            && i64::from(off) + len as i64 <= 0;
        in_frame || self.proven(pc)
    }

    fn pc_const(&mut self, pc: usize) -> Value {
        self.b.ins().iconst(I64, pc as i64)
    }

    fn fn_const(&mut self, addr: usize) -> Value {
        self.b.ins().iconst(I64, addr as i64)
    }

    /// Records a `FAULT_*` for instruction `pc` and leaves; ends the current block.
    fn fault(&mut self, code: u64, pc: usize) {
        let f = self.fn_const(runtime::jit_fault as *const () as usize);
        let c = self.b.ins().iconst(I64, code as i64);
        let p = self.pc_const(pc);
        self.b.ins().call_indirect(self.sigs.fault, f, &[self.ctx, c, p]);
        self.b.ins().jump(self.abort, &[]);
        self.filled = true;
    }

    /// Address of frame slot `depth` (add `OFF_FRAMES` and the word offset).
    fn frame_addr(&mut self, depth: Value) -> Value {
        let off = self.b.ins().imul_imm_s(depth, (FRAME_WORDS * 8) as i64);
        self.b.ins().iadd(self.ctx, off)
    }

    /// A progress point of instruction `pc`: the interpreter's `progress!`.
    fn progress(&mut self, pc: usize) {
        if !self.opts.budget {
            return;
        }
        // The countdown is a variable, so a register where one is free: a progress point
        // is a test, a branch and a decrement. Renewal goes through the trampoline, which
        // clobbers no register (a plain call here would make every value live across a
        // progress point spill around it, on the hot path too) and leaves its answer in
        // the run context.
        let p = self.b.use_var(self.points);
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        let cont = self.b.create_block();
        let pv = self.b.append_block_param(cont, I64);
        self.b.ins().brif(p, cont, &[BlockArg::Value(p)], slow, &[]);
        self.enter(slow);
        let f = self.fn_const(self.trampoline);
        let pcv = self.pc_const(pc);
        self.b.ins().call_indirect(self.sigs.budget, f, &[self.ctx, pcv]);
        let r = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_POINTS);
        let stop = self.b.ins().icmp_imm_s(IntCC::Equal, r, runtime::BUDGET_ABORT as i64);
        self.b.ins().brif(stop, self.abort, &[], cont, &[BlockArg::Value(r)]);
        self.enter(cont);
        let next = self.b.ins().iadd_imm_s(pv, -1);
        self.b.def_var(self.points, next);
    }

    /// Bounds check of `[addr, addr + len)` unless the verifier proved it. The stack is
    /// checked inline (it is always a registered, writable region); anything else calls
    /// `mem_check`, which applies `Memory::check` and records the fault.
    fn check(&mut self, pc: usize, addr: Value, len: usize, kind: AccessKind) {
        if self.proven(pc) {
            return;
        }
        let off = self.b.ins().isub(addr, self.stack_base);
        let fast = self.b.ins().icmp_imm_u(
            IntCC::UnsignedLessThanOrEqual,
            off,
            (Stack::BYTES - len) as i64,
        );
        let ok = self.b.create_block();
        let slow = self.b.create_block();
        self.b.set_cold_block(slow);
        self.b.ins().brif(fast, ok, &[], slow, &[]);
        self.enter(slow);
        let f = self.fn_const(runtime::mem_check as *const () as usize);
        let pcv = self.pc_const(pc);
        let write = u64::from(kind == AccessKind::Write);
        let meta = self.b.ins().iconst(I64, (len as u64 | write << 8) as i64);
        let call = self.b.ins().call_indirect(self.sigs.check, f, &[self.ctx, addr, pcv, meta]);
        let r = self.b.inst_results(call)[0];
        self.b.ins().brif(r, ok, &[], self.abort, &[]);
        self.enter(ok);
    }

    fn insn(&mut self, pc: usize, i: Insn) {
        match i.class() {
            op::ALU64 => self.alu64(i),
            op::ALU => self.alu32(i),
            op::JMP | op::JMP32 => self.jmp(pc, i),
            op::LD => {
                // `Interpreter::new` admitted only plain lddw and function addresses.
                let v = if i.src == op::PSEUDO_FUNC {
                    FUNC_BASE + (pc as i64 + 1 + i64::from(i.imm)) as u64
                } else {
                    let hi = self.insns.get(pc + 1).map_or(0, |n| n.imm as u32 as u64);
                    (i.imm as u32 as u64) | (hi << 32)
                };
                self.set_const(i.dst, v);
            }
            op::LDX => self.ldx(pc, i),
            op::ST => {
                let v = self.b.ins().iconst(I64, i64::from(i.imm));
                self.store(pc, i, v);
            }
            _ => {
                if i.code & 0xe0 == op::ATOMIC {
                    self.atomic(pc, i);
                } else {
                    let v = self.get(i.src);
                    self.store(pc, i, v);
                }
            }
        }
    }

    fn alu64(&mut self, i: Insn) {
        let x = i.code & op::X != 0;
        let o = i.code & 0xf0;
        if o == op::MOV && !x {
            self.set_const(i.dst, i64::from(i.imm) as u64);
            return;
        }
        let d = self.get(i.dst);
        let s = if x { self.get(i.src) } else { self.b.ins().iconst(I64, i64::from(i.imm)) };
        let r = match o {
            op::ADD => self.b.ins().iadd(d, s),
            op::SUB => self.b.ins().isub(d, s),
            op::MUL => self.b.ins().imul(d, s),
            op::OR => self.b.ins().bor(d, s),
            op::AND => self.b.ins().band(d, s),
            op::XOR => self.b.ins().bxor(d, s),
            op::LSH | op::RSH | op::ARSH => self.shift(o, d, s, x, i.imm, 63),
            op::NEG => self.b.ins().ineg(d),
            op::DIV | op::MOD => self.divmod(I64, i, d, s, x),
            op::MOV => match i.off {
                8 => self.sext(I8, I64, s),
                16 => self.sext(I16, I64, s),
                32 => self.sext(I32, I64, s),
                _ => s,
            },
            // ALU64|END: unconditional byte swap.
            _ => self.bswap(d, i.imm),
        };
        self.set(i.dst, r);
    }

    fn alu32(&mut self, i: Insn) {
        let x = i.code & op::X != 0;
        let o = i.code & 0xf0;
        if o == op::MOV && !x {
            self.set_const(i.dst, u64::from(i.imm as u32));
            return;
        }
        let d64 = self.get(i.dst);
        if o == op::END {
            let r = if i.code & op::TO_BE != 0 {
                self.bswap(d64, i.imm)
            } else {
                match i.imm {
                    16 => self.zext(I16, d64),
                    32 => self.zext(I32, d64),
                    _ => d64,
                }
            };
            self.set(i.dst, r);
            return;
        }
        let d = self.b.ins().ireduce(I32, d64);
        let s = if x {
            let s64 = self.get(i.src);
            self.b.ins().ireduce(I32, s64)
        } else {
            self.b.ins().iconst(I32, i64::from(i.imm as u32))
        };
        let r = match o {
            op::ADD => self.b.ins().iadd(d, s),
            op::SUB => self.b.ins().isub(d, s),
            op::MUL => self.b.ins().imul(d, s),
            op::OR => self.b.ins().bor(d, s),
            op::AND => self.b.ins().band(d, s),
            op::XOR => self.b.ins().bxor(d, s),
            op::LSH | op::RSH | op::ARSH => self.shift(o, d, s, x, i.imm, 31),
            op::NEG => self.b.ins().ineg(d),
            op::DIV | op::MOD => self.divmod(I32, i, d, s, x),
            // MOV (register form; the immediate form returned above).
            _ => match i.off {
                8 => self.sext(I8, I32, s),
                16 => self.sext(I16, I32, s),
                _ => s,
            },
        };
        let r = self.b.ins().uextend(I64, r);
        self.set(i.dst, r);
    }

    /// Shift with the amount masked to the width, as RFC 9669 requires.
    fn shift(&mut self, o: u8, d: Value, s: Value, x: bool, imm: i32, mask: i64) -> Value {
        let amt = if x {
            self.b.ins().band_imm_s(s, mask)
        } else {
            let ty = self.b.func.dfg.value_type(d);
            self.b.ins().iconst(ty, i64::from(imm) & mask)
        };
        match o {
            op::LSH => self.b.ins().ishl(d, amt),
            op::RSH => self.b.ins().ushr(d, amt),
            _ => self.b.ins().sshr(d, amt),
        }
    }

    /// Sign-extends the low `from` bits of `v` to `to`.
    fn sext(&mut self, from: Type, to: Type, v: Value) -> Value {
        let n = self.b.ins().ireduce(from, v);
        self.b.ins().sextend(to, n)
    }

    /// Zero-extends the low `from` bits of the 64-bit `v`.
    fn zext(&mut self, from: Type, v: Value) -> Value {
        let n = self.b.ins().ireduce(from, v);
        self.b.ins().uextend(I64, n)
    }

    /// Byte swap of the low `width` bits of the 64-bit `v`, zero-extended.
    fn bswap(&mut self, v: Value, width: i32) -> Value {
        match width {
            16 | 32 => {
                let ty = if width == 16 { I16 } else { I32 };
                let n = self.b.ins().ireduce(ty, v);
                let s = self.b.ins().bswap(n);
                self.b.ins().uextend(I64, s)
            }
            _ => self.b.ins().bswap(v),
        }
    }

    /// Division and modulo without traps: x / 0 = 0, x % 0 = x, and signed MIN / -1
    /// wraps (= -MIN), MIN % -1 = 0, as the interpreter computes them.
    fn divmod(&mut self, ty: Type, i: Insn, d: Value, s: Value, x: bool) -> Value {
        let signed = i.off == 1;
        let is_mod = i.code & 0xf0 == op::MOD;
        let mask = |v: i64| if ty == I32 { i64::from(v as u32) } else { v };
        if !x {
            // Constant divisor: decide the special cases now.
            return if i.imm == 0 {
                if is_mod {
                    d
                } else {
                    self.b.ins().iconst(ty, 0)
                }
            } else if signed && i.imm == -1 {
                if is_mod {
                    self.b.ins().iconst(ty, 0)
                } else {
                    self.b.ins().ineg(d)
                }
            } else {
                match (signed, is_mod) {
                    (false, false) => self.b.ins().udiv(d, s),
                    (false, true) => self.b.ins().urem(d, s),
                    (true, false) => self.b.ins().sdiv(d, s),
                    (true, true) => self.b.ins().srem(d, s),
                }
            };
        }
        let zero = self.b.ins().iconst(ty, 0);
        let one = self.b.ins().iconst(ty, 1);
        let is_zero = self.b.ins().icmp(IntCC::Equal, s, zero);
        if !signed {
            let safe = self.b.ins().select(is_zero, one, s);
            let q = if is_mod { self.b.ins().urem(d, safe) } else { self.b.ins().udiv(d, safe) };
            let on_zero = if is_mod { d } else { zero };
            return self.b.ins().select(is_zero, on_zero, q);
        }
        let minus_one = self.b.ins().iconst(ty, mask(-1));
        let is_m1 = self.b.ins().icmp(IntCC::Equal, s, minus_one);
        let bad = self.b.ins().bor(is_zero, is_m1);
        let safe = self.b.ins().select(bad, one, s);
        let q = if is_mod { self.b.ins().srem(d, safe) } else { self.b.ins().sdiv(d, safe) };
        let on_m1 = if is_mod { zero } else { self.b.ins().ineg(d) };
        let on_zero = if is_mod { d } else { zero };
        let r = self.b.ins().select(is_m1, on_m1, q);
        self.b.ins().select(is_zero, on_zero, r)
    }

    fn jmp(&mut self, pc: usize, i: Insn) {
        let class = i.class();
        match i.code & 0xf0 {
            op::JA => {
                let t = i.branch_target(pc).expect("ja has a target") as usize;
                if t <= pc {
                    self.progress(pc);
                }
                let blk = self.block(t);
                self.b.ins().jump(blk, &[]);
                self.filled = true;
            }
            op::EXIT if class == op::JMP => {
                match self.dispatch {
                    Some(d) => {
                        self.b.ins().jump(d, &[]);
                    }
                    None => {
                        let r0 = self.get(0);
                        self.b.ins().return_(&[r0]);
                    }
                }
                self.filled = true;
            }
            op::CALL if class == op::JMP => {
                if i.code & op::X == 0 && i.src == op::PSEUDO_CALL {
                    self.local_call(pc, i);
                } else if i.code & op::X != 0 {
                    self.helper_call(pc, None, i.dst);
                } else if is_callback_helper(i.imm as u32) {
                    self.callback_call(pc, i.imm as u32);
                } else {
                    self.helper_call(pc, Some(i.imm as u32), 0);
                }
            }
            o => self.cond_jump(pc, i, o),
        }
    }

    fn cond_jump(&mut self, pc: usize, i: Insn, o: u8) {
        let x = i.code & op::X != 0;
        let (a, b) = if i.class() == op::JMP32 {
            let a64 = self.get(i.dst);
            let a = self.b.ins().ireduce(I32, a64);
            let b = if x {
                let b64 = self.get(i.src);
                self.b.ins().ireduce(I32, b64)
            } else {
                self.b.ins().iconst(I32, i64::from(i.imm as u32))
            };
            (a, b)
        } else {
            let a = self.get(i.dst);
            let b = if x { self.get(i.src) } else { self.b.ins().iconst(I64, i64::from(i.imm)) };
            (a, b)
        };
        let cc = match o {
            op::JEQ => IntCC::Equal,
            op::JNE => IntCC::NotEqual,
            op::JGT => IntCC::UnsignedGreaterThan,
            op::JGE => IntCC::UnsignedGreaterThanOrEqual,
            op::JLT => IntCC::UnsignedLessThan,
            op::JLE => IntCC::UnsignedLessThanOrEqual,
            op::JSGT => IntCC::SignedGreaterThan,
            op::JSGE => IntCC::SignedGreaterThanOrEqual,
            op::JSLT => IntCC::SignedLessThan,
            op::JSLE => IntCC::SignedLessThanOrEqual,
            // JSET
            _ => IntCC::NotEqual,
        };
        let c = if o == op::JSET {
            let m = self.b.ins().band(a, b);
            self.b.ins().icmp_imm_u(IntCC::NotEqual, m, 0)
        } else {
            self.b.ins().icmp(cc, a, b)
        };
        let t = i.branch_target(pc).expect("conditional jump has a target") as usize;
        let fall = self.block(pc + 1);
        let target = self.block(t);
        if t == pc + 1 {
            self.b.ins().jump(fall, &[]);
        } else if t <= pc && self.opts.budget {
            let taken = self.b.create_block();
            self.b.ins().brif(c, taken, &[], fall, &[]);
            self.enter(taken);
            self.progress(pc);
            self.b.ins().jump(target, &[]);
        } else {
            self.b.ins().brif(c, target, &[], fall, &[]);
        }
        self.filled = true;
    }

    fn local_call(&mut self, pc: usize, i: Insn) {
        if self.call_points[pc] {
            self.progress(pc);
        }
        let depth = self.b.use_var(self.depth);
        let ok = self.b.create_block();
        let deep = self.b.create_block();
        self.b.set_cold_block(deep);
        let fits =
            self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, depth, (MAX_CALL_FRAMES - 1) as i64);
        self.b.ins().brif(fits, ok, &[], deep, &[]);
        self.enter(deep);
        self.fault(FAULT_CALL_DEPTH, pc);
        self.enter(ok);
        self.filled = false;
        let site = self.return_sites.len();
        let ret = self.block(pc + 1);
        self.return_sites.push(ret);
        let fa = self.frame_addr(depth);
        let idx = self.b.ins().iconst(I64, site as i64);
        self.b.ins().store(ctx_flags(), idx, fa, OFF_FRAMES);
        for (k, r) in [6u8, 7, 8, 9, 10].into_iter().enumerate() {
            let v = self.get(r);
            self.b.ins().store(ctx_flags(), v, fa, OFF_FRAMES + 8 * (k as i32 + 1));
        }
        let d1 = self.b.ins().iadd_imm_s(depth, 1);
        self.b.def_var(self.depth, d1);
        let fp = self.get(10);
        let fp = self.b.ins().iadd_imm_s(fp, -(STACK_SIZE as i64));
        self.set(10, fp);
        let t = i.branch_target(pc).expect("local call has a target") as usize;
        let blk = self.block(t);
        self.b.ins().jump(blk, &[]);
        self.filled = true;
    }

    /// A static call of a callback helper (`bpf_loop`, `bpf_for_each_map_elem`): the
    /// interpreter's protocol. `callback_start` answers; on `CB_CALL` the callback r2
    /// names is entered as a local call (a progress point of `pc`, the depth limit)
    /// whose return site asks `callback_next`, which answers the same way. Ends the
    /// block; the helper's result reaches the block of `pc + 1` in r0.
    fn callback_call(&mut self, pc: usize, id: u32) {
        let id_pc = self.b.ins().iconst(I64, (u64::from(id) | (pc as u64) << 32) as i64);
        let func = self.get(2);
        let depth = self.b.use_var(self.depth);
        let mut args = vec![self.ctx, id_pc, depth];
        for r in 1..=5 {
            args.push(self.get(r));
        }
        let f = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_CB_START_FN);
        let call = self.b.ins().call_indirect(self.sigs.cb_start, f, &args);
        let status = self.b.inst_results(call)[0];
        let select = self.b.create_block();
        self.answer(pc, status, select);
        // Which callback: one of the program's, or a fault.
        self.enter(select);
        let entries = self.callbacks.clone();
        let mut calls = Vec::with_capacity(entries.len());
        for &e in &entries {
            let call_blk = self.b.create_block();
            let next = self.b.create_block();
            let is = self.b.ins().icmp_imm_u(IntCC::Equal, func, (FUNC_BASE + e as u64) as i64);
            self.b.ins().brif(is, call_blk, &[], next, &[]);
            self.enter(next);
            calls.push((e, call_blk));
        }
        self.fault(FAULT_NOT_A_CALLBACK | u64::from(id) << 8, pc);
        for (e, call_blk) in calls {
            // Entered from the selection and from the return site below: sealed at the end.
            self.b.switch_to_block(call_blk);
            self.filled = false;
            self.progress(pc);
            let depth = self.b.use_var(self.depth);
            let ok = self.b.create_block();
            let deep = self.b.create_block();
            self.b.set_cold_block(deep);
            let fits = self.b.ins().icmp_imm_u(
                IntCC::UnsignedLessThan,
                depth,
                (MAX_CALL_FRAMES - 1) as i64,
            );
            self.b.ins().brif(fits, ok, &[], deep, &[]);
            self.enter(deep);
            self.fault(FAULT_CALL_DEPTH, pc);
            self.enter(ok);
            let ret = self.b.create_block();
            let site = self.return_sites.len();
            self.return_sites.push(ret);
            let fa = self.frame_addr(depth);
            let idx = self.b.ins().iconst(I64, site as i64);
            self.b.ins().store(ctx_flags(), idx, fa, OFF_FRAMES);
            for (k, r) in [6u8, 7, 8, 9, 10].into_iter().enumerate() {
                let v = self.get(r);
                self.b.ins().store(ctx_flags(), v, fa, OFF_FRAMES + 8 * (k as i32 + 1));
            }
            let d1 = self.b.ins().iadd_imm_s(depth, 1);
            self.b.def_var(self.depth, d1);
            for r in 1..=5u8 {
                let v = self.b.ins().load(
                    I64,
                    ctx_flags(),
                    self.ctx,
                    OFF_CB_ARGS + 8 * (i32::from(r) - 1),
                );
                self.set(r, v);
            }
            let fp = self.get(10);
            let fp = self.b.ins().iadd_imm_s(fp, -(STACK_SIZE as i64));
            self.set(10, fp);
            let entry = self.block(e);
            self.b.ins().jump(entry, &[]);
            // The return site: the dispatch popped the frame (depth, r6-r10 restored).
            self.b.switch_to_block(ret);
            let depth = self.b.use_var(self.depth);
            let r0 = self.get(0);
            // Reached through the dispatch, which the call site does not dominate.
            let id_pc = self.b.ins().iconst(I64, (u64::from(id) | (pc as u64) << 32) as i64);
            let f = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_CB_NEXT_FN);
            let call =
                self.b.ins().call_indirect(self.sigs.cb_next, f, &[self.ctx, id_pc, depth, r0]);
            let status = self.b.inst_results(call)[0];
            self.answer(pc, status, call_blk);
        }
        self.filled = true;
    }

    /// Acts on a `CB_*` answer: done (r0 from the run context, on to `pc + 1`), abort,
    /// or on to `call` (a callback to run). Ends the current block.
    fn answer(&mut self, pc: usize, status: Value, call: Block) {
        let done = self.b.create_block();
        let not_done = self.b.create_block();
        let is_done = self.b.ins().icmp_imm_u(IntCC::Equal, status, CB_DONE as i64);
        self.b.ins().brif(is_done, done, &[], not_done, &[]);
        self.enter(done);
        let r0 = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_CB_RET);
        self.set(0, r0);
        let cont = self.block(pc + 1);
        self.b.ins().jump(cont, &[]);
        self.enter(not_done);
        let stop = self.b.ins().icmp_imm_u(IntCC::Equal, status, CB_ABORT as i64);
        self.b.ins().brif(stop, self.abort, &[], call, &[]);
    }

    /// A helper call, by static id or (callx) by the id in register `id_reg`.
    fn helper_call(&mut self, pc: usize, id: Option<u32>, id_reg: u8) {
        if let Some(id) = id {
            // Inline expansion first: it beats any call, native or not.
            let handle = self.known[1];
            if let Some(l) = self
                .opts
                .inline_array_lookups
                .iter()
                .find(|l| l.helper_id == id && Some(l.map_handle) == handle)
            {
                if self.proven(pc) {
                    self.inline_lookup(*l);
                    return;
                }
            }
            if let Some(h) = self.opts.native_helpers.iter().find(|h| h.id == id) {
                self.native_call(*h);
                return;
            }
        }
        let id_pc = match id {
            Some(id) => self.b.ins().iconst(I64, (u64::from(id) | (pc as u64) << 32) as i64),
            None => {
                let r = self.get(id_reg);
                let low = self.zext(I32, r);
                self.b.ins().bor_imm_s(low, ((pc as u64) << 32) as i64)
            }
        };
        let mut args = vec![self.ctx, id_pc];
        for r in 1..=5 {
            args.push(self.get(r));
        }
        let f = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_HELPER_FN);
        let call = self.b.ins().call_indirect(self.sigs.helper, f, &args);
        let v = self.b.inst_results(call)[0];
        let aborted = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_ABORTED);
        let cont = self.b.create_block();
        // `bpf_tail_call` (or a callx, which may be one) in a program with callees: a
        // tail call made in a callee replaces the callee's frame.
        let may_tail = id.is_none_or(|id| id == TAIL_CALL);
        match self.dispatch {
            Some(dispatch) if may_tail => {
                let stopped = self.b.create_block();
                self.b.set_cold_block(stopped);
                self.b.ins().brif(aborted, stopped, &[], cont, &[]);
                self.enter(stopped);
                let depth = self.b.use_var(self.depth);
                let tail = self.b.ins().icmp_imm_u(IntCC::Equal, aborted, ABORTED_TAIL as i64);
                let in_callee = self.b.ins().icmp_imm_u(IntCC::NotEqual, depth, 0);
                let both = self.b.ins().band(tail, in_callee);
                let run = self.b.create_block();
                self.b.ins().brif(both, run, &[], self.abort, &[]);
                self.enter(run);
                let f = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_TAIL_FN);
                let pcv = self.pc_const(pc);
                let call = self.b.ins().call_indirect(self.sigs.tail, f, &[self.ctx, pcv]);
                let r0 = self.b.inst_results(call)[0];
                let failed = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_ABORTED);
                let ret = self.b.create_block();
                self.b.ins().brif(failed, self.abort, &[], ret, &[]);
                self.enter(ret);
                // The target's r0 leaves the callee's frame, as its `exit` would.
                self.set(0, r0);
                self.b.ins().jump(dispatch, &[]);
            }
            _ => {
                self.b.ins().brif(aborted, self.abort, &[], cont, &[]);
            }
        }
        self.enter(cont);
        self.set(0, v);
    }

    fn native_call(&mut self, h: NativeHelper) {
        let mut args: Vec<Value> = (1..=5).map(|r| self.get(r)).collect();
        args.push(self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_RT));
        let (sig, addr) = match h.f {
            NativeFn::Plain(f) => (self.sigs.native, f as *const () as usize),
            NativeFn::WithMemory(f) => {
                args.push(self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_MEM));
                (self.sigs.native_mem, f as *const () as usize)
            }
        };
        let f = self.fn_const(addr);
        let call = self.b.ins().call_indirect(sig, f, &args);
        let v = self.b.inst_results(call)[0];
        self.set(0, v);
    }

    /// `r0 = key < max_entries ? base + key * value_size : 0` with `key = *(u32 *)r2`:
    /// the kernel's array-map lookup, without the call. Only used where the verifier
    /// proved the key pointer, so it cannot fault.
    fn inline_lookup(&mut self, l: InlineArrayLookup) {
        let key_ptr = self.get(2);
        let key = self.b.ins().uload32(mem_flags(), key_ptr, 0);
        let inb = self.b.ins().icmp_imm_u(IntCC::UnsignedLessThan, key, i64::from(l.max_entries));
        let off = self.b.ins().imul_imm_s(key, i64::from(l.value_size));
        let mut addr = self.b.ins().iadd_imm_s(off, l.base as i64);
        if let Some(pc) = l.per_cpu {
            // This worker's copy: `base + cpu * cpu_stride`, the CPU read from the runtime.
            let rt = self.b.ins().load(I64, ctx_flags(), self.ctx, OFF_RT);
            let cpu = self.b.ins().load(I64, ctx_flags(), rt, pc.cpu_offset);
            let cpu_off = self.b.ins().imul_imm_s(cpu, pc.cpu_stride as i64);
            addr = self.b.ins().iadd(addr, cpu_off);
        }
        let zero = self.b.ins().iconst(I64, 0);
        let r = self.b.ins().select(inb, addr, zero);
        self.set(0, r);
    }

    /// The address of a memory operand and, for proven accesses, a displacement to
    /// fold into the instruction.
    fn operand(
        &mut self,
        pc: usize,
        base_reg: u8,
        off: i16,
        len: usize,
        kind: AccessKind,
    ) -> (Value, i32) {
        let base = self.get(base_reg);
        if self.unchecked(pc, base_reg, off, len) {
            return (base, i32::from(off));
        }
        let addr = self.b.ins().iadd_imm_s(base, i64::from(off));
        self.check(pc, addr, len, kind);
        (addr, 0)
    }

    fn ldx(&mut self, pc: usize, i: Insn) {
        let size = op::size_bytes(i.code);
        let (p, off) = self.operand(pc, i.src, i.off, size, AccessKind::Read);
        let f = mem_flags();
        let sx = i.code & 0xe0 == op::MEMSX;
        let ins = self.b.ins();
        let v = match (size, sx) {
            (1, false) => ins.uload8(I64, f, p, off),
            (2, false) => ins.uload16(I64, f, p, off),
            (4, false) => ins.uload32(f, p, off),
            (1, true) => ins.sload8(I64, f, p, off),
            (2, true) => ins.sload16(I64, f, p, off),
            (4, true) => ins.sload32(f, p, off),
            _ => ins.load(I64, f, p, off),
        };
        self.set(i.dst, v);
    }

    fn store(&mut self, pc: usize, i: Insn, v: Value) {
        let size = op::size_bytes(i.code);
        let (p, off) = self.operand(pc, i.dst, i.off, size, AccessKind::Write);
        let f = mem_flags();
        let ins = self.b.ins();
        match size {
            1 => ins.istore8(f, v, p, off),
            2 => ins.istore16(f, v, p, off),
            4 => ins.istore32(f, v, p, off),
            _ => ins.store(f, v, p, off),
        };
    }

    fn atomic(&mut self, pc: usize, i: Insn) {
        let size = op::size_bytes(i.code);
        let base = self.get(i.dst);
        let addr = self.b.ins().iadd_imm_s(base, i64::from(i.off));
        if !self.unchecked(pc, i.dst, i.off, size) {
            self.check(pc, addr, size, AccessKind::Write);
        }
        let low = self.b.ins().band_imm_s(addr, size as i64 - 1);
        let ok = self.b.create_block();
        let bad = self.b.create_block();
        self.b.set_cold_block(bad);
        self.b.ins().brif(low, bad, &[], ok, &[]);
        self.enter(bad);
        self.fault(FAULT_MISALIGNED_ATOMIC, pc);
        self.enter(ok);
        self.filled = false;

        let ty = if size == 8 { I64 } else { I32 };
        let narrow = |t: &mut Self, v: Value| if ty == I32 { t.b.ins().ireduce(I32, v) } else { v };
        let widen = |t: &mut Self, v: Value| if ty == I32 { t.b.ins().uextend(I64, v) } else { v };
        let f = MemFlagsData::trusted();
        let src64 = self.get(i.src);
        let src = narrow(self, src64);
        if i.imm == op::ATOMIC_CMPXCHG {
            let r0 = self.get(0);
            let expected = narrow(self, r0);
            let old = self.b.ins().atomic_cas(f, addr, expected, src);
            let old = widen(self, old);
            self.set(0, old);
            return;
        }
        let rmw = match i.imm {
            op::ATOMIC_XCHG => AtomicRmwOp::Xchg,
            x => match x & !op::FETCH {
                op::ATOMIC_ADD => AtomicRmwOp::Add,
                op::ATOMIC_OR => AtomicRmwOp::Or,
                op::ATOMIC_AND => AtomicRmwOp::And,
                _ => AtomicRmwOp::Xor,
            },
        };
        let old = self.b.ins().atomic_rmw(ty, f, rmw, addr, src);
        if i.imm & op::FETCH != 0 {
            let old = widen(self, old);
            self.set(i.src, old);
        }
    }
}
