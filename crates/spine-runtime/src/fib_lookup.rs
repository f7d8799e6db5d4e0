//! `bpf_fib_lookup` (helper 69) as the kernel's `bpf_xdp_fib_lookup` answers it
//! (`net/core/filter.c`: `bpf_ipv4_fib_lookup`, `bpf_ipv6_fib_lookup`): the same
//! `struct bpf_fib_lookup` in and out, the same flags, the same return codes, in the
//! same order of checks, against spine's FIB and the router's interfaces.
//!
//! What the FIB does not model answers as the kernel does when the feature is unused:
//! no lightweight tunnels (never `UNSUPP_LWT`), no l3mdev (DIRECT uses the main
//! table), no next-hop exceptions (no learned path MTU), no policy rules beyond the
//! default three (so `MARK` selects nothing), and IPv4 route MTUs only count when the
//! kernel would count them (`mtu lock`, which the FIB does not store: the device's MTU).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use spine_fib::{FibReader, FibState, RouteType};

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
/// `IPTOS_RT_MASK`: the TOS bits that select a route.
const IPTOS_RT_MASK: u8 = 0x1c;
const IP_MAX_MTU: u32 = 0xfff0;
const IP6_MAX_MTU: u32 = 65535 + 40;

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

/// What `bpf_fib_lookup` reads: the FIB and the interfaces, shared by every worker.
#[derive(Debug, Clone)]
pub struct FibEnv {
    pub fib: FibReader,
    /// Sorted by ifindex.
    ifaces: Vec<Iface>,
}

impl FibEnv {
    pub fn new(fib: FibReader, mut ifaces: Vec<Iface>) -> FibEnv {
        ifaces.sort_by_key(|i| i.ifindex);
        ifaces.dedup_by_key(|i| i.ifindex);
        FibEnv { fib, ifaces }
    }

    pub fn iface(&self, ifindex: u32) -> Option<&Iface> {
        self.ifaces.binary_search_by_key(&ifindex, |i| i.ifindex).ok().map(|i| &self.ifaces[i])
    }

    /// `bpf_fib_lookup(ctx, params, plen, flags)` on a copy of the program's struct;
    /// the caller writes `p` back.
    pub fn lookup(&self, p: &mut [u8; PARAMS_LEN], plen: u64, fl: u64) -> i64 {
        if plen < PARAMS_LEN as u64 || fl & !flags::ALL != 0 {
            return -spine_abi::errno::EINVAL;
        }
        let state = self.fib.load();
        match p[0] {
            AF_INET => self.lookup_v4(&state, p, fl),
            AF_INET6 => self.lookup_v6(&state, p, fl),
            _ => -EAFNOSUPPORT,
        }
    }

    fn lookup_v4(&self, st: &FibState, p: &mut [u8; PARAMS_LEN], fl: u64) -> i64 {
        let Some(dev) = self.iface(rd32(p, 8)) else { return -ENODEV };
        if !dev.forward_v4 {
            return ret::FWD_DISABLED;
        }
        let _tos = p[12] & IPTOS_RT_MASK;
        let src = Ipv4Addr::from(rd_be32(p, 16));
        let dst = Ipv4Addr::from(rd_be32(p, 32));
        let hash = flow_hash(&src.octets(), &dst.octets());
        let res = if fl & flags::DIRECT != 0 {
            let mut tbid = spine_fib::table_id::MAIN;
            if fl & flags::TBID != 0 {
                tbid = rd32(p, 48);
                wr32(p, 48, 0);
            }
            st.lookup(tbid, IpAddr::V4(dst), hash)
        } else {
            st.lookup_default_rules(IpAddr::V4(dst), hash)
        };
        // fib_lookup's errors, mapped as the kernel maps them.
        let Some(res) = res else { return ret::NOT_FWDED };
        match res.route.kind {
            RouteType::Unicast => {}
            RouteType::Blackhole => return ret::BLACKHOLE,
            RouteType::Unreachable => return ret::UNREACHABLE,
            RouteType::Prohibit => return ret::PROHIBIT,
            _ => return ret::NOT_FWDED,
        }
        let Some(nh) = res.nexthop else { return ret::NOT_FWDED };
        let Some(out) = self.iface(nh.ifindex) else { return ret::NOT_FWDED };
        let mtu = out.mtu.min(IP_MAX_MTU);
        if u32::from(rd16(p, 6)) > mtu {
            wr16(p, 6, mtu as u16);
            return ret::FRAG_NEEDED;
        }
        wr32(p, 12, res.route.metric);
        wr32(p, 8, out.ifindex);
        if fl & flags::SRC != 0 {
            let gw = nh.gateway.unwrap_or(IpAddr::V4(dst));
            match select_src(out, gw, true) {
                Some(IpAddr::V4(a)) => p[16..20].copy_from_slice(&a.octets()),
                _ => return ret::NO_SRC_ADDR,
            }
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
            None => IpAddr::V4(dst),
        };
        self.finish(st, p, fl, out, next, mtu)
    }

    fn lookup_v6(&self, st: &FibState, p: &mut [u8; PARAMS_LEN], fl: u64) -> i64 {
        let src = Ipv6Addr::from(rd_be128(p, 16));
        let dst = Ipv6Addr::from(rd_be128(p, 32));
        // Link-local, multicast and loopback addresses are never forwarded.
        if need_strict(dst) || need_strict(src) {
            return ret::NOT_FWDED;
        }
        let Some(dev) = self.iface(rd32(p, 8)) else { return -ENODEV };
        if !dev.forward_v6 {
            return ret::FWD_DISABLED;
        }
        let hash = flow_hash(&src.octets(), &dst.octets());
        let res = if fl & flags::DIRECT != 0 {
            let mut tbid = spine_fib::table_id::MAIN;
            if fl & flags::TBID != 0 {
                tbid = rd32(p, 48);
                wr32(p, 48, 0);
            }
            st.lookup(tbid, IpAddr::V6(dst), hash)
        } else {
            st.lookup_default_rules(IpAddr::V6(dst), hash)
        };
        let Some(res) = res else { return ret::NOT_FWDED };
        match res.route.kind {
            RouteType::Unicast => {}
            RouteType::Blackhole => return ret::BLACKHOLE,
            RouteType::Unreachable => return ret::UNREACHABLE,
            RouteType::Prohibit => return ret::PROHIBIT,
            _ => return ret::NOT_FWDED,
        }
        let Some(nh) = res.nexthop else { return ret::NOT_FWDED };
        let Some(out) = self.iface(nh.ifindex) else { return ret::NOT_FWDED };
        // ip6_mtu_from_fib6: the route's MTU when set, else the device's.
        let mtu = if res.route.mtu != 0 { res.route.mtu } else { out.mtu }.min(IP6_MAX_MTU);
        if u32::from(rd16(p, 6)) > mtu {
            wr16(p, 6, mtu as u16);
            return ret::FRAG_NEEDED;
        }
        let next = match nh.gateway {
            Some(IpAddr::V6(g)) => {
                p[32..48].copy_from_slice(&g.octets());
                g
            }
            _ => dst,
        };
        wr32(p, 12, res.route.metric);
        wr32(p, 8, out.ifindex);
        if fl & flags::SRC != 0 {
            match select_src(out, IpAddr::V6(dst), false) {
                Some(IpAddr::V6(a)) => p[16..32].copy_from_slice(&a.octets()),
                _ => return ret::NO_SRC_ADDR,
            }
        }
        self.finish(st, p, fl, out, IpAddr::V6(next), mtu)
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

/// `rt6_need_strict`: multicast, link-local or loopback.
fn need_strict(a: Ipv6Addr) -> bool {
    a.is_multicast() || a.is_unicast_link_local() || a.is_loopback()
}

/// A source address on `dev` for reaching `toward`: the first whose subnet holds it,
/// else the first of the family (`inet_select_addr`'s preference).
fn select_src(dev: &Iface, toward: IpAddr, v4: bool) -> Option<IpAddr> {
    let family = dev.addrs.iter().filter(|(a, _)| a.is_ipv4() == v4);
    let covering = family.clone().find(|&&(a, len)| same_subnet(a, toward, len));
    covering.or_else(|| family.clone().next()).map(|&(a, _)| a)
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

/// The flow hash choosing among ECMP next hops (31 bits, as the kernel's): over the
/// addresses, the kernel's default L3 policy. The kernel keys its hash with a
/// per-namespace secret, so which next hop a flow gets is only the kernel's when the
/// group has one next hop; the split by weight is the kernel's.
fn flow_hash(src: &[u8], dst: &[u8]) -> u32 {
    let mut h: u32 = 0x9e37_79b9;
    for &b in src.iter().chain(dst) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h >> 1
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

/// The helper's entry from [`spine_vm::Env::call`]: `(ctx, params, plen, flags)`.
pub(crate) fn call(
    env: Option<&FibEnv>,
    a: [u64; 5],
    mem: &mut spine_vm::Memory,
) -> Result<u64, spine_vm::CallAbort> {
    let bad = || spine_vm::CallAbort::Fault("bpf_fib_lookup params outside the program's memory");
    let slot = mem.slice_mut(a[1], PARAMS_LEN).ok_or_else(bad)?;
    let mut p = [0u8; PARAMS_LEN];
    p.copy_from_slice(slot);
    let r = match env {
        Some(env) => env.lookup(&mut p, a[2], a[3]),
        None if a[2] < PARAMS_LEN as u64 || a[3] & !flags::ALL != 0 => -spine_abi::errno::EINVAL,
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
}
