//! `bpf_perf_event_output` from XDP against the kernel (`tests/fixtures/perf_output.c`):
//! with no reader in any slot, every answer (flags, packet length, slot index, no event)
//! is the kernel's, on both engines. Needs root (bpf(2)); without it the test says SKIP
//! loudly and passes.

mod common;

use common::kernel_available;

fn probe(index: u32, ctx_len: u16, extra: u16, pad: usize) -> Vec<u8> {
    let mut p = index.to_le_bytes().to_vec();
    p.extend_from_slice(&ctx_len.to_le_bytes());
    p.extend_from_slice(&extra.to_le_bytes());
    p.extend_from_slice(&[0xee; 8]);
    common::packet(&p, pad)
}

#[test]
fn perf_event_output_answers_as_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("perf_output", "errors", &[]);
    let mut pkts = Vec::new();
    for index in [0u32, 1, 3, 4, 100, u32::MAX] {
        for ctx_len in [0u16, 1, 30, 34, 60, 2000] {
            for extra in [0u16, 1, 8] {
                pkts.push(probe(index, ctx_len, extra, 26));
            }
        }
    }
    let (report, _) = common::check(&object, "perf_out", &pkts, |_| {});
    assert_eq!(report.verdicts[3], pkts.len(), "every probe answered: {report}");
}
