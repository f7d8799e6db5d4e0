//! The host router's data paths as an endpoint sees them (see `docs/ARCHITECTURE.md`,
//! "The host router's four data paths"). An endpoint opened with `path = "frames"`
//! (the default) gets copies of whole frames: the `copy` path. `header-copy` gets the
//! first bytes of each frame inline with a handle on the pool buffer the adapter keeps
//! ([`Parked`]); the client returns a rewritten header with the handle and an egress
//! port and the adapter splices it before the payload it kept. `in-place` gets each
//! frame in a frame of the endpoint's area, always (never inline); the client rewrites
//! it there and hands the same frame back with an egress port.
//!
//! Handles are the client's to write, so every one is checked against the table it
//! must name: a slot index and that slot's generation, which changes each time the slot
//! is used. A forged, stale or duplicated handle names a slot that is empty or has
//! another generation; it is refused and counted (`bad_handle`), never trusted. The
//! table's buffers go back to the pool when the endpoint goes (closed, its client
//! dead) or the adapter stops: none is lost to a client that never returns them.

use serde::{Deserialize, Serialize};
use spine_pool::Buf;

/// What an endpoint carries between the adapter and the host application.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostPath {
    /// Whole frames, copied into and out of the endpoint's area (the `copy` path).
    #[default]
    Frames,
    /// Headers inline with a handle; the payload stays in the adapter's buffer.
    HeaderCopy,
    /// Whole frames always in a frame of the area, rewritten there and handed back.
    InPlace,
}

/// Largest `header_bytes` (one inline slot).
pub const HEADER_MAX: u16 = spine_endpoint::INLINE_BYTES as u16;
/// Default `header_bytes`: Ethernet, an 802.1Q tag, IPv4 with up to 26 bytes of
/// options or the first 46 bytes of IPv6.
pub const HEADER_DEFAULT: u16 = 64;

/// The buffers a header-copy endpoint holds: the handles handed out and not returned.
#[derive(Debug)]
pub(crate) struct Parked {
    /// By slot: the buffer and how many header bytes were delivered from it.
    slots: Vec<Option<(Buf, u16)>>,
    /// By slot: its generation (the handle's high half); starts at 1, so handle 0 is
    /// never valid.
    gens: Vec<u32>,
    /// Empty slots.
    free: Vec<u32>,
    /// Handles refused (forged, stale, duplicated, or with a bad egress port).
    pub bad_handle: u64,
    /// Frames that found the table full (the client holds too many): dropped.
    pub full: u64,
}

impl Parked {
    /// A table of `cap` slots (allocated here, cold: once per endpoint).
    pub fn new(cap: u32) -> Self {
        Parked {
            slots: (0..cap).map(|_| None).collect(),
            gens: vec![1; cap as usize],
            free: (0..cap).rev().collect(),
            bad_handle: 0,
            full: 0,
        }
    }

    /// Buffers held now.
    pub fn held(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Keeps `buf`, of which `hdr` bytes were delivered; its handle, or the buffer back
    /// when the table is full (counted).
    #[inline]
    pub fn park(&mut self, buf: Buf, hdr: u16) -> Result<u64, Buf> {
        let Some(i) = self.free.pop() else {
            self.full += 1;
            return Err(buf);
        };
        self.slots[i as usize] = Some((buf, hdr));
        Ok(u64::from(self.gens[i as usize]) << 32 | u64::from(i))
    }

    /// The buffer `handle` names and its delivered header length, if the handle is
    /// current; otherwise `None`, counted. The slot is free again and its generation
    /// moves on, so the same handle never works twice.
    #[inline]
    pub fn take(&mut self, handle: u64) -> Option<(Buf, u16)> {
        let (i, g) = ((handle & 0xffff_ffff) as usize, (handle >> 32) as u32);
        let current = self.gens.get(i) == Some(&g) && self.slots[i].is_some();
        if !current {
            self.bad_handle += 1;
            return None;
        }
        self.gens[i] = self.gens[i].wrapping_add(1).max(1);
        // Within capacity: `free` was allocated with room for every slot.
        self.free.push(i as u32);
        self.slots[i].take()
    }

    /// The buffer `handle` names, taken back without counting (its delivery failed).
    pub fn cancel(&mut self, handle: u64) -> Option<Buf> {
        let before = self.bad_handle;
        let got = self.take(handle).map(|(b, _)| b);
        self.bad_handle = before;
        got
    }

    /// Every buffer held (the endpoint is going).
    pub fn drain(&mut self) -> impl Iterator<Item = Buf> + '_ {
        self.free.clear();
        self.free.extend((0..self.slots.len() as u32).rev());
        self.slots.iter_mut().filter_map(|s| s.take().map(|(b, _)| b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_pool::{Pool, PoolConfig};

    #[test]
    fn handles_are_refused_when_forged_stale_or_duplicated_and_no_buffer_is_lost() {
        let pool = Pool::new(PoolConfig::new(16)).unwrap();
        let mut cache = pool.cache();
        let mut t = Parked::new(4);
        let h1 = t.park(cache.alloc().unwrap(), 64).unwrap();
        let h2 = t.park(cache.alloc().unwrap(), 40).unwrap();
        assert_ne!(h1, h2);
        assert!(t.take(0).is_none(), "handle 0 is never valid");
        assert!(t.take(h1 ^ 1 << 32).is_none(), "another generation");
        assert!(t.take(u64::from(u32::MAX)).is_none(), "a slot past the table");
        assert!(t.take(3).is_none(), "an empty slot");
        let (b, hdr) = t.take(h2).unwrap();
        assert_eq!(hdr, 40);
        cache.free(b).unwrap();
        assert!(t.take(h2).is_none(), "returned twice");
        assert_eq!(t.bad_handle, 5);
        let h3 = t.park(cache.alloc().unwrap(), 64).unwrap();
        assert_eq!(h3 & 0xffff_ffff, h2 & 0xffff_ffff, "the slot is used again");
        assert!(t.take(h2).is_none(), "the old handle of a reused slot is stale");
        for _ in 0..2 {
            t.park(cache.alloc().unwrap(), 64).unwrap();
        }
        let extra = cache.alloc().unwrap();
        let back = t.park(extra, 64).unwrap_err();
        assert_eq!((t.full, t.held()), (1, 4));
        cache.free(back).unwrap();
        for b in t.drain().collect::<Vec<_>>() {
            cache.free(b).unwrap();
        }
        assert_eq!(t.held(), 0);
        drop(cache);
        assert_eq!(pool.shared_free(), pool.capacity(), "every buffer back");
        assert!(t.take(h1).is_none(), "a drained handle is stale");
    }
}
