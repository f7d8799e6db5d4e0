//! `bpf_fib_lookup` through policy rules and nexthop objects, in spine against the
//! kernel's, lookup by lookup. The test builds a network namespace with rules of both
//! families (from, to, iif — `lo` for `OUTPUT` lookups —, oif, fwmark/mask, tos, l4
//! protocol and ports, `not`, `goto`, `suppress_prefixlength`, a uid range, lookup,
//! blackhole, unreachable and prohibit actions), tables that miss, throw, blackhole,
//! and routes through nexthop objects (single nexthops, weighted multipath groups, a
//! blackhole nexthop) in main and behind rules; spine mirrors it with `spine_rtnl`'s
//! live mirror (the same code a router runs); a few thousand generated lookups run
//! through a program that calls the helper, in the kernel (`BPF_PROG_TEST_RUN` inside
//! the namespace) and in spine. The struct the helper leaves and its return code must
//! be identical, byte for byte; the ECMP choice of the groups included (the
//! namespace's multipath seed is given to spine), with sources that are the router's
//! own addresses too (a group has no source-address preference, a multipath route
//! has), and groups with a member whose gateway's neighbour entry failed (passed
//! over). Needs root; without it the test says SKIP and passes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;

mod fibns;

use fibns::{code_of, Rng};
use spine_fib::FibWriter;
use spine_rtnl::{Mirror, RtnlSocket};
use spine_runtime::fib_lookup::FibEnv;
use spine_runtime::EngineKind;
use spine_testnet::netns::{ifindex, NetNs};

const LOOKUPS: usize = 6_000;
const PKT_LEN: usize = 14 + 64 + 8 + 8;
const SEED: u32 = 0x5eed_4321;
const DEVS: [&str; 4] = ["in0", "in1", "dn0", "dn1"];

const SETUP: &[&str] = &[
    "addr add 10.0.0.1/24 dev in0",
    "addr add 10.5.0.1/24 dev in1",
    "addr add 10.1.0.1/24 dev dn0",
    "addr add 10.2.0.1/24 dev dn1",
    "-6 addr add 2001:db8::1/64 dev in0 nodad",
    "-6 addr add 2001:db8:5::1/64 dev in1 nodad",
    "-6 addr add 2001:db8:1::1/64 dev dn0 nodad",
    "-6 addr add 2001:db8:2::1/64 dev dn1 nodad",
    "neigh add 10.1.0.2 lladdr 02:00:00:00:01:02 dev dn0 nud permanent",
    "neigh add 10.1.0.3 lladdr 02:00:00:00:01:03 dev dn0 nud permanent",
    "neigh add 10.2.0.2 lladdr 02:00:00:00:02:02 dev dn1 nud permanent",
    "neigh add 2001:db8:1::2 lladdr 02:00:00:00:61:02 dev dn0 nud permanent",
    "neigh add 2001:db8:2::2 lladdr 02:00:00:00:62:02 dev dn1 nud permanent",
    // Nexthop objects.
    "nexthop add id 1 via 10.1.0.2 dev dn0",
    "nexthop add id 2 via 10.2.0.2 dev dn1",
    "nexthop add id 3 via 10.1.0.3 dev dn0",
    "nexthop add id 5 blackhole",
    "nexthop add id 10 group 1/2,3",
    "nexthop add id 11 group 1/2/3",
    "nexthop add id 6 via 2001:db8:1::2 dev dn0",
    "nexthop add id 7 via 2001:db8:2::2 dev dn1",
    "nexthop add id 16 group 6/7,2",
    // Groups with a member whose gateway's neighbour failed: the kernel passes it over.
    "neigh add 10.1.0.4 dev dn0 nud failed",
    "-6 neigh add 2001:db8:1::9 dev dn0 nud failed",
    "nexthop add id 4 via 10.1.0.4 dev dn0",
    "nexthop add id 9 via 2001:db8:1::9 dev dn0",
    "nexthop add id 12 group 4/2/1",
    "nexthop add id 17 group 9/7",
    "-6 nexthop add id 8 blackhole",
    // A resilient group: members by the kernel's buckets.
    "nexthop add id 20 group 1/2/3 type resilient buckets 64",
    // IPv4 tables.
    "route add 172.16.0.0/12 via 10.1.0.2",
    "route add 172.20.0.0/16 via 10.2.0.2",
    "route add throw 172.30.0.0/16",
    "route add 198.18.0.0/16 nhid 10",
    "route add 198.19.0.0/16 nhid 1",
    "route add 198.20.0.0/16 nhid 5",
    "route add 198.21.0.0/16 nhid 11",
    "route add 198.22.0.0/16 nhid 12",
    "route add 198.23.0.0/16 nhid 20",
    // IPv4 through IPv6 gateways (RFC 5549): the answer turns IPv6.
    "route add 198.24.0.0/16 via inet6 2001:db8:1::2 dev dn0",
    "route add 198.25.0.0/16 nhid 16",
    // Lightweight tunnels: the kernel answers UNSUPP_LWT once one is chosen.
    "route add 198.26.0.0/16 encap ip id 5 dst 10.9.9.9 via 10.1.0.2 dev dn0",
    "route add 198.27.0.0/16 nexthop via 10.1.0.2 dev dn0 nexthop encap ip id 7 dst 10.9.9.9 via 10.2.0.2 dev dn1",
    "nexthop add id 30 encap ip id 9 dst 10.9.9.9 via 10.1.0.3 dev dn0",
    "route add 198.28.0.0/16 nhid 30",
    "-6 route add 2001:db8:54::/48 encap ip6 id 5 dst 2001:db8:1::9 via 2001:db8:1::2 dev dn0",
    "route add 172.30.0.0/16 via 10.2.0.2 table default",
    "route add 172.16.0.0/16 via 10.2.0.2 table 100",
    "route add blackhole 172.17.0.0/16 table 100",
    "route add throw 172.18.0.0/16 table 100",
    "route add unreachable 172.19.0.0/16 table 100",
    "route add 198.18.0.0/15 nhid 11 table 100",
    "route add 172.16.0.0/12 via 10.1.0.3 table 200",
    "route add prohibit 172.21.0.0/16 table 200",
    "route add default via 10.2.0.2 table 200",
    "route add 172.16.0.0/12 nhid 10 table 300",
    "route add 198.18.0.0/16 nhid 2 table 300",
    // IPv4 rules.
    "rule add from 10.9.0.0/16 lookup 100 pref 100",
    "rule add to 172.16.5.0/24 lookup 200 pref 110",
    "rule add iif in1 lookup 200 pref 120",
    "rule add fwmark 0x10/0xf0 lookup 100 pref 130",
    "rule add tos 0x10 lookup 200 pref 140",
    "rule add ipproto udp dport 53 lookup 300 pref 150",
    "rule add iif lo lookup 100 pref 160",
    "rule add oif dn1 prohibit pref 170",
    "rule add from 10.8.0.0/16 blackhole pref 180",
    "rule add from 10.7.0.0/16 unreachable pref 185",
    "rule add from 10.6.0.0/16 goto 210 pref 190",
    "rule add from 10.6.0.0/16 prohibit pref 195",
    "rule add from 10.6.0.0/15 lookup 300 pref 210",
    "rule add sport 1000-2000 lookup main suppress_prefixlength 12 pref 220",
    "rule add uidrange 1000-2000 prohibit pref 230",
    "rule add fwmark 0x17 lookup 300 pref 240",
    "rule add not to 172.0.0.0/8 lookup 300 pref 250",
    // IPv6 tables.
    "-6 route add 2001:db8:10::/44 via 2001:db8:1::2",
    "-6 route add 2001:db8:50::/48 nhid 16",
    "-6 route add 2001:db8:51::/48 nhid 6",
    "-6 route add 2001:db8:52::/48 nhid 8",
    "-6 route add 2001:db8:53::/48 nhid 17",
    "-6 route add 2001:db8:10::/48 via 2001:db8:2::2 table 100",
    "-6 route add blackhole 2001:db8:11::/48 table 100",
    "-6 route add throw 2001:db8:12::/48 table 100",
    "-6 route add unreachable 2001:db8:13::/48 table 100",
    "-6 route add 2001:db8:50::/47 nhid 7 table 100",
    "-6 route add prohibit 2001:db8:14::/48 table 200",
    "-6 route add default via 2001:db8:2::2 table 200",
    // IPv6 rules.
    "-6 rule add from 2001:db8:9::/48 lookup 100 pref 100",
    "-6 rule add iif in1 lookup 200 pref 110",
    "-6 rule add tos 0x20 lookup 200 pref 120",
    "-6 rule add fwmark 5 lookup 100 pref 130",
    "-6 rule add from 2001:db8:8::/48 blackhole pref 140",
    "-6 rule add from 2001:db8:7::/48 prohibit pref 150",
    "-6 rule add from 2001:db8:6::/48 unreachable pref 155",
    "-6 rule add iif lo lookup 200 pref 160",
    "-6 rule add ipproto tcp sport 1000-2000 lookup 100 pref 170",
    // The kernel suppresses nothing for an IPv6 bpf_fib_lookup (no rt6_info): table
    // 100's /48 answers although it is shorter than 64.
    "-6 rule add to 2001:db8:10::/48 lookup 100 suppress_prefixlength 64 pref 90",
];

fn lookup(rng: &mut Rng, ifindexes: &[u32]) -> Vec<u8> {
    let mut p = vec![0u8; PKT_LEN];
    for b in p.iter_mut() {
        *b = rng.next() as u8;
    }
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let s = &mut p[14..14 + 64];
    let v6 = rng.below(2) == 1;
    s[0] = if v6 { 10 } else { 2 };
    s[1] = *rng.pick(&[6u8, 17, 1]);
    let port = |rng: &mut Rng| {
        let r = rng.next() as u16;
        *rng.pick(&[53u16, 80, 999, 1000, 1500, 2000, 2001, r])
    };
    let (sp, dp) = (port(rng), port(rng));
    s[2..4].copy_from_slice(&sp.to_be_bytes());
    s[4..6].copy_from_slice(&dp.to_be_bytes());
    s[6..8].copy_from_slice(&rng.pick(&[64u16, 1500, 1501]).to_ne_bytes());
    s[8..12].copy_from_slice(&rng.pick(ifindexes).to_ne_bytes());
    if v6 {
        let tclass = u32::from(*rng.pick(&[0u8, 0x20, 0x22, 0x10, 0xb8]));
        let flowinfo = tclass << 20 | (rng.next() as u32 & 0xf_ffff);
        s[12..16].copy_from_slice(&flowinfo.to_be_bytes());
        let net = *rng.pick(&[
            0x10u16, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x1f, 0x50, 0x50, 0x51, 0x51, 0x52, 0x53,
            0x53, 0x54, 0x99,
        ]);
        let sub = *rng.pick(&[0u16, 0, 5]);
        let dst =
            Ipv6Addr::new(0x2001, 0xdb8, net, sub, 0, 0, rng.next() as u16, rng.next() as u16);
        let snet = *rng.pick(&[0u16, 6, 7, 8, 9, 9, 0xaa]);
        let src = if snet == 0 {
            Ipv6Addr::UNSPECIFIED
        } else {
            Ipv6Addr::new(0x2001, 0xdb8, snet, 0, 0, 0, 0, rng.next() as u16)
        };
        s[16..32].copy_from_slice(&src.octets());
        s[32..48].copy_from_slice(&dst.octets());
    } else {
        s[12] = *rng.pick(&[0u8, 0x10, 0x12, 0x14, 0x1c, 0xb8]);
        let n = *rng.pick(&[
            [172, 16],
            [172, 16],
            [172, 17],
            [172, 18],
            [172, 19],
            [172, 20],
            [172, 21],
            [172, 30],
            [198, 18],
            [198, 18],
            [198, 19],
            [198, 20],
            [198, 21],
            [198, 21],
            [198, 22],
            [198, 22],
            [198, 23],
            [198, 23],
            [198, 24],
            [198, 25],
            [198, 26],
            [198, 27],
            [198, 27],
            [198, 28],
            [9, 9],
        ]);
        let r = rng.next() as u8;
        let third = *rng.pick(&[0u8, 5, r]);
        s[32..36].copy_from_slice(&[n[0], n[1], third, rng.next() as u8]);
        let src: [u8; 4] = match rng.below(10) {
            8 => [10, 1, 0, 1],
            9 => [10, 2, 0, 1],
            0 => [0; 4],
            1 => [10, 9, 1, rng.next() as u8],
            2 => [10, 8, 1, 1],
            3 => [10, 7, 1, 1],
            4 => [10, 6, rng.next() as u8, 1],
            _ => [192, 168, rng.next() as u8, rng.next() as u8],
        };
        s[16..20].copy_from_slice(&src);
    }
    let tbid = *rng.pick(&[0u32, 100, 200, 300, 253, 254]);
    s[48..52].copy_from_slice(&tbid.to_ne_bytes());
    let r = rng.next() as u32;
    let mark = *rng.pick(&[0u32, 5, 0x10, 0x17, 0x1f, 0x110, r]);
    s[52..56].copy_from_slice(&mark.to_ne_bytes());
    // Mostly through the rules (no DIRECT), MARK half of the time.
    let mut flags = (rng.next() & 0x3f) as u32;
    if rng.below(4) != 0 {
        flags &= !1;
    }
    p[78..82].copy_from_slice(&flags.to_ne_bytes());
    p
}

#[test]
fn rules_and_nexthop_objects_match_the_kernel() {
    if let Err(e) = spine_sys::probe() {
        eprintln!("SKIP: bpf(2) is unavailable: {e}");
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    for kv in [
        "net.ipv6.conf.all.disable_ipv6=0",
        "net.ipv6.conf.default.disable_ipv6=0",
        "net.ipv6.conf.all.accept_dad=0",
        "net.ipv6.conf.default.accept_dad=0",
    ] {
        ns.exec(&["sysctl", "-qw", kv]);
    }
    for d in DEVS {
        ns.veth(d, &format!("{d}p"));
    }
    for cmd in SETUP {
        ns.ip(cmd);
    }
    for kv in ["net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1"] {
        ns.exec(&["sysctl", "-qw", kv]);
    }
    for d in DEVS {
        for fam in ["ipv4", "ipv6"] {
            ns.exec(&["sysctl", "-qw", &format!("net.{fam}.conf.{d}.forwarding=1")]);
        }
    }
    ns.exec(&["sysctl", "-qw", &format!("net.ipv4.fib_multipath_hash_seed={SEED}")]);
    let names: BTreeMap<&str, u32> = ns.enter(|| DEVS.iter().map(|d| (*d, ifindex(d))).collect());

    // spine's FIB: the namespace's tables, rules, nexthops, neighbours and interfaces,
    // mirrored over rtnetlink.
    let (fib, reader) = FibWriter::new();
    let mut ports: Vec<u32> = names.values().copied().collect();
    ports.push(1);
    let mirror = ns
        .enter(|| Mirror::start(RtnlSocket::open().expect("rtnetlink").with_ifaces(ports), fib))
        .expect("mirror");
    let env = FibEnv::new(reader.clone(), Vec::new()).with_multipath_seed(SEED);
    {
        let st = reader.load();
        assert!(!st.rules(false).is_default() && !st.rules(true).is_default());
        assert_eq!(st.rules(false).rules().len(), 3 + 17, "every IPv4 rule mirrored");
        assert_eq!(st.rules(true).rules().len(), 2 + 10, "every IPv6 rule mirrored");
    }

    let dir = std::env::temp_dir().join(format!("spine-fib-rules-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fib_probe.c");
    let object = spine_progs::compile_c(&src, &dir.join("fib_probe.o"), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    let obj = spine_obj::parse(&object).expect("parse");

    let in0 = names["in0"];
    let mut ifindexes: Vec<u32> = names.values().copied().collect();
    ifindexes.extend([in0, in0, 1]);
    let mut rng = Rng(0x0f1b_2026);
    let pkts: Vec<Vec<u8>> = (0..LOOKUPS).map(|_| lookup(&mut rng, &ifindexes)).collect();

    let kernel = fibns::kernel_lookups(&ns, &obj, &pkts, in0);

    // The groups really spread in the kernel: lookups through them left by more than
    // one interface, for each family.
    for (family, net) in
        [(2u8, &[198u8, 18][..]), (2, &[198, 23]), (10, &[0x20, 0x01, 0x0d, 0xb8, 0, 0x50][..])]
    {
        let outs: BTreeSet<u32> = pkts
            .iter()
            .zip(&kernel)
            .filter(|(p, k)| p[14] == family && p[46..46 + net.len()] == *net && code_of(k) == 0)
            .map(|(_, k)| u32::from_ne_bytes(k[22..26].try_into().expect("4 bytes")))
            .collect();
        assert!(outs.len() >= 2, "family {family}: group lookups all left by {outs:?}");
    }

    // The rules decided: lookups through them (no DIRECT) reached table 100's
    // blackhole route, and a blackhole and a prohibit rule of their own.
    let through_rules = |family: u8, pick: &dyn Fn(&[u8]) -> bool, code: i64| {
        pkts.iter().zip(&kernel).any(|(p, k)| {
            p[14] == family && p[78] & 1 == 0 && pick(&p[14..78]) && code_of(k) == code
        })
    };
    assert!(through_rules(2, &|s| s[32..34] == [172, 17], 1), "table 100's blackhole");
    assert!(through_rules(2, &|s| s[16..18] == [10, 8], 1), "the blackhole rule");
    assert!(through_rules(2, &|s| s[32..34] == [172, 21], 3), "table 200's prohibit");
    assert!(through_rules(10, &|s| s[32..38] == [0x20, 1, 0xd, 0xb8, 0, 0x11], 1), "IPv6 rule");
    // An IPv4 lookup through an IPv6 gateway came back IPv6 (family 10 in the answer).
    let turned = pkts
        .iter()
        .zip(&kernel)
        .any(|(p, k)| p[14] == 2 && p[46..48] == [198, 24] && code_of(k) == 0 && k[14] == 10);
    assert!(turned, "no IPv4 lookup through an IPv6 gateway succeeded");

    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let codes = fibns::spine_lookups_match(&obj, engine, &env, &pkts, &kernel, in0);
        for c in [0, 1, 2, 3, 4, 6, 8] {
            assert!(codes.get(&c).copied().unwrap_or(0) > 0, "no lookup answered {c}: {codes:?}");
        }
    }
    mirror.stop().expect("the mirror ran without error");
}
