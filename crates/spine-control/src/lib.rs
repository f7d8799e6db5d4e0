//! The adapter's control API: HTTP/JSON on a Unix socket (docs/API.md).
//!
//! - [`server`]: a control thread with a current-thread tokio runtime and axum, calling
//!   only [`spine_adapter::Live`]; it never touches the packet path.
//! - [`client`]: a small blocking client over the same socket (HTTP/1.1 on a
//!   `std::os::unix::net::UnixStream`, connection kept alive).
//! - [`endpoints`]: the sibling socket that hands endpoints (memfd + eventfd) to
//!   applications over SCM_RIGHTS.
//! - [`proto`]: the request and response bodies both sides share.
//! - [`tls`]: remote management, the same API on TCP over TLS with a bearer token.
#![deny(unsafe_code)]

pub mod client;
pub mod endpoints;
pub mod proto;
pub mod server;
pub mod tls;

pub use client::{Client, ClientError};
pub use endpoints::endpoint_socket;
pub use server::{serve, Server, ServerConfig, ServerError, DEFAULT_SOCKET};
pub use tls::{TlsConfig, TlsError};
