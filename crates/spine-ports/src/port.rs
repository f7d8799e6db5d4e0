//! The port interface: burst receive and transmit over pool buffers for a
//! run-to-completion worker, per-port counters, and the one error type that names the
//! port and the problem.

use spine_pool::{Burst, PoolCache, PoolError};

use crate::CaptureError;

/// A packet source and sink. Calls never block: a burst that finds nothing returns 0.
///
/// Buffers received come from `cache` and belong to the caller; buffers transmitted
/// belong to the port from the moment it takes them (it frees them, or hands them to
/// the kernel and frees them when the kernel is done).
pub trait Port: Send {
    /// The name given at open (usually the interface or file).
    fn name(&self) -> &str;

    /// Receives up to `out.room()` packets, appending them to `out`; returns how many.
    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError>;

    /// Transmits packets from the front of `pkts`, removing those it takes (including
    /// any it drops and counts); returns how many. The rest stay, in order, for a later
    /// call (the queue towards the device is full).
    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError>;

    /// Pushes queued transmissions out and takes back buffers the OS has finished with.
    /// A worker calls it when a port has been idle; ports without queues do nothing.
    fn flush(&mut self, cache: &mut PoolCache) -> Result<(), PortError> {
        let _ = cache;
        Ok(())
    }

    /// Counters since open.
    fn stats(&self) -> PortStats;

    /// Whether the port transmits chained (multi-buffer) frames whole
    /// ([`spine_pool::Pool::chain`]). A port that does not is never handed one: the
    /// adapter drops such frames before they reach it.
    fn takes_frags(&self) -> bool {
        false
    }
}

/// Packets lost in one direction, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drops {
    /// The pool had no free buffer.
    pub no_buffer: u64,
    /// Longer than a buffer (receive) or a ring slot (transmit).
    pub too_big: u64,
    /// Counted by the kernel: ring full, no fill buffers, socket queue overflow.
    pub kernel: u64,
    /// A descriptor or ring entry from shared memory failed its checks.
    pub bad_desc: u64,
    /// A buffer handle the pool refused (another pool's, or not owned).
    pub bad_buffer: u64,
    /// The device refused the packet (down, or an error writing it).
    pub device: u64,
    /// A tunnel datagram from an address other than the configured peer.
    pub wrong_peer: u64,
    /// An authenticated tunnel's datagram too short for its header and tag, or without
    /// one.
    pub auth_no_tag: u64,
    /// An authenticated tunnel's datagram whose tag did not match (another key, or
    /// changed bytes).
    pub auth_bad_tag: u64,
    /// An authenticated tunnel's datagram seen before (or its own, sent back).
    pub auth_replay: u64,
    /// An authenticated tunnel's datagram behind the replay window, or from an older
    /// session of the peer.
    pub auth_too_old: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.no_buffer
            + self.too_big
            + self.kernel
            + self.bad_desc
            + self.bad_buffer
            + self.device
            + self.wrong_peer
            + self.auth_no_tag
            + self.auth_bad_tag
            + self.auth_replay
            + self.auth_too_old
    }
}

/// A port's counters. Transmit counts are packets handed to the OS.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_drops: Drops,
    pub tx_drops: Drops,
    /// Transmitted buffers that had to be copied (AF_XDP: a buffer shared by several
    /// holders cannot be lent to the kernel).
    pub tx_copied: u64,
}

/// A port failed: which one, and why.
#[derive(Debug, thiserror::Error)]
#[error("port {port}: {kind}")]
pub struct PortError {
    /// The port's name: the interface or file it was opened on.
    pub port: String,
    pub kind: PortErrorKind,
}

impl PortError {
    pub fn new(port: &str, kind: PortErrorKind) -> Self {
        PortError { port: port.to_owned(), kind }
    }

    /// The error for a failed system call `op`, classified by its errno.
    pub fn os(port: &str, op: &'static str, errno: i32) -> Self {
        Self::new(port, PortErrorKind::from_errno(op, errno))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PortErrorKind {
    #[error("no such interface")]
    NoSuchInterface,
    #[error("permission denied ({op}): needs root, or CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF")]
    PermissionDenied { op: &'static str },
    #[error("link is down")]
    LinkDown,
    #[error("busy ({op}): {}", std::io::Error::from_raw_os_error(*.errno))]
    Busy { op: &'static str, errno: i32 },
    #[error("another XDP program is attached: {name} (id {id}); spine replaces only its own stale program, detach this one first (ip link set dev IFACE xdp off)")]
    XdpInUse { name: String, id: u32 },
    #[error("not supported ({op}): {}", std::io::Error::from_raw_os_error(*.errno))]
    Unsupported { op: &'static str, errno: i32 },
    #[error("{op}: {}", std::io::Error::from_raw_os_error(*.errno))]
    Os { op: &'static str, errno: i32 },
    #[error("bad configuration: {reason}")]
    Config { reason: &'static str },
    #[error("this port cannot {direction}")]
    WrongDirection { direction: &'static str },
    #[error("capture: {0}")]
    Capture(#[from] CaptureError),
    #[error("{op}: {source}")]
    Io { op: &'static str, source: std::io::Error },
    #[error("buffer pool: {0}")]
    Pool(#[from] PoolError),
    #[error("kernel XDP program: {0}")]
    Bpf(#[from] spine_sys::SysError),
    #[error("{0}")]
    Netlink(#[from] spine_sys::NetlinkError),
    #[error("{0}")]
    TunnelKey(#[from] crate::TunnelKeyError),
}

impl PortErrorKind {
    /// Classifies `errno` from `op`: the kinds a caller can act on get their own variant.
    pub fn from_errno(op: &'static str, errno: i32) -> Self {
        match errno {
            libc::EPERM | libc::EACCES => PortErrorKind::PermissionDenied { op },
            libc::ENODEV | libc::ENXIO => PortErrorKind::NoSuchInterface,
            libc::ENETDOWN => PortErrorKind::LinkDown,
            libc::EBUSY => PortErrorKind::Busy { op, errno },
            libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT => {
                PortErrorKind::Unsupported { op, errno }
            }
            _ => PortErrorKind::Os { op, errno },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_port_and_problem() {
        let e = PortError::os("veth0", "socket(AF_PACKET)", libc::EPERM);
        assert!(matches!(e.kind, PortErrorKind::PermissionDenied { op: "socket(AF_PACKET)" }));
        let s = e.to_string();
        assert!(s.starts_with("port veth0: permission denied (socket(AF_PACKET))"), "{s}");
        assert!(matches!(
            PortErrorKind::from_errno("x", libc::ENODEV),
            PortErrorKind::NoSuchInterface
        ));
        assert!(matches!(PortErrorKind::from_errno("x", libc::ENETDOWN), PortErrorKind::LinkDown));
        assert!(matches!(PortErrorKind::from_errno("x", libc::EBUSY), PortErrorKind::Busy { .. }));
        let s = PortError::os("eth9", "bind", libc::EINVAL).to_string();
        assert_eq!(s, "port eth9: bind: Invalid argument (os error 22)");
    }
}
