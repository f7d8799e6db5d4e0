//! Untrusted input never panics: random structurally valid programs, with extreme
//! immediates and offsets, are verified or refused with an error, never a crash, and
//! the analysis ends within its limits.

mod common;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use spine_isa::{op, Insn};

/// Opcodes of every class, including the rare ones.
const CODES: &[u8] = &[
    op::ALU64 | op::ADD | op::K,
    op::ALU64 | op::ADD | op::X,
    op::ALU64 | op::SUB | op::X,
    op::ALU64 | op::MUL | op::K,
    op::ALU64 | op::DIV | op::X,
    op::ALU64 | op::MOD | op::K,
    op::ALU64 | op::OR | op::X,
    op::ALU64 | op::AND | op::K,
    op::ALU64 | op::LSH | op::X,
    op::ALU64 | op::RSH | op::K,
    op::ALU64 | op::ARSH | op::X,
    op::ALU64 | op::NEG,
    op::ALU64 | op::XOR | op::X,
    op::ALU64 | op::MOV | op::K,
    op::ALU64 | op::MOV | op::X,
    op::ALU | op::ADD | op::K,
    op::ALU | op::SUB | op::X,
    op::ALU | op::MOV | op::X,
    op::ALU | op::MOV | op::K,
    op::ALU | op::ARSH | op::K,
    op::ALU | op::END | op::TO_BE,
    op::ALU64 | op::END,
    op::ALU | op::DIV | op::X,
    op::LDX | op::MEM | op::B,
    op::LDX | op::MEM | op::H,
    op::LDX | op::MEM | op::W,
    op::LDX | op::MEM | op::DW,
    op::LDX | op::MEMSX | op::B,
    op::ST | op::MEM | op::W,
    op::ST | op::MEM | op::DW,
    op::STX | op::MEM | op::B,
    op::STX | op::MEM | op::DW,
    op::STX | op::ATOMIC | op::DW,
    op::STX | op::ATOMIC | op::W,
    op::JMP | op::JA,
    op::JMP | op::JEQ | op::K,
    op::JMP | op::JGT | op::X,
    op::JMP | op::JSGE | op::K,
    op::JMP | op::JSET | op::X,
    op::JMP32 | op::JLT | op::K,
    op::JMP32 | op::JNE | op::X,
    op::JMP | op::CALL,
    op::JMP | op::EXIT,
];

fn insn(c: (u8, u8, u8, i16, i32, u8)) -> Vec<Insn> {
    let (code, dst, src, off, imm, pick) = c;
    let code = CODES[code as usize % CODES.len()];
    let (dst, src) = (dst % 11, src % 11);
    let off = match pick % 4 {
        0 => off % 8,
        1 => -((off % 64).abs()),
        _ => off,
    };
    let imm = match pick % 5 {
        0 => imm % 64,
        1 => [0, 1, -1, i32::MIN, i32::MAX, 8, 16, 32, 64][(imm as u32 % 9) as usize],
        2 => [1, 2, 5, 6, 7, 12, 23, 28, 44, 51, 65, 69, 131, 132, 164, 181, 189]
            [(imm as u32 % 17) as usize],
        _ => imm,
    };
    let mut i = Insn::new(code, dst, src, off, imm);
    // Fields the encoding reserves, so most programs pass structural validation.
    let x = code & op::X != 0;
    match i.class() {
        op::ALU | op::ALU64 => {
            i.dst %= 10;
            if !x {
                i.src = 0;
            }
            i.off = match code & 0xf0 {
                op::DIV | op::MOD => off & 1,
                op::MOV if x && i.class() == op::ALU64 => {
                    [0, 0, 8, 16, 32][(off as u16 % 5) as usize]
                }
                _ => 0,
            };
            if code & 0xf0 == op::END {
                i.src = 0;
                i.imm = [16, 32, 64][(imm as u32 % 3) as usize];
            }
        }
        op::LDX => i.dst %= 10,
        op::ST => i.src = 0,
        op::JMP | op::JMP32 => match code & 0xf0 {
            op::JA | op::EXIT => {
                i.dst = 0;
                i.src = 0;
            }
            _ if !x => i.src = 0,
            _ => {}
        },
        _ => {}
    }
    if i.class() == op::JMP && i.code & 0xf0 == op::CALL {
        i.src = if pick % 7 == 0 { op::PSEUDO_CALL } else { 0 };
        i.dst = 0;
    }
    if i.class() == op::STX && i.code & 0xe0 == op::ATOMIC {
        i.imm = [op::ATOMIC_ADD, op::ATOMIC_OR | op::FETCH, op::ATOMIC_XCHG, op::ATOMIC_CMPXCHG]
            [(imm as u32 % 4) as usize];
    }
    if pick % 11 == 0 {
        let src = [op::PSEUDO_NONE, op::PSEUDO_MAP_FD, op::PSEUDO_MAP_VALUE, op::PSEUDO_FUNC]
            [(imm as u32 % 4) as usize];
        let v = if src == op::PSEUDO_NONE {
            imm as i64 as u64
        } else {
            (imm as u32 % 10) as u64 | ((off as u64 & 0x3f) << 32)
        };
        return Insn::lddw(dst.min(9), src, v).to_vec();
    }
    vec![i]
}

/// Points jumps and calls inside the program, mostly forward and never into an lddw.
fn fix_jumps(insns: &mut [Insn]) {
    let n = insns.len();
    let mut second = vec![false; n];
    let mut pc = 0;
    while pc < n {
        if insns[pc].is_lddw() && pc + 1 < n {
            second[pc + 1] = true;
            pc += 2;
        } else {
            pc += 1;
        }
    }
    for pc in 0..n {
        let i = insns[pc];
        if second[pc]
            || !matches!(i.class(), op::JMP | op::JMP32)
            || matches!(i.code & 0xf0, op::EXIT)
        {
            continue;
        }
        if i.code & 0xf0 == op::CALL && !i.is_local_call() {
            continue;
        }
        let mut t = (i64::from(i.off).unsigned_abs() as usize + pc + 1) % n;
        if i.off < 0 && i.off % 3 == 0 {
            t = pc.saturating_sub(i64::from(i.off).unsigned_abs() as usize % 8);
        }
        while second[t] {
            t = (t + 1) % n;
        }
        let rel = t as i64 - pc as i64 - 1;
        if i.is_local_call() || (i.class() == op::JMP32 && i.code & 0xf0 == op::JA) {
            insns[pc].imm = rel as i32;
        } else {
            insns[pc].off = rel as i16;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("ROBUSTNESS_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(3000),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_programs_never_panic(parts in proptest::collection::vec(any::<(u8, u8, u8, i16, i32, u8)>(), 1..40)) {
        let mut insns: Vec<Insn> = parts.into_iter().flat_map(insn).collect();
        insns.push(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
        fix_jumps(&mut insns);
        let _ = common::verify_insns(&insns);
    }
}

#[test]
fn the_generator_reaches_the_analysis() {
    // Most programs must get past structural validation, or the test above proves little.
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strat = proptest::collection::vec(any::<(u8, u8, u8, i16, i32, u8)>(), 1..40);
    let (mut valid, mut deep) = (0, 0);
    for _ in 0..500 {
        let parts = strat.new_tree(&mut runner).expect("value").current();
        let mut insns: Vec<Insn> = parts.into_iter().flat_map(insn).collect();
        insns.push(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
        fix_jumps(&mut insns);
        if spine_isa::validate(&insns).is_ok() {
            valid += 1;
            match common::verify_insns(&insns) {
                Ok(_) => deep += 1,
                Err(e) if e.pc > 3 => deep += 1,
                Err(_) => {}
            }
        }
    }
    eprintln!("{valid} of 500 valid, {deep} analysed past the first instructions");
    assert!(valid >= 200 && deep >= 50, "{valid} valid, {deep} deep");
}
