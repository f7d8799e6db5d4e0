//! Set-up shared by the differential tests: the kernel probe, fixtures built with
//! clang, probe packets, and the run on both engines against the kernel.
#![allow(dead_code)]

use spine_difftest::{Pair, Report};
use spine_runtime::EngineKind;

pub const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

/// Whether bpf(2) works here; without it a test says SKIP loudly and passes.
pub fn kernel_available() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: differential test needs bpf(2), which is unavailable: {e}");
            false
        }
    }
}

/// `tests/fixtures/{file}.c` built with clang and `extra` flags; `tag` names the build
/// (tests run in parallel: one directory per build).
pub fn fixture(file: &str, tag: &str, extra: &[&str]) -> Vec<u8> {
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-{file}-{}-{tag}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{file}.c"));
    let object =
        spine_progs::compile_c(&src, &dir.join(format!("{file}.o")), extra).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    object
}

/// An Ethernet header (ethertype 0x88b5), then `probe`, then `room` zero bytes.
pub fn packet(probe: &[u8], room: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend_from_slice(probe);
    p.resize(14 + probe.len() + room, 0);
    p
}

/// Runs `pkts` through section `program` of `object` on both engines and the kernel,
/// after `setup`; every verdict, byte and map must agree. Returns the report and the
/// pair of the last engine.
pub fn check(
    object: &[u8],
    program: &str,
    pkts: &[Vec<u8>],
    setup: impl Fn(&mut Pair),
) -> (Report, Pair) {
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    let mut last = None;
    for engine in ENGINES {
        let mut pair = Pair::load(object, Some(program), 0, engine)
            .unwrap_or_else(|e| panic!("{program} ({engine:?}): {e}"));
        setup(&mut pair);
        let report = pair.run(pkts, 5).unwrap_or_else(|e| panic!("{program} ({engine:?}): {e}"));
        println!("{program} ({engine:?}): {report}");
        for m in &report.mismatches {
            println!("  {m}");
        }
        assert!(
            report.mismatches.is_empty(),
            "{program} ({engine:?}): spine and the kernel disagree"
        );
        assert_eq!(report.packets, pkts.len());
        last = Some((report, pair));
    }
    last.expect("two engines ran")
}
