//! Allocation of contiguous blocks of 1..=64 slots inside one growing `Vec`, with a
//! free list per size: a Poptrie node's children and leaves, DIR-24-8's groups. Freed
//! blocks are reused for the same size; the `Vec` only grows.

#[derive(Debug, Clone, Default)]
pub(crate) struct Blocks {
    /// `free[n]`: starts of free blocks of `n` slots.
    free: Vec<Vec<u32>>,
    /// Slots sitting in free blocks.
    pub(crate) free_slots: usize,
}

impl Blocks {
    /// A block of `n` slots of `v`, set to `fill`; returns its start.
    pub(crate) fn alloc<T: Copy>(&mut self, v: &mut Vec<T>, n: usize, fill: T) -> u32 {
        if let Some(start) = self.free.get_mut(n).and_then(Vec::pop) {
            self.free_slots -= n;
            v[start as usize..start as usize + n].fill(fill);
            return start;
        }
        let start = v.len();
        v.resize(start + n, fill);
        u32::try_from(start).expect("LPM structure past 2^32 slots")
    }

    pub(crate) fn free(&mut self, start: u32, n: usize) {
        if n == 0 {
            return;
        }
        if self.free.len() <= n {
            self.free.resize_with(n + 1, Vec::new);
        }
        self.free[n].push(start);
        self.free_slots += n;
    }

    pub(crate) fn bytes(&self) -> usize {
        self.free.iter().map(|f| f.capacity() * 4).sum()
    }
}
