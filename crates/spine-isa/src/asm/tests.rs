use super::*;
use crate::op;

fn one(src: &str) -> Insn {
    let v = assemble(src).unwrap_or_else(|e| panic!("{src}: {e}"));
    assert_eq!(v.len(), 1, "{src}");
    v[0]
}

fn err(src: &str) -> AsmError {
    assemble(src).expect_err(src)
}

#[test]
fn encodes_alu_forms() {
    assert_eq!(one("mov32 %r0, 0"), Insn::new(0xb4, 0, 0, 0, 0));
    assert_eq!(one("mov %r0, -1"), Insn::new(0xb7, 0, 0, 0, -1));
    assert_eq!(one("mov64 %r0, 0xffffffff"), Insn::new(0xb7, 0, 0, 0, -1));
    assert_eq!(one("add %r1, %r2"), Insn::new(0x0f, 1, 2, 0, 0));
    assert_eq!(one("add32 %r1, %r2"), Insn::new(0x0c, 1, 2, 0, 0));
    assert_eq!(one("arsh32 %r0, 48"), Insn::new(0xc4, 0, 0, 0, 48));
    assert_eq!(one("sdiv32 %r1, %r2"), Insn::new(0x3c, 1, 2, 1, 0));
    assert_eq!(one("smod %r1, 3"), Insn::new(0x97, 1, 0, 1, 3));
    assert_eq!(one("div %r1, 3"), Insn::new(0x37, 1, 0, 0, 3));
    assert_eq!(one("neg32 %r0"), Insn::new(0x84, 0, 0, 0, 0));
    assert_eq!(one("neg %r3"), Insn::new(0x87, 3, 0, 0, 0));
    assert_eq!(one("movsx832 %r0, %r1"), Insn::new(0xbc, 0, 1, 8, 0));
    assert_eq!(one("movsx1664 %r0, %r1"), Insn::new(0xbf, 0, 1, 16, 0));
    assert_eq!(one("movsx3264 %r0, %r1"), Insn::new(0xbf, 0, 1, 32, 0));
    assert_eq!(one("be16 %r0"), Insn::new(0xdc, 0, 0, 0, 16));
    assert_eq!(one("le32 %r0"), Insn::new(0xd4, 0, 0, 0, 32));
    assert_eq!(one("bswap64 %r0"), Insn::new(0xd7, 0, 0, 0, 64));
    assert_eq!(one("swap16 %r2"), Insn::new(0xd7, 2, 0, 0, 16));
}

#[test]
fn encodes_memory_forms() {
    assert_eq!(one("ldxh %r0, [%r1+2]"), Insn::new(0x69, 0, 1, 2, 0));
    assert_eq!(one("ldxdw %r0, [%r1]"), Insn::new(0x79, 0, 1, 0, 0));
    assert_eq!(one("ldxb %r8, [%r0+0x1]"), Insn::new(0x71, 8, 0, 1, 0));
    assert_eq!(one("ldxsb %r0, [%r10-1]"), Insn::new(0x91, 0, 10, -1, 0));
    assert_eq!(one("ldxsh %r0, [%r10-2]"), Insn::new(0x89, 0, 10, -2, 0));
    assert_eq!(one("ldxsw %r0, [%r10-4]"), Insn::new(0x81, 0, 10, -4, 0));
    assert_eq!(one("stw [%r10-4], 0x80000001"), Insn::new(0x62, 10, 0, -4, 0x8000_0001u32 as i32));
    assert_eq!(one("stdw [%r10-8], 1"), Insn::new(0x7a, 10, 0, -8, 1));
    assert_eq!(one("stxb [%r10-1], %r1"), Insn::new(0x73, 10, 1, -1, 0));
    assert_eq!(one("stxdw [%r10-8], %r0"), Insn::new(0x7b, 10, 0, -8, 0));
    assert_eq!(one("ldabsh 12"), Insn::new(0x28, 0, 0, 0, 12));
    assert_eq!(one("ldindw %r1, 4"), Insn::new(0x40, 0, 1, 0, 4));
}

#[test]
fn encodes_atomics() {
    let at = |code, imm| Insn::new(code, 10, 1, -8, imm);
    assert_eq!(one("lock add [%r10-8], %r1"), at(0xdb, op::ATOMIC_ADD));
    assert_eq!(one("lock add32 [%r10-8], %r1"), at(0xc3, op::ATOMIC_ADD));
    assert_eq!(one("lock fetch add [%r10-8], %r1"), at(0xdb, 0x01));
    assert_eq!(one("lock fetch xor32 [%r10-8], %r1"), at(0xc3, 0xa1));
    assert_eq!(one("lock or [%r10-8], %r1"), at(0xdb, 0x40));
    assert_eq!(one("lock and [%r10-8], %r1"), at(0xdb, 0x50));
    assert_eq!(one("lock xchg [%r10-8], %r1"), at(0xdb, 0xe1));
    assert_eq!(one("lock cmpxchg32 [%r10-8], %r1"), at(0xc3, 0xf1));
    assert_eq!(
        err("lock fetch xchg [%r10-8], %r1").kind,
        AsmErrorKind::UnknownMnemonic("lock fetch xchg".into())
    );
    assert_eq!(
        err("lock nand [%r10-8], %r1").kind,
        AsmErrorKind::UnknownMnemonic("lock nand".into())
    );
}

#[test]
fn encodes_jumps_and_calls() {
    assert_eq!(one("jeq %r1, 0x80000000, +1"), Insn::new(0x15, 1, 0, 1, i32::MIN));
    assert_eq!(one("jsge32 %r1, 0xffffffff, -3"), Insn::new(0x76, 1, 0, -3, -1));
    assert_eq!(one("jset %r1, %r2, +0"), Insn::new(0x4d, 1, 2, 0, 0));
    assert_eq!(one("ja -1"), Insn::new(0x05, 0, 0, -1, 0));
    assert_eq!(one("ja32 +70000"), Insn::new(0x06, 0, 0, 0, 70000));
    assert_eq!(one("call 5"), Insn::new(0x85, 0, 0, 0, 5));
    assert_eq!(one("call helper 5"), Insn::new(0x85, 0, 0, 0, 5));
    assert_eq!(one("call %r2"), Insn::new(0x8d, 2, 0, 0, 0));
    assert_eq!(one("call local +3"), Insn::new(0x85, 0, 1, 0, 3));
    assert_eq!(one("exit"), Insn::new(0x95, 0, 0, 0, 0));
}

#[test]
fn encodes_lddw_and_map_references() {
    // The suite's own `-- raw` for lddw.data.
    let p = assemble("lddw %r0, 0x1122334455667788\nexit").unwrap();
    let words: Vec<u64> = p.iter().map(|i| u64::from_le_bytes(i.to_bytes())).collect();
    assert_eq!(words, [0x5566778800000018, 0x1122334400000000, 0x0000000000000095]);
    assert_eq!(assemble("lddw %r1, -1").unwrap(), Insn::lddw(1, 0, u64::MAX));
    assert_eq!(assemble("lddw %r1, map[3]").unwrap(), Insn::lddw(1, op::PSEUDO_MAP_FD, 3));
    assert_eq!(
        assemble("lddw %r2, map_value[3]+16").unwrap(),
        Insn::lddw(2, op::PSEUDO_MAP_VALUE, 3 | 16 << 32)
    );
    assert_eq!(assemble("lddw %r2, map_value[7]").unwrap(), Insn::lddw(2, op::PSEUDO_MAP_VALUE, 7));
    assert!(matches!(err("lddw %r1, map[3").kind, AsmErrorKind::BadOperand(_)));
    assert!(matches!(err("lddw %r1, map_value[3]-4").kind, AsmErrorKind::BadOperand(_)));
}

#[test]
fn raw_words_assemble_verbatim() {
    assert_eq!(one(".insn 0x0000000100000095"), Insn::new(0x95, 0, 0, 0, 1));
    assert_eq!(one(".insn 0xffffffffffffffff"), Insn::from_bytes([0xff; 8]));
}

#[test]
fn resolves_labels_both_ways() {
    let p = assemble(
        "mov %r0, 0\n\
         start: jeq %r0, 2, done # forward\n\
         add %r0, 1\n\
         lddw %r1, 5\n\
         ja start\n\
         done:\n\
         call local f\n\
         exit\n\
         f:\n\
         exit",
    )
    .unwrap();
    assert_eq!(p[1].off, 4); // 1 -> 6 skips add, lddw (2 slots), ja
    assert_eq!(p[5].off, -5); // 5 -> 1
    assert_eq!(p[6].imm, 1); // 6 -> 8
    assert_eq!(p.len(), 9);
}

#[test]
fn exit_label_defaults_to_first_exit_unless_defined() {
    let p = assemble("jne %r1, 0, exit\nmov %r0, 1\nexit\nexit").unwrap();
    assert_eq!(p[0].off, 1);
    let p = assemble("jne %r1, 0, exit\nmov %r0, 1\nexit\nexit:\nexit").unwrap();
    assert_eq!(p[0].off, 2);
}

#[test]
fn errors_name_the_line_and_kind() {
    assert_eq!(
        err("mov %r0, 1\nfrob %r0"),
        AsmError { line: 2, kind: AsmErrorKind::UnknownMnemonic("frob".into()) }
    );
    assert_eq!(err("mov %r0, %r16").kind, AsmErrorKind::BadRegister("%r16".into()));
    assert_eq!(err("ldxw %x0, [%r1]").kind, AsmErrorKind::BadRegister("%x0".into()));
    assert_eq!(
        err("add %r0").kind,
        AsmErrorKind::OperandCount { mnemonic: "add".into(), expected: 2, found: 1 }
    );
    assert_eq!(
        err("exit %r0").kind,
        AsmErrorKind::OperandCount { mnemonic: "exit".into(), expected: 0, found: 1 }
    );
    assert_eq!(err("mov %r0, zz").kind, AsmErrorKind::BadOperand("zz".into()));
    assert_eq!(
        err("mov %r0, 0x100000000").kind,
        AsmErrorKind::ImmOutOfRange { text: "0x100000000".into(), bits: 32 }
    );
    assert_eq!(err("ldxw %r0, [%r1+32768]").kind, AsmErrorKind::OffsetOutOfRange("+32768".into()));
    assert_eq!(
        err("\n\nja nowhere").clone(),
        AsmError { line: 3, kind: AsmErrorKind::UndefinedLabel("nowhere".into()) }
    );
    assert_eq!(err("a:\na:\nexit").kind, AsmErrorKind::DuplicateLabel("a".into()));
    assert_eq!(err("1x: exit").kind, AsmErrorKind::BadLabel("1x".into()));
    assert_eq!(err("ja +40000").kind, AsmErrorKind::TargetOutOfRange { distance: 40000, bits: 16 });
    assert!(matches!(err("jeq %r0, 1, 3").kind, AsmErrorKind::BadOperand(_)));
    assert!(matches!(err("movsx832 %r0, 5").kind, AsmErrorKind::BadRegister(_)));
    assert_eq!(err("be24 %r0").kind, AsmErrorKind::UnknownMnemonic("be24".into()));
}

#[test]
fn comments_blank_lines_and_spacing() {
    let p =
        assemble("  # header\n\n; another\n  mov   %r0 ,  1   # trailing\nexit ; done\n").unwrap();
    assert_eq!(p, [Insn::new(0xb7, 0, 0, 0, 1), Insn::new(0x95, 0, 0, 0, 0)]);
    assert_eq!(assemble("").unwrap(), []);
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Lines built from the syntax's own pieces reach deep into the operand parsers.
    fn line() -> impl Strategy<Value = String> {
        let word = prop::sample::select(vec![
            "mov",
            "mov32",
            "lddw",
            "ldxw",
            "ldxsb",
            "stxdw",
            "stw",
            "lock",
            "fetch",
            "add",
            "cmpxchg",
            "jeq",
            "ja32",
            "call",
            "local",
            "exit",
            "be16",
            "movsx832",
            ".insn",
            "%r1",
            "%r10",
            "%r16",
            "r",
            "[%r1+2]",
            "[%r10-",
            "]",
            "map[",
            "map_value[1]+",
            "0x",
            "-0x8000",
            "+1",
            "99999999999999999999999999999999999999999",
            ",",
            ":",
            "L1",
            "L1:",
            "#",
            ";",
            " ",
            "exit:",
        ]);
        prop::collection::vec(word, 0..8).prop_map(|w| w.join(" "))
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC*") {
            let _ = assemble(&s);
        }

        #[test]
        fn never_panics_on_near_miss_syntax(lines in prop::collection::vec(line(), 0..12)) {
            if let Err(e) = assemble(&lines.join("\n")) {
                prop_assert!(e.line >= 1 && e.line <= lines.len().max(1));
            }
        }
    }
}
