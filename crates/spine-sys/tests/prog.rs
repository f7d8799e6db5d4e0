//! Program load and `BPF_PROG_TEST_RUN` for XDP: needs root and bpf(2).

mod common;

use std::os::fd::AsRawFd;

use common::*;
use spine_abi::{helper, map_type, prog_type, update_flags, xdp_action, xdp_md};
use spine_isa::{op, Insn};
use spine_sys::{load_program, KernelMap, KernelProg, MapDef, TestRun, XdpMd};

fn load(insns: &[Insn]) -> KernelProg {
    load_program(prog_type::XDP, insns, "GPL", "spine_test", 0).unwrap()
}

fn sub_reg(dst: u8, src: u8) -> Insn {
    Insn::new(op::ALU64 | op::SUB | op::X, dst, src, 0, 0)
}

/// Returns XDP_TX after swapping the Ethernet destination and source addresses, or
/// XDP_PASS when the packet is shorter than 12 bytes.
fn swap_macs() -> Vec<Insn> {
    vec![
        ldx(op::W, R2, R1, xdp_md::DATA),
        ldx(op::W, R3, R1, xdp_md::DATA_END),
        mov_reg(R4, R2),
        add_imm(R4, 12),
        jgt_reg(R4, R3, 10),
        ldx(op::W, R5, R2, 0),
        ldx(op::H, R6, R2, 4),
        ldx(op::W, R7, R2, 6),
        ldx(op::H, R8, R2, 10),
        stx(op::W, R2, R7, 0),
        stx(op::H, R2, R8, 4),
        stx(op::W, R2, R5, 6),
        stx(op::H, R2, R6, 10),
        mov_imm(R0, xdp_action::TX as i32),
        exit(),
        mov_imm(R0, xdp_action::PASS as i32),
        exit(),
    ]
}

#[test]
fn pass_program_returns_the_packet_unchanged() {
    require_bpf!();
    let prog = load(&ret(xdp_action::PASS as i32));
    let pkt = frame();
    let out = prog.test_run(&TestRun::new(&pkt)).unwrap();
    assert_eq!(out.retval, xdp_action::PASS);
    assert_eq!(out.data_out, pkt);
    assert_eq!(out.ctx_out, None);
    assert_eq!(prog.insn_cnt(), 2);
    assert!(prog.log().is_none());
}

#[test]
fn swap_program_rewrites_the_packet() {
    require_bpf!();
    let prog = load(&swap_macs());
    let pkt = frame();
    let out = prog.test_run(&TestRun::new(&pkt)).unwrap();
    assert_eq!(out.retval, xdp_action::TX);
    let mut want = pkt.clone();
    want[..6].copy_from_slice(&pkt[6..12]);
    want[6..12].copy_from_slice(&pkt[..6]);
    assert_eq!(out.data_out, want);

    // The smallest packet the kernel accepts is ETH_HLEN bytes.
    let short = &pkt[..14];
    let out = prog.test_run(&TestRun::new(short)).unwrap();
    assert_eq!(out.data_out[..12], want[..12]);
    let e = prog.test_run(&TestRun::new(&pkt[..13])).unwrap_err();
    assert_eq!((e.op, e.errno), ("BPF_PROG_TEST_RUN", libc::EINVAL));
}

#[test]
fn verifier_refusal_carries_the_log() {
    require_bpf!();
    // r0 is never written.
    for log_level in [0, 1] {
        let e = load_program(prog_type::XDP, &[exit()], "GPL", "bad", log_level).unwrap_err();
        assert_eq!((e.op, e.errno), ("BPF_PROG_LOAD", libc::EACCES), "{e}");
        let log = e.log.as_deref().expect("verifier log");
        assert!(log.contains("R0 !read_ok"), "{log}");
        assert!(e.to_string().contains("R0 !read_ok"), "{e}");
    }
    // An out-of-bounds packet read: the verifier names the access.
    let insns = [ldx(op::W, R2, R1, xdp_md::DATA), ldx(op::B, R0, R2, 0), exit()];
    let e = load_program(prog_type::XDP, &insns, "GPL", "oob", 0).unwrap_err();
    assert_eq!(e.errno, libc::EACCES);
    assert!(e.log.as_deref().unwrap().contains("invalid access to packet"), "{e:?}");
    // A GPL-only helper under a proprietary license.
    let insns = [call(helper::KTIME_GET_NS), exit()];
    assert!(load_program(prog_type::XDP, &insns, "GPL", "gpl", 0).is_ok());
    let e = load_program(prog_type::XDP, &[call(6), mov_imm(R0, 2), exit()], "Proprietary", "p", 0)
        .unwrap_err();
    assert!(e.log.as_deref().unwrap().contains("GPL"), "{e:?}");
}

#[test]
fn log_level_keeps_the_log_of_a_successful_load() {
    require_bpf!();
    let prog = load_program(prog_type::XDP, &ret(2), "GPL", "logged", 1).unwrap();
    assert!(prog.log().unwrap().contains("processed 2 insns"), "{:?}", prog.log());
}

#[test]
fn prog_info_reports_the_sanitised_name() {
    require_bpf!();
    let prog = load_program(prog_type::XDP, &ret(2), "GPL", "xdp-prog/with:long name", 0).unwrap();
    assert_eq!(prog.name(), "xdp_prog_with_l");
    let info = prog.info().unwrap();
    assert_eq!(info.name, "xdp_prog_with_l");
    assert_eq!(info.prog_type, prog_type::XDP);
    assert_ne!(info.id, 0);
    assert_eq!(info.xlated_len, 16);
}

#[test]
fn adjust_tail_growth_fits_the_default_output_room() {
    require_bpf!();
    let grow = |delta: i32| {
        load(&[
            mov_imm(R2, delta),
            call(helper::XDP_ADJUST_TAIL),
            jeq_imm(R0, 0, 2),
            mov_imm(R0, xdp_action::ABORTED as i32),
            exit(),
            mov_imm(R0, xdp_action::PASS as i32),
            exit(),
        ])
    };
    let pkt = frame();
    let out = grow(100).test_run(&TestRun::new(&pkt)).unwrap();
    assert_eq!(out.retval, xdp_action::PASS);
    assert_eq!(out.data_out.len(), 160);
    assert_eq!(out.data_out[..60], pkt[..]);
    assert!(out.data_out[60..].iter().all(|&b| b == 0), "grown tail is zeroed");

    let out = grow(-10).test_run(&TestRun::new(&pkt)).unwrap();
    assert_eq!(out.data_out, pkt[..50]);

    // The largest growth the frame allows (the kernel refuses more).
    let big = vec![0xabu8; 3000];
    let out = grow(520).test_run(&TestRun::new(&big)).unwrap();
    assert_eq!(out.retval, xdp_action::PASS);
    assert_eq!(out.data_out.len(), 3520);
    let out = grow(521).test_run(&TestRun::new(&big)).unwrap();
    assert_eq!(out.retval, xdp_action::ABORTED);
    assert_eq!(out.data_out, big);
}

#[test]
fn too_small_output_is_enospc_and_zero_asks_for_none() {
    require_bpf!();
    let prog = load(&ret(xdp_action::PASS as i32));
    let pkt = frame();
    let mut run = TestRun::new(&pkt);
    run.data_out_capacity = 10;
    assert_eq!(prog.test_run(&run).unwrap_err().errno, libc::ENOSPC);
    run.data_out_capacity = 0;
    let out = prog.test_run(&run).unwrap();
    assert_eq!(out.retval, xdp_action::PASS);
    assert!(out.data_out.is_empty());
}

#[test]
fn context_in_sets_interface_and_metadata() {
    require_bpf!();
    // Returns ingress_ifindex * 1000 + rx_queue_index.
    let ifindex = load(&[
        ldx(op::W, R0, R1, xdp_md::INGRESS_IFINDEX),
        Insn::new(op::ALU64 | op::MUL | op::K, R0, 0, 0, 1000),
        ldx(op::W, R2, R1, xdp_md::RX_QUEUE_INDEX),
        Insn::new(op::ALU64 | op::ADD | op::X, R0, R2, 0, 0),
        exit(),
    ]);
    let pkt = frame();
    let lo = 1; // the loopback device of this network namespace
    let mut run = TestRun::new(&pkt);
    run.ctx_in = Some(XdpMd { ingress_ifindex: lo, ..XdpMd::for_packet(60, 0) });
    run.ctx_out = true;
    let out = ifindex.test_run(&run).unwrap();
    assert_eq!(out.retval, 1000);
    assert_eq!(out.data_out, pkt);
    assert_eq!(
        out.ctx_out,
        Some(XdpMd {
            data: 0,
            data_end: 60,
            data_meta: 0,
            ingress_ifindex: lo,
            ..XdpMd::default()
        })
    );
    // Without a context the program sees the loopback device too (the kernel's default).
    assert_eq!(ifindex.test_run(&TestRun::new(&pkt)).unwrap().retval, 1000);

    // Returns data - data_meta: the metadata length.
    let meta = load(&[
        ldx(op::W, R0, R1, xdp_md::DATA),
        ldx(op::W, R2, R1, xdp_md::DATA_META),
        sub_reg(R0, R2),
        exit(),
    ]);
    let mut with_meta = vec![0xee; 8];
    with_meta.extend_from_slice(&pkt);
    let mut run = TestRun::new(&with_meta);
    run.ctx_in = Some(XdpMd::for_packet(68, 8));
    run.ctx_out = true;
    let out = meta.test_run(&run).unwrap();
    assert_eq!(out.retval, 8);
    assert_eq!(out.data_out, with_meta, "output starts at data_meta");
    assert_eq!(out.ctx_out, Some(XdpMd::for_packet(68, 8)));

    // ctx_out alone: the default context is sent for the kernel's sake.
    let mut run = TestRun::new(&pkt);
    run.ctx_out = true;
    let out = meta.test_run(&run).unwrap();
    assert_eq!(out.retval, 0);
    assert_eq!(out.ctx_out, Some(XdpMd::for_packet(60, 0)));
}

#[test]
fn context_that_does_not_describe_the_packet_is_refused() {
    require_bpf!();
    let prog = load(&ret(xdp_action::PASS as i32));
    let pkt = frame();
    let good = XdpMd::for_packet(60, 0);
    let cases = [
        ("data_meta set", XdpMd { data_meta: 4, ..good }, libc::EINVAL),
        ("data_end past the packet", XdpMd { data_end: 61, ..good }, libc::EINVAL),
        ("data past end", XdpMd { data: 64, ..good }, libc::EINVAL),
        ("metadata not a multiple of 4", XdpMd { data: 6, ..good }, libc::EINVAL),
        ("metadata beyond the headroom", XdpMd { data: 256, data_end: 256, ..good }, libc::EINVAL),
        ("egress_ifindex set", XdpMd { egress_ifindex: 1, ..good }, libc::EINVAL),
        ("queue without device", XdpMd { rx_queue_index: 1, ..good }, libc::EINVAL),
        ("no such device", XdpMd { ingress_ifindex: 0x7fff_fff0, ..good }, libc::ENODEV),
        ("no such queue", XdpMd { ingress_ifindex: 1, rx_queue_index: 4096, ..good }, libc::EINVAL),
    ];
    for (what, ctx, errno) in cases {
        let mut run = TestRun::new(&pkt);
        run.ctx_in = Some(ctx);
        match prog.test_run(&run) {
            Err(e) => assert_eq!(e.errno, errno, "{what}: {e}"),
            Ok(out) => panic!("{what}: accepted, {out:?}"),
        }
    }
    // The largest metadata: the 256-byte headroom less struct xdp_frame (40 bytes).
    let mut long = vec![0u8; 216];
    long.extend_from_slice(&pkt);
    let mut run = TestRun::new(&long);
    run.ctx_in = Some(XdpMd::for_packet(276, 216));
    assert_eq!(prog.test_run(&run).unwrap().data_out, long);
}

#[test]
fn repeat_runs_the_program_that_many_times() {
    require_bpf!();
    let counter = KernelMap::create("count", MapDef::new(map_type::ARRAY, 4, 8, 1), None).unwrap();
    let fd = counter.fd().as_raw_fd() as u64;
    let mut insns = Insn::lddw(R1, op::PSEUDO_MAP_VALUE, fd).to_vec();
    insns.extend([mov_imm(R2, 1), atomic_add64(R1, R2, 0)]);
    insns.extend(ret(xdp_action::DROP as i32));
    let prog = load(&insns);
    let pkt = frame();
    let mut run = TestRun::new(&pkt);
    run.repeat = 10;
    let out = prog.test_run(&run).unwrap();
    assert_eq!(out.retval, xdp_action::DROP);
    let value = counter.lookup_vec(&0u32.to_ne_bytes()).unwrap().unwrap();
    assert_eq!(u64::from_ne_bytes(value.try_into().unwrap()), 10);

    run.repeat = 0; // the kernel runs once
    prog.test_run(&run).unwrap();
    let value = counter.lookup_vec(&0u32.to_ne_bytes()).unwrap().unwrap();
    assert_eq!(u64::from_ne_bytes(value.try_into().unwrap()), 11);
    counter.update(&0u32.to_ne_bytes(), &0u64.to_ne_bytes(), update_flags::ANY).unwrap();
}

#[test]
fn xdp_rejects_unknown_test_run_flags() {
    require_bpf!();
    let prog = load(&ret(xdp_action::PASS as i32));
    let pkt = frame();
    let mut run = TestRun::new(&pkt);
    run.flags = 1 << 0; // BPF_F_TEST_RUN_ON_CPU: raw tracepoints only
    assert_eq!(prog.test_run(&run).unwrap_err().errno, libc::EINVAL);
}
