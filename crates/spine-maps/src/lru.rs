//! Eviction order for `BPF_MAP_TYPE_LRU_HASH` and `BPF_MAP_TYPE_LRU_PERCPU_HASH`.
//!
//! The kernel approximates LRU with a reference bit per element (set by program-side
//! lookups, not by `bpf(2)` lookups), active/inactive lists and per-CPU batches of free
//! nodes (`kernel/bpf/bpf_lru_list.c`). spine keeps the reference bit and its meaning
//! and replaces the lists with a CLOCK (second chance) sweep over the preallocated
//! elements: an insert that finds no free element evicts the first linked element under
//! the hand whose reference bit is clear, clearing the bits it passes. So:
//! - an update never fails because the map is full (as in the kernel);
//! - elements looked up by programs since the hand last passed survive an eviction
//!   round, unreferenced ones go first (as in the kernel);
//! - unlike the kernel, nothing is evicted while a free element exists anywhere (the
//!   kernel's per-CPU free batches of up to 128 nodes can force evictions earlier), and
//!   the victim among unreferenced elements is the one under the hand, not strictly the
//!   oldest in the kernel's inactive list.
//!
//! With `BPF_F_NO_COMMON_LRU` every CPU owns an equal share of the elements (the kernel
//! rounds `max_entries` to a multiple of the CPU count) and evicts only among its own;
//! user-space updates use CPU 0's share (the kernel uses the share of whichever CPU the
//! syscall runs on), so user space alone fills at most `max_entries / ncpus` entries,
//! as measured on the kernel.
//!
//! How close (Linux 6.18, 2 CPUs, common list; fill the map from user space, look up
//! half of the keys from a program, then insert more from user space): with
//! `max_entries` 8, 4 keys looked up and 4 inserted, the kernel evicted all 4
//! looked-up keys (its per-CPU batches dominate small maps), spine none; with 256, 128
//! and 64, the kernel kept 64 of the 128, spine all 128; with 1024, 512 and 256, the
//! kernel kept 280, spine all 512. spine is closer to true LRU than the kernel, so a
//! program can only lose less state, never more.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use crate::def::LruMode;
use crate::storage::zeroed_slice;

#[derive(Debug, Default)]
#[repr(align(64))]
struct Hand(AtomicUsize);

#[derive(Debug)]
pub(crate) struct Lru {
    mode: LruMode,
    refs: Box<[AtomicBool]>,
    hands: Box<[Hand]>,
    /// Elements per CPU share (per-CPU mode), or all of them.
    share: usize,
    ncpus: usize,
}

impl Lru {
    /// Clock state for `nelems` elements; `None` if the allocator refuses.
    pub(crate) fn new(mode: LruMode, nelems: usize, ncpus: usize) -> Option<Lru> {
        let share = match mode {
            LruMode::Common => nelems,
            LruMode::PerCpu => nelems / ncpus,
        };
        let nlists = ncpus + 1;
        let hands = (0..nlists)
            .map(|l| match mode {
                // Spread the hands so CPUs start evicting in different places.
                LruMode::Common => Hand(AtomicUsize::new(l * nelems / nlists)),
                LruMode::PerCpu => Hand(AtomicUsize::new(0)),
            })
            .collect();
        Some(Lru { mode, refs: zeroed_slice(nelems)?, hands, share, ncpus })
    }

    pub(crate) fn bytes_per_elem() -> u64 {
        1
    }

    pub(crate) fn mode(&self) -> LruMode {
        self.mode
    }

    /// The CPU share list `list` (a CPU, or `ncpus` for user space) allocates from.
    pub(crate) fn home(&self, list: usize) -> usize {
        match self.mode {
            LruMode::Common => list,
            LruMode::PerCpu if list < self.ncpus => list,
            LruMode::PerCpu => 0,
        }
    }

    /// The free list element `idx` returns to: its owner's in per-CPU mode.
    pub(crate) fn owner(&self, idx: u32, list: usize) -> usize {
        match self.mode {
            LruMode::Common => list,
            LruMode::PerCpu => idx as usize / self.share,
        }
    }

    /// Marks `idx` recently used (a program-side lookup). Skips the store when the bit
    /// is already set so that hot elements do not bounce their cache line.
    pub(crate) fn touch(&self, idx: u32) {
        let r = &self.refs[idx as usize];
        if !r.load(Relaxed) {
            r.store(true, Relaxed);
        }
    }

    pub(crate) fn set_ref(&self, idx: u32, on: bool) {
        self.refs[idx as usize].store(on, Relaxed);
    }

    /// Sweeps the clock for `list` and returns the first element whose reference bit is
    /// clear and which `take` manages to unlink. Gives up after two full turns (every
    /// element in flight on other CPUs), as the kernel's LRU pop can fail.
    pub(crate) fn evict(&self, list: usize, mut take: impl FnMut(u32) -> bool) -> Option<u32> {
        let home = self.home(list);
        let base = match self.mode {
            LruMode::Common => 0,
            LruMode::PerCpu => home * self.share,
        };
        let hand = &self.hands[home].0;
        for _ in 0..2 * self.share + 1 {
            let i = base + hand.fetch_add(1, Relaxed) % self.share;
            let r = &self.refs[i];
            if r.load(Relaxed) {
                r.store(false, Relaxed);
                continue;
            }
            if take(i as u32) {
                return Some(i as u32);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn referenced_elements_get_a_second_chance() {
        let lru = Lru::new(LruMode::Common, 4, 1).unwrap();
        lru.touch(0);
        lru.touch(1);
        // Hand of list 0 starts at 0: 0 and 1 are referenced, 2 is the victim.
        assert_eq!(lru.evict(0, |_| true), Some(2));
        assert_eq!(lru.evict(0, |_| true), Some(3));
        // Their bits were cleared on the way past.
        assert_eq!(lru.evict(0, |_| true), Some(0));
    }

    #[test]
    fn gives_up_when_nothing_can_be_taken() {
        let lru = Lru::new(LruMode::Common, 3, 1).unwrap();
        let mut tries = 0;
        assert_eq!(
            lru.evict(0, |_| {
                tries += 1;
                false
            }),
            None
        );
        assert_eq!(tries, 7);
    }

    #[test]
    fn per_cpu_shares_are_separate() {
        let lru = Lru::new(LruMode::PerCpu, 6, 2).unwrap();
        let mut seen = vec![];
        for _ in 0..3 {
            seen.push(lru.evict(1, |_| true).unwrap());
        }
        seen.sort();
        assert_eq!(seen, [3, 4, 5]);
        assert_eq!(lru.owner(4, 0), 1);
        assert_eq!(lru.home(2), 0, "user space uses CPU 0's share");
    }
}
