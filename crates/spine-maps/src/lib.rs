//! eBPF maps with the kernel's semantics: array, per-CPU array, hash, per-CPU hash, LRU
//! hash, LRU per-CPU hash and LPM trie. No I/O, no threads of its own.
//!
//! A [`Map`] is shared by every worker thread (programs call [`Map::lookup`],
//! [`Map::update`] and [`Map::delete`] through helpers, with the worker's CPU index)
//! and by the control plane (the `_user` methods, with `bpf(2)` semantics, including
//! per-CPU values exchanged as one padded slot per CPU). Errors carry the kernel's
//! errno ([`MapError::errno`]), checked against Linux 6.18.
//!
//! Everything is preallocated at creation: value memory has stable, 8-byte-aligned
//! addresses for the map's lifetime ([`Map::value_spans`]), and nothing on the program
//! side allocates. Lookups take no lock; hash updates lock one bucket and LPM updates
//! the trie, as the kernel's do. Programs race on values exactly as in the kernel.
//!
//! `unsafe` is confined to the `storage` module (the value memory).
//!
//! Not supported yet: `BPF_F_LOCK` (values with a `bpf_spin_lock`), batch operations,
//! `lookup_and_delete`, the other map types (`Unsupported`, `EINVAL`).
#![deny(unsafe_code)]

mod array;
mod def;
mod error;
mod freelist;
mod hash;
mod jhash;
mod lpm;
mod lru;
mod map;
mod spinlock;
mod storage;

pub use def::{MapDef, MapOptions};
pub use error::{errno, MapError, ReadOnlyReason, ENOTSUPP};
pub use map::{ArrayLayout, Map, ValueSpan};

#[cfg(test)]
mod tests;
