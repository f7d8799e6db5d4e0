//! The neighbour table: (interface, IP) → link-layer address and the kernel's NUD
//! state, read by the data path to fill in a next hop's MAC.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

/// The kernel's `nud_state` bits (`NUD_*`, `include/uapi/linux/neighbour.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NudState(pub u16);

impl NudState {
    pub const NONE: NudState = NudState(0x00);
    pub const INCOMPLETE: NudState = NudState(0x01);
    pub const REACHABLE: NudState = NudState(0x02);
    pub const STALE: NudState = NudState(0x04);
    pub const DELAY: NudState = NudState(0x08);
    pub const PROBE: NudState = NudState(0x10);
    pub const FAILED: NudState = NudState(0x20);
    pub const NOARP: NudState = NudState(0x40);
    pub const PERMANENT: NudState = NudState(0x80);
    /// `NUD_VALID`: states whose address may be used to send.
    const VALID: u16 = 0x80 | 0x40 | 0x02 | 0x10 | 0x04 | 0x08;

    /// Reachable, stale, delay, probe, permanent or noarp: the address may be used
    /// (what `bpf_fib_lookup` checks). Incomplete, failed and none may not.
    pub fn usable(self) -> bool {
        self.0 & Self::VALID != 0
    }
}

/// A neighbour entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Neigh {
    pub mac: [u8; 6],
    pub state: NudState,
}

/// The entries, keyed as the kernel keys them: by device and address.
#[derive(Debug, Clone, Default)]
pub struct NeighTable {
    map: FxHashMap<(u32, IpAddr), Neigh>,
}

impl NeighTable {
    /// The entry for `ip` on `ifindex`.
    #[inline]
    pub fn get(&self, ifindex: u32, ip: IpAddr) -> Option<&Neigh> {
        self.map.get(&(ifindex, ip))
    }

    /// Adds or replaces; returns the previous entry.
    pub fn set(&mut self, ifindex: u32, ip: IpAddr, n: Neigh) -> Option<Neigh> {
        self.map.insert((ifindex, ip), n)
    }

    pub fn remove(&mut self, ifindex: u32, ip: IpAddr) -> Option<Neigh> {
        self.map.remove(&(ifindex, ip))
    }

    /// Removes every entry of an interface (the device went away).
    pub fn flush_dev(&mut self, ifindex: u32) {
        self.map.retain(|k, _| k.0 != ifindex);
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usable_states() {
        for s in [
            NudState::REACHABLE,
            NudState::STALE,
            NudState::PERMANENT,
            NudState::DELAY,
            NudState::PROBE,
            NudState::NOARP,
        ] {
            assert!(s.usable(), "{s:?}");
        }
        for s in [NudState::INCOMPLETE, NudState::FAILED, NudState::NONE] {
            assert!(!s.usable(), "{s:?}");
        }
    }
}
