//! A packet range proven at a constant offset (`tests/fixtures/packet_offset.c`): at the
//! kernel's `MAX_PACKET_OFF` (65535) both the kernel and spine accept the read after the
//! check and agree on every frame; one byte further both refuse it (the selftests'
//! `meta access, test9`, which spine used to accept). Needs root (bpf(2)); without it
//! the test says SKIP loudly and passes.

mod common;

use common::kernel_available;
use spine_runtime::EngineKind;

#[test]
fn a_range_proven_at_the_largest_packet_offset_loads_as_in_the_kernel() {
    if !kernel_available() {
        return;
    }
    for far in [14u32, 65535] {
        let object =
            common::fixture("packet_offset", &format!("far{far}"), &[&format!("-DFAR={far}")]);
        let mut pkts = Vec::new();
        for len in [14usize, 15, 60, 1500] {
            for first in [0u8, 1] {
                let mut p = vec![0u8; len];
                p[0] = first;
                pkts.push(p);
            }
        }
        for program in ["meta_far", "data_far"] {
            let (report, _) = common::check(&object, program, &pkts, |_| {});
            // Only the packet itself ever holds 14 bytes; no frame holds 64 KiB.
            if program == "data_far" && far == 14 {
                assert!(report.verdicts[1] > 0 && report.verdicts[3] > 0, "{program}: {report}");
            } else {
                assert_eq!(report.verdicts[2], pkts.len(), "{program} at {far}: {report}");
            }
        }
    }
}

#[test]
fn a_check_past_the_largest_packet_offset_proves_nothing_in_either() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("packet_offset", "far65536", &["-DFAR=65536"]);
    let obj = spine_obj::parse(&object).expect("object");
    for program in ["meta_far", "data_far"] {
        let prog = spine_runtime::select_program(&obj, Some(program)).expect("program");
        assert!(
            spine_sys::load_object_program(&obj, prog).is_err(),
            "{program}: the kernel loaded it"
        );
        for engine in [EngineKind::Interpreter, EngineKind::Jit] {
            let e = spine_difftest::Pair::load(&object, Some(program), 0, engine)
                .expect_err("spine loaded a program the kernel refuses")
                .to_string();
            assert!(e.contains("invalid access to packet"), "{program} ({engine:?}): {e}");
        }
    }
}
