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
    /// A burst is running ([`WorkerHost::pin_fib`]): its first `bpf_fib_lookup` loads
    /// the state into `pinned`.
    in_burst: bool,
    /// The FIB state held for the rest of the current burst.
    pinned: Option<spine_fib::FibSnapshot>,
    /// FIB states loaded for lookups (`fib_loads`).
    pub fib_loads: u64,
    /// The log the control API follows.
    log_buf: Option<Arc<LogBuf>>,
    /// This round's handler table and the adapter's domains by index, which
    /// `spine_msg_post_to` checks its target against ([`WorkerHost::set_targets`]).
    targets: Option<Arc<crate::handlers::HandlerTable>>,
    domains: Arc<[String]>,
    /// `spine_msg_post_to` calls refused (`msg_post_refused`).
    pub post_refused: u64,
    /// Rooms left this round in the worker's queue of delayed posts (set at the top of
    /// each round; each delayed post takes one at the call).
    pub delay_room: usize,
    /// Delayed posts refused for want of room (`msg_post_delay_full`).
    pub post_delay_full: u64,
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
            in_burst: false,
            pinned: None,
            fib_loads: 0,
            log_buf: None,
            targets: None,
            domains: Arc::from(Vec::new()),
            post_refused: 0,
            delay_room: 0,
            post_delay_full: 0,
        }
    }

    /// The handler table the worker runs this round and the adapter's domains (cold:
    /// called when the worker picks up a new table).
    pub(crate) fn set_targets(
        &mut self,
        table: Option<Arc<crate::handlers::HandlerTable>>,
        domains: Arc<[String]>,
    ) {
        self.targets = table;
        self.domains = domains;
    }

    pub(crate) fn with_log(mut self, buf: Arc<LogBuf>) -> Self {
        self.log_buf = Some(buf);
        self
    }

    pub fn with_fib(mut self, fib: Option<spine_runtime::fib_lookup::FibEnv>) -> Self {
        self.fib = fib;
        self
    }

    /// A burst starts: its first `bpf_fib_lookup` loads the published FIB state and
    /// the burst's later ones read the same (one `arc-swap` load per burst, not per
    /// lookup); a burst that looks nothing up loads nothing. Nothing without a FIB.
    #[inline]
    pub fn pin_fib(&mut self) {
        self.in_burst = self.fib.is_some();
    }

    /// The burst has run: drops the state its first lookup loaded, if any. The
    /// writer's next change waits for a held state (`spine_fib::publish`), and the
    /// next burst sees what was published meanwhile.
    #[inline]
    pub fn unpin_fib(&mut self) {
        self.in_burst = false;
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
    fn fib_for_lookup(
        &mut self,
    ) -> (Option<&spine_runtime::fib_lookup::FibEnv>, Option<&spine_fib::FibState>) {
        if self.pinned.is_none() && self.fib.is_some() {
            if self.in_burst {
                self.pinned = self.fib.as_ref().map(|f| f.fib.load());
            }
            // Outside a burst the lookup loads the state itself.
            self.fib_loads += 1;
        }
        (self.fib.as_ref(), self.pinned.as_deref().map(|s| &**s))
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

    /// A named target must register a handler in this round's table and be of the
    /// sender's domain; anything else is refused `ENOENT` and counted. A post to every
    /// extension of the domain is always accepted (its runs are counted later).
    fn post_target(&mut self, domain: &str, ext: Option<u16>) -> Result<(), i64> {
        let Some(ext) = ext else { return Ok(()) };
        let found = self.targets.as_ref().and_then(|t| t.entries.iter().find(|e| e.ext == ext));
        let same = found.is_some_and(|e| {
            self.domains.get(usize::from(e.domain)).is_some_and(|d| d.as_str() == domain)
        });
        if same {
            Ok(())
        } else {
            self.post_refused += 1;
            Err(spine_abi::errno::ENOENT)
        }
    }

    /// Every message an invocation sends is routed into the worker's queues before the
    /// round ends, so the rooms counted at the top of the round cover every delayed post
    /// accepted in it.
    fn reserve_delayed(&mut self) -> Result<(), i64> {
        if self.delay_room == 0 {
            self.post_delay_full += 1;
            return Err(spine_abi::errno::ENOSPC);
        }
        self.delay_room -= 1;
        Ok(())
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

    /// A burst loads the state at its first lookup and reads it to its end, whatever
    /// is published meanwhile; a burst without a lookup loads nothing; unpinning lets
    /// the writer take that copy back (its next change would otherwise wait) and the
    /// next burst sees the new state.
    #[test]
    fn a_burst_reads_the_fib_pinned_at_its_first_lookup() {
        use spine_fib::{table_id, FibWriter, NextHop, Route};
        let (mut w, r) = FibWriter::new();
        let route = |p: &str| Route::unicast(p.parse().unwrap(), vec![NextHop::dev(2)]);
        w.add(route("10.1.0.0/16")).unwrap();
        w.publish();
        let env = spine_runtime::fib_lookup::FibEnv::new(r, Vec::new());
        let mut h = WorkerHost::new(0, 1, false).with_fib(Some(env));
        assert!(h.fib_state().is_none(), "nothing pinned outside a burst");
        let routes = |h: &mut WorkerHost| {
            let (env, st) = h.fib_for_lookup();
            assert!(env.is_some());
            st.unwrap().routes(table_id::MAIN).len()
        };
        h.pin_fib();
        assert!(h.fib_state().is_none(), "nothing loaded before the burst's first lookup");
        h.unpin_fib();
        // A burst without a lookup held nothing: this change does not wait for it.
        w.add(route("10.2.0.0/16")).unwrap();
        w.publish();
        h.pin_fib();
        assert_eq!(routes(&mut h), 2, "the first lookup loads what is published");
        assert!(h.fib_state().is_some(), "held for the rest of the burst");
        w.add(route("10.3.0.0/16")).unwrap();
        w.publish();
        assert_eq!(routes(&mut h), 2, "the burst keeps its state");
        h.unpin_fib();
        assert!(h.fib_state().is_none());
        let (env, st) = h.fib_for_lookup();
        assert!(env.is_some() && st.is_none(), "outside a burst each lookup loads");
        // The writer's copy behind is free again: this change does not wait.
        w.add(route("10.4.0.0/16")).unwrap();
        h.pin_fib();
        assert_eq!(routes(&mut h), 3, "the next burst sees what was published");
        h.unpin_fib();
        let mut none = WorkerHost::new(0, 1, false);
        none.pin_fib();
        let (env, st) = none.fib_for_lookup();
        assert!(env.is_none() && st.is_none(), "no FIB, nothing pinned");
    }
}
