//! The control server: one thread running a small current-thread tokio runtime that
//! accepts connections on a Unix socket and answers HTTP/1.1 with axum. It only ever
//! calls [`Live`], which never waits on a worker; the packet path does not know it
//! exists.
//!
//! Limits, so that no client can hold the adapter's control plane: a request body cap
//! (413), a client that connects and says nothing or sends its header too slowly is cut
//! off after `header_timeout`, a request that takes longer than `request_timeout` (a
//! body trickled in) gets 408, and at most `max_connections` are served at once (the
//! others get 503 and are closed).
//!
//! With [`ServerConfig::tls`] the same API is also served on TCP, over TLS only and
//! behind a bearer token (see [`crate::tls`]), by the same thread under the same limits.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Path as UrlPath, Query, Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use spine_adapter::{Live, LiveError};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{Notify, Semaphore};

use crate::proto::{
    hex, unhex, ApiError, AttachRequest, Attachment, Dump, Entry, ErrorBody, KeyRequest,
    LookupAndDeleteRequest, NextKey, Popped, TraceRequest, UpdateRequest, Version, VERSION,
};
use crate::tls::{TlsConfig, TlsError};

/// Where an adapter's API is served by default.
pub const DEFAULT_SOCKET: &str = "/run/spine/spine.sock";

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub path: PathBuf,
    /// The socket file's mode (default 0660: owner and group).
    pub mode: u32,
    /// The largest request body (default 16 MiB): larger ones get 413.
    pub max_body: usize,
    /// A client must send its request header within this (default 5 s).
    pub header_timeout: Duration,
    /// A whole request, body included, must arrive and be answered within this
    /// (default 30 s).
    pub request_timeout: Duration,
    /// Connections served at once (default 64).
    pub max_connections: usize,
    /// Log each connection's peer credentials (or remote address) to stderr.
    pub log: bool,
    /// Also serve the API remotely: TCP, TLS only, bearer token (default: not).
    pub tls: Option<TlsConfig>,
    /// Serve endpoints on the sibling socket (the path plus `.ep`; default on).
    pub endpoints: bool,
}

impl ServerConfig {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ServerConfig {
            path: path.into(),
            mode: 0o660,
            max_body: 16 << 20,
            header_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
            max_connections: 64,
            log: false,
            tls: None,
            endpoints: true,
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("control socket {path}: {what}: {source}")]
    Io { path: String, what: &'static str, source: std::io::Error },
    #[error("control socket {path}: another adapter is serving it")]
    InUse { path: String },
    #[error("remote control API: {0}")]
    Tls(#[from] TlsError),
    #[error("remote control API on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
}

/// What the server counted (for tests and `/metrics`).
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections: AtomicU64,
    /// Connections cut off for not sending a request header within the header timeout.
    pub idle_cut: AtomicU64,
    /// Connections refused because `max_connections` were being served.
    pub refused: AtomicU64,
    pub requests: AtomicU64,
    /// Remote connections whose TLS handshake failed (plain TCP, wrong protocol, no
    /// common parameters, or too slow).
    pub tls_failed: AtomicU64,
    /// Connections open now, local and remote (their descriptors are closed when this
    /// goes down).
    pub open: AtomicU64,
}

/// Counts a connection open for as long as it lives.
struct OpenGuard(Arc<ServerStats>);

impl OpenGuard {
    fn new(stats: &Arc<ServerStats>) -> OpenGuard {
        stats.open.fetch_add(1, Ordering::Relaxed);
        OpenGuard(stats.clone())
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A running control server; [`Server::stop`] (or dropping it) stops it and removes
/// the socket.
#[derive(Debug)]
pub struct Server {
    path: PathBuf,
    tls_addr: Option<SocketAddr>,
    stop: Arc<Notify>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<ServerStats>,
    eps: Option<crate::endpoints::EndpointServer>,
    ep_stats: Arc<crate::endpoints::EndpointStats>,
}

impl std::fmt::Debug for crate::endpoints::EndpointServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EndpointServer({})", self.path.display())
    }
}

impl Server {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the API is served remotely (the port the kernel chose for port 0).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// The endpoint socket, when endpoints are served.
    pub fn endpoint_path(&self) -> Option<&Path> {
        self.eps.as_ref().map(|e| e.path.as_path())
    }

    pub fn endpoint_stats(&self) -> &crate::endpoints::EndpointStats {
        &self.ep_stats
    }

    /// Stops accepting, ends the connections being served and removes the socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(e) = self.eps.take() {
            e.stop.store(true, Ordering::Relaxed);
            let _ = e.thread.join();
            let _ = std::fs::remove_file(&e.path);
        }
        if let Some(t) = self.thread.take() {
            self.stop.notify_one();
            let _ = t.join();
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[derive(Clone)]
struct App {
    live: Live,
    stats: Arc<ServerStats>,
}

/// Binds the socket (mode `cfg.mode`, its folder created if missing) and serves the API
/// on a thread of its own. The process must ignore SIGPIPE (Rust's default; `spine run`
/// sets it again), or a client hanging up before its answer would end it.
pub fn serve(live: Live, cfg: ServerConfig) -> Result<Server, ServerError> {
    let path = cfg.path.clone();
    let io = |what: &'static str| {
        let p = path.display().to_string();
        move |source| ServerError::Io { path: p, what, source }
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io("creating its folder"))?;
    }
    if path.exists() {
        // A socket nobody answers on is what a stopped adapter left behind.
        if std::os::unix::net::UnixStream::connect(&path).is_ok() {
            return Err(ServerError::InUse { path: path.display().to_string() });
        }
        std::fs::remove_file(&path).map_err(io("removing a stale socket"))?;
    }
    let listener = std::os::unix::net::UnixListener::bind(&path).map_err(io("binding"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(cfg.mode))
        .map_err(io("setting its mode"))?;
    listener.set_nonblocking(true).map_err(io("setting non-blocking"))?;
    let tls = match &cfg.tls {
        Some(t) => {
            let config = crate::tls::server_config(t)?;
            let listen = |source| ServerError::Listen { addr: t.addr, source };
            let tcp = std::net::TcpListener::bind(t.addr).map_err(listen)?;
            tcp.set_nonblocking(true).map_err(listen)?;
            Some((tcp, config, t.token.clone()))
        }
        None => None,
    };
    let tls_addr = match &tls {
        Some((tcp, ..)) => Some(tcp.local_addr().map_err(io("reading the TCP address"))?),
        None => None,
    };
    let stop = Arc::new(Notify::new());
    let stats = Arc::new(ServerStats::default());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("starting its runtime"))?;
    live.log_enable();
    let ep_stats = Arc::new(crate::endpoints::EndpointStats::default());
    let eps = if cfg.endpoints {
        let ep_path = crate::endpoints::endpoint_socket(&path);
        let e = crate::endpoints::spawn(
            live.clone(),
            ep_path.clone(),
            cfg.mode,
            ep_stats.clone(),
            cfg.log,
        )
        .map_err(|source| ServerError::Io {
            path: ep_path.display().to_string(),
            what: "serving endpoints",
            source,
        })?;
        Some(e)
    } else {
        None
    };
    let app = App { live, stats: stats.clone() };
    let (stop2, cfg2) = (stop.clone(), cfg.clone());
    let thread = std::thread::Builder::new()
        .name("spine-control".into())
        .spawn(move || rt.block_on(accept_loop(listener, tls, app, cfg2, stop2)))
        .map_err(io("starting its thread"))?;
    Ok(Server { path, tls_addr, stop, thread: Some(thread), stats, eps, ep_stats })
}

/// The remote listener: TCP, its TLS configuration and the bearer token.
type Remote = (std::net::TcpListener, Arc<rustls::ServerConfig>, String);

async fn accept_loop(
    listener: std::os::unix::net::UnixListener,
    tls: Option<Remote>,
    app: App,
    cfg: ServerConfig,
    stop: Arc<Notify>,
) {
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("spine: control socket {}: {e}", cfg.path.display());
            return;
        }
    };
    let router = router(app.clone(), &cfg);
    let slots = Arc::new(Semaphore::new(cfg.max_connections));
    let mut tasks = tokio::task::JoinSet::new();
    // Aborted below with the connections it serves (dropping its JoinSet aborts them).
    let remote = tls.map(|(tcp, config, token)| {
        let router = crate::tls::with_token(router.clone(), &token);
        tokio::spawn(remote_loop(
            tcp,
            config,
            router,
            slots.clone(),
            app.stats.clone(),
            cfg.clone(),
        ))
    });
    loop {
        let (stream, _) = tokio::select! {
            _ = stop.notified() => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: wait, then go on.
                    eprintln!("spine: control socket: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        app.stats.connections.fetch_add(1, Ordering::Relaxed);
        let guard = OpenGuard::new(&app.stats);
        if cfg.log {
            match stream.peer_cred() {
                Ok(c) => eprintln!(
                    "spine: control: connection from pid {} uid {} gid {}",
                    c.pid().map_or_else(|| "?".to_string(), |p| p.to_string()),
                    c.uid(),
                    c.gid()
                ),
                Err(e) => eprintln!("spine: control: connection, credentials unknown: {e}"),
            }
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            app.stats.refused.fetch_add(1, Ordering::Relaxed);
            tasks.spawn(async move {
                let _guard = guard;
                // Owned here, so closed before the guard counts it gone.
                let mut stream = stream;
                let body = error_json("busy", "too many control connections; try again");
                let head = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes()).await;
                let _ = stream.write_all(body.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
            continue;
        };
        let (router, stats, header_timeout) =
            (router.clone(), app.stats.clone(), cfg.header_timeout);
        tasks.spawn(async move {
            let _permit = permit;
            let _guard = guard;
            // Owned here, so closed before the guard counts it gone.
            let stream = stream;
            // A client that connects and never speaks is cut off.
            if tokio::time::timeout(header_timeout, stream.readable()).await.is_err() {
                stats.idle_cut.fetch_add(1, Ordering::Relaxed);
                return;
            }
            serve_http(stream, router, header_timeout, &stats).await;
        });
    }
    if let Some(r) = remote {
        r.abort();
        let _ = r.await;
    }
    tasks.shutdown().await;
}

/// HTTP/1.1 on one connection until the client closes it.
async fn serve_http<S>(io: S, router: Router, header_timeout: Duration, stats: &ServerStats)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = TowerToHyperService::new(router);
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(io), service);
    // hyper ends a connection whose header does not come in time with a timeout.
    if conn.await.is_err_and(|e| e.is_timeout()) {
        stats.idle_cut.fetch_add(1, Ordering::Relaxed);
    }
}

/// Accepts remote connections: the TLS handshake must finish within the header
/// timeout, then the connection is served like a local one (behind the token check).
/// Beyond `max_connections` (shared with the socket) a connection is closed at once:
/// nothing can be said to it before a handshake.
async fn remote_loop(
    tcp: std::net::TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    slots: Arc<Semaphore>,
    stats: Arc<ServerStats>,
    cfg: ServerConfig,
) {
    let tcp = match tokio::net::TcpListener::from_std(tcp) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("spine: remote control API: {e}");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            r = tcp.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("spine: remote control API: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        stats.connections.fetch_add(1, Ordering::Relaxed);
        let guard = OpenGuard::new(&stats);
        if cfg.log {
            eprintln!("spine: control: remote connection from {peer}");
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            drop(stream);
            drop(guard);
            continue;
        };
        let (acceptor, router, stats, header_timeout) =
            (acceptor.clone(), router.clone(), stats.clone(), cfg.header_timeout);
        tasks.spawn(async move {
            let _permit = permit;
            let _guard = guard;
            let tls = match tokio::time::timeout(header_timeout, acceptor.accept(stream)).await {
                Ok(Ok(s)) => s,
                Ok(Err(_)) | Err(_) => {
                    stats.tls_failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            serve_http(tls, router, header_timeout, &stats).await;
        });
    }
}

fn error_json(kind: &str, message: &str) -> String {
    let e = ErrorBody {
        error: ApiError { kind: kind.into(), message: message.into(), errno: None, log: None },
    };
    serde_json::to_string(&e).unwrap_or_default()
}

/// An error response: a status and `{"error": {...}}`.
#[derive(Debug)]
struct Fail(StatusCode, ApiError);

impl Fail {
    fn new(status: StatusCode, kind: &str, message: impl Into<String>) -> Fail {
        Fail(
            status,
            ApiError { kind: kind.into(), message: message.into(), errno: None, log: None },
        )
    }
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        (self.0, Json(ErrorBody { error: self.1 })).into_response()
    }
}

impl From<LiveError> for Fail {
    fn from(e: LiveError) -> Fail {
        let status = match &e {
            LiveError::NoExtension { .. }
            | LiveError::NoPort { .. }
            | LiveError::NoDomain { .. }
            | LiveError::NoMap { .. } => StatusCode::NOT_FOUND,
            LiveError::Exists { .. }
            | LiveError::Attached { .. }
            | LiveError::PortBusy { .. }
            | LiveError::NotAttached { .. } => StatusCode::CONFLICT,
            LiveError::Object { .. } | LiveError::Size { .. } => StatusCode::BAD_REQUEST,
            LiveError::Load { .. } | LiveError::Runner { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            LiveError::Refused { .. } | LiveError::ReplaceDomain { .. } => StatusCode::FORBIDDEN,
            LiveError::Map { source, .. } if source.errno().abs() == i64::from(libc::ENOENT) => {
                StatusCode::NOT_FOUND
            }
            LiveError::Map { .. } => StatusCode::BAD_REQUEST,
            LiveError::TooMany { .. } => StatusCode::INSUFFICIENT_STORAGE,
            LiveError::NoTrace { .. } => StatusCode::CONFLICT,
            LiveError::NotSegment { .. } | LiveError::NotRing { .. } => StatusCode::BAD_REQUEST,
            LiveError::RingOwned { .. } => StatusCode::CONFLICT,
            LiveError::SegmentFd { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            LiveError::TraceSize { .. } => StatusCode::BAD_REQUEST,
            LiveError::NoEndpoint { .. } => StatusCode::NOT_FOUND,
            LiveError::BadTag { .. }
            | LiveError::EndpointSize { .. }
            | LiveError::BadLayout { .. } => StatusCode::BAD_REQUEST,
            LiveError::TagTaken { .. } | LiveError::Slot { .. } => StatusCode::CONFLICT,
            LiveError::NotEndpointMap { .. } => StatusCode::BAD_REQUEST,
            LiveError::NoEndpointMap { .. } => StatusCode::NOT_FOUND,
            LiveError::EndpointLimit { .. } => StatusCode::TOO_MANY_REQUESTS,
            LiveError::EndpointSetup { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            LiveError::AppletDomain { .. } => StatusCode::FORBIDDEN,
            LiveError::NoApplets { .. } => StatusCode::BAD_REQUEST,
        };
        Fail(
            status,
            ApiError {
                kind: e.kind().to_string(),
                message: e.to_string(),
                errno: e.errno(),
                log: e.verifier_log().map(str::to_string),
            },
        )
    }
}

impl From<BytesRejection> for Fail {
    fn from(r: BytesRejection) -> Fail {
        let status = r.status();
        let kind =
            if status == StatusCode::PAYLOAD_TOO_LARGE { "too_large" } else { "bad_request" };
        Fail::new(status, kind, r.body_text())
    }
}

type Reply<T> = Result<Json<T>, Fail>;

/// A JSON body, parsed here so that malformed input gets a JSON error.
fn parse<T: for<'de> Deserialize<'de>>(body: Result<Bytes, BytesRejection>) -> Result<T, Fail> {
    let body = body?;
    serde_json::from_slice(&body)
        .map_err(|e| Fail::new(StatusCode::BAD_REQUEST, "bad_json", format!("request body: {e}")))
}

fn key_bytes(what: &str, s: &str) -> Result<Vec<u8>, Fail> {
    // A queue's or stack's key is empty (`key_size` 0); no other map accepts one.
    if what == "key" && s.trim().is_empty() {
        return Ok(Vec::new());
    }
    unhex(s).ok_or_else(|| {
        Fail::new(StatusCode::BAD_REQUEST, "bad_request", format!("{what} '{s}' is not hex bytes"))
    })
}

async fn close_endpoint(
    State(a): State<App>,
    UrlPath(id): UrlPath<String>,
) -> Reply<spine_adapter::EndpointView> {
    let id: u64 = id.parse().map_err(|_| {
        Fail::new(
            StatusCode::BAD_REQUEST,
            "bad_request",
            format!("endpoint id '{id}' is not a number"),
        )
    })?;
    Ok(Json(a.live.endpoint_close(id)?))
}

fn router(app: App, cfg: &ServerConfig) -> Router {
    let timeout = cfg.request_timeout;
    let v1 = Router::new()
        .route("/version", get(version))
        .route("/ports", get(|State(a): State<App>| async move { Json(a.live.ports()) }))
        .route("/domains", get(|State(a): State<App>| async move { Json(a.live.domains()) }))
        .route("/extensions", get(list_extensions).post(load))
        .route("/extensions/{name}", delete(unload))
        .route("/ports/{port}/attach", post(attach))
        .route("/ports/{port}/replace", post(replace))
        .route("/ports/{port}/detach", post(detach))
        .route("/maps", get(|State(a): State<App>| async move { Json(a.live.maps()) }))
        .route("/extensions/{ext}/maps/{map}", get(map_info))
        .route("/extensions/{ext}/maps/{map}/entries", get(dump))
        .route("/extensions/{ext}/maps/{map}/lookup", post(lookup))
        .route("/extensions/{ext}/maps/{map}/update", post(update))
        .route("/extensions/{ext}/maps/{map}/delete", post(delete_key))
        .route("/extensions/{ext}/maps/{map}/next_key", post(next_key))
        .route("/extensions/{ext}/maps/{map}/pop", post(pop))
        .route("/extensions/{ext}/maps/{map}/lookup_and_delete", post(lookup_and_delete))
        .route("/extensions/{ext}/maps/{map}/records", get(records))
        .route("/stats", get(|State(a): State<App>| async move { Json(a.live.totals()) }))
        .route("/trace/start", post(trace_start))
        .route("/trace/stop", post(trace_stop))
        .route("/trace", get(trace_get))
        .route("/log", get(log))
        .route("/endpoints", get(|State(a): State<App>| async move { Json(a.live.endpoints()) }))
        .route("/endpoints/{id}", delete(close_endpoint));
    Router::new()
        .nest(&format!("/{VERSION}"), v1)
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(not_allowed)
        .layer(DefaultBodyLimit::max(cfg.max_body))
        .layer(middleware::from_fn(move |req: Request, next: Next| async move {
            match tokio::time::timeout(timeout, next.run(req)).await {
                Ok(r) => r,
                Err(_) => Fail::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "timeout",
                    "the request did not arrive in time",
                )
                .into_response(),
            }
        }))
        .layer(middleware::from_fn_with_state(app.clone(), count_requests))
        .with_state(app)
}

async fn count_requests(State(a): State<App>, req: Request, next: Next) -> Response {
    a.stats.requests.fetch_add(1, Ordering::Relaxed);
    next.run(req).await
}

async fn not_found(method: Method, uri: Uri) -> Fail {
    Fail::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no operation {method} {}; the API is under /{VERSION}/ (docs/API.md)", uri.path()),
    )
}

async fn not_allowed(method: Method, uri: Uri) -> Fail {
    Fail::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} does not take {method}", uri.path()),
    )
}

async fn version() -> Json<Version> {
    Json(Version { api: VERSION.into(), spine: env!("CARGO_PKG_VERSION").into() })
}

async fn metrics(State(a): State<App>) -> Response {
    let mut text = a.live.totals().prometheus();
    let s = &a.stats;
    for (name, help, v) in [
        ("control_connections_total", "Control connections accepted.", &s.connections),
        ("control_requests_total", "Control requests answered.", &s.requests),
        ("control_idle_cut_total", "Control connections cut off for saying nothing.", &s.idle_cut),
        ("control_refused_total", "Control connections refused: too many at once.", &s.refused),
        (
            "control_tls_failed_total",
            "Remote connections whose TLS handshake failed.",
            &s.tls_failed,
        ),
    ] {
        text.push_str(&format!(
            "# HELP spine_{name} {help}\n# TYPE spine_{name} counter\nspine_{name} {}\n",
            v.load(Ordering::Relaxed)
        ));
    }
    text.push_str(&format!(
        "# HELP spine_control_open_connections Control connections open now.\n# TYPE spine_control_open_connections gauge\nspine_control_open_connections {}\n",
        s.open.load(Ordering::Relaxed)
    ));
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

async fn list_extensions(State(a): State<App>) -> Json<Vec<spine_adapter::ExtView>> {
    Json(a.live.extensions())
}

#[derive(Debug, Deserialize)]
struct LoadQuery {
    name: String,
    #[serde(default)]
    section: Option<String>,
    #[serde(default)]
    domain: Option<String>,
    /// A loaded extension of the same domain that the new one replaces atomically for
    /// active messages (`Live::load_replacing`).
    #[serde(default)]
    replaces: Option<String>,
}

/// `POST /v1/extensions?name=N[&section=S][&domain=D][&replaces=OLD]`, the ELF object as
/// the body.
async fn load(
    State(a): State<App>,
    q: Result<Query<LoadQuery>, axum::extract::rejection::QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<(StatusCode, Json<spine_adapter::ExtView>), Fail> {
    let Query(q) =
        q.map_err(|e| Fail::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    let body = body?;
    // Verifying and compiling can take a while: off the thread that serves the others.
    let live = a.live.clone();
    let view = tokio::task::spawn_blocking(move || {
        let (section, domain) = (q.section.as_deref(), q.domain.as_deref().unwrap_or("default"));
        match &q.replaces {
            Some(old) => live.load_replacing(old, &q.name, &body, section, domain),
            None => live.load(&q.name, &body, section, domain),
        }
    })
    .await
    .map_err(|e| Fail::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))??;
    Ok((StatusCode::CREATED, Json(view)))
}

#[derive(Debug, Deserialize)]
struct UnloadQuery {
    #[serde(default)]
    force: bool,
}

async fn unload(
    State(a): State<App>,
    UrlPath(name): UrlPath<String>,
    q: Result<Query<UnloadQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<StatusCode, Fail> {
    let Query(q) =
        q.map_err(|e| Fail::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    a.live.unload(&name, q.force)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn attach(
    State(a): State<App>,
    UrlPath(port): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Attachment> {
    let r: AttachRequest = parse(body)?;
    a.live.attach(&r.extension, &port)?;
    Ok(Json(Attachment { port, extension: Some(r.extension), previous: None }))
}

async fn replace(
    State(a): State<App>,
    UrlPath(port): UrlPath<String>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Attachment> {
    let r: AttachRequest = parse(body)?;
    let old = a.live.replace(&port, &r.extension)?;
    Ok(Json(Attachment { port, extension: Some(r.extension), previous: Some(old) }))
}

async fn detach(State(a): State<App>, UrlPath(port): UrlPath<String>) -> Reply<Attachment> {
    let old = a.live.detach(&port)?;
    Ok(Json(Attachment { port, extension: None, previous: Some(old) }))
}

async fn map_info(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
) -> Reply<spine_adapter::MapView> {
    Ok(Json(a.live.map_info(&ext, &map)?))
}

async fn dump(State(a): State<App>, UrlPath((ext, map)): UrlPath<(String, String)>) -> Reply<Dump> {
    let info = a.live.map_info(&ext, &map)?;
    let kv = a.live.map_dump(&ext, &map)?;
    let formatted = a.live.map_formatted(&ext, &map, &kv);
    let entries = kv
        .iter()
        .zip(formatted)
        .map(|((k, v), formatted)| Entry { key: hex(k), value: hex(v), formatted })
        .collect();
    Ok(Json(Dump { map: info, entries }))
}

fn required_key(r: &KeyRequest) -> Result<Vec<u8>, Fail> {
    let k = r
        .key
        .as_deref()
        .ok_or_else(|| Fail::new(StatusCode::BAD_REQUEST, "bad_request", "no key given"))?;
    key_bytes("key", k)
}

async fn lookup(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Entry> {
    let r: KeyRequest = parse(body)?;
    let key = required_key(&r)?;
    let value = a.live.map_lookup(&ext, &map, &key)?;
    let kv = [(key, value)];
    let formatted = a.live.map_formatted(&ext, &map, &kv).pop().flatten();
    let [(key, value)] = kv;
    Ok(Json(Entry { key: hex(&key), value: hex(&value), formatted }))
}

async fn update(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, Fail> {
    let r: UpdateRequest = parse(body)?;
    let (key, value) = (key_bytes("key", &r.key)?, key_bytes("value", &r.value)?);
    a.live.map_update(&ext, &map, &key, &value, r.flags)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn delete_key(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, Fail> {
    let r: KeyRequest = parse(body)?;
    let key = required_key(&r)?;
    a.live.map_delete(&ext, &map, &key)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn next_key(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<NextKey> {
    let r: KeyRequest = parse(body)?;
    let key = r.key.as_deref().map(|k| key_bytes("key", k)).transpose()?;
    let next = a.live.map_next_key(&ext, &map, key.as_deref())?;
    Ok(Json(NextKey { next_key: next.as_deref().map(hex) }))
}

/// `POST .../lookup_and_delete`: a hash map's value of `key`, the element deleted
/// (`BPF_MAP_LOOKUP_AND_DELETE_ELEM`).
async fn lookup_and_delete(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Reply<Entry> {
    let r: LookupAndDeleteRequest = parse(body)?;
    let key = key_bytes("key", &r.key)?;
    let value = a.live.map_lookup_and_delete(&ext, &map, &key, r.flags)?;
    let kv = [(key, value)];
    let formatted = a.live.map_formatted(&ext, &map, &kv).pop().flatten();
    let [(key, value)] = kv;
    Ok(Json(Entry { key: hex(&key), value: hex(&value), formatted }))
}

/// `POST .../pop`: pops a queue or stack (`BPF_MAP_LOOKUP_AND_DELETE_ELEM`).
async fn pop(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
) -> Reply<Popped> {
    let value = a.live.map_pop(&ext, &map)?;
    Ok(Json(Popped { value: value.as_deref().map(hex) }))
}

/// `POST /v1/trace/start` with `{"events": N}` (or no body: 65,536 per worker).
async fn trace_start(
    State(a): State<App>,
    body: Result<Bytes, BytesRejection>,
) -> Result<StatusCode, Fail> {
    let body = body?;
    let r: TraceRequest =
        if body.is_empty() { TraceRequest { events: None } } else { parse(Ok(body))? };
    a.live.trace_start(r.events.unwrap_or(1 << 16))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn trace_stop(State(a): State<App>) -> Result<StatusCode, Fail> {
    a.live.trace_stop()?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/trace`: the last stopped trace, Chrome/Perfetto trace format.
async fn trace_get(State(a): State<App>) -> Reply<serde_json::Value> {
    let live = a.live.clone();
    // Waits (briefly) for the workers to hand their rings over.
    let v = tokio::task::spawn_blocking(move || live.trace_get())
        .await
        .map_err(|e| Fail::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()))??;
    Ok(Json(v))
}

#[derive(Debug, Deserialize)]
struct LogQuery {
    #[serde(default)]
    after: u64,
    #[serde(default)]
    max: Option<usize>,
}

/// `GET /v1/extensions/{ext}/maps/{map}/records?after=SEQ[&max=N]`: the ring buffer's
/// records after sequence number SEQ (the control side consumes the ring).
async fn records(
    State(a): State<App>,
    UrlPath((ext, map)): UrlPath<(String, String)>,
    q: Result<Query<LogQuery>, axum::extract::rejection::QueryRejection>,
) -> Reply<spine_adapter::RingPage> {
    let Query(q) =
        q.map_err(|e| Fail::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    Ok(Json(a.live.ring_since(&ext, &map, q.after, q.max.unwrap_or(1000).min(10_000))?))
}

/// `GET /v1/log?after=SEQ[&max=N]`: `bpf_trace_printk` lines and watchdog events after
/// sequence number SEQ (followers poll with the `next` of the last answer).
async fn log(
    State(a): State<App>,
    q: Result<Query<LogQuery>, axum::extract::rejection::QueryRejection>,
) -> Reply<spine_adapter::LogPage> {
    let Query(q) =
        q.map_err(|e| Fail::new(StatusCode::BAD_REQUEST, "bad_request", e.body_text()))?;
    Ok(Json(a.live.log_since(q.after, q.max.unwrap_or(1000).min(10_000))))
}
