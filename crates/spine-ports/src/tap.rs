//! A TAP device: the path into the kernel's own network stack. Frames the port
//! transmits enter the kernel as if received on the TAP interface; frames the kernel
//! sends out of that interface are what the port receives. The device exists while the
//! port is open.
//!
//! Multi-buffer frames ([`Port::takes_frags`]): each read is one `readv` into the rest
//! of a pool buffer and then a scratch area, so a frame longer than one buffer (the TAP's
//! MTU is above ~1,780) is copied from there into a pool chain ([`crate::chains`]); one
//! that fills both (it may have been cut short) or is longer than a chain holds is
//! counted `too_big`. A chain is written whole with one `writev` of its pieces.

use std::ffi::CStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use spine_pool::{Burst, PoolCache, MAX_CHAIN};

use crate::chains;
use crate::os;
use crate::{Port, PortError, PortErrorKind, PortStats};

const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;

/// A non-blocking TAP device without packet-information headers.
#[derive(Debug)]
pub struct TapPort {
    name: String,
    fd: OwnedFd,
    port_id: u32,
    /// Where a frame goes when the pool is empty: read and dropped, so the device queue
    /// does not fill up behind it.
    scratch: Vec<u8>,
    stats: PortStats,
}

impl TapPort {
    /// Creates TAP device `ifname` in the calling thread's network namespace (an empty
    /// name lets the kernel choose `tapN`). The device starts down: see [`set_up`](Self::set_up).
    pub fn open(ifname: &str, port_id: u32) -> Result<TapPort, PortError> {
        let port = if ifname.is_empty() { "tap" } else { ifname };
        // SAFETY: open(2) of a NUL-terminated literal path; the result is checked.
        let raw = unsafe {
            libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC)
        };
        if raw < 0 {
            let e = os::errno();
            return Err(match e {
                libc::ENOENT | libc::ENODEV => PortError::new(
                    port,
                    PortErrorKind::Unsupported { op: "open /dev/net/tun", errno: e },
                ),
                _ => PortError::os(port, "open /dev/net/tun", e),
            });
        }
        // SAFETY: a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut req = if ifname.is_empty() {
            // SAFETY: all-zero is a valid ifreq (an empty name asks the kernel to pick).
            unsafe { std::mem::zeroed() }
        } else {
            os::ifreq(port, ifname)?
        };
        req.ifr_ifru.ifru_flags = IFF_TAP | IFF_NO_PI;
        // SAFETY: TUNSETIFF reads the name and flags of `req` and writes the final name.
        if unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut req) } < 0 {
            return Err(PortError::os(port, "TUNSETIFF", os::errno()));
        }
        // SAFETY: the kernel wrote a NUL-terminated name within IFNAMSIZ bytes.
        let name = unsafe { CStr::from_ptr(req.ifr_name.as_ptr()) }.to_string_lossy().into_owned();
        Ok(TapPort { name, fd, port_id, scratch: vec![0; 65_536], stats: PortStats::default() })
    }

    /// Brings the device up or down (`ip link set dev NAME up`).
    pub fn set_up(&self, up: bool) -> Result<(), PortError> {
        os::set_if_up(&self.name, &self.name, up)
    }

    /// Gives the device the Ethernet address `mac` (a twin takes its port's).
    pub fn set_mac(&self, mac: [u8; 6]) -> Result<(), PortError> {
        os::set_if_mac(&self.name, &self.name, mac)
    }

    /// Sets the device's MTU (a twin takes its port's).
    pub fn set_mtu(&self, mtu: u32) -> Result<(), PortError> {
        os::set_if_mtu(&self.name, &self.name, mtu)
    }

    /// The device's MAC address.
    pub fn mac(&self) -> Result<[u8; 6], PortError> {
        os::if_mac(&self.name, &self.name)
    }
}

impl Port for TapPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let head = pool.headroom() as usize;
        let mut got = 0;
        while !out.is_full() {
            let Some(mut buf) = cache.alloc() else {
                // Drop one frame so the queue keeps moving; stop when there is none.
                // SAFETY: read(2) writes at most scratch.len() bytes into `scratch`.
                let n = unsafe {
                    libc::read(
                        self.fd.as_raw_fd(),
                        self.scratch.as_mut_ptr().cast(),
                        self.scratch.len(),
                    )
                };
                if n <= 0 {
                    break;
                }
                self.stats.rx_drops.no_buffer += 1;
                continue;
            };
            let frame =
                pool.frame_mut(&mut buf).map_err(|e| PortError::new(&self.name, e.into()))?;
            let room = frame.len() - head;
            // A frame longer than the buffer goes on into `scratch`: one readv, and the
            // single-buffer case costs what a read did.
            let iov = [
                libc::iovec { iov_base: frame[head..].as_mut_ptr().cast(), iov_len: room },
                libc::iovec {
                    iov_base: self.scratch.as_mut_ptr().cast(),
                    iov_len: self.scratch.len(),
                },
            ];
            // SAFETY: readv(2) writes at most `room` bytes after the headroom of the
            // buffer we exclusively hold, then at most scratch.len() bytes of `scratch`.
            let n = unsafe { libc::readv(self.fd.as_raw_fd(), iov.as_ptr(), 2) };
            if n < 0 {
                let e = os::errno();
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                if matches!(e, libc::EAGAIN | libc::EINTR) {
                    break;
                }
                return Err(PortError::os(&self.name, "read(tap)", e));
            }
            let n = n as usize;
            if n == 0 {
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                break;
            }
            if n > room {
                // Longer than a buffer: a chain (`crate::chains`), unless the kernel may
                // have cut it short (it filled both) or a chain cannot hold it.
                let err = |e: spine_pool::PoolError| PortError::new(&self.name, e.into());
                if n == room + self.scratch.len() || n > chains::chain_room(&pool) {
                    self.stats.rx_drops.too_big += 1;
                    cache.free(buf).map_err(err)?;
                    continue;
                }
                pool.set_data(&mut buf, head as u32, room as u32)
                    .and_then(|()| pool.set_rx_info(&mut buf, self.port_id, 0))
                    .map_err(err)?;
                match chains::append_frags(cache, buf, &self.scratch[..n - room]).map_err(err)? {
                    Some(chain) => {
                        self.stats.rx_packets += 1;
                        self.stats.rx_bytes += n as u64;
                        out.set_chained();
                        let _ = out.push(chain);
                        got += 1;
                    }
                    None => self.stats.rx_drops.no_buffer += 1,
                }
                continue;
            }
            pool.set_data(&mut buf, head as u32, n as u32)
                .and_then(|()| pool.set_rx_info(&mut buf, self.port_id, 0))
                .map_err(|e| PortError::new(&self.name, e.into()))?;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += n as u64;
            let _ = out.push(buf);
            got += 1;
        }
        Ok(got)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let chained = pkts.has_chains();
        let mut taken = 0;
        while let Some(buf) = pkts.get(0) {
            match pool.data(buf) {
                Ok(d) => {
                    let (n, len) = if chained && pool.has_frags(buf) {
                        // A chain goes whole: one writev of its pieces.
                        let mut iov =
                            [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_CHAIN];
                        let (k, len) = chains::gather(&pool, buf, d, &mut iov);
                        // SAFETY: writev(2) reads `k` iovecs, each pointing into the chain
                        // `buf`, held and not written during the call.
                        (unsafe { libc::writev(self.fd.as_raw_fd(), iov.as_ptr(), k as i32) }, len)
                    } else {
                        // SAFETY: write(2) reads d.len() bytes of the packet.
                        let n =
                            unsafe { libc::write(self.fd.as_raw_fd(), d.as_ptr().cast(), d.len()) };
                        (n, d.len())
                    };
                    if n < 0 {
                        let e = os::errno();
                        if matches!(e, libc::EAGAIN | libc::EINTR) {
                            break;
                        }
                        // Device down (EIO) or a frame it refuses (EINVAL): dropped.
                        self.stats.tx_drops.device += 1;
                    } else {
                        self.stats.tx_packets += 1;
                        self.stats.tx_bytes += len as u64;
                    }
                }
                Err(_) => self.stats.tx_drops.bad_buffer += 1,
            }
            taken += 1;
            let buf = pkts.drain_front(1).next().expect("checked above");
            if cache.free(buf).is_err() {
                self.stats.tx_drops.bad_buffer += 1;
            }
        }
        Ok(taken)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn takes_frags(&self) -> bool {
        true
    }
}

impl AsFd for TapPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
