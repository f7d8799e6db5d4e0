//! The host application of the host router's data paths (the peer-DMA host-router
//! study; see `docs/ARCHITECTURE.md`, "The host router's four data paths"). A normal
//! program over the client library: it opens one endpoint per router port on a
//! running adapter (every IPv4 frame the port passes), decides each frame's egress
//! port from a small table ([`Table`]), rewrites the MACs, the TTL and the checksum, and
//! hands the frame back to leave on its egress port:
//!
//! - `copy`: the whole frame is delivered into the endpoint's area; the application
//!   writes the rewritten frame into a frame of the egress port's endpoint, which sends
//!   it.
//! - `header-copy`: only the first bytes arrive, inline with a handle; the application
//!   returns the rewritten header with the handle and the egress port, and the adapter
//!   splices it before the payload it kept.
//! - `in-place`: the frame arrives in the area; the application rewrites the header
//!   fields there and hands the same frame back with the egress port, with no copy.
//! - `offload`: the bundled router extension forwards; this program has nothing to do.
//!
//! Frames the host paths do not forward (not plain IPv4, IP options, fragments, TTL 1,
//! no route) are dropped and counted; the offload path leaves those to the kernel.

mod table;

use std::path::Path;

use serde::Deserialize;
use spine_client::{Channel, DataPath, Desc, Endpoint, Match, OpenError, INLINE_BYTES};

pub use table::{rewrite, Route, RouteConfig, Table};

/// Which of the four paths a router uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PathKind {
    Offload,
    Copy,
    HeaderCopy,
    InPlace,
}

impl PathKind {
    pub const ALL: [PathKind; 4] =
        [PathKind::Offload, PathKind::HeaderCopy, PathKind::InPlace, PathKind::Copy];

    pub fn name(self) -> &'static str {
        match self {
            PathKind::Offload => "offload",
            PathKind::Copy => "copy",
            PathKind::HeaderCopy => "header-copy",
            PathKind::InPlace => "in-place",
        }
    }

    /// What the endpoints carry on this path (`None`: no endpoints, offload).
    pub fn data_path(self) -> Option<DataPath> {
        match self {
            PathKind::Offload => None,
            PathKind::Copy => Some(DataPath::Frames),
            PathKind::HeaderCopy => Some(DataPath::HeaderCopy),
            PathKind::InPlace => Some(DataPath::InPlace),
        }
    }
}

impl std::str::FromStr for PathKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        PathKind::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("path '{s}' is not one of offload, copy, header-copy, in-place"))
    }
}

/// A host router's configuration (`router-host.toml`, see `docs/CONFIG.md`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    pub path: PathKind,
    /// The adapter's ports the router serves, by name (each gets an endpoint).
    pub ports: Vec<String>,
    /// Header-copy: bytes of each frame delivered (14..=64; default 64).
    #[serde(default)]
    pub header_bytes: Option<u16>,
    /// Entries per endpoint ring and frames per endpoint area (defaults: the adapter's).
    #[serde(default)]
    pub ring_entries: Option<u32>,
    #[serde(default)]
    pub frames: Option<u32>,
    #[serde(default, rename = "route")]
    pub routes: Vec<RouteConfig>,
}

impl RouterConfig {
    pub fn parse(text: &str) -> Result<RouterConfig, RouterError> {
        toml::from_str(text).map_err(|e| RouterError::Config(e.to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("router-host configuration: {0}")]
    Config(String),
    #[error("route {prefix}: {why}")]
    Route { prefix: String, why: String },
    #[error("endpoint on port '{port}': {source}")]
    Open { port: String, source: OpenError },
    #[error("the adapter did not say the index of port '{port}'")]
    NoPortIndex { port: String },
}

/// What the router did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterStats {
    pub forwarded: u64,
    /// Not the host's to forward (see [`Table::decide`]).
    pub not_routed: u64,
    /// Routed, but the egress endpoint had no room.
    pub no_room: u64,
}

/// A running host router: one endpoint per port.
#[derive(Debug)]
pub struct Router {
    path: PathKind,
    eps: Vec<Endpoint>,
    /// By router port: the adapter's index of the port.
    egress: Vec<u16>,
    table: Table,
    /// Copy path: frames routed back out of their own port, sent after the receive.
    hairpin: Vec<u8>,
    hairpin_lens: Vec<usize>,
    pub stats: RouterStats,
}

/// Frames (or headers) taken from one endpoint per visit at most.
pub const BATCH: usize = 64;

impl Router {
    /// Opens the router's endpoints on the adapter whose control socket is `socket`.
    /// For `offload` there is nothing to open: the router has no endpoint.
    pub fn open(socket: &Path, cfg: &RouterConfig) -> Result<Router, RouterError> {
        let table = Table::new(&cfg.routes, &cfg.ports)?;
        let mut eps = Vec::new();
        let mut egress = Vec::new();
        if let Some(dp) = cfg.path.data_path() {
            for port in &cfg.ports {
                let channel = Channel {
                    matches: Match { ethertype: Some(0x0800), ..Match::default() },
                    path: Some(dp),
                    header_bytes: cfg.header_bytes.filter(|_| dp == DataPath::HeaderCopy),
                    ring_entries: cfg.ring_entries,
                    frames: cfg.frames,
                    ..Channel::port(port)
                };
                let ep = Endpoint::open(socket, &channel)
                    .map_err(|source| RouterError::Open { port: port.clone(), source })?;
                let index = ep
                    .port_index()
                    .ok_or_else(|| RouterError::NoPortIndex { port: port.clone() })?;
                egress.push(index);
                eps.push(ep);
            }
        }
        Ok(Router {
            path: cfg.path,
            eps,
            egress,
            table,
            hairpin: vec![0; BATCH * 2048],
            hairpin_lens: Vec::with_capacity(BATCH),
            stats: RouterStats::default(),
        })
    }

    pub fn path(&self) -> PathKind {
        self.path
    }

    /// One visit to every endpoint, at most [`BATCH`] frames from each; returns how many
    /// frames it took.
    pub fn poll(&mut self) -> usize {
        (0..self.eps.len())
            .map(|i| match self.path {
                PathKind::Offload => 0,
                PathKind::Copy => self.poll_copy(i),
                PathKind::HeaderCopy => self.poll_header(i),
                PathKind::InPlace => self.poll_in_place(i),
            })
            .sum()
    }

    /// Copy: each frame is read in place from endpoint `i`'s area and written, rewritten,
    /// into a frame of the egress port's endpoint (one copy by the host).
    fn poll_copy(&mut self, i: usize) -> usize {
        let (left, rest) = self.eps.split_at_mut(i);
        let (me, right) = rest.split_first_mut().expect("endpoint i exists");
        let (table, stats) = (&self.table, &mut self.stats);
        let (hairpin, lens) = (&mut self.hairpin, &mut self.hairpin_lens);
        lens.clear();
        let n = me.recv(BATCH, |m| {
            let Some(r) = table.decide(m) else {
                stats.not_routed += 1;
                return;
            };
            let copy = |b: &mut [u8]| {
                b.copy_from_slice(m);
                rewrite(b, r);
            };
            let sent = match r.port.cmp(&i) {
                std::cmp::Ordering::Less => left[r.port].send_with(m.len(), copy),
                std::cmp::Ordering::Greater => right[r.port - i - 1].send_with(m.len(), copy),
                std::cmp::Ordering::Equal if m.len() <= 2048 => {
                    let at = lens.len() * 2048;
                    copy(&mut hairpin[at..at + m.len()]);
                    lens.push(m.len());
                    true
                }
                std::cmp::Ordering::Equal => false,
            };
            if sent {
                stats.forwarded += 1;
            } else {
                stats.no_room += 1;
            }
        });
        for (k, &len) in lens.iter().enumerate() {
            let f = &hairpin[k * 2048..k * 2048 + len];
            if !me.send_with(len, |b| b.copy_from_slice(f)) {
                stats.forwarded -= 1;
                stats.no_room += 1;
            }
        }
        n
    }

    /// Header-copy: each header is copied out of the receive ring, rewritten, and
    /// returned on the same endpoint with its handle and the egress port.
    fn poll_header(&mut self, i: usize) -> usize {
        let ep = &mut self.eps[i];
        let max = BATCH.min(ep.tx_room());
        let mut out = [(0u64, 0u16, 0usize, [0u8; INLINE_BYTES]); BATCH];
        let mut k = 0;
        let (table, egress, stats) = (&self.table, &self.egress, &mut self.stats);
        let n = ep.recv_headers(max, |h| {
            let (handle, len) = (h.handle, h.header.len());
            let mut hdr = [0u8; INLINE_BYTES];
            hdr[..len].copy_from_slice(h.header);
            let port = match table.decide(&hdr[..len]) {
                Some(r) => {
                    let r = *r;
                    rewrite(&mut hdr, &r);
                    stats.forwarded += 1;
                    egress[r.port]
                }
                None => {
                    stats.not_routed += 1;
                    Desc::EGRESS_DROP
                }
            };
            out[k] = (handle, port, len, hdr);
            k += 1;
        });
        for (handle, port, len, hdr) in &out[..k] {
            // Room was counted before receiving: every return fits.
            let _ = ep.return_header(*handle, *port, &hdr[..*len]);
        }
        n
    }

    /// In-place: each frame is rewritten where it was received and handed back.
    fn poll_in_place(&mut self, i: usize) -> usize {
        let (table, egress, stats) = (&self.table, &self.egress, &mut self.stats);
        self.eps[i].forward_in_place(BATCH, |f| match table.decide(f) {
            Some(r) => {
                let r = *r;
                rewrite(f, &r);
                stats.forwarded += 1;
                Some(egress[r.port])
            }
            None => {
                stats.not_routed += 1;
                None
            }
        })
    }
}

/// The CPU time the calling thread has used, in nanoseconds
/// (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_example_parses_and_bad_files_are_refused() {
        let cfg = RouterConfig::parse(include_str!("../../../examples/router-host.toml")).unwrap();
        assert_eq!(cfg.path, PathKind::HeaderCopy);
        assert_eq!(cfg.ports, ["eth1", "eth2"]);
        Table::new(&cfg.routes, &cfg.ports).unwrap();
        let e = RouterConfig::parse("path = \"dma\"\nports = []").unwrap_err().to_string();
        assert!(e.contains("dma"), "{e}");
        let e = RouterConfig::parse("path = \"copy\"\nports = []\nspeed = 1").unwrap_err();
        assert!(e.to_string().contains("speed"), "{e}");
        assert_eq!("in-place".parse::<PathKind>(), Ok(PathKind::InPlace));
        assert!("fast".parse::<PathKind>().unwrap_err().contains("offload, copy"));
    }
}
