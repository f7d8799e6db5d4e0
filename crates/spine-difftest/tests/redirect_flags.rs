//! `bpf_redirect_map`'s flags against the kernel (`tests/fixtures/redirect_flags.c`), on
//! empty maps of each redirect type: the fallback verdict in the low bits,
//! `BPF_F_BROADCAST`/`BPF_F_EXCLUDE_INGRESS` accepted by devmaps only (a broadcast
//! redirects whatever the key), any other bit `XDP_ABORTED`. Both engines; needs root
//! (bpf(2)), without it each test says SKIP loudly and passes.

use spine_difftest::Pair;
use spine_runtime::EngineKind;

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];
const BROADCAST: u64 = 1 << 3;
const EXCLUDE_INGRESS: u64 = 1 << 4;

fn kernel_available() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: differential test needs bpf(2), which is unavailable: {e}");
            false
        }
    }
}

fn object(tag: &str, extra: &[&str]) -> Vec<u8> {
    let dir = std::env::temp_dir().join(format!("spine-redirect-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/redirect_flags.c");
    let object = spine_progs::compile_c(&src, &dir.join("redirect_flags.o"), extra).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    object
}

fn probe(which: u32, key: u32, flags: u64) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend_from_slice(&which.to_le_bytes());
    p.extend_from_slice(&key.to_le_bytes());
    p.extend_from_slice(&flags.to_le_bytes());
    p.extend_from_slice(&[0xee; 8]);
    p.resize(64, 0);
    p
}

fn packets(maps: u32) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let flags = [
        0,
        1,
        2,
        3,
        4,
        BROADCAST,
        BROADCAST | EXCLUDE_INGRESS,
        EXCLUDE_INGRESS,
        EXCLUDE_INGRESS | 2,
        BROADCAST | 1,
        BROADCAST | 3,
        1 << 5,
        1 << 32,
        BROADCAST | (1 << 40),
    ];
    for which in (0..maps).chain([9]) {
        for key in [0u32, 3, 4, u32::MAX] {
            for &f in &flags {
                v.push(probe(which, key, f));
            }
        }
    }
    v
}

fn check(object: &[u8], pkts: &[Vec<u8>]) -> [usize; 6] {
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    let mut verdicts = [0; 6];
    for engine in ENGINES {
        let mut pair = Pair::load(object, Some("redirect_flags"), 0, engine)
            .unwrap_or_else(|e| panic!("{engine:?}: {e}"));
        let report = pair.run(pkts, 5).unwrap_or_else(|e| panic!("{engine:?}: {e}"));
        println!("redirect_flags ({engine:?}): {report}");
        for m in &report.mismatches {
            println!("  {m}");
        }
        assert!(report.mismatches.is_empty(), "{engine:?}: spine and the kernel disagree");
        verdicts = report.verdicts;
    }
    verdicts
}

#[test]
fn redirect_map_flags_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let pkts = packets(3);
    let v = check(&object("plain", &[]), &pkts);
    // Every verdict occurs: the fallbacks 0..3 and the broadcasts' XDP_REDIRECT.
    assert!(v[..5].iter().all(|&n| n > 0), "{v:?}");
}

#[test]
fn redirect_map_into_an_empty_xskmap_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    // The same probes with an XSKMAP as map 3: a missing entry gives the flags' low bits,
    // broadcast flags are XDP_ABORTED as for any map other than a devmap.
    let pkts = packets(4);
    let v = check(&object("xsk", &["-DWITH_XSKMAP"]), &pkts);
    assert!(v[..5].iter().all(|&n| n > 0), "{v:?}");
}
