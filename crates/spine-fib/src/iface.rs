//! The interfaces a lookup answers with (`bpf_fib_lookup`'s input and output devices):
//! MAC, MTU, addresses and forwarding switches. A FIB mirrored from the kernel holds
//! them next to the routes, so a change to a device is published with the routes it
//! changes (see `spine_rtnl`).

use std::net::IpAddr;

/// One interface of the router as the lookup needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub ifindex: u32,
    pub mtu: u32,
    pub mac: [u8; 6],
    /// `net.ipv4.conf.<dev>.forwarding`.
    pub forward_v4: bool,
    /// `net.ipv6.conf.<dev>.forwarding`.
    pub forward_v6: bool,
    /// Addresses with their prefix lengths, primary first (for `BPF_FIB_LOOKUP_SRC`).
    pub addrs: Vec<(IpAddr, u8)>,
}

/// Interfaces by index, sorted, and their IPv6 source choice, rebuilt on every change.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ifaces(Vec<Iface>, SrcV6);

impl Ifaces {
    pub(crate) fn get(&self, ifindex: u32) -> Option<&Iface> {
        self.0.binary_search_by_key(&ifindex, |i| i.ifindex).ok().map(|i| &self.0[i])
    }

    pub(crate) fn set(&mut self, iface: Iface) {
        match self.0.binary_search_by_key(&iface.ifindex, |i| i.ifindex) {
            Ok(i) => self.0[i] = iface,
            Err(i) => self.0.insert(i, iface),
        }
        self.1 = SrcV6::new(&self.0);
    }

    pub(crate) fn remove(&mut self, ifindex: u32) {
        self.0.retain(|i| i.ifindex != ifindex);
        self.1 = SrcV6::new(&self.0);
    }

    pub(crate) fn all(&self) -> &[Iface] {
        &self.0
    }

    pub(crate) fn src_v6(&self) -> &SrcV6 {
        &self.1
    }
}

/// `BPF_FIB_LOOKUP_SRC`'s IPv6 source choice (`ipv6_dev_get_saddr` as a router's
/// addresses exercise it: the destination itself if it is an own address, else the
/// best address by scope (global first), then on the output device first, then the
/// longest prefix shared with the destination, the first of equals) worked out ahead
/// for one set of interfaces: what is left per lookup is a search of the own
/// addresses and of the few candidates of the output device's best class. The FIB
/// keeps one for its interfaces, rebuilt with every interface change
/// ([`crate::FibState::src_v6`]), so a reader sees it change with the interfaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SrcV6 {
    /// Every IPv6 address, sorted, with its interface's index.
    own: Vec<(u128, u32)>,
    /// For each interface holding an IPv6 address, by index: the candidates when it
    /// is the output device.
    by_out: Vec<(u32, SrcCands)>,
    /// The candidates for an output device holding no IPv6 address.
    other: SrcCands,
}

/// The addresses of the best class (scope, on the output device or not) an output
/// device has, in the interfaces' order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SrcCands {
    /// 0: no address; else 1 + 2 × global + on the output device.
    pub rank: u8,
    /// The class's addresses with their interfaces' indexes.
    pub addrs: Vec<(u128, u32)>,
}

impl SrcCands {
    /// The candidate sharing the longest prefix with `dst` (the first of equals) and
    /// that prefix's length.
    #[inline]
    pub fn best(&self, dst: u128) -> Option<(u32, u128)> {
        let mut best: Option<(u32, u128)> = None;
        for &(a, _) in &self.addrs {
            let common = (a ^ dst).leading_zeros();
            if best.is_none_or(|(c, _)| common > c) {
                best = Some((common, a));
            }
        }
        best
    }
}

/// `rt6_need_strict`'s scope test: multicast, link-local or loopback are not global.
fn global_v6(a: std::net::Ipv6Addr) -> bool {
    !(a.is_multicast() || a.is_unicast_link_local() || a.is_loopback())
}

impl SrcV6 {
    /// The choice over `ifaces`, in the order the general selection walks them.
    pub fn new<'a>(ifaces: impl IntoIterator<Item = &'a Iface>) -> SrcV6 {
        let all: Vec<(std::net::Ipv6Addr, u32)> = ifaces
            .into_iter()
            .flat_map(|i| {
                i.addrs.iter().filter_map(move |&(a, _)| match a {
                    IpAddr::V6(a) => Some((a, i.ifindex)),
                    IpAddr::V4(_) => None,
                })
            })
            .collect();
        let cands = |out: Option<u32>| {
            let rank = |&(a, i): &(std::net::Ipv6Addr, u32)| {
                1 + 2 * u8::from(global_v6(a)) + u8::from(Some(i) == out)
            };
            let top = all.iter().map(rank).max().unwrap_or(0);
            let addrs =
                all.iter().filter(|x| rank(x) == top).map(|&(a, i)| (u128::from(a), i)).collect();
            SrcCands { rank: top, addrs }
        };
        let mut outs: Vec<u32> = all.iter().map(|&(_, i)| i).collect();
        outs.sort_unstable();
        outs.dedup();
        let mut own: Vec<(u128, u32)> = all.iter().map(|&(a, i)| (u128::from(a), i)).collect();
        own.sort_unstable();
        SrcV6 {
            by_out: outs.into_iter().map(|o| (o, cands(Some(o)))).collect(),
            other: cands(None),
            own,
        }
    }

    /// Whether an interface holds address `a` (a scan: a router has few).
    #[inline]
    pub fn owns(&self, a: u128) -> bool {
        self.own.iter().any(|&(x, _)| x == a)
    }

    /// The indexes of the interfaces holding address `a`.
    pub fn owners(&self, a: u128) -> impl Iterator<Item = u32> + '_ {
        self.own.iter().filter(move |&&(x, _)| x == a).map(|&(_, i)| i)
    }

    /// The source address for destination `dst` through output device `out` over
    /// these interfaces alone: `dst` if it is theirs, else the best candidate; `None`
    /// when they hold no IPv6 address (`NO_SRC_ADDR`).
    #[inline]
    pub fn choose(&self, out: u32, dst: u128) -> Option<std::net::Ipv6Addr> {
        if self.owns(dst) {
            return Some(dst.into());
        }
        let c = self.cands(out);
        match c.addrs.as_slice() {
            [(a, _)] => Some((*a).into()),
            _ => c.best(dst).map(|(_, a)| a.into()),
        }
    }

    /// The candidates with output device `out` (a scan: few devices hold addresses).
    #[inline]
    pub fn cands(&self, out: u32) -> &SrcCands {
        match self.by_out.iter().find(|&&(o, _)| o == out) {
            Some((_, c)) => c,
            None => &self.other,
        }
    }

    /// Whether no interface holds an IPv6 address.
    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }
}
