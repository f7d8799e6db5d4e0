//! AF_PACKET with memory-mapped rings: a TPACKET_V3 receive ring (the kernel fills whole
//! blocks and hands each over once it is full or its timer retires it) and a TX ring of
//! fixed frames, bound to one interface. Receive copies each packet into a pool buffer;
//! transmit copies it into a ring frame and frees the buffer at once.
//!
//! Multi-buffer frames ([`Port::takes_frags`]): a packet longer than one buffer (a jumbo
//! frame on an interface with a large MTU) is copied into a pool chain
//! ([`crate::chains`]); one the ring cut short, or longer than a chain holds, is counted
//! `too_big`. A frame longer than a TX ring frame, a chain among them, goes out whole
//! through a second, ring-less socket with one `sendmsg` of its gathered pieces (the
//! ring is kicked first, so frames leave in order).
//!
//! The rings are shared with the kernel, so every offset and length read from them is
//! checked against the block or frame before it is used.

use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use spine_pool::{Buf, Burst, Pool, PoolCache, PoolError, MAX_CHAIN};

use crate::chains;
use crate::os::{self, Mmap};
use crate::{Port, PortError, PortErrorKind, PortStats};

const TPACKET_V3: i32 = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where a TX frame's packet starts.
const TX_DATA_OFF: usize = 48;
/// `sizeof(struct tpacket3_hdr)`.
const HDR3_LEN: usize = 48;
/// `struct tpacket_block_desc`: `tpacket_hdr_v1` starts after version and priv offset.
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
const BLOCK_HDR_LEN: usize = 48;
const ETH_P_ALL: u16 = 0x0003;

/// Ring geometry and options of an [`AfPacketPort`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketConfig {
    pub ifname: String,
    /// Receive frames not addressed to the interface (`PACKET_MR_PROMISC`, dropped when
    /// the socket closes).
    pub promiscuous: bool,
    /// Bytes per receive block: a multiple of the page size.
    pub block_size: u32,
    pub block_count: u32,
    /// Milliseconds after which the kernel hands over a block that is not full: the
    /// added latency at low rates.
    pub block_timeout_ms: u32,
    /// Bytes per transmit frame (48 of them are the frame header): a multiple of 16 that
    /// divides the page size or is a multiple of it.
    pub tx_frame_size: u32,
    pub tx_frames: u32,
    /// Ingress port id written into received buffers.
    pub port_id: u32,
}

impl AfPacketConfig {
    /// 8 blocks of 128 KiB for receive, 256 frames of 2 KiB for transmit.
    pub fn new(ifname: &str) -> Self {
        AfPacketConfig {
            ifname: ifname.to_owned(),
            promiscuous: false,
            block_size: 128 * 1024,
            block_count: 8,
            block_timeout_ms: 1,
            tx_frame_size: 2048,
            tx_frames: 256,
            port_id: 0,
        }
    }
}

/// An AF_PACKET socket with mapped rings on one interface.
#[derive(Debug)]
pub struct AfPacketPort {
    name: String,
    cfg: AfPacketConfig,
    // Field order: the mapping goes before the socket that backs it.
    ring: Mmap,
    fd: OwnedFd,
    /// A second socket, without rings, for frames that do not fit a TX ring frame
    /// (chains among them): one `sendmsg` each.
    tx_fd: OwnedFd,
    rx_len: usize,
    block: u32,
    /// Packets of the current block not yet read, and the offset of the next one.
    pkts_left: u32,
    next_off: usize,
    tx_head: u32,
    tx_frames_per_block: u32,
    tx_block_size: usize,
    stats: PortStats,
    kernel_drops: Cell<u64>,
}

impl AfPacketPort {
    /// Opens the socket, sets up and maps the rings, and binds to `cfg.ifname` in the
    /// calling thread's network namespace.
    pub fn open(cfg: AfPacketConfig) -> Result<AfPacketPort, PortError> {
        let name = cfg.ifname.clone();
        let port = name.as_str();
        let page = 4096u32;
        let bad = |reason| Err(PortError::new(port, PortErrorKind::Config { reason }));
        if cfg.block_size == 0 || !cfg.block_size.is_multiple_of(page) || cfg.block_count == 0 {
            return bad("block_size must be a non-zero multiple of 4096 and block_count non-zero");
        }
        let fs = cfg.tx_frame_size;
        if fs < 64
            || !fs.is_multiple_of(16)
            || !(page.is_multiple_of(fs) || fs.is_multiple_of(page))
            || cfg.tx_frames == 0
        {
            return bad(
                "tx_frame_size must be a multiple of 16 that divides 4096 or is a multiple of it",
            );
        }
        let ifindex = os::ifindex(port, &cfg.ifname)?;
        os::require_up(port, &cfg.ifname)?;
        // Protocol 0: nothing is queued before the rings exist; bind names the protocol.
        let fd = os::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
            .map_err(|e| PortError::os(port, "socket(AF_PACKET)", e))?;
        os::set_opt(
            fd.as_fd(),
            port,
            "PACKET_VERSION",
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &TPACKET_V3,
        )?;
        let rx_req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size,
            tp_block_nr: cfg.block_count,
            tp_frame_size: 2048,
            tp_frame_nr: cfg.block_size / 2048 * cfg.block_count,
            tp_retire_blk_tov: cfg.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        os::set_opt(
            fd.as_fd(),
            port,
            "PACKET_RX_RING",
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &rx_req,
        )?;
        let tx_block_size = fs.max(page);
        let per_block = tx_block_size / fs;
        let tx_blocks = cfg.tx_frames.div_ceil(per_block);
        let tx_req = libc::tpacket_req3 {
            tp_block_size: tx_block_size,
            tp_block_nr: tx_blocks,
            tp_frame_size: fs,
            tp_frame_nr: tx_blocks * per_block,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        os::set_opt(
            fd.as_fd(),
            port,
            "PACKET_TX_RING",
            libc::SOL_PACKET,
            libc::PACKET_TX_RING,
            &tx_req,
        )?;
        // Our own transmissions must not come back on the receive ring.
        let one: i32 = 1;
        os::set_opt(
            fd.as_fd(),
            port,
            "PACKET_IGNORE_OUTGOING",
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
        )?;
        let rx_len = cfg.block_size as usize * cfg.block_count as usize;
        let tx_len = tx_block_size as usize * tx_blocks as usize;
        let ring = Mmap::new(fd.as_fd(), rx_len + tx_len, 0)
            .map_err(|e| PortError::os(port, "mmap(PACKET rings)", e))?;
        if cfg.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as i32,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            os::set_opt(
                fd.as_fd(),
                port,
                "PACKET_ADD_MEMBERSHIP",
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mreq,
            )?;
        }
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: the kernel reads a sockaddr_ll of the given length from `sll`.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(PortError::os(port, "bind(AF_PACKET)", os::errno()));
        }
        // The side socket for frames longer than a ring frame: protocol 0, so it
        // receives nothing; bound to the interface, so a plain sendmsg goes there.
        let tx_fd = os::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK, 0)
            .map_err(|e| PortError::os(port, "socket(AF_PACKET)", e))?;
        sll.sll_protocol = 0;
        // SAFETY: as above.
        let rc = unsafe {
            libc::bind(
                tx_fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(PortError::os(port, "bind(AF_PACKET)", os::errno()));
        }
        Ok(AfPacketPort {
            name,
            rx_len,
            ring,
            fd,
            tx_fd,
            block: 0,
            pkts_left: 0,
            next_off: 0,
            tx_head: 0,
            tx_frames_per_block: per_block,
            tx_block_size: tx_block_size as usize,
            cfg: AfPacketConfig { tx_frames: tx_blocks * per_block, ..cfg },
            stats: PortStats::default(),
            kernel_drops: Cell::new(0),
        })
    }

    /// The ring word at byte `at` of the mapping, shared with the kernel.
    fn word(&self, at: usize) -> &AtomicU32 {
        assert!(at.is_multiple_of(4) && at + 4 <= self.ring.len(), "ring offset {at} out of range");
        // SAFETY: `at` is 4-aligned (the mapping is page-aligned) and inside the mapping,
        // which lives as long as `self`; the kernel accesses these words concurrently,
        // hence atomics.
        unsafe { &*self.ring.ptr().as_ptr().add(at).cast::<AtomicU32>() }
    }

    /// Reads `len` bytes at `at` of the mapping (checked by the caller to be inside).
    fn bytes(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= self.ring.len());
        // SAFETY: inside the mapping; the kernel does not write a block or frame while
        // its status word says it belongs to user space, which the callers checked.
        unsafe { std::slice::from_raw_parts(self.ring.ptr().as_ptr().add(at), len) }
    }

    /// Copies the packet of `snaplen` bytes at ring offset `at` (checked by the caller)
    /// into a buffer, or into a chain of buffers when it is longer than one
    /// ([`crate::chains`]); returns it and whether it is a chain. `None` when it was
    /// dropped (counted): cut short by the ring (`wire_len` longer than what it holds)
    /// or too long for a chain (`too_big`), or the pool ran short (`no_buffer`).
    fn rx_one(
        &mut self,
        cache: &mut PoolCache,
        at: usize,
        snaplen: usize,
        wire_len: usize,
        ts: u64,
    ) -> Result<Option<(Buf, bool)>, PoolError> {
        let pool = cache.pool();
        let room = (pool.buf_size() - pool.headroom()) as usize;
        if wire_len != snaplen || (snaplen > room && snaplen > chains::chain_room(pool)) {
            self.stats.rx_drops.too_big += 1;
            return Ok(None);
        }
        let Some(mut buf) = cache.alloc() else {
            self.stats.rx_drops.no_buffer += 1;
            return Ok(None);
        };
        let bytes = self.bytes(at, snaplen);
        let pool = cache.pool();
        if snaplen <= room {
            // Cannot fail: the buffer is fresh and the packet fits.
            pool.write_rx(&mut buf, bytes, self.cfg.port_id, ts)?;
            return Ok(Some((buf, false)));
        }
        pool.write_rx(&mut buf, &bytes[..room], self.cfg.port_id, ts)?;
        match chains::append_frags(cache, buf, &bytes[room..])? {
            Some(head) => Ok(Some((head, true))),
            None => {
                self.stats.rx_drops.no_buffer += 1;
                Ok(None)
            }
        }
    }

    fn block_base(&self) -> usize {
        self.block as usize * self.cfg.block_size as usize
    }

    /// Hands the current block back to the kernel and moves to the next.
    fn release_block(&mut self) {
        self.word(self.block_base() + BLOCK_STATUS).store(TP_STATUS_KERNEL, Ordering::Release);
        self.block = (self.block + 1) % self.cfg.block_count;
        self.pkts_left = 0;
    }

    fn tx_frame_base(&self, i: u32) -> usize {
        let block = (i / self.tx_frames_per_block) as usize;
        let within = (i % self.tx_frames_per_block) as usize;
        self.rx_len + block * self.tx_block_size + within * self.cfg.tx_frame_size as usize
    }

    /// Sends a frame longer than a ring frame, or a chain, with one `sendmsg` on the
    /// side socket: its pieces gathered from the pool ([`crate::chains::gather`]).
    /// `false` when the socket's queue is full (the frame stays for a later call);
    /// a frame longer than the device takes is counted `too_big`, any other refusal
    /// `device`.
    fn send_long(&mut self, pool: &Pool, buf: &Buf) -> Result<bool, PortError> {
        let Ok(data) = pool.data(buf) else { return Ok(true) };
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_CHAIN];
        let (n, len) = chains::gather(pool, buf, data, &mut iov);
        // SAFETY: all-zero is a valid msghdr (no address, no control data).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = n;
        // SAFETY: the kernel reads `n` iovecs, each pointing into the chain `buf` that
        // is held, and not written, for the duration of the call.
        let rc = unsafe { libc::sendmsg(self.tx_fd.as_raw_fd(), &msg, libc::MSG_DONTWAIT) };
        if rc >= 0 {
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += len as u64;
            return Ok(true);
        }
        match os::errno() {
            libc::EAGAIN | libc::EINTR => return Ok(false),
            libc::EMSGSIZE => self.stats.tx_drops.too_big += 1,
            libc::ENETDOWN | libc::ENXIO | libc::ENOBUFS => self.stats.tx_drops.device += 1,
            e => return Err(PortError::os(&self.name, "sendmsg(AF_PACKET)", e)),
        }
        Ok(true)
    }

    /// Asks the kernel to send the frames marked for sending; a full device queue is not
    /// an error (the frames stay marked and go with the next kick).
    fn kick(&self) -> Result<(), PortError> {
        // SAFETY: a zero-length send with no buffer: the kernel reads only the ring.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            let e = os::errno();
            if !matches!(e, libc::EAGAIN | libc::ENOBUFS | libc::EINTR) {
                return Err(PortError::os(&self.name, "send(PACKET_TX_RING)", e));
            }
        }
        Ok(())
    }
}

impl Port for AfPacketPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        let bs = self.cfg.block_size as usize;
        let mut got = 0;
        while !out.is_full() {
            let base = self.block_base();
            if self.pkts_left == 0 {
                if self.word(base + BLOCK_STATUS).load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                    break;
                }
                let num = self.word(base + BLOCK_NUM_PKTS).load(Ordering::Relaxed);
                let first = self.word(base + BLOCK_FIRST_PKT).load(Ordering::Relaxed) as usize;
                if num == 0 || first < BLOCK_HDR_LEN || first >= bs {
                    if num != 0 {
                        self.stats.rx_drops.bad_desc += u64::from(num);
                    }
                    self.release_block();
                    continue;
                }
                self.pkts_left = num;
                self.next_off = first;
            }
            let at = self.next_off;
            if !at.is_multiple_of(4) || at + HDR3_LEN > bs {
                self.stats.rx_drops.bad_desc += u64::from(self.pkts_left);
                self.release_block();
                continue;
            }
            let hdr = base + at;
            let next = self.word(hdr).load(Ordering::Relaxed) as usize;
            let sec = self.word(hdr + 4).load(Ordering::Relaxed);
            let nsec = self.word(hdr + 8).load(Ordering::Relaxed);
            let snaplen = self.word(hdr + 12).load(Ordering::Relaxed) as usize;
            let wire_len = self.word(hdr + 16).load(Ordering::Relaxed) as usize;
            let mac = (self.word(hdr + 24).load(Ordering::Relaxed) & 0xffff) as usize;
            if mac < HDR3_LEN || at + mac + snaplen > bs {
                self.stats.rx_drops.bad_desc += u64::from(self.pkts_left);
                self.release_block();
                continue;
            }
            self.pkts_left -= 1;
            self.next_off = at + next;
            if self.pkts_left > 0 && next == 0 {
                // A zero link before the last packet would loop on it forever.
                self.stats.rx_drops.bad_desc += u64::from(self.pkts_left);
                self.pkts_left = 0;
            }
            let ts = u64::from(sec) * 1_000_000_000 + u64::from(nsec);
            match self.rx_one(cache, hdr + mac, snaplen, wire_len, ts) {
                Ok(Some((buf, chained))) => {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += snaplen as u64;
                    if chained {
                        out.set_chained();
                    }
                    let _ = out.push(buf);
                    got += 1;
                }
                Ok(None) => {}
                Err(e) => return Err(PortError::new(&self.name, e.into())),
            }
            if self.pkts_left == 0 {
                self.release_block();
            }
        }
        Ok(got)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let room = self.cfg.tx_frame_size as usize - TX_DATA_OFF;
        let chained = pkts.has_chains();
        let mut taken = 0;
        let mut queued = 0;
        while let Some(buf) = pkts.get(0) {
            let data = pool.data(buf);
            if matches!(&data, Ok(d) if d.len() > room || (chained && pool.has_frags(buf))) {
                // Frames already in the ring go first, so the order holds.
                if queued > 0 {
                    self.kick()?;
                    queued = 0;
                }
                if !self.send_long(&pool, buf)? {
                    break;
                }
                taken += 1;
                let buf = pkts.drain_front(1).next().expect("checked above");
                if cache.free(buf).is_err() {
                    self.stats.tx_drops.bad_buffer += 1;
                }
                continue;
            }
            let frame = self.tx_frame_base(self.tx_head);
            let status = self.word(frame + 20).load(Ordering::Acquire);
            if status == TP_STATUS_WRONG_FORMAT {
                self.stats.tx_drops.device += 1;
            } else if status != TP_STATUS_AVAILABLE {
                break;
            }
            taken += 1;
            match data {
                Ok(d) => {
                    // SAFETY: the frame is ours (status AVAILABLE), `room` bytes after
                    // its header are inside the mapping (frame_base + frame_size <= len),
                    // and d.len() <= room (longer frames went to `send_long` above).
                    unsafe {
                        let dst = self.ring.ptr().as_ptr().add(frame + TX_DATA_OFF);
                        std::ptr::copy_nonoverlapping(d.as_ptr(), dst, d.len());
                    }
                    self.word(frame).store(0, Ordering::Relaxed);
                    self.word(frame + 12).store(d.len() as u32, Ordering::Relaxed);
                    self.word(frame + 16).store(d.len() as u32, Ordering::Relaxed);
                    self.word(frame + 20).store(TP_STATUS_SEND_REQUEST, Ordering::Release);
                    self.tx_head = (self.tx_head + 1) % self.cfg.tx_frames;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += d.len() as u64;
                    queued += 1;
                }
                Err(_) => self.stats.tx_drops.bad_buffer += 1,
            }
            let buf = pkts.drain_front(1).next().expect("checked above");
            if cache.free(buf).is_err() {
                self.stats.tx_drops.bad_buffer += 1;
            }
        }
        if queued > 0 {
            self.kick()?;
        }
        Ok(taken)
    }

    fn flush(&mut self, _: &mut PoolCache) -> Result<(), PortError> {
        self.kick()
    }

    fn takes_frags(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        // PACKET_STATISTICS resets the kernel's counters on every read: accumulate.
        let mut st = [0u32; 3];
        if os::getsockopt(self.fd.as_fd(), libc::SOL_PACKET, libc::PACKET_STATISTICS, &mut st)
            .is_ok()
        {
            self.kernel_drops.set(self.kernel_drops.get() + u64::from(st[1]));
        }
        let mut s = self.stats;
        s.rx_drops.kernel = self.kernel_drops.get();
        s
    }
}

impl AsFd for AfPacketPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
