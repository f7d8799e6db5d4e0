//! Routes as the kernel's FIB holds them: a table, a prefix, a type, a metric
//! (priority), next hops, an MTU.

use std::fmt;
use std::net::IpAddr;

use crate::prefix::IpPrefix;

/// Table ids as Linux numbers them (`RT_TABLE_*`); any other `u32` names a table too.
pub mod table_id {
    pub const UNSPEC: u32 = 0;
    pub const DEFAULT: u32 = 253;
    pub const MAIN: u32 = 254;
    pub const LOCAL: u32 = 255;
}

/// The kernel's route types (`RTN_*`) that a FIB lookup can return.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteType {
    /// Forward via the next hop(s).
    Unicast,
    /// Addressed to this host.
    Local,
    /// A broadcast address of a local subnet.
    Broadcast,
    /// An anycast address of this host (IPv6's subnet-router anycast).
    Anycast,
    /// A multicast range (IPv6's `ff00::/8` in the local table).
    Multicast,
    /// Drop silently.
    Blackhole,
    /// Drop, answer "host unreachable".
    Unreachable,
    /// Drop, answer "administratively prohibited".
    Prohibit,
    /// Not found in this table: continue with the next rule.
    Throw,
}

impl RouteType {
    /// The `RTN_*` number.
    pub fn rtn(self) -> u8 {
        match self {
            RouteType::Unicast => 1,
            RouteType::Local => 2,
            RouteType::Broadcast => 3,
            RouteType::Anycast => 4,
            RouteType::Multicast => 5,
            RouteType::Blackhole => 6,
            RouteType::Unreachable => 7,
            RouteType::Prohibit => 8,
            RouteType::Throw => 9,
        }
    }

    /// From an `RTN_*` number; `None` for types a FIB lookup does not handle
    /// (nat, xresolve).
    pub fn from_rtn(n: u8) -> Option<RouteType> {
        Some(match n {
            1 => RouteType::Unicast,
            2 => RouteType::Local,
            3 => RouteType::Broadcast,
            4 => RouteType::Anycast,
            5 => RouteType::Multicast,
            6 => RouteType::Blackhole,
            7 => RouteType::Unreachable,
            8 => RouteType::Prohibit,
            9 => RouteType::Throw,
            _ => return None,
        })
    }

    /// The name `ip route` uses.
    pub fn name(self) -> &'static str {
        match self {
            RouteType::Unicast => "unicast",
            RouteType::Local => "local",
            RouteType::Broadcast => "broadcast",
            RouteType::Anycast => "anycast",
            RouteType::Multicast => "multicast",
            RouteType::Blackhole => "blackhole",
            RouteType::Unreachable => "unreachable",
            RouteType::Prohibit => "prohibit",
            RouteType::Throw => "throw",
        }
    }

    pub fn from_name(s: &str) -> Option<RouteType> {
        [
            RouteType::Unicast,
            RouteType::Local,
            RouteType::Broadcast,
            RouteType::Anycast,
            RouteType::Multicast,
            RouteType::Blackhole,
            RouteType::Unreachable,
            RouteType::Prohibit,
            RouteType::Throw,
        ]
        .into_iter()
        .find(|t| t.name() == s)
    }

    /// Types that drop or defer the packet carry no next hop (the kernel refuses one:
    /// "Gateway, device and multipath can not be specified for this route type").
    pub fn takes_nexthop(self) -> bool {
        matches!(
            self,
            RouteType::Unicast
                | RouteType::Local
                | RouteType::Broadcast
                | RouteType::Anycast
                | RouteType::Multicast
        )
    }
}

impl fmt::Display for RouteType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One next hop: a gateway (absent for a directly connected destination) and the
/// output interface. `weight` is 1..=256 (`rtnh_hops + 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NextHop {
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    pub weight: u16,
    /// The kernel's next hop carries a lightweight-tunnel encapsulation (`encap ip`,
    /// `encap seg6`, `encap mpls`: its `nhc_lwtstate`); `bpf_fib_lookup` answers
    /// `BPF_FIB_LKUP_RET_UNSUPP_LWT` when it is chosen.
    pub encap: bool,
}

impl NextHop {
    pub fn via(gateway: IpAddr, ifindex: u32) -> NextHop {
        NextHop { gateway: Some(gateway), ifindex, weight: 1, encap: false }
    }

    pub fn dev(ifindex: u32) -> NextHop {
        NextHop { gateway: None, ifindex, weight: 1, encap: false }
    }
}

/// A route to add or replace. One next hop, or several (an ECMP group, chosen among
/// by the caller's flow hash and the weights).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Route {
    pub table: u32,
    pub prefix: IpPrefix,
    pub kind: RouteType,
    /// The kernel's priority: among routes for one prefix, the lowest wins.
    pub metric: u32,
    pub nexthops: Vec<NextHop>,
    /// Path MTU (`RTAX_MTU`) when locked (`mtu lock N`); 0 otherwise. Forwarding
    /// honours a route's MTU only when it is locked (`ip_mtu_from_fib_result`,
    /// `ip6_mtu_from_fib6`), so an unlocked one is not kept.
    pub mtu: u32,
    /// The preferred source address (`src`, `RTA_PREFSRC`), what `BPF_FIB_LOOKUP_SRC`
    /// answers when set.
    pub prefsrc: Option<IpAddr>,
    /// The nexthop object the route names (`nhid`, resolved into `nexthops` by
    /// `spine_rtnl`), 0 for none. Its next hop is chosen as the kernel chooses in a
    /// nexthop group (`nexthop_select_path`), not as among a route's own next hops.
    pub nhid: u32,
}

impl Route {
    /// A unicast route in the main table, metric 0, no MTU.
    pub fn unicast(prefix: IpPrefix, nexthops: Vec<NextHop>) -> Route {
        Route {
            table: table_id::MAIN,
            prefix,
            kind: RouteType::Unicast,
            metric: 0,
            nexthops,
            mtu: 0,
            prefsrc: None,
            nhid: 0,
        }
    }
}

/// Which routes a delete removes: the first (lowest metric) route for `prefix` in
/// `table` that matches the metric and type when given (the kernel's
/// `fib_table_delete`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSelector {
    pub table: u32,
    pub prefix: IpPrefix,
    pub metric: Option<u32>,
    pub kind: Option<RouteType>,
}
