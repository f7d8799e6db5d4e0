//! Free element indices of a preallocated map, one lock-free stack per CPU (plus one for
//! the user side), as the kernel's `pcpu_freelist`: a CPU pops from its own stack and
//! steals from the others only when its own is empty, so inserts and deletes on
//! different CPUs touch different cache lines.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

use crate::storage::zeroed_slice;

/// "No element" in a stack link.
pub(crate) const NIL: u32 = u32::MAX;

/// A stack head: the top index and an ABA tag, bumped on every change.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Head(AtomicU64);

const fn pack(tag: u32, idx: u32) -> u64 {
    ((tag as u64) << 32) | idx as u64
}

const fn unpack(h: u64) -> (u32, u32) {
    ((h >> 32) as u32, h as u32)
}

#[derive(Debug)]
pub(crate) struct FreeLists {
    heads: Box<[Head]>,
    next: Box<[AtomicU32]>,
    /// Pop steals from other stacks when its own is empty (false for a per-CPU LRU,
    /// whose CPUs each own a fixed share of the elements).
    steal: bool,
}

impl FreeLists {
    /// Empty stacks for `nlists` CPUs over elements `0..nelems`; `None` if the
    /// allocator refuses.
    pub(crate) fn new(nlists: usize, nelems: usize, steal: bool) -> Option<FreeLists> {
        Some(FreeLists {
            heads: (0..nlists).map(|_| Head(AtomicU64::new(pack(0, NIL)))).collect(),
            next: zeroed_slice(nelems)?,
            steal,
        })
    }

    /// Bytes this structure needs for `nlists` stacks over `nelems` elements.
    pub(crate) fn footprint(nlists: usize, nelems: usize) -> u64 {
        nlists as u64 * 64 + nelems as u64 * 4
    }

    /// Pushes `idx` onto stack `list`.
    pub(crate) fn push(&self, list: usize, idx: u32) {
        let head = &self.heads[list].0;
        let mut h = head.load(Relaxed);
        loop {
            let (tag, top) = unpack(h);
            self.next[idx as usize].store(top, Relaxed);
            match head.compare_exchange_weak(h, pack(tag.wrapping_add(1), idx), Release, Relaxed) {
                Ok(_) => return,
                Err(cur) => h = cur,
            }
        }
    }

    fn pop_from(&self, list: usize) -> Option<u32> {
        let head = &self.heads[list].0;
        let mut h = head.load(Acquire);
        loop {
            let (tag, top) = unpack(h);
            if top == NIL {
                return None;
            }
            // May be stale if `top` was popped meanwhile; the tagged CAS then fails.
            let next = self.next[top as usize].load(Relaxed);
            match head.compare_exchange_weak(h, pack(tag.wrapping_add(1), next), Acquire, Acquire) {
                Ok(_) => return Some(top),
                Err(cur) => h = cur,
            }
        }
    }

    /// Pops a free index, from stack `list` first, then (if stealing) from the others.
    pub(crate) fn pop(&self, list: usize) -> Option<u32> {
        if let Some(i) = self.pop_from(list) {
            return Some(i);
        }
        if !self.steal {
            return None;
        }
        let n = self.heads.len();
        (1..n).find_map(|d| self.pop_from((list + d) % n))
    }

    /// The indices on every stack. Exact only while nothing pushes or pops.
    #[cfg(test)]
    pub(crate) fn members(&self) -> Vec<u32> {
        let mut out = vec![];
        for h in self.heads.iter() {
            let mut cur = unpack(h.0.load(Acquire)).1;
            while cur != NIL && out.len() <= self.next.len() {
                out.push(cur);
                cur = self.next[cur as usize].load(Relaxed);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Arc;

    #[test]
    fn lifo_per_list_and_stealing() {
        let f = FreeLists::new(2, 4, true).unwrap();
        f.push(0, 1);
        f.push(0, 2);
        f.push(1, 3);
        assert_eq!(f.members().len(), 3);
        assert_eq!(f.pop(0), Some(2));
        assert_eq!(f.pop(0), Some(1));
        assert_eq!(f.pop(0), Some(3), "steals from list 1");
        assert_eq!(f.pop(0), None);
        assert!(f.members().is_empty());
    }

    #[test]
    fn no_stealing_when_partitioned() {
        let f = FreeLists::new(2, 4, false).unwrap();
        f.push(1, 3);
        assert_eq!(f.pop(0), None);
        assert_eq!(f.pop(1), Some(3));
    }

    #[test]
    fn concurrent_pops_and_pushes_lose_nothing() {
        const N: u32 = 256;
        let f = Arc::new(FreeLists::new(4, N as usize, true).unwrap());
        for i in 0..N {
            f.push((i % 4) as usize, i);
        }
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let f = f.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Some(i) = f.pop(t) {
                            f.push(t, i);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let mut seen = HashSet::new();
        while let Some(i) = f.pop(0) {
            assert!(seen.insert(i), "index {i} popped twice");
        }
        assert_eq!(seen.len(), N as usize);
    }
}
