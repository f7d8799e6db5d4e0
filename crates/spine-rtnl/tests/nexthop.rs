//! Routes through nexthop objects (`ip nexthop`, what FRR's zebra installs): the FIB
//! follows the nexthops and groups of a namespace this test creates, through the first
//! dump and then live — a nexthop or group replaced, a device going down, a nexthop
//! deleted — and every answer is the kernel's own (`ip route get`), the next hop of an
//! ECMP group included (the kernel's multipath hash with the namespace's seed), both
//! in the FIB and through spine's `bpf_fib_lookup` on the mirrored FIB and interfaces.

mod common;

use common::{eventually, ip};
use std::net::IpAddr;
use std::process::Command;

use spine_fib::{mphash, table_id, FibState, FibWriter, RouteType};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_runtime::fib_lookup::{flags, ret, FibEnv, PARAMS_LEN};
use spine_testnet::netns::{ifindex, NetNs};

const SEED: u32 = 0x5eed_0011;

/// The kernel's answer to `ip route get DST`: gateway and device, or `None` when it
/// forwards nothing there (no route, a blackhole).
fn kernel_get(ns: &NetNs, dst: IpAddr) -> Option<(Option<IpAddr>, String)> {
    let out = Command::new("ip")
        .args(["-n", ns.name(), "route", "get", &dst.to_string()])
        .output()
        .expect("ip route get");
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let words: Vec<&str> = text.split_whitespace().collect();
    let after = |k: &str| words.iter().position(|w| *w == k).map(|i| words[i + 1]);
    // `via inet6 ADDR` for an IPv4 route through an IPv6 gateway.
    let via = after("via").map(|w| if w == "inet6" { after("inet6").unwrap() } else { w });
    Some((via.map(ip), after("dev")?.to_string()))
}

/// What spine's FIB answers for `dst`, the next hop chosen as the kernel's `ip route
/// get` chooses it (no source address, the namespace's seed), in the same form.
fn fib_get(st: &FibState, dst: IpAddr, names: &[(u32, &str)]) -> Option<(Option<IpAddr>, String)> {
    let hash = match dst {
        IpAddr::V4(d) => mphash::hash_v4([0; 4], d.octets(), SEED),
        IpAddr::V6(d) => mphash::hash_v6([0; 16], d.octets(), [0; 4], 0, SEED),
    };
    let r = st.lookup(table_id::MAIN, dst, hash)?;
    let nh = r.nexthop?;
    let name = names.iter().find(|n| n.0 == nh.ifindex)?.1;
    Some((nh.gateway, name.to_string()))
}

/// What spine's `bpf_fib_lookup` answers for IPv4 `dst` arriving on `names[0]`, with
/// `SKIP_NEIGH` and no source address: the gateway it leaves in `ipv4_dst` (none when it
/// is `dst` itself) and the output device, or `None` unless it forwards.
fn helper_get(
    env: &FibEnv,
    dst: IpAddr,
    names: &[(u32, &str)],
) -> Option<(Option<IpAddr>, String)> {
    let IpAddr::V4(d) = dst else { return None };
    let mut p = [0u8; PARAMS_LEN];
    p[0] = 2; // AF_INET
    p[6..8].copy_from_slice(&64u16.to_ne_bytes());
    p[8..12].copy_from_slice(&names[0].0.to_ne_bytes());
    p[32..36].copy_from_slice(&d.octets());
    if env.lookup(&mut p, PARAMS_LEN as u64, flags::SKIP_NEIGH) != ret::SUCCESS {
        return None;
    }
    let out = u32::from_ne_bytes(p[8..12].try_into().unwrap());
    // Through an IPv6 gateway the answer turns IPv6 (RFC 5549).
    let via = if p[0] == 10 {
        IpAddr::from(<[u8; 16]>::try_from(&p[32..48]).unwrap())
    } else {
        IpAddr::from(<[u8; 4]>::try_from(&p[32..36]).unwrap())
    };
    let name = names.iter().find(|n| n.0 == out)?.1;
    Some(((via != dst).then_some(via), name.to_string()))
}

/// Every address of `dsts` answers as the kernel does (called once the FIB shows the
/// change last made), in the FIB and through spine's `bpf_fib_lookup`.
fn same_as_kernel(ns: &NetNs, env: &FibEnv, names: &[(u32, &str)], dsts: &[IpAddr]) {
    let st = env.fib.load();
    for &d in dsts {
        let kernel = kernel_get(ns, d);
        assert_eq!(fib_get(&st, d, names), kernel, "the next hop for {d}");
        assert_eq!(helper_get(env, d, names), kernel, "bpf_fib_lookup for {d}");
    }
}

#[test]
fn routes_through_nexthop_objects_follow_the_kernel() {
    let Some(ns) = NetNs::new() else { return };
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"]);
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=0"]);
    let seeded = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sysctl", "-qw"])
        .arg(format!("net.ipv4.fib_multipath_hash_seed={SEED}"))
        .status()
        .is_ok_and(|s| s.success());
    if !seeded {
        eprintln!("SKIP: this kernel has no net.ipv4.fib_multipath_hash_seed");
        return;
    }
    ns.veth("nh0a", "nh0b");
    ns.veth("nh1a", "nh1b");
    ns.ip("addr add 10.1.0.1/24 dev nh0a");
    ns.ip("addr add 10.2.0.1/24 dev nh1a");
    ns.ip("-6 addr add 2001:db8:1::1/64 dev nh0a nodad");
    ns.ip("nexthop add id 1 via 10.1.0.2 dev nh0a");
    ns.ip("nexthop add id 2 via 10.2.0.2 dev nh1a");
    ns.ip("nexthop add id 10 group 1/2,3");
    ns.ip("nexthop add id 5 blackhole");
    ns.ip("nexthop add id 6 via 2001:db8:1::2 dev nh0a");
    ns.ip("route add 192.0.2.0/24 nhid 10");
    ns.ip("route add 198.51.100.0/24 nhid 1");
    ns.ip("route add 198.51.101.0/24 nhid 1");
    ns.ip("route add 203.0.113.0/24 nhid 5");
    ns.ip("-6 route add 2001:db8:99::/48 nhid 6");
    // IPv4 routes through an IPv6 gateway (RFC 5549): spelled out, and a nexthop object.
    ns.ip("route add 100.64.0.0/16 via inet6 2001:db8:1::7 dev nh0a");
    ns.ip("route add 100.65.0.0/16 nhid 6");
    ns.ip("route add 100.66.0.0/16 nexthop via inet6 2001:db8:1::8 dev nh0a nexthop via 10.2.0.2 dev nh1a");
    let (a, b) = ns.enter(|| (ifindex("nh0a"), ifindex("nh1a")));
    let names = [(a, "nh0a"), (b, "nh1a")];
    let group: Vec<IpAddr> = (0..64u8)
        .flat_map(|i| [IpAddr::from([192, 0, 2, i * 4]), IpAddr::from([172, 16, 0, i * 4])])
        .collect();

    let (fib, reader) = FibWriter::new();
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.nh0a.forwarding=1"]);
    let mirror = ns
        .enter(|| {
            let sock = RtnlSocket::open().expect("rtnetlink").with_ifaces(vec![a, b]);
            Mirror::start(sock, fib)
        })
        .unwrap();
    // spine's bpf_fib_lookup on the mirrored FIB and interfaces, with the kernel's seed.
    let env = FibEnv::new(reader.clone(), Vec::new()).with_multipath_seed(SEED);

    // The first dump: single nexthops, a weighted group, a blackhole, IPv6.
    let st = reader.load();
    let r = st.lookup(table_id::MAIN, ip("192.0.2.1"), 0).expect("the group's route").route;
    let hops: Vec<_> = r.nexthops.iter().map(|h| (h.gateway, h.ifindex, h.weight)).collect();
    assert_eq!(hops, [(Some(ip("10.1.0.2")), a, 1), (Some(ip("10.2.0.2")), b, 3)]);
    let bh = st.lookup(table_id::MAIN, ip("203.0.113.1"), 0).expect("the blackhole").route;
    assert_eq!((bh.kind, bh.nexthops.len()), (RouteType::Blackhole, 0));
    assert_eq!(kernel_get(&ns, ip("203.0.113.1")), None, "the kernel forwards nothing there");
    for d in ["198.51.100.7", "2001:db8:99::1", "100.64.0.1", "100.65.0.1"] {
        assert_eq!(fib_get(&st, ip(d), &names), kernel_get(&ns, ip(d)), "{d}");
    }
    assert_eq!(
        fib_get(&st, ip("100.64.0.1"), &names),
        Some((Some(ip("2001:db8:1::7")), "nh0a".into()))
    );
    assert_eq!(
        st.lookup(table_id::MAIN, ip("100.66.0.1"), 0).map(|r| r.route.nexthops.len()),
        Some(2),
        "a multipath route with an IPv6 gateway"
    );
    assert_eq!(
        fib_get(&st, ip("2001:db8:99::1"), &names),
        Some((Some(ip("2001:db8:1::2")), "nh0a".into()))
    );
    drop(st);
    let chosen: std::collections::HashSet<_> =
        group.iter().filter_map(|&d| kernel_get(&ns, d)).map(|h| h.1).collect();
    assert_eq!(chosen.len(), 2, "the kernel spreads the group over both next hops");
    same_as_kernel(&ns, &env, &names, &group);
    let rfc5549: Vec<IpAddr> = (0..32u8)
        .flat_map(|i| [[100, 64, i, 1], [100, 65, i, 1], [100, 66, i, 9]])
        .map(IpAddr::from)
        .collect();
    same_as_kernel(&ns, &env, &names, &rfc5549);

    // A plain route in the place of one through nexthop 1 no longer follows it.
    ns.ip("route replace 198.51.101.0/24 via 10.1.0.9 dev nh0a");
    eventually(&reader, "a plain route replacing one through a nexthop", |s| {
        fib_get(s, ip("198.51.101.7"), &names) == Some((Some(ip("10.1.0.9")), "nh0a".into()))
    });

    // A route added through the group.
    ns.ip("route add 172.16.0.0/12 nhid 10");
    eventually(&reader, "a route through the group", |s| {
        s.lookup(table_id::MAIN, ip("172.16.0.1"), 0).is_some_and(|r| r.route.nexthops.len() == 2)
    });
    same_as_kernel(&ns, &env, &names, &group);

    // Replacing a member changes every route through it and through its group.
    ns.ip("nexthop replace id 1 via 10.1.0.3 dev nh0a");
    eventually(&reader, "the replaced nexthop", |s| {
        fib_get(s, ip("198.51.100.7"), &names) == Some((Some(ip("10.1.0.3")), "nh0a".into()))
            && s.lookup(table_id::MAIN, ip("172.16.0.1"), 0)
                .is_some_and(|r| r.route.nexthops[0].gateway == Some(ip("10.1.0.3")))
    });
    same_as_kernel(&ns, &env, &names, &group);
    let plain = ip("198.51.101.7");
    let kept = fib_get(&reader.load(), plain, &names);
    assert_eq!(kept, Some((Some(ip("10.1.0.9")), "nh0a".into())), "the plain route stays");

    // Replacing the group.
    ns.ip("nexthop replace id 10 group 2");
    eventually(&reader, "the replaced group", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.1"), 0).is_some_and(|r| r.route.nexthops.len() == 1)
    });
    same_as_kernel(&ns, &env, &names, &group);
    ns.ip("nexthop replace id 10 group 1/2");
    eventually(&reader, "the group again", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.1"), 0).is_some_and(|r| r.route.nexthops.len() == 2)
    });
    same_as_kernel(&ns, &env, &names, &group);

    // A device going down takes its nexthops with it (the kernel says nothing of
    // them); the group keeps its other member.
    ns.ip("link set nh1a down");
    let shown = ns.ip("nexthop show");
    assert!(!shown.contains("id 2 "), "the kernel flushed nexthop 2: {shown}");
    eventually(&reader, "the group without the device that went down", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.1"), 0).is_some_and(|r| r.route.nexthops.len() == 1)
    });
    same_as_kernel(&ns, &env, &names, &group);

    // Deleting the group's last member deletes the group and the routes through it.
    ns.ip("nexthop del id 1");
    eventually(&reader, "the routes of a deleted nexthop", |s| {
        ["192.0.2.1", "172.16.0.1", "198.51.100.7"]
            .iter()
            .all(|d| s.lookup(table_id::MAIN, ip(d), 0).is_none())
    });
    same_as_kernel(&ns, &env, &names, &group);
    let st = reader.load();
    assert_eq!(fib_get(&st, plain, &names), Some((Some(ip("10.1.0.9")), "nh0a".into())));
    assert_eq!(fib_get(&st, plain, &names), kernel_get(&ns, plain));
    drop(st);
    let left = ns.ip("route show");
    assert!(!left.contains("192.0.2.0") && !left.contains("198.51.100.0"), "{left}");

    ns.ip("nexthop del id 5");
    eventually(&reader, "the route through the deleted blackhole", |s| {
        s.lookup(table_id::MAIN, ip("203.0.113.1"), 0).is_none()
    });
    ns.ip("-6 route del 2001:db8:99::/48");
    eventually(&reader, "a deleted IPv6 route", |s| {
        s.lookup(table_id::MAIN, ip("2001:db8:99::1"), 0).is_none()
    });
    let nexthops = mirror.stats().nexthops.load(std::sync::atomic::Ordering::Relaxed);
    assert!(nexthops >= 5, "{nexthops} nexthop messages");
    mirror.stop().expect("the mirror ran without error");
}

/// The kernel's buckets of resilient group `id`: member ids in bucket order.
fn kernel_buckets(ns: &NetNs, id: u32) -> Vec<u64> {
    let out = ns.ip(&format!("-j nexthop bucket show id {id}"));
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j nexthop bucket");
    let mut b: Vec<(u64, u64)> = v
        .as_array()
        .expect("an array")
        .iter()
        .map(|e| {
            let b = &e["bucket"];
            (b["index"].as_u64().expect("index"), b["nhid"].as_u64().expect("nhid"))
        })
        .collect();
    b.sort();
    b.into_iter().map(|(_, m)| m).collect()
}

#[test]
fn resilient_groups_choose_by_the_kernels_buckets() {
    let Some(ns) = NetNs::new() else { return };
    let seeded = Command::new("ip")
        .args(["netns", "exec", ns.name(), "sysctl", "-qw"])
        .arg(format!("net.ipv4.fib_multipath_hash_seed={SEED}"))
        .status()
        .is_ok_and(|s| s.success());
    if !seeded {
        eprintln!("SKIP: this kernel has no net.ipv4.fib_multipath_hash_seed");
        return;
    }
    for (i, dev) in ["rs0a", "rs1a", "rs2a"].into_iter().enumerate() {
        ns.veth(dev, &dev.replace('a', "b"));
        ns.ip(&format!("addr add 10.{}.0.1/24 dev {dev}", i + 1));
        ns.ip(&format!("nexthop add id {} via 10.{}.0.2 dev {dev}", i + 1, i + 1));
    }
    // idle_timer 0: the kernel moves buckets as soon as the group changes.
    ns.ip("nexthop add id 20 group 1/2 type resilient buckets 32 idle_timer 0");
    ns.ip("route add 192.0.2.0/24 nhid 20");
    ns.ip("route add 172.16.0.0/12 nhid 20");
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.rs0a.forwarding=1"]);
    let idx = ns.enter(|| [ifindex("rs0a"), ifindex("rs1a"), ifindex("rs2a")]);
    let names = [(idx[0], "rs0a"), (idx[1], "rs1a"), (idx[2], "rs2a")];
    let dsts: Vec<IpAddr> = (0..64u8)
        .flat_map(|i| [IpAddr::from([192, 0, 2, i * 4]), IpAddr::from([172, 16, i, 1])])
        .collect();

    let (fib, reader) = FibWriter::new();
    let mirror = ns
        .enter(|| {
            let sock = RtnlSocket::open().expect("rtnetlink").with_ifaces(idx.to_vec());
            Mirror::start(sock, fib)
        })
        .unwrap();
    let env = FibEnv::new(reader.clone(), Vec::new()).with_multipath_seed(SEED);

    // After each change: the kernel's buckets settle, the FIB holds them, and every
    // flow takes the kernel's member in the FIB and through bpf_fib_lookup.
    let check = |what: &str, members: usize| {
        let buckets = kernel_buckets(&ns, 20);
        assert_eq!(buckets.len(), 32, "{what}");
        let used: std::collections::HashSet<_> = buckets.iter().collect();
        assert_eq!(used.len(), members, "{what}: the kernel spreads the buckets {buckets:?}");
        let kernel: Vec<_> = dsts.iter().map(|&d| kernel_get(&ns, d)).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        loop {
            let st = reader.load();
            if dsts.iter().zip(&kernel).all(|(&d, k)| fib_get(&st, d, &names) == *k) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: the FIB never chose as the kernel"
            );
            drop(st);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        for (&d, k) in dsts.iter().zip(&kernel) {
            assert_eq!(helper_get(&env, d, &names), *k, "{what}: bpf_fib_lookup for {d}");
        }
        let chosen: std::collections::HashSet<_> = kernel.iter().flatten().map(|k| &k.1).collect();
        assert_eq!(chosen.len(), members, "{what}: the flows reach every member");
    };
    check("the first dump", 2);
    ns.ip("nexthop replace id 20 group 1/2/3 type resilient buckets 32 idle_timer 0");
    check("a member added", 3);
    ns.ip("nexthop replace id 20 group 1,3/3 type resilient buckets 32 idle_timer 0");
    check("a member removed, weights changed", 2);
    ns.ip("nexthop del id 1");
    check("a member deleted", 1);
    let st = reader.load();
    assert!(st.res_buckets(20).is_some());
    drop(st);
    ns.ip("nexthop del id 20");
    eventually(&reader, "the deleted group's buckets", |s| {
        s.res_buckets(20).is_none() && s.lookup(table_id::MAIN, ip("192.0.2.1"), 0).is_none()
    });
    mirror.stop().expect("the mirror ran without error");
}
