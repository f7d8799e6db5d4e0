//! A worker: one thread, pinned to its core, running every event to completion. Its
//! event sources are the receive queues of the ports it owns and one ring from every
//! other worker; each [`Worker::round`] visits each source once and takes at most one
//! burst from it, so no source can starve another, and transmissions queued while
//! handling a source go out before the next source is read (SPINE's adapter swung
//! between receive bursts and transmit bursts; this interleaves them).
//!
//! Each packet runs the extension attached to its port on the pool buffer it arrived in
//! and goes where the verdict says, as XDP defines it; see [`Worker::handle`]. Buffers
//! only move (to a port's transmit queue, to another worker, back to the pool); nothing
//! is allocated per packet.

use std::sync::Arc;

use spine_abi::xdp_action as act;
use spine_endpoint::Taken;
use spine_pool::{Buf, BufMeta, Burst, Pool, PoolCache, PoolError};
use spine_runtime::{
    Bounds, Dest, Geometry, Redirect, RxInfo, Verdict, XdpRunner, MAX_TIMERS_PER_CALL,
};

use crate::counters::{Counters, Drops};
use crate::device::Device;
use crate::flow::flow_hash;
use crate::host::WorkerHost;
use crate::program::Program;
use crate::ring::{Consumer, Producer};
use crate::slot::SlotReader;
use crate::trace::{Event, Kind, TraceRing};

/// What one worker hands another.
#[derive(Debug)]
pub(crate) struct Msg {
    pub buf: Buf,
    pub kind: MsgKind,
    /// The ingress port (`Rx`, `Pass`) or the port to transmit on (`Tx`).
    pub port: u16,
    /// The sending worker's packet number, for the trace.
    pub packet: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MsgKind {
    /// Software RSS: run the ingress port's extension here.
    Rx,
    /// As `Rx`, for a chained (multi-buffer) frame.
    RxFrags,
    /// Transmit on `port`, which this worker owns.
    Tx,
    /// Transmit the chained (multi-buffer) frame on `port`, which this worker owns.
    TxFrags,
    /// A cpumap redirect: deliver as `XDP_PASS` of the ingress port.
    Pass,
    /// As `Pass`, for a chained (multi-buffer) frame.
    PassFrags,
    /// An endpoint map redirect: deliver to endpoint `id`, which this worker serves.
    Endpoint { id: u32 },
    /// An active message (its payload is the buffer's data) for endpoint `id`, which
    /// this worker serves, sent by extension `ext` of domain `domain` for `handler`:
    /// delivered marked (handler, source) only if the endpoint is of that domain. A bulk
    /// one's buffer holds its reference (offset: 8 bytes, length: 4, little-endian) into
    /// the area of endpoint `id`, checked there on delivery.
    Message { id: u32, domain: u16, ext: u16, handler: u8, bulk: bool },
    /// An active message that arrived on tunnel port `Msg::port` for endpoint `id`,
    /// which this worker serves (its payload is the buffer's data), for `handler` from
    /// the peer's claimed sender `from`: delivered only if the endpoint may take
    /// messages from that tunnel ([`takes_remote`]). A bulk one (`bulk`) is the whole
    /// reassembled message in a chain of pool buffers, written into one of the
    /// endpoint's grants there.
    Remote { id: u32, handler: u8, from: u16, bulk: bool },
    /// A bulk message's acknowledgement (ACK or NACK; the buffer holds its frame) that
    /// arrived on tunnel port `Msg::port` for a message this worker sent (the worker
    /// index in the id's top byte), acted on here ([`Worker::bulk_control_here`]).
    BulkCtl,
}

/// What every worker knows about a port (fixed once the adapter is built).
#[derive(Debug, Clone)]
pub(crate) struct PortInfo {
    pub name: String,
    pub ifindex: u32,
    pub queue: u32,
    /// The worker that receives from and transmits on the port.
    pub home: usize,
    /// Where `XDP_PASS` sends its packets: a port's host path, or for a host path the
    /// port it serves (packets the host sends go out on the wire).
    pub uplink: Option<u16>,
    /// A UDP tunnel port: its receive path recognises active-message frames
    /// (`spine_endpoint::remote`).
    pub tunnel: bool,
    /// The port transmits chained (multi-buffer) frames whole (`Port::takes_frags`).
    pub frags: bool,
}

/// The adapter's wiring, shared read-only by every worker.
#[derive(Debug)]
pub(crate) struct Wiring {
    pub ports: Vec<PortInfo>,
    /// `(ifindex, port)`, sorted, for `XDP_REDIRECT` targets.
    pub by_ifindex: Vec<(u32, u16)>,
    pub workers: usize,
    /// Hand packets to the worker their flow hash picks.
    pub rss: bool,
    pub burst: usize,
}

impl Wiring {
    #[inline]
    pub(crate) fn port_of_ifindex(&self, ifindex: u32) -> Option<u16> {
        self.by_ifindex
            .binary_search_by_key(&ifindex, |&(i, _)| i)
            .ok()
            .map(|k| self.by_ifindex[k].1)
    }
}

/// Indices into `Drops`, for trace events.
#[derive(Debug, Clone, Copy)]
enum Why {
    Verdict,
    Aborted,
    Fault,
    Invalid,
    NoHostPath,
    NoTarget,
    NoPort,
    Refused,
    BadCpu,
    PeerFull,
    TxFull,
    /// After `tx_error` (which no `Why` names) in `Drops` and the trace's reasons.
    Frags = 12,
    NoBuffer,
}

impl Why {
    fn count(self, d: &mut Drops) {
        let c = match self {
            Why::Verdict => &mut d.verdict,
            Why::Aborted => &mut d.aborted,
            Why::Fault => &mut d.fault,
            Why::Invalid => &mut d.invalid,
            Why::NoHostPath => &mut d.no_host_path,
            Why::NoTarget => &mut d.redirect_no_target,
            Why::NoPort => &mut d.redirect_no_port,
            Why::Refused => &mut d.redirect_refused,
            Why::BadCpu => &mut d.redirect_bad_cpu,
            Why::PeerFull => &mut d.peer_full,
            Why::TxFull => &mut d.tx_full,
            Why::Frags => &mut d.frags,
            Why::NoBuffer => &mut d.no_buffer,
        };
        *c += 1;
    }
}

/// Where a verdict sends a packet, decided from the verdict and the redirect target
/// alone (the XDP semantics, kept apart from the moving of buffers so it can be tested
/// by itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Out of the receiving port.
    Tx,
    /// To the receiving port's host path.
    Pass,
    /// Out of another port (`XDP_REDIRECT` to a port this extension may use).
    Redirect(u16),
    /// To another worker, which delivers it as `XDP_PASS` (a cpumap entry).
    Cpu(usize),
    /// Out of the port of every entry of this devmap of the extension (`BPF_F_BROADCAST`).
    Broadcast {
        map: u32,
        exclude_ingress: bool,
    },
    /// To the endpoint with this id (an endpoint map slot).
    Endpoint(u32),
    Drop(DropWhy),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DropWhy {
    Verdict,
    Aborted,
    Invalid,
    NoTarget,
    NoPort,
    Refused,
    BadCpu,
}

/// The XDP semantics of `verdict` for a packet of an extension whose domain may use the
/// ports `may_use` says (indexed by port).
#[inline]
pub(crate) fn decide(
    w: &Wiring,
    may_use: &[bool],
    verdict: u32,
    redirect: Option<Redirect>,
) -> Action {
    match verdict {
        act::PASS => Action::Pass,
        act::TX => Action::Tx,
        act::DROP => Action::Drop(DropWhy::Verdict),
        act::ABORTED => Action::Drop(DropWhy::Aborted),
        act::REDIRECT => match redirect {
            None => Action::Drop(DropWhy::NoTarget),
            Some(Redirect::Port { ifindex }) => match w.port_of_ifindex(ifindex) {
                None => Action::Drop(DropWhy::NoPort),
                Some(q) if !may_use.get(q as usize).copied().unwrap_or(false) => {
                    Action::Drop(DropWhy::Refused)
                }
                Some(q) => Action::Redirect(q),
            },
            Some(Redirect::Cpu { cpu }) if (cpu as usize) < w.workers => Action::Cpu(cpu as usize),
            Some(Redirect::Cpu { .. }) => Action::Drop(DropWhy::BadCpu),
            Some(Redirect::Broadcast { map, exclude_ingress }) => {
                Action::Broadcast { map, exclude_ingress }
            }
            Some(Redirect::Endpoint { id }) => Action::Endpoint(id),
        },
        _ => Action::Drop(DropWhy::Invalid),
    }
}

/// One worker's state. Everything here is owned by the worker's thread (or, stepped
/// in tests, by the caller's), except the shared `wiring` and pool.
pub(crate) struct Worker {
    pub index: usize,
    pub pool: Arc<Pool>,
    pub cache: PoolCache,
    pub geometry: Geometry,
    pub wiring: Arc<Wiring>,
    /// The ports this worker owns (`Some` at their index).
    pub devices: Vec<Option<Device>>,
    /// Transmissions queued per owned port.
    pub pending: Vec<Burst>,
    /// Owned ports, in the order they are polled.
    pub rx_ports: Vec<u16>,
    /// Ports whose receive failed (logged once) and are no longer polled.
    pub rx_failed: Vec<bool>,
    pub tx_failed: Vec<bool>,
    /// What each port runs here, by port index.
    pub progs: Vec<PortProg>,
    /// To each other worker (`None` at our own index).
    pub out: Vec<Option<Producer<Msg>>>,
    pub inbox: Vec<Consumer<Msg>>,
    pub rx: Burst,
    pub counters: Counters,
    pub host: WorkerHost,
    pub trace: Option<TraceRing>,
    pub packet_seq: u32,
    pub scratch: BurstScratch,
    /// The endpoints bound to ports (channel tags), and those this worker serves.
    pub eps: crate::endpoints::WorkerEps,
    /// This worker's runners of every loaded extension's active-message handlers.
    pub handlers: crate::handlers::WorkerHandlers,
    /// By port: the bulk messages in reassembly, for the tunnel ports this worker owns
    /// (allocated with the worker).
    pub reasm: Vec<Option<crate::reasm::Reassembly>>,
    /// The bulk messages this worker sent over tunnels and the peer has not ACKed yet,
    /// kept for retransmission.
    pub retx: crate::retx::RetxStore,
    /// The id of the last bulk message this worker sent over a tunnel.
    pub bulk_seq: u32,
}

/// A port's program as this worker runs it: the slot's value at the last refresh and
/// this worker's runner of it.
#[derive(Debug)]
pub(crate) struct PortProg {
    pub reader: SlotReader<Program>,
    /// The runner of the reader's current program (`None`: nothing attached).
    pub runner: Option<XdpRunner>,
    /// The extension id of that program.
    pub ext: u16,
}

impl PortProg {
    /// Starts on the slot's current program, taking worker `worker`'s runner of it.
    pub fn new(reader: SlotReader<Program>, worker: usize) -> PortProg {
        let mut p = PortProg { reader, runner: None, ext: 0 };
        p.take(worker);
        p
    }

    /// Takes this worker's runner of the reader's current program (cold: once per
    /// attach or replace). The runner it replaces is dropped here.
    #[cold]
    fn take(&mut self, worker: usize) {
        match self.reader.current() {
            Some(prog) => {
                self.ext = prog.ext;
                self.runner = prog.take_runner(worker);
            }
            None => self.runner = None,
        }
    }

    /// The ports the current program may redirect to.
    #[inline]
    fn may_use(&self) -> &[bool] {
        self.reader.current().map_or(&[], |p| &p.may_use)
    }

    /// The runner, when one is attached and the watchdog has not detached it.
    #[inline]
    fn attached(&self) -> Option<usize> {
        match &self.runner {
            Some(r) if r.is_attached() => Some(usize::from(self.ext)),
            _ => None,
        }
    }
}

/// What the burst path keeps between bursts, sized once for a whole burst so nothing is
/// allocated per packet.
#[derive(Debug)]
pub(crate) struct BurstScratch {
    /// The packets of a burst whose verdict is acted on after the burst has run.
    later: Vec<(Buf, Outcome)>,
    /// Buffers to give back to the pool at the end of the burst, in one go.
    freeing: Burst,
    /// A tunnel port's received frames that are no active messages.
    kept: Burst,
    /// A chained frame's fragments while its program runs (`worker/frags.rs`).
    frags: spine_runtime::Frags,
    /// A tunneled bulk message handed over in a chain, gathered before it is written
    /// into its endpoint's grant ([`Worker::deliver_handed_remote`]).
    bulk: Box<[u8]>,
}

impl BurstScratch {
    /// Room for `burst` packets, and for the fragments of one chained frame of
    /// `buf_size`-byte buffers.
    pub fn new(burst: usize, buf_size: usize) -> Self {
        BurstScratch {
            later: Vec::with_capacity(burst),
            freeing: Burst::with_capacity(burst),
            kept: Burst::with_capacity(burst),
            frags: spine_runtime::Frags::new(buf_size, spine_runtime::MAX_FRAGS),
            bulk: vec![0; spine_endpoint::remote::BULK_MAX].into_boxed_slice(),
        }
    }
}

/// One packet of a burst after its extension ran (or did not).
#[derive(Debug, Clone, Copy)]
enum Outcome {
    Ran(Verdict),
    /// Not run (shared buffer, or the extension was detached): passed on untouched.
    Unhandled,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker").field("index", &self.index).finish_non_exhaustive()
    }
}

impl Worker {
    /// One visit to every source, each giving at most one burst; returns the packets
    /// handled (0: the worker found nothing to do). With `rx` false only the rings
    /// are visited (the adapter is stopping).
    pub fn round(&mut self, rx: bool) -> usize {
        let mut work = 0;
        // Every packet of this round, whichever source it comes from, runs under the
        // programs of this snapshot: one Acquire load per port.
        for p in 0..self.progs.len() {
            if self.progs[p].reader.refresh_changed() {
                self.pick_up(p);
            }
        }
        let wiring = &*self.wiring;
        self.eps.refresh(self.index, |p| wiring.ports[usize::from(p)].home);
        // Every message of this round runs under this version of the handler table.
        if self.handlers.refresh(self.index) {
            let (table, domains) = self.handlers.table();
            self.host.set_targets(table, domains);
        }
        // Every delayed post accepted this round takes one of these rooms at its call.
        self.host.delay_room = self.handlers.delayed.room();
        if !self.eps.released.is_empty() {
            self.free_released();
        }
        // Receive only while every ring out has room for a burst from every port and no ring in
        // is half full: a busy worker slows its peers' receive (the packets wait in the
        // ports) instead of packets being lost between workers. Rings are always
        // drained, so workers never wait on each other.
        if rx && (self.wiring.workers == 1 || self.rings_have_room()) {
            for i in 0..self.rx_ports.len() {
                work += self.poll_port(self.rx_ports[i]);
                self.flush_pending();
            }
        }
        for i in 0..self.inbox.len() {
            work += self.poll_inbox(i);
            self.flush_pending();
        }
        if !self.eps.owned.is_empty() {
            work += self.serve_endpoints(rx);
        }
        // Extension → extension messages posted before now (not while stopping: a
        // chain of posts must not keep a stopping worker busy).
        if rx && self.handlers.delayed.len() > 0 {
            self.release_delayed();
        }
        if rx && self.handlers.posted.len() > 0 {
            work += self.run_posted();
        }
        work += self.fire_timers();
        if self.retx.pending() || self.reasm.iter().flatten().any(crate::reasm::Reassembly::pending)
        {
            work += self.sweep_bulk();
        }
        self.counters.worker.rounds += 1;
        if work == 0 {
            self.counters.worker.idle_rounds += 1;
        }
        work
    }

    /// Runs the due `bpf_timer` callbacks of the extensions this worker runs (those
    /// armed on this worker): port programs', handlers' and its endpoints' applets'.
    /// Each is an invocation bounded by the watchdog, counted to its extension
    /// (`timers`, `faults`); what a callback sends is routed as its extension's messages
    /// are ([`Worker::route_message`]). The clock is read once per round, and only when
    /// some runner's extension sets timers; each runner runs at most
    /// `MAX_TIMERS_PER_CALL` callbacks a round.
    fn fire_timers(&mut self) -> usize {
        let mut now = None;
        let mut work = 0;
        for p in 0..self.progs.len() {
            let e = usize::from(self.progs[p].ext);
            if !self.progs[p].runner.as_ref().is_some_and(|r| r.extension().has_timers()) {
                continue;
            }
            let now = *now.get_or_insert_with(crate::sys::monotonic_ns);
            for _ in 0..MAX_TIMERS_PER_CALL {
                let Some(r) = self.progs[p].runner.as_mut() else { break };
                let Some(ran) = r.run_next_timer(now, &mut self.host) else { break };
                work += 1;
                self.count_timer(e, ran.is_err());
                if ran.is_ok() {
                    self.drain_outbox(p, e);
                }
            }
        }
        if self.handlers.runners.iter().any(|h| h.runner.extension().has_timers()) {
            let now = *now.get_or_insert_with(crate::sys::monotonic_ns);
            work += self.fire_handler_timers(now);
        }
        if self.eps.owned.iter().any(|o| o.applets.as_ref().is_some_and(|a| a.has_timers())) {
            let now = *now.get_or_insert_with(crate::sys::monotonic_ns);
            work += self.fire_applet_timers(now);
        }
        work
    }

    /// One timer callback of extension `e` ran (`fault`: it faulted).
    #[cold]
    pub(crate) fn count_timer(&mut self, e: usize, fault: bool) {
        if self.counters.exts.len() <= e {
            self.counters.exts.resize(e + 1, Default::default());
        }
        let c = &mut self.counters.exts[e];
        c.timers += 1;
        c.faults += u64::from(fault);
    }

    /// The timers of the handlers in this worker's handler table: a callback's messages
    /// go out in its extension's domain.
    #[cold]
    fn fire_handler_timers(&mut self, now: u64) -> usize {
        let mut work = 0;
        for r in 0..self.handlers.runners.len() {
            if !self.handlers.runners[r].runner.extension().has_timers() {
                continue;
            }
            let (domain, ext) = (self.handlers.runners[r].domain, self.handlers.runners[r].ext);
            for _ in 0..MAX_TIMERS_PER_CALL {
                let runner = &mut self.handlers.runners[r].runner;
                let Some(ran) = runner.run_next_timer(now, &mut self.host) else { break };
                work += 1;
                self.count_timer(usize::from(ext), ran.is_err());
                if ran.is_err() {
                    continue;
                }
                for m in 0..self.handlers.runners[r].runner.outbox().len() {
                    let msg = self.handlers.runners[r].runner.outbox()[m];
                    self.route_message(domain, ext, &msg);
                }
            }
        }
        work
    }

    /// A new program on port `p`: take its runner and make room for its counters.
    #[cold]
    fn pick_up(&mut self, p: usize) {
        self.progs[p].take(self.index);
        let e = usize::from(self.progs[p].ext);
        if self.counters.exts.len() <= e {
            self.counters.exts.resize(e + 1, Default::default());
        }
    }

    fn rings_have_room(&mut self) -> bool {
        let need = self.wiring.burst * self.rx_ports.len();
        self.out.iter_mut().flatten().all(|p| p.room() >= need)
            && self.inbox.iter().all(|c| c.backlog() < c.capacity() / 2)
    }

    /// Whether every owned port has nothing more to receive.
    pub fn rx_exhausted(&self) -> bool {
        self.rx_ports.iter().all(|&p| {
            self.rx_failed[p as usize]
                || self.devices[p as usize].as_ref().is_none_or(Device::exhausted)
        })
    }

    #[inline]
    fn now(&self) -> u64 {
        if self.trace.is_some() {
            crate::sys::monotonic_ns()
        } else {
            0
        }
    }

    #[inline]
    fn record(&mut self, ev: Event) {
        if let Some(t) = &mut self.trace {
            t.push(ev);
        }
    }

    fn poll_port(&mut self, p: u16) -> usize {
        let pi = p as usize;
        if self.rx_failed[pi] {
            return 0;
        }
        let Some(dev) = self.devices[pi].as_mut() else { return 0 };
        let t0 = if self.trace.is_some() { crate::sys::monotonic_ns() } else { 0 };
        let got = match dev.port().rx_burst(&mut self.cache, &mut self.rx) {
            Ok(n) => n,
            Err(e) => {
                if self.host.log {
                    eprintln!("spine: worker {}: receive stopped: {e}", self.index);
                }
                self.rx_failed[pi] = true;
                0
            }
        };
        if got == 0 && self.rx.is_empty() {
            return 0;
        }
        if self.trace.is_some() {
            let dur = (crate::sys::monotonic_ns() - t0) as u32;
            self.record(Event {
                ts_ns: t0,
                dur_ns: dur,
                packet: 0,
                arg: got as u32,
                port: p,
                ext: u16::MAX,
                kind: Kind::Rx,
            });
        }
        if self.wiring.ports[pi].tunnel {
            self.take_remote_messages(p);
            if self.rx.is_empty() {
                return got;
            }
        }
        // A burst with chained frames takes the per-packet path, which looks for
        // fragments (`handle_frags`); a linear one is never looked at for them.
        if self.trace.is_none() && !self.wiring.rss && !self.rx.has_chains() {
            if let Some(e) = self.progs[pi].attached() {
                return self.run_burst(p, e);
            }
        }
        let mut rx = std::mem::replace(&mut self.rx, Burst::with_capacity(0));
        let n = rx.len();
        let chained = rx.has_chains();
        // The per-packet path (trace, software RSS, chained frames) is one burst to
        // the FIB as well: its first `bpf_fib_lookup` loads the state, held to its end.
        self.host.pin_fib();
        for buf in rx.drain_front(n) {
            self.packet_seq = self.packet_seq.wrapping_add(1);
            let seq = self.packet_seq;
            let frags = chained && self.pool.has_frags(&buf);
            let len = if frags {
                self.pool.frame_len(&buf)
            } else {
                u64::from(self.pool.meta(&buf).map_or(0, |m| m.len))
            };
            let c = &mut self.counters.ports[pi];
            c.rx_packets += 1;
            c.rx_bytes += len;
            if self.wiring.rss {
                let target = match self.pool.data(&buf) {
                    Ok(d) => flow_hash(d) as usize % self.wiring.workers,
                    Err(_) => self.index,
                };
                if target != self.index {
                    let kind = if frags { MsgKind::RxFrags } else { MsgKind::Rx };
                    self.handoff(target, Msg { buf, kind, port: p, packet: seq }, p);
                    continue;
                }
            }
            if frags {
                self.handle_frags(buf, p, seq);
            } else {
                self.handle(buf, p, seq);
            }
        }
        self.host.unpin_fib();
        self.rx = rx;
        n
    }

    /// The receive path when nothing asks for per-packet work (no trace, no software
    /// RSS): the extension of port `p` (index `e`, attached) runs on the whole burst in
    /// one [`XdpRunner::burst`], each buffer checked once and the next one prefetched;
    /// `XDP_DROP`s are set aside at once and freed together at the end, the other
    /// verdicts acted on after the burst has run, and counters added once per burst
    /// (VPP's vector of packets, DPDK's bulk free).
    #[expect(
        unsafe_code,
        reason = "pool buffers' bounds hold by construction: not re-checked per packet"
    )]
    fn run_burst(&mut self, p: u16, e: usize) -> usize {
        let pi = p as usize;
        let mut rx = std::mem::replace(&mut self.rx, Burst::with_capacity(0));
        let n = rx.len();
        let info = &self.wiring.ports[pi];
        let rxi = RxInfo { ingress_ifindex: info.ifindex, rx_queue_index: info.queue };
        let mut later = std::mem::take(&mut self.scratch.later);
        later.clear();
        // `bytes`: of the packets the extension was given; `other_bytes`: of the rest.
        // The rare packets it did not run on are counted apart (`not_run`, and
        // `skipped_bytes` for those of a detached extension), so a run costs no count.
        let (mut bytes, mut other_bytes, mut dropped) = (0u64, 0u64, 0u64);
        let (mut not_run, mut skipped_bytes) = (0u64, 0u64);
        let (mut sent, mut redirected) = (0u64, 0u64);
        {
            let pool = &*self.pool;
            let freeing = &mut self.scratch.freeing;
            let pending = &mut self.pending;
            let wiring = &*self.wiring;
            let me = self.index;
            let PortProg { reader, runner, .. } = &mut self.progs[pi];
            let may_use = reader.current().map_or(&[][..], |p| &p.may_use[..]);
            let Some(runner) = runner.as_mut() else {
                unreachable!("run_burst is called with a runner attached")
            };
            // `XDP_TX` and redirects to a port of this worker go straight onto the
            // port's transmit queue while every packet before them has been (that
            // keeps each queue in arrival order); anything else, or once one packet
            // has waited, waits for the end of the burst and `act`.
            let tx_here = wiring.ports[pi].home == me;
            // The last redirect target looked up: (ifindex, the port if usable here).
            let mut target: Option<(u32, Option<usize>)> = None;
            // The burst's first `bpf_fib_lookup` loads the FIB state, held to its end.
            self.host.pin_fib();
            let mut burst = runner.burst(self.geometry, rxi, &mut self.host);
            let mut bufs = rx.drain_front(n);
            while let Some(mut buf) = bufs.next() {
                // The next packet's metadata and first bytes load while this one runs.
                if let Some(b) = bufs.as_slice().first() {
                    pool.prefetch(b);
                }
                let outcome = match pool.frame_and_meta_mut(&mut buf) {
                    Ok((frame, meta)) => {
                        let before = Bounds {
                            meta: (meta.data_off - meta.meta_len) as usize,
                            data: meta.data_off as usize,
                            end: (meta.data_off + meta.len) as usize,
                        };
                        let mut b = before;
                        // SAFETY: `frame` is the whole buffer, `buf_size` bytes as the
                        // geometry (`Geometry::pool` of this pool) says, and the pool
                        // keeps the metadata inside it (`meta_len <= data_off`,
                        // `data_off + len <= buf_size`: checked by every write), so
                        // `before` holds for the geometry: no check per packet.
                        let v = unsafe { burst.run_unchecked(frame, &mut b) };
                        // Most programs move no bound (no `xdp_adjust_*`): nothing to
                        // write back then.
                        if b != before {
                            let placed = BufMeta {
                                data_off: b.data as u32,
                                len: (b.end - b.data) as u32,
                                meta_len: (b.data - b.meta) as u32,
                                ..meta
                            };
                            // The runner keeps its bounds inside the buffer: cannot fail.
                            let _ = pool.set_meta(&mut buf, placed);
                        }
                        bytes += u64::from(meta.len);
                        // A detached extension's runs do not happen.
                        if let Verdict::Detached = v {
                            not_run += 1;
                            skipped_bytes += u64::from(meta.len);
                        }
                        Outcome::Ran(v)
                    }
                    // Not ours: dropping the handle gives nothing back (as `handle` does).
                    Err(PoolError::Foreign { .. }) => {
                        not_run += 1;
                        continue;
                    }
                    Err(_) => {
                        not_run += 1;
                        other_bytes += u64::from(pool.meta(&buf).map_or(0, |m| m.len));
                        Outcome::Unhandled
                    }
                };
                let Outcome::Ran(Verdict::Action { action, redirect }) = outcome else {
                    later.push((buf, outcome));
                    continue;
                };
                if action == act::DROP {
                    // `freeing` has room for a whole burst: never refused.
                    match freeing.push(buf) {
                        Ok(()) => dropped += 1,
                        Err(buf) => later.push((buf, outcome)),
                    }
                    continue;
                }
                let q = match (action, redirect) {
                    _ if !later.is_empty() => None,
                    (act::TX, _) if tx_here => Some(pi),
                    (act::REDIRECT, Some(Redirect::Port { ifindex })) => match target {
                        Some((i, q)) if i == ifindex => q,
                        _ => {
                            // As `decide` and `transmit`: a port this extension may use,
                            // transmitted by this worker.
                            let q = wiring.port_of_ifindex(ifindex).map(usize::from).filter(|&q| {
                                may_use.get(q).copied().unwrap_or(false)
                                    && wiring.ports[q].home == me
                            });
                            target = Some((ifindex, q));
                            q
                        }
                    },
                    _ => None,
                };
                let Some(q) = q else {
                    later.push((buf, outcome));
                    continue;
                };
                // A full queue is flushed by `transmit`, after the burst.
                match pending[q].push(buf) {
                    Ok(()) if action == act::TX => sent += 1,
                    Ok(()) => redirected += 1,
                    Err(buf) => later.push((buf, outcome)),
                }
            }
        }
        self.host.unpin_fib();
        self.packet_seq = self.packet_seq.wrapping_add(n as u32);
        self.drain_outbox(pi, e);
        let c = &mut self.counters.ports[pi];
        c.rx_packets += n as u64;
        c.rx_bytes += bytes + other_bytes;
        c.verdicts.drop += dropped;
        c.verdicts.tx += sent;
        c.verdicts.redirect += redirected;
        c.drops.verdict += dropped;
        let ec = &mut self.counters.exts[e];
        ec.runs += n as u64 - not_run;
        ec.bytes += bytes - skipped_bytes;
        ec.verdicts.drop += dropped;
        ec.verdicts.tx += sent;
        ec.verdicts.redirect += redirected;
        for (buf, outcome) in later.drain(..) {
            let v = match outcome {
                Outcome::Ran(v) => v,
                Outcome::Unhandled => Verdict::Detached,
            };
            match v {
                Verdict::Action { action, redirect } => {
                    self.counters.exts[e].verdicts.count(action);
                    self.counters.ports[pi].verdicts.count(action);
                    let a = decide(&self.wiring, self.progs[pi].may_use(), action, redirect);
                    self.act(a, buf, p, e, 0);
                }
                Verdict::Fault => {
                    self.counters.exts[e].faults += 1;
                    self.counters.ports[pi].verdicts.count(act::ABORTED);
                    self.drop(buf, p, Why::Fault, 0);
                }
                Verdict::Detached => {
                    self.counters.ports[pi].unhandled += 1;
                    self.pass(buf, p, 0);
                }
            }
        }
        let _ = self.cache.free_burst(&mut self.scratch.freeing);
        self.scratch.later = later;
        self.rx = rx;
        n
    }

    fn poll_inbox(&mut self, i: usize) -> usize {
        let mut inbox = std::mem::take(&mut self.inbox);
        let burst = self.wiring.burst;
        // What another worker handed over (software RSS) runs as one burst to the FIB.
        self.host.pin_fib();
        let n = inbox[i].drain(burst, |m| {
            self.counters.worker.peer_in += 1;
            match m.kind {
                MsgKind::Rx => self.handle(m.buf, m.port, m.packet),
                MsgKind::RxFrags => self.handle_frags(m.buf, m.port, m.packet),
                MsgKind::Tx => self.transmit(m.buf, m.port, m.port, m.packet),
                MsgKind::TxFrags => self.transmit_frags(m.buf, m.port, m.port, m.packet),
                MsgKind::Pass => self.pass(m.buf, m.port, m.packet),
                MsgKind::PassFrags => self.pass_frags(m.buf, m.port, m.packet),
                MsgKind::Endpoint { id } => self.deliver_owned(m.buf, m.port, id, m.packet),
                MsgKind::Message { id, domain, ext, handler, bulk } => {
                    self.deliver_handed_message(m.buf, id, domain, ext, handler, bulk)
                }
                MsgKind::Remote { id, handler, from, bulk } => {
                    self.deliver_handed_remote(m.buf, m.port, id, handler, from, bulk)
                }
                MsgKind::BulkCtl => self.bulk_control_here(m.buf, m.port),
            }
        });
        self.host.unpin_fib();
        self.inbox = inbox;
        n
    }

    /// Runs port `p`'s extension on `buf` and acts on the verdict.
    /// A linear frame only: chained ones go to [`Worker::handle_frags`] (receive marks
    /// the burst that holds them).
    pub fn handle(&mut self, mut buf: Buf, p: u16, seq: u32) {
        let pi = p as usize;
        let wiring = &*self.wiring;
        let info = &wiring.ports[pi];
        let Some(e) = self.progs[pi].attached() else {
            self.counters.ports[pi].unhandled += 1;
            return self.pass(buf, p, seq);
        };
        let (frame, meta) = match self.pool.frame_and_meta_mut(&mut buf) {
            Ok(view) => view,
            // Not one of this pool's buffers: nothing to run it on, nothing to free.
            Err(PoolError::Foreign { .. }) => return,
            // A buffer shared with another holder cannot be handed to an extension that
            // may write it; it is passed on untouched (never happens for received
            // buffers, which have one holder).
            Err(_) => {
                self.counters.ports[pi].unhandled += 1;
                return self.pass(buf, p, seq);
            }
        };
        let t0 = self.now();
        let rx = RxInfo { ingress_ifindex: info.ifindex, rx_queue_index: info.queue };
        let before = Bounds {
            meta: (meta.data_off - meta.meta_len) as usize,
            data: meta.data_off as usize,
            end: (meta.data_off + meta.len) as usize,
        };
        let mut b = before;
        let Some(runner) = self.progs[pi].runner.as_mut() else {
            unreachable!("attached() found a runner")
        };
        let result = runner.run_raw(frame, self.geometry, &mut b, rx, &mut self.host);
        // Most programs move no bound (no `xdp_adjust_*`): nothing to write back then.
        if b != before {
            let placed = BufMeta {
                data_off: b.data as u32,
                len: (b.end - b.data) as u32,
                meta_len: (b.data - b.meta) as u32,
                ..meta
            };
            // The runner keeps its bounds inside the buffer, so this cannot fail.
            let _ = self.pool.set_meta(&mut buf, placed);
        }
        let ec = &mut self.counters.exts[e];
        ec.runs += 1;
        ec.bytes += u64::from(meta.len);
        let verdict = match result {
            Ok(v) => v,
            Err(_) => {
                ec.faults += 1;
                self.counters.ports[pi].verdicts.count(act::ABORTED);
                if self.trace.is_some() {
                    let dur = (crate::sys::monotonic_ns() - t0) as u32;
                    self.record(Event {
                        ts_ns: t0,
                        dur_ns: dur,
                        packet: seq,
                        arg: u32::MAX,
                        port: p,
                        ext: e as u16,
                        kind: Kind::Run,
                    });
                }
                return self.drop(buf, p, Why::Fault, seq);
            }
        };
        ec.verdicts.count(verdict);
        self.counters.ports[pi].verdicts.count(verdict);
        if self.trace.is_some() {
            let dur = (crate::sys::monotonic_ns() - t0) as u32;
            self.record(Event {
                ts_ns: t0,
                dur_ns: dur,
                packet: seq,
                arg: verdict,
                port: p,
                ext: e as u16,
                kind: Kind::Run,
            });
        }
        self.drain_outbox(pi, e);
        let prog = &self.progs[pi];
        let redirect = prog.runner.as_ref().and_then(XdpRunner::redirect);
        let a = decide(&self.wiring, prog.may_use(), verdict, redirect);
        self.act(a, buf, p, e, seq)
    }

    /// Moves `buf`, a packet of port `p` that extension `e` decided `a` for.
    fn act(&mut self, a: Action, buf: Buf, p: u16, e: usize, seq: u32) {
        match a {
            Action::Tx => self.transmit(buf, p, p, seq),
            Action::Pass => self.pass(buf, p, seq),
            Action::Redirect(q) => {
                if self.trace.is_some() {
                    let ev = Event {
                        ts_ns: self.now(),
                        dur_ns: 0,
                        packet: seq,
                        arg: u32::from(q),
                        port: p,
                        ext: e as u16,
                        kind: Kind::Redirect,
                    };
                    self.record(ev);
                }
                self.transmit(buf, q, p, seq)
            }
            Action::Broadcast { map, exclude_ingress } => {
                self.broadcast(buf, p, map, exclude_ingress, seq)
            }
            Action::Endpoint(id) => self.redirect_to_endpoint(buf, p, id, seq),
            Action::Cpu(w) if w == self.index => self.pass(buf, p, seq),
            Action::Cpu(w) => {
                self.handoff(w, Msg { buf, kind: MsgKind::Pass, port: p, packet: seq }, p)
            }
            Action::Drop(why) => {
                let why = match why {
                    DropWhy::Verdict => Why::Verdict,
                    DropWhy::Aborted => Why::Aborted,
                    DropWhy::Invalid => Why::Invalid,
                    DropWhy::NoTarget => Why::NoTarget,
                    DropWhy::NoPort => Why::NoPort,
                    DropWhy::Refused => Why::Refused,
                    DropWhy::BadCpu => Why::BadCpu,
                };
                self.drop(buf, p, why, seq)
            }
        }
    }

    /// `BPF_F_BROADCAST` for a packet of port `p`: out of the port of
    /// every entry of its program's devmap `map` that its domain may use (as the
    /// kernel's `dev_map_enqueue_multi`, entries naming no port are skipped, and so is
    /// the ingress port with `exclude_ingress`). The buffer is shared, not copied (the
    /// last port gets `buf` itself; a multi-buffer frame is copied, see
    /// [`Worker::devmap_broadcast`]); with no port at all it is dropped as having no
    /// target. Redirects without the flag never come here: the map walk is this path's
    /// own cost.
    fn broadcast(&mut self, buf: Buf, p: u16, map: u32, exclude_ingress: bool, seq: u32) {
        // The program this packet ran under is the port's (the slot is only refreshed
        // between rounds, so it is still the one that decided the broadcast).
        let Some(maps) =
            self.progs[usize::from(p)].runner.as_ref().map(|r| r.extension().maps().clone())
        else {
            return self.drop(buf, p, Why::NoTarget, seq);
        };
        let Some(m) = maps.data(map as usize) else {
            return self.drop(buf, p, Why::NoTarget, seq);
        };
        let ingress = self.wiring.ports[p as usize].ifindex;
        let may_use = |w: &Self, q: u16| {
            w.progs[usize::from(p)].may_use().get(usize::from(q)).copied().unwrap_or(false)
        };
        let full = |w: &mut Self, q: u16| w.counters.ports[usize::from(q)].drops.tx_full += 1;
        if let Err(buf) =
            self.devmap_broadcast(buf, (p, seq), m, (ingress, exclude_ingress), may_use, full)
        {
            self.drop(buf, p, Why::NoTarget, seq);
        }
    }

    /// Sends `buf`, packet `from.1` of port `from.0`, out of the port of every entry of devmap `m`
    /// that `may_use` allows, as the kernel's `dev_map_enqueue_multi`: entries naming no
    /// port are skipped, and so is the one naming `exclude.0` (the ingress ifindex) when
    /// `exclude.1`. A linear buffer is shared, not copied (the last port gets `buf`
    /// itself); `full` counts a copy the pool could not share. A chained (multi-buffer)
    /// frame is copied whole for every port but the last (`PoolCache::clone_frame`), a
    /// copy the pool has no buffers for counted `drops.no_buffer` against its port, and
    /// sent only to ports that transmit chains (each other port counts it `drops.frags`,
    /// no copy made). `Err(buf)` when no entry qualifies (or `m` is no devmap of `u32`
    /// keys).
    pub(crate) fn devmap_broadcast(
        &mut self,
        buf: Buf,
        (p, seq): (u16, u32),
        m: &spine_maps::Map,
        exclude: (u32, bool),
        may_use: impl Fn(&Self, u16) -> bool,
        mut full: impl FnMut(&mut Self, u16),
    ) -> Result<(), Buf> {
        let value_size = m.user_value_size();
        if m.def().key_size != 4 || !(4..=8).contains(&value_size) {
            return Err(buf);
        }
        let (mut key, mut next, mut value) = ([0u8; 4], [0u8; 4], [0u8; 8]);
        // A multi-buffer frame: each target but the last gets a copy of its own (the
        // kernel's `xdpf_clone`; a shared chain could not go out of an AF_XDP socket),
        // and goes only to ports that send chains (the others count it `drops.frags`,
        // where the kernel's `is_valid_dst` skips a device without
        // `NETDEV_XDP_ACT_NDO_XMIT_SG`).
        let chained = self.pool.has_frags(&buf);
        let mut refused = false;
        let mut prev: Option<u16> = None;
        let mut first = true;
        while m.next_key((!first).then_some(&key[..]), &mut next).is_ok() {
            first = false;
            key = next;
            if m.lookup_user(&key, &mut value[..value_size]).is_err() {
                continue;
            }
            let ifindex = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]);
            if exclude.1 && ifindex == exclude.0 {
                continue;
            }
            let Some(q) = self.wiring.port_of_ifindex(ifindex) else { continue };
            if !may_use(self, q) {
                continue;
            }
            if chained && !self.wiring.ports[usize::from(q)].frags {
                // Not copied for a port that would drop it.
                self.count_drop(q, Why::Frags, seq);
                refused = true;
                continue;
            }
            if let Some(pq) = prev {
                if chained {
                    match self.cache.clone_frame(&buf) {
                        Some(copy) => self.transmit_frags(copy, pq, p, seq),
                        None => self.count_drop(pq, Why::NoBuffer, seq),
                    }
                } else {
                    match self.pool.share(&buf) {
                        Ok(copy) => self.transmit(copy, pq, p, seq),
                        Err(_) => full(self, pq),
                    }
                }
            }
            prev = Some(q);
        }
        match prev {
            Some(q) if chained => {
                self.transmit_frags(buf, q, p, seq);
                Ok(())
            }
            Some(q) => {
                self.transmit(buf, q, p, seq);
                Ok(())
            }
            // Every qualifying port refused the chain (counted there).
            None if refused => {
                let _ = self.cache.free(buf);
                Ok(())
            }
            None => Err(buf),
        }
    }

    /// `XDP_REDIRECT` into an endpoint map slot holding endpoint `id`, for a packet of
    /// port `p`: delivered here when this worker serves the endpoint, else handed to the
    /// worker that does; dropped as having no target when the endpoint is gone (its slot
    /// emptied meanwhile), or refused when the extension's domain may not use the
    /// endpoint's port (as for an xskmap entry).
    fn redirect_to_endpoint(&mut self, buf: Buf, p: u16, id: u32, seq: u32) {
        let Some(q) = self.eps.port_of(id) else {
            return self.drop(buf, p, Why::NoTarget, seq);
        };
        if !self.progs[usize::from(p)].may_use().get(usize::from(q)).copied().unwrap_or(false) {
            return self.drop(buf, p, Why::Refused, seq);
        }
        let home = self.wiring.ports[usize::from(q)].home;
        if home != self.index {
            let msg = Msg { buf, kind: MsgKind::Endpoint { id }, port: p, packet: seq };
            return self.handoff(home, msg, p);
        }
        self.deliver_owned(buf, p, id, seq)
    }

    /// Copies `buf` (of port `p`) into endpoint `id`, which this worker serves, and frees
    /// it; dropped as having no target if it serves no such endpoint (any more).
    fn deliver_owned(&mut self, buf: Buf, p: u16, id: u32, seq: u32) {
        if self.pool.data(&buf).is_err() {
            return self.drop(buf, p, Why::NoTarget, seq);
        }
        let Some(k) = self.eps.owned.iter().position(|o| o.id() == id) else {
            return self.drop(buf, p, Why::NoTarget, seq);
        };
        // Through its `doRx` applet if it has one (crate::applets).
        self.deliver_rx(k, buf, p);
    }

    /// The endpoints this worker serves: one burst from each client's transmit ring out
    /// of the tag's port (when receiving), then wake-ups and counters.
    fn serve_endpoints(&mut self, rx: bool) -> usize {
        let mut work = 0;
        if rx {
            // Timers of endpoint applets (crate::applets).
            self.applet_ticks();
            let pool = self.pool.clone();
            let head = pool.headroom();
            for k in 0..self.eps.owned.len() {
                if self.eps.owned[k].path() != crate::endpoints::HostPath::Frames {
                    work += self.serve_host_path(k);
                    continue;
                }
                let p = self.eps.owned[k].port();
                let applets = self.eps.owned[k].applets.is_some();
                let mut n = 0;
                while n < self.wiring.burst && self.eps.owned[k].end.tx_pending() {
                    let Some(mut buf) = self.cache.alloc() else {
                        self.counters.ports[usize::from(p)].drops.tx_full += 1;
                        break;
                    };
                    let end = &mut self.eps.owned[k].end;
                    let taken = match pool.frame_mut(&mut buf) {
                        Ok(frame) => {
                            frame.get_mut(head as usize..).and_then(|room| end.take_entry(room))
                        }
                        Err(_) => None,
                    };
                    let taken = match taken {
                        Some(Taken::Message { handler, len, to }) => {
                            self.run_handlers(k, &mut buf, (handler, to), len, None);
                            let _ = self.cache.free(buf);
                            n += 1;
                            continue;
                        }
                        Some(Taken::Bulk { handler, off, len, to }) => {
                            self.run_handlers(k, &mut buf, (handler, to), 0, Some((off, len)));
                            let _ = self.cache.free(buf);
                            n += 1;
                            continue;
                        }
                        Some(Taken::RemoteBulk { handler, off, len, dest }) => {
                            let _ = self.cache.free(buf);
                            let from = self.eps.owned[k].id();
                            let id = u32::from(p) << 16 | u32::from(dest);
                            self.send_remote_bulk(k, from, None, id, handler, (off, len));
                            n += 1;
                            continue;
                        }
                        Some(Taken::Frame(len)) => Some(len),
                        None => None,
                    };
                    let meta = taken.map(|len| BufMeta {
                        data_off: head,
                        len: len as u32,
                        meta_len: 0,
                        port: u32::from(p),
                        ts_ns: 0,
                    });
                    if meta.filter(|m| pool.set_meta(&mut buf, *m).is_ok()).is_none() {
                        // Nothing valid left to take (bad entries are counted by the end).
                        let _ = self.cache.free(buf);
                        break;
                    }
                    if applets {
                        // Through its `doTx` applet (crate::applets).
                        self.applet_tx(k, buf);
                    } else {
                        self.transmit(buf, p, p, 0);
                    }
                    n += 1;
                }
                work += n;
            }
            if work > 0 {
                self.flush_pending();
            }
        }
        self.eps.end_round();
        work
    }

    /// Runs handler `handler` of every extension of owned endpoint `k`'s domain that
    /// registered it (in this round's handler table) on the message of `len` bytes at
    /// the headroom of `buf` (the endpoint's id as the source), then delivers the
    /// messages each run sent with `spine_msg_send`; a message no handler takes is
    /// counted (`msg_unhandled`). Each run is an invocation like a packet's: bounded by
    /// the watchdog, a fault counted against its extension.
    ///
    /// A bulk message (`bulk`: offset and length in the endpoint's buffer area) has no
    /// payload; its handlers read the data with `spine_msg_bulk_read`
    /// ([`crate::handlers::MsgHost`] with `MsgData`). A message the client addressed to
    /// one extension (`to`, its id) runs only that extension's handler, if it is of the
    /// domain and registered it (else `msg_unhandled`).
    #[inline(never)]
    fn run_handlers(
        &mut self,
        k: usize,
        buf: &mut Buf,
        (handler, to): (u8, Option<u16>),
        len: usize,
        bulk: Option<(u64, u32)>,
    ) {
        let head = self.pool.headroom() as usize;
        let source = self.eps.owned[k].id();
        let domain = self.eps.owned[k].domain_ix();
        let mut ran = false;
        for r in 0..self.handlers.runners.len() {
            let h = &mut self.handlers.runners[r];
            // A handler the watchdog detached runs no more (as a detached XDP program).
            if h.domain != domain
                || h.number != handler
                || to.is_some_and(|t| t != h.ext)
                || !h.runner.is_attached()
            {
                continue;
            }
            ran = true;
            let Ok(frame) = self.pool.frame_mut(buf) else { break };
            let mut bounds = Bounds { meta: head, data: head, end: head + len };
            let end = &self.eps.owned[k].end;
            let data = crate::handlers::MsgData::Area { end, bulk };
            let mut host = crate::handlers::MsgHost { inner: &mut self.host, data };
            let result =
                h.runner.run_message_raw(frame, self.geometry, &mut bounds, source, &mut host);
            if result.is_err() {
                continue;
            }
            let ext = h.ext;
            for m in 0..self.handlers.runners[r].runner.outbox().len() {
                let msg = self.handlers.runners[r].runner.outbox()[m];
                self.deliver_message(k, ext, &msg);
            }
        }
        if !ran {
            self.eps.owned[k].end.count_unhandled();
        }
    }

    /// Delivers the active messages port `pi`'s extension (id `e`) sent in its last run
    /// or burst (`spine_msg_send` from an XDP program): to endpoints this worker serves
    /// in the extension's domain; others are dropped and counted (`msg_undelivered`).
    /// One length test when it sent none.
    #[inline]
    fn drain_outbox(&mut self, pi: usize, e: usize) {
        let sent = self.progs[pi].runner.as_ref().map_or(0, |r| r.outbox().len());
        if sent > 0 {
            self.drain_outbox_cold(pi, e, sent);
        }
    }

    #[cold]
    fn drain_outbox_cold(&mut self, pi: usize, e: usize, sent: usize) {
        let Some(domain) = self.progs[pi]
            .runner
            .as_ref()
            .and_then(|r| self.handlers.domain_index(r.extension().domain().name()))
        else {
            return;
        };
        for m in 0..sent {
            let Some(msg) = self.progs[pi].runner.as_ref().and_then(|r| r.outbox().get(m).copied())
            else {
                return;
            };
            self.route_message(domain, e as u16, &msg);
        }
    }

    /// Where a message extension `ext` of domain `domain` sent (from an XDP program, an
    /// applet or a handler run on a posted message) goes: to the endpoint it names if
    /// this worker serves it in the same domain (`msg_delivered`, else
    /// `msg_undelivered`), or, posted, into this worker's queue for the domain's handlers
    /// ([`Worker::post`]).
    pub(crate) fn route_message(&mut self, domain: u16, ext: u16, msg: &spine_runtime::OutMsg) {
        if msg.bulk().is_some() {
            return self.route_bulk(domain, ext, msg);
        }
        let id = match msg.to {
            Dest::Endpoint(id) if is_remote(id) => return self.send_remote(domain, ext, id, msg),
            Dest::Endpoint(id) => id,
            Dest::Handlers | Dest::Extension(_) => return self.post(domain, ext, msg),
        };
        self.deliver_local(id, domain, ext, msg, |end| {
            end.deliver_message(msg.handler, ext, msg.payload())
        });
    }

    /// A bulk message extension `ext` of domain `domain` sent (`spine_msg_send_bulk`):
    /// delivered to the endpoint it names if this worker serves it in the same domain,
    /// the reference checked against that endpoint's area ([`AdapterEnd::deliver_bulk_message`]:
    /// a bad one counted `bad_desc` there); `msg_delivered`, else `msg_undelivered`. For
    /// an endpoint another worker serves, the reference is handed over
    /// ([`Worker::hand_message`]) and checked there against that endpoint's area. To a
    /// remote source it is refused here (`msg_bulk_remote_refused`): from an XDP
    /// program, an applet, a posted or a remote message there is no endpoint area the
    /// reference could be into (a handler run on an endpoint's message sends it,
    /// [`Worker::send_remote_bulk`]).
    ///
    /// [`AdapterEnd::deliver_bulk_message`]: spine_endpoint::AdapterEnd::deliver_bulk_message
    #[cold]
    fn route_bulk(&mut self, domain: u16, ext: u16, msg: &spine_runtime::OutMsg) {
        let (Dest::Endpoint(id), Some((off, len))) = (msg.to, msg.bulk()) else {
            self.counters.worker.msg_undelivered += 1;
            return;
        };
        if is_remote(id) {
            self.counters.worker.msg_bulk_remote_refused += 1;
            return;
        }
        self.deliver_local(id, domain, ext, msg, |end| {
            end.deliver_bulk_message(msg.handler, ext, off, len)
        });
    }

    /// Delivers `msg` (with `deliver`) to endpoint `id` when this worker serves it in
    /// `domain`, else hands it to the worker that does ([`Worker::hand_message`]);
    /// counted `msg_delivered` or `msg_undelivered` (a handed-over message is counted
    /// where it lands).
    fn deliver_local(
        &mut self,
        id: u32,
        domain: u16,
        ext: u16,
        msg: &spine_runtime::OutMsg,
        deliver: impl FnOnce(&mut spine_endpoint::AdapterEnd) -> bool,
    ) {
        let target = self.eps.owned.iter_mut().find(|o| o.id() == id && o.domain_ix() == domain);
        let delivered = match target {
            Some(o) => {
                let ok = deliver(&mut o.end);
                o.woke |= ok;
                ok
            }
            None => {
                if self.hand_message(id, domain, ext, msg) {
                    return;
                }
                false
            }
        };
        if delivered {
            self.counters.worker.msg_delivered += 1;
        } else {
            self.counters.worker.msg_undelivered += 1;
        }
    }

    /// Queues a message extension `ext` of domain `domain` posted (`spine_msg_post`)
    /// for the domain's handlers, run by [`Worker::run_posted`] in a later round:
    /// `msg_posted`, or `msg_post_dropped` when the queue is full.
    fn post(&mut self, domain: u16, ext: u16, msg: &spine_runtime::OutMsg) {
        if msg.due_ns().is_some() {
            // Its room was reserved at the call ([`WorkerHost::reserve_delayed`]).
            if self.handlers.delayed.push(domain, ext, msg) {
                self.counters.worker.msg_post_delayed += 1;
            } else {
                self.counters.worker.msg_post_dropped += 1;
            }
            return;
        }
        if self.handlers.posted.push(domain, ext, msg) {
            self.counters.worker.msg_posted += 1;
        } else {
            self.counters.worker.msg_post_dropped += 1;
        }
    }

    /// Moves the delayed posts due now into the post queue (the clock read once; a
    /// post that finds the queue full waits for a later round), so this round's
    /// [`Worker::run_posted`] runs them. Cold: only with delayed posts queued.
    #[cold]
    fn release_delayed(&mut self) {
        let now = crate::sys::monotonic_ns();
        let h = &mut self.handlers;
        h.delayed.release(now, &mut h.posted);
    }

    /// Runs the messages posted before this call (those the runs post wait for the
    /// next round, so a handler posting to itself cannot hold the worker): each runs
    /// handler N of every extension of its sender's domain that registered it, in this
    /// round's handler table, on the message copied into a pool buffer (afresh for each
    /// handler), with `SOURCE_EXTENSION | sender` as the source; each run is an
    /// invocation bounded by the watchdog, and what it sends is routed as any
    /// extension's ([`Worker::route_message`]). A message no handler takes is counted
    /// (`msg_post_unhandled`).
    #[inline(never)]
    fn run_posted(&mut self) -> usize {
        let n = self.handlers.posted.len();
        let head = self.pool.headroom() as usize;
        for _ in 0..n {
            let Some(p) = self.handlers.posted.pop() else { break };
            let Some(mut buf) = self.cache.alloc() else {
                self.counters.worker.msg_post_dropped += 1;
                continue;
            };
            let payload = p.payload();
            let source = spine_runtime::SOURCE_EXTENSION | u32::from(p.source);
            let mut ran = false;
            for r in 0..self.handlers.runners.len() {
                let h = &mut self.handlers.runners[r];
                if h.domain != p.domain
                    || h.number != p.handler
                    || p.target.is_some_and(|t| t != h.ext)
                    || !h.runner.is_attached()
                {
                    continue;
                }
                ran = true;
                let Ok(frame) = self.pool.frame_mut(&mut buf) else { break };
                let Some(room) = frame.get_mut(head..head + payload.len()) else { break };
                room.copy_from_slice(payload);
                let mut bounds = Bounds { meta: head, data: head, end: head + payload.len() };
                self.counters.worker.msg_post_runs += 1;
                let faulted = h
                    .runner
                    .run_message_raw(frame, self.geometry, &mut bounds, source, &mut self.host)
                    .is_err();
                if faulted {
                    continue;
                }
                let ext = h.ext;
                for m in 0..self.handlers.runners[r].runner.outbox().len() {
                    let msg = self.handlers.runners[r].runner.outbox()[m];
                    self.route_message(p.domain, ext, &msg);
                }
            }
            if !ran {
                self.counters.worker.msg_post_unhandled += 1;
            }
            let _ = self.cache.free(buf);
        }
        n
    }

    /// Delivers a message extension `ext` (of owned endpoint `k`'s domain) sent from a
    /// handler the endpoint's message ran: to the endpoint it names if this worker
    /// serves it and it is of the same domain, else dropped and counted against
    /// endpoint `k` as unhandled; a posted one goes to the domain's queue
    /// ([`Worker::post`]).
    fn deliver_message(&mut self, k: usize, ext: u16, msg: &spine_runtime::OutMsg) {
        let domain = self.eps.owned[k].domain_ix();
        if let (Some(bulk), Dest::Endpoint(id)) = (msg.bulk(), msg.to) {
            if is_remote(id) {
                let from = spine_runtime::SOURCE_EXTENSION | u32::from(ext);
                return self.send_remote_bulk(k, from, Some(domain), id, msg.handler, bulk);
            }
        }
        if msg.bulk().is_some() {
            return self.route_bulk(domain, ext, msg);
        }
        let Dest::Endpoint(id) = msg.to else { return self.post(domain, ext, msg) };
        if is_remote(id) {
            return self.send_remote(domain, ext, id, msg);
        }
        let found = self.eps.owned.iter().position(|o| o.id() == id);
        match found {
            Some(t) if self.eps.owned[t].domain_ix() == domain => {
                let o = &mut self.eps.owned[t];
                if o.end.deliver_message(msg.handler, ext, msg.payload()) {
                    o.woke = true;
                }
            }
            // Served by another worker: handed over (counted there or as dropped).
            None if self.hand_message(id, domain, ext, msg) => {}
            _ => self.eps.owned[k].end.count_unhandled(),
        }
    }

    /// Hands message `msg` (extension `ext` of domain `domain`) for endpoint `id` to the
    /// worker that serves it, when that is another worker: the payload (a bulk message's
    /// reference) copied into a pool buffer, the marking in the ring entry
    /// ([`MsgKind::Message`]); `msg_handed`,
    /// or `msg_handoff_dropped` when the ring is full or no buffer is free. `false` when
    /// no other worker serves `id` (the caller counts it as before). Cold: a message
    /// only comes here when the sender's worker does not serve its endpoint.
    #[cold]
    fn hand_message(
        &mut self,
        id: u32,
        domain: u16,
        ext: u16,
        msg: &spine_runtime::OutMsg,
    ) -> bool {
        let Some(q) = self.eps.port_of(id) else { return false };
        let home = self.wiring.ports[usize::from(q)].home;
        if home == self.index {
            return false;
        }
        let Some(mut buf) = self.cache.alloc() else {
            self.counters.worker.msg_handoff_dropped += 1;
            return true;
        };
        let head = self.pool.headroom();
        let mut reference = [0u8; 12];
        let payload = match msg.bulk() {
            Some((off, len)) => {
                reference[..8].copy_from_slice(&off.to_le_bytes());
                reference[8..].copy_from_slice(&len.to_le_bytes());
                &reference[..]
            }
            None => msg.payload(),
        };
        let copied = match self.pool.frame_mut(&mut buf) {
            Ok(frame) => match frame.get_mut(head as usize..head as usize + payload.len()) {
                Some(room) => {
                    room.copy_from_slice(payload);
                    true
                }
                None => false,
            },
            Err(_) => false,
        };
        let meta =
            BufMeta { data_off: head, len: payload.len() as u32, meta_len: 0, port: 0, ts_ns: 0 };
        if !copied || self.pool.set_meta(&mut buf, meta).is_err() {
            self.counters.worker.msg_handoff_dropped += 1;
            let _ = self.cache.free(buf);
            return true;
        }
        let kind =
            MsgKind::Message { id, domain, ext, handler: msg.handler, bulk: msg.bulk().is_some() };
        let ring = self.out[home].as_mut().expect("a ring to every other worker");
        match ring.push(Msg { buf, kind, port: 0, packet: 0 }) {
            Ok(()) => {
                self.counters.worker.msg_handed += 1;
                self.counters.worker.peer_out += 1;
            }
            Err(m) => {
                self.counters.worker.msg_handoff_dropped += 1;
                let _ = self.cache.free(m.buf);
            }
        }
        true
    }

    /// A message another worker handed over ([`Worker::hand_message`]): delivered to
    /// endpoint `id` marked with `handler` and `ext` if this worker serves it in domain
    /// `domain` (`msg_delivered`), else dropped (`msg_undelivered`); the buffer goes back
    /// to the pool. A bulk one (`bulk`) carries its reference, checked against that
    /// endpoint's area ([`spine_endpoint::AdapterEnd::deliver_bulk_message`]).
    fn deliver_handed_message(
        &mut self,
        buf: Buf,
        id: u32,
        domain: u16,
        ext: u16,
        handler: u8,
        bulk: bool,
    ) {
        let payload = self.pool.data(&buf).ok();
        let target = self.eps.owned.iter_mut().find(|o| o.id() == id && o.domain_ix() == domain);
        let delivered = match (target, payload) {
            (Some(o), Some(p)) if bulk => {
                let reference = p.get(..8).zip(p.get(8..12)).and_then(|(off, len)| {
                    Some((
                        u64::from_le_bytes(off.try_into().ok()?),
                        u32::from_le_bytes(len.try_into().ok()?),
                    ))
                });
                let ok = reference
                    .is_some_and(|(off, len)| o.end.deliver_bulk_message(handler, ext, off, len));
                o.woke |= ok;
                ok
            }
            (Some(o), Some(p)) => {
                let ok = o.end.deliver_message(handler, ext, p);
                o.woke |= ok;
                ok
            }
            _ => false,
        };
        if delivered {
            self.counters.worker.msg_delivered += 1;
        } else {
            self.counters.worker.msg_undelivered += 1;
        }
        let _ = self.cache.free(buf);
    }

    /// An `XDP_PASS` packet of port `p`, which has endpoints: delivered to the first
    /// endpoint whose tag matches (the home worker), or handed to the home worker when
    /// one matches; returned when none does. The frame is copied into the endpoint; the
    /// buffer goes back to the pool.
    /// `kind` is how a hand-off goes: [`MsgKind::Pass`], or [`MsgKind::PassFrags`] for
    /// a chained frame.
    #[inline(never)]
    fn pass_to_endpoint(&mut self, buf: Buf, p: u16, seq: u32, kind: MsgKind) -> Option<Buf> {
        let home = self.wiring.ports[usize::from(p)].home;
        let Ok(data) = self.pool.data(&buf) else { return Some(buf) };
        if home != self.index {
            if !self.eps.any_matches(p, data) {
                return Some(buf);
            }
            self.handoff(home, Msg { buf, kind, port: p, packet: seq }, p);
            return None;
        }
        let Some(k) = self.eps.owned.iter().position(|o| o.port() == p && o.matches(data)) else {
            return Some(buf);
        };
        // Through its `doRx` applet if it has one (crate::applets).
        self.deliver_rx(k, buf, p);
        None
    }

    /// `XDP_PASS` for a packet of port `p`: to an endpoint whose tag matches, else to its
    /// host path, else dropped and counted.
    fn pass(&mut self, buf: Buf, p: u16, seq: u32) {
        let buf = if self.eps.on_port[usize::from(p)] {
            match self.pass_to_endpoint(buf, p, seq, MsgKind::Pass) {
                Some(b) => b,
                None => return,
            }
        } else {
            buf
        };
        match self.wiring.ports[p as usize].uplink {
            Some(h) => {
                self.counters.ports[p as usize].to_host += 1;
                if self.trace.is_some() {
                    let ev = Event {
                        ts_ns: self.now(),
                        dur_ns: 0,
                        packet: seq,
                        arg: u32::from(h),
                        port: p,
                        ext: u16::MAX,
                        kind: Kind::Pass,
                    };
                    self.record(ev);
                }
                self.transmit(buf, h, p, seq)
            }
            None => self.drop(buf, p, Why::NoHostPath, seq),
        }
    }

    /// Queues `buf` for transmission on port `q` (or hands it to `q`'s worker); `from`
    /// is the ingress port, which a lost hand-off is counted against.
    pub(crate) fn transmit(&mut self, buf: Buf, q: u16, from: u16, seq: u32) {
        let qi = q as usize;
        let home = self.wiring.ports[qi].home;
        if home != self.index {
            return self.handoff(home, Msg { buf, kind: MsgKind::Tx, port: q, packet: seq }, from);
        }
        if self.pending[qi].is_full() {
            self.flush_port(qi);
        }
        if let Err(buf) = self.pending[qi].push(buf) {
            self.drop(buf, q, Why::TxFull, seq);
        }
    }

    fn handoff(&mut self, to: usize, msg: Msg, from: u16) {
        let seq = msg.packet;
        let ring = self.out[to].as_mut().expect("a ring to every other worker");
        match ring.push(msg) {
            Ok(()) => {
                self.counters.worker.peer_out += 1;
                if self.trace.is_some() {
                    let ev = Event {
                        ts_ns: self.now(),
                        dur_ns: 0,
                        packet: seq,
                        arg: to as u32,
                        port: from,
                        ext: u16::MAX,
                        kind: Kind::Handoff,
                    };
                    self.record(ev);
                }
            }
            Err(m) => self.drop(m.buf, from, Why::PeerFull, seq),
        }
    }

    /// Counts (and traces) a drop of a packet of port `p` without freeing anything: for
    /// a copy that could not be made, and by [`Worker::drop`].
    #[inline]
    fn count_drop(&mut self, p: u16, why: Why, seq: u32) {
        why.count(&mut self.counters.ports[p as usize].drops);
        if self.trace.is_some() {
            let ev = Event {
                ts_ns: self.now(),
                dur_ns: 0,
                packet: seq,
                arg: why as u32,
                port: p,
                ext: u16::MAX,
                kind: Kind::Drop,
            };
            self.record(ev);
        }
    }

    fn drop(&mut self, buf: Buf, p: u16, why: Why, seq: u32) {
        self.count_drop(p, why, seq);
        let _ = self.cache.free(buf);
    }

    /// Hands every queued transmission to its port.
    pub fn flush_pending(&mut self) {
        for i in 0..self.rx_ports.len() {
            let q = self.rx_ports[i] as usize;
            if !self.pending[q].is_empty() {
                self.flush_port(q);
            }
        }
    }

    fn flush_port(&mut self, q: usize) {
        let Some(dev) = self.devices[q].as_mut() else { return };
        let pending = &mut self.pending[q];
        let before = pending.len();
        let chained = pending.has_chains();
        let pool = &*self.pool;
        let len = |b: &Buf| {
            if chained {
                pool.frame_len(b)
            } else {
                u64::from(pool.meta(b).map_or(0, |m| m.len))
            }
        };
        let mut bytes: u64 = pending.iter().map(len).sum();
        let t0 = if self.trace.is_some() { crate::sys::monotonic_ns() } else { 0 };
        let r = if self.tx_failed[q] {
            Err(None)
        } else {
            dev.port().tx_burst(&mut self.cache, pending).map_err(Some)
        };
        match r {
            Ok(_) => {
                let left = pending.len();
                if left > 0 {
                    bytes -= pending.iter().map(len).sum::<u64>();
                }
                let sent = (before - left) as u64;
                let c = &mut self.counters.ports[q];
                c.tx_packets += sent;
                c.tx_bytes += bytes;
                if self.trace.is_some() && sent > 0 {
                    let dur = (crate::sys::monotonic_ns() - t0) as u32;
                    self.record(Event {
                        ts_ns: t0,
                        dur_ns: dur,
                        packet: 0,
                        arg: sent as u32,
                        port: q as u16,
                        ext: u16::MAX,
                        kind: Kind::Tx,
                    });
                }
            }
            Err(e) => {
                if let Some(e) = e {
                    if self.host.log {
                        eprintln!("spine: worker {}: transmit failed, dropping: {e}", self.index);
                    }
                    self.tx_failed[q] = true;
                }
                let n = pending.len() as u64;
                self.counters.ports[q].drops.tx_error += n;
                let _ = self.cache.free_burst(&mut self.pending[q]);
            }
        }
    }

    /// Pushes queued transmissions out and lets ports complete them (an idle worker's
    /// housekeeping).
    pub fn flush_devices(&mut self) {
        self.flush_pending();
        for &p in &self.rx_ports {
            if let Some(d) = self.devices[p as usize].as_mut() {
                let _ = d.port().flush(&mut self.cache);
            }
        }
    }

    /// Copies the ports' own counters into ours, for publishing.
    pub fn refresh_device_stats(&mut self) {
        for &p in &self.rx_ports {
            if let Some(d) = &self.devices[p as usize] {
                self.counters.devices[p as usize] = Some(d.stats());
            }
        }
        self.counters.worker.trace_lines = self.host.trace_lines;
        self.counters.worker.msg_post_refused = self.host.post_refused;
        self.counters.worker.msg_post_delay_full = self.host.post_delay_full;
        self.counters.worker.fib_loads = self.host.fib_loads;
    }

    /// Stopping: transmits what is queued (retrying a full queue for up to `patience`
    /// rounds), then drops and counts the rest and returns every buffer to the pool.
    pub fn finish(&mut self, patience: u32) {
        self.eps.release_all();
        self.free_released();
        for _ in 0..patience {
            self.flush_devices();
            if self.rx_ports.iter().all(|&p| self.pending[p as usize].is_empty()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        for &p in &self.rx_ports {
            let pending = &mut self.pending[p as usize];
            self.counters.ports[p as usize].drops.tx_full += pending.len() as u64;
            let _ = self.cache.free_burst(pending);
        }
        let _ = self.cache.free_burst(&mut self.rx);
        self.flush_devices();
        self.refresh_device_stats();
    }
}

/// The low 16 bits of a remote source naming the other adapter's handlers rather than
/// one of its endpoints (`SPINE_MSG_REMOTE_HANDLERS`).
const REMOTE_HANDLERS: u32 = 0xffff;

/// Whether endpoint id `id` of a `spine_msg_send` is a remote source
/// ([`spine_runtime::SOURCE_REMOTE`]).
#[inline]
fn is_remote(id: u32) -> bool {
    id & 0xC000_0000 == spine_runtime::SOURCE_REMOTE
}

/// Whether owned endpoint `o` takes messages (small or bulk) that arrive on tunnel
/// port `p` addressed to its id: when it is bound to `p`, or when its domain may use
/// `p` (the permission a handler of the domain needs to run on that tunnel's
/// messages). An endpoint bound to another port may be served by another worker: the
/// message is handed over and this is checked there.
fn takes_remote(
    handlers: &crate::handlers::WorkerHandlers,
    o: &crate::endpoints::Owned,
    p: u16,
) -> bool {
    o.port() == p || handlers.domain_may_use(o.domain_ix(), p)
}

/// The source a message from tunnel port `p` carries to its handlers:
/// `SOURCE_REMOTE | p << 16 |` the peer's claimed sender's low 16 bits, or 0xffff when
/// an extension over there sent it (a reply then goes to that adapter's handlers, not
/// to an endpoint).
fn remote_source(p: u16, from: u32) -> u32 {
    let sender =
        if from & spine_runtime::SOURCE_EXTENSION != 0 { REMOTE_HANDLERS } else { from & 0xffff };
    spine_runtime::SOURCE_REMOTE | (u32::from(p) & 0x3fff) << 16 | sender
}

impl Worker {
    /// Takes the active-message frames (ethertype 0x88B6) out of the burst just
    /// received on tunnel port `p`, each handled by [`Worker::remote_message`]; the
    /// other frames stay in `self.rx`, in order. One two-byte comparison per frame, only
    /// on tunnel ports.
    #[inline(never)]
    fn take_remote_messages(&mut self, p: u16) {
        let mut rx = std::mem::replace(&mut self.rx, Burst::with_capacity(0));
        let mut kept = std::mem::replace(&mut self.scratch.kept, Burst::with_capacity(0));
        if rx.has_chains() {
            // A tunnel receives jumbo frames as chains: the frames kept stay marked.
            kept.set_chained();
        }
        let n = rx.len();
        for buf in rx.drain_front(n) {
            if !self.pool.data(&buf).is_ok_and(spine_endpoint::remote::is_message) {
                // `kept` has the burst's capacity, as `rx`: never refused.
                if let Err(buf) = kept.push(buf) {
                    self.drop(buf, p, Why::Invalid, 0);
                }
                continue;
            }
            self.remote_message(buf, p);
        }
        self.rx = kept;
        self.scratch.kept = rx;
    }

    /// An active message from another adapter, in `buf` received on tunnel port `p`:
    /// checked (`spine_endpoint::remote::parse`; a malformed one is counted
    /// `msg_remote_bad` and dropped), then either delivered to the endpoint it names, if
    /// that endpoint is bound to port `p` and served here, marked with its handler and
    /// the peer's claimed sender (16 bits), or, addressed to the handlers, run by
    /// handler N of every extension whose domain may use port `p`, with
    /// `SOURCE_REMOTE | p << 16 | claimed sender` as the source (0xffff when an
    /// extension over there sent it: a reply goes to that adapter's handlers); what the runs send is
    /// routed as any handler's. Nothing taken: `msg_remote_unhandled`. The buffer goes
    /// back to the pool.
    fn remote_message(&mut self, mut buf: Buf, p: u16) {
        let pi = usize::from(p);
        let c = &mut self.counters.ports[pi];
        c.rx_packets += 1;
        c.rx_bytes += u64::from(self.pool.meta(&buf).map_or(0, |m| m.len));
        let bulk = spine_endpoint::remote::BULK_VERSION;
        match self.pool.data(&buf).ok().and_then(spine_endpoint::remote::version) {
            Some(v) if v == bulk => return self.remote_piece(buf, p),
            Some(spine_endpoint::remote::CTL_VERSION) => return self.bulk_control(buf, p),
            _ => {}
        }
        self.counters.worker.msg_remote_in += 1;
        let mut payload = [0u8; spine_runtime::MSG_MAX];
        let parsed = self.pool.data(&buf).ok().and_then(|f| spine_endpoint::remote::parse(f).ok());
        let Some((handler, to, from, n)) = parsed.map(|m| {
            payload[..m.payload.len()].copy_from_slice(m.payload);
            (m.handler, m.to, m.from, m.payload.len())
        }) else {
            self.counters.worker.msg_remote_bad += 1;
            let _ = self.cache.free(buf);
            return;
        };
        let payload = &payload[..n];
        let mut taken = false;
        if to != spine_endpoint::remote::TO_HANDLERS {
            match self.eps.owned.iter().position(|o| o.id() == to) {
                Some(t) => {
                    let o = &mut self.eps.owned[t];
                    if takes_remote(&self.handlers, o, p) {
                        taken = o.end.deliver_message(handler, from as u16, payload);
                        o.woke |= taken;
                    }
                    if taken {
                        self.counters.worker.msg_delivered += 1;
                    }
                }
                // Served by another worker, perhaps: handed over (counted there).
                None => match self.hand_remote(buf, p, to, handler, from as u16, payload) {
                    Ok(()) => return,
                    Err(b) => buf = b,
                },
            }
        } else {
            let head = self.pool.headroom() as usize;
            let source = remote_source(p, from);
            for r in 0..self.handlers.runners.len() {
                let h = &self.handlers.runners[r];
                if h.number != handler
                    || !h.runner.is_attached()
                    || !self.handlers.domain_may_use(h.domain, p)
                {
                    continue;
                }
                taken = true;
                let Ok(frame) = self.pool.frame_mut(&mut buf) else { break };
                let Some(room) = frame.get_mut(head..head + n) else { break };
                room.copy_from_slice(payload);
                let mut bounds = Bounds { meta: head, data: head, end: head + n };
                self.counters.worker.msg_remote_runs += 1;
                let h = &mut self.handlers.runners[r];
                let faulted = h
                    .runner
                    .run_message_raw(frame, self.geometry, &mut bounds, source, &mut self.host)
                    .is_err();
                if faulted {
                    continue;
                }
                let (domain, ext) = (h.domain, h.ext);
                for m in 0..self.handlers.runners[r].runner.outbox().len() {
                    let msg = self.handlers.runners[r].runner.outbox()[m];
                    self.route_message(domain, ext, &msg);
                }
            }
        }
        if !taken {
            self.counters.worker.msg_remote_unhandled += 1;
        }
        let _ = self.cache.free(buf);
    }

    /// Hands the small message `payload` (for `handler`, from the peer's claimed sender
    /// `from`) that arrived in `buf` on tunnel port `p` for endpoint `id` to the worker
    /// that serves `id`, when that is another worker: the payload is written back at
    /// the start of `buf`'s data room (no other buffer is taken) and `buf` travels the
    /// hand-over ring ([`MsgKind::Remote`]), checked and delivered there
    /// ([`Worker::deliver_handed_remote`]); `msg_handed`, or `msg_handoff_dropped` when
    /// the ring is full (the buffer goes back to the pool). `Err(buf)` when no other
    /// worker serves `id`: nothing was counted, the caller counts it unhandled. Cold:
    /// only a tunneled message for an endpoint this worker does not serve comes here.
    #[cold]
    fn hand_remote(
        &mut self,
        mut buf: Buf,
        p: u16,
        id: u32,
        handler: u8,
        from: u16,
        payload: &[u8],
    ) -> Result<(), Buf> {
        let Some(home) = self.other_home(id) else { return Err(buf) };
        if self.pool.write_rx(&mut buf, payload, u32::from(p), 0).is_err() {
            self.counters.worker.msg_handoff_dropped += 1;
            let _ = self.cache.free(buf);
            return Ok(());
        }
        let kind = MsgKind::Remote { id, handler, from, bulk: false };
        self.push_remote(home, Msg { buf, kind, port: p, packet: 0 });
        Ok(())
    }

    /// Hands the whole bulk message in reassembly slot `at` of tunnel port `p` (for
    /// endpoint `id`, `handler`, from the peer's claimed sender `from`) to worker `home`,
    /// which serves `id`: the bytes are copied out of the slot into a chain of pool
    /// buffers (one reassembly piece, 1,024 bytes, per buffer: at most 16, within
    /// `spine_pool::MAX_CHAIN`) that travels the hand-over ring as a bulk
    /// [`MsgKind::Remote`]; the serving worker writes it into the endpoint's grant
    /// ([`Worker::deliver_handed_remote`]), so no other worker touches the endpoint's
    /// grants. The pool running dry or a buffer too small for a piece:
    /// `msg_handoff_dropped`, every buffer taken goes back. Cold.
    #[cold]
    fn hand_remote_bulk(
        &mut self,
        home: usize,
        p: u16,
        at: usize,
        id: u32,
        handler: u8,
        from: u16,
    ) {
        use spine_endpoint::remote::PIECE_MAX;
        let pi = usize::from(p);
        let Some(w) = self.reasm.get(pi).and_then(Option::as_ref).and_then(|r| r.message(at))
        else {
            return;
        };
        let mut chain: Option<Buf> = None;
        let mut whole = true;
        for part in w.data.chunks(PIECE_MAX) {
            let Some(mut buf) = self.cache.alloc() else {
                whole = false;
                break;
            };
            if self.pool.write_rx(&mut buf, part, u32::from(p), 0).is_err() {
                let _ = self.cache.free(buf);
                whole = false;
                break;
            }
            match chain.as_mut() {
                None => chain = Some(buf),
                Some(first) => {
                    if let Err(e) = self.pool.chain(first, buf) {
                        let _ = self.cache.free(e.buf);
                        whole = false;
                        break;
                    }
                }
            }
        }
        match chain {
            Some(buf) if whole => {
                let kind = MsgKind::Remote { id, handler, from, bulk: true };
                self.push_remote(home, Msg { buf, kind, port: p, packet: 0 });
            }
            partial => {
                if let Some(buf) = partial {
                    let _ = self.cache.free(buf);
                }
                self.counters.worker.msg_handoff_dropped += 1;
            }
        }
    }

    /// Pushes a tunneled message onto worker `home`'s hand-over ring: `msg_handed`, or
    /// `msg_handoff_dropped` when it is full (the buffer, and any chain it heads, goes
    /// back to the pool).
    fn push_remote(&mut self, home: usize, msg: Msg) {
        let ring = self.out[home].as_mut().expect("a ring to every other worker");
        match ring.push(msg) {
            Ok(()) => {
                self.counters.worker.msg_handed += 1;
                self.counters.worker.peer_out += 1;
            }
            Err(m) => {
                self.counters.worker.msg_handoff_dropped += 1;
                let _ = self.cache.free(m.buf);
            }
        }
    }

    /// The worker other than this one that serves endpoint `id` (the home of its port
    /// in the endpoint table), if any.
    fn other_home(&self, id: u32) -> Option<usize> {
        let q = self.eps.port_of(id)?;
        let home = self.wiring.ports[usize::from(q)].home;
        (home != self.index).then_some(home)
    }

    /// A tunneled small message another worker handed over ([`Worker::hand_remote`]),
    /// received on tunnel port `p`: delivered to endpoint `id` marked with `handler` and
    /// the peer's claimed sender `from` if this worker serves it and it takes messages
    /// from that tunnel ([`takes_remote`]; `msg_delivered`), else counted
    /// `msg_remote_unhandled` as on the tunnel's worker (also when the endpoint's
    /// receive ring is full). The buffer goes back to the pool.
    ///
    /// A bulk one (`bulk`: the message in the chain `buf` heads,
    /// [`Worker::hand_remote_bulk`]) is gathered into this worker's scratch and written
    /// into the oldest of the endpoint's grants that holds it
    /// (`AdapterEnd::deliver_bulk_granted`): only the serving worker touches the
    /// endpoint's grants.
    #[cold]
    fn deliver_handed_remote(
        &mut self,
        buf: Buf,
        p: u16,
        id: u32,
        handler: u8,
        from: u16,
        bulk: bool,
    ) {
        let handlers = &self.handlers;
        let target =
            self.eps.owned.iter_mut().find(|o| o.id() == id && takes_remote(handlers, o, p));
        let delivered = match (target, self.pool.data(&buf)) {
            (Some(o), Ok(head)) if bulk => {
                let room = &mut self.scratch.bulk;
                let mut n = 0;
                let fits = std::iter::once(head).chain(self.pool.frags(&buf)).all(|part| {
                    let Some(to) = room.get_mut(n..n + part.len()) else { return false };
                    to.copy_from_slice(part);
                    n += part.len();
                    true
                });
                let ok = fits && o.end.deliver_bulk_granted(handler, from, &room[..n]);
                o.woke |= ok;
                ok
            }
            (Some(o), Ok(payload)) => {
                let ok = o.end.deliver_message(handler, from, payload);
                o.woke |= ok;
                ok
            }
            _ => false,
        };
        if delivered {
            self.counters.worker.msg_delivered += 1;
        } else {
            self.counters.worker.msg_remote_unhandled += 1;
        }
        let _ = self.cache.free(buf);
    }

    /// A piece of a bulk message from another adapter, in `buf` received on tunnel
    /// port `p`: checked (`spine_endpoint::remote::parse_piece`) and stored into the
    /// port's reassembly slots (`crate::reasm`); anything refused is counted
    /// `msg_bulk_piece_refused`, incomplete messages evicted `msg_bulk_discarded`,
    /// expired ones `msg_bulk_expired` (also swept every round,
    /// [`Worker::sweep_bulk`], which sends the NACKs due). The piece that completes a
    /// message (`msg_bulk_remote_in`) is ACKed to the peer (`msg_bulk_acks_out`) and
    /// runs its handlers ([`Worker::run_remote_bulk`]); a piece of a message made whole
    /// a moment ago is refused as late (`msg_bulk_piece_late`) and the message ACKed
    /// again. The buffer always goes back to the pool.
    #[cold]
    fn remote_piece(&mut self, mut buf: Buf, p: u16) {
        use crate::reasm::Offer;
        let pi = usize::from(p);
        self.counters.worker.msg_bulk_pieces_in += 1;
        let now = crate::sys::monotonic_ns();
        let offered = match (self.pool.data(&buf), self.reasm.get_mut(pi)) {
            (Ok(f), Some(Some(r))) => {
                self.counters.worker.msg_bulk_expired += u64::from(r.expire(now));
                spine_endpoint::remote::parse_piece(f).ok().map(|pc| r.offer(&pc, now))
            }
            _ => None,
        };
        let w = &mut self.counters.worker;
        match offered {
            None | Some((Offer::Duplicate | Offer::Mismatch | Offer::TooBig, _)) => {
                w.msg_bulk_piece_refused += 1
            }
            Some((Offer::Stored, _)) => {}
            Some((Offer::Late, _)) => {
                w.msg_bulk_piece_late += 1;
                // Its ACK may have been lost: the sender still holds the message.
                self.ack_piece(&buf, p);
            }
            Some((Offer::Complete(at), _)) => {
                w.msg_bulk_remote_in += 1;
                self.ack_piece(&buf, p);
                self.run_remote_bulk(&mut buf, p, at);
                if let Some(Some(r)) = self.reasm.get_mut(pi) {
                    r.release(at);
                }
            }
        }
        if let Some((_, discarded)) = offered {
            self.counters.worker.msg_bulk_discarded += u64::from(discarded);
        }
        let _ = self.cache.free(buf);
    }

    /// Runs handler N of every extension whose domain may use tunnel port `p` on the
    /// whole bulk message in reassembly slot `at` of the port, as for a small message
    /// from the port (the same source), with no payload (`ctx->len` 0) and the data
    /// read with `spine_msg_bulk_len`/`spine_msg_bulk_read`
    /// ([`crate::handlers::MsgData::Slice`]); the runs use `buf` (the last piece's pool
    /// buffer) as their frame. A bulk message for an endpoint (`to` its id) bound to
    /// port `p` and served here is written into the oldest region its client granted
    /// that holds it (`Desc::GRANT`, `AdapterEnd::deliver_bulk_granted`) and posted on
    /// its receive ring as a bulk message marked with the handler and the peer's claimed
    /// sender (16 bits), as a small message from the tunnel is (`msg_delivered`). One
    /// for an endpoint that is not here or has no such grant (or a full receive ring),
    /// or that no handler takes: `msg_remote_unhandled`.
    fn run_remote_bulk(&mut self, buf: &mut Buf, p: u16, at: usize) {
        let pi = usize::from(p);
        let Some(w) = self.reasm.get(pi).and_then(Option::as_ref).and_then(|r| r.message(at))
        else {
            return;
        };
        let (handler, to, from) = (w.handler, w.to, w.from);
        let mut taken = false;
        if to != spine_endpoint::remote::TO_HANDLERS {
            let here = self.eps.owned.iter().position(|o| o.id() == to);
            if let Some(t) = here {
                let o = &mut self.eps.owned[t];
                if takes_remote(&self.handlers, o, p) {
                    taken = o.end.deliver_bulk_granted(handler, from as u16, w.data);
                    o.woke |= taken;
                }
                if taken {
                    self.counters.worker.msg_delivered += 1;
                }
            } else if let Some(home) = self.other_home(to) {
                // Served by another worker: handed over (counted there).
                taken = true;
                self.hand_remote_bulk(home, p, at, to, handler, from as u16);
            }
        } else {
            let head = self.pool.headroom() as usize;
            let source = remote_source(p, from);
            for r in 0..self.handlers.runners.len() {
                let h = &self.handlers.runners[r];
                if h.number != handler
                    || !h.runner.is_attached()
                    || !self.handlers.domain_may_use(h.domain, p)
                {
                    continue;
                }
                taken = true;
                let Ok(frame) = self.pool.frame_mut(buf) else { break };
                let data = self.reasm.get(pi).and_then(Option::as_ref).and_then(|r| r.message(at));
                let Some(data) = data.map(|w| w.data) else { break };
                let data = crate::handlers::MsgData::Slice(data);
                let mut host = crate::handlers::MsgHost { inner: &mut self.host, data };
                let mut bounds = Bounds { meta: head, data: head, end: head };
                self.counters.worker.msg_remote_runs += 1;
                let h = &mut self.handlers.runners[r];
                let faulted = h
                    .runner
                    .run_message_raw(frame, self.geometry, &mut bounds, source, &mut host)
                    .is_err();
                if faulted {
                    continue;
                }
                let (domain, ext) = (h.domain, h.ext);
                for m in 0..self.handlers.runners[r].runner.outbox().len() {
                    let msg = self.handlers.runners[r].runner.outbox()[m];
                    self.route_message(domain, ext, &msg);
                }
            }
        }
        if !taken {
            self.counters.worker.msg_remote_unhandled += 1;
        }
    }

    /// A bulk message to remote source `id` (the tunnel port in bits 16..30, the
    /// endpoint over there or [`REMOTE_HANDLERS`] in bits 0..16) whose reference
    /// `(off, len)` is into owned endpoint `k`'s area: sent by a handler of an extension
    /// of `domain` run on endpoint `k`'s message (`from`: `SOURCE_EXTENSION` | its id;
    /// the domain must be allowed the port), or by endpoint `k`'s client itself with a
    /// `Desc::REMOTE` descriptor (`domain` `None`, `from` the endpoint's id; the port
    /// is the one its channel binds it to). Copied whole into an entry of this worker's
    /// retransmit store (`crate::retx`; the oldest unacknowledged one evicted when
    /// full, `msg_bulk_retx_evicted`), then split into pieces
    /// (`spine_endpoint::remote::encode_piece_header`), each copied into its own pool
    /// buffer behind the headers (straight from the area with a store of 0 entries),
    /// queued out of the tunnel port named in `id` under a message id of this worker's
    /// (its index in the top byte; `msg_bulk_remote_out`); the peer's NACKs and ACK
    /// then act on the kept copy (`worker/retx.rs`). Refused
    /// (`msg_bulk_remote_refused`, nothing sent, nothing kept) when the port is no
    /// tunnel or the domain may not use it, `len` is over `remote::BULK_MAX` or the
    /// range is outside the area; cut short when the pool runs dry (also
    /// `msg_bulk_remote_refused`, the copy forgotten: the receiver discards the
    /// incomplete message).
    #[cold]
    fn send_remote_bulk(
        &mut self,
        k: usize,
        from: u32,
        domain: Option<u16>,
        id: u32,
        handler: u8,
        (off, len): (u64, u32),
    ) {
        use spine_endpoint::remote::PIECE_MAX;
        let q = ((id >> 16) & 0x3fff) as u16;
        let tunnel = self.wiring.ports.get(usize::from(q)).is_some_and(|i| i.tunnel);
        let total = len as usize;
        let fits = total > 0
            && total <= spine_endpoint::remote::BULK_MAX
            && self.eps.owned[k].end.layout().in_area(off, total);
        let allowed = domain.is_none_or(|d| self.handlers.domain_may_use(d, q));
        if !tunnel || !fits || !allowed {
            self.counters.worker.msg_bulk_remote_refused += 1;
            return;
        }
        let to = match id & 0xffff {
            REMOTE_HANDLERS => spine_endpoint::remote::TO_HANDLERS,
            endpoint => endpoint,
        };
        let fields = (handler, to, from, self.next_bulk_id());
        // Kept for retransmission (`crate::retx`) when the store has room: the whole
        // message is copied out of the area once and the pieces are cut from the copy.
        let now = crate::sys::monotonic_ns();
        let kept = self.retx.take(q, fields, total, now);
        if let Some((i, evicted)) = kept {
            self.counters.worker.msg_bulk_retx_evicted += u64::from(evicted);
            let end = &self.eps.owned[k].end;
            if !self.retx.data_mut(i).is_some_and(|room| end.read_area(off, room)) {
                self.retx.forget(i);
                self.counters.worker.msg_bulk_remote_refused += 1;
                return;
            }
        }
        for at in (0..total).step_by(PIECE_MAX) {
            let from = match kept {
                Some((i, _)) => PieceFrom::Kept(i),
                None => PieceFrom::Area(k, off),
            };
            if !self.send_piece(q, fields, total, at, from) {
                if let Some((i, _)) = kept {
                    self.retx.forget(i);
                }
                self.counters.worker.msg_bulk_remote_refused += 1;
                return;
            }
        }
        self.counters.worker.msg_bulk_remote_out += 1;
    }

    /// A message extension `ext` of domain `domain` sent to remote source `id`
    /// ([`spine_runtime::SOURCE_REMOTE`]): encoded as a message frame addressed to the
    /// claimed sender (an endpoint id on the other adapter; with 0xffff, its handlers)
    /// and queued out of the tunnel
    /// port named in `id`, if it is a tunnel port the domain may use (`msg_remote_out`);
    /// else dropped (`msg_remote_out_dropped`).
    #[cold]
    fn send_remote(&mut self, domain: u16, ext: u16, id: u32, msg: &spine_runtime::OutMsg) {
        let q = ((id >> 16) & 0x3fff) as u16;
        let tunnel = self.wiring.ports.get(usize::from(q)).is_some_and(|i| i.tunnel);
        if !tunnel || !self.handlers.domain_may_use(domain, q) {
            self.counters.worker.msg_remote_out_dropped += 1;
            return;
        }
        let Some(mut buf) = self.cache.alloc() else {
            self.counters.worker.msg_remote_out_dropped += 1;
            return;
        };
        let head = self.pool.headroom();
        let to = match id & 0xffff {
            REMOTE_HANDLERS => spine_endpoint::remote::TO_HANDLERS,
            endpoint => endpoint,
        };
        let from = spine_runtime::SOURCE_EXTENSION | u32::from(ext);
        let len = match self.pool.frame_mut(&mut buf) {
            Ok(frame) => frame.get_mut(head as usize..).and_then(|room| {
                spine_endpoint::remote::encode(room, msg.handler, to, from, msg.payload())
            }),
            Err(_) => None,
        };
        let meta = len.map(|len| BufMeta {
            data_off: head,
            len: len as u32,
            meta_len: 0,
            port: u32::from(q),
            ts_ns: 0,
        });
        if meta.filter(|m| self.pool.set_meta(&mut buf, *m).is_ok()).is_none() {
            self.counters.worker.msg_remote_out_dropped += 1;
            let _ = self.cache.free(buf);
            return;
        }
        self.counters.worker.msg_remote_out += 1;
        self.transmit(buf, q, q, 0);
    }
}

mod frags;
mod paths;
mod retx;
use retx::PieceFrom;

#[cfg(test)]
mod tests {
    use super::*;

    fn wiring() -> Wiring {
        let port = |name: &str, ifindex| PortInfo {
            name: name.into(),
            ifindex,
            queue: 0,
            home: 0,
            uplink: None,
            tunnel: false,
            frags: false,
        };
        Wiring {
            ports: vec![port("a", 10), port("b", 20), port("c", 30)],
            by_ifindex: vec![(10, 0), (20, 1), (30, 2)],
            workers: 2,
            rss: false,
            burst: 32,
        }
    }

    const MAY_USE: [bool; 3] = [true, true, false];

    #[test]
    fn verdicts_act_as_xdp_defines() {
        let w = wiring();
        assert_eq!(decide(&w, &MAY_USE, act::PASS, None), Action::Pass);
        assert_eq!(decide(&w, &MAY_USE, act::TX, None), Action::Tx);
        assert_eq!(decide(&w, &MAY_USE, act::DROP, None), Action::Drop(DropWhy::Verdict));
        assert_eq!(decide(&w, &MAY_USE, act::ABORTED, None), Action::Drop(DropWhy::Aborted));
        assert_eq!(decide(&w, &MAY_USE, 7, None), Action::Drop(DropWhy::Invalid));
        // A stale redirect target is ignored unless the verdict is XDP_REDIRECT.
        let to_b = Some(Redirect::Port { ifindex: 20 });
        assert_eq!(decide(&w, &MAY_USE, act::PASS, to_b), Action::Pass);
        assert_eq!(decide(&w, &MAY_USE, act::REDIRECT, to_b), Action::Redirect(1));
        assert_eq!(decide(&w, &MAY_USE, act::REDIRECT, None), Action::Drop(DropWhy::NoTarget));
        let to_c = Some(Redirect::Port { ifindex: 30 });
        assert_eq!(decide(&w, &MAY_USE, act::REDIRECT, to_c), Action::Drop(DropWhy::Refused));
        let nowhere = Some(Redirect::Port { ifindex: 99 });
        assert_eq!(decide(&w, &MAY_USE, act::REDIRECT, nowhere), Action::Drop(DropWhy::NoPort));
        let cpu1 = Some(Redirect::Cpu { cpu: 1 });
        assert_eq!(decide(&w, &MAY_USE, act::REDIRECT, cpu1), Action::Cpu(1));
        let cpu5 = Some(Redirect::Cpu { cpu: 5 });
        assert_eq!(decide(&w, &MAY_USE, act::REDIRECT, cpu5), Action::Drop(DropWhy::BadCpu));
    }
}
