//! The watchdog's bookkeeping. An invocation past its budget is stopped by the engine
//! (see [`crate::Budget`]); here each fault is counted against the extension, and an
//! extension that keeps faulting — `max_faults` within `window_ns` — is detached, as
//! SPINE's watchdog detached handlers that ran too long. Detached extensions are never
//! invoked again; the hook then behaves as if nothing were attached.
//!
//! Every worker records into the same [`Health`] with atomics: no lock on the data path.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};

/// When repeated faults detach an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPolicy {
    /// Faults within one window that detach the extension; 0 = never detach.
    pub max_faults: u32,
    pub window_ns: u64,
}

impl Default for FaultPolicy {
    /// Ten faults within one second.
    fn default() -> Self {
        FaultPolicy { max_faults: 10, window_ns: 1_000_000_000 }
    }
}

/// An extension's fault record, shared by every worker that runs it.
#[derive(Debug, Default)]
pub struct Health {
    total: AtomicU64,
    window_start: AtomicU64,
    in_window: AtomicU32,
    detached: AtomicBool,
}

/// What recording a fault led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOutcome {
    Counted,
    /// This fault detached the extension (reported once, by the worker that tipped it).
    Detached,
}

impl Health {
    pub fn is_detached(&self) -> bool {
        self.detached.load(Relaxed)
    }

    /// Faults over the extension's life.
    pub fn faults(&self) -> u64 {
        self.total.load(Relaxed)
    }

    /// Detaches by hand (an operator's `detach`, or unloading).
    pub fn detach(&self) {
        self.detached.store(true, Relaxed);
    }

    /// Counts a fault at `now_ns`. Windows are fixed intervals started by the first fault
    /// after the previous window ended; racing workers may each open a window, which at
    /// worst delays detaching by one window.
    pub fn record(&self, now_ns: u64, policy: FaultPolicy) -> FaultOutcome {
        self.total.fetch_add(1, Relaxed);
        let start = self.window_start.load(Relaxed);
        let count = if now_ns.saturating_sub(start) >= policy.window_ns || start == 0 {
            self.window_start.store(now_ns.max(1), Relaxed);
            self.in_window.store(1, Relaxed);
            1
        } else {
            self.in_window.fetch_add(1, Relaxed) + 1
        };
        if policy.max_faults > 0 && count >= policy.max_faults && !self.detached.swap(true, Relaxed)
        {
            FaultOutcome::Detached
        } else {
            FaultOutcome::Counted
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detaches_after_max_faults_within_a_window_only() {
        let p = FaultPolicy { max_faults: 3, window_ns: 1_000 };
        let h = Health::default();
        assert_eq!(h.record(10, p), FaultOutcome::Counted);
        assert_eq!(h.record(20, p), FaultOutcome::Counted);
        // The window ended: the count starts again.
        assert_eq!(h.record(2_000, p), FaultOutcome::Counted);
        assert_eq!(h.record(2_100, p), FaultOutcome::Counted);
        assert!(!h.is_detached());
        assert_eq!(h.record(2_200, p), FaultOutcome::Detached);
        assert!(h.is_detached());
        // Reported once.
        assert_eq!(h.record(2_300, p), FaultOutcome::Counted);
        assert_eq!(h.faults(), 6);
    }

    #[test]
    fn zero_means_never_detach() {
        let p = FaultPolicy { max_faults: 0, window_ns: 1_000 };
        let h = Health::default();
        for t in 0..100 {
            assert_eq!(h.record(t, p), FaultOutcome::Counted);
        }
        assert!(!h.is_detached());
    }
}
