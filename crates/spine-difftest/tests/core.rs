//! CO-RE relocations resolved against the running kernel's BTF: a program written with
//! local, deliberately reordered views of kernel types reads and reports the kernel's
//! real layout, and spine and the kernel run the relocated code identically.

use std::sync::Arc;

use spine_difftest::Pair;
use spine_obj::ParseOptions;
use spine_runtime::EngineKind;

fn word(p: &[u8], i: usize) -> u32 {
    let at = 34 + 4 * i;
    u32::from_le_bytes(p[at..at + 4].try_into().unwrap())
}

#[test]
fn core_relocations_follow_the_kernels_btf() {
    let Some(btf) = spine_sys::kernel_btf() else {
        eprintln!("SKIP: no {}", spine_sys::KERNEL_BTF);
        return;
    };
    if let Err(e) = spine_sys::probe() {
        eprintln!("SKIP: bpf(2) unavailable: {e}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("spine-core-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/core.c");
    let object = spine_progs::compile_c(&src, &dir.join("core.o"), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    let opts = ParseOptions { target_btf: Some(Arc::clone(&btf)), ..ParseOptions::default() };
    let obj = spine_obj::parse_with(&object, &opts).expect("relocated against the kernel");

    // An IPv4 header with IHL 6 (one option word) behind an Ethernet header.
    let mut pkt = vec![0u8; 66];
    pkt[12..14].copy_from_slice(&[0x08, 0x00]);
    pkt[14] = 0x46;
    let k = spine_sys::load_object_program(&obj, &obj.programs[0]).expect("the kernel loads it");
    let out = k.prog.test_run(&spine_sys::TestRun::new(&pkt)).expect("test run");
    assert_eq!(out.retval, 3, "XDP_TX");
    let got: Vec<u32> = (0..8).map(|i| word(&out.data_out, i)).collect();
    assert_eq!(got, vec![16, 2, 20, 0, 0, 4, 6, 0x0008], "the kernel's layout, not the local one");

    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let mut pair = Pair::load_parsed(&obj, None, 0, engine).unwrap();
        let report = pair.run(&[pkt.clone(), vec![0; 40], pkt[..60].to_vec()], 4).unwrap();
        assert!(report.mismatches.is_empty(), "{engine:?}: {report}");
    }
}
