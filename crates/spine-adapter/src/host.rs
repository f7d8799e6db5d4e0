//! What a worker gives the extensions it runs: the monotonic clock, a per-worker
//! generator, `bpf_trace_printk` lines, and the runtime's fault and detach events
//! (counted, and logged to stderr: detaches always, faults only the first few, so a
//! faulting extension cannot flood the log).

use std::sync::Arc;

use spine_runtime::{splitmix64, Event, Host};

use crate::logbuf::LogBuf;

/// Faults a worker logs before it only counts them.
const FAULTS_LOGGED: u64 = 5;

#[derive(Debug)]
pub struct WorkerHost {
    worker: usize,
    rng: u64,
    /// Write trace lines and events to stderr.
    pub log: bool,
    pub trace_lines: u64,
    pub faults: u64,
    pub detaches: u64,
    /// What `bpf_fib_lookup` reads (shared with every worker; lookups take no lock).
    fib: Option<spine_runtime::fib_lookup::FibEnv>,
    /// The FIB state held for the current burst ([`WorkerHost::pin_fib`]).
    pinned: Option<spine_fib::FibSnapshot>,
    /// The log the control API follows.
    log_buf: Option<Arc<LogBuf>>,
}

impl WorkerHost {
    pub fn new(worker: usize, seed: u64, log: bool) -> Self {
        let mut rng = seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        splitmix64(&mut rng);
        WorkerHost {
            worker,
            rng,
            log,
            trace_lines: 0,
            faults: 0,
            detaches: 0,
            fib: None,
            pinned: None,
            log_buf: None,
        }
    }

    pub(crate) fn with_log(mut self, buf: Arc<LogBuf>) -> Self {
        self.log_buf = Some(buf);
        self
    }

    pub fn with_fib(mut self, fib: Option<spine_runtime::fib_lookup::FibEnv>) -> Self {
        self.fib = fib;
        self
    }

    /// Loads the published FIB state once for a burst: the burst's `bpf_fib_lookup`s
    /// read it (one `arc-swap` load per burst, not per lookup). Nothing without a FIB.
    #[inline]
    pub fn pin_fib(&mut self) {
        if let Some(f) = &self.fib {
            self.pinned = Some(f.fib.load());
        }
    }

    /// Drops the state [`WorkerHost::pin_fib`] held, at the end of the burst: the
    /// writer's next change waits for it (`spine_fib::publish`), and the next burst
    /// sees what was published meanwhile.
    #[inline]
    pub fn unpin_fib(&mut self) {
        self.pinned = None;
    }
}

impl Host for WorkerHost {
    #[inline]
    fn fib(&self) -> Option<&spine_runtime::fib_lookup::FibEnv> {
        self.fib.as_ref()
    }

    #[inline]
    fn fib_state(&self) -> Option<&spine_fib::FibState> {
        self.pinned.as_deref().map(|s| &**s)
    }

    #[inline]
    fn now_ns(&mut self) -> u64 {
        crate::sys::monotonic_ns()
    }

    #[inline]
    fn tai_ns(&mut self) -> u64 {
        crate::sys::tai_ns()
    }

    fn thread_cpu_ns(&mut self) -> Option<u64> {
        crate::sys::thread_cpu_ns()
    }

    #[inline]
    fn prandom_u32(&mut self) -> u32 {
        (splitmix64(&mut self.rng) >> 32) as u32
    }

    fn trace(&mut self, cpu: usize, line: &[u8]) {
        self.trace_lines += 1;
        if self.log {
            eprintln!("trace worker{cpu}: {}", String::from_utf8_lossy(line).trim_end());
        }
        if let Some(b) = &self.log_buf {
            b.push(cpu, "trace", || String::from_utf8_lossy(line).trim_end().to_string());
        }
    }

    fn event(&mut self, ev: &Event<'_>) {
        match ev {
            Event::Fault { ext, fault, .. } => {
                self.faults += 1;
                if self.faults <= FAULTS_LOGGED {
                    if let Some(b) = &self.log_buf {
                        b.push(self.worker, "fault", || {
                            format!("extension {ext} faulted: {fault}")
                        });
                    }
                }
                if self.log && self.faults <= FAULTS_LOGGED {
                    eprintln!("spine: worker {}: extension {ext} faulted: {fault}", self.worker);
                    if self.faults == FAULTS_LOGGED {
                        eprintln!("spine: worker {}: further faults are only counted", self.worker);
                    }
                }
            }
            Event::Detached { ext, domain, faults } => {
                self.detaches += 1;
                if let Some(b) = &self.log_buf {
                    b.push(self.worker, "detach", || {
                        format!("extension {ext} (domain {domain}) detached after {faults} faults")
                    });
                }
                if self.log {
                    eprintln!(
                        "spine: extension {ext} (domain {domain}) detached after {faults} faults; \
                         its ports now pass packets to their host paths"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_get_different_streams_and_a_moving_clock() {
        let mut a = WorkerHost::new(0, 1, false);
        let mut b = WorkerHost::new(1, 1, false);
        let xa: Vec<u32> = (0..4).map(|_| a.prandom_u32()).collect();
        let xb: Vec<u32> = (0..4).map(|_| b.prandom_u32()).collect();
        assert_ne!(xa, xb);
        let t = a.now_ns();
        assert!(a.now_ns() >= t);
        a.trace(0, b"hello\n");
        assert_eq!(a.trace_lines, 1);
    }

    /// A burst reads the state pinned at its start, whatever is published meanwhile;
    /// unpinning lets the writer take that copy back (its next change would otherwise
    /// wait) and the next burst sees the new state.
    #[test]
    fn a_burst_reads_the_fib_pinned_at_its_start() {
        use spine_fib::{table_id, FibWriter, NextHop, Route};
        let (mut w, r) = FibWriter::new();
        let route = |p: &str| Route::unicast(p.parse().unwrap(), vec![NextHop::dev(2)]);
        w.add(route("10.1.0.0/16")).unwrap();
        w.publish();
        let env = spine_runtime::fib_lookup::FibEnv::new(r, Vec::new());
        let mut h = WorkerHost::new(0, 1, false).with_fib(Some(env));
        assert!(h.fib_state().is_none(), "nothing pinned outside a burst");
        let routes = |h: &WorkerHost| h.fib_state().unwrap().routes(table_id::MAIN).len();
        h.pin_fib();
        assert_eq!(routes(&h), 1);
        w.add(route("10.2.0.0/16")).unwrap();
        w.publish();
        assert_eq!(routes(&h), 1, "the burst keeps its state");
        h.unpin_fib();
        assert!(h.fib_state().is_none());
        // The writer's copy behind is free again: this change does not wait.
        w.add(route("10.3.0.0/16")).unwrap();
        h.pin_fib();
        assert_eq!(routes(&h), 2, "the next burst sees what was published");
        h.unpin_fib();
        let mut none = WorkerHost::new(0, 1, false);
        none.pin_fib();
        assert!(none.fib_state().is_none(), "no FIB, nothing pinned");
    }
}
