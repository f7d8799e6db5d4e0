//! Well-formed IPv4, IPv6 and ARP frames, with correct lengths and checksums.

use super::{Generator, Layout, Tags};
use crate::wire::{
    checksum, l4_checksum_v4, l4_checksum_v6, put_u16, put_u32, set_u16, ARP_LEN, ETHERTYPE_ARP,
    ETHERTYPE_IPV4, ETHERTYPE_IPV6, ICMP_ECHO_HLEN, IPPROTO_DSTOPTS, IPPROTO_FRAGMENT,
    IPPROTO_HOPOPTS, IPPROTO_ICMP, IPPROTO_ICMPV6, IPPROTO_ROUTING, IPPROTO_TCP, IPPROTO_UDP,
    IPV4_HLEN, IPV6_HLEN, TCP_HLEN, UDP_HLEN,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum L4 {
    Udp,
    Tcp,
    Icmp,
}

/// Everything about an L4 header decided before it is written, so that sizes are known.
struct L4Plan {
    l4: L4,
    v6: bool,
    hdr_len: usize,
    sport: u16,
    dport: u16,
    tcp_flags: u8,
    opts: [u8; 40],
    opt_len: usize,
    icmp_type: u8,
    /// IPv4 UDP may carry no checksum (0); IPv6 UDP may not.
    udp_no_checksum: bool,
    /// No payload: SYNs and RSTs as stacks send them.
    bare: bool,
}

impl L4Plan {
    fn proto(&self) -> u8 {
        match (self.l4, self.v6) {
            (L4::Udp, _) => IPPROTO_UDP,
            (L4::Tcp, _) => IPPROTO_TCP,
            (L4::Icmp, false) => IPPROTO_ICMP,
            (L4::Icmp, true) => IPPROTO_ICMPV6,
        }
    }
}

/// Offset of the checksum field within an L4 header.
pub(super) fn checksum_offset(proto: u8) -> Option<usize> {
    match proto {
        IPPROTO_UDP => Some(6),
        IPPROTO_TCP => Some(16),
        IPPROTO_ICMP | IPPROTO_ICMPV6 => Some(2),
        _ => None,
    }
}

const TCP_FIN: u8 = 0x01;
const TCP_SYN: u8 = 0x02;
const TCP_RST: u8 = 0x04;
const TCP_PSH: u8 = 0x08;
const TCP_ACK: u8 = 0x10;

/// A fragment of a datagram of `total` L4 bytes: `len` bytes at byte offset `off`.
struct Frag {
    off: usize,
    len: usize,
    more: bool,
    total: usize,
}

/// Most data bytes one generated fragment carries.
pub(super) const MAX_FRAGMENT: usize = 60_000;
/// A fragmented datagram holds at most this many bytes beyond its largest fragment.
pub(super) const MAX_EXTRA: usize = 8 + 2400 + 64;

fn round_up8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Writes the IPv4 total length and header checksum of the header at `l3`.
pub(super) fn finish_ipv4(buf: &mut [u8], l3: usize, total_len: u16) {
    let ihl = usize::from(buf[l3] & 0x0f) * 4;
    set_u16(buf, l3 + 2, total_len);
    ipv4_recompute_checksum(buf, l3, ihl.max(IPV4_HLEN));
}

/// Recomputes the header checksum over `hdr_len` bytes at `l3` (at least the fixed 20,
/// whatever the IHL says, so that malformed headers still checksum correctly).
pub(super) fn ipv4_recompute_checksum(buf: &mut [u8], l3: usize, hdr_len: usize) {
    set_u16(buf, l3 + 10, 0);
    let c = checksum(&buf[l3..l3 + hdr_len]);
    set_u16(buf, l3 + 10, c);
}

impl Generator {
    fn plan_l4(&mut self, l4: L4, v6: bool) -> L4Plan {
        let mut plan = L4Plan {
            l4,
            v6,
            hdr_len: 0,
            sport: self.pick_port(),
            dport: self.pick_port(),
            tcp_flags: 0,
            opts: [0; 40],
            opt_len: 0,
            icmp_type: 0,
            udp_no_checksum: !v6 && self.rng.chance(0.1),
            bare: false,
        };
        match l4 {
            L4::Udp => plan.hdr_len = UDP_HLEN,
            L4::Icmp => {
                plan.hdr_len = ICMP_ECHO_HLEN;
                let (request, reply) = if v6 { (128, 129) } else { (8, 0) };
                plan.icmp_type = if self.rng.chance(0.5) { request } else { reply };
            }
            L4::Tcp => {
                plan.tcp_flags = self.rng.pick(&[
                    TCP_SYN,
                    TCP_SYN | TCP_ACK,
                    TCP_ACK,
                    TCP_ACK,
                    TCP_ACK,
                    TCP_PSH | TCP_ACK,
                    TCP_PSH | TCP_ACK,
                    TCP_FIN | TCP_ACK,
                    TCP_RST,
                    TCP_RST | TCP_ACK,
                ]);
                plan.opt_len = self.tcp_options(plan.tcp_flags, &mut plan.opts);
                plan.bare = plan.tcp_flags & (TCP_SYN | TCP_RST) != 0 && self.rng.chance(0.9);
                plan.hdr_len = TCP_HLEN + plan.opt_len;
            }
        }
        plan
    }

    fn pick_port(&mut self) -> u16 {
        if self.rng.chance(0.5) {
            self.rng.pick(&[53, 80, 443, 123, 22, 4789, 8080, 3478])
        } else {
            1024 + self.rng.below(64_512) as u16
        }
    }

    /// Fills `opts` with a TCP option set real stacks send; returns its length, a
    /// multiple of 4 no larger than 40.
    fn tcp_options(&mut self, flags: u8, opts: &mut [u8; 40]) -> usize {
        let mut o = OptWriter { buf: opts, len: 0 };
        let mss = self.rng.pick(&[1460u16, 1440, 1380, 536, 8960]).to_be_bytes();
        let ts = |g: &mut Self| {
            let mut v = [8u8, 10, 0, 0, 0, 0, 0, 0, 0, 0];
            g.rng.fill(&mut v[2..]);
            v
        };
        match self.rng.below(5) {
            0 => {}
            1 if flags & TCP_SYN != 0 => {
                // Linux's SYN: MSS, SACK permitted, timestamps, NOP, window scale.
                o.put(&[2, 4, mss[0], mss[1], 4, 2]);
                let t = ts(self);
                o.put(&t);
                o.put(&[1, 3, 3, self.rng.below(15) as u8]);
            }
            1 | 2 => {
                let t = ts(self);
                o.put(&[1, 1]);
                o.put(&t);
            }
            3 => {
                let t = ts(self);
                o.put(&[1, 1]);
                o.put(&t);
                let blocks = 1 + self.rng.below(2) as usize;
                o.put(&[1, 1, 5, 2 + 8 * blocks as u8]);
                for _ in 0..blocks {
                    let mut b = [0u8; 8];
                    self.rng.fill(&mut b);
                    o.put(&b);
                }
            }
            _ => {
                // MSS alone, ended by EOL: legal and rarer, exercises option walkers.
                o.put(&[2, 4, mss[0], mss[1], 0]);
            }
        }
        while !o.len.is_multiple_of(4) {
            o.put(&[0]);
        }
        o.len
    }

    /// Fills `opts` with IPv4 options (router alert, NOP, record route, timestamp),
    /// padded with EOL; returns the length, a multiple of 4 in `4..=40`.
    fn ipv4_options(&mut self, opts: &mut [u8; 40]) -> usize {
        let mut o = OptWriter { buf: opts, len: 0 };
        let count = 1 + self.rng.below(3);
        for _ in 0..count {
            let room = 40 - o.len;
            match self.rng.below(4) {
                0 if room >= 4 => o.put(&[0x94, 4, 0, 0]),
                1 => o.put(&[1]),
                2 if room >= 7 => {
                    let slots = 1 + self.rng.below(((room - 3) / 4).min(9) as u64) as usize;
                    o.put(&[7, (3 + 4 * slots) as u8, 4]);
                    o.put(&[0u8; 36][..4 * slots]);
                }
                3 if room >= 8 => {
                    let slots = 1 + self.rng.below(((room - 4) / 4).min(9) as u64) as usize;
                    o.put(&[0x44, (4 + 4 * slots) as u8, 5, 0]);
                    o.put(&[0u8; 36][..4 * slots]);
                }
                _ => o.put(&[1]),
            }
        }
        while !o.len.is_multiple_of(4) {
            o.put(&[0]);
        }
        o.len
    }

    /// Appends the L4 header with a zero checksum, then `payload` random bytes.
    fn put_l4(&mut self, out: &mut Vec<u8>, plan: &L4Plan, payload: usize) {
        let start = out.len();
        match plan.l4 {
            L4::Udp => {
                put_u16(out, plan.sport);
                put_u16(out, plan.dport);
                put_u16(out, (UDP_HLEN + payload).min(usize::from(u16::MAX)) as u16);
                put_u16(out, 0);
            }
            L4::Tcp => {
                put_u16(out, plan.sport);
                put_u16(out, plan.dport);
                put_u32(out, self.rng.next_u32());
                let ack = if plan.tcp_flags & TCP_ACK != 0 { self.rng.next_u32() } else { 0 };
                put_u32(out, ack);
                out.push(((plan.hdr_len / 4) as u8) << 4);
                out.push(plan.tcp_flags);
                put_u16(out, self.rng.pick(&[65_535, 64_240, 502, 29_200, 0]));
                put_u16(out, 0);
                put_u16(out, 0);
                out.extend_from_slice(&plan.opts[..plan.opt_len]);
            }
            L4::Icmp => {
                out.push(plan.icmp_type);
                out.push(0);
                put_u16(out, 0);
                put_u16(out, self.rng.next_u16());
                put_u16(out, self.rng.below(1024) as u16);
            }
        }
        debug_assert_eq!(out.len() - start, plan.hdr_len);
        let at = out.len();
        out.resize(at + payload, 0);
        self.rng.fill(&mut out[at..]);
    }

    fn finish_l4_v4(seg: &mut [u8], plan: &L4Plan, src: [u8; 4], dst: [u8; 4]) {
        let Some(off) = checksum_offset(plan.proto()) else { return };
        set_u16(seg, off, 0);
        let c = match plan.l4 {
            L4::Icmp => checksum(seg),
            L4::Udp if plan.udp_no_checksum => return,
            L4::Udp => match l4_checksum_v4(src, dst, IPPROTO_UDP, seg) {
                0 => 0xffff,
                c => c,
            },
            L4::Tcp => l4_checksum_v4(src, dst, IPPROTO_TCP, seg),
        };
        set_u16(seg, off, c);
    }

    fn finish_l4_v6(seg: &mut [u8], plan: &L4Plan, src: &[u8; 16], dst: &[u8; 16]) {
        let Some(off) = checksum_offset(plan.proto()) else { return };
        set_u16(seg, off, 0);
        let c = match l4_checksum_v6(src, dst, plan.proto(), seg) {
            0 if plan.l4 == L4::Udp => 0xffff,
            c => c,
        };
        set_u16(seg, off, c);
    }

    /// Chooses a fragment of a datagram whose fragments start after `hdrs` frame bytes:
    /// first (holding the whole L4 header), middle or last, in the length bounds.
    fn plan_fragment(&mut self, hdrs: usize, l4_hdr: usize) -> Option<Frag> {
        let room8 = (self.cfg.max_len.checked_sub(hdrs)? / 8 * 8).min(MAX_FRAGMENT);
        let min_data = self.cfg.min_len.saturating_sub(hdrs).max(1);
        let lo8 = round_up8(min_data.max(8));
        if lo8 > room8 {
            return None;
        }
        let mut flen = ((self.pick_frame_len(hdrs + lo8)? - hdrs) / 8 * 8).clamp(lo8, room8);
        // A first fragment must hold the whole L4 header; grow every fragment alike.
        let min_first = round_up8(l4_hdr);
        if flen < min_first && min_first <= room8 {
            flen = min_first;
        }
        // Fewer than MAX_EXTRA bytes beyond flen (TCP headers are at most 60 bytes).
        let total = (flen + 8 + self.rng.below(2400) as usize).max(l4_hdr + 1);
        let first = |flen: usize| {
            (flen >= min_first).then_some(Frag { off: 0, len: flen, more: true, total })
        };
        match self.rng.below(3) {
            0 => first(flen),
            1 => {
                let slots = (total - flen - 1) / 8;
                if slots == 0 {
                    return first(flen);
                }
                let off = 8 * (1 + self.rng.below(slots as u64) as usize);
                Some(Frag { off, len: flen, more: true, total })
            }
            _ => {
                // Last fragment: len = total - off with off a positive multiple of 8.
                let len_max = room8.min(total - 8);
                let off_lo = round_up8(total - len_max).max(8);
                let off_hi = (total - min_data) / 8 * 8;
                if off_lo > off_hi {
                    return first(flen);
                }
                let off = 8 * self.rng.range(off_lo / 8, off_hi / 8);
                Some(Frag { off, len: total - off, more: false, total })
            }
        }
    }

    /// A well-formed IPv4 frame: `options` adds IP options, `frag` makes it one
    /// fragment of a larger datagram, `pad` allows Ethernet padding of short frames.
    #[expect(clippy::too_many_arguments, reason = "private builder with one caller pattern")]
    pub(super) fn ipv4(
        &mut self,
        buf: &mut Vec<u8>,
        tags: Tags,
        l4: L4,
        options: bool,
        frag: bool,
        pad: bool,
        lay: &mut Layout,
    ) -> bool {
        let (dst_mac, src_mac) = (self.pick_dst_mac(false), self.pick_mac());
        let l3 = self.put_l2(buf, tags, ETHERTYPE_IPV4, dst_mac, src_mac, lay);
        let mut opts = [0u8; 40];
        let opt_len = if options { self.ipv4_options(&mut opts) } else { 0 };
        let ihl = IPV4_HLEN + opt_len;
        let plan = self.plan_l4(l4, false);
        let (src, dst) = (self.pick_ip4(), self.pick_ip4());
        let hdrs = l3 + ihl;
        if frag {
            let Some(f) = self.plan_fragment(hdrs, plan.hdr_len) else { return false };
            let mut dg = std::mem::take(&mut self.scratch);
            dg.clear();
            self.put_l4(&mut dg, &plan, f.total - plan.hdr_len);
            Self::finish_l4_v4(&mut dg, &plan, src, dst);
            let more: u16 = if f.more { 0x2000 } else { 0 };
            let field = more | (f.off / 8) as u16;
            self.put_ipv4_header(buf, plan.proto(), &opts[..opt_len], field, src, dst);
            buf.extend_from_slice(&dg[f.off..f.off + f.len]);
            self.scratch = dg;
            lay.push(l3, hdrs);
            if f.off == 0 {
                lay.push(hdrs, hdrs + plan.hdr_len);
            }
        } else {
            let need = hdrs + plan.hdr_len;
            let Some(frame) = self.datagram_len(need, plan.bare) else { return false };
            let df = if self.rng.chance(0.7) { 0x4000 } else { 0 };
            self.put_ipv4_header(buf, plan.proto(), &opts[..opt_len], df, src, dst);
            self.put_l4(buf, &plan, frame - need);
            Self::finish_l4_v4(&mut buf[hdrs..], &plan, src, dst);
            lay.push(l3, hdrs);
            lay.push(hdrs, need);
            lay.l4 = Some(hdrs);
        }
        let total = (buf.len() - l3) as u16;
        finish_ipv4(buf, l3, total);
        if pad {
            self.maybe_pad(buf);
        }
        true
    }

    /// Appends an IPv4 header with zero length and checksum, fixed by [`finish_ipv4`].
    pub(super) fn put_ipv4_header(
        &mut self,
        buf: &mut Vec<u8>,
        proto: u8,
        opts: &[u8],
        frag_field: u16,
        src: [u8; 4],
        dst: [u8; 4],
    ) {
        buf.push(0x40 | ((IPV4_HLEN + opts.len()) / 4) as u8);
        buf.push(self.rng.pick(&[0x00, 0x00, 0x00, 0x10, 0xb8, 0x28, 0x01, 0x02, 0x03]));
        put_u16(buf, 0);
        self.ip_id = self.ip_id.wrapping_add(1);
        put_u16(buf, self.ip_id);
        put_u16(buf, frag_field);
        buf.push(self.rng.pick(&[64, 64, 128, 255, 1, 2, 32]));
        buf.push(proto);
        put_u16(buf, 0);
        buf.extend_from_slice(&src);
        buf.extend_from_slice(&dst);
        buf.extend_from_slice(opts);
    }

    /// A well-formed IPv6 frame: `exts` adds hop-by-hop / destination options /
    /// segment-routing headers, `frag` makes it a fragment.
    #[expect(clippy::too_many_arguments, reason = "private builder with one caller pattern")]
    pub(super) fn ipv6(
        &mut self,
        buf: &mut Vec<u8>,
        tags: Tags,
        l4: L4,
        exts: bool,
        frag: bool,
        pad: bool,
        lay: &mut Layout,
    ) -> bool {
        let (dst_mac, src_mac) = (self.pick_dst_mac(true), self.pick_mac());
        let l3 = self.put_l2(buf, tags, ETHERTYPE_IPV6, dst_mac, src_mac, lay);
        let plan = self.plan_l4(l4, true);
        let mut chain = [0u8; 4];
        let mut n = 0;
        if exts {
            // RFC 8200 order: hop-by-hop first, destination options before routing.
            for (p, hdr) in [(0.5, IPPROTO_HOPOPTS), (0.3, IPPROTO_DSTOPTS), (0.5, IPPROTO_ROUTING)]
            {
                if self.rng.chance(p) {
                    chain[n] = hdr;
                    n += 1;
                }
            }
            if n == 0 {
                chain[0] = self.rng.pick(&[IPPROTO_HOPOPTS, IPPROTO_DSTOPTS, IPPROTO_ROUTING]);
                n = 1;
            }
        }
        if frag {
            chain[n] = IPPROTO_FRAGMENT;
            n += 1;
        }
        let next_of = |i: usize| if i + 1 < n { chain[i + 1] } else { plan.proto() };
        let first = if n > 0 { chain[0] } else { plan.proto() };
        let (src, dst) = (self.pick_ip6(), self.pick_ip6());
        let flow = self.rng.next_u32() & 0x000f_ffff;
        let tc = u32::from(self.rng.pick(&[0u8, 0, 0x10, 0xb8, 0x01]));
        put_u32(buf, (6 << 28) | (tc << 20) | flow);
        put_u16(buf, 0);
        buf.push(first);
        buf.push(self.rng.pick(&[64, 64, 255, 128, 1]));
        buf.extend_from_slice(&src);
        buf.extend_from_slice(&dst);
        lay.push(l3, l3 + IPV6_HLEN);
        for (i, &hdr) in chain[..n].iter().enumerate() {
            let start = buf.len();
            match hdr {
                IPPROTO_HOPOPTS => self.put_opts_header(buf, next_of(i), true),
                IPPROTO_DSTOPTS => self.put_opts_header(buf, next_of(i), false),
                IPPROTO_ROUTING => self.put_srh(buf, next_of(i), &dst),
                _ => break, // the fragment header is last and written below
            }
            lay.push(start, buf.len());
        }
        if frag {
            let fh = buf.len();
            let hdrs = fh + 8;
            let Some(f) = self.plan_fragment(hdrs, plan.hdr_len) else { return false };
            let mut dg = std::mem::take(&mut self.scratch);
            dg.clear();
            self.put_l4(&mut dg, &plan, f.total - plan.hdr_len);
            Self::finish_l4_v6(&mut dg, &plan, &src, &dst);
            buf.push(plan.proto());
            buf.push(0);
            put_u16(buf, (f.off as u16) | u16::from(f.more));
            put_u32(buf, self.rng.next_u32());
            buf.extend_from_slice(&dg[f.off..f.off + f.len]);
            self.scratch = dg;
            lay.push(fh, hdrs);
            if f.off == 0 {
                lay.push(hdrs, hdrs + plan.hdr_len);
            }
        } else {
            let l4_off = buf.len();
            let need = l4_off + plan.hdr_len;
            let Some(frame) = self.datagram_len(need, plan.bare) else { return false };
            self.put_l4(buf, &plan, frame - need);
            Self::finish_l4_v6(&mut buf[l4_off..], &plan, &src, &dst);
            lay.push(l4_off, need);
            lay.l4 = Some(l4_off);
        }
        let payload = (buf.len() - l3 - IPV6_HLEN) as u16;
        set_u16(buf, l3 + 4, payload);
        if pad {
            self.maybe_pad(buf);
        }
        true
    }

    /// Hop-by-hop (`hbh`) or destination options header of 8, 16 or 24 bytes: a router
    /// alert or an experimental skippable option, padded with Pad1/PadN.
    fn put_opts_header(&mut self, buf: &mut Vec<u8>, next: u8, hbh: bool) {
        let units = self.rng.below(3) as usize;
        let end = buf.len() + 8 * (units + 1);
        buf.push(next);
        buf.push(units as u8);
        if self.rng.chance(0.5) {
            if hbh {
                buf.extend_from_slice(&[5, 2, 0, 0]);
            } else {
                // Type 0x1e: RFC 4727 experimental, "skip if unrecognised".
                let room = end - buf.len() - 2;
                let len = self.rng.below(room as u64 + 1) as usize;
                buf.push(0x1e);
                buf.push(len as u8);
                let at = buf.len();
                buf.resize(at + len, 0);
                self.rng.fill(&mut buf[at..]);
            }
        }
        match end - buf.len() {
            0 => {}
            1 => buf.push(0),
            rest => {
                buf.push(1);
                buf.push((rest - 2) as u8);
                buf.resize(end, 0);
            }
        }
    }

    /// Segment Routing Header (RFC 8754) with segments left 0: the packet is at its
    /// final segment, so the IPv6 destination is the one the L4 checksum covers.
    fn put_srh(&mut self, buf: &mut Vec<u8>, next: u8, dst: &[u8; 16]) {
        let segments = 1 + self.rng.below(3) as usize;
        buf.push(next);
        buf.push((2 * segments) as u8);
        buf.push(4);
        buf.push(0);
        buf.push((segments - 1) as u8);
        buf.push(0);
        put_u16(buf, 0);
        buf.extend_from_slice(dst);
        for _ in 1..segments {
            let s = self.pick_ip6();
            buf.extend_from_slice(&s);
        }
    }

    /// An ARP request (broadcast) or reply for IPv4 over Ethernet.
    pub(super) fn arp(
        &mut self,
        buf: &mut Vec<u8>,
        tags: Tags,
        pad: bool,
        lay: &mut Layout,
    ) -> bool {
        let natural = Self::l2_len(tags) + ARP_LEN;
        if natural > self.cfg.max_len {
            return false;
        }
        let request = self.rng.chance(0.5);
        let sha = self.pick_mac();
        let tha = if request { [0; 6] } else { self.pick_mac() };
        let dst = if request { [0xff; 6] } else { tha };
        let l3 = self.put_l2(buf, tags, ETHERTYPE_ARP, dst, sha, lay);
        put_u16(buf, 1);
        put_u16(buf, ETHERTYPE_IPV4);
        buf.push(6);
        buf.push(4);
        put_u16(buf, if request { 1 } else { 2 });
        buf.extend_from_slice(&sha);
        let spa = self.pick_ip4();
        buf.extend_from_slice(&spa);
        buf.extend_from_slice(&tha);
        let tpa = self.pick_ip4();
        buf.extend_from_slice(&tpa);
        lay.push(l3, l3 + ARP_LEN);
        if buf.len() < self.cfg.min_len {
            buf.resize(self.cfg.min_len, 0);
        } else if pad {
            self.maybe_pad(buf);
        }
        true
    }
}

struct OptWriter<'a> {
    buf: &'a mut [u8; 40],
    len: usize,
}

impl OptWriter<'_> {
    /// Appends `bytes` if they fit; option builders check room first, so a drop here
    /// only ever shortens padding.
    fn put(&mut self, bytes: &[u8]) {
        if self.len + bytes.len() <= self.buf.len() {
            self.buf[self.len..self.len + bytes.len()].copy_from_slice(bytes);
            self.len += bytes.len();
        }
    }
}
