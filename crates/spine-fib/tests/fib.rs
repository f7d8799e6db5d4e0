//! Route semantics of the FIB: metrics, add/replace/delete as `ip route`, route types,
//! tables and the default rules, ECMP as the kernel selects, neighbours, publication.

use std::net::IpAddr;

use spine_fib::{
    table_id, FibError, FibOp, FibWriter, IpPrefix, Neigh, NextHop, NudState, Route, RouteSelector,
    RouteType,
};

fn p(s: &str) -> IpPrefix {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn via(gw: &str, dev: u32) -> NextHop {
    NextHop::via(ip(gw), dev)
}

fn route(prefix: &str, metric: u32, nh: NextHop) -> Route {
    Route { metric, ..Route::unicast(p(prefix), vec![nh]) }
}

fn sel(prefix: &str, metric: Option<u32>, kind: Option<RouteType>) -> RouteSelector {
    RouteSelector { table: table_id::MAIN, prefix: p(prefix), metric, kind }
}

#[test]
fn the_lowest_metric_wins_and_longer_prefixes_win_over_it() {
    let (mut w, r) = FibWriter::new();
    w.add(route("10.0.0.0/8", 100, via("192.0.2.1", 1))).unwrap();
    w.add(route("10.0.0.0/8", 50, via("192.0.2.2", 2))).unwrap();
    w.add(route("10.1.0.0/16", 500, via("192.0.2.3", 3))).unwrap();
    w.publish();
    let g = r.load();
    let hit = |a: &str| g.lookup(table_id::MAIN, ip(a), 0).map(|x| x.nexthop.unwrap().ifindex);
    assert_eq!(hit("10.2.0.1"), Some(2));
    assert_eq!(hit("10.1.0.1"), Some(3));
    assert_eq!(hit("11.0.0.1"), None);
    drop(g);
    w.delete(sel("10.0.0.0/8", None, None)).unwrap();
    w.publish();
    let g = r.load();
    assert_eq!(g.lookup(table_id::MAIN, ip("10.2.0.1"), 0).unwrap().route.metric, 100);
}

#[test]
fn add_replace_and_delete_follow_ip_route() {
    let (mut w, _r) = FibWriter::new();
    w.add(route("10.0.0.0/8", 10, via("192.0.2.1", 1))).unwrap();
    let e = w.add(route("10.0.0.0/8", 10, via("192.0.2.9", 9))).unwrap_err();
    assert!(matches!(e, FibError::Exists { metric: 10, .. }));
    assert_eq!(e.errno(), 17);
    w.replace(route("10.0.0.0/8", 10, via("192.0.2.9", 9))).unwrap();
    w.replace(route("10.0.0.0/8", 20, via("192.0.2.8", 8))).unwrap();
    let v = w.view();
    let all = v.routes(table_id::MAIN);
    assert_eq!(all.len(), 2, "replace of a new metric adds");
    assert_eq!(all[0].nexthops[0].ifindex, 9);
    // Delete by type and metric: a mismatch finds nothing.
    let e = w.delete(sel("10.0.0.0/8", Some(10), Some(RouteType::Blackhole))).unwrap_err();
    assert_eq!(e.errno(), 3);
    w.delete(sel("10.0.0.0/8", Some(20), Some(RouteType::Unicast))).unwrap();
    assert_eq!(w.view().routes(table_id::MAIN).len(), 1);
    assert!(w.delete(sel("10.0.0.0/8", Some(20), None)).is_err());
    assert!(w.delete(sel("192.168.0.0/16", None, None)).is_err());
}

#[test]
fn route_types_and_their_next_hops() {
    let (mut w, r) = FibWriter::new();
    let bh = Route {
        kind: RouteType::Blackhole,
        nexthops: vec![],
        ..route("10.9.0.0/16", 0, NextHop::dev(1))
    };
    w.add(bh.clone()).unwrap();
    let mut bad = bh.clone();
    bad.nexthops = vec![NextHop::dev(1)];
    assert!(matches!(w.add(bad), Err(FibError::Invalid { .. })));
    let none = Route { nexthops: vec![], ..route("10.8.0.0/16", 0, NextHop::dev(1)) };
    assert!(matches!(w.add(none), Err(FibError::Invalid { .. })));
    let zero = route("10.7.0.0/16", 0, NextHop { weight: 0, ..NextHop::dev(1) });
    assert!(matches!(w.add(zero), Err(FibError::Invalid { .. })));
    assert_eq!(
        w.add(Route { table: 0, ..route("10.6.0.0/16", 0, NextHop::dev(1)) }),
        Err(FibError::TableUnspec)
    );
    for (kind, prefix) in
        [(RouteType::Unreachable, "10.10.0.0/16"), (RouteType::Prohibit, "10.11.0.0/16")]
    {
        w.add(Route { kind, nexthops: vec![], ..route(prefix, 0, NextHop::dev(1)) }).unwrap();
    }
    w.add(Route { mtu: 1400, ..route("10.12.0.0/16", 0, NextHop::dev(4)) }).unwrap();
    w.publish();
    let g = r.load();
    let x = g.lookup(table_id::MAIN, ip("10.9.1.1"), 0).unwrap();
    assert_eq!((x.route.kind, x.nexthop), (RouteType::Blackhole, None));
    assert_eq!(
        g.lookup(table_id::MAIN, ip("10.10.0.1"), 0).unwrap().route.kind,
        RouteType::Unreachable
    );
    assert_eq!(g.lookup(table_id::MAIN, ip("10.11.0.1"), 0).unwrap().route.kind.rtn(), 8);
    let c = g.lookup(table_id::MAIN, ip("10.12.0.1"), 0).unwrap();
    assert_eq!((c.route.mtu, c.nexthop.unwrap().gateway), (1400, None), "directly connected, MTU");
}

#[test]
fn tables_are_separate_and_the_default_rules_skip_throw() {
    let (mut w, r) = FibWriter::new();
    let local = Route {
        table: table_id::LOCAL,
        kind: RouteType::Local,
        ..route("192.0.2.1/32", 0, NextHop::dev(1))
    };
    w.add(local).unwrap();
    w.add(route("0.0.0.0/0", 0, via("192.0.2.254", 1))).unwrap();
    w.add(Route {
        kind: RouteType::Throw,
        nexthops: vec![],
        ..route("10.0.0.0/8", 0, NextHop::dev(1))
    })
    .unwrap();
    w.add(Route { table: table_id::DEFAULT, ..route("10.0.0.0/8", 0, via("192.0.2.100", 7)) })
        .unwrap();
    w.add(Route { table: 100, ..route("0.0.0.0/0", 0, via("198.51.100.1", 5)) }).unwrap();
    w.add(route("2001:db8::/32", 0, via("fe80::1", 2))).unwrap();
    w.publish();
    let g = r.load();
    let rule = |a: &str| g.lookup_default_rules(ip(a), 0).unwrap();
    assert_eq!(rule("192.0.2.1").route.kind, RouteType::Local);
    assert_eq!(rule("8.8.8.8").nexthop.unwrap().gateway, Some(ip("192.0.2.254")));
    assert_eq!(rule("10.1.1.1").nexthop.unwrap().ifindex, 7, "throw in main goes on to default");
    assert_eq!(g.lookup(table_id::MAIN, ip("10.1.1.1"), 0).unwrap().route.kind, RouteType::Throw);
    assert_eq!(g.lookup(100, ip("192.0.2.1"), 0).unwrap().nexthop.unwrap().ifindex, 5);
    assert!(g.lookup(42, ip("192.0.2.1"), 0).is_none());
    assert_eq!(rule("2001:db8::5").nexthop.unwrap().ifindex, 2);
    assert!(g.lookup_default_rules(ip("2001:db9::1"), 0).is_none());
    assert_eq!(g.table_ids().len(), 4);
    let mut out = [None; 3];
    g.lookup_v4_batch(table_id::MAIN, &[0x0808_0808, 0x0a00_0001, 0xc000_0201], &mut out);
    let kinds: Vec<_> = out.iter().map(|i| g.route(i.unwrap()).unwrap().kind).collect();
    assert_eq!(kinds, [RouteType::Unicast, RouteType::Throw, RouteType::Unicast]);
    drop(g);
    w.apply(FibOp::FlushTable(table_id::MAIN)).unwrap();
    w.publish();
    assert_eq!(r.load().lookup(table_id::MAIN, ip("8.8.8.8"), 0).map(|x| x.route.kind), None);
    assert_eq!(r.load().routes(table_id::MAIN).len(), 0);
}

#[test]
fn ecmp_follows_the_hash_and_the_weights() {
    let (mut w, r) = FibWriter::new();
    let hops = vec![
        NextHop { weight: 1, ..via("192.0.2.1", 1) },
        NextHop { weight: 3, ..via("192.0.2.2", 2) },
    ];
    w.add(Route::unicast(p("10.0.0.0/8"), hops)).unwrap();
    w.publish();
    let g = r.load();
    let pick =
        |h: u32| g.lookup(table_id::MAIN, ip("10.0.0.1"), h).unwrap().nexthop.unwrap().ifindex;
    assert_eq!(pick(0), 1);
    assert_eq!(pick((1 << 29) - 1), 1);
    assert_eq!(pick(1 << 29), 2);
    assert_eq!(pick(0x7fff_ffff), 2);
    let mut n = [0u32; 3];
    for i in 0..4096u32 {
        n[pick(i.wrapping_mul(0x9e37_79b9) >> 1) as usize] += 1;
    }
    assert!((900..1150).contains(&n[1]) && n[1] + n[2] == 4096, "{n:?}");
}

#[test]
fn neighbours_and_publication() {
    let (mut w, r) = FibWriter::new();
    let mac = [2, 0, 0, 0, 0, 1];
    w.apply(FibOp::SetNeigh {
        ifindex: 3,
        ip: ip("192.0.2.1"),
        neigh: Neigh { mac, state: NudState::STALE },
    })
    .unwrap();
    w.apply(FibOp::SetNeigh {
        ifindex: 3,
        ip: ip("192.0.2.2"),
        neigh: Neigh { mac, state: NudState::INCOMPLETE },
    })
    .unwrap();
    assert!(r.load().neigh(3, ip("192.0.2.1")).is_none(), "not published yet");
    w.publish();
    let g = r.load();
    let n = g.neigh(3, ip("192.0.2.1")).unwrap();
    assert!(n.state.usable() && n.mac == mac);
    assert!(!g.neigh(3, ip("192.0.2.2")).unwrap().state.usable());
    assert!(g.neigh(4, ip("192.0.2.1")).is_none(), "keyed by device too");
    drop(g);
    w.apply(FibOp::DelNeigh { ifindex: 3, ip: ip("192.0.2.1") }).unwrap();
    w.publish();
    assert!(r.load().neigh(3, ip("192.0.2.1")).is_none());
}

#[test]
fn interfaces_are_published_set_replaced_and_removed() {
    let (mut w, r) = FibWriter::new();
    let iface = |ifindex, mtu| spine_fib::Iface {
        ifindex,
        mtu,
        mac: [2, 0, 0, 0, 0, ifindex as u8],
        forward_v4: true,
        forward_v6: false,
        addrs: vec![(ip("192.0.2.1"), 24)],
    };
    w.apply(FibOp::SetIface(iface(7, 1500))).unwrap();
    w.apply(FibOp::SetIface(iface(3, 1500))).unwrap();
    assert!(r.load().iface(7).is_none(), "not published yet");
    w.publish();
    assert_eq!(r.load().ifaces().iter().map(|i| i.ifindex).collect::<Vec<_>>(), [3, 7]);
    w.apply(FibOp::SetIface(iface(7, 1400))).unwrap();
    w.apply(FibOp::DelIface(3)).unwrap();
    w.publish();
    let g = r.load();
    assert_eq!(g.iface(7).map(|i| i.mtu), Some(1400));
    assert!(g.iface(3).is_none());
}

/// The kernel unmerges IPv4's local table from main at the first custom rule and never
/// merges them again: with the default rules back, the rules are still walked (local
/// first), so a shorter local route shadows a longer main one.
#[test]
fn the_tables_stay_unmerged_once_custom_rules_were_set() {
    use spine_fib::{Flow, Rule, RuleResult};
    let (mut w, r) = FibWriter::new();
    w.add(Route { table: table_id::LOCAL, ..route("10.0.0.0/8", 0, via("192.0.2.1", 1)) }).unwrap();
    w.add(route("10.1.0.0/16", 0, via("192.0.2.2", 2))).unwrap();
    let defaults = vec![
        Rule::lookup(0, table_id::LOCAL),
        Rule::lookup(32766, table_id::MAIN),
        Rule::lookup(32767, table_id::DEFAULT),
    ];
    w.apply(FibOp::SetRules { v6: false, rules: defaults.clone() }).unwrap();
    w.publish();
    assert!(r.load().rules(false).is_default(), "never custom: merged");
    let merged = r.load().lookup_default_rules(ip("10.1.2.3"), 0).unwrap().route.prefix;
    assert_eq!(merged, p("10.1.0.0/16"), "the merged tables: the longest prefix of either");

    let mut custom = defaults.clone();
    custom.push(Rule::lookup(100, 100));
    w.apply(FibOp::SetRules { v6: false, rules: custom }).unwrap();
    w.apply(FibOp::SetRules { v6: false, rules: defaults }).unwrap();
    w.publish();
    let st = r.load();
    assert!(!st.rules(false).is_default(), "custom once: walked for good");
    assert_eq!(st.rules(false).rules().len(), 3);
    let flow = Flow {
        iif: 1,
        oif: 0,
        mark: 0,
        dscp: 0,
        proto: 0,
        sport: 0,
        dport: 0,
        src: ip("0.0.0.0"),
        dst: ip("10.1.2.3"),
        has_saddr: true,
    };
    let RuleResult::Table(walked) = st.lookup_by_rules(&flow, 0) else { panic!("a route") };
    assert_eq!(walked.route.prefix, p("10.0.0.0/8"), "local first, as the kernel unmerged");
    assert!(st.rules(true).is_default(), "IPv6 has no merge to undo");
}
