//! The adapter: ports, pinned run-to-completion workers, XDP extensions on every
//! port's receive hook with the verdicts acted on as XDP defines them, counters and the
//! event trace; built from `adapter.toml` ([`Config`]) or piece by piece
//! ([`AdapterBuilder`]).
//!
//! - [`Config`]: the configuration file, checked with errors that name the key.
//! - [`Adapter`]: built and wired; run it on threads ([`Adapter::start`] → [`Running`])
//!   or step it round by round in the caller's thread ([`Adapter::step`]).
//! - [`Totals`]: counters summed over workers, as text, JSON or Prometheus.
//! - [`trace`]: the per-worker event ring and its Chrome/Perfetto export.
//! - [`endpoints`]: endpoints handed to applications, bound to channel tags.
//! - [`applets`]: eBPF programs on an endpoint's transmit and receive hooks.
//! - [`slot`]: a port's program slot, replaced atomically per burst while traffic flows.
//!
//! Layer 3 over spine-runtime (extensions), spine-pool (buffers) and spine-ports
//! (ports); it adds threads, pinning and a clock, and talks to the OS only through
//! those crates and `sys` (the clock, interface indices, SIGINT).
#![deny(unsafe_code)]

mod adapter;
pub mod applets;
pub mod config;
pub mod counters;
mod device;
pub mod endpoints;
mod fib;
mod flow;
mod handlers;
mod host;
mod hostpath;
pub mod live;
pub mod logbuf;
mod program;
mod reasm;
mod retx;
#[expect(unsafe_code, reason = "the lock-free worker-to-worker ring hands values across threads")]
mod ring;
pub mod ringfollow;
pub mod slot;
#[expect(unsafe_code, reason = "clock_gettime, if_nametoindex and sigaction")]
pub mod sys;
pub mod trace;
mod worker;

pub use adapter::{
    Adapter, AdapterBuilder, AdapterError, AdapterOptions, Id, Report, Running,
    VIRTUAL_IFINDEX_BASE,
};
pub use applets::AppletCounters;
pub use config::{Assign, Config, ConfigError, Problem, TwinConfig};
pub use counters::{Drops, ExtTotals, PortTotals, Totals, TunnelTotals, Verdicts};
pub use device::{mem_packets, Device, PcapPort};
pub use endpoints::{
    ChannelMatch, EndpointCounters, EndpointLimits, EndpointRequest, EndpointView, HostPath,
    MapSlot, OpenedEndpoint,
};
pub use flow::flow_hash;
pub use live::{DomainView, ExtView, Live, LiveError, MapView, PortView};
pub use logbuf::{LogLine, LogPage};
pub use ringfollow::{RingPage, RingRecord};
