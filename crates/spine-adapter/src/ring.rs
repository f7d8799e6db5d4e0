//! A bounded single-producer, single-consumer ring: how one worker hands packets to
//! another (software RSS, cpumap redirects, transmissions on a port another worker owns)
//! without locks or allocation. One ring per ordered pair of workers.
//!
//! The consumer takes a batch, handles it, and only then releases the slots
//! ([`Consumer::drain`]), so a packet a worker is still handling keeps its ring
//! non-empty: the adapter's shutdown relies on this to know when nothing is in flight
//! (see [`RingView::quiet`]).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A counter on its own cache line, so producer and consumer do not false-share.
#[repr(align(64))]
#[derive(Debug, Default)]
struct Padded(AtomicUsize);

struct Shared<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    /// Next slot the consumer reads; only the consumer writes it.
    head: Padded,
    /// Next slot the producer writes; only the producer writes it.
    tail: Padded,
}

// SAFETY: a slot is written only by the producer while it lies outside [head, tail) and
// read only by the consumer while inside; the release/acquire pairs on `head` and `tail`
// order those accesses, so values of a `Send` type cross threads safely.
unsafe impl<T: Send> Sync for Shared<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T> Drop for Shared<T> {
    fn drop(&mut self) {
        let (head, tail) = (*self.head.0.get_mut(), *self.tail.0.get_mut());
        for i in head..tail {
            // SAFETY: slots in [head, tail) hold initialised values nobody else can
            // reach any more (we have `&mut self`); each is dropped once.
            unsafe { self.slots[i & self.mask].get_mut().assume_init_drop() };
        }
    }
}

/// The sending end.
pub struct Producer<T> {
    ring: Arc<Shared<T>>,
    /// The consumer's head as last read: refreshed only when the ring looks full.
    head_cache: usize,
    tail: usize,
}

/// The receiving end.
pub struct Consumer<T> {
    ring: Arc<Shared<T>>,
    tail_cache: usize,
    head: usize,
}

/// A read-only view of a ring's counters, for the shutdown check.
#[derive(Clone)]
pub struct RingView<T> {
    ring: Arc<Shared<T>>,
}

impl<T> std::fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer").field("tail", &self.tail).finish_non_exhaustive()
    }
}
impl<T> std::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer").field("head", &self.head).finish_non_exhaustive()
    }
}
impl<T> std::fmt::Debug for RingView<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingView").finish_non_exhaustive()
    }
}

/// A ring of at least `capacity` slots (rounded up to a power of two).
pub fn ring<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>, RingView<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let ring =
        Arc::new(Shared { slots, mask: cap - 1, head: Padded::default(), tail: Padded::default() });
    (
        Producer { ring: ring.clone(), head_cache: 0, tail: 0 },
        Consumer { ring: ring.clone(), tail_cache: 0, head: 0 },
        RingView { ring },
    )
}

impl<T: Send> Producer<T> {
    /// Free slots, as of now (a lower bound: the consumer may free more meanwhile).
    pub fn room(&mut self) -> usize {
        self.head_cache = self.ring.head.0.load(Ordering::Acquire);
        self.ring.mask + 1 - (self.tail - self.head_cache)
    }

    /// Appends `v`, or gives it back when the ring is full.
    pub fn push(&mut self, v: T) -> Result<(), T> {
        let cap = self.ring.mask + 1;
        if self.tail - self.head_cache == cap {
            self.head_cache = self.ring.head.0.load(Ordering::Acquire);
            if self.tail - self.head_cache == cap {
                return Err(v);
            }
        }
        let slot = &self.ring.slots[self.tail & self.ring.mask];
        // SAFETY: the slot lies outside [head, tail): the consumer is done with it (its
        // release of `head` happened before our acquire above) and will not read it
        // before we publish the new tail.
        unsafe { (*slot.get()).write(v) };
        self.tail += 1;
        self.ring.tail.0.store(self.tail, Ordering::Release);
        Ok(())
    }
}

impl<T: Send> Consumer<T> {
    /// Takes up to `max` values in order, calling `f` on each, and only then frees
    /// their slots; returns how many.
    pub fn drain(&mut self, max: usize, mut f: impl FnMut(T)) -> usize {
        if self.tail_cache - self.head < max {
            self.tail_cache = self.ring.tail.0.load(Ordering::Acquire);
        }
        let n = (self.tail_cache - self.head).min(max);
        for _ in 0..n {
            let slot = &self.ring.slots[self.head & self.ring.mask];
            // SAFETY: the slot lies in [head, tail): the producer wrote it before its
            // release of `tail` (acquired above) and will not touch it before we release
            // `head` past it. Reading moves the value out; our local `head` moves past
            // it at once, so it is never read (or dropped) twice, even if `f` panics
            // (`Drop for Consumer` publishes the local head).
            let v = unsafe { (*slot.get()).assume_init_read() };
            self.head += 1;
            f(v);
        }
        if n > 0 {
            self.ring.head.0.store(self.head, Ordering::Release);
        }
        n
    }
}

impl<T: Send> Consumer<T> {
    /// Values waiting, as of now.
    pub fn backlog(&self) -> usize {
        self.ring.tail.0.load(Ordering::Acquire) - self.head
    }

    pub fn capacity(&self) -> usize {
        self.ring.mask + 1
    }
}

impl<T> Drop for Consumer<T> {
    fn drop(&mut self) {
        self.ring.head.0.store(self.head, Ordering::Release);
    }
}

impl<T> RingView<T> {
    /// Values ever pushed.
    pub fn pushed(&self) -> usize {
        self.ring.tail.0.load(Ordering::SeqCst)
    }

    /// Values taken and handled.
    pub fn released(&self) -> usize {
        self.ring.head.0.load(Ordering::SeqCst)
    }

    /// True when, across every ring of `views`, nothing was in flight at some moment of
    /// the call: the tails read before and after the heads agree, and every head equals
    /// its tail. Handling a value may push onto another ring before the value's slot is
    /// released, so a handled value's offspring always shows up in the second read.
    pub fn quiet(views: &[RingView<T>]) -> bool {
        let before: Vec<usize> = views.iter().map(RingView::pushed).collect();
        let heads: Vec<usize> = views.iter().map(RingView::released).collect();
        let after: Vec<usize> = views.iter().map(RingView::pushed).collect();
        before == after && heads == after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_full_and_wraparound() {
        let (mut p, mut c, v) = ring::<u32>(3);
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(9), Err(9), "capacity rounds up to 4");
        assert_eq!(p.room(), 0);
        assert_eq!((c.backlog(), c.capacity()), (4, 4));
        let mut got = Vec::new();
        assert_eq!(c.drain(2, |x| got.push(x)), 2);
        p.push(4).unwrap();
        p.push(5).unwrap();
        assert_eq!(c.drain(100, |x| got.push(x)), 4);
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
        assert!(RingView::quiet(&[v]));
    }

    #[test]
    fn values_left_in_the_ring_are_dropped_with_it() {
        let counter = Arc::new(());
        let (mut p, c, v) = ring::<Arc<()>>(4);
        p.push(counter.clone()).unwrap();
        p.push(counter.clone()).unwrap();
        assert!(!RingView::quiet(std::slice::from_ref(&v)));
        drop((p, c, v));
        assert_eq!(Arc::strong_count(&counter), 1);
    }

    #[test]
    fn two_threads_move_every_value_once_in_order() {
        let (mut p, mut c, _) = ring::<u64>(64);
        const N: u64 = 200_000;
        let t = std::thread::spawn(move || {
            let mut i = 0;
            while i < N {
                if p.push(i).is_ok() {
                    i += 1;
                } else {
                    std::hint::spin_loop();
                }
            }
        });
        let mut next = 0;
        while next < N {
            c.drain(32, |x| {
                assert_eq!(x, next);
                next += 1;
            });
        }
        t.join().unwrap();
    }
}
