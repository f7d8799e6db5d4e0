//! UDP tunnel ports in a namespace of their own (so fixed loopback ports never collide):
//! frames cross both ways unchanged, and what is not a frame from the peer never gets in.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use spine_ports::{Port, TunnelAuth, TunnelKey, UdpPort, AUTH_HEADER_LEN, TUNNEL_HEADER};
use spine_testnet::netns::NetNs;

use spine_ports::{Pool, PoolConfig};

use super::{pool, rx_n, rx_whole, tx_all, tx_chains};

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
        peer.send_to(&frame(&[7; 40_000]), addr(5000)).unwrap(); // longer than a chain
        peer.send_to(&frame(&good), addr(5000)).unwrap();
        let got = rx_n(&mut port, &mut cache, 2, Duration::from_millis(500));
        assert_eq!(got, vec![good], "only the peer's well-formed frame");
        let s = port.stats();
        assert_eq!(
            (s.rx_drops.bad_desc, s.rx_drops.too_big, s.rx_drops.wrong_peer),
            (3, 1, 1),
            "{s:?}"
        );
    });
}

/// The sender check: well-formed tunnel frames from the peer's IP on another port, and
/// from another IP on the peer's port, are counted `wrong_peer` and never delivered;
/// the peer's own frames, before and after them, all arrive in order.
#[test]
fn frames_from_anyone_but_the_peer_are_counted_and_never_delivered() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = pool(64);
        let mut cache = pool.cache();
        let mut a = UdpPort::open("ta", addr(4000), addr(4001), 1).unwrap();
        let mut b = UdpPort::open("tb", addr(4001), addr(4000), 2).unwrap();
        let other_port = UdpSocket::bind(addr(4002)).unwrap();
        let other_ip = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 2], 4001))).unwrap();
        let forged = |i: u8| [&TUNNEL_HEADER[..], &[i; 60][..]].concat();
        let sent = frames(4);
        tx_all(&mut b, &mut cache, &sent[..2]);
        for i in 0..3 {
            other_port.send_to(&forged(i), addr(4000)).unwrap();
            other_ip.send_to(&forged(i), addr(4000)).unwrap();
        }
        tx_all(&mut b, &mut cache, &sent[2..]);
        let got = rx_n(&mut a, &mut cache, 5, Duration::from_millis(500));
        assert_eq!(got, sent, "only the peer's frames, in order");
        let s = a.stats();
        assert_eq!((s.rx_packets, s.rx_drops.wrong_peer, s.rx_drops.total()), (4, 6, 6), "{s:?}");
        drop(cache);
        assert_eq!(pool.shared_free(), 64, "no buffer lost to the dropped datagrams");
    });
}

/// Jumbo frames through the tunnel: a chain goes out as one datagram (header, head and
/// fragments in one `sendmsg`) and a datagram longer than a buffer comes in as a chain,
/// bytes and order kept, linear frames between them as before. Every buffer comes back.
#[test]
fn jumbo_frames_cross_a_tunnel_as_chains() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = pool(512);
        let mut cache = pool.cache();
        let mut a = UdpPort::open("ta", addr(4000), addr(4001), 1).unwrap();
        let mut b = UdpPort::open("tb", addr(4001), addr(4000), 2).unwrap();
        assert!(a.takes_frags() && b.takes_frags());
        let lens = [9014usize, 60, 1792, 1793, 4000, 30_000, 1500];
        let sent: Vec<Vec<u8>> = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|b| (b * 7 + b / 253 + i) as u8).collect())
            .collect();
        tx_chains(&mut a, &mut cache, &sent);
        let (got, chains) = rx_whole(&mut b, &mut cache, sent.len() + 1, Duration::from_secs(2));
        assert_eq!(got.len(), sent.len(), "{:?}", b.stats());
        assert!(got == sent, "bytes or order differ");
        assert_eq!(chains, 4, "the frames over 1,788 bytes came as chains");
        let (sa, sb) = (a.stats(), b.stats());
        let bytes = lens.iter().sum::<usize>() as u64;
        assert_eq!((sa.tx_packets, sa.tx_bytes, sb.rx_packets, sb.rx_bytes), (7, bytes, 7, bytes));
        assert_eq!(sa.tx_drops.total() + sb.rx_drops.total(), 0);
        drop(cache);
        assert_eq!(pool.shared_free(), 512, "every buffer, fragments too, came back");
    });
}

/// A datagram that cannot be kept is dropped whole and counted, and the next one still
/// arrives: longer than a chain of small buffers holds (`too_big`), or needing more
/// buffers than the pool has left (`no_buffer`). No buffer is lost.
#[test]
fn jumbo_datagrams_that_cannot_be_kept_are_counted_and_lose_no_buffer() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let peer = UdpSocket::bind(addr(4001)).unwrap();
        peer.connect(addr(4000)).unwrap();
        let dgram = |n: usize| {
            let mut d = TUNNEL_HEADER.to_vec();
            d.extend((0..n).map(|b| b as u8));
            d
        };
        let cases = [
            ("longer than a chain", PoolConfig { buf_size: 512, ..PoolConfig::new(64) }),
            ("pool short", PoolConfig { cache_batch: 1, ..PoolConfig::new(4) }),
        ];
        for (what, pcfg) in cases {
            let pool = Pool::new(pcfg).unwrap();
            let cap = pool.capacity();
            let mut cache = pool.cache();
            let mut a = UdpPort::open("ta", addr(4000), addr(4001), 1).unwrap();
            peer.send(&dgram(9014)).unwrap();
            peer.send(&dgram(200)).unwrap();
            let (got, _) = rx_whole(&mut a, &mut cache, 2, Duration::from_millis(500));
            assert_eq!(got, vec![dgram(200)[4..].to_vec()], "{what}");
            let st = a.stats();
            let want = if what == "pool short" { (0, 1) } else { (1, 0) };
            assert_eq!((st.rx_drops.too_big, st.rx_drops.no_buffer), want, "{what}: {st:?}");
            drop(a);
            drop(cache);
            assert_eq!(pool.shared_free(), cap, "{what}: every buffer came back");
        }
    });
}

fn keyed(name: &str, local: u16, peer: u16, key: &TunnelKey) -> UdpPort {
    UdpPort::open(name, addr(local), addr(peer), 1).unwrap().with_key(key)
}

/// Two tunnel ends with the same key: frames cross both ways unchanged, jumbo chains
/// too (the tag covers every fragment), and nothing is refused. An end without the key
/// refuses the keyed end's datagrams and the other way round.
#[test]
fn tunnels_with_the_same_key_exchange_frames_and_refuse_an_unkeyed_end() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = pool(512);
        let mut cache = pool.cache();
        let key = TunnelKey::from_bytes([0x42; 32]);
        let mut a = keyed("ta", 4000, 4001, &key);
        let mut b = keyed("tb", 4001, 4000, &key);
        let sent = frames(60);
        tx_all(&mut a, &mut cache, &sent);
        assert_eq!(rx_n(&mut b, &mut cache, 60, Duration::from_secs(2)), sent);
        let back = frames(20);
        tx_all(&mut b, &mut cache, &back);
        assert_eq!(rx_n(&mut a, &mut cache, 20, Duration::from_secs(2)), back);
        let jumbo: Vec<Vec<u8>> = [9014usize, 60, 4000]
            .iter()
            .map(|&n| (0..n).map(|i| (i * 13) as u8).collect())
            .collect();
        tx_chains(&mut a, &mut cache, &jumbo);
        let (got, chains) = rx_whole(&mut b, &mut cache, 3, Duration::from_secs(2));
        assert!(got == jumbo && chains == 2, "{:?}", b.stats());
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!((sa.rx_packets, sb.rx_packets), (20, 63));
        assert_eq!(sa.rx_drops.total() + sb.rx_drops.total(), 0, "{sa:?} {sb:?}");

        drop(b);
        let mut plain = UdpPort::open("plain", addr(4001), addr(4000), 2).unwrap();
        tx_all(&mut plain, &mut cache, &frames(3));
        tx_all(&mut a, &mut cache, &frames(2));
        assert!(rx_n(&mut a, &mut cache, 1, Duration::from_millis(300)).is_empty());
        assert!(rx_n(&mut plain, &mut cache, 1, Duration::from_millis(300)).is_empty());
        assert_eq!(a.stats().rx_drops.auth_no_tag, 3, "{:?}", a.stats());
        assert_eq!(plain.stats().rx_drops.bad_desc, 2, "{:?}", plain.stats());
        drop(cache);
        assert_eq!(pool.shared_free(), 512, "every buffer came back");
    });
}

/// Datagrams from the peer's own address, sealed by the test with the port's key
/// ([`TunnelAuth`], the port's own code): a wrong key, a flipped bit, a replay, a cut
/// tag, a tagless (version 1) datagram and a reflected one are each dropped and counted
/// by reason; the well-sealed ones among them arrive, once.
#[test]
fn forged_replayed_and_cut_datagrams_are_counted_by_reason_and_dropped() {
    let Some(ns) = NetNs::new() else { return };
    ns.enter(|| {
        let pool = pool(64);
        let mut cache = pool.cache();
        let key = TunnelKey::from_bytes([0x42; 32]);
        let mut port = keyed("tp", 5000, 5001, &key);
        let peer = UdpSocket::bind(addr(5001)).unwrap();
        peer.connect(addr(5000)).unwrap();
        let mut sealer = TunnelAuth::new(&key, 1);
        let mut forger = TunnelAuth::new(&TunnelKey::from_bytes([0x43; 32]), 2);
        let seal = |a: &mut TunnelAuth, frame: &[u8]| {
            let mut hdr = [0; AUTH_HEADER_LEN];
            a.seal(&mut hdr, |h| {
                h.update(frame);
            });
            [&hdr[..], frame].concat()
        };
        let f1 = vec![1u8; 60];
        let f2 = vec![2u8; 100];
        let good1 = seal(&mut sealer, &f1);
        peer.send(&good1).unwrap();
        peer.send(&seal(&mut forger, &f1)).unwrap(); // wrong key
        let mut flipped = seal(&mut sealer, &f2);
        flipped[AUTH_HEADER_LEN + 50] ^= 0x10;
        peer.send(&flipped).unwrap(); // a bit of the frame changed
        peer.send(&good1).unwrap(); // replayed
        let good2 = seal(&mut sealer, &f2);
        peer.send(&good2[..AUTH_HEADER_LEN - 6]).unwrap(); // tag cut short
        peer.send(&[&TUNNEL_HEADER[..], &f1[..]].concat()).unwrap(); // no tag at all
        peer.send(&good2).unwrap();
        let got = rx_n(&mut port, &mut cache, 3, Duration::from_millis(500));
        assert_eq!(got, vec![f1, f2], "only the well-sealed datagrams, once each");
        // The port's own datagram, sent back to it from the peer's address.
        tx_all(&mut port, &mut cache, &frames(1));
        let mut mine = vec![0; 2048];
        peer.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let n = peer.recv(&mut mine).unwrap();
        assert_eq!(mine[..4], spine_ports::AUTH_HEADER_MAGIC, "sent sealed");
        peer.send(&mine[..n]).unwrap();
        assert!(rx_n(&mut port, &mut cache, 1, Duration::from_millis(300)).is_empty());
        let d = port.stats().rx_drops;
        assert_eq!(
            (d.auth_bad_tag, d.auth_replay, d.auth_no_tag, d.auth_too_old, d.total()),
            (2, 2, 2, 0, 6),
            "{d:?}"
        );
        assert_eq!(port.stats().rx_packets, 2);
        drop(cache);
        assert_eq!(pool.shared_free(), 64, "no buffer lost to the refusals");
    });
}
