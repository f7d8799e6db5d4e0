//! The remote control API on loopback: TLS only, a bearer token on every request, the
//! same operations as on the socket; and everything that must be refused (plain HTTP,
//! no token, a wrong token, an untrusted certificate, a plain `http://` URL, a short
//! token, a broken key file), with the adapter still answering afterwards.

use spine_testnet::daemons::TempDir;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use spine_adapter::{AdapterBuilder, AdapterOptions, Device, Running};
use spine_control::tls::{generate, Pki};
use spine_control::{serve, Client, ServerConfig, ServerError, TlsConfig, TlsError};
use spine_ports::{MemPort, PoolConfig};

const TOKEN: &str = "s3cret-token-0123456789";

fn adapter() -> Running {
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(256), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5];
    f.resize(60, 0xee);
    let port = MemPort::replay("wire", &[f]).unwrap();
    b.add_port("wire", Device::Mem { port, sink: false }, None).unwrap();
    b.build().unwrap().start().unwrap()
}

fn loopback() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

/// A certificate authority and a server certificate for 127.0.0.1 in `dir/name`.
fn make(dir: &Path, name: &str) -> Pki {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    generate(&d, &[loopback()], &[]).unwrap()
}

fn tls(p: &Pki) -> TlsConfig {
    TlsConfig {
        addr: SocketAddr::new(loopback(), 0),
        cert: p.cert.clone(),
        key: p.key.clone(),
        token: TOKEN.into(),
    }
}

fn config(dir: &Path, p: &Pki) -> ServerConfig {
    let mut cfg = ServerConfig::new(dir.join("spine.sock"));
    cfg.tls = Some(tls(p));
    cfg
}

#[test]
fn the_api_is_served_over_tls_with_a_token_and_everything_else_is_refused() {
    let dir = TempDir::new("api");
    let p = make(dir.path(), "good");
    let other = make(dir.path(), "other");
    let running = adapter();
    let server = serve(running.live(), config(dir.path(), &p)).unwrap();
    let addr = server.tls_addr().expect("a remote address");
    assert_ne!(addr.port(), 0);
    let url = format!("https://{addr}");

    // The whole API remotely: load, attach, read ports, stats and the log.
    let mut c = Client::remote(&url, TOKEN, &p.ca).unwrap();
    assert_eq!(c.version().unwrap().api, "v1");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spine-adapter/tests/fixtures/live.c");
    let obj = spine_progs::compile_c(&src, &dir.join("live.o"), &[]).unwrap();
    c.load("a", &obj, Some("version_a"), None).unwrap();
    c.attach("a", "wire").unwrap();
    assert_eq!(c.ports().unwrap()[0].extension.as_deref(), Some("a"));
    let zero = 0u32.to_le_bytes();
    let sum = |v: Vec<u8>| -> u64 {
        v.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).sum()
    };
    while sum(c.lookup("a", "hits", &zero).unwrap()) == 0u64 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Kept alive: many requests on one TLS connection.
    let before = server.stats().connections.load(Ordering::Relaxed);
    for _ in 0..50 {
        c.maps().unwrap();
    }
    assert_eq!(server.stats().connections.load(Ordering::Relaxed), before);

    // No token or a wrong one: 401 before any operation runs.
    let mut wrong = Client::remote(&url, "not-the-token-at-all", &p.ca).unwrap();
    let e = wrong.extensions().unwrap_err();
    assert_eq!(e.api().map(|a| (a.kind.as_str(), 401)), Some(("unauthorized", 401)), "{e}");
    let e = wrong.detach("wire").unwrap_err();
    assert_eq!(e.api().unwrap().kind, "unauthorized");
    assert_eq!(c.ports().unwrap()[0].extension.as_deref(), Some("a"), "still attached");
    let reply = raw_tls(addr, &p.ca, b"GET /v1/extensions HTTP/1.1\r\nhost: x\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.1 401"), "{reply}");
    assert!(reply.to_ascii_lowercase().contains("www-authenticate: bearer"), "{reply}");

    // Plain HTTP on the TLS port: no HTTP answer, only a TLS alert or a close.
    let failed = server.stats().tls_failed.load(Ordering::Relaxed);
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /v1/version HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/"), "plain HTTP was answered: {got:?}");
    assert!(!String::from_utf8_lossy(&got).contains("v1"), "{got:?}");
    let t0 = std::time::Instant::now();
    while server.stats().tls_failed.load(Ordering::Relaxed) == failed {
        assert!(t0.elapsed() < Duration::from_secs(10), "the failed handshake is counted");
        std::thread::sleep(Duration::from_millis(5));
    }

    // A server certificate from an authority the client does not trust.
    let e = Client::remote(&url, TOKEN, &other.ca).unwrap().version().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("TLS") && msg.contains(&url), "{msg}");
    assert!(!msg.contains(TOKEN), "the token is never printed: {msg}");
    // The handshake's error is kept as a source, not only as text: rustls's own.
    let spine_control::ClientError::Tls { source, .. } = &e else { panic!("{e:?}") };
    let rustls_err = source.get_ref().and_then(|s| s.downcast_ref::<rustls::Error>());
    assert!(matches!(rustls_err, Some(rustls::Error::InvalidCertificate(_))), "{source:?}");

    // URLs and tokens the client refuses before connecting.
    for (u, why) in [
        (format!("http://{addr}"), "TLS only"),
        (format!("{addr}"), "https://"),
        ("https://127.0.0.1".to_string(), "port"),
        (format!("https://{addr}/v1"), "no path"),
    ] {
        let e = Client::remote(&u, TOKEN, &p.ca).unwrap_err();
        assert!(e.to_string().contains(why), "{u}: {e}");
    }
    let e = Client::remote(&url, "short", &p.ca).unwrap_err();
    assert!(e.to_string().contains("at least 16"), "{e}");

    // The local socket needs no token, and the adapter kept serving throughout.
    let mut local = Client::new(server.path());
    assert_eq!(local.extensions().unwrap().len(), 1);
    assert_eq!(c.extensions().unwrap().len(), 1);
    let m = local.metrics().unwrap();
    assert!(m.contains("spine_control_tls_failed_total"), "{m}");
    drop(c);
    server.stop();
    running.stop().unwrap();
}

/// One request over TLS without the client library (no token), the answer as text.
fn raw_tls(addr: SocketAddr, ca: &Path, request: &[u8]) -> String {
    let config = spine_control::tls::client_config(ca).unwrap();
    let name = rustls_pki_types::ServerName::from(addr.ip());
    let conn = rustls::ClientConnection::new(config, name).unwrap();
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut s = rustls::StreamOwned::new(conn, sock);
    s.write_all(request).unwrap();
    let mut buf = vec![0; 4096];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn bad_tls_settings_are_refused_at_start_and_name_the_file() {
    let dir = TempDir::new("bad");
    let p = make(dir.path(), "good");
    let running = adapter();
    let mut cfg = config(dir.path(), &p);
    cfg.tls.as_mut().unwrap().token = "short".into();
    let e = serve(running.live(), cfg).unwrap_err();
    assert!(matches!(e, ServerError::Tls(TlsError::ShortToken { len: 5 })), "{e}");

    let garbage = dir.join("garbage.pem");
    std::fs::write(
        &garbage,
        "-----BEGIN PRIVATE KEY-----\nnot base64!\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let mut cfg = config(dir.path(), &p);
    cfg.tls.as_mut().unwrap().key = garbage.clone();
    let e = serve(running.live(), cfg).unwrap_err().to_string();
    assert!(e.contains("garbage.pem"), "{e}");

    let mut cfg = config(dir.path(), &p);
    cfg.tls.as_mut().unwrap().cert = dir.join("missing.pem");
    let e = serve(running.live(), cfg).unwrap_err().to_string();
    assert!(e.contains("missing.pem"), "{e}");

    // A key that does not belong to the certificate.
    let other = make(dir.path(), "other");
    let mut cfg = config(dir.path(), &p);
    cfg.tls.as_mut().unwrap().key = other.key.clone();
    assert!(serve(running.live(), cfg).is_err(), "a mismatched key is refused");

    // Nothing was left listening: a good configuration starts on the same socket.
    let server = serve(running.live(), config(dir.path(), &p)).unwrap();
    server.stop();
    running.stop().unwrap();
}
