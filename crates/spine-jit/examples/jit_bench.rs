//! Interpreter vs JIT, ns per run on a few programs, and JIT compile time for a
//! 1,000-instruction program. Figures for the lead to quote; not a test.
//!
//! `cargo run --release -p spine-jit --example jit_bench`

use spine_isa::{op, Insn};
use spine_jit::{compile, JitOptions, NativeHelper};
use spine_vm::{CallAbort, Env, Interpreter, Memory, RunLimits, Stack};
use std::ffi::c_void;
use std::hint::black_box;
use std::time::{Duration, Instant};

fn i(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn::new(code, dst, src, off, imm)
}
const EXIT: Insn = Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0);

/// `r0 = sum of 0..n` in a counted loop (n back-edges).
fn sum_loop(n: i32) -> Vec<Insn> {
    vec![
        i(op::ALU64 | op::MOV | op::K, 0, 0, 0, 0),
        i(op::ALU64 | op::MOV | op::K, 1, 0, 0, 0),
        i(op::ALU64 | op::ADD | op::X, 0, 1, 0, 0),
        i(op::ALU64 | op::ADD | op::K, 1, 0, 0, 1),
        i(op::JMP | op::JLT | op::K, 1, 0, -3, n),
        EXIT,
    ]
}

/// A byte-wise checksum over a 64-byte stack buffer, stored then re-read (memory-bound).
fn stack_checksum() -> Vec<Insn> {
    let mut p = Vec::new();
    for k in 0..8 {
        p.push(i(op::ST | op::MEM | op::DW, 10, 0, -8 * (k + 1), 0x0102_0304 * (k as i32 + 1)));
    }
    p.extend([
        i(op::ALU64 | op::MOV | op::K, 0, 0, 0, 0),
        i(op::ALU64 | op::MOV | op::X, 2, 10, 0, 0),
        i(op::ALU64 | op::ADD | op::K, 2, 0, 0, -64),
        // loop: r3 = *(u8 *)r2; r0 = r0 * 31 + r3; r2++; if r2 != r10 goto loop
        i(op::LDX | op::MEM | op::B, 3, 2, 0, 0),
        i(op::ALU64 | op::MUL | op::K, 0, 0, 0, 31),
        i(op::ALU64 | op::ADD | op::X, 0, 3, 0, 0),
        i(op::ALU64 | op::ADD | op::K, 2, 0, 0, 1),
        i(op::JMP | op::JNE | op::X, 2, 10, -5, 0),
        EXIT,
    ]);
    p
}

/// 64 calls of helper 1 in a loop.
fn helper_loop() -> Vec<Insn> {
    vec![
        i(op::ALU64 | op::MOV | op::K, 6, 0, 0, 0),
        i(op::ALU64 | op::MOV | op::X, 1, 6, 0, 0),
        i(op::ALU64 | op::MOV | op::K, 2, 0, 0, 3),
        i(op::JMP | op::CALL, 0, 0, 0, 1),
        i(op::ALU64 | op::ADD | op::X, 7, 0, 0, 0),
        i(op::ALU64 | op::ADD | op::K, 6, 0, 0, 1),
        i(op::JMP | op::JLT | op::K, 6, 0, -6, 64),
        i(op::ALU64 | op::MOV | op::X, 0, 7, 0, 0),
        EXIT,
    ]
}

/// 64 bpf-to-bpf calls of a small function in a loop.
fn local_call_loop() -> Vec<Insn> {
    vec![
        i(op::ALU64 | op::MOV | op::K, 6, 0, 0, 0),
        i(op::ALU64 | op::MOV | op::K, 0, 0, 0, 0),
        i(op::ALU64 | op::MOV | op::X, 1, 6, 0, 0),
        i(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 3),
        i(op::ALU64 | op::ADD | op::K, 6, 0, 0, 1),
        i(op::JMP | op::JLT | op::K, 6, 0, -4, 64),
        EXIT,
        // f: r0 += r1 * 3
        i(op::ALU64 | op::MUL | op::K, 1, 0, 0, 3),
        i(op::ALU64 | op::ADD | op::X, 0, 1, 0, 0),
        EXIT,
    ]
}

/// ~1,000 instructions of mixed ALU, stack traffic and forward branches.
fn big_program() -> Vec<Insn> {
    mixed_program(false)
}

/// As [`big_program`], with a third of the loads through r1 (a context or packet
/// pointer): accesses only a verifier can prove, so unverified code checks each one.
fn mixed_program(ctx_loads: bool) -> Vec<Insn> {
    let mut p = Vec::new();
    let mut x: u32 = 12345;
    while p.len() < 1000 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        let r = (x >> 8) as u8 % 9;
        let r2 = (x >> 16) as u8 % 9;
        let slot = -8 * ((x >> 4) % 32 + 1) as i16;
        p.push(match x % 8 {
            0 => i(op::ALU64 | op::ADD | op::X, r, r2, 0, 0),
            1 => i(op::ALU64 | op::MUL | op::K, r, 0, 0, (x >> 3) as i32 & 0xff),
            2 => i(op::ALU | op::XOR | op::X, r, r2, 0, 0),
            3 => i(op::STX | op::MEM | op::DW, 10, r, slot, 0),
            4 if ctx_loads && x.is_multiple_of(3) => {
                i(op::LDX | op::MEM | op::W, r.max(2), 1, 4 * (x >> 9) as i16 % 64, 0)
            }
            4 => i(op::LDX | op::MEM | op::DW, r, 10, slot, 0),
            5 => i(op::JMP | op::JGT | op::X, r, r2, 2, 0),
            6 => i(op::ALU64 | op::RSH | op::K, r, 0, 0, (x >> 5) as i32 & 63),
            _ => i(op::ALU64 | op::MOV | op::K, r, 0, 0, (x >> 7) as i32),
        });
    }
    p.push(EXIT);
    p
}

#[derive(Default)]
struct Helpers;

impl Env for Helpers {
    fn call(&mut self, id: u32, a: [u64; 5], _: &mut Memory) -> Result<u64, CallAbort> {
        match id {
            1 => Ok(a[0].wrapping_mul(a[1]) ^ 7),
            _ => Err(CallAbort::Unknown),
        }
    }
}

extern "C" fn native_mul(a: u64, b: u64, _: u64, _: u64, _: u64, _: *mut c_void) -> u64 {
    a.wrapping_mul(b) ^ 7
}

/// Median over a few batches of the time per call of `f`.
fn ns_per_run(mut f: impl FnMut() -> u64) -> f64 {
    let mut batch = 1u32;
    loop {
        let t = Instant::now();
        for _ in 0..batch {
            black_box(f());
        }
        if t.elapsed() > Duration::from_millis(20) {
            break;
        }
        batch *= 2;
    }
    let mut samples: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..batch {
                black_box(f());
            }
            t.elapsed().as_nanos() as f64 / f64::from(batch)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[3]
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("compile-only") {
        // For profiling the compiler: `perf record .../jit_bench compile-only`.
        let big = mixed_program(true);
        for _ in 0..200 {
            black_box(compile(&big, &JitOptions::default()).expect("compiles"));
        }
        return;
    }
    let limits = RunLimits { points: 1 << 20 };
    // SAFETY: `native_mul` dereferences nothing and cannot unwind.
    let native = unsafe { NativeHelper::new(1, native_mul) };
    let programs: Vec<(&str, Vec<Insn>)> = vec![
        ("r0 = 1; exit", vec![i(op::ALU64 | op::MOV | op::K, 0, 0, 0, 1), EXIT]),
        ("sum loop, 1000 iterations", sum_loop(1000)),
        ("stack checksum, 64 bytes", stack_checksum()),
        ("64 helper calls", helper_loop()),
        ("64 bpf-to-bpf calls", local_call_loop()),
        ("1,000 insns straight-line", big_program()),
    ];
    println!(
        "{:<28} {:>12} {:>12} {:>12} {:>9}",
        "program", "interp ns", "jit ns", "jit+fast ns", "speed-up"
    );
    for (name, p) in &programs {
        let vm = Interpreter::new(p.clone()).expect("valid");
        let jit = compile(p, &JitOptions::default()).expect("compiles");
        // The "fast" variant: what a verified program gets (no bounds checks, native helper).
        let fast_opts = JitOptions {
            proven: Some(vec![true; p.len()]),
            native_helpers: vec![native],
            ..JitOptions::default()
        };
        let fast = compile(p, &fast_opts).expect("compiles");
        let (mut mem, mut stack) = (Memory::new(), Stack::new());
        let want = vm.run([0; 5], &mut mem, &mut stack, &mut Helpers, limits);
        assert_eq!(jit.run([0; 5], &mut mem, &mut stack, &mut Helpers, limits), want);
        assert_eq!(fast.run([0; 5], &mut mem, &mut stack, &mut Helpers, limits), want);
        let ti =
            ns_per_run(|| vm.run([0; 5], &mut mem, &mut stack, &mut Helpers, limits).unwrap_or(0));
        let tj =
            ns_per_run(|| jit.run([0; 5], &mut mem, &mut stack, &mut Helpers, limits).unwrap_or(0));
        let tf = ns_per_run(|| {
            fast.run([0; 5], &mut mem, &mut stack, &mut Helpers, limits).unwrap_or(0)
        });
        println!("{name:<28} {ti:>12.1} {tj:>12.1} {tf:>12.1} {:>8.1}x", ti / tj);
    }
    let big = mixed_program(true);
    let checked = JitOptions::default();
    let proven = JitOptions { proven: Some(vec![true; big.len()]), ..JitOptions::default() };
    for (what, opts) in [("unverified", &checked), ("verified", &proven)] {
        let mut times: Vec<Duration> = (0..15)
            .map(|_| {
                let t = Instant::now();
                black_box(compile(&big, opts).expect("compiles"));
                t.elapsed()
            })
            .collect();
        times.sort();
        let code = compile(&big, opts).expect("compiles").code_size();
        println!(
            "compile {} insns ({} loads via r1), {what}: median {:.2} ms (min {:.2} ms), {} bytes of code",
            big.len(),
            big.iter().filter(|i| i.class() == op::LDX && i.src == 1).count(),
            times[7].as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            code
        );
    }
}
