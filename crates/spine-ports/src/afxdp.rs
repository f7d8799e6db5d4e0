//! AF_XDP: one socket per interface queue whose UMEM is the buffer pool's own memory, so
//! packets arrive in pool buffers and leave from them without a copy in user space.
//!
//! spine loads the kernel side itself ([`spine_sys::XskRedirect`]: an xskmap and a
//! program redirecting the queue to the socket), attaches it through netlink (native
//! mode, falling back to generic) and detaches it on close. Zero-copy binding is tried
//! first where asked, and copy mode used when the driver refuses it (veth does).
//! Several ports can share one UMEM ([`AfXdpPort::open_shared`]): a buffer received on
//! one is transmitted on another as is.
//!
//! Multi-buffer frames: with [`AfXdpConfig::frags`] the socket is bound with
//! `XDP_USE_SG` and the redirect program loaded with `BPF_F_XDP_HAS_FRAGS`, so a frame
//! longer than one chunk (a jumbo frame) arrives as descriptors chained with
//! `XDP_PKT_CONTD` and becomes a pool chain (`afxdp/sg.rs`); a chained frame is sent
//! the same way. Without it the receive and transmit paths are as they were.
//!
//! Buffer ownership: buffers in the fill and TX rings are lent to the kernel
//! ([`spine_pool::Pool::lend`]); RX and completion descriptors give them back through
//! [`spine_pool::Pool::reclaim`], which checks every address. On close, whatever the
//! kernel still held is returned to the pool.

mod ring;
mod sg;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::Arc;

use spine_pool::{Burst, LenderId, Pool, PoolCache};
use spine_sys::{detach_xdp, prog_by_id, query_xdp, XdpLink, XdpMode, XskRedirect};

use crate::os;
use crate::{Port, PortError, PortErrorKind, PortStats};
use ring::Ring;
use sg::{Rx, RxChains};

/// The name of the redirect program spine attaches: how a stale one is recognised.
pub const XSK_PROG_NAME: &str = "spine_xsk";

/// Attaches `k`'s program to `ifindex` through a BPF link.
fn attach_link(
    ifindex: u32,
    k: &XskRedirect,
    mode: XdpMode,
) -> Result<XdpLink, spine_sys::SysError> {
    XdpLink::attach(ifindex, k.prog().fd(), mode)
}

/// Removes the program attached to the interface if it is a redirect program of a
/// spine that is gone: named [`XSK_PROG_NAME`] and attached through netlink (a live
/// owner holds its program through a link, which netlink cannot remove). Anything
/// else stays, and the error names it.
fn clear_stale(port: &str, ifindex: u32, mode: XdpMode) -> Result<(), PortError> {
    let netlink = |e: spine_sys::NetlinkError| PortError::new(port, PortErrorKind::Netlink(e));
    let now = query_xdp(ifindex).map_err(netlink)?;
    let held = |name: String, id: u32| PortError::new(port, PortErrorKind::XdpInUse { name, id });
    if now.prog_id == 0 {
        // Gone meanwhile, or held in another mode: the retry tells.
        return Ok(());
    }
    let (fd, info) = prog_by_id(now.prog_id).map_err(|_| held(String::from("?"), now.prog_id))?;
    if info.name != XSK_PROG_NAME {
        return Err(held(info.name, info.id));
    }
    // Only that very program (XDP_FLAGS_REPLACE with its fd): never one attached
    // since we looked.
    let at = now.mode.unwrap_or(mode);
    match detach_xdp(ifindex, at, Some(fd.as_fd())) {
        Ok(()) => Ok(()),
        // A link holds it: another spine is alive and owns the interface.
        Err(e) if e.is(libc::EBUSY) => Err(PortError::new(
            port,
            PortErrorKind::Busy { op: "attach XDP, held by a running spine", errno: e.errno },
        )),
        Err(e) => Err(netlink(e)),
    }
}

/// How long a bind refused with EBUSY is retried: the kernel releases a dead process's
/// socket from the queue asynchronously.
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How to bind the socket to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    /// Zero-copy if the driver supports it, else copy mode.
    Auto,
    Copy,
    ZeroCopy,
}

/// How to attach the redirect program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    /// Native if the driver supports it, else generic (skb) mode.
    Auto,
    Native,
    Skb,
    /// Load and attach nothing: the caller's own XDP program redirects to the socket.
    None,
}

/// Where and how an [`AfXdpPort`] binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpConfig {
    pub ifname: String,
    pub queue: u32,
    /// Ring sizes, powers of two. The fill ring is kept full, so a port holds up to
    /// `fill_size` pool buffers even when idle.
    pub rx_size: u32,
    pub tx_size: u32,
    pub fill_size: u32,
    pub comp_size: u32,
    pub bind: BindMode,
    pub attach: AttachMode,
    /// Ingress port id written into received buffers.
    pub port_id: u32,
    /// Multi-buffer frames: bind with `XDP_USE_SG` and load the redirect program
    /// frags-aware; frames longer than a chunk are received and sent as chains.
    pub frags: bool,
}

impl AfXdpConfig {
    /// Queue 0, rings of 512, automatic modes.
    pub fn new(ifname: &str) -> Self {
        AfXdpConfig {
            ifname: ifname.to_owned(),
            queue: 0,
            rx_size: 512,
            tx_size: 512,
            fill_size: 512,
            comp_size: 512,
            bind: BindMode::Auto,
            attach: AttachMode::Auto,
            port_id: 0,
            frags: false,
        }
    }
}

/// The socket and its four rings; the rings are unmapped before the socket closes.
#[derive(Debug)]
struct Xsk {
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    fd: OwnedFd,
}

/// An AF_XDP socket bound to one queue of one interface.
#[derive(Debug)]
pub struct AfXdpPort {
    name: String,
    cfg: AfXdpConfig,
    ifindex: u32,
    pool: Arc<Pool>,
    lender: LenderId,
    xsk: Option<Xsk>,
    kernel: Option<(XskRedirect, XdpLink)>,
    zero_copy: bool,
    /// Descriptors in the TX ring whose completion has not come back.
    tx_outstanding: u32,
    /// The frame being assembled from RX descriptors (`frags` only).
    chains: RxChains,
    stats: PortStats,
}

impl AfXdpPort {
    /// Opens a port that registers the pool of `cache` as its UMEM, and fills its fill
    /// ring from `cache`.
    pub fn open(cfg: AfXdpConfig, cache: &mut PoolCache) -> Result<AfXdpPort, PortError> {
        Self::open_with(cfg, cache, None)
    }

    /// Opens a port on another interface or queue that shares `owner`'s UMEM (the same
    /// pool): buffers move between the two without copies.
    pub fn open_shared(
        cfg: AfXdpConfig,
        cache: &mut PoolCache,
        owner: &AfXdpPort,
    ) -> Result<AfXdpPort, PortError> {
        if !Arc::ptr_eq(cache.pool(), &owner.pool) {
            return Err(PortError::new(
                &cfg.ifname,
                PortErrorKind::Config { reason: "a shared UMEM needs the owner's pool" },
            ));
        }
        let fd = owner.xsk.as_ref().expect("open until dropped").fd.as_raw_fd();
        Self::open_with(cfg, cache, Some(fd))
    }

    fn open_with(
        cfg: AfXdpConfig,
        cache: &mut PoolCache,
        shared: Option<RawFd>,
    ) -> Result<AfXdpPort, PortError> {
        let name = cfg.ifname.clone();
        let port = name.as_str();
        let bad = |reason| Err(PortError::new(port, PortErrorKind::Config { reason }));
        let pool = cache.pool().clone();
        let chunk = pool.buf_size();
        if !chunk.is_power_of_two() || !(2048..=4096).contains(&chunk) {
            return bad("AF_XDP needs a pool whose buffer size is 2048 or 4096");
        }
        let sizes = [cfg.rx_size, cfg.tx_size, cfg.fill_size, cfg.comp_size];
        if sizes.iter().any(|s| !s.is_power_of_two()) {
            return bad("AF_XDP ring sizes must be powers of two");
        }
        let ifindex = os::ifindex(port, &cfg.ifname)?;
        os::require_up(port, &cfg.ifname)?;
        if cfg.attach != AttachMode::None {
            // A redirect program left by a spine that died holds its xskmap, and the map
            // holds that spine's socket on the queue: bind would fail with EBUSY. Clear it
            // (or name the foreign program in the way) before binding.
            clear_stale(port, ifindex, XdpMode::Native)?;
        }
        let (xsk, zero_copy) = match (shared, cfg.bind) {
            // A socket sharing a UMEM inherits the owner's mode; it may not ask for one.
            (Some(_), _) => (socket(port, &cfg, ifindex, &pool, shared, false)?, false),
            (None, BindMode::Copy) => (socket(port, &cfg, ifindex, &pool, shared, false)?, false),
            (None, BindMode::ZeroCopy) => (socket(port, &cfg, ifindex, &pool, shared, true)?, true),
            (None, BindMode::Auto) => match socket(port, &cfg, ifindex, &pool, shared, true) {
                Ok(x) => (x, true),
                Err(PortError { kind: PortErrorKind::Unsupported { .. }, .. }) => {
                    (socket(port, &cfg, ifindex, &pool, shared, false)?, false)
                }
                Err(e) => return Err(e),
            },
        };
        let mut opts = libc::xdp_options { flags: 0 };
        let zero_copy =
            match os::getsockopt(xsk.fd.as_fd(), libc::SOL_XDP, libc::XDP_OPTIONS, &mut opts) {
                Ok(_) => opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
                Err(_) => zero_copy,
            };
        let lender = pool.new_lender();
        let mut me = AfXdpPort {
            name,
            ifindex,
            pool,
            lender,
            xsk: Some(xsk),
            kernel: None,
            zero_copy,
            tx_outstanding: 0,
            chains: RxChains::default(),
            stats: PortStats::default(),
            cfg,
        };
        // Buffers in the fill ring before the program redirects the first frame: a frame
        // that found the ring empty would be dropped by the kernel.
        me.refill(cache);
        me.attach()?;
        Ok(me)
    }

    /// Loads the redirect program, points the queue's xskmap slot at the socket and
    /// attaches the program to the interface.
    fn attach(&mut self) -> Result<(), PortError> {
        let port = self.name.as_str();
        let modes: &[XdpMode] = match self.cfg.attach {
            AttachMode::None => return Ok(()),
            AttachMode::Auto => &[XdpMode::Native, XdpMode::Skb],
            AttachMode::Native => &[XdpMode::Native],
            AttachMode::Skb => &[XdpMode::Skb],
        };
        let bpf_err = |e: spine_sys::SysError| {
            if e.is(libc::EPERM) {
                PortError::new(port, PortErrorKind::PermissionDenied { op: "bpf" })
            } else {
                PortError::new(port, PortErrorKind::Bpf(e))
            }
        };
        let k = XskRedirect::load_with(XSK_PROG_NAME, self.cfg.queue + 1, self.cfg.frags)
            .map_err(bpf_err)?;
        let fd = self.xsk.as_ref().expect("open").fd.as_fd();
        k.insert(self.cfg.queue, fd).map_err(bpf_err)?;
        let mut last = None;
        for &mode in modes {
            match attach_link(self.ifindex, &k, mode) {
                Ok(link) => {
                    self.kernel = Some((k, link));
                    return Ok(());
                }
                Err(e) if e.is(libc::EBUSY) || e.is(libc::EEXIST) => {
                    // Something holds the interface: a spine that died attached the
                    // old way (netlink, not a link) is cleared, anything else refused.
                    clear_stale(port, self.ifindex, mode)?;
                    let link = attach_link(self.ifindex, &k, mode).map_err(|e| {
                        PortError::new(port, PortErrorKind::from_errno("attach XDP", e.errno))
                    })?;
                    self.kernel = Some((k, link));
                    return Ok(());
                }
                Err(e) if e.is(libc::EPERM) => {
                    return Err(PortError::new(
                        port,
                        PortErrorKind::PermissionDenied { op: "attach XDP" },
                    ))
                }
                Err(e) => last = Some(e),
            }
        }
        Err(PortError::new(port, PortErrorKind::Bpf(last.expect("at least one mode"))))
    }

    /// True when the socket is bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The mode the redirect program runs in; `None` with [`AttachMode::None`].
    pub fn xdp_mode(&self) -> Option<XdpMode> {
        self.kernel.as_ref().map(|(_, l)| l.mode())
    }

    /// The id of the attached redirect program.
    pub fn prog_id(&self) -> Option<u32> {
        self.kernel.as_ref().and_then(|(k, _)| k.prog().info().ok()).map(|i| i.id)
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// Buffers this port has lent to the kernel (fill ring, RX ring, TX in flight).
    /// Slow path: scans the pool.
    pub fn lent(&self) -> u32 {
        self.pool.lent_by(self.lender)
    }

    fn xsk(&mut self) -> &mut Xsk {
        self.xsk.as_mut().expect("open until dropped")
    }

    /// Tops the fill ring up with fresh buffers, as far as the pool allows.
    fn refill(&mut self, cache: &mut PoolCache) {
        let (pool, lender) = (self.pool.clone(), self.lender);
        let xsk = self.xsk();
        let free = xsk.fill.free_slots();
        let mut n = 0;
        while n < free {
            let Some(buf) = cache.alloc() else { break };
            match pool.lend(buf, lender) {
                Ok(addr) => {
                    xsk.fill.write_addr(n, addr);
                    n += 1;
                }
                Err(e) => {
                    let _ = cache.free(e.buf);
                    break;
                }
            }
        }
        xsk.fill.submit(n);
    }

    /// Takes back the buffers whose transmission completed.
    fn complete(&mut self, cache: &mut PoolCache) {
        let (pool, lender) = (self.pool.clone(), self.lender);
        let xsk = self.xsk.as_mut().expect("open until dropped");
        let n = xsk.comp.available();
        for i in 0..n {
            match pool.reclaim(xsk.comp.read_addr(i), lender) {
                Ok(buf) => {
                    let _ = cache.free(buf);
                }
                Err(_) => self.stats.tx_drops.bad_desc += 1,
            }
        }
        xsk.comp.release(n);
        self.tx_outstanding = self.tx_outstanding.saturating_sub(n);
    }

    /// Tells the kernel there is something to send (copy mode sends only on a syscall).
    fn kick_tx(&mut self) -> Result<(), PortError> {
        let need = !self.zero_copy || self.xsk().tx.needs_wakeup();
        if !need {
            return Ok(());
        }
        let fd = self.xsk().fd.as_raw_fd();
        // SAFETY: a zero-length send without buffers; the kernel reads only the TX ring.
        let rc = unsafe {
            libc::sendto(fd, std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0)
        };
        if rc < 0 {
            let e = os::errno();
            if !matches!(
                e,
                libc::EAGAIN | libc::EBUSY | libc::ENOBUFS | libc::EINTR | libc::ENETDOWN
            ) {
                return Err(PortError::os(&self.name, "sendto(AF_XDP)", e));
            }
        }
        Ok(())
    }

    /// Receive on a socket bound with `XDP_USE_SG`: descriptors chained with
    /// `XDP_PKT_CONTD` become one pool chain (`afxdp/sg.rs`). Stops only between frames,
    /// so a frame's descriptors are never split between bursts.
    fn rx_burst_sg(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        self.complete(cache);
        let (pool, lender, port_id) = (self.pool.clone(), self.lender, self.cfg.port_id);
        let chunk = u64::from(pool.buf_size());
        let xsk = self.xsk.as_mut().expect("open until dropped");
        let avail = xsk.rx.available();
        let (mut used, mut got) = (0, 0);
        // A frame is only started while `out` has room, so one in progress always has some.
        while used < avail && (!out.is_full() || self.chains.in_frame()) {
            let (addr, len) = xsk.rx.read_desc(used);
            let contd = xsk.rx.read_options(used) & libc::XDP_PKT_CONTD != 0;
            used += 1;
            let mut buf = match pool.reclaim(addr, lender) {
                Ok(b) => b,
                Err(_) => {
                    self.stats.rx_drops.bad_desc += 1;
                    self.chains.broken(cache, contd);
                    continue;
                }
            };
            let placed = pool
                .set_data(&mut buf, (addr % chunk) as u32, len)
                .and_then(|()| pool.set_rx_info(&mut buf, port_id, 0));
            if placed.is_err() {
                self.stats.rx_drops.bad_desc += 1;
                let _ = cache.free(buf);
                self.chains.broken(cache, contd);
                continue;
            }
            match self.chains.push(cache, buf, contd) {
                Rx::Frame { buf, chained } => {
                    self.stats.rx_packets += 1;
                    self.stats.rx_bytes += pool.frame_len(&buf);
                    if chained {
                        out.set_chained();
                    }
                    // Room checked by the loop: a frame only ends while there is some.
                    if let Err(buf) = out.push(buf) {
                        let _ = cache.free(buf);
                    }
                    got += 1;
                }
                Rx::TooLong => self.stats.rx_drops.too_big += 1,
                Rx::More | Rx::Skipped => {}
            }
        }
        if used == avail && self.chains.end_of_ring(cache) {
            // A chain that does not end within what the kernel published.
            self.stats.rx_drops.bad_desc += 1;
        }
        let xsk = self.xsk.as_mut().expect("open until dropped");
        xsk.rx.release(used);
        self.refill(cache);
        if avail == 0 && self.xsk().fill.needs_wakeup() {
            self.kick_rx();
        }
        Ok(got)
    }

    /// Transmit of a burst that may hold chains: each frame takes one TX descriptor per
    /// buffer, all but the last marked `XDP_PKT_CONTD`. Frames stay in `pkts` (in order)
    /// once the ring has no room for a whole one.
    fn tx_burst_chains(
        &mut self,
        cache: &mut PoolCache,
        pkts: &mut Burst,
    ) -> Result<usize, PortError> {
        self.complete(cache);
        let (pool, lender, sg) = (self.pool.clone(), self.lender, self.cfg.frags);
        let xsk = self.xsk.as_mut().expect("open until dropped");
        let mut free = xsk.tx.free_slots() as usize;
        let mut take = 0;
        for b in pkts.iter() {
            let need = 1 + pool.frag_count(b);
            if need > free {
                break;
            }
            free -= need;
            take += 1;
        }
        let mut queued = 0;
        let mut addrs = [(0u64, 0u32); spine_pool::MAX_CHAIN];
        for mut buf in pkts.drain_front(take) {
            let chained = pool.has_frags(&buf);
            if chained && (!sg || pool.refs(&buf).unwrap_or(0) != 1) {
                // A socket without XDP_USE_SG cannot send it; a shared chain is not
                // copied.
                self.stats.tx_drops.too_big += 1;
                let _ = cache.free(buf);
                continue;
            }
            if !chained && pool.refs(&buf).unwrap_or(0) > 1 {
                // A linear frame others hold too: the kernel gets a private copy.
                let Some(mut copy) = cache.alloc() else {
                    self.stats.tx_drops.no_buffer += 1;
                    let _ = cache.free(buf);
                    continue;
                };
                let copied = pool.data(&buf).and_then(|d| pool.write(&mut copy, d));
                let _ = cache.free(std::mem::replace(&mut buf, copy));
                if copied.is_err() {
                    self.stats.tx_drops.too_big += 1;
                    let _ = cache.free(buf);
                    continue;
                }
                self.stats.tx_copied += 1;
            }
            let total = pool.frame_len(&buf);
            let mut n = 0;
            let mut failed = false;
            let mut next = Some(buf);
            while let Some(mut b) = next.take() {
                next = pool.unchain(&mut b).ok().flatten();
                let meta = pool.meta(&b).unwrap_or_default();
                match pool.lend(b, lender) {
                    Ok(base) => {
                        addrs[n] = (base + u64::from(meta.data_off), meta.len);
                        n += 1;
                    }
                    Err(e) => {
                        failed = true;
                        let _ = cache.free(e.buf);
                    }
                }
            }
            let xsk = self.xsk.as_mut().expect("open until dropped");
            if failed {
                for &(addr, _) in &addrs[..n] {
                    if let Ok(b) = pool.reclaim(addr, lender) {
                        let _ = cache.free(b);
                    }
                }
                self.stats.tx_drops.bad_buffer += 1;
                continue;
            }
            for (i, &(addr, len)) in addrs[..n].iter().enumerate() {
                let opts = if i + 1 < n { libc::XDP_PKT_CONTD } else { 0 };
                xsk.tx.write_desc_opts(queued, addr, len, opts);
                queued += 1;
            }
            self.stats.tx_packets += 1;
            self.stats.tx_bytes += total;
        }
        let xsk = self.xsk.as_mut().expect("open until dropped");
        xsk.tx.submit(queued);
        self.tx_outstanding += queued;
        if queued > 0 {
            self.kick_tx()?;
        }
        Ok(take)
    }

    fn kick_rx(&mut self) {
        let fd = self.xsk().fd.as_raw_fd();
        // SAFETY: a zero-length receive without buffers: only wakes the driver's RX.
        unsafe {
            libc::recvfrom(
                fd,
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
    }
}

/// Creates, sizes, maps and binds one AF_XDP socket.
fn socket(
    port: &str,
    cfg: &AfXdpConfig,
    ifindex: u32,
    pool: &Pool,
    shared: Option<RawFd>,
    zero_copy: bool,
) -> Result<Xsk, PortError> {
    let fd = os::socket(libc::AF_XDP, libc::SOCK_RAW, 0)
        .map_err(|e| PortError::os(port, "socket(AF_XDP)", e))?;
    let f = fd.as_fd();
    if shared.is_none() {
        let (base, len) = pool.memory();
        let reg = libc::xdp_umem_reg {
            addr: base.as_ptr() as u64,
            len: len as u64,
            chunk_size: pool.buf_size(),
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        // The pool outlives the socket: every port holds an Arc of it and closes its
        // socket before reclaiming the buffers.
        os::set_opt(f, port, "XDP_UMEM_REG", libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)?;
    }
    let sol = libc::SOL_XDP;
    os::set_opt(f, port, "XDP_UMEM_FILL_RING", sol, libc::XDP_UMEM_FILL_RING, &cfg.fill_size)?;
    os::set_opt(
        f,
        port,
        "XDP_UMEM_COMPLETION_RING",
        sol,
        libc::XDP_UMEM_COMPLETION_RING,
        &cfg.comp_size,
    )?;
    os::set_opt(f, port, "XDP_RX_RING", sol, libc::XDP_RX_RING, &cfg.rx_size)?;
    os::set_opt(f, port, "XDP_TX_RING", sol, libc::XDP_TX_RING, &cfg.tx_size)?;
    // SAFETY: integers only; all-zero is valid and the kernel overwrites it.
    let mut off: libc::xdp_mmap_offsets = unsafe { std::mem::zeroed() };
    let got = os::getsockopt(f, sol, libc::XDP_MMAP_OFFSETS, &mut off)
        .map_err(|e| PortError::os(port, "XDP_MMAP_OFFSETS", e))?;
    if got != size_of::<libc::xdp_mmap_offsets>() {
        return Err(PortError::new(
            port,
            PortErrorKind::Unsupported { op: "XDP_MMAP_OFFSETS v2", errno: libc::EINVAL },
        ));
    }
    let map = |o, size, elem, pgoff, prod, op| {
        Ring::map(f, o, size, elem, pgoff, prod).map_err(|e| PortError::os(port, op, e))
    };
    let rx = map(&off.rx, cfg.rx_size, 16, libc::XDP_PGOFF_RX_RING as u64, false, "mmap(rx ring)")?;
    let tx = map(&off.tx, cfg.tx_size, 16, libc::XDP_PGOFF_TX_RING as u64, true, "mmap(tx ring)")?;
    let fill =
        map(&off.fr, cfg.fill_size, 8, libc::XDP_UMEM_PGOFF_FILL_RING, true, "mmap(fill ring)")?;
    let comp = map(
        &off.cr,
        cfg.comp_size,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
        false,
        "mmap(completion ring)",
    )?;
    let flags = match shared {
        // The kernel refuses mode flags on a socket joining another's UMEM.
        Some(_) => libc::XDP_SHARED_UMEM,
        None if zero_copy => libc::XDP_USE_NEED_WAKEUP | libc::XDP_ZEROCOPY,
        None => libc::XDP_USE_NEED_WAKEUP | libc::XDP_COPY,
    } | if cfg.frags { libc::XDP_USE_SG } else { 0 };
    let sxdp = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: cfg.queue,
        sxdp_shared_umem_fd: shared.unwrap_or(0) as u32,
    };
    // A socket of a process that just died still holds the queue until the kernel's
    // deferred release has run (milliseconds): EBUSY is retried for a bounded time
    // before it is taken to mean that a live socket has the queue.
    let deadline = std::time::Instant::now() + BIND_BUSY_WAIT;
    loop {
        // SAFETY: the kernel reads a sockaddr_xdp of the given length from `sxdp`.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sxdp as *const libc::sockaddr_xdp).cast(),
                size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
        let e = os::errno();
        if e == libc::EBUSY && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            continue;
        }
        // EINVAL: no such queue on the interface; EBUSY: another socket has it;
        // EOPNOTSUPP: the driver has no zero-copy.
        let op = if zero_copy { "bind(AF_XDP, zero-copy)" } else { "bind(AF_XDP)" };
        return Err(PortError::os(port, op, e));
    }
    Ok(Xsk { rx, tx, fill, comp, fd })
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        if self.cfg.frags {
            return self.rx_burst_sg(cache, out);
        }
        self.complete(cache);
        let (pool, lender, port_id) = (self.pool.clone(), self.lender, self.cfg.port_id);
        let chunk = u64::from(pool.buf_size());
        let xsk = self.xsk.as_mut().expect("open until dropped");
        let n = xsk.rx.available().min(out.room() as u32);
        let mut got = 0;
        for i in 0..n {
            let (addr, len) = xsk.rx.read_desc(i);
            let mut buf = match pool.reclaim(addr, lender) {
                Ok(b) => b,
                Err(_) => {
                    self.stats.rx_drops.bad_desc += 1;
                    continue;
                }
            };
            let placed = pool
                .set_data(&mut buf, (addr % chunk) as u32, len)
                .and_then(|()| pool.set_rx_info(&mut buf, port_id, 0));
            if placed.is_err() {
                self.stats.rx_drops.bad_desc += 1;
                let _ = cache.free(buf);
                continue;
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += u64::from(len);
            let _ = out.push(buf);
            got += 1;
        }
        xsk.rx.release(n);
        self.refill(cache);
        if n == 0 && self.xsk().fill.needs_wakeup() {
            self.kick_rx();
        }
        Ok(got)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        if pkts.has_chains() {
            return self.tx_burst_chains(cache, pkts);
        }
        self.complete(cache);
        let (pool, lender) = (self.pool.clone(), self.lender);
        let xsk = self.xsk.as_mut().expect("open until dropped");
        let free = xsk.tx.free_slots() as usize;
        let mut queued = 0;
        let take = free.min(pkts.len());
        for mut buf in pkts.drain_front(take) {
            let Ok(meta) = pool.meta(&buf) else {
                // Another pool's buffer cannot be lent to this UMEM, nor freed here.
                self.stats.tx_drops.bad_buffer += 1;
                drop(buf);
                continue;
            };
            if pool.refs(&buf).unwrap_or(0) > 1 {
                // Others hold it too: the kernel gets a private copy.
                let Some(mut copy) = cache.alloc() else {
                    self.stats.tx_drops.no_buffer += 1;
                    let _ = cache.free(buf);
                    continue;
                };
                let copied = pool.data(&buf).and_then(|d| pool.write(&mut copy, d));
                let _ = cache.free(std::mem::replace(&mut buf, copy));
                if copied.is_err() {
                    self.stats.tx_drops.too_big += 1;
                    let _ = cache.free(buf);
                    continue;
                }
                self.stats.tx_copied += 1;
            }
            let meta = pool.meta(&buf).unwrap_or(meta);
            match pool.lend(buf, lender) {
                Ok(base) => {
                    xsk.tx.write_desc(queued, base + u64::from(meta.data_off), meta.len);
                    queued += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += u64::from(meta.len);
                }
                Err(e) => {
                    self.stats.tx_drops.bad_buffer += 1;
                    let _ = cache.free(e.buf);
                }
            }
        }
        xsk.tx.submit(queued);
        self.tx_outstanding += queued;
        if queued > 0 {
            self.kick_tx()?;
        }
        Ok(take)
    }

    fn takes_frags(&self) -> bool {
        self.cfg.frags
    }

    fn flush(&mut self, cache: &mut PoolCache) -> Result<(), PortError> {
        self.complete(cache);
        if self.tx_outstanding > 0 {
            self.kick_tx()?;
        }
        self.refill(cache);
        Ok(())
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats;
        if let Some(x) = &self.xsk {
            // SAFETY: integers only; all-zero is valid and the kernel overwrites it.
            let mut k: libc::xdp_statistics = unsafe { std::mem::zeroed() };
            if os::getsockopt(x.fd.as_fd(), libc::SOL_XDP, libc::XDP_STATISTICS, &mut k).is_ok() {
                s.rx_drops.kernel += k.rx_dropped + k.rx_ring_full;
                s.rx_drops.bad_desc += k.rx_invalid_descs;
                s.tx_drops.bad_desc += k.tx_invalid_descs;
            }
            let corrupt = x.rx.corrupt + x.fill.corrupt + x.tx.corrupt + x.comp.corrupt;
            s.rx_drops.bad_desc += corrupt;
        }
        s
    }
}

impl AsFd for AfXdpPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.xsk.as_ref().expect("open until dropped").fd.as_fd()
    }
}

impl Drop for AfXdpPort {
    fn drop(&mut self) {
        // Closing the link detaches the program; then the program and its map go.
        drop(self.kernel.take());
        // Unmap the rings and close the socket: the kernel lets go of the UMEM's
        // buffers, and everything it still held comes back to the pool.
        drop(self.xsk.take());
        self.pool.reclaim_all(self.lender);
    }
}
