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
    /// The FIB state the host holds for the current burst (`spine_fib::FibSnapshot`),
    /// which `bpf_fib_lookup` then reads instead of loading the published one per
    /// lookup; `None` (the default): each lookup loads it.
    fn fib_state(&self) -> Option<&spine_fib::FibState> {
        None
    }
    /// What one `bpf_fib_lookup` reads: [`Host::fib`] and [`Host::fib_state`]. A host
    /// that holds the state per burst may load it here, at the burst's first lookup,
    /// so that a burst without one loads nothing.
    fn fib_for_lookup(
        &mut self,
    ) -> (Option<&crate::fib_lookup::FibEnv>, Option<&spine_fib::FibState>) {
        let me: &Self = self;
        (me.fib(), me.fib_state())
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
    /// Copies `data` to `offset` of the buffer area of the endpoint whose message is
    /// being handled (`spine_msg_bulk_write`), checked against that area: `EINVAL` when
    /// the invocation runs on no endpoint's message (the default), `EFAULT` for a range
    /// outside the area.
    fn bulk_write(&mut self, _offset: u64, _data: &[u8]) -> Result<(), i64> {
        Err(spine_abi::errno::EINVAL)
    }
    /// Whether an extension of domain `domain` may post (`spine_msg_post_to`) to
    /// extension `ext` (`None`: every extension of its domain): `Err` with the helper's
    /// errno (positive) to refuse it, `ENOENT` for an extension that does not exist or
    /// is of another domain (a tenant learns nothing of other domains' extensions). The
    /// default accepts every post (a host that routes no messages: the runtime's tests
    /// read the outbox); the adapter's checks this round's handler table and counts
    /// what it refuses.
    fn post_target(&mut self, _domain: &str, _ext: Option<u16>) -> Result<(), i64> {
        Ok(())
    }
    /// A room in the queue of delayed posts for one more (`spine_msg_post_to` with a
    /// delay), taken at the call: `Err(ENOSPC)` when the queue has none (the adapter's
    /// counts it). The default has room for every post.
    fn reserve_delayed(&mut self) -> Result<(), i64> {
        Ok(())
    }
    /// The MTU of interface `ifindex`, for `bpf_check_mtu`; `None` (the helper answers
    /// `-ENODEV`) for an interface the host does not know. The default asks the FIB's
    /// interfaces ([`Host::fib`]; configured, or mirrored from the kernel).
    fn mtu(&self, ifindex: u32) -> Option<u32> {
        self.fib().and_then(|f| f.mtu(ifindex))
    }
    /// `bpf_jiffies64`: the kernel's `jiffies_64`, a tick count at [`JIFFIES_HZ`] that
    /// starts at the kernel's `INITIAL_JIFFIES` (5 minutes before its 32-bit wrap). The
    /// default derives it from [`Host::now_ns`], as the kernel's ticks follow its
    /// monotonic clock.
    fn jiffies64(&mut self) -> u64 {
        INITIAL_JIFFIES.wrapping_add(self.now_ns() / (1_000_000_000 / JIFFIES_HZ))
    }
    /// CLOCK_TAI in nanoseconds, for `bpf_ktime_get_tai_ns`. The default is
    /// [`Host::now_ns`] (a host without a TAI clock: deterministic tests); the adapter's
    /// and the command line's hosts read the system's CLOCK_TAI.
    fn tai_ns(&mut self) -> u64 {
        self.now_ns()
    }
    /// The CPU time the calling thread has run, in nanoseconds (CLOCK_THREAD_CPUTIME_ID),
    /// read by the watchdog only once an invocation is past its wall-clock budget, so
    /// time the OS gave to other threads is not held against the extension. `None` (the
    /// default: deterministic tests) lets the wall clock alone decide.
    fn thread_cpu_ns(&mut self) -> Option<u64> {
        None
    }
}

/// The tick rate of spine's `bpf_jiffies64`: the reference kernel's `CONFIG_HZ` (250,
/// Linux 6.18 as configured here). A program that converts jiffies with another
/// `CONFIG_HZ` sees time pass at another speed, as on a kernel built with another.
pub const JIFFIES_HZ: u64 = 250;

/// The kernel's `INITIAL_JIFFIES`: `(unsigned long)(unsigned int)(-300 * HZ)`.
pub const INITIAL_JIFFIES: u64 = (-300i64 * JIFFIES_HZ as i64) as u32 as u64;

/// A deterministic host for tests and replays: a clock that advances by a fixed step at
/// each read, a seeded generator, trace lines kept in memory, and the interfaces'
/// MTUs (`mtus`: the kernel test run's device, loopback, ifindex 1 with MTU 65536).
#[derive(Debug, Clone)]
pub struct FixedHost {
    pub now: u64,
    pub step: u64,
    pub rng: u64,
    pub lines: Vec<(usize, Vec<u8>)>,
    /// Events, rendered (`fault <ext>: ...`, `detached <ext> ...`).
    pub events: Vec<String>,
    /// `(ifindex, mtu)` of the interfaces `bpf_check_mtu` knows.
    pub mtus: Vec<(u32, u32)>,
}

/// The loopback device: what the kernel's test run receives on (`RxInfo::default`).
pub const LOOPBACK: (u32, u32) = (1, 65536);

impl FixedHost {
    pub fn new(seed: u64) -> Self {
        FixedHost {
            now: 0,
            step: 1000,
            rng: seed,
            lines: Vec::new(),
            events: Vec::new(),
            mtus: vec![LOOPBACK],
        }
    }
}

impl Host for FixedHost {
    fn now_ns(&mut self) -> u64 {
        self.now += self.step;
        self.now
    }
    fn mtu(&self, ifindex: u32) -> Option<u32> {
        self.mtus.iter().find(|(i, _)| *i == ifindex).map(|(_, m)| *m)
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
