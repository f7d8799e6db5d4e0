//! UDP tunnel ports in a namespace of their own (so fixed loopback ports never collide):
//! frames cross both ways unchanged, and what is not a frame from the peer never gets in.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use spine_ports::{Port, UdpPort, TUNNEL_HEADER};
use spine_testnet::netns::NetNs;

use super::{pool, rx_n, tx_all};

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

fn frames(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| (0..14 + (i * 37) % 1500).map(|b| (b ^ i) as u8).collect()).collect()
}

#[test]
fn frames_cross_a_tunnel_both_ways_unchanged() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = pool(512);
        let mut cache = pool.cache();
        let mut a = UdpPort::open("ta", addr(4000), addr(4001), 1).unwrap();
        let mut b = UdpPort::open("tb", addr(4001), addr(4000), 2).unwrap();
        let sent = frames(100);
        tx_all(&mut a, &mut cache, &sent);
        assert_eq!(rx_n(&mut b, &mut cache, 100, Duration::from_secs(2)), sent);
        let back = frames(40);
        tx_all(&mut b, &mut cache, &back);
        assert_eq!(rx_n(&mut a, &mut cache, 40, Duration::from_secs(2)), back);
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!(
            (sa.tx_packets, sb.rx_packets, sb.tx_packets, sa.rx_packets),
            (100, 100, 40, 40)
        );
        assert_eq!(sa.rx_drops.total() + sb.rx_drops.total(), 0);
    });
}

#[test]
fn only_well_formed_frames_from_the_peer_get_in() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = pool(64);
        let mut cache = pool.cache();
        let mut port = UdpPort::open("tp", addr(5000), addr(5001), 1).unwrap();
        let peer = UdpSocket::bind(addr(5001)).unwrap();
        let stranger = UdpSocket::bind(addr(5002)).unwrap();
        let frame = |body: &[u8]| [&TUNNEL_HEADER[..], body].concat();
        let good = vec![0xab; 60];
        stranger.send_to(&frame(&good), addr(5000)).unwrap(); // not the peer: filtered
        peer.send_to(b"no header at all, just bytes", addr(5000)).unwrap();
        peer.send_to(&frame(&[1; 10]), addr(5000)).unwrap(); // shorter than Ethernet
        peer.send_to(
            &[0x53, 0x50, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
            addr(5000),
        )
        .unwrap(); // another version
        peer.send_to(&frame(&[7; 3000]), addr(5000)).unwrap(); // longer than a buffer
        peer.send_to(&frame(&good), addr(5000)).unwrap();
        let got = rx_n(&mut port, &mut cache, 2, Duration::from_millis(500));
        assert_eq!(got, vec![good], "only the peer's well-formed frame");
        let s = port.stats();
        assert_eq!((s.rx_drops.bad_desc, s.rx_drops.too_big), (3, 1), "{s:?}");
    });
}
