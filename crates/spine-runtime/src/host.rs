//! What an extension may get from the world outside the adapter, injected by whoever
//! runs it: the clock, randomness and the trace log. The runtime itself reads no clock.

use spine_vm::Fault;

/// Something the runtime reports about an extension, for the operator's log.
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// An invocation was stopped (its packet aborted).
    Fault { ext: &'a str, cpu: usize, fault: &'a Fault },
    /// Too many faults within the domain's window: the extension is detached.
    Detached { ext: &'a str, domain: &'a str, faults: u64 },
}

/// Services an invocation's helpers call out to.
pub trait Host {
    /// CLOCK_MONOTONIC in nanoseconds, for `bpf_ktime_get_ns`.
    fn now_ns(&mut self) -> u64;
    /// A pseudo-random number, for `bpf_get_prandom_u32`.
    fn prandom_u32(&mut self) -> u32;
    /// One `bpf_trace_printk` line, formatted, from the worker `cpu`.
    fn trace(&mut self, cpu: usize, line: &[u8]);
    /// A fault or a detach; the default ignores it.
    fn event(&mut self, _ev: &Event<'_>) {}
    /// The FIB and interfaces `bpf_fib_lookup` reads; without one every lookup answers
    /// as for an unknown device (`-ENODEV`).
    fn fib(&self) -> Option<&crate::fib_lookup::FibEnv> {
        None
    }
    /// The length of the bulk data of the active message being handled
    /// (`spine_msg_bulk_len`); 0 when it has none (the default).
    fn bulk_len(&self) -> u64 {
        0
    }
    /// Copies `out.len()` bytes at `offset` of that bulk data into `out`
    /// (`spine_msg_bulk_read`), checking the range against the data and the data against
    /// its source on every call: `Err` with the helper's errno (positive), `EINVAL` when
    /// there is no bulk data (the default), `EFAULT` for a range outside it.
    fn bulk_read(&mut self, _offset: u64, _out: &mut [u8]) -> Result<(), i64> {
        Err(spine_abi::errno::EINVAL)
    }
}

/// A deterministic host for tests and replays: a clock that advances by a fixed step at
/// each read, a seeded generator, and trace lines kept in memory.
#[derive(Debug, Clone)]
pub struct FixedHost {
    pub now: u64,
    pub step: u64,
    pub rng: u64,
    pub lines: Vec<(usize, Vec<u8>)>,
    /// Events, rendered (`fault <ext>: ...`, `detached <ext> ...`).
    pub events: Vec<String>,
}

impl FixedHost {
    pub fn new(seed: u64) -> Self {
        FixedHost { now: 0, step: 1000, rng: seed, lines: Vec::new(), events: Vec::new() }
    }
}

impl Host for FixedHost {
    fn now_ns(&mut self) -> u64 {
        self.now += self.step;
        self.now
    }
    fn prandom_u32(&mut self) -> u32 {
        (splitmix64(&mut self.rng) >> 32) as u32
    }
    fn trace(&mut self, cpu: usize, line: &[u8]) {
        self.lines.push((cpu, line.to_vec()));
    }
    fn event(&mut self, ev: &Event<'_>) {
        self.events.push(match ev {
            Event::Fault { ext, fault, .. } => format!("fault {ext}: {fault}"),
            Event::Detached { ext, domain, faults } => {
                format!("detached {ext} (domain {domain}) after {faults} faults")
            }
        });
    }
}

/// One step of splitmix64: a fast, well-mixed generator for non-cryptographic use.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
