//! The regions an invocation may touch. Every load, store and helper pointer argument
//! is checked against them; the runtime registers what it hands the program (stack,
//! context, packet, map values) and nothing else is reachable.

use crate::{AccessKind, Fault};

/// Most regions one invocation can see (stack, context, packet, and map value areas).
pub const MAX_REGIONS: usize = 64;

/// A span of host memory the program may access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Region {
    pub start: u64,
    pub len: u64,
    pub writable: bool,
}

impl Region {
    #[inline]
    fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.start
            && addr.wrapping_sub(self.start) <= self.len.saturating_sub(len)
            && len <= self.len
    }
}

/// A fixed-capacity set of regions. Registering a region is `unsafe` because from then
/// on the engine dereferences any address inside it.
#[derive(Debug, Clone)]
pub struct Memory {
    regions: [Region; MAX_REGIONS],
    len: usize,
}

impl Default for Memory {
    fn default() -> Self {
        Self::new()
    }
}

impl Memory {
    pub fn new() -> Self {
        Memory { regions: [Region::default(); MAX_REGIONS], len: 0 }
    }

    /// Number of registered regions.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn region(&self, idx: usize) -> Option<Region> {
        self.regions[..self.len].get(idx).copied()
    }

    /// Adds a region and returns its index, or `None` when all slots are used.
    ///
    /// # Safety
    /// `[start, start + len)` must be valid for reads (and writes when `writable`) for as
    /// long as the region stays registered, and nothing else may hold a Rust reference to
    /// it while an engine runs.
    pub unsafe fn push(&mut self, r: Region) -> Option<usize> {
        if self.len == MAX_REGIONS {
            return None;
        }
        self.regions[self.len] = r;
        self.len += 1;
        Some(self.len - 1)
    }

    /// Replaces region `idx` (the packet after `xdp_adjust_head`, say).
    ///
    /// # Safety
    /// As for [`Memory::push`]. Panics if `idx` is not registered.
    pub unsafe fn set(&mut self, idx: usize, r: Region) {
        assert!(idx < self.len, "region {idx} not registered");
        self.regions[idx] = r;
    }

    /// As [`Memory::set`], without checking `idx` (the per-packet rewrite of a region
    /// registered for good, whose index the caller holds).
    ///
    /// # Safety
    /// As for [`Memory::push`]; and `idx` is a registered region's (below
    /// [`Memory::len`]).
    #[inline(always)]
    pub unsafe fn set_unchecked(&mut self, idx: usize, r: Region) {
        debug_assert!(idx < self.len, "region {idx} not registered");
        // SAFETY: `idx < self.len <= MAX_REGIONS` (the caller's contract).
        unsafe { *self.regions.get_unchecked_mut(idx) = r };
    }

    /// Drops every region from `len` on (the per-invocation ones).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// True if `[addr, addr + len)` lies inside one region allowing `kind`.
    #[inline]
    pub fn check(&self, addr: u64, len: usize, kind: AccessKind) -> bool {
        let len = len as u64;
        self.regions[..self.len]
            .iter()
            .any(|r| r.contains(addr, len) && (kind == AccessKind::Read || r.writable))
    }

    /// Checks an engine access, naming the instruction on failure.
    #[inline]
    pub fn access(&self, pc: usize, addr: u64, len: usize, kind: AccessKind) -> Result<(), Fault> {
        if self.check(addr, len, kind) {
            Ok(())
        } else {
            Err(Fault::OutOfBounds { pc, addr, len, kind })
        }
    }

    /// The bytes at `addr`, if readable.
    pub fn slice(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if len == 0 {
            return Some(&[]);
        }
        if !self.check(addr, len, AccessKind::Read) {
            return None;
        }
        // SAFETY: the range lies inside a registered region, which `push`/`set` callers
        // guaranteed valid for reads while registered; `&self` keeps it registered.
        Some(unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
    }

    /// The bytes at `addr`, if writable.
    pub fn slice_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        if len == 0 {
            return Some(&mut []);
        }
        if !self.check(addr, len, AccessKind::Write) {
            return None;
        }
        // SAFETY: as in `slice`, for a writable region; `&mut self` prevents a second
        // slice from this `Memory` aliasing it.
        Some(unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_exact() {
        let mut buf = [0u8; 16];
        let mut m = Memory::new();
        // SAFETY: `buf` outlives `m`'s use below.
        unsafe { m.push(Region { start: buf.as_mut_ptr() as u64, len: 16, writable: false }) };
        let a = buf.as_ptr() as u64;
        assert!(m.check(a, 16, AccessKind::Read));
        assert!(m.check(a + 15, 1, AccessKind::Read));
        assert!(!m.check(a + 15, 2, AccessKind::Read));
        assert!(!m.check(a - 1, 1, AccessKind::Read));
        assert!(!m.check(a, 17, AccessKind::Read));
        assert!(!m.check(a, 1, AccessKind::Write));
        assert!(!m.check(u64::MAX, 8, AccessKind::Read));
        assert!(m.slice_mut(a, 1).is_none());
        assert_eq!(m.slice(a + 4, 4).map(|s| s.len()), Some(4));
    }
}
