//! One ring in shared memory, seen from one side. Each side keeps its own index in
//! `local` and only ever stores it; it never reads its own index back, so the other
//! side overwriting it changes nothing. The other side's index is read once per call
//! and rejected when it claims more entries than the ring holds.

use std::sync::atomic::Ordering;

use crate::layout::{CONSUMER_OFF, ENTRIES_OFF, PRODUCER_OFF};
use crate::Shm;

#[derive(Debug)]
pub(crate) struct Ring {
    off: usize,
    entries: u32,
    local: u32,
    producer: bool,
    /// 16 for descriptor rings, 8 for address rings (AF_XDP's entry sizes).
    entry_bytes: usize,
}

impl Ring {
    pub(crate) fn new(off: usize, entries: u32, producer: bool, entry_bytes: usize) -> Self {
        Ring { off, entries, local: 0, producer, entry_bytes }
    }

    fn other_off(&self) -> usize {
        self.off + if self.producer { CONSUMER_OFF } else { PRODUCER_OFF }
    }

    fn own_off(&self) -> usize {
        self.off + if self.producer { PRODUCER_OFF } else { CONSUMER_OFF }
    }

    /// Producer: free slots. Consumer: entries ready. `None` when the other side's
    /// index is impossible (garbage): the caller counts it and treats the ring as stuck.
    pub(crate) fn ready(&self, shm: &Shm) -> Option<u32> {
        let other = shm.u32_at(self.other_off()).load(Ordering::Acquire);
        if self.producer {
            let used = self.local.wrapping_sub(other);
            (used <= self.entries).then(|| self.entries - used)
        } else {
            let n = other.wrapping_sub(self.local);
            (n <= self.entries).then_some(n)
        }
    }

    /// Byte offset of the inline slot of entry `i` past the local index (descriptor
    /// rings only; `inline_off` from the layout).
    pub(crate) fn inline_slot(&self, inline_off: usize, i: u32) -> usize {
        let idx = self.local.wrapping_add(i) & (self.entries - 1);
        self.off + inline_off + idx as usize * crate::layout::INLINE_BYTES
    }

    /// Byte offset of entry `i` past the local index.
    pub(crate) fn slot(&self, i: u32) -> usize {
        let idx = self.local.wrapping_add(i) & (self.entries - 1);
        self.off + ENTRIES_OFF + idx as usize * self.entry_bytes
    }

    /// Moves the local index by `n` and publishes it.
    pub(crate) fn advance(&mut self, shm: &Shm, n: u32) {
        self.local = self.local.wrapping_add(n);
        shm.u32_at(self.own_off()).store(self.local, Ordering::Release);
    }
}
