//! [`FibState`]: every routing table, the routes, and the neighbour table, as one
//! value that [`FibWriter`] changes by [`FibOp`]s and publishes to lock-free
//! [`FibReader`]s (see [`crate::publish`]): a batch of operations (a burst of netlink
//! events, one BGP update) becomes visible at once.
//!
//! IPv4 tables local and main share one LPM, as the kernel merges them into one trie
//! while only the default policy rules exist (local 0, main 32766, default 32767; with
//! other rules the lookup walks them, [`crate::rule`], and asks each table on its own):
//! each prefix's value is local's best route for it, else
//! main's. The longest prefix of either table wins and local wins a tie, which is the
//! kernel's order of a merged trie's aliases (table 255 before 254), so the lookup
//! `bpf_fib_lookup` makes for every IPv4 packet ([`FibState::lookup_v4_merged`]) is one
//! LPM walk instead of two. Local keeps its own LPM as well (it holds a few addresses);
//! main's routes alone are found through the merged LPM ([`FibState::lookup`] with
//! [`table_id::MAIN`]), with a probe of main's prefixes where a local route shadows
//! them (a control-plane question: the data path asks for the merged answer).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::ecmp;
use crate::fwd::{Fast, Fwd4, Fwd6, FwdTable};
use crate::iface::{Iface, Ifaces};
use crate::lpm::{Lpm, LpmError};
use crate::neigh::{Neigh, NeighTable};
use crate::prefix::IpPrefix;
use crate::publish::{Absorb, Reader, Writer};
use crate::route::{table_id, NextHop, Route, RouteSelector, RouteType};
use crate::rule::{Flow, Rule, RuleResult, RuleSet};
use crate::table::Table;
use crate::Address;

/// Why a route operation was refused (with the kernel's errno where one applies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FibError {
    #[error("a route for {prefix} with metric {metric} exists in table {table}")]
    Exists { table: u32, prefix: IpPrefix, metric: u32 },
    #[error("no such route for {prefix} in table {table}")]
    NotFound { table: u32, prefix: IpPrefix },
    #[error("{kind} route for {prefix}: {reason}")]
    Invalid { kind: RouteType, prefix: IpPrefix, reason: &'static str },
    #[error("table id 0 (unspec) holds no routes")]
    TableUnspec,
    #[error(transparent)]
    Lpm(#[from] LpmError),
}

impl FibError {
    /// The errno the kernel answers a netlink request with in this case.
    pub fn errno(&self) -> i32 {
        match self {
            FibError::Exists { .. } => 17,  // EEXIST
            FibError::NotFound { .. } => 3, // ESRCH
            FibError::Invalid { .. } | FibError::TableUnspec => 22,
            FibError::Lpm(_) => 28, // ENOSPC
        }
    }
}

/// A route as readers see it: its next hops carry their ECMP upper bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteEntry {
    pub table: u32,
    pub prefix: IpPrefix,
    pub kind: RouteType,
    pub metric: u32,
    pub mtu: u32,
    pub prefsrc: Option<IpAddr>,
    /// The nexthop object the route names, 0 for none ([`Route::nhid`]).
    pub nhid: u32,
    pub nexthops: Vec<NextHop>,
    bounds: Vec<i32>,
}

impl RouteEntry {
    /// Each next hop's upper bound in the 31-bit hash space (`fib_nh_upper_bound`).
    pub fn bounds(&self) -> &[i32] {
        &self.bounds
    }

    /// The next hop for a flow of multipath hash `hash` (the kernel's 31-bit
    /// `fib_multipath_hash`); `None` for types without next hops.
    #[inline]
    pub fn select(&self, hash: u32) -> Option<&NextHop> {
        match self.nexthops.len() {
            0 => None,
            1 => self.nexthops.first(),
            _ => self.nexthops.get(ecmp::select(self.bounds.iter().copied(), hash)),
        }
    }
}

/// What a lookup found: the route and, for types that forward, its chosen next hop.
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'a> {
    pub route: &'a RouteEntry,
    pub nexthop: Option<&'a NextHop>,
}

/// A change to the FIB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FibOp {
    /// `ip route add`: fails if the table has a route for the prefix with this metric.
    Add(Route),
    /// `ip route replace`: replaces the route with the same (table, prefix, metric),
    /// or adds it.
    Replace(Route),
    /// `ip route del`.
    Delete(RouteSelector),
    /// Removes every route of a table.
    FlushTable(u32),
    /// Adds or replaces a neighbour entry.
    SetNeigh {
        ifindex: u32,
        ip: IpAddr,
        neigh: Neigh,
    },
    DelNeigh {
        ifindex: u32,
        ip: IpAddr,
    },
    /// Adds or replaces an interface (by its index).
    SetIface(Iface),
    /// Removes an interface.
    DelIface(u32),
    /// Replaces one family's policy rules (`ip rule`) with `rules`.
    SetRules {
        v6: bool,
        rules: Vec<Rule>,
    },
    /// The buckets of resilient nexthop group `nhid` (`ip nexthop ... type
    /// resilient`): for each bucket, the index in the next hops of the routes through
    /// the group of the member it holds. Empty: the group is no longer resilient.
    SetBuckets {
        nhid: u32,
        buckets: Vec<u16>,
    },
}

/// Every table, route and neighbour; readers hold one of these for a burst.
#[derive(Debug, Clone)]
pub struct FibState {
    tables: Vec<Table>,
    routes: Vec<Option<RouteEntry>>,
    free: Vec<u32>,
    neigh: NeighTable,
    ifaces: Ifaces,
    /// The IPv4 routes of tables local and main: each prefix's value is the index of
    /// local's best route for it, else main's.
    merged4: crate::Lpm4,
    /// The same for IPv6. The kernel does not merge them for IPv6: it looks local up,
    /// then main on a miss ([`FibState::lookup_v6_default_index`] gives that answer
    /// from this LPM and `local6_cover`).
    merged6: crate::Lpm6,
    /// Table local's IPv6 prefixes shorter than /128 (the kernel's `ff00::/8`
    /// multicast route; AnyIP ranges): where one holds a destination, local answers
    /// even if main has a longer prefix for it.
    local6_cover: Vec<crate::Prefix6>,
    /// The policy rules of each family.
    rules4: RuleSet,
    rules6: RuleSet,
    /// Resilient nexthop groups' buckets, by group id ([`FibOp::SetBuckets`]).
    buckets: HashMap<u32, Box<[u16]>>,
    /// Forwarding records of the routes with one plain next hop, by route index
    /// ([`crate::fwd`]): kept in step with the routes, neighbours and interfaces.
    fwd: FwdTable,
}

impl Default for FibState {
    fn default() -> FibState {
        FibState {
            tables: Vec::new(),
            routes: Vec::new(),
            free: Vec::new(),
            neigh: NeighTable::default(),
            ifaces: Ifaces::default(),
            merged4: crate::Lpm4::new(),
            merged6: crate::Lpm6::new(),
            local6_cover: Vec::new(),
            rules4: RuleSet::default_for(false),
            rules6: RuleSet::default_for(true),
            buckets: HashMap::new(),
            fwd: FwdTable::default(),
        }
    }
}

fn validate(r: &Route) -> Result<(), FibError> {
    let bad = |reason| Err(FibError::Invalid { kind: r.kind, prefix: r.prefix, reason });
    if r.table == table_id::UNSPEC {
        return Err(FibError::TableUnspec);
    }
    if r.kind.takes_nexthop() {
        if r.nexthops.is_empty() {
            return bad("needs a next hop (a device, and a gateway unless directly connected)");
        }
        if r.nexthops.iter().any(|n| n.weight == 0 || n.weight > 256) {
            return bad("next-hop weights are 1..=256");
        }
    } else if !r.nexthops.is_empty() {
        return bad("gateway, device and multipath can not be specified for this route type");
    }
    Ok(())
}

impl FibState {
    fn table(&self, id: u32) -> Option<&Table> {
        self.tables.iter().find(|t| t.id == id)
    }

    fn table_mut(&mut self, id: u32) -> &mut Table {
        match self.tables.iter().position(|t| t.id == id) {
            Some(i) => &mut self.tables[i],
            None => {
                self.tables.push(Table::new(id));
                self.tables.last_mut().expect("just pushed")
            }
        }
    }

    fn store(&mut self, r: &Route) -> u32 {
        let e = RouteEntry {
            table: r.table,
            prefix: r.prefix,
            kind: r.kind,
            metric: r.metric,
            mtu: r.mtu,
            prefsrc: r.prefsrc,
            nhid: r.nhid,
            nexthops: r.nexthops.clone(),
            bounds: ecmp::upper_bounds(r.nexthops.iter().map(|n| n.weight)),
        };
        self.fwd_set_next(&e);
        match self.free.pop() {
            Some(i) => {
                self.routes[i as usize] = Some(e);
                i
            }
            None => {
                self.routes.push(Some(e));
                (self.routes.len() - 1) as u32
            }
        }
    }

    /// Gives the route about to be stored ([`FibState::store`]) its forwarding record.
    fn fwd_set_next(&mut self, e: &RouteEntry) {
        let idx = self.free.last().copied().unwrap_or(self.routes.len() as u32);
        self.fwd.set_route(idx, e, &self.neigh, &self.ifaces);
    }

    fn drop_route(&mut self, idx: u32) {
        self.routes[idx as usize] = None;
        self.fwd.clear_route(idx);
        self.free.push(idx);
    }

    /// Index of the route with this metric for `p` in table `t`.
    fn find(&self, t: u32, p: IpPrefix, metric: u32) -> Option<u32> {
        let list = self.table(t)?.routes.get(&p)?;
        list.iter().find(|&&(m, _)| m == metric).map(|&(_, i)| i)
    }

    fn add(&mut self, r: &Route, replace: bool) -> Result<(), FibError> {
        validate(r)?;
        if crate::route_index_limit(self.routes.len()) {
            return Err(FibError::Lpm(LpmError::ValueTooLarge(self.routes.len() as u32)));
        }
        let old = self.find(r.table, r.prefix, r.metric);
        if old.is_some() && !replace {
            return Err(FibError::Exists { table: r.table, prefix: r.prefix, metric: r.metric });
        }
        let idx = self.store(r);
        let t = self.table_mut(r.table);
        if let Some(o) = old {
            t.unlink(r.prefix, o);
        }
        t.add(r.prefix, r.metric, idx);
        t.sync(r.prefix)?;
        self.sync_merged(r.table, r.prefix)?;
        if let Some(o) = old {
            self.drop_route(o);
        }
        Ok(())
    }

    fn delete(&mut self, s: &RouteSelector) -> Result<(), FibError> {
        let not_found = FibError::NotFound { table: s.table, prefix: s.prefix };
        let Some(t) = self.table(s.table) else { return Err(not_found) };
        let Some(list) = t.routes.get(&s.prefix) else { return Err(not_found) };
        let hit = list.iter().find(|&&(m, i)| {
            let e = self.routes[i as usize].as_ref().expect("listed routes are stored");
            s.metric.is_none_or(|x| x == m) && s.kind.is_none_or(|k| k == e.kind)
        });
        let Some(&(_, idx)) = hit else { return Err(not_found) };
        let t = self.table_mut(s.table);
        t.unlink(s.prefix, idx);
        t.sync(s.prefix)?;
        self.sync_merged(s.table, s.prefix)?;
        self.drop_route(idx);
        Ok(())
    }

    fn flush(&mut self, id: u32) -> Result<(), FibError> {
        let Some(pos) = self.tables.iter().position(|t| t.id == id) else { return Ok(()) };
        let t = self.tables.remove(pos);
        for (&p, list) in &t.routes {
            self.sync_merged(id, p)?;
            for &(_, idx) in list {
                self.drop_route(idx);
            }
        }
        Ok(())
    }

    /// Points the merged LPM of `p`'s family at `p`'s route after a change to table
    /// `table`: local's best route for `p`, else main's, else nothing; keeps
    /// `local6_cover` in step with local's IPv6 prefixes.
    fn sync_merged(&mut self, table: u32, p: IpPrefix) -> Result<(), FibError> {
        if table != table_id::LOCAL && table != table_id::MAIN {
            return Ok(());
        }
        let best = |id| self.table(id).and_then(|t| t.best(&p));
        let local = best(table_id::LOCAL);
        let merged = local.or_else(|| best(table_id::MAIN));
        match (p, merged) {
            (IpPrefix::V4(q), Some(i)) => {
                self.merged4.insert(q, i)?;
            }
            (IpPrefix::V4(q), None) => {
                self.merged4.remove(q);
            }
            (IpPrefix::V6(q), Some(i)) => {
                self.merged6.insert(q, i)?;
            }
            (IpPrefix::V6(q), None) => {
                self.merged6.remove(q);
            }
        }
        if let IpPrefix::V6(q) = p {
            if table == table_id::LOCAL && q.len() < 128 {
                let at = self.local6_cover.iter().position(|c| *c == q);
                match (local, at) {
                    (Some(_), None) => self.local6_cover.push(q),
                    (None, Some(i)) => {
                        self.local6_cover.swap_remove(i);
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The next hop of `route` for a flow of multipath hash `hash`: by bucket for a
    /// route through a resilient group ([`FibState::res_buckets`]), else by the next
    /// hops' upper bounds ([`RouteEntry::select`]).
    #[inline]
    pub fn select<'a>(&'a self, route: &'a RouteEntry, hash: u32) -> Option<&'a NextHop> {
        if route.nhid != 0 && route.nexthops.len() > 1 {
            if let Some(b) = self.res_buckets(route.nhid).filter(|b| !b.is_empty()) {
                return route.nexthops.get(usize::from(b[hash as usize % b.len()]));
            }
        }
        route.select(hash)
    }

    /// The route behind an LPM value.
    #[inline]
    pub fn route(&self, idx: u32) -> Option<&RouteEntry> {
        self.routes.get(idx as usize)?.as_ref()
    }

    /// Longest-prefix match of `dst` in table `table`, the next hop chosen by `hash`.
    #[inline]
    pub fn lookup(&self, table: u32, dst: IpAddr, hash: u32) -> Option<Resolved<'_>> {
        let t = self.table(table)?;
        let idx = match dst {
            IpAddr::V4(a) if !t.own() => self.main_v4(t, u32::from_std(a)),
            IpAddr::V4(a) => t.v4.lookup(u32::from_std(a)),
            IpAddr::V6(a) if !t.own() => self.main_v6(t, u128::from_std(a)),
            IpAddr::V6(a) => t.v6.lookup(u128::from_std(a)),
        }?;
        let route = self.route(idx)?;
        Some(Resolved { route, nexthop: self.select(route, hash) })
    }

    /// Tables local and main as one, as the kernel looks them up while only the
    /// default policy rules exist: the longest prefix of either, local's route on a
    /// tie. One LPM walk.
    #[inline]
    pub fn lookup_v4_merged(&self, dst: Ipv4Addr, hash: u32) -> Option<Resolved<'_>> {
        let route = self.route(self.merged4.lookup(u32::from(dst))?)?;
        Some(Resolved { route, nexthop: self.select(route, hash) })
    }

    /// The index ([`FibState::route`]) of the route [`FibState::lookup_v4_merged`]
    /// finds for `dst`: one LPM walk, nothing else touched.
    #[inline]
    pub fn lookup_v4_merged_index(&self, dst: Ipv4Addr) -> Option<u32> {
        self.merged4.lookup(u32::from(dst))
    }

    /// Route `idx` ([`FibState::route`]) with its next hop for flow hash `hash`.
    #[inline]
    pub fn resolve(&self, idx: u32, hash: u32) -> Option<Resolved<'_>> {
        let route = self.route(idx)?;
        Some(Resolved { route, nexthop: self.select(route, hash) })
    }

    /// The forwarding record and metric of route `idx`, if it is an IPv4 unicast
    /// route with one next hop (no lightweight tunnel, no IPv6 gateway, no locked
    /// MTU): what `bpf_fib_lookup` answers for it, resolved when the routes,
    /// neighbours or interfaces changed ([`crate::fwd`]). Two cache lines at most,
    /// neither of them the route entry.
    #[inline]
    pub fn fwd_v4(&self, idx: u32) -> Option<(&Fwd4, u32)> {
        match self.fwd.get_v4(idx)? {
            (Fast::One(f), m) => Some((f, m)),
            (Fast::Group(_), _) => None,
        }
    }

    /// As [`FibState::fwd_v4`], and for a multipath route (every next hop one that a
    /// record stands for) its group of records ([`Fast::Group`]).
    #[inline]
    pub fn fast_v4(&self, idx: u32) -> Option<(Fast<'_, [u8; 4]>, u32)> {
        self.fwd.get_v4(idx)
    }

    /// The forwarding record and metric of route `idx`, if it is an IPv6 unicast
    /// route with one next hop (no lightweight tunnel, no IPv4 gateway, no locked
    /// MTU), as [`FibState::fwd_v4`] for IPv4.
    #[inline]
    pub fn fwd_v6(&self, idx: u32) -> Option<(&Fwd6, u32)> {
        match self.fwd.get_v6(idx)? {
            (Fast::One(f), m) => Some((f, m)),
            (Fast::Group(_), _) => None,
        }
    }

    /// As [`FibState::fwd_v6`], and for a multipath route its group of records.
    #[inline]
    pub fn fast_v6(&self, idx: u32) -> Option<(Fast<'_, [u8; 16]>, u32)> {
        self.fwd.get_v6(idx)
    }

    /// The index ([`FibState::route`]) of table `table`'s route for IPv4 destination
    /// `dst`: one LPM walk (in main, where local's routes are merged, see
    /// [`FibState::lookup`]).
    #[inline]
    pub fn lookup_v4_index(&self, table: u32, dst: Ipv4Addr) -> Option<u32> {
        let t = self.table(table)?;
        if t.own() {
            t.v4.lookup(u32::from(dst))
        } else {
            self.main_v4(t, u32::from(dst))
        }
    }

    /// The index ([`FibState::route`]) of table `table`'s route for IPv6 destination
    /// `dst` (its bits, network order as a number): one LPM walk, except in main where
    /// a local route shadows main's (see [`FibState::lookup`]).
    #[inline]
    pub fn lookup_v6_index(&self, table: u32, dst: u128) -> Option<u32> {
        let t = self.table(table)?;
        if t.own() {
            t.v6.lookup(dst)
        } else {
            self.main_v6(t, dst)
        }
    }

    /// The index of the route the kernel's default rules find for IPv6 destination
    /// `dst` in tables local and main (`fib6_rule_lookup`): local's longest prefix if
    /// local has one for `dst`, else main's. One walk of the merged LPM, which gives
    /// the longest prefix of either table (local's on a tie): that is the answer
    /// unless a local prefix shorter than main's longest holds `dst`, which only one
    /// of `local6_cover` can, checked first (the kernel's `ff00::/8`, one mask and
    /// compare; with more than a few such prefixes local is simply walked first).
    #[inline]
    pub fn lookup_v6_default_index(&self, dst: u128) -> Option<u32> {
        const SCAN: usize = 8;
        let c = &self.local6_cover;
        if !c.is_empty() && (c.len() > SCAN || c.iter().any(|p| p.contains(dst))) {
            if let Some(i) = self.table(table_id::LOCAL).and_then(|t| t.v6.lookup(dst)) {
                return Some(i);
            }
        }
        self.merged6.lookup(dst)
    }

    /// Number of forwarding records ([`FibState::fwd_v4`], [`FibState::fwd_v6`]) in
    /// use, and the bytes of the records, the groups and their per-route array.
    pub fn fwd_stats(&self) -> (usize, usize) {
        (self.fwd.records(), self.fwd.memory())
    }

    /// Number of multipath groups of records ([`FibState::fast_v4`]) in use.
    pub fn fwd_groups(&self) -> usize {
        self.fwd.groups()
    }

    /// Route indices ([`FibState::route`]) of [`FibState::lookup_v4_merged`] for a
    /// burst of destinations, looked up interleaved.
    pub fn lookup_v4_merged_batch(&self, dsts: &[u32], out: &mut [Option<u32>]) {
        self.merged4.lookup_batch(dsts, out);
    }

    /// Main's own answer for `a` (table `main` is `t`): the merged LPM's, unless a
    /// local route shadows main's routes there; then main's longest prefix not longer
    /// than the local one, probed length by length.
    fn main_v4(&self, main: &Table, a: u32) -> Option<u32> {
        let idx = self.merged4.lookup(a)?;
        let r = self.route(idx)?;
        if r.table == table_id::MAIN {
            return Some(idx);
        }
        (0..=r.prefix.len()).rev().find_map(|len| {
            let p = crate::Prefix4::truncating(a, len).ok()?;
            main.best(&IpPrefix::V4(p))
        })
    }

    /// The index of the route the merged IPv6 LPM of tables local and main holds for
    /// `dst`: the longest prefix of either (local's on a tie). A route with a
    /// forwarding record ([`FibState::fast_v6`]) found here is main's answer for
    /// `dst` (`BPF_FIB_LOOKUP_DIRECT`): local's IPv6 routes get no record.
    #[inline]
    pub fn lookup_v6_merged_index(&self, dst: u128) -> Option<u32> {
        self.merged6.lookup(dst)
    }

    /// Main's own answer for IPv6 destination `a`, as [`FibState::main_v4`] gives
    /// IPv4's: the merged LPM's unless a local route shadows main's there.
    fn main_v6(&self, main: &Table, a: u128) -> Option<u32> {
        let idx = self.merged6.lookup(a)?;
        let r = self.route(idx)?;
        if r.table == table_id::MAIN {
            return Some(idx);
        }
        (0..=r.prefix.len()).rev().find_map(|len| {
            let p = crate::Prefix6::truncating(a, len).ok()?;
            main.best(&IpPrefix::V6(p))
        })
    }

    /// The routes for exactly `prefix` in `table`, lowest metric first.
    pub fn routes_for(&self, table: u32, prefix: IpPrefix) -> impl Iterator<Item = &RouteEntry> {
        let list = self.table(table).and_then(|t| t.routes.get(&prefix));
        list.into_iter().flatten().filter_map(|&(_, i)| self.route(i))
    }

    /// The IPv4 lookup with an output interface (`flowi4_oif`, `fib_table_lookup`'s
    /// `fib_lookup_good_nhc`): the longest prefix, then the lowest metric, with a route
    /// that drops (blackhole, unreachable, prohibit, throw) or has a next hop through
    /// `oif`; that next hop is the answer. A slow path: it probes each prefix length.
    pub fn lookup_v4_oif(
        &self,
        table: u32,
        dst: std::net::Ipv4Addr,
        oif: u32,
    ) -> Option<Resolved<'_>> {
        let t = self.table(table)?;
        let a = u32::from(dst);
        for len in (0..=32u32).rev() {
            let Ok(p) = crate::Prefix4::truncating(a, len) else { continue };
            let Some(list) = t.routes.get(&IpPrefix::V4(p)) else { continue };
            for &(_, i) in list {
                let Some(route) = self.route(i) else { continue };
                if !route.kind.takes_nexthop() {
                    return Some(Resolved { route, nexthop: None });
                }
                if let Some(nh) = route.nexthops.iter().find(|n| n.ifindex == oif) {
                    return Some(Resolved { route, nexthop: Some(nh) });
                }
            }
        }
        None
    }

    /// Route indices ([`FibState::route`]) for a burst of IPv4 destinations, looked up
    /// interleaved; `None` where no route matches or the table does not exist.
    pub fn lookup_v4_batch(&self, table: u32, dsts: &[u32], out: &mut [Option<u32>]) {
        match self.table(table) {
            Some(t) if !t.own() => {
                for (a, o) in dsts.iter().zip(out.iter_mut()) {
                    *o = self.main_v4(t, *a);
                }
            }
            Some(t) => t.v4.lookup_batch(dsts, out),
            None => out.fill(None),
        }
    }

    /// The lookup the kernel's default rules make (`ip rule`: local, main, default).
    /// IPv4: local and main merged ([`FibState::lookup_v4_merged`]), then the default
    /// table on a miss or a `throw`. IPv6: the first table with a match, skipping a
    /// `throw` route to the next table.
    pub fn lookup_default_rules(&self, dst: IpAddr, hash: u32) -> Option<Resolved<'_>> {
        if let IpAddr::V4(a) = dst {
            return match self.lookup_v4_merged(a, hash) {
                Some(r) if r.route.kind != RouteType::Throw => Some(r),
                _ => self.lookup(table_id::DEFAULT, dst, hash),
            };
        }
        [table_id::LOCAL, table_id::MAIN, table_id::DEFAULT]
            .into_iter()
            .filter_map(|t| self.lookup(t, dst, hash))
            .find(|r| r.route.kind != RouteType::Throw)
    }

    /// The policy rules' walk as `bpf_fib_lookup` makes it (`__fib_lookup` /
    /// `fib6_rule_lookup` with `fib6_rule_action_alt`), for `flow`'s family:
    /// IPv4 looks each rule's table up through `flow.oif` when it is set
    /// ([`FibState::lookup_v4_oif`]), goes on past a `throw` or a suppressed answer
    /// (`suppress_prefixlength`), and stops at a drop route; IPv6 stops at any route a
    /// table holds and suppresses nothing (the lookup has no `rt6_info`).
    pub fn lookup_by_rules(&self, flow: &Flow, hash: u32) -> RuleResult<Resolved<'_>> {
        match flow.dst {
            IpAddr::V4(dst) => self.rules4.walk(flow, |table, rule| {
                let r = if flow.oif != 0 {
                    self.lookup_v4_oif(table, dst, flow.oif)?
                } else {
                    self.lookup(table, flow.dst, hash)?
                };
                match r.route.kind {
                    // `fib_table_lookup` answers -EAGAIN: the next rule.
                    RouteType::Throw => None,
                    // Errors are final, never suppressed.
                    RouteType::Blackhole | RouteType::Unreachable | RouteType::Prohibit => Some(r),
                    // `fib4_rule_suppress`.
                    _ if i64::from(r.route.prefix.len()) <= i64::from(rule.suppress_prefixlen) => {
                        None
                    }
                    _ => Some(r),
                }
            }),
            IpAddr::V6(_) => self.rules6.walk(flow, |t, _| self.lookup(t, flow.dst, hash)),
        }
    }

    /// The buckets of resilient nexthop group `nhid`, if it is one: the member
    /// index ([`RouteEntry::nexthops`]) each bucket holds.
    #[inline]
    pub fn res_buckets(&self, nhid: u32) -> Option<&[u16]> {
        self.buckets.get(&nhid).map(|b| &b[..])
    }

    /// One family's policy rules.
    #[inline]
    pub fn rules(&self, v6: bool) -> &RuleSet {
        if v6 {
            &self.rules6
        } else {
            &self.rules4
        }
    }

    /// The neighbour entry for `ip` on `ifindex`.
    #[inline]
    pub fn neigh(&self, ifindex: u32, ip: IpAddr) -> Option<&Neigh> {
        self.neigh.get(ifindex, ip)
    }

    /// Interface `ifindex`, as the FIB was given it ([`FibOp::SetIface`]).
    #[inline]
    pub fn iface(&self, ifindex: u32) -> Option<&Iface> {
        self.ifaces.get(ifindex)
    }

    /// Every interface the FIB was given, by index.
    pub fn ifaces(&self) -> &[Iface] {
        self.ifaces.all()
    }

    /// The IPv6 source choice over [`FibState::ifaces`] (`BPF_FIB_LOOKUP_SRC`),
    /// rebuilt with every interface change.
    #[inline]
    pub fn src_v6(&self) -> &crate::SrcV6 {
        self.ifaces.src_v6()
    }

    /// All routes of a table, by prefix and metric (control plane).
    pub fn routes(&self, table: u32) -> Vec<&RouteEntry> {
        let Some(t) = self.table(table) else { return Vec::new() };
        let mut v: Vec<_> =
            t.routes.values().flatten().filter_map(|&(_, i)| self.route(i)).collect();
        v.sort_by_key(|e| (e.prefix, e.metric));
        v
    }

    /// Whether table `id` was ever given a route (the kernel keeps a table once made).
    pub fn has_table(&self, id: u32) -> bool {
        self.table(id).is_some()
    }

    /// Table ids that hold routes.
    pub fn table_ids(&self) -> Vec<u32> {
        self.tables.iter().filter(|t| !t.routes.is_empty()).map(|t| t.id).collect()
    }

    /// Bytes of the LPM lookup structures, all tables.
    pub fn lpm_memory(&self) -> crate::Memory {
        let (m4, m6) = (self.merged4.memory(), self.merged6.memory());
        let start = crate::Memory { lookup: m4.lookup + m6.lookup, update: m4.update + m6.update };
        self.tables.iter().fold(start, |m, t| {
            let (a, b) = (t.v4.memory(), t.v6.memory());
            crate::Memory {
                lookup: m.lookup + a.lookup + b.lookup,
                update: m.update + a.update + b.update,
            }
        })
    }
}

impl Absorb<FibOp> for FibState {
    type Error = FibError;

    fn absorb(&mut self, op: &FibOp) -> Result<(), FibError> {
        match op {
            FibOp::Add(r) => self.add(r, false),
            FibOp::Replace(r) => self.add(r, true),
            FibOp::Delete(s) => self.delete(s),
            FibOp::FlushTable(t) => self.flush(*t),
            FibOp::SetNeigh { ifindex, ip, neigh } => {
                self.neigh.set(*ifindex, *ip, *neigh);
                self.fwd.neigh_changed(*ifindex, *ip, &self.neigh);
                Ok(())
            }
            FibOp::DelNeigh { ifindex, ip } => {
                self.neigh.remove(*ifindex, *ip);
                self.fwd.neigh_changed(*ifindex, *ip, &self.neigh);
                Ok(())
            }
            FibOp::SetIface(i) => {
                self.ifaces.set(i.clone());
                self.fwd.iface_changed(i.ifindex, &self.ifaces);
                Ok(())
            }
            FibOp::DelIface(i) => {
                self.ifaces.remove(*i);
                self.fwd.iface_changed(*i, &self.ifaces);
                Ok(())
            }
            FibOp::SetRules { v6, rules } => {
                let mut set = RuleSet::new(*v6, rules.clone());
                if *v6 {
                    self.rules6 = set;
                } else {
                    // `fib_unmerge`: once custom, the tables stay apart.
                    if !self.rules4.is_default() {
                        set.unmerge();
                    }
                    self.rules4 = set;
                }
                Ok(())
            }
            FibOp::SetBuckets { nhid, buckets } => {
                if buckets.is_empty() {
                    self.buckets.remove(nhid);
                } else {
                    self.buckets.insert(*nhid, buckets.clone().into_boxed_slice());
                }
                Ok(())
            }
        }
    }
}

/// The read side of the FIB: `Clone + Send + Sync`; [`FibReader::load`] gives a
/// consistent [`FibState`] for a burst of lookups.
pub type FibReader = Reader<FibState>;

/// A published [`FibState`] held by a reader ([`FibReader::load`]): a worker keeps one
/// for a burst of lookups instead of loading for each. The writer's next change waits
/// for the copy it holds to be dropped ([`crate::publish`]), so it is held for a burst,
/// not across idle time.
pub type FibSnapshot = arc_swap::Guard<std::sync::Arc<FibState>>;

/// The write side of the FIB, owned by one control thread.
#[derive(Debug)]
pub struct FibWriter {
    w: Writer<FibState, FibOp>,
}

impl FibWriter {
    /// An empty FIB and its first reader.
    pub fn new() -> (FibWriter, FibReader) {
        let (w, r) = Writer::new(FibState::default());
        (FibWriter { w }, r)
    }

    pub fn reader(&self) -> FibReader {
        self.w.reader()
    }

    /// Applies one change; readers see it after [`FibWriter::publish`].
    pub fn apply(&mut self, op: FibOp) -> Result<(), FibError> {
        self.w.apply(op)
    }

    pub fn add(&mut self, r: Route) -> Result<(), FibError> {
        self.apply(FibOp::Add(r))
    }

    pub fn replace(&mut self, r: Route) -> Result<(), FibError> {
        self.apply(FibOp::Replace(r))
    }

    pub fn delete(&mut self, s: RouteSelector) -> Result<(), FibError> {
        self.apply(FibOp::Delete(s))
    }

    /// Makes every change since the last publish visible to readers at once.
    pub fn publish(&mut self) -> bool {
        self.w.publish()
    }

    /// The state with every applied change, published or not.
    pub fn view(&mut self) -> &FibState {
        self.w.view()
    }
}
