//! A program slot: what a port runs, replaceable while traffic flows, with every burst
//! running under one snapshot.
//!
//! The control side [`Slot::publish`]es a new value (an extension, or none to detach);
//! each worker holds a [`SlotReader`] and calls [`SlotReader::refresh`] once at the top
//! of a burst. The reader keeps its own `Arc` of the value it runs, so a burst never
//! sees a value change under it: every packet runs under the old program or the new
//! one, never neither and never a mix within a burst.
//!
//! The packet path pays one `Acquire` load of the generation per burst. Only when the
//! generation moved does the reader take the lock, and then with `try_lock`: a worker
//! never blocks on the control thread; if the lock is held it keeps the value it has
//! for this burst and looks again at the next. The old value is reclaimed when its last
//! reader lets go of its `Arc` (on replacement, never per packet), so nothing is freed
//! while a burst still runs it.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// The shared side of a slot: the current value and its generation.
#[derive(Debug)]
pub struct Slot<T> {
    current: Mutex<Option<Arc<T>>>,
    /// Bumped (under the lock, `Release`) after every publish.
    generation: AtomicU64,
}

impl<T> Slot<T> {
    /// A slot holding `value` (or nothing) at generation 0.
    pub fn new(value: Option<Arc<T>>) -> Arc<Self> {
        Arc::new(Self { current: Mutex::new(value), generation: AtomicU64::new(0) })
    }

    /// Replace the value; returns the one it replaced. Readers pick the new value up at
    /// the top of their next burst.
    pub fn publish(&self, value: Option<Arc<T>>) -> Option<Arc<T>> {
        // A poisoned lock only means a publisher panicked between two plain stores;
        // the value inside is still whole.
        let mut cur = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = std::mem::replace(&mut *cur, value);
        self.generation.fetch_add(1, Ordering::Release);
        old
    }

    /// The current generation (how many publishes so far).
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A reader starting from the current value.
    pub fn reader(self: &Arc<Self>) -> SlotReader<T> {
        let cur = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Read under the lock: generation and value belong together.
        let seen = self.generation.load(Ordering::Acquire);
        SlotReader { slot: Arc::clone(self), seen, value: cur.clone() }
    }
}

/// A worker's view of a slot: the value it runs until its next refresh.
#[derive(Debug)]
pub struct SlotReader<T> {
    slot: Arc<Slot<T>>,
    seen: u64,
    value: Option<Arc<T>>,
}

impl<T> SlotReader<T> {
    /// Call once at the top of a burst; returns the value to run the whole burst under.
    #[inline]
    pub fn refresh(&mut self) -> Option<&Arc<T>> {
        if self.slot.generation.load(Ordering::Acquire) != self.seen {
            self.pick_up();
        }
        self.value.as_ref()
    }

    /// As [`refresh`](Self::refresh), saying only whether the value changed (so the
    /// caller can set up what goes with the new one, on its cold path).
    #[inline]
    pub fn refresh_changed(&mut self) -> bool {
        if self.slot.generation.load(Ordering::Acquire) != self.seen {
            let before = self.value.as_ref().map(Arc::as_ptr);
            self.pick_up();
            return self.value.as_ref().map(Arc::as_ptr) != before;
        }
        false
    }

    /// The generation of the value it holds (the slot's at its last pick-up).
    #[inline]
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The value of the last refresh, without looking for a new one.
    #[inline]
    pub fn current(&self) -> Option<&Arc<T>> {
        self.value.as_ref()
    }

    #[cold]
    fn pick_up(&mut self) {
        let Ok(cur) = self.slot.current.try_lock() else {
            return; // a publish is under way: keep the old value for this burst
        };
        self.seen = self.slot.generation.load(Ordering::Acquire);
        self.value = cur.clone();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn a_reader_sees_a_publish_at_its_next_refresh() {
        let slot = Slot::new(Some(Arc::new(1u32)));
        let mut r = slot.reader();
        assert_eq!(r.refresh().map(|v| **v), Some(1));
        let old = slot.publish(Some(Arc::new(2)));
        assert_eq!(old.map(|v| *v), Some(1));
        assert_eq!(r.current().map(|v| **v), Some(1), "no change before a refresh");
        assert_eq!(r.refresh().map(|v| **v), Some(2));
        slot.publish(None);
        assert!(r.refresh().is_none(), "detached");
        assert_eq!(slot.generation(), 2);
    }

    /// Replace 1,000 times while readers run bursts: every packet is counted under
    /// exactly one version, none lost, versions never go backwards within a reader, a
    /// burst never mixes versions, and the old values are all reclaimed at the end.
    #[test]
    fn replacement_under_load_is_atomic_per_burst() {
        const REPLACEMENTS: u32 = 1_000;
        const BURST: u64 = 32;
        let slot = Slot::new(Some(Arc::new(0u32)));
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let mut r = slot.reader();
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let mut counted = vec![0u64; REPLACEMENTS as usize + 1];
                    let (mut sent, mut last) = (0u64, 0u32);
                    loop {
                        let done = stop.load(Ordering::Acquire);
                        let v = r.refresh().map(|v| **v).expect("never detached");
                        assert!(v >= last, "version went back from {last} to {v}");
                        last = v;
                        for _ in 0..BURST {
                            // Each packet looks at the snapshot; it must not move.
                            assert_eq!(r.current().map(|v| **v), Some(v));
                            counted[v as usize] += 1;
                            sent += 1;
                        }
                        // Readers contend for the lock with each other too: a
                        // refresh may keep the old value once, never for good.
                        if done && last == REPLACEMENTS {
                            break;
                        }
                    }
                    (sent, counted, last)
                })
            })
            .collect();
        for v in 1..=REPLACEMENTS {
            slot.publish(Some(Arc::new(v)));
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Release);
        for h in readers {
            let (sent, counted, last) = h.join().expect("reader");
            assert_eq!(counted.iter().sum::<u64>(), sent, "every packet under one version");
            assert_eq!(last, REPLACEMENTS, "the final version reached the reader");
        }
        // Only the slot holds the final value now: every old one was reclaimed.
        let fin = slot.publish(None).expect("final value");
        assert_eq!(Arc::strong_count(&fin), 1);
    }
}
