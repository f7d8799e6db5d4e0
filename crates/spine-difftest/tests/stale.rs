//! Packet pointers kept across `bpf_xdp_adjust_head` (`tests/fixtures/stale.c`): both
//! the kernel and spine accept their difference as a number, and the program that uses
//! it as an offset into the moved packet gives the same verdicts and bytes, on both
//! engines; an old pointer moved and compared with the new packet's bounds (Netronome's
//! l4lb idiom) answers as in the kernel. Needs root (bpf(2)); without it the test says SKIP loudly and passes.

mod common;

use common::kernel_available;

#[test]
fn invalidated_packet_pointers_subtract_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("stale", "diff", &[]);
    // Offsets 0..63 into frames of 1..80 bytes: in range, at the end, past it.
    let mut pkts = vec![Vec::new()];
    for len in [1usize, 2, 14, 40, 63, 64, 80] {
        for at in [0u8, 1, 13, 39, 62, 63] {
            let mut p: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7)).collect();
            p[0] = at;
            pkts.push(p);
        }
    }
    let (report, _) = common::check(&object, "stale_diff", &pkts, |_| {});
    assert!(report.verdicts[3] > 0 && report.verdicts[1] > 0, "TX and DROP: {report}");
}

#[test]
fn invalidated_packet_pointers_compare_with_the_moved_packet_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("stale", "cmp", &[]);
    // Old pointers at 0..127 bytes into frames of 2..130 bytes, the head moved by
    // -32..31 bytes (a move past the frame's room or below 14 bytes fails: aborted).
    let mut pkts = Vec::new();
    for len in [2usize, 14, 20, 33, 40, 64, 100, 130] {
        for at in [0u8, 1, 13, 19, 20, 39, 60, 100, 127] {
            for moved in [0u8, 16, 28, 31, 32, 36, 44, 63] {
                let mut p: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(3)).collect();
                p[0] = at;
                p[1] = moved;
                pkts.push(p);
            }
        }
    }
    let (report, _) = common::check(&object, "stale_cmp", &pkts, |_| {});
    // Every answer the comparisons can give: past the end before the move is checked
    // (drop), before the new head (100), past the new end (101), inside (TX).
    assert!(
        report.verdicts[0] > 0
            && report.verdicts[1] > 0
            && report.verdicts[3] > 0
            && report.verdicts[5] > 0,
        "aborted, drop, TX and other verdicts: {report}"
    );
}
