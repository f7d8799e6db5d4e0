//! Packet sources and sinks: the only layer that moves packets in and out of spine.
//!
//! Now: capture files ([`read_capture`], [`CaptureReader`], [`PcapWriter`]), the
//! deterministic packet generator ([`gen::Generator`]) and single-frame builders
//! ([`craft`]). Later, beside them: AF_XDP, AF_PACKET, TAP, in-memory and UDP-tunnel
//! ports, each in its own module.
//!
//! Capture parsing and packet generation are pure computation over bytes and
//! `std::io::{Read, Write}`; they never open files themselves.
#![deny(unsafe_code)]

mod capture;
pub mod craft;
pub mod gen;
mod pcap;
mod pcapng;
pub mod rng;
pub mod wire;

pub use capture::{
    read_capture, Capture, CaptureError, CaptureErrorKind, CaptureFormat, CaptureReader, Packet,
    LINKTYPE_ETHERNET, MAX_PACKET_LEN,
};
pub use pcap::{PcapWriter, DEFAULT_SNAPLEN};
