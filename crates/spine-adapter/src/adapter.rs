//! Building an adapter (ports opened, extensions loaded into their domains, maps filled,
//! workers wired to each other) and running it: on pinned threads ([`Adapter::start`])
//! or stepped round by round in the caller's thread ([`Adapter::step`]), which is
//! deterministic and what tests of the dispatcher use.
//!
//! Buffer ownership: one pool for every port, so a buffer received on one port is sent
//! on another as is. A buffer belongs to the worker holding its handle: received from
//! a port, queued for a port the worker owns, or moving through a ring to another
//! worker. Each port is owned by one worker (its home), which alone receives from it and
//! transmits on it; other workers send it packets through their ring to that worker.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spine_maps::Map;
use spine_pool::{Burst, Pool, PoolCache, PoolConfig, PoolError};
use spine_ports::PortError;
use spine_runtime::{
    load_selected, Domain, DomainSpec, EngineKind, Extension, Geometry, LoadError, LoadOptions,
    LoadedObject, RunnerError,
};

use crate::config::{Assign, Config, ObjectSource, PortConfig, PortKind};
use crate::counters::{Counters, Labels, Totals};
use crate::device::{self, Device};
use crate::host::WorkerHost;
use crate::live::{ExtSlot, Live, Loaded, PortSlot, Shared, State};
use crate::program::Program;
use crate::ring::{ring, RingView};
use crate::slot::Slot;
use crate::trace::{chrome_trace, TraceRing};
use crate::worker::{BurstScratch, Msg, PortInfo, PortProg, Wiring, Worker};

/// How to run: the `[adapter]` table, plus what only the command line decides.
#[derive(Debug, Clone)]
pub struct AdapterOptions {
    pub workers: usize,
    /// CPU of each worker; `None`: no pinning.
    pub cpus: Option<Vec<usize>>,
    pub engine: EngineKind,
    pub burst: usize,
    pub assign: Assign,
    pub idle_sleep_us: u64,
    /// Events per worker's trace ring; `None`: no trace.
    pub trace_events: Option<usize>,
    pub peer_ring: usize,
    pub pool: PoolConfig,
    /// Log faults, detaches, port errors and `bpf_trace_printk` lines to stderr.
    pub log: bool,
    /// Seed of the extensions' `bpf_get_prandom_u32` and of hash maps.
    pub seed: u64,
    /// The FIB and interfaces `bpf_fib_lookup` answers from (ports are interfaces by
    /// their ifindex); `None`: every lookup answers `-ENODEV`.
    pub fib: Option<spine_runtime::fib_lookup::FibEnv>,
    /// The thread keeping `fib` equal to the host's tables (`[fib] mirror = true`); it
    /// stops when the adapter is gone.
    pub fib_mirror: Option<Arc<spine_rtnl::Mirror>>,
    /// How long a bulk message arriving over a tunnel port in pieces may take to be
    /// whole (from its first piece) before it is discarded and its reassembly slot
    /// freed (`msg_bulk_expired`), in ms.
    pub bulk_expiry_ms: u64,
    /// How long a bulk message in reassembly may go without a new piece before the
    /// receiver NACKs its missing pieces, in ms (0, or not below `bulk_expiry_ms`:
    /// never).
    pub bulk_nack_ms: u64,
    /// Bulk messages each worker keeps for retransmission until the peer ACKs them
    /// (0: none kept, nothing resent).
    pub bulk_retx_slots: usize,
    /// NACKs of one bulk message the sender honours.
    pub bulk_retx_max: u32,
    /// Bulk messages in reassembly per tunnel port (1..=64).
    pub bulk_reasm_slots: usize,
    /// The largest bulk message a tunnel port reassembles, in bytes (1,024..=16,384):
    /// each slot's size; a longer message's pieces are refused.
    pub bulk_reasm_bytes: usize,
}

impl Default for AdapterOptions {
    /// One unpinned worker, no trace, no log: what tests want.
    fn default() -> Self {
        let a = crate::config::AdapterConfig::default();
        AdapterOptions { cpus: None, ..AdapterOptions::from_config(&a) }
    }
}

impl AdapterOptions {
    pub fn from_config(a: &crate::config::AdapterConfig) -> Self {
        AdapterOptions {
            workers: a.workers,
            cpus: a.cpus.clone(),
            engine: a.engine,
            burst: a.burst,
            assign: a.assign,
            idle_sleep_us: a.idle_sleep_us,
            trace_events: None,
            peer_ring: a.peer_ring,
            pool: a.pool,
            log: false,
            seed: 0x5eed,
            fib: None,
            fib_mirror: None,
            bulk_expiry_ms: a.bulk_expiry_ms,
            bulk_nack_ms: a.bulk_nack_ms,
            bulk_retx_slots: a.bulk_retx_slots,
            bulk_retx_max: a.bulk_retx_max,
            bulk_reasm_slots: a.bulk_reasm_slots,
            bulk_reasm_bytes: a.bulk_reasm_bytes,
        }
    }
}

/// Why an adapter could not be built or run. `at` names the configuration entry
/// (`port[1]`, `extension[0]`) or, for adapters built in code, the port or extension.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    #[error(transparent)]
    Config(#[from] Box<crate::config::ConfigError>),
    #[error("buffer pool: {0}")]
    Pool(#[from] PoolError),
    #[error("{at}: {source}")]
    Port { at: String, source: Box<PortError> },
    #[error("{at}: reading {path}: {source}")]
    Read { at: String, path: String, source: std::io::Error },
    #[error("{at}: not a BPF object: {source}")]
    Object { at: String, source: Box<spine_obj::ObjError> },
    #[error("{at}: {source}")]
    Load { at: String, source: Box<LoadError> },
    #[error("{at}: {source}")]
    Runner { at: String, source: RunnerError },
    #[error("{at}: {reason}")]
    Wiring { at: String, reason: String },
    #[error("{at}: map '{map}': {source}")]
    Map { at: String, map: String, source: spine_maps::MapError },
    #[error("starting worker {worker}: {source}")]
    Thread { worker: usize, source: std::io::Error },
    #[error("worker {worker} panicked")]
    Panicked { worker: usize },
}

impl From<crate::config::ConfigError> for AdapterError {
    fn from(e: crate::config::ConfigError) -> Self {
        AdapterError::Config(Box::new(e))
    }
}

fn wiring_err(at: impl Into<String>, reason: impl Into<String>) -> AdapterError {
    AdapterError::Wiring { at: at.into(), reason: reason.into() }
}

/// Handle of a port or extension inside a builder.
pub type Id = usize;

struct PortEntry {
    name: String,
    device: Device,
    ifindex: u32,
    queue: u32,
    worker: Option<usize>,
    host_path: Option<Id>,
    ext: Option<Id>,
    /// For a TAP twin: the port it stands for.
    twin_of: Option<Id>,
}

/// An extension being built into an adapter, and the object that keeps its maps and
/// program arrays alive.
struct ExtEntry {
    name: String,
    ext: Arc<Extension>,
    object: LoadedObject,
}

/// Assembles an adapter piece by piece ([`Adapter::from_config`] uses it too).
pub struct AdapterBuilder {
    opts: AdapterOptions,
    pool: Arc<Pool>,
    cache: PoolCache,
    ports: Vec<PortEntry>,
    domains: Vec<Arc<Domain>>,
    exts: Vec<ExtEntry>,
}

impl std::fmt::Debug for AdapterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdapterBuilder").field("ports", &self.ports.len()).finish_non_exhaustive()
    }
}

/// First ifindex given to ports without an interface (mem, pcap, `Other`), far above
/// what interfaces get, so the two never collide.
pub const VIRTUAL_IFINDEX_BASE: u32 = 10_000;

impl AdapterBuilder {
    pub fn new(opts: AdapterOptions) -> Result<Self, AdapterError> {
        if opts.workers == 0 || opts.burst == 0 {
            return Err(wiring_err("adapter", "needs at least one worker and a burst of 1"));
        }
        let pool = Pool::new(opts.pool)?;
        let cache = pool.cache();
        Ok(AdapterBuilder {
            opts,
            pool,
            cache,
            ports: Vec::new(),
            domains: vec![Domain::default_domain()],
            exts: Vec::new(),
        })
    }

    /// The pool every port's buffers come from.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// A cache of the pool, for opening ports that need one (AF_XDP fills its ring).
    pub fn cache(&mut self) -> &mut PoolCache {
        &mut self.cache
    }

    /// Adds an opened port; `ifindex` is what extensions see and redirect to (for
    /// interfaces, the kernel's).
    pub fn add_port(
        &mut self,
        name: &str,
        device: Device,
        ifindex: Option<u32>,
    ) -> Result<Id, AdapterError> {
        if self.ports.iter().any(|p| p.name == name) {
            return Err(wiring_err(format!("port '{name}'"), "defined twice"));
        }
        let id = self.ports.len();
        let ifindex = match (&device, ifindex) {
            (_, Some(i)) => i,
            (Device::AfXdp(p), None) => p.ifindex(),
            (Device::AfPacket(p), None) => iface_index(spine_ports::Port::name(p))?,
            (Device::Tap(p), None) => iface_index(spine_ports::Port::name(p))?,
            _ => VIRTUAL_IFINDEX_BASE + id as u32,
        };
        if let Some(other) = self.ports.iter().find(|p| p.ifindex == ifindex) {
            return Err(wiring_err(
                format!("port '{name}'"),
                format!("ifindex {ifindex} is already port '{}'", other.name),
            ));
        }
        self.ports.push(PortEntry {
            name: name.to_string(),
            device,
            ifindex,
            queue: 0,
            worker: None,
            host_path: None,
            ext: None,
            twin_of: None,
        });
        Ok(id)
    }

    /// Opens a configured port (`at` is its configuration path, for errors).
    pub fn open_port(&mut self, cfg: &PortConfig, at: &str) -> Result<Id, AdapterError> {
        let id = self.ports.len() as u32;
        let owner = self.ports.iter().find_map(|p| match &p.device {
            Device::AfXdp(x) => Some(x),
            _ => None,
        });
        let dev = device::open(&cfg.name, &cfg.kind, id, &mut self.cache, owner)
            .map_err(|e| AdapterError::Port { at: at.to_string(), source: Box::new(e) })?;
        let id = self.add_port(&cfg.name, dev, cfg.ifindex).map_err(|e| match e {
            AdapterError::Wiring { reason, .. } => wiring_err(at, reason),
            e => e,
        })?;
        self.ports[id].queue = cfg.kind.queue();
        Ok(id)
    }

    pub fn port_id(&self, name: &str) -> Option<Id> {
        self.ports.iter().position(|p| p.name == name)
    }

    /// `host` receives `port`'s `XDP_PASS` packets; what `host` receives goes out on
    /// `port` (the host's transmissions reach the wire).
    pub fn set_host_path(&mut self, port: Id, host: Id) -> Result<(), AdapterError> {
        let at = format!("port '{}'", self.ports[port].name);
        let serves_another =
            self.ports.iter().enumerate().any(|(i, p)| i != port && p.host_path == Some(host));
        if port == host || serves_another {
            return Err(wiring_err(
                at,
                "host path is the port itself or already serves another port",
            ));
        }
        self.ports[port].host_path = Some(host);
        Ok(())
    }

    /// Makes TAP port `tap` the twin of `port` (an afpacket or afxdp port): the TAP
    /// takes the interface's MAC and MTU, comes up with `addresses`, and becomes the
    /// port's host path, so the kernel's stack answers ARP/ND, ICMP and the router's own
    /// addresses through it and what it sends leaves by the port. A mirrored FIB
    /// (`[fib] mirror = true`) then holds the routes and neighbours the kernel keeps on
    /// the twin as the port's.
    pub fn set_twin(
        &mut self,
        tap: Id,
        port: Id,
        addresses: &[(std::net::IpAddr, u8)],
    ) -> Result<(), AdapterError> {
        let at = format!("port '{}'", self.ports[tap].name);
        if !matches!(self.ports[port].device, Device::AfPacket(_) | Device::AfXdp(_)) {
            return Err(wiring_err(at, "a twin stands for an afpacket or afxdp port"));
        }
        if !matches!(self.ports[tap].device, Device::Tap(_)) {
            return Err(wiring_err(at, "only a tap port can be a twin"));
        }
        self.set_host_path(port, tap)?;
        let Device::Tap(t) = &self.ports[tap].device else { unreachable!("checked above") };
        let rtnl = |e: spine_rtnl::RtnlError| wiring_err(&at, e.to_string());
        let ifindex = self.ports[port].ifindex;
        let links = spine_rtnl::links().map_err(rtnl)?;
        let link = links.iter().find(|l| l.ifindex == ifindex).ok_or_else(|| {
            wiring_err(
                &at,
                format!("interface {ifindex} of port '{}' vanished", self.ports[port].name),
            )
        })?;
        let port_err = |e| AdapterError::Port { at: at.clone(), source: Box::new(e) };
        t.set_mac(link.mac).map_err(port_err)?;
        t.set_mtu(link.mtu).map_err(port_err)?;
        if addresses.iter().any(|(a, _)| a.is_ipv6()) {
            spine_rtnl::enable_ipv6(spine_ports::Port::name(t)).map_err(rtnl)?;
        }
        t.set_up(true).map_err(port_err)?;
        let tap_ifindex = self.ports[tap].ifindex;
        for &(ip, len) in addresses {
            spine_rtnl::add_address(tap_ifindex, ip, len).map_err(rtnl)?;
        }
        self.ports[tap].twin_of = Some(port);
        Ok(())
    }

    /// Pins `port`'s receive queue to `worker` (partition assignment).
    pub fn set_worker(&mut self, port: Id, worker: usize) -> Result<(), AdapterError> {
        if worker >= self.opts.workers {
            return Err(wiring_err(format!("port '{}'", self.ports[port].name), "no such worker"));
        }
        self.ports[port].worker = Some(worker);
        Ok(())
    }

    /// Creates a protection domain.
    pub fn add_domain(&mut self, spec: DomainSpec) -> Result<(), AdapterError> {
        if self.domains.iter().any(|d| d.name() == spec.name) {
            return Err(wiring_err(format!("domain '{}'", spec.name), "defined twice"));
        }
        self.domains.push(Domain::new(spec));
        Ok(())
    }

    /// Loads the program in `section` (or the first) of ELF `object` into `domain`.
    pub fn load_extension(
        &mut self,
        name: &str,
        object: &[u8],
        section: Option<&str>,
        domain: &str,
        at: &str,
    ) -> Result<Id, AdapterError> {
        let obj = spine_obj::parse(object)
            .map_err(|e| AdapterError::Object { at: at.to_string(), source: Box::new(e) })?;
        self.load_parsed(name, &obj, section, domain, at)
    }

    /// As [`load_extension`](Self::load_extension), from an already parsed object.
    pub fn load_parsed(
        &mut self,
        name: &str,
        obj: &spine_obj::Object,
        section: Option<&str>,
        domain: &str,
        at: &str,
    ) -> Result<Id, AdapterError> {
        if self.exts.iter().any(|e| e.name == name) {
            return Err(wiring_err(at, format!("extension '{name}' defined twice")));
        }
        let domain = self
            .domains
            .iter()
            .find(|d| d.name() == domain)
            .cloned()
            .ok_or_else(|| wiring_err(at, format!("no domain '{domain}'")))?;
        let opts = LoadOptions {
            ncpus: self.opts.workers,
            engine: self.opts.engine,
            domain,
            map_seed: self.opts.seed,
            ..LoadOptions::default()
        };
        let load = |e| AdapterError::Load { at: at.to_string(), source: Box::new(e) };
        let (loaded, ext) = load_selected(obj, section, &opts).map_err(load)?;
        self.exts.push(ExtEntry { name: name.to_string(), ext, object: loaded });
        Ok(self.exts.len() - 1)
    }

    pub fn extension(&self, id: Id) -> &Arc<Extension> {
        &self.exts[id].ext
    }

    /// Attaches extension `ext` to `port`'s receive hook. Its domain must allow the port.
    pub fn attach(&mut self, ext: Id, port: Id) -> Result<(), AdapterError> {
        let p = &self.ports[port];
        let e = &self.exts[ext];
        let at = format!("port '{}'", p.name);
        if p.ext.is_some() {
            return Err(wiring_err(at, "already has an extension attached"));
        }
        if !e.ext.domain().may_use_port(&p.name) {
            return Err(wiring_err(
                at,
                format!(
                    "domain '{}' of extension '{}' may not use this port",
                    e.ext.domain().name(),
                    e.name
                ),
            ));
        }
        self.ports[port].ext = Some(ext);
        Ok(())
    }

    /// Writes one entry of map `map` of extension `ext`, as `bpf_map_update_elem` from
    /// user space would (`value` is one value; per-CPU maps get it on every CPU).
    pub fn update_map(
        &mut self,
        ext: Id,
        map: &str,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), AdapterError> {
        let at = format!("extension '{}'", self.exts[ext].name);
        let m = self.exts[ext]
            .ext
            .map(map)
            .ok_or_else(|| wiring_err(&at, format!("no map '{map}'")))?;
        let value = m.user_value_for_all_cpus(value);
        m.update_user(key, &value, 0).map_err(|source| AdapterError::Map {
            at,
            map: map.to_string(),
            source,
        })
    }

    /// Wires the workers: each port gets its home worker, each worker a ring to every
    /// other, and a runner for every extension.
    pub fn build(self) -> Result<Adapter, AdapterError> {
        let AdapterBuilder { opts, pool, cache, ports, domains, exts } = self;
        // What each extension's count of holders falls back to once no program of it runs.
        let bases: Vec<usize> = exts.iter().map(|e| Arc::strong_count(&e.ext)).collect();
        drop(cache);
        let nw = opts.workers;
        let rss = opts.assign == Assign::Rss && nw > 1;
        let mut infos: Vec<PortInfo> = ports
            .iter()
            .enumerate()
            .map(|(i, p)| PortInfo {
                name: p.name.clone(),
                ifindex: p.ifindex,
                queue: p.queue,
                home: match opts.assign {
                    Assign::Rss => p.worker.unwrap_or(i % nw),
                    Assign::Partition => p.worker.unwrap_or(0),
                },
                uplink: p.host_path.map(|h| h as u16),
                tunnel: matches!(p.device, Device::Udp(_)),
                frags: p.device.takes_frags(),
            })
            .collect();
        for (i, p) in ports.iter().enumerate() {
            if let Some(h) = p.host_path {
                if infos[h].uplink.is_none() {
                    infos[h].uplink = Some(i as u16);
                }
            }
        }
        let mut by_ifindex: Vec<(u32, u16)> =
            infos.iter().enumerate().map(|(i, p)| (p.ifindex, i as u16)).collect();
        by_ifindex.sort_unstable();
        let port_names: Vec<String> = infos.iter().map(|p| p.name.clone()).collect();
        // Every worker can run every extension (checked for those not attached too, as
        // an extension attached later must be), and each attached one gets its program.
        let mut slots = Vec::with_capacity(ports.len());
        for p in &ports {
            let prog = match p.ext {
                Some(e) => Some(Arc::new(
                    Program::new(e as u16, &exts[e].ext, nw, &port_names).map_err(|source| {
                        AdapterError::Runner { at: format!("extension '{}'", exts[e].name), source }
                    })?,
                )),
                None => None,
            };
            slots.push(Slot::new(prog));
        }
        for e in exts
            .iter()
            .enumerate()
            .filter(|(i, _)| !ports.iter().any(|p| p.ext == Some(*i)))
            .map(|(_, e)| e)
        {
            Program::new(0, &e.ext, nw, &port_names).map_err(|source| AdapterError::Runner {
                at: format!("extension '{}'", e.name),
                source,
            })?;
        }
        let wiring =
            Arc::new(Wiring { ports: infos, by_ifindex, workers: nw, rss, burst: opts.burst });
        let epoch_ns = crate::sys::monotonic_ns();
        let log = Arc::new(crate::logbuf::LogBuf::new(epoch_ns));
        let domain_names = domains.iter().map(|d| d.name().to_string()).collect();
        let domain_ports = domains
            .iter()
            .map(|d| port_names.iter().map(|p| d.may_use_port(p)).collect())
            .collect();
        let shared = Arc::new(Shared {
            log: log.clone(),
            rings: crate::ringfollow::RingFollows::default(),
            ports: ports
                .iter()
                .zip(&slots)
                .map(|(p, s)| PortSlot {
                    name: p.name.clone(),
                    kind: p.device.kind(),
                    ifindex: p.ifindex,
                    slot: s.clone(),
                })
                .collect(),
            port_names,
            domains,
            state: Mutex::new(State {
                attached: ports.iter().map(|p| p.ext.map(|e| e as u16)).collect(),
                exts: Vec::new(),
                retired: Vec::new(),
            }),
            workers: nw,
            engine: opts.engine,
            seed: opts.seed,
            endpoints: crate::endpoints::Endpoints::new(ports.len()),
            handlers: crate::handlers::Handlers::new(nw, domain_names, domain_ports),
        });
        // Rings: out[i][j] from worker i to worker j.
        let mut outs: Vec<Vec<Option<crate::ring::Producer<Msg>>>> =
            (0..nw).map(|_| (0..nw).map(|_| None).collect()).collect();
        let mut inboxes: Vec<Vec<crate::ring::Consumer<Msg>>> =
            (0..nw).map(|_| Vec::new()).collect();
        let mut views = Vec::new();
        // Room for a burst from every port, twice over: receive waits for it.
        let ring_slots = opts.peer_ring.max(4 * opts.burst * wiring.ports.len().max(1));
        for (i, out) in outs.iter_mut().enumerate() {
            for (j, inbox) in inboxes.iter_mut().enumerate() {
                if i != j {
                    let (p, c, v) = ring(ring_slots);
                    out[j] = Some(p);
                    inbox.push(c);
                    views.push(v);
                }
            }
        }
        let mut devices: Vec<Vec<Option<Device>>> =
            (0..nw).map(|_| (0..ports.len()).map(|_| None).collect()).collect();
        for (i, p) in ports.into_iter().enumerate() {
            devices[wiring.ports[i].home][i] = Some(p.device);
        }
        let geometry = Geometry::pool(pool.buf_size() as usize, pool.headroom() as usize);
        let mut workers = Vec::with_capacity(nw);
        for (index, ((devs, out), inbox)) in devices.into_iter().zip(outs).zip(inboxes).enumerate()
        {
            let progs = slots.iter().map(|s| PortProg::new(s.reader(), index)).collect();
            let nports = devs.len();
            let eps = crate::endpoints::WorkerEps::new(shared.endpoints.slot.reader(), nports);
            let handlers = shared.handlers.worker(index);
            let (table, domains) = handlers.table();
            let rx_ports = (0..nports as u16).filter(|&p| devs[p as usize].is_some()).collect();
            // Reassembly room for bulk messages on each tunnel port this worker owns.
            let expiry_ns = opts.bulk_expiry_ms.saturating_mul(1_000_000);
            let nack_ns = opts.bulk_nack_ms.saturating_mul(1_000_000);
            let reasm = (0..nports)
                .map(|p| {
                    (devs[p].is_some() && wiring.ports[p].tunnel).then(|| {
                        let (n, bytes) = (opts.bulk_reasm_slots, opts.bulk_reasm_bytes);
                        crate::reasm::Reassembly::new(n, bytes, expiry_ns, nack_ns)
                    })
                })
                .collect();
            // Room for retransmission only where there is a tunnel to send over.
            let tunnels = wiring.ports.iter().any(|p| p.tunnel);
            let retx_slots = if tunnels { opts.bulk_retx_slots } else { 0 };
            let retx = crate::retx::RetxStore::new(retx_slots, expiry_ns, opts.bulk_retx_max);
            workers.push(Worker {
                index,
                pool: pool.clone(),
                cache: pool.cache(),
                geometry,
                wiring: wiring.clone(),
                devices: devs,
                pending: (0..nports).map(|_| Burst::with_capacity(4 * opts.burst)).collect(),
                rx_ports,
                rx_failed: vec![false; nports],
                tx_failed: vec![false; nports],
                progs,
                out,
                inbox,
                rx: Burst::with_capacity(opts.burst),
                counters: Counters::new(nports, exts.len()),
                host: {
                    let mut host = WorkerHost::new(index, opts.seed, opts.log)
                        .with_fib(opts.fib.clone())
                        .with_log(log.clone());
                    host.set_targets(table, domains);
                    host
                },
                trace: opts.trace_events.map(TraceRing::new),
                packet_seq: 0,
                scratch: BurstScratch::new(opts.burst, pool.buf_size() as usize),
                eps,
                handlers,
                reasm,
                retx,
                bulk_seq: 0,
            });
        }
        {
            let mut st = shared.lock();
            st.exts = exts
                .into_iter()
                .zip(bases)
                .map(|(e, base_refs)| {
                    let domain = e.ext.domain().name().to_string();
                    let loaded = Loaded { ext: e.ext, object: e.object, base_refs };
                    ExtSlot { name: e.name, domain, loaded: Some(loaded) }
                })
                .collect();
            // The workers pick the handlers up at their first round.
            shared.publish_handlers(&st);
        }
        Ok(Adapter { workers, views, shared, opts, pool, epoch_ns, started: Instant::now() })
    }
}

/// The ring-buffer map `map` of the extension called `ext`, checked to be one.
fn find_ring(
    found: Option<Arc<Extension>>,
    ext: &str,
    map: &str,
) -> Result<Arc<Map>, AdapterError> {
    let at = format!("extension '{ext}'");
    let e = found.ok_or_else(|| wiring_err("ring buffer", format!("no extension '{ext}'")))?;
    let m = e.map(map).ok_or_else(|| wiring_err(&at, format!("no map '{map}'")))?;
    if m.ringbuf().is_none() {
        let kind = spine_abi::map_type::name(m.def().map_type);
        return Err(wiring_err(at, format!("map '{map}' is not a ring buffer (type {kind})")));
    }
    Ok(m.clone())
}

fn iface_index(name: &str) -> Result<u32, AdapterError> {
    crate::sys::ifindex(name)
        .ok_or_else(|| wiring_err(format!("port '{name}'"), "interface vanished after opening"))
}

/// A built adapter, not yet running on threads.
pub struct Adapter {
    workers: Vec<Worker>,
    views: Vec<RingView<Msg>>,
    shared: Arc<Shared>,
    opts: AdapterOptions,
    pool: Arc<Pool>,
    epoch_ns: u64,
    started: Instant,
}

impl std::fmt::Debug for Adapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter").field("workers", &self.workers.len()).finish_non_exhaustive()
    }
}

/// What an adapter counted and traced, once stopped.
#[derive(Debug)]
pub struct Report {
    pub totals: Totals,
    /// The Chrome/Perfetto trace, when tracing was on.
    pub trace: Option<serde_json::Value>,
    /// Ports that failed to close cleanly (a pcap file that could not be flushed).
    pub close_errors: Vec<PortError>,
}

impl Adapter {
    /// Opens every port, loads every extension, fills the maps and wires the workers.
    pub fn from_config(cfg: &Config, opts: AdapterOptions) -> Result<Adapter, AdapterError> {
        let mut b = AdapterBuilder::new(opts)?;
        for (i, p) in cfg.ports.iter().enumerate() {
            b.open_port(p, &format!("port[{i}]"))?;
        }
        for (i, p) in cfg.ports.iter().enumerate() {
            if let PortKind::Tap { twin: Some(t), .. } = &p.kind {
                let (tap, port) = (b.port_id(&p.name), b.port_id(&t.port));
                if let (Some(tap), Some(port)) = (tap, port) {
                    b.set_twin(tap, port, &t.addresses)
                        .map_err(|e| reword(e, &format!("port[{i}].twin")))?;
                }
            }
        }
        if let (Some(f), None) = (&cfg.fib, &b.opts.fib) {
            let ifindex = |name: &str| b.ports.iter().find(|p| p.name == name).map(|p| p.ifindex);
            if f.mirror {
                let twin_of = |i: Id| b.ports.iter().find(|t| t.twin_of == Some(i));
                let kernel: Vec<u32> = b
                    .ports
                    .iter()
                    .filter(|p| matches!(p.device.kind(), "afxdp" | "afpacket" | "tap"))
                    .filter(|p| p.twin_of.is_none())
                    .map(|p| p.ifindex)
                    .collect();
                let twins: Vec<(u32, u32)> = (0..b.ports.len())
                    .filter_map(|i| twin_of(i).map(|t| (t.ifindex, b.ports[i].ifindex)))
                    .collect();
                let (mirror, env) = crate::fib::mirrored(f, ifindex, &kernel, &twins)?;
                b.opts.fib = Some(env);
                b.opts.fib_mirror = Some(Arc::new(mirror));
            } else {
                // The writer may go: readers keep the published state.
                let (_writer, env) = crate::fib::env(f, ifindex)?;
                b.opts.fib = Some(env);
            }
        }
        for (i, p) in cfg.ports.iter().enumerate() {
            if let Some(h) = &p.host_path {
                let (port, host) = (b.port_id(&p.name), b.port_id(h));
                if let (Some(port), Some(host)) = (port, host) {
                    b.set_host_path(port, host)
                        .map_err(|e| reword(e, &format!("port[{i}].host_path")))?;
                }
            }
        }
        for (i, p) in cfg.partition.iter().enumerate() {
            if let Some(port) = b.port_id(&p.port) {
                b.set_worker(port, p.worker).map_err(|e| reword(e, &format!("partition[{i}]")))?;
            }
        }
        for d in &cfg.domains {
            b.add_domain(d.clone())?;
        }
        for (i, e) in cfg.extensions.iter().enumerate() {
            let at = format!("extension[{i}]");
            let bytes = match &e.object {
                ObjectSource::Bundled(name) => {
                    spine_progs::get(name).map(|p| p.object.to_vec()).ok_or_else(|| {
                        wiring_err(format!("{at}.bundled"), format!("no bundled program '{name}'"))
                    })?
                }
                ObjectSource::File(path) => {
                    std::fs::read(path).map_err(|source| AdapterError::Read {
                        at: format!("{at}.file"),
                        path: path.display().to_string(),
                        source,
                    })?
                }
            };
            let domain = e.domain.as_deref().unwrap_or("default");
            let section_types = match (&e.section, e.prog_type) {
                (Some(s), Some(t)) => vec![(s.clone(), t)],
                _ => Vec::new(),
            };
            // CO-RE relocations resolve against the running kernel's BTF, as libbpf's do.
            let target_btf = spine_sys::kernel_btf();
            let max_entries = e.max_entries.clone();
            let obj = spine_obj::parse_with(
                &bytes,
                &spine_obj::ParseOptions { section_types, target_btf, max_entries },
            )
            .map_err(|e| AdapterError::Object { at: at.clone(), source: Box::new(e) })?;
            b.load_parsed(&e.name, &obj, e.section.as_deref(), domain, &at)?;
        }
        let ext_id = |name: &str| cfg.extensions.iter().position(|e| e.name == name);
        for a in &cfg.attachments {
            let (Some(e), Some(p)) = (ext_id(&a.extension), b.port_id(&a.port)) else { continue };
            b.attach(e, p).map_err(|e| reword(e, &format!("{}.port", a.path)))?;
        }
        for m in &cfg.maps {
            let Some(e) = ext_id(&m.extension) else { continue };
            let map = b.extension(e).map(&m.map).cloned().ok_or_else(|| {
                wiring_err(
                    format!("{}.name", m.path),
                    format!("extension '{}' has no map '{}'", m.extension, m.map),
                )
            })?;
            let (ks, vs) = (map.def().key_size as usize, map.def().value_size as usize);
            for entry in &m.entries {
                let key = entry.key.to_size(ks).ok_or_else(|| {
                    wiring_err(
                        format!("{}.key", entry.path),
                        format!("does not fit the map's {ks}-byte key"),
                    )
                })?;
                let value = entry.value.to_size(vs).ok_or_else(|| {
                    wiring_err(
                        format!("{}.value", entry.path),
                        format!("does not fit the map's {vs}-byte value"),
                    )
                })?;
                let value = map.user_value_for_all_cpus(&value);
                map.update_user(&key, &value, 0).map_err(|source| AdapterError::Map {
                    at: entry.path.clone(),
                    map: m.map.clone(),
                    source,
                })?;
            }
        }
        for r in &cfg.ringbufs {
            let found = b.exts.iter().find(|e| e.name == r.extension).map(|e| e.ext.clone());
            find_ring(found, &r.extension, &r.map).map_err(|e| match e {
                AdapterError::Wiring { reason, .. } => {
                    wiring_err(format!("{}.name", r.path), reason)
                }
                e => e,
            })?;
        }
        b.build()
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Names of the ports and of every extension id (counters are indexed by them).
    pub fn labels(&self) -> Labels {
        self.shared.labels()
    }

    /// The loaded extension called `name`.
    pub fn extension(&self, name: &str) -> Option<Arc<Extension>> {
        self.shared.extension(name)
    }

    /// The ring buffer `map` of extension `ext`, for the control side to read: its
    /// [`RingBuf::consume`](spine_maps::RingBuf::consume) takes the records workers
    /// committed, in order, while they go on producing (one consumer at a time). The
    /// `Arc` keeps the ring readable after the adapter has stopped. The ring is then the
    /// caller's: the control API refuses to follow it.
    pub fn ring_buffer(&self, ext: &str, map: &str) -> Result<Arc<Map>, AdapterError> {
        let ring = find_ring(self.shared.extension(ext), ext, map)?;
        self.shared.rings.own(ext, map);
        Ok(ring)
    }

    /// One round of every worker, in order, in the calling thread; returns the packets
    /// handled. Deterministic: what tests of dispatching use.
    pub fn step(&mut self) -> usize {
        self.workers.iter_mut().map(|w| w.round(true)).sum()
    }

    /// Steps until every port has nothing left to receive and no packet is in flight
    /// (or `max_rounds` passed); returns the rounds run.
    pub fn run_to_completion(&mut self, max_rounds: u64) -> u64 {
        for r in 0..max_rounds {
            let work = self.step();
            if work == 0 && self.workers.iter().all(Worker::rx_exhausted) {
                return r + 1;
            }
        }
        max_rounds
    }

    /// The counters so far (stepped mode).
    pub fn totals(&mut self) -> Totals {
        for w in &mut self.workers {
            w.refresh_device_stats();
        }
        let counters: Vec<Counters> = self.workers.iter().map(|w| w.counters.clone()).collect();
        self.sum(&counters)
    }

    fn sum(&self, counters: &[Counters]) -> Totals {
        self.shared.totals(counters, self.started.elapsed().as_secs_f64())
    }

    /// Stops a stepped adapter: delivers what is in flight, transmits what is queued,
    /// closes every port and returns the totals.
    pub fn finish(mut self) -> Result<Report, AdapterError> {
        for _ in 0..10_000 {
            if self.workers.iter_mut().map(|w| w.round(false)).sum::<usize>() == 0 {
                break;
            }
        }
        for w in &mut self.workers {
            w.finish(50);
        }
        let workers = std::mem::take(&mut self.workers);
        Ok(self.close(workers))
    }

    fn close(self, workers: Vec<Worker>) -> Report {
        let counters: Vec<Counters> = workers.iter().map(|w| w.counters.clone()).collect();
        let totals = self.sum(&counters);
        let trace = self.opts.trace_events.map(|_| {
            let rings: Vec<(usize, &TraceRing)> =
                workers.iter().filter_map(|w| w.trace.as_ref().map(|t| (w.index, t))).collect();
            chrome_trace(&rings, &self.shared.labels(), self.epoch_ns)
        });
        let mut close_errors = Vec::new();
        for w in workers {
            for d in w.devices.into_iter().flatten() {
                if let Err(e) = d.close() {
                    close_errors.push(e);
                }
            }
        }
        Report { totals, trace, close_errors }
    }

    /// Starts one thread per worker, pinned to its CPU when the options say so.
    pub fn start(mut self) -> Result<Running, AdapterError> {
        let nw = self.workers.len();
        let ctl = Arc::new(Control {
            stop_rx: AtomicBool::new(false),
            exit: AtomicBool::new(false),
            trace_events: AtomicUsize::new(self.opts.trace_events.unwrap_or(0)),
            epoch_ns: self.epoch_ns,
            workers: (0..nw)
                .map(|i| WorkerControl {
                    rx_stopped: AtomicBool::new(false),
                    exhausted: AtomicBool::new(false),
                    snapshot: Mutex::new(self.workers[i].counters.clone()),
                    tracing: AtomicBool::new(self.workers[i].trace.is_some()),
                    trace_out: Mutex::new(None),
                })
                .collect(),
        });
        let mut handles = Vec::with_capacity(nw);
        for w in std::mem::take(&mut self.workers) {
            let index = w.index;
            let cpu = self.opts.cpus.as_ref().and_then(|c| c.get(index).copied());
            let wctl = ctl.clone();
            let idle_us = self.opts.idle_sleep_us;
            let log = self.opts.log;
            let h = std::thread::Builder::new()
                .name(format!("spine-w{index}"))
                .spawn(move || worker_main(w, &wctl, cpu, idle_us, log))
                .map_err(|source| AdapterError::Thread { worker: index, source });
            match h {
                Ok(h) => handles.push(h),
                Err(e) => {
                    let running = Running { adapter: self, handles, ctl };
                    let _ = running.stop();
                    return Err(e);
                }
            }
        }
        Ok(Running { adapter: self, handles, ctl })
    }
}

fn reword(e: AdapterError, at: &str) -> AdapterError {
    match e {
        AdapterError::Wiring { reason, .. } => wiring_err(at, reason),
        e => e,
    }
}

/// Flags between the controlling thread and the workers (read once per round).
pub(crate) struct Control {
    /// Stop receiving; keep delivering what is in flight.
    stop_rx: AtomicBool,
    /// Nothing is in flight: finish and return.
    exit: AtomicBool,
    /// Events per worker's trace ring while tracing; 0: not tracing. Workers start a
    /// ring or hand theirs over (`trace_out`) at the top of a round when it changes.
    pub trace_events: AtomicUsize,
    /// The trace's time origin.
    pub epoch_ns: u64,
    pub workers: Vec<WorkerControl>,
}

pub(crate) struct WorkerControl {
    rx_stopped: AtomicBool,
    exhausted: AtomicBool,
    /// The worker's counters as last published (about every 100 ms).
    snapshot: Mutex<Counters>,
    /// The worker is recording a trace.
    pub tracing: AtomicBool,
    /// The ring of the last trace the worker stopped.
    pub trace_out: Mutex<Option<TraceRing>>,
}

impl Control {
    pub(crate) fn snapshots(&self) -> Vec<Counters> {
        self.workers
            .iter()
            .map(|w| w.snapshot.lock().unwrap_or_else(PoisonError::into_inner).clone())
            .collect()
    }
}

const PUBLISH_NS: u64 = 100_000_000;

/// Starts a trace ring of `events` (0: stops the trace and hands the ring over).
#[cold]
fn trace_switch(w: &mut Worker, me: &WorkerControl, events: usize) {
    if events == 0 {
        let ring = w.trace.take();
        *me.trace_out.lock().unwrap_or_else(PoisonError::into_inner) = ring;
        me.tracing.store(false, Ordering::Release);
    } else {
        w.trace = Some(TraceRing::new(events));
        me.tracing.store(true, Ordering::Release);
    }
}

fn worker_main(
    mut w: Worker,
    ctl: &Control,
    cpu: Option<usize>,
    idle_us: u64,
    log: bool,
) -> Worker {
    if let Some(c) = cpu {
        if let Err(e) = spine_sys::pin_current_thread(c) {
            if log {
                eprintln!("spine: worker {} not pinned to CPU {c}: {e}", w.index);
            }
        }
    }
    let me = &ctl.workers[w.index];
    let mut rx_stopped = false;
    let mut idle = 0u32;
    let mut last_publish = crate::sys::monotonic_ns();
    let publish = |w: &mut Worker| {
        w.refresh_device_stats();
        if let Ok(mut s) = me.snapshot.try_lock() {
            s.clone_from(&w.counters);
        }
    };
    loop {
        let want = ctl.trace_events.load(Ordering::Relaxed);
        if (want != 0) != w.trace.is_some() {
            trace_switch(&mut w, me, want);
        }
        if !rx_stopped && ctl.stop_rx.load(Ordering::Acquire) {
            rx_stopped = true;
            me.rx_stopped.store(true, Ordering::Release);
        }
        let work = w.round(!rx_stopped);
        if !rx_stopped && !me.exhausted.load(Ordering::Relaxed) && w.rx_exhausted() {
            me.exhausted.store(true, Ordering::Release);
        }
        if work == 0 {
            idle = idle.saturating_add(1);
            if idle.is_multiple_of(16) {
                w.flush_devices();
            }
            if idle > 32 && idle_us > 0 {
                std::thread::sleep(Duration::from_micros(idle_us));
            }
        } else {
            idle = 0;
        }
        if work == 0 || w.counters.worker.rounds.is_multiple_of(64) {
            let now = crate::sys::monotonic_ns();
            if now.saturating_sub(last_publish) >= PUBLISH_NS {
                last_publish = now;
                publish(&mut w);
            }
        }
        if rx_stopped && ctl.exit.load(Ordering::Acquire) {
            break;
        }
    }
    w.finish(500);
    let me = &ctl.workers[w.index];
    *me.snapshot.lock().unwrap_or_else(PoisonError::into_inner) = w.counters.clone();
    w
}

/// An adapter running on its worker threads.
pub struct Running {
    adapter: Adapter,
    handles: Vec<JoinHandle<Worker>>,
    ctl: Arc<Control>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("workers", &self.handles.len()).finish_non_exhaustive()
    }
}

impl Running {
    /// The counters as the workers last published them (at most ~100 ms old).
    pub fn totals(&self) -> Totals {
        self.adapter.sum(&self.ctl.snapshots())
    }

    /// True once no port of any worker will receive again (mem ports past their limit,
    /// pcap inputs at their end).
    pub fn exhausted(&self) -> bool {
        self.ctl.workers.iter().all(|w| w.exhausted.load(Ordering::Acquire))
    }

    pub fn extension(&self, name: &str) -> Option<Arc<Extension>> {
        self.adapter.extension(name)
    }

    /// A control handle: list, load, attach, replace, detach, unload, maps and
    /// counters while the workers run. It outlives nothing: once the adapter is
    /// stopped its operations still answer, but no worker runs what they change.
    pub fn live(&self) -> Live {
        Live {
            shared: self.adapter.shared.clone(),
            ctl: self.ctl.clone(),
            started: self.adapter.started,
        }
    }

    /// As [`Adapter::ring_buffer`]: a ring the workers fill, to drain while they run.
    pub fn ring_buffer(&self, ext: &str, map: &str) -> Result<Arc<Map>, AdapterError> {
        self.adapter.ring_buffer(ext, map)
    }

    pub fn labels(&self) -> Labels {
        self.adapter.labels()
    }

    /// Stops cleanly: workers stop receiving and finish their batch, packets in flight
    /// between workers are delivered, queued transmissions go out, ports close, and the
    /// final totals come back.
    pub fn stop(self) -> Result<Report, AdapterError> {
        let Running { adapter, handles, ctl } = self;
        ctl.stop_rx.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(5);
        let alive = |handles: &[JoinHandle<Worker>]| handles.iter().all(|h| !h.is_finished());
        while !ctl.workers.iter().all(|w| w.rx_stopped.load(Ordering::Acquire))
            && Instant::now() < deadline
            && alive(&handles)
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        // Quiet twice in a row, a little apart: nothing is moving between workers.
        let mut quiet = 0;
        while quiet < 2 && Instant::now() < deadline && alive(&handles) {
            if RingView::quiet(&adapter.views) {
                quiet += 1;
            } else {
                quiet = 0;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        ctl.exit.store(true, Ordering::Release);
        let mut workers = Vec::new();
        let mut panicked = None;
        for (i, h) in handles.into_iter().enumerate() {
            match h.join() {
                Ok(w) => workers.push(w),
                Err(_) => panicked = Some(i),
            }
        }
        if let Some(worker) = panicked {
            return Err(AdapterError::Panicked { worker });
        }
        Ok(adapter.close(workers))
    }
}
