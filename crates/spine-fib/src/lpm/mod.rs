//! Longest-prefix match: prefix → `u32` value, for IPv4 and IPv6, with incremental
//! updates. The route layer ([`crate::table`]) stores an index into its route entries
//! as the value; nothing here knows what a route is.
//!
//! Two structures are kept behind the [`Lpm`] trait, chosen by measurement on the 2026
//! RIS tables (1,042,325 IPv4 / 246,175 IPv6 prefixes, `spine bench lpm`; per core, this
//! machine, figures in `docs/ARCHITECTURE.md`):
//!
//! | | IPv4 lookups/s (random / from table) | IPv4 memory | updates/s (trace) | IPv6 |
//! | --- | --- | --- | --- | --- |
//! | [`Poptrie`] (18-bit direct index, 6-bit popcount nodes) | ~70-100 M / ~55 M | ~9 MiB | ~1.2 M | yes |
//! | [`Dir24`] (DIR-24-8, 2^24 direct entries + /32 groups) | ~90-130 M / ~60 M | ~70 MiB | ~1.3 M | no |
//!
//! [`Poptrie`] is the default ([`Lpm4`], [`Lpm6`]): about DIR-24-8's speed in an eighth
//! of its memory, and it covers IPv6, where DIR-24-8 has no equivalent. (Figures of the
//! table above predate the pipelined IPv4 bursts of `docs/ARCHITECTURE.md`, "The
//! FIB's lookup".)
//!
//! Both derive their lookup structure from a [`Rib`] (a sorted map of the prefixes) that
//! they own: an update changes the RIB, then rebuilds the one region of the structure
//! the prefix covers, so a lookup structure never needs to be searched for what it
//! encodes.

mod blocks;
mod dir24;
mod poptrie;
mod rib;

pub use dir24::Dir24;
pub use poptrie::Poptrie;
pub use rib::Rib;

use crate::addr::Address;
use crate::prefix::Prefix;

/// The default IPv4 structure: Poptrie with an 18-bit direct index (1 MiB).
pub type Lpm4 = Poptrie<u32, 18>;
/// The default IPv6 structure: Poptrie with a 16-bit direct index (256 KiB).
pub type Lpm6 = Poptrie<u128, 20>;

/// Largest value an LPM stores (values above are reserved for the structures' tags).
pub const MAX_VALUE: u32 = 0x7fff_fffe;
/// The internal "no prefix covers this" value.
pub(crate) const NONE: u32 = 0x7fff_ffff;

/// Why an update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LpmError {
    #[error("value {0:#x} is above the largest an LPM stores ({MAX_VALUE:#x})")]
    ValueTooLarge(u32),
    #[error("{structure} holds only {bits}-bit addresses")]
    Family { structure: &'static str, bits: u32 },
}

/// Bytes a structure uses: what lookups touch, and what only updates need.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// The lookup structure (direct index, nodes, leaves, groups).
    pub lookup: usize,
    /// The RIB and update bookkeeping (an estimate for the RIB's B-tree).
    pub update: usize,
}

/// A longest-prefix-match structure with incremental updates.
///
/// Lookups take `&self` and never allocate; the update methods take `&mut self` (the
/// publication layer, [`crate::publish`], gives readers a consistent copy meanwhile).
pub trait Lpm<A: Address>: Clone + Send + Sync + 'static {
    /// Short name for reports.
    const NAME: &'static str;

    fn new() -> Self;

    /// The value of the longest prefix containing `addr`.
    fn lookup(&self, addr: A) -> Option<u32>;

    /// [`Lpm::lookup`] of every address in `addrs` into `out` (same length; `None` for
    /// no match), interleaving the lookups so that their cache misses overlap.
    fn lookup_batch(&self, addrs: &[A], out: &mut [Option<u32>]) {
        for (a, o) in addrs.iter().zip(out.iter_mut()) {
            *o = self.lookup(*a);
        }
    }

    /// Adds or replaces `prefix`; returns the value it replaced.
    fn insert(&mut self, prefix: Prefix<A>, value: u32) -> Result<Option<u32>, LpmError>;

    /// Removes `prefix`; returns its value.
    fn remove(&mut self, prefix: Prefix<A>) -> Option<u32>;

    /// Adds many prefixes and rebuilds once (far faster than one insert each).
    fn extend(
        &mut self,
        entries: impl IntoIterator<Item = (Prefix<A>, u32)>,
    ) -> Result<(), LpmError>;

    /// The RIB: every prefix and its value.
    fn rib(&self) -> &Rib<A>;

    /// The value stored for exactly `prefix`.
    fn get(&self, prefix: Prefix<A>) -> Option<u32> {
        self.rib().get(prefix)
    }

    fn len(&self) -> usize {
        self.rib().len()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn memory(&self) -> Memory;
}

pub(crate) fn check_value(v: u32) -> Result<(), LpmError> {
    if v > MAX_VALUE {
        return Err(LpmError::ValueTooLarge(v));
    }
    Ok(())
}

#[inline(always)]
pub(crate) fn some(v: u32) -> Option<u32> {
    (v != NONE).then_some(v)
}

#[cfg(test)]
mod tests;
