//! The packet buffer pool: `N` fixed-size buffers in one contiguous, page-aligned, zeroed
//! allocation, so the same memory can be registered as an AF_XDP UMEM (one chunk per
//! buffer) and a packet received on one port can be sent on another without a copy.
//!
//! - [`Pool`]: the memory, the per-buffer metadata side table ([`BufMeta`]: data offset
//!   and length, metadata length, reference count, ingress port, timestamp) and the
//!   shared free list. Capacity is fixed at creation.
//! - [`Buf`]: an owned handle (index plus the pool's tag), not a pointer. It cannot be
//!   copied: each `Buf` is one reference, so writing needs `&mut Buf` and a count of 1.
//! - [`PoolCache`]: one per worker; allocates and frees from a local stack and meets the
//!   shared list only once per batch, so the per-packet path takes no lock and
//!   allocates nothing.
//! - [`Burst`]: a fixed-capacity batch of handles, the unit ports exchange.
//! - Lending ([`Pool::lend`], [`Pool::reclaim`]): a buffer handed to the kernel (AF_XDP
//!   fill and TX rings) has no handle until the kernel's descriptor gives its offset
//!   back; that offset is untrusted and checked.
//! - Chains ([`Pool::chain`], [`Pool::unchain`]): a frame longer than one buffer is a
//!   head handle linked to up to [`MAX_CHAIN`]` - 1` fragment buffers, freed together.
//!
//! Layer 3 and sans-IO: the one allocation is the only contact with the OS.
#![deny(unsafe_code)]

mod burst;
mod cache;
mod error;
#[expect(unsafe_code, reason = "buffer bytes are handed out as slices of the one raw allocation")]
mod pool;
#[expect(unsafe_code, reason = "the one page-aligned, zeroed allocation")]
mod region;

pub use burst::Burst;
pub use cache::PoolCache;
pub use error::PoolError;
pub use pool::{
    Buf, BufMeta, ChainError, LendError, LenderId, Pool, PoolConfig, MAX_CHAIN, MAX_REFS,
};
