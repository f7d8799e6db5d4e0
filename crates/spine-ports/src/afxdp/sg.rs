//! Multi-buffer frames on an AF_XDP socket bound with `XDP_USE_SG`: the kernel gives a
//! frame longer than one chunk as several RX descriptors, every one but the last with
//! `XDP_PKT_CONTD` in its options, and takes one the same way on TX. [`RxChains`] turns
//! received descriptors into pool chains ([`spine_pool::Pool::chain`]); it is sans-IO
//! (buffers in, frames out), so what a broken ring can send is tested without a kernel.
//!
//! Garbage is dropped whole and counted, and every buffer of it goes back to the pool:
//! a chain longer than [`MAX_CHAIN`] buffers (the kernel's 17 fragments and the head),
//! a chain with a descriptor that failed its checks, and a chain the ring ends in the
//! middle of (the kernel publishes a frame's descriptors together, so the consumer
//! never sees half of one from a sound kernel).

use spine_pool::{Buf, PoolCache, MAX_CHAIN};

/// One received frame, or the reason one was dropped.
#[derive(Debug)]
pub(crate) enum Rx {
    /// A whole frame: one buffer, or the head of a chain.
    Frame { buf: Buf, chained: bool },
    /// The frame goes on in the next descriptor.
    More,
    /// A frame was dropped as longer than [`MAX_CHAIN`] buffers (counted once).
    TooLong,
    /// The buffer belongs to a frame already dropped.
    Skipped,
}

/// The frame being assembled from RX descriptors.
#[derive(Debug, Default)]
pub(crate) struct RxChains {
    head: Option<Buf>,
    /// Buffers in `head`'s chain.
    len: usize,
    /// The rest of the current frame is dropped (it was too long or broken).
    skipping: bool,
}

impl RxChains {
    /// Takes the next received buffer; `contd` is its descriptor's `XDP_PKT_CONTD`.
    pub(crate) fn push(&mut self, cache: &mut PoolCache, buf: Buf, contd: bool) -> Rx {
        if self.skipping {
            let _ = cache.free(buf);
            self.skipping = contd;
            return Rx::Skipped;
        }
        let Some(head) = self.head.as_mut() else {
            if !contd {
                return Rx::Frame { buf, chained: false };
            }
            self.head = Some(buf);
            self.len = 1;
            return Rx::More;
        };
        if self.len == MAX_CHAIN {
            let _ = cache.free(buf);
            self.drop_frame(cache, contd);
            return Rx::TooLong;
        }
        if let Err(e) = cache.pool().chain(head, buf) {
            let _ = cache.free(e.buf);
            self.drop_frame(cache, contd);
            return Rx::TooLong;
        }
        self.len += 1;
        if contd {
            return Rx::More;
        }
        self.len = 0;
        let buf = self.head.take().expect("checked above");
        Rx::Frame { buf, chained: true }
    }

    /// A descriptor of the current frame failed its checks (its buffer is not ours to
    /// free): the frame is dropped; `true` if one was being assembled or skipped.
    pub(crate) fn broken(&mut self, cache: &mut PoolCache, contd: bool) -> bool {
        let had = self.head.is_some() || self.skipping;
        self.drop_frame(cache, contd);
        had
    }

    /// The ring has no more descriptors: a frame still being assembled never ends
    /// there and is dropped; `true` if there was one.
    pub(crate) fn end_of_ring(&mut self, cache: &mut PoolCache) -> bool {
        let had = self.head.is_some();
        self.drop_frame(cache, false);
        had
    }

    /// Whether a frame is being assembled (the burst may not stop here).
    pub(crate) fn in_frame(&self) -> bool {
        self.head.is_some() || self.skipping
    }

    fn drop_frame(&mut self, cache: &mut PoolCache, rest_follows: bool) {
        if let Some(h) = self.head.take() {
            let _ = cache.free(h);
        }
        self.len = 0;
        self.skipping = rest_follows;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_pool::{Pool, PoolConfig};

    fn frame(rx: Rx) -> (Buf, bool) {
        match rx {
            Rx::Frame { buf, chained } => (buf, chained),
            other => panic!("expected a frame, got {other:?}"),
        }
    }

    #[test]
    fn descriptors_with_contd_become_one_chain_and_single_ones_stay_linear() {
        let pool = Pool::new(PoolConfig::new(64)).unwrap();
        let mut c = pool.cache();
        let mut rx = RxChains::default();
        let (one, chained) = {
            let b = c.alloc().unwrap();
            frame(rx.push(&mut c, b, false))
        };
        assert!(!chained && !pool.has_frags(&one));
        for _ in 0..3 {
            let b = c.alloc().unwrap();
            assert!(matches!(rx.push(&mut c, b, true), Rx::More));
            assert!(rx.in_frame());
        }
        let (head, chained) = {
            let b = c.alloc().unwrap();
            frame(rx.push(&mut c, b, false))
        };
        assert!(chained && !rx.in_frame());
        assert_eq!(pool.frag_count(&head), 3);
        c.free(one).unwrap();
        c.free(head).unwrap();
        c.flush();
        assert_eq!(pool.shared_free(), 64);
    }

    #[test]
    fn garbage_chains_are_dropped_whole_and_lose_no_buffer() {
        let pool = Pool::new(PoolConfig::new(128)).unwrap();
        let mut c = pool.cache();
        let mut rx = RxChains::default();
        // Longer than MAX_CHAIN: dropped once, the rest skipped to its last descriptor.
        let mut outcomes = Vec::new();
        for i in 0..MAX_CHAIN + 5 {
            let last = i == MAX_CHAIN + 4;
            let b = c.alloc().unwrap();
            outcomes.push(rx.push(&mut c, b, !last));
        }
        assert_eq!(outcomes.iter().filter(|o| matches!(o, Rx::TooLong)).count(), 1);
        assert_eq!(outcomes.iter().filter(|o| matches!(o, Rx::Skipped)).count(), 4);
        assert!(!rx.in_frame(), "the frame after it starts clean");
        let (next, _) = {
            let b = c.alloc().unwrap();
            frame(rx.push(&mut c, b, false))
        };
        c.free(next).unwrap();
        // A chain the ring ends in the middle of.
        for _ in 0..4 {
            let b = c.alloc().unwrap();
            assert!(matches!(rx.push(&mut c, b, true), Rx::More));
        }
        assert!(rx.end_of_ring(&mut c));
        assert!(!rx.end_of_ring(&mut c), "nothing left");
        // A chain with a bad descriptor in the middle: the rest of it is skipped.
        let b = c.alloc().unwrap();
        rx.push(&mut c, b, true);
        assert!(rx.broken(&mut c, true));
        let b = c.alloc().unwrap();
        assert!(matches!(rx.push(&mut c, b, false), Rx::Skipped));
        c.flush();
        assert_eq!(pool.shared_free(), 128, "every buffer of every dropped frame is back");
    }
}
