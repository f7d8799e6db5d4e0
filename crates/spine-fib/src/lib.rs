//! The forwarding information base: longest-prefix match for IPv4 and IPv6, route
//! tables with the kernel's route types, metrics and ECMP groups, and the neighbour
//! table. No I/O, no threads, no clock.
#![deny(unsafe_code)]

pub mod addr;
pub mod lpm;
pub mod prefix;
pub mod publish;

pub use addr::Address;
pub use lpm::{Dir24, Lpm, Lpm4, Lpm6, LpmError, Memory, Poptrie, Rib, MAX_VALUE};
pub use prefix::{IpPrefix, Prefix, Prefix4, Prefix6, PrefixError};

pub mod ecmp;
pub mod fib;
pub mod fwd;
mod iface;
pub mod mphash;
pub mod neigh;
pub mod parse;
pub mod route;
pub mod rule;
mod table;

pub use fib::{FibError, FibOp, FibReader, FibSnapshot, FibState, FibWriter, Resolved, RouteEntry};
pub use fwd::{Fast, FastRoute, Fwd, Fwd4, Fwd6, GatewayBytes, Group};
pub use iface::{Iface, SrcCands, SrcV6};
pub use neigh::{Neigh, NeighTable, NudState};
pub use route::{table_id, NextHop, Route, RouteSelector, RouteType};
pub use rule::{Flow, Rule, RuleAction, RuleResult, RuleSet};

/// True when the route store has no index left that an LPM can hold.
pub(crate) fn route_index_limit(stored: usize) -> bool {
    stored > MAX_VALUE as usize
}
