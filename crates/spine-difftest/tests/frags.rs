//! The multi-buffer helpers against the kernel (`tests/fixtures/frags.c`):
//! `bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes` and `bpf_xdp_store_bytes` (in range,
//! past the end ⇒ `-EINVAL`, offsets past 0xffff ⇒ `-EFAULT`) and `bpf_xdp_adjust_tail`,
//! in an `xdp.frags` program (loaded with `BPF_F_XDP_HAS_FRAGS`) and in a plain one, on
//! both engines: on linear frames, and on multi-buffer frames (packets of up to 73,152
//! bytes: a 3,520-byte head and up to 17 page-sized fragments, as the kernel's test run
//! builds them) with loads, stores and tail moves across every fragment boundary.
//! Needs root (bpf(2)); without it each test says SKIP loudly and passes.

mod common;

use spine_difftest::Report;

use common::kernel_available;

fn object(program: &str) -> Vec<u8> {
    common::fixture("frags", program, &[])
}

fn probe(off: u32, len: u32, tail: i32, size: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend_from_slice(&off.to_le_bytes());
    p.extend_from_slice(&len.to_le_bytes());
    p.extend_from_slice(&tail.to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(&[0xee; 32]);
    let mut x = size as u32 ^ off;
    while p.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        p.push((x >> 16) as u8);
    }
    p
}

fn packets() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for size in [64usize, 65, 200, 1500, 3000, 3520] {
        for off in [0u32, 1, 13, 63, 64, 100, 1400, 1499, 3000, 3519, 0xffff, 0x1_0000, u32::MAX] {
            for len in [1u32, 8, 63] {
                for tail in [0i32, -1, -50, 4, 100, 1000, -10_000, 10_000] {
                    if (i64::from(off) + i64::from(len) + i64::from(tail)) % 5 == 0 || tail == 0 {
                        v.push(probe(off, len, tail, size));
                    }
                }
            }
        }
    }
    v
}

fn check(program: &str) -> [usize; 6] {
    check_packets(program, &packets()).verdicts
}

/// Runs `pkts` through `program` on both engines and the kernel; every packet must agree.
/// Returns the last engine's report.
fn check_packets(program: &str, pkts: &[Vec<u8>]) -> Report {
    common::check(&object(program), program, pkts, |_| {}).0
}

#[test]
fn frags_helpers_on_linear_frames_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let v = check("frags");
    // Tail moves that fit (XDP_TX) and that do not (XDP_PASS) both occur.
    assert!(v[3] > 0 && v[2] > 0, "{v:?}");
}

#[test]
fn the_same_helpers_in_a_plain_xdp_program_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let v = check("linear");
    assert!(v[3] > 0 && v[2] > 0, "{v:?}");
}

/// Head of a multi-buffer frame in the kernel's test run (4096 - 256 - 320), and the
/// size of each fragment (a page).
const HEAD: usize = 3520;
const PAGE: usize = 4096;
/// Longest packet the test run takes (17 fragments), and one byte more (`ENOMEM`).
const MAX_LEN: usize = HEAD + 17 * PAGE;

/// Packet sizes on both sides of every boundary: the head, each fragment, the last.
const SIZES: [usize; 20] = [
    64,
    1500,
    3519,
    3520,
    3521,
    3534,
    3600,
    4000,
    7615,
    7616,
    7617,
    7630,
    8000,
    9000,
    11_712,
    11_713,
    16_000,
    40_000,
    MAX_LEN,
    MAX_LEN + 1,
];

/// Offsets that matter for a `size`-byte packet: each fragment boundary and its
/// neighbours, the end, and offsets past 0xffff.
fn edges(size: usize) -> Vec<i64> {
    let mut v = vec![0, 1, 13, 100];
    let mut b = HEAD;
    while b <= size + 1 {
        v.extend([b as i64 - 9, b as i64 - 1, b as i64, b as i64 + 1]);
        b += PAGE;
    }
    v.extend([size as i64 - 8, size as i64 - 1, size as i64, 0xffff, 0x1_0000, u32::MAX as i64]);
    v
}

/// Tail moves that matter for a `size`-byte packet: filling the last fragment's page to
/// the byte and one past it, emptying the last fragment, all fragments, down to 14
/// bytes and one past, and the extremes.
fn tails(size: usize) -> Vec<i32> {
    let rest = size.saturating_sub(HEAD);
    let last = if rest == 0 { 0 } else { (rest - 1) % PAGE + 1 };
    let mut v = vec![0, 1, -1, -50, 50, i32::MIN, i32::MAX, -10_000, 10_000];
    for t in [
        (PAGE - last) as i64,
        (PAGE - last) as i64 + 1,
        -(last as i64),
        -(last as i64) - 1,
        -(last as i64 + PAGE as i64),
        -(rest as i64),
        -(rest as i64) - 1,
        -(size as i64 - 14),
        -(size as i64 - 13),
    ] {
        v.push(t as i32);
    }
    v
}

/// `moves`: the head and metadata deltas.
fn wide_probe(
    size: usize,
    off: u32,
    len: u32,
    store_off: u32,
    tails: [i32; 2],
    moves: [i32; 2],
) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    let [head, meta] = moves.map(|m| m as u32);
    for w in [off, len.wrapping_sub(1), store_off, tails[0] as u32, tails[1] as u32, head, meta] {
        p.extend_from_slice(&w.to_le_bytes());
    }
    let mut x = size as u32 ^ off ^ store_off.rotate_left(7);
    while p.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        p.push((x >> 16) as u8);
    }
    p
}

/// Generated multi-buffer probes: for every size, loads and stores of lengths that
/// reach across one or several fragments at offsets on each boundary, and pairs of
/// tail moves from the boundary-derived set (grow then shrink, shrink then grow).
fn wide_packets() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut pick = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    let lens = [1u32, 8, 63, 64, 100, 1000, 4096, 4097, 5000, 8192];
    let heads = [0i32, -1, -16, 14, 100, -300, 3506, 3507, 4000];
    // Metadata: none, 4 and 8 bytes, the most a fresh headroom allows (216) and past
    // it, a length that is no multiple of 4 (-EACCES), and forward past `data`.
    let metas = [0i32, 0, -4, -8, -216, -220, -3, 4];
    for size in SIZES {
        let offs = edges(size);
        let ts = tails(size);
        let count = if size >= 40_000 { 12 } else { 60 };
        for _ in 0..count {
            let len = lens[pick(lens.len())];
            let off = offs[pick(offs.len())];
            // Ranges that end exactly on a boundary or at the end as well as start there.
            let off = if pick(3) == 0 { off - i64::from(len) } else { off }.max(0) as u32;
            let store_off =
                (offs[pick(offs.len())] - i64::from(pick(2) as u32 * len)).max(0) as u32;
            let t = [ts[pick(ts.len())], ts[pick(ts.len())]];
            let moves = [heads[pick(heads.len())], metas[pick(metas.len())]];
            v.push(wide_probe(size, off, len, store_off, t, moves));
        }
    }
    v
}

/// The original probes on multi-buffer sizes: 64-byte loads and stores straddling the
/// head's end and the first fragment's.
fn big_probe_packets() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for size in [3521usize, 3600, 7616, 7617, 9000] {
        for off in [0u32, 3456, 3500, 3519, 3520, 7600, 7615, 7616, 8990, 8999, 9000] {
            for len in [1u32, 8, 63] {
                for tail in tails(size) {
                    if (i64::from(off) + i64::from(len) + i64::from(tail)) % 7 == 0 || tail == 0 {
                        v.push(probe(off, len, tail, size));
                    }
                }
            }
        }
    }
    v
}

fn check_multi_buffer(program: &str, pkts: &[Vec<u8>]) {
    let report = check_packets(program, pkts);
    let big = pkts.iter().filter(|p| p.len() > HEAD && p.len() <= MAX_LEN).count();
    assert_eq!(report.multi_buffer, big, "every packet past the head ran as multi-buffer");
    assert!(big > pkts.len() / 2, "{big} of {}", pkts.len());
    assert_eq!(report.refused, pkts.iter().filter(|p| p.len() > MAX_LEN).count());
    // Whole runs (XDP_TX) for the wide probes, both outcomes for the original ones.
    assert!(report.verdicts[3] > pkts.len() / 2, "{report}");
}

#[test]
fn multi_buffer_frames_in_a_frags_program_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    check_multi_buffer("wide", &wide_packets());
}

/// The kernel's test run hands a plain `xdp` program a multi-buffer frame too (it does
/// not look at `BPF_F_XDP_HAS_FRAGS`); spine's test run does the same.
#[test]
fn multi_buffer_frames_in_a_plain_program_match_the_kernel_test_run() {
    if !kernel_available() {
        return;
    }
    check_multi_buffer("wide_linear", &wide_packets());
}

#[test]
fn the_linear_probes_on_multi_buffer_frames_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let pkts = big_probe_packets();
    let report = check_packets("frags", &pkts);
    assert_eq!(report.multi_buffer, pkts.len());
    assert!(report.verdicts[3] > 0 && report.verdicts[2] > 0, "{report}");
}
