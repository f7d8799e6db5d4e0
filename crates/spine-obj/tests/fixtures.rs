//! Parses each C fixture built by clang and checks the exact maps, programs, relocated
//! instructions and call layouts, derived from the C source and from libbpf's rules;
//! then cross-checks every program against the ELF file read independently (the
//! `object` crate, `llvm-readelf`).

mod common;

use common::{check_against_elf, fixture, readelf_sections, readelf_symbols, FIXTURES};
use spine_abi::{map_flags, map_type};
use spine_isa::{op, Insn};
use spine_obj::{MapOrigin, MapSpec, Object, ProgType, Program, SlotTarget};

fn parse(name: &str) -> Object {
    let (_, bytes) = fixture(name);
    spine_obj::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (name, type, key, value, max_entries, flags) of a map.
fn shape(m: &MapSpec) -> (&str, u32, u32, u32, u32, u32) {
    (&m.name, m.map_type, m.key_size, m.value_size, m.max_entries, m.flags)
}

fn functions(p: &Program) -> Vec<(usize, &str)> {
    p.functions.iter().map(|(s, n)| (*s, n.as_str())).collect()
}

/// `lddw` at `pc`: (dst, src, imm, second-slot imm).
fn lddw(p: &Program, pc: usize) -> (u8, u8, i32, i32) {
    let i = p.insns[pc];
    assert!(i.is_lddw(), "{}: {pc} is not lddw", p.name);
    (i.dst, i.src, i.imm, p.insns[pc + 1].imm)
}

/// Every `lddw` with a pseudo source in `p`, as (pc, src, imm, second imm).
fn pseudo_loads(p: &Program) -> Vec<(usize, u8, i32, i32)> {
    let mut out = Vec::new();
    let mut pc = 0;
    while pc < p.insns.len() {
        let i = p.insns[pc];
        if i.is_lddw() {
            if i.src != 0 {
                out.push((pc, i.src, i.imm, p.insns[pc + 1].imm));
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    out
}

/// Slot a local call at `pc` lands on.
fn call_target(p: &Program, pc: usize) -> usize {
    let i = p.insns[pc];
    assert!(i.is_local_call(), "{}: {pc} is not a local call", p.name);
    (pc as i64 + 1 + i.imm as i64) as usize
}

#[test]
fn btf_maps_fixture() {
    let obj = parse("btf_maps");
    assert_eq!(obj.license, "Dual BSD/GPL");
    use map_type::*;
    let shapes: Vec<_> = obj.maps.iter().map(shape).collect();
    // libbpf orders BTF maps by their offset in .maps (symbol order), then global data.
    assert_eq!(
        shapes,
        vec![
            ("inner1", ARRAY, 4, 8, 16, 0),
            ("outer", ARRAY_OF_MAPS, 4, 4, 2, 0),
            ("flows", HASH, 16, 16, 1024, map_flags::NO_PREALLOC),
            ("counters", PERCPU_ARRAY, 4, 8, 4, 0),
            ("routes", LPM_TRIE, 8, 4, 256, map_flags::NO_PREALLOC),
            ("ports", DEVMAP, 4, 4, 8, 0),
            ("events", RINGBUF, 0, 0, 4096, 0),
            // clang's constant pool for `struct flow_key k = { .proto = 6 }`: libbpf makes
            // every non-empty .rodata.* section a map, used or not.
            (".rodata.cst16", ARRAY, 4, 16, 1, map_flags::RDONLY_PROG),
        ]
    );
    for m in &obj.maps[..7] {
        assert_eq!(m.origin, MapOrigin::Btf, "{}", m.name);
        assert_eq!(m.initial, None);
        assert_eq!((m.numa_node, m.map_extra), (0, 0));
    }
    let pinned: Vec<_> = obj.maps.iter().filter(|m| m.pinning == 1).map(|m| &m.name).collect();
    assert_eq!(pinned, ["routes"]);

    // The map-in-map: inner template from __array(values, struct inner_map), slot 1
    // initialised to inner1 (map 0) from .rel.maps.
    let outer = &obj.maps[1];
    let inner = outer.inner.as_deref().expect("inner map template");
    assert_eq!(shape(inner), ("outer.inner", ARRAY, 4, 8, 16, 0));
    assert_eq!(inner.origin, MapOrigin::Btf);
    assert_eq!(outer.init_slots, vec![(1, SlotTarget::Map(0))]);
    assert!(obj.maps.iter().filter(|m| m.name != "outer").all(|m| m.inner.is_none()));
    assert!(obj.maps.iter().filter(|m| m.name != "outer").all(|m| m.init_slots.is_empty()));

    // .rodata.cst16 holds flow_key {saddr 0, daddr 0, sport 0, dport 0, proto 6}
    // padded to 16 bytes.
    let mut key = [0u8; 16];
    key[12] = 6;
    assert_eq!(obj.maps[7].initial.as_deref(), Some(&key[..]));
    assert_eq!(
        obj.maps[7].origin,
        MapOrigin::GlobalData { section: ".rodata.cst16".into(), read_only: true }
    );

    assert_eq!(obj.programs.len(), 1);
    let p = &obj.programs[0];
    assert_eq!(
        (p.name.as_str(), p.section.as_str(), p.prog_type),
        ("xdp_flows", "xdp", ProgType::Xdp)
    );
    assert_eq!(functions(p), [(0, "xdp_flows")]);
    assert_eq!(p.insns.len(), 58);
    let fd = op::PSEUDO_MAP_FD;
    assert_eq!(
        pseudo_loads(p),
        vec![
            (10, fd, 2, 0), // flows
            (18, fd, 3, 0), // counters
            (30, fd, 1, 0), // outer
            (46, fd, 4, 0), // routes
            (52, fd, 5, 0), // ports
        ]
    );
    // The lpm key constant is a plain lddw and stays one.
    assert_eq!(lddw(p, 41), (1, 0, 0x0000_0020, 0x0100_000a));
}

#[test]
fn legacy_maps_fixture() {
    let obj = parse("legacy_maps");
    assert_eq!(obj.license, "GPL");
    let shapes: Vec<_> = obj.maps.iter().map(shape).collect();
    assert_eq!(
        shapes,
        vec![
            ("rxcnt", map_type::PERCPU_ARRAY, 4, 8, 256, 0),
            ("blocked", map_type::HASH, 4, 1, 64, 1),
        ]
    );
    assert!(obj.maps.iter().all(|m| m.origin == MapOrigin::Legacy && m.pinning == 0));
    let p = &obj.programs[0];
    assert_eq!(functions(p), [(0, "xdp_legacy")]);
    assert_eq!(pseudo_loads(p), vec![(4, op::PSEUDO_MAP_FD, 0, 0), (13, op::PSEUDO_MAP_FD, 1, 0)]);
    assert_eq!(lddw(p, 4).0, 1, "destination register kept");
}

#[test]
fn global_data_fixture() {
    let obj = parse("global_data");
    assert_eq!(obj.license, "GPL");
    let data = |name: &str| obj.maps.iter().position(|m| m.name == name).unwrap();
    let shapes: Vec<_> = obj.maps.iter().map(shape).collect();
    let ro = map_flags::RDONLY_PROG;
    assert_eq!(
        shapes,
        vec![
            (".data", map_type::ARRAY, 4, 24, 1, 0),
            (".rodata", map_type::ARRAY, 4, 42, 1, ro),
            (".data.tuning", map_type::ARRAY, 4, 4, 1, 0),
            (".bss", map_type::ARRAY, 4, 40, 1, 0),
        ]
    );
    for m in &obj.maps {
        let read_only = m.name.starts_with(".rodata");
        assert_eq!(m.origin, MapOrigin::GlobalData { section: m.name.clone(), read_only });
    }
    // .data: pkt_count = 5 (u64), verdicts = {1, 2, 3, 4}.
    let mut d = 5u64.to_le_bytes().to_vec();
    for v in [1u32, 2, 3, 4] {
        d.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(obj.maps[0].initial.as_deref(), Some(&d[..]));
    // .rodata: drop_port = 53, 4 bytes padding, limits = {7, 9}, then bpf_printk's
    // format string at 24.
    let mut r = 53u32.to_le_bytes().to_vec();
    r.extend_from_slice(&[0; 4]);
    r.extend_from_slice(&7u64.to_le_bytes());
    r.extend_from_slice(&9u64.to_le_bytes());
    r.extend_from_slice(b"seen %llu packets\0");
    assert_eq!(obj.maps[1].initial.as_deref(), Some(&r[..]));
    assert_eq!(obj.maps[2].initial.as_deref(), Some(&0xabcdu32.to_le_bytes()[..]));
    assert_eq!(obj.maps[3].initial.as_deref(), Some(&[0u8; 40][..]));

    let p = &obj.programs[0];
    let v = op::PSEUDO_MAP_VALUE;
    let (dat, rod, tun, bss) = (data(".data"), data(".rodata"), data(".data.tuning"), data(".bss"));
    let i = |m: usize| m as i32;
    assert_eq!(
        pseudo_loads(p),
        vec![
            (1, v, i(dat), 0),   // pkt_count
            (6, v, i(tun), 0),   // tuned
            (11, v, i(rod), 0),  // drop_port
            (14, v, i(rod), 8),  // limits (symbol value 8)
            (17, v, i(dat), 8),  // verdicts
            (21, v, i(bss), 8),  // scratch
            (24, v, i(bss), 0),  // seen
            (29, v, i(rod), 24), // the format string: section symbol, imm 24
        ]
    );
    // The first slot's imm of a map-value load is the map index, not the offset clang
    // left there.
    assert_eq!(lddw(p, 29), (1, v, i(rod), 24));
}

#[test]
fn calls_fixture() {
    let obj = parse("calls");
    assert!(obj.maps.is_empty());
    let progs: Vec<_> =
        obj.programs.iter().map(|p| (p.name.as_str(), p.section.as_str(), p.prog_type)).collect();
    // Sorted by section, then offset; .text functions are never programs.
    assert_eq!(
        progs,
        vec![
            ("xdp_calls", "xdp", ProgType::Xdp),
            ("xdp_calls_leaf", "xdp", ProgType::Xdp),
            ("xdp_frags_prog", "xdp.frags", ProgType::XdpFrags),
            ("tc_prog", "tc", ProgType::SchedCls),
            ("spine_msg", "spine/msg", ProgType::Spine),
        ]
    );
    let by_name = |n: &str| obj.programs.iter().find(|p| p.name == n).unwrap();

    // xdp_calls -> global_helper (relocation against the FUNC symbol) -> middle
    // (pc-relative inside .text) -> leaf twice: appended depth-first, each once.
    let p = by_name("xdp_calls");
    assert_eq!(functions(p), [(0, "xdp_calls"), (4, "global_helper"), (7, "middle"), (15, "leaf")]);
    assert_eq!(p.insns.len(), 19);
    assert_eq!(call_target(p, 1), 4);
    assert_eq!(call_target(p, 4), 7);
    assert_eq!(call_target(p, 8), 15);
    assert_eq!(call_target(p, 12), 15);

    // A relocation against the .text section symbol with imm encoding the offset.
    let p = by_name("xdp_calls_leaf");
    assert_eq!(functions(p), [(0, "xdp_calls_leaf"), (4, "leaf")]);
    assert_eq!(call_target(p, 1), 4);

    let p = by_name("xdp_frags_prog");
    assert_eq!(functions(p), [(0, "xdp_frags_prog"), (4, "middle"), (12, "leaf")]);
    assert_eq!((call_target(p, 1), call_target(p, 5), call_target(p, 9)), (4, 12, 12));

    let p = by_name("tc_prog");
    assert_eq!(functions(p), [(0, "tc_prog")]);
    assert_eq!(p.insns, [Insn::new(0xb4, 0, 0, 0, 0), Insn::new(0x95, 0, 0, 0, 0)]);

    let p = by_name("spine_msg");
    assert_eq!(functions(p), [(0, "spine_msg"), (3, "leaf")]);
    assert_eq!(call_target(p, 1), 3);

    assert!(obj.programs.iter().all(|p| p.functions.iter().all(|f| f.1 != "unused_global")));
    assert_eq!(obj.program(Some("tc")).map(|p| p.name.as_str()), Some("tc_prog"));
    assert_eq!(obj.program(Some("xdp_calls_leaf")).map(|p| p.section.as_str()), Some("xdp"));
    assert_eq!(obj.program(None).map(|p| p.name.as_str()), Some("xdp_calls"));
    assert!(obj.program(Some("kprobe")).is_none());
}

#[test]
fn callback_fixture() {
    let obj = parse("callback");
    let p = &obj.programs[0];
    assert_eq!(functions(p), [(0, "xdp_loop"), (12, "step")]);
    // `r2 = step` for bpf_loop: lddw with the pseudo-function source, relative like a
    // call (5 + 6 + 1 = 12).
    assert_eq!(lddw(p, 5), (2, op::PSEUDO_FUNC, 6, 0));
    assert_eq!(p.insns[8], Insn::new(op::JMP | op::CALL, 0, 0, 0, 181));
    assert_eq!(p.insns.len(), 18);
}

#[test]
fn own_section_fixture() {
    let obj = parse("own_section");
    let shapes: Vec<_> = obj.maps.iter().map(shape).collect();
    assert_eq!(shapes, vec![("jumps", map_type::PROG_ARRAY, 4, 4, 4, 0)]);
    assert_eq!(
        obj.maps[0].init_slots,
        vec![(1, SlotTarget::Program("sibling".into())), (3, SlotTarget::Program("caller".into())),]
    );
    let progs: Vec<_> =
        obj.programs.iter().map(|p| (p.name.as_str(), p.section.as_str(), p.prog_type)).collect();
    // Two programs in "xdp" (the static local_helper is not one), one in xdp/devmap.
    assert_eq!(
        progs,
        vec![
            ("sibling", "xdp", ProgType::Xdp),
            ("caller", "xdp", ProgType::Xdp),
            ("dispatch", "xdp/devmap", ProgType::Xdp),
        ]
    );
    // sibling calls the static local_helper pc-relative (no relocation).
    let p = &obj.programs[0];
    assert_eq!(functions(p), [(0, "sibling"), (4, "local_helper")]);
    assert_eq!(call_target(p, 1), 4);
    // caller calls sibling through a relocation against its FUNC symbol in the same
    // section; sibling's own callee follows it.
    let p = &obj.programs[1];
    assert_eq!(functions(p), [(0, "caller"), (3, "sibling"), (7, "local_helper")]);
    assert_eq!((call_target(p, 0), call_target(p, 4)), (3, 7));
    let p = &obj.programs[2];
    assert_eq!(pseudo_loads(p), vec![(2, op::PSEUDO_MAP_FD, 0, 0)]);
}

#[test]
fn mixed_fixture() {
    let obj = parse("mixed");
    assert_eq!(obj.license, "Dual MIT/GPL");
    use map_type::*;
    let ro = map_flags::RDONLY_PROG;
    let shapes: Vec<_> = obj.maps.iter().map(shape).collect();
    // Legacy first, then BTF, then global data in section order.
    assert_eq!(
        shapes,
        vec![
            ("old_array", ARRAY, 4, 16, 3, 0),
            ("by_flow", HASH, 8, 4, 32, 0),
            ("tenants", HASH_OF_MAPS, 4, 4, 8, 0),
            (".data", ARRAY, 4, 12, 1, 0),
            (".data.custom", ARRAY, 4, 8, 1, 0),
            (".rodata", ARRAY, 4, 8, 1, ro),
            (".rodata.str1.1", ARRAY, 4, 16, 1, ro),
            (".bss", ARRAY, 4, 24, 1, 0),
        ]
    );
    let origins: Vec<_> = obj.maps.iter().map(|m| m.origin.clone()).collect();
    assert_eq!(origins[..3], [MapOrigin::Legacy, MapOrigin::Btf, MapOrigin::Btf]);
    let tenants = &obj.maps[2];
    assert_eq!(shape(tenants.inner.as_deref().unwrap()), ("tenants.inner", HASH, 8, 4, 32, 0));
    assert_eq!(tenants.init_slots, vec![(5, SlotTarget::Map(1))]);

    // .data: visible (u64) then the static hidden_counter = 3.
    let mut d = 0x1122_3344_5566_7788u64.to_le_bytes().to_vec();
    d.extend_from_slice(&3u32.to_le_bytes());
    assert_eq!(obj.maps[3].initial.as_deref(), Some(&d[..]));
    assert_eq!(obj.maps[4].initial.as_deref(), Some(&[0xa1, 0, 0, 0, 0xb2, 0, 0, 0][..]));
    assert_eq!(obj.maps[5].initial.as_deref(), Some(&[9, 0, 0, 0, 10, 0, 0, 0][..]));
    assert_eq!(obj.maps[6].initial.as_deref(), Some(&b"literal one\0two\0"[..]));
    assert_eq!(obj.maps[7].initial.as_deref(), Some(&[0u8; 24][..]));

    let p = &obj.programs[0];
    assert_eq!((p.name.as_str(), p.prog_type), ("cls", ProgType::SchedCls));
    let (fd, v) = (op::PSEUDO_MAP_FD, op::PSEUDO_MAP_VALUE);
    assert_eq!(
        pseudo_loads(p),
        vec![
            (4, fd, 0, 0),  // old_array (legacy)
            (9, fd, 2, 0),  // tenants (BTF)
            (14, v, 6, 0),  // "literal one"
            (18, v, 6, 12), // "two": section symbol + imm 12
            (28, v, 3, 0),  // visible
            (31, v, 4, 4),  // custom_b: symbol value 4
            (35, v, 5, 0),  // tuning
            (38, v, 7, 0),  // zeroed (static, .bss section symbol)
            (41, v, 3, 8),  // hidden_counter (static, .data section symbol + imm 8)
        ]
    );
}

#[test]
fn every_program_matches_the_elf_file() {
    for name in FIXTURES {
        let (_, bytes) = fixture(name);
        let obj = spine_obj::parse(&bytes).unwrap();
        assert!(!obj.programs.is_empty(), "{name}");
        for p in &obj.programs {
            check_against_elf(&bytes, &obj, p);
        }
    }
}

#[test]
fn programs_and_data_maps_agree_with_llvm_readelf() {
    for name in FIXTURES {
        let (path, bytes) = fixture(name);
        let obj = spine_obj::parse(&bytes).unwrap();
        let sections = readelf_sections(&path);
        let sec_name = |idx: &str| {
            let i: usize = idx.parse().ok()?;
            sections.iter().find(|s| s.0 == i).map(|s| s.1.clone())
        };
        // Programs: global functions outside .text, by section index then value.
        let mut want: Vec<(usize, u64, String, String)> = readelf_symbols(&path)
            .into_iter()
            .filter(|s| s.1 == "FUNC" && (s.2 == "GLOBAL" || s.2 == "WEAK"))
            .filter_map(|s| {
                let sec = sec_name(&s.3)?;
                (sec != ".text").then(|| (s.3.parse().unwrap(), s.4, s.0, sec))
            })
            .collect();
        want.sort();
        let want: Vec<_> = want.into_iter().map(|w| (w.2, w.3)).collect();
        let got: Vec<_> =
            obj.programs.iter().map(|p| (p.name.clone(), p.section.clone())).collect();
        assert_eq!(got, want, "{name}: programs");

        // Global data: non-empty .data*/.rodata*/.bss* sections, in section order.
        let is_data = |n: &str| {
            [".data", ".rodata", ".bss"]
                .iter()
                .any(|b| n == *b || n.strip_prefix(b).is_some_and(|r| r.starts_with('.')))
        };
        let want: Vec<_> = sections
            .iter()
            .filter(|s| is_data(&s.1) && s.3 > 0)
            .map(|s| (s.1.clone(), s.3 as u32))
            .collect();
        let got: Vec<_> = obj
            .maps
            .iter()
            .filter(|m| matches!(m.origin, MapOrigin::GlobalData { .. }))
            .map(|m| (m.name.clone(), m.value_size))
            .collect();
        assert_eq!(got, want, "{name}: global data");
    }
}

#[test]
fn bundled_programs_parse() {
    // The project's own programs (bpf/*.c), built the same way.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "c") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let out = common::scratch().join(format!("bundled-{stem}.o"));
        let bytes = spine_progs::compile_c(&path, &out, &[]).unwrap_or_else(|e| panic!("{e}"));
        let obj = spine_obj::parse(&bytes).unwrap_or_else(|e| panic!("{stem}: {e}"));
        assert!(!obj.programs.is_empty(), "{stem}");
        for p in &obj.programs {
            check_against_elf(&bytes, &obj, p);
        }
        seen += 1;
    }
    assert!(seen >= 1, "no bundled programs found in {}", dir.display());
}
