//! The adapter runtime's core: turning a loaded object into runnable extensions in a
//! protection domain (maps instantiated or shared, programs verified, map references
//! linked, context accesses rewritten, JIT or interpreter), the helpers with the
//! kernel's semantics, the per-worker XDP runner, and the watchdog's bookkeeping.
//!
//! Sans-IO: time, randomness and the trace log come from a [`Host`] the caller injects;
//! packets arrive in [`Frame`]s the caller owns.

pub mod csum;
mod ctx;
mod domain;
mod dynptr;
mod ext;
pub mod fib_lookup;
mod frags;
mod frame;
mod helpers;
mod host;
mod maps;
mod msg;
mod printk;
mod watchdog;
mod xdp;

pub use ctx::{rewrite_load, rewrite_msg_load, XdpCtx, XDP_CTX_SIZE};
pub use domain::{Domain, DomainError, DomainSpec, Quota, SPINE_HELPERS, XDP_HELPERS};
pub use ext::{
    load_object, load_selected, select_program, verify_program, EngineKind, Extension, LoadError,
    LoadOptions, LoadedObject, VerifyStats,
};
pub use frags::{Frags, MAX_FRAGS};
pub use frame::{Bounds, Frame, FrameError, Geometry, ETH_HLEN};
pub use helpers::{Redirect, MAX_TAIL_CALLS};
pub use host::{splitmix64, Event, FixedHost, Host, INITIAL_JIFFIES, JIFFIES_HZ};
pub use maps::{map_index, MapTable, ProgArray, ProgArrayError, RtMap, MAP_HANDLE_BASE, MAX_MAPS};
pub use msg::{
    applet_of_section, handler_of_section, AppletHook, Dest, OutMsg, Outbox, MSG_MAX, OUTBOX_SLOTS,
    SOURCE_EXTENSION, SOURCE_REMOTE,
};
pub use spine_verifier::{VerifyError, VerifyErrorKind};
pub use watchdog::{FaultOutcome, FaultPolicy, Health};
pub use xdp::{
    Budget, RunnerError, RxInfo, TimerRun, Verdict, XdpBurst, XdpRunner, MAX_TIMERS_PER_CALL,
};
