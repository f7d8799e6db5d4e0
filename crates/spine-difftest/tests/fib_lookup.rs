//! `bpf_fib_lookup` in spine against the kernel's, lookup by lookup. The test builds a
//! network namespace with devices, addresses, routes in several tables (ECMP groups,
//! blackhole, unreachable, prohibit and throw routes, gateways with and without a
//! neighbour entry, a locked route MTU, a device with a small MTU, a device that does
//! not forward), both families; mirrors it into spine's FIB by reading it back with
//! `ip -j`; and runs a few thousand generated lookups through a program that calls the
//! helper, in the kernel (`BPF_PROG_TEST_RUN` inside the namespace) and in spine. The
//! struct the helper leaves and its return code must be identical, byte for byte.
//! Needs root; without it the test says SKIP and passes.

mod fibns;

use std::net::Ipv6Addr;

use fibns::{code_of, Rng};
use spine_runtime::EngineKind;

const LOOKUPS: usize = 4_000;
/// Ethernet header, `struct bpf_fib_lookup`, flags and spare, return code.
const PKT_LEN: usize = 14 + 64 + 8 + 8;

/// One lookup's packet: the struct filled from pools of interesting values.
fn lookup(rng: &mut Rng, ifindexes: &[u32]) -> Vec<u8> {
    let mut p = vec![0u8; PKT_LEN];
    for b in p.iter_mut() {
        *b = rng.next() as u8;
    }
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let s = &mut p[14..14 + 64];
    let v6 = rng.below(2) == 1;
    s[0] = match rng.below(40) {
        0 => 7, // neither family
        _ if v6 => 10,
        _ => 2,
    };
    s[1] = *rng.pick(&[6u8, 17, 1, 0]);
    let tot_len = *rng.pick(&[64u16, 576, 1280, 1281, 1300, 1400, 1401, 1500, 1501, 9000]);
    s[6..8].copy_from_slice(&tot_len.to_ne_bytes());
    let ifindex = *rng.pick(ifindexes);
    s[8..12].copy_from_slice(&ifindex.to_ne_bytes());
    if v6 {
        let dst: Ipv6Addr = {
            let base = *rng.pick(&[
                "2001:db8:10::",
                "2001:db8:10:5::",
                "2001:db8:11::",
                "2001:db8:12::",
                "2001:db8:12:8000::",
                "2001:db8:13::",
                "2001:db8:14::",
                "2001:db8:15::",
                "2001:db8:16::",
                "2001:db8:17::",
                "2001:db8:17:8000::",
                "2001:db8:18::",
                "2001:db8:19::",
                "2001:db8:1a::",
                "2001:db8:1b::",
                "2001:db8:1c:1::",
                "2001:db8:1::",
                "2001:db8:2::",
                "2001:db8:99::",
                "fe80::",
                "ff02::",
                "2001:db8:1::1",
            ]);
            let b = u128::from(base.parse::<Ipv6Addr>().expect("v6"));
            let host = match rng.below(4) {
                0 => 0,
                1 => 1,
                2 => 5,
                _ => u128::from(rng.next() as u16) << 64 | u128::from(rng.next()),
            };
            Ipv6Addr::from(if base.ends_with("::1") { b } else { b | host })
        };
        let src: Ipv6Addr = match rng.below(4) {
            0 => Ipv6Addr::UNSPECIFIED,
            1 => "2001:db8:1::1".parse().expect("v6"),
            2 => "fe80::1".parse().expect("v6"),
            _ => Ipv6Addr::from(u128::from(rng.next()) | 0x2001_0db8_00aa << 80),
        };
        s[16..32].copy_from_slice(&src.octets());
        s[32..48].copy_from_slice(&dst.octets());
    } else {
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
            [172, 29],
            [10, 99],
            [198, 18],
            [198, 19],
            [10, 1],
            [10, 2],
            [10, 0],
            [9, 9],
        ];
        let n = rng.pick(&nets);
        let host: [u8; 2] = match rng.below(6) {
            0 => [0, 5],
            1 => [0, 6],
            2 => [0, 1],
            3 => [0, 255],
            4 => [5, rng.next() as u8],
            _ => [rng.next() as u8, rng.next() as u8],
        };
        let src: [u8; 4] = match rng.below(5) {
            0 | 1 => [0; 4],
            2 => [10, 1, 0, 1],
            3 => [10, 1, 1, 1],
            _ => (rng.next() as u32).to_be_bytes(),
        };
        s[16..20].copy_from_slice(&src);
        s[32..36].copy_from_slice(&[n[0], n[1], host[0], host[1]]);
        // The rest of the address union stays as the generator left it.
    }
    let tbid = *rng.pick(&[0u32, 100, 200, 253, 254, 255, 7]);
    s[48..52].copy_from_slice(&tbid.to_ne_bytes());
    let mut flags = (rng.next() & 0x1f) as u32;
    if rng.below(4) == 0 {
        flags &= !1; // more lookups through the rules
    }
    if rng.below(50) == 0 {
        flags |= 1 << rng.below(8) << 5; // MARK and unknown bits
    }
    p[78..82].copy_from_slice(&flags.to_ne_bytes());
    p
}

#[test]
fn fib_lookup_matches_the_kernel() {
    if let Err(e) = spine_sys::probe() {
        eprintln!("SKIP: bpf(2) is unavailable: {e}");
        return;
    }
    let Some((ns, env, names, mut live)) = fibns::build_live() else { return };
    let dir = std::env::temp_dir().join(format!("spine-fib-difftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fib_probe.c");
    let object = spine_progs::compile_c(&src, &dir.join("fib_probe.o"), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    let obj = spine_obj::parse(&object).expect("parse");

    let in0 = names["in0"];
    let mut ifindexes: Vec<u32> =
        ["in0", "dn0", "dn1", "sm0", "nf0"].iter().map(|n| names[*n]).collect();
    ifindexes.extend([in0, in0, in0, 999]);
    let mut rng = Rng(0x0f1b_1007);
    let mut pkts: Vec<Vec<u8>> = (0..LOOKUPS).map(|_| lookup(&mut rng, &ifindexes)).collect();
    // And DIRECT lookups naming a table with TBID (others than main and local: the
    // fast path walks that table's own LPM), sometimes with SKIP_NEIGH.
    pkts.extend((0..LOOKUPS / 8).map(|_| {
        let mut p = lookup(&mut rng, &ifindexes);
        let tbid = *rng.pick(&[100u32, 100, 200, 253, 7, 255]);
        p[62..66].copy_from_slice(&tbid.to_ne_bytes());
        let fl: u32 = if rng.below(4) == 0 { 0xd } else { 0x9 };
        p[78..82].copy_from_slice(&fl.to_ne_bytes());
        p
    }));

    // The kernel: the program loaded and run from inside the namespace, the packet
    // arriving on in0, so the helper looks up in the namespace's tables.
    let kernel = fibns::kernel_lookups(&ns, &obj, &pkts, in0);

    // The ECMP groups really spread: the kernel sent their lookups out of more than
    // one interface, for each family.
    for (family, net) in [(2u8, &[172u8, 18][..]), (10, &[0x20, 0x01, 0x0d, 0xb8, 0, 0x12][..])] {
        let outs: std::collections::BTreeSet<u32> = pkts
            .iter()
            .zip(&kernel)
            .filter(|(p, k)| p[14] == family && p[46..46 + net.len()] == *net && code_of(k) == 0)
            .map(|(_, k)| u32::from_ne_bytes(k[22..26].try_into().expect("4 bytes")))
            .collect();
        assert!(outs.len() >= 2, "family {family}: ECMP lookups all left by {outs:?}");
    }

    // DIRECT lookups in a table other than main and local (TBID 100 or 253, without
    // OUTPUT or SRC: the fast path walks that table's own LPM) reach a route, both
    // families.
    for family in [2u8, 10] {
        let n = pkts
            .iter()
            .zip(&kernel)
            .filter(|(p, k)| {
                let fl = u32::from_ne_bytes(p[78..82].try_into().expect("4 bytes"));
                let tbid = u32::from_ne_bytes(p[62..66].try_into().expect("4 bytes"));
                p[14] == family && fl & 0x1b == 0x9 && [100, 253].contains(&tbid) && code_of(k) == 0
            })
            .count();
        eprintln!("family {family}: {n} DIRECT lookups in table 100 or 253 answered SUCCESS");
        assert!(n > 10, "family {family}: few DIRECT lookups in table 100 or 253 succeeded");
        // SRC without OUTPUT (the fast path writes the source too), some through a
        // route with its own `src`.
        let src = pkts
            .iter()
            .zip(&kernel)
            .filter(|(p, k)| {
                let fl = u32::from_ne_bytes(p[78..82].try_into().expect("4 bytes"));
                p[14] == family && fl & 0x12 == 0x10 && code_of(k) == 0
            })
            .count();
        eprintln!("family {family}: {src} SRC lookups answered SUCCESS");
        assert!(src > 50, "family {family}: few SRC lookups succeeded");
        // OUTPUT (the fast path answers a route through the device, IPv6 any route
        // with one next hop).
        let output = pkts
            .iter()
            .zip(&kernel)
            .filter(|(p, k)| {
                let fl = u32::from_ne_bytes(p[78..82].try_into().expect("4 bytes"));
                p[14] == family && fl & 0x2 != 0 && code_of(k) == 0
            })
            .count();
        eprintln!("family {family}: {output} OUTPUT lookups answered SUCCESS");
        assert!(output > 20, "family {family}: few OUTPUT lookups succeeded");
    }

    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let codes = fibns::spine_lookups_match(&obj, engine, &env, &pkts, &kernel, in0);
        // The run must have exercised every outcome it is meant to compare.
        for c in [0, 1, 2, 3, 4, 5, 7, 8, -22, -19, -97] {
            assert!(codes.get(&c).copied().unwrap_or(0) > 0, "no lookup answered {c}: {codes:?}");
        }
    }

    // Then neighbours, MTUs and routes change under routes already looked up, both
    // families: a gateway's entry goes (NO_NEIGH), one without an entry gets one, one
    // changes its MAC, a directly connected destination's entry goes, devices' MTUs
    // shrink (FRAG_NEEDED, IPv6 through the same devices), routes are replaced
    // (another gateway and device), deleted and added. The FIB takes the changes as
    // events (the same writer), and this time holds the interfaces itself.
    for cmd in [
        "neigh del 10.2.0.2 dev dn1",
        "neigh replace 10.1.0.3 lladdr 02:00:00:00:01:03 dev dn0 nud permanent",
        "neigh replace 10.1.1.2 lladdr 02:00:00:00:01:99 dev dn0 nud permanent",
        "neigh del 172.24.0.5 dev dn1",
        "-6 neigh del 2001:db8:2::2 dev dn1",
        "-6 neigh replace 2001:db8:1::3 lladdr 02:00:00:00:61:03 dev dn0 nud permanent",
        "-6 neigh replace 2001:db8:1::2 lladdr 02:00:00:00:61:99 dev dn0 nud permanent",
        "-6 neigh del 2001:db8:18::5 dev dn1",
        "link set dn0 mtu 1400",
        "link set dn1 mtu 1300",
        "route replace 172.19.0.0/16 via 10.1.0.2",
        "route del 172.28.0.0/16",
        "route add 172.16.5.128/25 via 10.1.1.2",
        "-6 route replace 2001:db8:13::/48 via 2001:db8:1::2",
        "-6 route del 2001:db8:1b::/48",
        "-6 route add 2001:db8:10:5:8000::/65 via 2001:db8:1::3",
    ] {
        ns.ip(cmd);
    }
    let changed_routes = [
        "172.19.0.0/16",
        "172.28.0.0/16",
        "172.16.5.128/25",
        "2001:db8:13::/48",
        "2001:db8:1b::/48",
        "2001:db8:10:5:8000::/65",
    ];
    fibns::resync_routes(&ns, &mut live, &names, &changed_routes);
    let env = fibns::resync(&ns, &mut live, &names);
    let kernel2 = fibns::kernel_lookups(&ns, &obj, &pkts, in0);
    let changed = kernel.iter().zip(&kernel2).filter(|(a, b)| a != b).count();
    assert!(changed > 100, "the changes altered only {changed} of the kernel's answers");
    let changed6 = kernel.iter().zip(&kernel2).filter(|(a, b)| a != b && a[14] == 10).count();
    assert!(changed6 > 50, "the changes altered only {changed6} IPv6 answers");
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let codes = fibns::spine_lookups_match(&obj, engine, &env, &pkts, &kernel2, in0);
        for c in [0, 7, 8] {
            assert!(codes.get(&c).copied().unwrap_or(0) > 0, "no lookup answered {c}: {codes:?}");
        }
    }
}
