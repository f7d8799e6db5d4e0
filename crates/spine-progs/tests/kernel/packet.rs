//! Handcrafted frames with correct lengths and checksums, and the checks the tests make
//! on the frames the programs send back.

pub const MAC_A: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x00, 0x0b];
pub const IP_A: [u8; 4] = [10, 0, 0, 1];
pub const IP_B: [u8; 4] = [10, 0, 0, 2];
pub const IP6_A: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const IP6_B: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

pub const ETH_P_IP: u16 = 0x0800;
pub const ETH_P_ARP: u16 = 0x0806;
pub const ETH_P_8021Q: u16 = 0x8100;
pub const ETH_P_8021AD: u16 = 0x88a8;
pub const ETH_P_IPV6: u16 = 0x86dd;
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_ICMPV6: u8 = 58;

/// The 16-bit one's-complement sum of `parts` laid end to end (RFC 1071), folded but not
/// inverted. Each part must have an even length except the last.
pub fn ones_sum(parts: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for part in parts {
        for pair in part.chunks(2) {
            let hi = u64::from(pair[0]) << 8;
            sum += hi | pair.get(1).copied().map_or(0, u64::from);
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The value of a checksum field over `parts` (with the field zeroed in them).
pub fn checksum(parts: &[&[u8]]) -> u16 {
    !ones_sum(parts)
}

/// The pseudo-header a TCP, UDP or ICMPv6 checksum covers, for IPv4 or IPv6 addresses.
pub fn pseudo_header(src: &[u8], dst: &[u8], proto: u8, len: usize) -> Vec<u8> {
    let mut p = [src, dst].concat();
    if src.len() == 4 {
        p.extend_from_slice(&[0, proto]);
        p.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        p.extend_from_slice(&(len as u32).to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, proto]);
    }
    p
}

/// Whether an IPv4 header (with options) sums to all ones, as a receiver checks it.
pub fn ipv4_checksum_ok(header: &[u8]) -> bool {
    ones_sum(&[header]) == 0xffff
}

/// Whether a transport segment's checksum is right for these addresses.
pub fn l4_checksum_ok(src: &[u8], dst: &[u8], proto: u8, segment: &[u8]) -> bool {
    ones_sum(&[&pseudo_header(src, dst, proto, segment.len()), segment]) == 0xffff
}

pub fn ether(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    [&dst[..], &src[..], &ethertype.to_be_bytes(), payload].concat()
}

/// A VLAN tag (TCI then the EtherType it carries), as it follows a TPID.
pub fn vlan_tag(tci: u16, inner: u16) -> Vec<u8> {
    [tci.to_be_bytes(), inner.to_be_bytes()].concat()
}

/// An IPv4 datagram: 20-byte header, no options, DF clear, correct length and checksum.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(src, dst, proto, ttl, 0, &[], payload)
}

/// An IPv4 datagram with a TOS byte and options (a multiple of 4 bytes).
pub fn ipv4_with(
    src: [u8; 4],
    dst: [u8; 4],
    proto: u8,
    ttl: u8,
    tos: u8,
    options: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let hlen = 20 + options.len();
    let tot = (hlen + payload.len()) as u16;
    let mut h = vec![0x40 | (hlen / 4) as u8, tos];
    h.extend_from_slice(&tot.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34, 0, 0, ttl, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(options);
    let check = checksum(&[&h]);
    h[10..12].copy_from_slice(&check.to_be_bytes());
    [h, payload.to_vec()].concat()
}

/// An IPv6 packet with a fixed header only.
pub fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    [h, payload.to_vec()].concat()
}

/// A UDP datagram with its checksum for the given (IPv4 or IPv6) addresses.
pub fn udp(src: &[u8], dst: &[u8], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let len = 8 + payload.len();
    let mut u =
        [&sport.to_be_bytes()[..], &dport.to_be_bytes(), &(len as u16).to_be_bytes()].concat();
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    let check = checksum(&[&pseudo_header(src, dst, PROTO_UDP, len), &u]);
    u[6..8].copy_from_slice(&(if check == 0 { 0xffff } else { check }).to_be_bytes());
    u
}

/// A TCP segment (20-byte header, ACK set) with its checksum.
pub fn tcp(src: &[u8], dst: &[u8], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut t = [&sport.to_be_bytes()[..], &dport.to_be_bytes()].concat();
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    let check = checksum(&[&pseudo_header(src, dst, PROTO_TCP, t.len()), &t]);
    t[16..18].copy_from_slice(&check.to_be_bytes());
    t
}

/// An ICMP echo message of `kind` (8 request, 0 reply) with its checksum.
pub fn icmp_echo(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0, 0x42, 0x42, 0, 7];
    m.extend_from_slice(payload);
    let check = checksum(&[&m]);
    m[2..4].copy_from_slice(&check.to_be_bytes());
    m
}

/// An ICMPv6 echo message of `kind` (128 request, 129 reply) with its checksum.
pub fn icmpv6_echo(src: [u8; 16], dst: [u8; 16], kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0, 0x42, 0x42, 0, 7];
    m.extend_from_slice(payload);
    let check = checksum(&[&pseudo_header(&src, &dst, PROTO_ICMPV6, m.len()), &m]);
    m[2..4].copy_from_slice(&check.to_be_bytes());
    m
}

/// An Ethernet frame with IPv4 and UDP.
pub fn udp4_frame(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let seg = udp(&IP_A, &IP_B, sport, dport, payload);
    ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_UDP, 64, &seg))
}

/// An Ethernet frame with IPv4 and TCP.
pub fn tcp4_frame(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let seg = tcp(&IP_A, &IP_B, sport, dport, payload);
    ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_TCP, 64, &seg))
}

/// An ARP request (Ethernet, IPv4) from A for B.
pub fn arp_frame() -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4, 0, 1];
    a.extend_from_slice(&MAC_A);
    a.extend_from_slice(&IP_A);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&IP_B);
    ether([0xff; 6], MAC_A, ETH_P_ARP, &a)
}

/// Bytes `0, 1, 2, ...` (mod 251), a payload that shows any misplaced byte.
pub fn filler(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[test]
fn checksums_of_known_headers() {
    // The IPv4 header of RFC 1071's usual example (Wikipedia "IPv4 header checksum").
    let h = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];
    assert_eq!(checksum(&[&h]), 0xb861);
    let built = ipv4([192, 168, 0, 1], [192, 168, 0, 199], PROTO_UDP, 64, &[0; 95]);
    assert!(ipv4_checksum_ok(&built[..20]));
    let seg = udp(&IP_A, &IP_B, 1, 2, b"abc");
    assert!(l4_checksum_ok(&IP_A, &IP_B, PROTO_UDP, &seg));
    assert!(!l4_checksum_ok(&IP_A, &[10, 0, 0, 3], PROTO_UDP, &seg));
}
