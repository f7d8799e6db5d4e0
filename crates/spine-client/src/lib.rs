//! The application's library for spine endpoints. [`Endpoint::open`] asks a running
//! adapter (`spine run --socket PATH`) for an endpoint on a [`Channel`] (a port and a
//! match on the frames it passes) and maps what comes back. An [`Endpoint`] can also be
//! opened from the fds an adapter hands out by other means (the region, and optionally the eventfd it signals after
//! delivering); sends write in place into the endpoint's frames and receives read in
//! place. [`Endpoint::recv`] polls; [`Endpoint::recv_blocking`] sleeps on the eventfd
//! when nothing is ready. Messages of [`INLINE_BYTES`] or less travel inline in the
//! ring entry itself and use no frame. [`Segment::open`] maps an extension's shared
//! segment (a `BPF_F_MMAPABLE` array) from the same socket.
#![deny(unsafe_code)]

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Active messages between adapters: the frame format (`remote::frame` builds one to
/// send through an endpoint bound to a tunnel port; `remote::bulk_frames` the pieces of
/// a bulk message, up to 16 KiB, which the receiving adapter reassembles before its
/// handlers run).
pub use spine_endpoint::remote;
pub use spine_endpoint::{
    recv_fds, ClientEnd, Desc, EndpointError, EventFd, HeaderIn, Layout, INLINE_BYTES,
};

/// Largest active-message payload.
pub const MSG_MAX: usize = spine_endpoint::Desc::MSG_MAX;

/// A channel tag: which of a port's frames an endpoint receives (those that pass the
/// port's extension and match every field given) and where its transmissions go.
///
/// With [`map`](Channel::map) set, the endpoint is also bound to a slot of an
/// extension's endpoint map (`SPINE_MAP_TYPE_ENDPOINT`): what the extension redirects
/// there with `bpf_redirect_map` arrives on it. A channel with a map and an empty match
/// takes no passed frames (only its slot's); give a non-empty match to take both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Channel {
    pub port: String,
    pub matches: Match,
    pub map: Option<MapSlot>,
    /// The protection domain whose handlers run its active messages (`None`: the
    /// adapter's `default`).
    pub domain: Option<String>,
    /// A loaded extension of the endpoint's domain whose applets run on the endpoint's
    /// transmit and receive hooks (`SEC("spine/applet/tx")`, `SEC("spine/applet/rx")`).
    pub applets: Option<String>,
    pub ring_entries: Option<u32>,
    pub frame_size: Option<u32>,
    pub frames: Option<u32>,
    /// What travels (the host router's data paths); `None`: whole frames.
    pub path: Option<DataPath>,
    /// For [`DataPath::HeaderCopy`]: bytes of each frame delivered (14..=64; `None`: 64).
    pub header_bytes: Option<u16>,
    /// Multi-buffer frames (AF_XDP's `XDP_USE_SG`): a frame longer than one area frame
    /// (a jumbo frame, a chained frame) arrives as several entries, read with
    /// [`Endpoint::recv_pieces`] or gathered by [`Endpoint::recv_frames`]. Without it a
    /// chained frame arrives in one area frame when it fits and is dropped (counted)
    /// when it does not.
    pub multi_buffer: bool,
}

/// What an endpoint carries (the host router's data paths, see `docs/ARCHITECTURE.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DataPath {
    /// Whole frames, copied into the endpoint's area and out of it (the copy path).
    #[default]
    Frames,
    /// The first bytes of each frame with a handle ([`Endpoint::recv_headers`]); the
    /// adapter keeps the rest and splices the returned header before it
    /// ([`Endpoint::return_header`]).
    HeaderCopy,
    /// Whole frames in the area, rewritten there and handed back with an egress port
    /// ([`Endpoint::forward_in_place`]).
    InPlace,
}

/// A [`Channel`] as the endpoint socket takes it: the match left out for a map slot's
/// channel whose match is empty.
#[derive(Serialize)]
struct ChannelRequest<'a> {
    port: &'a str,
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    matches: Option<&'a Match>,
    #[serde(skip_serializing_if = "Option::is_none")]
    map: Option<&'a MapSlot>,
    #[serde(skip_serializing_if = "Option::is_none")]
    domain: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    applets: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ring_entries: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frame_size: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frames: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path: Option<DataPath>,
    #[serde(skip_serializing_if = "Option::is_none")]
    header_bytes: Option<u16>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    multi_buffer: bool,
}

impl Serialize for Channel {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let left_out = self.map.is_some() && self.matches == Match::default();
        ChannelRequest {
            port: &self.port,
            matches: (!left_out).then_some(&self.matches),
            map: self.map.as_ref(),
            domain: self.domain.as_deref(),
            applets: self.applets.as_deref(),
            ring_entries: self.ring_entries,
            frame_size: self.frame_size,
            frames: self.frames,
            path: self.path,
            header_bytes: self.header_bytes,
            multi_buffer: self.multi_buffer,
        }
        .serialize(s)
    }
}

/// A slot of an extension's endpoint map.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MapSlot {
    /// The extension; `None`: the one loaded extension with an endpoint map `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
    pub name: String,
    pub index: u32,
}

/// The match of a [`Channel`]; absent fields match anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Match {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ethertype: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ip_proto: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
}

impl Channel {
    /// Every frame `port` passes.
    pub fn port(port: &str) -> Self {
        Channel { port: port.to_string(), ..Default::default() }
    }

    /// UDP over IPv4 to destination port `dst_port` on `port`.
    pub fn udp4(port: &str, dst_port: u16) -> Self {
        let matches = Match {
            ethertype: Some(0x0800),
            ip_proto: Some(17),
            dst_port: Some(dst_port),
            vlan: None,
        };
        Channel { port: port.to_string(), matches, ..Default::default() }
    }

    /// Only what an extension redirects into slot `index` of its endpoint map `map`
    /// (`bpf_redirect_map(&map, index, flags)`); transmissions leave on `port`.
    pub fn slot(port: &str, extension: Option<&str>, map: &str, index: u32) -> Self {
        let map =
            MapSlot { extension: extension.map(str::to_string), name: map.to_string(), index };
        Channel { port: port.to_string(), map: Some(map), ..Default::default() }
    }
}

/// Why [`Endpoint::open`] failed.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("endpoint socket {path}: {source}")]
    Connect { path: String, source: std::io::Error },
    #[error("endpoint socket: {0}")]
    Io(#[from] std::io::Error),
    /// The adapter refused the request; `kind` is stable (`no_port`, `bad_tag`,
    /// `too_many`, `tag_taken`, `bad_size`, `bad_json`, ...).
    #[error("the adapter refused the endpoint ({kind}): {message}")]
    Refused { kind: String, message: String },
    #[error("endpoint socket: unexpected answer: {0}")]
    Protocol(String),
    #[error(transparent)]
    Endpoint(#[from] EndpointError),
}

#[derive(Deserialize)]
struct Refusal {
    kind: String,
    message: String,
}

#[derive(Deserialize)]
struct Opened {
    id: u64,
    #[serde(default)]
    port_index: Option<u16>,
}

#[derive(Deserialize)]
struct Answer {
    endpoint: Option<Opened>,
    error: Option<Refusal>,
}

/// The endpoint socket of the adapter whose control socket is `control` (its path
/// plus `.ep`); a path already ending in `.ep` is taken as it is.
pub fn endpoint_socket(control: &Path) -> PathBuf {
    if control.extension().is_some_and(|e| e == "ep") {
        return control.to_path_buf();
    }
    let mut s = control.as_os_str().to_owned();
    s.push(".ep");
    PathBuf::from(s)
}

/// Sends one request line to the endpoint socket of `socket` and reads the answer
/// line; fds, when the answer has any, ride on the byte after it.
fn ask(socket: &Path, req: &impl Serialize) -> Result<(UnixStream, Vec<u8>), OpenError> {
    let path = endpoint_socket(socket);
    let mut sock = UnixStream::connect(&path)
        .map_err(|source| OpenError::Connect { path: path.display().to_string(), source })?;
    let mut line = serde_json::to_vec(req).map_err(|e| OpenError::Protocol(e.to_string()))?;
    line.push(b'\n');
    sock.write_all(&line)?;
    // The answer line, a byte at a time: the fds ride on the byte after it.
    let mut line = Vec::with_capacity(512);
    let mut b = [0u8; 1];
    loop {
        if sock.read(&mut b)? == 0 {
            return Err(OpenError::Protocol("the adapter closed the connection".into()));
        }
        if b[0] == b'\n' {
            break;
        }
        line.push(b[0]);
        if line.len() > 64 << 10 {
            return Err(OpenError::Protocol("answer line too long".into()));
        }
    }
    Ok((sock, line))
}

/// What the adapter says about a shared segment it hands out.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SegmentInfo {
    pub extension: String,
    pub map: String,
    /// Bytes mapped (whole pages).
    pub len: usize,
    pub value_size: u32,
    pub max_entries: u32,
    /// Offset of the `bpf_spin_lock` in each value, if the value holds one.
    pub spin_lock: Option<u32>,
}

#[derive(Deserialize)]
struct SegmentAnswer {
    segment: Option<SegmentInfo>,
    error: Option<Refusal>,
}

/// What the adapter says about a loaded extension ([`extension`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ExtensionInfo {
    /// Its id: what [`Endpoint::send_message_to`] takes, and the source that marks its
    /// messages. Ids are never reused: one that outlives its extension reaches no
    /// handler (counted `msg_unhandled`).
    pub id: u16,
    pub name: String,
    pub domain: String,
}

#[derive(Deserialize)]
struct ExtensionAnswer {
    extension: Option<ExtensionInfo>,
    error: Option<Refusal>,
}

/// Asks the adapter whose control socket is `socket` for the id of its loaded extension
/// `name` (refused `no_extension` when there is none), to address that one extension's
/// handlers when others of the domain register the same handler number.
pub fn extension(socket: impl AsRef<Path>, name: &str) -> Result<ExtensionInfo, OpenError> {
    let req = serde_json::json!({ "extension": { "name": name } });
    let (_, line) = ask(socket.as_ref(), &req)?;
    let answer: ExtensionAnswer = serde_json::from_slice(&line)
        .map_err(|e| OpenError::Protocol(format!("{e}: {}", String::from_utf8_lossy(&line))))?;
    if let Some(r) = answer.error {
        return Err(OpenError::Refused { kind: r.kind, message: r.message });
    }
    answer.extension.ok_or_else(|| OpenError::Protocol("neither an extension nor an error".into()))
}

/// A running adapter's shared segment (a `BPF_F_MMAPABLE` array of an extension)
/// mapped into this process: value `i` at [`Segment::value_offset`]`(i)`. Dereferences
/// to [`spine_endpoint::Segment`] for words, copies and the lock.
#[derive(Debug)]
pub struct Segment {
    map: spine_endpoint::Segment,
    info: SegmentInfo,
}

impl Segment {
    /// Asks the adapter whose control socket is `socket` for map `map` of extension
    /// `ext` and maps it.
    pub fn open(socket: impl AsRef<Path>, ext: &str, map: &str) -> Result<Self, OpenError> {
        let req = serde_json::json!({ "segment": { "extension": ext, "map": map } });
        let (sock, line) = ask(socket.as_ref(), &req)?;
        let answer: SegmentAnswer = serde_json::from_slice(&line)
            .map_err(|e| OpenError::Protocol(format!("{e}: {}", String::from_utf8_lossy(&line))))?;
        if let Some(r) = answer.error {
            return Err(OpenError::Refused { kind: r.kind, message: r.message });
        }
        let Some(info) = answer.segment else {
            return Err(OpenError::Protocol("neither a segment nor an error".into()));
        };
        let fd = recv_fds(&sock)?
            .into_iter()
            .next()
            .ok_or_else(|| OpenError::Protocol("no segment descriptor".into()))?;
        let map = spine_endpoint::Segment::map(fd)?;
        if map.len() < info.len {
            return Err(OpenError::Protocol(format!(
                "segment of {} bytes, {} announced",
                map.len(),
                info.len
            )));
        }
        Ok(Segment { map, info })
    }

    pub fn info(&self) -> &SegmentInfo {
        &self.info
    }

    /// Where value `i` starts (`i * round_up(value_size, 8)`).
    pub fn value_offset(&self, i: u32) -> usize {
        assert!(i < self.info.max_entries, "value {i} of {}", self.info.max_entries);
        i as usize * (self.info.value_size as usize).next_multiple_of(8)
    }

    /// Takes value `i`'s `bpf_spin_lock` (the value must hold one).
    pub fn lock_value(&self, i: u32) -> spine_endpoint::SegmentGuard<'_> {
        let at = self.info.spin_lock.expect("the value holds no bpf_spin_lock") as usize;
        self.map.lock(self.value_offset(i) + at)
    }
}

impl std::ops::Deref for Segment {
    type Target = spine_endpoint::Segment;

    fn deref(&self) -> &spine_endpoint::Segment {
        &self.map
    }
}

/// An open endpoint.
#[derive(Debug)]
pub struct Endpoint {
    end: ClientEnd,
    wake: Option<EventFd>,
    /// The connection the fds came over, held so the adapter sees the endpoint in use.
    conn: Option<UnixStream>,
    /// The adapter's id of the endpoint (when opened on a running adapter).
    id: Option<u64>,
    /// The adapter's index of the endpoint's port (when it said).
    port_index: Option<u16>,
    /// [`Endpoint::recv_frames`]: the pieces of a multi-buffer frame read so far.
    gather: Vec<u8>,
}

impl Endpoint {
    /// Opens the region `fd`; `wake` is the eventfd the adapter signals (blocking mode).
    pub fn from_fds(fd: OwnedFd, wake: Option<OwnedFd>) -> Result<Self, EndpointError> {
        Ok(Endpoint {
            end: ClientEnd::open(fd)?,
            wake: wake.map(EventFd::from_fd),
            conn: None,
            id: None,
            port_index: None,
            gather: Vec::new(),
        })
    }

    /// Opens the endpoint whose fds arrive on `sock` (region first, eventfd second).
    /// Keep `sock` open while using the endpoint: an adapter that watches the connection
    /// reclaims the endpoint once it closes. [`Endpoint::connect`] keeps it for you.
    pub fn from_socket(sock: &UnixStream) -> Result<Self, EndpointError> {
        let mut fds = recv_fds(sock)?.into_iter();
        let region = fds.next().ok_or(EndpointError::Layout("no region fd"))?;
        Self::from_fds(region, fds.next())
    }

    /// Connects to the Unix socket at `path`, receives the endpoint's fds, and keeps the
    /// connection for as long as the endpoint lives (closing it gives the endpoint up).
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, EndpointError> {
        let sock =
            UnixStream::connect(path).map_err(|err| EndpointError::Os { call: "connect", err })?;
        let mut ep = Self::from_socket(&sock)?;
        ep.conn = Some(sock);
        Ok(ep)
    }

    /// Asks the running adapter whose control socket is `socket` (or its endpoint
    /// socket, see [`endpoint_socket`]) for an endpoint on `channel`. The endpoint lives
    /// until it is dropped (or the process ends): the adapter then reclaims it.
    pub fn open(socket: impl AsRef<Path>, channel: &Channel) -> Result<Self, OpenError> {
        let (sock, line) = ask(socket.as_ref(), channel)?;
        let answer: Answer = serde_json::from_slice(&line)
            .map_err(|e| OpenError::Protocol(format!("{e}: {}", String::from_utf8_lossy(&line))))?;
        if let Some(r) = answer.error {
            return Err(OpenError::Refused { kind: r.kind, message: r.message });
        }
        let Some(opened) = answer.endpoint else {
            return Err(OpenError::Protocol("neither an endpoint nor an error".into()));
        };
        let mut ep = Self::from_socket(&sock)?;
        ep.conn = Some(sock);
        ep.id = Some(opened.id);
        ep.port_index = opened.port_index;
        Ok(ep)
    }

    /// The adapter's index of this endpoint's port: the egress port that
    /// [`return_header`](Self::return_header) and
    /// [`forward_in_place`](Self::forward_in_place) name to send there.
    pub fn port_index(&self) -> Option<u16> {
        self.port_index
    }

    /// Header-copy: hands up to `max` delivered headers to `f` (each with its handle
    /// and the whole frame's length); returns how many entries it consumed.
    pub fn recv_headers(&mut self, max: usize, f: impl FnMut(HeaderIn<'_>)) -> usize {
        self.end.recv_headers(max, f)
    }

    /// Header-copy: returns a (rewritten) header for the buffer `handle` names, to
    /// leave on the port with index `egress` ([`Desc::EGRESS_DROP`] drops it); false
    /// when the transmit ring is full.
    pub fn return_header(&mut self, handle: u64, egress: u16, header: &[u8]) -> bool {
        self.end.return_header(handle, egress, header)
    }

    /// Free transmit slots now.
    pub fn tx_room(&mut self) -> usize {
        self.end.tx_room()
    }

    /// In-place: hands up to `max` received frames to `f` in the endpoint's area;
    /// `f` rewrites them there and answers the egress port's index (`None` drops the
    /// frame), and the same frame goes back to the adapter without a copy.
    pub fn forward_in_place(
        &mut self,
        max: usize,
        f: impl FnMut(&mut [u8]) -> Option<u16>,
    ) -> usize {
        self.end.forward_in_place(max, f)
    }

    /// Test and fuzz access: the endpoint's shared memory, to play a hostile client
    /// (`ClientEnd::poke_u32`).
    #[doc(hidden)]
    pub fn raw(&self) -> &ClientEnd {
        &self.end
    }

    /// The adapter's id of this endpoint (`DELETE /v1/endpoints/{id}` closes it).
    pub fn id(&self) -> Option<u64> {
        self.id
    }

    pub fn layout(&self) -> Layout {
        self.end.layout()
    }

    /// Sends a message of `len` bytes written in place by `write`; false when full.
    pub fn send_with(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> bool {
        self.end.send_with(len, write)
    }

    /// Sends as many of `msgs` as fit; returns how many.
    pub fn send_batch<M: AsRef<[u8]>>(&mut self, msgs: &[M]) -> usize {
        msgs.iter().take_while(|m| self.end.send(m.as_ref())).count()
    }

    /// Sends an active message for handler `handler` (0..=255) of the extensions in
    /// the endpoint's domain, carrying `data` (at most [`MSG_MAX`] bytes); false when
    /// the ring is full or `data` is too long.
    pub fn send_message(&mut self, handler: u8, data: &[u8]) -> bool {
        self.end.send_message(handler, data)
    }

    /// As [`send_message`](Self::send_message), for the one extension `ext` (its id, from
    /// [`extension`]) rather than every extension of the domain that registered
    /// `handler`: only its handler runs (none, if it did not register `handler`, is of
    /// another domain or was unloaded: counted `msg_unhandled`). False as
    /// `send_message`, and for id 0xffff, which cannot be named.
    pub fn send_message_to(&mut self, ext: u16, handler: u8, data: &[u8]) -> bool {
        self.end.send_message_to(Some(ext), handler, data)
    }

    /// As [`send_bulk_message`](Self::send_bulk_message), for the one extension `ext`
    /// (see [`send_message_to`](Self::send_message_to)).
    pub fn send_bulk_message_to(&mut self, ext: u16, handler: u8, off: u64, len: u32) -> bool {
        self.end.send_bulk_to(Some(ext), handler, off, len)
    }

    /// Reserves `frames` consecutive frames of the endpoint's buffer area for bulk data
    /// (taken out of the frames the library sends and receives with); returns the area
    /// offset of the first, or `None` when no such run is free.
    pub fn reserve_area(&mut self, frames: u32) -> Option<u64> {
        self.end.reserve_area(frames)
    }

    /// Gives frames reserved with [`reserve_area`](Self::reserve_area) back.
    pub fn release_area(&mut self, addr: u64, frames: u32) {
        self.end.release_area(addr, frames)
    }

    /// Sends a bulk active message to another adapter over the tunnel port this
    /// endpoint is bound to: `len` bytes (1..=16 KiB) at offset `off` of the buffer area,
    /// which the adapter reads out and sends in pieces, for `handler` of endpoint `dest`
    /// over there (`spine_endpoint::Desc::REMOTE_HANDLERS`: its handlers), from this
    /// endpoint's id. A reference outside the area is counted `bad_desc`; a port that is
    /// no tunnel or a length over 16 KiB `msg_bulk_remote_refused`. False when the ring
    /// is full.
    pub fn send_bulk_remote(&mut self, dest: u16, handler: u8, off: u64, len: u32) -> bool {
        self.end.send_bulk_remote(dest, handler, off, len)
    }

    /// Lends `len` bytes at offset `off` of the buffer area (a region reserved with
    /// [`reserve_area`](Self::reserve_area)) to the adapter for one bulk message
    /// arriving over a tunnel for this endpoint: the adapter writes the message at the
    /// region's start and hands it to [`recv_marked`](Self::recv_marked) in place, after
    /// which the region is the application's again (grant it anew for the next). At
    /// most `spine_endpoint::GRANTS` grants are outstanding; a bad grant is counted
    /// `bad_desc`. False when the transmit ring is full.
    pub fn grant_area(&mut self, off: u64, len: u32) -> bool {
        self.end.grant_area(off, len)
    }

    /// Writes `data` at offset `off` of the buffer area; false when it does not fit.
    pub fn write_area(&mut self, off: u64, data: &[u8]) -> bool {
        self.end.write_area(off, data)
    }

    /// Sends a bulk active message for handler `handler`: a reference to `len` bytes
    /// at offset `off` of the buffer area, which the handler reads with
    /// `spine_msg_bulk_read` while it runs (keep them unchanged until the handler has
    /// answered). The adapter checks the reference (a bad one is counted `bad_desc`);
    /// false when the ring is full.
    pub fn send_bulk_message(&mut self, handler: u8, off: u64, len: u32) -> bool {
        self.end.send_bulk(handler, off, len)
    }

    /// As [`recv`](Self::recv), with each entry's marking: `Some((handler, source))` for
    /// an active message an extension sent (source: its extension id), `None` for a
    /// frame. A bulk message an extension sent (`spine_msg_send_bulk`) is handed in
    /// place: the bytes of the buffer-area region it refers to, which stays the
    /// application's (typically one it reserved with [`reserve_area`](Self::reserve_area)).
    pub fn recv_marked(&mut self, max: usize, f: impl FnMut(&[u8], Option<(u8, u16)>)) -> usize {
        self.end.recv_marked(max, f)
    }

    /// Hands up to `max` receive entries to `f` in place, each with its marking (as
    /// [`recv_marked`](Self::recv_marked)) and whether more of its frame follows in the
    /// next entry (`Desc::CONTD`, AF_XDP's `XDP_PKT_CONTD`): on a
    /// [`multi_buffer`](Channel::multi_buffer) endpoint a long frame is every entry up
    /// to and including the first with `false`, zero copies. Returns the entries read.
    pub fn recv_pieces(
        &mut self,
        max: usize,
        f: impl FnMut(&[u8], Option<(u8, u16)>, bool),
    ) -> usize {
        self.end.recv_pieces(max, f)
    }

    /// Hands up to `max` received frames (or messages) to `f` whole: a one-entry frame in
    /// place, a multi-buffer frame's pieces gathered first into a buffer the endpoint
    /// keeps (one copy). A frame whose last piece has not been read stays gathered for
    /// the next call. Returns the frames handed on.
    pub fn recv_frames(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut done = 0;
        while done < max {
            let gather = &mut self.gather;
            let n = self.end.recv_pieces(1, |piece, _, more| {
                if more || !gather.is_empty() {
                    gather.extend_from_slice(piece);
                }
                if !more {
                    if gather.is_empty() {
                        f(piece);
                    } else {
                        f(gather);
                        gather.clear();
                    }
                    done += 1;
                }
            });
            if n == 0 {
                break;
            }
        }
        done
    }

    /// Hands up to `max` received messages to `f` in place, without waiting (active
    /// messages too, unmarked: see [`recv_marked`](Self::recv_marked)).
    pub fn recv(&mut self, max: usize, f: impl FnMut(&[u8])) -> usize {
        self.end.recv(max, f)
    }

    /// As [`recv`](Self::recv), but sleeps on the eventfd up to `timeout_ms` (-1:
    /// forever) when nothing is ready. Without an eventfd it only polls once.
    pub fn recv_blocking(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, EndpointError> {
        let n = self.end.recv(max, &mut f);
        if n > 0 {
            return Ok(n);
        }
        match &self.wake {
            Some(w) if w.wait(timeout_ms)? => Ok(self.end.recv(max, f)),
            _ => Ok(0),
        }
    }
}
