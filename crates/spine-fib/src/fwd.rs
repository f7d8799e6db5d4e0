//! Forwarding records: what `bpf_fib_lookup` answers for an IPv4 route with one plain
//! next hop, resolved when the FIB changes instead of on every packet.
//!
//! The lookup for such a route would otherwise chase the route entry (a large
//! [`RouteEntry`](crate::RouteEntry)), its heap-held next hops, the output interface
//! and a hash of the neighbour table: four or five cache lines after the LPM. Here the
//! LPM's value (the route's index) names an 8-byte [`FastRoute`] in a dense array
//! (eight to a cache line), which names a shared 32-byte [`Fwd4`]: output interface,
//! gateway, the interface's MTU and MAC, and the gateway's MAC when its neighbour entry
//! is usable. Routes through the same (interface, gateway) share one record, so a table
//! of a million routes over a few next hops has a few records, always in cache, and a
//! neighbour or interface change rewrites a few records, never the routes.
//!
//! Routes that do not qualify (other types, ECMP, a lightweight tunnel, an IPv6
//! gateway, a locked MTU, IPv6 prefixes) have no record and take the general path.

use std::net::{IpAddr, Ipv4Addr};

use rustc_hash::FxHashMap;

use crate::fib::RouteEntry;
use crate::iface::Ifaces;
use crate::neigh::NeighTable;
use crate::prefix::IpPrefix;
use crate::route::RouteType;

const GATEWAY: u8 = 1;
const NEIGH: u8 = 2;
const IFACE: u8 = 4;
const NONE: u32 = u32::MAX;

/// The forwarding answer for one (output interface, IPv4 gateway) pair, as the FIB's
/// own interfaces and neighbours give it. 32 bytes, aligned: one cache line holds two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C, align(32))]
pub struct Fwd4 {
    /// The output interface.
    pub ifindex: u32,
    /// The gateway in network order (meaningful with a gateway only).
    gateway: [u8; 4],
    /// The interface's MTU, as the FIB holds the interface.
    mtu: u32,
    /// The interface's MAC.
    smac: [u8; 6],
    /// The gateway's MAC, when its neighbour entry is usable.
    dmac: [u8; 6],
    flags: u8,
}

impl Fwd4 {
    /// The gateway's address in network order, `None` for a directly connected route
    /// (the neighbour is the destination itself).
    #[inline]
    pub fn gateway(&self) -> Option<[u8; 4]> {
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

    fn refresh_neigh(&mut self, neigh: &NeighTable) {
        self.flags &= !NEIGH;
        self.dmac = [0; 6];
        if self.flags & GATEWAY == 0 {
            return;
        }
        let ip = IpAddr::V4(Ipv4Addr::from(self.gateway));
        if let Some(n) = neigh.get(self.ifindex, ip).filter(|n| n.state.usable()) {
            self.dmac = n.mac;
            self.flags |= NEIGH;
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
    fwd: u32,
    /// The route's metric (`bpf_fib_lookup` returns it).
    pub metric: u32,
}

impl FastRoute {
    const EMPTY: FastRoute = FastRoute { fwd: NONE, metric: 0 };
}

/// The records and the per-route array, kept by [`crate::FibState`] in step with its
/// routes, neighbours and interfaces.
#[derive(Debug, Clone, Default)]
pub(crate) struct FwdTable {
    recs: Vec<Fwd4>,
    refs: Vec<u32>,
    free: Vec<u32>,
    /// (output interface, gateway) → record (update-only).
    ids: FxHashMap<(u32, Option<u32>), u32>,
    /// By route index.
    routes: Vec<FastRoute>,
}

/// The (interface, gateway) of a route that gets a record, `None` if it does not
/// qualify.
fn key(e: &RouteEntry) -> Option<(u32, Option<u32>)> {
    let IpPrefix::V4(_) = e.prefix else { return None };
    if e.kind != RouteType::Unicast || e.mtu != 0 {
        return None;
    }
    let [nh] = &e.nexthops[..] else { return None };
    if nh.encap {
        return None;
    }
    match nh.gateway {
        None => Some((nh.ifindex, None)),
        Some(IpAddr::V4(g)) => Some((nh.ifindex, Some(u32::from(g)))),
        Some(IpAddr::V6(_)) => None,
    }
}

impl FwdTable {
    /// Route `idx`'s record and metric, if it has one.
    #[inline]
    pub(crate) fn get(&self, idx: u32) -> Option<(&Fwd4, u32)> {
        let r = self.routes.get(idx as usize)?;
        let f = self.recs.get(r.fwd as usize)?;
        Some((f, r.metric))
    }

    /// Route `idx` is now `e`.
    pub(crate) fn set_route(&mut self, idx: u32, e: &RouteEntry, n: &NeighTable, i: &Ifaces) {
        self.clear_route(idx);
        let Some(k) = key(e) else { return };
        let fwd = match self.ids.get(&k) {
            Some(&f) => f,
            None => {
                let mut rec = Fwd4 { ifindex: k.0, ..Fwd4::default() };
                if let Some(g) = k.1 {
                    rec.gateway = g.to_be_bytes();
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
        let f = fwd as usize;
        self.refs[f] -= 1;
        if self.refs[f] == 0 {
            let rec = self.recs[f];
            let gw = rec.gateway().map(u32::from_be_bytes);
            self.ids.remove(&(rec.ifindex, gw));
            self.recs[f] = Fwd4::default();
            self.free.push(fwd);
        }
    }

    /// The neighbour entry of `ip` on `ifindex` changed.
    pub(crate) fn neigh_changed(&mut self, ifindex: u32, ip: IpAddr, n: &NeighTable) {
        let IpAddr::V4(a) = ip else { return };
        if let Some(&f) = self.ids.get(&(ifindex, Some(u32::from(a)))) {
            self.recs[f as usize].refresh_neigh(n);
        }
    }

    /// Interface `ifindex` changed or went away.
    pub(crate) fn iface_changed(&mut self, ifindex: u32, i: &Ifaces) {
        for (rec, &refs) in self.recs.iter_mut().zip(&self.refs) {
            if refs != 0 && rec.ifindex == ifindex {
                rec.refresh_iface(i);
            }
        }
    }

    /// Number of records in use.
    pub(crate) fn records(&self) -> usize {
        self.ids.len()
    }

    /// Bytes of the records and the per-route array.
    pub(crate) fn memory(&self) -> usize {
        self.recs.capacity() * std::mem::size_of::<Fwd4>()
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
        assert_eq!(std::mem::size_of::<FastRoute>(), 8);
    }
}
