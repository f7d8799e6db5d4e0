//! The programs that rewrite frames and send them back out: mac_swap, rewrite, encap,
//! vlan, trim and icmp_echo.

use crate::harness::{le_u32, Loaded};
use crate::packet::*;
use crate::{XDP_DROP, XDP_PASS, XDP_TX};

fn swapped_macs(frame: &[u8]) -> Vec<u8> {
    let mut out = frame.to_vec();
    out[..6].copy_from_slice(&frame[6..12]);
    out[6..12].copy_from_slice(&frame[..6]);
    out
}

#[test]
fn mac_swap_reflects_every_frame() {
    let Some(k) = Loaded::load("mac_swap") else { return };
    let frames = [
        ether(MAC_B, MAC_A, 0x1234, &[]),
        udp4_frame(1000, 2000, &filler(100)),
        ether(MAC_B, MAC_A, ETH_P_IP, &filler(3520 - 14)),
    ];
    for frame in frames {
        let run = k.run(&frame);
        assert_eq!(run.verdict, XDP_TX);
        assert_eq!(run.out, swapped_macs(&frame), "{} bytes", frame.len());
    }
}

/// rewrite.c's DEFAULT_BACKEND, 198.51.100.10.
const BACKEND: [u8; 4] = [198, 51, 100, 10];

#[test]
fn rewrite_nats_decrements_ttl_and_keeps_checksums_valid() {
    let Some(k) = Loaded::load("rewrite") else { return };

    // UDP: the result must be the datagram built from scratch for the new destination.
    let payload = filler(37);
    let frame = udp4_frame(5000, 53, &payload);
    let run = k.run(&frame);
    assert_eq!(run.verdict, XDP_TX);
    let seg = udp(&IP_A, &BACKEND, 5000, 53, &payload);
    assert_eq!(run.out, ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, BACKEND, PROTO_UDP, 63, &seg)));

    // TCP behind 4 bytes of IP options (NOPs), and a rule from the control plane.
    let to = [203, 0, 113, 7];
    k.update("nat_rules", &IP_B, &to);
    let seg = tcp(&IP_A, &IP_B, 40000, 80, b"GET / HTTP/1.0\r\n\r\n");
    let ip = ipv4_with(IP_A, IP_B, PROTO_TCP, 9, 0x10, &[1, 1, 1, 1], &seg);
    let run = k.run(&ether(MAC_B, MAC_A, ETH_P_IP, &ip));
    assert_eq!(run.verdict, XDP_TX);
    let ip_out = &run.out[14..];
    assert_eq!(ip_out[8], 8, "TTL decremented");
    assert_eq!(ip_out[16..20], to);
    assert!(ipv4_checksum_ok(&ip_out[..24]), "IP checksum after the rewrite");
    assert!(l4_checksum_ok(&IP_A, &to, PROTO_TCP, &ip_out[24..]), "TCP checksum");
    assert_eq!(ip_out[24..], tcp(&IP_A, &to, 40000, 80, b"GET / HTTP/1.0\r\n\r\n")[..]);

    // A UDP checksum of zero means "none" and stays zero.
    let mut seg = udp(&IP_A, &IP_B, 1, 2, b"x");
    seg[6..8].fill(0);
    let run = k.run(&ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_UDP, 64, &seg)));
    assert_eq!(run.verdict, XDP_TX);
    assert_eq!(be16(&run.out, 14 + 20 + 6), 0);
    assert!(ipv4_checksum_ok(&run.out[14..34]));
}

#[test]
fn rewrite_drops_expiring_and_malformed_datagrams_and_passes_others() {
    let Some(k) = Loaded::load("rewrite") else { return };
    let seg = udp(&IP_A, &IP_B, 1, 2, b"x");
    let ttl1 = ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_UDP, 1, &seg));
    let mut truncated = udp4_frame(1, 2, &[]);
    truncated.truncate(14 + 19);
    let mut too_long = udp4_frame(1, 2, b"abcd");
    too_long[16..18].copy_from_slice(&500u16.to_be_bytes());
    let mut bad_ihl = udp4_frame(1, 2, b"abcd");
    bad_ihl[14] = 0x44;
    for (what, frame) in [
        ("TTL 1", ttl1),
        ("19-byte IP header", truncated),
        ("tot_len 500", too_long),
        ("IHL 4", bad_ihl),
    ] {
        let run = k.run(&frame);
        assert_eq!(run.verdict, XDP_DROP, "{what}");
        assert_eq!(run.out, frame, "{what}: a dropped frame is not touched");
    }
    let arp = arp_frame();
    let run = k.run(&arp);
    assert_eq!((run.verdict, run.out), (XDP_PASS, arp));
}

/// encap.c's flow hash (lookup3's final mix) over the addresses as loaded by a
/// little-endian CPU, and the protocol.
fn encap_flow_hash(src: [u8; 4], dst: [u8; 4], proto: u8) -> u32 {
    let (mut a, mut b, mut c) =
        (u32::from_le_bytes(src), u32::from_le_bytes(dst), u32::from(proto));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

/// The outer IPv4 header encap.c writes: DF, TTL 64, ID 0, 192.0.2.1 -> 192.0.2.2.
fn outer_ipv4(tos: u8, proto: u8, payload_len: usize) -> Vec<u8> {
    let mut h = vec![0x45, tos];
    h.extend_from_slice(&((20 + payload_len) as u16).to_be_bytes());
    h.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2]);
    let check = checksum(&[&h]);
    h[10..12].copy_from_slice(&check.to_be_bytes());
    h
}

#[test]
fn encap_pushes_ipip_and_gue_headers() {
    let Some(k) = Loaded::load("encap") else { return };

    // TCP goes IP-in-IP: new Ethernet header (MACs swapped), outer IPv4, the datagram.
    let seg = tcp(&IP_A, &IP_B, 40000, 443, &filler(64));
    let inner = ipv4_with(IP_A, IP_B, PROTO_TCP, 64, 0xb8, &[], &seg);
    let run = k.run(&ether(MAC_B, MAC_A, ETH_P_IP, &inner));
    assert_eq!(run.verdict, XDP_TX);
    let outer = outer_ipv4(0xb8, 4, inner.len());
    assert!(ipv4_checksum_ok(&outer));
    assert_eq!(run.out, [ether(MAC_A, MAC_B, ETH_P_IP, &outer), inner].concat());

    // UDP goes in GUE, with 8 bytes of metadata in front of the frame.
    let inner = ipv4(IP_A, IP_B, PROTO_UDP, 64, &udp(&IP_A, &IP_B, 7, 9, &filler(30)));
    let run = k.run(&ether(MAC_B, MAC_A, ETH_P_IP, &inner));
    assert_eq!(run.verdict, XDP_TX);
    let hash = encap_flow_hash(IP_A, IP_B, PROTO_UDP);
    let mut meta = hash.to_le_bytes().to_vec();
    meta.extend_from_slice(&(inner.len() as u16).to_le_bytes());
    meta.extend_from_slice(&[2, 0]);
    let mut udp_gue = (0xc000 | (hash & 0x3fff) as u16).to_be_bytes().to_vec();
    udp_gue.extend_from_slice(&6080u16.to_be_bytes());
    udp_gue.extend_from_slice(&((inner.len() + 12) as u16).to_be_bytes());
    udp_gue.extend_from_slice(&[0, 0, 0, 4, 0, 0]);
    let outer = outer_ipv4(0, PROTO_UDP, 12 + inner.len());
    let want = [meta, ether(MAC_A, MAC_B, ETH_P_IP, &[outer, udp_gue, inner].concat())].concat();
    assert_eq!(run.out, want);
    assert_eq!(le_u32(&run.out, 0), hash);

    // Not IPv4: passed untouched. Malformed IPv4: dropped.
    let v6 = ether(MAC_B, MAC_A, ETH_P_IPV6, &ipv6(IP6_A, IP6_B, PROTO_UDP, &[0; 8]));
    assert_eq!(k.run(&v6).out, v6);
    assert_eq!(k.run(&v6).verdict, XDP_PASS);
    let mut bad_ihl = udp4_frame(1, 2, b"abcd");
    bad_ihl[14] = 0x44;
    let mut too_long = udp4_frame(1, 2, b"abcd");
    too_long[16..18].copy_from_slice(&100u16.to_be_bytes());
    assert_eq!(k.run(&bad_ihl).verdict, XDP_DROP);
    assert_eq!(k.run(&too_long).verdict, XDP_DROP);

    // IPIP, GUE, no metadata, not IPv4 (twice), malformed.
    assert_eq!(k.counters("encap_stats"), [1, 1, 0, 2, 2]);
}

#[test]
fn vlan_pushes_and_pops_tags() {
    let Some(k) = Loaded::load("vlan") else { return };

    // Untagged IPv4 with precedence 5: tagged with VID 100, PCP 5, and sent out.
    let ip = ipv4_with(IP_A, IP_B, PROTO_UDP, 64, 0xa0, &[], &udp(&IP_A, &IP_B, 1, 2, b"hi"));
    let frame = ether(MAC_B, MAC_A, ETH_P_IP, &ip);
    let run = k.run(&frame);
    assert_eq!(run.verdict, XDP_TX);
    let tagged =
        [&frame[..12], &ETH_P_8021Q.to_be_bytes(), &vlan_tag(5 << 13 | 100, ETH_P_IP), &ip]
            .concat();
    assert_eq!(run.out, tagged);

    // Tagged: the tag comes off and the frame goes up; the result is the untagged frame.
    let run = k.run(&tagged);
    assert_eq!((run.verdict, &run.out), (XDP_PASS, &frame));

    // QinQ: only the S-tag comes off.
    let c_tagged = [&vlan_tag(7, ETH_P_IP)[..], &ip].concat();
    let qinq = [&frame[..12], &ETH_P_8021AD.to_be_bytes(), &vlan_tag(3000, ETH_P_8021Q), &c_tagged]
        .concat();
    let run = k.run(&qinq);
    assert_eq!(run.verdict, XDP_PASS);
    assert_eq!(run.out, [&frame[..12], &ETH_P_8021Q.to_be_bytes(), &c_tagged].concat());

    // A tag cut short is dropped.
    let short = ether(MAC_B, MAC_A, ETH_P_8021Q, &[0, 100]);
    assert_eq!(k.run(&short).verdict, XDP_DROP);

    // The control plane sets the access VLAN; ARP has no IP precedence.
    k.update("vlan_config", &0u32.to_le_bytes(), &200u32.to_le_bytes());
    let arp = arp_frame();
    let run = k.run(&arp);
    assert_eq!(run.verdict, XDP_TX);
    assert_eq!(
        run.out,
        [&arp[..12], &ETH_P_8021Q.to_be_bytes(), &vlan_tag(200, ETH_P_ARP), &arp[14..]].concat()
    );

    // Pushed, popped, truncated.
    assert_eq!(k.counters("vlan_stats"), [2, 2, 1]);
}

#[test]
fn trim_snaps_long_frames_and_pads_runts() {
    let Some(k) = Loaded::load("trim") else { return };
    for len in [129, 200, 3520] {
        let frame = filler(len);
        let run = k.run(&frame);
        assert_eq!(run.verdict, XDP_TX, "{len} bytes");
        assert_eq!(run.out, frame[..128], "{len} bytes: cut to the snap length");
    }
    for len in [14, 40, 59] {
        let frame = filler(len);
        let run = k.run(&frame);
        assert_eq!(run.verdict, XDP_PASS, "{len} bytes");
        assert_eq!(run.out, [frame, vec![0xa5; 60 - len]].concat(), "{len} bytes: padded");
    }
    for len in [60, 128] {
        let frame = filler(len);
        let run = k.run(&frame);
        assert_eq!((run.verdict, run.out), (XDP_PASS, frame), "{len} bytes: unchanged");
    }
    // Snapped, bytes cut, padded, bytes padded, unchanged.
    let cut = (129 - 128) + (200 - 128) + (3520 - 128);
    assert_eq!(k.counters("trim_stats"), [3, cut, 3, 46 + 20 + 1, 2]);
}

#[test]
fn icmp_echo_answers_requests_in_place() {
    let Some(k) = Loaded::load("icmp_echo") else { return };

    // IPv4: addresses swapped, TTL reset to 64, type 0; all checksums as if built anew.
    let payload = filler(56);
    let request = ipv4(IP_A, IP_B, PROTO_ICMP, 17, &icmp_echo(8, &payload));
    let run = k.run(&ether(MAC_B, MAC_A, ETH_P_IP, &request));
    assert_eq!(run.verdict, XDP_TX);
    let reply = ipv4(IP_B, IP_A, PROTO_ICMP, 64, &icmp_echo(0, &payload));
    assert_eq!(run.out, ether(MAC_A, MAC_B, ETH_P_IP, &reply));

    // IPv6: addresses swapped, hop limit 64, type 129.
    let mut request = ipv6(IP6_A, IP6_B, PROTO_ICMPV6, &icmpv6_echo(IP6_A, IP6_B, 128, &payload));
    request[7] = 3;
    let run = k.run(&ether(MAC_B, MAC_A, ETH_P_IPV6, &request));
    assert_eq!(run.verdict, XDP_TX);
    let reply = ipv6(IP6_B, IP6_A, PROTO_ICMPV6, &icmpv6_echo(IP6_B, IP6_A, 129, &payload));
    assert_eq!(run.out, ether(MAC_A, MAC_B, ETH_P_IPV6, &reply));

    // Left to the host: multicast, replies, and a request longer than its frame.
    let multicast = ether(
        MAC_B,
        MAC_A,
        ETH_P_IP,
        &ipv4(IP_A, [224, 0, 0, 1], PROTO_ICMP, 1, &icmp_echo(8, &[])),
    );
    let reply =
        ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_ICMP, 64, &icmp_echo(0, &[])));
    let mut cut =
        ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_ICMP, 64, &icmp_echo(8, &payload)));
    cut.truncate(cut.len() - 1);
    for frame in [multicast, reply, cut] {
        let run = k.run(&frame);
        assert_eq!((run.verdict, run.out), (XDP_PASS, frame));
    }
    assert_eq!(k.counters("echo_stats"), [1, 1]);
}
