//! `bpf_fib_lookup`'s fast path (the forwarding records, `spine_fib::fwd`) answers as
//! its general path does, byte for byte, across a long random sequence of route,
//! neighbour, interface and resilient-bucket changes: routes with one next hop,
//! hash-threshold multipath routes (IPv4 preferring the next hop that owns the
//! source), nexthop-object groups passing over members with a bad neighbour, resilient
//! groups by bucket, both families, in tables main, local and 100, with `DIRECT` and
//! `TBID` (100 is looked up alone), `SRC`, `OUTPUT`, and custom policy rules. The general path is held to the kernel by the
//! `spine-difftest` tests (`fib_lookup`, `fib_rules`); this holds the records to it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use spine_fib::{
    FibOp, FibWriter, Iface, IpPrefix, Neigh, NextHop, NudState, Route, RouteSelector, RouteType,
    Rule,
};
use spine_runtime::fib_lookup::{flags, FibEnv, PARAMS_LEN};

/// A deterministic generator (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PREFIXES: [&str; 10] = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "192.0.2.0/24",
    "0.0.0.0/0",
    "2001:db8::/32",
    "2001:db8:1::/48",
    "2001:db8:1:2::/64",
    "2001:db8:ff::/64",
    "::/0",
];

/// Interfaces 2..=4; interface `i` holds 192.0.2.(10 i)/24 and 2001:db8:ff::(10 i)/64.
fn iface_addr(i: u32, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, 10 * i as u16))
    } else {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10 * i as u8))
    }
}

fn gateway(rng: &mut Rng, v6: bool) -> IpAddr {
    let i = 1 + rng.below(4) as u8;
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xff, 0, 0, 0, 0, u16::from(i)))
    } else {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, i))
    }
}

fn nexthop(rng: &mut Rng, v6: bool) -> NextHop {
    let ifindex = 2 + rng.below(3) as u32;
    let mut nh = match rng.below(8) {
        0 => NextHop::dev(ifindex),
        1 => NextHop::via(gateway(rng, !v6), ifindex),
        _ => NextHop::via(gateway(rng, v6), ifindex),
    };
    nh.weight = 1 + rng.below(3) as u16;
    nh.encap = rng.below(30) == 0;
    nh
}

/// Main mostly; table 100, which `DIRECT` with `TBID` 100 looks in alone; local, merged
/// with main for IPv4, looked up before main for IPv6 (whose local routes get no
/// record).
fn table(rng: &mut Rng) -> u32 {
    use spine_fib::table_id::{LOCAL, MAIN};
    [MAIN, MAIN, MAIN, 100, 100, LOCAL][rng.below(6) as usize]
}

fn op(rng: &mut Rng) -> FibOp {
    let prefix: IpPrefix = PREFIXES[rng.below(PREFIXES.len() as u64) as usize].parse().unwrap();
    let v6 = matches!(prefix, IpPrefix::V6(_));
    match rng.below(10) {
        0..=3 => {
            let mut r = Route::unicast(prefix, vec![nexthop(rng, v6)]);
            r.table = table(rng);
            if r.table == spine_fib::table_id::LOCAL && prefix.len() < 24 {
                // Local holds the longest prefixes only: a local /0 would end every
                // walk through the rules at local's rule.
                r.table = spine_fib::table_id::MAIN;
            }
            r.metric = rng.below(2) as u32 * 100;
            match rng.below(10) {
                0..=3 => {
                    for _ in 0..=rng.below(2) {
                        r.nexthops.push(nexthop(rng, v6));
                    }
                    if rng.below(2) == 0 {
                        r.nhid = 1 + rng.below(3) as u32;
                    }
                }
                4 => r.mtu = 1400,
                6 => r.prefsrc = Some(iface_addr(2 + rng.below(3) as u32, v6)),
                5 => (r.kind, r.nexthops) = (RouteType::Blackhole, vec![]),
                _ => {}
            }
            FibOp::Replace(r)
        }
        4 => FibOp::Delete(RouteSelector { table: table(rng), prefix, metric: None, kind: None }),
        5 | 6 => {
            let state =
                [NudState::REACHABLE, NudState::STALE, NudState::FAILED, NudState::INCOMPLETE]
                    [rng.below(4) as usize];
            let neigh = Neigh { mac: [2, 0, 0, 0, rng.below(256) as u8, 1], state };
            FibOp::SetNeigh { ifindex: 2 + rng.below(3) as u32, ip: gateway(rng, v6), neigh }
        }
        7 if rng.below(2) == 0 => {
            FibOp::DelNeigh { ifindex: 2 + rng.below(3) as u32, ip: gateway(rng, v6) }
        }
        7 => {
            // A group turns resilient (buckets naming members 0..3, some past the
            // route's members) or stops being so.
            let buckets = match rng.below(3) {
                0 => vec![],
                _ => (0..16).map(|_| rng.below(3) as u16).collect(),
            };
            FibOp::SetBuckets { nhid: 1 + rng.below(3) as u32, buckets }
        }
        8 if rng.below(4) == 0 => FibOp::DelIface(2 + rng.below(3) as u32),
        9 if rng.below(2) == 0 => {
            // Custom policy rules (or the defaults back): a rule to table 100 for this
            // prefix or from interface 2, or one suppressing main's answers.
            use spine_fib::table_id::{DEFAULT, LOCAL, MAIN};
            let mut rules = vec![Rule::lookup(0, LOCAL)];
            match rng.below(4) {
                0 => {}
                1 => rules.push(Rule { dst: Some(prefix), ..Rule::lookup(100, 100) }),
                2 => {
                    // Main's answers of /8 or shorter are refused: table 100 is next.
                    rules.push(Rule { suppress_prefixlen: 8, ..Rule::lookup(100, MAIN) });
                    rules.push(Rule::lookup(200, 100));
                }
                _ => rules.push(Rule { iif: 2, ..Rule::lookup(100, 100) }),
            }
            rules.push(Rule::lookup(32766, MAIN));
            if !v6 {
                rules.push(Rule::lookup(32767, DEFAULT));
            }
            FibOp::SetRules { v6, rules }
        }
        _ => {
            let ifindex = 2 + rng.below(3) as u32;
            let mut addrs = vec![(iface_addr(ifindex, false), 24), (iface_addr(ifindex, true), 64)];
            if rng.below(4) == 0 {
                // No IPv6 address: SRC answers NO_SRC_ADDR through it.
                addrs.pop();
            }
            FibOp::SetIface(Iface {
                ifindex,
                mtu: 1000 + rng.below(1000) as u32,
                mac: [2, 0, 0, 1, 0, rng.below(256) as u8],
                forward_v4: true,
                forward_v6: true,
                addrs,
            })
        }
    }
}

/// A lookup into one of the prefixes from interface 1, its source sometimes an
/// interface's own address (IPv4 multipath prefers that next hop).
fn lookup(rng: &mut Rng) -> ([u8; PARAMS_LEN], u64) {
    let mut p = [0u8; PARAMS_LEN];
    for b in p.iter_mut() {
        *b = rng.next() as u8;
    }
    let prefix: IpPrefix = PREFIXES[rng.below(PREFIXES.len() as u64) as usize].parse().unwrap();
    let len = [64u16, 1000, 1280, 1300, 1400, 1401, 1500][rng.below(7) as usize];
    p[6..8].copy_from_slice(&len.to_ne_bytes());
    // From interface 1, or one the routes go out of (OUTPUT: only routes through it).
    let ifindex = if rng.below(2) == 0 { 1 } else { 2 + rng.below(3) as u32 };
    p[8..12].copy_from_slice(&ifindex.to_ne_bytes());
    let own = rng.below(3) == 0;
    match prefix {
        IpPrefix::V4(q) => {
            p[0] = 2;
            let host = rng.next() as u32 & !(u32::MAX.checked_shl(32 - q.len()).unwrap_or(0));
            p[32..36].copy_from_slice(&(q.addr() | host).to_be_bytes());
            if own {
                let IpAddr::V4(a) = iface_addr(2 + rng.below(3) as u32, false) else { panic!() };
                p[16..20].copy_from_slice(&a.octets());
            }
        }
        IpPrefix::V6(q) => {
            p[0] = 10;
            let r = u128::from(rng.next()) << 64 | u128::from(rng.next());
            let host = r & !(u128::MAX.checked_shl(128 - q.len()).unwrap_or(0));
            p[32..48].copy_from_slice(&(q.addr() | host).to_be_bytes());
            // A global source: link-local ones are never forwarded.
            p[16..18].copy_from_slice(&[0x20, 0x01]);
        }
    }
    let fl = [
        0,
        0,
        flags::SKIP_NEIGH,
        flags::DIRECT,
        flags::TBID,
        flags::DIRECT | flags::TBID,
        flags::DIRECT | flags::TBID | flags::SKIP_NEIGH,
        flags::SRC,
        flags::SRC | flags::SKIP_NEIGH,
        flags::SRC | flags::DIRECT | flags::TBID,
        flags::OUTPUT,
        flags::OUTPUT | flags::SKIP_NEIGH,
        flags::OUTPUT | flags::DIRECT | flags::TBID | flags::SRC,
    ][rng.below(13) as usize];
    // Tables: unspec (main), main, local, one of neither.
    let tbid = [0u32, 254, 255, 100][rng.below(4) as usize];
    p[48..52].copy_from_slice(&tbid.to_ne_bytes());
    (p, fl)
}

#[test]
fn the_fast_path_answers_as_the_general_path() {
    let (mut w, r) = FibWriter::new();
    let in1 = Iface {
        ifindex: 1,
        mtu: 1500,
        mac: [2, 0, 0, 0, 0, 1],
        forward_v4: true,
        forward_v6: true,
        addrs: vec![],
    };
    w.apply(FibOp::SetIface(in1)).unwrap();
    let fast = FibEnv::new(r.clone(), Vec::new()).with_multipath_seed(0x5eed);
    let slow = fast.clone().without_fast_path();
    let mut rng = Rng(0xfa57_9a7e);
    let mut codes = std::collections::BTreeMap::<i64, usize>::new();
    let mut groups = 0;
    let mut with_rules = [0; 2];
    for step in 0..2_000 {
        for _ in 0..=rng.below(3) {
            // Refused operations (deleting what is not there) change nothing.
            let _ = w.apply(op(&mut rng));
        }
        w.publish();
        groups += w.view().fwd_groups();
        let custom = [false, true].map(|v6| !w.view().rules(v6).is_default());
        for n in 0..20 {
            let (p, fl) = lookup(&mut rng);
            if custom[usize::from(p[0] == 10)] {
                with_rules[usize::from(p[0] == 10)] += 1;
            }
            let (mut a, mut b) = (p, p);
            let (ra, rb) = (fast.lookup(&mut a, 64, fl), slow.lookup(&mut b, 64, fl));
            assert_eq!((ra, a), (rb, b), "step {step}, lookup {n}: flags {fl:#x}, in {p:?}");
            *codes.entry(ra).or_default() += 1;
        }
    }
    // SRC through an interface without an IPv6 address answers NO_SRC_ADDR (9).
    for (c, min) in [(0, 100), (1, 100), (4, 100), (7, 100), (8, 100), (9, 30)] {
        let n = codes.get(&c).copied().unwrap_or(0);
        assert!(n > min, "few lookups answered {c}: {codes:?}");
    }
    assert!(groups > 2_000, "few multipath groups had records: {groups}");
    eprintln!("lookups under custom rules, IPv4 and IPv6: {with_rules:?}");
    assert!(
        with_rules.iter().all(|&n| n > 2_000),
        "few lookups under custom rules: {with_rules:?}"
    );
}

/// `SRC`'s IPv6 source choice from the precomputed records (`spine_fib::SrcV6`, one
/// in the FIB state rebuilt with every interface change, one over the configured
/// interfaces) answers as the general selection over the interfaces' addresses after
/// every change: addresses of every scope added and removed, devices deleted,
/// destinations that are the router's own addresses, configured interfaces that
/// shadow FIB ones (their FIB addresses are not the router's) and one the FIB lacks.
#[test]
fn src_v6_from_the_records_follows_address_changes() {
    const POOL: [&str; 8] = [
        "2001:db8:a::1",
        "2001:db8:a:8000::1",
        "2001:db8:b::1",
        "2001:db8:c::1",
        "fd00::fe",
        "fe80::1",
        "fe80::2",
        "2001:db8:a:8000::2",
    ];
    let routes = [
        ("2001:db8:a::/48", Some("fd00::1"), 3),
        ("2001:db8:b::/48", Some("fd00::2"), 4),
        ("2001:db8:c::/64", None, 5),
        ("2001:db8:a:8000::/49", None, 6),
        ("fd00::/64", None, 3),
    ];
    let (mut w, r) = FibWriter::new();
    for (pfx, gw, dev) in routes {
        let nh = match gw {
            Some(g) => NextHop::via(g.parse().unwrap(), dev),
            None => NextHop::dev(dev),
        };
        w.add(Route::unicast(pfx.parse().unwrap(), vec![nh])).unwrap();
    }
    let iface = |ifindex: u32, addrs: Vec<(IpAddr, u8)>| Iface {
        ifindex,
        mtu: 1500,
        mac: [2, 0, 0, 0, 1, ifindex as u8],
        forward_v4: true,
        forward_v6: true,
        addrs,
    };
    w.apply(FibOp::SetIface(iface(1, vec![]))).unwrap();
    for g in ["fd00::1", "fd00::2"] {
        let neigh = Neigh { mac: [2, 0, 0, 0, 9, 9], state: NudState::REACHABLE };
        let ifindex = if g == "fd00::1" { 3 } else { 4 };
        w.apply(FibOp::SetNeigh { ifindex, ip: g.parse().unwrap(), neigh }).unwrap();
    }
    w.publish();
    let a = |s: &str| (s.parse::<IpAddr>().unwrap(), 64u8);
    // Interface 2 shadows the FIB's 2; 6 is configured only (its routes' device).
    let configured = vec![
        iface(2, vec![a("2001:db8:b::2"), a("fe80::22")]),
        iface(6, vec![a("192.0.2.6"), a("fe80::66")]),
    ];
    let envs = [FibEnv::new(r.clone(), configured), FibEnv::new(r.clone(), Vec::new())];
    let mut rng = Rng(0x5c_0a_dd_e5);
    let mut codes = std::collections::BTreeMap::<i64, usize>::new();
    let mut answers = std::collections::BTreeSet::<[u8; 16]>::new();
    let mut own = 0;
    for step in 0..1_500 {
        for _ in 0..=rng.below(2) {
            let ifindex = 2 + rng.below(4) as u32;
            let op = if rng.below(8) == 0 {
                FibOp::DelIface(ifindex)
            } else {
                let mut addrs = vec![a("192.0.2.1")];
                for _ in 0..rng.below(4) {
                    addrs.push(a(POOL[rng.below(POOL.len() as u64) as usize]));
                }
                FibOp::SetIface(iface(ifindex, addrs))
            };
            w.apply(op).unwrap();
        }
        w.publish();
        for n in 0..20 {
            let mut p = [0u8; PARAMS_LEN];
            p[0] = 10;
            p[1] = 6;
            p[6..8].copy_from_slice(&100u16.to_ne_bytes());
            p[8..12].copy_from_slice(&1u32.to_ne_bytes());
            p[16..32].copy_from_slice(&"2001:db8:ffff::7".parse::<Ipv6Addr>().unwrap().octets());
            let dst: Ipv6Addr = if rng.below(4) == 0 {
                let d: Ipv6Addr = POOL[rng.below(5) as usize].parse().unwrap();
                own += 1;
                d
            } else {
                let (pfx, _, _) = routes[rng.below(4) as usize];
                let IpPrefix::V6(q) = pfx.parse().unwrap() else { unreachable!() };
                let host = (u128::from(rng.next()) << 64 | u128::from(rng.next()))
                    & !(u128::MAX.checked_shl(128 - q.len()).unwrap_or(0));
                Ipv6Addr::from(q.addr() | host)
            };
            p[32..48].copy_from_slice(&dst.octets());
            let fl = [flags::SRC, flags::SRC | flags::SKIP_NEIGH][rng.below(2) as usize];
            for (e, env) in envs.iter().enumerate() {
                let slow = env.clone().without_fast_path();
                let (mut x, mut y) = (p, p);
                let (rx, ry) = (env.lookup(&mut x, 64, fl), slow.lookup(&mut y, 64, fl));
                assert_eq!((rx, x), (ry, y), "step {step}, lookup {n}, env {e}: in {p:?}");
                *codes.entry(rx).or_default() += 1;
                if rx == 0 {
                    answers.insert(x[16..32].try_into().unwrap());
                }
            }
        }
    }
    eprintln!(
        "codes {codes:?}, {} source addresses answered, {own} to own addresses",
        answers.len()
    );
    // SUCCESS, NO_NEIGH (7) after the source was written, NO_SRC_ADDR (9).
    for (c, min) in [(0, 2_000), (7, 500), (9, 100)] {
        let n = codes.get(&c).copied().unwrap_or(0);
        assert!(n > min, "few lookups answered {c}: {codes:?}");
    }
    assert!(answers.len() >= 8, "few distinct sources answered: {answers:?}");
}
