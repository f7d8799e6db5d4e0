//! Endpoint applets (U-Net/SLE): eBPF programs an endpoint runs on its transmit (`doTx`)
//! and receive (`doRx`) hooks, next to the endpoint on its home worker.
//!
//! An applet is a program in section `SEC("spine/applet/tx")` or `SEC("spine/applet/rx")`
//! of a loaded extension's object (`spine_runtime::LoadedObject::applets`): verified as
//! an XDP program (the XDP context, the packet rules, the domain's helpers and quota),
//! sharing the object's maps, bounded by the watchdog like any invocation. An endpoint
//! names the extension in its request (`"applets": "<extension>"`); the extension must
//! be of the endpoint's domain.
//!
//! The context is `struct xdp_md` over the frame: `ingress_ifindex` is the ifindex of the
//! endpoint's port, `rx_queue_index` the endpoint's id. Verdicts:
//!
//! | verdict | `doTx` (a frame the client sent) | `doRx` (a frame for the endpoint) |
//! | --- | --- | --- |
//! | `XDP_PASS` | leaves on the endpoint's port | delivered to the endpoint |
//! | `XDP_TX` | reflected: delivered to the endpoint (through `doRx`) | sent back out of the endpoint's port |
//! | `XDP_REDIRECT` | as an XDP program's: a port the domain may use, every entry of a devmap with `BPF_F_BROADCAST`, an endpoint this worker serves (delivered without its `doRx`) | the same |
//! | `XDP_DROP`, `XDP_ABORTED`, a fault, anything else | dropped | dropped |
//!
//! A third hook, `SEC("spine/applet/tick")`, is spine's own, for timers: it runs at most
//! every [`TICK_NS`] on a blank (zeroed) frame of [`TICK_FRAME`] bytes the applet may
//! fill and trim; `XDP_TX` sends it out of the endpoint's port, `XDP_PASS` delivers it to
//! the endpoint, `XDP_DROP` sends nothing.
//!
//! Endpoints without applets pay one test of an `Option` per burst on the transmit side
//! and per frame on the receive side; an applet the watchdog detached runs no more and
//! its hook then lets everything through.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use spine_abi::xdp_action as act;
use spine_pool::{Buf, BufMeta};
use spine_runtime::{AppletHook, Bounds, Extension, Redirect, RxInfo, XdpRunner};

use crate::live::{Live, LiveError};
use crate::worker::{decide, Action, Worker};

/// What an endpoint's applets did, as its worker last published it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AppletCounters {
    /// Runs of the transmit and of the receive applet.
    pub tx_runs: u64,
    pub rx_runs: u64,
    /// Frames that went on as if no applet were there (`XDP_PASS`).
    pub passed: u64,
    /// Frames dropped: `XDP_DROP`, `XDP_ABORTED`, an unknown verdict, or a redirect with
    /// no target the domain may use.
    pub dropped: u64,
    /// `XDP_TX`: reflected to the endpoint (`doTx`) or sent back out (`doRx`).
    pub reflected: u64,
    /// `XDP_REDIRECT` that found a target (a broadcast counts once).
    pub redirected: u64,
    /// Runs that faulted (counted in `dropped` too).
    pub faults: u64,
    /// Runs of the tick applet.
    pub tick_runs: u64,
    /// `bpf_timer` callbacks the applets armed that ran (faults among them are in
    /// `faults` too).
    pub timer_runs: u64,
}

const N_COUNTERS: usize = 9;

impl AppletCounters {
    fn to_array(self) -> [u64; N_COUNTERS] {
        [
            self.tx_runs,
            self.rx_runs,
            self.passed,
            self.dropped,
            self.reflected,
            self.redirected,
            self.faults,
            self.tick_runs,
            self.timer_runs,
        ]
    }

    fn from_array(v: [u64; N_COUNTERS]) -> Self {
        AppletCounters {
            tx_runs: v[0],
            rx_runs: v[1],
            passed: v[2],
            dropped: v[3],
            reflected: v[4],
            redirected: v[5],
            faults: v[6],
            tick_runs: v[7],
            timer_runs: v[8],
        }
    }
}

/// The counters of an endpoint's applets as the control side reads them.
#[derive(Debug, Default)]
pub(crate) struct AppletAtomics([AtomicU64; N_COUNTERS]);

impl AppletAtomics {
    pub fn store(&self, c: &AppletCounters) {
        for (a, v) in self.0.iter().zip(c.to_array()) {
            a.store(v, Ordering::Relaxed);
        }
    }

    pub fn load(&self) -> AppletCounters {
        AppletCounters::from_array(std::array::from_fn(|i| self.0[i].load(Ordering::Relaxed)))
    }
}

/// An endpoint's applets, resolved when it opens.
#[derive(Debug)]
pub(crate) struct AppletSet {
    /// The extension whose object carries them, and its id.
    pub extension: String,
    pub ext: u16,
    pub tx: Option<Arc<Extension>>,
    pub rx: Option<Arc<Extension>>,
    pub tick: Option<Arc<Extension>>,
    /// By port: whether the domain may redirect to it.
    pub may_use: Arc<[bool]>,
}

impl AppletSet {
    /// Worker `cpu`'s runners of the applets (cold: when the worker takes the endpoint).
    /// A runner that cannot be made leaves its hook empty; `Live::endpoint_applets`
    /// made one for the highest worker at open, and what can fail (too many regions, a
    /// worker past the maps' CPUs) does not fail for a lower one.
    pub fn runners(&self, cpu: usize) -> Box<OwnedApplets> {
        let runner = |e: &Option<Arc<Extension>>| {
            e.as_ref().and_then(|e| XdpRunner::new(e.clone(), cpu).ok())
        };
        Box::new(OwnedApplets {
            tx: runner(&self.tx),
            rx: runner(&self.rx),
            tick: runner(&self.tick),
            next_tick: 0,
            may_use: self.may_use.clone(),
            ext: self.ext,
            counts: AppletCounters::default(),
        })
    }
}

/// A worker's runners of an endpoint's applets.
#[derive(Debug)]
pub(crate) struct OwnedApplets {
    pub tx: Option<XdpRunner>,
    pub rx: Option<XdpRunner>,
    pub tick: Option<XdpRunner>,
    /// When the tick applet runs next (the worker's monotonic clock, ns).
    next_tick: u64,
    may_use: Arc<[bool]>,
    /// The extension's id, the source of the messages the applets send.
    ext: u16,
    pub counts: AppletCounters,
}

impl OwnedApplets {
    /// Whether an applet may arm `bpf_timer`s (the worker then fires them).
    pub fn has_timers(&self) -> bool {
        [&self.tx, &self.rx, &self.tick].into_iter().flatten().any(|r| r.extension().has_timers())
    }
}

impl Live {
    /// The applets of extension `name` for an endpoint of `domain` on port `port`: the
    /// extension must be loaded, of that domain, and carry at least one applet; every
    /// worker must be able to run them.
    pub(crate) fn endpoint_applets(
        &self,
        name: &str,
        domain: &str,
    ) -> Result<AppletSet, LiveError> {
        let (ext, tx, rx, tick) = {
            let st = self.shared.lock();
            let ext = st
                .exts
                .iter()
                .position(|e| e.name == name && e.loaded.is_some())
                .ok_or_else(|| LiveError::NoExtension { name: name.to_string() })?;
            let slot = &st.exts[ext];
            if slot.domain != domain {
                return Err(LiveError::AppletDomain {
                    ext: name.to_string(),
                    ext_domain: slot.domain.clone(),
                    domain: domain.to_string(),
                });
            }
            let applets = &slot.loaded.as_ref().expect("found loaded").object.applets;
            let of = |h| applets.iter().find(|a| a.applet() == Some(h)).cloned();
            (ext as u16, of(AppletHook::Tx), of(AppletHook::Rx), of(AppletHook::Tick))
        };
        if tx.is_none() && rx.is_none() && tick.is_none() {
            return Err(LiveError::NoApplets { ext: name.to_string() });
        }
        // The same check as a program's at load: the highest worker can make a runner.
        let cpu = self.shared.workers.saturating_sub(1);
        for e in tx.iter().chain(rx.iter()).chain(tick.iter()) {
            XdpRunner::new(e.clone(), cpu)
                .map_err(|source| LiveError::Runner { name: name.to_string(), source })?;
        }
        let dom = self
            .shared
            .domains
            .iter()
            .find(|d| d.name() == domain)
            .ok_or_else(|| LiveError::NoDomain { name: domain.to_string() })?;
        let may_use: Arc<[bool]> =
            self.shared.port_names.iter().map(|p| dom.may_use_port(p)).collect();
        Ok(AppletSet { extension: name.to_string(), ext, tx, rx, tick, may_use })
    }
}

/// What an applet's run came to.
enum Ran {
    /// The verdict, with the redirect target.
    Action(u32, Option<Redirect>),
    Fault,
    /// No runner (none for this hook, or detached): go on as if none were there.
    Skipped,
}

impl Worker {
    /// Runs owned endpoint `k`'s applet for `hook` on `buf`, writing back any bounds it
    /// moved.
    fn run_applet(&mut self, k: usize, hook: AppletHook, buf: &mut Buf) -> Ran {
        let pool = &*self.pool;
        let o = &mut self.eps.owned[k];
        let rxi = RxInfo {
            ingress_ifindex: self.wiring.ports[usize::from(o.port())].ifindex,
            rx_queue_index: o.id(),
        };
        let Some(a) = o.applets.as_mut() else { return Ran::Skipped };
        let runner = match hook {
            AppletHook::Tx => a.tx.as_mut(),
            AppletHook::Rx => a.rx.as_mut(),
            AppletHook::Tick => a.tick.as_mut(),
        };
        let Some(runner) = runner.filter(|r| r.is_attached()) else { return Ran::Skipped };
        let Ok((frame, meta)) = pool.frame_and_meta_mut(buf) else { return Ran::Skipped };
        match hook {
            AppletHook::Tx => a.counts.tx_runs += 1,
            AppletHook::Rx => a.counts.rx_runs += 1,
            AppletHook::Tick => a.counts.tick_runs += 1,
        }
        let before = Bounds {
            meta: (meta.data_off - meta.meta_len) as usize,
            data: meta.data_off as usize,
            end: (meta.data_off + meta.len) as usize,
        };
        let mut b = before;
        let r = runner.run_raw(frame, self.geometry, &mut b, rxi, &mut self.host);
        if b != before {
            let placed = BufMeta {
                data_off: b.data as u32,
                len: (b.end - b.data) as u32,
                meta_len: (b.data - b.meta) as u32,
                ..meta
            };
            // The runner keeps its bounds inside the buffer: cannot fail.
            let _ = pool.set_meta(buf, placed);
        }
        let ran = match r {
            Ok(v) => Ran::Action(v, runner.redirect()),
            Err(_) => Ran::Fault,
        };
        if !runner.outbox().is_empty() {
            self.applet_outbox(k, hook);
        }
        ran
    }

    fn applet_runner(&self, k: usize, hook: AppletHook) -> Option<&XdpRunner> {
        let a = self.eps.owned[k].applets.as_ref()?;
        match hook {
            AppletHook::Tx => a.tx.as_ref(),
            AppletHook::Rx => a.rx.as_ref(),
            AppletHook::Tick => a.tick.as_ref(),
        }
    }

    /// Routes the active messages an applet of owned endpoint `k` sent
    /// (`spine_msg_send`, `spine_msg_post`, where the domain grants them) as any
    /// extension's, in the endpoint's domain ([`Worker::route_message`]).
    #[cold]
    fn applet_outbox(&mut self, k: usize, hook: AppletHook) {
        let sent = self.applet_runner(k, hook).map_or(0, |r| r.outbox().len());
        let Some(ext) = self.eps.owned[k].applets.as_ref().map(|a| a.ext) else { return };
        let domain = self.eps.owned[k].domain_ix();
        for m in 0..sent {
            let msg = self.applet_runner(k, hook).and_then(|r| r.outbox().get(m).copied());
            let Some(msg) = msg else { return };
            self.route_message(domain, ext, &msg);
        }
    }

    /// A frame owned endpoint `k`'s client transmitted (meta set): through its `doTx`
    /// applet, then where the verdict says.
    pub(crate) fn applet_tx(&mut self, k: usize, mut buf: Buf) {
        let p = self.eps.owned[k].port();
        match self.run_applet(k, AppletHook::Tx, &mut buf) {
            Ran::Skipped => self.transmit(buf, p, p, 0),
            Ran::Action(act::PASS, _) => {
                self.count(k, |c| c.passed += 1);
                self.transmit(buf, p, p, 0)
            }
            Ran::Action(act::TX, _) => {
                self.count(k, |c| c.reflected += 1);
                self.deliver_rx(k, buf, p)
            }
            Ran::Action(act::REDIRECT, r) => self.applet_redirect(k, buf, r),
            Ran::Action(..) => self.applet_drop(k, buf, false),
            Ran::Fault => self.applet_drop(k, buf, true),
        }
    }

    /// Delivers `buf` (which came in on port `p`) to owned endpoint `k`: through its
    /// `doRx` applet when it has one, straight into its receive ring when not.
    #[inline]
    pub(crate) fn deliver_rx(&mut self, k: usize, mut buf: Buf, p: u16) {
        if self.pool.has_frags(&buf) {
            // A chained (multi-buffer) frame (crate::worker::frags).
            return self.deliver_chain(k, buf, p);
        }
        // A host-path endpoint (the router's header-copy or in-place path) takes the
        // frame its own way, with no applets.
        if self.eps.owned[k].path() != crate::endpoints::HostPath::Frames {
            return self.deliver_host_path(k, buf);
        }
        if self.eps.owned[k].applets.as_ref().is_some_and(|a| a.rx.is_some()) {
            match self.run_applet(k, AppletHook::Rx, &mut buf) {
                Ran::Skipped => {}
                Ran::Action(act::PASS, _) => self.count(k, |c| c.passed += 1),
                Ran::Action(act::TX, _) => {
                    self.count(k, |c| c.reflected += 1);
                    let q = self.eps.owned[k].port();
                    return self.transmit(buf, q, p, 0);
                }
                Ran::Action(act::REDIRECT, r) => return self.applet_redirect(k, buf, r),
                Ran::Action(..) => return self.applet_drop(k, buf, false),
                Ran::Fault => return self.applet_drop(k, buf, true),
            }
        }
        let Ok(data) = self.pool.data(&buf) else { return self.applet_drop(k, buf, false) };
        let o = &mut self.eps.owned[k];
        // Counted by the endpoint (delivered, or dropped for want of room).
        if o.end.deliver(data) {
            o.woke = true;
        }
        let _ = self.cache.free(buf);
    }

    fn count(&mut self, k: usize, f: impl FnOnce(&mut AppletCounters)) {
        if let Some(a) = self.eps.owned[k].applets.as_mut() {
            f(&mut a.counts);
        }
    }

    fn applet_drop(&mut self, k: usize, buf: Buf, fault: bool) {
        self.count(k, |c| {
            c.dropped += 1;
            c.faults += u64::from(fault);
        });
        let _ = self.cache.free(buf);
    }

    /// Whether the domain of owned endpoint `k`'s applets may send to port `q`.
    fn applet_may_use(&self, k: usize, q: u16) -> bool {
        self.eps.owned[k]
            .applets
            .as_ref()
            .is_some_and(|a| a.may_use.get(usize::from(q)).copied().unwrap_or(false))
    }

    /// `XDP_REDIRECT` from an applet of owned endpoint `k`: as an XDP program's redirect,
    /// with the ports the endpoint's domain may use.
    fn applet_redirect(&mut self, k: usize, buf: Buf, r: Option<Redirect>) {
        let p = self.eps.owned[k].port();
        let action = match self.eps.owned[k].applets.as_ref() {
            Some(a) => decide(&self.wiring, &a.may_use, act::REDIRECT, r),
            None => return self.applet_drop(k, buf, false),
        };
        match action {
            Action::Redirect(q) => {
                self.count(k, |c| c.redirected += 1);
                self.transmit(buf, q, p, 0)
            }
            Action::Broadcast { map, exclude_ingress } => {
                self.applet_broadcast(k, buf, map, exclude_ingress)
            }
            Action::Endpoint(id) => {
                // Served here: delivered without its `doRx` (so applets cannot bounce a
                // frame between each other forever); another worker's: not reached.
                match self.eps.owned.iter().position(|o| o.id() == id) {
                    Some(t) if self.applet_may_use(k, self.eps.owned[t].port()) => {
                        self.count(k, |c| c.redirected += 1);
                        let Ok(data) = self.pool.data(&buf) else {
                            return self.applet_drop(k, buf, false);
                        };
                        let o = &mut self.eps.owned[t];
                        if o.end.deliver(data) {
                            o.woke = true;
                        }
                        let _ = self.cache.free(buf);
                    }
                    _ => self.applet_drop(k, buf, false),
                }
            }
            _ => self.applet_drop(k, buf, false),
        }
    }

    /// `BPF_F_BROADCAST` from an applet of owned endpoint `k`: one copy out of the port
    /// of every entry of the applet's devmap `map` the domain may use (the last gets
    /// `buf` itself), except the endpoint's port with `BPF_F_EXCLUDE_INGRESS`; dropped
    /// when no entry qualifies.
    fn applet_broadcast(&mut self, k: usize, buf: Buf, map: u32, exclude: bool) {
        let p = self.eps.owned[k].port();
        let maps = {
            let Some(a) = self.eps.owned[k].applets.as_ref() else {
                return self.applet_drop(k, buf, false);
            };
            match a.tx.as_ref().or(a.rx.as_ref()).or(a.tick.as_ref()) {
                Some(r) => r.extension().maps().clone(),
                None => return self.applet_drop(k, buf, false),
            }
        };
        let Some(m) = maps.data(map as usize) else { return self.applet_drop(k, buf, false) };
        let ingress = self.wiring.ports[usize::from(p)].ifindex;
        let may_use = |w: &Self, q: u16| w.applet_may_use(k, q);
        let full = |w: &mut Self, _| w.count(k, |c| c.dropped += 1);
        match self.devmap_broadcast(buf, (p, 0), m, (ingress, exclude), may_use, full) {
            Ok(()) => self.count(k, |c| c.redirected += 1),
            Err(buf) => self.applet_drop(k, buf, false),
        }
    }
}

impl Worker {
    /// Runs the due `bpf_timer` callbacks the applets of this worker's endpoints armed
    /// here: each an invocation bounded by the watchdog, counted to the endpoint
    /// (`timer_runs`, `faults`) and to the extension; what a callback sends is routed in
    /// the endpoint's domain. Two endpoints with the same applets share its timers
    /// (they live in the extension's maps): whichever runner comes first fires one.
    #[cold]
    pub(crate) fn fire_applet_timers(&mut self, now: u64) -> usize {
        let mut work = 0;
        for k in 0..self.eps.owned.len() {
            for hook in [AppletHook::Tx, AppletHook::Rx, AppletHook::Tick] {
                for _ in 0..spine_runtime::MAX_TIMERS_PER_CALL {
                    let Some(a) = self.eps.owned[k].applets.as_mut() else { break };
                    let ext = a.ext;
                    let runner = match hook {
                        AppletHook::Tx => a.tx.as_mut(),
                        AppletHook::Rx => a.rx.as_mut(),
                        AppletHook::Tick => a.tick.as_mut(),
                    };
                    let Some(runner) = runner.filter(|r| r.extension().has_timers()) else {
                        break;
                    };
                    let Some(ran) = runner.run_next_timer(now, &mut self.host) else { break };
                    work += 1;
                    a.counts.timer_runs += 1;
                    a.counts.faults += u64::from(ran.is_err());
                    self.count_timer(usize::from(ext), ran.is_err());
                    if ran.is_ok() {
                        self.applet_outbox(k, hook);
                    }
                }
            }
        }
        work
    }
}

/// How often a tick applet runs (at most; a busy worker runs it at its next round).
pub const TICK_NS: u64 = 100_000;
/// The length of the blank (zeroed) frame a tick applet gets.
pub const TICK_FRAME: u32 = 256;

impl Worker {
    /// Once per round: runs the tick applet of every owned endpoint whose tick is due.
    /// Reads the clock only when some endpoint has a tick applet.
    pub(crate) fn applet_ticks(&mut self) {
        let has_tick =
            |o: &crate::endpoints::Owned| o.applets.as_ref().is_some_and(|a| a.tick.is_some());
        if !self.eps.owned.iter().any(has_tick) {
            return;
        }
        let now = crate::sys::monotonic_ns();
        for k in 0..self.eps.owned.len() {
            let due = match self.eps.owned[k].applets.as_mut() {
                Some(a) if a.tick.is_some() && now >= a.next_tick => {
                    a.next_tick = now + TICK_NS;
                    true
                }
                _ => false,
            };
            if due {
                self.applet_tick(k);
            }
        }
    }

    /// Runs owned endpoint `k`'s tick applet on a blank frame of [`TICK_FRAME`] bytes:
    /// `XDP_TX` sends what it wrote out of the endpoint's port, `XDP_PASS` delivers it
    /// to the endpoint (without doRx), `XDP_REDIRECT` as on the other hooks; anything
    /// else sends nothing.
    fn applet_tick(&mut self, k: usize) {
        let Some(mut buf) = self.cache.alloc() else { return };
        let head = self.pool.headroom();
        let p = self.eps.owned[k].port();
        let blank = match self.pool.frame_mut(&mut buf) {
            Ok(f) => f.get_mut(head as usize..(head + TICK_FRAME) as usize).map(|b| b.fill(0)),
            Err(_) => None,
        };
        let meta =
            BufMeta { data_off: head, len: TICK_FRAME, meta_len: 0, port: u32::from(p), ts_ns: 0 };
        if blank.is_none() || self.pool.set_meta(&mut buf, meta).is_err() {
            let _ = self.cache.free(buf);
            return;
        }
        match self.run_applet(k, AppletHook::Tick, &mut buf) {
            Ran::Action(act::TX, _) => self.transmit(buf, p, p, 0),
            Ran::Action(act::PASS, _) => {
                let Ok(data) = self.pool.data(&buf) else {
                    return self.applet_drop(k, buf, false);
                };
                let o = &mut self.eps.owned[k];
                if o.end.deliver(data) {
                    o.woke = true;
                }
                let _ = self.cache.free(buf);
            }
            Ran::Action(act::REDIRECT, r) => self.applet_redirect(k, buf, r),
            Ran::Fault => self.applet_drop(k, buf, true),
            Ran::Action(..) | Ran::Skipped => {
                let _ = self.cache.free(buf);
            }
        }
    }
}
