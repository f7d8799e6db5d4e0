//! The forwarding records (`spine_fib::fwd`) say what the general resolution says —
//! route entry, next hop, the gateway's neighbour entry, the output interface — after
//! every change of a long random sequence of route, neighbour and interface
//! operations, in the writer's copy and in the published one, for both families.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use spine_fib::{
    FibOp, FibState, FibWriter, Iface, Neigh, NextHop, NudState, Route, RouteSelector, RouteType,
};

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

const PREFIXES: [&str; 12] = [
    "2001:db8::/32",
    "2001:db8:1::/48",
    "2001:db8:1:2::/64",
    "::/0",
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.2.0.0/16",
    "192.0.2.0/24",
    "198.51.100.0/24",
    "203.0.113.128/25",
    "0.0.0.0/0",
];

fn gateway(rng: &mut Rng, v6: bool) -> IpAddr {
    let i = 1 + rng.below(4) as u8;
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, u16::from(i)))
    } else {
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, i))
    }
}

/// A next hop for a route of family `v6`: directly connected, through a gateway of
/// the other family now and then, else through one of four gateways.
fn nexthop(rng: &mut Rng, v6: bool) -> NextHop {
    let ifindex = 2 + rng.below(3) as u32;
    let mut nh = match rng.below(6) {
        0 => NextHop::dev(ifindex),
        1 => NextHop::via(gateway(rng, !v6), ifindex),
        _ => NextHop::via(gateway(rng, v6), ifindex),
    };
    nh.encap = rng.below(10) == 0;
    nh
}

fn op(rng: &mut Rng) -> FibOp {
    let prefix: spine_fib::IpPrefix =
        PREFIXES[rng.below(PREFIXES.len() as u64) as usize].parse().unwrap();
    let v6 = matches!(prefix, spine_fib::IpPrefix::V6(_));
    match rng.below(8) {
        0..=2 => {
            let mut r = Route::unicast(prefix, vec![nexthop(rng, v6)]);
            r.metric = rng.below(2) as u32 * 100;
            match rng.below(8) {
                0 => r.nexthops.push(nexthop(rng, v6)),
                1 => r.mtu = 1400,
                2 => (r.kind, r.nexthops) = (RouteType::Blackhole, vec![]),
                _ => {}
            }
            FibOp::Replace(r)
        }
        3 => FibOp::Delete(RouteSelector {
            table: spine_fib::table_id::MAIN,
            prefix,
            metric: None,
            kind: None,
        }),
        4 | 5 => {
            let state =
                [NudState::REACHABLE, NudState::STALE, NudState::FAILED, NudState::INCOMPLETE]
                    [rng.below(4) as usize];
            let neigh = Neigh { mac: [2, 0, 0, 0, rng.below(256) as u8, 1], state };
            FibOp::SetNeigh { ifindex: 2 + rng.below(3) as u32, ip: gateway(rng, v6), neigh }
        }
        6 if rng.below(2) == 0 => {
            FibOp::DelNeigh { ifindex: 2 + rng.below(3) as u32, ip: gateway(rng, v6) }
        }
        6 => FibOp::DelIface(2 + rng.below(3) as u32),
        _ => FibOp::SetIface(Iface {
            ifindex: 2 + rng.below(3) as u32,
            mtu: 1000 + rng.below(1000) as u32,
            mac: [2, 0, 0, 1, 0, rng.below(256) as u8],
            forward_v4: true,
            forward_v6: true,
            addrs: vec![],
        }),
    }
}

/// Every prefix's route has a record exactly when it qualifies, and the record says
/// what the route, the neighbour table and the interfaces say.
fn check(st: &FibState, step: usize) -> [usize; 2] {
    let mut with_record = [0; 2];
    for p in PREFIXES {
        let (idx, v6) = match p.parse().unwrap() {
            spine_fib::IpPrefix::V4(q) => {
                (st.lookup_v4_merged_index(Ipv4Addr::from(q.addr())), false)
            }
            spine_fib::IpPrefix::V6(q) => {
                (st.lookup_v6_index(spine_fib::table_id::MAIN, q.addr()), true)
            }
        };
        let Some(idx) = idx else { continue };
        let route = st.route(idx).unwrap();
        let plain = route.kind == RouteType::Unicast
            && route.mtu == 0
            && route.nexthops.len() == 1
            && !route.nexthops[0].encap
            && route.nexthops[0].gateway.is_none_or(|g| g.is_ipv6() == v6);
        let fwd = if v6 {
            st.fwd_v6(idx).map(|(f, m)| {
                (f.ifindex, f.gateway().map(|g| g.to_vec()), f.gateway_mac(), f.iface(), m)
            })
        } else {
            st.fwd_v4(idx).map(|(f, m)| {
                (f.ifindex, f.gateway().map(|g| g.to_vec()), f.gateway_mac(), f.iface(), m)
            })
        };
        assert!(if v6 { st.fwd_v4(idx).is_none() } else { st.fwd_v6(idx).is_none() });
        assert_eq!(fwd.is_some(), plain, "step {step}, {p}: {route:?}");
        let Some((ifindex, gateway, gateway_mac, iface, metric)) = fwd else { continue };
        with_record[usize::from(v6)] += 1;
        let nh = &route.nexthops[0];
        assert_eq!((ifindex, metric), (nh.ifindex, route.metric), "step {step}, {p}");
        let gw = match nh.gateway {
            Some(IpAddr::V4(g)) => Some(g.octets().to_vec()),
            Some(IpAddr::V6(g)) => Some(g.octets().to_vec()),
            None => None,
        };
        assert_eq!(gateway, gw, "step {step}, {p}");
        let mac = nh
            .gateway
            .and_then(|g| st.neigh(nh.ifindex, g))
            .filter(|n| n.state.usable())
            .map(|n| n.mac);
        assert_eq!(gateway_mac, mac, "step {step}, {p}: neighbour");
        let dev = st.iface(nh.ifindex).map(|i| (i.mtu, i.mac));
        assert_eq!(iface, dev, "step {step}, {p}: interface");
    }
    with_record
}

#[test]
fn records_follow_routes_neighbours_and_interfaces() {
    let (mut w, r) = FibWriter::new();
    let mut rng = Rng(0x5eed_f00d);
    let mut seen = [0; 2];
    for step in 0..3_000 {
        for _ in 0..=rng.below(3) {
            // Refused operations (deleting what is not there) change nothing.
            let _ = w.apply(op(&mut rng));
        }
        for (i, n) in check(w.view(), step).into_iter().enumerate() {
            seen[i] += n;
        }
        w.publish();
        for (i, n) in check(&r.load(), step).into_iter().enumerate() {
            seen[i] += n;
        }
    }
    assert!(seen[0] > 5_000 && seen[1] > 5_000, "few prefixes had a record: {seen:?}");
    let (records, _) = w.view().fwd_stats();
    assert!(records <= 2 * 3 * 5, "records are shared by (interface, gateway): {records}");
}

#[test]
fn routes_over_four_gateways_share_four_records() {
    let (mut w, _r) = FibWriter::new();
    for i in 0..20_000u32 {
        let p = spine_fib::Prefix4::new(0x0a00_0000 | i << 8, 24).unwrap();
        let gw = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1 + (i % 4) as u8));
        w.add(Route::unicast(spine_fib::IpPrefix::V4(p), vec![NextHop::via(gw, 2)])).unwrap();
    }
    let (records, bytes) = w.view().fwd_stats();
    assert_eq!(records, 4);
    assert!(bytes < 20_000 * 16, "{bytes} bytes for 20,000 routes");
    // A neighbour resolved after the routes is seen by every route through it.
    let neigh = Neigh { mac: [2, 0, 0, 0, 0, 7], state: NudState::REACHABLE };
    let ip = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2));
    w.apply(FibOp::SetNeigh { ifindex: 2, ip, neigh }).unwrap();
    let st = w.view();
    let idx = st.lookup_v4_merged_index(Ipv4Addr::new(10, 0, 1, 9)).unwrap();
    assert_eq!(st.fwd_v4(idx).unwrap().0.gateway_mac(), Some([2, 0, 0, 0, 0, 7]));
    let idx = st.lookup_v4_merged_index(Ipv4Addr::new(10, 0, 2, 9)).unwrap();
    assert_eq!(st.fwd_v4(idx).unwrap().0.gateway_mac(), None, "192.0.2.3 has no entry");
}
