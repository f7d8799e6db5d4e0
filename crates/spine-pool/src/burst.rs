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
}

impl Burst {
    pub fn with_capacity(cap: usize) -> Self {
        Burst { bufs: Vec::with_capacity(cap), cap }
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
    /// move to the front.
    pub fn drain_front(&mut self, n: usize) -> std::vec::Drain<'_, Buf> {
        let n = n.min(self.bufs.len());
        self.bufs.drain(..n)
    }
}
