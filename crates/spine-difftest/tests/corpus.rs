//! A corpus of programs in the shapes public XDP projects write (written for this
//! project): IPv6 extension-header walks (inline, and in a non-inlined parser advancing
//! its caller's cursor), IPv4 options and a TCP-options walk with an MSS
//! clamp, IPIP/GRE/GUE decapsulation, a consistent-hash balancer with an LRU connection
//! table and non-inlined functions, a QinQ VLAN pop. Each is built with its loops unrolled
//! and, where it has loops, kept as bounded loops. For every build: what the kernel's
//! verifier accepts, spine's must accept; and on packets made for it (well-formed,
//! malformed, truncated at every length) plus the generator's mix, spine on both engines
//! gives the kernel's verdicts, bytes and maps.

use std::path::Path;

use spine_difftest::Pair;
use spine_ports::gen::{GenConfig, Generator};
use spine_runtime::{load_object, EngineKind, LoadOptions};

fn eth(proto: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    f.extend_from_slice(&proto.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(proto: u8, options: &[u8], src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
    let hl = 20 + options.len();
    let mut h = vec![0x40 | (hl / 4) as u8, 0];
    h.extend_from_slice(&((hl + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0x12, 0x34]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(options);
    h.extend_from_slice(payload);
    h
}

fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&[0x20, 1, 0xd, 0xb8].repeat(4));
    h.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 1].repeat(2));
    h.extend_from_slice(payload);
    h
}

/// A TCP header with `flags` (0x02: SYN) and `options` padded to a multiple of 4.
fn tcp(sport: u16, dport: u16, flags: u8, options: &[u8]) -> Vec<u8> {
    let mut o = options.to_vec();
    o.resize(options.len().next_multiple_of(4), 0);
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
    h.push((((20 + o.len()) / 4) as u8) << 4);
    h.extend_from_slice(&[flags, 0xff, 0xff, 0xab, 0xcd, 0, 0]);
    h.extend_from_slice(&o);
    h.extend_from_slice(b"data");
    h
}

fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut h = Vec::new();
    h.extend_from_slice(&sport.to_be_bytes());
    h.extend_from_slice(&dport.to_be_bytes());
    h.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(payload);
    h
}

/// An extension header of type-specific body `len8` eight-byte units after the first.
fn ext(next: u8, len8: u8) -> Vec<u8> {
    let mut e = vec![next, len8];
    e.resize(8 * (len8 as usize + 1), 0);
    e
}

const A: [u8; 4] = [10, 0, 0, 1];
const VIP: [u8; 4] = [10, 0, 0, 100];

fn ipv6_packets() -> Vec<Vec<u8>> {
    let t22 = tcp(1000, 22, 0x10, &[]);
    let t80 = tcp(1000, 80, 0x10, &[]);
    let chain = |hops: &[u8], last: u8, l4: &[u8]| {
        // `hops` are the extension header types in order; each names the next.
        let mut body = l4.to_vec();
        let mut next = last;
        for &h in hops.iter().rev() {
            let mut e = ext(next, if h == 44 { 0 } else { 1 });
            e.extend_from_slice(&body);
            body = e;
            next = h;
        }
        eth(0x86dd, &ipv6(next, &body))
    };
    vec![
        chain(&[], 6, &t22),
        chain(&[], 6, &t80),
        chain(&[0, 60], 6, &t22),
        chain(&[0, 43, 60], 17, &udp(1, 2, b"x")),
        chain(&[44], 6, &t80),
        chain(&[0; 9], 6, &t80),
        chain(&[60, 60, 60, 60, 60, 60, 60], 6, &t22),
        chain(&[], 58, &[128, 0, 0, 0]),
        chain(&[51, 135], 6, &t22),
        chain(&[0, 44], 17, &udp(1, 2, b"y")),
    ]
}

fn tcp_mss_packets() -> Vec<Vec<u8>> {
    let mss = |v: u16| [2, 4, (v >> 8) as u8, v as u8];
    let syn = |opts: &[u8]| eth(0x0800, &ipv4(6, &[], A, VIP, &tcp(4000, 80, 0x02, opts)));
    let mut v = vec![
        syn(&mss(1460)),
        syn(&mss(1200)),
        syn(&[[1, 1].as_slice(), &mss(9000)].concat()),
        syn(&[[3, 3, 7, 4, 2].as_slice(), &mss(1500)].concat()),
        syn(&[0, 0, 0, 0]),
        syn(&[2, 0, 5, 0xb4]),
        syn(&[8, 1, 0, 0]),
        syn(&[1; 12]),
        eth(0x0800, &ipv4(6, &[], A, VIP, &tcp(4000, 80, 0x10, &mss(1460)))),
        eth(0x0800, &ipv4(6, &[1, 1, 1, 0], A, VIP, &tcp(4000, 80, 0x02, &mss(1460)))),
        eth(0x0800, &ipv4(6, &[7, 7, 4, 0, 0, 0, 0, 0], A, VIP, &tcp(1, 2, 0x02, &mss(8960)))),
    ];
    let mut bad_ihl = syn(&mss(1460));
    bad_ihl[14] = 0x44;
    v.push(bad_ihl);
    v
}

fn decap_packets() -> Vec<Vec<u8>> {
    let inner = ipv4(17, &[], [192, 168, 0, 1], [192, 168, 0, 2], &udp(5, 6, b"inner"));
    let gre = |flags: u16, proto: u16| {
        let mut g = flags.to_be_bytes().to_vec();
        g.extend_from_slice(&proto.to_be_bytes());
        g.extend_from_slice(&inner);
        eth(0x0800, &ipv4(47, &[], A, VIP, &g))
    };
    let gue = |first: u8| {
        let mut h = vec![first, 4, 0, 0];
        h.extend_from_slice(&inner);
        eth(0x0800, &ipv4(17, &[], A, VIP, &udp(7, 6080, &h)))
    };
    vec![
        eth(0x0800, &ipv4(4, &[], A, VIP, &inner)),
        gre(0, 0x0800),
        gre(0x2000, 0x0800),
        gre(0, 0x86dd),
        gue(0),
        gue(0x40),
        eth(0x0800, &ipv4(17, &[], A, VIP, &udp(7, 6081, &inner))),
        eth(0x0800, &ipv4(4, &[1, 1, 1, 1], A, VIP, &inner)),
    ]
}

fn lb_packets() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for sport in 0..24u16 {
        v.push(eth(0x0800, &ipv4(6, &[], A, VIP, &tcp(1000 + sport, 80, 0x10, &[]))));
        v.push(eth(0x0800, &ipv4(17, &[], [10, 0, 1, sport as u8], VIP, &udp(53, 53, b"q"))));
    }
    // The same flows again: now hits in the connection table.
    let again: Vec<Vec<u8>> = v.clone();
    v.extend(again);
    v.push(eth(0x0800, &ipv4(1, &[], A, VIP, &[8, 0, 0, 0])));
    v.push(eth(0x0800, &ipv4(6, &[], A, [10, 0, 0, 9], &tcp(1, 80, 0x10, &[]))));
    v.push(eth(0x0800, &ipv4(6, &[1; 8], A, VIP, &tcp(77, 80, 0x10, &[]))));
    let mut bad = eth(0x0800, &ipv4(6, &[], A, VIP, &tcp(1, 80, 0x10, &[])));
    bad[14] = 0x43;
    v.push(bad);
    v
}

fn vlan_packets() -> Vec<Vec<u8>> {
    let ip = ipv4(17, &[], A, VIP, &udp(1, 2, b"payload"));
    let tag = |tpid: u16, vid: u16, inner: u16, rest: &[u8]| {
        let mut t = vid.to_be_bytes().to_vec();
        t.extend_from_slice(&inner.to_be_bytes());
        t.extend_from_slice(rest);
        (tpid, t)
    };
    let (p1, one) = tag(0x8100, 10, 0x0800, &ip);
    let (_, inner_tag) = tag(0x8100, 20, 0x0800, &ip);
    let (p2, qinq) = tag(0x88a8, 30, 0x8100, &inner_tag);
    let (_, third) = tag(0x8100, 40, 0x8100, &inner_tag);
    let (p3, triple) = tag(0x88a8, 50, 0x8100, &third);
    vec![eth(0x0800, &ip), eth(p1, &one), eth(p2, &qinq), eth(p3, &triple)]
}

/// Every packet, and each of them cut at every length from 0 to its end.
/// Frames of 100, 700 and 1,500 bytes (the last ending in 0xff) and one past the walk.
fn scan_packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for (len, last) in [(100usize, 0x00u8), (700, 0xff), (1500, 0x11), (1514, 0xff)] {
        let mut f = eth(0x0800, &vec![0x5a; len - 14]);
        *f.last_mut().unwrap() = last;
        out.push(f);
    }
    out
}

fn with_truncations(pkts: Vec<Vec<u8>>, seed: u64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for p in &pkts {
        for len in 0..p.len() {
            out.push(p[..len].to_vec());
        }
    }
    out.extend(pkts);
    let mut g = Generator::new(GenConfig { seed, max_len: 1514, ..GenConfig::default() }).unwrap();
    out.extend(g.take(300));
    out
}

struct Case {
    file: &'static str,
    /// Whether the program has loops (built a second time with -DLOOPS).
    loops: bool,
    packets: fn() -> Vec<Vec<u8>>,
    setup: fn(&mut Pair),
}

fn no_setup(_: &mut Pair) {}

fn lb_setup(p: &mut Pair) {
    p.update("vips", &VIP, &1u32.to_le_bytes()).unwrap();
    for slot in 0..64u32 {
        let backend = [192, 168, 1, 1 + (slot % 4) as u8];
        p.update("ring", &slot.to_le_bytes(), &backend).unwrap();
    }
}

const CASES: [Case; 7] = [
    Case { file: "ipv6_ext", loops: true, packets: ipv6_packets, setup: no_setup },
    Case { file: "ipv6_ext_fn", loops: true, packets: ipv6_packets, setup: no_setup },
    Case { file: "tcp_mss", loops: true, packets: tcp_mss_packets, setup: no_setup },
    Case { file: "decap", loops: false, packets: decap_packets, setup: no_setup },
    Case { file: "lb", loops: false, packets: lb_packets, setup: lb_setup },
    Case { file: "vlan_pop", loops: true, packets: vlan_packets, setup: no_setup },
    Case { file: "scan_end", loops: false, packets: scan_packets, setup: no_setup },
];

#[test]
fn corpus_programs_are_accepted_and_run_as_in_the_kernel() {
    if let Err(e) = spine_sys::probe() {
        eprintln!("SKIP: the corpus needs bpf(2) for the kernel's verdicts: {e}");
        return;
    }
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    let dir = std::env::temp_dir().join(format!("spine-corpus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut table = Vec::new();
    for (n, case) in CASES.iter().enumerate() {
        let builds: &[(&str, &[&str])] =
            if case.loops { &[("unrolled", &[]), ("loops", &["-DLOOPS"])] } else { &[("", &[])] };
        for (variant, flags) in builds {
            let name =
                format!("{}{}{variant}", case.file, if variant.is_empty() { "" } else { "/" });
            let out = dir.join(format!("{}-{variant}.o", case.file));
            let obj =
                spine_progs::compile_c(&src_dir.join(format!("{}.c", case.file)), &out, flags)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
            let parsed = spine_obj::parse(&obj).unwrap();
            let kernel_ok = spine_sys::load_object_program(&parsed, &parsed.programs[0]).is_ok();
            let spine = load_object(&parsed, &LoadOptions::default());
            assert!(kernel_ok, "{name}: the corpus holds only programs the kernel accepts");
            let stats = match &spine {
                Ok(l) => l.programs[0].stats().clone(),
                Err(e) => panic!("{name}: the kernel accepts it, spine refuses: {e}"),
            };
            let pkts = with_truncations((case.packets)(), n as u64 + 1);
            for engine in [EngineKind::Interpreter, EngineKind::Jit] {
                let mut pair = Pair::load(&obj, None, 0, engine).unwrap();
                (case.setup)(&mut pair);
                let report = pair.run(&pkts, 5).unwrap();
                for m in &report.mismatches {
                    println!("  {m}");
                }
                assert!(report.mismatches.is_empty(), "{name} ({engine:?}): {report}");
                if engine == EngineKind::Jit {
                    table.push(format!(
                        "{name:<18} kernel: accepted  spine: accepted ({} insns processed, peak {} states)  {report}",
                        stats.insns_processed, stats.peak_states
                    ));
                }
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    for line in table {
        println!("{line}");
    }
}
