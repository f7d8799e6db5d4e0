//! eBPF maps with the kernel's semantics: array, per-CPU array, hash, per-CPU hash, LRU
//! hash, LRU per-CPU hash, LPM trie, devmap, devmap_hash, cpumap, ring buffer, queue,
//! stack, bloom filter, array_of_maps and hash_of_maps. No I/O, no threads of its own.
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
//! the trie, as the kernel's do. Programs race on values exactly as in the kernel. Two
//! program-side operations take a short lock where the kernel uses RCU or a spin lock:
//! resolving an inner map of a map-in-map (the slot's mutex and an `Arc` clone) and
//! reserving ring-buffer space (the ring's spin lock, as in the kernel).
//!
//! `unsafe` is confined to the `storage` module (the value memory).
//!
//! Type-specific operations: [`Map::ringbuf`] (a [`RingBuf`]: reserve, submit, discard,
//! output, query and the consumer) and, for maps in maps, [`Map::create_outer`],
//! [`Map::set_inner`], [`Map::inner`], [`Map::lookup_inner`] and [`Map::inner_by_slot`].
//! Program arrays hold programs and live in the runtime.
//!
//! Values with a `bpf_spin_lock` (arrays and plain hash maps, as the kernel allows)
//! and `BPF_F_LOCK` updates and lookups; memory-mappable arrays
//! are shared segments (`Map::segment`). Queues and stacks: [`Map::push`] and
//! [`Map::pop_or_peek`] (programs; one spin lock per map, as the kernel's), and user
//! space's update (push), lookup (peek) and [`Map::lookup_and_delete_user`] (pop).
//! Bloom filters: the same `push` and `pop_or_peek` (a peek tests a value), user
//! space's update (push) and lookup (test). Hash maps of every flavour also have
//! [`Map::lookup_and_delete_user`].
//! Not supported yet: batch operations, devmap and cpumap entry programs (`EINVAL`/`ENOMEM`, as the
//! kernel for an fd that names no usable program), the other map types (`Unsupported`,
//! `EINVAL`).
#![deny(unsafe_code)]

mod array;
mod bloom;
mod cpumap;
mod def;
mod devmap;
mod entry_array;
mod error;
mod freelist;
mod hash;
mod jhash;
mod lpm;
mod lpm_index;
mod lru;
mod map;
mod outer;
pub mod perf;
mod queue;
pub mod ringbuf;
mod spinlock;
mod storage;
pub mod timer;
mod value_lock;
mod xskmap;

pub use def::{MapDef, MapOptions, LPM_INDEX_AT};
pub use error::{
    errno, MapError, ProgOp, ReadOnlyReason, EAGAIN, EBADF, ENODEV, ENOTSUPP, EOVERFLOW,
};
pub use map::{ArrayLayout, Map, ValueSpan};
pub use outer::InnerRef;
pub use perf::PerfEventArray;
pub use ringbuf::RingBuf;
pub use timer::{DueTimer, TimerCallback, Timers};
pub use xskmap::XSK_ENDPOINT;

#[cfg(test)]
mod tests;
