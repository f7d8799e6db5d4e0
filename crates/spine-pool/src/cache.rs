//! Per-worker caches: a local stack of free buffer indices, refilled from and flushed to
//! the pool's shared list one batch at a time, so allocating and freeing a packet takes
//! no lock and allocates nothing.

use std::sync::Arc;

use crate::{Buf, Burst, Pool, PoolError};

/// A worker's window on a [`Pool`]. Holds up to twice the pool's `cache_batch` free
/// buffers; dropping it returns them to the shared list.
#[derive(Debug)]
pub struct PoolCache {
    pool: Arc<Pool>,
    stack: Vec<u32>,
    batch: usize,
}

impl PoolCache {
    pub fn new(pool: Arc<Pool>) -> Self {
        let batch = pool.config().cache_batch as usize;
        PoolCache { pool, stack: Vec::with_capacity(2 * batch), batch }
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// A fresh buffer (packet empty, right after the headroom), or `None` when the pool
    /// is exhausted: the caller drops the packet and counts it.
    pub fn alloc(&mut self) -> Option<Buf> {
        if self.stack.is_empty() && self.pool.take_batch(&mut self.stack, self.batch) == 0 {
            return None;
        }
        let index = self.stack.pop()?;
        Some(self.pool.hand_out(index))
    }

    /// Drops one reference to `buf`; the buffer is free again once its last reference
    /// is gone, and so is every fragment chained to it. A handle of another pool, or of
    /// a buffer that is not owned, is refused.
    pub fn free(&mut self, buf: Buf) -> Result<(), PoolError> {
        if let Some(index) = self.pool.release(buf)? {
            if self.stack.len() >= 2 * self.batch {
                self.pool.give_batch(&mut self.stack, self.batch);
            }
            self.stack.push(index);
            self.free_chain(index);
        }
        Ok(())
    }

    /// Frees the fragments chained after `index` (just freed). For a linear frame this
    /// is one load of the slot line the release has just written.
    #[inline]
    fn free_chain(&mut self, index: u32) {
        let mut at = index;
        while let Some(next) = self.pool.take_next_free(at) {
            if self.stack.len() >= 2 * self.batch {
                self.pool.give_batch(&mut self.stack, self.batch);
            }
            self.stack.push(next);
            at = next;
        }
    }

    /// Up to `n` fresh buffers appended to `out` (fewer when the pool runs short or
    /// `out` fills), in one go: the shared list is visited at most once per batch and
    /// each buffer costs one pop and its metadata reset (DPDK's
    /// `rte_pktmbuf_alloc_bulk`). Returns how many were added.
    pub fn alloc_burst(&mut self, out: &mut Burst, n: usize) -> usize {
        let want = n.min(out.room());
        while self.stack.len() < want {
            if self.pool.take_batch(&mut self.stack, self.batch) == 0 {
                break;
            }
        }
        let got = want.min(self.stack.len());
        let from = self.stack.len() - got;
        for &index in &self.stack[from..] {
            // Cannot fail: `got` fits the room counted above.
            let _ = out.push(self.pool.hand_out(index));
        }
        self.stack.truncate(from);
        got
    }

    /// Up to `n` buffers appended to `out` as freshly received packets, in one go as
    /// [`alloc_burst`](Self::alloc_burst): the bytes of each are what `next` gives
    /// (called once per buffer, in order), copied in right after the headroom, and the
    /// ingress `port` and receive time `ts_ns` are recorded. The metadata is written
    /// once per buffer, not reset at allocation and again when filled (a NIC driver's
    /// receive: the descriptor fills the mbuf's fields). Returns how many were added
    /// (fewer when the pool runs short or `out` fills: `next` is not called for them).
    ///
    /// Refused before anything is taken if `max_len`, the longest slice `next` may
    /// give, does not fit after the headroom.
    ///
    /// # Panics
    /// If `next` gives a slice longer than `max_len` (the pool's bytes stay in bounds).
    pub fn alloc_rx_burst<'b>(
        &mut self,
        out: &mut Burst,
        n: usize,
        max_len: usize,
        port: u32,
        ts_ns: u64,
        mut next: impl FnMut() -> &'b [u8],
    ) -> Result<usize, PoolError> {
        let cfg = self.pool.config();
        if max_len > (cfg.buf_size - cfg.headroom) as usize {
            return Err(PoolError::BadRange {
                offset: cfg.headroom,
                len: u32::try_from(max_len).unwrap_or(u32::MAX),
                meta_len: 0,
                buf_size: cfg.buf_size,
            });
        }
        let want = n.min(out.room());
        while self.stack.len() < want {
            if self.pool.take_batch(&mut self.stack, self.batch) == 0 {
                break;
            }
        }
        let got = want.min(self.stack.len());
        let from = self.stack.len() - got;
        for &index in &self.stack[from..] {
            // Cannot fail: `got` fits the room counted above.
            let _ = out.push(self.pool.hand_out_rx(index, next(), port, ts_ns));
        }
        self.stack.truncate(from);
        Ok(got)
    }

    /// Frees every buffer of `burst`, leaving it empty; returns the first refusal (the
    /// other buffers are freed regardless). The cache makes room for the whole burst
    /// once, so each buffer costs one release and one push.
    pub fn free_burst(&mut self, burst: &mut Burst) -> Result<(), PoolError> {
        let n = burst.len();
        if self.stack.len() + n > 2 * self.batch {
            let over = (self.stack.len() + n - self.batch).min(self.stack.len());
            self.pool.give_batch(&mut self.stack, over);
        }
        let mut first = Ok(());
        for buf in burst.drain_front(n) {
            // Most buffers are a linear packet's only reference: one look at the slot.
            let buf = match self.pool.release_sole(buf) {
                Ok(index) => {
                    self.stack.push(index);
                    continue;
                }
                Err(buf) => buf,
            };
            match self.pool.release(buf) {
                Ok(Some(index)) => {
                    self.stack.push(index);
                    self.free_chain(index);
                }
                Ok(None) => {}
                Err(e) => {
                    if first.is_ok() {
                        first = Err(e);
                    }
                }
            }
        }
        first
    }

    /// Free buffers parked in this cache.
    pub fn cached(&self) -> usize {
        self.stack.len()
    }

    /// Returns every parked buffer to the shared list.
    pub fn flush(&mut self) {
        let n = self.stack.len();
        self.pool.give_batch(&mut self.stack, n);
    }
}

impl Drop for PoolCache {
    fn drop(&mut self) {
        self.flush();
    }
}
