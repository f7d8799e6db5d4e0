//! A small test-and-test-and-set lock for writers of one hash bucket or one trie (the
//! kernel's `raw_spinlock_t`). Readers never take it. Critical sections are a short list
//! walk and a value copy, so waiters spin briefly and then yield the CPU, which keeps a
//! preempted holder on an oversubscribed machine from stalling the others for long.

use std::sync::atomic::{AtomicBool, Ordering::*};

#[derive(Debug, Default)]
pub(crate) struct SpinLock(AtomicBool);

/// Held lock; released on drop.
#[derive(Debug)]
pub(crate) struct Guard<'a>(&'a SpinLock);

impl SpinLock {
    pub(crate) const fn new() -> SpinLock {
        SpinLock(AtomicBool::new(false))
    }

    pub(crate) fn lock(&self) -> Guard<'_> {
        let mut spins = 0u32;
        loop {
            if !self.0.load(Relaxed)
                && self.0.compare_exchange_weak(false, true, Acquire, Relaxed).is_ok()
            {
                return Guard(self);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.0 .0.store(false, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    #[test]
    fn excludes_other_writers() {
        // A non-atomic read-modify-write split into two relaxed operations loses
        // increments unless the lock serialises the threads.
        let shared = Arc::new((SpinLock::new(), AtomicU64::new(0)));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let s = shared.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        let _g = s.0.lock();
                        let v = s.1.load(Relaxed);
                        std::hint::spin_loop();
                        s.1.store(v + 1, Relaxed);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(shared.1.load(Relaxed), 40_000);
    }
}
