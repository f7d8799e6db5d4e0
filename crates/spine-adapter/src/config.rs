//! `adapter.toml`: what `spine run` builds. Parsing checks everything that can be checked
//! without opening a port or loading a program (types, ranges, names that must refer to
//! each other); every error carries the path of the key it is about, as
//! `port[1].interface`, and unknown keys are errors. The schema is documented, with a
//! complete example, in `docs/CONFIG.md`.

mod fib;
mod reader;

use std::path::{Path, PathBuf};

use spine_pool::PoolConfig;
use spine_ports::{AttachMode, BindMode};
use spine_runtime::{Budget, DomainSpec, EngineKind, FaultPolicy, Quota};
use toml::Value;

pub use fib::{FibConfig, FibInterface, FibNeighbour};
use reader::{err, type_name, Table};

/// A configuration that parsed and whose names all resolve.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub adapter: AdapterConfig,
    pub ports: Vec<PortConfig>,
    /// Every domain but the built-in `default`, which extensions get when they name none.
    pub domains: Vec<DomainSpec>,
    pub extensions: Vec<ExtensionConfig>,
    pub attachments: Vec<Attachment>,
    pub partition: Vec<PartitionEntry>,
    pub maps: Vec<MapInit>,
    /// Ring buffers `spine run` drains while the adapter runs.
    pub ringbufs: Vec<RingbufOutput>,
    /// `[fib]`: what `bpf_fib_lookup` answers from.
    pub fib: Option<FibConfig>,
}

/// How workers take their sources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Assign {
    /// Each port is received by one worker (round-robin over ports) and each packet is
    /// handled by the worker its flow hash picks: software RSS.
    #[default]
    Rss,
    /// `[[partition]]` says which worker receives and handles each port; unlisted ports
    /// go to worker 0. Packets are never handed between workers except by redirects.
    Partition,
}

/// The `[adapter]` and `[pool]` tables.
#[derive(Debug, Clone, PartialEq)]
pub struct AdapterConfig {
    pub workers: usize,
    /// CPU of each worker; `None`: no pinning.
    pub cpus: Option<Vec<usize>>,
    pub engine: EngineKind,
    /// Packets one source may deliver per worker round.
    pub burst: usize,
    pub assign: Assign,
    /// Microseconds a worker sleeps after a run of empty rounds; 0 polls without pause.
    pub idle_sleep_us: u64,
    /// Events each worker's trace ring holds when tracing is on.
    pub trace_events: usize,
    /// Slots of each worker-to-worker ring.
    pub peer_ring: usize,
    pub pool: PoolConfig,
    /// Milliseconds a bulk message arriving over a tunnel in pieces may take to be
    /// whole before it is discarded (`msg_bulk_expired`).
    pub bulk_expiry_ms: u64,
    /// Milliseconds a bulk message in reassembly may go without a new piece before the
    /// receiver NACKs its missing pieces (0: never); below `bulk_expiry_ms`.
    pub bulk_nack_ms: u64,
    /// Bulk messages each worker keeps for retransmission until ACKed (0: none).
    pub bulk_retx_slots: usize,
    /// NACKs of one bulk message the sender honours.
    pub bulk_retx_max: u32,
    /// Bulk messages in reassembly per tunnel port.
    pub bulk_reasm_slots: usize,
    /// The largest bulk message a tunnel port reassembles, in bytes.
    pub bulk_reasm_bytes: usize,
}

impl Default for AdapterConfig {
    /// One worker pinned to CPU 0, the JIT, bursts of 32, 4,096 buffers of 2 KiB.
    fn default() -> Self {
        AdapterConfig {
            workers: 1,
            cpus: Some(vec![0]),
            engine: EngineKind::Jit,
            burst: 32,
            assign: Assign::Rss,
            idle_sleep_us: 50,
            trace_events: 1 << 16,
            peer_ring: 1024,
            pool: PoolConfig::new(4096),
            bulk_expiry_ms: crate::reasm::DEFAULT_EXPIRY_NS / 1_000_000,
            bulk_nack_ms: crate::reasm::DEFAULT_NACK_NS / 1_000_000,
            bulk_retx_slots: crate::retx::DEFAULT_SLOTS,
            bulk_retx_max: crate::retx::DEFAULT_MAX_RESENDS,
            bulk_reasm_slots: crate::reasm::SLOTS,
            bulk_reasm_bytes: spine_endpoint::remote::BULK_MAX,
        }
    }
}

/// One `[[port]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PortConfig {
    pub name: String,
    pub kind: PortKind,
    /// The port that receives this port's `XDP_PASS` packets (normally a TAP).
    pub host_path: Option<String>,
    /// The interface index extensions see and redirect to; OS ports use the kernel's.
    pub ifindex: Option<u32>,
}

/// What a port is attached to.
#[derive(Debug, Clone, PartialEq)]
pub enum PortKind {
    /// In memory: replays packets (or nothing: a sink) and counts what it is sent.
    Mem {
        packets: MemPackets,
        limit: Option<u64>,
    },
    /// Capture files: `input` replayed once, transmissions written to `output`.
    Pcap {
        input: Option<PathBuf>,
        output: Option<PathBuf>,
    },
    AfPacket {
        interface: String,
        promiscuous: bool,
    },
    AfXdp {
        interface: String,
        queue: u32,
        bind: BindMode,
        attach: AttachMode,
        ring_size: u32,
        /// Multi-buffer frames (`XDP_USE_SG`): frames longer than a buffer arrive and
        /// leave as chains of buffers.
        frags: bool,
    },
    /// A TAP device created by the port (and gone when it closes).
    Tap {
        interface: String,
        up: bool,
        /// The router port this TAP is the twin of (see [`TwinConfig`]).
        twin: Option<TwinConfig>,
    },
    /// A UDP tunnel to another adapter: frames in datagrams between `local` and `peer`.
    Udp {
        local: std::net::SocketAddr,
        peer: std::net::SocketAddr,
        /// A file of 32 random bytes shared with the peer: every datagram is then sealed
        /// and checked (see `spine_ports::TunnelAuth`). Read when the port opens; the
        /// configuration holds only the path.
        key_file: Option<PathBuf>,
    },
}

impl PortKind {
    pub fn name(&self) -> &'static str {
        match self {
            PortKind::Mem { .. } => "mem",
            PortKind::Pcap { .. } => "pcap",
            PortKind::AfPacket { .. } => "afpacket",
            PortKind::AfXdp { .. } => "afxdp",
            PortKind::Tap { .. } => "tap",
            PortKind::Udp { .. } => "udp",
        }
    }

    /// The receive queue the port reads (AF_XDP binds one; others have one queue, 0).
    pub fn queue(&self) -> u32 {
        match self {
            PortKind::AfXdp { queue, .. } => *queue,
            _ => 0,
        }
    }
}

/// A TAP twin: the kernel's view of a router port. It takes the port's MAC and MTU and
/// these addresses, is the port's host path, and stands for the port in a mirrored FIB
/// (routes and neighbours the kernel keeps on the twin are the port's).
#[derive(Debug, Clone, PartialEq)]
pub struct TwinConfig {
    /// The port (by name) the TAP is the twin of.
    pub port: String,
    /// Given to the TAP in the kernel (`ip addr add`), primary first.
    pub addresses: Vec<(std::net::IpAddr, u8)>,
}

/// What a mem port replays.
#[derive(Debug, Clone, PartialEq)]
pub enum MemPackets {
    /// Nothing: a sink.
    None,
    /// The packets of a pcap or pcapng file.
    Capture(PathBuf),
    /// The deterministic generator's mix (well-formed and malformed).
    Generate { count: usize, seed: u64, max_len: usize },
    /// 64-byte Ethernet/IPv4/UDP frames (60 bytes without FCS) over `flows` flows.
    Udp4 { flows: u32, size: usize },
}

/// One `[[extension]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionConfig {
    pub name: String,
    pub object: ObjectSource,
    /// Section or program name; `None`: the object's first XDP program.
    pub section: Option<String>,
    /// Program type of `section`, whatever its name says (`type = "xdp"`), as
    /// `ip link ... sec S` or `bpftool prog load ... type xdp` load a section.
    pub prog_type: Option<spine_obj::ProgType>,
    /// `None`: the built-in `default` domain.
    pub domain: Option<String>,
    /// `max_entries` of maps the object declares without a size, as its own loader
    /// would set them (`max_entries = { rx_cnt = 2 }`).
    pub max_entries: Vec<(String, u32)>,
}

/// Where an extension's ELF object comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum ObjectSource {
    File(PathBuf),
    /// One of `spine_progs::all()`, by name.
    Bundled(String),
}

/// `[[attach]]`: an extension on a port's receive hook.
#[derive(Debug, Clone, PartialEq)]
pub struct Attachment {
    pub extension: String,
    pub port: String,
    /// Path of the entry, for errors found when building.
    pub path: String,
}

/// `[[partition]]`: which worker receives a port's queue.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionEntry {
    pub port: String,
    pub queue: u32,
    pub worker: usize,
}

/// `[[map]]`: initial contents of one extension's map.
#[derive(Debug, Clone, PartialEq)]
pub struct MapInit {
    pub extension: String,
    pub map: String,
    pub entries: Vec<MapEntry>,
    pub path: String,
}

/// `[[ringbuf]]`: a ring-buffer map of one extension whose records `spine run` reads
/// while traffic flows and writes out as JSON lines.
#[derive(Debug, Clone, PartialEq)]
pub struct RingbufOutput {
    pub extension: String,
    pub map: String,
    /// The file the records go to (created or truncated); `None`: standard output.
    pub output: Option<PathBuf>,
    /// Path of the entry (`ringbuf[0]`), for errors found when building.
    pub path: String,
}

/// One key/value pair, each checked against the map's sizes when the map exists.
#[derive(Debug, Clone, PartialEq)]
pub struct MapEntry {
    pub key: Bytes,
    pub value: Bytes,
    /// Path of the entry (`map[0].entries[2]`).
    pub path: String,
}

/// A key or value as written: hex bytes, or an integer stored little-endian in however
/// many bytes the map's key or value has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bytes {
    Hex(Vec<u8>),
    Int(u64),
}

impl Bytes {
    /// The bytes for a field of `size` bytes; `None` if they do not fit it exactly (hex)
    /// or at all (integers).
    pub fn to_size(&self, size: usize) -> Option<Vec<u8>> {
        match self {
            Bytes::Hex(b) => (b.len() == size).then(|| b.clone()),
            Bytes::Int(v) => {
                let le = v.to_le_bytes();
                let used = 8 - (v.leading_zeros() as usize / 8);
                if used > size {
                    return None;
                }
                let mut out = vec![0u8; size];
                let n = size.min(8);
                out[..n].copy_from_slice(&le[..n]);
                Some(out)
            }
        }
    }
}

/// A configuration error: the key it is about and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct ConfigError {
    /// Dotted path with array indices from 0: `port[1].interface`; empty for the file.
    pub path: String,
    pub problem: Problem,
}

#[derive(Debug, thiserror::Error)]
pub enum Problem {
    #[error("cannot read the file: {0}")]
    Io(#[source] std::io::Error),
    #[error("not valid TOML: {0}")]
    Syntax(String),
    #[error("missing")]
    Missing,
    #[error("unknown key (allowed here: {allowed})")]
    UnknownKey { allowed: String },
    #[error("expected {expected}, found {found}")]
    Type { expected: &'static str, found: &'static str },
    #[error("{got} is out of range {min}..={max}")]
    Range { min: i64, max: i64, got: i64 },
    #[error("'{got}' is not one of: {}", allowed.join(", "))]
    Choice { allowed: &'static [&'static str], got: String },
    #[error("no {what} named '{name}'")]
    NoSuch { what: &'static str, name: String },
    #[error("{what} '{name}' is defined twice")]
    Duplicate { what: &'static str, name: String },
    #[error("'{0}' is not hex bytes (pairs of hex digits; spaces, ':' and '_' may separate them)")]
    Hex(String),
    #[error("{0}")]
    Invalid(&'static str),
    #[error("{reason}: '{name}'")]
    Conflict { reason: &'static str, name: String },
}

const PORT_KINDS: &[&str] = &["mem", "pcap", "afpacket", "afxdp", "tap", "udp"];
const PROG_TYPES: &[&str] = &["xdp", "xdp-frags"];

impl Config {
    /// Reads and checks `path`; relative file names inside are relative to its folder.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| err("", Problem::Io(e)))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Config::parse(&text, base)
    }

    /// Parses `text`; relative file names are taken relative to `base`.
    pub fn parse(text: &str, base: &Path) -> Result<Config, ConfigError> {
        let doc: toml::Table =
            text.parse().map_err(|e: toml::de::Error| err("", Problem::Syntax(e.to_string())))?;
        let mut top = Table::new("", &doc);
        let adapter = parse_adapter(&mut top)?;
        let ports = top
            .tables("port")?
            .into_iter()
            .map(|t| parse_port(t, base))
            .collect::<Result<Vec<_>, _>>()?;
        let domains =
            top.tables("domain")?.into_iter().map(parse_domain).collect::<Result<Vec<_>, _>>()?;
        let extensions = top
            .tables("extension")?
            .into_iter()
            .map(|t| parse_extension(t, base))
            .collect::<Result<Vec<_>, _>>()?;
        let attachments =
            top.tables("attach")?.into_iter().map(parse_attach).collect::<Result<Vec<_>, _>>()?;
        let partition = top
            .tables("partition")?
            .into_iter()
            .map(parse_partition)
            .collect::<Result<Vec<_>, _>>()?;
        let maps = top.tables("map")?.into_iter().map(parse_map).collect::<Result<Vec<_>, _>>()?;
        let ringbufs = top
            .tables("ringbuf")?
            .into_iter()
            .map(|t| parse_ringbuf(t, base))
            .collect::<Result<Vec<_>, _>>()?;
        let fib = top.opt_table("fib")?.map(|t| fib::parse_fib(t, base)).transpose()?;
        top.finish()?;
        let mut ports = ports;
        twins(&mut ports)?;
        let cfg = Config {
            adapter,
            ports,
            domains,
            extensions,
            attachments,
            partition,
            maps,
            ringbufs,
            fib,
        };
        cfg.check_names()?;
        Ok(cfg)
    }

    /// Cross-references: every name used is defined once, and the wiring makes sense.
    fn check_names(&self) -> Result<(), ConfigError> {
        fn dup<'a>(
            names: impl Iterator<Item = &'a str>,
            list: &str,
            what: &'static str,
        ) -> Result<(), ConfigError> {
            let mut seen: Vec<&str> = Vec::new();
            for (i, n) in names.enumerate() {
                if seen.contains(&n) {
                    return Err(err(
                        format!("{list}[{i}].name"),
                        Problem::Duplicate { what, name: n.to_string() },
                    ));
                }
                seen.push(n);
            }
            Ok(())
        }
        dup(self.ports.iter().map(|p| p.name.as_str()), "port", "port")?;
        dup(self.domains.iter().map(|d| d.name.as_str()), "domain", "domain")?;
        dup(self.extensions.iter().map(|e| e.name.as_str()), "extension", "extension")?;
        let port = |name: &str| self.ports.iter().position(|p| p.name == name);
        let mut host_of: Vec<Option<usize>> = vec![None; self.ports.len()];
        for (i, p) in self.ports.iter().enumerate() {
            let Some(h) = &p.host_path else { continue };
            let path = format!("port[{i}].host_path");
            let j = port(h)
                .ok_or_else(|| err(&path, Problem::NoSuch { what: "port", name: h.clone() }))?;
            if j == i {
                return Err(err(
                    path,
                    Problem::Conflict {
                        reason: "a port cannot be its own host path",
                        name: h.clone(),
                    },
                ));
            }
            if self.ports[j].host_path.is_some() {
                return Err(err(
                    path,
                    Problem::Conflict {
                        reason: "a host path has no host path of its own",
                        name: h.clone(),
                    },
                ));
            }
            if host_of[j].replace(i).is_some() {
                return Err(err(
                    path,
                    Problem::Conflict {
                        reason: "already the host path of another port",
                        name: h.clone(),
                    },
                ));
            }
        }
        for (i, p) in self.domains.iter().enumerate() {
            for (k, name) in p.ports.iter().flatten().enumerate() {
                if port(name).is_none() {
                    return Err(err(
                        format!("domain[{i}].ports[{k}]"),
                        Problem::NoSuch { what: "port", name: name.clone() },
                    ));
                }
            }
        }
        for (i, e) in self.extensions.iter().enumerate() {
            if let Some(d) = &e.domain {
                if d != "default" && !self.domains.iter().any(|x| &x.name == d) {
                    return Err(err(
                        format!("extension[{i}].domain"),
                        Problem::NoSuch { what: "domain", name: d.clone() },
                    ));
                }
            }
        }
        let ext = |name: &str| self.extensions.iter().any(|e| e.name == name);
        let mut attached: Vec<&str> = Vec::new();
        for a in &self.attachments {
            if !ext(&a.extension) {
                return Err(err(
                    format!("{}.extension", a.path),
                    Problem::NoSuch { what: "extension", name: a.extension.clone() },
                ));
            }
            if port(&a.port).is_none() {
                return Err(err(
                    format!("{}.port", a.path),
                    Problem::NoSuch { what: "port", name: a.port.clone() },
                ));
            }
            if attached.contains(&a.port.as_str()) {
                return Err(err(
                    format!("{}.port", a.path),
                    Problem::Conflict {
                        reason: "a port has one receive hook, already taken",
                        name: a.port.clone(),
                    },
                ));
            }
            attached.push(&a.port);
        }
        for (i, p) in self.partition.iter().enumerate() {
            let Some(j) = port(&p.port) else {
                return Err(err(
                    format!("partition[{i}].port"),
                    Problem::NoSuch { what: "port", name: p.port.clone() },
                ));
            };
            if self.ports[j].kind.queue() != p.queue {
                return Err(err(
                    format!("partition[{i}].queue"),
                    Problem::Invalid("the port does not receive from this queue"),
                ));
            }
            if p.worker >= self.adapter.workers {
                let max = self.adapter.workers as i64 - 1;
                return Err(err(
                    format!("partition[{i}].worker"),
                    Problem::Range { min: 0, max, got: p.worker as i64 },
                ));
            }
            if self.partition[..i].iter().any(|q| q.port == p.port) {
                return Err(err(
                    format!("partition[{i}].port"),
                    Problem::Duplicate { what: "partition of port", name: p.port.clone() },
                ));
            }
        }
        if !self.partition.is_empty() && self.adapter.assign != Assign::Partition {
            return Err(err(
                "partition",
                Problem::Invalid("[[partition]] needs adapter.assign = \"partition\""),
            ));
        }
        for m in &self.maps {
            if !ext(&m.extension) {
                return Err(err(
                    format!("{}.extension", m.path),
                    Problem::NoSuch { what: "extension", name: m.extension.clone() },
                ));
            }
        }
        for (i, r) in self.ringbufs.iter().enumerate() {
            if !ext(&r.extension) {
                return Err(err(
                    format!("{}.extension", r.path),
                    Problem::NoSuch { what: "extension", name: r.extension.clone() },
                ));
            }
            let same = |o: &RingbufOutput| o.extension == r.extension && o.map == r.map;
            if self.ringbufs[..i].iter().any(same) {
                return Err(err(
                    format!("{}.name", r.path),
                    Problem::Duplicate { what: "ring buffer", name: r.map.clone() },
                ));
            }
            if let Some(o) = &r.output {
                if self.ringbufs[..i].iter().any(|x| x.output.as_ref() == Some(o)) {
                    return Err(err(
                        format!("{}.output", r.path),
                        Problem::Conflict {
                            reason: "already the output of another ring buffer",
                            name: o.display().to_string(),
                        },
                    ));
                }
            }
        }
        let afxdp_ifs: Vec<(usize, &str)> = self
            .ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| match &p.kind {
                PortKind::AfXdp { interface, .. } => Some((i, interface.as_str())),
                _ => None,
            })
            .collect();
        for (k, (i, ifname)) in afxdp_ifs.iter().enumerate() {
            if afxdp_ifs[..k].iter().any(|(_, o)| o == ifname) {
                return Err(err(
                    format!("port[{i}].interface"),
                    Problem::Conflict {
                        reason: "one AF_XDP port per interface",
                        name: ifname.to_string(),
                    },
                ));
            }
        }
        Ok(())
    }
}

fn parse_adapter(top: &mut Table<'_>) -> Result<AdapterConfig, ConfigError> {
    let mut a = AdapterConfig::default();
    if let Some(mut t) = top.opt_table("adapter")? {
        if let Some(w) = t.opt_int("workers", 1, 64)? {
            a.workers = w as usize;
        }
        let pin = t.opt_bool("pin")?.unwrap_or(true);
        let cpus = t.opt_ints("cpus", 0, 4095)?;
        a.cpus = match (pin, cpus) {
            (false, Some(_)) => {
                return Err(t.err("cpus", Problem::Invalid("cpus given but pin = false")))
            }
            (false, None) => None,
            (true, Some(c)) => {
                if c.len() != a.workers {
                    return Err(t.err("cpus", Problem::Invalid("needs one CPU per worker")));
                }
                Some(c.into_iter().map(|c| c as usize).collect())
            }
            (true, None) => Some((0..a.workers).collect()),
        };
        if let Some(e) = t.opt_choice("engine", &["jit", "interp"])? {
            a.engine = if e == "jit" { EngineKind::Jit } else { EngineKind::Interpreter };
        }
        if let Some(b) = t.opt_int("burst", 1, 256)? {
            a.burst = b as usize;
        }
        if let Some(s) = t.opt_choice("assign", &["rss", "partition"])? {
            a.assign = if s == "rss" { Assign::Rss } else { Assign::Partition };
        }
        if let Some(s) = t.opt_int("idle_sleep_us", 0, 1_000_000)? {
            a.idle_sleep_us = s as u64;
        }
        if let Some(n) = t.opt_int("trace_events", 16, 1 << 24)? {
            a.trace_events = n as usize;
        }
        if let Some(n) = t.opt_int("peer_ring", 16, 1 << 20)? {
            a.peer_ring = n as usize;
        }
        if let Some(n) = t.opt_int("bulk_expiry_ms", 1, 3_600_000)? {
            a.bulk_expiry_ms = n as u64;
        }
        if let Some(n) = t.opt_int("bulk_nack_ms", 0, 3_600_000)? {
            if n != 0 && n as u64 >= a.bulk_expiry_ms {
                let why = "must be below bulk_expiry_ms (0: no NACKs)";
                return Err(t.err("bulk_nack_ms", Problem::Invalid(why)));
            }
            a.bulk_nack_ms = n as u64;
        }
        if let Some(n) = t.opt_int("bulk_retx_slots", 0, crate::retx::MAX_SLOTS as i64)? {
            a.bulk_retx_slots = n as usize;
        }
        if let Some(n) = t.opt_int("bulk_retx_max", 0, 64)? {
            a.bulk_retx_max = n as u32;
        }
        if let Some(n) = t.opt_int("bulk_reasm_slots", 1, crate::reasm::MAX_SLOTS as i64)? {
            a.bulk_reasm_slots = n as usize;
        }
        let (piece, most) = (spine_endpoint::remote::PIECE_MAX, spine_endpoint::remote::BULK_MAX);
        if let Some(n) = t.opt_int("bulk_reasm_bytes", piece as i64, most as i64)? {
            a.bulk_reasm_bytes = n as usize;
        }
        t.finish()?;
    }
    if let Some(mut t) = top.opt_table("pool")? {
        if let Some(n) = t.opt_int("buffers", 1, 1 << 24)? {
            a.pool.buffers = n as u32;
        }
        if let Some(n) = t.opt_int("buf_size", 256, 65_536)? {
            a.pool.buf_size = n as u32;
        }
        if let Some(n) = t.opt_int("headroom", 0, 65_536)? {
            a.pool.headroom = n as u32;
        }
        let path = t.path().to_string();
        t.finish()?;
        if !a.pool.buf_size.is_multiple_of(64) || a.pool.headroom + 256 > a.pool.buf_size {
            return Err(err(
                path,
                Problem::Invalid(
                    "buf_size must be a multiple of 64 with 256 bytes past the headroom",
                ),
            ));
        }
    }
    Ok(a)
}

fn file(base: &Path, s: &str) -> PathBuf {
    let p = Path::new(s);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

fn parse_port(mut t: Table<'_>, base: &Path) -> Result<PortConfig, ConfigError> {
    let name = t.req_str("name")?.to_string();
    if name.is_empty() {
        return Err(t.err("name", Problem::Invalid("must not be empty")));
    }
    let kind = t.opt_choice("kind", PORT_KINDS)?.ok_or_else(|| t.err("kind", Problem::Missing))?;
    let host_path = t.opt_str("host_path")?.map(str::to_string);
    let ifindex = t.opt_int("ifindex", 1, i64::from(u32::MAX))?.map(|i| i as u32);
    let kind = match kind {
        "mem" => {
            let input = t.opt_str("input")?;
            let generate = t.opt_table("generate")?;
            let udp4 = t.opt_table("udp4")?;
            let limit = t.opt_int("limit", 0, i64::MAX)?.map(|l| l as u64);
            let packets = match (input, generate, udp4) {
                (None, None, None) => MemPackets::None,
                (Some(f), None, None) => MemPackets::Capture(file(base, f)),
                (None, Some(mut g), None) => {
                    let count = g.opt_int("count", 1, 1 << 20)?.unwrap_or(256) as usize;
                    let seed = g.opt_int("seed", 0, i64::MAX)?.unwrap_or(1) as u64;
                    let max_len = g.opt_int("max_len", 60, 1792)?.unwrap_or(1514) as usize;
                    g.finish()?;
                    MemPackets::Generate { count, seed, max_len }
                }
                (None, None, Some(mut u)) => {
                    let flows = u.opt_int("flows", 1, 1 << 16)?.unwrap_or(1) as u32;
                    let size = u.opt_int("size", 42, 1514)?.unwrap_or(60) as usize;
                    u.finish()?;
                    MemPackets::Udp4 { flows, size }
                }
                _ => {
                    return Err(t.err(
                        "input",
                        Problem::Invalid("a mem port takes one of input, generate and udp4"),
                    ))
                }
            };
            PortKind::Mem { packets, limit }
        }
        "pcap" => {
            let input = t.opt_str("input")?.map(|f| file(base, f));
            let output = t.opt_str("output")?.map(|f| file(base, f));
            if input.is_none() && output.is_none() {
                return Err(
                    t.err("input", Problem::Invalid("a pcap port needs input, output or both"))
                );
            }
            PortKind::Pcap { input, output }
        }
        "afpacket" => PortKind::AfPacket {
            interface: interface(&mut t)?,
            promiscuous: t.opt_bool("promiscuous")?.unwrap_or(true),
        },
        "afxdp" => {
            let interface = interface(&mut t)?;
            let queue = t.opt_int("queue", 0, 4095)?.unwrap_or(0) as u32;
            let bind = match t.opt_choice("bind", &["auto", "copy", "zerocopy"])? {
                None | Some("auto") => BindMode::Auto,
                Some("copy") => BindMode::Copy,
                Some(_) => BindMode::ZeroCopy,
            };
            let attach = match t.opt_choice("attach", &["auto", "native", "skb"])? {
                None | Some("auto") => AttachMode::Auto,
                Some("native") => AttachMode::Native,
                Some(_) => AttachMode::Skb,
            };
            let ring_size = t.opt_int("ring_size", 64, 16_384)?.unwrap_or(512) as u32;
            if !ring_size.is_power_of_two() {
                return Err(t.err("ring_size", Problem::Invalid("must be a power of two")));
            }
            let frags = t.opt_bool("frags")?.unwrap_or(false);
            PortKind::AfXdp { interface, queue, bind, attach, ring_size, frags }
        }
        "tap" => {
            let interface = interface(&mut t)?;
            let up = t.opt_bool("up")?.unwrap_or(true);
            let twin = t.opt_str("twin")?.map(str::to_string);
            let addresses = fib::addresses(&mut t)?;
            let twin = match twin {
                Some(port) => Some(TwinConfig { port, addresses }),
                None if addresses.is_empty() => None,
                None => {
                    return Err(t.err("addresses", Problem::Invalid("only a twin takes addresses")))
                }
            };
            if twin.is_some() && !up {
                return Err(t.err("up", Problem::Invalid("a twin is always up")));
            }
            PortKind::Tap { interface, up, twin }
        }
        _ => PortKind::Udp {
            local: socket_addr(&mut t, "local")?,
            peer: socket_addr(&mut t, "peer")?,
            key_file: t.opt_str("key_file")?.map(|f| file(base, f)),
        },
    };
    if ifindex.is_some()
        && !matches!(kind, PortKind::Mem { .. } | PortKind::Pcap { .. } | PortKind::Udp { .. })
    {
        return Err(t.err(
            "ifindex",
            Problem::Invalid(
                "only mem, pcap and udp ports take an ifindex; interfaces have the kernel's",
            ),
        ));
    }
    t.finish()?;
    Ok(PortConfig { name, kind, host_path, ifindex })
}

/// Each TAP twin becomes its port's host path; the port must be a kernel interface
/// (afpacket, afxdp) without another host path, and have one twin.
fn twins(ports: &mut [PortConfig]) -> Result<(), ConfigError> {
    for i in 0..ports.len() {
        let PortKind::Tap { twin: Some(t), .. } = &ports[i].kind else { continue };
        let path = format!("port[{i}].twin");
        let name = t.port.clone();
        let j = ports
            .iter()
            .position(|p| p.name == name)
            .ok_or_else(|| err(&path, Problem::NoSuch { what: "port", name: name.clone() }))?;
        if !matches!(ports[j].kind, PortKind::AfPacket { .. } | PortKind::AfXdp { .. }) {
            return Err(err(
                path,
                Problem::Conflict { reason: "a twin stands for an afpacket or afxdp port", name },
            ));
        }
        if ports[i].host_path.is_some() {
            return Err(err(
                format!("port[{i}].host_path"),
                Problem::Invalid("a twin is its port's host path and has none of its own"),
            ));
        }
        match &ports[j].host_path {
            None => ports[j].host_path = Some(ports[i].name.clone()),
            Some(h) if *h == ports[i].name => {}
            Some(_) => {
                return Err(err(
                    path,
                    Problem::Conflict {
                        reason: "the port has another host path (or another twin)",
                        name,
                    },
                ))
            }
        }
    }
    Ok(())
}

/// `"10.0.0.1:7000"` or `"[2001:db8::1]:7000"`.
fn socket_addr(t: &mut Table<'_>, key: &'static str) -> Result<std::net::SocketAddr, ConfigError> {
    let s = t.req_str(key)?;
    s.parse().map_err(|_| {
        t.err(key, Problem::Invalid("not an address and port (10.0.0.1:7000, [2001:db8::1]:7000)"))
    })
}

fn interface(t: &mut Table<'_>) -> Result<String, ConfigError> {
    let s = t.req_str("interface")?;
    if s.is_empty() || s.len() >= 16 || s.contains(['/', ' ', '\0']) {
        return Err(t.err(
            "interface",
            Problem::Invalid("not an interface name (1 to 15 characters, no '/' or spaces)"),
        ));
    }
    Ok(s.to_string())
}

fn parse_domain(mut t: Table<'_>) -> Result<DomainSpec, ConfigError> {
    let mut d = DomainSpec::default_domain();
    d.name = t.req_str("name")?.to_string();
    if d.name == "default" {
        return Err(t.err("name", Problem::Invalid("'default' is the built-in domain")));
    }
    if let Some(h) = t.opt_strs("helpers")? {
        for (i, name) in h.iter().enumerate() {
            DomainSpec::helper_ids(std::slice::from_ref(name)).map_err(|_| {
                err(
                    format!("{}[{i}]", t.key_path("helpers")),
                    Problem::NoSuch { what: "helper", name: name.clone() },
                )
            })?;
        }
        d.helpers = Some(DomainSpec::helper_ids(&h).unwrap_or_default());
    }
    d.shared_maps = t.opt_strs("shared_maps")?.unwrap_or_default();
    d.ports = t.opt_strs("ports")?;
    if let Some(us) = t.opt_int("budget_us", 1, 10_000_000)? {
        d.budget = Budget { ns: us as u64 * 1000, ..Budget::default() };
    }
    if let Some(mut q) = t.opt_table("quota")? {
        let def = Quota::default();
        d.quota = Quota {
            map_bytes: q.opt_int("map_bytes", 0, i64::MAX)?.map_or(def.map_bytes, |v| v as u64),
            insns: q.opt_int("insns", 1, 1_000_000)?.map_or(def.insns, |v| v as usize),
        };
        q.finish()?;
    }
    if let Some(mut f) = t.opt_table("faults")? {
        let def = FaultPolicy::default();
        d.faults = FaultPolicy {
            max_faults: f
                .opt_int("max", 0, i64::from(u32::MAX))?
                .map_or(def.max_faults, |v| v as u32),
            window_ns: f
                .opt_int("window_ms", 1, 86_400_000)?
                .map_or(def.window_ns, |v| v as u64 * 1_000_000),
        };
        f.finish()?;
    }
    t.finish()?;
    Ok(d)
}

fn parse_extension(mut t: Table<'_>, base: &Path) -> Result<ExtensionConfig, ConfigError> {
    let file_name = t.opt_str("file")?;
    let bundled = t.opt_str("bundled")?;
    let object = match (file_name, bundled) {
        (Some(f), None) => ObjectSource::File(file(base, f)),
        (None, Some(b)) => {
            if spine_progs::get(b).is_none() {
                return Err(t.err(
                    "bundled",
                    Problem::NoSuch { what: "bundled program", name: b.to_string() },
                ));
            }
            ObjectSource::Bundled(b.to_string())
        }
        (None, None) => return Err(t.err("file", Problem::Missing)),
        (Some(_), Some(_)) => {
            return Err(t.err("bundled", Problem::Invalid("give file or bundled, not both")))
        }
    };
    let section = t.opt_str("section")?.map(str::to_string);
    let prog_type = match t.opt_choice("type", PROG_TYPES)? {
        None => None,
        Some(_) if section.is_none() => {
            return Err(t.err("type", Problem::Invalid("a program type needs a section")))
        }
        Some("xdp") => Some(spine_obj::ProgType::Xdp),
        Some(_) => Some(spine_obj::ProgType::XdpFrags),
    };
    let name = match t.opt_str("name")? {
        Some(n) => n.to_string(),
        None => match (&object, &section) {
            (ObjectSource::Bundled(b), _) => b.clone(),
            (_, Some(s)) => s.clone(),
            (ObjectSource::File(f), None) => {
                f.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
            }
        },
    };
    let domain = t.opt_str("domain")?.map(str::to_string);
    let max_entries = match t.opt_table("max_entries")? {
        Some(m) => {
            let sizes = m.int_entries(1, i64::from(u32::MAX))?;
            sizes.into_iter().map(|(k, n)| (k, n as u32)).collect()
        }
        None => Vec::new(),
    };
    t.finish()?;
    Ok(ExtensionConfig { name, object, section, prog_type, domain, max_entries })
}

fn parse_attach(mut t: Table<'_>) -> Result<Attachment, ConfigError> {
    let extension = t.req_str("extension")?.to_string();
    let port = t.req_str("port")?.to_string();
    let path = t.path().to_string();
    t.finish()?;
    Ok(Attachment { extension, port, path })
}

fn parse_partition(mut t: Table<'_>) -> Result<PartitionEntry, ConfigError> {
    let port = t.req_str("port")?.to_string();
    let queue = t.opt_int("queue", 0, 4095)?.unwrap_or(0) as u32;
    let worker =
        t.opt_int("worker", 0, 63)?.ok_or_else(|| t.err("worker", Problem::Missing))? as usize;
    t.finish()?;
    Ok(PartitionEntry { port, queue, worker })
}

fn parse_map(mut t: Table<'_>) -> Result<MapInit, ConfigError> {
    let extension = t.req_str("extension")?.to_string();
    let map = t.req_str("name")?.to_string();
    let path = t.path().to_string();
    let entries = t
        .tables("entries")?
        .into_iter()
        .map(|mut e| {
            let key = bytes(&mut e, "key")?;
            let value = bytes(&mut e, "value")?;
            let path = e.path().to_string();
            e.finish()?;
            Ok(MapEntry { key, value, path })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    t.finish()?;
    Ok(MapInit { extension, map, entries, path })
}

fn parse_ringbuf(mut t: Table<'_>, base: &Path) -> Result<RingbufOutput, ConfigError> {
    let extension = t.req_str("extension")?.to_string();
    let map = t.req_str("name")?.to_string();
    let output = match t.opt_str("output")? {
        Some("") => return Err(t.err("output", Problem::Invalid("must not be empty"))),
        o => o.map(|f| file(base, f)),
    };
    let path = t.path().to_string();
    t.finish()?;
    Ok(RingbufOutput { extension, map, output, path })
}

fn bytes(t: &mut Table<'_>, key: &'static str) -> Result<Bytes, ConfigError> {
    match t.get(key) {
        None => Err(t.err(key, Problem::Missing)),
        Some(Value::Integer(i)) if *i >= 0 => Ok(Bytes::Int(*i as u64)),
        Some(Value::Integer(i)) => {
            Err(t.err(key, Problem::Range { min: 0, max: i64::MAX, got: *i }))
        }
        Some(Value::String(s)) => {
            parse_hex(s).map(Bytes::Hex).ok_or_else(|| t.err(key, Problem::Hex(s.clone())))
        }
        Some(v) => Err(
            t.err(key, Problem::Type { expected: "hex bytes or an integer", found: type_name(v) })
        ),
    }
}

/// `"0a000001"`, `"0x0a000001"`, `"0a:00:00:01"`, `"0a 00 00 01"`: bytes in the order
/// written (network order for addresses written as they are sent).
pub fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    let digits: Vec<u8> = s.bytes().filter(|b| !matches!(b, b' ' | b':' | b'_')).collect();
    if digits.is_empty() || !digits.len().is_multiple_of(2) {
        return None;
    }
    digits
        .chunks(2)
        .map(|p| {
            let hi = (p[0] as char).to_digit(16)?;
            let lo = (p[1] as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}

#[cfg(test)]
mod tests;
