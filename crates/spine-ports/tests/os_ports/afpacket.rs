//! AF_PACKET with TPACKET_V3 rings on a veth pair.

use std::time::Duration;

use spine_ports::{AfPacketConfig, AfPacketPort, Port, PortErrorKind};

use crate::{pool, rx_n, tx_all};
use spine_testnet::netns::NetNs;
use spine_testnet::raw::{as_nobody, frame, Raw};

const N: u32 = 300;

#[test]
fn receives_exactly_the_frames_sent_in_order() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.enter(|| {
        let pool = pool(512);
        let mut cache = pool.cache();
        let mut port = AfPacketPort::open(AfPacketConfig::new("pa")).unwrap();
        let peer = Raw::bind("pb");
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 7) % 1400)).collect();
        for f in &sent {
            peer.send(f);
        }
        let got = rx_n(&mut port, &mut cache, sent.len() + 1, Duration::from_secs(2));
        assert_eq!(got.len(), sent.len(), "received {} of {}", got.len(), sent.len());
        assert!(got == sent, "bytes or order differ");
        let st = port.stats();
        assert_eq!(st.rx_packets, u64::from(N));
        assert_eq!(st.rx_bytes, sent.iter().map(|f| f.len() as u64).sum::<u64>());
        assert_eq!(st.rx_drops.total(), 0, "{st:?}");
        drop(cache);
        assert_eq!(pool.shared_free(), 512, "every buffer came back");
    });
}

#[test]
fn transmits_frames_that_arrive_on_the_peer() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.enter(|| {
        let pool = pool(512);
        let mut cache = pool.cache();
        let cfg = AfPacketConfig { tx_frames: 64, ..AfPacketConfig::new("pa") };
        let mut port = AfPacketPort::open(cfg).unwrap();
        let peer = Raw::bind("pb");
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 13) % 1400)).collect();
        tx_all(&mut port, &mut cache, &sent);
        let got = peer.recv(sent.len() + 1, Duration::from_secs(2));
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "bytes or order differ");
        let st = port.stats();
        assert_eq!((st.tx_packets, st.tx_drops.total()), (u64::from(N), 0));
        // Our own transmissions are not received back.
        assert!(rx_n(&mut port, &mut cache, 1, Duration::from_millis(50)).is_empty());
        drop(cache);
        assert_eq!(pool.shared_free(), 512);
    });
}

#[test]
fn oversized_tx_frames_are_dropped_and_counted() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.enter(|| {
        let pool = pool(64);
        let mut cache = pool.cache();
        let cfg = AfPacketConfig { tx_frame_size: 512, ..AfPacketConfig::new("pa") };
        let mut port = AfPacketPort::open(cfg).unwrap();
        let peer = Raw::bind("pb");
        tx_all(&mut port, &mut cache, &[frame(1, 464), frame(2, 465), frame(3, 100)]);
        let got = peer.recv(3, Duration::from_millis(500));
        assert_eq!(got, vec![frame(1, 464), frame(3, 100)]);
        let st = port.stats();
        assert_eq!((st.tx_packets, st.tx_drops.too_big), (2, 1));
    });
}

#[test]
fn promiscuous_mode_lasts_while_open() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    let promisc = || ns.ip("-d link show pa").contains("promiscuity 1");
    let port = ns.enter(|| {
        AfPacketPort::open(AfPacketConfig { promiscuous: true, ..AfPacketConfig::new("pa") })
            .unwrap()
    });
    assert!(promisc());
    drop(port);
    assert!(!promisc());
}

#[test]
fn errors_name_the_interface_and_the_problem() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.ip("link set pa down");
    ns.enter(|| {
        let e = AfPacketPort::open(AfPacketConfig::new("nosuch0")).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::NoSuchInterface), "{e}");
        assert_eq!(e.to_string(), "port nosuch0: no such interface");
        let e = AfPacketPort::open(AfPacketConfig::new("pa")).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::LinkDown), "{e}");
        let e =
            AfPacketPort::open(AfPacketConfig { block_size: 1000, ..AfPacketConfig::new("pb") })
                .unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::Config { .. }), "{e}");
        let e = as_nobody(|| AfPacketPort::open(AfPacketConfig::new("pb")).unwrap_err());
        assert!(matches!(e.kind, PortErrorKind::PermissionDenied { .. }), "{e}");
        assert!(e.to_string().contains("pb"), "{e}");
    });
}
