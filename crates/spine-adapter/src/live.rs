//! Managing a running adapter: the extension table, shared by the adapter and its
//! [`Live`] handles, and the operations a control plane performs while traffic flows
//! (load, attach, detach, replace, unload, maps, counters).
//!
//! Nothing here runs on a worker. Attaching or replacing builds the new `Program`
//! (one runner per worker) here and publishes it to the port's slot; each worker picks
//! it up at the top of its next round, so every packet runs under exactly one program,
//! the old or the new, and none is dropped for the change. Operations are serialised by
//! one lock that no worker ever takes.
//!
//! **Counters across a replace.** Per-extension counters belong to the extension, not
//! to the attachment: an extension detached and attached again, or replaced and put
//! back, carries on counting from where it was. A port's counters carry on across any
//! change of program. Unloading an extension removes it and its counters from every
//! listing; loading an object again (even under the same name) gives a new extension,
//! with a new id, counting from zero.
//!
//! **Reclaiming.** A replaced or detached program is dropped by the last worker to let
//! go of it (its runners' memory; never a syscall, as the extension itself is still held
//! here). An unloaded extension is kept here until no worker holds a runner of it, and
//! freed by the control side ([`Live::reap`], called by every operation).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use spine_maps::Map;
use spine_runtime::{
    load_selected, Domain, EngineKind, Extension, LoadError, LoadOptions, LoadedObject, RunnerError,
};

use crate::counters::{Counters, Labels, Totals};
use crate::program::Program;
use crate::slot::Slot;

/// An extension and the object that keeps its maps, program arrays and active-message
/// handlers alive.
pub(crate) struct Loaded {
    pub ext: Arc<Extension>,
    pub object: LoadedObject,
    /// `Arc::strong_count(&ext)` with no program of it published: what the count falls
    /// back to once every worker has let go of it.
    pub base_refs: usize,
}

/// One entry of the extension table, by id (ids are never reused).
pub(crate) struct ExtSlot {
    pub name: String,
    pub domain: String,
    /// `None` once unloaded.
    pub loaded: Option<Loaded>,
}

/// What the control side changes, under one lock.
pub(crate) struct State {
    pub exts: Vec<ExtSlot>,
    /// The extension attached to each port.
    pub attached: Vec<Option<u16>>,
    /// Unloaded extensions that a worker may still run until its next round.
    pub retired: Vec<Loaded>,
}

/// A port as the control side sees it.
pub(crate) struct PortSlot {
    pub name: String,
    pub kind: &'static str,
    pub ifindex: u32,
    pub slot: Arc<Slot<Program>>,
}

/// What the adapter and every [`Live`] handle share.
pub(crate) struct Shared {
    pub ports: Vec<PortSlot>,
    pub port_names: Vec<String>,
    pub domains: Vec<Arc<Domain>>,
    pub state: Mutex<State>,
    pub workers: usize,
    /// `bpf_trace_printk` lines and watchdog events, for followers.
    pub log: Arc<crate::logbuf::LogBuf>,
    /// Ring buffers followed through the control API, and those configured outputs read.
    pub rings: crate::ringfollow::RingFollows,
    pub engine: EngineKind,
    pub seed: u64,
    /// The endpoints handed out, and their table as the workers see it.
    pub endpoints: crate::endpoints::Endpoints,
    /// Every loaded extension's active-message handlers, as the workers see them.
    pub handlers: crate::handlers::Handlers,
}

impl Shared {
    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Names of the ports and of every extension id, for summing counters.
    pub fn labels(&self) -> Labels {
        let st = self.lock();
        Labels {
            ports: self.ports.iter().map(|p| (p.name.clone(), p.kind, p.ifindex)).collect(),
            exts: st.exts.iter().map(|e| (e.name.clone(), e.domain.clone())).collect(),
        }
    }

    /// Sums per-worker counters, listing the loaded extensions only.
    pub fn totals(&self, counters: &[Counters], elapsed_s: f64) -> Totals {
        let labels = self.labels();
        let (detached, loaded): (Vec<bool>, Vec<bool>) = {
            let st = self.lock();
            st.exts
                .iter()
                .map(|e| {
                    let d = e.loaded.as_ref().is_some_and(|l| l.ext.health().is_detached());
                    (d, e.loaded.is_some())
                })
                .unzip()
        };
        let mut t = Totals::sum(&labels, counters, &detached, elapsed_s);
        let mut keep = loaded.into_iter();
        t.extensions.retain(|_| keep.next().unwrap_or(false));
        t
    }

    /// The index of domain `name` among the adapter's domains.
    pub fn domain_index(&self, name: &str) -> Option<u16> {
        self.domains.iter().position(|d| d.name() == name).map(|i| i as u16)
    }

    /// Publishes the handlers of the loaded extensions of `st` (call under the state
    /// lock, after every load and unload, so that publishes follow the table's order).
    pub fn publish_handlers(&self, st: &State) {
        let exts = st.exts.iter().enumerate().filter_map(|(id, e)| {
            let l = e.loaded.as_ref()?;
            let domain = self.domain_index(&e.domain)?;
            Some((id as u16, domain, &l.object.handlers[..]))
        });
        crate::handlers::publish(&self.handlers.slot, exts);
    }

    /// The loaded extension called `name`.
    pub fn extension(&self, name: &str) -> Option<Arc<Extension>> {
        let st = self.lock();
        find_ext(&st, name).ok().and_then(|i| st.exts[i].loaded.as_ref().map(|l| l.ext.clone()))
    }
}

fn find_ext(st: &State, name: &str) -> Result<usize, LiveError> {
    st.exts
        .iter()
        .position(|e| e.name == name && e.loaded.is_some())
        .ok_or_else(|| LiveError::NoExtension { name: name.to_string() })
}

/// Why a control operation failed. Each names the extension, port, domain, map or key.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("no extension '{name}'")]
    NoExtension { name: String },
    #[error("no port '{name}'")]
    NoPort { name: String },
    #[error("no domain '{name}'")]
    NoDomain { name: String },
    #[error("extension '{ext}' has no map '{map}'")]
    NoMap { ext: String, map: String },
    #[error("an extension '{name}' is already loaded")]
    Exists { name: String },
    #[error("extension '{name}': not a BPF object: {source}")]
    Object { name: String, source: Box<spine_obj::ObjError> },
    /// `log` is the verifier's log when the verifier refused the program.
    #[error("extension '{name}': {source}")]
    Load { name: String, source: Box<LoadError>, log: String },
    #[error("extension '{name}': {source}")]
    Runner { name: String, source: RunnerError },
    #[error("extension '{name}' is attached to {}; detach it first or unload with force", ports.join(", "))]
    Attached { name: String, ports: Vec<String> },
    #[error("extension '{old}' is of domain '{old_domain}', not '{domain}': a replacement takes its domain's messages")]
    ReplaceDomain { old: String, old_domain: String, domain: String },
    #[error("port '{port}' already runs extension '{ext}'; replace it instead")]
    PortBusy { port: String, ext: String },
    #[error("port '{port}' has no extension attached")]
    NotAttached { port: String },
    #[error("domain '{domain}' of extension '{ext}' may not use port '{port}'")]
    Refused { ext: String, domain: String, port: String },
    #[error("extension '{ext}', map '{map}': {op} of key {key}: {source}")]
    Map {
        ext: String,
        map: String,
        op: &'static str,
        key: String,
        source: Box<spine_maps::MapError>,
    },
    #[error("extension '{ext}', map '{map}': the {what} is {got} bytes, the map's is {want}")]
    Size { ext: String, map: String, what: &'static str, got: usize, want: usize },
    #[error("extension '{name}': every extension id is used")]
    TooMany { name: String },
    #[error("trace: {why}")]
    NoTrace { why: &'static str },
    #[error("extension '{ext}', map '{map}': not a shared segment (an array with BPF_F_MMAPABLE)")]
    NotSegment { ext: String, map: String },
    #[error("extension '{ext}', map '{map}': duplicating the segment's descriptor: {source}")]
    SegmentFd { ext: String, map: String, source: std::io::Error },
    #[error("trace: {events} events per worker is outside 16..=16777216")]
    TraceSize { events: usize },
    #[error("endpoint tag on port '{port}': {why}")]
    BadTag { port: String, why: String },
    #[error("endpoint {what} {got} is over the adapter's limit of {max}")]
    EndpointSize { what: &'static str, got: u32, max: u32 },
    #[error("endpoint: {why}")]
    EndpointSetup { why: String },
    #[error("endpoint layout: {why}")]
    BadLayout { why: String },
    #[error("too many {what}: the limit is {max}")]
    EndpointLimit { what: &'static str, max: usize },
    #[error("port '{port}': endpoint {id} already has this tag")]
    TagTaken { port: String, id: u64 },
    #[error("no endpoint {id}")]
    NoEndpoint { id: u64 },
    #[error("extension '{ext}', map '{map}': not a ring buffer or a perf event array")]
    NotRing { ext: String, map: String },
    #[error("extension '{ext}', map '{map}': the ring is read by a [[ringbuf]] output of the configuration")]
    RingOwned { ext: String, map: String },
    #[error(
        "extension '{ext}', map '{map}': not an endpoint map (SPINE_MAP_TYPE_ENDPOINT or XSKMAP)"
    )]
    NotEndpointMap { ext: String, map: String },
    #[error("endpoint map '{map}': {why}")]
    NoEndpointMap { map: String, why: &'static str },
    #[error("extension '{ext}' is of domain '{ext_domain}', the endpoint's is '{domain}': applets run in the endpoint's domain")]
    AppletDomain { ext: String, ext_domain: String, domain: String },
    #[error(
        "extension '{ext}' has no applets (SEC(\"spine/applet/tx\"), SEC(\"spine/applet/rx\") or SEC(\"spine/applet/tick\"))"
    )]
    NoApplets { ext: String },
    #[error("extension '{ext}', endpoint map '{map}': slot {index}: {source}")]
    Slot { ext: String, map: String, index: u32, source: Box<spine_maps::MapError> },
}

impl LiveError {
    /// The errno (positive) the kernel's bpf(2) returns for the same condition, for
    /// map errors.
    pub fn errno(&self) -> Option<i64> {
        match self {
            // spine_maps gives it as helpers return it, negated.
            LiveError::Map { source, .. } => Some(source.errno().abs()),
            LiveError::Size { .. } => Some(i64::from(libc::EINVAL)),
            _ => None,
        }
    }

    /// A short stable name of the error's kind, for APIs.
    pub fn kind(&self) -> &'static str {
        match self {
            LiveError::NoExtension { .. } => "no_extension",
            LiveError::NoPort { .. } => "no_port",
            LiveError::NoDomain { .. } => "no_domain",
            LiveError::NoMap { .. } => "no_map",
            LiveError::Exists { .. } => "exists",
            LiveError::Object { .. } => "bad_object",
            LiveError::Load { .. } => "load_failed",
            LiveError::Runner { .. } => "load_failed",
            LiveError::Attached { .. } => "attached",
            LiveError::PortBusy { .. } => "port_busy",
            LiveError::NotAttached { .. } => "not_attached",
            LiveError::Refused { .. } => "refused",
            LiveError::ReplaceDomain { .. } => "refused",
            LiveError::Map { .. } => "map",
            LiveError::Size { .. } => "bad_size",
            LiveError::TooMany { .. } => "too_many",
            LiveError::NoTrace { .. } => "no_trace",
            LiveError::TraceSize { .. } => "bad_request",
            LiveError::BadTag { .. } => "bad_tag",
            LiveError::EndpointSize { .. } => "bad_size",
            LiveError::EndpointSetup { .. } => "endpoint_setup",
            LiveError::BadLayout { .. } => "bad_size",
            LiveError::EndpointLimit { .. } => "too_many",
            LiveError::TagTaken { .. } => "tag_taken",
            LiveError::NoEndpoint { .. } => "no_endpoint",
            LiveError::NotEndpointMap { .. } => "not_endpoint_map",
            LiveError::NoEndpointMap { .. } => "no_map",
            LiveError::Slot { source, .. } => match **source {
                spine_maps::MapError::Exists { .. } => "slot_taken",
                _ => "bad_slot",
            },
            LiveError::AppletDomain { .. } => "refused",
            LiveError::NoApplets { .. } => "no_applets",
            LiveError::NotSegment { .. } => "not_segment",
            LiveError::SegmentFd { .. } => "io",
            LiveError::NotRing { .. } => "not_ring",
            LiveError::RingOwned { .. } => "ring_owned",
        }
    }

    /// The verifier's log, when the verifier refused the program.
    pub fn verifier_log(&self) -> Option<&str> {
        match self {
            LiveError::Load { log, .. } if !log.is_empty() => Some(log),
            _ => None,
        }
    }
}

/// A map entry: key and value bytes.
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// A port of the running adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortView {
    pub name: String,
    pub kind: String,
    pub ifindex: u32,
    /// The extension attached to its receive hook.
    pub extension: Option<String>,
    /// How many times its program was changed (attach, detach, replace).
    pub generation: u64,
}

/// A protection domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainView {
    pub name: String,
    /// Ports its extensions may redirect to; `None`: every port.
    pub ports: Option<Vec<String>>,
    pub shared_maps: Vec<String>,
    pub max_insns: u64,
    pub map_bytes_left: u64,
}

/// A loaded extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtView {
    pub id: u16,
    pub name: String,
    pub domain: String,
    pub program: String,
    pub section: String,
    pub insns: usize,
    pub engine: String,
    /// The ports it is attached to.
    pub ports: Vec<String>,
    pub maps: Vec<String>,
    /// The watchdog detached it.
    pub detached: bool,
}

/// A map of a loaded extension.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapView {
    pub extension: String,
    pub name: String,
    pub id: u32,
    #[serde(rename = "type")]
    pub map_type: String,
    pub key_size: u32,
    pub value_size: u32,
    /// What a lookup returns: `value_size`, or every CPU's value (each padded to 8
    /// bytes) for a per-CPU map.
    pub lookup_size: usize,
    pub max_entries: u32,
    pub flags: u32,
}

/// A handle on a running adapter for its control plane; cheap to clone, usable from
/// any thread but the workers'.
#[derive(Clone)]
pub struct Live {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ctl: Arc<crate::adapter::Control>,
    pub(crate) started: Instant,
}

impl std::fmt::Debug for Live {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Live").field("ports", &self.shared.ports.len()).finish_non_exhaustive()
    }
}

impl Live {
    fn port(&self, name: &str) -> Result<usize, LiveError> {
        self.shared
            .port_names
            .iter()
            .position(|p| p == name)
            .ok_or_else(|| LiveError::NoPort { name: name.to_string() })
    }

    pub fn ports(&self) -> Vec<PortView> {
        let st = self.shared.lock();
        self.shared
            .ports
            .iter()
            .zip(&st.attached)
            .map(|(p, a)| PortView {
                name: p.name.clone(),
                kind: p.kind.to_string(),
                ifindex: p.ifindex,
                extension: a.map(|e| st.exts[usize::from(e)].name.clone()),
                generation: p.slot.generation(),
            })
            .collect()
    }

    pub fn domains(&self) -> Vec<DomainView> {
        self.shared
            .domains
            .iter()
            .map(|d| DomainView {
                name: d.name().to_string(),
                ports: d.spec().ports.clone(),
                shared_maps: d.spec().shared_maps.clone(),
                max_insns: d.spec().quota.insns as u64,
                map_bytes_left: d.map_bytes_left(),
            })
            .collect()
    }

    pub fn extensions(&self) -> Vec<ExtView> {
        let st = self.shared.lock();
        st.exts
            .iter()
            .enumerate()
            .filter_map(|(id, e)| {
                let l = e.loaded.as_ref()?;
                let ports = st
                    .attached
                    .iter()
                    .zip(&self.shared.port_names)
                    .filter(|(a, _)| a.map(usize::from) == Some(id))
                    .map(|(_, n)| n.clone())
                    .collect();
                Some(ExtView {
                    id: id as u16,
                    name: e.name.clone(),
                    domain: e.domain.clone(),
                    program: l.ext.name().to_string(),
                    section: l.ext.section().to_string(),
                    insns: l.ext.insns().len(),
                    engine: format!("{:?}", l.ext.engine_kind()).to_lowercase(),
                    ports,
                    maps: map_names(&l.ext),
                    detached: l.ext.health().is_detached(),
                })
            })
            .collect()
    }

    /// Every map of every loaded extension.
    pub fn maps(&self) -> Vec<MapView> {
        let st = self.shared.lock();
        let mut out = Vec::new();
        for e in &st.exts {
            let Some(l) = &e.loaded else { continue };
            for name in map_names(&l.ext) {
                if let Some(m) = l.ext.map(&name) {
                    out.push(map_view(&e.name, m));
                }
            }
        }
        out
    }

    /// Loads the program in `section` (or the first XDP program) of ELF `object` into
    /// `domain` as extension `name`, verified exactly as at start-up. Not attached.
    pub fn load(
        &self,
        name: &str,
        object: &[u8],
        section: Option<&str>,
        domain: &str,
    ) -> Result<ExtView, LiveError> {
        self.load_with(name, object, section, domain, None)
    }

    /// Loads extension `name` as [`Live::load`] does, in place of loaded extension
    /// `old` of the same domain, which is unloaded: atomically for active messages.
    /// The handler table is published once, with `name`'s handlers and without `old`'s,
    /// and each worker dispatches every message under one table, so every message runs
    /// the old handlers or the new ones, never both and never neither (loading then
    /// unloading leaves a window in which a message runs both). `old` must not be
    /// attached to a port ([`Live::replace`] does that for ports).
    pub fn load_replacing(
        &self,
        old: &str,
        name: &str,
        object: &[u8],
        section: Option<&str>,
        domain: &str,
    ) -> Result<ExtView, LiveError> {
        self.load_with(name, object, section, domain, Some(old))
    }

    fn load_with(
        &self,
        name: &str,
        object: &[u8],
        section: Option<&str>,
        domain: &str,
        replaces: Option<&str>,
    ) -> Result<ExtView, LiveError> {
        self.reap();
        if let Some(old) = replaces {
            // Early, before verifying; checked again when the new one goes in.
            self.replaceable(&self.shared.lock(), old, domain)?;
        }
        let dom = self
            .shared
            .domains
            .iter()
            .find(|d| d.name() == domain)
            .cloned()
            .ok_or_else(|| LiveError::NoDomain { name: domain.to_string() })?;
        if find_ext(&self.shared.lock(), name).is_ok() {
            return Err(LiveError::Exists { name: name.to_string() });
        }
        let obj = parse_object(object)
            .map_err(|e| LiveError::Object { name: name.to_string(), source: Box::new(e) })?;
        let opts = LoadOptions {
            ncpus: self.shared.workers,
            engine: self.shared.engine,
            domain: dom,
            map_seed: self.shared.seed,
            log_level: 1,
            ..LoadOptions::default()
        };
        let (object, ext) = load_selected(&obj, section, &opts).map_err(|e| {
            let log = match &e {
                LoadError::Verify { error, .. } => error.log.clone(),
                _ => String::new(),
            };
            LiveError::Load { name: name.to_string(), source: Box::new(e), log }
        })?;
        // Every worker can run it (the same check as at start-up), before it is listed.
        Program::new(0, &ext, self.shared.workers, &self.shared.port_names)
            .map_err(|source| LiveError::Runner { name: name.to_string(), source })?;
        let mut st = self.shared.lock();
        if find_ext(&st, name).is_ok() {
            return Err(LiveError::Exists { name: name.to_string() });
        }
        if st.exts.len() > usize::from(u16::MAX) {
            return Err(LiveError::TooMany { name: name.to_string() });
        }
        let retire = match replaces {
            None => None,
            Some(old) => Some(self.replaceable(&st, old, domain)?),
        };
        let base_refs = Arc::strong_count(&ext);
        st.exts.push(ExtSlot {
            name: name.to_string(),
            domain: domain.to_string(),
            loaded: Some(Loaded { ext, object, base_refs }),
        });
        if let Some(id) = retire {
            if let Some(l) = st.exts[id].loaded.take() {
                st.retired.push(l);
            }
        }
        // One publish: the new handlers and, when replacing, without the old ones.
        self.shared.publish_handlers(&st);
        drop(st);
        if retire.is_some() {
            self.reap();
        }
        let view = self.extensions().into_iter().find(|e| e.name == name);
        Ok(view.expect("just loaded"))
    }

    /// The index of loaded extension `old`, which a load into `domain` may replace: of
    /// that domain and attached to no port.
    fn replaceable(&self, st: &State, old: &str, domain: &str) -> Result<usize, LiveError> {
        let id = find_ext(st, old)?;
        let on: Vec<String> = (0..st.attached.len())
            .filter(|&p| st.attached[p].map(usize::from) == Some(id))
            .map(|p| self.shared.port_names[p].clone())
            .collect();
        if !on.is_empty() {
            return Err(LiveError::Attached { name: old.to_string(), ports: on });
        }
        if st.exts[id].domain != domain {
            return Err(LiveError::ReplaceDomain {
                old: old.to_string(),
                old_domain: st.exts[id].domain.clone(),
                domain: domain.to_string(),
            });
        }
        Ok(id)
    }

    /// Attaches extension `ext` to `port`'s receive hook; the port must have none.
    pub fn attach(&self, ext: &str, port: &str) -> Result<(), LiveError> {
        self.set(ext, port, false).map(drop)
    }

    /// Replaces the extension on `port` by `ext` atomically: every packet runs under
    /// the old program or the new one. Returns the name of the one replaced.
    pub fn replace(&self, port: &str, ext: &str) -> Result<String, LiveError> {
        self.set(ext, port, true).map(|old| old.unwrap_or_default())
    }

    fn set(&self, ext: &str, port: &str, replace: bool) -> Result<Option<String>, LiveError> {
        self.reap();
        let p = self.port(port)?;
        let mut st = self.shared.lock();
        let id = find_ext(&st, ext)?;
        let old = st.attached[p].map(|e| st.exts[usize::from(e)].name.clone());
        match (&old, replace) {
            (Some(o), false) => {
                return Err(LiveError::PortBusy { port: port.to_string(), ext: o.clone() })
            }
            (None, true) => return Err(LiveError::NotAttached { port: port.to_string() }),
            _ => {}
        }
        let l = st.exts[id].loaded.as_ref().expect("find_ext finds loaded ones");
        if !l.ext.domain().may_use_port(port) {
            return Err(LiveError::Refused {
                ext: ext.to_string(),
                domain: l.ext.domain().name().to_string(),
                port: port.to_string(),
            });
        }
        let prog = Program::new(id as u16, &l.ext, self.shared.workers, &self.shared.port_names)
            .map_err(|source| LiveError::Runner { name: ext.to_string(), source })?;
        self.shared.ports[p].slot.publish(Some(Arc::new(prog)));
        st.attached[p] = Some(id as u16);
        Ok(old)
    }

    /// Detaches whatever runs on `port`; returns its name. Packets then go on
    /// unhandled (as `XDP_PASS`), from each worker's next round.
    pub fn detach(&self, port: &str) -> Result<String, LiveError> {
        let p = self.port(port)?;
        let mut st = self.shared.lock();
        let Some(e) = st.attached[p].take() else {
            return Err(LiveError::NotAttached { port: port.to_string() });
        };
        self.shared.ports[p].slot.publish(None);
        Ok(st.exts[usize::from(e)].name.clone())
    }

    /// Whether every worker dispatches active messages under the handlers of the last
    /// load or unload (each picks them up at its next round; a message it takes before
    /// then still sees the handlers it had).
    pub fn handlers_settled(&self) -> bool {
        self.shared.handlers.settled()
    }

    /// Unloads extension `name`: refused while it is attached, unless `force`, which
    /// detaches it from every port first. Its active-message handlers take no message
    /// from each worker's next round on ([`Live::handlers_settled`]).
    pub fn unload(&self, name: &str, force: bool) -> Result<(), LiveError> {
        let mut st = self.shared.lock();
        let id = find_ext(&st, name)?;
        let on: Vec<usize> = (0..st.attached.len())
            .filter(|&p| st.attached[p].map(usize::from) == Some(id))
            .collect();
        if !on.is_empty() && !force {
            let ports = on.iter().map(|&p| self.shared.port_names[p].clone()).collect();
            return Err(LiveError::Attached { name: name.to_string(), ports });
        }
        for p in on {
            st.attached[p] = None;
            self.shared.ports[p].slot.publish(None);
        }
        if let Some(l) = st.exts[id].loaded.take() {
            st.retired.push(l);
        }
        // Its handlers take no message from the workers' next round on.
        self.shared.publish_handlers(&st);
        drop(st);
        self.reap();
        Ok(())
    }

    /// Frees unloaded extensions that no worker runs any more; returns how many are
    /// still waiting for a worker's next round.
    pub fn reap(&self) -> usize {
        let gone: Vec<Loaded> = {
            let mut st = self.shared.lock();
            let (gone, kept) = std::mem::take(&mut st.retired)
                .into_iter()
                .partition(|l| Arc::strong_count(&l.ext) <= l.base_refs);
            st.retired = kept;
            gone
        };
        let left = self.shared.lock().retired.len();
        drop(gone);
        left
    }

    fn map(&self, ext: &str, map: &str) -> Result<Arc<Map>, LiveError> {
        let e = self
            .shared
            .extension(ext)
            .ok_or_else(|| LiveError::NoExtension { name: ext.to_string() })?;
        e.map(map)
            .cloned()
            .ok_or_else(|| LiveError::NoMap { ext: ext.to_string(), map: map.to_string() })
    }

    /// The endpoint map (`SPINE_MAP_TYPE_ENDPOINT`, or an XSKMAP, whose slots take
    /// endpoints as the kernel's take AF_XDP sockets) `map` of extension `ext` or,
    /// without `ext`, of the one loaded extension (or the extensions sharing one
    /// instance) that has one of that name; with the extension's name and domain.
    pub(crate) fn endpoint_map(
        &self,
        ext: Option<&str>,
        map: &str,
    ) -> Result<(String, Arc<Map>, Arc<Domain>), LiveError> {
        use spine_abi::map_type::{SPINE_ENDPOINT, XSKMAP};
        let endpoints = |m: &Map| matches!(m.def().map_type, SPINE_ENDPOINT | XSKMAP);
        if let Some(ext) = ext {
            let e = self
                .shared
                .extension(ext)
                .ok_or_else(|| LiveError::NoExtension { name: ext.to_string() })?;
            let m = self.map(ext, map)?;
            if !endpoints(&m) {
                return Err(LiveError::NotEndpointMap { ext: ext.into(), map: map.into() });
            }
            return Ok((ext.to_string(), m, e.domain().clone()));
        }
        let st = self.shared.lock();
        let mut found: Option<(String, Arc<Map>, Arc<Domain>)> = None;
        for slot in &st.exts {
            let Some(l) = &slot.loaded else { continue };
            let Some(m) = l.ext.map(map).filter(|m| endpoints(m)) else {
                continue;
            };
            match &found {
                Some((_, f, _)) if Arc::ptr_eq(f, m) => {}
                Some(_) => {
                    let why = "several extensions have one; name the extension";
                    return Err(LiveError::NoEndpointMap { map: map.into(), why });
                }
                None => found = Some((slot.name.clone(), m.clone(), l.ext.domain().clone())),
            }
        }
        found.ok_or(LiveError::NoEndpointMap {
            map: map.into(),
            why: "no loaded extension has an endpoint map of this name",
        })
    }

    /// What map `map` of `ext` is.
    pub fn map_info(&self, ext: &str, map: &str) -> Result<MapView, LiveError> {
        Ok(map_view(ext, &*self.map(ext, map)?))
    }

    fn map_err(
        ext: &str,
        map: &str,
        op: &'static str,
        key: Option<&[u8]>,
    ) -> impl FnOnce(spine_maps::MapError) -> LiveError {
        let key = key.map_or_else(|| "(none)".to_string(), hex);
        let (ext, map) = (ext.to_string(), map.to_string());
        move |source| LiveError::Map { ext, map, op, key, source: Box::new(source) }
    }

    fn check_key(ext: &str, map: &str, m: &Map, key: &[u8]) -> Result<(), LiveError> {
        let want = m.def().key_size as usize;
        if key.len() != want {
            let (ext, map) = (ext.to_string(), map.to_string());
            return Err(LiveError::Size { ext, map, what: "key", got: key.len(), want });
        }
        Ok(())
    }

    /// A shared segment: a descriptor of the memfd holding a memory-mappable array's
    /// values (`BPF_F_MMAPABLE`) and the bytes to map (`mmap` it `MAP_SHARED`, read
    /// and write; value `i` at `i * round_up(value_size, 8)`). A `bpf_spin_lock` in the
    /// value is a 32-bit word: 0 free, taken by compare-and-swap 0 → 1 (acquire) and
    /// released by storing 0 (release), which is what the extensions do.
    pub fn segment(
        &self,
        ext: &str,
        map: &str,
    ) -> Result<(std::os::fd::OwnedFd, usize), LiveError> {
        let m = self.map(ext, map)?;
        let (ext, map) = (ext.to_string(), map.to_string());
        let Some((fd, len)) = m.segment() else {
            return Err(LiveError::NotSegment { ext, map });
        };
        let fd =
            fd.try_clone_to_owned().map_err(|source| LiveError::SegmentFd { ext, map, source })?;
        Ok((fd, len))
    }

    /// Where the values of map `map` of `ext` hold their `bpf_spin_lock`, if they do.
    pub fn spin_lock_offset(&self, ext: &str, map: &str) -> Option<u32> {
        self.map(ext, map).ok().and_then(|m| m.def().spin_lock)
    }

    /// `BPF_MAP_LOOKUP_ELEM`: the value (every CPU's, padded, for per-CPU maps).
    /// A bloom filter's lookup would ask about a value this call has no way to take:
    /// refused (`EOPNOTSUPP`) rather than answering for an all-zero value.
    pub fn map_lookup(&self, ext: &str, map: &str, key: &[u8]) -> Result<Vec<u8>, LiveError> {
        let m = self.map(ext, map)?;
        if m.def().map_type == spine_abi::map_type::BLOOM_FILTER {
            let e = spine_maps::MapError::BloomNoKeys { map: m.def().name.clone() };
            return Err(Self::map_err(ext, map, "lookup", Some(key))(e));
        }
        Self::check_key(ext, map, &m, key)?;
        let mut out = vec![0u8; m.user_value_size()];
        m.lookup_user(key, &mut out).map_err(Self::map_err(ext, map, "lookup", Some(key)))?;
        Ok(out)
    }

    /// `BPF_MAP_UPDATE_ELEM` with `flags` (`BPF_ANY`, `BPF_NOEXIST`, `BPF_EXIST`).
    /// `value` is one value (written to every CPU of a per-CPU map) or, for a per-CPU
    /// map, every CPU's as a lookup returns them.
    pub fn map_update(
        &self,
        ext: &str,
        map: &str,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> Result<(), LiveError> {
        let m = self.map(ext, map)?;
        Self::check_key(ext, map, &m, key)?;
        let (one, all) = (m.def().value_size as usize, m.user_value_size());
        let value = if value.len() == all {
            value.to_vec()
        } else if value.len() == one {
            m.user_value_for_all_cpus(value)
        } else {
            let (ext, map) = (ext.to_string(), map.to_string());
            return Err(LiveError::Size { ext, map, what: "value", got: value.len(), want: one });
        };
        m.update_user(key, &value, flags).map_err(Self::map_err(ext, map, "update", Some(key)))
    }

    /// `BPF_MAP_DELETE_ELEM`.
    pub fn map_delete(&self, ext: &str, map: &str, key: &[u8]) -> Result<(), LiveError> {
        let m = self.map(ext, map)?;
        Self::check_key(ext, map, &m, key)?;
        m.delete_user(key).map_err(Self::map_err(ext, map, "delete", Some(key)))
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM` on a hash map (plain, per-CPU, LRU, LRU
    /// per-CPU): the value of `key` (every CPU's, padded, for per-CPU maps), and the
    /// element is gone. `flags` is 0 or `BPF_F_LOCK` (the value read under its
    /// `bpf_spin_lock`); the kernel's errnos: `ENOENT` for a missing key, `EPERM` for a
    /// frozen or one-way map, `EINVAL` for other flags, `ENOTSUPP` for map types without
    /// the operation (a queue or stack pops with [`Live::map_pop`]).
    pub fn map_lookup_and_delete(
        &self,
        ext: &str,
        map: &str,
        key: &[u8],
        flags: u64,
    ) -> Result<Vec<u8>, LiveError> {
        let m = self.map(ext, map)?;
        Self::check_key(ext, map, &m, key)?;
        let mut out = vec![0u8; m.user_value_size()];
        m.lookup_and_delete_user(key, &mut out, flags).map_err(Self::map_err(
            ext,
            map,
            "lookup_and_delete",
            Some(key),
        ))?;
        Ok(out)
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM` on a queue or stack: the element popped (the
    /// oldest of a queue, the newest of a stack), or `None` when it is empty. Push with
    /// [`Live::map_update`] and peek with [`Live::map_lookup`], both with an empty key.
    pub fn map_pop(&self, ext: &str, map: &str) -> Result<Option<Vec<u8>>, LiveError> {
        let m = self.map(ext, map)?;
        if !matches!(m.def().map_type, spine_abi::map_type::QUEUE | spine_abi::map_type::STACK) {
            let e = spine_maps::MapError::PopUnsupported { map: m.def().name.clone() };
            return Err(Self::map_err(ext, map, "lookup_and_delete", None)(e));
        }
        let mut out = vec![0u8; m.def().value_size as usize];
        match m.lookup_and_delete_user(&[], &mut out, 0) {
            Ok(()) => Ok(Some(out)),
            Err(e) if e.errno().abs() == i64::from(libc::ENOENT) => Ok(None),
            Err(e) => Err(Self::map_err(ext, map, "lookup_and_delete", None)(e)),
        }
    }

    /// `BPF_MAP_GET_NEXT_KEY`: the key after `key` (the first one for `None`), or
    /// `None` after the last.
    pub fn map_next_key(
        &self,
        ext: &str,
        map: &str,
        key: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, LiveError> {
        let m = self.map(ext, map)?;
        if let Some(k) = key {
            Self::check_key(ext, map, &m, k)?;
        }
        let mut out = vec![0u8; m.def().key_size as usize];
        match m.next_key(key, &mut out) {
            Ok(()) => Ok(Some(out)),
            Err(e) if e.errno().abs() == i64::from(libc::ENOENT) => Ok(None),
            Err(e) => Err(Self::map_err(ext, map, "get_next_key", key)(e)),
        }
    }

    /// Every entry, as `bpftool map dump` walks them (`get_next_key` then lookup; an
    /// entry deleted in between is skipped). At most `max_entries` entries.
    pub fn map_dump(&self, ext: &str, map: &str) -> Result<Vec<KeyValue>, LiveError> {
        let m = self.map(ext, map)?;
        let ks = m.def().key_size as usize;
        let mut out = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        let mut next = vec![0u8; ks];
        while out.len() < m.def().max_entries as usize {
            match m.next_key(key.as_deref(), &mut next) {
                Ok(()) => {}
                Err(e) if e.errno().abs() == i64::from(libc::ENOENT) => break,
                Err(e) => return Err(Self::map_err(ext, map, "get_next_key", key.as_deref())(e)),
            }
            let mut value = vec![0u8; m.user_value_size()];
            match m.lookup_user(&next, &mut value) {
                Ok(()) => out.push((next.clone(), value)),
                Err(e) if e.errno().abs() == i64::from(libc::ENOENT) => {}
                Err(e) => return Err(Self::map_err(ext, map, "lookup", Some(&next))(e)),
            }
            key = Some(next.clone());
        }
        Ok(out)
    }

    /// Entries of map `map` of `ext` as `bpftool` prints them from the object's BTF
    /// (its `formatted` member): `{"key", "value"}`, or `{"key", "values": [{"cpu",
    /// "value"}]}` for a per-CPU map; `None` for each entry when the map has no BTF
    /// types or an entry does not print.
    pub fn map_formatted(
        &self,
        ext: &str,
        map: &str,
        entries: &[KeyValue],
    ) -> Vec<Option<serde_json::Value>> {
        let none = || vec![None; entries.len()];
        let Some(e) = self.shared.extension(ext) else { return none() };
        let (Some(m), Some((btf, kid, vid))) = (e.map(map), e.map_btf_types(map)) else {
            return none();
        };
        let Ok(f) = spine_obj::BtfFormatter::new(&btf) else { return none() };
        let vs = m.def().value_size as usize;
        let per_cpu = spine_abi::map_type::is_percpu(m.def().map_type);
        let one = |id: u32, b: &[u8]| -> Option<serde_json::Value> {
            if id == 0 {
                return None;
            }
            serde_json::from_str(&f.json(id, b).ok()?).ok()
        };
        entries
            .iter()
            .map(|(k, v)| {
                let key = one(kid, k)?;
                if per_cpu {
                    let values = v
                        .chunks(vs.next_multiple_of(8))
                        .enumerate()
                        .map(|(cpu, slot)| {
                            Some(serde_json::json!({"cpu": cpu, "value": one(vid, slot)?}))
                        })
                        .collect::<Option<Vec<_>>>()?;
                    Some(serde_json::json!({"key": key, "values": values}))
                } else {
                    Some(serde_json::json!({"key": key, "value": one(vid, v)?}))
                }
            })
            .collect()
    }

    /// The counters as the workers last published them (at most ~100 ms old).
    pub fn totals(&self) -> Totals {
        self.shared.totals(&self.ctl.snapshots(), self.started.elapsed().as_secs_f64())
    }

    /// Starts recording every worker's events (`events` per worker, the oldest
    /// overwritten), from each worker's next round. While tracing, workers run packet by
    /// packet (the trace's cost is what it records).
    pub fn trace_start(&self, events: usize) -> Result<(), LiveError> {
        if !(16..=1 << 24).contains(&events) {
            return Err(LiveError::TraceSize { events });
        }
        for w in &self.ctl.workers {
            *w.trace_out.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        self.ctl.trace_events.store(events, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Stops recording; the trace is then kept for [`Live::trace_get`].
    pub fn trace_stop(&self) -> Result<(), LiveError> {
        if self.ctl.trace_events.swap(0, std::sync::atomic::Ordering::Relaxed) == 0 {
            return Err(LiveError::NoTrace { why: "no trace is running" });
        }
        Ok(())
    }

    /// Starts keeping `bpf_trace_printk` lines and watchdog events for
    /// [`Live::log_since`] (the control server does when it starts).
    pub fn log_enable(&self) {
        self.shared.log.enable();
    }

    /// Up to `max` log lines after sequence number `after` (0: every line kept).
    pub fn log_since(&self, after: u64, max: usize) -> crate::logbuf::LogPage {
        self.shared.log.since(after, max)
    }

    /// Up to `max` records of ring buffer `map` of `ext` after sequence number `after`
    /// (0: every record kept). The first call makes the control side the ring's
    /// consumer; each call takes what workers committed since (see
    /// [`crate::ringfollow`]).
    pub fn ring_since(
        &self,
        ext: &str,
        map: &str,
        after: u64,
        max: usize,
    ) -> Result<crate::ringfollow::RingPage, LiveError> {
        use crate::ringfollow::FollowRefusal;
        let ring = self.map(ext, map)?;
        let now_s = self.started.elapsed().as_secs_f64();
        self.shared.rings.since(ext, map, ring, now_s, after, max).map_err(|r| {
            let (ext, map) = (ext.to_string(), map.to_string());
            match r {
                FollowRefusal::NotRing => LiveError::NotRing { ext, map },
                FollowRefusal::Owned => LiveError::RingOwned { ext, map },
            }
        })
    }

    /// Whether a trace is being recorded.
    pub fn tracing(&self) -> bool {
        self.ctl.trace_events.load(std::sync::atomic::Ordering::Relaxed) != 0
    }

    /// The last stopped trace, in the Chrome/Perfetto trace format (as `spine run
    /// --trace` writes it). Waits up to a second for every worker to hand its ring over.
    pub fn trace_get(&self) -> Result<serde_json::Value, LiveError> {
        use std::sync::atomic::Ordering;
        if self.tracing() {
            return Err(LiveError::NoTrace { why: "the trace is still running; stop it first" });
        }
        let deadline = Instant::now() + std::time::Duration::from_secs(1);
        while self.ctl.workers.iter().any(|w| w.tracing.load(Ordering::Acquire))
            && Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let guards: Vec<_> = self
            .ctl
            .workers
            .iter()
            .map(|w| w.trace_out.lock().unwrap_or_else(PoisonError::into_inner))
            .collect();
        let rings: Vec<(usize, &crate::trace::TraceRing)> =
            guards.iter().enumerate().filter_map(|(i, g)| g.as_ref().map(|r| (i, r))).collect();
        if rings.is_empty() {
            return Err(LiveError::NoTrace { why: "no trace was recorded" });
        }
        Ok(crate::trace::chrome_trace(&rings, &self.shared.labels(), self.ctl.epoch_ns))
    }
}

fn map_names(ext: &Extension) -> Vec<String> {
    ext.maps().data_maps().map(|m| m.def().name.to_string()).collect()
}

fn map_view(ext: &str, m: &Map) -> MapView {
    let d = m.def();
    MapView {
        extension: ext.to_string(),
        name: d.name.to_string(),
        id: m.id(),
        map_type: spine_abi::map_type::name(d.map_type).to_string(),
        key_size: d.key_size,
        value_size: d.value_size,
        lookup_size: m.user_value_size(),
        max_entries: d.max_entries,
        flags: d.flags,
    }
}

/// Bytes as lowercase hex pairs separated by spaces (`0a 00 00 01`), as bpftool prints.
pub fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 3);
    for (i, x) in b.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&format!("{x:02x}"));
    }
    s
}

/// Parses an ELF object as the adapter does at start-up: CO-RE relocations resolve
/// against the running kernel's BTF, as libbpf's do.
pub(crate) fn parse_object(bytes: &[u8]) -> Result<spine_obj::Object, spine_obj::ObjError> {
    let target_btf = spine_sys::kernel_btf();
    spine_obj::parse_with(bytes, &spine_obj::ParseOptions { target_btf, ..Default::default() })
}
