//! TAP: frames written enter the kernel's stack, frames the kernel sends are read back.

use std::time::Duration;

use spine_ports::craft::{icmp4_echo, Flow4};
use spine_ports::{Port, PortErrorKind, TapPort};

use crate::{pool, rx_n, rx_whole, tx_all, tx_chains};
use spine_testnet::netns::NetNs;
use spine_testnet::raw::as_nobody;

const PEER_MAC: [u8; 6] = [0x02, 0x5e, 0, 0, 0, 0x99];

#[test]
fn kernel_answers_an_echo_request_through_the_tap() {
    let Some(ns) = NetNs::new() else { return };
    let (port, mac) = ns.enter(|| {
        let port = TapPort::open("sptap0", 7).unwrap();
        port.set_up(true).unwrap();
        let mac = port.mac().unwrap();
        (port, mac)
    });
    assert_eq!(port.name(), "sptap0");
    // A private test subnet inside the namespace; the peer's MAC is known, so the
    // kernel need not ask with ARP first.
    ns.ip("addr add 192.168.77.1/24 dev sptap0");
    ns.ip("neigh replace 192.168.77.2 lladdr 02:5e:00:00:00:99 dev sptap0 nud permanent");
    let mut port = port;
    ns.enter(|| {
        let pool = pool(64);
        let mut cache = pool.cache();
        let flow = Flow4 {
            src_mac: PEER_MAC,
            dst_mac: mac,
            src: "192.168.77.2".parse().unwrap(),
            dst: "192.168.77.1".parse().unwrap(),
            ..Flow4::default()
        };
        let mut requests = Vec::new();
        for seq in 0..3u16 {
            let mut f = Vec::new();
            icmp4_echo(&mut f, &flow, 0x4242, seq, 32).unwrap();
            requests.push(f);
        }
        tx_all(&mut port, &mut cache, &requests);
        let got = rx_n(&mut port, &mut cache, 3, Duration::from_secs(2));
        assert_eq!(got.len(), 3, "echo replies");
        for (seq, (reply, req)) in got.iter().zip(&requests).enumerate() {
            assert_eq!(&reply[0..6], &PEER_MAC, "to the requester's MAC");
            assert_eq!(&reply[6..12], &mac, "from the TAP's MAC");
            assert_eq!(reply[23], 1, "ICMP");
            assert_eq!(&reply[26..30], &req[30..34], "source is the request's destination");
            assert_eq!(&reply[30..34], &req[26..30]);
            assert_eq!(reply[34], 0, "echo reply");
            assert_eq!(u16::from_be_bytes([reply[38], reply[39]]), 0x4242);
            assert_eq!(u16::from_be_bytes([reply[40], reply[41]]), seq as u16);
            assert_eq!(&reply[42..], &req[42..], "payload echoed");
        }
        let st = port.stats();
        assert_eq!((st.tx_packets, st.rx_packets), (3, 3));
        assert_eq!(st.rx_drops.total() + st.tx_drops.total(), 0);
    });
    drop(port);
    // The device goes away with the port.
    assert!(!ns.ip("link show").contains("sptap0"));
}

/// With MTU 9,000 on the TAP, jumbo echo requests written as chains (one `writev`
/// each) reach the kernel whole, and its jumbo replies are read back as chains; a small
/// request between them stays a single buffer. Every buffer comes back.
#[test]
fn jumbo_echoes_cross_the_tap_as_chains() {
    let Some(ns) = NetNs::new() else { return };
    let (port, mac) = ns.enter(|| {
        let port = TapPort::open("sptap3", 7).unwrap();
        port.set_mtu(9000).unwrap();
        port.set_up(true).unwrap();
        let mac = port.mac().unwrap();
        (port, mac)
    });
    assert!(port.takes_frags());
    ns.ip("addr add 192.168.78.1/24 dev sptap3");
    ns.ip("neigh replace 192.168.78.2 lladdr 02:5e:00:00:00:99 dev sptap3 nud permanent");
    let mut port = port;
    ns.enter(|| {
        let pool = pool(256);
        let mut cache = pool.cache();
        let flow = Flow4 {
            src_mac: PEER_MAC,
            dst_mac: mac,
            src: "192.168.78.2".parse().unwrap(),
            dst: "192.168.78.1".parse().unwrap(),
            ..Flow4::default()
        };
        let payloads = [8000usize, 32, 4000, 8972];
        let requests: Vec<Vec<u8>> = payloads
            .iter()
            .enumerate()
            .map(|(seq, &n)| {
                let mut f = Vec::new();
                icmp4_echo(&mut f, &flow, 0x4343, seq as u16, n).unwrap();
                f
            })
            .collect();
        tx_chains(&mut port, &mut cache, &requests);
        let (got, chains) = rx_whole(&mut port, &mut cache, 4, Duration::from_secs(2));
        assert_eq!(got.len(), 4, "echo replies: {:?}", port.stats());
        assert_eq!(chains, 3, "the three jumbo replies came as chains");
        for (seq, (reply, req)) in got.iter().zip(&requests).enumerate() {
            assert_eq!(reply.len(), req.len(), "reply {seq} as long as its request");
            assert_eq!(&reply[0..6], &PEER_MAC);
            assert_eq!(reply[34], 0, "echo reply");
            assert_eq!(u16::from_be_bytes([reply[40], reply[41]]), seq as u16);
            assert!(reply[42..] == req[42..], "payload {seq} echoed byte for byte");
        }
        let st = port.stats();
        assert_eq!((st.tx_packets, st.rx_packets), (4, 4));
        let bytes: u64 = requests.iter().map(|r| r.len() as u64).sum();
        assert_eq!((st.tx_bytes, st.rx_bytes), (bytes, bytes));
        assert_eq!(st.rx_drops.total() + st.tx_drops.total(), 0, "{st:?}");
        drop(cache);
        assert_eq!(pool.shared_free(), 256, "every buffer, fragments too, came back");
    });
}

#[test]
fn tap_errors_are_clear() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let e = TapPort::open("this-name-is-too-long", 0).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::Config { .. }), "{e}");
        let e = as_nobody(|| TapPort::open("sptap1", 0).unwrap_err());
        assert!(matches!(e.kind, PortErrorKind::PermissionDenied { .. }), "{e}");
        assert!(e.to_string().starts_with("port sptap1: permission denied"), "{e}");
        // A down TAP drops what it is sent, and says so in its counters.
        let mut port = TapPort::open("", 0).unwrap();
        assert!(port.name().starts_with("tap"), "{}", port.name());
        let pool = pool(8);
        let mut cache = pool.cache();
        tx_all(&mut port, &mut cache, &[vec![0u8; 60]]);
        assert_eq!(port.stats().tx_drops.device, 1);
    });
}

#[test]
fn a_tap_takes_the_mac_and_mtu_it_is_given() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let port = TapPort::open("sptap2", 0).unwrap();
        port.set_mac([0x02, 0x5e, 0, 0, 0x12, 0x34]).unwrap();
        port.set_mtu(1400).unwrap();
        port.set_up(true).unwrap();
        assert_eq!(port.mac().unwrap(), [0x02, 0x5e, 0, 0, 0x12, 0x34]);
        // The address may change while the device is up (a TAP allows live changes).
        port.set_mac([0x02, 0x5e, 0, 0, 0x12, 0x35]).unwrap();
        assert_eq!(port.mac().unwrap(), [0x02, 0x5e, 0, 0, 0x12, 0x35]);
        let shown = ns.ip("link show dev sptap2");
        assert!(shown.contains("mtu 1400"), "{shown}");
        let e = port.set_mtu(10).unwrap_err();
        assert!(e.to_string().contains("SIOCSIFMTU"), "{e}");
    });
}
