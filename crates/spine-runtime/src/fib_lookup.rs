//! `bpf_fib_lookup` (helper 69) as the kernel's `bpf_xdp_fib_lookup` answers it
//! (`net/core/filter.c`: `bpf_ipv4_fib_lookup`, `bpf_ipv6_fib_lookup`): the same
//! `struct bpf_fib_lookup` in and out, the same flags, the same return codes, in the
//! same order of checks, against spine's FIB and the router's interfaces.
//!
//! While a family has only its default policy rules, the table walk is the kernel's
//! without custom rules: IPv4 looks up main merged with local (one LPM in the FIB,
//! `FibState::lookup_v4_merged`), then the default table on a miss or a throw; IPv6
//! looks up local, then main. Otherwise the FIB's rules are walked
//! (`spine_fib::RuleSet::walk`) with what the kernel's rules see of a
//! `bpf_fib_lookup`: the ingress device as iif (loopback and the device as oif with
//! `OUTPUT`), the struct's mark with `MARK` (else 0), the DSCP bits, the l4 protocol,
//! the ports, the addresses; `DIRECT` bypasses them. IPv4 goes on past a table that
//! finds nothing, a throw, or a result a rule suppresses (`suppress_prefixlength`);
//! a rule's `unreachable` action answers `NOT_FWDED` (`-ENETUNREACH`), unlike an
//! unreachable route. IPv6 (`fib6_rule_action_alt`) stops at any route a table holds,
//! suppresses nothing, and answers every rule drop action with `NOT_FWDED`.
//! ECMP picks the kernel's next hop for every flow when [`FibEnv::with_multipath_seed`]
//! is the namespace's `net.ipv4.fib_multipath_hash_seed` (hash policy 0, layer 3; see
//! `spine_fib::mphash`), IPv4 preferring a next hop whose source address is the
//! lookup's. A route's MTU counts only when locked (`Route::mtu`).
//!
//! A next hop with a lightweight-tunnel encapsulation answers `UNSUPP_LWT`, as the
//! kernel's (its MTU headroom is not subtracted first: the kernel's is for encap types
//! that redirect output, such as seg6). What the FIB does not model answers as the
//! kernel does when the feature is unused: no l3mdev (DIRECT uses the main table), no next-hop exceptions (no learned path MTU), no TOS/DSCP routes, no
//! rules on a full DSCP (`FRA_DSCP`), an interface group or a VRF. Routes through next-hop objects (`nhid`)
//! reach the FIB resolved (`spine_rtnl`, `Route::nhid`) and are chosen among as the
//! kernel's group selection (`nexthop_select_path`) chooses: by the hash alone, without
//! a multipath route's source-address preference; IPv6 with `OUTPUT` takes the
//! group's first member; a member whose gateway's neighbour entry is not valid
//! (`INCOMPLETE`, `FAILED`) is passed over (`nexthop_is_good_nh`).
//!
//! `crates/spine-difftest/tests/fib_lookup.rs` holds this to the kernel, byte for
//! byte, on thousands of lookups in a namespace that test builds.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use spine_fib::{ecmp, table_id, Fast, FibReader, FibState, Flow, RouteType, RuleResult};

/// `struct bpf_fib_lookup`: 64 bytes.
pub const PARAMS_LEN: usize = 64;

/// The flags (`BPF_FIB_LOOKUP_*`).
pub mod flags {
    pub const DIRECT: u64 = 1 << 0;
    pub const OUTPUT: u64 = 1 << 1;
    pub const SKIP_NEIGH: u64 = 1 << 2;
    pub const TBID: u64 = 1 << 3;
    pub const SRC: u64 = 1 << 4;
    pub const MARK: u64 = 1 << 5;
    pub const ALL: u64 = DIRECT | OUTPUT | SKIP_NEIGH | TBID | SRC | MARK;
}

/// The return codes (`BPF_FIB_LKUP_RET_*`).
pub mod ret {
    pub const SUCCESS: i64 = 0;
    pub const BLACKHOLE: i64 = 1;
    pub const UNREACHABLE: i64 = 2;
    pub const PROHIBIT: i64 = 3;
    pub const NOT_FWDED: i64 = 4;
    pub const FWD_DISABLED: i64 = 5;
    pub const UNSUPP_LWT: i64 = 6;
    pub const NO_NEIGH: i64 = 7;
    pub const FRAG_NEEDED: i64 = 8;
    pub const NO_SRC_ADDR: i64 = 9;
}

const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const ENODEV: i64 = 19;
const EAFNOSUPPORT: i64 = 97;
const IP_MAX_MTU: u32 = 0xfff0;
const IP6_MAX_MTU: u32 = 65535 + 40;
const IPV6_MIN_MTU: u32 = 1280;
/// The loopback device's index in every namespace: a lookup's iif with OUTPUT.
const LOOPBACK_IFINDEX: u32 = 1;

/// One interface of the router as the lookup needs it.
pub use spine_fib::Iface;

/// What `bpf_fib_lookup` reads: the FIB and the interfaces, shared by every worker.
/// An interface is the configured one ([`FibEnv::new`]) if there is one, else the one
/// the FIB holds (a mirrored FIB follows the kernel's: `spine_rtnl`).
#[derive(Debug, Clone)]
pub struct FibEnv {
    pub fib: FibReader,
    /// The configured interfaces, sorted by ifindex.
    ifaces: Vec<Iface>,
    /// `net.ipv4.fib_multipath_hash_seed` (which IPv6 uses too): with the kernel's seed,
    /// ECMP picks the kernel's next hop for every flow.
    mp_seed: u32,
    /// Whether routes with forwarding records are answered from them
    /// ([`FibEnv::without_fast_path`]).
    fast: bool,
    /// The configured interfaces' IPv6 source choice (`SRC` in the fast path; the
    /// FIB's own interfaces have theirs in the FIB state, `FibState::src_v6`).
    src6: spine_fib::SrcV6,
}

impl FibEnv {
    pub fn new(fib: FibReader, mut ifaces: Vec<Iface>) -> FibEnv {
        ifaces.sort_by_key(|i| i.ifindex);
        ifaces.dedup_by_key(|i| i.ifindex);
        let src6 = spine_fib::SrcV6::new(&ifaces);
        FibEnv { fib, ifaces, mp_seed: 0, fast: true, src6 }
    }

    /// Every lookup takes the general path, never the forwarding records
    /// (`spine_fib::fwd`): the same answers, for tests and measurements that compare.
    pub fn without_fast_path(mut self) -> FibEnv {
        self.fast = false;
        self
    }

    /// The multipath hash seed (`net.ipv4.fib_multipath_hash_seed`).
    pub fn with_multipath_seed(mut self, seed: u32) -> FibEnv {
        self.mp_seed = seed;
        self
    }

    /// The MTU of interface `ifindex` (configured, else in the FIB), for
    /// `bpf_check_mtu`.
    pub fn mtu(&self, ifindex: u32) -> Option<u32> {
        let state = self.fib.load();
        self.iface(&state, ifindex).map(|i| i.mtu)
    }

    /// Interface `ifindex`: the configured one, else the one FIB state `st` holds.
    pub fn iface<'a>(&'a self, st: &'a FibState, ifindex: u32) -> Option<&'a Iface> {
        match self.ifaces.binary_search_by_key(&ifindex, |i| i.ifindex) {
            Ok(i) => Some(&self.ifaces[i]),
            Err(_) => st.iface(ifindex),
        }
    }

    /// `bpf_fib_lookup(ctx, params, plen, flags)` on a copy of the program's struct;
    /// the caller writes `p` back. `plen` and `flags` are the raw registers: the kernel
    /// reads them as `int` and `u32`.
    pub fn lookup(&self, p: &mut [u8; PARAMS_LEN], plen: u64, fl: u64) -> i64 {
        self.lookup_in(&self.fib.load(), p, plen, fl)
    }

    /// [`FibEnv::lookup`] in FIB state `st`: one this view's reader loaded
    /// ([`spine_fib::FibSnapshot`]), held for a burst of lookups.
    pub fn lookup_in(&self, st: &FibState, p: &mut [u8; PARAMS_LEN], plen: u64, fl: u64) -> i64 {
        if bad_args(plen, fl) {
            return -spine_abi::errno::EINVAL;
        }
        let fl = fl & u64::from(u32::MAX);
        match p[0] {
            AF_INET => self.lookup_v4(st, p, fl),
            AF_INET6 => self.lookup_v6(st, p, fl),
            _ => -EAFNOSUPPORT,
        }
    }

    fn lookup_v4(&self, st: &FibState, p: &mut [u8; PARAMS_LEN], fl: u64) -> i64 {
        let Some(dev) = self.iface(st, rd32(p, 8)) else { return -ENODEV };
        if !dev.forward_v4 {
            return ret::FWD_DISABLED;
        }
        // BPF_FIB_LOOKUP_OUTPUT: the device is the output interface, and only routes
        // through it match (`fib_lookup_good_nhc`).
        let oif = if fl & flags::OUTPUT != 0 { dev.ifindex } else { 0 };
        let src: [u8; 4] = p[16..20].try_into().expect("4 bytes");
        let dst = Ipv4Addr::from(rd_be32(p, 32));
        let direct = fl & flags::DIRECT != 0;
        // DIRECT's table: main unless TBID names another. fib_get_table: table 0 is
        // main, and local is merged into main while only the default rules exist (the
        // general path below looks there too).
        let tbid = direct_tbid(p, fl).unwrap_or(table_id::MAIN);
        let in_merged = !direct || [0, table_id::MAIN, table_id::LOCAL].contains(&tbid);
        // The fast path: with DIRECT or only the default rules (the merged local and
        // main tables, or DIRECT's table), or custom rules without OUTPUT (`by_rules`),
        // a route with a forwarding record or group (`spine_fib::fwd`) is answered from
        // the records alone (with OUTPUT, a record through the device). Anything else,
        // and the merged LPM's answer for it without OUTPUT, goes on below.
        let mut walked = None;
        let default_rules = st.rules(false).is_default();
        // Custom rules without OUTPUT: the rules' walk over each table's own LPM, as
        // `lookup_by_rules` walks it, answering from a record; a route without one, or
        // a rule that would suppress, leaves the lookup to the general path.
        let by_rules = |p: &[u8; PARAMS_LEN]| {
            let flow = flow_v4(p, fl, dev.ifindex, oif, src, dst);
            let walk = st.rules(false).walk(&flow, |t, rule| {
                let i = st.lookup_v4_index(t, dst)?;
                Some(Some(i).filter(|&i| rule.suppress_prefixlen < 0 && st.fast_v4(i).is_some()))
            });
            match walk {
                RuleResult::Table(i) => i,
                _ => None,
            }
        };
        if self.fast && (direct || default_rules || oif == 0) {
            let idx = if direct || default_rules {
                if in_merged {
                    st.lookup_v4_merged_index(dst)
                } else {
                    st.lookup_v4_index(tbid, dst)
                }
            } else {
                by_rules(p)
            };
            // With OUTPUT, a route with a next hop through the device (one, or a
            // group's member): the best route of the longest prefix qualifies, so
            // `lookup_v4_oif` would stop at it, at its first next hop through the
            // device.
            let hit = idx.and_then(|i| Some((i, st.fast_v4(i)?))).filter(|(_, (fast, _))| {
                oif == 0
                    || match fast {
                        Fast::One(f) => f.ifindex == oif,
                        Fast::Group(g) => g.through(oif).is_some(),
                    }
            });
            if let Some((i, (fast, metric))) = hit {
                let f = match fast {
                    Fast::One(f) => f,
                    Fast::Group(g) if oif != 0 => match g.through(oif).and_then(|i| g.member(i)) {
                        Some(f) => f,
                        None => return ret::NOT_FWDED,
                    },
                    // The general path's choices below, over the records.
                    Fast::Group(g) => {
                        let hash = spine_fib::mphash::hash_v4(src, dst.octets(), self.mp_seed);
                        let i = if g.nhid() != 0 {
                            let good = |i| g.member(i).is_some_and(|m| m.good());
                            ecmp::select_group(st.res_buckets(g.nhid()), g.bounds(), good, hash)
                        } else {
                            let saddr = u32::from_be_bytes(src);
                            let owns_src = |i| {
                                g.member(i).is_some_and(|m| {
                                    let gw = m.gateway().map(Ipv4Addr::from);
                                    self.iface(st, m.ifindex)
                                        .is_some_and(|d| u32::from(select_src_v4(d, gw)) == saddr)
                                })
                            };
                            ecmp::select_preferring_src(g.bounds(), owns_src, hash, saddr != 0)
                        };
                        match g.member(i) {
                            Some(f) => f,
                            None => return ret::NOT_FWDED,
                        }
                    }
                };
                let mtu = |m: u32| m.min(IP_MAX_MTU);
                return self.forward(st, p, fl, IpAddr::V4(dst), i, f, metric, mtu);
            }
            // OUTPUT's answer is not the merged LPM's: looked up again below.
            if in_merged && oif == 0 && (direct || default_rules) {
                walked = Some(idx);
            }
        }
        let find = |table: u32| {
            if oif != 0 {
                st.lookup_v4_oif(table, dst, oif)
            } else {
                st.lookup(table, IpAddr::V4(dst), 0)
            }
        };
        // With only the default policy rules the kernel merges the local table into main (one trie,
        // local's routes first on a tie), and `fib_lookup` tries main, then, on a miss
        // or a throw, the default table. The FIB keeps that merge as one LPM (one walk
        // per packet); OUTPUT's filtered lookup merges the two tables' answers here.
        let merged = || {
            if let Some(idx) = walked {
                return idx.and_then(|i| st.resolve(i, 0));
            }
            if oif == 0 {
                return st.lookup_v4_merged(dst, 0);
            }
            match (find(table_id::LOCAL), find(table_id::MAIN)) {
                (Some(l), Some(m)) if m.route.prefix.len() > l.route.prefix.len() => Some(m),
                (l, m) => l.or(m),
            }
        };
        let res = if direct {
            if in_merged {
                classify_v4(merged())
            } else {
                classify_v4(find(tbid))
            }
        } else if st.rules(false).is_default() {
            match merged() {
                None => classify_v4(find(table_id::DEFAULT)),
                Some(r) if r.route.kind == RouteType::Throw => classify_v4(find(table_id::DEFAULT)),
                r => classify_v4(r),
            }
        } else {
            let flow = flow_v4(p, fl, dev.ifindex, oif, src, dst);
            match st.lookup_by_rules(&flow, 0) {
                RuleResult::Table(r) => classify_v4(Some(r)),
                // The rule's action: -EINVAL, -ENETUNREACH, -EACCES.
                RuleResult::Blackhole => Err(ret::BLACKHOLE),
                RuleResult::Unreachable | RuleResult::None => Err(ret::NOT_FWDED),
                RuleResult::Prohibit => Err(ret::PROHIBIT),
            }
        };
        let res = match res {
            Ok(r) => r,
            Err(code) => return code,
        };
        let route = res.route;
        if route.kind != RouteType::Unicast {
            return ret::NOT_FWDED;
        }
        let nh = if oif != 0 {
            res.nexthop
        } else if route.nexthops.len() > 1 && route.nhid != 0 {
            let hash = spine_fib::mphash::hash_v4(src, dst.octets(), self.mp_seed);
            route.nexthops.get(select_group(st, route, hash))
        } else if route.nexthops.len() > 1 {
            let hash = spine_fib::mphash::hash_v4(src, dst.octets(), self.mp_seed);
            route.nexthops.get(self.select_multipath_v4(st, route, hash, u32::from_be_bytes(src)))
        } else {
            route.nexthops.first()
        };
        let Some(nh) = nh else { return ret::NOT_FWDED };
        let Some(out) = self.iface(st, nh.ifindex) else { return ret::NOT_FWDED };
        // ip_mtu_from_fib_result: a locked route MTU, else the device's.
        let mtu = if route.mtu != 0 { route.mtu } else { out.mtu.min(IP_MAX_MTU) };
        if u32::from(rd16(p, 6)) > mtu {
            wr16(p, 6, mtu as u16);
            return ret::FRAG_NEEDED;
        }
        // `nhc_lwtstate`: lightweight tunnels are not handled.
        if nh.encap {
            return ret::UNSUPP_LWT;
        }
        wr32(p, 12, route.metric);
        wr32(p, 8, out.ifindex);
        if fl & flags::SRC != 0 {
            // fib_result_prefsrc: the route's `src`, else the next hop's own source.
            let a = match route.prefsrc {
                Some(IpAddr::V4(a)) => a,
                _ => select_src_v4(out, gw4(nh)),
            };
            p[16..20].copy_from_slice(&a.octets());
        }
        let next = match nh.gateway {
            Some(IpAddr::V4(g)) => {
                p[32..36].copy_from_slice(&g.octets());
                IpAddr::V4(g)
            }
            Some(IpAddr::V6(g)) => {
                // An IPv4 route via an IPv6 gateway (RFC 5549): the answer becomes IPv6.
                p[0] = AF_INET6;
                p[32..48].copy_from_slice(&g.octets());
                IpAddr::V6(g)
            }
            None => IpAddr::V4(Ipv4Addr::from(rd_be32(p, 32))),
        };
        self.finish(st, p, fl, out, next, mtu)
    }

    /// The rest of [`FibEnv::lookup_v4`] or [`FibEnv::lookup_v6`] for a route with a
    /// forwarding record `f` (a unicast route with one next hop, through neither a
    /// tunnel nor a gateway of the other family, its MTU the device's; `mtu_of` is the
    /// family's device MTU bounds): the same checks in the same order, from the record,
    /// the configured interfaces (which shadow the FIB's) and, for a directly connected
    /// route, the destination's neighbour entry.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn forward<G: spine_fib::GatewayBytes>(
        &self,
        st: &FibState,
        p: &mut [u8; PARAMS_LEN],
        fl: u64,
        dst: IpAddr,
        route: u32,
        f: &spine_fib::Fwd<G>,
        metric: u32,
        mtu_of: impl Fn(u32) -> u32,
    ) -> i64 {
        let configured = match self.ifaces.len() {
            0 => None,
            _ => self.ifaces.binary_search_by_key(&f.ifindex, |i| i.ifindex).ok(),
        };
        let (mtu, smac) = match configured {
            Some(i) => (self.ifaces[i].mtu, self.ifaces[i].mac),
            None => match f.iface() {
                Some(d) => d,
                None => return ret::NOT_FWDED,
            },
        };
        let mtu = mtu_of(mtu);
        if u32::from(rd16(p, 6)) > mtu {
            wr16(p, 6, mtu as u16);
            return ret::FRAG_NEEDED;
        }
        let gw = f.gateway();
        if let Some(g) = gw {
            let g = g.as_ref();
            p[32..32 + g.len()].copy_from_slice(g);
        }
        wr32(p, 12, metric);
        wr32(p, 8, f.ifindex);
        if fl & flags::SRC != 0 {
            if let Err(code) = self.fast_src(st, p, dst, route, f.ifindex, gw) {
                return code;
            }
        }
        if fl & flags::SKIP_NEIGH == 0 {
            let dmac = match gw {
                Some(_) => f.gateway_mac(),
                None => st.neigh(f.ifindex, dst).filter(|n| n.state.usable()).map(|n| n.mac),
            };
            let Some(dmac) = dmac else { return ret::NO_NEIGH };
            p[58..64].copy_from_slice(&dmac);
            p[52..58].copy_from_slice(&smac);
        }
        wr32(p, 48, 0); // h_vlan_proto, h_vlan_TCI
        if mtu != 0 {
            wr16(p, 6, mtu as u16);
        }
        ret::SUCCESS
    }

    /// `SRC` for [`FibEnv::forward`], as the general path: the route's `src`, else the
    /// output interface's address chosen toward the gateway (IPv4) or the destination
    /// (IPv6). Out of line: most lookups do not ask.
    #[inline(never)]
    fn fast_src<G: spine_fib::GatewayBytes>(
        &self,
        st: &FibState,
        p: &mut [u8; PARAMS_LEN],
        dst: IpAddr,
        route: u32,
        ifindex: u32,
        gw: Option<G>,
    ) -> Result<(), i64> {
        let prefsrc = st.route(route).and_then(|r| r.prefsrc);
        match (dst, prefsrc) {
            (IpAddr::V4(_), Some(IpAddr::V4(a))) => p[16..20].copy_from_slice(&a.octets()),
            (IpAddr::V6(_), Some(IpAddr::V6(a))) => p[16..32].copy_from_slice(&a.octets()),
            (IpAddr::V4(_), _) => {
                // The record found an interface, so `iface` does too.
                let Some(out) = self.iface(st, ifindex) else { return Err(ret::NOT_FWDED) };
                let toward = gw.map(|g| {
                    let g = g.as_ref();
                    Ipv4Addr::new(g[0], g[1], g[2], g[3])
                });
                p[16..20].copy_from_slice(&select_src_v4(out, toward).octets());
            }
            (IpAddr::V6(d), _) => {
                let a = match self.src_v6_records(st, ifindex, d) {
                    Some(a) => a,
                    None => match self.iface(st, ifindex) {
                        Some(out) => self.select_src_v6(st, out, d),
                        None => return Err(ret::NOT_FWDED),
                    },
                };
                match a {
                    Some(a) => p[16..32].copy_from_slice(&a.octets()),
                    None => return Err(ret::NO_SRC_ADDR),
                }
            }
        }
        Ok(())
    }

    /// `fib_select_multipath`: each next hop scores 2 when its own source address
    /// (`nh_saddr`) is the lookup's source and 1 when the hash falls under its upper
    /// bound; the first with the best score wins.
    fn select_multipath_v4(
        &self,
        st: &FibState,
        route: &spine_fib::RouteEntry,
        hash: u32,
        saddr: u32,
    ) -> usize {
        let owns_src = |i: usize| {
            let nh = &route.nexthops[i];
            self.iface(st, nh.ifindex)
                .is_some_and(|d| u32::from(select_src_v4(d, gw4(nh))) == saddr)
        };
        ecmp::select_preferring_src(route.bounds().iter().copied(), owns_src, hash, saddr != 0)
    }

    fn lookup_v6(&self, st: &FibState, p: &mut [u8; PARAMS_LEN], fl: u64) -> i64 {
        let src = Ipv6Addr::from(rd_be128(p, 16));
        let dst = Ipv6Addr::from(rd_be128(p, 32));
        // Link-local, multicast and loopback addresses are never forwarded.
        if need_strict(dst) || need_strict(src) {
            return ret::NOT_FWDED;
        }
        let Some(dev) = self.iface(st, rd32(p, 8)) else { return -ENODEV };
        if !dev.forward_v6 {
            return ret::FWD_DISABLED;
        }
        let output = fl & flags::OUTPUT != 0;
        let direct = fl & flags::DIRECT != 0;
        // DIRECT's table: main unless TBID names another; fib6_get_table: table 0 is
        // main.
        let tbid = match direct_tbid(p, fl) {
            None | Some(0) => table_id::MAIN,
            Some(t) => t,
        };
        // The fast path, as IPv4's: with local then main answering (only the default
        // rules), DIRECT's table, or the custom rules' walk, a route with a forwarding
        // record or group (with OUTPUT, a record) is answered from the records;
        // anything else, and the route the default rules found, goes on below.
        let mut walked = None;
        let default_rules = st.rules(true).is_default();
        if self.fast {
            // One walk of the merged local and main LPM: the default rules' answer
            // (local's, else main's), or with DIRECT main's when the route found has
            // a record (local's IPv6 routes have none); another table's own LPM.
            let d = u128::from(dst);
            let idx = if direct {
                if tbid == table_id::MAIN {
                    st.lookup_v6_merged_index(d)
                } else {
                    st.lookup_v6_index(tbid, d)
                }
            } else if default_rules {
                st.lookup_v6_default_index(d)
            } else {
                // Custom rules: their walk over each table's own LPM, stopping at any
                // route a table holds (`fib6_rule_action_alt`), answered from a record;
                // anything else is left to the general path.
                let flow = flow_v6(p, fl, dev.ifindex, output, src, dst);
                match st.rules(true).walk(&flow, |t, _| st.lookup_v6_index(t, d)) {
                    RuleResult::Table(i) => Some(i),
                    _ => None,
                }
            };
            // With OUTPUT the general path below takes a route with one next hop
            // whatever its device (the device only orders a multipath route's
            // siblings, `rt6_select`): a group's first member through the device,
            // else its first; a nexthop object's first member.
            let hit = match idx {
                Some(i) => st.fast_v6(i).map(|(fast, m)| (i, fast, m)),
                None => None,
            };
            if let Some((i, fast, metric)) = hit {
                let f = match fast {
                    Fast::One(f) => f,
                    Fast::Group(g) if output => {
                        let pick = match g.nhid() {
                            0 => g.through(dev.ifindex).unwrap_or(0),
                            _ => 0,
                        };
                        match g.member(pick) {
                            Some(f) => f,
                            None => return ret::NOT_FWDED,
                        }
                    }
                    Fast::Group(g) => {
                        let flowinfo: [u8; 4] = p[12..16].try_into().expect("4 bytes");
                        let hash = spine_fib::mphash::hash_v6(
                            src.octets(),
                            dst.octets(),
                            flowinfo,
                            p[1],
                            self.mp_seed,
                        );
                        let i = if g.nhid() != 0 {
                            let good = |i| g.member(i).is_some_and(|m| m.good());
                            ecmp::select_group(st.res_buckets(g.nhid()), g.bounds(), good, hash)
                        } else {
                            ecmp::select(g.bounds(), hash)
                        };
                        match g.member(i) {
                            Some(f) => f,
                            None => return ret::NOT_FWDED,
                        }
                    }
                };
                let mtu = |m: u32| m.clamp(IPV6_MIN_MTU, IP6_MAX_MTU);
                return self.forward(st, p, fl, IpAddr::V6(dst), i, f, metric, mtu);
            }
            // With DIRECT a route without a record may be local's: main is looked up
            // below.
            if !direct && default_rules {
                walked = Some(idx);
            }
        }
        let res = if let Some(idx) = walked {
            idx.and_then(|i| st.resolve(i, 0))
        } else if direct {
            st.lookup(tbid, IpAddr::V6(dst), 0)
        } else if st.rules(true).is_default() {
            // fib6_lookup without custom rules: the local table, then main.
            [table_id::LOCAL, table_id::MAIN]
                .into_iter()
                .find_map(|t| st.lookup(t, IpAddr::V6(dst), 0))
        } else {
            // `fib_rules_lookup` with `fib6_rule_action_alt`: any route a table holds
            // ends the walk (a throw too), a rule's drop action is an error, and
            // nothing is suppressed (the lookup has no `rt6_info`).
            let flow = flow_v6(p, fl, dev.ifindex, output, src, dst);
            match st.lookup_by_rules(&flow, 0) {
                RuleResult::Table(r) => Some(r),
                _ => None,
            }
        };
        let Some(res) = res else { return ret::NOT_FWDED };
        let route = res.route;
        match route.kind {
            RouteType::Unicast => {}
            RouteType::Blackhole => return ret::BLACKHOLE,
            RouteType::Unreachable => return ret::UNREACHABLE,
            RouteType::Prohibit => return ret::PROHIBIT,
            _ => return ret::NOT_FWDED,
        }
        // With OUTPUT, rt6_select prefers the first sibling through the interface and
        // fib6_select_path keeps it; otherwise the flow hash picks among the siblings.
        let pick = if output && route.nhid != 0 {
            // A nexthop object: the lookup settles on the group's first member
            // (`rt6_nh_find_match` stops at it) and `fib6_select_path` keeps it.
            0
        } else if output {
            route.nexthops.iter().position(|n| n.ifindex == dev.ifindex).unwrap_or(0)
        } else if route.nexthops.len() < 2 {
            0
        } else if route.nhid != 0 {
            let flowinfo: [u8; 4] = p[12..16].try_into().expect("4 bytes");
            let hash = spine_fib::mphash::hash_v6(
                src.octets(),
                dst.octets(),
                flowinfo,
                p[1],
                self.mp_seed,
            );
            select_group(st, route, hash)
        } else {
            let flowinfo: [u8; 4] = p[12..16].try_into().expect("4 bytes");
            let hash = spine_fib::mphash::hash_v6(
                src.octets(),
                dst.octets(),
                flowinfo,
                p[1],
                self.mp_seed,
            );
            ecmp::select(route.bounds().iter().copied(), hash)
        };
        let Some(nh) = route.nexthops.get(pick) else { return ret::NOT_FWDED };
        let Some(out) = self.iface(st, nh.ifindex) else { return ret::NOT_FWDED };
        // ip6_mtu_from_fib6: a locked route MTU, else the device's IPv6 MTU.
        let mtu = if route.mtu != 0 { route.mtu } else { out.mtu.clamp(IPV6_MIN_MTU, IP6_MAX_MTU) };
        if u32::from(rd16(p, 6)) > mtu {
            wr16(p, 6, mtu as u16);
            return ret::FRAG_NEEDED;
        }
        // `fib_nh_lws`: lightweight tunnels are not handled.
        if nh.encap {
            return ret::UNSUPP_LWT;
        }
        let next = match nh.gateway {
            Some(IpAddr::V6(g)) => {
                p[32..48].copy_from_slice(&g.octets());
                g
            }
            _ => dst,
        };
        wr32(p, 12, route.metric);
        wr32(p, 8, out.ifindex);
        if fl & flags::SRC != 0 {
            let a = match route.prefsrc {
                Some(IpAddr::V6(a)) => Some(a),
                _ => self.select_src_v6(st, out, dst),
            };
            match a {
                Some(a) => p[16..32].copy_from_slice(&a.octets()),
                None => return ret::NO_SRC_ADDR,
            }
        }
        self.finish(st, p, fl, out, IpAddr::V6(next), mtu)
    }

    /// [`FibEnv::select_src_v6`]'s answer from the precomputed choices (`SrcV6`) of
    /// the configured interfaces and of the FIB's: the configured ones' first, then
    /// the FIB's, as the general selection walks them. `None` (ask the general
    /// selection) where a configured interface shadows a FIB one the FIB's choice
    /// names: its addresses are not the router's.
    #[inline]
    fn src_v6_records(&self, st: &FibState, out: u32, dst: Ipv6Addr) -> Option<Option<Ipv6Addr>> {
        let d = u128::from(dst);
        let (conf, fib) = (&self.src6, st.src_v6());
        // Only one side holds addresses (the usual case: configured interfaces, or a
        // mirrored FIB's): its choice alone.
        if fib.is_empty() {
            return Some(conf.choose(out, d));
        }
        if self.ifaces.is_empty() {
            return Some(fib.choose(out, d));
        }
        let shadowed = |i: u32| self.ifaces.binary_search_by_key(&i, |c| c.ifindex).is_ok();
        if conf.owns(d) {
            return Some(Some(dst));
        }
        if fib.owns(d) {
            return fib.owners(d).any(|i| !shadowed(i)).then_some(Some(dst));
        }
        let (c, f) = (conf.cands(out), fib.cands(out));
        if f.addrs.iter().any(|&(_, i)| shadowed(i)) {
            return None;
        }
        let best = match c.rank.cmp(&f.rank) {
            std::cmp::Ordering::Greater => c.best(d),
            std::cmp::Ordering::Less => f.best(d),
            std::cmp::Ordering::Equal => match (c.best(d), f.best(d)) {
                (Some(a), Some(b)) if b.0 > a.0 => Some(b),
                (a, b) => a.or(b),
            },
        };
        Some(best.map(|(_, a)| Ipv6Addr::from(a)))
    }

    /// `ipv6_dev_get_saddr` for a global destination, reduced to what a router's
    /// addresses exercise: the destination itself if it is ours, else a global
    /// address, on the output device first, sharing the longest prefix with the
    /// destination; a narrower scope only when no global address exists.
    fn select_src_v6(&self, st: &FibState, out: &Iface, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        // The configured interfaces, and the FIB's that no configured one shadows.
        let fib_only = st
            .ifaces()
            .iter()
            .filter(|i| self.ifaces.binary_search_by_key(&i.ifindex, |c| c.ifindex).is_err());
        let all = self.ifaces.iter().chain(fib_only).flat_map(|i| {
            i.addrs.iter().filter_map(move |&(a, _)| match a {
                IpAddr::V6(a) => Some((i.ifindex == out.ifindex, a)),
                IpAddr::V4(_) => None,
            })
        });
        if let Some((_, a)) = all.clone().find(|&(_, a)| a == dst) {
            return Some(a);
        }
        let common = |a: Ipv6Addr| (u128::from(a) ^ u128::from(dst)).leading_zeros();
        let mut best: Option<(bool, bool, u32, Ipv6Addr)> = None;
        for (on_out, a) in all {
            let key = (!need_strict(a), on_out, common(a), a);
            if best.is_none_or(|b| (key.0, key.1, key.2) > (b.0, b.1, b.2)) {
                best = Some(key);
            }
        }
        best.map(|b| b.3)
    }

    /// The neighbour and the forwarding parameters (`bpf_fib_set_fwd_params`).
    fn finish(
        &self,
        st: &FibState,
        p: &mut [u8; PARAMS_LEN],
        fl: u64,
        out: &Iface,
        next: IpAddr,
        mtu: u32,
    ) -> i64 {
        if fl & flags::SKIP_NEIGH == 0 {
            match st.neigh(out.ifindex, next) {
                Some(n) if n.state.usable() => {
                    p[58..64].copy_from_slice(&n.mac);
                    p[52..58].copy_from_slice(&out.mac);
                }
                _ => return ret::NO_NEIGH,
            }
        }
        wr32(p, 48, 0); // h_vlan_proto, h_vlan_TCI
        if mtu != 0 {
            wr16(p, 6, mtu as u16);
        }
        ret::SUCCESS
    }
}

/// A nexthop group's member for flow hash `hash` (`spine_fib::ecmp::select_group`):
/// by the group's buckets if it is resilient, else by the upper bounds among the
/// members whose gateway has no neighbour entry in a state that is not valid.
fn select_group(st: &FibState, route: &spine_fib::RouteEntry, hash: u32) -> usize {
    let good = |i: usize| {
        let nh = &route.nexthops[i];
        nh.gateway.and_then(|g| st.neigh(nh.ifindex, g)).is_none_or(|n| n.state.usable())
    };
    ecmp::select_group(st.res_buckets(route.nhid), route.bounds().iter().copied(), good, hash)
}

/// What IPv4's policy rules see of a lookup (`__fib_lookup`): the ingress device as
/// iif (loopback with OUTPUT), the mark with MARK, the DSCP bits the rules compare.
#[inline]
fn flow_v4(p: &[u8; PARAMS_LEN], fl: u64, dev: u32, oif: u32, src: [u8; 4], dst: Ipv4Addr) -> Flow {
    Flow {
        iif: if oif != 0 { LOOPBACK_IFINDEX } else { dev },
        oif,
        mark: if fl & flags::MARK != 0 { rd32(p, 52) } else { 0 },
        dscp: p[12] & 0x1c,
        proto: p[1],
        sport: u16::from_be_bytes([p[2], p[3]]),
        dport: u16::from_be_bytes([p[4], p[5]]),
        src: IpAddr::V4(Ipv4Addr::from(src)),
        dst: IpAddr::V4(dst),
        has_saddr: true,
    }
}

/// What IPv6's policy rules see of a lookup: as IPv4's, the DSCP from the flow info,
/// no source address with OUTPUT.
#[inline]
fn flow_v6(
    p: &[u8; PARAMS_LEN],
    fl: u64,
    dev: u32,
    output: bool,
    src: Ipv6Addr,
    dst: Ipv6Addr,
) -> Flow {
    let flowinfo = u32::from_be_bytes([p[12], p[13], p[14], p[15]]);
    Flow {
        iif: if output { LOOPBACK_IFINDEX } else { dev },
        oif: if output { dev } else { 0 },
        mark: if fl & flags::MARK != 0 { rd32(p, 52) } else { 0 },
        dscp: (flowinfo >> 20) as u8 & 0xfc,
        proto: p[1],
        sport: u16::from_be_bytes([p[2], p[3]]),
        dport: u16::from_be_bytes([p[4], p[5]]),
        src: IpAddr::V6(src),
        dst: IpAddr::V6(dst),
        has_saddr: !output,
    }
}

/// The table `DIRECT` with `TBID` names, zeroed in the struct as the kernel zeroes it
/// before looking up (its answers other than SUCCESS leave it so); `None` unless both
/// flags are set.
#[inline]
fn direct_tbid(p: &mut [u8; PARAMS_LEN], fl: u64) -> Option<u32> {
    if fl & (flags::TBID | flags::DIRECT) != flags::TBID | flags::DIRECT {
        return None;
    }
    let t = rd32(p, 48);
    wr32(p, 48, 0);
    Some(t)
}

/// The helper's argument checks: `plen` is an `int` (a negative one passes the
/// kernel's unsigned comparison), `flags` a `u32` of the known bits.
fn bad_args(plen: u64, fl: u64) -> bool {
    let plen = i64::from(plen as u32 as i32) as u64;
    plen < PARAMS_LEN as u64 || (fl & u64::from(u32::MAX)) & !flags::ALL != 0
}

/// The IPv4 address a next hop's source selection is keyed by (`fib_nh_gw4`, which
/// for an IPv6 gateway reads the first word of the union).
fn gw4(nh: &spine_fib::NextHop) -> Option<Ipv4Addr> {
    match nh.gateway {
        Some(IpAddr::V4(g)) => Some(g),
        Some(IpAddr::V6(g)) => {
            let o = g.octets();
            Some(Ipv4Addr::new(o[0], o[1], o[2], o[3]))
        }
        None => None,
    }
}

/// `inet_select_addr(dev, toward, scope)`: the first primary address whose subnet
/// holds `toward`, else the first; 0.0.0.0 when the device has none.
fn select_src_v4(dev: &Iface, toward: Option<Ipv4Addr>) -> Ipv4Addr {
    let mut first = None;
    for &(a, len) in &dev.addrs {
        let IpAddr::V4(a4) = a else { continue };
        if let Some(t) = toward {
            if same_subnet(a, IpAddr::V4(t), len) {
                return a4;
            }
        } else {
            return a4;
        }
        first.get_or_insert(a4);
    }
    first.unwrap_or(Ipv4Addr::UNSPECIFIED)
}

/// `fib_table_lookup`'s answer as `fib_lookup` maps it: the route, or the code its
/// error becomes (a miss and a throw are `NOT_FWDED`).
fn classify_v4(r: Option<spine_fib::Resolved<'_>>) -> Result<spine_fib::Resolved<'_>, i64> {
    let Some(r) = r else { return Err(ret::NOT_FWDED) };
    match r.route.kind {
        RouteType::Blackhole => Err(ret::BLACKHOLE),
        RouteType::Unreachable => Err(ret::UNREACHABLE),
        RouteType::Prohibit => Err(ret::PROHIBIT),
        RouteType::Throw => Err(ret::NOT_FWDED),
        _ => Ok(r),
    }
}

/// `rt6_need_strict`: multicast, link-local or loopback.
fn need_strict(a: Ipv6Addr) -> bool {
    a.is_multicast() || a.is_unicast_link_local() || a.is_loopback()
}

fn same_subnet(a: IpAddr, b: IpAddr, len: u8) -> bool {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len.min(32))).unwrap_or(0);
            u32::from(a) & m == u32::from(b) & m
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len.min(128))).unwrap_or(0);
            u128::from(a) & m == u128::from(b) & m
        }
        _ => false,
    }
}

fn rd16(p: &[u8; PARAMS_LEN], o: usize) -> u16 {
    u16::from_ne_bytes([p[o], p[o + 1]])
}
fn wr16(p: &mut [u8; PARAMS_LEN], o: usize, v: u16) {
    p[o..o + 2].copy_from_slice(&v.to_ne_bytes());
}
fn rd32(p: &[u8; PARAMS_LEN], o: usize) -> u32 {
    u32::from_ne_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]])
}
fn wr32(p: &mut [u8; PARAMS_LEN], o: usize, v: u32) {
    p[o..o + 4].copy_from_slice(&v.to_ne_bytes());
}
fn rd_be32(p: &[u8; PARAMS_LEN], o: usize) -> u32 {
    u32::from_be_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]])
}
fn rd_be128(p: &[u8; PARAMS_LEN], o: usize) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&p[o..o + 16]);
    u128::from_be_bytes(b)
}

/// The helper's entry from [`spine_vm::Env::call`]: `(ctx, params, plen, flags)`, in
/// the FIB state the host holds for the burst (`pinned`), else the published one.
pub(crate) fn call(
    env: Option<&FibEnv>,
    pinned: Option<&FibState>,
    a: [u64; 5],
    mem: &mut spine_vm::Memory,
) -> Result<u64, spine_vm::CallAbort> {
    let bad = || spine_vm::CallAbort::Fault("bpf_fib_lookup params outside the program's memory");
    let slot = mem.slice_mut(a[1], PARAMS_LEN).ok_or_else(bad)?;
    let mut p = [0u8; PARAMS_LEN];
    p.copy_from_slice(slot);
    let r = match env {
        Some(env) => match pinned {
            Some(st) => env.lookup_in(st, &mut p, a[2], a[3]),
            None => env.lookup(&mut p, a[2], a[3]),
        },
        None if bad_args(a[2], a[3]) => -spine_abi::errno::EINVAL,
        None if p[0] != AF_INET && p[0] != AF_INET6 => -EAFNOSUPPORT,
        None => -ENODEV,
    };
    slot.copy_from_slice(&p);
    Ok(r as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_fib::{FibOp, FibWriter, Neigh, NextHop, NudState, Route};

    const MAC_IN: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const MAC_OUT: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const MAC_GW: [u8; 6] = [2, 0, 0, 0, 0, 9];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn env() -> (FibWriter, FibEnv) {
        let (mut w, r) = FibWriter::new();
        let mut route = |pfx: &str, kind: RouteType, nh: Vec<NextHop>| {
            let mut r = Route::unicast(pfx.parse().unwrap(), nh);
            r.kind = kind;
            w.add(r).unwrap();
        };
        route("10.0.0.0/8", RouteType::Unicast, vec![NextHop::via(ip("192.0.2.1"), 2)]);
        route("192.0.2.0/24", RouteType::Unicast, vec![NextHop::dev(2)]);
        route("10.9.0.0/16", RouteType::Blackhole, vec![]);
        route("10.8.0.0/16", RouteType::Unreachable, vec![]);
        route("10.7.0.0/16", RouteType::Prohibit, vec![]);
        route("2001:db8::/32", RouteType::Unicast, vec![NextHop::via(ip("fe80::9"), 2)]);
        for (ifindex, a) in [(2, "192.0.2.1"), (2, "fe80::9")] {
            let neigh = Neigh { mac: MAC_GW, state: NudState::REACHABLE };
            w.apply(FibOp::SetNeigh { ifindex, ip: ip(a), neigh }).unwrap();
        }
        w.publish();
        let iface = |ifindex, mac, addrs: &[&str]| Iface {
            ifindex,
            mtu: 1500,
            mac,
            forward_v4: true,
            forward_v6: true,
            addrs: addrs.iter().map(|a| (ip(a), 24)).collect(),
        };
        let mut off = iface(3, MAC_IN, &[]);
        off.forward_v4 = false;
        let e = FibEnv::new(
            r,
            vec![iface(1, MAC_IN, &["198.51.100.1"]), iface(2, MAC_OUT, &["192.0.2.7"]), off],
        );
        (w, e)
    }

    fn v4(dst: &str, ifindex: u32, tot_len: u16) -> [u8; PARAMS_LEN] {
        let mut p = [0u8; PARAMS_LEN];
        p[0] = AF_INET;
        wr16(&mut p, 6, tot_len);
        wr32(&mut p, 8, ifindex);
        p[16..20].copy_from_slice(&[198, 51, 100, 5]);
        let IpAddr::V4(d) = ip(dst) else { unreachable!() };
        p[32..36].copy_from_slice(&d.octets());
        p
    }

    #[test]
    fn forwards_via_the_gateway_with_its_mac() {
        let (_w, e) = env();
        let mut p = v4("10.1.2.3", 1, 100);
        assert_eq!(e.lookup(&mut p, 64, 0), ret::SUCCESS);
        assert_eq!(rd32(&p, 8), 2);
        assert_eq!(&p[32..36], &[192, 0, 2, 1]);
        assert_eq!(&p[52..58], &MAC_OUT);
        assert_eq!(&p[58..64], &MAC_GW);
        assert_eq!(rd16(&p, 6), 1500, "mtu_result");
    }

    #[test]
    fn codes_in_the_kernels_order() {
        let (_w, e) = env();
        let code = |dst: &str, ifindex: u32, len: u16, fl: u64| {
            let mut p = v4(dst, ifindex, len);
            e.lookup(&mut p, 64, fl)
        };
        assert_eq!(code("10.9.1.1", 1, 100, 0), ret::BLACKHOLE);
        assert_eq!(code("10.8.1.1", 1, 100, 0), ret::UNREACHABLE);
        assert_eq!(code("10.7.1.1", 1, 100, 0), ret::PROHIBIT);
        assert_eq!(code("11.0.0.1", 1, 100, 0), ret::NOT_FWDED);
        assert_eq!(code("10.1.1.1", 3, 100, 0), ret::FWD_DISABLED);
        assert_eq!(code("10.1.1.1", 99, 100, 0), -ENODEV);
        assert_eq!(code("192.0.2.44", 1, 100, 0), ret::NO_NEIGH);
        assert_eq!(code("192.0.2.44", 1, 100, flags::SKIP_NEIGH), ret::SUCCESS);
        assert_eq!(code("10.1.1.1", 1, 100, 1 << 6), -spine_abi::errno::EINVAL);
        let mut p = v4("10.1.1.1", 1, 1501);
        assert_eq!(e.lookup(&mut p, 64, 0), ret::FRAG_NEEDED);
        assert_eq!(rd16(&p, 6), 1500);
        let mut p = v4("10.1.1.1", 1, 100);
        assert_eq!(e.lookup(&mut p, 63, 0), -spine_abi::errno::EINVAL);
        p[0] = 7;
        assert_eq!(e.lookup(&mut p, 64, 0), -EAFNOSUPPORT);
    }

    #[test]
    fn direct_tbid_and_src() {
        let (_w, e) = env();
        let mut p = v4("10.1.1.1", 1, 100);
        wr32(&mut p, 48, 77);
        assert_eq!(e.lookup(&mut p, 64, flags::DIRECT | flags::TBID), ret::NOT_FWDED);
        assert_eq!(rd32(&p, 48), 0, "tbid is zeroed");
        let mut p = v4("10.1.1.1", 1, 100);
        wr32(&mut p, 48, spine_fib::table_id::MAIN);
        let fl = flags::DIRECT | flags::TBID | flags::SRC;
        assert_eq!(e.lookup(&mut p, 64, fl), ret::SUCCESS);
        assert_eq!(&p[16..20], &[192, 0, 2, 7]);
    }

    #[test]
    fn ipv6_link_local_is_never_forwarded_and_gateways_resolve() {
        let (_w, e) = env();
        let mut p = [0u8; PARAMS_LEN];
        p[0] = AF_INET6;
        wr32(&mut p, 8, 1);
        p[16..32].copy_from_slice(&"2001:db9::1".parse::<Ipv6Addr>().unwrap().octets());
        p[32..48].copy_from_slice(&"2001:db8::1".parse::<Ipv6Addr>().unwrap().octets());
        let mut q = p;
        assert_eq!(e.lookup(&mut q, 64, 0), ret::SUCCESS);
        assert_eq!(&q[32..48], &"fe80::9".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(&q[58..64], &MAC_GW);
        p[16..32].copy_from_slice(&"fe80::1".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(e.lookup(&mut p, 64, 0), ret::NOT_FWDED);
    }

    /// Two output interfaces (2 and 4) with their own addresses, an ECMP group over
    /// both, a throw and a blackhole in main, the default table behind them, a locked
    /// route MTU. Neighbour lookups are skipped (SKIP_NEIGH) unless a test adds them.
    fn env2() -> (FibWriter, FibEnv) {
        let (mut w, r) = FibWriter::new();
        let gw2 = NextHop::via(ip("192.0.2.1"), 2);
        let gw4 = NextHop::via(ip("203.0.113.1"), 4);
        w.add(Route::unicast("10.0.0.0/8".parse().unwrap(), vec![gw2])).unwrap();
        w.add(Route::unicast("10.1.0.0/16".parse().unwrap(), vec![gw4])).unwrap();
        w.add(Route::unicast("10.2.0.0/16".parse().unwrap(), vec![gw2, gw4])).unwrap();
        w.add(Route { mtu: 1400, ..Route::unicast("10.3.0.0/16".parse().unwrap(), vec![gw2]) })
            .unwrap();
        for (pfx, kind) in
            [("10.6.0.0/16", RouteType::Throw), ("10.9.0.0/16", RouteType::Blackhole)]
        {
            w.add(Route { kind, nexthops: vec![], ..Route::unicast(pfx.parse().unwrap(), vec![]) })
                .unwrap();
        }
        w.add(Route {
            table: table_id::DEFAULT,
            ..Route::unicast("10.0.0.0/8".parse().unwrap(), vec![gw4])
        })
        .unwrap();
        w.publish();
        let iface = |ifindex, a: &str| Iface {
            ifindex,
            mtu: 1500,
            mac: MAC_OUT,
            forward_v4: true,
            forward_v6: true,
            addrs: vec![(ip(a), 24)],
        };
        let e = FibEnv::new(
            r,
            vec![iface(1, "198.51.100.1"), iface(2, "192.0.2.7"), iface(4, "203.0.113.7")],
        )
        .with_multipath_seed(7);
        (w, e)
    }

    fn out_if(e: &FibEnv, dst: &str, src: [u8; 4], fl: u64) -> (i64, u32) {
        let mut p = v4(dst, 1, 100);
        p[16..20].copy_from_slice(&src);
        let rc = e.lookup(&mut p, 64, fl | flags::SKIP_NEIGH);
        (rc, rd32(&p, 8))
    }

    #[test]
    fn ecmp_spreads_flows_and_prefers_the_next_hop_owning_the_source() {
        let (_w, e) = env2();
        let mut seen = [0usize; 5];
        for i in 0..200u8 {
            let (rc, oif) = out_if(&e, &format!("10.2.{i}.9"), [0; 4], 0);
            assert_eq!(rc, ret::SUCCESS);
            seen[oif as usize] += 1;
        }
        assert!(seen[2] > 50 && seen[4] > 50, "both next hops carry flows: {seen:?}");
        for i in 0..50u8 {
            let dst = format!("10.2.{i}.9");
            assert_eq!(out_if(&e, &dst, [203, 0, 113, 7], 0), (ret::SUCCESS, 4));
            assert_eq!(out_if(&e, &dst, [192, 0, 2, 7], 0), (ret::SUCCESS, 2));
        }
    }

    #[test]
    fn output_mode_only_matches_routes_through_the_interface() {
        let (_w, e) = env2();
        assert_eq!(out_if(&e, "10.1.1.1", [0; 4], 0), (ret::SUCCESS, 4));
        // Through interface 1 nothing matches; through 2 the /8 does, not the /16.
        let mut p = v4("10.1.1.1", 2, 100);
        let rc = e.lookup(&mut p, 64, flags::OUTPUT | flags::SKIP_NEIGH);
        assert_eq!((rc, rd32(&p, 8)), (ret::SUCCESS, 2));
        assert_eq!(out_if(&e, "10.1.1.1", [0; 4], flags::OUTPUT).0, ret::NOT_FWDED);
        // A blackhole matches whatever the interface.
        assert_eq!(out_if(&e, "10.9.1.1", [0; 4], flags::OUTPUT).0, ret::BLACKHOLE);
    }

    #[test]
    fn the_default_table_answers_a_throw_but_not_a_blackhole() {
        let (_w, e) = env2();
        assert_eq!(out_if(&e, "10.6.1.1", [0; 4], 0), (ret::SUCCESS, 4));
        assert_eq!(out_if(&e, "10.9.1.1", [0; 4], 0).0, ret::BLACKHOLE);
        // DIRECT looks in main only: the throw is not forwarded.
        assert_eq!(out_if(&e, "10.6.1.1", [0; 4], flags::DIRECT).0, ret::NOT_FWDED);
        // Table 0 is main.
        let mut p = v4("10.1.1.1", 1, 100);
        let rc = e.lookup(&mut p, 64, flags::DIRECT | flags::TBID | flags::SKIP_NEIGH);
        assert_eq!((rc, rd32(&p, 8)), (ret::SUCCESS, 4));
    }

    #[test]
    fn a_locked_route_mtu_wins_over_the_device() {
        let (_w, e) = env2();
        let mut p = v4("10.3.1.1", 1, 1401);
        assert_eq!(e.lookup(&mut p, 64, flags::SKIP_NEIGH), ret::FRAG_NEEDED);
        assert_eq!(rd16(&p, 6), 1400);
        let mut p = v4("10.3.1.1", 1, 1400);
        assert_eq!(e.lookup(&mut p, 64, flags::SKIP_NEIGH), ret::SUCCESS);
        assert_eq!(rd16(&p, 6), 1400, "mtu_result");
    }

    /// The fast path (`FibState::fwd_v4`) follows changes made after routes were
    /// looked up: a neighbour that goes away or fails (NO_NEIGH), comes back, an
    /// interface held by the FIB whose MTU shrinks (FRAG_NEEDED) or that goes away
    /// (NOT_FWDED); a configured interface shadows the FIB's; a directly connected
    /// route reads the destination's neighbour entry.
    #[test]
    fn the_fast_path_follows_neighbour_and_interface_changes() {
        let (mut w, r) = FibWriter::new();
        w.add(Route::unicast(
            "10.0.0.0/8".parse().unwrap(),
            vec![NextHop::via(ip("192.0.2.1"), 5)],
        ))
        .unwrap();
        w.add(Route::unicast("192.0.2.0/24".parse().unwrap(), vec![NextHop::dev(5)])).unwrap();
        let dev5 = |mtu| Iface {
            ifindex: 5,
            mtu,
            mac: MAC_OUT,
            forward_v4: true,
            forward_v6: true,
            addrs: vec![],
        };
        w.apply(FibOp::SetIface(dev5(1500))).unwrap();
        w.publish();
        let e = FibEnv::new(r.clone(), vec![Iface { ifindex: 1, ..dev5(1500) }]);
        let run = |e: &FibEnv, dst: &str, len: u16| {
            let mut p = v4(dst, 1, len);
            let rc = e.lookup(&mut p, 64, 0);
            (rc, p)
        };
        assert_eq!(run(&e, "10.1.1.1", 100).0, ret::NO_NEIGH, "no entry for the gateway yet");
        let set = |w: &mut FibWriter, a: &str, state| {
            let neigh = Neigh { mac: MAC_GW, state };
            w.apply(FibOp::SetNeigh { ifindex: 5, ip: ip(a), neigh }).unwrap();
            w.publish();
        };
        set(&mut w, "192.0.2.1", NudState::STALE);
        let (rc, p) = run(&e, "10.1.1.1", 100);
        assert_eq!(rc, ret::SUCCESS);
        assert_eq!(
            (rd32(&p, 8), &p[32..36], &p[52..58], &p[58..64]),
            (5, &[192, 0, 2, 1][..], &MAC_OUT[..], &MAC_GW[..])
        );
        set(&mut w, "192.0.2.1", NudState::FAILED);
        assert_eq!(run(&e, "10.1.1.1", 100).0, ret::NO_NEIGH, "a failed entry is not usable");
        set(&mut w, "192.0.2.1", NudState::PERMANENT);
        assert_eq!(run(&e, "10.1.1.1", 100).0, ret::SUCCESS);
        w.apply(FibOp::DelNeigh { ifindex: 5, ip: ip("192.0.2.1") }).unwrap();
        w.publish();
        assert_eq!(run(&e, "10.1.1.1", 100).0, ret::NO_NEIGH, "the entry was deleted");
        // Directly connected: the destination's own entry.
        assert_eq!(run(&e, "192.0.2.9", 100).0, ret::NO_NEIGH);
        set(&mut w, "192.0.2.9", NudState::REACHABLE);
        assert_eq!(run(&e, "192.0.2.9", 100).0, ret::SUCCESS);
        // The interface's MTU, as the FIB holds it.
        w.apply(FibOp::SetIface(dev5(1280))).unwrap();
        w.publish();
        let (rc, p) = run(&e, "192.0.2.9", 1300);
        assert_eq!((rc, rd16(&p, 6)), (ret::FRAG_NEEDED, 1280));
        // A configured interface 5 shadows the FIB's.
        let shadow = FibEnv::new(r.clone(), vec![Iface { ifindex: 1, ..dev5(1500) }, dev5(9000)]);
        let (rc, p) = run(&shadow, "192.0.2.9", 1300);
        assert_eq!((rc, rd16(&p, 6)), (ret::SUCCESS, 9000));
        w.apply(FibOp::DelIface(5)).unwrap();
        w.publish();
        assert_eq!(run(&e, "192.0.2.9", 100).0, ret::NOT_FWDED, "no output interface");
        assert_eq!(run(&shadow, "192.0.2.9", 100).0, ret::SUCCESS);
    }

    /// The IPv6 fast path (`FibState::fwd_v6`) follows the same changes: a gateway's
    /// neighbour entry (NO_NEIGH, back, failed), the FIB's interface MTU (FRAG_NEEDED at
    /// the IPv6 minimum and the device's), a configured interface shadowing it, the
    /// interface gone (NOT_FWDED), a route replaced by one that takes the general path
    /// (a locked MTU) and back; a local route answers before main.
    #[test]
    fn the_ipv6_fast_path_follows_neighbour_interface_and_route_changes() {
        let (mut w, r) = FibWriter::new();
        let gw = ip("2001:db8:ff::1");
        let via = |pfx: &str, mtu| Route {
            mtu,
            ..Route::unicast(pfx.parse().unwrap(), vec![NextHop::via(gw, 5)])
        };
        w.add(via("2001:db8:10::/48", 0)).unwrap();
        w.add(Route::unicast("2001:db8:ff::/64".parse().unwrap(), vec![NextHop::dev(5)])).unwrap();
        let dev5 = |mtu| Iface {
            ifindex: 5,
            mtu,
            mac: MAC_OUT,
            forward_v4: true,
            forward_v6: true,
            addrs: vec![],
        };
        w.apply(FibOp::SetIface(dev5(1500))).unwrap();
        w.publish();
        let e = FibEnv::new(r.clone(), vec![Iface { ifindex: 1, ..dev5(1500) }]);
        let run = |e: &FibEnv, dst: &str, len: u16| {
            let mut p = [0u8; PARAMS_LEN];
            p[0] = AF_INET6;
            wr16(&mut p, 6, len);
            wr32(&mut p, 8, 1);
            p[16..32].copy_from_slice(&"2001:db8:aa::1".parse::<Ipv6Addr>().unwrap().octets());
            p[32..48].copy_from_slice(&dst.parse::<Ipv6Addr>().unwrap().octets());
            let rc = e.lookup(&mut p, 64, 0);
            (rc, p)
        };
        let w2 = &mut w;
        assert_eq!(run(&e, "2001:db8:10::9", 100).0, ret::NO_NEIGH, "no entry for the gateway");
        let set = |w: &mut FibWriter, a: &str, state| {
            let neigh = Neigh { mac: MAC_GW, state };
            w.apply(FibOp::SetNeigh { ifindex: 5, ip: ip(a), neigh }).unwrap();
            w.publish();
        };
        set(w2, "2001:db8:ff::1", NudState::STALE);
        let (rc, p) = run(&e, "2001:db8:10::9", 100);
        assert_eq!(rc, ret::SUCCESS);
        assert_eq!(
            (rd32(&p, 8), &p[32..48], &p[52..58], &p[58..64], rd16(&p, 6)),
            (5, &gw_octets(gw)[..], &MAC_OUT[..], &MAC_GW[..], 1500)
        );
        set(w2, "2001:db8:ff::1", NudState::FAILED);
        assert_eq!(run(&e, "2001:db8:10::9", 100).0, ret::NO_NEIGH, "a failed entry");
        set(w2, "2001:db8:ff::1", NudState::PERMANENT);
        assert_eq!(run(&e, "2001:db8:10::9", 100).0, ret::SUCCESS);
        // Directly connected: the destination's own entry.
        assert_eq!(run(&e, "2001:db8:ff::9", 100).0, ret::NO_NEIGH);
        set(w2, "2001:db8:ff::9", NudState::REACHABLE);
        assert_eq!(run(&e, "2001:db8:ff::9", 100).0, ret::SUCCESS);
        // The FIB's interface MTU, bounded below by IPv6's minimum.
        w2.apply(FibOp::SetIface(dev5(1000))).unwrap();
        w2.publish();
        let (rc, p) = run(&e, "2001:db8:10::9", 1281);
        assert_eq!((rc, rd16(&p, 6)), (ret::FRAG_NEEDED, 1280));
        assert_eq!(run(&e, "2001:db8:10::9", 1280).0, ret::SUCCESS);
        // A locked route MTU takes the general path, with the same answers.
        w2.replace(via("2001:db8:10::/48", 1300)).unwrap();
        w2.publish();
        let (rc, p) = run(&e, "2001:db8:10::9", 1301);
        assert_eq!((rc, rd16(&p, 6)), (ret::FRAG_NEEDED, 1300));
        w2.replace(via("2001:db8:10::/48", 0)).unwrap();
        w2.publish();
        let (rc, p) = run(&e, "2001:db8:10::9", 1281);
        assert_eq!((rc, rd16(&p, 6)), (ret::FRAG_NEEDED, 1280));
        // A configured interface 5 shadows the FIB's.
        let shadow = FibEnv::new(r.clone(), vec![Iface { ifindex: 1, ..dev5(1500) }, dev5(9000)]);
        let (rc, p) = run(&shadow, "2001:db8:10::9", 1300);
        assert_eq!((rc, rd16(&p, 6)), (ret::SUCCESS, 9000));
        // The local table answers first: a blackhole there wins over main's route.
        w2.add(Route {
            table: table_id::LOCAL,
            kind: RouteType::Blackhole,
            nexthops: vec![],
            ..Route::unicast("2001:db8:10:1::/64".parse().unwrap(), vec![])
        })
        .unwrap();
        w2.apply(FibOp::DelIface(5)).unwrap();
        w2.publish();
        assert_eq!(run(&e, "2001:db8:10:1::9", 100).0, ret::BLACKHOLE);
        assert_eq!(run(&e, "2001:db8:10::9", 100).0, ret::NOT_FWDED, "no output interface");
        assert_eq!(run(&shadow, "2001:db8:10::9", 100).0, ret::SUCCESS);
    }

    fn gw_octets(a: IpAddr) -> [u8; 16] {
        match a {
            IpAddr::V6(a) => a.octets(),
            IpAddr::V4(_) => unreachable!(),
        }
    }

    #[test]
    fn plen_is_an_int_and_flags_a_u32() {
        let (_w, e) = env2();
        let mut p = v4("10.1.1.1", 1, 100);
        // A negative plen passes the kernel's unsigned comparison; the high half of
        // the register is not part of it.
        assert_eq!(e.lookup(&mut p, 0xffff_ffff, flags::SKIP_NEIGH), ret::SUCCESS);
        let mut p = v4("10.1.1.1", 1, 100);
        assert_eq!(e.lookup(&mut p, 1 << 32 | 16, 0), -spine_abi::errno::EINVAL);
        let mut p = v4("10.1.1.1", 1, 100);
        assert_eq!(e.lookup(&mut p, 64, 1 << 40 | flags::SKIP_NEIGH), ret::SUCCESS);
    }

    #[test]
    fn policy_rules_pick_tables_by_source_mark_and_port() {
        use spine_fib::{Rule, RuleAction};
        let (mut w, e) = env2();
        let gw4 = NextHop::via(ip("203.0.113.1"), 4);
        w.add(Route { table: 100, ..Route::unicast("10.0.0.0/8".parse().unwrap(), vec![gw4]) })
            .unwrap();
        let mut rules = spine_fib::RuleSet::default_for(false).rules().to_vec();
        let mut from = Rule::lookup(100, 100);
        from.src = Some("192.0.2.0/24".parse().unwrap());
        let mut mark = Rule::lookup(101, 100);
        (mark.mark, mark.mark_mask) = (7, 0xff);
        let mut bh = Rule::lookup(102, 0);
        bh.dport = Some((9, 9));
        bh.action = RuleAction::Blackhole;
        let mut unr = Rule::lookup(103, 0);
        unr.dport = Some((10, 10));
        unr.action = RuleAction::Unreachable;
        rules.extend([from, mark, bh, unr]);
        w.apply(FibOp::SetRules { v6: false, rules }).unwrap();
        w.publish();
        // Without a matching rule main answers (10.0.0.0/8 via interface 2).
        assert_eq!(out_if(&e, "10.5.1.1", [198, 51, 100, 5], 0), (ret::SUCCESS, 2));
        assert_eq!(out_if(&e, "10.5.1.1", [192, 0, 2, 5], 0), (ret::SUCCESS, 4));
        let with = |mark: u32, dport: u16, fl: u64| {
            let mut p = v4("10.5.1.1", 1, 100);
            wr32(&mut p, 52, mark);
            p[4..6].copy_from_slice(&dport.to_be_bytes());
            let rc = e.lookup(&mut p, 64, fl | flags::SKIP_NEIGH);
            (rc, rd32(&p, 8))
        };
        assert_eq!(with(0x107, 0, flags::MARK), (ret::SUCCESS, 4), "mark 7 under mask 0xff");
        assert_eq!(with(0x107, 0, 0), (ret::SUCCESS, 2), "no MARK flag: mark 0");
        assert_eq!(with(0x107, 0, flags::MARK | flags::DIRECT), (ret::SUCCESS, 2), "DIRECT");
        assert_eq!(with(0, 9, 0).0, ret::BLACKHOLE);
        assert_eq!(with(0, 10, 0).0, ret::NOT_FWDED, "a rule's unreachable is -ENETUNREACH");
        // A table that finds nothing falls through: 10.6/16 is a throw in main, the
        // default table answers after it as rule 32767.
        assert_eq!(out_if(&e, "10.6.1.1", [0; 4], 0), (ret::SUCCESS, 4));
    }
}
