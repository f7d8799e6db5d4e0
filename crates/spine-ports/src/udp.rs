//! A UDP tunnel: Ethernet frames carried between adapters (in other processes, other
//! namespaces or other machines) one frame per datagram, so two adapters form one network
//! for messages, endpoints and remote management.
//!
//! Each datagram is a 4-byte header (magic `0x53 0x50`, version 1, kind 0 = frame) and
//! the frame. The peer is fixed by the configuration (never learned from traffic): the
//! socket is left unconnected so that every datagram's source is seen, and one from any
//! other address (IP and port) is counted (`wrong_peer`) and dropped before a byte of it
//! is parsed; transmit names the peer on every `sendmsg`. A datagram without the header,
//! or too short to hold a frame header, is counted (`bad_desc`) and dropped. Receive reads the datagram straight
//! into a pool buffer (the header lands in the headroom); transmit sends header and frame
//! with one `sendmsg`, no copy.
//!
//! With a key ([`UdpPort::with_key`]) every datagram carries the authenticated header of
//! [`crate::tunnel_auth`] instead (version 2: sender's session, sequence number and a
//! 16-byte BLAKE3 keyed tag over header and frame), sealed on transmit and checked on
//! receive, after the sender check and before anything reads the frame; refusals are
//! counted by reason (`auth_no_tag`, `auth_bad_tag`, `auth_replay`, `auth_too_old`).
//! Both ends must have the same key: a keyed port refuses version-1 datagrams.
//!
//! Multi-buffer frames ([`Port::takes_frags`]): receive is one `recvmsg` into the rest
//! of a pool buffer and then a scratch area, so a datagram longer than one buffer (a
//! jumbo frame) is copied from there into a pool chain ([`crate::chains`]); one longer
//! than both, or than a chain holds, is counted `too_big`. A chain is sent as one
//! datagram: header, head and fragments gathered by one `sendmsg`.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use spine_pool::{Burst, PoolCache, MAX_CHAIN};

use crate::chains;
use crate::os;
use crate::tunnel_auth::{AuthDrop, TunnelAuth, TunnelKey, AUTH_HEADER_LEN};
use crate::{Port, PortError, PortErrorKind, PortStats};

/// The tunnel header: magic, version, kind.
pub const TUNNEL_HEADER: [u8; 4] = [0x53, 0x50, 1, 0];
const HDR: usize = TUNNEL_HEADER.len();
/// The shortest frame carried: an Ethernet header.
const MIN_FRAME: usize = 14;

/// One end of a UDP tunnel.
#[derive(Debug)]
pub struct UdpPort {
    name: String,
    sock: UdpSocket,
    port_id: u32,
    /// The configured peer, as the kernel writes a source address.
    peer: RawAddr,
    /// Where the rest of a datagram longer than a buffer lands before it is copied
    /// into fragments (and where one is read to be dropped when the pool is empty).
    scratch: Vec<u8>,
    stats: PortStats,
    /// Peer authentication, when the port has a key (boxed at setup: the keyed hasher
    /// and the window are 2 KiB).
    auth: Option<Box<TunnelAuth>>,
    /// The authenticated header of the datagram being sent.
    tx_hdr: [u8; AUTH_HEADER_LEN],
}

/// Sessions of tunnel ends opened by this process, each later than the last even when
/// the clock's resolution is coarse.
static LAST_EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A session number larger than any earlier one of this process, and (as long as the
/// wall clock does not step back across a restart) of earlier processes.
fn new_epoch() -> u64 {
    use std::sync::atomic::Ordering;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let prev = LAST_EPOCH
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |last| Some(now.max(last + 1)))
        .expect("the closure always answers");
    now.max(prev + 1)
}

impl UdpPort {
    /// Binds `local` and connects to `peer`. `name` names the port in errors.
    pub fn open(
        name: &str,
        local: SocketAddr,
        peer: SocketAddr,
        port_id: u32,
    ) -> Result<UdpPort, PortError> {
        let io =
            |op| move |e: std::io::Error| PortError::new(name, PortErrorKind::Io { op, source: e });
        if local.is_ipv4() != peer.is_ipv4() {
            return Err(PortError::new(
                name,
                PortErrorKind::Config { reason: "local and peer addresses of different families" },
            ));
        }
        let sock = UdpSocket::bind(local).map_err(io("bind"))?;
        sock.set_nonblocking(true).map_err(io("set_nonblocking"))?;
        // Room for bursts from a peer that sends faster than one round drains; the kernel
        // caps it at net.core.rmem_max/wmem_max, which is fine.
        for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
            os::set_opt(
                sock.as_fd(),
                name,
                "SO_RCVBUF/SO_SNDBUF",
                libc::SOL_SOCKET,
                opt,
                &(4i32 << 20),
            )?;
        }
        Ok(UdpPort {
            name: name.to_owned(),
            sock,
            port_id,
            peer: RawAddr::new(peer),
            scratch: vec![0; 65_536],
            stats: PortStats::default(),
            auth: None,
            tx_hdr: [0; AUTH_HEADER_LEN],
        })
    }

    /// Authenticates every datagram with `key` (both ends need the same one): sealed on
    /// transmit, checked on receive. The pool needs 36 bytes of headroom.
    pub fn with_key(mut self, key: &TunnelKey) -> UdpPort {
        self.auth = Some(Box::new(TunnelAuth::new(key, new_epoch())));
        self
    }

    /// The header's length on the wire: 4 bytes, or 36 with a key.
    fn hdr_len(&self) -> usize {
        if self.auth.is_some() {
            AUTH_HEADER_LEN
        } else {
            HDR
        }
    }

    /// The address the socket is bound to (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> Result<SocketAddr, PortError> {
        self.sock.local_addr().map_err(|e| {
            PortError::new(&self.name, PortErrorKind::Io { op: "getsockname", source: e })
        })
    }

    /// Reads one datagram into `into` and then `scratch`; `None` when none is queued.
    /// Returns the datagram's full length, which may pass what the two hold, and whether
    /// it came from the peer.
    fn recv_into(&mut self, into: &mut [u8]) -> Result<Option<(usize, bool)>, PortError> {
        let mut iov = [
            libc::iovec { iov_base: into.as_mut_ptr().cast(), iov_len: into.len() },
            libc::iovec { iov_base: self.scratch.as_mut_ptr().cast(), iov_len: self.scratch.len() },
        ];
        // SAFETY: all-zero is a valid msghdr (no address, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        // SAFETY: all-zero is a valid sockaddr_storage.
        let mut from: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len();
        msg.msg_name = (&raw mut from).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: recvmsg(2) writes at most into.len() bytes into `into`, then at most
        // scratch.len() into `scratch`, both exclusively ours; MSG_TRUNC makes it return
        // the datagram's full length, so a cut one is recognised. The source address goes
        // to `from`, at most msg_namelen bytes.
        let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, libc::MSG_TRUNC) };
        if n >= 0 {
            return Ok(Some((n as usize, self.peer.is(&from, msg.msg_namelen))));
        }
        match os::errno() {
            libc::EAGAIN | libc::EINTR => Ok(None),
            e => Err(PortError::os(&self.name, "recv(udp)", e)),
        }
    }
}

impl Port for UdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let head = pool.headroom() as usize;
        let hl = self.hdr_len();
        if head < hl {
            return Err(PortError::new(
                &self.name,
                PortErrorKind::Config {
                    reason: "a UDP tunnel needs pool headroom of 4 bytes or more (36 with a key)",
                },
            ));
        }
        let mut scratch = [0u8; HDR];
        let mut got = 0;
        while !out.is_full() {
            let Some(mut buf) = cache.alloc() else {
                // Drop one datagram so the queue keeps moving; stop when there is none.
                match self.recv_into(&mut scratch)? {
                    Some((_, false)) => self.stats.rx_drops.wrong_peer += 1,
                    Some(_) => self.stats.rx_drops.no_buffer += 1,
                    None => break,
                }
                continue;
            };
            let frame =
                pool.frame_mut(&mut buf).map_err(|e| PortError::new(&self.name, e.into()))?;
            let at = head - hl;
            let room = frame.len() - at;
            let n = match self.recv_into(&mut frame[at..]) {
                Ok(Some((n, true))) => n,
                Ok(Some((_, false))) => {
                    self.stats.rx_drops.wrong_peer += 1;
                    cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                    continue;
                }
                Ok(None) => {
                    cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                    break;
                }
                Err(e) => {
                    let _ = cache.free(buf);
                    return Err(e);
                }
            };
            let too_big =
                n > room && (n > room + self.scratch.len() || n - hl > chains::chain_room(&pool));
            if too_big {
                self.stats.rx_drops.too_big += 1;
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                continue;
            }
            if let Some(auth) = &mut self.auth {
                let inbuf = n.min(room);
                let (hdr, body) = frame[at..at + inbuf].split_at(inbuf.min(hl));
                let rest = &self.scratch[..n.saturating_sub(room)];
                if let Err(why) = auth.open(hdr, |h| {
                    h.update(body);
                    h.update(rest);
                }) {
                    let d = &mut self.stats.rx_drops;
                    *match why {
                        AuthDrop::NoTag => &mut d.auth_no_tag,
                        AuthDrop::BadTag => &mut d.auth_bad_tag,
                        AuthDrop::Replay => &mut d.auth_replay,
                        AuthDrop::TooOld => &mut d.auth_too_old,
                    } += 1;
                    cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                    continue;
                }
            }
            let bad =
                n < hl + MIN_FRAME || (self.auth.is_none() && frame[at..at + HDR] != TUNNEL_HEADER);
            if bad {
                self.stats.rx_drops.bad_desc += 1;
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                continue;
            }
            let len = n - hl;
            let err = |e: spine_pool::PoolError| PortError::new(&self.name, e.into());
            pool.set_data(&mut buf, head as u32, (len.min(room - hl)) as u32)
                .and_then(|()| pool.set_rx_info(&mut buf, self.port_id, 0))
                .map_err(err)?;
            if n > room {
                // Longer than a buffer: the rest is in `scratch`, copied into fragments.
                match chains::append_frags(cache, buf, &self.scratch[..n - room]).map_err(err)? {
                    Some(chain) => buf = chain,
                    None => {
                        self.stats.rx_drops.no_buffer += 1;
                        continue;
                    }
                }
                out.set_chained();
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
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
                    let mut iov =
                        [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; 1 + MAX_CHAIN];
                    iov[0] = match &mut self.auth {
                        None => {
                            libc::iovec { iov_base: TUNNEL_HEADER.as_ptr() as *mut _, iov_len: HDR }
                        }
                        Some(auth) => {
                            auth.seal(&mut self.tx_hdr, |h| {
                                h.update(d);
                                if chained {
                                    pool.frags(buf).for_each(|f| {
                                        h.update(f);
                                    });
                                }
                            });
                            libc::iovec {
                                iov_base: self.tx_hdr.as_mut_ptr().cast(),
                                iov_len: AUTH_HEADER_LEN,
                            }
                        }
                    };
                    let (k, len) = if chained && pool.has_frags(buf) {
                        // A chain is one datagram: header, head and fragments.
                        chains::gather(&pool, buf, d, &mut iov[1..])
                    } else {
                        iov[1] = libc::iovec { iov_base: d.as_ptr() as *mut _, iov_len: d.len() };
                        (1, d.len())
                    };
                    // SAFETY: all-zero is a valid msghdr; the iovecs it points to (the
                    // header, static or in `self.tx_hdr`, and the frame's pieces, held in
                    // `buf`) live until sendmsg
                    // returns, and the kernel only reads them.
                    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                    msg.msg_iov = iov.as_mut_ptr();
                    msg.msg_iovlen = 1 + k;
                    (msg.msg_name, msg.msg_namelen) = self.peer.as_name();
                    // SAFETY: a socket we own; `msg` is valid as above, and its name points
                    // to `self.peer`, which the kernel only reads.
                    let n = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, 0) };
                    if n < 0 {
                        match os::errno() {
                            libc::EAGAIN | libc::EINTR | libc::ENOBUFS => break,
                            // Peer unreachable, frame longer than the path allows: dropped.
                            _ => self.stats.tx_drops.device += 1,
                        }
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

/// A socket address in the kernel's form: given to `sendmsg` and compared with each
/// datagram's source.
#[derive(Clone, Copy)]
enum RawAddr {
    V4(libc::sockaddr_in),
    V6(libc::sockaddr_in6),
}

impl std::fmt::Debug for RawAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RawAddr::V4(_) => "RawAddr::V4",
            RawAddr::V6(_) => "RawAddr::V6",
        })
    }
}

impl RawAddr {
    fn new(a: SocketAddr) -> RawAddr {
        match a {
            SocketAddr::V4(a) => RawAddr::V4(libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            }),
            SocketAddr::V6(a) => RawAddr::V6(libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            }),
        }
    }

    /// `msg_name` and `msg_namelen` naming this address.
    fn as_name(&self) -> (*mut libc::c_void, libc::socklen_t) {
        match self {
            RawAddr::V4(a) => {
                ((a as *const libc::sockaddr_in).cast_mut().cast(), size_of_val(a) as _)
            }
            RawAddr::V6(a) => {
                ((a as *const libc::sockaddr_in6).cast_mut().cast(), size_of_val(a) as _)
            }
        }
    }

    /// Whether `from` (`len` bytes written by the kernel) is this address: family, IP and
    /// port (and the scope of a link-local IPv6 peer configured with one).
    fn is(&self, from: &libc::sockaddr_storage, len: libc::socklen_t) -> bool {
        let len = len as usize;
        match self {
            RawAddr::V4(p) => {
                if len < size_of::<libc::sockaddr_in>() || from.ss_family != p.sin_family {
                    return false;
                }
                // SAFETY: sockaddr_storage is aligned for and larger than any sockaddr, and
                // the kernel wrote an AF_INET address of this size.
                let f = unsafe {
                    &*(from as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                f.sin_port == p.sin_port && f.sin_addr.s_addr == p.sin_addr.s_addr
            }
            RawAddr::V6(p) => {
                if len < size_of::<libc::sockaddr_in6>() || from.ss_family != p.sin6_family {
                    return false;
                }
                // SAFETY: as above, for an AF_INET6 address.
                let f = unsafe {
                    &*(from as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                f.sin6_port == p.sin6_port
                    && f.sin6_addr.s6_addr == p.sin6_addr.s6_addr
                    && (p.sin6_scope_id == 0 || f.sin6_scope_id == p.sin6_scope_id)
            }
        }
    }
}

impl AsFd for UdpPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}
