//! Every bundled program in the Linux kernel: loaded with `bpftool prog loadall` (so the
//! kernel's verifier accepts it), then run with `BPF_PROG_TEST_RUN` on handcrafted frames
//! whose verdicts, output bytes and map contents are worked out by hand.
//!
//! Needs root, bpftool and bpffs; without them each test prints `SKIP: ...` and passes.

mod accounting;
mod forwarding;
mod harness;
mod packet;

pub const XDP_ABORTED: u32 = 0;
pub const XDP_DROP: u32 = 1;
pub const XDP_PASS: u32 = 2;
pub const XDP_TX: u32 = 3;

#[test]
fn every_bundled_program_loads_into_the_kernel() {
    for b in spine_progs::all() {
        let Some(loaded) = harness::Loaded::load(b.name) else { return };
        // The shortest frame the kernel takes: every program must give a verdict on it.
        let run = loaded.run(&[0u8; 14]);
        assert!(run.verdict <= XDP_TX, "{}: verdict {} on a 14-byte frame", b.name, run.verdict);
    }
}
