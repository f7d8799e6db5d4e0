//! Malformed frames: each starts from something plausible and breaks exactly what its
//! [`Shape`] names, so that a program's handling of that one defect is exercised.

use super::inet::{checksum_offset, finish_ipv4, ipv4_recompute_checksum, L4};
use super::{
    Generator, Layout, Shape, Tags, MALFORMED, MAX_SPANS, WELL_FORMED, WELL_FORMED_WEIGHTS,
};
use crate::wire::{
    get_u16, l4_checksum_v4, set_u16, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6,
    ETHERTYPE_QINQ, ETHERTYPE_VLAN, IPPROTO_TCP, IPPROTO_UDP, IPV4_HLEN, IPV6_HLEN,
};

/// Ethertypes an IP-only program does not parse: LLDP, MPLS, PPPoE discovery and
/// session, MACsec, EAPOL, PTP, loopback, Wake-on-LAN.
const FOREIGN_ETHERTYPES: [u16; 9] =
    [0x88cc, 0x8847, 0x8863, 0x8864, 0x88e5, 0x888e, 0x88f7, 0x9000, 0x0842];
/// Ethertypes the generator gives meaning to; "unknown" ones avoid them.
const KNOWN_ETHERTYPES: [u16; 6] =
    [ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ARP, ETHERTYPE_VLAN, ETHERTYPE_QINQ, 0x9100];

impl Generator {
    /// Builds a malformed frame of `shape`; false if it cannot fit the length bounds.
    pub(super) fn malformed(&mut self, buf: &mut Vec<u8>, shape: Shape, tags: Tags) -> bool {
        debug_assert!(MALFORMED.contains(&shape));
        match shape {
            Shape::TruncatedAtBoundary => self.truncated(buf, tags, false),
            Shape::TruncatedMidHeader => self.truncated(buf, tags, true),
            Shape::Ipv4IhlTooSmall => self.ihl_too_small(buf, tags),
            Shape::Ipv4IhlBeyondPacket => self.ihl_beyond_packet(buf, tags),
            Shape::Ipv4TotalLenTooLarge => self.total_len_wrong(buf, tags, true),
            Shape::Ipv4TotalLenTooSmall => self.total_len_wrong(buf, tags, false),
            Shape::Ipv6PayloadLenWrong => self.payload_len_wrong(buf, tags),
            Shape::IpVersionMismatch => self.version_mismatch(buf, tags),
            Shape::BadChecksum => self.bad_checksum(buf, tags),
            Shape::UnknownEthertype => self.unknown_ethertype(buf, tags),
            Shape::RandomBytes => {
                self.random_bytes(buf);
                true
            }
            _ => false,
        }
    }

    fn any_l4(&mut self) -> L4 {
        self.rng.pick(&[L4::Udp, L4::Tcp, L4::Icmp])
    }

    /// A whole, unpadded IPv4 datagram (sometimes with options) to break.
    fn base_ipv4(&mut self, buf: &mut Vec<u8>, tags: Tags, lay: &mut Layout) -> bool {
        let l4 = self.any_l4();
        let options = self.rng.chance(0.2);
        self.ipv4(buf, tags, l4, options, false, false, lay)
    }

    /// A whole, unpadded IPv6 datagram (sometimes with extension headers) to break.
    fn base_ipv6(&mut self, buf: &mut Vec<u8>, tags: Tags, lay: &mut Layout) -> bool {
        let l4 = self.any_l4();
        let exts = self.rng.chance(0.3);
        self.ipv6(buf, tags, l4, exts, false, false, lay)
    }

    /// A well-formed frame of any shape, cut at the end of one of its headers
    /// (`mid == false`) or strictly inside one, never below `min_len`.
    fn truncated(&mut self, buf: &mut Vec<u8>, tags: Tags, mid: bool) -> bool {
        let base = WELL_FORMED[self.rng.weighted(&WELL_FORMED_WEIGHTS)];
        let mut lay = Layout::default();
        if !self.well_formed(buf, base, tags, false, &mut lay) {
            return false;
        }
        let (len, min) = (buf.len(), self.cfg.min_len);
        let mut cuts = [(0usize, 0usize); MAX_SPANS];
        let mut n = 0;
        for &(start, end) in lay.spans() {
            let (lo, hi) = if mid {
                (min.max(start + 1), (end - 1).min(len - 1))
            } else {
                (end.max(min), end.min(len - 1))
            };
            if lo <= hi && !cuts[..n].iter().any(|&(l, _)| l == lo && !mid) {
                cuts[n] = (lo, hi);
                n += 1;
            }
        }
        if n == 0 {
            return false;
        }
        let (lo, hi) = cuts[self.rng.below(n as u64) as usize];
        buf.truncate(self.rng.range(lo, hi));
        true
    }

    fn ihl_too_small(&mut self, buf: &mut Vec<u8>, tags: Tags) -> bool {
        let mut lay = Layout::default();
        if !self.base_ipv4(buf, tags, &mut lay) {
            return false;
        }
        buf[lay.l3] = 0x40 | self.rng.below(5) as u8;
        ipv4_recompute_checksum(buf, lay.l3, IPV4_HLEN);
        true
    }

    /// A short IPv4 frame whose IHL claims more header than the frame holds; the bytes
    /// after the fixed header are NOP options, so only the length is wrong.
    fn ihl_beyond_packet(&mut self, buf: &mut Vec<u8>, tags: Tags) -> bool {
        let l2 = Self::l2_len(tags);
        let words = self.rng.range(6, 15);
        let lo = IPV4_HLEN.max(self.cfg.min_len.saturating_sub(l2));
        let hi = (4 * words - 1).min(self.cfg.max_len.saturating_sub(l2));
        if lo > hi {
            return false;
        }
        let present = self.rng.range(lo, hi);
        let (dst_mac, src_mac) = (self.pick_dst_mac(false), self.pick_mac());
        let mut lay = Layout::default();
        let l3 = self.put_l2(buf, tags, ETHERTYPE_IPV4, dst_mac, src_mac, &mut lay);
        let proto = self.rng.pick(&[IPPROTO_UDP, IPPROTO_TCP, 1]);
        let (src, dst) = (self.pick_ip4(), self.pick_ip4());
        self.put_ipv4_header(buf, proto, &[], 0x4000, src, dst);
        buf.resize(l3 + present, 1);
        buf[l3] = 0x40 | words as u8;
        set_u16(buf, l3 + 2, present as u16);
        ipv4_recompute_checksum(buf, l3, IPV4_HLEN);
        true
    }

    /// An IPv4 frame whose total length exceeds (`larger`) or falls short of the bytes
    /// after the L2 header; the header checksum is recomputed to match the lie.
    fn total_len_wrong(&mut self, buf: &mut Vec<u8>, tags: Tags, larger: bool) -> bool {
        let mut lay = Layout::default();
        if !self.base_ipv4(buf, tags, &mut lay) {
            return false;
        }
        let l3 = lay.l3;
        let present = buf.len() - l3;
        let ihl = usize::from(buf[l3] & 0x0f) * 4;
        let claimed = if larger {
            let room = usize::from(u16::MAX) - present;
            match self.rng.below(10) {
                0..=4 => present + self.rng.range(1, 8.min(room)),
                5..=7 => present + self.rng.range(1, 1500.min(room)),
                _ => self.rng.range(present + 1, usize::from(u16::MAX)),
            }
        } else if self.rng.chance(0.4) {
            self.rng.range(0, ihl - 1)
        } else {
            self.rng.range(ihl, present - 1)
        };
        finish_ipv4(buf, l3, claimed as u16);
        true
    }

    fn payload_len_wrong(&mut self, buf: &mut Vec<u8>, tags: Tags) -> bool {
        let mut lay = Layout::default();
        if !self.base_ipv6(buf, tags, &mut lay) {
            return false;
        }
        let l3 = lay.l3;
        let present = buf.len() - l3 - IPV6_HLEN;
        let claimed = loop {
            let v = match self.rng.below(4) {
                0 => 0,
                1 => present + self.rng.range(1, 8),
                2 => self.rng.range(0, usize::from(u16::MAX)),
                _ => present.saturating_sub(self.rng.range(1, 8)),
            };
            if v != present && v <= usize::from(u16::MAX) {
                break v;
            }
        };
        set_u16(buf, l3 + 4, claimed as u16);
        true
    }

    /// IPv4 behind ethertype 0x0800 with another version nibble, or IPv6 likewise.
    fn version_mismatch(&mut self, buf: &mut Vec<u8>, tags: Tags) -> bool {
        let mut lay = Layout::default();
        let v4 = self.rng.chance(0.5);
        let built = if v4 {
            self.base_ipv4(buf, tags, &mut lay)
        } else {
            self.base_ipv6(buf, tags, &mut lay)
        };
        if !built {
            return false;
        }
        let right = if v4 { 4 } else { 6 };
        let version = loop {
            let v = if self.rng.chance(0.6) { 10 - right } else { self.rng.below(16) as u8 };
            if v != right {
                break v;
            }
        };
        let l3 = lay.l3;
        buf[l3] = (version << 4) | (buf[l3] & 0x0f);
        if v4 {
            let ihl = usize::from(buf[l3] & 0x0f) * 4;
            ipv4_recompute_checksum(buf, l3, ihl);
        }
        true
    }

    /// Exactly one checksum wrong: the IPv4 header's, or the L4 one.
    fn bad_checksum(&mut self, buf: &mut Vec<u8>, tags: Tags) -> bool {
        let mut lay = Layout::default();
        let v4 = self.rng.chance(0.6);
        let built = if v4 {
            self.base_ipv4(buf, tags, &mut lay)
        } else {
            self.base_ipv6(buf, tags, &mut lay)
        };
        let (true, Some(l4)) = (built, lay.l4) else { return false };
        let l3 = lay.l3;
        let at = if v4 && self.rng.chance(0.25) {
            l3 + 10
        } else {
            let proto = if v4 { buf[l3 + 9] } else { last_next_header(buf, l3, l4) };
            let Some(off) = checksum_offset(proto) else { return false };
            if v4 && proto == IPPROTO_UDP && get_u16(buf, l4 + 6) == 0 {
                // "No checksum" cannot be wrong: put the real one in first.
                let src = [buf[l3 + 12], buf[l3 + 13], buf[l3 + 14], buf[l3 + 15]];
                let dst = [buf[l3 + 16], buf[l3 + 17], buf[l3 + 18], buf[l3 + 19]];
                let c = match l4_checksum_v4(src, dst, IPPROTO_UDP, &buf[l4..]) {
                    0 => 0xffff,
                    c => c,
                };
                set_u16(buf, l4 + 6, c);
            }
            l4 + off
        };
        let good = get_u16(buf, at);
        // 0x0000 and 0xffff are the same ones'-complement value and 0 means "none" in
        // UDP, so the wrong value avoids both.
        let bad = loop {
            let v = good ^ self.rng.next_u16();
            if v != good && v != 0 && v != 0xffff {
                break v;
            }
        };
        set_u16(buf, at, bad);
        true
    }

    fn unknown_ethertype(&mut self, buf: &mut Vec<u8>, tags: Tags) -> bool {
        let ethertype = match self.rng.below(3) {
            0 => self.rng.pick(&FOREIGN_ETHERTYPES),
            // An 802.3 length field, as LLC/SNAP frames (STP, CDP) carry.
            1 => self.rng.range(0x2e, 0x5dc) as u16,
            _ => loop {
                let t = self.rng.next_u16();
                if !KNOWN_ETHERTYPES.contains(&t) {
                    break t;
                }
            },
        };
        let Some(len) = self.pick_frame_len(Self::l2_len(tags)) else { return false };
        let (dst_mac, src_mac) = (self.pick_dst_mac(false), self.pick_mac());
        self.put_l2(buf, tags, ethertype, dst_mac, src_mac, &mut Layout::default());
        let at = buf.len();
        buf.resize(len, 0);
        self.rng.fill(&mut buf[at..]);
        true
    }
}

/// The upper-layer protocol of an IPv6 datagram whose L4 header starts at `l4`:
/// the next-header field of the last header before it.
fn last_next_header(buf: &[u8], l3: usize, l4: usize) -> u8 {
    let mut nh = buf[l3 + 6];
    let mut at = l3 + IPV6_HLEN;
    while at < l4 {
        nh = buf[at];
        at += 8 * (usize::from(buf[at + 1]) + 1);
    }
    nh
}
