//! Wire-format constants and the internet checksum (RFC 1071), shared by the packet
//! generator, the frame builders and, later, the ports and their tests.

/// Length of an Ethernet II header without VLAN tags.
pub const ETH_HLEN: usize = 14;
/// Length of one 802.1Q / 802.1ad tag (TPID + TCI).
pub const VLAN_HLEN: usize = 4;
/// Shortest Ethernet frame on the wire, without the FCS; senders pad up to it.
pub const ETH_ZLEN: usize = 60;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;
pub const ETHERTYPE_VLAN: u16 = 0x8100;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// 802.1ad service tag, the outer tag of QinQ.
pub const ETHERTYPE_QINQ: u16 = 0x88a8;

pub const IPPROTO_HOPOPTS: u8 = 0;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ROUTING: u8 = 43;
pub const IPPROTO_FRAGMENT: u8 = 44;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_DSTOPTS: u8 = 60;

pub const IPV4_HLEN: usize = 20;
pub const IPV6_HLEN: usize = 40;
pub const UDP_HLEN: usize = 8;
pub const TCP_HLEN: usize = 20;
pub const ICMP_ECHO_HLEN: usize = 8;
pub const ARP_LEN: usize = 28;

/// Adds `data` to a running ones'-complement sum as big-endian 16-bit words.
///
/// An odd trailing byte is padded with zero, so only the last piece of a message may
/// have odd length. The accumulator is 64 bits wide and cannot overflow for any input
/// shorter than 2^48 bytes; [`fold`] finishes it.
pub fn sum(mut acc: u64, data: &[u8]) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a [`sum`] accumulator to 16 bits and complements it: the value that goes into
/// a checksum field. Summing a message that already holds its correct checksum folds
/// to 0.
pub fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// The internet checksum of `data`, as the IPv4 header and ICMPv4 use it.
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum(0, data))
}

/// The IPv4 pseudo-header sum that TCP and UDP checksums start from.
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u64 {
    sum(sum(0, &src), &dst) + u64::from(proto) + u64::from(len)
}

/// The IPv6 pseudo-header sum (RFC 8200 §8.1) that TCP, UDP and ICMPv6 checksums start
/// from; `dst` is the final destination, `len` the upper-layer packet length.
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, len: u32) -> u64 {
    sum(sum(0, src), dst) + u64::from(len >> 16) + u64::from(len & 0xffff) + u64::from(next_header)
}

/// The TCP/UDP checksum of `segment` (its checksum field zeroed) over IPv4.
///
/// A UDP checksum that computes to 0 must be sent as 0xffff, since 0 means "none";
/// callers writing UDP apply that.
pub fn l4_checksum_v4(src: [u8; 4], dst: [u8; 4], proto: u8, segment: &[u8]) -> u16 {
    // Segments longer than 65535 bytes cannot exist over IPv4; truncating the length
    // only yields a wrong checksum for such impossible input, never a panic.
    fold(sum(pseudo_header_v4(src, dst, proto, segment.len() as u16), segment))
}

/// The TCP/UDP/ICMPv6 checksum of `segment` (its checksum field zeroed) over IPv6.
pub fn l4_checksum_v6(src: &[u8; 16], dst: &[u8; 16], next_header: u8, segment: &[u8]) -> u16 {
    let len = u32::try_from(segment.len()).unwrap_or(u32::MAX);
    fold(sum(pseudo_header_v6(src, dst, next_header, len), segment))
}

pub(crate) fn put_u16(buf: &mut Vec<u8>, v: u16) {
    buf.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u32(buf: &mut Vec<u8>, v: u32) {
    buf.extend_from_slice(&v.to_be_bytes());
}

/// Writes `v` big-endian at `off`; the caller guarantees `off + 2 <= buf.len()`.
pub(crate) fn set_u16(buf: &mut [u8], off: usize, v: u16) {
    buf[off..off + 2].copy_from_slice(&v.to_be_bytes());
}

pub(crate) fn get_u16(buf: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([buf[off], buf[off + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // The worked example of RFC 1071 §3: the folded sum is 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn known_ipv4_header() {
        // A captured header (Wikipedia's IPv4 checksum example) with its checksum 0xb861.
        let mut hdr = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&hdr), 0xb861);
        set_u16(&mut hdr, 10, 0xb861);
        assert_eq!(checksum(&hdr), 0);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(checksum(&[0x12]), checksum(&[0x12, 0x00]));
        assert_eq!(sum(0, &[0xab, 0xcd, 0xef]), 0xabcd + 0xef00);
    }

    #[test]
    fn fold_handles_large_carries() {
        let acc = sum(0, &[0xff; 70_000]);
        assert_eq!(fold(acc), 0);
    }

    #[test]
    fn udp6_checksum_matches_a_hand_computed_value() {
        // ::1 -> ::1, UDP 1 -> 2, 4 bytes "abcd"; pseudo-header and segment summed by hand.
        let mut lo = [0u8; 16];
        lo[15] = 1;
        let seg = [0x00, 0x01, 0x00, 0x02, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd'];
        let expect = {
            let words: u32 = 1 + 1 + 12 + 17 + 1 + 2 + 12 + 0x6162 + 0x6364;
            !((words & 0xffff) + (words >> 16)) as u16
        };
        assert_eq!(l4_checksum_v6(&lo, &lo, IPPROTO_UDP, &seg), expect);
    }
}
