//! AF_XDP on veth: copy mode (veth has no zero-copy), native XDP, the pool as UMEM, and
//! two ports sharing it to forward without copies.

use std::time::Duration;

use spine_ports::{
    AfXdpConfig, AfXdpPort, AttachMode, BindMode, Burst, Port, PortErrorKind, XdpMode,
};
use spine_sys::query_xdp;

use crate::{pool, rx_n, skip, tx_all};
use spine_testnet::netns::{ifindex, NetNs};
use spine_testnet::raw::{as_nobody, frame, Raw};

const N: u32 = 300;

fn bpf_ok() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            skip(&format!("bpf(2) unavailable: {e}"));
            false
        }
    }
}

#[test]
fn receives_and_transmits_in_copy_mode() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("xa", "xb");
    ns.enter(|| {
        let pool = pool(2048);
        let mut cache = pool.cache();
        let mut port = AfXdpPort::open(AfXdpConfig::new("xa"), &mut cache).unwrap();
        assert!(!port.zero_copy(), "veth has no zero-copy: bound in copy mode");
        assert_eq!(port.xdp_mode(), Some(XdpMode::Native));
        let id = port.prog_id().unwrap();
        assert_eq!(query_xdp(ifindex("xa")).unwrap().prog_id, id);
        assert_eq!(port.lent(), 512, "the fill ring is full");

        let peer = Raw::bind("xb");
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 11) % 1400)).collect();
        for f in &sent {
            peer.send(f);
        }
        let got = rx_n(&mut port, &mut cache, sent.len() + 1, Duration::from_secs(2));
        assert_eq!(got.len(), sent.len());
        assert!(got == sent, "bytes or order differ");

        let back: Vec<Vec<u8>> =
            (0..N).map(|i| frame(1000 + i, 60 + (i as usize * 5) % 1400)).collect();
        tx_all(&mut port, &mut cache, &back);
        let seen = peer.recv(back.len() + 1, Duration::from_secs(2));
        assert_eq!(seen.len(), back.len());
        assert!(seen == back, "bytes or order differ");

        let st = port.stats();
        assert_eq!((st.rx_packets, st.tx_packets), (u64::from(N), u64::from(N)));
        assert_eq!(st.rx_drops.total() + st.tx_drops.total(), 0, "{st:?}");
        assert_eq!(st.tx_copied, 0);
        drop(port);
        assert_eq!(query_xdp(ifindex("xa")).unwrap().mode, None, "detached on close");
        drop(cache);
        assert_eq!(pool.shared_free(), 2048, "every buffer came back from the kernel");
    });
}

#[test]
fn forwards_between_two_ports_sharing_one_umem_without_copies() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("fa0", "fa1");
    ns.veth("fb0", "fb1");
    ns.enter(|| {
        let pool = pool(2048);
        let mut cache = pool.cache();
        let mut a = AfXdpPort::open(AfXdpConfig::new("fa0"), &mut cache).unwrap();
        let mut b = AfXdpPort::open_shared(AfXdpConfig::new("fb0"), &mut cache, &a).unwrap();
        let (inject, observe) = (Raw::bind("fa1"), Raw::bind("fb1"));
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 3) % 1400)).collect();
        for f in &sent {
            inject.send(f);
        }
        let mut burst = Burst::with_capacity(32);
        let mut forwarded = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while forwarded < sent.len() && std::time::Instant::now() < deadline {
            a.rx_burst(&mut cache, &mut burst).unwrap();
            forwarded += burst.len();
            while !burst.is_empty() {
                b.tx_burst(&mut cache, &mut burst).unwrap();
            }
            b.flush(&mut cache).unwrap();
        }
        let seen = observe.recv(sent.len() + 1, Duration::from_secs(2));
        assert_eq!(seen.len(), sent.len());
        assert!(seen == sent, "bytes or order differ");
        let (sa, sb) = (a.stats(), b.stats());
        assert_eq!((sa.rx_packets, sb.tx_packets), (u64::from(N), u64::from(N)));
        assert_eq!(sb.tx_copied, 0, "the received buffers were sent as they were");
        assert_eq!(sa.rx_drops.total() + sb.tx_drops.total(), 0);
        drop(a);
        drop(b);
        drop(cache);
        assert_eq!(pool.shared_free(), 2048);
    });
}

#[test]
fn a_buffer_sent_on_two_ports_is_copied_for_one() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("ca0", "ca1");
    ns.veth("cb0", "cb1");
    ns.enter(|| {
        let pool = pool(2048);
        let mut cache = pool.cache();
        let mut a = AfXdpPort::open(AfXdpConfig::new("ca0"), &mut cache).unwrap();
        let mut b = AfXdpPort::open_shared(AfXdpConfig::new("cb0"), &mut cache, &a).unwrap();
        let (oa, ob) = (Raw::bind("ca1"), Raw::bind("cb1"));
        let f = frame(7, 200);
        let mut buf = cache.alloc().unwrap();
        pool.write(&mut buf, &f).unwrap();
        let second = pool.share(&buf).unwrap();
        let mut burst = Burst::with_capacity(1);
        burst.push(buf).unwrap();
        assert_eq!(a.tx_burst(&mut cache, &mut burst).unwrap(), 1);
        burst.push(second).unwrap();
        assert_eq!(b.tx_burst(&mut cache, &mut burst).unwrap(), 1);
        assert_eq!(oa.recv(1, Duration::from_secs(1)), vec![f.clone()]);
        assert_eq!(ob.recv(1, Duration::from_secs(1)), vec![f]);
        assert_eq!(a.stats().tx_copied + b.stats().tx_copied, 1);
    });
}

#[test]
fn afxdp_errors_are_clear() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("ea", "eb");
    ns.enter(|| {
        let pool = pool(1024);
        let mut cache = pool.cache();
        let e = AfXdpPort::open(AfXdpConfig::new("nosuch1"), &mut cache).unwrap_err();
        assert_eq!(e.to_string(), "port nosuch1: no such interface");
        let zc = AfXdpConfig { bind: BindMode::ZeroCopy, ..AfXdpConfig::new("ea") };
        let e = AfXdpPort::open(zc, &mut cache).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::Unsupported { .. }), "{e}");
        let e = as_nobody(|| {
            let mut c = pool.cache();
            AfXdpPort::open(AfXdpConfig::new("ea"), &mut c).unwrap_err()
        });
        assert!(matches!(e.kind, PortErrorKind::PermissionDenied { .. }), "{e}");
        // The queue is taken by the first port; a second on it is refused, and the
        // first keeps working.
        let _first = AfXdpPort::open(AfXdpConfig::new("ea"), &mut cache).unwrap();
        let e = AfXdpPort::open(AfXdpConfig::new("ea"), &mut cache).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::Busy { .. }), "{e}");
        let small = spine_ports::Pool::new(spine_ports::PoolConfig {
            buf_size: 1024,
            headroom: 256,
            ..spine_ports::PoolConfig::new(8)
        })
        .unwrap();
        let e = AfXdpPort::open(AfXdpConfig::new("eb"), &mut small.cache()).unwrap_err();
        assert!(matches!(e.kind, PortErrorKind::Config { .. }), "{e}");
        drop(_first);
        drop(cache);
        assert_eq!(pool.shared_free(), 1024);
    });
}

#[test]
fn generic_xdp_mode_works_too() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("ga", "gb");
    ns.enter(|| {
        let pool = pool(1024);
        let mut cache = pool.cache();
        let cfg =
            AfXdpConfig { attach: AttachMode::Skb, bind: BindMode::Copy, ..AfXdpConfig::new("ga") };
        let mut port = AfXdpPort::open(cfg, &mut cache).unwrap();
        assert_eq!(port.xdp_mode(), Some(XdpMode::Skb));
        assert_eq!(query_xdp(ifindex("ga")).unwrap().mode, Some(XdpMode::Skb));
        let peer = Raw::bind("gb");
        let sent: Vec<Vec<u8>> = (0..20).map(|i| frame(i, 100)).collect();
        for f in &sent {
            peer.send(f);
        }
        assert_eq!(rx_n(&mut port, &mut cache, 20, Duration::from_secs(2)), sent);
    });
}

/// A spine killed while its program was attached the old way (netlink, which outlives
/// the process) left `spine_xsk` on the interface: the next start replaces it. Another
/// tool's program is never replaced, and the error names it. A port's own attachment is
/// a BPF link: gone with the port (and with the process, however it dies).
#[test]
fn stale_spine_program_is_replaced_and_foreign_one_refused() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("sa", "sb");
    ns.enter(|| {
        let pool = pool(1024);
        let mut cache = pool.cache();
        let idx = ifindex("sa");
        let leftover = spine_sys::XskRedirect::load(spine_ports::XSK_PROG_NAME, 1).unwrap();
        spine_sys::attach_xdp(idx, leftover.prog().fd(), XdpMode::Native, false).unwrap();
        let stale = query_xdp(idx).unwrap().prog_id;
        drop(leftover); // the interface keeps it, as after kill -9
        assert_eq!(query_xdp(idx).unwrap().prog_id, stale);

        let copy = || AfXdpConfig { bind: BindMode::Copy, ..AfXdpConfig::new("sa") };
        let port = AfXdpPort::open(copy(), &mut cache).unwrap();
        let id = port.prog_id().unwrap();
        assert_ne!(id, stale);
        assert_eq!(query_xdp(idx).unwrap().prog_id, id);
        drop(port);
        assert_eq!(query_xdp(idx).unwrap().prog_id, 0, "the link went with the port");

        let foreign = spine_sys::XskRedirect::load("other_tool", 1).unwrap();
        spine_sys::attach_xdp(idx, foreign.prog().fd(), XdpMode::Native, false).unwrap();
        let theirs = query_xdp(idx).unwrap().prog_id;
        let e = AfXdpPort::open(copy(), &mut cache).unwrap_err();
        assert!(
            matches!(&e.kind, PortErrorKind::XdpInUse { name, id } if name == "other_tool" && *id == theirs),
            "{e}"
        );
        assert!(e.to_string().contains("other_tool"), "{e}");
        assert_eq!(query_xdp(idx).unwrap().prog_id, theirs, "left in place");
        spine_sys::detach_xdp(idx, XdpMode::Native, None).unwrap();
    });
}

/// Receives until `n` frames arrived or `wait` passed; returns each frame whole (head
/// and fragments) and how many of them were chains, and frees the buffers.
fn rx_frames(
    port: &mut AfXdpPort,
    cache: &mut spine_ports::PoolCache,
    n: usize,
) -> (Vec<Vec<u8>>, usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    let mut burst = Burst::with_capacity(32);
    let (mut out, mut chains) = (Vec::new(), 0);
    while out.len() < n && std::time::Instant::now() < deadline {
        port.rx_burst(cache, &mut burst).unwrap();
        let pool = cache.pool().clone();
        for b in burst.iter() {
            let mut f = pool.data(b).unwrap().to_vec();
            chains += usize::from(pool.has_frags(b));
            pool.frags(b).for_each(|p| f.extend_from_slice(p));
            out.push(f);
        }
        cache.free_burst(&mut burst).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    (out, chains)
}

/// Jumbo frames on a veth with MTU 9000: the socket bound with `XDP_USE_SG` (copy mode)
/// receives each as descriptors chained with `XDP_PKT_CONTD`, which arrive as one pool
/// chain; a chain sent goes out as one frame. Every buffer comes back.
#[test]
fn jumbo_frames_cross_as_chains_with_xdp_use_sg() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("ja", "jb");
    ns.ip("link set ja mtu 9000");
    ns.ip("link set jb mtu 9000");
    ns.enter(|| {
        let pool = pool(2048);
        let mut cache = pool.cache();
        let cfg = AfXdpConfig { bind: BindMode::Copy, frags: true, ..AfXdpConfig::new("ja") };
        let mut port = match AfXdpPort::open(cfg, &mut cache) {
            Ok(p) => p,
            Err(e) => panic!("AF_XDP with XDP_USE_SG on veth: {e}"),
        };
        assert!(port.takes_frags());
        let peer = Raw::bind("jb");
        let lens = [60usize, 1792, 2100, 4000, 9000 + 14, 1500];
        let sent: Vec<Vec<u8>> =
            lens.iter().enumerate().map(|(i, &l)| frame(i as u32, l)).collect();
        for f in &sent {
            peer.send(f);
        }
        let (got, chains) = rx_frames(&mut port, &mut cache, sent.len());
        assert_eq!(got.len(), sent.len(), "{:?}", port.stats());
        assert!(got == sent, "bytes or order differ");
        assert!(chains >= 3, "the frames over one chunk came as chains ({chains})");

        // Send a 9,014-byte frame as a chain of buffers of 1,792 bytes.
        let big = frame(77, 9014);
        let mut head = cache.alloc().unwrap();
        pool.write(&mut head, &big[..1792]).unwrap();
        for piece in big[1792..].chunks(1792) {
            let mut f = cache.alloc().unwrap();
            pool.write(&mut f, piece).unwrap();
            pool.chain(&mut head, f).unwrap();
        }
        let mut burst = Burst::with_capacity(4);
        burst.set_chained();
        burst.push(head).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while !burst.is_empty() && std::time::Instant::now() < deadline {
            port.tx_burst(&mut cache, &mut burst).unwrap();
        }
        port.flush(&mut cache).unwrap();
        let seen = peer.recv(2, Duration::from_secs(2));
        assert_eq!(seen, vec![big], "the chain left as one frame");
        let st = port.stats();
        assert_eq!((st.rx_packets, st.tx_packets), (lens.len() as u64, 1));
        assert_eq!(st.rx_drops.total() + st.tx_drops.total(), 0, "{st:?}");
        for _ in 0..100 {
            port.flush(&mut cache).unwrap();
            if port.lent() == 512 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(port);
        drop(cache);
        assert_eq!(pool.shared_free(), 2048, "every buffer came back from the kernel");
    });
}
