//! The programs that classify and count: counter, parser, calls, global_data, hash_map.

use crate::harness::{le_u64, Loaded};
use crate::packet::*;
use crate::{XDP_DROP, XDP_PASS, XDP_TX};

#[test]
fn counter_counts_per_length_class() {
    let Some(k) = Loaded::load("counter") else { return };
    for len in [60, 64, 65, 100, 1518, 1519, 3520] {
        let frame = filler(len);
        let run = k.run(&frame);
        assert_eq!((run.verdict, run.out), (XDP_PASS, frame));
    }
    // (packets, bytes) per class: <=64, <=127, <=255, <=511, <=1023, <=1518, longer.
    let want: [(u64, u64); 7] =
        [(2, 124), (2, 165), (0, 0), (0, 0), (0, 0), (1, 1518), (2, 1519 + 3520)];
    for map in ["len_stats", "len_stats_percpu"] {
        let mut entries = k.map(map);
        entries.sort_by(|a, b| a.key.cmp(&b.key));
        let got: Vec<(u64, u64)> = entries
            .iter()
            .map(|e| {
                let sum = |at| e.values.iter().map(|v| le_u64(v, at)).sum::<u64>();
                (sum(0), sum(8))
            })
            .collect();
        assert_eq!(got, want, "{map}");
    }
}

// parser.c's `proto_stats` indices.
const FRAMES: usize = 0;
const VLAN: usize = 1;
const ARP: usize = 2;
const IPV4: usize = 3;
const IPV6: usize = 4;
const FRAGMENT: usize = 5;
const TCP: usize = 6;
const UDP: usize = 7;
const ICMP: usize = 8;
const ICMPV6: usize = 9;
const OTHER_L3: usize = 10;
const OTHER_L4: usize = 11;
const MALFORMED: usize = 12;
const BLOCKED: usize = 13;

#[test]
fn parser_passes_good_frames_and_drops_malformed_ones() {
    let Some(k) = Loaded::load("parser") else { return };
    let udp4 = udp4_frame(1000, 2000, b"hello");
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut frame = udp4.clone();
        f(&mut frame);
        frame
    };
    let tcp6 = ipv6(IP6_A, IP6_B, PROTO_TCP, &tcp(&IP6_A, &IP6_B, 1, 80, b""));
    let mut udp6_hbh = vec![PROTO_UDP, 0, 1, 4, 0, 0, 0, 0]; // hop-by-hop, PadN
    udp6_hbh.extend_from_slice(&udp(&IP6_A, &IP6_B, 1, 2, b"x"));
    let mut arp_short = arp_frame();
    arp_short.truncate(14 + 8 + 12);
    let frag = ipv4(IP_A, IP_B, PROTO_UDP, 64, &filler(16));
    let seg_doff4 = {
        let mut t = tcp(&IP_A, &IP_B, 1, 80, b"");
        t[12] = 0x40;
        t
    };
    let gre = ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, 47, 64, &[0; 4]));
    let mut padded = udp4_frame(1, 2, b"ab");
    padded.resize(60, 0);

    let cases: Vec<(&str, Vec<u8>, u32, Vec<usize>)> = vec![
        ("IPv4 UDP", udp4.clone(), XDP_PASS, vec![IPV4, UDP]),
        ("IPv4 header cut at 19 bytes", udp4[..14 + 19].to_vec(), XDP_DROP, vec![MALFORMED]),
        ("IHL 4", with(&|f| f[14] = 0x44), XDP_DROP, vec![MALFORMED]),
        ("IHL 15, longer than the datagram", with(&|f| f[14] = 0x4f), XDP_DROP, vec![MALFORMED]),
        ("tot_len past the frame", with(&|f| f[17] += 1), XDP_DROP, vec![MALFORMED]),
        (
            "tot_len below the header",
            with(&|f| f[16..18].copy_from_slice(&[0, 19])),
            XDP_DROP,
            vec![MALFORMED],
        ),
        ("IP version 6 in an IPv4 frame", with(&|f| f[14] = 0x65), XDP_DROP, vec![MALFORMED]),
        (
            "IPv4 options and TCP",
            ether(
                MAC_B,
                MAC_A,
                ETH_P_IP,
                &ipv4_with(
                    IP_A,
                    IP_B,
                    PROTO_TCP,
                    64,
                    0,
                    &[1, 1, 1, 0],
                    &tcp(&IP_A, &IP_B, 1, 80, b"x"),
                ),
            ),
            XDP_PASS,
            vec![IPV4, TCP],
        ),
        (
            "TCP data offset 4",
            ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_TCP, 64, &seg_doff4)),
            XDP_DROP,
            vec![IPV4, MALFORMED],
        ),
        (
            "UDP length past the datagram",
            with(&|f| f[14 + 20 + 5] += 1),
            XDP_DROP,
            vec![IPV4, MALFORMED],
        ),
        ("UDP from chargen", udp4_frame(19, 2000, b"x"), XDP_DROP, vec![IPV4, UDP, BLOCKED]),
        (
            "ICMP echo",
            ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_ICMP, 64, &icmp_echo(8, b""))),
            XDP_PASS,
            vec![IPV4, ICMP],
        ),
        (
            "IPv4 fragment",
            ether(MAC_B, MAC_A, ETH_P_IP, &{
                let mut f = frag.clone();
                f[6] = 0x20;
                f
            }),
            XDP_PASS,
            vec![IPV4, FRAGMENT],
        ),
        ("GRE", gre, XDP_PASS, vec![IPV4, OTHER_L4]),
        ("Ethernet padding after the datagram", padded, XDP_PASS, vec![IPV4, UDP]),
        (
            "QinQ, IPv6, TCP",
            ether(
                MAC_B,
                MAC_A,
                ETH_P_8021AD,
                &[vlan_tag(5, ETH_P_8021Q), vlan_tag(6, ETH_P_IPV6), tcp6.clone()].concat(),
            ),
            XDP_PASS,
            vec![VLAN, VLAN, IPV6, TCP],
        ),
        (
            "IPv6 hop-by-hop, UDP",
            ether(MAC_B, MAC_A, ETH_P_IPV6, &ipv6(IP6_A, IP6_B, 0, &udp6_hbh)),
            XDP_PASS,
            vec![IPV6, UDP],
        ),
        (
            "ICMPv6 echo",
            ether(
                MAC_B,
                MAC_A,
                ETH_P_IPV6,
                &ipv6(IP6_A, IP6_B, PROTO_ICMPV6, &icmpv6_echo(IP6_A, IP6_B, 128, b"")),
            ),
            XDP_PASS,
            vec![IPV6, ICMPV6],
        ),
        (
            "IPv6 payload past the frame",
            ether(MAC_B, MAC_A, ETH_P_IPV6, &{
                let mut p = tcp6.clone();
                p[5] += 1;
                p
            }),
            XDP_DROP,
            vec![MALFORMED],
        ),
        (
            "IPv6 header cut at 30 bytes",
            ether(MAC_B, MAC_A, ETH_P_IPV6, &tcp6[..30]),
            XDP_DROP,
            vec![MALFORMED],
        ),
        ("ARP", arp_frame(), XDP_PASS, vec![ARP]),
        ("ARP addresses cut short", arp_short, XDP_DROP, vec![MALFORMED]),
        (
            "VLAN tag cut short",
            ether(MAC_B, MAC_A, ETH_P_8021Q, &[0, 5]),
            XDP_DROP,
            vec![MALFORMED],
        ),
        (
            "a third VLAN tag",
            ether(
                MAC_B,
                MAC_A,
                ETH_P_8021Q,
                &[vlan_tag(1, ETH_P_8021Q), vlan_tag(2, ETH_P_8021Q), vlan_tag(3, ETH_P_IP)]
                    .concat(),
            ),
            XDP_PASS,
            vec![VLAN, VLAN, OTHER_L3],
        ),
        ("unknown EtherType", ether(MAC_B, MAC_A, 0x88b5, &filler(46)), XDP_PASS, vec![OTHER_L3]),
    ];

    let mut want = [0u64; 14];
    for (what, frame, verdict, stats) in &cases {
        let run = k.run(frame);
        assert_eq!(run.verdict, *verdict, "{what}");
        assert_eq!(&run.out, frame, "{what}: the parser never changes a frame");
        want[FRAMES] += 1;
        for &s in stats {
            want[s] += 1;
        }
        assert_eq!(k.counters("proto_stats"), want, "{what}: proto_stats");
    }

    // A port the control plane blocks (key and value in host byte order).
    let dns = udp4_frame(1000, 5353, b"q");
    assert_eq!(k.run(&dns).verdict, XDP_PASS);
    k.update("blocked_udp_ports", &5353u16.to_le_bytes(), &[1]);
    assert_eq!(k.run(&dns).verdict, XDP_DROP);
    want[FRAMES] += 2;
    want[IPV4] += 2;
    want[UDP] += 2;
    want[BLOCKED] += 1;
    assert_eq!(k.counters("proto_stats"), want);
}

#[test]
fn calls_applies_the_acl_through_subprograms() {
    let Some(k) = Loaded::load("calls") else { return };
    let icmp = ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(IP_A, IP_B, PROTO_ICMP, 64, &icmp_echo(8, b"")));
    // (frame, verdict, index in rule_hits; 6 = no rule matched)
    let cases = [
        (tcp4_frame(1000, 23, b""), XDP_DROP, 0),
        (tcp4_frame(1000, 139, b""), XDP_DROP, 1),
        (udp4_frame(1000, 137, b""), XDP_DROP, 2),
        (tcp4_frame(1000, 445, b""), XDP_DROP, 3),
        (udp4_frame(1000, 53, b""), XDP_PASS, 4),
        (udp4_frame(1000, 500, b""), XDP_DROP, 5),
        (tcp4_frame(1000, 80, b""), XDP_PASS, 6),
        (udp4_frame(53, 2000, b""), XDP_PASS, 6),
        (icmp, XDP_PASS, 6),
    ];
    let mut want = [0u64; 7];
    for (frame, verdict, rule) in &cases {
        let run = k.run(frame);
        assert_eq!((run.verdict, &run.out), (*verdict, frame), "rule {rule}");
        want[*rule] += 1;
    }
    // Uncounted: not IPv4 passes, an IPv4 header or port pair cut short drops.
    let arp = arp_frame();
    assert_eq!(k.run(&arp).verdict, XDP_PASS);
    let tcp = tcp4_frame(1000, 80, b"");
    assert_eq!(k.run(&tcp[..14 + 19]).verdict, XDP_DROP);
    assert_eq!(k.run(&tcp[..14 + 20 + 3]).verdict, XDP_DROP);

    assert_eq!(k.counters("rule_hits"), want);
    let buckets = k.counters("flow_buckets");
    assert_eq!(buckets.len(), 16);
    assert_eq!(buckets.iter().sum::<u64>(), cases.len() as u64);
}

#[test]
fn calls_hashes_both_directions_of_a_flow_alike() {
    let Some(k) = Loaded::load("calls") else { return };
    let forward = tcp4_frame(40000, 80, b"");
    let seg = tcp(&IP_B, &IP_A, 80, 40000, b"");
    let reverse = ether(MAC_A, MAC_B, ETH_P_IP, &ipv4(IP_B, IP_A, PROTO_TCP, 64, &seg));
    assert_eq!(k.run(&forward).verdict, XDP_PASS);
    let buckets = k.counters("flow_buckets");
    let bucket = buckets.iter().position(|&n| n == 1).expect("one bucket counted");
    assert_eq!(k.run(&reverse).verdict, XDP_PASS);
    let buckets = k.counters("flow_buckets");
    assert_eq!(buckets[bucket], 2, "the reply lands in the request's bucket");
    assert_eq!(buckets.iter().sum::<u64>(), 2);
}

#[test]
fn global_data_reflects_probes_and_drops_oversize_frames() {
    let Some(k) = Loaded::load("global_data") else { return };
    let rodata = k.globals(".rodata");
    assert_eq!(rodata["max_frame_len"], 1514);
    assert_eq!(rodata["probe_magic"], "spine-probe");

    let probe = udp4_frame(1, 2, b"spine-probe and then some");
    let run = k.run(&probe);
    assert_eq!(run.verdict, XDP_TX);
    let mut want = probe.clone();
    want[..6].copy_from_slice(&MAC_A);
    want[6..12].copy_from_slice(&MAC_B);
    assert_eq!(run.out, want);

    let not_probe = udp4_frame(1, 2, b"spine-probf");
    assert_eq!(k.run(&not_probe).verdict, XDP_PASS);
    assert_eq!(k.run(&filler(1514)).verdict, XDP_PASS);
    assert_eq!(k.run(&filler(1515)).verdict, XDP_DROP);

    let stats = &k.globals(".bss")["stats"];
    let want =
        serde_json::json!({"frames": 4, "passed": 2, "oversize": 1, "policed": 0, "probes": 1});
    assert_eq!(stats, &want);
    let data = k.globals(".data");
    // Two credits spent; the third frame to take one (of refill_every = 4) is next.
    assert_eq!((data["credits"].clone(), data["frames_to_refill"].clone()), (30.into(), 2.into()));
}

#[test]
fn global_data_polices_with_a_token_bucket_in_data() {
    let Some(k) = Loaded::load("global_data") else { return };
    // burst 32, +3 credits every 4th frame: each block of 4 frames spends one credit net,
    // so before frame 4k+3 there are 30 - k credits. The first frame without one is
    // 4 * 30 + 3 = 123; from then on every 4th frame (127, ...) finds the bucket empty.
    let frame = udp4_frame(1, 2, b"x");
    let mut dropped = Vec::new();
    for i in 1..=128 {
        match k.run(&frame).verdict {
            XDP_PASS => {}
            XDP_DROP => dropped.push(i),
            v => panic!("frame {i}: verdict {v}"),
        }
    }
    assert_eq!(dropped, [123, 127]);
    let stats = &k.globals(".bss")["stats"];
    let want =
        serde_json::json!({"frames": 128, "passed": 126, "oversize": 0, "policed": 2, "probes": 0});
    assert_eq!(stats, &want);
    let data = k.globals(".data");
    assert_eq!((data["credits"].clone(), data["frames_to_refill"].clone()), (2.into(), 4.into()));
}

// hash_map.c's `meter_stats` indices.
const NEW_FLOW: usize = 0;
const EXPORTED: usize = 1;
const UNTRACKED: usize = 2;
const NEW_SOURCE: usize = 4;
const SOURCES_FULL: usize = 5;
const NOT_IP: usize = 6;

/// A `struct flow_key` of hash_map.c for an IPv4 UDP flow.
fn flow_key(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
    let mut key = [&src[..], &[0; 12], &dst, &[0; 12]].concat();
    key.extend_from_slice(&sport.to_be_bytes());
    key.extend_from_slice(&dport.to_be_bytes());
    key.extend_from_slice(&[PROTO_UDP, 4, 0, 0]);
    key
}

#[test]
fn hash_map_meters_exports_and_fills_up() {
    let Some(k) = Loaded::load("hash_map") else { return };
    let frame = udp4_frame(1000, 2000, b"payload");
    let len = frame.len() as u64;
    for _ in 0..7 {
        assert_eq!(k.run(&frame).verdict, XDP_PASS);
    }
    let flows = k.map("flows");
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0].key, flow_key(IP_A, IP_B, 1000, 2000));
    assert_eq!((le_u64(&flows[0].values[0], 0), le_u64(&flows[0].values[0], 8)), (7, 7 * len));

    // The 8th frame exports the flow: its record is deleted.
    assert_eq!(k.run(&frame).verdict, XDP_PASS);
    assert!(k.map("flows").is_empty());
    let sources = k.map("sources");
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].key, [&IP_A[..], &[0; 12]].concat());
    assert_eq!(sources[0].values.iter().map(|v| le_u64(v, 0)).sum::<u64>(), 8);

    // 65 new flows from 65 new sources into tables of 64: the flow table takes 64, the
    // source table (which holds IP_A already) 63; the rest fail with E2BIG.
    for i in 0..65u8 {
        let src = [10, 1, 0, i];
        let seg = udp(&src, &IP_B, 1000, 2000, b"x");
        let frame = ether(MAC_B, MAC_A, ETH_P_IP, &ipv4(src, IP_B, PROTO_UDP, 64, &seg));
        assert_eq!(k.run(&frame).verdict, XDP_PASS);
    }
    assert_eq!(k.map("flows").len(), 64);
    assert_eq!(k.map("sources").len(), 64);
    assert_eq!(k.run(&arp_frame()).verdict, XDP_PASS);

    let mut want = [0u64; 7];
    want[NEW_FLOW] = 1 + 64;
    want[EXPORTED] = 1;
    want[UNTRACKED] = 1;
    want[NEW_SOURCE] = 1 + 63;
    want[SOURCES_FULL] = 2;
    want[NOT_IP] = 1;
    assert_eq!(k.counters("meter_stats"), want);
}
