//! Publication of a structure to lock-free readers: two copies, the one readers see and
//! a spare the writer changes, swapped in one atomic store ([`Writer::publish`]).
//!
//! Readers ([`Reader::load`]) get the current copy through `arc-swap`: no lock, no
//! allocation, no reference count touched on the fast path, and a copy never changes
//! while a reader holds it, so a reader sees every published batch whole or not at all.
//! The writer applies each operation to the spare, logs it, and after publishing
//! replays the log on the copy readers just left; it waits (spinning, then yielding)
//! only until no reader still holds that copy, which readers do for one burst at most.
//! The writer keeps a reference to both copies, so a reader never frees one: memory is
//! only released on the writer's thread.
//!
//! Why `arc-swap` and not the alternatives: `left-right` implements this same scheme,
//! but its read handles are per thread (`!Sync`), while lookups here come through
//! `&self` from any worker (the maps' API); `crossbeam-epoch` would free retired copies
//! from whichever thread next pins, readers included, which puts `free` on the data
//! path; a single copy updated in place would need every lookup to retry (seqlock) or
//! every update to copy the whole table. Cost: twice the memory and every update
//! applied twice (measured in `spine bench lpm`).

use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};

/// A structure that changes by operations, applied identically to both copies.
pub trait Absorb<O>: Clone {
    type Error;

    /// Applies `op`. Called first on the spare copy, where an error refuses the
    /// operation; replayed later on the other copy, from the same state, where it
    /// cannot fail.
    fn absorb(&mut self, op: &O) -> Result<(), Self::Error>;
}

/// The read side: cheap to clone, `Send + Sync`, one per worker or shared.
#[derive(Debug)]
pub struct Reader<T> {
    current: Arc<ArcSwap<T>>,
}

impl<T> Clone for Reader<T> {
    fn clone(&self) -> Self {
        Reader { current: self.current.clone() }
    }
}

impl<T> Reader<T> {
    /// The current copy. Hold the guard for one burst of lookups, not longer: the
    /// writer's next update waits for it.
    #[inline]
    pub fn load(&self) -> Guard<Arc<T>> {
        self.current.load()
    }
}

/// The write side: one control thread owns it.
#[derive(Debug)]
pub struct Writer<T, O> {
    current: Arc<ArcSwap<T>>,
    /// The copy readers do not see; it lacks `behind` until it is next written.
    spare: Arc<T>,
    /// Published operations the spare has not had yet.
    behind: Vec<O>,
    /// Operations on the spare not published yet.
    pending: Vec<O>,
    published: u64,
}

impl<T: Absorb<O>, O> Writer<T, O> {
    pub fn new(initial: T) -> (Writer<T, O>, Reader<T>) {
        let spare = Arc::new(initial.clone());
        let current = Arc::new(ArcSwap::from_pointee(initial));
        let w = Writer {
            current: current.clone(),
            spare,
            behind: Vec::new(),
            pending: Vec::new(),
            published: 0,
        };
        (w, Reader { current })
    }

    pub fn reader(&self) -> Reader<T> {
        Reader { current: self.current.clone() }
    }

    /// The spare, once no reader holds it and it has caught up with what was
    /// published.
    fn spare(&mut self) -> &mut T {
        let mut spins = 0u32;
        while Arc::get_mut(&mut self.spare).is_none() {
            spins += 1;
            if spins < 128 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let t = Arc::get_mut(&mut self.spare).expect("no reader holds the spare");
        for op in self.behind.drain(..) {
            if t.absorb(&op).is_err() {
                unreachable!("an operation replayed on an identical copy failed");
            }
        }
        t
    }

    /// Applies `op` to the unpublished copy; readers see it after [`Writer::publish`].
    pub fn apply(&mut self, op: O) -> Result<(), T::Error> {
        self.spare().absorb(&op)?;
        self.pending.push(op);
        Ok(())
    }

    /// Makes every operation applied since the last publish visible at once. Returns
    /// false if there was nothing to publish.
    pub fn publish(&mut self) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let fresh = self.spare.clone();
        self.spare = self.current.swap(fresh);
        self.behind = std::mem::take(&mut self.pending);
        self.published += 1;
        true
    }

    /// The state with every applied operation, published or not (the writer's view).
    pub fn view(&mut self) -> &T {
        self.spare()
    }

    /// What readers see now.
    pub fn published(&self) -> Guard<Arc<T>> {
        self.current.load()
    }

    /// Number of publishes so far.
    pub fn version(&self) -> u64 {
        self.published
    }

    /// Operations applied but not yet published.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

/// An LPM update, for publishing a bare [`crate::Lpm`] structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LpmOp<A: crate::Address> {
    Insert(crate::Prefix<A>, u32),
    Remove(crate::Prefix<A>),
}

impl<A: crate::Address, L: crate::Lpm<A>> Absorb<LpmOp<A>> for L {
    type Error = crate::LpmError;

    fn absorb(&mut self, op: &LpmOp<A>) -> Result<(), crate::LpmError> {
        match *op {
            LpmOp::Insert(p, v) => self.insert(p, v).map(drop),
            LpmOp::Remove(p) => {
                self.remove(p);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Log(Vec<u32>);

    impl Absorb<u32> for Log {
        type Error = ();
        fn absorb(&mut self, op: &u32) -> Result<(), ()> {
            if *op == 0 {
                return Err(());
            }
            self.0.push(*op);
            Ok(())
        }
    }

    #[test]
    fn batches_appear_whole_and_both_copies_converge() {
        let (mut w, r) = Writer::new(Log::default());
        w.apply(1).unwrap();
        w.apply(2).unwrap();
        assert!(r.load().0.is_empty(), "nothing before publish");
        assert!(w.publish());
        assert_eq!(r.load().0, [1, 2]);
        assert_eq!(w.apply(0), Err(()));
        w.apply(3).unwrap();
        assert_eq!(w.view().0, [1, 2, 3], "the spare caught up, then took 3");
        assert!(w.publish());
        assert!(!w.publish(), "nothing pending");
        assert_eq!(r.load().0, [1, 2, 3]);
        w.apply(4).unwrap();
        w.publish();
        assert_eq!(r.load().0, [1, 2, 3, 4]);
        assert_eq!(w.view().0, [1, 2, 3, 4]);
        assert_eq!(w.version(), 3);
    }

    #[test]
    fn the_writer_waits_for_a_reader_of_the_spare() {
        let (mut w, r) = Writer::new(Log::default());
        w.apply(1).unwrap();
        w.publish();
        let old = r.load();
        w.apply(2).unwrap();
        w.publish();
        // The spare is now the copy `old` holds: the next update must wait for it.
        let t = std::thread::spawn(move || {
            w.apply(3).unwrap();
            w
        });
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!t.is_finished(), "the writer went ahead while a reader held the spare");
        assert_eq!(old.0, [1], "a held copy never changes");
        drop(old);
        let mut w = t.join().unwrap();
        assert_eq!(r.load().0, [1, 2]);
        w.publish();
        assert_eq!(r.load().0, [1, 2, 3]);
    }
}
