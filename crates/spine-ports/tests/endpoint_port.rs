//! An endpoint as a port: frames flow client → port → worker burst → port → client,
//! and a hostile or vanished client leaves every pool buffer accounted for.

use spine_endpoint::{AdapterEnd, ClientEnd, Layout};
use spine_ports::{Burst, EndpointPort, Pool, PoolConfig, Port};

fn open() -> (EndpointPort, ClientEnd) {
    let end = AdapterEnd::create(Layout::new(64, 2048, 128).unwrap()).unwrap();
    let fd = end.shm().fd().try_clone_to_owned().unwrap();
    (EndpointPort::new("ep0", end, None, 3), ClientEnd::open(fd).unwrap())
}

#[test]
fn frames_loop_through_the_port_and_the_pool_stays_whole() {
    let pool = Pool::new(PoolConfig::new(256)).unwrap();
    let mut cache = pool.cache();
    let (mut port, mut client) = open();
    let mut burst = Burst::with_capacity(32);
    let mut echoed = 0;
    for round in 0..10u8 {
        for i in 0..20u8 {
            assert!(client.send(&[round, i, 0xaa, 0xbb]));
        }
        assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 20);
        assert_eq!(port.tx_burst(&mut cache, &mut burst).unwrap(), 20);
        let mut i = 0;
        echoed += client.recv(64, |m| {
            assert_eq!(m, &[round, i, 0xaa, 0xbb]);
            i += 1;
        });
    }
    assert_eq!(echoed, 200);
    let s = port.stats();
    assert_eq!((s.rx_packets, s.tx_packets, s.tx_drops.total()), (200, 200, 0));
    cache.flush();
    assert_eq!(pool.shared_free(), pool.capacity(), "every pool buffer back");
}

#[test]
fn a_client_that_stops_reading_or_writes_garbage_costs_no_pool_buffer() {
    let pool = Pool::new(PoolConfig::new(256)).unwrap();
    let mut cache = pool.cache();
    let (mut port, client) = open();
    let mut burst = Burst::with_capacity(32);
    // Never reads: deliveries beyond its fill frames are dropped, buffers freed.
    for _ in 0..10 {
        for _ in 0..32 {
            let mut b = cache.alloc().unwrap();
            pool.write(&mut b, &[1; 60]).unwrap();
            burst.push(b).unwrap();
        }
        port.tx_burst(&mut cache, &mut burst).unwrap();
    }
    let s = port.stats();
    assert_eq!(s.tx_packets, 64, "the ring's worth of fill frames given at open");
    assert_eq!(s.tx_drops.kernel, 320 - 64);
    // Garbage over its transmit ring's producer index and descriptors, then death.
    let tx_ring = 4096;
    client.poke_u32(tx_ring, 0x7fff_ffff);
    for w in 0..64 {
        client.poke_u64(tx_ring + 128 + w * 8, 0xdead_beef_dead_beef);
    }
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    client.poke_u32(tx_ring, 5);
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    assert!(port.stats().rx_drops.bad_desc >= 5);
    drop(client);
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    cache.flush();
    assert_eq!(pool.shared_free(), pool.capacity(), "every pool buffer back");
}

/// Receive copies once, from the endpoint straight into the pool buffer after the
/// headroom: every length from empty to the buffer's room arrives byte for byte (inline
/// and in frames), with the port and offset set; one longer than the room is dropped as
/// too big and its frame goes back to the client.
#[test]
fn receive_lands_in_the_pool_buffer_byte_for_byte() {
    let pool = Pool::new(PoolConfig::new(256)).unwrap();
    let mut cache = pool.cache();
    let (mut port, mut client) = open();
    let mut burst = Burst::with_capacity(32);
    let room = (pool.buf_size() - pool.headroom()) as usize;
    let mut lens: Vec<usize> = (0..=130).collect();
    lens.extend((131..=room).step_by(97));
    lens.push(room);
    for (k, &len) in lens.iter().enumerate() {
        let msg: Vec<u8> = (0..len).map(|b| (b * 31 + k) as u8).collect();
        assert!(client.send(&msg), "send {len}");
        assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 1, "length {len}");
        let buf = burst.pop().unwrap();
        assert_eq!(pool.data(&buf).unwrap(), &msg[..], "length {len}");
        let meta = pool.meta(&buf).unwrap();
        assert_eq!((meta.port, meta.data_off, meta.meta_len), (3, pool.headroom(), 0));
        cache.free(buf).unwrap();
    }
    assert!(client.send(&vec![1; room + 1]));
    assert!(client.send(&[2; 100]));
    assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 1, "the next one still comes");
    let buf = burst.pop().unwrap();
    assert_eq!(pool.data(&buf).unwrap(), &[2; 100]);
    cache.free(buf).unwrap();
    let s = port.stats();
    assert_eq!(
        (s.rx_packets, s.rx_drops.too_big, s.rx_drops.bad_desc),
        (lens.len() as u64 + 1, 1, 0)
    );
    assert_eq!(port.endpoint_stats().tx_inline, 65, "0..=64 went inline");
    // Every frame came back: the client can have all its frames in flight again.
    let sent = (0..64).filter(|_| client.send(&[3; 1000])).count();
    assert_eq!(sent, 64, "the client's 64 frames are all free");
    cache.flush();
    assert_eq!(pool.shared_free(), pool.capacity(), "every pool buffer back");
}

/// With a garbage limit, a client whose transmit index stays impossible is declared dead
/// after that many failed checks and its endpoint released; without one it is only
/// counted, burst after burst.
#[test]
fn a_client_that_keeps_writing_garbage_can_be_reclaimed_by_policy() {
    let pool = Pool::new(PoolConfig::new(64)).unwrap();
    let mut cache = pool.cache();
    let mut burst = Burst::with_capacity(8);
    let (port, client) = open();
    let mut port = port.with_garbage_limit(10);
    let (mut lenient, lenient_client) = open();
    for c in [&client, &lenient_client] {
        c.poke_u32(4096, 0x7fff_ffff);
    }
    for _ in 0..9 {
        assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
        assert_eq!(lenient.rx_burst(&mut cache, &mut burst).unwrap(), 0);
    }
    assert!(!port.is_reclaimed(), "nine failed checks, limit ten");
    port.rx_burst(&mut cache, &mut burst).unwrap();
    port.rx_burst(&mut cache, &mut burst).unwrap();
    assert!(port.is_reclaimed());
    assert!(port.liveness().is_dead());
    assert_eq!(port.endpoint_stats().bad_index, 10, "frozen at reclaim");
    for _ in 0..20 {
        lenient.rx_burst(&mut cache, &mut burst).unwrap();
    }
    assert!(!lenient.is_reclaimed());
    assert_eq!(lenient.endpoint_stats().bad_index, 29);
    cache.flush();
    assert_eq!(pool.shared_free(), pool.capacity());
}

mod hostile {
    use proptest::prelude::*;
    use spine_endpoint::{AdapterEnd, ClientEnd, ClientWatch, Layout};
    use spine_ports::{Burst, EndpointPort, Pool, PoolConfig, Port};
    use std::os::unix::net::UnixStream;

    /// An endpoint port, its client, and the client's connection (dropping it is the
    /// client dying) watched for the adapter.
    fn open_watched(layout: Layout, id: u32) -> (EndpointPort, ClientEnd, ClientWatch, UnixStream) {
        let end = AdapterEnd::create(layout).unwrap();
        let fd = end.shm().fd().try_clone_to_owned().unwrap();
        let (ours, theirs) = UnixStream::pair().unwrap();
        let watch = ClientWatch::new(ours.into());
        let port = EndpointPort::new("ep", end, None, id).with_liveness(watch.liveness());
        (port, ClientEnd::open(fd).unwrap(), watch, theirs)
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A raw 8-byte write anywhere over the bad client's rings.
        Poke(usize, u64),
        /// A 4-byte write (indices are 4 bytes).
        Poke32(usize, u32),
        /// The bad client sends honestly, `len` bytes.
        Send(usize),
        /// The adapter receives from the bad endpoint.
        Rx,
        /// The adapter sends `n` frames of `len` bytes to the bad endpoint.
        Tx(usize, usize),
        /// The bad client reads what it has.
        Recv,
        /// The bad client dies.
        Die,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (any::<usize>(), any::<u64>()).prop_map(|(w, v)| Op::Poke(w, v)),
            2 => (any::<usize>(), any::<u32>()).prop_map(|(w, v)| Op::Poke32(w, v)),
            2 => (0usize..300).prop_map(Op::Send),
            2 => Just(Op::Rx),
            2 => (1usize..40, 0usize..400).prop_map(|(n, l)| Op::Tx(n, l)),
            1 => Just(Op::Recv),
            1 => Just(Op::Die),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]
        /// Two endpoints on one pool: whatever the bad client writes over its rings, sends,
        /// fails to read, or however it dies, the good endpoint's traffic arrives exactly,
        /// and after all of it the pool has every buffer back.
        #[test]
        fn a_hostile_client_harms_no_other_endpoint_and_loses_no_pool_buffer(
            ops in proptest::collection::vec(op(), 1..120),
        ) {
            let pool = Pool::new(PoolConfig::new(512)).unwrap();
            let mut cache = pool.cache();
            let before = pool.shared_free();
            let layout = Layout::new(16, 256, 16).unwrap();
            let (mut bad, mut bad_c, bad_w, bad_conn) = open_watched(layout, 1);
            let (mut good, mut good_c, good_w, _good_conn) = open_watched(layout, 2);
            let mut bad_conn = Some(bad_conn);
            let rings = 4096..layout.area_offset();
            let words = (rings.end - rings.start) / 8;
            let mut burst = Burst::with_capacity(64);
            let mut died = false;
            for (step, op) in ops.iter().enumerate() {
                match op {
                    Op::Poke(w, v) => bad_c.poke_u64(rings.start + (w % words) * 8, *v),
                    Op::Poke32(w, v) => bad_c.poke_u32(rings.start + (w % (words * 2)) * 4, *v),
                    Op::Send(len) => {
                        bad_c.send(&vec![0xbb; *len]);
                    }
                    Op::Rx => {
                        bad.rx_burst(&mut cache, &mut burst).unwrap();
                        for b in burst.drain_front(burst.len()) {
                            prop_assert!(pool.data(&b).unwrap().len() <= 256);
                            cache.free(b).unwrap();
                        }
                    }
                    Op::Tx(n, len) => {
                        for _ in 0..*n {
                            let mut b = cache.alloc().unwrap();
                            pool.write(&mut b, &vec![0xcc; *len]).unwrap();
                            burst.push(b).unwrap();
                        }
                        prop_assert_eq!(bad.tx_burst(&mut cache, &mut burst).unwrap(), *n);
                        prop_assert!(burst.is_empty());
                    }
                    Op::Recv => {
                        bad_c.recv(64, |m| assert!(m.len() <= 256));
                    }
                    Op::Die => {
                        bad_conn = None;
                        prop_assert!(bad_w.check().unwrap(), "the watch sees the client gone");
                        died = true;
                    }
                }
                // The good endpoint, both ways, each step: exact, inline and in a frame.
                for len in [16usize, 200] {
                    let msg: Vec<u8> = (0..len).map(|b| (b + step) as u8).collect();
                    prop_assert!(good_c.send(&msg));
                    prop_assert_eq!(good.rx_burst(&mut cache, &mut burst).unwrap(), 1);
                    prop_assert_eq!(pool.data(burst.get(0).unwrap()).unwrap(), &msg[..]);
                    prop_assert_eq!(good.tx_burst(&mut cache, &mut burst).unwrap(), 1);
                    let mut got = Vec::new();
                    prop_assert_eq!(good_c.recv(8, |m| got.extend_from_slice(m)), 1);
                    prop_assert_eq!(got, msg);
                }
            }
            let g = good.stats();
            prop_assert_eq!((g.rx_drops.total(), g.tx_drops.total()), (0, 0));
            prop_assert!(!good_w.check().unwrap() && !good.is_reclaimed());
            // A dead client's endpoint is released at the next burst; traffic to it is
            // dropped and counted, and it yields nothing.
            if died {
                prop_assert_eq!(bad.rx_burst(&mut cache, &mut burst).unwrap(), 0);
                prop_assert!(bad.is_reclaimed());
                let mut b = cache.alloc().unwrap();
                pool.write(&mut b, &[1; 60]).unwrap();
                burst.push(b).unwrap();
                let dead_before = bad.dead_drops();
                bad.tx_burst(&mut cache, &mut burst).unwrap();
                prop_assert_eq!(bad.dead_drops(), dead_before + 1);
            }
            drop(bad_conn);
            cache.flush();
            prop_assert_eq!(pool.shared_free(), before, "every pool buffer back");
        }
    }

    /// A real client process (the Python example) killed mid-transfer with SIGKILL: the
    /// watch sees its connection close, the port releases the endpoint, frames sent to
    /// it afterwards are counted and freed, and the pool is whole.
    #[test]
    fn a_client_killed_mid_transfer_is_reclaimed() {
        use std::os::unix::net::UnixListener;
        use std::path::Path;
        let dir = std::env::temp_dir().join(format!("spine-epkill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock_path = dir.join("ep.sock");
        let listener = UnixListener::bind(&sock_path).unwrap();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/echo.py");
        // It would echo a million messages; it gets killed long before.
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .arg(&sock_path)
            .arg("1000000")
            .spawn()
            .expect("python3");
        let (sock, _) = listener.accept().unwrap();
        let end = AdapterEnd::create(Layout::new(64, 2048, 64).unwrap()).unwrap();
        let wake = spine_endpoint::EventFd::new().unwrap();
        spine_endpoint::send_fds(&sock, &[end.shm().fd(), wake.fd()]).unwrap();
        let watch = ClientWatch::new(sock.into());
        let mut port = EndpointPort::new("ep", end, Some(wake), 1).with_liveness(watch.liveness());

        let pool = Pool::new(PoolConfig::new(256)).unwrap();
        let mut cache = pool.cache();
        let mut burst = Burst::with_capacity(32);
        let send =
            |port: &mut EndpointPort, cache: &mut spine_ports::PoolCache, burst: &mut Burst| {
                for i in 0..8u8 {
                    let mut b = cache.alloc().unwrap();
                    pool.write(&mut b, &[i; 300]).unwrap();
                    burst.push(b).unwrap();
                }
                port.tx_burst(cache, burst).unwrap();
            };
        // Traffic until the client has echoed some, so it is mid-transfer when killed.
        let mut echoed = 0;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while echoed < 50 {
            assert!(std::time::Instant::now() < deadline, "the client echoes");
            send(&mut port, &mut cache, &mut burst);
            echoed += port.rx_burst(&mut cache, &mut burst).unwrap();
            cache.free_burst(&mut burst).unwrap();
        }
        assert!(!watch.check().unwrap(), "alive while it holds its connection");
        assert!(!port.is_reclaimed());
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(ClientWatch::check_all(std::slice::from_ref(&watch), 5000).unwrap(), 1);
        send(&mut port, &mut cache, &mut burst);
        assert!(port.is_reclaimed());
        assert_eq!(port.dead_drops(), 8);
        assert_eq!(port.rx_burst(&mut cache, &mut burst).unwrap(), 0);
        cache.flush();
        assert_eq!(pool.shared_free(), pool.capacity(), "every pool buffer back");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
