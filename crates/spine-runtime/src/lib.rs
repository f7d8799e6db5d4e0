//! The adapter runtime's core: turning a loaded object into a runnable extension (maps
//! instantiated, map references linked, context accesses rewritten), the helpers with
//! the kernel's semantics, and the per-worker XDP runner.
//!
//! Sans-IO: time, randomness and the trace log come from a [`Host`] the caller injects;
//! packets arrive in [`Frame`]s the caller owns.

pub mod csum;
mod ctx;
mod ext;
mod frame;
mod helpers;
mod host;
mod printk;
mod xdp;

pub use ctx::{rewrite as rewrite_ctx, CtxError, CtxErrorKind, XdpCtx, XDP_CTX_SIZE};
pub use ext::{map_index, Extension, LoadError, LoadOptions, MAP_HANDLE_BASE, MAX_MAPS};
pub use frame::{Frame, FrameError, Geometry, ETH_HLEN};
pub use host::{splitmix64, FixedHost, Host};
pub use xdp::{Budget, RunnerError, RxInfo, XdpRunner};
