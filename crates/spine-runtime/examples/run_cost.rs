//! Runs one bundled program many times on a fixed set of packets, for instruction counts
//! of the per-run path (the runner, the engine's entry and exit, the program):
//!
//! ```text
//! cargo build --release -p spine-runtime --example run_cost
//! valgrind --tool=callgrind --toggle-collect='run_cost::runs' \
//!     target/release/examples/run_cost mac_swap jit 2000
//! ```
//!
//! Instructions per run = the collected total / (packets × runs); the loading is not
//! collected. A fifth argument `burst` runs the packets as one burst per round
//! (`XdpRunner::burst`, as the adapter does); collect `run_cost::bursts` then. Engines: `jit` (with the watchdog's countdown), `jit-bare` (without), `interp`.
//!
//! `run_cost load N` loads (verifies, compiles) the 1,000-instruction program of
//! `spine bench exec` N times instead; collect `run_cost::loads` for its cost.
//! No timing: instruction counts are what the shared build machines can measure.

use spine_runtime::{
    load_object, Bounds, Budget, EngineKind, FixedHost, Frame, Geometry, LoadOptions, RxInfo,
    Verdict, XdpRunner,
};

/// Ethernet + IPv4 + UDP, 64 bytes; then variants the bundled programs branch on.
fn packets() -> Vec<Vec<u8>> {
    let mut udp4 = vec![0u8; 64];
    udp4[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    udp4[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    udp4[12..14].copy_from_slice(&[0x08, 0x00]);
    udp4[14] = 0x45;
    udp4[16..18].copy_from_slice(&50u16.to_be_bytes());
    udp4[22] = 64;
    udp4[23] = 17;
    udp4[26..30].copy_from_slice(&[10, 0, 0, 1]);
    udp4[30..34].copy_from_slice(&[10, 0, 0, 2]);
    udp4[34..36].copy_from_slice(&1234u16.to_be_bytes());
    udp4[36..38].copy_from_slice(&80u16.to_be_bytes());
    udp4[38..40].copy_from_slice(&30u16.to_be_bytes());
    let mut tcp4 = udp4.clone();
    tcp4[23] = 6;
    let mut icmp4 = udp4.clone();
    icmp4[23] = 1;
    icmp4[34] = 8;
    let mut udp6 = vec![0u8; 80];
    udp6[..12].copy_from_slice(&udp4[..12]);
    udp6[12..14].copy_from_slice(&[0x86, 0xdd]);
    udp6[14] = 0x60;
    udp6[18..20].copy_from_slice(&26u16.to_be_bytes());
    udp6[20] = 17;
    udp6[21] = 64;
    let mut vlan = vec![0u8; 68];
    vlan[..12].copy_from_slice(&udp4[..12]);
    vlan[12..14].copy_from_slice(&[0x81, 0x00]);
    vlan[14..16].copy_from_slice(&7u16.to_be_bytes());
    vlan[16..].copy_from_slice(&udp4[12..]);
    let mut arp = udp4.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let short = udp4[..20].to_vec();
    let mut big = udp4.clone();
    big.resize(512, 0xab);
    big[16..18].copy_from_slice(&498u16.to_be_bytes());
    vec![udp4, tcp4, icmp4, udp6, vlan, arp, short, big]
}

/// The measured loop, kept out of line so that callgrind can collect it alone.
#[inline(never)]
fn runs(runner: &mut XdpRunner, frames: &mut [Frame], host: &mut FixedHost, n: u32) -> u64 {
    let mut acc = 0u64;
    for frame in frames.iter_mut() {
        for _ in 0..n {
            let r = runner.run(frame, RxInfo::default(), host);
            acc = acc.wrapping_add(u64::from(r.unwrap_or(u32::MAX)));
        }
    }
    acc
}

/// The same packets as one burst per round (`XdpRunner::burst`, as the adapter's worker
/// runs them): `n` bursts of the 8 packets. Out of line for callgrind.
#[inline(never)]
fn bursts(
    runner: &mut XdpRunner,
    bufs: &mut [(Vec<u8>, Bounds)],
    host: &mut FixedHost,
    n: u32,
) -> u64 {
    let mut acc = 0u64;
    for _ in 0..n {
        let mut b = runner.burst(Geometry::TEST_RUN, RxInfo::default(), host);
        for (buf, bounds) in bufs.iter_mut() {
            // SAFETY: each buffer is the geometry's size and its bounds were made inside
            // it (`main`); the runner keeps them so.
            let v = unsafe { b.run_unchecked(buf, bounds) };
            let a = match v {
                Verdict::Action { action, .. } => action,
                _ => u32::MAX,
            };
            acc = acc.wrapping_add(u64::from(a));
        }
    }
    acc
}

/// The measured loads, out of line for callgrind.
#[inline(never)]
fn loads(obj: &spine_obj::Object, n: u32) -> usize {
    let mut insns = 0;
    for _ in 0..n {
        let loaded = load_object(obj, &LoadOptions::default()).expect("synthetic program loads");
        insns += loaded.programs[0].insns().len();
    }
    insns
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, what, n] = args.as_slice() {
        if what == "load" {
            let obj = spine_obj::synthetic(1000);
            assert_eq!(obj.programs[0].insns.len(), 1000);
            let n = n.parse::<u32>().expect("usage: run_cost load <loads>");
            println!("{} instructions loaded", loads(&obj, n));
            return;
        }
    }
    let usage = "usage: run_cost <bundled program> <jit|jit-bare|interp> <runs per packet> [burst]";
    let (name, engine, n, burst) = match args.as_slice() {
        [_, p, e, n] => (p.as_str(), e.as_str(), n.parse::<u32>().expect(usage), false),
        [_, p, e, n, b] if b == "burst" => {
            (p.as_str(), e.as_str(), n.parse::<u32>().expect(usage), true)
        }
        _ => panic!("{usage}"),
    };
    let (engine, watchdog) = match engine {
        "jit" => (EngineKind::Jit, true),
        "jit-bare" => (EngineKind::Jit, false),
        "interp" => (EngineKind::Interpreter, true),
        _ => panic!("{usage}"),
    };
    let b = spine_progs::get(name).unwrap_or_else(|| panic!("no bundled program {name}"));
    let obj = spine_obj::parse(b.object).expect("bundled object parses");
    let loaded = load_object(&obj, &LoadOptions { engine, watchdog, ..LoadOptions::default() })
        .expect("bundled program loads");
    let ext = loaded.program(None).expect("one XDP program").clone();
    let mut runner = XdpRunner::new(ext, 0)
        .expect("runner")
        .with_budget(Budget { ns: 1_000_000_000, ..Budget::default() });
    let mut host = FixedHost::new(1);
    let pkts = packets();
    let mut frames: Vec<Frame> = pkts
        .iter()
        .map(|p| {
            let mut f = Frame::new(Geometry::TEST_RUN);
            f.load(p).expect("packet fits");
            f
        })
        .collect();
    let acc = if burst {
        let g = Geometry::TEST_RUN;
        let mut bufs: Vec<(Vec<u8>, Bounds)> = pkts
            .iter()
            .map(|p| {
                let mut buf = vec![0u8; g.size];
                buf[g.headroom..g.headroom + p.len()].copy_from_slice(p);
                let bounds =
                    Bounds { meta: g.headroom, data: g.headroom, end: g.headroom + p.len() };
                assert!(g.holds(&bounds, buf.len()), "packet fits");
                (buf, bounds)
            })
            .collect();
        bursts(&mut runner, &mut bufs, &mut host, n)
    } else {
        runs(&mut runner, &mut frames, &mut host, n)
    };
    println!("{name} {} runs: {acc}", pkts.len() as u64 * u64::from(n));
}
