//! Remote management: the same API on TCP, over TLS only, with a bearer token.
//!
//! The listener speaks TLS (rustls, the `ring` provider) from the first byte: a client
//! that sends plain HTTP fails the handshake and gets no HTTP answer. Every request must
//! carry `Authorization: Bearer <token>`; a missing or wrong one gets 401 before any
//! operation runs. The token is compared in constant time. Certificates and keys are
//! PEM files; the client trusts the certificate authorities it is given (`--cacert`),
//! never a system store.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::proto::{ApiError, ErrorBody};

/// The shortest bearer token the server accepts.
pub const MIN_TOKEN: usize = 16;

/// Where and how the API is served remotely.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// The TCP address to listen on (port 0: any free port, see `Server::tls_addr`).
    pub addr: SocketAddr,
    /// The server's certificate chain, PEM (leaf first).
    pub cert: PathBuf,
    /// The server's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The bearer token every request must carry (at least [`MIN_TOKEN`] bytes).
    pub token: String,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path}: {what}")]
    Pem { path: String, what: String },
    #[error("TLS set-up: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("the bearer token is {len} bytes; at least {MIN_TOKEN} are needed")]
    ShortToken { len: usize },
    #[error("the bearer token must be printable ASCII without spaces")]
    BadToken,
    #[error("generating certificates: {0}")]
    Generate(String),
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path)
        .map_err(|source| TlsError::Read { path: path.display().to_string(), source })
}

fn pem_error(path: &Path, what: impl std::fmt::Display) -> TlsError {
    TlsError::Pem { path: path.display().to_string(), what: what.to_string() }
}

/// Every certificate of a PEM file (at least one).
pub fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(path, e))?;
    if certs.is_empty() {
        return Err(pem_error(path, "no CERTIFICATE in it"));
    }
    Ok(certs)
}

fn load_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| pem_error(path, e))
}

/// Checks a token for use in a header (what the server and the client both require).
pub fn check_token(token: &str) -> Result<(), TlsError> {
    if token.len() < MIN_TOKEN {
        return Err(TlsError::ShortToken { len: token.len() });
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TlsError::BadToken);
    }
    Ok(())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The server's TLS configuration (TLS 1.2 and 1.3, no client certificates).
pub(crate) fn server_config(cfg: &TlsConfig) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    check_token(&cfg.token)?;
    let certs = load_certs(&cfg.cert)?;
    let key = load_key(&cfg.key)?;
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

/// A client's TLS configuration trusting the certificates in `ca` (PEM).
pub fn client_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in load_certs(ca)? {
        roots.add(c).map_err(|e| pem_error(ca, e))?;
    }
    let mut c = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(c))
}

/// Equal in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `router` behind a bearer-token check.
pub(crate) fn with_token(router: Router, token: &str) -> Router {
    let expected: Arc<[u8]> = format!("Bearer {token}").into_bytes().into();
    router.layer(middleware::from_fn(move |req: Request, next: Next| {
        let ok =
            req.headers().get(header::AUTHORIZATION).is_some_and(|v| same(v.as_bytes(), &expected));
        async move {
            if ok {
                next.run(req).await
            } else {
                unauthorized()
            }
        }
    }))
}

fn unauthorized() -> Response {
    let body = ErrorBody {
        error: ApiError {
            kind: "unauthorized".into(),
            message: "a valid bearer token is needed (Authorization: Bearer …)".into(),
            errno: None,
            log: None,
        },
    };
    let mut r = (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
    r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    r
}

/// The PEM files of a small PKI made by [`generate`].
#[derive(Debug, Clone)]
pub struct Pki {
    /// The authority's certificate: what clients trust (`--cacert`).
    pub ca: PathBuf,
    /// The server's certificate, signed by the authority.
    pub cert: PathBuf,
    /// The server's private key (mode 0600).
    pub key: PathBuf,
}

/// A new certificate authority and a server certificate it signs for `ips` and
/// `names`, written into `dir` as `ca.pem`, `cert.pem` and `key.pem` (ECDSA P-256).
/// What `spine tls init` writes; operators with their own PKI bring their own files.
pub fn generate(dir: &Path, ips: &[IpAddr], names: &[String]) -> Result<Pki, TlsError> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};
    let gen = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let ca_key = KeyPair::generate().map_err(gen)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(gen)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "spine control CA");
    let ca_cert = ca.self_signed(&ca_key).map_err(gen)?;
    let key = KeyPair::generate().map_err(gen)?;
    let mut server = CertificateParams::new(names.to_vec()).map_err(gen)?;
    server.subject_alt_names.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
    server.distinguished_name.push(DnType::CommonName, "spine adapter");
    let cert = server.signed_by(&key, &ca_cert, &ca_key).map_err(gen)?;
    let pki = Pki { ca: dir.join("ca.pem"), cert: dir.join("cert.pem"), key: dir.join("key.pem") };
    let write = |path: &Path, text: String, mode: u32| {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|source| TlsError::Read { path: path.display().to_string(), source })
    };
    write(&pki.ca, ca_cert.pem(), 0o644)?;
    write(&pki.cert, cert.pem(), 0o644)?;
    write(&pki.key, key.serialize_pem(), 0o600)?;
    Ok(pki)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"Bearer abc", b"Bearer abc"));
        assert!(!same(b"Bearer abc", b"Bearer abd"));
        assert!(!same(b"Bearer abc", b"Bearer ab"));
        assert!(!same(b"", b"x"));
    }

    #[test]
    fn short_or_odd_tokens_are_refused() {
        assert!(matches!(check_token("short"), Err(TlsError::ShortToken { len: 5 })));
        assert!(matches!(check_token("sixteen bytes xx"), Err(TlsError::BadToken)));
        assert!(check_token("0123456789abcdef").is_ok());
    }
}
