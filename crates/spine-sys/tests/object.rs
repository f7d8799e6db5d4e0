//! The kernel-side object loader, on objects built by hand: needs root and bpf(2).

mod common;

use common::*;
use spine_abi::{helper, map_flags, map_type, update_flags, xdp_action};
use spine_isa::{op, Insn};
use spine_obj::{MapOrigin, MapSpec, Object, ProgType, Program, SlotTarget};
use spine_sys::{load_object_program, LoadError, TestRun};

fn map(name: &str, map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapSpec {
    MapSpec {
        name: name.into(),
        map_type,
        key_size,
        value_size,
        max_entries,
        flags: 0,
        pinning: 0,
        numa_node: 0,
        map_extra: 0,
        initial: None,
        origin: MapOrigin::Btf,
        inner: None,
        init_slots: Vec::new(),
        spin_lock: None,
        timer: None,
        btf_key_type_id: 0,
        btf_value_type_id: 0,
    }
}

fn global(section: &str, read_only: bool, initial: &[u8]) -> MapSpec {
    MapSpec {
        initial: Some(initial.to_vec()),
        origin: MapOrigin::GlobalData { section: section.into(), read_only },
        ..map(section, map_type::ARRAY, 4, initial.len() as u32, 1)
    }
}

fn program(insns: Vec<Insn>) -> Program {
    Program {
        name: "xdp_prog".into(),
        section: "xdp".into(),
        prog_type: ProgType::Xdp,
        insns,
        functions: vec![(0, "xdp_prog".into())],
    }
}

fn object(maps: Vec<MapSpec>, prog: &Program) -> Object {
    Object {
        license: "GPL".into(),
        programs: vec![prog.clone()],
        maps,
        skipped: Vec::new(),
        btf: None,
    }
}

/// `r0 = *(u32 *)lookup(map, &key)` with `key` a u32 on the stack, or XDP_DROP if absent.
fn lookup_u32(map_index: u32, key: i32) -> Vec<Insn> {
    let mut v = vec![st(op::W, R10, -4, key), mov_reg(R2, R10), add_imm(R2, -4)];
    v.extend(ld_map(R1, map_index));
    v.extend([call(helper::MAP_LOOKUP_ELEM), jeq_imm(R0, 0, 2), ldx(op::W, R0, R0, 0), exit()]);
    v.extend(ret(xdp_action::DROP as i32));
    v
}

fn u64_at(value: &[u8]) -> u64 {
    u64::from_ne_bytes(value[..8].try_into().unwrap())
}

#[test]
fn global_data_is_written_and_rodata_frozen() {
    require_bpf!();
    let rodata = global(".rodata", true, &[0, 0, 0, 0, 7, 0, 0, 0]);
    let data = global(".data", false, &5u64.to_ne_bytes());
    let bss = global(".bss", false, &[0; 8]);
    // r0 = rodata[4..8] + data[0..8]; bss[0..8] += 1.
    let mut insns = Vec::new();
    insns.extend(ld_map_value(R1, 0, 4));
    insns.push(ldx(op::W, R0, R1, 0));
    insns.extend(ld_map_value(R2, 1, 0));
    insns.push(ldx(op::DW, R3, R2, 0));
    insns.push(Insn::new(op::ALU64 | op::ADD | op::X, R0, R3, 0, 0));
    insns.extend(ld_map_value(R4, 2, 0));
    insns.extend([mov_imm(R5, 1), atomic_add64(R4, R5, 0), exit()]);
    let prog = program(insns);
    let obj = object(vec![rodata, data, bss], &prog);

    let k = load_object_program(&obj, &prog).unwrap();
    assert_eq!(k.maps.len(), 3);
    let key = 0u32.to_ne_bytes();
    assert_eq!(k.maps[0].lookup_vec(&key).unwrap().unwrap(), [0, 0, 0, 0, 7, 0, 0, 0]);
    assert_eq!(u64_at(&k.maps[1].lookup_vec(&key).unwrap().unwrap()), 5);

    let pkt = frame();
    let out = k.prog.test_run(&TestRun::new(&pkt)).unwrap();
    assert_eq!(out.retval, 12);
    assert_eq!(u64_at(&k.maps[2].lookup_vec(&key).unwrap().unwrap()), 1, ".bss counter");

    // .data stays writable from user space and the program sees the change.
    k.maps[1].update(&key, &10u64.to_ne_bytes(), update_flags::ANY).unwrap();
    assert_eq!(k.prog.test_run(&TestRun::new(&pkt)).unwrap().retval, 17);
    assert_eq!(u64_at(&k.maps[2].lookup_vec(&key).unwrap().unwrap()), 2);

    // .rodata is frozen and read-only to programs, as libbpf makes it.
    let e = k.maps[0].update(&key, &[0; 8], update_flags::ANY).unwrap_err();
    assert_eq!(e.errno, libc::EPERM);
    let info = k.maps[0].info().unwrap();
    assert_eq!(info.flags & map_flags::RDONLY_PROG, map_flags::RDONLY_PROG);
    assert_eq!(info.name, ".rodata");
    assert_eq!(k.maps[1].info().unwrap().flags & map_flags::RDONLY_PROG, 0);
}

#[test]
fn short_initial_data_is_zero_padded_and_long_refused() {
    require_bpf!();
    let mut data = global(".data", false, &[9, 9]);
    data.value_size = 8;
    let mut insns = ld_map_value(R1, 0, 0).to_vec();
    insns.extend([ldx(op::DW, R0, R1, 0), exit()]);
    let prog = program(insns);
    let k = load_object_program(&object(vec![data.clone()], &prog), &prog).unwrap();
    let value = k.maps[0].lookup_vec(&0u32.to_ne_bytes()).unwrap().unwrap();
    assert_eq!(value, [9, 9, 0, 0, 0, 0, 0, 0]);

    data.initial = Some(vec![1; 9]);
    let e = load_object_program(&object(vec![data], &prog), &prog).unwrap_err();
    assert_eq!(e, LoadError::InitialTooLong { map: ".data".into(), len: 9, value_size: 8 });
}

#[test]
fn a_program_cannot_write_rodata() {
    require_bpf!();
    let rodata = global(".rodata", true, &[1, 2, 3, 4]);
    let mut insns = ld_map_value(R1, 0, 0).to_vec();
    insns.push(st(op::W, R1, 0, 5));
    insns.extend(ret(2));
    let prog = program(insns);
    let e = load_object_program(&object(vec![rodata], &prog), &prog).unwrap_err();
    let LoadError::Prog { program, error } = e else { panic!("{e:?}") };
    assert_eq!(program, "xdp_prog");
    assert_eq!(error.errno, libc::EACCES);
    assert!(error.log.as_deref().unwrap().contains("write into map forbidden"), "{error:?}");
}

#[test]
fn hash_map_reference_is_linked_to_the_kernel_map() {
    require_bpf!();
    let prog = program(lookup_u32(0, 1));
    let obj = object(vec![map("verdicts", map_type::HASH, 4, 4, 8)], &prog);
    let k = load_object_program(&obj, &prog).unwrap();
    assert_eq!(k.maps[0].name(), "verdicts");
    let pkt = frame();
    assert_eq!(k.prog.test_run(&TestRun::new(&pkt)).unwrap().retval, xdp_action::DROP);
    k.maps[0]
        .update(&1u32.to_ne_bytes(), &xdp_action::TX.to_ne_bytes(), update_flags::NOEXIST)
        .unwrap();
    assert_eq!(k.prog.test_run(&TestRun::new(&pkt)).unwrap().retval, xdp_action::TX);
    // The source object is not modified: its lddw still holds the map index.
    assert_eq!(prog.insns[3].imm, 0);
}

#[test]
fn map_in_map_slots_are_filled() {
    require_bpf!();
    let inner = map("inner", map_type::ARRAY, 4, 4, 1);
    let mut outer = map("outer", map_type::ARRAY_OF_MAPS, 4, 4, 2);
    outer.inner = Some(Box::new(inner.clone()));
    outer.init_slots = vec![(0, SlotTarget::Map(1))];
    // r0 = *lookup(lookup(outer, 0), 0), or XDP_DROP.
    let mut insns = vec![st(op::W, R10, -4, 0), mov_reg(R2, R10), add_imm(R2, -4)];
    insns.extend(ld_map(R1, 0));
    insns.extend([call(helper::MAP_LOOKUP_ELEM), jeq_imm(R0, 0, 7)]);
    insns.extend([mov_reg(R1, R0), mov_reg(R2, R10), add_imm(R2, -4)]);
    insns.extend([call(helper::MAP_LOOKUP_ELEM), jeq_imm(R0, 0, 2), ldx(op::W, R0, R0, 0), exit()]);
    insns.extend(ret(xdp_action::DROP as i32));
    let prog = program(insns);
    let k = load_object_program(&object(vec![outer, inner], &prog), &prog).unwrap();

    let zero = 0u32.to_ne_bytes();
    let id = k.maps[0].lookup_vec(&zero).unwrap().unwrap();
    assert_eq!(u32::from_ne_bytes(id.try_into().unwrap()), k.maps[1].info().unwrap().id);
    assert_eq!(k.maps[0].lookup_vec(&1u32.to_ne_bytes()).unwrap(), None);

    k.maps[1].update(&zero, &xdp_action::PASS.to_ne_bytes(), update_flags::ANY).unwrap();
    let pkt = frame();
    assert_eq!(k.prog.test_run(&TestRun::new(&pkt)).unwrap().retval, xdp_action::PASS);
}

#[test]
fn malformed_or_unsupported_objects_are_refused() {
    require_bpf!();
    let pass = program(ret(2).to_vec());

    let prog = program(lookup_u32(5, 1));
    let e = load_object_program(&object(vec![map("m", map_type::HASH, 4, 4, 1)], &prog), &prog)
        .unwrap_err();
    assert_eq!(e, LoadError::BadMapRef { program: "xdp_prog".into(), insn: 3, index: 5, count: 1 });

    let mut truncated = ret(2).to_vec();
    truncated.push(Insn::lddw(R1, op::PSEUDO_MAP_FD, 0)[0]);
    let prog = program(truncated);
    let e = load_object_program(&object(vec![], &prog), &prog).unwrap_err();
    assert_eq!(e, LoadError::TruncatedLddw { program: "xdp_prog".into(), insn: 2 });

    let mut spine = pass.clone();
    spine.prog_type = ProgType::Spine;
    spine.section = "spine/msg".into();
    let e = load_object_program(&object(vec![], &spine), &spine).unwrap_err();
    assert!(matches!(e, LoadError::NoKernelType { .. }), "{e:?}");

    let mut jumps = map("jumps", map_type::PROG_ARRAY, 4, 4, 4);
    jumps.init_slots = vec![(0, SlotTarget::Program("xdp_prog".into()))];
    let k = load_object_program(&object(vec![jumps.clone()], &pass), &pass).unwrap();
    assert!(k.targets.is_empty(), "the program itself fills its slot");
    assert_eq!(k.maps[0].entries().unwrap().len(), 1, "slot 0 filled");
    jumps.init_slots = vec![(2, SlotTarget::Program("absent".into()))];
    let e = load_object_program(&object(vec![jumps], &pass), &pass).unwrap_err();
    assert_eq!(
        e,
        LoadError::NoSlotProgram { map: "jumps".into(), slot: 2, program: "absent".into() }
    );

    let mut outer = map("outer", map_type::HASH_OF_MAPS, 4, 4, 4);
    let e = load_object_program(&object(vec![outer.clone()], &pass), &pass).unwrap_err();
    assert_eq!(e, LoadError::NoInnerTemplate { map: "outer".into() });
    outer.inner = Some(Box::new(map("inner", map_type::ARRAY, 4, 4, 1)));
    outer.init_slots = vec![(1, SlotTarget::Map(7))];
    let e = load_object_program(&object(vec![outer], &pass), &pass).unwrap_err();
    assert_eq!(e, LoadError::BadSlot { map: "outer".into(), slot: 1, index: 7, count: 1 });

    let e = load_object_program(&object(vec![map("nokey", map_type::HASH, 0, 4, 1)], &pass), &pass)
        .unwrap_err();
    let LoadError::Map { map, error } = e else { panic!("{e:?}") };
    assert_eq!((map.as_str(), error.op, error.errno), ("nokey", "BPF_MAP_CREATE", libc::EINVAL));
}

#[test]
fn xdp_frags_programs_load_with_the_frags_flag() {
    require_bpf!();
    // bpf_xdp_get_buff_len sees the fragments only in a program loaded with the flag.
    let mut prog = program(vec![call(helper::XDP_GET_BUFF_LEN), exit()]);
    prog.prog_type = ProgType::XdpFrags;
    prog.section = "xdp.frags".into();
    let k = load_object_program(&object(vec![], &prog), &prog).unwrap();
    let big = vec![0x5au8; 5000];
    let out = k.prog.test_run(&TestRun::new(&big)).unwrap();
    assert_eq!(out.retval, 5000);
    assert_eq!(out.data_out, big);
}
