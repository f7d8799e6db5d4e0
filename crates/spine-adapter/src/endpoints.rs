//! Endpoints handed out by a running adapter (U-Net): an application asks the control
//! plane for an endpoint bound to a **channel tag** (a port plus a match on the frame's
//! VLAN id, ethertype, IP protocol and UDP/TCP destination port) and receives the
//! endpoint's memfd and eventfd ([`Live::endpoint_open`]). Frames received on the port
//! whose verdict is `XDP_PASS` (or that no extension ran on) and that match the tag go
//! to the endpoint instead of the port's host path; what the client transmits leaves on
//! the tag's port.
//!
//! **How workers learn about endpoints.** The control side keeps the table of
//! endpoints and publishes each new version to one [`Slot`] (`EpTable`), exactly as a
//! port's program is replaced. Every worker refreshes its reader at the top of a round
//! (one `Acquire` load). On a change (cold path) the home worker of an endpoint's port
//! takes the endpoint's [`AdapterEnd`] out of its entry (a `try_lock` taken once per
//! endpoint, never per packet) and from then on owns it alone: it delivers to it, takes
//! the client's transmissions from it once per round and publishes its counters to the
//! entry's atomics. Endpoints that left the table (closed, or their client gone) are
//! dropped by their owner at its next round. A packet on a port with no endpoint pays
//! one load of a per-port flag the worker keeps (`on_port`); with no endpoint at all the
//! round pays one more test of an empty list.
//!
//! A matching packet handled by a worker that is not its port's home (software RSS, a
//! cpumap entry) is handed to the home worker as `XDP_PASS`, which delivers it.
//!
//! Frames are copied into the endpoint's buffer area (never lent), so whatever the
//! client does, no pool buffer is lost; a client that dies is noticed by the control
//! side (a `ClientWatch` on its connection marks its [`Liveness`]), its endpoint leaves
//! the table and its owner drops it (unmap, close).

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use spine_endpoint::{AdapterEnd, AdapterStats, EventFd, Layout, Liveness};

pub use crate::hostpath::HostPath;
use crate::hostpath::{Parked, HEADER_DEFAULT, HEADER_MAX};
use crate::live::{Live, LiveError};
use crate::slot::{Slot, SlotReader};

/// What a channel tag matches, beyond its port. Absent fields match anything; an empty
/// match takes every frame the port passes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelMatch {
    /// The ethertype after any 802.1Q/802.1ad tag (0x0800 IPv4, 0x86dd IPv6, ...).
    pub ethertype: Option<u16>,
    /// The IP protocol: IPv4's, or for IPv6 the next header after the extension
    /// headers (hop-by-hop, routing, fragment, destination options, AH; at most
    /// [`IPV6_EXT_HEADERS`] of them, as a transport-protocol match sees it).
    pub ip_proto: Option<u8>,
    /// The UDP or TCP destination port; needs `ip_proto` 6 or 17. Never matches a
    /// non-first fragment (IPv4, or IPv6's fragment header).
    pub dst_port: Option<u16>,
    /// The VLAN id of an 802.1Q/802.1ad tag (0..=4095); frames without a tag never match.
    pub vlan: Option<u16>,
}

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;

/// How many IPv6 extension headers a tag match walks before giving up (the frame
/// then matches no `ip_proto`).
pub const IPV6_EXT_HEADERS: usize = 8;

/// IPv6 from `off` (the fixed header) in `f`: the upper-layer protocol after the
/// extension headers, where its header starts, and whether this is a first (or the
/// only) fragment. `None` when an extension header runs past `f` or there are too
/// many.
fn ipv6_upper(f: &[u8], off: usize) -> Option<(u8, usize, bool)> {
    let mut next = *f.get(off + 6)?;
    let mut at = off + 40;
    let mut first = true;
    for _ in 0..IPV6_EXT_HEADERS {
        let len = match next {
            // Hop-by-hop, routing, destination options: 8-octet units beyond the first.
            0 | 43 | 60 => (usize::from(*f.get(at + 1)?) + 1) * 8,
            // Fragment: fixed; a non-zero offset has no upper-layer header.
            44 => {
                first &= be16(f, at + 2)? & 0xfff8 == 0;
                8
            }
            // Authentication header: 4-octet units beyond the first two.
            51 => (usize::from(*f.get(at + 1)?) + 2) * 4,
            _ => return Some((next, at, first)),
        };
        next = *f.get(at)?;
        at += len;
        if at > f.len() {
            return None;
        }
    }
    // As many as are walked: only an upper-layer header may follow.
    (!matches!(next, 0 | 43 | 44 | 51 | 60)).then_some((next, at, first))
}

#[inline]
fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*f.get(at)?, *f.get(at + 1)?]))
}

impl ChannelMatch {
    /// Checks the tag's fields fit together; the reason names the field.
    pub fn check(&self) -> Result<(), String> {
        if let Some(v) = self.vlan {
            if v > 4095 {
                return Err(format!("vlan {v} is outside 0..=4095"));
            }
        }
        if let Some(e) = self.ethertype {
            if matches!(e, 0x8100 | 0x88a8) {
                return Err(format!(
                    "ethertype {e:#06x} is a VLAN tag; match the tag with 'vlan' instead"
                ));
            }
            if e < 0x0600 {
                return Err(format!("ethertype {e:#06x} is a length, not a type (below 0x0600)"));
            }
            if self.ip_proto.is_some() && !matches!(e, ETH_IPV4 | ETH_IPV6) {
                return Err(format!("ip_proto needs ethertype 0x0800 or 0x86dd, not {e:#06x}"));
            }
        }
        if self.dst_port.is_some() && !matches!(self.ip_proto, Some(6 | 17)) {
            return Err("dst_port needs ip_proto 6 (TCP) or 17 (UDP)".into());
        }
        Ok(())
    }

    /// Whether `f`, an Ethernet frame, matches. Reads only within `f`.
    #[inline]
    pub fn matches(&self, f: &[u8]) -> bool {
        let Some(mut et) = be16(f, 12) else { return false };
        let mut off = 14;
        let mut vlan = None;
        if matches!(et, 0x8100 | 0x88a8) {
            let (Some(tci), Some(inner)) = (be16(f, 14), be16(f, 16)) else { return false };
            vlan = Some(tci & 0x0fff);
            et = inner;
            off = 18;
        }
        if self.vlan.is_some() && self.vlan != vlan {
            return false;
        }
        if self.ethertype.is_some_and(|e| e != et) {
            return false;
        }
        if self.ip_proto.is_none() {
            return true;
        }
        let (proto, l4, first) = match et {
            ETH_IPV4 => {
                let Some(&vihl) = f.get(off) else { return false };
                let Some(frag) = be16(f, off + 6) else { return false };
                (f.get(off + 9).copied(), off + usize::from(vihl & 0x0f) * 4, frag & 0x1fff == 0)
            }
            ETH_IPV6 => {
                let Some((proto, l4, first)) = ipv6_upper(f, off) else { return false };
                (Some(proto), l4, first)
            }
            _ => return false,
        };
        if proto != self.ip_proto {
            return false;
        }
        match self.dst_port {
            None => true,
            Some(d) => first && be16(f, l4 + 2) == Some(d),
        }
    }
}

/// A slot of an extension's endpoint map (`SPINE_MAP_TYPE_ENDPOINT`) or XSKMAP that an
/// endpoint binds to: the extension's `bpf_redirect_map(&map, index, flags)` then
/// delivers to it (for an XSKMAP, as the kernel delivers to the AF_XDP socket whose fd
/// the slot holds).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MapSlot {
    /// The extension whose map it is; absent: the one loaded extension that has an
    /// endpoint map called `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    pub name: String,
    pub index: u32,
}

/// An application's request for an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointRequest {
    /// The port the tag binds to (where the endpoint's transmissions leave).
    pub port: String,
    /// Which frames the port passes go to the endpoint. Absent: every frame, unless
    /// `map` is given, in which case none (the endpoint then gets only what the
    /// extension redirects into its slot).
    #[serde(default, rename = "match")]
    pub matches: Option<ChannelMatch>,
    /// An endpoint map slot to bind the endpoint to (it must be empty).
    #[serde(default)]
    pub map: Option<MapSlot>,
    /// The protection domain whose extensions' handlers its active messages run (and
    /// whose extensions may send it messages); default `default`.
    #[serde(default)]
    pub domain: Option<String>,
    /// A loaded extension of the endpoint's domain whose object carries applets for the
    /// endpoint's hooks (`SEC("spine/applet/tx")`, `SEC("spine/applet/rx")`; see
    /// [`crate::applets`]).
    #[serde(default)]
    pub applets: Option<String>,
    /// Entries per ring (a power of two; default 256).
    #[serde(default)]
    pub ring_entries: Option<u32>,
    /// Bytes per frame of the buffer area (a power of two; default 2048).
    #[serde(default)]
    pub frame_size: Option<u32>,
    /// Frames in the buffer area (default 512).
    #[serde(default)]
    pub frames: Option<u32>,
    /// What travels (the host router's data paths, see [`HostPath`]); default frames.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<HostPath>,
    /// For `header-copy`: bytes of each frame delivered (14..=64, default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_bytes: Option<u16>,
    /// Multi-buffer frames (AF_XDP's `XDP_USE_SG`): a frame longer than one area frame
    /// arrives as several receive descriptors, every one but the last marked
    /// `Desc::CONTD`. Without it (default) a chained frame arrives in one area frame
    /// when it fits, else it is dropped and counted. Only for the frames path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multi_buffer: Option<bool>,
}

/// What an adapter allows endpoints (checked at open).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointLimits {
    /// Endpoints open at once on the adapter.
    pub max_endpoints: usize,
    /// Endpoints open at once by one client process (by its pid).
    pub max_per_client: usize,
    pub max_ring_entries: u32,
    pub max_frame_size: u32,
    pub max_frames: u32,
    /// Invalid entries (descriptors, ring indices) a client may write before its
    /// endpoint is reclaimed as if the client had died: a client whose ring holds
    /// garbage makes no progress, and its endpoint's buffers come back to the adapter.
    pub garbage_limit: u64,
}

impl Default for EndpointLimits {
    fn default() -> Self {
        EndpointLimits {
            max_endpoints: 64,
            max_per_client: 8,
            max_ring_entries: 4096,
            max_frame_size: 4096,
            max_frames: 4096,
            garbage_limit: 1024,
        }
    }
}

/// An endpoint's counters, as its worker last published them (once per round).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointCounters {
    /// Frames delivered to the client's receive ring.
    pub rx_delivered: u64,
    /// Frames that matched but found no room (no fill frame, receive ring full, too big).
    pub rx_dropped: u64,
    /// Messages the client transmitted, sent on the tag's port.
    pub tx_sent: u64,
    /// Transmissions longer than a pool buffer holds, dropped.
    pub tx_dropped: u64,
    /// Descriptors and indices the client wrote that failed their checks.
    pub bad_desc: u64,
    pub bad_index: u64,
    /// Active messages the client sent.
    #[serde(default)]
    pub msg_taken: u64,
    /// Of those, dropped for want of a handler.
    #[serde(default)]
    pub msg_unhandled: u64,
    /// Active messages extensions sent it, delivered.
    #[serde(default)]
    pub msg_delivered: u64,
    /// What its applets did (all zero without applets).
    #[serde(default)]
    pub applets: crate::applets::AppletCounters,
    /// Header-copy: handles the client returned that named no buffer it holds
    /// (forged, stale, duplicated) or an egress port that does not exist.
    #[serde(default)]
    pub bad_handle: u64,
    /// Header-copy: buffers the adapter holds for the client now.
    #[serde(default)]
    pub held: u64,
    /// Header-copy: frames dropped because the client held as many as it may.
    #[serde(default)]
    pub held_full: u64,
    /// Of `rx_delivered`: frames delivered as several descriptors (multi-buffer).
    #[serde(default)]
    pub rx_multi_buffer: u64,
}

impl EndpointCounters {
    fn from_stats(s: &AdapterStats) -> Self {
        EndpointCounters {
            rx_delivered: s.rx_delivered,
            rx_dropped: s.rx_no_room + s.rx_too_big,
            tx_sent: s.tx_taken,
            tx_dropped: s.tx_too_big,
            bad_desc: s.bad_desc,
            bad_index: s.bad_index,
            msg_taken: s.msg_taken,
            msg_unhandled: s.msg_dropped,
            msg_delivered: s.msg_delivered,
            rx_multi_buffer: s.rx_multi,
            ..Default::default()
        }
    }
}

/// An endpoint of the running adapter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointView {
    pub id: u64,
    pub port: String,
    /// The match on passed frames; `None` for an endpoint fed by its map slot alone.
    #[serde(rename = "match")]
    pub matches: Option<ChannelMatch>,
    /// The endpoint map slot it is bound to (extension named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map: Option<MapSlot>,
    #[serde(default)]
    pub domain: String,
    /// The extension whose applets run on its hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applets: Option<String>,
    pub ring_entries: u32,
    pub frame_size: u32,
    pub frames: u32,
    /// What travels on it (the host router's data paths).
    #[serde(default)]
    pub path: HostPath,
    /// It takes multi-buffer frames as several descriptors ([`EndpointRequest::multi_buffer`]).
    #[serde(default)]
    pub multi_buffer: bool,
    /// The index of its port (the egress port a header-copy or in-place return names).
    #[serde(default)]
    pub port_index: u16,
    /// The client's pid when it connected, when known.
    pub pid: Option<i32>,
    /// A worker serves it (false until its port's worker has picked it up).
    pub served: bool,
    pub counters: EndpointCounters,
}

/// A new endpoint: what to hand the client (the region's memfd and the eventfd the
/// adapter signals after delivering), and what to watch.
#[derive(Debug)]
pub struct OpenedEndpoint {
    pub view: EndpointView,
    pub region: OwnedFd,
    pub wake: OwnedFd,
}

/// One endpoint as the control side and every worker see it.
#[derive(Debug)]
pub(crate) struct EpEntry {
    id: u64,
    port: u16,
    matcher: Option<ChannelMatch>,
    /// The endpoint map slot it is bound to: the map, the slot, and its name for views.
    slot: Option<(Arc<spine_maps::Map>, MapSlot)>,
    domain: String,
    /// Its domain's index among the adapter's domains: the handlers its messages run
    /// are those of this domain in the worker's live handler table
    /// (`crate::handlers`).
    domain_ix: u16,
    /// Its applets (`crate::applets`), and their counters as the owner publishes them.
    applets: Option<crate::applets::AppletSet>,
    applet_counters: crate::applets::AppletAtomics,
    layout: Layout,
    pid: Option<i32>,
    /// The endpoint until its home worker takes it.
    cell: Mutex<Option<(AdapterEnd, EventFd)>>,
    live: Liveness,
    /// `EndpointCounters` in field order, published by the owner.
    counters: [AtomicU64; 10],
    served: std::sync::atomic::AtomicBool,
    path: HostPath,
    header_bytes: u16,
    /// Chained frames arrive as several descriptors (`EndpointRequest::multi_buffer`).
    multi_buffer: bool,
    /// By port: whether a header-copy or in-place return may name it as its egress.
    egress_ok: Vec<bool>,
    /// `bad_handle`, `held`, `held_full`, published by the owner.
    path_counters: [AtomicU64; 3],
    /// [`EndpointLimits::garbage_limit`] when it opened.
    garbage_limit: u64,
    /// Its owner found more garbage than that and declared it dead.
    garbage: std::sync::atomic::AtomicBool,
}

impl EpEntry {
    /// Empties its endpoint map slot (if it still holds this endpoint).
    fn unbind(&self) {
        if let Some((m, s)) = &self.slot {
            m.unbind_endpoint(s.index, self.id as u32);
        }
    }

    fn publish(&self, s: &AdapterStats) {
        let c = EndpointCounters::from_stats(s);
        let v = [
            c.rx_delivered,
            c.rx_dropped,
            c.tx_sent,
            c.tx_dropped,
            c.bad_desc,
            c.bad_index,
            c.msg_taken,
            c.msg_unhandled,
            c.msg_delivered,
            c.rx_multi_buffer,
        ];
        for (a, v) in self.counters.iter().zip(v) {
            a.store(v, Ordering::Relaxed);
        }
    }

    fn counters(&self) -> EndpointCounters {
        let v: Vec<u64> = self.counters.iter().map(|a| a.load(Ordering::Relaxed)).collect();
        EndpointCounters {
            rx_delivered: v[0],
            rx_dropped: v[1],
            tx_sent: v[2],
            tx_dropped: v[3],
            bad_desc: v[4],
            bad_index: v[5],
            msg_taken: v[6],
            msg_unhandled: v[7],
            msg_delivered: v[8],
            rx_multi_buffer: v[9],
            applets: self.applet_counters.load(),
            bad_handle: self.path_counters[0].load(Ordering::Relaxed),
            held: self.path_counters[1].load(Ordering::Relaxed),
            held_full: self.path_counters[2].load(Ordering::Relaxed),
        }
    }

    /// Publishes a header-copy endpoint's handle table counters.
    fn publish_parked(&self, p: &Parked) {
        let v = [p.bad_handle, p.held() as u64, p.full];
        for (a, v) in self.path_counters.iter().zip(v) {
            a.store(v, Ordering::Relaxed);
        }
    }
}

/// The endpoints as published to the workers.
#[derive(Debug, Default)]
pub(crate) struct EpTable {
    eps: Vec<Arc<EpEntry>>,
    /// By port: whether any endpoint is bound to it.
    on_port: Vec<bool>,
}

/// The control side's endpoint state.
#[derive(Debug)]
pub(crate) struct EpState {
    next_id: u64,
    eps: Vec<Arc<EpEntry>>,
    limits: EndpointLimits,
    /// Endpoints whose client went away, reclaimed so far (those for garbage too).
    reclaimed: u64,
    /// Of those, the endpoints reclaimed for writing garbage.
    reclaimed_garbage: u64,
}

/// What [`crate::live::Shared`] holds for endpoints.
#[derive(Debug)]
pub(crate) struct Endpoints {
    pub slot: Arc<Slot<EpTable>>,
    state: Mutex<EpState>,
    ports: usize,
}

impl Endpoints {
    pub fn new(ports: usize) -> Self {
        Endpoints {
            slot: Slot::new(None),
            state: Mutex::new(EpState {
                next_id: 1,
                eps: Vec::new(),
                limits: EndpointLimits::default(),
                reclaimed: 0,
                reclaimed_garbage: 0,
            }),
            ports,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, EpState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes the state's endpoints (called under the state lock).
    fn publish(&self, st: &EpState) {
        let table = if st.eps.is_empty() {
            None
        } else {
            let mut on_port = vec![false; self.ports];
            for e in st.eps.iter().filter(|e| e.matcher.is_some()) {
                on_port[usize::from(e.port)] = true;
            }
            Some(Arc::new(EpTable { eps: st.eps.clone(), on_port }))
        };
        self.slot.publish(table);
    }
}

/// Ring entries, frame size and frames when a request leaves them out.
const DEFAULT_RING: u32 = 256;
const DEFAULT_FRAME: u32 = 2048;
const DEFAULT_FRAMES: u32 = 512;

impl Live {
    /// Opens an endpoint for `req`, for a client with pid `pid` (for the per-client
    /// limit), alive while `live` says so (the control side's `ClientWatch` marks it).
    pub fn endpoint_open(
        &self,
        req: &EndpointRequest,
        pid: Option<i32>,
        live: Liveness,
    ) -> Result<OpenedEndpoint, LiveError> {
        let port = self
            .shared
            .port_names
            .iter()
            .position(|p| *p == req.port)
            .ok_or_else(|| LiveError::NoPort { name: req.port.clone() })?;
        let matcher = match (req.matches, &req.map) {
            (Some(m), _) => Some(m),
            (None, None) => Some(ChannelMatch::default()),
            (None, Some(_)) => None,
        };
        if let Some(m) = matcher {
            m.check().map_err(|why| LiveError::BadTag { port: req.port.clone(), why })?;
        }
        let slot = match &req.map {
            None => None,
            Some(s) => {
                let (ext, map, domain) = self.endpoint_map(s.extension.as_deref(), &s.name)?;
                if !domain.may_use_port(&req.port) {
                    let domain = domain.name().to_string();
                    return Err(LiveError::Refused { ext, domain, port: req.port.clone() });
                }
                Some((map, MapSlot { extension: Some(ext), ..s.clone() }))
            }
        };
        let domain = req.domain.clone().unwrap_or_else(|| "default".to_string());
        let Some(dom) = self.shared.domains.iter().find(|d| d.name() == domain) else {
            return Err(LiveError::NoDomain { name: domain });
        };
        // Header-copy and in-place returns name their egress port: only the ports the
        // endpoint's domain may use.
        let egress_ok: Vec<bool> =
            self.shared.port_names.iter().map(|p| dom.may_use_port(p)).collect();
        let domain_ix = self.shared.domain_index(&domain).unwrap_or(u16::MAX);
        let applets = match &req.applets {
            Some(name) => Some(self.endpoint_applets(name, &domain)?),
            None => None,
        };
        let eps = &self.shared.endpoints;
        let limits = eps.lock().limits;
        let over = |what: &'static str, got: u32, max: u32| {
            (got > max).then_some(LiveError::EndpointSize { what, got, max })
        };
        let (ring, frame, frames) = (
            req.ring_entries.unwrap_or(DEFAULT_RING),
            req.frame_size.unwrap_or(DEFAULT_FRAME),
            req.frames.unwrap_or(DEFAULT_FRAMES),
        );
        if let Some(e) = over("ring_entries", ring, limits.max_ring_entries)
            .or_else(|| over("frame_size", frame, limits.max_frame_size))
            .or_else(|| over("frames", frames, limits.max_frames))
        {
            return Err(e);
        }
        let layout = Layout::new(ring, frame, frames)
            .map_err(|e| LiveError::BadLayout { why: e.to_string() })?;
        let path = req.path.unwrap_or_default();
        let header_bytes = match (path, req.header_bytes) {
            (HostPath::HeaderCopy, h) => {
                let h = h.unwrap_or(HEADER_DEFAULT);
                if !(14..=HEADER_MAX).contains(&h) {
                    let why = format!("header_bytes {h} is outside 14..={HEADER_MAX}");
                    return Err(LiveError::BadLayout { why });
                }
                h
            }
            (_, Some(_)) => {
                let why = "header_bytes needs path \"header-copy\"".to_string();
                return Err(LiveError::BadLayout { why });
            }
            (_, None) => 0,
        };
        let multi_buffer = req.multi_buffer.unwrap_or(false);
        if multi_buffer && path != HostPath::Frames {
            let why = "multi_buffer needs path \"frames\"".to_string();
            return Err(LiveError::BadLayout { why });
        }
        let mut st = eps.lock();
        if st.eps.len() >= st.limits.max_endpoints {
            return Err(LiveError::EndpointLimit {
                what: "endpoints on the adapter",
                max: st.limits.max_endpoints,
            });
        }
        if pid.is_some()
            && st.eps.iter().filter(|e| e.pid == pid).count() >= st.limits.max_per_client
        {
            return Err(LiveError::EndpointLimit {
                what: "endpoints of one client",
                max: st.limits.max_per_client,
            });
        }
        if let Some(e) = st
            .eps
            .iter()
            .find(|e| matcher.is_some() && usize::from(e.port) == port && e.matcher == matcher)
        {
            return Err(LiveError::TagTaken { port: req.port.clone(), id: e.id });
        }
        let id = st.next_id;
        if let Some((m, s)) = &slot {
            // Ids stay far below 2^32 (one per open); the slot holds the low half.
            m.bind_endpoint(s.index, id as u32).map_err(|source| LiveError::Slot {
                ext: s.extension.clone().unwrap_or_default(),
                map: s.name.clone(),
                index: s.index,
                source: Box::new(source),
            })?;
        }
        let unbind = |slot: &Option<(Arc<spine_maps::Map>, MapSlot)>| {
            if let Some((m, s)) = slot {
                m.unbind_endpoint(s.index, id as u32);
            }
        };
        let setup =
            |e: spine_endpoint::EndpointError| LiveError::EndpointSetup { why: e.to_string() };
        let made = (|| {
            let mut end = AdapterEnd::create(layout).map_err(setup)?;
            end.set_multi_buffer(multi_buffer);
            let wake = EventFd::new().map_err(setup)?;
            let dup = |fd: std::os::fd::BorrowedFd<'_>| {
                fd.try_clone_to_owned()
                    .map_err(|e| LiveError::EndpointSetup { why: format!("dup: {e}") })
            };
            let (region, wake_fd) = (dup(end.shm().fd())?, dup(wake.fd())?);
            Ok((end, wake, region, wake_fd))
        })();
        let (end, wake, region, wake_fd) = made.inspect_err(|_| unbind(&slot))?;
        st.next_id += 1;
        let entry = Arc::new(EpEntry {
            id,
            port: port as u16,
            matcher,
            slot,
            domain,
            domain_ix,
            applets,
            applet_counters: Default::default(),
            layout,
            pid,
            cell: Mutex::new(Some((end, wake))),
            live,
            counters: Default::default(),
            served: Default::default(),
            path,
            header_bytes,
            multi_buffer,
            egress_ok,
            path_counters: Default::default(),
            garbage_limit: st.limits.garbage_limit,
            garbage: Default::default(),
        });
        st.eps.push(entry.clone());
        eps.publish(&st);
        drop(st);
        Ok(OpenedEndpoint { view: self.endpoint_view(&entry), region, wake: wake_fd })
    }

    fn endpoint_view(&self, e: &EpEntry) -> EndpointView {
        EndpointView {
            id: e.id,
            port: self.shared.port_names[usize::from(e.port)].clone(),
            matches: e.matcher,
            map: e.slot.as_ref().map(|(_, s)| s.clone()),
            domain: e.domain.clone(),
            applets: e.applets.as_ref().map(|a| a.extension.clone()),
            ring_entries: e.layout.ring_entries,
            frame_size: e.layout.frame_size,
            frames: e.layout.frames,
            path: e.path,
            multi_buffer: e.multi_buffer,
            port_index: e.port,
            pid: e.pid,
            served: e.served.load(Ordering::Relaxed),
            counters: e.counters(),
        }
    }

    /// The endpoints open now, with their counters.
    pub fn endpoints(&self) -> Vec<EndpointView> {
        let eps: Vec<Arc<EpEntry>> = self.shared.endpoints.lock().eps.clone();
        eps.iter().map(|e| self.endpoint_view(e)).collect()
    }

    /// Closes endpoint `id`: it leaves the table, and its worker drops it (unmapping its
    /// region) at its next round.
    pub fn endpoint_close(&self, id: u64) -> Result<EndpointView, LiveError> {
        let eps = &self.shared.endpoints;
        let mut st = eps.lock();
        let at = st.eps.iter().position(|e| e.id == id).ok_or(LiveError::NoEndpoint { id })?;
        let e = st.eps.remove(at);
        e.live.mark_dead();
        e.unbind();
        eps.publish(&st);
        drop(st);
        Ok(self.endpoint_view(&e))
    }

    /// Removes the endpoints whose client is gone (their liveness marked dead); returns
    /// their ids.
    pub fn endpoint_reap(&self) -> Vec<u64> {
        let eps = &self.shared.endpoints;
        let mut st = eps.lock();
        if !st.eps.iter().any(|e| e.live.is_dead()) {
            return Vec::new();
        }
        let (gone, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut st.eps).into_iter().partition(|e| e.live.is_dead());
        st.eps = kept;
        st.reclaimed += gone.len() as u64;
        st.reclaimed_garbage +=
            gone.iter().filter(|e| e.garbage.load(Ordering::Relaxed)).count() as u64;
        gone.iter().for_each(|e| e.unbind());
        eps.publish(&st);
        gone.iter().map(|e| e.id).collect()
    }

    /// How many endpoints were reclaimed because their client went away (or wrote
    /// more garbage than [`EndpointLimits::garbage_limit`]).
    pub fn endpoints_reclaimed(&self) -> u64 {
        self.shared.endpoints.lock().reclaimed
    }

    /// How many of those were reclaimed for writing garbage.
    pub fn endpoints_reclaimed_for_garbage(&self) -> u64 {
        self.shared.endpoints.lock().reclaimed_garbage
    }

    pub fn endpoint_limits(&self) -> EndpointLimits {
        self.shared.endpoints.lock().limits
    }

    /// Sets the limits later opens are checked against (open endpoints stay).
    pub fn set_endpoint_limits(&self, limits: EndpointLimits) {
        self.shared.endpoints.lock().limits = limits;
    }
}

/// An endpoint its port's home worker owns.
#[derive(Debug)]
pub(crate) struct Owned {
    pub entry: Arc<EpEntry>,
    pub end: AdapterEnd,
    wake: EventFd,
    /// Something was delivered this round: signal the eventfd at its end.
    pub woke: bool,
    /// This worker's runners of its applets (`crate::applets`), made when it took the
    /// endpoint; `None` for an endpoint without applets.
    pub applets: Option<Box<crate::applets::OwnedApplets>>,
    /// A header-copy endpoint's buffers held for its client (`None` for other paths).
    pub parked: Option<Parked>,
}

impl Owned {
    #[inline]
    pub fn port(&self) -> u16 {
        self.entry.port
    }

    #[inline]
    pub fn matches(&self, f: &[u8]) -> bool {
        self.entry.matcher.as_ref().is_some_and(|m| m.matches(f))
    }

    #[inline]
    pub fn id(&self) -> u32 {
        self.entry.id as u32
    }

    /// Publishes its counters (the endpoint's, its applets' and its held buffers') to
    /// its entry.
    fn publish(&self) {
        self.entry.publish(&self.end.stats());
        self.publish_rest();
    }

    /// Publishes its applets' and its held buffers' counters.
    fn publish_rest(&self) {
        if let Some(a) = &self.applets {
            self.entry.applet_counters.store(&a.counts);
        }
        if let Some(p) = &self.parked {
            self.entry.publish_parked(p);
        }
    }

    /// What travels on it.
    #[inline]
    pub fn path(&self) -> HostPath {
        self.entry.path
    }

    /// Whether a return may leave on port `egress` (it exists, and the endpoint's
    /// domain may use it).
    #[inline]
    pub fn may_send(&self, egress: u16) -> bool {
        self.entry.egress_ok.get(usize::from(egress)).copied().unwrap_or(false)
    }

    /// Header-copy: bytes of each frame delivered.
    #[inline]
    pub fn header_bytes(&self) -> u16 {
        self.entry.header_bytes
    }

    /// Its pool buffers go to `out` (it is going): the header-copy table's.
    #[cold]
    fn release(&mut self, out: &mut Vec<spine_pool::Buf>) {
        if let Some(p) = self.parked.as_mut() {
            out.extend(p.drain());
            self.entry.publish_parked(p);
        }
    }

    /// Its domain's index among the adapter's domains.
    #[inline]
    pub fn domain_ix(&self) -> u16 {
        self.entry.domain_ix
    }
}

/// A worker's view of the endpoints.
#[derive(Debug)]
pub(crate) struct WorkerEps {
    reader: SlotReader<EpTable>,
    /// By port: whether an endpoint is bound to it (any worker's).
    pub on_port: Vec<bool>,
    /// The endpoints this worker serves.
    pub owned: Vec<Owned>,
    /// A take found its entry locked: look again next round.
    retry: bool,
    /// Pool buffers of endpoints dropped (a header-copy endpoint's held ones): the
    /// worker frees them after the refresh.
    pub released: Vec<spine_pool::Buf>,
}

impl WorkerEps {
    pub fn new(reader: SlotReader<EpTable>, ports: usize) -> Self {
        WorkerEps {
            reader,
            on_port: vec![false; ports],
            owned: Vec::new(),
            retry: true,
            released: Vec::new(),
        }
    }

    /// Once per round: picks up a new table (cold), and drops endpoints whose client is
    /// gone.
    #[inline]
    pub fn refresh(&mut self, me: usize, home: impl Fn(u16) -> usize) {
        if self.reader.refresh_changed() || self.retry {
            self.pick_up(me, home);
        }
        if !self.owned.is_empty() && self.owned.iter().any(|o| o.entry.live.is_dead()) {
            self.drop_dead();
        }
    }

    #[cold]
    fn drop_dead(&mut self) {
        self.owned.retain_mut(|o| {
            if o.entry.live.is_dead() {
                o.release(&mut self.released);
                o.publish();
                o.entry.served.store(false, Ordering::Relaxed);
            }
            !o.entry.live.is_dead()
        });
    }

    #[cold]
    fn pick_up(&mut self, me: usize, home: impl Fn(u16) -> usize) {
        self.retry = false;
        let Some(table) = self.reader.current().cloned() else {
            self.on_port.iter_mut().for_each(|b| *b = false);
            for mut o in self.owned.drain(..) {
                o.release(&mut self.released);
                o.publish();
                o.entry.served.store(false, Ordering::Relaxed);
            }
            return;
        };
        self.on_port.clone_from(&table.on_port);
        self.owned.retain_mut(|o| {
            let keep = table.eps.iter().any(|e| Arc::ptr_eq(e, &o.entry));
            if !keep {
                o.release(&mut self.released);
                o.publish();
                o.entry.served.store(false, Ordering::Relaxed);
            }
            keep
        });
        for e in &table.eps {
            if home(e.port) != me || self.owned.iter().any(|o| Arc::ptr_eq(&o.entry, e)) {
                continue;
            }
            match e.cell.try_lock() {
                Ok(mut cell) => {
                    if let Some((end, wake)) = cell.take() {
                        e.served.store(true, Ordering::Relaxed);
                        let applets = e.applets.as_ref().map(|a| a.runners(me));
                        let parked = (e.path == HostPath::HeaderCopy)
                            .then(|| Parked::new(e.layout.ring_entries));
                        let o = Owned { entry: e.clone(), end, wake, woke: false, applets, parked };
                        self.owned.push(o);
                    }
                }
                Err(_) => self.retry = true,
            }
        }
    }

    /// Does port `p`'s packet `f` go to an endpoint? Only for workers that do not own
    /// them: whether any endpoint of the table matches.
    pub fn any_matches(&self, p: u16, f: &[u8]) -> bool {
        self.reader.current().is_some_and(|t| {
            t.eps.iter().any(|e| e.port == p && e.matcher.is_some_and(|m| m.matches(f)))
        })
    }

    /// The port of endpoint `id` (an endpoint map slot's value) in the current table.
    pub fn port_of(&self, id: u32) -> Option<u16> {
        self.reader.current().and_then(|t| t.eps.iter().find(|e| e.id as u32 == id)).map(|e| e.port)
    }

    /// End of a round: signals the clients something was delivered to, publishes
    /// every owned endpoint's counters, and declares dead an endpoint whose client has
    /// written more garbage than its limit (dropped at the next refresh, reclaimed by
    /// the control side as a dead client's).
    pub fn end_round(&mut self) {
        for o in &mut self.owned {
            if o.woke {
                o.wake.signal();
                o.woke = false;
            }
            let s = o.end.stats();
            o.entry.publish(&s);
            o.publish_rest();
            if s.bad_desc.saturating_add(s.bad_index) >= o.entry.garbage_limit {
                o.entry.garbage.store(true, Ordering::Relaxed);
                o.entry.live.mark_dead();
            }
        }
    }

    /// Every owned endpoint's held buffers go to `released` (the worker is stopping).
    #[cold]
    pub fn release_all(&mut self) {
        for o in &mut self.owned {
            o.release(&mut self.released);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(vlan: Option<u16>, dport: u16, frag: u16) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if let Some(v) = vlan {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&v.to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip[9] = 17;
        f.extend_from_slice(&ip);
        f.extend_from_slice(&1234u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn tags_match_vlan_ethertype_protocol_and_port() {
        let m = |ethertype, ip_proto, dst_port, vlan| ChannelMatch {
            ethertype,
            ip_proto,
            dst_port,
            vlan,
        };
        let udp_7 = m(Some(0x0800), Some(17), Some(7), None);
        assert!(udp_7.matches(&udp4(None, 7, 0)));
        assert!(udp_7.matches(&udp4(Some(5), 7, 0)), "no vlan asked: any");
        assert!(!udp_7.matches(&udp4(None, 8, 0)));
        assert!(!udp_7.matches(&udp4(None, 7, 0x0010)), "a later fragment has no ports");
        assert!(udp_7.matches(&udp4(None, 7, 0x2000)), "the first fragment (MF) does");
        let f = udp4(None, 7, 0);
        assert!(!udp_7.matches(&f[..f.len() - 5]), "truncated before the port");
        let vlan5 = m(None, None, None, Some(5));
        assert!(vlan5.matches(&udp4(Some(5), 9, 0)));
        assert!(!vlan5.matches(&udp4(Some(6), 9, 0)));
        assert!(!vlan5.matches(&udp4(None, 9, 0)), "untagged frames never match a vlan");
        assert!(m(None, None, None, None).matches(&f), "an empty match takes everything");
        assert!(!m(Some(0x86dd), None, None, None).matches(&f));
        assert!(!m(None, None, None, None).matches(&[0u8; 13]), "shorter than Ethernet");
        let mut v6 = vec![0u8; 12];
        v6.extend_from_slice(&[0x86, 0xdd]);
        let mut h = [0u8; 40];
        h[6] = 6;
        v6.extend_from_slice(&h);
        v6.extend_from_slice(&[0, 1, 0, 80]);
        assert!(m(None, Some(6), Some(80), None).matches(&v6));
        assert!(!m(None, Some(17), Some(80), None).matches(&v6));
    }

    /// An IPv6 frame: the extension headers `exts` (each its type and its whole bytes,
    /// the next-header byte filled in here), then `proto` with destination port 80.
    fn udp6(exts: &[(u8, Vec<u8>)], proto: u8) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x86, 0xdd]);
        let mut h = [0u8; 40];
        h[6] = exts.first().map_or(proto, |e| e.0);
        f.extend_from_slice(&h);
        for (i, (_, bytes)) in exts.iter().enumerate() {
            let mut b = bytes.clone();
            b[0] = exts.get(i + 1).map_or(proto, |e| e.0);
            f.extend_from_slice(&b);
        }
        f.extend_from_slice(&[0, 1, 0, 80, 0, 8, 0, 0]);
        f
    }

    #[test]
    fn ipv6_extension_headers_are_walked_to_the_transport_header() {
        let udp80 = ChannelMatch { ip_proto: Some(17), dst_port: Some(80), ..Default::default() };
        let opts = |units: u8| {
            let mut b = vec![0u8; (usize::from(units) + 1) * 8];
            b[1] = units;
            b
        };
        let frag = |offset: u16, more: bool| {
            let mut b = vec![0u8; 8];
            b[2..4].copy_from_slice(&(offset << 3 | u16::from(more)).to_be_bytes());
            b
        };
        let mut ah = vec![0u8; 16];
        ah[1] = 2; // (2 + 2) * 4 = 16 bytes
        assert!(udp80.matches(&udp6(&[], 17)));
        let chain = [(0, opts(0)), (43, opts(2)), (51, ah), (60, opts(1))];
        assert!(udp80.matches(&udp6(&chain, 17)), "hop-by-hop, routing, AH, dest options");
        assert!(!udp80.matches(&udp6(&chain, 6)), "the transport is TCP");
        let tcp = ChannelMatch { ip_proto: Some(6), ..Default::default() };
        assert!(tcp.matches(&udp6(&chain, 6)));
        assert!(udp80.matches(&udp6(&[(44, frag(0, true))], 17)), "the first fragment");
        let later = udp6(&[(44, frag(185, false))], 17);
        assert!(!udp80.matches(&later), "a later fragment has no ports");
        let udp = ChannelMatch { ip_proto: Some(17), ..Default::default() };
        assert!(udp.matches(&later), "but is still UDP");
        let eight: Vec<(u8, Vec<u8>)> = (0..8).map(|_| (60, opts(0))).collect();
        let nine: Vec<(u8, Vec<u8>)> = (0..9).map(|_| (60, opts(0))).collect();
        assert!(udp80.matches(&udp6(&eight, 17)));
        assert!(!udp.matches(&udp6(&nine, 17)), "more headers than are walked");
        let f = udp6(&[(0, opts(3))], 17);
        assert!(!udp.matches(&f[..14 + 40 + 20]), "cut inside an extension header");
        assert!(!udp80.matches(&f[..f.len() - 6]), "cut before the port");
    }

    #[test]
    fn bad_tags_are_refused_naming_the_field() {
        let m = |ethertype, ip_proto, dst_port, vlan| ChannelMatch {
            ethertype,
            ip_proto,
            dst_port,
            vlan,
        };
        assert!(m(None, None, None, Some(4096)).check().unwrap_err().contains("vlan"));
        assert!(m(None, Some(1), Some(7), None).check().unwrap_err().contains("dst_port"));
        assert!(m(None, None, Some(7), None).check().unwrap_err().contains("dst_port"));
        assert!(m(Some(0x0806), Some(17), None, None).check().unwrap_err().contains("ip_proto"));
        assert!(m(Some(0x8100), None, None, None).check().unwrap_err().contains("vlan"));
        assert!(m(Some(0x0100), None, None, None).check().unwrap_err().contains("length"));
        assert!(m(Some(0x0800), Some(17), Some(7), Some(1)).check().is_ok());
    }
}
