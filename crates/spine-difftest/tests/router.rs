//! The bundled router (`bpf/router.c`) in spine against the kernel, frame by frame, in
//! the namespace of `fibns` (routes in several tables, ECMP, blackhole, unreachable and
//! prohibit routes, next hops with and without neighbours, a small-MTU device, a device
//! that does not forward): generated Ethernet frames, untagged and tagged, IPv4 and
//! IPv6, well formed and malformed, arrive on one of the namespace's devices through
//! `BPF_PROG_TEST_RUN` there and through spine with the mirrored FIB. Verdicts and
//! output bytes must agree on every frame, and the per-CPU counters at the end.
//! Needs root; without it the test says SKIP and passes.

mod fibns;

use fibns::{FibHost, Rng};
use spine_runtime::{
    load_object, Budget, EngineKind, Frame, Geometry, LoadOptions, RtMap, RxInfo, XdpRunner,
};
use spine_sys::{TestRun, XdpMd};

const FRAMES: usize = 3_000;

/// The one's-complement sum of 16-bit words, folded and inverted.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 =
        b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(*c.get(1).unwrap_or(&0))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn frame(rng: &mut Rng) -> Vec<u8> {
    let mut f = Vec::with_capacity(1600);
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x99]);
    match rng.below(10) {
        0 => f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]),
        1 => f.extend_from_slice(&[0x88, 0xa8, 0x00, 0x0a, 0x81, 0x00, 0x00, 0x64]),
        _ => {}
    }
    let v6 = rng.below(2) == 1;
    let kind = rng.below(30);
    if kind == 0 {
        f.extend_from_slice(&[0x08, 0x06]); // ARP
        f.extend((0..28).map(|_| rng.next() as u8));
        return f;
    }
    let payload = *rng.pick(&[0usize, 8, 26, 100, 1000, 1232, 1240, 1260, 1360, 1400, 1460, 1480]);
    if v6 {
        f.extend_from_slice(&[0x86, 0xdd]);
        let dst = *rng.pick(&[
            "2001:db8:10::5",
            "2001:db8:10:5::9",
            "2001:db8:11::1",
            "2001:db8:12::7",
            "2001:db8:12:8000::3",
            "2001:db8:12:c000::77",
            "2001:db8:13::1",
            "2001:db8:14::1",
            "2001:db8:15::1",
            "2001:db8:16::1",
            "2001:db8:17::1",
            "2001:db8:18::5",
            "2001:db8:18::6",
            "2001:db8:19::1",
            "2001:db8:1b::1",
            "2001:db8:1::1",
            "2001:db8:99::1",
            "fe80::1",
            "ff02::1",
        ]);
        let dst: std::net::Ipv6Addr = dst.parse().expect("v6");
        let mut src = [0u8; 16];
        src[..6].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0x00, 0xaa]);
        for b in &mut src[8..] {
            *b = rng.next() as u8;
        }
        let mut h = [0u8; 40];
        h[0] = if kind == 1 { 0x45 } else { 0x60 | (rng.next() as u8 & 0x0f) };
        h[1] = rng.next() as u8;
        h[2] = rng.next() as u8;
        let plen = if kind == 2 { payload + 9 } else { payload };
        h[4..6].copy_from_slice(&(plen as u16).to_be_bytes());
        h[6] = match kind {
            3 => 44,
            11 => 0,
            _ => *rng.pick(&[6u8, 17, 58]),
        };
        h[7] = *rng.pick(&[0u8, 1, 2, 64, 255]);
        h[8..24].copy_from_slice(&src);
        h[24..40].copy_from_slice(&dst.octets());
        let cut = if kind == 4 { rng.below(40) } else { 40 };
        f.extend_from_slice(&h[..cut]);
        if cut == 40 {
            f.extend((0..payload).map(|i| i as u8));
        }
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let nets = [
            [172, 16],
            [172, 17],
            [172, 18],
            [172, 19],
            [172, 20],
            [172, 21],
            [172, 22],
            [172, 23],
            [172, 24],
            [172, 25],
            [172, 26],
            [172, 27],
            [172, 28],
            [10, 99],
            [198, 18],
            [10, 1],
            [9, 9],
            [224, 0],
            [255, 255],
        ];
        let n = rng.pick(&nets);
        let dst = match rng.below(4) {
            0 => [n[0], n[1], 0, 5],
            1 => [n[0], n[1], 0, 1],
            _ => [n[0], n[1], rng.next() as u8, rng.next() as u8],
        };
        let opts = if kind == 5 { 4 } else { 0 };
        let mut h = vec![0u8; 20 + opts];
        h[0] = match kind {
            6 => 0x65,
            7 => 0x44,
            _ => 0x40 | ((20 + opts) / 4) as u8,
        };
        h[1] = rng.next() as u8;
        let tot = if kind == 8 { 20 + opts + payload + 3 } else { 20 + opts + payload };
        h[2..4].copy_from_slice(&(tot as u16).to_be_bytes());
        h[4..6].copy_from_slice(&(rng.next() as u16).to_be_bytes());
        let frag: u16 = match kind {
            9 => 0x2000,
            10 => 0x0010,
            _ => *rng.pick(&[0u16, 0x4000]),
        };
        h[6..8].copy_from_slice(&frag.to_be_bytes());
        h[8] = *rng.pick(&[0u8, 1, 2, 64, 255]);
        h[9] = *rng.pick(&[6u8, 17, 1]);
        let src: [u8; 4] =
            if rng.below(3) == 0 { [10, 1, 0, 1] } else { [100, 64, rng.next() as u8, 7] };
        h[12..16].copy_from_slice(&src);
        h[16..20].copy_from_slice(&dst);
        let c = csum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        let cut = if kind == 4 { rng.below(20) } else { h.len() };
        f.extend_from_slice(&h[..cut]);
        if cut == h.len() {
            f.extend((0..payload).map(|i| i as u8));
        }
    }
    // Ethernet padding after a short packet: not part of it, kept as it is.
    if rng.below(8) == 0 {
        f.extend_from_slice(&[0xee; 6]);
    }
    f
}

#[test]
fn router_matches_the_kernel() {
    if let Err(e) = spine_sys::probe() {
        eprintln!("SKIP: bpf(2) is unavailable: {e}");
        return;
    }
    let Some((ns, env, names)) = fibns::build() else { return };
    let b = spine_progs::get("router").expect("bundled router");
    let obj = spine_obj::parse(b.object).expect("parse");

    let mut rng = Rng(0x0070_07e7);
    let ingress = [names["in0"], names["in0"], names["dn1"], names["nf0"]];
    let frames: Vec<(u32, Vec<u8>)> =
        (0..FRAMES).map(|_| (*rng.pick(&ingress), frame(&mut rng))).collect();

    // The kernel, on CPU 0 inside the namespace.
    let (kernel, kernel_stats) = ns.enter(|| {
        spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
        let k = spine_sys::load_object_program(&obj, obj.program(None).expect("program"))
            .expect("kernel load");
        let outs: Vec<(u32, Vec<u8>)> = frames
            .iter()
            .map(|(ifindex, f)| {
                let mut run = TestRun::new(f);
                run.ctx_in = Some(XdpMd {
                    ingress_ifindex: *ifindex,
                    ..XdpMd::for_packet(f.len() as u32, 0)
                });
                let out = k.prog.test_run(&run).expect("test run");
                (out.retval, out.data_out)
            })
            .collect();
        let stats = k.maps[0].entries().expect("kernel map");
        (outs, stats)
    });

    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let opts =
            LoadOptions { ncpus: spine_sys::possible_cpus(), engine, ..LoadOptions::default() };
        let loaded = load_object(&obj, &opts).expect("spine load");
        let ext = loaded.program(None).expect("program").clone();
        let Some(RtMap::Data(stats)) = ext.maps().get(0).cloned() else {
            panic!("router_stats is the object's first map")
        };
        let mut runner = XdpRunner::new(ext, 0).expect("runner").with_budget(Budget::UNLIMITED);
        let mut host = FibHost(env.clone());
        let mut fr = Frame::new(Geometry::TEST_RUN);
        let mut verdicts = [0usize; 5];
        let mut bad = Vec::new();
        for (i, ((ifindex, f), (kv, kout))) in frames.iter().zip(&kernel).enumerate() {
            fr.load(f).expect("frame");
            let rx = RxInfo { ingress_ifindex: *ifindex, rx_queue_index: 0 };
            let v = runner.run(&mut fr, rx, &mut host).map_err(|e| e.to_string());
            if v.as_ref().ok() != Some(kv) || fr.meta_and_packet() != kout.as_slice() {
                bad.push(format!(
                    "frame {i} on {ifindex}: spine {v:?}, kernel {kv}\n  in     {}\n  kernel {}\n  spine  {}",
                    hex(f),
                    hex(kout),
                    hex(fr.meta_and_packet())
                ));
            } else {
                verdicts[(*kv as usize).min(4)] += 1;
            }
        }
        println!("{engine:?}: {FRAMES} frames, verdicts (aborted, drop, pass, tx, redirect) {verdicts:?}, {} mismatches", bad.len());
        for m in bad.iter().take(8) {
            println!("{m}");
        }
        assert!(bad.is_empty(), "spine and the kernel disagree on {} frames", bad.len());
        let ours = spine_difftest::spine_entries(&stats).expect("spine map");
        let theirs: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
            kernel_stats.iter().cloned().collect();
        assert_eq!(ours, theirs, "router_stats differ");
        // Every path of the router was taken: drops, passes and redirects.
        assert!(verdicts[1] > 0 && verdicts[2] > 0 && verdicts[4] > 0, "{verdicts:?}");
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
