//! Single well-formed frames with chosen addresses: what benchmarks and examples send.
//!
//! A "64-byte frame" on the wire is 60 bytes in the buffer (the FCS is the NIC's): for
//! UDP over IPv4 that is [`udp4`] with an 18-byte payload.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::wire::{
    checksum, l4_checksum_v4, l4_checksum_v6, put_u16, put_u32, set_u16, ETHERTYPE_IPV4,
    ETHERTYPE_IPV6, ETH_HLEN, ICMP_ECHO_HLEN, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, IPV4_HLEN,
    IPV6_HLEN, TCP_HLEN, UDP_HLEN,
};

/// The requested payload does not fit an IP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("payload of {payload_len} bytes exceeds the {max} an IP datagram can carry here")]
pub struct PayloadTooLong {
    pub payload_len: usize,
    pub max: usize,
}

/// Addresses and ports of one IPv4 flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow4 {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

impl Default for Flow4 {
    /// 02:00:00:00:00:01 10.0.0.1:1234 → 02:00:00:00:00:02 10.0.0.2:5678.
    fn default() -> Self {
        Flow4 {
            src_mac: [0x02, 0, 0, 0, 0, 1],
            dst_mac: [0x02, 0, 0, 0, 0, 2],
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            src_port: 1234,
            dst_port: 5678,
        }
    }
}

/// Addresses and ports of one IPv6 flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow6 {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub src_port: u16,
    pub dst_port: u16,
}

impl Default for Flow6 {
    /// 02:00:00:00:00:01 [fd00::1]:1234 → 02:00:00:00:00:02 [fd00::2]:5678.
    fn default() -> Self {
        Flow6 {
            src_mac: [0x02, 0, 0, 0, 0, 1],
            dst_mac: [0x02, 0, 0, 0, 0, 2],
            src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
            src_port: 1234,
            dst_port: 5678,
        }
    }
}

/// TCP flag bits for [`tcp4`].
pub mod tcp_flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

const MAX_V4_PAYLOAD: usize = u16::MAX as usize - IPV4_HLEN;

/// Payload bytes are a counting pattern, so a frame is recognisable in a hex dump.
fn put_payload(buf: &mut Vec<u8>, len: usize) {
    buf.extend((0..len).map(|i| i as u8));
}

fn start_v4(
    buf: &mut Vec<u8>,
    flow: &Flow4,
    proto: u8,
    l4_len: usize,
) -> Result<(), PayloadTooLong> {
    if l4_len > MAX_V4_PAYLOAD {
        return Err(PayloadTooLong { payload_len: l4_len, max: MAX_V4_PAYLOAD });
    }
    buf.clear();
    buf.extend_from_slice(&flow.dst_mac);
    buf.extend_from_slice(&flow.src_mac);
    put_u16(buf, ETHERTYPE_IPV4);
    buf.extend_from_slice(&[0x45, 0]);
    put_u16(buf, (IPV4_HLEN + l4_len) as u16);
    put_u16(buf, 0);
    put_u16(buf, 0x4000);
    buf.extend_from_slice(&[64, proto, 0, 0]);
    buf.extend_from_slice(&flow.src.octets());
    buf.extend_from_slice(&flow.dst.octets());
    let c = checksum(&buf[ETH_HLEN..ETH_HLEN + IPV4_HLEN]);
    set_u16(buf, ETH_HLEN + 10, c);
    Ok(())
}

fn finish_l4_v4(buf: &mut [u8], flow: &Flow4, proto: u8, csum_off: usize) {
    let l4 = ETH_HLEN + IPV4_HLEN;
    let c = l4_checksum_v4(flow.src.octets(), flow.dst.octets(), proto, &buf[l4..]);
    let c = if proto == IPPROTO_UDP && c == 0 { 0xffff } else { c };
    set_u16(buf, l4 + csum_off, c);
}

/// Replaces `buf` with an Ethernet/IPv4/UDP frame of `payload_len` payload bytes.
pub fn udp4(buf: &mut Vec<u8>, flow: &Flow4, payload_len: usize) -> Result<(), PayloadTooLong> {
    let l4_len = UDP_HLEN.saturating_add(payload_len);
    start_v4(buf, flow, IPPROTO_UDP, l4_len).map_err(|e| e.minus(UDP_HLEN))?;
    put_u16(buf, flow.src_port);
    put_u16(buf, flow.dst_port);
    put_u16(buf, l4_len as u16);
    put_u16(buf, 0);
    put_payload(buf, payload_len);
    finish_l4_v4(buf, flow, IPPROTO_UDP, 6);
    Ok(())
}

/// Replaces `buf` with an Ethernet/IPv4/TCP frame (no options) with `flags`.
pub fn tcp4(
    buf: &mut Vec<u8>,
    flow: &Flow4,
    flags: u8,
    payload_len: usize,
) -> Result<(), PayloadTooLong> {
    let l4_len = TCP_HLEN.saturating_add(payload_len);
    start_v4(buf, flow, IPPROTO_TCP, l4_len).map_err(|e| e.minus(TCP_HLEN))?;
    put_u16(buf, flow.src_port);
    put_u16(buf, flow.dst_port);
    put_u32(buf, 1);
    put_u32(buf, if flags & tcp_flags::ACK != 0 { 1 } else { 0 });
    buf.extend_from_slice(&[(TCP_HLEN as u8 / 4) << 4, flags]);
    put_u16(buf, 65_535);
    put_u32(buf, 0);
    put_payload(buf, payload_len);
    finish_l4_v4(buf, flow, IPPROTO_TCP, 16);
    Ok(())
}

/// Replaces `buf` with an ICMP echo request from `flow.src` to `flow.dst` (ports
/// unused).
pub fn icmp4_echo(
    buf: &mut Vec<u8>,
    flow: &Flow4,
    id: u16,
    seq: u16,
    payload_len: usize,
) -> Result<(), PayloadTooLong> {
    let l4_len = ICMP_ECHO_HLEN.saturating_add(payload_len);
    start_v4(buf, flow, IPPROTO_ICMP, l4_len).map_err(|e| e.minus(ICMP_ECHO_HLEN))?;
    buf.extend_from_slice(&[8, 0, 0, 0]);
    put_u16(buf, id);
    put_u16(buf, seq);
    put_payload(buf, payload_len);
    let l4 = ETH_HLEN + IPV4_HLEN;
    let c = checksum(&buf[l4..]);
    set_u16(buf, l4 + 2, c);
    Ok(())
}

/// Replaces `buf` with an Ethernet/IPv6/UDP frame of `payload_len` payload bytes.
pub fn udp6(buf: &mut Vec<u8>, flow: &Flow6, payload_len: usize) -> Result<(), PayloadTooLong> {
    let max = u16::MAX as usize - UDP_HLEN;
    if payload_len > max {
        return Err(PayloadTooLong { payload_len, max });
    }
    let l4_len = UDP_HLEN + payload_len;
    buf.clear();
    buf.extend_from_slice(&flow.dst_mac);
    buf.extend_from_slice(&flow.src_mac);
    put_u16(buf, ETHERTYPE_IPV6);
    put_u32(buf, 6 << 28);
    put_u16(buf, l4_len as u16);
    buf.extend_from_slice(&[IPPROTO_UDP, 64]);
    buf.extend_from_slice(&flow.src.octets());
    buf.extend_from_slice(&flow.dst.octets());
    put_u16(buf, flow.src_port);
    put_u16(buf, flow.dst_port);
    put_u16(buf, l4_len as u16);
    put_u16(buf, 0);
    put_payload(buf, payload_len);
    let l4 = ETH_HLEN + IPV6_HLEN;
    let c = l4_checksum_v6(&flow.src.octets(), &flow.dst.octets(), IPPROTO_UDP, &buf[l4..]);
    set_u16(buf, l4 + 6, if c == 0 { 0xffff } else { c });
    Ok(())
}

impl PayloadTooLong {
    /// Restates a limit on the L4 length as a limit on the payload.
    fn minus(self, header: usize) -> Self {
        PayloadTooLong {
            payload_len: self.payload_len.saturating_sub(header),
            max: self.max - header,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{fold, pseudo_header_v4, sum};

    #[test]
    fn udp4_64_byte_frame() {
        let mut buf = Vec::new();
        udp4(&mut buf, &Flow4::default(), 18).expect("fits");
        assert_eq!(buf.len(), 60);
        assert_eq!(&buf[12..14], &[0x08, 0x00]);
        assert_eq!(&buf[16..18], &46u16.to_be_bytes(), "IPv4 total length");
        assert_eq!(&buf[26..30], &[10, 0, 0, 1]);
        assert_eq!(&buf[30..34], &[10, 0, 0, 2]);
        assert_eq!(&buf[34..36], &1234u16.to_be_bytes());
        assert_eq!(&buf[36..38], &5678u16.to_be_bytes());
        assert_eq!(&buf[38..40], &26u16.to_be_bytes(), "UDP length");
        assert_eq!(checksum(&buf[14..34]), 0, "IPv4 header checksum");
        let pseudo = pseudo_header_v4([10, 0, 0, 1], [10, 0, 0, 2], IPPROTO_UDP, 26);
        assert_eq!(fold(sum(pseudo, &buf[34..])), 0, "UDP checksum");
    }

    #[test]
    fn tcp4_and_icmp4_checksums_verify() {
        let mut buf = Vec::new();
        let flow = Flow4 { src: Ipv4Addr::new(192, 0, 2, 7), ..Flow4::default() };
        tcp4(&mut buf, &flow, tcp_flags::SYN, 5).expect("fits");
        assert_eq!(buf.len(), 14 + 20 + 20 + 5);
        assert_eq!(buf[47], tcp_flags::SYN);
        let pseudo = pseudo_header_v4(flow.src.octets(), flow.dst.octets(), IPPROTO_TCP, 25);
        assert_eq!(fold(sum(pseudo, &buf[34..])), 0);
        icmp4_echo(&mut buf, &flow, 7, 9, 56).expect("fits");
        assert_eq!(buf.len(), 98, "the size of a default ping");
        assert_eq!(checksum(&buf[34..]), 0);
        assert_eq!(buf[23], IPPROTO_ICMP);
    }

    #[test]
    fn udp6_checksum_verifies() {
        let mut buf = Vec::new();
        let flow = Flow6::default();
        udp6(&mut buf, &flow, 11).expect("fits");
        assert_eq!(buf.len(), 14 + 40 + 8 + 11);
        assert_eq!(&buf[18..20], &19u16.to_be_bytes());
        let seg = &buf[54..];
        assert_eq!(l4_checksum_v6(&flow.src.octets(), &flow.dst.octets(), IPPROTO_UDP, seg), 0);
    }

    #[test]
    fn oversized_payload_is_an_error() {
        let mut buf = Vec::new();
        let err = udp4(&mut buf, &Flow4::default(), 70_000).expect_err("too long");
        assert_eq!(err, PayloadTooLong { payload_len: 70_000, max: 65_535 - 28 });
        assert!(udp4(&mut buf, &Flow4::default(), 65_535 - 28).is_ok());
        assert_eq!(buf.len(), 14 + 65_535);
        assert!(udp6(&mut buf, &Flow6::default(), 65_528).is_err());
    }
}
