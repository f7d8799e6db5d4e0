//! spine against the kernel's `BPF_PROG_TEST_RUN`, packet by packet: every bundled program
//! on at least 1,000 generated packets, and the frame-geometry probe. Needs root (bpf(2));
//! without it each test says SKIP loudly and passes.

use spine_difftest::{Pair, Report};
use spine_ports::gen::{GenConfig, Generator};
use spine_runtime::EngineKind;

/// Packets per program: the generator's mix up to the kernel's largest test frame, plus
/// the boundary sizes both sides must refuse or accept alike.
const PACKETS: usize = 1_200;

fn kernel_available() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: differential test needs bpf(2), which is unavailable: {e}");
            false
        }
    }
}

fn packets(seed: u64) -> Vec<Vec<u8>> {
    let cfg = GenConfig { seed, max_len: 3520, ..GenConfig::default() };
    let mut g = Generator::new(cfg).expect("valid generator config");
    let mut v = g.take(PACKETS);
    // Longer packets spill into fragments in the kernel (6.18), which spine has no
    // multi-buffer support for yet: the differential runs stay within one frame.
    for len in [13usize, 14, 15, 60, 3519, 3520] {
        v.push((0..len).map(|i| (i * 7 + len) as u8).collect());
    }
    v
}

/// Runs `pkts` through spine on `engine` and through the kernel.
fn diff(object: &[u8], name: &str, engine: EngineKind, pkts: &[Vec<u8>]) -> Report {
    // The kernel runs a test on the calling CPU; spine must fill the same per-CPU slots.
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    let mut pair =
        Pair::load(object, None, 0, engine).unwrap_or_else(|e| panic!("{name} ({engine:?}): {e}"));
    let report = pair.run(pkts, 5).unwrap_or_else(|e| panic!("{name} ({engine:?}): {e}"));
    println!("{name} ({engine:?}): {report}");
    for m in &report.mismatches {
        println!("  {m}");
    }
    report
}

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

fn check_bundled(name: &str, seed: u64) {
    if !kernel_available() {
        return;
    }
    let b = spine_progs::get(name).unwrap_or_else(|| panic!("no bundled program {name}"));
    let pkts = packets(seed);
    for engine in ENGINES {
        let report = diff(b.object, name, engine, &pkts);
        assert!(report.mismatches.is_empty(), "{name} ({engine:?}): spine and the kernel disagree");
        assert!(report.packets >= 1_000);
        assert_eq!(report.refused, 1, "{name}: the 13-byte packet is refused by both");
        assert!(report.map_checks > 0 || name == "mac_swap");
    }
}

macro_rules! bundled {
    ($($name:ident = $seed:expr),* $(,)?) => {$(
        #[test]
        fn $name() {
            check_bundled(stringify!($name), $seed);
        }
    )*};
}

bundled! {
    calls = 1, counter = 2, encap = 3, global_data = 4, hash_map = 5, icmp_echo = 6,
    mac_swap = 7, parser = 8, rewrite = 9, trim = 10, vlan = 11,
}

#[test]
fn every_bundled_program_is_covered() {
    let covered = [
        "calls",
        "counter",
        "encap",
        "global_data",
        "hash_map",
        "icmp_echo",
        "mac_swap",
        "parser",
        "rewrite",
        "trim",
        "vlan",
        // It needs routes: tests/router.rs runs it in a namespace that has them.
        "router",
    ];
    for b in spine_progs::all() {
        assert!(covered.contains(&b.name), "bundled program {} has no differential test", b.name);
    }
}

/// Where `xdp_adjust_head/meta/tail` succeed must be exactly where the kernel's do: deltas
/// across every boundary of the frame, on short and long packets.
#[test]
fn frame_geometry_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("spine-difftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/limits.c");
    let object = spine_progs::compile_c(&src, &dir.join("limits.o"), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();

    let mut pkts = Vec::new();
    let deltas = |lo: i32, hi: i32, step: i32| (lo..=hi).step_by(step as usize);
    for len in [14usize, 60, 1514, 3520] {
        let mut probe = |which: u8, delta: i32| {
            let mut p = vec![0x11u8; len];
            p[0] = which;
            p[2..4].copy_from_slice(&(delta as i16).to_be_bytes());
            pkts.push(p);
        };
        for d in deltas(-300, -200, 1)
            .chain(deltas(-60, 60, 1))
            .chain([len as i32 - 14, len as i32 - 13])
        {
            probe(1, d);
        }
        for d in deltas(-260, 8, 1) {
            probe(2, d);
            probe(4, d);
        }
        let room = 3776 - 256 - len as i32;
        for d in deltas(-(len as i32), -(len as i32) + 20, 1)
            .chain(deltas(room - 8, room + 8, 1))
            .chain(deltas(-64, 64, 1))
        {
            probe(3, d);
        }
    }
    for engine in ENGINES {
        let report = diff(&object, "limits", engine, &pkts);
        assert!(report.mismatches.is_empty(), "frame geometry differs from the kernel's");
        assert!(
            report.verdicts[2] > 100 && report.verdicts[1] > 100,
            "probes hit both sides of every limit"
        );
    }
}
