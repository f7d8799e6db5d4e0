//! A shared segment on the host side: a running adapter's memory-mappable array
//! (`BPF_F_MMAPABLE`) mapped into this process, shared with the extensions that use
//! it. Data is exchanged through flag words and atomics; a `bpf_spin_lock` in a value
//! is a 32-bit word taken by compare-and-swap 0 → 1 and released by storing 0, the
//! protocol the adapter's `bpf_spin_lock` helper follows, so [`Segment::lock`] excludes
//! the extensions on every worker.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::shm::Shm;
use crate::EndpointError;

/// A mapped segment. Offsets are bytes from its start; out-of-range or misaligned
/// offsets panic (they are the application's bug, never the adapter's data).
#[derive(Debug)]
pub struct Segment {
    shm: Shm,
}

impl Segment {
    /// Maps all of `fd`, a segment's memfd as the adapter hands it out.
    pub fn map(fd: OwnedFd) -> Result<Self, EndpointError> {
        Ok(Segment { shm: Shm::map_whole(fd)? })
    }

    pub fn len(&self) -> usize {
        self.shm.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shm.is_empty()
    }

    /// The 32-bit word at `off` (4-aligned).
    pub fn u32(&self, off: usize) -> &AtomicU32 {
        self.shm.u32_at(off)
    }

    /// The 64-bit word at `off` (8-aligned).
    pub fn u64(&self, off: usize) -> &AtomicU64 {
        self.shm.u64_at(off)
    }

    /// Copies bytes out; extensions may write them meanwhile (take the lock first when
    /// a consistent copy matters).
    pub fn read(&self, off: usize, out: &mut [u8]) {
        self.shm.read(off, out);
    }

    pub fn write(&self, off: usize, data: &[u8]) {
        self.shm.write(off, data);
    }

    /// Takes the `bpf_spin_lock` word at `off`, spinning, then yielding while an
    /// extension holds it. Hold it briefly: an extension that waits longer than the
    /// adapter's limit (10 ms) is stopped.
    pub fn lock(&self, off: usize) -> SegmentGuard<'_> {
        let mut spins = 0u32;
        loop {
            if let Some(g) = self.try_lock(off) {
                return g;
            }
            spins += 1;
            if spins < 128 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Takes the lock word at `off` if it is free.
    pub fn try_lock(&self, off: usize) -> Option<SegmentGuard<'_>> {
        let w = self.u32(off);
        // The guard is made only once the word is ours: one made and dropped on
        // failure would release the holder's lock.
        if w.load(Ordering::Relaxed) == 0
            && w.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            Some(SegmentGuard(w))
        } else {
            None
        }
    }
}

/// A taken lock word; released when dropped.
#[derive(Debug)]
pub struct SegmentGuard<'a>(&'a AtomicU32);

impl Drop for SegmentGuard<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}
