//! Packet sources and sinks: the only layer that moves packets in and out of spine.
//!
//! - Capture files ([`read_capture`], [`CaptureReader`], [`PcapWriter`]), the
//!   deterministic packet generator ([`gen::Generator`]) and single-frame builders
//!   ([`craft`]): pure computation over bytes and `std::io::{Read, Write}`.
//! - Ports ([`Port`]): burst receive and transmit over [`spine_pool`] buffers for a
//!   run-to-completion worker. [`MemPort`] (replay and sink, for benchmarks),
//!   [`PcapSource`]/[`PcapSink`] (files), [`AfPacketPort`] (mmap rings),
//!   [`AfXdpPort`] (the pool as UMEM, shared between ports) and [`TapPort`] (the path
//!   into the kernel's stack). Ports act in the calling thread's network namespace.
#![deny(unsafe_code)]

#[expect(
    unsafe_code,
    reason = "the TPACKET_V3 rings are memory shared with the kernel; sendmsg of chains"
)]
mod afpacket;
#[expect(unsafe_code, reason = "AF_XDP rings are memory shared with the kernel; socket calls")]
mod afxdp;
mod capture;
mod chains;
pub mod craft;
mod endpoint;
pub mod gen;
mod mem;
#[expect(unsafe_code, reason = "interface ioctls, socket options and ring mappings")]
mod os;
mod pcap;
mod pcap_port;
mod pcapng;
mod port;
pub mod rng;
#[expect(unsafe_code, reason = "the TUNSETIFF ioctl and readv/writev on the TAP descriptor")]
mod tap;
mod tunnel_auth;
#[expect(
    unsafe_code,
    reason = "recvmsg with MSG_TRUNC and the source address, gathered sendmsg to the peer"
)]
mod udp;
pub mod wire;

pub use afpacket::{AfPacketConfig, AfPacketPort};
pub use afxdp::{AfXdpConfig, AfXdpPort, AttachMode, BindMode, XSK_PROG_NAME};
pub use capture::{
    read_capture, Capture, CaptureError, CaptureErrorKind, CaptureFormat, CaptureReader, Packet,
    LINKTYPE_ETHERNET, MAX_PACKET_LEN,
};
pub use endpoint::EndpointPort;
pub use mem::MemPort;
pub use pcap::{PcapWriter, DEFAULT_SNAPLEN};
pub use pcap_port::{PcapSink, PcapSource};
pub use port::{Drops, Port, PortError, PortErrorKind, PortStats};
pub use spine_pool::{Buf, Burst, Pool, PoolCache, PoolConfig};
pub use spine_sys::XdpMode;
pub use tap::TapPort;
pub use tunnel_auth::{
    AuthDrop, TunnelAuth, TunnelKey, TunnelKeyError, AUTH_HEADER_LEN, AUTH_HEADER_MAGIC, KEY_LEN,
    TAG_LEN, WINDOW,
};
pub use udp::{UdpPort, TUNNEL_HEADER};
