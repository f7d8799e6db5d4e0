//! Packet pointers kept across `bpf_xdp_adjust_head` (`tests/fixtures/stale.c`): both
//! the kernel and spine accept their difference as a number, and the program that uses
//! it as an offset into the moved packet gives the same verdicts and bytes, on both
//! engines. Needs root (bpf(2)); without it the test says SKIP loudly and passes.

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
