//! The forwarding information base: longest-prefix match for IPv4 and IPv6, route
//! tables with the kernel's route types, metrics and ECMP groups, and the neighbour
//! table. No I/O, no threads, no clock.
#![deny(unsafe_code)]

pub mod addr;
pub mod lpm;
pub mod prefix;

pub use addr::Address;
pub use lpm::{Dir24, Lpm, Lpm4, Lpm6, LpmError, Memory, Poptrie, Rib, MAX_VALUE};
pub use prefix::{IpPrefix, Prefix, Prefix4, Prefix6, PrefixError};
