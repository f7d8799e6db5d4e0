//! A batch of buffer handles with a capacity fixed at creation: what ports fill on
//! receive and take from on transmit, without allocating per packet.

use crate::Buf;

/// Up to `capacity` owned handles, in order. Pushing never reallocates: a full burst
/// hands the buffer back. Dropping a non-empty burst leaks its buffers; free them with
/// [`PoolCache::free_burst`](crate::PoolCache::free_burst).
#[derive(Debug)]
pub struct Burst {
    bufs: Vec<Buf>,
    cap: usize,
    /// Some handle may head a chain of fragments (set by whoever pushes one; cleared
    /// when the burst is drained empty). Burst-wide, so the linear path tests it once.
    chained: bool,
}

impl Burst {
    pub fn with_capacity(cap: usize) -> Self {
        Burst { bufs: Vec::with_capacity(cap), cap, chained: false }
    }

    pub fn capacity(&self) -> usize {
        self.cap
    }

    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }

    pub fn is_full(&self) -> bool {
        self.bufs.len() >= self.cap
    }

    /// Handles that still fit.
    pub fn room(&self) -> usize {
        self.cap - self.bufs.len()
    }

    /// Appends `buf`, or gives it back when the burst is full.
    pub fn push(&mut self, buf: Buf) -> Result<(), Buf> {
        if self.is_full() {
            return Err(buf);
        }
        self.bufs.push(buf);
        Ok(())
    }

    /// Removes the last handle.
    pub fn pop(&mut self) -> Option<Buf> {
        self.bufs.pop()
    }

    pub fn as_slice(&self) -> &[Buf] {
        &self.bufs
    }

    pub fn get(&self, i: usize) -> Option<&Buf> {
        self.bufs.get(i)
    }

    pub fn get_mut(&mut self, i: usize) -> Option<&mut Buf> {
        self.bufs.get_mut(i)
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Buf> {
        self.bufs.iter()
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, Buf> {
        self.bufs.iter_mut()
    }

    /// Removes and yields the first `n` handles (fewer if there are fewer); the rest
    /// move to the front. Draining every handle clears [`Burst::has_chains`].
    pub fn drain_front(&mut self, n: usize) -> std::vec::Drain<'_, Buf> {
        let n = n.min(self.bufs.len());
        if n == self.bufs.len() {
            self.chained = false;
        }
        self.bufs.drain(..n)
    }

    /// Records that a handle heads a chain of fragments
    /// ([`Pool::chain`](crate::Pool::chain)): whoever pushes one calls it.
    pub fn set_chained(&mut self) {
        self.chained = true;
    }

    /// Whether some handle may head a chain: when `false`, every packet is one buffer
    /// and the per-packet chain checks can be skipped.
    #[inline]
    pub fn has_chains(&self) -> bool {
        self.chained
    }
}
