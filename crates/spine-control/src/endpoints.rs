//! The endpoint socket: where applications ask a running adapter for an endpoint and
//! receive its fds. HTTP cannot carry file descriptors, so endpoints are handed out on a
//! sibling Unix socket (the control socket's path plus `.ep`, same mode), served by a
//! thread of the control plane that never touches the packet path.
//!
//! The protocol (docs/API.md): the client connects and sends one JSON
//! [`EndpointRequest`] ending in a newline (at most [`MAX_REQUEST`] bytes, within
//! [`REQUEST_TIMEOUT`]). The server answers one JSON line: `{"endpoint": {...}}`
//! followed at once by one byte carrying the region's memfd and the eventfd
//! (`SCM_RIGHTS`), or `{"error": {"kind", "message"}}` and closes. On success the
//! connection *is* the endpoint: the server keeps its end and watches it
//! ([`ClientWatch`]); once the client's end closes (exit, kill, close) the endpoint is
//! reclaimed. `DELETE /v1/endpoints/{id}` closes the connection from this side.
//!
//! The same socket hands out shared segments: a request `{"segment": {"extension":
//! E, "map": M}}` is answered `{"segment": {...}}` and one byte carrying the memfd of
//! map M's values (a `BPF_F_MMAPABLE` array), then the connection closes; the segment
//! lives as long as the application keeps its descriptor or mapping.
//!
//! And it names extensions: `{"extension": {"name": N}}` is answered `{"extension":
//! {"id", "name", "domain"}}` (no fds) and the connection closes; an application puts
//! the id in a message's descriptor to address that one extension's handler
//! (`spine_client::Endpoint::send_message_to`). Ids are never reused, so an id that
//! outlives its extension reaches no handler.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spine_adapter::{EndpointRequest, Live};
use spine_endpoint::{peer_pid, send_fds, ClientWatch};

use crate::proto::{ApiError, ErrorBody};

/// The longest request line.
pub const MAX_REQUEST: usize = 4096;
/// How long a client may take to send its request.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The endpoint socket that goes with control socket `control`.
pub fn endpoint_socket(control: &Path) -> PathBuf {
    let mut s = control.as_os_str().to_owned();
    s.push(".ep");
    PathBuf::from(s)
}

/// What the endpoint thread counted.
#[derive(Debug, Default)]
pub struct EndpointStats {
    pub opened: AtomicU64,
    /// Requests refused (bad JSON, bad tag, limits, timeouts).
    pub refused: AtomicU64,
    /// Endpoints reclaimed because their client went away.
    pub reclaimed: AtomicU64,
    /// Requests answered without an endpoint: shared segments handed out and extension
    /// ids named.
    pub segments: AtomicU64,
}

pub(crate) struct EndpointServer {
    pub path: PathBuf,
    pub stop: Arc<AtomicBool>,
    pub thread: JoinHandle<()>,
}

/// Binds `path` (mode `mode`) and serves endpoints on a thread.
pub(crate) fn spawn(
    live: Live,
    path: PathBuf,
    mode: u32,
    stats: Arc<EndpointStats>,
    log: bool,
) -> std::io::Result<EndpointServer> {
    if path.exists() {
        std::fs::remove_file(&path)?;
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name("spine-endpoints".into())
        .spawn(move || serve(listener, &live, &stop2, &stats, log))?;
    Ok(EndpointServer { path, stop, thread })
}

fn serve(listener: UnixListener, live: &Live, stop: &AtomicBool, stats: &EndpointStats, log: bool) {
    let mut watches: Vec<(u64, ClientWatch)> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let mut busy = false;
        match listener.accept() {
            Ok((stream, _)) => {
                busy = true;
                match open(live, stream) {
                    Ok(Some(w)) => {
                        stats.opened.fetch_add(1, Ordering::Relaxed);
                        watches.push(w);
                    }
                    Ok(None) => {
                        stats.segments.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        stats.refused.fetch_add(1, Ordering::Relaxed);
                        if log {
                            eprintln!("spine: endpoint request refused: {e}");
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => {
                eprintln!("spine: endpoint socket: accept: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if !watches.is_empty() {
            // Marks the clients whose end has closed dead.
            for (_, w) in &watches {
                let _ = w.check();
            }
            let gone = live.endpoint_reap();
            stats.reclaimed.fetch_add(gone.len() as u64, Ordering::Relaxed);
            // Drop the connections of endpoints no longer open (reclaimed or closed by
            // DELETE): the client sees its end close.
            let open: Vec<u64> = live.endpoints().iter().map(|e| e.id).collect();
            watches.retain(|(id, _)| open.contains(id));
        }
        if !busy {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Why an endpoint request failed: the kind and message sent back.
#[derive(Debug)]
struct Refusal(&'static str, String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0, self.1)
    }
}

/// An endpoint and the watch of its client, or `None` for a segment handed out.
type Opened = Option<(u64, ClientWatch)>;

fn open(live: &Live, mut stream: UnixStream) -> Result<Opened, Refusal> {
    let r = answer(live, &mut stream);
    if let Err(Refusal(kind, message)) = &r {
        let body = ErrorBody {
            error: ApiError {
                kind: (*kind).to_string(),
                message: message.clone(),
                errno: None,
                log: None,
            },
        };
        let mut line = serde_json::to_vec(&body).unwrap_or_default();
        line.push(b'\n');
        let _ = stream.write_all(&line);
    }
    r
}

fn read_request(stream: &mut UnixStream) -> Result<Vec<u8>, Refusal> {
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 512];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Refusal("timeout", "no request line within 2 s".into()));
        }
        let _ = stream.set_read_timeout(Some(left));
        match stream.read(&mut chunk) {
            Ok(0) => {
                return Err(Refusal("bad_request", "connection closed before a request".into()))
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if let Some(end) = buf.iter().position(|&b| b == b'\n') {
                    buf.truncate(end);
                    return Ok(buf);
                }
                if buf.len() > MAX_REQUEST {
                    return Err(Refusal(
                        "too_large",
                        format!("request line over {MAX_REQUEST} bytes"),
                    ));
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(Refusal("timeout", "no request line within 2 s".into()))
            }
            Err(e) => return Err(Refusal("bad_request", format!("reading the request: {e}"))),
        }
    }
}

/// A request for a shared segment.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SegmentRequest {
    segment: SegmentName,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SegmentName {
    extension: String,
    map: String,
}

/// Hands out the memfd of a memory-mappable array (see the module docs).
fn segment(live: &Live, stream: &mut UnixStream, req: &SegmentName) -> Result<Opened, Refusal> {
    let (fd, len) =
        live.segment(&req.extension, &req.map).map_err(|e| Refusal(e.kind(), e.to_string()))?;
    let info =
        live.map_info(&req.extension, &req.map).map_err(|e| Refusal(e.kind(), e.to_string()))?;
    let body = serde_json::json!({ "segment": {
        "extension": req.extension,
        "map": req.map,
        "len": len,
        "value_size": info.value_size,
        "max_entries": info.max_entries,
        "spin_lock": live.spin_lock_offset(&req.extension, &req.map),
    }});
    let mut reply = serde_json::to_vec(&body).unwrap_or_default();
    reply.push(b'\n');
    stream
        .write_all(&reply)
        .map_err(|e| e.to_string())
        .and_then(|()| send_fds(stream, &[fd.as_fd()]).map_err(|e| e.to_string()))
        .map_err(|e| Refusal("segment_setup", format!("handing the segment over: {e}")))?;
    Ok(None)
}

/// A request for an extension's id.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtensionRequest {
    extension: ExtensionName,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtensionName {
    name: String,
}

/// Answers the id and domain of loaded extension `req.name` (see the module docs).
fn extension(live: &Live, stream: &mut UnixStream, req: &ExtensionName) -> Result<Opened, Refusal> {
    let Some(e) = live.extensions().into_iter().find(|e| e.name == req.name) else {
        return Err(Refusal("no_extension", format!("no extension named {:?}", req.name)));
    };
    let body = serde_json::json!({ "extension": {
        "id": e.id, "name": e.name, "domain": e.domain,
    }});
    let mut reply = serde_json::to_vec(&body).unwrap_or_default();
    reply.push(b'\n');
    stream
        .write_all(&reply)
        .map_err(|e| Refusal("bad_request", format!("writing the answer: {e}")))?;
    Ok(None)
}

fn answer(live: &Live, stream: &mut UnixStream) -> Result<Opened, Refusal> {
    let _ = stream.set_write_timeout(Some(REQUEST_TIMEOUT));
    let line = read_request(stream)?;
    if line.starts_with(b"{\"extension\"") {
        let req: ExtensionRequest = serde_json::from_slice(&line)
            .map_err(|e| Refusal("bad_json", format!("extension request: {e}")))?;
        return extension(live, stream, &req.extension);
    }
    if line.starts_with(b"{\"segment\"") {
        let req: SegmentRequest = serde_json::from_slice(&line)
            .map_err(|e| Refusal("bad_json", format!("segment request: {e}")))?;
        return segment(live, stream, &req.segment);
    }
    let req: EndpointRequest = serde_json::from_slice(&line)
        .map_err(|e| Refusal("bad_json", format!("endpoint request: {e}")))?;
    let watch_end = stream
        .try_clone()
        .map_err(|e| Refusal("endpoint_setup", format!("dup of the connection: {e}")))?;
    let watch = ClientWatch::new(watch_end.into());
    let opened = live
        .endpoint_open(&req, peer_pid(stream), watch.liveness())
        .map_err(|e| Refusal(e.kind(), e.to_string()))?;
    let id = opened.view.id;
    let mut reply =
        serde_json::to_vec(&serde_json::json!({ "endpoint": opened.view })).unwrap_or_default();
    reply.push(b'\n');
    let sent = stream.write_all(&reply).map_err(|e| e.to_string()).and_then(|()| {
        send_fds(stream, &[opened.region.as_fd(), opened.wake.as_fd()]).map_err(|e| e.to_string())
    });
    if let Err(e) = sent {
        let _ = live.endpoint_close(id);
        return Err(Refusal("endpoint_setup", format!("handing the endpoint over: {e}")));
    }
    Ok(Some((id, watch)))
}
