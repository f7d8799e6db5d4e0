//! A range check clang compiles into a comparison of a shifted copy
//! (`tests/fixtures/range_check.c`, built with the tests' `-mcpu=v3`: `w2 = w1; w2 +=
//! -201; if w2 < -200`; without it the same in 64 bits), the bound reaching the
//! original through the link between the two (the kernel's linked scalars with a
//! constant offset): spine refused the program ("invalid stack access off=-208
//! size=248") where the kernel loads it. Now it loads, and every answer (the record
//! sizes used, ring buffer full or not) is the kernel's on both engines, lengths in and
//! out of range. Needs root (bpf(2)); without it the test says SKIP loudly and passes.

mod common;

use common::kernel_available;

fn probe(how: u32, len: u32) -> Vec<u8> {
    let mut p = how.to_le_bytes().to_vec();
    p.extend_from_slice(&len.to_le_bytes());
    p.extend_from_slice(&[0xee; 24]);
    common::packet(&p, 8)
}

#[test]
fn a_length_bounded_through_a_shifted_copy_loads_and_answers_as_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("range_check", "range", &[]);
    let mut pkts = Vec::new();
    // Lengths around both ends of 8..200 (0, 1..7 and 201..255 fall back to 8), through
    // bpf_ringbuf_output (how 1), until the ring is full.
    for len in [0u32, 1, 7, 8, 9, 15, 16, 100, 192, 199, 200, 201, 207, 208, 248, 255, 0x1c8] {
        pkts.push(probe(1, len));
    }
    for i in 0..40u32 {
        pkts.push(probe(1, i * 13));
    }
    let (report, pair) = common::check(&object, "range_check", &pkts, |_| {});
    assert_eq!(report.verdicts[3], pkts.len(), "every probe answered: {report}");
    assert!(pair.spine_map_u64("logged")[0] > 0, "records were written");
}
