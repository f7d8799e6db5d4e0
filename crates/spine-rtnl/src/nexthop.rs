//! Nexthop objects (`ip nexthop`, `RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP`) and the routes that
//! name one by id (`RTA_NH_ID`), as FRR's zebra installs every route since FRR 8.
//!
//! The kernel keeps a nexthop apart from the routes through it: replacing nexthop 1
//! changes every route through it, and through every group that holds it, without a
//! route message of its own (when `net.ipv4.nexthop_compat_mode` is 0). The FIB holds
//! each route's next hops in the route, so [`NexthopTable`] remembers every route that
//! names a nexthop (its table, prefix, metric and the rest without next hops) and
//! answers a nexthop change with the FIB changes of the routes it touches. What the
//! kernel does, mirrored:
//!
//! - deleting a nexthop deletes the routes through it, with no route message for the
//!   IPv4 ones; it leaves every group that held it, and a group that loses its last
//!   member is deleted with its routes (`remove_nh_grp_entry`);
//! - a route through a blackhole nexthop drops, as a blackhole route does
//!   (`fib_table_lookup` answers `-EINVAL`, `bpf_fib_lookup` `BLACKHOLE`);
//! - a group's members share the hash space by weight (`nh_group_rebalance`, the same
//!   bounds as a multipath route's), in the group's order.
//!
//! - a resilient group (`type resilient`) chooses by bucket: the flow's hash modulo
//!   the bucket count names a bucket, the bucket a member (`nexthop_select_path_res`).
//!   The kernel moves buckets between members without telling anyone (its idle and
//!   unbalanced timers), so the buckets are dumped (`RTM_GETNEXTHOPBUCKET`) after any
//!   change to a resilient group or its members and once a second while one exists,
//!   and published as [`FibOp::SetBuckets`].
//!
//! A nexthop with an encapsulation (a lightweight tunnel) is held with its mark
//! (`NextHop::encap`): `bpf_fib_lookup` answers `UNSUPP_LWT` for it, as the kernel's.
//! Not followed: FDB nexthops and weights above 256; a route through one of these is
//! not mirrored. Routes keep their nexthop's id (`Route::nhid`) so that `bpf_fib_lookup`
//! chooses among a group's members as the kernel does (`nexthop_select_path`: by the
//! hash alone, passing over a member whose gateway's neighbour entry is not valid).
//!
//! netlink-packet-route 0.34, the newest release, has no nexthop messages (its
//! repository's main branch has, unreleased), so [`decode`] reads the `nhmsg` and its
//! attributes with netlink-packet-core's attribute iterator and parsers.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

use netlink_packet_core::{
    parse_ip, parse_u16, parse_u32, NetlinkBuffer, NlasIterator, NLM_F_DUMP, NLM_F_REQUEST,
};
use spine_fib::{FibOp, IpPrefix, NextHop, Route, RouteSelector, RouteType};

use crate::RtnlError;

pub const RTM_NEWNEXTHOP: u16 = 104;
pub const RTM_DELNEXTHOP: u16 = 105;
pub const RTM_GETNEXTHOP: u16 = 106;
pub const RTM_NEWNEXTHOPBUCKET: u16 = 116;
pub const RTM_GETNEXTHOPBUCKET: u16 = 118;

// `enum nha` of <linux/nexthop.h>.
const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_GROUP_TYPE: u16 = 3;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
const NHA_ENCAP_TYPE: u16 = 7;
const NHA_FDB: u16 = 11;
const NHA_RES_GROUP: u16 = 12;
const NHA_RES_BUCKET: u16 = 13;
const NEXTHOP_GRP_TYPE_MPATH: u16 = 0;
const NEXTHOP_GRP_TYPE_RES: u16 = 1;
// Inside NHA_RES_GROUP and NHA_RES_BUCKET.
const NHA_RES_GROUP_BUCKETS: u16 = 1;
const NHA_RES_BUCKET_INDEX: u16 = 1;
const NHA_RES_BUCKET_NH_ID: u16 = 3;
/// `sizeof(struct nhmsg)`: family, scope, protocol, reserved, flags.
const NHMSG_LEN: usize = 8;
/// `sizeof(struct nexthop_grp)`: id, weight, weight_high, reserved.
const NH_GRP_LEN: usize = 8;
const AF_INET6: u8 = libc::AF_INET6 as u8;
/// `RTNH_F_DEAD`.
const RTNH_F_DEAD: u32 = 1;

/// One nexthop object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nexthop {
    /// Through device `ifindex`, to `gateway` or (none) the destination itself;
    /// `encap`: with a lightweight-tunnel encapsulation (`NHA_ENCAP_TYPE`).
    Via { gateway: Option<IpAddr>, ifindex: u32, v6: bool, dead: bool, encap: bool },
    /// Drops what is routed through it.
    Blackhole,
    /// A multipath group: member ids with weights 1..=65536 (`weight + 1`).
    Group(Vec<(u32, u32)>),
    /// A resilient group: its members, and the member id each bucket holds (0 until
    /// the buckets are dumped).
    Resilient { members: Vec<(u32, u32)>, buckets: Vec<u32> },
    /// Kept by the kernel, not by the FIB: an FDB nexthop, a group of an unknown type
    /// (see the module documentation).
    Unsupported,
}

impl Nexthop {
    /// A group's members with their weights.
    fn members(&self) -> Option<&[(u32, u32)]> {
        match self {
            Nexthop::Group(m) | Nexthop::Resilient { members: m, .. } => Some(m),
            _ => None,
        }
    }

    fn members_mut(&mut self) -> Option<&mut Vec<(u32, u32)>> {
        match self {
            Nexthop::Group(m) | Nexthop::Resilient { members: m, .. } => Some(m),
            _ => None,
        }
    }
}

/// Decodes the payload of an `RTM_NEWNEXTHOP` or `RTM_DELNEXTHOP` message: the id and
/// the nexthop.
pub fn decode(payload: &[u8]) -> Result<(u32, Nexthop), RtnlError> {
    let bad = |what: &str| RtnlError::Decode(format!("nexthop message: {what}"));
    if payload.len() < NHMSG_LEN {
        return Err(bad("shorter than struct nhmsg"));
    }
    let family = payload[0];
    let flags = u32::from_ne_bytes(payload[4..8].try_into().expect("4 bytes"));
    let (mut id, mut oif, mut gateway, mut group) = (None, None, None, None);
    let (mut blackhole, mut unsupported, mut resilient, mut buckets) = (false, false, false, 0);
    let mut encap = false;
    for nla in NlasIterator::new(&payload[NHMSG_LEN..]) {
        let nla = nla.map_err(|e| bad(&e.to_string()))?;
        let v = nla.value();
        let num = |r: Result<u32, _>| {
            r.map_err(|e: netlink_packet_core::DecodeError| bad(&e.to_string()))
        };
        match nla.kind() {
            NHA_ID => id = Some(num(parse_u32(v))?),
            NHA_OIF => oif = Some(num(parse_u32(v))?),
            NHA_GATEWAY => gateway = Some(parse_ip(v).map_err(|e| bad(&e.to_string()))?),
            NHA_BLACKHOLE => blackhole = true,
            NHA_GROUP => {
                if v.len() % NH_GRP_LEN != 0 {
                    return Err(bad("NHA_GROUP is not a whole number of entries"));
                }
                group = Some(
                    v.chunks_exact(NH_GRP_LEN)
                        .map(|e| {
                            let id = u32::from_ne_bytes(e[0..4].try_into().expect("4 bytes"));
                            (id, ((u32::from(e[5]) << 8) | u32::from(e[4])) + 1)
                        })
                        .collect::<Vec<_>>(),
                );
            }
            NHA_GROUP_TYPE => match parse_u16(v).map_err(|e| bad(&e.to_string()))? {
                NEXTHOP_GRP_TYPE_MPATH => {}
                NEXTHOP_GRP_TYPE_RES => resilient = true,
                _ => unsupported = true,
            },
            NHA_RES_GROUP => {
                for inner in NlasIterator::new(v) {
                    let inner = inner.map_err(|e| bad(&e.to_string()))?;
                    if inner.kind() == NHA_RES_GROUP_BUCKETS {
                        buckets = parse_u16(inner.value()).map_err(|e| bad(&e.to_string()))?;
                    }
                }
            }
            NHA_ENCAP_TYPE => encap = true,
            NHA_FDB => unsupported = true,
            _ => {}
        }
    }
    let id = id.ok_or_else(|| bad("no NHA_ID"))?;
    let nh = match (unsupported, blackhole, group, oif) {
        (true, ..) => Nexthop::Unsupported,
        (false, true, ..) => Nexthop::Blackhole,
        (false, false, Some(g), _) if resilient => {
            if buckets == 0 {
                return Err(bad("a resilient group without NHA_RES_GROUP_BUCKETS"));
            }
            Nexthop::Resilient { members: g, buckets: vec![0; usize::from(buckets)] }
        }
        (false, false, Some(g), _) => Nexthop::Group(g),
        (false, false, None, Some(ifindex)) => Nexthop::Via {
            gateway,
            ifindex,
            v6: family == AF_INET6,
            dead: flags & RTNH_F_DEAD != 0,
            encap,
        },
        (false, false, None, None) => Nexthop::Unsupported,
    };
    Ok((id, nh))
}

/// The `RTM_GETNEXTHOP` dump request with sequence number `seq`.
pub fn dump_request(seq: u32) -> Vec<u8> {
    let len = 16 + NHMSG_LEN;
    let mut out = vec![0u8; len];
    let mut b = NetlinkBuffer::new(&mut out[..]);
    b.set_length(len as u32);
    b.set_message_type(RTM_GETNEXTHOP);
    b.set_flags(NLM_F_REQUEST | NLM_F_DUMP);
    b.set_sequence_number(seq);
    // The nhmsg stays zero: every family, no filter.
    out
}

/// Decodes the payload of an `RTM_NEWNEXTHOPBUCKET` message: the group id, the
/// bucket's index and the member id it holds.
pub fn decode_bucket(payload: &[u8]) -> Result<(u32, u16, u32), RtnlError> {
    let bad = |what: &str| RtnlError::Decode(format!("nexthop bucket message: {what}"));
    if payload.len() < NHMSG_LEN {
        return Err(bad("shorter than struct nhmsg"));
    }
    let (mut group, mut index, mut member) = (None, None, None);
    for nla in NlasIterator::new(&payload[NHMSG_LEN..]) {
        let nla = nla.map_err(|e| bad(&e.to_string()))?;
        match nla.kind() {
            NHA_ID => group = Some(parse_u32(nla.value()).map_err(|e| bad(&e.to_string()))?),
            NHA_RES_BUCKET => {
                for inner in NlasIterator::new(nla.value()) {
                    let inner = inner.map_err(|e| bad(&e.to_string()))?;
                    let v = inner.value();
                    match inner.kind() {
                        NHA_RES_BUCKET_INDEX => {
                            index = Some(parse_u16(v).map_err(|e| bad(&e.to_string()))?)
                        }
                        NHA_RES_BUCKET_NH_ID => {
                            member = Some(parse_u32(v).map_err(|e| bad(&e.to_string()))?)
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    match (group, index, member) {
        (Some(g), Some(i), Some(m)) => Ok((g, i, m)),
        _ => Err(bad("no NHA_ID, bucket index or member id")),
    }
}

/// The `RTM_GETNEXTHOPBUCKET` dump request (every group's buckets) with sequence
/// number `seq`.
pub fn bucket_dump_request(seq: u32) -> Vec<u8> {
    let mut out = dump_request(seq);
    NetlinkBuffer::new(&mut out[..]).set_message_type(RTM_GETNEXTHOPBUCKET);
    out
}

/// A route as the kernel keys it for replacement: table, prefix, metric.
type RouteKey = (u32, IpPrefix, u32);

#[derive(Debug)]
struct Tracked {
    /// The route without next hops.
    template: Route,
    id: u32,
    /// Whether the FIB holds it now.
    installed: bool,
}

/// The kernel's nexthop objects and the routes through them.
#[derive(Debug, Default)]
pub struct NexthopTable {
    objs: HashMap<u32, Nexthop>,
    /// The routes that name each id.
    users: HashMap<u32, HashSet<RouteKey>>,
    routes: HashMap<RouteKey, Tracked>,
    /// A resilient group or a member of one changed: its buckets may have moved.
    buckets_stale: bool,
    /// The buckets last handed to the FIB, by group ([`NexthopTable::bucket_ops`]);
    /// kept across [`NexthopTable::clear`] so that a group gone in a new dump is
    /// taken out of the FIB.
    published: HashMap<u32, Vec<u16>>,
}

impl NexthopTable {
    /// Forgets everything (before a full dump).
    pub fn clear(&mut self) {
        let published = std::mem::take(&mut self.published);
        *self = NexthopTable { published, ..NexthopTable::default() };
    }

    /// Whether a resilient group exists.
    pub fn has_resilient(&self) -> bool {
        self.objs.values().any(|n| matches!(n, Nexthop::Resilient { .. }))
    }

    /// True once after a change that may have moved a resilient group's buckets.
    pub fn take_buckets_stale(&mut self) -> bool {
        std::mem::take(&mut self.buckets_stale)
    }

    /// `RTM_NEWNEXTHOPBUCKET`: bucket `index` of group `group` holds member `member`.
    pub fn set_bucket(&mut self, group: u32, index: u16, member: u32) {
        if let Some(Nexthop::Resilient { buckets, .. }) = self.objs.get_mut(&group) {
            if let Some(b) = buckets.get_mut(usize::from(index)) {
                *b = member;
            }
        }
    }

    /// The FIB changes that make its buckets those of the resilient groups known now:
    /// each bucket as the index of its member among the next hops of the routes
    /// through the group ([`NexthopTable::resolve`]'s order), `u16::MAX` for a member
    /// not among them; an empty list for a group gone or no longer resilient.
    pub fn bucket_ops(&mut self) -> Vec<FibOp> {
        let mut now: HashMap<u32, Vec<u16>> = HashMap::new();
        for (&g, nh) in &self.objs {
            let Nexthop::Resilient { members, buckets } = nh else { continue };
            let included: Vec<u32> = members
                .iter()
                .map(|&(m, _)| m)
                .filter(|m| {
                    !matches!(self.objs.get(m), Some(Nexthop::Via { dead: true, .. }) | None)
                })
                .collect();
            let index =
                |m: &u32| included.iter().position(|x| x == m).and_then(|i| u16::try_from(i).ok());
            now.insert(g, buckets.iter().map(|m| index(m).unwrap_or(u16::MAX)).collect());
        }
        let mut ops = Vec::new();
        for g in self.published.keys() {
            if !now.contains_key(g) {
                ops.push(FibOp::SetBuckets { nhid: *g, buckets: Vec::new() });
            }
        }
        for (g, b) in &now {
            if self.published.get(g) != Some(b) {
                ops.push(FibOp::SetBuckets { nhid: *g, buckets: b.clone() });
            }
        }
        self.published = now;
        ops
    }

    pub fn get(&self, id: u32) -> Option<&Nexthop> {
        self.objs.get(&id)
    }

    /// Nexthop objects known.
    pub fn len(&self) -> usize {
        self.objs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objs.is_empty()
    }

    /// Routes through nexthop objects known.
    pub fn routes(&self) -> usize {
        self.routes.len()
    }

    /// The next hops of a route of family `v6` through `id`, with the route type they
    /// make it (a blackhole nexthop makes it drop); `None` if the FIB cannot hold it.
    fn resolve(&self, id: u32, v6: bool) -> Option<(Option<RouteType>, Vec<NextHop>)> {
        let hop = |nh: &Nexthop, weight: u32| match *nh {
            // An IPv6 route cannot use an IPv4 nexthop (the kernel refuses it); an IPv4
            // route may use an IPv6 gateway (RFC 5549).
            Nexthop::Via { gateway, ifindex, v6: nv6, dead: false, encap }
                if nv6 == v6 || (nv6 && gateway.is_some()) =>
            {
                let weight = u16::try_from(weight).ok().filter(|w| *w <= 256)?;
                Some(NextHop { gateway, ifindex, weight, encap })
            }
            _ => None,
        };
        match self.objs.get(&id)? {
            Nexthop::Blackhole => Some((Some(RouteType::Blackhole), Vec::new())),
            Nexthop::Group(members) | Nexthop::Resilient { members, .. } => {
                if let [(m, _)] = members[..] {
                    if self.objs.get(&m) == Some(&Nexthop::Blackhole) {
                        return Some((Some(RouteType::Blackhole), Vec::new()));
                    }
                }
                let mut hops = Vec::with_capacity(members.len());
                for &(m, w) in members {
                    match self.objs.get(&m) {
                        // A dead member is never chosen.
                        Some(Nexthop::Via { dead: true, .. }) => {}
                        Some(nh) => hops.push(hop(nh, w)?),
                        // Not yet seen (the dump is in id order): it arrives later.
                        None => {}
                    }
                }
                (!hops.is_empty()).then_some((None, hops))
            }
            nh => Some((None, vec![hop(nh, 1)?])),
        }
    }

    /// The FIB change that makes the FIB's copy of `key` current.
    fn refresh(&mut self, key: RouteKey) -> Option<FibOp> {
        let t = self.routes.get(&key)?;
        let v6 = matches!(key.1, IpPrefix::V6(_));
        match self.resolve(t.id, v6) {
            Some((kind, nexthops)) => {
                let mut r = t.template.clone();
                if let Some(k) = kind {
                    r.kind = k;
                }
                if r.kind.takes_nexthop() {
                    r.nexthops = nexthops;
                }
                self.routes.get_mut(&key).expect("looked up above").installed = true;
                Some(FibOp::Replace(r))
            }
            None => {
                let t = self.routes.get_mut(&key).expect("looked up above");
                std::mem::take(&mut t.installed).then_some(FibOp::Delete(selector(key)))
            }
        }
    }

    /// Keys of the routes through `id` or through a group that holds it.
    fn affected(&self, id: u32) -> Vec<RouteKey> {
        let mut keys: Vec<RouteKey> = self.users.get(&id).into_iter().flatten().copied().collect();
        for (g, nh) in &self.objs {
            if let Some(members) = nh.members() {
                if members.iter().any(|&(m, _)| m == id) {
                    keys.extend(self.users.get(g).into_iter().flatten().copied());
                }
            }
        }
        keys
    }

    /// `RTM_NEWNEXTHOP`: nexthop `id` added or replaced; the changes of the routes
    /// through it.
    pub fn set(&mut self, id: u32, mut nh: Nexthop) -> Vec<FibOp> {
        // A replacement says nothing of the buckets: the old ones stand until the next
        // dump, where they still fit.
        if let Nexthop::Resilient { buckets, .. } = &mut nh {
            if let Some(Nexthop::Resilient { buckets: old, .. }) = self.objs.get(&id) {
                if old.len() == buckets.len() {
                    buckets.clone_from(old);
                }
            }
        }
        if self.objs.get(&id) == Some(&nh) {
            return Vec::new();
        }
        let was_resilient = matches!(self.objs.get(&id), Some(Nexthop::Resilient { .. }));
        self.buckets_stale |=
            was_resilient || matches!(nh, Nexthop::Resilient { .. }) || self.in_resilient(id);
        self.objs.insert(id, nh);
        self.affected(id).into_iter().filter_map(|k| self.refresh(k)).collect()
    }

    /// Whether `id` is a member of a resilient group.
    fn in_resilient(&self, id: u32) -> bool {
        self.objs.values().any(|n| {
            matches!(n, Nexthop::Resilient { members, .. } if members.iter().any(|&(m, _)| m == id))
        })
    }

    /// `RTM_DELNEXTHOP`: the routes through `id` go, and `id` leaves its groups (a
    /// group left empty goes too, with its routes).
    pub fn remove(&mut self, id: u32) -> Vec<FibOp> {
        let mut ops = Vec::new();
        self.remove_into(id, &mut ops);
        ops
    }

    fn remove_into(&mut self, id: u32, ops: &mut Vec<FibOp>) {
        self.buckets_stale |= self.in_resilient(id);
        match self.objs.remove(&id) {
            None => return,
            Some(Nexthop::Resilient { .. }) => self.buckets_stale = true,
            Some(_) => {}
        }
        for key in self.users.remove(&id).unwrap_or_default() {
            if self.routes.remove(&key).is_some_and(|t| t.installed) {
                ops.push(FibOp::Delete(selector(key)));
            }
        }
        let holders: Vec<u32> = self
            .objs
            .iter()
            .filter_map(|(&g, nh)| nh.members()?.iter().any(|&(x, _)| x == id).then_some(g))
            .collect();
        for g in holders {
            let Some(members) = self.objs.get_mut(&g).and_then(Nexthop::members_mut) else {
                continue;
            };
            members.retain(|&(x, _)| x != id);
            if members.is_empty() {
                self.remove_into(g, ops);
            } else {
                let keys: Vec<RouteKey> =
                    self.users.get(&g).into_iter().flatten().copied().collect();
                ops.extend(keys.into_iter().filter_map(|k| self.refresh(k)));
            }
        }
    }

    /// `RTM_NEWROUTE` for a route through nexthop `id`; `template` is the route without
    /// next hops. The FIB change, if any.
    pub fn route_new(&mut self, template: Route, id: u32) -> Option<FibOp> {
        let template = Route { nhid: id, ..template };
        let key = (template.table, template.prefix, template.metric);
        if let Some(old) = self.routes.remove(&key) {
            if let Some(u) = self.users.get_mut(&old.id) {
                u.remove(&key);
            }
            let installed = old.installed;
            self.routes.insert(key, Tracked { template, id, installed });
        } else {
            self.routes.insert(key, Tracked { template, id, installed: false });
        }
        self.users.entry(id).or_default().insert(key);
        self.refresh(key)
    }

    /// A route for `(table, prefix, metric)` that names no nexthop object replaced or
    /// deleted the one that did: it no longer follows a nexthop.
    pub fn forget(&mut self, table: u32, prefix: IpPrefix, metric: u32) {
        let key = (table, prefix, metric);
        if let Some(t) = self.routes.remove(&key) {
            if let Some(u) = self.users.get_mut(&t.id) {
                u.remove(&key);
            }
        }
    }

    /// `RTM_DELROUTE` for a route the kernel held through a nexthop object; `None` if
    /// the FIB does not hold it (it was never resolvable, or went with its nexthop).
    pub fn route_del(&mut self, table: u32, prefix: IpPrefix, metric: u32) -> Option<FibOp> {
        let key = (table, prefix, metric);
        let t = self.routes.remove(&key)?;
        if let Some(u) = self.users.get_mut(&t.id) {
            u.remove(&key);
        }
        t.installed.then_some(FibOp::Delete(selector(key)))
    }
}

fn selector((table, prefix, metric): RouteKey) -> RouteSelector {
    RouteSelector { table, prefix, metric: Some(metric), kind: None }
}

#[cfg(test)]
mod tests {
    use spine_fib::{Prefix4, Prefix6};

    use super::*;

    fn v4(a: [u8; 4], len: u32) -> IpPrefix {
        IpPrefix::V4(Prefix4::new(u32::from_be_bytes(a), len).unwrap())
    }

    fn via(gw: [u8; 4], ifindex: u32) -> Nexthop {
        Nexthop::Via {
            gateway: Some(IpAddr::from(gw)),
            ifindex,
            v6: false,
            dead: false,
            encap: false,
        }
    }

    fn template(p: IpPrefix) -> Route {
        Route::unicast(p, Vec::new())
    }

    fn replaced(op: Option<FibOp>) -> Route {
        match op {
            Some(FibOp::Replace(r)) => r,
            other => panic!("not a replacement: {other:?}"),
        }
    }

    /// One attribute, padded.
    fn nla(kind: u16, v: &[u8]) -> Vec<u8> {
        let mut m = ((4 + v.len()) as u16).to_ne_bytes().to_vec();
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(v);
        m.resize(m.len().next_multiple_of(4), 0);
        m
    }

    /// An nhmsg with attributes, as the kernel sends it.
    fn message(family: u8, flags: u32, attrs: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut m = vec![family, 0, 0, 0];
        m.extend_from_slice(&flags.to_ne_bytes());
        for (kind, v) in attrs {
            m.extend_from_slice(&((4 + v.len()) as u16).to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(v);
            m.resize(m.len().next_multiple_of(4), 0);
        }
        m
    }

    #[test]
    fn messages_decode_to_nexthops() {
        let gw = message(
            2,
            0,
            &[
                (NHA_ID, 7u32.to_ne_bytes().to_vec()),
                (NHA_GATEWAY, vec![10, 0, 0, 2]),
                (NHA_OIF, 3u32.to_ne_bytes().to_vec()),
            ],
        );
        assert_eq!(decode(&gw).unwrap(), (7, via([10, 0, 0, 2], 3)));
        let mut grp = Vec::new();
        grp.extend_from_slice(&1u32.to_ne_bytes());
        grp.extend_from_slice(&[0, 0, 0, 0]);
        grp.extend_from_slice(&2u32.to_ne_bytes());
        grp.extend_from_slice(&[2, 0, 0, 0]);
        let g = message(0, 0, &[(NHA_ID, 10u32.to_ne_bytes().to_vec()), (NHA_GROUP, grp)]);
        assert_eq!(decode(&g).unwrap(), (10, Nexthop::Group(vec![(1, 1), (2, 3)])));
        let bh = message(0, 0, &[(NHA_ID, 5u32.to_ne_bytes().to_vec()), (NHA_BLACKHOLE, vec![])]);
        assert_eq!(decode(&bh).unwrap(), (5, Nexthop::Blackhole));
        let res_group = |with_buckets: bool| {
            let mut attrs = vec![
                (NHA_ID, 11u32.to_ne_bytes().to_vec()),
                (NHA_GROUP, vec![1, 0, 0, 0, 0, 0, 0, 0]),
                (NHA_GROUP_TYPE, 1u16.to_ne_bytes().to_vec()),
            ];
            if with_buckets {
                // NHA_RES_GROUP { NHA_RES_GROUP_BUCKETS: 4, NHA_RES_GROUP_IDLE_TIMER: 0 }
                let mut nested = nla(NHA_RES_GROUP_BUCKETS, &4u16.to_ne_bytes());
                nested.extend(nla(2, &0u32.to_ne_bytes()));
                attrs.push((NHA_RES_GROUP, nested));
            }
            message(0, 0, &attrs)
        };
        assert_eq!(
            decode(&res_group(true)).unwrap(),
            (11, Nexthop::Resilient { members: vec![(1, 1)], buckets: vec![0; 4] })
        );
        assert!(decode(&res_group(false)).is_err(), "a resilient group needs its bucket count");
        let dead = message(
            10,
            1,
            &[(NHA_ID, 8u32.to_ne_bytes().to_vec()), (NHA_OIF, 4u32.to_ne_bytes().to_vec())],
        );
        assert_eq!(
            decode(&dead).unwrap(),
            (8, Nexthop::Via { gateway: None, ifindex: 4, v6: true, dead: true, encap: false })
        );
        assert!(decode(&[0; 4]).is_err());
        assert!(decode(&message(2, 0, &[])).is_err(), "no id");
    }

    #[test]
    fn routes_follow_their_nexthop_and_group() {
        let mut t = NexthopTable::default();
        assert!(t.set(1, via([10, 0, 0, 2], 3)).is_empty());
        assert!(t.set(2, via([10, 1, 0, 2], 4)).is_empty());
        assert!(t.set(10, Nexthop::Group(vec![(1, 1), (2, 3)])).is_empty());
        let p = v4([192, 0, 2, 0], 24);
        let q = v4([198, 51, 100, 0], 24);
        let r = replaced(t.route_new(template(p), 10));
        assert_eq!(
            r.nexthops.iter().map(|h| (h.ifindex, h.weight)).collect::<Vec<_>>(),
            [(3, 1), (4, 3)]
        );
        let r = replaced(t.route_new(template(q), 1));
        assert_eq!(r.nexthops, [NextHop::via(IpAddr::from([10, 0, 0, 2]), 3)]);

        // Replacing member 1 changes both routes.
        let ops = t.set(1, via([10, 0, 0, 3], 3));
        assert_eq!(ops.len(), 2);
        for op in ops {
            let r = replaced(Some(op));
            assert!(r.nexthops.iter().any(|h| h.gateway == Some(IpAddr::from([10, 0, 0, 3]))));
        }
        // The same nexthop again changes nothing.
        assert!(t.set(1, via([10, 0, 0, 3], 3)).is_empty());

        // Deleting 1: its route goes, the group keeps member 2.
        let ops = t.remove(1);
        assert!(ops.contains(&FibOp::Delete(selector((254, q, 0)))), "{ops:?}");
        let group = ops.iter().find_map(|o| match o {
            FibOp::Replace(r) if r.prefix == p => Some(r.clone()),
            _ => None,
        });
        assert_eq!(
            group.unwrap().nexthops,
            [NextHop { weight: 3, ..NextHop::via(IpAddr::from([10, 1, 0, 2]), 4) }]
        );
        assert_eq!(t.route_del(254, q, 0), None, "already gone with its nexthop");

        // Deleting the last member deletes the group and its route.
        assert_eq!(t.remove(2), [FibOp::Delete(selector((254, p, 0)))]);
        assert!(t.is_empty() && t.routes() == 0);
    }

    #[test]
    fn blackholes_dead_members_and_families() {
        let mut t = NexthopTable::default();
        t.set(3, Nexthop::Blackhole);
        let r = replaced(t.route_new(template(v4([10, 0, 0, 0], 8)), 3));
        assert_eq!((r.kind, r.nexthops.len()), (RouteType::Blackhole, 0));

        t.set(1, via([10, 0, 0, 2], 3));
        t.set(2, Nexthop::Via { gateway: None, ifindex: 4, v6: false, dead: true, encap: false });
        t.set(10, Nexthop::Group(vec![(1, 1), (2, 1)]));
        let r = replaced(t.route_new(template(v4([10, 1, 0, 0], 16)), 10));
        assert_eq!(r.nexthops.len(), 1, "the dead member is not chosen");

        // An IPv6 route through an IPv4 nexthop is not held; nor an unknown id.
        let p6 = IpPrefix::V6(Prefix6::new(0x2001_0db8 << 96, 32).unwrap());
        assert_eq!(t.route_new(template(p6), 1), None);
        assert_eq!(t.route_new(template(v4([10, 2, 0, 0], 16)), 99), None);
        // It becomes one once the nexthop appears.
        let ops = t.set(99, via([10, 0, 0, 9], 3));
        assert_eq!(ops.len(), 1);
        // Replacing a route moves it to its new nexthop.
        let r = replaced(t.route_new(template(v4([10, 2, 0, 0], 16)), 1));
        assert_eq!(r.nexthops[0].gateway, Some(IpAddr::from([10, 0, 0, 2])));
        assert!(t.remove(99).is_empty(), "no route is through 99 any more");
        // A plain route that takes a tracked route's place no longer follows nexthop 1.
        let key = (254, v4([10, 3, 0, 0], 16), 0);
        t.route_new(template(key.1), 1).unwrap();
        t.forget(key.0, key.1, key.2);
        let ops = t.set(1, via([10, 0, 0, 7], 3));
        // 10.2.0.0/16 through it, 10.1.0.0/16 through its group; not 10.3.0.0/16.
        assert_eq!(ops.len(), 2);
        assert!(!ops.iter().any(|o| matches!(o, FibOp::Replace(r) if r.prefix == key.1)));
        assert!(t.route_del(254, v4([10, 2, 0, 0], 16), 0).is_some());
    }

    #[test]
    fn resilient_buckets_name_members_by_their_place_among_the_next_hops() {
        let mut t = NexthopTable::default();
        t.set(1, via([10, 0, 0, 2], 3));
        t.set(2, via([10, 1, 0, 2], 4));
        t.set(3, Nexthop::Via { gateway: None, ifindex: 5, v6: false, dead: true, encap: false });
        t.take_buckets_stale();
        let members = vec![(3, 1), (2, 1), (1, 1)];
        t.set(10, Nexthop::Resilient { members, buckets: vec![0; 4] });
        assert!(t.take_buckets_stale(), "a new resilient group");
        let r = replaced(t.route_new(template(v4([192, 0, 2, 0], 24)), 10));
        // The dead member is not among the next hops: 2 is index 0, 1 is index 1.
        assert_eq!(r.nexthops.iter().map(|h| h.ifindex).collect::<Vec<_>>(), [4, 3]);
        for (i, m) in [1, 2, 2, 3].into_iter().enumerate() {
            t.set_bucket(10, i as u16, m);
        }
        t.set_bucket(10, 9, 1); // past the end: ignored
        t.set_bucket(99, 0, 1); // no such group: ignored
        assert_eq!(
            t.bucket_ops(),
            [FibOp::SetBuckets { nhid: 10, buckets: vec![1, 0, 0, u16::MAX] }]
        );
        assert!(t.bucket_ops().is_empty(), "nothing changed");
        // Replacing the group keeps its buckets until the next dump; a member change
        // marks them stale.
        t.set(10, Nexthop::Resilient { members: vec![(1, 1), (2, 1)], buckets: vec![0; 4] });
        assert!(t.take_buckets_stale());
        assert_eq!(
            t.bucket_ops(),
            [FibOp::SetBuckets { nhid: 10, buckets: vec![0, 1, 1, u16::MAX] }]
        );
        t.set(2, via([10, 1, 0, 9], 4));
        assert!(t.take_buckets_stale(), "a member of a resilient group changed");
        t.take_buckets_stale();
        t.remove(10);
        assert!(t.take_buckets_stale(), "a resilient group deleted");
        // Gone (here: from a new dump): the FIB forgets its buckets.
        t.clear();
        assert_eq!(t.bucket_ops(), [FibOp::SetBuckets { nhid: 10, buckets: vec![] }]);

        let mut bucket = nla(NHA_RES_BUCKET_INDEX, &7u16.to_ne_bytes());
        bucket.extend(nla(2, &0u64.to_ne_bytes()));
        bucket.extend(nla(NHA_RES_BUCKET_NH_ID, &2u32.to_ne_bytes()));
        let m = message(0, 0, &[(NHA_ID, 10u32.to_ne_bytes().to_vec()), (NHA_RES_BUCKET, bucket)]);
        assert_eq!(decode_bucket(&m).unwrap(), (10, 7, 2));
        assert!(decode_bucket(&message(0, 0, &[(NHA_ID, vec![1, 0, 0, 0])])).is_err());
        let b = bucket_dump_request(3);
        assert_eq!(NetlinkBuffer::new_checked(&b[..]).unwrap().message_type(), 118);
    }

    #[test]
    fn the_dump_request_is_a_getnexthop() {
        let r = dump_request(9);
        let b = NetlinkBuffer::new_checked(&r[..]).unwrap();
        assert_eq!((b.message_type(), b.sequence_number(), b.length()), (106, 9, 24));
        assert_eq!(b.flags(), NLM_F_REQUEST | NLM_F_DUMP);
    }
}
