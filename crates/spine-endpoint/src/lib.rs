//! U-Net endpoints: an application's window onto the adapter without the kernel on the
//! data path.
//!
//! One memfd holds a header, four rings and a buffer area of fixed-size frames
//! ([`Layout`]). The rings follow AF_XDP: a producer and a consumer index on separate
//! cache lines, then a power-of-two array of entries. Transmit and receive carry
//! [`Desc`]s (frame address, length, options); fill and completion carry frame
//! addresses. The client produces transmit and fill and consumes receive and
//! completion; the adapter the reverse.
//!
//! Small messages travel inline: each descriptor-ring entry has a 64-byte slot
//! ([`INLINE_BYTES`]) in an array after the ring's entries, at the same index. A
//! descriptor with [`Desc::INLINE`] has its payload there (`addr` 0, `len` ≤ 64) and
//! uses no frame: an inline transmit posts nothing on the completion ring, an inline
//! receive takes nothing from the fill ring. Both sides send any message of 64 bytes
//! or less inline.
//!
//! **Active messages** share the rings: a descriptor with [`Desc::MESSAGE`] carries a
//! message for a handler number (options bits 8..16; on the receive ring also its
//! source in bits 16..32) of at most [`Desc::MSG_MAX`] bytes, inline or in a frame like
//! any payload. The layout is unchanged (version 2); a reader that knows no messages
//! refuses their descriptors as it refuses any unknown option bit.
//!
//! The adapter side ([`AdapterEnd`]) trusts nothing in shared memory: it keeps its own
//! copy of every index it owns, reads each index and descriptor the client writes
//! exactly once, and checks it before use. Frames are copied between the adapter's
//! pool and the buffer area, so no adapter buffer is ever lent to a client: a client
//! that writes garbage, stalls or dies cannot lose one. The client side
//! ([`ClientEnd`]) writes in place into its frames (zero copies on its side).
//!
//! A client that dies is noticed through the connection its endpoint was handed over
//! ([`ClientWatch`]: the kernel reports `POLLHUP` on the adapter's end once every holder
//! of the client's end is gone); the watch sets a [`Liveness`] flag that the endpoint's
//! port reads to stop serving it and release it.
//!
//! [`Shm`] is the one place that talks to the OS for the region (memfd, mmap, eventfd);
//! `watch` polls the connections.
#![deny(unsafe_code)]

mod adapter;
mod client;
mod desc;
mod error;
#[expect(unsafe_code, reason = "sendmsg/recvmsg with SCM_RIGHTS control messages")]
mod fdpass;
mod layout;
pub mod remote;
mod ring;
mod segment;
#[expect(unsafe_code, reason = "memfd, mmap and eventfd; frame copies in shared memory")]
mod shm;
#[expect(unsafe_code, reason = "poll(2) on the clients' connections")]
mod watch;

pub use adapter::{AdapterEnd, AdapterStats, Returned, Taken, GRANTS, MAX_PIECES};
pub use client::{ClientEnd, HeaderIn};
pub use desc::Desc;
pub use error::EndpointError;
pub use fdpass::{peer_pid, recv_fds, send_fds, MAX_FDS};
pub use layout::{Layout, Payload, INLINE_BYTES};
pub use segment::{Segment, SegmentGuard};
pub use shm::{EventFd, Shm};
pub use watch::{ClientWatch, Liveness};
