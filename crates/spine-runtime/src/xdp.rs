//! Running an XDP extension on a frame: the per-worker state (registered map memory, the
//! stack, the context) and one call per packet, following tail calls. Nothing allocates
//! per packet.

use std::sync::Arc;

use spine_vm::{Fault, Memory, Region, RunLimits, Stack, MAX_REGIONS};

use crate::ctx::{XdpCtx, XDP_CTX_SIZE};
use crate::ext::{Engine, Extension};
use crate::frags::Frags;
use crate::frame::{Bounds, Frame, Geometry};
use crate::helpers::{Redirect, XdpEnv, CB_KEYS_BYTES, MAX_TAIL_CALLS};
use crate::host::Event;
use crate::maps::Held;
use crate::watchdog::FaultOutcome;
use crate::Host;

/// Where a packet came from, as the program reads it in `struct xdp_md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxInfo {
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
}

impl Default for RxInfo {
    /// The loopback device's first queue: what the kernel's test run reports.
    fn default() -> Self {
        RxInfo { ingress_ifindex: 1, rx_queue_index: 0 }
    }
}

/// Per-invocation run-time budget, the watchdog's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Wall time an invocation may take once it reaches its first clock check, in ns.
    pub ns: u64,
    /// Progress points (taken back-edges, calls) between clock checks.
    pub points: u32,
}

impl Default for Budget {
    /// 10 µs, SPINE's watchdog figure; the clock is checked every 64 progress points.
    fn default() -> Self {
        Budget { ns: 10_000, points: RunLimits::default().points }
    }
}

impl Budget {
    /// No time limit worth the name (an hour), for fidelity runs that must never be cut.
    pub const UNLIMITED: Budget = Budget { ns: 3_600_000_000_000, points: 1 << 20 };
}

/// Why a runner cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunnerError {
    #[error("the extension's maps need {needed} memory regions, more than the {MAX_REGIONS} an invocation can hold")]
    TooManyRegions { needed: usize },
    #[error("worker {cpu} is outside the {ncpus} CPUs the extension's maps were created for")]
    Cpu { cpu: usize, ncpus: usize },
}

/// One worker's instance of an extension.
pub struct XdpRunner {
    /// The helper environment, set up once with the runner: a call sets the host and
    /// the geometry, a packet only its own fields (see [`XdpBurst`]). Declared first, so
    /// dropped before `ext`, whose maps it borrows.
    env: XdpEnv<'static>,
    ext: Arc<Extension>,
    cpu: usize,
    /// Map values and the context, registered once; and the packet's region.
    mem: Memory,
    pkt_region: usize,
    stack: Stack,
    /// The JIT's run context, kept between runs.
    jit: spine_jit::RunSlot<XdpEnv<'static>>,
    /// The context, owned here; `env.ctx` and the registered region point into it.
    _ctx: Box<XdpCtx>,
    /// Where the last `XDP_REDIRECT` verdict sends its packet.
    redirect: Option<Redirect>,
    /// Where `bpf_for_each_map_elem` lends its callbacks their keys (registered as a
    /// read-only region); only for extensions that may walk maps.
    cb_keys: Option<Box<[u64]>>,
}

// SAFETY: what the runner's environment points to is either the runner's own (the
// context, stack and callback-key boxes, which move with it) or lent by a call and only
// dereferenced while that call runs (the host, the frame and its fragments, the
// running extension); the rest of the runner is `Send`. A runner is used by one thread
// at a time (every call takes `&mut self`).
unsafe impl Send for XdpRunner {}

impl std::fmt::Debug for XdpRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpRunner")
            .field("ext", &self.ext.name())
            .field("cpu", &self.cpu)
            .field("budget", &self.env.budget)
            .finish_non_exhaustive()
    }
}

/// `host` with its lifetime bound erased, for the environment the runner keeps between
/// calls; each call sets it anew, and nothing dereferences it outside that call.
#[inline(always)]
fn erase_host<'h>(host: &'h mut (dyn Host + 'h)) -> *mut dyn Host {
    let p: *mut (dyn Host + 'h) = host;
    // SAFETY: only the trait object's lifetime bound changes (same layout). The pointer
    // is dereferenced only through `XdpEnv::host`, while the call that lent `host` runs.
    unsafe { std::mem::transmute::<*mut (dyn Host + 'h), *mut (dyn Host + 'static)>(p) }
}

/// Regions besides the map values: context, packet, the stack, and the stack the
/// interpreter adds for its run.
const PER_RUN_REGIONS: usize = 4;

impl XdpRunner {
    /// A runner for worker `cpu`, with the budget of the extension's domain.
    pub fn new(ext: Arc<Extension>, cpu: usize) -> Result<Self, RunnerError> {
        let maps = ext.maps();
        if let Some(m) = maps.data_maps().find(|m| cpu >= m.ncpus()) {
            return Err(RunnerError::Cpu { cpu, ncpus: m.ncpus() });
        }
        let spans: usize = maps.data_maps().map(|m| m.value_spans().len()).sum();
        let walks = walks_maps(&ext) || ext.has_timers();
        let needed = spans + PER_RUN_REGIONS + usize::from(walks);
        if needed > MAX_REGIONS {
            return Err(RunnerError::TooManyRegions { needed });
        }
        let mut mem = Memory::new();
        for span in maps.data_maps().flat_map(|m| m.value_spans()) {
            let r = Region { start: span.start, len: span.len, writable: span.writable };
            // SAFETY: map value memory lives as long as the map, which `ext` (held by
            // this runner for its whole life) keeps alive; maps never move their storage.
            let pushed = unsafe { mem.push(r) };
            debug_assert!(pushed.is_some(), "counted above");
        }
        let mut ctx: Box<XdpCtx> = Box::default();
        let ctx_region = Region {
            start: &mut *ctx as *mut XdpCtx as u64,
            len: XDP_CTX_SIZE as u64,
            writable: false,
        };
        // SAFETY: the context lives in a box this runner owns and never replaces, so its
        // address stays valid as long as `mem`; the program only reads it.
        unsafe { mem.push(ctx_region) };
        // The packet's region, rewritten for every packet (empty until the first).
        // SAFETY: an empty region grants access to nothing.
        let pkt_region = unsafe { mem.push(Region::default()) }.expect("room counted above");
        // The stack, registered once: the JIT then adds no region per run (the
        // interpreter still adds its own, counted in `PER_RUN_REGIONS`).
        // A program that can tail-call may do so from a callee: the target then runs in
        // a window of its own below the top one, one window per possible tail call (the
        // pages of unused windows are never touched).
        let windows = if ext.maps().has_prog_arrays() { MAX_TAIL_CALLS as usize } else { 0 };
        let mut stack = Stack::with_tail_windows(windows);
        let stack_region = Region {
            start: stack.as_mut_ptr() as u64,
            len: stack.len_bytes() as u64,
            writable: true,
        };
        // SAFETY: the stack's words are boxed, owned by this runner next to `mem`, so the
        // address stays valid as long as `mem`; engines borrow it mutably while they run.
        unsafe { mem.push(stack_region) }.expect("room counted above");
        // A timer callback gets its key there too (slot 0: the wrapper's frame walks
        // no map).
        let mut cb_keys = walks.then(|| vec![0u64; CB_KEYS_BYTES / 8].into_boxed_slice());
        if let Some(keys) = &mut cb_keys {
            let r = Region {
                start: keys.as_mut_ptr() as u64,
                len: CB_KEYS_BYTES as u64,
                writable: false,
            };
            // SAFETY: the box is owned by this runner next to `mem` and never replaced, so
            // the address stays valid as long as `mem`; programs only read it.
            unsafe { mem.push(r) }.expect("room counted above");
        }
        let budget = ext.domain().spec().budget;
        // SAFETY: the map table lives in the extension, on the heap behind `ext`, which
        // this runner holds for its whole life and drops after `env` (field order); the
        // reference never leaves the runner.
        let maps: &'static crate::maps::MapTable =
            unsafe { &*std::ptr::from_ref::<crate::maps::MapTable>(ext.maps()) };
        let env = XdpEnv {
            maps,
            cpu,
            // Null until the first call sets it; never dereferenced before.
            host: std::ptr::null_mut::<crate::FixedHost>() as *mut dyn Host,
            ctx: &mut *ctx,
            frame: std::ptr::null_mut(),
            frags: std::ptr::null_mut(),
            geometry: Geometry::TEST_RUN,
            pkt_region,
            tail: None,
            tail_calls: 0,
            stack_top: stack.as_mut_ptr() as u64 + stack.len_bytes() as u64,
            tail_windows: stack.tail_windows(),
            nest: 0,
            fault_recorded: false,
            redirect: None,
            budget,
            deadline: None,
            cpu_deadline: None,
            held: Held::new(),
            cb_keys: cb_keys.as_mut().map_or(std::ptr::null_mut(), |k| k.as_mut_ptr().cast::<u8>()),
            running: std::ptr::null(),
            outbox: crate::msg::Outbox::default(),
            pc_shift: 0,
            in_timer: None,
        };
        Ok(XdpRunner {
            env,
            ext,
            cpu,
            mem,
            pkt_region,
            stack,
            jit: spine_jit::RunSlot::new(),
            _ctx: ctx,
            redirect: None,
            cb_keys,
        })
    }

    /// Replaces the domain's budget for this runner (benchmarks, fidelity runs).
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.env.budget = budget;
        self
    }

    pub fn extension(&self) -> &Arc<Extension> {
        &self.ext
    }

    /// Where the packet of the last run goes, when its verdict was `XDP_REDIRECT` (a
    /// verdict without a target, as from `bpf_redirect_map` on a missing key with
    /// `XDP_REDIRECT` as its fallback, has none: the packet is then dropped).
    pub fn redirect(&self) -> Option<Redirect> {
        self.redirect
    }

    /// Whether the extension still runs (the watchdog has not detached it).
    pub fn is_attached(&self) -> bool {
        !self.ext.health().is_detached()
    }

    /// Runs the extension on `frame` and returns its verdict (r0 truncated to 32 bits, as
    /// the kernel's `bpf_prog_run_xdp`), following tail calls. The frame's packet bounds
    /// follow whatever the program did with `xdp_adjust_*`. A multi-buffer frame (see
    /// [`Frame::with_frags`]) runs as the kernel's `BPF_PROG_TEST_RUN` runs one, whether
    /// or not the program is [`Extension::frags_aware`]: `data`/`data_end` cover the head
    /// and the frags helpers reach the fragments. A fault leaves the frame as
    /// the program left it; it is counted against the extension that faulted (which the
    /// watchdog may then detach) and the caller treats the packet as `XDP_ABORTED`. The
    /// fault is boxed so the common result fits in registers; faults are the slow path.
    #[inline]
    pub fn run(
        &mut self,
        frame: &mut Frame,
        rx: RxInfo,
        host: &mut dyn Host,
    ) -> Result<u32, Box<Fault>> {
        let (buf, geometry, bounds, frags) = frame.parts();
        let mut burst = self.burst(geometry, rx, host);
        if let Some(f) = frags {
            burst.r.env.frags = f;
        }
        // A frame keeps its bounds inside its geometry: nothing to check.
        burst.run_one::<false>(buf, bounds)
    }

    /// As [`XdpRunner::run`], on any buffer: `bounds` says where the packet lies in `buf`
    /// (laid out as `geometry` says) and afterwards where the program left it.
    ///
    /// # Panics
    /// If `bounds` or the buffer's length break `geometry` — a bug in the caller, which
    /// owns the buffer, never something an extension can cause.
    // Always inlined: called out of line, its arguments (the `&mut dyn Host` above all)
    // go on the stack as separate 8-byte stores that the callee reads back as one
    // 16-byte load, which the store buffer cannot forward: a stall per packet that cost
    // more than many whole programs (`spine bench exec`).
    #[inline(always)]
    pub fn run_raw(
        &mut self,
        buf: &mut [u8],
        geometry: Geometry,
        bounds: &mut Bounds,
        rx: RxInfo,
        host: &mut dyn Host,
    ) -> Result<u32, Box<Fault>> {
        self.burst(geometry, rx, host).run_one::<true>(buf, bounds)
    }

    /// As [`XdpRunner::run_raw`], for a multi-buffer frame whose head lies in `buf` and
    /// the rest in `frags` (the adapter's chained pool buffers, copied in): the frags
    /// helpers reach the fragments, and afterwards `frags` holds what the program left
    /// of them. With no fragment in use this is [`XdpRunner::run_raw`].
    ///
    /// # Panics
    /// As [`XdpRunner::run_raw`].
    pub fn run_raw_frags(
        &mut self,
        buf: &mut [u8],
        geometry: Geometry,
        bounds: &mut Bounds,
        frags: &mut Frags,
        rx: RxInfo,
        host: &mut dyn Host,
    ) -> Result<u32, Box<Fault>> {
        let mut burst = self.burst(geometry, rx, host);
        if frags.count() > 0 {
            burst.r.env.frags = frags;
        }
        burst.run_one::<true>(buf, bounds)
    }

    /// Runs an active-message handler (an extension from `SEC("spine/handler/N")`) on the
    /// message whose payload lies at `bounds` in `buf` (laid out as `geometry` says; no
    /// metadata: `bounds.meta == bounds.data`), from endpoint `source`. Its context
    /// (`struct spine_msg_md`) gives the payload, its length, the source and the
    /// handler number. Returns r0 (no verdict: the handler's result); the messages it
    /// sent are in [`XdpRunner::outbox`] until the next run. Bounded by the watchdog as
    /// any invocation.
    pub fn run_message(
        &mut self,
        frame: &mut Frame,
        source: u32,
        host: &mut dyn Host,
    ) -> Result<u32, Box<Fault>> {
        // A message's frame is linear: `Frame::load_message` drops any fragments.
        let (buf, geometry, bounds, _) = frame.parts();
        self.run_message_raw(buf, geometry, bounds, source, host)
    }

    /// As [`XdpRunner::run_message`], on any buffer (as [`XdpRunner::run_raw`]).
    ///
    /// # Panics
    /// As [`XdpRunner::run_raw`].
    pub fn run_message_raw(
        &mut self,
        buf: &mut [u8],
        geometry: Geometry,
        bounds: &mut Bounds,
        source: u32,
        host: &mut dyn Host,
    ) -> Result<u32, Box<Fault>> {
        let handler = u32::from(self.ext.handler().unwrap_or(0));
        let rx = RxInfo { ingress_ifindex: source, rx_queue_index: handler };
        let mut b = self.burst(geometry, rx, host);
        // `spine_msg_md.len`, in the slot XDP's `egress_ifindex` (0) takes.
        b.r.set_egress((bounds.end - bounds.data) as u32);
        b.run_one::<true>(buf, bounds)
    }

    /// Runs the callbacks of this extension's timers that are due at `now` (ns, on the
    /// host's clock, which `bpf_timer_start` read) and fire on this runner's CPU, at
    /// most [`MAX_TIMERS_PER_CALL`] of them, earliest first in each map. Each is an
    /// invocation of its own, bounded by the watchdog's budget; a fault is counted
    /// against the extension as any invocation's. A callback that starts its timer
    /// again (a periodic timer) runs again at a later call once that time comes. The
    /// messages callbacks send are not kept (each run starts an empty outbox): callers
    /// that route them use [`XdpRunner::run_next_timer`], as the adapter's workers do.
    pub fn run_timers(&mut self, now: u64, host: &mut dyn Host) -> TimerRun {
        let mut run = TimerRun::default();
        while (run.fired as usize) < MAX_TIMERS_PER_CALL {
            let Some(r) = self.run_next_timer(now, host) else { break };
            run.fired += 1;
            if r.is_err() {
                run.faults += 1;
            }
        }
        run
    }

    /// Runs the callback of one timer of this extension that is due at `now` and fires
    /// on this runner's CPU (the earliest of the first map that has one); `None` when
    /// none is. Afterwards [`XdpRunner::outbox`] holds the messages the callback sent
    /// (`spine_msg_send`, `spine_msg_post`), for the caller to route. A detached
    /// extension runs no callback: its timers are cancelled instead
    /// ([`Extension::cancel_timers`]).
    pub fn run_next_timer(
        &mut self,
        now: u64,
        host: &mut dyn Host,
    ) -> Option<Result<u64, Box<Fault>>> {
        if !self.ext.has_timers() {
            return None;
        }
        if !self.is_attached() {
            self.ext.cancel_timers();
            return None;
        }
        let ext = self.ext.clone();
        let maps = ext.maps();
        for index in 0..maps.len() {
            let Some(map) = maps.data(index) else { continue };
            let Some(timers) = map.timers() else { continue };
            if !timers.any_due(now) {
                continue;
            }
            let Some(due) = timers.take_due(now, self.cpu as u32, ext.id()) else { continue };
            let r = self.fire_timer(&ext, index, map, due, host);
            if r.is_err() && !self.is_attached() {
                ext.cancel_timers();
            }
            return Some(r);
        }
        None
    }

    /// Runs one due timer's callback: r1 = its map, r2 = its key (lent in the key
    /// memory's slot 0), r3 = its value.
    fn fire_timer(
        &mut self,
        ext: &Arc<Extension>,
        index: usize,
        map: &spine_maps::Map,
        due: spine_maps::DueTimer,
        host: &mut dyn Host,
    ) -> Result<u64, Box<Fault>> {
        let no_entry = || {
            let reason = "no timer entry for this callback";
            Box::new(Fault::Helper { pc: 0, id: spine_abi::helper::TIMER_SET_CALLBACK, reason })
        };
        let Some((_, engine)) =
            ext.timer_entries.iter().find(|(pc, _)| *pc == due.callback.pc as usize)
        else {
            return Err(no_entry());
        };
        let key_size = map.def().key_size as usize;
        let keys = self.cb_keys.as_mut().filter(|_| key_size <= crate::helpers::CB_KEY_MAX);
        let Some(keys) = keys else { return Err(no_entry()) };
        let key_ptr = keys.as_mut_ptr().cast::<u8>();
        // SAFETY: `keys` holds `CB_KEYS_BYTES` >= `CB_KEY_MAX` >= `key_size` bytes.
        let key = unsafe { std::slice::from_raw_parts_mut(key_ptr, key_size) };
        let Some(value) = map.timer_target(due.elem, key) else { return Err(no_entry()) };
        let args = [
            crate::maps::MAP_HANDLE_BASE + index as u64,
            key_ptr as u64,
            value.as_ptr() as u64,
            0,
            0,
        ];
        if ext.stats().zeroed_stack > 0 {
            // The callback's frame lies below the wrapper's: zero every frame.
            self.stack.zero_top(Stack::BYTES);
        }
        // SAFETY: an empty region grants access to nothing; no packet is lent.
        unsafe { self.mem.set(self.pkt_region, Region::default()) };
        let cpu = self.cpu;
        let b = self.burst(Geometry::TEST_RUN, RxInfo::default(), host);
        let r = b.r;
        let limits = RunLimits { points: r.env.budget.points };
        let env = &mut r.env;
        env.frame = std::ptr::null_mut();
        env.tail = None;
        env.tail_calls = 0;
        env.fault_recorded = false;
        env.redirect = None;
        env.deadline = None;
        env.cpu_deadline = None;
        env.pc_shift = crate::ext::TIMER_WRAPPER_LEN;
        env.in_timer = Some((map.id(), due.elem));
        env.running = &**ext;
        let result = match engine {
            Engine::Interp(vm) => vm.run(args, &mut r.mem, &mut r.stack, env, limits),
            // SAFETY: the JIT registered `helpers::native_helpers`, which take the
            // `XdpEnv` passed here as their runtime pointer; `mem` has held the region
            // of `stack` since the runner was made.
            Engine::Jit(code) => unsafe {
                code.run_with_env_runtime_on_registered_stack(
                    args,
                    &mut r.mem,
                    &mut r.stack,
                    env,
                    limits,
                )
            },
        };
        // The next call runs a packet program again.
        env.pc_shift = 0;
        env.in_timer = None;
        if !env.held.is_empty() {
            env.held.release(env.maps);
        }
        result.map_err(|fault| {
            record_fault(ext, cpu, &fault, env.host());
            Box::new(fault)
        })
    }

    /// The active messages the last burst (or run) sent, oldest first.
    pub fn outbox(&self) -> &[crate::msg::OutMsg] {
        self.env.outbox.messages()
    }

    /// Starts a burst. The environment, the registered regions and the context's
    /// pointers were set up with the runner; here only the host, the geometry and the
    /// context's receive fields are set, and each [`XdpBurst::run`] then writes only
    /// what changes per packet (the packet pointers and its region, and the fields an
    /// invocation may have changed). Every packet is still its own invocation: its own
    /// budget, fault accounting, tail-call count, held references and redirect target.
    #[inline]
    pub fn burst<'r>(
        &'r mut self,
        geometry: Geometry,
        rx: RxInfo,
        host: &'r mut dyn Host,
    ) -> XdpBurst<'r> {
        let ctx: *mut XdpCtx = self.env.ctx;
        // SAFETY: `ctx` points to the box this runner owns; the writes are in bounds.
        unsafe {
            std::ptr::addr_of_mut!((*ctx).ingress_ifindex).write_volatile(rx.ingress_ifindex);
            std::ptr::addr_of_mut!((*ctx).rx_queue_index).write_volatile(rx.rx_queue_index);
        }
        // Nothing writes the context's `egress_ifindex` slot during a run (the program
        // may only read the context, and no helper writes that field): once per burst.
        self.set_egress(0);
        let env = &mut self.env;
        env.outbox.clear();
        env.host = erase_host(host);
        env.geometry = geometry;
        env.frags = std::ptr::null_mut();
        // Left as they are by a run that unwound (a panicking helper or host): a call
        // that returns restores them itself.
        env.nest = 0;
        env.pc_shift = 0;
        env.in_timer = None;
        if !env.held.is_empty() {
            env.held.release(env.maps);
        }
        // The JIT's run context holds this runner's stack bounds for the burst (the
        // stack's words are boxed and never move): a packet's run does not write them.
        self.jit.bind(&mut self.stack);
        XdpBurst { r: self, detached: false, _host: std::marker::PhantomData }
    }

    /// What the context's `egress_ifindex` slot holds for the runs of a burst: 0 for
    /// XDP, the message length for a handler (`spine_msg_md.len`).
    #[inline(always)]
    fn set_egress(&mut self, v: u32) {
        let ctx: *mut XdpCtx = self.env.ctx;
        // SAFETY: `ctx` points to the box this runner owns; the write is in bounds.
        unsafe { std::ptr::addr_of_mut!((*ctx).egress_ifindex).write_volatile(v) };
    }

    /// Runs the extension on every frame of `frames` (buffer and bounds, updated as
    /// [`XdpRunner::run_raw`] updates them), one invocation per frame, and writes each
    /// frame's outcome to `verdicts` (which must be at least as long).
    ///
    /// # Panics
    /// As [`XdpRunner::run_raw`], or if `verdicts` is shorter than `frames`.
    pub fn run_burst(
        &mut self,
        frames: &mut [(&mut [u8], Bounds)],
        verdicts: &mut [Verdict],
        geometry: Geometry,
        rx: RxInfo,
        host: &mut dyn Host,
    ) {
        assert!(verdicts.len() >= frames.len(), "one verdict per frame");
        let mut b = self.burst(geometry, rx, host);
        for ((buf, bounds), v) in frames.iter_mut().zip(verdicts.iter_mut()) {
            *v = b.run(buf, bounds);
        }
    }
}

/// Most timer callbacks one [`XdpRunner::run_timers`] call runs: a worker's round
/// stays bounded however many timers are due (the rest wait for the next call).
pub const MAX_TIMERS_PER_CALL: usize = 64;

/// What one [`XdpRunner::run_timers`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerRun {
    /// Callbacks run.
    pub fired: u32,
    /// Of those, the ones that faulted (each counted against the extension).
    pub faults: u32,
}

/// What one packet of a burst came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// The program returned this action (r0 truncated to 32 bits); the redirect target
    /// set by the invocation, when the action is `XDP_REDIRECT`.
    Action { action: u32, redirect: Option<Redirect> },
    /// The program faulted (counted against the extension, which the watchdog may have
    /// detached): the packet is `XDP_ABORTED`.
    Fault,
    /// The extension was detached by a fault earlier in the burst: it did not run on
    /// this packet, which is handled as if no extension were attached.
    #[default]
    Detached,
}

/// A burst in progress on one runner (see [`XdpRunner::burst`]).
pub struct XdpBurst<'r> {
    r: &'r mut XdpRunner,
    /// A fault in this burst detached the extension: it runs no more.
    detached: bool,
    /// The host the runner's environment points to, borrowed for the burst.
    _host: std::marker::PhantomData<&'r mut dyn Host>,
}

impl std::fmt::Debug for XdpBurst<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpBurst").field("ext", &self.r.ext.name()).finish_non_exhaustive()
    }
}

impl XdpBurst<'_> {
    /// Runs the extension on one packet of the burst; see [`XdpRunner::run_raw`].
    ///
    /// # Panics
    /// As [`XdpRunner::run_raw`].
    #[inline]
    pub fn run(&mut self, buf: &mut [u8], bounds: &mut Bounds) -> Verdict {
        if self.detached {
            return Verdict::Detached;
        }
        match self.run_one::<true>(buf, bounds) {
            Ok(action) => Verdict::Action { action, redirect: self.r.redirect },
            Err(_) => {
                self.detached = self.r.ext.health().is_detached();
                Verdict::Fault
            }
        }
    }

    /// As [`XdpBurst::run`], without checking `bounds` and `buf` against the burst's
    /// geometry: for a caller whose buffers keep them so by construction (the adapter's
    /// pool, whose metadata never points outside a buffer), so that the check is not
    /// made again for every packet.
    ///
    /// # Safety
    /// `buf.len()` is the geometry's `size` and `bounds` satisfy [`Geometry::holds`]
    /// for it: the packet's region is registered from them, and the program reads and
    /// writes whatever it covers.
    #[inline]
    pub unsafe fn run_unchecked(&mut self, buf: &mut [u8], bounds: &mut Bounds) -> Verdict {
        if self.detached {
            return Verdict::Detached;
        }
        match self.run_one::<false>(buf, bounds) {
            Ok(action) => Verdict::Action { action, redirect: self.r.redirect },
            Err(_) => {
                self.detached = self.r.ext.health().is_detached();
                Verdict::Fault
            }
        }
    }

    /// One invocation on `buf`. `CHECK`: whether `bounds` and `buf` are checked against
    /// the geometry first; without it the caller has made sure they hold (a [`Frame`]
    /// keeps them so itself, and so do the callers of [`XdpBurst::run_unchecked`]).
    // Always inlined, like `XdpRunner::run_raw`: out of line, its result comes back
    // through memory written as two narrow stores and read back as one 16-byte load
    // (a store-forwarding stall per packet).
    #[inline(always)]
    fn run_one<const CHECK: bool>(
        &mut self,
        buf: &mut [u8],
        bounds: &mut Bounds,
    ) -> Result<u32, Box<Fault>> {
        let r = &mut *self.r;
        if CHECK {
            assert!(
                r.env.geometry.holds(bounds, buf.len()),
                "packet bounds {bounds:?} break {:?}",
                r.env.geometry
            );
        } else {
            debug_assert!(r.env.geometry.holds(bounds, buf.len()));
        }
        r.redirect = None;
        let base = buf.as_mut_ptr() as u64;
        let (meta, end) = (base + bounds.meta as u64, base + bounds.end as u64);
        let ctx_ptr = r.env.ctx;
        // One store per field, each the width the program and the read-back below load:
        // a load served from part of a wider (vector) store is not forwarded and stalls.
        // SAFETY: `ctx_ptr` points to the box the runner owns; the writes are in bounds.
        unsafe {
            std::ptr::addr_of_mut!((*ctx_ptr).data).write_volatile(base + bounds.data as u64);
            std::ptr::addr_of_mut!((*ctx_ptr).data_end).write_volatile(end);
            std::ptr::addr_of_mut!((*ctx_ptr).data_meta).write_volatile(meta);
        }
        let pkt = Region { start: meta, len: end - meta, writable: true };
        // SAFETY: the frame buffer is borrowed for all of this call and nothing else
        // references it while the program runs; after it returns the stale region is
        // never used (no engine runs on `mem` before the next `set`). `pkt_region` was
        // registered with the runner and `mem` is never cut below the runner's regions.
        unsafe { r.mem.set_unchecked(r.pkt_region, pkt) };
        // Each packet is its own invocation: nothing of the previous one carries over.
        let env = &mut r.env;
        env.frame = base as *mut u8;
        // The tail-call state is reset lazily: only a run that made a tail call changed
        // it, and every such run counted it in `tail_calls` (`tail` and
        // `fault_recorded` are only ever set after a counted tail call).
        if env.tail_calls != 0 {
            env.tail_calls = 0;
            env.tail = None;
            env.fault_recorded = false;
        }
        env.redirect = None;
        env.deadline = None;
        env.cpu_deadline = None;
        let limits = RunLimits { points: env.budget.points };
        // r1 is the context, r2..r5 are 0 (the engines' entry sets them).
        let r1 = ctx_ptr as u64;
        // The attached program first, without the tail-call loop's reference counting;
        // the targets of its tail calls (rare) out of line.
        let mut result =
            invoke(&r.ext, r.cpu, &mut r.jit, &mut r.mem, &mut r.stack, env, r1, limits);
        if result.is_ok() && env.tail.is_some() {
            result =
                follow_tail_calls(r.cpu, &mut r.jit, &mut r.mem, &mut r.stack, env, r1, limits);
        }
        // The invocation is over: what it held (inner maps, reserved records) is let go.
        if !env.held.is_empty() {
            env.held.release(env.maps);
        }
        if result == Ok(spine_abi::xdp_action::REDIRECT) {
            r.redirect = env.redirect;
        }
        // One 8-byte load per field: the program and the helpers stored them one by one,
        // and a wider load spanning two such stores cannot be forwarded from the store
        // buffer (a stall that cost more than the whole of a small program).
        let ctx: *const XdpCtx = ctx_ptr;
        // SAFETY: `ctx` points into the box the runner owns; the reads are in bounds.
        let (meta, data, end) = unsafe {
            (
                std::ptr::addr_of!((*ctx).data_meta).read_volatile(),
                std::ptr::addr_of!((*ctx).data).read_volatile(),
                std::ptr::addr_of!((*ctx).data_end).read_volatile(),
            )
        };
        *bounds = Bounds {
            meta: (meta - base) as usize,
            data: (data - base) as usize,
            end: (end - base) as usize,
        };
        result
    }
}

/// One run of `ext`'s code on the invocation's state, its fault counted against `ext`
/// (unless a nested run already counted it); r0 truncated to 32 bits. The engine's
/// result is taken apart at once: moving the whole `Result<u64, Fault>` around costs a
/// store-forwarding stall per packet.
#[inline(always)]
#[expect(clippy::too_many_arguments, reason = "the runner's fields, borrowed apart")]
fn invoke(
    ext: &Extension,
    cpu: usize,
    jit: &mut spine_jit::RunSlot<XdpEnv<'static>>,
    mem: &mut Memory,
    stack: &mut Stack,
    env: &mut XdpEnv<'static>,
    r1: u64,
    limits: RunLimits,
) -> Result<u32, Box<Fault>> {
    if ext.stats().zeroed_stack > 0 {
        stack.zero_top(ext.stats().zeroed_stack);
    }
    env.running = ext;
    let res = match &ext.engine {
        Engine::Interp(vm) => vm.run([r1, 0, 0, 0, 0], mem, stack, env, limits),
        // In the run context the runner keeps, bound to its stack (`XdpRunner::burst`):
        // per packet the countdown, the abort flag and the memory and environment
        // pointers are written there.
        // SAFETY: the JIT registered `helpers::native_helpers`, which take the `XdpEnv`
        // passed here as their runtime pointer; `mem` has held the region of `stack`
        // since the runner was made, and `jit` was bound to `stack` by the burst (or
        // run) this invocation belongs to.
        Engine::Jit(code) => unsafe { code.run_bound(jit, r1, mem, env, limits) },
    };
    match res {
        Ok(r0) => Ok(r0 as u32),
        Err(fault) => Err(invoke_fault(ext, cpu, env, fault)),
    }
}

/// A run faulted: counted against `ext` unless a tail call's target run from a callee
/// counted it already.
#[cold]
#[inline(never)]
fn invoke_fault(
    ext: &Extension,
    cpu: usize,
    env: &mut XdpEnv<'static>,
    fault: Fault,
) -> Box<Fault> {
    if !env.fault_recorded {
        record_fault(ext, cpu, &fault, env.host());
    }
    Box::new(fault)
}

/// The attached program ended with a tail call: runs its target, and the targets of
/// the tail calls those make, on the same context until one returns.
#[cold]
#[inline(never)]
fn follow_tail_calls(
    cpu: usize,
    jit: &mut spine_jit::RunSlot<XdpEnv<'static>>,
    mem: &mut Memory,
    stack: &mut Stack,
    env: &mut XdpEnv<'static>,
    r1: u64,
    limits: RunLimits,
) -> Result<u32, Box<Fault>> {
    loop {
        let Some(target) = env.tail.take() else { unreachable!("called with a pending tail call") };
        let r0 = invoke(&target, cpu, jit, mem, stack, env, r1, limits)?;
        if env.tail.is_none() {
            return Ok(r0);
        }
    }
}

/// Whether an invocation of `ext` may call `bpf_for_each_map_elem`: the program does,
/// or it may tail-call into programs that do (it has a program array).
fn walks_maps(ext: &Extension) -> bool {
    let calls = ext
        .insns()
        .iter()
        .any(|i| i.is_helper_call() && i.imm as u32 == spine_abi::helper::FOR_EACH_MAP_ELEM);
    calls || ext.maps().has_prog_arrays()
}

pub(crate) fn record_fault(ext: &Extension, cpu: usize, fault: &Fault, host: &mut dyn Host) {
    host.event(&Event::Fault { ext: ext.name(), cpu, fault });
    let policy = ext.domain().spec().faults;
    if ext.health().record(host.now_ns(), policy) == FaultOutcome::Detached {
        host.event(&Event::Detached {
            ext: ext.name(),
            domain: ext.domain().name(),
            faults: ext.health().faults(),
        });
    }
}
