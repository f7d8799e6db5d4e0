use super::*;
use crate::validate;
use proptest::prelude::*;

fn round_trip(p: &[Insn]) -> Vec<Insn> {
    let text = disassemble(p);
    assemble(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn prints_the_suite_syntax() {
    let src = "\
mov32 %r0, 0
mov %r1, -1
add %r0, %r1
sdiv32 %r1, 0x80000000
smod %r1, %r2
neg %r0
movsx832 %r0, %r1
movsx3264 %r0, %r1
be16 %r0
le64 %r0
bswap32 %r0
lddw %r0, 0x1122334455667788
lddw %r1, map[3]
lddw %r2, map_value[4]+16
lddw %r2, map_value[4]
ldxh %r0, [%r1+2]
ldxsw %r0, [%r10-4]
stdw [%r10-8], 0x11223344
stxb [%r1], %r2
lock add [%r10-8], %r1
lock fetch and32 [%r10-8], %r1
lock xchg [%r10-8], %r1
lock cmpxchg32 [%r10-8], %r1
ldabsh 12
ldindw %r1, 4
jeq %r1, 0x80000000, +1
jsle32 %r1, %r2, -3
ja +0
ja32 -2
call 5
call local +3
call %r2
.insn 0x00000000000000ff
exit
";
    let p = assemble(src).unwrap();
    assert_eq!(disassemble(&p), src);
}

#[test]
fn lines_that_cannot_be_spelled_fall_back_to_raw() {
    // ALU add with a nonzero offset: reserved, so no mnemonic says it.
    let odd = Insn::new(op::ALU64 | op::ADD | op::K, 1, 0, 7, 2);
    assert_eq!(disassemble_one(&[odd], 0), ".insn 0x0000000200070107");
    // lddw with its second slot missing, and with a malformed second slot.
    let [a, _] = Insn::lddw(0, 0, 5);
    assert!(disassemble_one(&[a], 0).starts_with(".insn "));
    let bad = [a, Insn::new(0x95, 0, 0, 0, 0)];
    assert_eq!(disassemble(&bad).lines().count(), 2);
    assert_eq!(round_trip(&bad), bad);
    // exit with imm set, JMP32|CALL, a map reference with a stray offset.
    for i in [Insn::new(0x95, 0, 0, 0, 1), Insn::new(0x86, 0, 0, 0, 1)] {
        assert!(disassemble_one(&[i], 0).starts_with(".insn "), "{i:?}");
    }
    let m = Insn::lddw(1, op::PSEUDO_MAP_FD, 3 | 1 << 32);
    assert_eq!(round_trip(&m), m);
    assert_eq!(disassemble_one(&[], 0), "");
}

#[test]
fn disassemble_one_covers_both_lddw_slots() {
    let p = assemble("lddw %r3, 0xfeed\nexit").unwrap();
    assert_eq!(disassemble_one(&p, 0), "lddw %r3, 0xfeed");
    assert_eq!(disassemble_one(&p, 2), "exit");
}

/// One structurally valid instruction (or lddw pair) and, for branches, which field
/// takes the distance; `sel` later picks the target.
#[derive(Debug, Clone)]
struct Piece {
    slots: Vec<Insn>,
    branch: Option<bool>, // Some(true): distance in imm; Some(false): in off
    sel: usize,
}

fn piece() -> impl Strategy<Value = Piece> {
    let w = 0u8..10; // writable registers
    let r = 0u8..11;
    let plain = |i: Insn| Piece { slots: vec![i], branch: None, sel: 0 };
    let alu_ops = [
        op::ADD,
        op::SUB,
        op::MUL,
        op::DIV,
        op::OR,
        op::AND,
        op::LSH,
        op::RSH,
        op::MOD,
        op::XOR,
        op::MOV,
        op::ARSH,
    ];
    let conds = [
        op::JEQ,
        op::JGT,
        op::JGE,
        op::JSET,
        op::JNE,
        op::JSGT,
        op::JSGE,
        op::JLT,
        op::JLE,
        op::JSLT,
        op::JSLE,
    ];
    let sizes = [op::B, op::H, op::W, op::DW];
    let atomics = [0x00, 0x01, 0x40, 0x41, 0x50, 0x51, 0xa0, 0xa1, 0xe1, 0xf1];
    prop_oneof![
        // ALU / ALU64 with K or X; div/mod may be signed; mov X may sign-extend.
        (
            prop::sample::select(vec![op::ALU, op::ALU64]),
            prop::sample::select(alu_ops.to_vec()),
            any::<bool>(),
            w.clone(),
            r.clone(),
            any::<i32>(),
            0usize..4
        )
            .prop_map(move |(class, o, x, d, s, imm, k)| {
                let off = match o {
                    op::DIV | op::MOD => (k % 2) as i16,
                    op::MOV if x => [0, 8, 16, 32][if class == op::ALU { k % 3 } else { k }],
                    _ => 0,
                };
                let (src, imm) = if x { (s, 0) } else { (0, imm) };
                plain(Insn::new(class | o | if x { op::X } else { op::K }, d, src, off, imm))
            }),
        (prop::sample::select(vec![op::ALU, op::ALU64]), w.clone())
            .prop_map(move |(class, d)| plain(Insn::new(class | op::NEG, d, 0, 0, 0))),
        (prop::sample::select(vec![0xd4u8, 0xdc, 0xd7]), w.clone(), 0usize..3)
            .prop_map(move |(code, d, k)| plain(Insn::new(code, d, 0, 0, [16, 32, 64][k]))),
        // Conditional jumps, ja, ja32, local calls.
        (
            prop::sample::select(vec![op::JMP, op::JMP32]),
            prop::sample::select(conds.to_vec()),
            any::<bool>(),
            r.clone(),
            r.clone(),
            any::<i32>(),
            any::<usize>()
        )
            .prop_map(|(class, o, x, d, s, imm, sel)| {
                let (src, imm) = if x { (s, 0) } else { (0, imm) };
                let code = class | o | if x { op::X } else { op::K };
                Piece { slots: vec![Insn::new(code, d, src, 0, imm)], branch: Some(false), sel }
            }),
        (any::<bool>(), any::<usize>()).prop_map(|(wide, sel)| {
            let code = if wide { op::JMP32 | op::JA } else { op::JMP | op::JA };
            Piece { slots: vec![Insn::new(code, 0, 0, 0, 0)], branch: Some(wide), sel }
        }),
        any::<usize>().prop_map(|sel| Piece {
            slots: vec![Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, 0)],
            branch: Some(true),
            sel
        }),
        any::<i32>().prop_map(move |id| plain(Insn::new(op::JMP | op::CALL, 0, 0, 0, id))),
        r.clone().prop_map(move |d| plain(Insn::new(op::JMP | op::CALL | op::X, d, 0, 0, 0))),
        Just(plain(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0))),
        // lddw: plain, map fd, map value.
        (w.clone(), 0u8..3, any::<u64>()).prop_map(|(d, src, v)| {
            let v = if src == op::PSEUDO_MAP_FD { v & 0xffff_ffff } else { v };
            Piece { slots: Insn::lddw(d, src, v).to_vec(), branch: None, sel: 0 }
        }),
        // Legacy packet loads.
        (any::<bool>(), 0usize..3, r.clone(), any::<i32>()).prop_map(move |(ind, k, s, imm)| {
            let (mode, src) = if ind { (op::IND, s) } else { (op::ABS, 0) };
            plain(Insn::new(op::LD | mode | [op::B, op::H, op::W][k], 0, src, 0, imm))
        }),
        // Loads, sign-extending loads, stores.
        (any::<bool>(), 0usize..4, w.clone(), r.clone(), any::<i16>()).prop_map(
            move |(sx, k, d, s, off)| {
                let (mode, sz) = if sx { (op::MEMSX, sizes[k % 3]) } else { (op::MEM, sizes[k]) };
                plain(Insn::new(op::LDX | mode | sz, d, s, off, 0))
            }
        ),
        (0usize..4, r.clone(), any::<i16>(), any::<i32>()).prop_map(move |(k, d, off, imm)| plain(
            Insn::new(op::ST | op::MEM | sizes[k], d, 0, off, imm)
        )),
        (0usize..4, r.clone(), r.clone(), any::<i16>()).prop_map(move |(k, d, s, off)| plain(
            Insn::new(op::STX | op::MEM | sizes[k], d, s, off, 0)
        )),
        (any::<bool>(), prop::sample::select(atomics.to_vec()), r.clone(), r, any::<i16>())
            .prop_map(move |(wide, imm, d, s, off)| {
                let sz = if wide { op::DW } else { op::W };
                // Fetching forms write `src`, which must then not be the frame pointer.
                let s = if imm & op::FETCH != 0 && s == crate::FP { 0 } else { s };
                plain(Insn::new(op::STX | op::ATOMIC | sz, d, s, off, imm))
            }),
    ]
}

/// Lays pieces out, points every branch at the start of some instruction, and ends
/// with `exit`, so the program passes [`validate`].
fn program(pieces: Vec<Piece>) -> Vec<Insn> {
    let mut starts = Vec::new();
    let mut at = 0;
    for p in &pieces {
        starts.push(at);
        at += p.slots.len();
    }
    starts.push(at); // the final exit
    let mut out = Vec::with_capacity(at + 1);
    for p in pieces {
        let pc = out.len();
        let mut slots = p.slots;
        if let Some(in_imm) = p.branch {
            let dist = starts[p.sel % starts.len()] as i64 - pc as i64 - 1;
            if in_imm {
                slots[0].imm = dist as i32;
            } else {
                slots[0].off = dist as i16;
            }
        }
        out.extend(slots);
    }
    out.push(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn valid_programs_round_trip(pieces in prop::collection::vec(piece(), 0..40)) {
        let p = program(pieces);
        prop_assert_eq!(validate(&p), Ok(()));
        let text = disassemble(&p);
        // Valid instructions all have a mnemonic form.
        prop_assert!(!text.contains(".insn"), "{}", text);
        prop_assert_eq!(assemble(&text), Ok(p));
    }

    #[test]
    fn any_bytes_round_trip(words in prop::collection::vec(any::<u64>(), 0..40)) {
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let p = Insn::decode_all(&bytes).expect("multiple of 8");
        prop_assert_eq!(round_trip(&p), p);
    }
}
