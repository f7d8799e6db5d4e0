//! Chained buffers: a frame longer than one buffer (a jumbo frame received with
//! fragments) is a head [`Buf`] whose slot links to the next buffer, and so on, as the
//! kernel's `xdp_buff` holds its fragments in `skb_shared_info`. The head's handle
//! stands for the whole frame: it moves through bursts, queues and workers as one
//! handle, and when its last reference goes the whole chain is freed
//! ([`PoolCache::free`](crate::PoolCache::free) walks the links). A buffer after the
//! head has `refs == 1` and no handle of its own while it is in a chain.
//!
//! Every fragment's bytes are `[data_off, data_off + len)` of its own buffer, as for a
//! head. Writing a fragment needs the head's only reference: the fragments are taken
//! out with [`Pool::unchain`] as owned handles and put back with [`Pool::chain`].

use std::sync::atomic::Ordering;

use super::{Buf, Pool, FREE};
use crate::PoolError;

/// Most buffers one chain may hold, head included: the kernel's `MAX_SKB_FRAGS` (17)
/// fragments and the head.
pub const MAX_CHAIN: usize = 18;

/// [`Pool::chain`] refused: the fragment comes back with the reason.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ChainError {
    pub buf: Buf,
    pub error: PoolError,
}

impl Pool {
    /// Appends `frag` (and any chain it heads) to the end of `head`'s chain. Both need
    /// their only reference; the chain may not pass [`MAX_CHAIN`] buffers. On success
    /// `frag`'s handle is gone: the chain owns it.
    pub fn chain(&self, head: &mut Buf, frag: Buf) -> Result<(), ChainError> {
        let refuse = |buf, error| Err(ChainError { buf, error });
        if let Err(error) = self.unique_slot(head) {
            return refuse(frag, error);
        }
        if let Err(error) = self.unique_slot(&frag) {
            return refuse(frag, error);
        }
        if frag.index == head.index {
            return refuse(frag, PoolError::Chained { index: head.index });
        }
        let (mut tail, mut n) = (head.index, 1);
        while let Some(next) = self.next_of(tail) {
            (tail, n) = (next, n + 1);
        }
        n += 1 + self.chain_iter(frag.index).count();
        if n > MAX_CHAIN {
            return refuse(frag, PoolError::ChainTooLong { max: MAX_CHAIN });
        }
        self.slots[tail as usize].next.store(frag.index + 1, Ordering::Relaxed);
        // The handle's reference now belongs to the chain (refs stays 1); `Buf` has no
        // destructor, so letting it go changes nothing else.
        let _ = frag;
        Ok(())
    }

    /// Whether `buf` heads a chain (has fragments). `false` for a foreign handle.
    #[inline]
    pub fn has_frags(&self, buf: &Buf) -> bool {
        self.slot(buf).is_ok_and(|s| s.next.load(Ordering::Relaxed) != 0)
    }

    /// The fragments after `head`, in order: each one's packet bytes.
    pub fn frags<'a>(&'a self, head: &'a Buf) -> impl Iterator<Item = &'a [u8]> + 'a {
        let first = self.slot(head).ok().map(|_| head.index);
        first.into_iter().flat_map(move |h| self.chain_iter(h)).map(move |i| {
            let s = &self.slots[i as usize];
            let (off, len) = (
                s.data_off.load(Ordering::Relaxed) as usize,
                s.len.load(Ordering::Relaxed) as usize,
            );
            // SAFETY: fragment `i` is owned by the chain `head` heads, and `head` is
            // borrowed for `'a`: the chain cannot be freed or written meanwhile (writing
            // needs `&mut` of the head's only handle to unchain it first). Its slot's
            // range fits the buffer (kept by every setter), and `i < buffers`.
            let buf = unsafe {
                std::slice::from_raw_parts(
                    self.chunk_ptr(i).as_ptr().cast_const(),
                    self.cfg.buf_size as usize,
                )
            };
            buf.get(off..off + len).unwrap_or_default()
        })
    }

    /// Fragments after `head` (0 for a linear frame).
    pub fn frag_count(&self, head: &Buf) -> usize {
        self.slot(head).map_or(0, |_| self.chain_iter(head.index).count())
    }

    /// Packet bytes of the whole frame: the head's and every fragment's.
    pub fn frame_len(&self, head: &Buf) -> u64 {
        let Ok(s) = self.slot(head) else { return 0 };
        let frags: u64 = self
            .chain_iter(head.index)
            .map(|i| u64::from(self.slots[i as usize].len.load(Ordering::Relaxed)))
            .sum();
        u64::from(s.len.load(Ordering::Relaxed)) + frags
    }

    /// Takes the first fragment off `head` (which needs its only reference) as an owned
    /// handle; the fragments after it stay chained to it. `Ok(None)` for a linear frame.
    pub fn unchain(&self, head: &mut Buf) -> Result<Option<Buf>, PoolError> {
        let s = self.unique_slot(head)?;
        let next = s.next.swap(0, Ordering::Relaxed);
        Ok(next.checked_sub(1).map(|index| Buf { index, tag: self.tag }))
    }

    /// Called with the index of a buffer that has just become free: unlinks and frees
    /// the buffer after it, returning its index (`None` at the end of the chain).
    #[inline]
    pub(crate) fn take_next_free(&self, index: u32) -> Option<u32> {
        let s = &self.slots[index as usize];
        if s.next.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let next = s.next.swap(0, Ordering::Relaxed) - 1;
        self.slots[next as usize].refs.store(FREE, Ordering::Relaxed);
        Some(next)
    }

    fn next_of(&self, index: u32) -> Option<u32> {
        self.slots[index as usize].next.load(Ordering::Relaxed).checked_sub(1)
    }

    /// The buffers after `index` in its chain.
    fn chain_iter(&self, index: u32) -> impl Iterator<Item = u32> + '_ {
        let mut at = index;
        std::iter::from_fn(move || {
            let next = self.next_of(at)?;
            at = next;
            Some(next)
        })
        .take(MAX_CHAIN)
    }
}

impl crate::PoolCache {
    /// A copy of the frame `src` heads, in buffers of its own: the head's metadata and
    /// bytes (XDP metadata included) at the same offsets, then a copy of every fragment,
    /// chained in order. `src` only needs a reference (it may be shared). `None` when the
    /// pool runs short: every buffer taken for the copy is back in the pool then. What a
    /// broadcast does with a multi-buffer frame (as the kernel's `xdpf_clone`, a copy
    /// per destination, never a shared frame, which an AF_XDP socket could not send).
    pub fn clone_frame(&mut self, src: &Buf) -> Option<Buf> {
        let pool = self.pool().clone();
        let meta = pool.meta(src).ok()?;
        let mut head = self.alloc()?;
        let from = (meta.data_off - meta.meta_len) as usize;
        let to = (meta.data_off + meta.len) as usize;
        let copied = pool.set_meta(&mut head, meta).and_then(|()| {
            let bytes = pool.frame(src)?.get(from..to).unwrap_or_default();
            pool.frame_mut(&mut head)?[from..to].copy_from_slice(bytes);
            Ok(())
        });
        if copied.is_err() {
            let _ = self.free(head);
            return None;
        }
        let offsets = pool
            .chain_iter(src.index)
            .map(|i| pool.slots[i as usize].data_off.load(Ordering::Relaxed));
        for (off, bytes) in offsets.zip(pool.frags(src)) {
            let Some(mut f) = self.alloc() else {
                let _ = self.free(head);
                return None;
            };
            let copied = pool.set_data(&mut f, off, bytes.len() as u32).and_then(|()| {
                pool.data_mut(&mut f)?.copy_from_slice(bytes);
                Ok(())
            });
            if let Err(e) = copied {
                let _ = self.free(f);
                let _ = self.free(head);
                debug_assert!(false, "a fragment's range fits a fresh buffer: {e}");
                return None;
            }
            if let Err(e) = pool.chain(&mut head, f) {
                let _ = self.free(e.buf);
                let _ = self.free(head);
                return None;
            }
        }
        Some(head)
    }
}
