//! Malformed objects, each built (or patched) to carry one defect, must give the
//! error that names it.

mod common;

use common::btf_builder::BtfBuilder;
use common::elf_builder::*;
use common::fixture;
use spine_isa::{op, Insn};
use spine_obj::{
    parse, BtfError, LinkErrorKind, MapErrorKind, ObjError, ParseOptions, ProgType, RelocErrorKind,
    MAX_INSNS, MAX_TOTAL_INSNS,
};

fn mov(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::K, dst, 0, 0, imm)
}

fn exit() -> Insn {
    Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
}

fn call_local(imm: i32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, imm)
}

fn helper(id: i32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, 0, 0, id)
}

/// An `xdp` section holding `insns` as one global program `p`.
fn with_prog(insns: &[Insn]) -> (ElfBuilder, u16) {
    let mut b = ElfBuilder::new();
    let x = b.code("xdp", insns);
    b.func("p", x, 0, insns.len() as u64);
    (b, x)
}

fn reloc_err(e: ObjError) -> (String, u64, String, RelocErrorKind) {
    match e {
        ObjError::Reloc { section, offset, symbol, kind } => (section, offset, symbol, kind),
        other => panic!("expected a relocation error, got {other:?}"),
    }
}

fn link_err(e: ObjError) -> (String, String, usize, LinkErrorKind) {
    match e {
        ObjError::Link { section, function, insn, kind, .. } => (section, function, insn, kind),
        other => panic!("expected a link error, got {other:?}"),
    }
}

fn map_err(e: ObjError) -> (String, MapErrorKind) {
    match e {
        ObjError::Map { map, kind } => (map, kind),
        other => panic!("expected a map error, got {other:?}"),
    }
}

#[test]
fn builder_objects_parse_when_well_formed() {
    let (b, _) = with_prog(&[mov(0, 2), exit()]);
    let obj = parse(&b.build()).unwrap();
    assert_eq!(obj.programs.len(), 1);
    assert_eq!(obj.programs[0].insns, [mov(0, 2), exit()]);
    assert_eq!(obj.license, "");
}

#[test]
fn truncation_at_every_length() {
    let (_, bytes) = fixture("calls");
    let shoff = get_u64(&bytes, 40) as usize;
    // clang puts the section header table last.
    assert_eq!(shoff + 64 * u16::from_le_bytes([bytes[60], bytes[61]]) as usize, bytes.len());
    for n in 0..bytes.len() {
        let e = parse(&bytes[..n]).unwrap_err();
        let want = if n < 64 {
            "ELF header"
        } else if n < shoff + 64 {
            "section header 0"
        } else {
            "section header table"
        };
        match e {
            ObjError::Truncated { what, len, .. } => {
                assert_eq!((what.as_str(), len), (want, n as u64), "length {n}")
            }
            other => panic!("length {n}: {other:?}"),
        }
    }
    assert!(parse(&bytes).is_ok());
}

#[test]
fn wrong_file_kinds() {
    let (_, good) = fixture("calls");
    assert_eq!(parse(b"\x7fELG....").unwrap_err(), ObjError::NotElf);
    assert_eq!(parse(b"#!/bin/sh\n").unwrap_err(), ObjError::NotElf);
    let patched = |at: usize, v: u8| {
        let mut b = good.clone();
        b[at] = v;
        parse(&b).unwrap_err()
    };
    assert_eq!(patched(4, 1), ObjError::WrongClass(1));
    assert_eq!(patched(5, 2), ObjError::WrongEndian(2));
    assert_eq!(patched(18, 62), ObjError::WrongMachine(62));
    assert_eq!(patched(16, 3), ObjError::NotRelocatable(3));
}

#[test]
fn bad_elf_header_fields() {
    let (_, good) = fixture("calls");
    let mut b = good.clone();
    put_u16(&mut b, 58, 40);
    assert_eq!(parse(&b).unwrap_err(), ObjError::BadHeader("e_shentsize is not 64"));
    let mut b = good.clone();
    put_u16(&mut b, 62, 200);
    assert_eq!(parse(&b).unwrap_err(), ObjError::BadHeader("e_shstrndx is not a section"));
    let mut b = good.clone();
    put_u16(&mut b, 62, section_index(&good, "xdp") as u16);
    assert_eq!(parse(&b).unwrap_err(), ObjError::BadHeader("e_shstrndx is not a string table"));
    let mut b = good.clone();
    put_u16(&mut b, 60, 0xffff);
    assert!(
        matches!(parse(&b).unwrap_err(), ObjError::Truncated { what, .. } if what == "section header table")
    );
}

#[test]
fn extended_section_numbering_is_understood() {
    // e_shnum = 0 and e_shstrndx = SHN_XINDEX: the real values live in section 0.
    let (_, good) = fixture("calls");
    let shnum = u16::from_le_bytes([good[60], good[61]]);
    let shstrndx = u16::from_le_bytes([good[62], good[63]]);
    let mut b = good.clone();
    put_u16(&mut b, 60, 0);
    put_u16(&mut b, 62, 0xffff);
    put_u64(&mut b, shdr(&good, 0) + 32, u64::from(shnum));
    put_u32(&mut b, shdr(&good, 0) + 40, u32::from(shstrndx));
    assert_eq!(parse(&b).unwrap(), parse(&good).unwrap());
}

#[test]
fn bad_section_offsets_and_sizes() {
    let (_, good) = fixture("calls");
    let h = shdr(&good, section_index(&good, "xdp"));
    let len = good.len() as u64;

    let mut b = good.clone();
    put_u64(&mut b, h + 24, len + 8);
    match parse(&b).unwrap_err() {
        ObjError::Truncated { what, start, len: l, .. } => {
            assert_eq!((what.as_str(), start, l), ("section 'xdp'", len + 8, len))
        }
        other => panic!("{other:?}"),
    }
    let mut b = good.clone();
    put_u64(&mut b, h + 32, 1 << 40);
    assert!(
        matches!(parse(&b).unwrap_err(), ObjError::Truncated { what, .. } if what == "section 'xdp'")
    );
    let mut b = good.clone();
    put_u64(&mut b, h + 24, u64::MAX - 4);
    assert_eq!(
        parse(&b).unwrap_err(),
        ObjError::BadSectionHeader {
            index: section_index(&good, "xdp"),
            reason: "offset + size overflows"
        }
    );
    // Two sections claiming the same bytes.
    let mut b = good.clone();
    let tc = shdr(&good, section_index(&good, "tc"));
    let xdp_off = get_u64(&good, h + 24);
    put_u64(&mut b, tc + 24, xdp_off);
    assert!(matches!(
        parse(&b).unwrap_err(),
        ObjError::BadSectionHeader { reason: "data overlaps another section", .. }
    ));
    // A name outside the section-name table.
    let mut b = good.clone();
    put_u32(&mut b, h, 0xffff);
    assert_eq!(
        parse(&b).unwrap_err(),
        ObjError::BadString { table: "section names".into(), offset: 0xffff }
    );
    // Code whose size is not a whole number of instructions.
    let mut b = good.clone();
    put_u64(&mut b, h + 32, get_u64(&good, h + 32) - 4);
    assert!(matches!(
        parse(&b).unwrap_err(),
        ObjError::BadSection { section, reason: "code size is not a multiple of 8" } if section == "xdp"
    ));
}

#[test]
fn symbol_table_defects() {
    let (b, _) = with_prog(&[mov(0, 2), exit()]);
    let good = b.build();
    let st = shdr(&good, b.symtab_index() as usize);

    let mut bad = good.clone();
    put_u64(&mut bad, st + 56, 16);
    assert!(
        matches!(parse(&bad).unwrap_err(), ObjError::BadSection { section, .. } if section == ".symtab")
    );
    let mut bad = good.clone();
    put_u32(&mut bad, st + 40, 1); // sh_link to the code section
    assert!(matches!(
        parse(&bad).unwrap_err(),
        ObjError::BadSection { reason: "sh_link is not a string table", .. }
    ));

    // Symbol 1 (`p`): name offset and section index.
    let sym = get_u64(&good, st + 24) as usize + 24;
    let mut bad = good.clone();
    put_u32(&mut bad, sym, 0x7777);
    assert_eq!(
        parse(&bad).unwrap_err(),
        ObjError::BadString { table: ".strtab".into(), offset: 0x7777 }
    );
    let mut bad = good.clone();
    put_u16(&mut bad, sym + 6, 77);
    assert_eq!(
        parse(&bad).unwrap_err(),
        ObjError::BadSymbol { index: 1, reason: "section index out of range" }
    );

    let (mut b2, _) = with_prog(&[mov(0, 2), exit()]);
    b2.no_symtab = true;
    assert_eq!(parse(&b2.build()).unwrap_err(), ObjError::NoSymbolTable);

    let (mut b3, _) = with_prog(&[mov(0, 2), exit()]);
    let extra = b3.section(".symtab2", SHT_SYMTAB, 0, &[0; 24]);
    b3.sections[extra as usize - 1].entsize = 24;
    assert_eq!(parse(&b3.build()).unwrap_err(), ObjError::MultipleSymbolTables);
}

#[test]
fn function_symbol_defects() {
    let prog = [mov(0, 2), exit(), mov(0, 1), exit()];
    let cases: [(u64, u64, &str); 4] = [
        (4, 8, "function is not on instruction boundaries"),
        (0, 0, "function has size 0"),
        (16, 24, "function extends past its section"),
        (8, 16, "function overlaps another"),
    ];
    for (value, size, reason) in cases {
        let mut b = ElfBuilder::new();
        let x = b.code("xdp", &prog);
        b.func("p", x, 0, 2);
        b.symbol("q", STB_GLOBAL, STT_FUNC, x, value, size);
        let e = parse(&b.build()).unwrap_err();
        assert!(
            matches!(e, ObjError::BadSymbol { reason: r, .. } if r == reason),
            "{reason}: {e:?}"
        );
    }
}

#[test]
fn foreign_program_sections_are_skipped_not_refused() {
    let mut b = ElfBuilder::new();
    let k = b.code("kprobe/sys_open", &[mov(0, 0), exit()]);
    b.func("k", k, 0, 2);
    let s = b.code("xdp_sock", &[mov(0, 1), exit()]);
    b.func("sock", s, 0, 2);
    let x = b.code("xdp", &[mov(0, 2), exit()]);
    b.func("pass", x, 0, 2);
    let bytes = b.build();
    let obj = parse(&bytes).unwrap();
    let loaded: Vec<_> = obj.programs.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(loaded, ["pass"]);
    let skipped: Vec<_> =
        obj.skipped.iter().map(|p| (p.name.as_str(), p.section.as_str())).collect();
    assert_eq!(skipped, [("k", "kprobe/sys_open"), ("sock", "xdp_sock")]);
    assert!(obj.skipped[0].reason.contains("kprobe"), "{}", obj.skipped[0].reason);
    assert!(obj.skipped[1].reason.contains("--type xdp"), "{}", obj.skipped[1].reason);

    // With a type given, the legacy section loads as XDP, as `ip link ... sec` does.
    let opts = ParseOptions {
        section_types: vec![("xdp_sock".into(), ProgType::Xdp)],
        ..ParseOptions::default()
    };
    let obj = spine_obj::parse_with(&bytes, &opts).unwrap();
    let sock = obj.program(Some("xdp_sock")).unwrap();
    assert_eq!((sock.name.as_str(), sock.prog_type), ("sock", ProgType::Xdp));
    assert_eq!(obj.skipped.len(), 1);

    // A type for a section the object lacks is refused by name.
    let opts = ParseOptions {
        section_types: vec![("xdp_vlan01".into(), ProgType::Xdp)],
        ..ParseOptions::default()
    };
    assert_eq!(
        spine_obj::parse_with(&bytes, &opts).unwrap_err(),
        ObjError::NoSuchSection { section: "xdp_vlan01".into() }
    );
}

#[test]
fn rela_is_refused() {
    let (mut b, x) = with_prog(&[mov(0, 2), exit()]);
    let r = b.rel(x, &[]);
    b.sections[r as usize - 1].sh_type = SHT_RELA;
    b.sections[r as usize - 1].name = ".relaxdp".into();
    assert_eq!(
        parse(&b.build()).unwrap_err(),
        ObjError::RelaUnsupported { section: ".relaxdp".into() }
    );
}

#[test]
fn relocation_entry_defects() {
    let [l0, l1] = Insn::lddw(1, 0, 0);
    let prog = [l0, l1, helper(1), exit()];
    let build = |entries: &[(u64, u32, u32)], tweak: &dyn Fn(&mut ElfBuilder)| {
        let (mut b, x) = with_prog(&prog);
        let d = b.data(".data", &[0; 8]);
        let v = b.object("v", d, 0, 8);
        assert_eq!(v, 2);
        tweak(&mut b);
        b.rel(x, entries);
        parse(&b.build())
    };
    let none: &dyn Fn(&mut ElfBuilder) = &|_| {};
    // The well-formed reference: a map-value load of `v`.
    let obj = build(&[(0, 2, R_BPF_64_64)], none).unwrap();
    assert_eq!(obj.programs[0].insns[0].src, op::PSEUDO_MAP_VALUE);

    let e = reloc_err(build(&[(0, 99, R_BPF_64_64)], none).unwrap_err());
    assert_eq!(
        e,
        ("xdp".into(), 0, "#99".into(), RelocErrorKind::SymbolOutOfRange { index: 99, count: 3 })
    );
    let e = reloc_err(build(&[(4, 2, R_BPF_64_64)], none).unwrap_err());
    assert_eq!(e.3, RelocErrorKind::Misaligned);
    let e = reloc_err(build(&[(32, 2, R_BPF_64_64)], none).unwrap_err());
    assert_eq!((e.1, e.3), (32, RelocErrorKind::OutsideSection { size: 32 }));
    let e = reloc_err(build(&[(0, 2, 3)], none).unwrap_err());
    assert_eq!((e.2.as_str(), e.3), ("v", RelocErrorKind::UnsupportedType(3)));
    let e = reloc_err(build(&[(16, 2, R_BPF_64_64)], none).unwrap_err());
    assert_eq!(e.3, RelocErrorKind::NotLddw { code: 0x85 });
    let e = reloc_err(build(&[(24, 2, R_BPF_64_32)], none).unwrap_err());
    assert_eq!(e.3, RelocErrorKind::NotCall { code: 0x95 });
    // A helper call (src 0) with a call relocation against a defined symbol.
    let e = reloc_err(build(&[(16, 2, R_BPF_64_32)], none).unwrap_err());
    assert_eq!(e.3, RelocErrorKind::NotCall { code: 0x85 });
    let e = reloc_err(build(&[(0, 2, R_BPF_64_64), (0, 2, R_BPF_64_64)], none).unwrap_err());
    assert_eq!(e.3, RelocErrorKind::Duplicate);
    // lddw in the last slot: no room for its second half.
    let (mut b, x) = with_prog(&[mov(0, 0), exit(), l0]);
    b.rel(x, &[(16, 0, R_BPF_64_64)]);
    let e = reloc_err(parse(&b.build()).unwrap_err());
    assert_eq!(e.3, RelocErrorKind::OutsideSection { size: 24 });
    // Relocations of bytes outside every function are ignored, as libbpf skips them.
    let (mut b, x) = with_prog(&[mov(0, 0), exit(), l0, l1]);
    b.sections[x as usize - 1].data.truncate(32);
    b.symbols[0].size = 16;
    b.rel(x, &[(16, 0, R_BPF_64_64)]);
    assert_eq!(parse(&b.build()).unwrap().programs[0].insns.len(), 2);
}

#[test]
fn relocation_target_defects() {
    let [l0, l1] = Insn::lddw(1, 0, 0);
    let prog = [l0, l1, call_local(-1), exit()];
    // (symbol setup, relocation) -> error
    let run = |setup: &dyn Fn(&mut ElfBuilder, u16) -> u32, at: u64, ty: u32| {
        let (mut b, x) = with_prog(&prog);
        let s = setup(&mut b, x);
        b.rel(x, &[(at, s, ty)]);
        reloc_err(parse(&b.build()).unwrap_err())
    };
    let e = run(&|b, _| b.symbol("ext", STB_GLOBAL, STT_NOTYPE, 0, 0, 0), 0, R_BPF_64_64);
    assert_eq!((e.2.as_str(), e.3), ("ext", RelocErrorKind::Extern));
    let e = run(&|b, _| b.symbol("kfunc", STB_GLOBAL, STT_NOTYPE, 0, 0, 0), 16, R_BPF_64_32);
    assert_eq!(e.3, RelocErrorKind::Kfunc);
    let meta = |b: &mut ElfBuilder, _| {
        b.symbol("bpf_xdp_metadata_rx_hash", STB_GLOBAL, STT_NOTYPE, 0, 0, 0)
    };
    let e = run(&meta, 16, R_BPF_64_32);
    assert_eq!((e.2.as_str(), e.3), ("bpf_xdp_metadata_rx_hash", RelocErrorKind::KfuncNeedsDevice));
    // A kfunc spine offers becomes a call of spine's number for it.
    let (mut b, x) = with_prog(&prog);
    let s = b.symbol("bpf_dynptr_slice_rdwr", STB_GLOBAL, STT_NOTYPE, 0, 0, 0);
    b.rel(x, &[(16, s, R_BPF_64_32)]);
    let obj = parse(&b.build()).expect("a known kfunc resolves");
    let call = obj.programs[0].insns[2];
    assert!(call.is_helper_call(), "{call:?}");
    assert_eq!(call.imm as u32, spine_abi::helper::KFUNC_DYNPTR_SLICE_RDWR);
    let e = run(&|b, _| b.symbol("common", STB_GLOBAL, STT_OBJECT, 0xfff2, 0, 4), 0, R_BPF_64_64);
    assert_eq!(e.3, RelocErrorKind::SpecialSection(0xfff2));
    let e = run(&|b, _| b.symbol("abs", STB_GLOBAL, STT_OBJECT, 0xfff1, 0, 4), 0, R_BPF_64_64);
    assert_eq!(e.3, RelocErrorKind::SpecialSection(0xfff1));
    let e = run(
        &|b, _| {
            let l = b.data("license", b"GPL\0");
            b.object("_license", l, 0, 4)
        },
        0,
        R_BPF_64_64,
    );
    assert_eq!(e.3, RelocErrorKind::UnsupportedTarget("license".into()));
    let e = run(
        &|b, _| {
            let d = b.data(".data", &[0; 8]);
            b.object("v", d, 0, 8)
        },
        16,
        R_BPF_64_32,
    );
    assert_eq!(e.3, RelocErrorKind::CallIntoData(".data".into()));
    let e = run(
        &|b, _| {
            let t = b.code("tc", &[mov(0, 0), exit()]);
            b.func("other", t, 0, 2)
        },
        16,
        R_BPF_64_32,
    );
    assert_eq!(e.3, RelocErrorKind::CallIntoOtherSection("tc".into()));
    let e = run(
        &|b, _| {
            let t = b.code(".text", &[mov(0, 0), exit()]);
            b.symbol("label", STB_LOCAL, STT_NOTYPE, t, 4, 0)
        },
        16,
        R_BPF_64_32,
    );
    assert_eq!(e.3, RelocErrorKind::FunctionMisaligned(4));
}

#[test]
fn misaligned_function_address_and_data_offsets() {
    let [l0, l1] = Insn::lddw(2, 0, 4); // imm 4: not an instruction boundary
    let (mut b, x) = with_prog(&[l0, l1, exit()]);
    let t = b.code(".text", &[mov(0, 0), exit()]);
    b.symbol("helper", STB_GLOBAL, STT_FUNC, t, 0, 16);
    let s = b.section_symbol(t);
    b.rel(x, &[(0, s, R_BPF_64_64)]);
    assert_eq!(reloc_err(parse(&b.build()).unwrap_err()).3, RelocErrorKind::FunctionMisaligned(4));

    for (imm, sym_value, want) in [(100, 0, 100i64), (-16, 8, -8), (2, 6, 8)] {
        let [l0, l1] = Insn::lddw(1, 0, imm as u32 as u64);
        let (mut b, x) = with_prog(&[l0, l1, exit()]);
        let d = b.data(".data", &[0; 8]);
        let s = b.object("v", d, sym_value, 0);
        b.rel(x, &[(0, s, R_BPF_64_64)]);
        let e = reloc_err(parse(&b.build()).unwrap_err());
        assert_eq!(e.3, RelocErrorKind::ValueOffset { offset: want, size: 8 }, "imm {imm}");
    }
    // The last byte is addressable.
    let [l0, l1] = Insn::lddw(1, 0, 3);
    let (mut b, x) = with_prog(&[l0, l1, exit()]);
    let d = b.data(".data", &[0; 8]);
    let s = b.object("v", d, 4, 0);
    b.rel(x, &[(0, s, R_BPF_64_64)]);
    let p = &parse(&b.build()).unwrap().programs[0];
    assert_eq!((p.insns[0].src, p.insns[0].imm, p.insns[1].imm), (op::PSEUDO_MAP_VALUE, 0, 7));
}

#[test]
fn legacy_map_reference_without_a_map() {
    let [l0, l1] = Insn::lddw(1, 0, 0);
    let (mut b, x) = with_prog(&[l0, l1, exit()]);
    let mut def = Vec::new();
    for v in [2u32, 4, 8, 1, 0] {
        def.extend_from_slice(&v.to_le_bytes());
    }
    let m = b.data("maps", &def);
    b.object("m", m, 0, 20);
    // A section symbol (not counted as a definition) pointing 4 bytes in.
    let inside = b.symbol("", STB_LOCAL, STT_SECTION, m, 4, 0);
    b.rel(x, &[(0, inside, R_BPF_64_64)]);
    let e = reloc_err(parse(&b.build()).unwrap_err());
    assert_eq!((e.2.as_str(), e.3), ("maps", RelocErrorKind::NoMapAt(4)));
}

#[test]
fn call_layout_defects() {
    // Pc-relative call past the end of a 4-slot section, and into the middle of `q`.
    let cases = [
        (call_local(3), LinkErrorKind::TargetOutsideFunctions(4)),
        (call_local(2), LinkErrorKind::TargetNotFunctionStart { target: 3, function: "q".into() }),
    ];
    for (call, kind) in cases {
        let mut b = ElfBuilder::new();
        let x = b.code("xdp", &[call, exit(), mov(0, 1), exit()]);
        b.func("p", x, 0, 2);
        b.symbol("q", STB_LOCAL, STT_FUNC, x, 16, 16);
        let e = link_err(parse(&b.build()).unwrap_err());
        assert_eq!(e, ("xdp".into(), "p".into(), 0, kind));
    }
    // A jump out of its function.
    let mut b = ElfBuilder::new();
    let x = b.code("xdp", &[Insn::new(op::JMP | op::JA, 0, 0, 1, 0), exit(), exit()]);
    b.func("p", x, 0, 2);
    b.func("q", x, 2, 1);
    let e = link_err(parse(&b.build()).unwrap_err());
    assert_eq!(e, ("xdp".into(), "p".into(), 0, LinkErrorKind::JumpOutsideFunction(2)));
    // A jump backwards out of a function, reported in section coordinates.
    let mut b = ElfBuilder::new();
    let x = b.code("xdp", &[exit(), mov(0, 0), Insn::new(op::JMP | op::JA, 0, 0, -3, 0)]);
    b.func("p", x, 0, 1);
    b.func("q", x, 1, 2);
    let e = link_err(parse(&b.build()).unwrap_err());
    assert_eq!(e, ("xdp".into(), "q".into(), 2, LinkErrorKind::JumpOutsideFunction(0)));
    // lddw whose second slot belongs to the next function.
    let [l0, l1] = Insn::lddw(1, 0, 0);
    let mut b = ElfBuilder::new();
    let x = b.code("xdp", &[mov(0, 0), l0, l1, exit()]);
    b.func("p", x, 0, 2);
    b.func("q", x, 2, 2);
    let e = link_err(parse(&b.build()).unwrap_err());
    assert_eq!(e, ("xdp".into(), "p".into(), 1, LinkErrorKind::TruncatedLddw));
    // Pseudo sources the compiler never emits without a relocation.
    let [l0, l1] = Insn::lddw(1, op::PSEUDO_MAP_FD, 0);
    let (b, _) = with_prog(&[l0, l1, exit()]);
    assert_eq!(link_err(parse(&b.build()).unwrap_err()).3, LinkErrorKind::UnexpectedPseudo(1));
    let kfunc = Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_KFUNC_CALL, 0, 7);
    let (b, _) = with_prog(&[kfunc, exit()]);
    assert_eq!(link_err(parse(&b.build()).unwrap_err()).3, LinkErrorKind::UnexpectedCallSource(2));
}

#[test]
fn recursion_and_shared_callees_are_appended_once() {
    // p -> a -> b -> a (a cycle) and p -> b: each function appears once.
    let mut b = ElfBuilder::new();
    let insns = [
        call_local(2), // p: 0 -> a (3)
        call_local(3), // p: 1 -> b (5)
        exit(),
        call_local(1), // a: 3 -> b (5)
        exit(),
        call_local(-3), // b: 5 -> a (3)
        exit(),
    ];
    let x = b.code("xdp", &insns);
    b.func("p", x, 0, 3);
    b.symbol("a", STB_LOCAL, STT_FUNC, x, 24, 16);
    b.symbol("b", STB_LOCAL, STT_FUNC, x, 40, 16);
    let obj = parse(&b.build()).unwrap();
    let p = &obj.programs[0];
    let names: Vec<_> = p.functions.iter().map(|(s, n)| (*s, n.as_str())).collect();
    assert_eq!(names, [(0, "p"), (3, "a"), (5, "b")]);
    let target = |pc: usize| (pc as i64 + 1 + p.insns[pc].imm as i64) as usize;
    assert_eq!((target(0), target(1), target(3), target(5)), (3, 5, 5, 3));
}

#[test]
fn program_size_limits() {
    // One function just over the per-program limit.
    let mut insns = vec![mov(0, 0); MAX_INSNS];
    insns.push(exit());
    let (b, _) = with_prog(&insns);
    let e = link_err(parse(&b.build()).unwrap_err());
    assert_eq!(e.3, LinkErrorKind::TooLarge(MAX_INSNS));

    // Five small programs sharing a 900,000-instruction subprogram: each is legal,
    // together they pass the object's budget.
    let big = 900_000;
    let mut text = vec![mov(0, 0); big - 1];
    text.push(exit());
    let mut b = ElfBuilder::new();
    let t = b.code(".text", &text);
    b.symbol("big", STB_LOCAL, STT_FUNC, t, 0, big as u64 * 8);
    let ts = b.section_symbol(t);
    let mut progs = Vec::new();
    for _ in 0..5 {
        progs.extend([call_local(-1), exit()]);
    }
    let x = b.code("xdp", &progs);
    let mut rels = Vec::new();
    for k in 0..5u64 {
        b.func(&format!("p{k}"), x, 2 * k, 2);
        rels.push((16 * k, ts, R_BPF_64_32));
    }
    b.rel(x, &rels);
    let e = link_err(parse(&b.build()).unwrap_err());
    assert_eq!((e.1.as_str(), e.3), ("p4", LinkErrorKind::ObjectTooLarge(MAX_TOTAL_INSNS)));
}

fn legacy_object(defs: &[&[u32]]) -> Vec<u8> {
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    let size = defs.iter().map(|d| d.len() * 4).max().unwrap();
    let mut data = Vec::new();
    for d in defs {
        let mut bytes: Vec<u8> = d.iter().flat_map(|v| v.to_le_bytes()).collect();
        bytes.resize(size, 0);
        data.extend(bytes);
    }
    let m = b.data("maps", &data);
    for (k, _) in defs.iter().enumerate() {
        b.object(&format!("m{k}"), m, (k * size) as u64, size as u64);
    }
    b.build()
}

#[test]
fn legacy_map_defects() {
    // type, key, value, max_entries, flags
    let ok = legacy_object(&[&[1, 4, 8, 16, 0], &[2, 4, 4, 1, 0]]);
    assert_eq!(parse(&ok).unwrap().maps.len(), 2);
    let err = |defs: &[&[u32]]| map_err(parse(&legacy_object(defs)).unwrap_err());
    assert_eq!(
        err(&[&[1, 4, 8, 16, 0], &[99, 4, 8, 1, 0]]),
        ("m1".into(), MapErrorKind::UnknownType(99))
    );
    assert_eq!(err(&[&[0, 4, 8, 16, 0]]), ("m0".into(), MapErrorKind::MissingType));
    assert_eq!(err(&[&[1, 1000, 8, 16, 0]]).1, MapErrorKind::KeyTooLarge(1000));
    assert_eq!(err(&[&[1, 4, 2 << 20, 16, 0]]).1, MapErrorKind::ValueTooLarge(2 << 20));
    assert_eq!(err(&[&[1, 4, 8, 0, 0]]).1, MapErrorKind::ZeroMaxEntries);
    assert_eq!(err(&[&[1, 0, 8, 1, 0]]).1, MapErrorKind::ZeroKeySize);
    // A perf event array that leaves its sizes out (goebpf's `xdp_dump`) gets 4 and 4.
    let perf = parse(&legacy_object(&[&[4, 0, 0, 8, 0]])).unwrap();
    assert_eq!((perf.maps[0].key_size, perf.maps[0].value_size), (4, 4));
    // A legacy LPM trie without BPF_F_NO_PREALLOC (goebpf's `basic_firewall`) gets it,
    // as goebpf's loader creates it; other flags stay.
    let lpm = parse(&legacy_object(&[&[11, 8, 4, 16, 0], &[11, 8, 4, 16, 1 << 7]])).unwrap();
    assert_eq!((lpm.maps[0].flags, lpm.maps[1].flags), (1, 1 | 1 << 7));
    // Trailing fields (inner_map_idx, numa_node) must be zero.
    assert_eq!(err(&[&[1, 4, 8, 16, 0, 0, 3]]).1, MapErrorKind::UnsupportedOptions);
    let with_zero_tail = legacy_object(&[&[1, 4, 8, 16, 1, 0, 0]]);
    assert_eq!(parse(&with_zero_tail).unwrap().maps[0].flags, 1);
    // A short definition leaves the missing fields zero: max_entries 0 here.
    assert_eq!(err(&[&[1, 4, 8]]).1, MapErrorKind::ZeroMaxEntries);

    // 41 bytes cannot be split evenly between two symbols.
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    let m = b.data("maps", &[0; 41]);
    b.object("a", m, 0, 20);
    b.object("b", m, 20, 20);
    assert!(
        matches!(parse(&b.build()).unwrap_err(), ObjError::BadSection { section, .. } if section == "maps")
    );
    // A symbol whose definition would run past the section.
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    let mut data: Vec<u8> = [1u32, 4, 8, 16, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
    data.resize(40, 0);
    let m = b.data("maps", &data);
    b.object("a", m, 0, 20);
    b.object("b", m, 24, 20);
    assert_eq!(
        map_err(parse(&b.build()).unwrap_err()),
        ("b".into(), MapErrorKind::LegacyTruncated { offset: 24, need: 20, size: 40 })
    );
}

#[test]
fn global_data_limits() {
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    b.bss(".bss", 2 << 20);
    assert_eq!(
        map_err(parse(&b.build()).unwrap_err()),
        (".bss".into(), MapErrorKind::ValueTooLarge(2 << 20))
    );
    // Many 1 MiB .bss sections: none is too large, together they are.
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    for k in 0..20 {
        b.bss(&format!(".bss.s{k}"), 1 << 20);
    }
    let (name, kind) = map_err(parse(&b.build()).unwrap_err());
    assert_eq!(
        (name.as_str(), kind),
        (".bss.s16", MapErrorKind::GlobalDataTooLarge { limit: spine_obj::maps::MAX_GLOBAL_DATA })
    );
    // Empty data sections make no map; .bss is zero-filled; names follow libbpf's prefixes.
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    b.data(".data", &[]);
    b.bss(".bss.small", 3);
    b.data(".rodata.x", &[1, 2]);
    b.data(".database", &[1]);
    b.bss(".bssx", 4);
    let obj = parse(&b.build()).unwrap();
    let maps: Vec<_> =
        obj.maps.iter().map(|m| (m.name.as_str(), m.flags, m.initial.clone())).collect();
    assert_eq!(
        maps,
        vec![
            (".bss.small", 0, Some(vec![0, 0, 0])),
            (".rodata.x", spine_abi::map_flags::RDONLY_PROG, Some(vec![1, 2])),
        ]
    );
}

/// A `.maps` object whose BTF `btf` declares map variables; `syms` are the ELF
/// symbols (name, offset) in a `.maps` section of `size` bytes.
fn btf_object(btf: &BtfBuilder, size: usize, syms: &[(&str, u64)]) -> Vec<u8> {
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    let m = b.data(".maps", &vec![0; size]);
    for (n, v) in syms {
        b.object(n, m, *v, 32);
    }
    b.section(".BTF", SHT_PROGBITS, 0, &btf.finish());
    b.build()
}

/// BTF for `struct { __uint(type, HASH); __uint(max_entries, 4); __type(key, K);
/// __type(value, int); } m SEC(".maps")`, with K built by `key`.
fn hash_map_btf(key: impl FnOnce(&mut BtfBuilder, u32) -> u32) -> BtfBuilder {
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    let ty = b.uint_field(int, 1);
    let max = b.uint_field(int, 4);
    let k = key(&mut b, int);
    let kp = b.ptr(k);
    let vp = b.ptr(int);
    let def = b.strukt(
        "",
        32,
        &[("type", ty, 0), ("max_entries", max, 8), ("key", kp, 16), ("value", vp, 24)],
    );
    let var = b.var("m", def, 1);
    b.datasec(".maps", 0, &[(var, 0, 32)]);
    b
}

#[test]
fn btf_map_from_hand_built_btf() {
    let btf = hash_map_btf(|_, int| int);
    let obj = parse(&btf_object(&btf, 32, &[("m", 0)])).unwrap();
    let m = &obj.maps[0];
    assert_eq!(
        (m.name.as_str(), m.map_type, m.key_size, m.value_size, m.max_entries),
        ("m", 1, 4, 4, 4)
    );
}

#[test]
fn btf_maps_are_ordered_by_offset_not_datasec_order() {
    // DATASEC lists b before a (sizes and offsets zero, as clang leaves them); the ELF
    // symbols put a at 0 and b at 32. libbpf fills in the offsets and sorts by them.
    let mut btf = BtfBuilder::new();
    let int = btf.int("int", 4);
    let ty = btf.uint_field(int, 2); // ARRAY
    let max = btf.uint_field(int, 4);
    let kp = btf.ptr(int);
    let def = btf.strukt(
        "",
        32,
        &[("type", ty, 0), ("max_entries", max, 8), ("key", kp, 16), ("value", kp, 24)],
    );
    let vb = btf.var("b", def, 1);
    let va = btf.var("a", def, 1);
    btf.datasec(".maps", 0, &[(vb, 0, 32), (va, 0, 32)]);
    let [l0, l1] = Insn::lddw(1, 0, 0);
    let (mut b, x) = with_prog(&[l0, l1, exit()]);
    let m = b.data(".maps", &[0; 64]);
    b.object("a", m, 0, 32);
    let sb = b.object("b", m, 32, 32);
    b.section(".BTF", SHT_PROGBITS, 0, &btf.finish());
    b.rel(x, &[(0, sb, R_BPF_64_64)]);
    let obj = parse(&b.build()).unwrap();
    let names: Vec<_> = obj.maps.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(
        (obj.programs[0].insns[0].src, obj.programs[0].insns[0].imm),
        (op::PSEUDO_MAP_FD, 1)
    );
}

#[test]
fn btf_section_defects() {
    let btf = hash_map_btf(|_, int| int);
    // No .BTF at all.
    let (mut b, _) = with_prog(&[mov(0, 0), exit()]);
    b.data(".maps", &[0; 32]);
    assert_eq!(parse(&b.build()).unwrap_err(), ObjError::Btf(BtfError::Missing(".maps".into())));
    // Header offsets pointing outside the section.
    let good = btf_object(&btf, 32, &[("m", 0)]);
    let (at, _) = section_data(&good, ".BTF");
    let mut bad = good.clone();
    put_u32(&mut bad, at + 16, 0x10000); // str_off
    assert_eq!(parse(&bad).unwrap_err(), ObjError::Btf(BtfError::OutOfBounds("string section")));
    let mut bad = good.clone();
    put_u32(&mut bad, at + 12, 0x10000); // type_len
    assert_eq!(parse(&bad).unwrap_err(), ObjError::Btf(BtfError::OutOfBounds("type section")));
    let mut bad = good.clone();
    put_u16(&mut bad, at, 0x1234);
    assert_eq!(parse(&bad).unwrap_err(), ObjError::Btf(BtfError::BadMagic(0x1234)));
    // No DATASEC for .maps.
    let mut b = BtfBuilder::new();
    b.int("int", 4);
    assert_eq!(
        parse(&btf_object(&b, 32, &[])).unwrap_err(),
        ObjError::Btf(BtfError::NoDatasec(".maps".into()))
    );
    // A DATASEC entry that is not a variable.
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    b.datasec(".maps", 0, &[(int, 0, 4)]);
    assert_eq!(
        parse(&btf_object(&b, 32, &[])).unwrap_err(),
        ObjError::Btf(BtfError::NotAVar { section: ".maps".into(), index: 0 })
    );
}

#[test]
fn btf_type_chains_are_bounded() {
    // key = typedef a -> typedef b -> typedef a: a cycle.
    let btf = hash_map_btf(|b, _| {
        let first = b.count + 1;
        b.raw("a", 8, 0, first + 1, &[]);
        b.raw("b", 8, 0, first, &[])
    });
    let (name, kind) = map_err(parse(&btf_object(&btf, 32, &[("m", 0)])).unwrap_err());
    assert_eq!(name, "m");
    assert!(
        matches!(kind, MapErrorKind::Btf { field, error: BtfError::TooDeep(_) } if field == "key")
    );
    // 40 nested consts.
    let btf = hash_map_btf(|b, int| {
        let mut t = int;
        for _ in 0..40 {
            t = b.raw("", 10, 0, t, &[]);
        }
        t
    });
    let (_, kind) = map_err(parse(&btf_object(&btf, 32, &[("m", 0)])).unwrap_err());
    assert!(matches!(kind, MapErrorKind::Btf { error: BtfError::TooDeep(_), .. }));
    // A key that is a function prototype has no size.
    let btf = hash_map_btf(|b, _| b.raw("", 13, 0, 0, &[]));
    let (_, kind) = map_err(parse(&btf_object(&btf, 32, &[("m", 0)])).unwrap_err());
    assert!(matches!(
        kind,
        MapErrorKind::Btf { error: BtfError::NoSize { kind: "func_proto", .. }, .. }
    ));
    // An absurdly large key: int[1 << 30].
    let btf = hash_map_btf(|b, int| b.array(int, int, 1 << 30));
    let (_, kind) = map_err(parse(&btf_object(&btf, 32, &[("m", 0)])).unwrap_err());
    assert!(matches!(kind, MapErrorKind::Btf { error: BtfError::SizeOverflow(_), .. }));
    let btf = hash_map_btf(|b, int| b.array(int, int, 1000));
    let (_, kind) = map_err(parse(&btf_object(&btf, 32, &[("m", 0)])).unwrap_err());
    assert_eq!(kind, MapErrorKind::KeyTooLarge(4000));
}

#[test]
fn btf_map_variable_defects() {
    let btf = hash_map_btf(|_, int| int);
    // The global variable has no ELF symbol.
    assert_eq!(
        map_err(parse(&btf_object(&btf, 32, &[])).unwrap_err()),
        ("m".into(), MapErrorKind::NoSymbol)
    );
    // The symbol says offset 16: the 32-byte definition runs past the 32-byte section.
    assert_eq!(
        map_err(parse(&btf_object(&btf, 32, &[("m", 16)])).unwrap_err()),
        (
            "m".into(),
            MapErrorKind::DefinitionOutOfBounds { offset: 16, size: 32, section_size: 32 }
        )
    );
    // A definition that is not a struct.
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    let var = b.var("m", int, 1);
    b.datasec(".maps", 0, &[(var, 0, 4)]);
    assert_eq!(
        map_err(parse(&btf_object(&b, 32, &[("m", 0)])).unwrap_err()),
        ("m".into(), MapErrorKind::NotStruct)
    );
    // __uint() that is not a pointer to an array.
    let mut b = BtfBuilder::new();
    let int = b.int("int", 4);
    let def = b.strukt("", 8, &[("type", int, 0)]);
    let var = b.var("m", def, 1);
    b.datasec(".maps", 0, &[(var, 0, 8)]);
    assert!(matches!(
        map_err(parse(&btf_object(&b, 32, &[("m", 0)])).unwrap_err()).1,
        MapErrorKind::BadField { field, .. } if field == "type"
    ));
}
