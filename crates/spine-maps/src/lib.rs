//! eBPF maps with kernel semantics. (being written)
mod error;
pub use error::{errno, MapError};
