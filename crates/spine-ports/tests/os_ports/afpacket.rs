//! AF_PACKET with TPACKET_V3 rings on a veth pair.

use std::time::Duration;

use spine_ports::{AfPacketConfig, AfPacketPort, Pool, PoolConfig, Port, PortErrorKind};

use crate::{pool, rx_n, rx_whole, tx_all, tx_chains};
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

/// A frame longer than a TX ring frame goes out whole through the side socket, in
/// order with the ring's; one longer than the interface's MTU is dropped and counted.
#[test]
fn frames_longer_than_a_ring_frame_go_out_whole_and_over_the_mtu_are_counted() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.enter(|| {
        let pool = pool(64);
        let mut cache = pool.cache();
        let cfg = AfPacketConfig { tx_frame_size: 512, ..AfPacketConfig::new("pa") };
        let mut port = AfPacketPort::open(cfg).unwrap();
        let peer = Raw::bind("pb");
        let sent = [frame(1, 464), frame(2, 465), frame(3, 100), frame(4, 1515), frame(5, 1514)];
        tx_all(&mut port, &mut cache, &sent);
        let got = peer.recv(5, Duration::from_millis(500));
        assert_eq!(got, vec![frame(1, 464), frame(2, 465), frame(3, 100), frame(5, 1514)]);
        let st = port.stats();
        assert_eq!((st.tx_packets, st.tx_drops.too_big, st.tx_drops.total()), (4, 1, 1));
        drop(cache);
        assert_eq!(pool.shared_free(), 64);
    });
}

/// Jumbo frames on a veth with MTU 9,000: each frame longer than a buffer is received
/// as a chain, bytes and order kept; chains sent go out as one frame each, in order
/// with the linear frames around them. Every buffer comes back.
#[test]
fn jumbo_frames_are_received_as_chains_and_chains_sent_whole() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.ip("link set pa mtu 9000");
    ns.ip("link set pb mtu 9000");
    ns.enter(|| {
        let pool = pool(512);
        let mut cache = pool.cache();
        let mut port = AfPacketPort::open(AfPacketConfig::new("pa")).unwrap();
        assert!(port.takes_frags());
        let peer = Raw::bind("pb");
        let lens = [60usize, 1792, 1793, 4000, 9014, 1500, 3840, 9014];
        let sent: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(i, &l)| frame(i as u32, l)).collect();
        for f in &sent {
            peer.send(f);
        }
        let (got, chains) = rx_whole(&mut port, &mut cache, sent.len() + 1, Duration::from_secs(2));
        assert_eq!(got.len(), sent.len(), "{:?}", port.stats());
        assert!(got == sent, "bytes or order differ");
        assert_eq!(chains, 5, "the frames over 1,792 bytes came as chains");
        let st = port.stats();
        assert_eq!(st.rx_bytes, lens.iter().sum::<usize>() as u64);
        assert_eq!(st.rx_drops.total(), 0, "{st:?}");

        let out: Vec<Vec<u8>> = [9014usize, 60, 4000, 1500, 9014]
            .iter()
            .enumerate()
            .map(|(i, &l)| frame(50 + i as u32, l))
            .collect();
        tx_chains(&mut port, &mut cache, &out);
        let seen = peer.recv(out.len() + 1, Duration::from_secs(2));
        assert!(seen == out, "each chain left as one frame, in order");
        let st = port.stats();
        assert_eq!((st.tx_packets, st.tx_drops.total()), (out.len() as u64, 0), "{st:?}");
        drop(port);
        drop(cache);
        assert_eq!(pool.shared_free(), 512, "every buffer, fragments too, came back");
    });
}

/// A jumbo frame that cannot be kept is dropped whole and counted, and the frames after
/// it still arrive: cut short by a ring whose blocks are smaller than it, longer than a
/// chain of small buffers holds (`too_big`), or more buffers than the pool has left
/// (`no_buffer`). No buffer is lost in any case.
#[test]
fn jumbo_frames_that_cannot_be_kept_are_counted_and_lose_no_buffer() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("pa", "pb");
    ns.ip("link set pa mtu 9000");
    ns.ip("link set pb mtu 9000");
    ns.enter(|| {
        let peer = Raw::bind("pb");
        let cases: [(&str, PoolConfig, AfPacketConfig); 3] = [
            (
                "cut short",
                PoolConfig::new(64),
                AfPacketConfig { block_size: 4096, ..AfPacketConfig::new("pa") },
            ),
            (
                "longer than a chain",
                PoolConfig { buf_size: 512, ..PoolConfig::new(64) },
                AfPacketConfig::new("pa"),
            ),
            (
                "pool short",
                PoolConfig { cache_batch: 1, ..PoolConfig::new(4) },
                AfPacketConfig::new("pa"),
            ),
        ];
        for (what, pcfg, cfg) in cases {
            let pool = Pool::new(pcfg).unwrap();
            let cap = pool.capacity();
            let mut cache = pool.cache();
            let mut port = AfPacketPort::open(cfg).unwrap();
            let (big, small) = (frame(1, 9014), frame(2, 200));
            peer.send(&big);
            peer.send(&small);
            let (got, _) = rx_whole(&mut port, &mut cache, 2, Duration::from_millis(500));
            assert_eq!(got, vec![small], "{what}");
            let st = port.stats();
            let want = if what == "pool short" { (0, 1) } else { (1, 0) };
            assert_eq!((st.rx_drops.too_big, st.rx_drops.no_buffer), want, "{what}: {st:?}");
            assert_eq!(st.rx_packets, 1, "{what}");
            drop(port);
            drop(cache);
            assert_eq!(pool.shared_free(), cap, "{what}: every buffer came back");
        }
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
