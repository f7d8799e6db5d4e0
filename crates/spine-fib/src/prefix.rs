//! [`Prefix`]: an address and a length, host bits clear.

use std::fmt;
use std::net::IpAddr;

use crate::addr::Address;

/// `addr/len` with every bit past `len` zero (a checked constructor enforces it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix<A: Address> {
    addr: A,
    len: u8,
}

pub type Prefix4 = Prefix<u32>;
pub type Prefix6 = Prefix<u128>;

/// Why a prefix was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    #[error("prefix length {len} is longer than the address ({max} bits)")]
    TooLong { len: u32, max: u32 },
    #[error("{addr}/{len} has bits set past the prefix length")]
    HostBits { addr: String, len: u32 },
    #[error("`{0}` is not an address/length")]
    Syntax(String),
}

impl<A: Address> Prefix<A> {
    /// The prefix `addr/len`; refuses host bits (as `ip route` does).
    pub fn new(addr: A, len: u32) -> Result<Self, PrefixError> {
        if len > A::BITS {
            return Err(PrefixError::TooLong { len, max: A::BITS });
        }
        if addr.mask(len) != addr {
            return Err(PrefixError::HostBits { addr: format!("{}", addr.to_std()), len });
        }
        Ok(Prefix { addr, len: len as u8 })
    }

    /// The prefix of length `len` that contains `addr` (host bits cleared).
    pub fn truncating(addr: A, len: u32) -> Result<Self, PrefixError> {
        if len > A::BITS {
            return Err(PrefixError::TooLong { len, max: A::BITS });
        }
        Ok(Prefix { addr: addr.mask(len), len: len as u8 })
    }

    pub fn addr(&self) -> A {
        self.addr
    }

    /// The prefix length in bits.
    #[expect(clippy::len_without_is_empty, reason = "a prefix length, not a container's size")]
    pub fn len(&self) -> u32 {
        self.len as u32
    }

    /// The default route (`/0`) is the only prefix that is "empty" of bits.
    pub fn is_default(&self) -> bool {
        self.len == 0
    }

    /// The last address the prefix covers.
    pub fn last(&self) -> A {
        self.addr.last_of(self.len())
    }

    pub fn contains(&self, a: A) -> bool {
        a.mask(self.len()) == self.addr
    }

    /// True if `other` lies inside `self` (equal counts).
    pub fn covers(&self, other: &Prefix<A>) -> bool {
        other.len >= self.len && self.contains(other.addr)
    }
}

impl<A: Address> fmt::Display for Prefix<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr.to_std(), self.len)
    }
}

impl<A: Address> std::str::FromStr for Prefix<A> {
    type Err = PrefixError;

    /// `a.b.c.d/len` or `x::y/len`; a bare address is a host prefix.
    fn from_str(s: &str) -> Result<Self, PrefixError> {
        let syntax = || PrefixError::Syntax(s.to_string());
        let (a, len) = match s.split_once('/') {
            Some((a, l)) => (a, l.parse::<u32>().map_err(|_| syntax())?),
            None => (s, A::BITS),
        };
        let addr = a.parse::<A::Std>().map_err(|_| syntax())?;
        Prefix::new(A::from_std(addr), len)
    }
}

/// A prefix of either family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpPrefix {
    V4(Prefix4),
    V6(Prefix6),
}

impl IpPrefix {
    /// The prefix length in bits.
    #[expect(clippy::len_without_is_empty, reason = "a prefix length, not a container's size")]
    pub fn len(&self) -> u32 {
        match self {
            IpPrefix::V4(p) => p.len(),
            IpPrefix::V6(p) => p.len(),
        }
    }

    pub fn addr(&self) -> IpAddr {
        match self {
            IpPrefix::V4(p) => IpAddr::V4(p.addr().to_std()),
            IpPrefix::V6(p) => IpAddr::V6(p.addr().to_std()),
        }
    }

    pub fn is_default(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpPrefix::V4(p) => p.fmt(f),
            IpPrefix::V6(p) => p.fmt(f),
        }
    }
}

impl std::str::FromStr for IpPrefix {
    type Err = PrefixError;

    fn from_str(s: &str) -> Result<Self, PrefixError> {
        if s.contains(':') {
            s.parse().map(IpPrefix::V6)
        } else {
            s.parse().map(IpPrefix::V4)
        }
    }
}

impl TryFrom<IpPrefix> for Prefix4 {
    type Error = IpPrefix;

    /// The IPv4 prefix, or the IPv6 one back.
    fn try_from(p: IpPrefix) -> Result<Prefix4, IpPrefix> {
        match p {
            IpPrefix::V4(p) => Ok(p),
            other => Err(other),
        }
    }
}

impl TryFrom<IpPrefix> for Prefix6 {
    type Error = IpPrefix;

    fn try_from(p: IpPrefix) -> Result<Prefix6, IpPrefix> {
        match p {
            IpPrefix::V6(p) => Ok(p),
            other => Err(other),
        }
    }
}

impl From<Prefix4> for IpPrefix {
    fn from(p: Prefix4) -> Self {
        IpPrefix::V4(p)
    }
}

impl From<Prefix6> for IpPrefix {
    fn from(p: Prefix6) -> Self {
        IpPrefix::V6(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_display_and_checks() {
        let p: Prefix4 = "10.0.0.0/8".parse().unwrap();
        assert_eq!((p.addr(), p.len()), (0x0a00_0000, 8));
        assert_eq!(p.to_string(), "10.0.0.0/8");
        assert!(p.contains(0x0a01_0203) && !p.contains(0x0b00_0000));
        assert_eq!(p.last(), 0x0aff_ffff);
        assert!(matches!("10.0.0.1/8".parse::<Prefix4>(), Err(PrefixError::HostBits { .. })));
        assert!(matches!("10.0.0.0/33".parse::<Prefix4>(), Err(PrefixError::TooLong { .. })));
        assert!(matches!("10.0.0/8".parse::<Prefix4>(), Err(PrefixError::Syntax(_))));
        assert_eq!("192.0.2.1".parse::<Prefix4>().unwrap().len(), 32);
        let q: IpPrefix = "2001:db8::/32".parse().unwrap();
        assert_eq!(q.to_string(), "2001:db8::/32");
        assert_eq!("0.0.0.0/0".parse::<Prefix4>().unwrap().last(), u32::MAX);
        let t = Prefix4::truncating(0x0a01_0203, 16).unwrap();
        assert_eq!(t.to_string(), "10.1.0.0/16");
        assert!(t.covers(&"10.1.2.0/24".parse().unwrap()));
    }
}
