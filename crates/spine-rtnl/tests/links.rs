//! Interfaces and addresses that change while the mirror runs: an interface created
//! after the start, an address added to it (its local and connected routes), the
//! interface going down (the kernel drops the routes through it without a message for
//! each IPv4 one), up again, and deleted. After each change the FIB holds exactly what
//! the kernel's tables hold for the addresses concerned.

mod common;

use common::{eventually, ip};

use spine_fib::{table_id, FibReader, FibState, FibWriter, RouteType};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_testnet::netns::{ifindex, NetNs};

/// What the kernel's table `table` holds for exactly `prefix`: the route type and
/// device, as `ip route show` prints them (`None`: no route).
fn kernel_route(ns: &NetNs, table: &str, prefix: &str) -> Option<(RouteType, String)> {
    let out = ns.ip(&format!("route show table {table} exact {prefix}"));
    let line = out.lines().next()?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let kind = RouteType::from_name(words[0]).unwrap_or(RouteType::Unicast);
    let dev = words.iter().position(|w| *w == "dev").map(|i| words[i + 1].to_string())?;
    Some((kind, dev))
}

/// The FIB's route for exactly `prefix` in `table`, in the same form.
fn fib_route(
    st: &FibState,
    table: u32,
    prefix: &str,
    names: &[(u32, &str)],
) -> Option<(RouteType, String)> {
    let r = st.routes_for(table, prefix.parse().unwrap()).next()?;
    let dev = names.iter().find(|n| Some(n.0) == r.nexthops.first().map(|h| h.ifindex))?.1;
    Some((r.kind, dev.to_string()))
}

fn same_as_kernel(ns: &NetNs, reader: &FibReader, names: &[(u32, &str)]) {
    let st = reader.load();
    for (table, id, prefix) in [
        ("local", table_id::LOCAL, "10.5.0.1/32"),
        ("main", table_id::MAIN, "10.5.0.0/24"),
        ("main", table_id::MAIN, "192.0.2.0/24"),
    ] {
        assert_eq!(
            fib_route(&st, id, prefix, names),
            kernel_route(ns, table, prefix),
            "table {table}, {prefix}"
        );
    }
}

#[test]
fn interfaces_and_addresses_that_appear_later_are_followed() {
    let Some(ns) = NetNs::new() else { return };
    let (fib, reader) = FibWriter::new();
    let mirror = ns.enter(|| Mirror::start(RtnlSocket::open().expect("rtnetlink"), fib)).unwrap();

    // An interface that did not exist at the start, and an address on it.
    ns.veth("ln0a", "ln0b");
    let a = ns.enter(|| ifindex("ln0a"));
    let names = [(a, "ln0a")];
    ns.ip("addr add 10.5.0.1/24 dev ln0a");
    eventually(&reader, "the new address's local route", |s| {
        s.lookup(table_id::LOCAL, ip("10.5.0.1"), 0)
            .is_some_and(|r| r.route.kind == RouteType::Local && r.nexthop.unwrap().ifindex == a)
    });
    eventually(&reader, "its connected route", |s| {
        s.lookup(table_id::MAIN, ip("10.5.0.9"), 0)
            .is_some_and(|r| r.nexthop.is_some_and(|h| h.ifindex == a && h.gateway.is_none()))
    });
    ns.ip("route add 192.0.2.0/24 via 10.5.0.2");
    eventually(&reader, "a route through it", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.1"), 0).is_some()
    });
    same_as_kernel(&ns, &reader, &names);

    // Down: the kernel drops the routes through it, without a message for each.
    ns.ip("link set ln0a down");
    eventually(&reader, "no route through a device that is down", |s| {
        s.lookup(table_id::MAIN, ip("192.0.2.1"), 0).is_none()
            && s.lookup(table_id::MAIN, ip("10.5.0.9"), 0).is_none()
    });
    same_as_kernel(&ns, &reader, &names);

    // Up: the kernel puts back the routes of its addresses (not the one through it).
    ns.ip("link set ln0a up");
    eventually(&reader, "the connected route back", |s| {
        s.lookup(table_id::MAIN, ip("10.5.0.9"), 0).is_some()
    });
    same_as_kernel(&ns, &reader, &names);

    // An address removed takes its routes with it.
    ns.ip("addr del 10.5.0.1/24 dev ln0a");
    eventually(&reader, "the routes of a removed address", |s| {
        s.lookup(table_id::MAIN, ip("10.5.0.9"), 0).is_none()
            && s.routes_for(table_id::LOCAL, "10.5.0.1/32".parse().unwrap()).next().is_none()
    });
    same_as_kernel(&ns, &reader, &names);

    // Deleted with its address back on it: nothing of it stays.
    ns.ip("addr add 10.5.0.1/24 dev ln0a");
    eventually(&reader, "the address again", |s| {
        s.lookup(table_id::MAIN, ip("10.5.0.9"), 0).is_some()
    });
    ns.ip("link del ln0a");
    eventually(&reader, "nothing of a deleted interface", |s| {
        s.lookup(table_id::MAIN, ip("10.5.0.9"), 0).is_none()
            && s.routes_for(table_id::LOCAL, "10.5.0.1/32".parse().unwrap()).next().is_none()
    });
    same_as_kernel(&ns, &reader, &names);
    let resyncs = mirror.stats().resyncs.load(std::sync::atomic::Ordering::Relaxed);
    assert!(resyncs >= 2, "a down and a delete each made the mirror dump again: {resyncs}");
    mirror.stop().expect("the mirror ran without error");
}

/// The interfaces the FIB describes ([`RtnlSocket::with_ifaces`]) follow the kernel's:
/// MTU, MAC, addresses (primary first), forwarding; a port with a twin is described by
/// the twin; a deleted interface leaves the FIB.
#[test]
fn the_fibs_interfaces_follow_the_kernels() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("if0a", "if0b");
    ns.veth("if1a", "if1b");
    ns.ip("addr add 10.6.0.1/24 dev if0a");
    ns.ip("link set if1a address 02:00:00:00:01:01");
    let (port, twin_port, twin) = ns.enter(|| (ifindex("if0a"), ifindex("if0b"), ifindex("if1a")));
    let (fib, reader) = FibWriter::new();
    let mirror = ns
        .enter(|| {
            let sock = RtnlSocket::open()
                .expect("rtnetlink")
                .with_aliases(vec![(twin, twin_port)])
                .with_ifaces(vec![port, twin_port]);
            Mirror::start(sock, fib)
        })
        .unwrap();
    let st = reader.load();
    let i = st.iface(port).expect("the port");
    assert_eq!((i.mtu, i.addrs.clone(), i.forward_v4), (1500, vec![(ip("10.6.0.1"), 24)], false));
    let t = st.iface(twin_port).expect("the port with a twin");
    assert_eq!(t.mac, [2, 0, 0, 0, 1, 1], "described by its twin");
    assert!(st.iface(twin).is_none(), "only the ports asked for");
    drop(st);

    ns.ip("link set if0a mtu 1400");
    eventually(&reader, "the new MTU", |s| s.iface(port).is_some_and(|i| i.mtu == 1400));
    ns.ip("link set if0a address 02:00:00:00:00:aa");
    eventually(&reader, "the new MAC", |s| {
        s.iface(port).is_some_and(|i| i.mac == [2, 0, 0, 0, 0, 0xaa])
    });
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.if0a.forwarding=1"]);
    ns.ip("addr add 10.6.0.2/24 dev if0a");
    ns.ip("addr add 10.7.0.1/24 dev if0a");
    eventually(&reader, "the added addresses, primaries first", |s| {
        s.iface(port).is_some_and(|i| {
            i.addrs == [(ip("10.6.0.1"), 24), (ip("10.7.0.1"), 24), (ip("10.6.0.2"), 24)]
                && i.forward_v4
        })
    });
    ns.ip("addr del 10.7.0.1/24 dev if0a");
    eventually(&reader, "a removed address", |s| s.iface(port).is_some_and(|i| i.addrs.len() == 2));
    // A forwarding switch alone (no link or address message): the netconf groups.
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.if0a.forwarding=0"]);
    eventually(&reader, "IPv4 forwarding off", |s| s.iface(port).is_some_and(|i| !i.forward_v4));
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.if0a.forwarding=1"]);
    eventually(&reader, "IPv6 forwarding on", |s| s.iface(port).is_some_and(|i| i.forward_v6));
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.all.forwarding=1"]);
    eventually(&reader, "IPv4 forwarding on for all", |s| {
        s.iface(port).is_some_and(|i| i.forward_v4)
    });
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.if1a.forwarding=0"]);
    eventually(&reader, "the twin's switch on its port", |s| {
        s.iface(twin_port).is_some_and(|i| !i.forward_v4)
    });
    ns.ip("link set if1a mtu 1300");
    eventually(&reader, "the twin's new MTU on its port", |s| {
        s.iface(twin_port).is_some_and(|i| i.mtu == 1300)
    });
    ns.ip("link del if0a");
    eventually(&reader, "a deleted interface", |s| s.iface(port).is_none());
    mirror.stop().expect("the mirror ran without error");
}
