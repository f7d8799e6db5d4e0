//! A program that logs into a ring buffer next to its other maps, run against the
//! kernel (`tests/fixtures/ringbuf_log.c`): the ring fills up (nobody consumes it)
//! and every answer of reserve, output and query, and the array counting the records,
//! must be the kernel's. The ring itself is not listed (it has no elements; its
//! records are read through mmap): before, comparing the maps failed on it, so no
//! program with a ring buffer (a public XDP firewall's drop log) could be compared at
//! all. Needs root (bpf(2)); without it the test says SKIP loudly and passes.

mod common;

use common::kernel_available;

fn probe(how: u32, len: u32) -> Vec<u8> {
    let mut p = how.to_le_bytes().to_vec();
    p.extend_from_slice(&len.to_le_bytes());
    p.extend_from_slice(&[0xee; 24]);
    common::packet(&p, 8)
}

#[test]
fn a_ring_buffer_filling_up_answers_as_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("ringbuf_log", "log", &[]);
    // 4,096 bytes: ~20 reserved records of 208 bytes, or more small outputs (8 to 128
    // bytes); 120 probes run it full and keep trying.
    let mut pkts = Vec::new();
    for i in 0..120u32 {
        pkts.push(probe(i % 3, 8 + (i * 37) % 200));
    }
    let (report, pair) = common::check(&object, "log_drop", &pkts, |_| {});
    assert_eq!(report.verdicts[3], pkts.len(), "every probe answered: {report}");
    // The ring filled: fewer records were written than the 80 submits and outputs
    // tried (and the kernel's count, compared by `check`, is the same).
    let written = pair.spine_map_u64("logged")[0];
    assert!(written > 0 && written < 80, "{written} records written of 80 tried");
}
