//! The FIB follows the kernel's tables of a namespace this test creates: the first dump
//! brings every route type, table, ECMP group, MTU and neighbour; `ip route` and `ip
//! neigh` changes afterwards reach readers within a second.

mod common;

use common::{eventually, ip};

use spine_fib::{table_id, FibWriter, NudState, RouteType};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_testnet::netns::{ifindex, NetNs};

#[test]
fn the_fib_follows_ip_route_and_ip_neigh() {
    let Some(ns) = NetNs::new() else { return };
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"]);
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=0"]);
    ns.veth("rt0a", "rt0b");
    ns.veth("rt1a", "rt1b");
    ns.ip("addr add 10.1.0.1/24 dev rt0a");
    ns.ip("addr add 10.2.0.1/24 dev rt1a");
    ns.ip("-6 addr add 2001:db8:1::1/64 dev rt0a nodad");
    ns.ip("route add 192.0.2.0/24 via 10.1.0.2 metric 10");
    ns.ip("route add 198.51.100.0/24 nexthop via 10.1.0.2 weight 1 nexthop via 10.2.0.2 weight 3");
    ns.ip("route add blackhole 203.0.113.0/24");
    ns.ip("route add unreachable 203.0.113.128/25 table 100");
    ns.ip("route add 10.9.0.0/16 via 10.1.0.2 mtu lock 1400");
    ns.ip("route add 10.8.0.0/16 via 10.1.0.2 mtu 1400 src 10.1.0.1");
    ns.ip("-6 route add 2001:db8:99::/48 via 2001:db8:1::2");
    ns.ip("neigh add 10.1.0.2 lladdr 02:00:00:00:00:02 dev rt0a nud permanent");

    let (ma, mc) = ns.enter(|| (ifindex("rt0a"), ifindex("rt1a")));
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.rt0a.forwarding=1"]);
    ns.ip("link set rt1a mtu 1400");
    let links = ns.enter(|| spine_rtnl::links().expect("links"));
    let l = links.iter().find(|l| l.name == "rt0a").expect("rt0a listed");
    assert_eq!((l.ifindex, l.mtu, l.forward_v4, l.forward_v6), (ma, 1500, true, false));
    assert_ne!(l.mac, [0; 6]);
    assert!(
        l.addrs.contains(&(ip("10.1.0.1"), 24)) && l.addrs.contains(&(ip("2001:db8:1::1"), 64))
    );
    let l = links.iter().find(|l| l.name == "rt1a").expect("rt1a listed");
    assert_eq!(
        (l.ifindex, l.mtu, l.forward_v4, l.addrs[0]),
        (mc, 1400, false, (ip("10.2.0.1"), 24))
    );
    let (fib, reader) = FibWriter::new();
    let mirror = ns.enter(|| Mirror::start(RtnlSocket::open().expect("rtnetlink"), fib)).unwrap();

    // The first dump is published before start returns.
    let st = reader.load();
    let r = st.lookup(table_id::MAIN, ip("192.0.2.7"), 0).expect("via route");
    assert_eq!((r.route.kind, r.route.metric), (RouteType::Unicast, 10));
    let nh = r.nexthop.unwrap();
    assert_eq!((nh.gateway, nh.ifindex), (Some(ip("10.1.0.2")), ma));
    let ecmp = st.lookup(table_id::MAIN, ip("198.51.100.1"), 0).unwrap().route;
    let hops: Vec<_> = ecmp.nexthops.iter().map(|h| (h.gateway, h.ifindex, h.weight)).collect();
    assert_eq!(hops, vec![(Some(ip("10.1.0.2")), ma, 1), (Some(ip("10.2.0.2")), mc, 3)]);
    let bh = st.lookup(table_id::MAIN, ip("203.0.113.200"), 0).unwrap().route;
    assert_eq!(bh.kind, RouteType::Blackhole, "table 100 is not main");
    let un = st.lookup(100, ip("203.0.113.200"), 0).unwrap().route;
    assert_eq!(un.kind, RouteType::Unreachable);
    assert_eq!(st.lookup(table_id::MAIN, ip("10.9.1.1"), 0).unwrap().route.mtu, 1400);
    // An MTU that is not locked does not limit forwarding, so it is not kept.
    let unlocked = st.lookup(table_id::MAIN, ip("10.8.1.1"), 0).unwrap().route;
    assert_eq!((unlocked.mtu, unlocked.prefsrc), (0, Some(ip("10.1.0.1"))));
    let connected = st.lookup(table_id::MAIN, ip("10.2.0.9"), 0).unwrap();
    assert_eq!(connected.nexthop.map(|n| (n.gateway, n.ifindex)), Some((None, mc)));
    let own = st.lookup(table_id::LOCAL, ip("10.1.0.1"), 0).unwrap().route;
    assert_eq!(own.kind, RouteType::Local, "the kernel's local table is mirrored too");
    let v6 = st.lookup(table_id::MAIN, ip("2001:db8:99::1"), 0).unwrap();
    assert_eq!(v6.nexthop.unwrap().gateway, Some(ip("2001:db8:1::2")));
    let n = st.neigh(ma, ip("10.1.0.2")).expect("neighbour");
    assert_eq!((n.mac, n.state), ([2, 0, 0, 0, 0, 2], NudState::PERMANENT));
    assert!(st.lookup(table_id::MAIN, ip("172.16.0.1"), 0).is_none(), "no default route");
    drop(st);

    // Live changes.
    ns.ip("route add 172.16.0.0/12 via 10.2.0.2");
    eventually(&reader, "an added route", |s| {
        s.lookup(table_id::MAIN, ip("172.16.0.1"), 0)
            .and_then(|r| r.nexthop.map(|n| n.gateway))
            .is_some_and(|g| g == Some(ip("10.2.0.2")))
    });
    ns.ip("route replace 10.9.0.0/16 via 10.2.0.2 mtu lock 1300");
    eventually(&reader, "a replaced route", |s| {
        s.lookup(table_id::MAIN, ip("10.9.1.1"), 0)
            .is_some_and(|r| r.route.mtu == 1300 && r.nexthop.unwrap().ifindex == mc)
    });
    ns.ip("route del 192.0.2.0/24 via 10.1.0.2 metric 10");
    eventually(&reader, "a deleted route", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.7"), 0).is_none()
    });
    ns.ip("neigh del 10.1.0.2 dev rt0a");
    eventually(&reader, "a deleted neighbour", |s| s.neigh(ma, ip("10.1.0.2")).is_none());
    ns.ip("neigh add 10.2.0.2 lladdr 02:00:00:00:00:03 dev rt1a nud reachable");
    eventually(&reader, "an added neighbour", |s| {
        s.neigh(mc, ip("10.2.0.2")).is_some_and(|n| n.mac == [2, 0, 0, 0, 0, 3])
    });
    ns.ip("link set rt1a down");
    eventually(&reader, "routes through a device that went down", |s| {
        s.lookup(table_id::MAIN, ip("172.16.0.1"), 0).is_none()
    });

    // The kernel removed the IPv4 routes through it without a notification for each: the
    // mirror dumped again. What goes through the other device stays; the ECMP group
    // keeps its live next hop only.
    let st = reader.load();
    assert!(st.lookup(table_id::MAIN, ip("10.1.0.9"), 0).is_some());
    assert!(st.lookup(table_id::MAIN, ip("203.0.113.1"), 0).is_some());
    let ecmp = st.lookup(table_id::MAIN, ip("198.51.100.1"), 0).unwrap().route;
    let hops: Vec<_> = ecmp.nexthops.iter().map(|h| h.ifindex).collect();
    assert_eq!(hops, vec![ma], "the dead next hop is not chosen");
    drop(st);
    let stats = mirror.stats();
    assert_eq!(stats.resyncs.load(std::sync::atomic::Ordering::Relaxed), 1, "one link went down");
    mirror.stop().expect("the mirror ran without error");
}

/// Addresses given with `add_address` are the kernel's (connected and local routes
/// appear), and with an alias the routes and neighbours of one interface are mirrored
/// as another's: a TAP twin's become its router port's.
#[test]
fn addresses_are_added_and_an_aliased_interface_is_mirrored_as_its_port() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("al0a", "al0b");
    ns.veth("al1a", "al1b");
    let (twin, port) = ns.enter(|| (ifindex("al0a"), ifindex("al1a")));
    ns.enter(|| {
        spine_rtnl::add_address(twin, ip("10.3.0.1"), 24).unwrap();
        spine_rtnl::enable_ipv6("al0a").unwrap();
        spine_rtnl::add_address(twin, ip("2001:db8:3::1"), 64).unwrap();
        // Adding it again replaces it.
        spine_rtnl::add_address(twin, ip("10.3.0.1"), 24).unwrap();
        let e = spine_rtnl::add_address(9999, ip("10.4.0.1"), 24).unwrap_err();
        assert!(e.to_string().contains("10.4.0.1/24 on interface 9999"), "{e}");
    });
    let shown = ns.ip("addr show dev al0a");
    assert!(shown.contains("10.3.0.1/24") && shown.contains("2001:db8:3::1/64"), "{shown}");
    let line = shown.lines().find(|l| l.contains("2001:db8:3::1")).unwrap();
    assert!(!line.contains("tentative"), "no duplicate address detection: {line}");
    ns.ip("neigh add 10.3.0.2 lladdr 02:00:00:00:03:02 dev al0a nud permanent");
    let (fib, reader) = FibWriter::new();
    let mirror = ns
        .enter(|| {
            let sock = RtnlSocket::open().expect("rtnetlink").with_aliases(vec![(twin, port)]);
            Mirror::start(sock, fib)
        })
        .unwrap();
    let st = reader.load();
    let connected = st.lookup(table_id::MAIN, ip("10.3.0.9"), 0).unwrap();
    assert_eq!(connected.nexthop.map(|n| n.ifindex), Some(port));
    let v6 = st.lookup(table_id::MAIN, ip("2001:db8:3::9"), 0).unwrap();
    assert_eq!(v6.nexthop.map(|n| n.ifindex), Some(port));
    assert!(st.neigh(port, ip("10.3.0.2")).is_some() && st.neigh(twin, ip("10.3.0.2")).is_none());
    drop(st);
    ns.ip("route add 192.0.2.0/24 via 10.3.0.2");
    eventually(&reader, "a route through the twin, as the port's", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.1"), 0)
            .and_then(|r| r.nexthop.map(|n| (n.gateway, n.ifindex)))
            .is_some_and(|h| h == (Some(ip("10.3.0.2")), port))
    });
    mirror.stop().expect("the mirror ran without error");
}
