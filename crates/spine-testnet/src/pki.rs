//! Certificates for tests of the remote (TLS) control API: a certificate authority of
//! the test run and a server certificate it signed for one IP address, written as PEM
//! files into a folder the test owns.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, SanType};

/// The files of one test PKI.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The authority's certificate: what clients trust (`--cacert`).
    pub ca: PathBuf,
    /// The server's certificate, signed by the authority, for `ip`.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

/// A new authority named `name` and a server certificate for `ip`, written into `dir`
/// as `NAME-ca.pem`, `NAME-cert.pem` and `NAME-key.pem`.
pub fn make(dir: &Path, name: &str, ip: IpAddr) -> Pki {
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, format!("spine test CA {name}"));
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let mut server = CertificateParams::new(Vec::<String>::new()).expect("server parameters");
    server.subject_alt_names = vec![SanType::IpAddress(ip)];
    server.distinguished_name.push(DnType::CommonName, format!("spine adapter {ip}"));
    let cert = server.signed_by(&key, &ca_cert, &ca_key).expect("server certificate");
    let pki = Pki {
        ca: dir.join(format!("{name}-ca.pem")),
        cert: dir.join(format!("{name}-cert.pem")),
        key: dir.join(format!("{name}-key.pem")),
    };
    std::fs::write(&pki.ca, ca_cert.pem()).expect("write CA");
    std::fs::write(&pki.cert, cert.pem()).expect("write certificate");
    std::fs::write(&pki.key, key.serialize_pem()).expect("write key");
    pki
}
