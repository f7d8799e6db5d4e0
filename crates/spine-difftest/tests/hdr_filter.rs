//! A header-walking filter in the shape of public XDP filters (the verifier's corpus
//! program `hdr_filter.c`: VLANs, IPv4 options, IPv6 extension headers, TCP options, rule
//! tables) against the kernel: the kernel's verdict on the program (accepted ⇒ spine
//! accepts; an unsafe neighbour refused by both), then verdicts, bytes and maps on
//! packets built to take every parse path, truncated anywhere. Needs root (bpf(2));
//! without it each test says SKIP loudly and passes.

use spine_difftest::Pair;
use spine_runtime::EngineKind;
use std::path::{Path, PathBuf};

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];
const PACKETS: usize = 1_500;

fn kernel_available() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: differential test needs bpf(2), which is unavailable: {e}");
            false
        }
    }
}

fn source(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spine-verifier/tests/c")
        .join(format!("{name}.c"))
}

fn compile(name: &str, extra: &[&str]) -> Vec<u8> {
    // Tests run in parallel: one directory per build.
    let tag = extra.join("").replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let dir = std::env::temp_dir().join(format!("spine-corpus-{}-{name}{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let object = spine_progs::compile_c(&source(name), &dir.join(format!("{name}.o")), extra)
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::remove_dir_all(&dir).ok();
    object
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}

const PORTS: [u16; 5] = [22, 53, 80, 1234, 4444];
const V4: [[u8; 4]; 3] = [[10, 0, 0, 1], [10, 0, 0, 2], [10, 0, 0, 66]];

fn v6_addr(last: u8) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0] = 0xfd;
    a[15] = last;
    a
}

fn l4(rng: &mut Rng, proto: u8) -> Vec<u8> {
    let (sp, dp) = (rng.pick(&PORTS), rng.pick(&PORTS));
    let mut v = Vec::new();
    v.extend_from_slice(&sp.to_be_bytes());
    v.extend_from_slice(&dp.to_be_bytes());
    match proto {
        6 => {
            // doff anywhere in 0..16: below 5 is malformed, above may pass the end.
            let doff = rng.below(16) as u8;
            v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, doff << 4, 0x18, 0x10, 0, 0, 0, 0, 0]);
            let opts = 4 * usize::from(doff.saturating_sub(5));
            v.extend((0..opts).map(|i| i as u8));
        }
        17 => {
            let len = rng.pick(&[0u16, 7, 8, 16, 300]);
            v.extend_from_slice(&len.to_be_bytes());
            v.extend_from_slice(&[0, 0]);
        }
        _ => {}
    }
    v.extend((0..rng.below(24)).map(|i| i as u8 ^ 0x5a));
    v
}

/// One packet: 0 to 3 VLAN tags, then IPv4 with options of any `ihl` or IPv6 with a
/// chain of extension headers, then TCP, UDP or something else; cut anywhere at the end.
fn packet(rng: &mut Rng) -> Vec<u8> {
    let mut p = vec![2, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4];
    for _ in 0..rng.below(4) {
        p.extend_from_slice(&rng.pick(&[0x8100u16, 0x88a8]).to_be_bytes());
        p.extend_from_slice(&[0, 5]);
    }
    let proto = rng.pick(&[6u8, 17, 1]);
    if rng.below(2) == 0 {
        p.extend_from_slice(&0x0800u16.to_be_bytes());
        let ihl = rng.pick(&[5u8, 5, 6, 15, 4, 0]);
        let body = l4(rng, proto);
        let opts = 4 * usize::from(ihl.saturating_sub(5));
        let total = (20 + opts + body.len()) as u16;
        p.extend_from_slice(&[0x40 | ihl, 0]);
        p.extend_from_slice(&total.to_be_bytes());
        p.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0]);
        p.extend_from_slice(&rng.pick(&V4));
        p.extend_from_slice(&rng.pick(&V4));
        p.extend((0..opts).map(|_| 1));
        p.extend_from_slice(&body);
    } else {
        p.extend_from_slice(&0x86ddu16.to_be_bytes());
        let chain: Vec<u8> =
            (0..rng.below(8)).map(|_| rng.pick(&[0u8, 60, 43, 135, 51, 44])).collect();
        let mut rest = Vec::new();
        for (k, &kind) in chain.iter().enumerate() {
            let next = chain.get(k + 1).copied().unwrap_or(proto);
            let len = rng.below(3) as u8;
            let size = match kind {
                44 => 8,
                51 => (usize::from(len) + 2) * 4,
                _ => (usize::from(len) + 1) * 8,
            };
            rest.push(next);
            rest.push(len);
            rest.extend((2..size).map(|i| i as u8));
        }
        rest.extend_from_slice(&l4(rng, proto));
        p.extend_from_slice(&[0x60, 0, 0, 0]);
        p.extend_from_slice(&(rest.len() as u16).to_be_bytes());
        p.push(chain.first().copied().unwrap_or(proto));
        p.push(64);
        p.extend_from_slice(&v6_addr(rng.pick(&[1, 2, 0x66])));
        p.extend_from_slice(&v6_addr(rng.pick(&[1, 2, 0x66])));
        p.extend_from_slice(&rest);
    }
    if rng.below(4) == 0 {
        let cut = 14 + rng.below((p.len() - 13) as u64) as usize;
        p.truncate(cut);
    }
    p
}

fn rules(pair: &mut Pair) {
    let deny = |bits: u64| (1 | bits).to_ne_bytes();
    for (map, key, val) in [
        ("port_rules", 22u32.to_ne_bytes().to_vec(), deny(2)),
        ("port_rules", 53u32.to_ne_bytes().to_vec(), deny(4)),
        ("port_rules", (0x10000u32 | 4444).to_ne_bytes().to_vec(), deny(2)),
        ("v4_rules", [10, 0, 0, 66].to_vec(), deny(0)),
        ("v6_rules", v6_addr(0x66).to_vec(), deny(0)),
    ] {
        pair.update(map, &key, &val).unwrap_or_else(|e| panic!("{map}: {e}"));
    }
}

#[test]
fn header_filter_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = compile("hdr_filter", &[]);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pkts: Vec<Vec<u8>> = (0..PACKETS).map(|_| packet(&mut rng)).collect();
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    for engine in ENGINES {
        let mut pair = Pair::load(&object, None, 0, engine)
            .unwrap_or_else(|e| panic!("hdr_filter ({engine:?}): {e}"));
        rules(&mut pair);
        let report = pair.run(&pkts, 5).expect("differential run");
        println!("hdr_filter ({engine:?}): {report}");
        for m in &report.mismatches {
            println!("  {m}");
        }
        assert!(report.mismatches.is_empty(), "spine and the kernel disagree");
        let [aborted, drop, pass, ..] = report.verdicts;
        assert!(aborted > 50 && drop > 50 && pass > 50, "every outcome is reached: {report}");
    }
}

#[test]
fn header_filter_unsafe_neighbour_is_refused_by_both() {
    if !kernel_available() {
        return;
    }
    let object = compile("hdr_filter", &["-DUNSAFE_NEIGHBOUR"]);
    let obj = spine_obj::parse(&object).expect("object");
    let prog = obj.program(None).expect("program");
    assert!(spine_sys::load_object_program(&obj, prog).is_err(), "the kernel refuses it");
    match Pair::load(&object, None, 0, EngineKind::Interpreter) {
        Err(spine_difftest::DiffError::Spine(e)) => println!("spine refuses: {e}"),
        other => panic!("spine must refuse the read past the proven range: {other:?}"),
    }
}
