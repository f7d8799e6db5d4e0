//! Kernel route and neighbour messages as FIB changes. Pure functions: a message in, the
//! change out, or `None` for what the FIB does not hold.

use std::net::IpAddr;

use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteMetric, RouteNextHopFlags,
    RouteVia,
};
use netlink_packet_route::AddressFamily;
use spine_fib::{
    FibOp, IpPrefix, Neigh, NextHop, NudState, Prefix4, Prefix6, Route, RouteSelector, RouteType,
};

fn route_ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// A next hop's gateway: `RTA_GATEWAY`, or `RTA_VIA` with an IPv6 address for an IPv4
/// route (RFC 5549, `ip route add … via inet6 ADDR`). `Err` for another `RTA_VIA`.
fn gateway(family: AddressFamily, a: &RouteAttribute) -> Result<Option<IpAddr>, ()> {
    match a {
        RouteAttribute::Gateway(g) => Ok(route_ip(g)),
        RouteAttribute::Via(RouteVia::Inet6(g)) if family == AddressFamily::Inet => {
            Ok(Some(IpAddr::V6(*g)))
        }
        RouteAttribute::Via(_) => Err(()),
        _ => Ok(None),
    }
}

fn prefix(family: AddressFamily, dst: Option<IpAddr>, len: u8) -> Option<IpPrefix> {
    let len = u32::from(len);
    match (family, dst) {
        (AddressFamily::Inet, None) => Prefix4::new(0, len).ok().map(IpPrefix::V4),
        (AddressFamily::Inet6, None) => Prefix6::new(0, len).ok().map(IpPrefix::V6),
        (AddressFamily::Inet, Some(IpAddr::V4(a))) => {
            Prefix4::truncating(u32::from(a), len).ok().map(IpPrefix::V4)
        }
        (AddressFamily::Inet6, Some(IpAddr::V6(a))) => {
            Prefix6::truncating(u128::from(a), len).ok().map(IpPrefix::V6)
        }
        _ => None,
    }
}

/// A route message read: the route (next hops empty for a route through a nexthop
/// object, or one that drops), the nexthop object it names, and its multipath next
/// hops.
struct Parsed<'a> {
    route: Route,
    nhid: Option<u32>,
    gateway: Option<IpAddr>,
    oif: Option<u32>,
    multipath: Option<&'a Vec<netlink_packet_route::route::RouteNextHop>>,
    /// A next hop the FIB cannot hold (an `RTA_VIA` other than an IPv6 gateway of an
    /// IPv4 route).
    via: bool,
    /// The (single) next hop carries an encapsulation (`RTA_ENCAP_TYPE`).
    encap: bool,
}

fn parse(m: &RouteMessage) -> Option<Parsed<'_>> {
    let h = &m.header;
    // Cached clones, source-specific (IPv6 subtrees) and TOS routes have no FIB twin.
    if h.flags.contains(RouteFlags::Cloned) || h.source_prefix_length != 0 || h.tos != 0 {
        return None;
    }
    let kind = RouteType::from_rtn(u8::from(h.kind))?;
    let mut table = u32::from(h.table);
    let (mut dst, mut gateway, mut oif, mut metric, mut mtu) = (None, None, None, 0, 0);
    let (mut locked, mut prefsrc, mut nhid, mut via) = (0u32, None, None, false);
    let mut encap = false;
    let mut multipath = None;
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = Some(route_ip(d)?),
            RouteAttribute::Gateway(_) | RouteAttribute::Via(_) => {
                match self::gateway(h.address_family, a) {
                    Ok(g) => gateway = g,
                    Err(()) => via = true,
                }
            }
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::PrefSource(a) => prefsrc = route_ip(a),
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::Metrics(ms) => {
                for x in ms {
                    match x {
                        RouteMetric::Mtu(v) => mtu = *v,
                        RouteMetric::Lock(v) => locked = *v,
                        _ => {}
                    }
                }
            }
            RouteAttribute::MultiPath(hops) => multipath = Some(hops),
            RouteAttribute::NhId(id) => nhid = Some(*id),
            RouteAttribute::EncapType(_) => encap = true,
            _ => {}
        }
    }
    let prefix = prefix(h.address_family, dst, h.destination_prefix_length)?;
    // Forwarding honours a route's MTU only when it is locked (`Route::mtu`).
    const RTAX_MTU: u32 = 2;
    let mtu = if locked & (1 << RTAX_MTU) != 0 { mtu } else { 0 };
    let route = Route { table, prefix, kind, metric, nexthops: Vec::new(), mtu, prefsrc, nhid: 0 };
    Some(Parsed { route, nhid, gateway, oif, multipath, via, encap })
}

/// `RTM_NEWROUTE` (`new`) or `RTM_DELROUTE` as a FIB change: a new route replaces the
/// one with the same table, prefix and metric (the kernel's notifications carry whole
/// routes), a deleted one is removed by table, prefix, metric and type. A route
/// through a nexthop object (`RTA_NH_ID`) is `None` here: see [`nh_route`].
pub fn route_op(m: &RouteMessage, new: bool) -> Option<FibOp> {
    let p = parse(m)?;
    // Next hops held as nexthop objects (the kernel's compatibility mode also spells
    // them out) are not mirrored from here, nor next hops the FIB cannot hold.
    if p.nhid.is_some() || p.via {
        return None;
    }
    let Route { table, prefix, kind, metric, .. } = p.route;
    if !new {
        return Some(FibOp::Delete(RouteSelector {
            table,
            prefix,
            metric: Some(metric),
            kind: Some(kind),
        }));
    }
    let nexthops = match (kind.takes_nexthop(), p.multipath) {
        (false, _) => Vec::new(),
        (true, Some(hops)) => hops
            .iter()
            // A next hop whose link went down stays in the kernel's route, marked dead,
            // and is never chosen.
            .filter(|nh| !nh.flags.contains(RouteNextHopFlags::Dead))
            .map(|nh| {
                let (mut gw, mut encap) = (None, false);
                for a in &nh.attributes {
                    encap |= matches!(a, RouteAttribute::EncapType(_));
                    if let Some(g) = gateway(m.header.address_family, a).ok()? {
                        gw = Some(g);
                    }
                }
                Some(NextHop {
                    gateway: gw,
                    ifindex: nh.interface_index,
                    weight: u16::from(nh.hops) + 1,
                    encap,
                })
            })
            .collect::<Option<Vec<_>>>()?,
        (true, None) => {
            vec![NextHop { gateway: p.gateway, ifindex: p.oif?, weight: 1, encap: p.encap }]
        }
    };
    if kind.takes_nexthop() && nexthops.is_empty() {
        return None;
    }
    Some(FibOp::Replace(Route { nexthops, ..p.route }))
}

/// A route through a nexthop object: the route without its next hops and the
/// nexthop's id ([`crate::nexthop::NexthopTable`] resolves them); `None` for a route
/// without `RTA_NH_ID` or one the FIB does not hold.
pub fn nh_route(m: &RouteMessage) -> Option<(Route, u32)> {
    let p = parse(m)?;
    Some((p.route, p.nhid?))
}

/// `RTM_NEWNEIGH` (`new`) or `RTM_DELNEIGH` as a neighbour change. An entry still being
/// resolved (no link-layer address yet) is held with its state, which makes it unusable
/// to a lookup, as in the kernel.
pub fn neigh_op(m: &NeighbourMessage, new: bool) -> Option<FibOp> {
    let h = &m.header;
    if !matches!(h.family, AddressFamily::Inet | AddressFamily::Inet6)
        || h.flags.contains(NeighbourFlags::Proxy)
    {
        return None;
    }
    let mut ip = None;
    let mut mac = [0u8; 6];
    for a in &m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                ip = Some(IpAddr::V4(*v4))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                ip = Some(IpAddr::V6(*v6))
            }
            NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => mac.copy_from_slice(l),
            _ => {}
        }
    }
    let (ip, ifindex) = (ip?, h.ifindex);
    if !new {
        return Some(FibOp::DelNeigh { ifindex, ip });
    }
    let state = NudState(u16::from(h.state));
    Some(FibOp::SetNeigh { ifindex, ip, neigh: Neigh { mac, state } })
}

/// `op` with every interface index found in `aliases` (`(from, to)` pairs) replaced:
/// routes and neighbours the kernel keeps on a router port's TAP twin belong, in the
/// FIB, to the port itself, so lookups answer with the port and forwarding leaves by it.
pub fn alias(op: FibOp, aliases: &[(u32, u32)]) -> FibOp {
    let map = |i: u32| aliases.iter().find(|a| a.0 == i).map_or(i, |a| a.1);
    match op {
        FibOp::Add(mut r) => {
            r.nexthops.iter_mut().for_each(|nh| nh.ifindex = map(nh.ifindex));
            FibOp::Add(r)
        }
        FibOp::Replace(mut r) => {
            r.nexthops.iter_mut().for_each(|nh| nh.ifindex = map(nh.ifindex));
            FibOp::Replace(r)
        }
        FibOp::SetNeigh { ifindex, ip, neigh } => {
            FibOp::SetNeigh { ifindex: map(ifindex), ip, neigh }
        }
        FibOp::DelNeigh { ifindex, ip } => FibOp::DelNeigh { ifindex: map(ifindex), ip },
        op => op,
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use netlink_packet_route::route::{RouteHeader, RouteNextHop, RouteType as Rtn};

    use super::*;

    fn v4_route(kind: Rtn, len: u8, attrs: Vec<RouteAttribute>) -> RouteMessage {
        let mut m = RouteMessage::default();
        m.header = RouteHeader {
            address_family: AddressFamily::Inet,
            destination_prefix_length: len,
            table: RouteHeader::RT_TABLE_MAIN,
            kind,
            ..RouteHeader::default()
        };
        m.attributes = attrs;
        m
    }

    fn dst(a: [u8; 4]) -> RouteAttribute {
        RouteAttribute::Destination(RouteAddress::Inet(Ipv4Addr::from(a)))
    }

    #[test]
    fn routes_become_replacements_and_deletes() {
        let m = v4_route(
            Rtn::Unicast,
            24,
            vec![
                dst([192, 0, 2, 0]),
                RouteAttribute::Gateway(RouteAddress::Inet(Ipv4Addr::new(10, 0, 0, 2))),
                RouteAttribute::Oif(3),
                RouteAttribute::Priority(20),
                RouteAttribute::Table(1000),
            ],
        );
        let Some(FibOp::Replace(r)) = route_op(&m, true) else { panic!("a route") };
        assert_eq!(
            (r.table, r.metric, r.kind, r.prefix.to_string()),
            (1000, 20, RouteType::Unicast, "192.0.2.0/24".into())
        );
        assert_eq!(r.nexthops, vec![NextHop::via(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 3)]);
        let Some(FibOp::Delete(s)) = route_op(&m, false) else { panic!("a delete") };
        assert_eq!((s.table, s.metric, s.kind), (1000, Some(20), Some(RouteType::Unicast)));

        let bh = v4_route(Rtn::BlackHole, 0, vec![]);
        let Some(FibOp::Replace(r)) = route_op(&bh, true) else { panic!("a default blackhole") };
        assert!(r.prefix.is_default() && r.nexthops.is_empty());
    }

    #[test]
    fn a_twins_routes_and_neighbours_belong_to_its_port() {
        let m = v4_route(
            Rtn::Unicast,
            24,
            vec![
                dst([192, 0, 2, 0]),
                RouteAttribute::Gateway(RouteAddress::Inet(Ipv4Addr::new(10, 0, 0, 2))),
                RouteAttribute::Oif(30),
            ],
        );
        let aliases = [(30, 3), (40, 4)];
        let Some(FibOp::Replace(r)) = route_op(&m, true).map(|op| alias(op, &aliases)) else {
            panic!("a route")
        };
        assert_eq!(r.nexthops[0].ifindex, 3);
        let other = v4_route(Rtn::Unicast, 24, vec![dst([192, 0, 2, 0]), RouteAttribute::Oif(5)]);
        let Some(FibOp::Replace(r)) = route_op(&other, true).map(|op| alias(op, &aliases)) else {
            panic!("a route")
        };
        assert_eq!(r.nexthops[0].ifindex, 5, "other interfaces keep their index");
        let ip: IpAddr = "10.0.0.2".parse().unwrap();
        let neigh = Neigh { mac: [2, 0, 0, 0, 0, 2], state: NudState::REACHABLE };
        let op = alias(FibOp::SetNeigh { ifindex: 40, ip, neigh }, &aliases);
        assert_eq!(op, FibOp::SetNeigh { ifindex: 4, ip, neigh });
        let op = alias(FibOp::DelNeigh { ifindex: 30, ip }, &aliases);
        assert_eq!(op, FibOp::DelNeigh { ifindex: 3, ip });
    }

    #[test]
    fn what_the_fib_does_not_hold_is_ignored() {
        let mut cloned =
            v4_route(Rtn::Unicast, 32, vec![dst([10, 0, 0, 1]), RouteAttribute::Oif(2)]);
        cloned.header.flags = RouteFlags::Cloned;
        assert_eq!(route_op(&cloned, true), None);
        let nh_object =
            v4_route(Rtn::Unicast, 8, vec![dst([10, 0, 0, 0]), RouteAttribute::NhId(7)]);
        assert_eq!(route_op(&nh_object, true), None);
        assert_eq!(route_op(&v4_route(Rtn::Multicast, 4, vec![dst([224, 0, 0, 0])]), true), None);
        assert_eq!(route_op(&v4_route(Rtn::Unicast, 33, vec![RouteAttribute::Oif(2)]), true), None);
        let no_oif = v4_route(Rtn::Unicast, 8, vec![dst([10, 0, 0, 0])]);
        assert_eq!(route_op(&no_oif, true), None, "a unicast route needs a device");
        let mut dead = RouteNextHop::default();
        dead.flags = RouteNextHopFlags::Dead;
        dead.interface_index = 4;
        let all_dead = v4_route(
            Rtn::Unicast,
            8,
            vec![dst([10, 0, 0, 0]), RouteAttribute::MultiPath(vec![dead])],
        );
        assert_eq!(route_op(&all_dead, true), None);
    }
}
