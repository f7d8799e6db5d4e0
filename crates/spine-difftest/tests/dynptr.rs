//! XDP dynptrs against the kernel (`tests/fixtures/dynptr.c`): the kfuncs
//! `bpf_dynptr_from_xdp`, `bpf_dynptr_slice`/`_slice_rdwr`, `_adjust`, `_is_null`,
//! `_is_rdonly`, `_size` and `_clone` (declared `extern ... __ksym __weak` as libbpf
//! programs declare them; spine resolves them by name, the kernel side loads them as
//! `BPF_PSEUDO_KFUNC_CALL`s of the running kernel's BTF ids) and the helpers
//! `bpf_dynptr_read`, `_write` and `_data`, on both engines: same verdicts and bytes
//! as `BPF_PROG_TEST_RUN` on frames that parse, truncated ones, and slices, reads and
//! writes past the end; in an `xdp.frags` program, slices across and inside fragments.
//! Programs the kernel's verifier refuses (a slice used after `bpf_xdp_adjust_head`, a
//! write through a read-only slice, ...) are refused by spine too. Needs root (bpf(2));
//! without it each test says SKIP loudly and passes.

mod common;

use common::kernel_available;
use spine_runtime::EngineKind;

fn object(tag: &str, extra: &[&str]) -> Vec<u8> {
    common::fixture("dynptr", tag, extra)
}

/// An Ethernet/IPv4/UDP frame with `opts` 4-byte words of IP options, cut to `len`
/// bytes (0: whole).
fn udp_frame(opts: usize, proto: u8, ethertype: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut p = vec![0u8; 12];
    p[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    p[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    p.extend_from_slice(&ethertype.to_be_bytes());
    let ihl = 5 + opts;
    let total = (ihl * 4 + 8 + 12) as u16;
    p.push(0x40 | ihl as u8);
    p.push(0);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    for i in 0..opts * 4 {
        p.push(i as u8 | 0x80);
    }
    p.extend_from_slice(&1234u16.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&20u16.to_be_bytes());
    p.extend_from_slice(&0xbeefu16.to_be_bytes());
    p.extend_from_slice(b"dynptr-payl!");
    if len > 0 {
        p.truncate(len);
    }
    p
}

/// Runs `pkt` through `program` of `object` in spine alone, on `engine`: the verdict and
/// the frame after.
fn spine_run(object: &[u8], program: &str, engine: EngineKind, pkt: &[u8]) -> (u32, Vec<u8>) {
    use spine_runtime::{FixedHost, Frame, Geometry, LoadOptions, RxInfo, XdpRunner, MAX_FRAGS};
    let obj = spine_obj::parse(object).expect("object");
    let opts = LoadOptions { engine, ..LoadOptions::default() };
    let (_loaded, ext) = spine_runtime::load_selected(&obj, Some(program), &opts).expect("load");
    let mut runner = XdpRunner::new(ext, 0).expect("runner");
    let mut frame = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS);
    frame.load(pkt).expect("frame");
    let verdict = runner.run(&mut frame, RxInfo::default(), &mut FixedHost::new(1)).expect("run");
    let mut out = Vec::new();
    frame.copy_out(&mut out);
    (verdict, out)
}

/// Without the kernel (no root needed): the UDP program loads in spine and rewrites the
/// destination port through a writable slice, the same on both engines; a truncated
/// frame is dropped.
#[test]
fn udp_rewrite_through_a_slice_without_the_kernel() {
    let object = object("alone", &[]);
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        for opts in [0usize, 2] {
            let pkt = udp_frame(opts, 17, 0x0800, 53, 0);
            let (verdict, out) = spine_run(&object, "dynptr_udp", engine, &pkt);
            assert_eq!(verdict, 3, "{engine:?}: XDP_TX");
            let udp = 14 + (5 + opts) * 4;
            assert_eq!(&out[udp + 2..udp + 4], &54u16.to_be_bytes(), "{engine:?}: port + 1");
            assert_eq!(&out[udp + 6..udp + 8], &[0, 0], "{engine:?}: checksum cleared");
            assert_eq!(out[..udp + 2], pkt[..udp + 2], "{engine:?}: the rest untouched");
            let cut = udp_frame(opts, 17, 0x0800, 53, udp + 7);
            assert_eq!(spine_run(&object, "dynptr_udp", engine, &cut).0, 1, "{engine:?}: DROP");
        }
    }
}

#[test]
fn slices_parse_and_rewrite_udp_as_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for opts in [0usize, 1, 3, 10] {
        for dport in [53u16, 0xffff] {
            pkts.push(udp_frame(opts, 17, 0x0800, dport, 0));
            // Truncated: in the Ethernet header, the IP header, the options, the UDP
            // header, and one byte short of the whole UDP header.
            let whole = 14 + (5 + opts) * 4 + 8;
            for cut in [1usize, 13, 14, 20, 33, 34, 34 + opts * 4, whole - 1, whole] {
                pkts.push(udp_frame(opts, 17, 0x0800, dport, cut));
            }
        }
        pkts.push(udp_frame(opts, 6, 0x0800, 80, 0));
        pkts.push(udp_frame(opts, 17, 0x86dd, 80, 0));
    }
    // A bad IHL (below 5).
    let mut bad = udp_frame(0, 17, 0x0800, 53, 0);
    bad[14] = 0x43;
    pkts.push(bad);
    let (report, _) = common::check(&object("udp", &[]), "dynptr_udp", &pkts, |_| {});
    // XDP_DROP (1) for the truncated frames, XDP_PASS (2) for others, XDP_TX (3) for
    // rewritten ones.
    assert!(report.verdicts[1] > 0 && report.verdicts[2] > 0 && report.verdicts[3] > 0, "{report}");
}

/// The probe `dynptr_rw` reads at offset 14 (see `struct probe` in the fixture).
#[allow(clippy::too_many_arguments)]
fn probe(
    read_off: u16,
    read_len: u8,
    flags: u8,
    write_off: u16,
    write_flags: u8,
    slice_len: u8,
    adj: (u16, u16),
    size: usize,
) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend_from_slice(&read_off.to_le_bytes());
    p.push(read_len);
    p.push(flags);
    p.extend_from_slice(&write_off.to_le_bytes());
    p.push(write_flags);
    p.push(slice_len);
    p.extend_from_slice(&adj.0.to_le_bytes());
    p.extend_from_slice(&adj.1.to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    let mut x = u32::from(read_off) ^ size as u32;
    while p.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        p.push((x >> 16) as u8);
    }
    p.truncate(size.max(14));
    p
}

#[test]
fn reads_writes_and_small_kfuncs_agree_with_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for size in [30usize, 31, 64, 100, 300] {
        for read_off in [0u16, 14, 40, 69, 90, 99, 299, 300, 0xffff] {
            for read_len in [0u8, 1, 16, 31] {
                for (flags, write_flags) in [(0u8, 0u8), (1, 0), (0, 1), (0x80, 2)] {
                    for write_off in [0u16, 40, 84, 290] {
                        let slice_len = [1u8, 8, 40, 2][(read_off as usize + size) % 4];
                        let adj = [(0u16, 0u16), (2, 10), (10, 2), (0, 400), (60, 64)]
                            [(read_len as usize + write_off as usize) % 5];
                        pkts.push(probe(
                            read_off,
                            read_len,
                            flags,
                            write_off,
                            write_flags,
                            slice_len,
                            adj,
                            size,
                        ));
                    }
                }
            }
        }
    }
    // Frames too short for the probe.
    for size in [14usize, 20, 29] {
        pkts.push(probe(0, 1, 0, 0, 0, 1, (0, 0), size));
    }
    let (report, _) = common::check(&object("rw", &[]), "dynptr_rw", &pkts, |_| {});
    assert!(report.verdicts[1] > 0 && report.verdicts[2] > 0 && report.verdicts[3] > 0, "{report}");
}

#[test]
fn slices_across_fragments_read_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for size in [64usize, 200, 3000, 3520, 3600, 8000, 20_000] {
        for base in [0u32, 3456, 3500, 3519, 4096 + 3520 - 32, 7000, 19_000, 0xfff0] {
            let offs = [base, base + 1, base + 63, base.wrapping_sub(64)];
            let mut p = vec![0u8; 14];
            p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
            for o in offs {
                p.extend_from_slice(&o.to_le_bytes());
            }
            let mut x = size as u32 ^ base;
            while p.len() < size {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                p.push((x >> 16) as u8);
            }
            pkts.push(p);
        }
    }
    let (report, _) = common::check(&object("frags", &[]), "dynptr_frags", &pkts, |_| {});
    assert!(report.multi_buffer > 0, "some frames had fragments: {report}");
}

#[test]
fn a_dynptr_overwritten_then_made_again_works_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    // Frames the kernel's test run takes (at least an Ethernet header).
    let pkts: Vec<Vec<u8>> = [14usize, 15, 20, 60, 1500]
        .iter()
        .map(|&n| (0..n).map(|b| (b * 3 + 1) as u8).collect())
        .collect();
    let (report, _) = common::check(&object("remade", &[]), "dynptr_remade", &pkts, |_| {});
    assert_eq!(report.verdicts[3], pkts.len(), "every frame rewritten: {report}");
}

/// One `bpf_dynptr_slice` call reached on two paths with different constant sizes
/// (Linux's selftest `test_xdp_dynptr.c` compiles so): spine refused it, having dropped
/// the size as an irrelevant number where the paths meet.
#[test]
fn a_slice_size_chosen_on_two_paths_stays_known_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let mut pkts = Vec::new();
    for len in [14usize, 15, 19, 20, 33, 34, 53, 54, 55, 60, 100] {
        for seed in 0u8..4 {
            pkts.push((0..len).map(|b| (b as u8).wrapping_mul(5).wrapping_add(seed)).collect());
        }
    }
    let (report, _) = common::check(&object("sized", &[]), "dynptr_sized", &pkts, |_| {});
    // Both sizes answered: a slice too long for the short frames (drop), and the
    // three verdicts read through the slices.
    assert!(
        report.verdicts[1] > 0 && report.verdicts[2] > 0 && report.verdicts[3] > 0,
        "drop, pass and TX: {report}"
    );
}

/// A slice kept after a store over its dynptr destroyed it (`-DBAD=8`) or after the
/// dynptr was made again (`-DBAD=9`): the kernel keeps XDP slices then (its
/// invalidation of a dynptr's slices matches plain `PTR_TO_MEM` only, not a slice of an
/// XDP dynptr), and so does spine, with the same results.
#[test]
fn slices_outlive_their_dynptr_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let pkts: Vec<Vec<u8>> = [14usize, 20, 60].iter().map(|&n| vec![n as u8; n]).collect();
    for n in [8, 9] {
        let object = object(&format!("kept{n}"), &[&format!("-DBAD={n}")]);
        let (report, _) = common::check(&object, "dynptr_bad", &pkts, |_| {});
        assert_eq!(report.packets, pkts.len(), "BAD={n}: {report}");
    }
}

/// Each `-DBAD=n` build: the kernel refuses it at load, and so does spine (on both
/// engines: the verifier runs before either), with an error naming the reason.
#[test]
fn programs_the_kernel_refuses_are_refused() {
    if !kernel_available() {
        return;
    }
    for (n, expect) in [
        (1, "invalid mem access"),
        (2, "cannot write into rdonly_mem"),
        (3, "null-check it first"),
        (4, "Expected an initialized dynptr"),
        (5, "invalid access to the dynptr"),
        (6, "invalid access to memory"),
        (7, "Expected an initialized dynptr"),
    ] {
        let object = object(&format!("bad{n}"), &[&format!("-DBAD={n}")]);
        let obj = spine_obj::parse(&object).unwrap_or_else(|e| panic!("BAD={n}: {e}"));
        let prog = spine_runtime::select_program(&obj, Some("dynptr_bad")).expect("program");
        let k = spine_sys::load_object_program(&obj, prog);
        assert!(k.is_err(), "BAD={n}: the kernel loaded it");
        for engine in [EngineKind::Interpreter, EngineKind::Jit] {
            let e = spine_difftest::Pair::load(&object, Some("dynptr_bad"), 0, engine)
                .expect_err("spine loaded a program the kernel refuses")
                .to_string();
            assert!(e.contains(expect), "BAD={n} ({engine:?}): {e}");
        }
    }
}
