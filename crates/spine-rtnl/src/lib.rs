//! The host's routing and neighbour tables, mirrored live into a spine FIB over rtnetlink.
//!
//! Route processing stays on the host: `ip route`, BIRD or FRR write the kernel's tables,
//! and spine follows them. A [`RtnlSocket`] joins the link, address, nexthop, route,
//! rule and neighbour multicast groups first and then dumps links, addresses, nexthop
//! objects, the policy rules (`ip rule`, see [`rules`]), every table and the
//! neighbours, so no change falls between the dump and the events;
//! a [`Mirror`] thread applies what arrives to a [`FibWriter`] and publishes each batch at
//! once, so a reader never sees half of one. When the kernel drops events (the socket
//! overflowed, `ENOBUFS`), or a link goes down or away (the kernel then removes the IPv4
//! routes through it without a notification for each), the mirror flushes the tables it
//! mirrors and dumps again; the flush and the new dump are published as one batch.
//! Neighbour entries are not flushed then: the dump replaces them. A link going down
//! also takes the nexthop objects through it, silently: the dump brings them back as
//! they are. The interfaces given to [`RtnlSocket::with_ifaces`] are published in the
//! FIB ([`FibOp::SetIface`]) as their link and address messages describe them.
//!
//! Translation ([`route_op`], [`neigh_op`]) is sans-IO: a kernel message in, a [`FibOp`]
//! out, or `None` for what the FIB does not hold (cached clones, source-specific or TOS
//! routes, multicast and anycast types, other families). Routes through nexthop objects
//! (`ip nexthop`, FRR) are resolved by a [`NexthopTable`] that follows the nexthop
//! messages too (see [`nexthop`]).

mod addrs;
mod links;
pub mod nexthop;
pub mod rules;
mod translate;

use std::collections::{HashMap, HashSet};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressHeaderFlags, AddressMessage};
use netlink_packet_route::link::{LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::NeighbourMessage;
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::rule::RuleMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use spine_fib::{FibOp, FibWriter, Iface};

pub use addrs::{add_address, address_message, enable_ipv6};
pub use links::{links, multipath_seed, Link};
pub use nexthop::{Nexthop, NexthopTable};
pub use translate::{alias, neigh_op, nh_route, route_op};

/// What went wrong talking to the kernel.
#[derive(Debug, thiserror::Error)]
pub enum RtnlError {
    #[error("rtnetlink {op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("rtnetlink: the kernel refused the {what} dump: errno {errno}")]
    Refused { what: &'static str, errno: i32 },
    #[error("rtnetlink: the kernel refused address {ip}/{prefix_len} on interface {ifindex}: errno {errno}")]
    AddressRefused { ifindex: u32, ip: std::net::IpAddr, prefix_len: u8, errno: i32 },
    #[error("rtnetlink: undecodable message: {0}")]
    Decode(String),
}

fn io(op: &'static str) -> impl FnOnce(std::io::Error) -> RtnlError {
    move |source| RtnlError::Io { op, source }
}

/// Counts of what the mirror did, readable while it runs.
#[derive(Debug, Default)]
pub struct MirrorStats {
    /// Changes applied to the FIB (routes and neighbours, dumps included).
    pub applied: AtomicU64,
    /// Kernel messages the FIB does not hold (see the crate documentation).
    pub ignored: AtomicU64,
    /// Changes the FIB refused (a delete of a route it does not have, an invalid route).
    pub refused: AtomicU64,
    /// Publications: each makes one batch of changes visible at once.
    pub published: AtomicU64,
    /// Full re-dumps after the kernel dropped events.
    pub resyncs: AtomicU64,
    /// Nexthop object messages (`RTM_NEWNEXTHOP`, `RTM_DELNEXTHOP`), dumps included.
    pub nexthops: AtomicU64,
}

/// A route socket in the network namespace it was opened in, subscribed to route and
/// neighbour changes of both families.
pub struct RtnlSocket {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
    /// Interfaces last seen administratively up.
    up: HashSet<u32>,
    /// A link went down or away: the kernel removed the IPv4 routes through it without
    /// a notification for each, so the tables must be dumped again.
    resync: bool,
    /// Interface indexes the FIB knows by another (a TAP twin's, its port's): see [`alias`].
    aliases: Vec<(u32, u32)>,
    /// Nexthop objects and the routes through them.
    nh: NexthopTable,
    /// Interfaces whose kernel view the FIB holds ([`RtnlSocket::with_ifaces`]).
    ports: Vec<u32>,
    /// Every interface of the namespace as its messages describe it.
    links: HashMap<u32, Link>,
    /// Secondary addresses (`IFA_F_SECONDARY`), by interface.
    secondary: HashSet<(u32, std::net::IpAddr)>,
    /// The policy rules of both families.
    rules: rules::RuleMirror,
    /// A link came or went while a rule names a device: the lists are sent again.
    rules_dirty: bool,
    /// When the resilient groups' buckets were last dumped.
    buckets_dumped: std::time::Instant,
}

const GROUPS: [u32; 6] = [
    libc::RTNLGRP_IPV4_ROUTE,
    libc::RTNLGRP_IPV6_ROUTE,
    libc::RTNLGRP_NEIGH,
    libc::RTNLGRP_LINK,
    libc::RTNLGRP_IPV4_RULE,
    libc::RTNLGRP_IPV6_RULE,
];

impl RtnlSocket {
    /// Opens the socket in the calling thread's network namespace and joins the groups.
    pub fn open() -> Result<RtnlSocket, RtnlError> {
        let mut sock = Socket::new(NETLINK_ROUTE).map_err(io("socket"))?;
        sock.bind_auto().map_err(io("bind"))?;
        sock.connect(&SocketAddr::new(0, 0)).map_err(io("connect"))?;
        // A full BGP table arrives as a burst of events: room for a few seconds of it.
        sock.set_rx_buf_sz(8 << 20).map_err(io("SO_RCVBUF"))?;
        for g in GROUPS {
            sock.add_membership(g).map_err(io("join group"))?;
        }
        for g in [libc::RTNLGRP_IPV4_IFADDR, libc::RTNLGRP_IPV6_IFADDR] {
            sock.add_membership(g).map_err(io("join group"))?;
        }
        // A kernel older than 5.3 has no nexthop objects, and no routes through them.
        let _ = sock.add_membership(libc::RTNLGRP_NEXTHOP);
        // Forwarding switches (`sysctl net.ipv4.conf.X.forwarding`) change without a link
        // or address message: the kernel announces them to the netconf groups.
        for g in [libc::RTNLGRP_IPV4_NETCONF, libc::RTNLGRP_IPV6_NETCONF] {
            sock.add_membership(g).map_err(io("join group"))?;
        }
        set_timeout(&sock, Duration::from_millis(100))?;
        Ok(RtnlSocket {
            sock,
            seq: 0,
            buf: vec![0; 1 << 16],
            up: HashSet::new(),
            resync: false,
            aliases: Vec::new(),
            nh: NexthopTable::default(),
            ports: Vec::new(),
            links: HashMap::new(),
            secondary: HashSet::new(),
            rules: rules::RuleMirror::default(),
            rules_dirty: false,
            buckets_dumped: std::time::Instant::now(),
        })
    }

    /// Routes and neighbours on interface `from` are mirrored as if on `to`, for each
    /// `(from, to)` pair (a router port's TAP twin and the port: see [`alias`]).
    pub fn with_aliases(mut self, aliases: Vec<(u32, u32)>) -> Self {
        self.aliases = aliases;
        self
    }

    /// The FIB holds interfaces `ports` ([`FibOp::SetIface`]) as the kernel describes
    /// them, and follows their changes: MAC, MTU, addresses, forwarding switches (read
    /// when the link or one of its addresses changes). A port with an alias (a TAP
    /// twin, see [`with_aliases`](Self::with_aliases)) is described by its twin.
    pub fn with_ifaces(mut self, ports: Vec<u32>) -> Self {
        self.ports = ports;
        self
    }

    /// Dumps every interface, address, nexthop, route and neighbour into `fib` (not yet
    /// published); events that arrive meanwhile are applied in order with them.
    pub fn dump(&mut self, fib: &mut FibWriter, stats: &MirrorStats) -> Result<(), RtnlError> {
        self.links.clear();
        self.secondary.clear();
        self.request(RouteNetlinkMessage::GetLink(LinkMessage::default()), "link", fib, stats)?;
        self.resync = false;
        let addrs = RouteNetlinkMessage::GetAddress(AddressMessage::default());
        self.request(addrs, "address", fib, stats)?;
        for i in 0..self.ports.len() {
            let port = self.ports[i];
            if self.iface(port).is_none() {
                apply(fib, stats, Some(FibOp::DelIface(port)));
            }
        }
        // Nexthops before the routes through them.
        self.nh.clear();
        self.seq = self.seq.wrapping_add(1);
        match self.request_bytes(nexthop::dump_request(self.seq), "nexthop", fib, stats) {
            // No nexthop objects in this kernel.
            Err(RtnlError::Refused { what: "nexthop", .. }) => {}
            other => other?,
        }
        self.dump_buckets(fib, stats)?;
        // The policy rules, each family's list sent whole once dumped.
        self.rules.clear();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut m = RuleMessage::default();
            m.header.family = family;
            self.request(RouteNetlinkMessage::GetRule(m), "rule", fib, stats)?;
        }
        self.rules_dirty = false;
        for v6 in [false, true] {
            apply(fib, stats, Some(self.rules_op(v6)));
        }
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut m = RouteMessage::default();
            m.header.address_family = family;
            self.request(RouteNetlinkMessage::GetRoute(m), "route", fib, stats)?;
            let mut n = NeighbourMessage::default();
            n.header.family = family;
            self.request(RouteNetlinkMessage::GetNeighbour(n), "neighbour", fib, stats)?;
        }
        // A link that came or went during the later dumps.
        if std::mem::take(&mut self.rules_dirty) {
            for v6 in [false, true] {
                apply(fib, stats, Some(self.rules_op(v6)));
            }
        }
        Ok(())
    }

    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        what: &'static str,
        fib: &mut FibWriter,
        stats: &MirrorStats,
    ) -> Result<(), RtnlError> {
        self.seq = self.seq.wrapping_add(1);
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_DUMP | NLM_F_REQUEST;
        hdr.sequence_number = self.seq;
        let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
        req.finalize();
        let mut out = vec![0; req.header.length as usize];
        req.serialize(&mut out);
        self.request_bytes(out, what, fib, stats)
    }

    /// Sends dump request `out` (sequence number `self.seq`) and applies what comes
    /// until the dump is done.
    fn request_bytes(
        &mut self,
        out: Vec<u8>,
        what: &'static str,
        fib: &mut FibWriter,
        stats: &MirrorStats,
    ) -> Result<(), RtnlError> {
        self.sock.send(&out, 0).map_err(io("send"))?;
        let seq = self.seq;
        loop {
            match self.read(fib, stats, Some((seq, what)), 0)? {
                Read::DumpDone => return Ok(()),
                Read::Messages(_) | Read::Idle => {}
            }
        }
    }

    /// Dumps the resilient groups' buckets (none: nothing is asked) and hands the FIB
    /// what changed.
    fn dump_buckets(&mut self, fib: &mut FibWriter, stats: &MirrorStats) -> Result<(), RtnlError> {
        self.nh.take_buckets_stale();
        if self.nh.has_resilient() {
            self.seq = self.seq.wrapping_add(1);
            let req = nexthop::bucket_dump_request(self.seq);
            match self.request_bytes(req, "nexthop bucket", fib, stats) {
                // A kernel before 5.13 has no resilient groups.
                Err(RtnlError::Refused { what: "nexthop bucket", .. }) => {}
                other => other?,
            }
        }
        self.buckets_dumped = std::time::Instant::now();
        for op in self.nh.bucket_ops() {
            apply(fib, stats, Some(op));
        }
        Ok(())
    }

    /// Dumps the buckets again after a change to a resilient group or its members, and
    /// once a second while one exists: the kernel moves buckets on its own timers
    /// without a message.
    pub fn refresh_buckets(
        &mut self,
        fib: &mut FibWriter,
        stats: &MirrorStats,
    ) -> Result<(), RtnlError> {
        let due =
            self.nh.has_resilient() && self.buckets_dumped.elapsed() >= Duration::from_secs(1);
        if self.nh.take_buckets_stale() || due {
            self.dump_buckets(fib, stats)?;
        }
        Ok(())
    }

    /// Applies the events that arrive within ~100 ms; returns how many messages came.
    /// `Err` with [`std::io::ErrorKind`] `ENOBUFS` inside means events were lost.
    pub fn poll(&mut self, fib: &mut FibWriter, stats: &MirrorStats) -> Result<usize, RtnlError> {
        self.events(fib, stats, 0)
    }

    /// As [`poll`](Self::poll), without waiting when nothing is queued.
    fn poll_nowait(
        &mut self,
        fib: &mut FibWriter,
        stats: &MirrorStats,
    ) -> Result<usize, RtnlError> {
        self.events(fib, stats, libc::MSG_DONTWAIT)
    }

    fn events(
        &mut self,
        fib: &mut FibWriter,
        stats: &MirrorStats,
        flags: libc::c_int,
    ) -> Result<usize, RtnlError> {
        match self.read(fib, stats, None, flags)? {
            Read::Messages(n) => Ok(n),
            Read::Idle | Read::DumpDone => Ok(0),
        }
    }

    /// Reads one datagram (several messages) and applies them.
    fn read(
        &mut self,
        fib: &mut FibWriter,
        stats: &MirrorStats,
        dump: Option<(u32, &'static str)>,
        flags: libc::c_int,
    ) -> Result<Read, RtnlError> {
        let n = match self.sock.recv(&mut &mut self.buf[..], flags) {
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock) => return Ok(Read::Idle),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(Read::Idle),
            Err(e) => return Err(RtnlError::Io { op: "recv", source: e }),
        };
        let mut off = 0;
        let mut count = 0;
        let mut done = false;
        while off < n {
            let head = NetlinkBuffer::new_checked(&self.buf[off..n])
                .map_err(|e| RtnlError::Decode(e.to_string()))?;
            let (kind, len) = (head.message_type(), head.length() as usize);
            // netlink-packet-route has no nexthop messages: they are read here.
            if kind == nexthop::RTM_NEWNEXTHOPBUCKET {
                match nexthop::decode_bucket(head.payload()) {
                    Ok((group, index, member)) => self.nh.set_bucket(group, index, member),
                    Err(_) => apply(fib, stats, None),
                }
                if len == 0 {
                    break;
                }
                off += len.next_multiple_of(4);
                continue;
            }
            if kind == nexthop::RTM_NEWNEXTHOP || kind == nexthop::RTM_DELNEXTHOP {
                count += 1;
                stats.nexthops.fetch_add(1, Ordering::Relaxed);
                match nexthop::decode(head.payload()) {
                    Ok((id, nh)) => {
                        let ops = if kind == nexthop::RTM_NEWNEXTHOP {
                            self.nh.set(id, nh)
                        } else {
                            self.nh.remove(id)
                        };
                        for op in ops {
                            apply(fib, stats, Some(alias(op, &self.aliases)));
                        }
                    }
                    Err(_) => apply(fib, stats, None),
                }
                if len == 0 {
                    break;
                }
                off += len.next_multiple_of(4);
                continue;
            }
            if kind == links::RTM_NEWNETCONF || kind == links::RTM_DELNETCONF {
                count += 1;
                self.netconf(links::netconf_ifindex(head.payload()), fib, stats);
                if len == 0 {
                    break;
                }
                off += len.next_multiple_of(4);
                continue;
            }
            let msg: NetlinkMessage<RouteNetlinkMessage> =
                NetlinkMessage::deserialize(&self.buf[off..n])
                    .map_err(|e| RtnlError::Decode(e.to_string()))?;
            let ours = dump.is_some_and(|(seq, _)| msg.header.sequence_number == seq);
            match msg.payload {
                NetlinkPayload::Done(_) if ours => done = true,
                NetlinkPayload::Error(e) if ours => {
                    let errno = e.code.map_or(0, |c| -c.get());
                    return Err(RtnlError::Refused { what: dump.map_or("", |d| d.1), errno });
                }
                NetlinkPayload::InnerMessage(inner) => {
                    count += 1;
                    if let Some(op) = self.translate(&inner) {
                        apply(fib, stats, op.map(|op| alias(op, &self.aliases)));
                    }
                    // Rules naming a device follow its links (not inside a dump: the
                    // dump sends the lists once complete).
                    if std::mem::take(&mut self.rules_dirty) && dump.is_none() {
                        for v6 in [false, true] {
                            apply(fib, stats, Some(self.rules_op(v6)));
                        }
                    }
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len.next_multiple_of(4);
        }
        Ok(if done { Read::DumpDone } else { Read::Messages(count) })
    }
}

impl RtnlSocket {
    /// The FIB change a message makes (`Some(None)`: one the FIB does not hold), or
    /// `None` for a link message, which only updates what the socket knows.
    fn translate(&mut self, m: &RouteNetlinkMessage) -> Option<Option<FibOp>> {
        match m {
            RouteNetlinkMessage::NewRoute(m) => Some(self.route(m, true)),
            RouteNetlinkMessage::DelRoute(m) => Some(self.route(m, false)),
            RouteNetlinkMessage::NewRule(r) => {
                let Some((v6, r)) = rules::parse_rule(r) else { return Some(None) };
                self.rules.add(v6, r);
                Some(Some(self.rules_op(v6)))
            }
            RouteNetlinkMessage::DelRule(r) => {
                let Some((v6, r)) = rules::parse_rule(r) else { return Some(None) };
                if !self.rules.remove(v6, &r) {
                    return Some(None);
                }
                Some(Some(self.rules_op(v6)))
            }
            RouteNetlinkMessage::NewNeighbour(m) => Some(neigh_op(m, true)),
            RouteNetlinkMessage::DelNeighbour(m) => Some(neigh_op(m, false)),
            RouteNetlinkMessage::NewLink(l) => {
                let i = l.header.index;
                if l.header.flags.contains(LinkFlags::Up) {
                    self.up.insert(i);
                } else if self.up.remove(&i) {
                    self.resync = true;
                }
                let link = self.links.entry(i).or_default();
                let old_name = link.name.clone();
                links::update_link(link, l);
                // A new or renamed device may be one a rule names.
                self.rules_dirty |= link.name != old_name && self.rules.names_devices();
                links::read_forwarding(link);
                self.iface_op(i)
            }
            RouteNetlinkMessage::DelLink(l) => {
                let i = l.header.index;
                self.up.remove(&i);
                self.resync = true;
                self.links.remove(&i);
                self.rules_dirty |= self.rules.names_devices();
                self.iface_op(i)
            }
            RouteNetlinkMessage::NewAddress(a) | RouteNetlinkMessage::DelAddress(a) => {
                let new = matches!(m, RouteNetlinkMessage::NewAddress(_));
                let (i, ip) = (a.header.index, links::message_address(a)?);
                let link = self.links.get_mut(&i)?;
                link.addrs.retain(|x| x.0 != ip);
                self.secondary.remove(&(i, ip));
                if new {
                    let entry = (ip, a.header.prefix_len);
                    if a.header.flags.contains(AddressHeaderFlags::Secondary) {
                        self.secondary.insert((i, ip));
                        link.addrs.push(entry);
                    } else {
                        // Primary addresses first, in the order they came (the kernel's).
                        let secondary = &self.secondary;
                        let at = link.addrs.iter().position(|x| secondary.contains(&(i, x.0)));
                        link.addrs.insert(at.unwrap_or(link.addrs.len()), entry);
                    }
                }
                links::read_forwarding(link);
                self.iface_op(i)
            }
            _ => Some(None),
        }
    }

    /// The FIB change a route message makes: through the nexthop table for a route
    /// that names a nexthop object.
    fn route(&mut self, m: &RouteMessage, new: bool) -> Option<FibOp> {
        match nh_route(m) {
            Some((route, id)) if new => self.nh.route_new(route, id),
            Some((r, _)) => self.nh.route_del(r.table, r.prefix, r.metric),
            None => {
                let op = route_op(m, new);
                // A plain route in the place of one through a nexthop object.
                match &op {
                    Some(FibOp::Replace(r)) => self.nh.forget(r.table, r.prefix, r.metric),
                    Some(FibOp::Delete(s)) => {
                        self.nh.forget(s.table, s.prefix, s.metric.unwrap_or(0))
                    }
                    _ => {}
                }
                op
            }
        }
    }

    /// The FIB change that interface `ifindex`'s new state makes, if it describes a port.
    /// A netconf message about interface `ifindex` (`None`: all of them, or the
    /// defaults): its forwarding switches are read again and a port whose switch changed
    /// is described anew.
    fn netconf(&mut self, ifindex: Option<u32>, fib: &mut FibWriter, stats: &MirrorStats) {
        let targets: Vec<u32> = match ifindex {
            Some(i) => vec![i],
            None => self.links.keys().copied().collect(),
        };
        for i in targets {
            let Some(link) = self.links.get_mut(&i) else { continue };
            let before = (link.forward_v4, link.forward_v6);
            links::read_forwarding(link);
            if before == (link.forward_v4, link.forward_v6) {
                continue;
            }
            if let Some(op) = self.iface_op(i) {
                apply(fib, stats, op.map(|op| alias(op, &self.aliases)));
            }
        }
    }

    fn iface_op(&self, ifindex: u32) -> Option<Option<FibOp>> {
        let port = *self.ports.iter().find(|&&p| self.source(p) == ifindex)?;
        Some(Some(match self.iface(port) {
            Some(i) => FibOp::SetIface(i),
            None => FibOp::DelIface(port),
        }))
    }

    /// The interface whose kernel view stands for `port`: its twin, or itself.
    fn source(&self, port: u32) -> u32 {
        self.aliases.iter().find(|a| a.1 == port).map_or(port, |a| a.0)
    }

    /// `port` as the FIB should hold it.
    fn iface(&self, port: u32) -> Option<Iface> {
        let l = self.links.get(&self.source(port))?;
        Some(Iface {
            ifindex: port,
            mtu: l.mtu,
            mac: l.mac,
            forward_v4: l.forward_v4,
            forward_v6: l.forward_v6,
            addrs: l.addrs.clone(),
        })
    }

    /// One family's rules as the FIB holds them: devices by index, a TAP twin's as
    /// its port's.
    fn rules_op(&self, v6: bool) -> FibOp {
        self.rules.op(v6, |name| {
            let i = self.links.values().find(|l| l.name == name)?.ifindex;
            Some(self.aliases.iter().find(|a| a.0 == i).map_or(i, |a| a.1))
        })
    }

    /// True once if a link went down or away since the last call.
    fn take_resync(&mut self) -> bool {
        std::mem::take(&mut self.resync)
    }
}

impl std::fmt::Debug for RtnlSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RtnlSocket").field("fd", &self.sock.as_raw_fd()).finish()
    }
}

enum Read {
    Idle,
    Messages(usize),
    DumpDone,
}

fn apply(fib: &mut FibWriter, stats: &MirrorStats, op: Option<FibOp>) {
    let Some(op) = op else {
        stats.ignored.fetch_add(1, Ordering::Relaxed);
        return;
    };
    match fib.apply(op) {
        Ok(()) => stats.applied.fetch_add(1, Ordering::Relaxed),
        // A delete the FIB never saw (a route type it does not hold) and the like.
        Err(_) => stats.refused.fetch_add(1, Ordering::Relaxed),
    };
}

fn set_timeout(sock: &Socket, t: Duration) -> Result<(), RtnlError> {
    let tv = libc::timeval { tv_sec: t.as_secs() as libc::time_t, tv_usec: t.subsec_micros() as _ };
    // SAFETY: setsockopt reads a timeval of the given size from a live local.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(RtnlError::Io { op: "SO_RCVTIMEO", source: std::io::Error::last_os_error() });
    }
    Ok(())
}

/// A thread keeping a FIB equal to the kernel's tables until stopped.
#[derive(Debug)]
pub struct Mirror {
    stop: Arc<AtomicBool>,
    stats: Arc<MirrorStats>,
    thread: Option<JoinHandle<Result<(), RtnlError>>>,
}

impl Mirror {
    /// Dumps the kernel's tables into `fib`, publishes them, and starts the thread that
    /// follows every change. Returns once the first publication is visible to readers.
    pub fn start(mut sock: RtnlSocket, mut fib: FibWriter) -> Result<Mirror, RtnlError> {
        let stats = Arc::new(MirrorStats::default());
        sock.dump(&mut fib, &stats)?;
        fib.publish();
        stats.published.fetch_add(1, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("spine-rtnl".into())
            .spawn(move || follow(sock, fib, &s, &st))
            .map_err(io("spawn"))?;
        Ok(Mirror { stop, stats, thread: Some(thread) })
    }

    pub fn stats(&self) -> &MirrorStats {
        &self.stats
    }

    /// Stops the thread; returns the error that ended it early, if one did.
    pub fn stop(mut self) -> Result<(), RtnlError> {
        self.halt()
    }

    fn halt(&mut self) -> Result<(), RtnlError> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(RtnlError::Decode("the mirror thread panicked".into())),
            None => Ok(()),
        }
    }
}

impl Drop for Mirror {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

fn follow(
    mut sock: RtnlSocket,
    mut fib: FibWriter,
    stop: &AtomicBool,
    stats: &MirrorStats,
) -> Result<(), RtnlError> {
    while !stop.load(Ordering::Relaxed) {
        let mut got = sock.poll(&mut fib, stats);
        // Drain what is already queued so a burst is published as one batch.
        while matches!(got, Ok(1..)) {
            match sock.poll_nowait(&mut fib, stats) {
                Ok(0) => break,
                other => got = other,
            }
        }
        let lost = match got {
            Ok(_) => false,
            // The kernel dropped events.
            Err(RtnlError::Io { source, .. }) if source.raw_os_error() == Some(libc::ENOBUFS) => {
                true
            }
            Err(e) => return Err(e),
        };
        if lost || sock.take_resync() {
            // Start over from a fresh dump, published with the flush as one batch.
            stats.resyncs.fetch_add(1, Ordering::Relaxed);
            for t in fib.view().table_ids() {
                apply(&mut fib, stats, Some(FibOp::FlushTable(t)));
            }
            sock.dump(&mut fib, stats)?;
        }
        sock.refresh_buckets(&mut fib, stats)?;
        if fib.publish() {
            stats.published.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}
