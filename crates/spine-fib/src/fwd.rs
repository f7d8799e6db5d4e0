//! Forwarding records: what `bpf_fib_lookup` answers for a route with one plain next
//! hop, resolved when the FIB changes instead of on every packet, for both families.
//!
//! The lookup for such a route would otherwise chase the route entry (a large
//! [`RouteEntry`](crate::RouteEntry)), its heap-held next hops, the output interface
//! and a hash of the neighbour table: four or five cache lines after the LPM. Here the
//! LPM's value (the route's index) names an 8-byte [`FastRoute`] in a dense array
//! (eight to a cache line), which names a shared record: a 32-byte [`Fwd4`] for an
//! IPv4 route, a 64-byte [`Fwd6`] for an IPv6 one, holding the output interface, the
//! gateway, the interface's MTU and MAC, and the gateway's MAC when its neighbour entry
//! is usable. Routes through the same (interface, gateway) share one record, so a table
//! of a million routes over a few next hops has a few records, always in cache, and a
//! neighbour or interface change rewrites a few records, never the routes.
//!
//! A multipath route whose next hops all qualify names a shared [`Group`] instead:
//! each member's bound in the hash space and record, and the nexthop object the route
//! names, for `bpf_fib_lookup` to choose among with [`crate::ecmp`]'s selections, the
//! general path's. Routes that do not qualify (other types, a lightweight tunnel, a
//! gateway of the other family, a locked MTU) have no record and take the general path.

use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rustc_hash::FxHashMap;

use crate::fib::RouteEntry;
use crate::iface::Ifaces;
use crate::neigh::NeighTable;
use crate::prefix::IpPrefix;
use crate::route::RouteType;

const GATEWAY: u8 = 1;
const NEIGH: u8 = 2;
const IFACE: u8 = 4;
/// The gateway has a neighbour entry in a state that is not valid (`INCOMPLETE`,
/// `FAILED`): a group passes over such a member (`nexthop_is_good_nh`).
const BAD_NEIGH: u8 = 8;
const NONE: u32 = u32::MAX;
/// [`FastRoute::fwd`]'s bit for an IPv6 record or group.
const V6: u32 = 1 << 31;
/// [`FastRoute::fwd`]'s bit for a group ([`Group`]) rather than a record.
const GROUP: u32 = 1 << 30;

/// A gateway address as a record holds it: network-order bytes of one family.
pub trait GatewayBytes: Copy + Default + Eq + Hash + AsRef<[u8]> + std::fmt::Debug {
    /// The address as the neighbour table keys it.
    fn ip(self) -> IpAddr;
    /// The bytes of `ip`, if it is of this family.
    fn of(ip: IpAddr) -> Option<Self>;
}

impl GatewayBytes for [u8; 4] {
    fn ip(self) -> IpAddr {
        IpAddr::V4(Ipv4Addr::from(self))
    }
    fn of(ip: IpAddr) -> Option<[u8; 4]> {
        match ip {
            IpAddr::V4(a) => Some(a.octets()),
            IpAddr::V6(_) => None,
        }
    }
}

impl GatewayBytes for [u8; 16] {
    fn ip(self) -> IpAddr {
        IpAddr::V6(Ipv6Addr::from(self))
    }
    fn of(ip: IpAddr) -> Option<[u8; 16]> {
        match ip {
            IpAddr::V6(a) => Some(a.octets()),
            IpAddr::V4(_) => None,
        }
    }
}

/// The forwarding answer for one (output interface, gateway) pair, as the FIB's own
/// interfaces and neighbours give it: [`Fwd4`] (32 bytes) or [`Fwd6`] (64 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(32))]
pub struct Fwd<G> {
    /// The output interface.
    pub ifindex: u32,
    /// The gateway in network order (meaningful with a gateway only).
    gateway: G,
    /// The interface's MTU, as the FIB holds the interface.
    mtu: u32,
    /// The interface's MAC.
    smac: [u8; 6],
    /// The gateway's MAC, when its neighbour entry is usable.
    dmac: [u8; 6],
    flags: u8,
}

/// An IPv4 route's record.
pub type Fwd4 = Fwd<[u8; 4]>;
/// An IPv6 route's record.
pub type Fwd6 = Fwd<[u8; 16]>;

impl<G: GatewayBytes> Fwd<G> {
    /// The gateway's address in network order, `None` for a directly connected route
    /// (the neighbour is the destination itself).
    #[inline]
    pub fn gateway(&self) -> Option<G> {
        (self.flags & GATEWAY != 0).then_some(self.gateway)
    }

    /// The gateway's MAC, when it has a neighbour entry in a usable state
    /// ([`crate::NudState::usable`]); `None` also for a directly connected route.
    #[inline]
    pub fn gateway_mac(&self) -> Option<[u8; 6]> {
        (self.flags & NEIGH != 0).then_some(self.dmac)
    }

    /// The output interface's MTU and MAC, if the FIB holds the interface
    /// ([`crate::FibOp::SetIface`]).
    #[inline]
    pub fn iface(&self) -> Option<(u32, [u8; 6])> {
        (self.flags & IFACE != 0).then_some((self.mtu, self.smac))
    }

    /// Whether a nexthop group may choose this member: its gateway, if any, has no
    /// neighbour entry in a state that is not valid (`nexthop_is_good_nh`).
    #[inline]
    pub fn good(&self) -> bool {
        self.flags & BAD_NEIGH == 0
    }

    fn key(&self) -> (u32, Option<G>) {
        (self.ifindex, self.gateway())
    }

    fn refresh_neigh(&mut self, neigh: &NeighTable) {
        self.flags &= !(NEIGH | BAD_NEIGH);
        self.dmac = [0; 6];
        if self.flags & GATEWAY == 0 {
            return;
        }
        match neigh.get(self.ifindex, self.gateway.ip()) {
            Some(n) if n.state.usable() => {
                self.dmac = n.mac;
                self.flags |= NEIGH;
            }
            Some(_) => self.flags |= BAD_NEIGH,
            None => {}
        }
    }

    fn refresh_iface(&mut self, ifaces: &Ifaces) {
        self.flags &= !IFACE;
        (self.mtu, self.smac) = (0, [0; 6]);
        if let Some(i) = ifaces.get(self.ifindex) {
            (self.mtu, self.smac) = (i.mtu, i.mac);
            self.flags |= IFACE;
        }
    }
}

/// A route's entry in the dense per-route array: its forwarding record and metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastRoute {
    /// The record's index, [`V6`] set for an IPv6 one; [`NONE`] for no record.
    fwd: u32,
    /// The route's metric (`bpf_fib_lookup` returns it).
    pub metric: u32,
}

impl FastRoute {
    const EMPTY: FastRoute = FastRoute { fwd: NONE, metric: 0 };
}

/// A multipath route's next hops as the forwarding records hold them: each member's
/// upper bound in the hash space ([`crate::RouteEntry::bounds`]) and record, and the
/// nexthop object the route names (0 for none). Shared by routes with the same.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
struct GroupRec {
    nhid: u32,
    members: Box<[(i32, u32)]>,
}

/// What [`crate::FibState::fast_v4`] and [`crate::FibState::fast_v6`] find for a route.
#[derive(Debug, Clone, Copy)]
pub enum Fast<'a, G> {
    /// A route with one next hop: its record.
    One(&'a Fwd<G>),
    /// A multipath route (hash-threshold or a nexthop object's group).
    Group(Group<'a, G>),
}

/// A multipath route's next hops: bounds and records, chosen among with
/// [`crate::ecmp`]'s selections as the general path chooses.
#[derive(Debug, Clone, Copy)]
pub struct Group<'a, G> {
    rec: &'a GroupRec,
    recs: &'a [Fwd<G>],
}

impl<'a, G: GatewayBytes> Group<'a, G> {
    /// The nexthop object the route names, 0 for a plain multipath route.
    #[inline]
    pub fn nhid(&self) -> u32 {
        self.rec.nhid
    }

    /// Each member's upper bound in the 31-bit hash space, in order.
    #[inline]
    pub fn bounds(&self) -> impl Iterator<Item = i32> + 'a {
        self.rec.members.iter().map(|m| m.0)
    }

    /// Number of members.
    #[inline]
    pub fn len(&self) -> usize {
        self.rec.members.len()
    }

    /// Whether the group has no members (never, for a stored group).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rec.members.is_empty()
    }

    /// Member `i`'s record.
    #[inline]
    pub fn member(&self, i: usize) -> Option<&'a Fwd<G>> {
        self.recs.get(self.rec.members.get(i)?.1 as usize)
    }

    /// The first member through interface `ifindex` (the general path's
    /// `nexthops.iter().position(|n| n.ifindex == ifindex)`), by index.
    #[inline]
    pub fn through(&self, ifindex: u32) -> Option<usize> {
        (0..self.len()).find(|&i| self.member(i).is_some_and(|m| m.ifindex == ifindex))
    }
}

/// One family's records, shared by (output interface, gateway), counted by the routes
/// that name them.
#[derive(Debug, Clone, Default)]
struct Records<G: GatewayBytes> {
    recs: Vec<Fwd<G>>,
    refs: Vec<u32>,
    free: Vec<u32>,
    /// (output interface, gateway) → record (update-only).
    ids: FxHashMap<(u32, Option<G>), u32>,
    groups: Vec<GroupRec>,
    grefs: Vec<u32>,
    gfree: Vec<u32>,
    /// Group → its index (update-only).
    gids: FxHashMap<GroupRec, u32>,
}

impl<G: GatewayBytes> Records<G> {
    /// The record for `k`, made if new, with one more reference.
    fn acquire(&mut self, k: (u32, Option<G>), n: &NeighTable, i: &Ifaces) -> u32 {
        let fwd = match self.ids.get(&k) {
            Some(&f) => f,
            None => {
                let mut rec = Fwd::<G> { ifindex: k.0, ..Fwd::default() };
                if let Some(g) = k.1 {
                    rec.gateway = g;
                    rec.flags |= GATEWAY;
                }
                rec.refresh_neigh(n);
                rec.refresh_iface(i);
                let f = match self.free.pop() {
                    Some(f) => {
                        self.recs[f as usize] = rec;
                        f
                    }
                    None => {
                        self.recs.push(rec);
                        self.refs.push(0);
                        (self.recs.len() - 1) as u32
                    }
                };
                self.ids.insert(k, f);
                f
            }
        };
        self.refs[fwd as usize] += 1;
        fwd
    }

    /// One reference to record `f` fewer; freed at none.
    fn release(&mut self, f: u32) {
        let i = f as usize;
        self.refs[i] -= 1;
        if self.refs[i] == 0 {
            self.ids.remove(&self.recs[i].key());
            self.recs[i] = Fwd::default();
            self.free.push(f);
        }
    }

    /// The group of members `keys` (with their bounds) for nexthop object `nhid`,
    /// made if new, with one more reference.
    fn acquire_group(
        &mut self,
        nhid: u32,
        keys: &[(i32, Key<G>)],
        n: &NeighTable,
        i: &Ifaces,
    ) -> u32 {
        let members: Box<[(i32, u32)]> =
            keys.iter().map(|&(b, k)| (b, self.acquire(k, n, i))).collect();
        let rec = GroupRec { nhid, members };
        if let Some(&g) = self.gids.get(&rec) {
            for &(_, f) in &rec.members[..] {
                self.release(f);
            }
            self.grefs[g as usize] += 1;
            return g;
        }
        let g = match self.gfree.pop() {
            Some(g) => {
                self.groups[g as usize] = rec.clone();
                g
            }
            None => {
                self.groups.push(rec.clone());
                self.grefs.push(0);
                (self.groups.len() - 1) as u32
            }
        };
        self.gids.insert(rec, g);
        self.grefs[g as usize] += 1;
        g
    }

    /// One reference to group `g` fewer; freed, with its members' references, at none.
    fn release_group(&mut self, g: u32) {
        let i = g as usize;
        self.grefs[i] -= 1;
        if self.grefs[i] == 0 {
            let rec = std::mem::take(&mut self.groups[i]);
            for &(_, f) in &rec.members[..] {
                self.release(f);
            }
            self.gids.remove(&rec);
            self.gfree.push(g);
        }
    }

    /// What `fwd` ([`FastRoute::fwd`] without [`V6`]) names.
    #[inline]
    fn fast(&self, fwd: u32) -> Option<Fast<'_, G>> {
        if fwd & GROUP == 0 {
            return self.recs.get(fwd as usize).map(Fast::One);
        }
        let rec = self.groups.get((fwd & !GROUP) as usize)?;
        Some(Fast::Group(Group { rec, recs: &self.recs }))
    }

    fn neigh_changed(&mut self, ifindex: u32, ip: IpAddr, n: &NeighTable) {
        let Some(g) = G::of(ip) else { return };
        if let Some(&f) = self.ids.get(&(ifindex, Some(g))) {
            self.recs[f as usize].refresh_neigh(n);
        }
    }

    fn iface_changed(&mut self, ifindex: u32, i: &Ifaces) {
        for (rec, &refs) in self.recs.iter_mut().zip(&self.refs) {
            if refs != 0 && rec.ifindex == ifindex {
                rec.refresh_iface(i);
            }
        }
    }

    fn memory(&self) -> usize {
        self.recs.capacity() * std::mem::size_of::<Fwd<G>>()
            + self.groups.capacity() * std::mem::size_of::<GroupRec>()
            + self.groups.iter().map(|g| g.members.len() * 8).sum::<usize>()
    }
}

/// The records and the per-route array, kept by [`crate::FibState`] in step with its
/// routes, neighbours and interfaces.
#[derive(Debug, Clone, Default)]
pub(crate) struct FwdTable {
    v4: Records<[u8; 4]>,
    v6: Records<[u8; 16]>,
    /// By route index.
    routes: Vec<FastRoute>,
}

/// The (interface, gateway) of a next hop that a record can stand for: not a tunnel,
/// its gateway (if any) of the route's family.
fn nh_key<G: GatewayBytes>(nh: &crate::NextHop) -> Option<(u32, Option<G>)> {
    if nh.encap {
        return None;
    }
    match nh.gateway {
        None => Some((nh.ifindex, None)),
        Some(g) => Some((nh.ifindex, Some(G::of(g)?))),
    }
}

/// A record's key: (output interface, gateway).
type Key<G> = (u32, Option<G>);

/// What a route gets: `None` if it does not qualify (not unicast, a locked MTU, a next
/// hop that no record stands for), else each next hop's bound and key.
fn keys<G: GatewayBytes>(e: &RouteEntry) -> Option<Vec<(i32, Key<G>)>> {
    if e.kind != RouteType::Unicast || e.mtu != 0 || e.nexthops.is_empty() {
        return None;
    }
    let bounds = e.bounds();
    e.nexthops.iter().zip(bounds).map(|(nh, &b)| Some((b, nh_key(nh)?))).collect()
}

impl FwdTable {
    /// Route `idx`'s IPv4 record or group and its metric, if it has one.
    #[inline]
    pub(crate) fn get_v4(&self, idx: u32) -> Option<(Fast<'_, [u8; 4]>, u32)> {
        let r = self.routes.get(idx as usize)?;
        // An IPv4 record's index has neither V6 nor GROUP: one comparison.
        if r.fwd < GROUP {
            return Some((Fast::One(self.v4.recs.get(r.fwd as usize)?), r.metric));
        }
        if r.fwd & V6 != 0 {
            return None;
        }
        Some((self.v4.fast(r.fwd)?, r.metric))
    }

    /// Route `idx`'s IPv6 record or group and its metric, if it has one.
    #[inline]
    pub(crate) fn get_v6(&self, idx: u32) -> Option<(Fast<'_, [u8; 16]>, u32)> {
        let r = self.routes.get(idx as usize)?;
        if r.fwd & V6 == 0 || r.fwd == NONE {
            return None;
        }
        let f = r.fwd & !V6;
        if f < GROUP {
            return Some((Fast::One(self.v6.recs.get(f as usize)?), r.metric));
        }
        Some((self.v6.fast(f)?, r.metric))
    }

    /// Route `idx` is now `e`.
    pub(crate) fn set_route(&mut self, idx: u32, e: &RouteEntry, n: &NeighTable, i: &Ifaces) {
        self.clear_route(idx);
        let fwd = match e.prefix {
            IpPrefix::V4(_) => match keys(e) {
                Some(k) if k.len() == 1 => self.v4.acquire(k[0].1, n, i),
                Some(k) => self.v4.acquire_group(e.nhid, &k, n, i) | GROUP,
                None => return,
            },
            // Table local's IPv6 routes get none: a record found through the merged
            // LPM then says the route is main's (`FibState::lookup_v6_merged_index`).
            IpPrefix::V6(_) if e.table == crate::table_id::LOCAL => return,
            IpPrefix::V6(_) => match keys(e) {
                Some(k) if k.len() == 1 => self.v6.acquire(k[0].1, n, i) | V6,
                Some(k) => self.v6.acquire_group(e.nhid, &k, n, i) | GROUP | V6,
                None => return,
            },
        };
        let i = idx as usize;
        if self.routes.len() <= i {
            self.routes.resize(i + 1, FastRoute::EMPTY);
        }
        self.routes[i] = FastRoute { fwd, metric: e.metric };
    }

    /// Route `idx` is gone.
    pub(crate) fn clear_route(&mut self, idx: u32) {
        let Some(r) = self.routes.get_mut(idx as usize) else { return };
        let fwd = std::mem::replace(r, FastRoute::EMPTY).fwd;
        if fwd == NONE {
            return;
        }
        match (fwd & V6 != 0, fwd & GROUP != 0) {
            (false, false) => self.v4.release(fwd),
            (false, true) => self.v4.release_group(fwd & !GROUP),
            (true, false) => self.v6.release(fwd & !V6),
            (true, true) => self.v6.release_group(fwd & !(V6 | GROUP)),
        }
    }

    /// The neighbour entry of `ip` on `ifindex` changed.
    pub(crate) fn neigh_changed(&mut self, ifindex: u32, ip: IpAddr, n: &NeighTable) {
        self.v4.neigh_changed(ifindex, ip, n);
        self.v6.neigh_changed(ifindex, ip, n);
    }

    /// Interface `ifindex` changed or went away.
    pub(crate) fn iface_changed(&mut self, ifindex: u32, i: &Ifaces) {
        self.v4.iface_changed(ifindex, i);
        self.v6.iface_changed(ifindex, i);
    }

    /// Number of records in use, both families.
    pub(crate) fn records(&self) -> usize {
        self.v4.ids.len() + self.v6.ids.len()
    }

    /// Number of groups in use, both families.
    pub(crate) fn groups(&self) -> usize {
        self.v4.gids.len() + self.v6.gids.len()
    }

    /// Bytes of the records and the per-route array.
    pub(crate) fn memory(&self) -> usize {
        self.v4.memory()
            + self.v6.memory()
            + self.routes.capacity() * std::mem::size_of::<FastRoute>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_32_bytes_and_route_entries_8() {
        assert_eq!(std::mem::size_of::<Fwd4>(), 32);
        assert_eq!(std::mem::align_of::<Fwd4>(), 32);
        assert_eq!(std::mem::size_of::<Fwd6>(), 64);
        assert_eq!(std::mem::size_of::<FastRoute>(), 8);
    }
}
