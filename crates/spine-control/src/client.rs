//! A blocking client of the control API: HTTP/1.1 over a `std` Unix stream (or, for a
//! remote adapter, TLS over TCP with a bearer token), one request at a time, the
//! connection kept alive between requests (and opened again if the server closed it
//! while idle). What the CLI and tests use.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::ServerName;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::proto::{
    hex, unhex, ApiError, AttachRequest, Attachment, DomainView, Dump, ErrorBody, ExtView,
    KeyRequest, LookupAndDeleteRequest, MapView, NextKey, Popped, PortView, Totals, UpdateRequest,
    Version, VERSION,
};

/// Why a request failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("control socket {path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// The adapter answered with an error; `error.message` names the object, map or key.
    #[error("{}", error.message)]
    Api { status: u16, error: ApiError },
    #[error("control socket {path}: malformed response: {what}")]
    Protocol { path: String, what: String },
    /// A remote address that is not `https://HOST:PORT`.
    #[error("remote adapter {url}: {what}")]
    Remote { url: String, what: String },
    /// The token, or the certificate authorities to trust, cannot be used.
    #[error("remote adapter {url}: {source}")]
    RemoteSetup { url: String, source: crate::tls::TlsError },
    /// The TLS session could not be set up or its handshake failed (a certificate the
    /// client does not trust, a server that does not speak TLS); `source` wraps
    /// rustls's error where it has one.
    #[error("remote adapter {url}: TLS: {source}")]
    Tls { url: String, source: std::io::Error },
}

impl ClientError {
    /// The API error, when the adapter answered with one.
    pub fn api(&self) -> Option<&ApiError> {
        match self {
            ClientError::Api { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// A raw response: status, content type and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

/// Where the adapter is.
#[derive(Debug, Clone)]
enum Target {
    Unix(PathBuf),
    Remote(Box<Remote>),
}

#[derive(Debug, Clone)]
struct Remote {
    url: String,
    /// `host:port` to connect to.
    addr: String,
    name: ServerName<'static>,
    config: Arc<rustls::ClientConfig>,
    token: String,
}

/// One open connection.
#[derive(Debug)]
enum Stream {
    Unix(UnixStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// A connection to an adapter's control socket, or to a remote adapter's TLS API.
#[derive(Debug)]
pub struct Client {
    /// What errors name: the socket's path or the remote URL.
    path: PathBuf,
    target: Target,
    conn: Option<BufReader<Stream>>,
    timeout: Duration,
}

const MAX_HEADER: usize = 64 << 10;

impl Client {
    /// A client of the socket at `path` (connected at the first request).
    pub fn new(path: impl AsRef<Path>) -> Client {
        let path = path.as_ref().to_path_buf();
        Client {
            target: Target::Unix(path.clone()),
            path,
            conn: None,
            timeout: Duration::from_secs(60),
        }
    }

    /// A client of a remote adapter's API at `url` (`https://HOST:PORT`; plain `http`
    /// is refused), trusting the certificate authorities in the PEM file `ca` and
    /// sending `token` as its bearer token.
    pub fn remote(url: &str, token: &str, ca: &Path) -> Result<Client, ClientError> {
        let fail = |what: String| ClientError::Remote { url: url.to_string(), what };
        let rest = match url.split_once("://") {
            Some(("https", rest)) => rest,
            Some(("http", _)) => {
                return Err(fail("remote management is over TLS only: use https://".into()))
            }
            _ => return Err(fail("expected https://HOST:PORT".into())),
        };
        let hostport = rest.strip_suffix('/').unwrap_or(rest);
        if hostport.contains('/') || hostport.contains('@') {
            return Err(fail("expected https://HOST:PORT (no path, no user)".into()));
        }
        let (host, port) = match hostport.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p != 0) => (h, p),
            _ => return Err(fail("expected https://HOST:PORT with a port".into())),
        };
        let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let name = ServerName::try_from(bare.to_string())
            .map_err(|e| fail(format!("host '{host}': {e}")))?;
        let setup = |source| ClientError::RemoteSetup { url: url.to_string(), source };
        crate::tls::check_token(token).map_err(setup)?;
        let config = crate::tls::client_config(ca).map_err(setup)?;
        Ok(Client {
            path: PathBuf::from(url),
            target: Target::Remote(Box::new(Remote {
                url: url.to_string(),
                addr: format!("{host}:{port}"),
                name,
                config,
                token: token.to_string(),
            })),
            conn: None,
            timeout: Duration::from_secs(60),
        })
    }

    /// How long to wait for an answer (default 60 s).
    pub fn with_timeout(mut self, t: Duration) -> Client {
        self.timeout = t;
        self
    }

    fn io(&self, source: std::io::Error) -> ClientError {
        ClientError::Io { path: self.path.display().to_string(), source }
    }

    fn protocol(&self, what: impl Into<String>) -> ClientError {
        ClientError::Protocol { path: self.path.display().to_string(), what: what.into() }
    }

    fn connect(&mut self) -> Result<&mut BufReader<Stream>, ClientError> {
        if self.conn.is_none() {
            let stream = match &self.target {
                Target::Unix(path) => {
                    let s = UnixStream::connect(path).map_err(|e| self.io(e))?;
                    s.set_read_timeout(Some(self.timeout)).map_err(|e| self.io(e))?;
                    s.set_write_timeout(Some(self.timeout)).map_err(|e| self.io(e))?;
                    Stream::Unix(s)
                }
                Target::Remote(r) => {
                    let s = TcpStream::connect(&r.addr).map_err(|e| self.io(e))?;
                    s.set_read_timeout(Some(self.timeout)).map_err(|e| self.io(e))?;
                    s.set_write_timeout(Some(self.timeout)).map_err(|e| self.io(e))?;
                    s.set_nodelay(true).map_err(|e| self.io(e))?;
                    let tls_err = |source| ClientError::Tls { url: r.url.clone(), source };
                    let c = rustls::ClientConnection::new(r.config.clone(), r.name.clone())
                        .map_err(|e| tls_err(std::io::Error::other(e)))?;
                    let mut tls = rustls::StreamOwned::new(c, s);
                    // Handshake now, so that a refused certificate is reported as such
                    // rather than as a failed write.
                    while tls.conn.is_handshaking() {
                        tls.conn.complete_io(&mut tls.sock).map_err(tls_err)?;
                    }
                    Stream::Tls(Box::new(tls))
                }
            };
            self.conn = Some(BufReader::new(stream));
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// Sends one request and reads its response; `body` is `(content type, bytes)`.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<Response, ClientError> {
        // A kept-alive connection the server has closed fails at once: open a new one,
        // once (requests are not retried once the server may have acted on them).
        let reused = self.conn.is_some();
        match self.exchange(method, path, body) {
            Err(ClientError::Io { .. }) | Err(ClientError::Protocol { .. }) if reused => {
                self.conn = None;
                self.exchange(method, path, body)
            }
            r => r,
        }
    }

    fn exchange(
        &mut self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<Response, ClientError> {
        let r = self.exchange_inner(method, path, body);
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    fn exchange_inner(
        &mut self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<Response, ClientError> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nhost: spine\r\n");
        if let Target::Remote(r) = &self.target {
            head.push_str(&format!("authorization: Bearer {}\r\n", r.token));
        }
        if let Some((ct, b)) = body {
            head.push_str(&format!("content-type: {ct}\r\ncontent-length: {}\r\n", b.len()));
        } else if method != "GET" {
            head.push_str("content-length: 0\r\n");
        }
        head.push_str("\r\n");
        let path_s = self.path.display().to_string();
        let conn = self.connect()?;
        let io = |source| ClientError::Io { path: path_s.clone(), source };
        let sent = conn.get_mut().write_all(head.as_bytes()).and_then(|()| match body {
            Some((_, b)) => conn.get_mut().write_all(b),
            None => Ok(()),
        });
        // A server refusing a body (413) may close before taking all of it: its answer
        // is still there to read.
        if let Err(e) = sent {
            if !matches!(
                e.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            ) {
                return Err(io(e));
            }
        }
        let mut line = String::new();
        read_line(conn, &mut line).map_err(io)?;
        if line.is_empty() {
            return Err(self.protocol("the connection closed before an answer"));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| self.protocol(format!("status line '{}'", line.trim_end())))?;
        let (mut len, mut chunked, mut close, mut ct) = (None, false, false, None);
        let mut header_bytes = 0;
        let conn = self.conn.as_mut().expect("connected");
        loop {
            line.clear();
            read_line(conn, &mut line).map_err(io)?;
            header_bytes += line.len();
            if header_bytes > MAX_HEADER || line.is_empty() {
                return Err(self.protocol("header too long or cut short"));
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            let Some((name, value)) = l.split_once(':') else { continue };
            let value = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => len = value.parse::<usize>().ok(),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "connection" => close = value.eq_ignore_ascii_case("close"),
                "content-type" => ct = Some(value.to_string()),
                _ => {}
            }
        }
        let conn = self.conn.as_mut().expect("connected");
        let mut body = Vec::new();
        if chunked {
            loop {
                line.clear();
                read_line(conn, &mut line).map_err(io)?;
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| ClientError::Protocol {
                    path: path_s.clone(),
                    what: "chunk size".into(),
                })?;
                if size == 0 {
                    line.clear();
                    read_line(conn, &mut line).map_err(io)?;
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                conn.read_exact(&mut body[start..]).map_err(io)?;
                line.clear();
                read_line(conn, &mut line).map_err(io)?;
            }
        } else if let Some(n) = len {
            body.resize(n, 0);
            conn.read_exact(&mut body).map_err(io)?;
        } else if status != 204 && status != 304 {
            conn.read_to_end(&mut body).map_err(io)?;
            close = true;
        }
        if close {
            self.conn = None;
        }
        Ok(Response { status, content_type: ct, body })
    }

    /// A request whose 2xx answer is JSON of type `T`; other answers become
    /// [`ClientError::Api`].
    fn call<T: DeserializeOwned>(
        &mut self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<T, ClientError> {
        let r = self.checked(method, path, body)?;
        let body = if r.body.is_empty() { b"null".as_slice() } else { &r.body };
        serde_json::from_slice(body).map_err(|e| self.protocol(format!("{path}: {e}")))
    }

    fn checked(
        &mut self,
        method: &str,
        path: &str,
        body: Option<(&str, &[u8])>,
    ) -> Result<Response, ClientError> {
        let r = self.request(method, path, body)?;
        if (200..300).contains(&r.status) {
            return Ok(r);
        }
        let error = match serde_json::from_slice::<ErrorBody>(&r.body) {
            Ok(b) => b.error,
            Err(_) => ApiError {
                kind: "http".into(),
                message: format!("{method} {path}: HTTP {}", r.status),
                errno: None,
                log: None,
            },
        };
        Err(ClientError::Api { status: r.status, error })
    }

    fn json<B: Serialize, T: DeserializeOwned>(
        &mut self,
        path: &str,
        body: &B,
    ) -> Result<T, ClientError> {
        let b = serde_json::to_vec(body).map_err(|e| self.protocol(e.to_string()))?;
        self.call("POST", path, Some(("application/json", &b)))
    }

    pub fn version(&mut self) -> Result<Version, ClientError> {
        self.call("GET", &format!("/{VERSION}/version"), None)
    }

    pub fn ports(&mut self) -> Result<Vec<PortView>, ClientError> {
        self.call("GET", &format!("/{VERSION}/ports"), None)
    }

    pub fn domains(&mut self) -> Result<Vec<DomainView>, ClientError> {
        self.call("GET", &format!("/{VERSION}/domains"), None)
    }

    pub fn extensions(&mut self) -> Result<Vec<ExtView>, ClientError> {
        self.call("GET", &format!("/{VERSION}/extensions"), None)
    }

    /// Loads the program in `section` (or the first XDP one) of ELF `object` into
    /// `domain` (default: `default`) as extension `name`.
    pub fn load(
        &mut self,
        name: &str,
        object: &[u8],
        section: Option<&str>,
        domain: Option<&str>,
    ) -> Result<ExtView, ClientError> {
        let mut q = format!("/{VERSION}/extensions?name={}", enc(name));
        if let Some(s) = section {
            q.push_str(&format!("&section={}", enc(s)));
        }
        if let Some(d) = domain {
            q.push_str(&format!("&domain={}", enc(d)));
        }
        self.call("POST", &q, Some(("application/octet-stream", object)))
    }

    /// As [`Client::load`], in place of loaded extension `old` of the same domain, which
    /// is unloaded: atomically for active messages (every message runs `old`'s handlers
    /// or the new ones, never both nor neither). `old` must not be attached to a port.
    pub fn load_replacing(
        &mut self,
        old: &str,
        name: &str,
        object: &[u8],
        section: Option<&str>,
        domain: Option<&str>,
    ) -> Result<ExtView, ClientError> {
        let mut q = format!("/{VERSION}/extensions?name={}&replaces={}", enc(name), enc(old));
        if let Some(s) = section {
            q.push_str(&format!("&section={}", enc(s)));
        }
        if let Some(d) = domain {
            q.push_str(&format!("&domain={}", enc(d)));
        }
        self.call("POST", &q, Some(("application/octet-stream", object)))
    }

    pub fn unload(&mut self, name: &str, force: bool) -> Result<(), ClientError> {
        let p = format!("/{VERSION}/extensions/{}?force={force}", enc(name));
        self.checked("DELETE", &p, None).map(drop)
    }

    pub fn attach(&mut self, ext: &str, port: &str) -> Result<Attachment, ClientError> {
        let p = format!("/{VERSION}/ports/{}/attach", enc(port));
        self.json(&p, &AttachRequest { extension: ext.into() })
    }

    pub fn replace(&mut self, port: &str, ext: &str) -> Result<Attachment, ClientError> {
        let p = format!("/{VERSION}/ports/{}/replace", enc(port));
        self.json(&p, &AttachRequest { extension: ext.into() })
    }

    pub fn detach(&mut self, port: &str) -> Result<Attachment, ClientError> {
        self.call("POST", &format!("/{VERSION}/ports/{}/detach", enc(port)), None)
    }

    pub fn maps(&mut self) -> Result<Vec<MapView>, ClientError> {
        self.call("GET", &format!("/{VERSION}/maps"), None)
    }

    fn map_path(ext: &str, map: &str, op: &str) -> String {
        format!("/{VERSION}/extensions/{}/maps/{}/{op}", enc(ext), enc(map))
    }

    pub fn map_info(&mut self, ext: &str, map: &str) -> Result<MapView, ClientError> {
        let p = format!("/{VERSION}/extensions/{}/maps/{}", enc(ext), enc(map));
        self.call("GET", &p, None)
    }

    pub fn dump(&mut self, ext: &str, map: &str) -> Result<Dump, ClientError> {
        self.call("GET", &Self::map_path(ext, map, "entries"), None)
    }

    /// The value of `key` (every CPU's, padded to 8 bytes each, for per-CPU maps).
    pub fn lookup(&mut self, ext: &str, map: &str, key: &[u8]) -> Result<Vec<u8>, ClientError> {
        let e: crate::proto::Entry =
            self.json(&Self::map_path(ext, map, "lookup"), &KeyRequest { key: Some(hex(key)) })?;
        unhex(&e.value).ok_or_else(|| self.protocol("a value that is not hex"))
    }

    pub fn update(
        &mut self,
        ext: &str,
        map: &str,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) -> Result<(), ClientError> {
        let r = UpdateRequest { key: hex(key), value: hex(value), flags };
        let b = serde_json::to_vec(&r).map_err(|e| self.protocol(e.to_string()))?;
        self.checked("POST", &Self::map_path(ext, map, "update"), Some(("application/json", &b)))
            .map(drop)
    }

    pub fn delete(&mut self, ext: &str, map: &str, key: &[u8]) -> Result<(), ClientError> {
        let b = serde_json::to_vec(&KeyRequest { key: Some(hex(key)) })
            .map_err(|e| self.protocol(e.to_string()))?;
        self.checked("POST", &Self::map_path(ext, map, "delete"), Some(("application/json", &b)))
            .map(drop)
    }

    /// The key after `key` (the first for `None`); `None` after the last.
    pub fn next_key(
        &mut self,
        ext: &str,
        map: &str,
        key: Option<&[u8]>,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        let n: NextKey =
            self.json(&Self::map_path(ext, map, "next_key"), &KeyRequest { key: key.map(hex) })?;
        match n.next_key {
            None => Ok(None),
            Some(k) => unhex(&k).map(Some).ok_or_else(|| self.protocol("a key that is not hex")),
        }
    }

    /// Hash map `map`'s value of `key`, the element deleted at once
    /// (`BPF_MAP_LOOKUP_AND_DELETE_ELEM`; `flags` 0 or `BPF_F_LOCK`).
    pub fn lookup_and_delete(
        &mut self,
        ext: &str,
        map: &str,
        key: &[u8],
        flags: u64,
    ) -> Result<Vec<u8>, ClientError> {
        let r = LookupAndDeleteRequest { key: hex(key), flags };
        let e: crate::proto::Entry =
            self.json(&Self::map_path(ext, map, "lookup_and_delete"), &r)?;
        unhex(&e.value).ok_or_else(|| self.protocol("a value that is not hex"))
    }

    /// Pops queue or stack `map`: its next element, `None` when it is empty.
    pub fn pop(&mut self, ext: &str, map: &str) -> Result<Option<Vec<u8>>, ClientError> {
        let p: Popped = self.call("POST", &Self::map_path(ext, map, "pop"), None)?;
        match p.value {
            None => Ok(None),
            Some(v) => unhex(&v).map(Some).ok_or_else(|| self.protocol("a value that is not hex")),
        }
    }

    pub fn stats(&mut self) -> Result<Totals, ClientError> {
        self.call("GET", &format!("/{VERSION}/stats"), None)
    }

    /// `GET /v1/endpoints`: the endpoints open on the adapter, with their counters.
    pub fn endpoints(&mut self) -> Result<Vec<spine_adapter::EndpointView>, ClientError> {
        self.call("GET", &format!("/{VERSION}/endpoints"), None)
    }

    /// `DELETE /v1/endpoints/{id}`: closes an endpoint (its client's connection closes).
    pub fn endpoint_close(&mut self, id: u64) -> Result<spine_adapter::EndpointView, ClientError> {
        self.call("DELETE", &format!("/{VERSION}/endpoints/{id}"), None)
    }

    /// Starts recording every worker's events (`events` per worker).
    pub fn trace_start(&mut self, events: Option<usize>) -> Result<(), ClientError> {
        let b = serde_json::to_vec(&crate::proto::TraceRequest { events })
            .map_err(|e| self.protocol(e.to_string()))?;
        let p = format!("/{VERSION}/trace/start");
        self.checked("POST", &p, Some(("application/json", &b))).map(drop)
    }

    pub fn trace_stop(&mut self) -> Result<(), ClientError> {
        self.checked("POST", &format!("/{VERSION}/trace/stop"), None).map(drop)
    }

    /// The last stopped trace (Chrome/Perfetto trace format).
    pub fn trace_get(&mut self) -> Result<serde_json::Value, ClientError> {
        self.call("GET", &format!("/{VERSION}/trace"), None)
    }

    /// Log lines after sequence number `after` (0: every line the adapter keeps).
    pub fn log_since(&mut self, after: u64) -> Result<spine_adapter::LogPage, ClientError> {
        self.call("GET", &format!("/{VERSION}/log?after={after}"), None)
    }

    /// `GET /v1/extensions/{ext}/maps/{map}/records?after=SEQ`: a ring buffer's records
    /// after sequence number `after` (the adapter consumes the ring for its followers).
    pub fn ring_since(
        &mut self,
        ext: &str,
        map: &str,
        after: u64,
    ) -> Result<spine_adapter::RingPage, ClientError> {
        let path =
            format!("/{VERSION}/extensions/{}/maps/{}/records?after={after}", enc(ext), enc(map));
        self.call("GET", &path, None)
    }

    /// `GET /metrics`: the counters in the Prometheus text format.
    pub fn metrics(&mut self) -> Result<String, ClientError> {
        let r = self.checked("GET", "/metrics", None)?;
        String::from_utf8(r.body).map_err(|_| self.protocol("metrics that are not UTF-8"))
    }
}

fn read_line(r: &mut BufReader<Stream>, line: &mut String) -> std::io::Result<()> {
    // Bounded: a line longer than the header limit is cut there (and then refused).
    let mut limited = r.by_ref().take(MAX_HEADER as u64);
    limited.read_line(line).map(drop)
}

/// Percent-encodes a path segment or query value (names are usually plain).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
