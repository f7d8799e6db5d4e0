//! End to end on real interfaces: veth pairs in network namespaces each test creates
//! (unique names, removed when the test ends, also on failure). Traffic is injected and
//! observed with plain AF_PACKET sockets on the far ends; the adapter runs on its
//! threads, configured from TOML as `spine run` would be.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::TempDir;
use spine_adapter::{Adapter, AdapterOptions, Config, Running, Totals};
use spine_testnet::netns::{ifindex, NetNs};
use spine_testnet::raw::{frame, Raw};

const N: u32 = 200;

fn bpf_ok() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: bpf(2) unavailable: {e}");
            false
        }
    }
}

fn start(text: &str, dir: &Path) -> Running {
    let cfg = Config::parse(text, dir).unwrap();
    let opts = AdapterOptions { cpus: None, ..AdapterOptions::from_config(&cfg.adapter) };
    Adapter::from_config(&cfg, opts).unwrap().start().unwrap()
}

fn swapped(f: &[u8]) -> Vec<u8> {
    let mut s = f.to_vec();
    s[..6].copy_from_slice(&f[6..12]);
    s[6..12].copy_from_slice(&f[..6]);
    s
}

/// Waits until the published counters satisfy `done` (they lag by up to ~100 ms).
fn wait_for(r: &Running, done: impl Fn(&Totals) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !done(&r.totals()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mac_swap_on(kind: &str, a: &str, b: &str) {
    let Some(ns) = NetNs::new() else { return };
    ns.veth(a, b);
    let dir = TempDir::new(kind);
    ns.enter(|| {
        let text = format!(
            "[adapter]\nworkers = 2\n\
             [[port]]\nname = \"wire\"\nkind = \"{kind}\"\ninterface = \"{a}\"\n\
             [[extension]]\nbundled = \"mac_swap\"\n\
             [[attach]]\nextension = \"mac_swap\"\nport = \"wire\"\n"
        );
        let running = start(&text, dir.path());
        let peer = Raw::bind(b);
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 7) % 1000)).collect();
        for f in &sent {
            peer.send(f);
        }
        let back = peer.recv(sent.len() + 1, Duration::from_secs(3));
        wait_for(&running, |t| t.port("wire").is_some_and(|p| p.tx_packets == u64::from(N)));
        let report = running.stop().unwrap();
        assert_eq!(back.len(), sent.len(), "every frame came back");
        let mut want: Vec<Vec<u8>> = sent.iter().map(|f| swapped(f)).collect();
        let mut got = back;
        want.sort();
        got.sort();
        assert!(got == want, "each frame reflected with its MACs swapped");
        let w = report.totals.port("wire").unwrap();
        assert_eq!(w.rx_packets, u64::from(N), "counted what was sent");
        assert_eq!((w.verdicts.tx, w.tx_packets), (u64::from(N), u64::from(N)));
        assert_eq!(w.drops.total() + w.device.rx_drops + w.device.tx_drops, 0, "{w:?}");
        assert_eq!(report.totals.extension("mac_swap").unwrap().runs, u64::from(N));
    });
}

#[test]
fn afxdp_port_reflects_with_mac_swap() {
    if bpf_ok() {
        mac_swap_on("afxdp", "mx0", "mx1");
    }
}

#[test]
fn afpacket_port_reflects_with_mac_swap() {
    mac_swap_on("afpacket", "mp0", "mp1");
}

#[test]
fn redirect_moves_frames_between_two_veth_ports_without_copies() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("ra0", "ra1");
    ns.veth("rb0", "rb1");
    let dir = TempDir::new("redirect");
    let obj = dir.join("steer.o");
    std::fs::write(&obj, common::steer_object()).unwrap();
    ns.enter(|| {
        let target = ifindex("rb0");
        let text = format!(
            "[adapter]\nworkers = 1\nassign = \"partition\"\n\
             [[port]]\nname = \"a\"\nkind = \"afxdp\"\ninterface = \"ra0\"\n\
             [[port]]\nname = \"b\"\nkind = \"afxdp\"\ninterface = \"rb0\"\n\
             [[domain]]\nname = \"fwd\"\nhelpers = [\"map_lookup_elem\", \"redirect\"]\nports = [\"a\", \"b\"]\n\
             [[extension]]\nname = \"fwd\"\nfile = \"{}\"\nsection = \"redirect\"\ndomain = \"fwd\"\n\
             [[attach]]\nextension = \"fwd\"\nport = \"a\"\n\
             [[map]]\nextension = \"fwd\"\nname = \"redirect_to\"\nentries = [{{ key = 0, value = {target} }}]\n",
            obj.display()
        );
        let running = start(&text, dir.path());
        let (inject, observe) = (Raw::bind("ra1"), Raw::bind("rb1"));
        let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 3) % 1400)).collect();
        for f in &sent {
            inject.send(f);
        }
        let seen = observe.recv(sent.len() + 1, Duration::from_secs(3));
        wait_for(&running, |t| t.port("b").is_some_and(|p| p.tx_packets == u64::from(N)));
        let report = running.stop().unwrap();
        assert_eq!(seen.len(), sent.len());
        assert!(seen == sent, "bytes and order kept");
        let (a, b) = (report.totals.port("a").unwrap(), report.totals.port("b").unwrap());
        assert_eq!((a.rx_packets, a.verdicts.redirect), (u64::from(N), u64::from(N)));
        assert_eq!(b.tx_packets, u64::from(N));
        assert_eq!(b.device.tx_copied, 0, "the received buffers were sent as they were");
        assert_eq!(a.drops.total() + b.drops.total(), 0);
    });
}

/// An ICMP echo from `from` to `to` over a raw socket, in the calling thread's
/// namespace; true if the reply came within `wait`.
fn ping(to: std::net::Ipv4Addr, id: u16, wait: Duration) -> bool {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // SAFETY: socket(2); the result is checked before it is owned.
    let raw = unsafe {
        libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::IPPROTO_ICMP)
    };
    assert!(raw >= 0, "raw ICMP socket: {}", std::io::Error::last_os_error());
    // SAFETY: a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = vec![8u8, 0, 0, 0];
    req.extend_from_slice(&id.to_be_bytes());
    req.extend_from_slice(&1u16.to_be_bytes());
    req.extend_from_slice(b"spine ping payload");
    let mut sum: u32 =
        req.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    req[2..4].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    sa.sin_family = libc::AF_INET as u16;
    sa.sin_addr.s_addr = u32::from_ne_bytes(to.octets());
    let deadline = Instant::now() + wait;
    let mut next_send = Instant::now();
    let mut buf = [0u8; 1500];
    while Instant::now() < deadline {
        if Instant::now() >= next_send {
            // SAFETY: the kernel reads `req` and a sockaddr_in of the given length.
            unsafe {
                libc::sendto(
                    fd.as_raw_fd(),
                    req.as_ptr().cast(),
                    req.len(),
                    0,
                    (&sa as *const libc::sockaddr_in).cast(),
                    size_of::<libc::sockaddr_in>() as u32,
                )
            };
            next_send = Instant::now() + Duration::from_millis(300);
        }
        // SAFETY: the kernel writes at most buf.len() bytes.
        let n = unsafe {
            libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT)
        };
        if n > 28 {
            let ihl = usize::from(buf[0] & 0x0f) * 4;
            let icmp = &buf[ihl..n as usize];
            if icmp.len() >= 8 && icmp[0] == 0 && icmp[4..6] == id.to_be_bytes() {
                return true;
            }
        } else {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    false
}

#[test]
fn xdp_pass_reaches_the_kernel_through_a_tap_and_a_ping_is_answered() {
    if !bpf_ok() {
        return;
    }
    let (Some(host), Some(peer)) = (NetNs::new(), NetNs::new()) else { return };
    // The wire: pw0 in the adapter's namespace, pw1 in the pinger's.
    host.ip(&format!("link add pw0 type veth peer name pw1 netns {}", peer.name()));
    host.ip("link set pw0 up");
    peer.ip("addr add 10.77.0.2/24 dev pw1");
    peer.ip("link set pw1 up");
    let dir = TempDir::new("tap");
    let report = host.enter(|| {
        let text = "[adapter]\nworkers = 1\n\
             [[port]]\nname = \"wire\"\nkind = \"afxdp\"\ninterface = \"pw0\"\nhost_path = \"host\"\n\
             [[port]]\nname = \"host\"\nkind = \"tap\"\ninterface = \"pt0\"\n\
             [[extension]]\nbundled = \"parser\"\n\
             [[attach]]\nextension = \"parser\"\nport = \"wire\"\n";
        let running = start(text, dir.path());
        // The host's own address lives on the TAP: the kernel reaches the wire only
        // through spine.
        host.ip("addr add 10.77.0.1/24 dev pt0");
        let answered = peer.enter(|| ping("10.77.0.1".parse().unwrap(), 0x5e5e, Duration::from_secs(5)));
        wait_for(&running, |t| t.port("host").is_some_and(|p| p.rx_packets >= 2));
        let report = running.stop().unwrap();
        assert!(answered, "the ping was answered through spine");
        report
    });
    let t = &report.totals;
    let (w, h) = (t.port("wire").unwrap(), t.port("host").unwrap());
    assert!(w.verdicts.pass >= 2, "ARP and the echo request passed: {w:?}");
    assert_eq!(w.to_host, w.verdicts.pass, "every passed packet went to the TAP");
    assert!(h.tx_packets >= 2, "written into the kernel: {h:?}");
    assert!(h.rx_packets >= 2, "the kernel's ARP reply and echo reply read back: {h:?}");
    assert!(h.to_host >= 2, "and sent out on the wire");
    assert!(w.tx_packets >= 2, "{w:?}");
}

/// Two namespaces joined by a veth pair, an adapter in one with a `udp` tunnel port and
/// `mac_swap` on it, the far end of the tunnel a plain tunnel port in the other: every
/// frame sent through the tunnel comes back swapped, across the two stacks.
#[test]
fn udp_tunnel_port_carries_frames_between_namespaces() {
    use spine_ports::{Burst, Pool, PoolConfig, Port, UdpPort};
    let (Some(here), Some(there)) = (NetNs::new(), NetNs::new()) else { return };
    here.veth("tun0", "tun1");
    here.ip(&format!("link set tun1 netns {}", there.name()));
    here.ip("addr add 10.88.0.1/24 dev tun0");
    there.ip("addr add 10.88.0.2/24 dev tun1");
    there.ip("link set tun1 up");
    let dir = TempDir::new("udp");
    let text = "[adapter]\nworkers = 1\n\
                [[port]]\nname = \"tunnel\"\nkind = \"udp\"\n\
                local = \"10.88.0.1:7000\"\npeer = \"10.88.0.2:7000\"\n\
                [[extension]]\nbundled = \"mac_swap\"\n\
                [[attach]]\nextension = \"mac_swap\"\nport = \"tunnel\"\n";
    let running = here.enter(|| start(text, dir.path()));
    let sent: Vec<Vec<u8>> = (0..N).map(|i| frame(i, 60 + (i as usize * 7) % 1400)).collect();
    let back = there.enter(|| {
        let pool = Pool::new(PoolConfig::new(1024)).unwrap();
        let mut cache = pool.cache();
        let peer = "10.88.0.1:7000".parse().unwrap();
        let mut far = UdpPort::open("far", "10.88.0.2:7000".parse().unwrap(), peer, 0).unwrap();
        // A window of 20 frames at a time: UDP keeps no frame the network drops, and
        // the first ones wait for ARP in a short queue.
        let mut burst = Burst::with_capacity(32);
        let mut back = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        for window in sent.chunks(20) {
            for f in window {
                let mut b = cache.alloc().unwrap();
                pool.write(&mut b, f).unwrap();
                burst.push(b).unwrap();
            }
            while !burst.is_empty() {
                far.tx_burst(&mut cache, &mut burst).unwrap();
            }
            let want = back.len() + window.len();
            while back.len() < want && Instant::now() < deadline {
                far.rx_burst(&mut cache, &mut burst).unwrap();
                back.extend(burst.iter().map(|b| pool.data(b).unwrap().to_vec()));
                cache.free_burst(&mut burst).unwrap();
            }
        }
        back
    });
    wait_for(&running, |t| t.port("tunnel").is_some_and(|p| p.tx_packets == u64::from(N)));
    let report = running.stop().unwrap();
    let want: Vec<Vec<u8>> = sent.iter().map(|f| swapped(f)).collect();
    assert_eq!(back.len(), want.len(), "every frame came back");
    assert!(back == want, "in order, MACs swapped, bytes otherwise unchanged");
    let t = report.totals.port("tunnel").unwrap();
    assert_eq!(
        (t.rx_packets, t.verdicts.tx, t.tx_packets),
        (u64::from(N), u64::from(N), u64::from(N))
    );
    assert_eq!(t.drops.total() + t.device.rx_drops + t.device.tx_drops, 0, "{t:?}");
}

/// A tunnel port with `key_file` in an adapter: the far end, keyed with the same file's
/// bytes, gets every frame back through `mac_swap`; well-formed but unsealed frames from
/// another port on the same host are refused before parsing and show in the totals and
/// the metrics as `wrong_peer`.
#[test]
fn a_keyed_tunnel_port_serves_only_its_sealed_peer_and_reports_the_rest() {
    use spine_ports::{Burst, Pool, PoolConfig, Port, TunnelKey, UdpPort, TUNNEL_HEADER};
    let Some(ns) = NetNs::new() else { return };
    let dir = TempDir::new("tunkey");
    std::fs::write(dir.join("tun.key"), [0x3cu8; 32]).unwrap();
    let text = "[adapter]\nworkers = 1\n\
                [[port]]\nname = \"tunnel\"\nkind = \"udp\"\n\
                local = \"127.0.0.1:7000\"\npeer = \"127.0.0.1:7001\"\nkey_file = \"tun.key\"\n\
                [[extension]]\nbundled = \"mac_swap\"\n\
                [[attach]]\nextension = \"mac_swap\"\nport = \"tunnel\"\n";
    let running = ns.enter(|| start(text, dir.path()));
    let sent: Vec<Vec<u8>> = (0..50).map(|i| frame(i, 60 + (i as usize * 29) % 1400)).collect();
    let back = ns.enter(|| {
        let stranger = std::net::UdpSocket::bind("127.0.0.1:7002").unwrap();
        for f in &sent[..5] {
            stranger.send_to(&[&TUNNEL_HEADER[..], f].concat(), "127.0.0.1:7000").unwrap();
        }
        let pool = Pool::new(PoolConfig::new(256)).unwrap();
        let mut cache = pool.cache();
        let key = TunnelKey::from_file(&dir.join("tun.key")).unwrap();
        let (here, peer) = ("127.0.0.1:7001".parse().unwrap(), "127.0.0.1:7000".parse().unwrap());
        let mut far = UdpPort::open("far", here, peer, 0).unwrap().with_key(&key);
        let mut burst = Burst::with_capacity(64);
        for f in &sent {
            let mut b = cache.alloc().unwrap();
            pool.write(&mut b, f).unwrap();
            burst.push(b).unwrap();
        }
        while !burst.is_empty() {
            far.tx_burst(&mut cache, &mut burst).unwrap();
        }
        let mut back = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while back.len() < sent.len() && Instant::now() < deadline {
            far.rx_burst(&mut cache, &mut burst).unwrap();
            back.extend(burst.iter().map(|b| pool.data(b).unwrap().to_vec()));
            cache.free_burst(&mut burst).unwrap();
        }
        assert_eq!(far.stats().rx_drops.total(), 0, "{:?}", far.stats());
        back
    });
    wait_for(&running, |t| {
        t.port("tunnel").is_some_and(|p| p.tx_packets == 50 && p.device.tunnel.wrong_peer == 5)
    });
    let report = running.stop().unwrap();
    let want: Vec<Vec<u8>> = sent.iter().map(|f| swapped(f)).collect();
    assert!(back == want, "every sealed frame came back swapped, in order");
    let t = report.totals.port("tunnel").unwrap();
    assert_eq!((t.rx_packets, t.tx_packets), (50, 50));
    assert_eq!((t.device.tunnel.wrong_peer, t.device.tunnel.total(), t.device.rx_drops), (5, 5, 5));
    let text = report.totals.prometheus();
    assert!(
        text.contains("spine_port_tunnel_drops_total{port=\"tunnel\",reason=\"wrong_peer\"} 5\n"),
        "{text}"
    );
}

/// The bundled router on two AF_XDP ports with `[fib] mirror = true`: routes and
/// neighbours come from the namespace's own tables, and an `ip route` change there
/// redirects the traffic within a second.
#[test]
fn the_router_follows_ip_route_through_the_mirrored_fib() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("rta", "cla");
    ns.veth("rtb", "clb");
    ns.ip("addr add 10.61.0.1/24 dev rta");
    ns.ip("addr add 10.62.0.1/24 dev rtb");
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.rta.forwarding=1"]);
    ns.exec(&["sysctl", "-qw", "net.ipv4.conf.rtb.forwarding=1"]);
    ns.ip("neigh add 10.62.0.2 lladdr 02:00:00:00:62:02 dev rtb nud permanent");
    ns.ip("neigh add 10.62.0.3 lladdr 02:00:00:00:62:03 dev rtb nud permanent");
    ns.ip("route add 198.51.100.0/24 via 10.62.0.2");
    let dir = TempDir::new("mirror");
    let text = "[adapter]\nworkers = 1\n\
                [[port]]\nname = \"a\"\nkind = \"afxdp\"\ninterface = \"rta\"\n\
                [[port]]\nname = \"b\"\nkind = \"afxdp\"\ninterface = \"rtb\"\n\
                [[extension]]\nbundled = \"router\"\n\
                [[attach]]\nextension = \"router\"\nport = \"a\"\n\
                [fib]\nmirror = true\n";
    let (running, rta_mac, rtb_mac) = ns.enter(|| {
        let links = spine_rtnl::links().unwrap();
        let mac = |d: &str| links.iter().find(|l| l.name == d).unwrap().mac;
        (start(text, dir.path()), mac("rta"), mac("rtb"))
    });
    // UDP 10.61.0.2 -> 198.51.100.7, TTL 64, to rta's MAC.
    let mut f = rta_mac.to_vec();
    f.extend_from_slice(&[2, 0, 0, 0, 0x61, 2, 8, 0]);
    f.extend_from_slice(&[0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 61, 0, 2, 198, 51, 100, 7]);
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39, 0, 12, 0, 0, b'r', b'o', b'u', b't']);
    let got = ns.enter(|| {
        let (a, b) = (Raw::bind("cla"), Raw::bind("clb"));
        let through = |want_dst: [u8; 6]| {
            let deadline = Instant::now() + Duration::from_secs(1);
            loop {
                a.send(&f);
                let seen = b.recv(1, Duration::from_millis(100));
                if seen.iter().any(|g| g[..6] == want_dst) {
                    return seen.into_iter().find(|g| g[..6] == want_dst).unwrap();
                }
                assert!(Instant::now() < deadline, "no frame to {want_dst:02x?} within a second");
            }
        };
        let first = through([2, 0, 0, 0, 0x62, 2]);
        std::process::Command::new("ip")
            .args(["route", "replace", "198.51.100.0/24", "via", "10.62.0.3"])
            .status()
            .unwrap();
        let second = through([2, 0, 0, 0, 0x62, 3]);
        (first, second)
    });
    let report = running.stop().unwrap();
    for g in [&got.0, &got.1] {
        assert_eq!(g[6..12], rtb_mac, "from the egress port's MAC");
        assert_eq!(g[14 + 8], 63, "TTL one lower");
        assert_eq!(g[14 + 16..14 + 20], [198, 51, 100, 7]);
    }
    let a = report.totals.port("a").unwrap();
    assert!(a.verdicts.redirect >= 2, "{a:?}");
}

/// What `tests/fixtures/frags_port.c`'s `trim` leaves of `p` (see `tests/frags_port.rs`).
fn trimmed(p: &[u8]) -> Vec<u8> {
    let len = p.len();
    let off = (len - 32).min(1784);
    let mut out = p.to_vec();
    out[14..30].copy_from_slice(&p[len - 16..]);
    out[30..62].copy_from_slice(&p[off..off + 32]);
    out.truncate(len - 100);
    out
}

/// Jumbo frames through the adapter on a veth with MTU 9000: an AF_XDP port with
/// `frags = true` (bound with `XDP_USE_SG`, copy mode) receives each frame longer than a
/// buffer as a chain, an `xdp.frags` program reads its last bytes with
/// `bpf_xdp_load_bytes`, trims it with `bpf_xdp_adjust_tail` and sends it back
/// (XDP_TX) as chained descriptors; the far end sees exactly the trimmed frames.
#[test]
fn jumbo_frames_cross_the_adapter_as_chains_on_an_afxdp_port_with_frags() {
    if !bpf_ok() {
        return;
    }
    let Some(ns) = NetNs::new() else { return };
    ns.veth("jx0", "jx1");
    ns.ip("link set jx0 mtu 9000");
    ns.ip("link set jx1 mtu 9000");
    let dir = TempDir::new("jumbo-veth");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/frags_port.c");
    let obj = dir.join("frags_port.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    ns.enter(|| {
        let text = format!(
            "[adapter]\nworkers = 1\n\
             [[port]]\nname = \"wire\"\nkind = \"afxdp\"\ninterface = \"jx0\"\nbind = \"copy\"\nfrags = true\n\
             [[extension]]\nname = \"trim\"\nfile = \"{}\"\nsection = \"trim_tx\"\n\
             [[attach]]\nextension = \"trim\"\nport = \"wire\"\n",
            obj.display()
        );
        let running = start(&text, dir.path());
        let peer = Raw::bind("jx1");
        let sent: Vec<Vec<u8>> =
            [9014usize, 4000, 1500, 2049, 9014].iter().enumerate().map(|(i, &n)| frame(i as u32, n)).collect();
        for f in &sent {
            peer.send(f);
        }
        let back: Vec<Vec<u8>> = peer
            .recv(sent.len() + 8, Duration::from_secs(3))
            .into_iter()
            .filter(|f| f.len() > 14 && f[12..14] == [0x88, 0xb5])
            .collect();
        let report = running.stop().unwrap();
        let want: Vec<Vec<u8>> = sent.iter().map(|f| trimmed(f)).collect();
        assert_eq!(back.len(), want.len(), "{:?}", report.totals.port("wire"));
        assert!(back == want, "each frame trimmed and sent back whole, in order");
        let w = report.totals.port("wire").unwrap();
        assert_eq!(w.drops.frags, 0, "{w:?}");
        assert_eq!(w.device.rx_drops + w.device.tx_drops, 0, "{w:?}");
    });
}

/// Jumbo frames through the adapter on an AF_PACKET port of a veth with MTU 9,000: each
/// frame longer than a buffer is copied from the ring into a chain, the `xdp.frags`
/// program reads its last bytes, trims it and sends it back (XDP_TX), and the port sends
/// the chain whole with one `sendmsg`; the far end sees exactly the trimmed frames, in
/// order with the linear ones.
#[test]
fn jumbo_frames_cross_the_adapter_as_chains_on_an_afpacket_port() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("jp0", "jp1");
    ns.ip("link set jp0 mtu 9000");
    ns.ip("link set jp1 mtu 9000");
    let dir = TempDir::new("jumbo-afpacket");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/frags_port.c");
    let obj = dir.join("frags_port.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    ns.enter(|| {
        let text = format!(
            "[adapter]\nworkers = 1\n\
             [[port]]\nname = \"wire\"\nkind = \"afpacket\"\ninterface = \"jp0\"\n\
             [[extension]]\nname = \"trim\"\nfile = \"{}\"\nsection = \"trim_tx\"\n\
             [[attach]]\nextension = \"trim\"\nport = \"wire\"\n",
            obj.display()
        );
        let running = start(&text, dir.path());
        let peer = Raw::bind("jp1");
        let sent: Vec<Vec<u8>> = [9014usize, 4000, 1500, 2049, 9014, 200]
            .iter()
            .enumerate()
            .map(|(i, &n)| frame(i as u32, n))
            .collect();
        for f in &sent {
            peer.send(f);
        }
        let back: Vec<Vec<u8>> = peer
            .recv(sent.len() + 8, Duration::from_secs(3))
            .into_iter()
            .filter(|f| f.len() > 14 && f[12..14] == [0x88, 0xb5])
            .collect();
        let report = running.stop().unwrap();
        let want: Vec<Vec<u8>> = sent.iter().map(|f| trimmed(f)).collect();
        let w = report.totals.port("wire").unwrap();
        assert_eq!(back.len(), want.len(), "{w:?}");
        assert!(back == want, "each frame trimmed and sent back whole, in order");
        assert_eq!((w.rx_packets, w.verdicts.tx, w.tx_packets), (6, 6, 6), "{w:?}");
        assert_eq!(w.drops.total(), 0, "{w:?}");
        assert_eq!(w.device.rx_drops + w.device.tx_drops, 0, "{w:?}");
    });
}

/// A program not loaded as `xdp.frags` (the bundled `mac_swap`) on the same AF_PACKET
/// port never sees a chained frame: the kernel refuses to attach such a program to a
/// device whose MTU needs fragments, and spine's per-frame equivalent drops each jumbo
/// frame, counted `drops.frags`, while the frames that fit a buffer run as before.
#[test]
fn a_program_without_frags_never_sees_a_jumbo_frame_on_an_afpacket_port() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("jq0", "jq1");
    ns.ip("link set jq0 mtu 9000");
    ns.ip("link set jq1 mtu 9000");
    let dir = TempDir::new("jumbo-plain");
    ns.enter(|| {
        let text = "[adapter]\nworkers = 1\n\
             [[port]]\nname = \"wire\"\nkind = \"afpacket\"\ninterface = \"jq0\"\n\
             [[extension]]\nbundled = \"mac_swap\"\n\
             [[attach]]\nextension = \"mac_swap\"\nport = \"wire\"\n";
        let running = start(text, dir.path());
        let peer = Raw::bind("jq1");
        let sent: Vec<Vec<u8>> = [9014usize, 1500, 4000, 60, 1793, 1792]
            .iter()
            .enumerate()
            .map(|(i, &n)| frame(i as u32, n))
            .collect();
        for f in &sent {
            peer.send(f);
        }
        let back = peer.recv(sent.len() + 1, Duration::from_secs(2));
        wait_for(&running, |t| t.port("wire").is_some_and(|p| p.rx_packets == 6));
        let report = running.stop().unwrap();
        let want: Vec<Vec<u8>> =
            [&sent[1], &sent[3], &sent[5]].iter().map(|f| swapped(f)).collect();
        assert!(back == want, "only the frames that fit a buffer came back, swapped");
        let w = report.totals.port("wire").unwrap();
        assert_eq!((w.rx_packets, w.tx_packets, w.drops.frags), (6, 3, 3), "{w:?}");
        assert_eq!(report.totals.extension("mac_swap").unwrap().runs, 3);
        assert_eq!(w.device.rx_drops + w.device.tx_drops, 0, "{w:?}");
    });
}

/// Jumbo pings through spine's host path: the peer pings, with 8,000 bytes of payload
/// and "do not fragment", an address the kernel holds on a TAP that is the host path of
/// an AF_PACKET port on a veth with MTU 9,000. Each request arrives as a chain, an
/// `xdp.frags` program counts it and passes it (XDP_PASS), the TAP writes it into the
/// kernel whole; the kernel's jumbo reply is read from the TAP as a chain and leaves by
/// the wire whole. No frame is dropped for being chained.
#[test]
fn jumbo_pings_cross_the_host_path_as_chains() {
    let (Some(host), Some(peer)) = (NetNs::new(), NetNs::new()) else { return };
    host.ip(&format!("link add jw0 type veth peer name jw1 netns {}", peer.name()));
    host.ip("link set jw0 mtu 9000");
    host.ip("link set jw0 up");
    peer.ip("link set jw1 mtu 9000");
    peer.ip("addr add 10.79.0.2/24 dev jw1");
    peer.ip("link set jw1 up");
    let dir = TempDir::new("jumbo-host");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/frags_port.c");
    let obj = dir.join("frags_port.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let report = host.enter(|| {
        let text = format!(
            "[adapter]\nworkers = 1\n\
             [[port]]\nname = \"wire\"\nkind = \"afpacket\"\ninterface = \"jw0\"\nhost_path = \"host\"\n\
             [[port]]\nname = \"host\"\nkind = \"tap\"\ninterface = \"jt0\"\n\
             [[extension]]\nname = \"count\"\nfile = \"{}\"\nsection = \"count_pass\"\n\
             [[attach]]\nextension = \"count\"\nport = \"wire\"\n",
            obj.display()
        );
        let running = start(&text, dir.path());
        host.ip("link set jt0 mtu 9000");
        host.ip("addr add 10.79.0.1/24 dev jt0");
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", peer.name(), "ping", "-n", "-c", "3", "-i", "0.3", "-w", "6"])
            .args(["-s", "8000", "-M", "do", "10.79.0.1"])
            .output()
            .expect("ping runs");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        wait_for(&running, |t| t.port("host").is_some_and(|p| p.rx_packets >= 3));
        let report = running.stop().unwrap();
        assert!(out.status.success(), "jumbo pings answered through spine: {text}");
        assert!(text.contains("8008 bytes from 10.79.0.1"), "{text}");
        report
    });
    let t = &report.totals;
    let (w, h) = (t.port("wire").unwrap(), t.port("host").unwrap());
    assert!(w.verdicts.pass >= 3 && w.to_host == w.verdicts.pass, "{w:?}");
    assert!(h.tx_packets >= 3 && h.rx_packets >= 3, "{h:?}");
    assert!(h.to_host >= 3 && w.tx_packets >= 3, "the replies left by the wire: {w:?}");
    assert_eq!(w.drops.frags + h.drops.frags, 0, "{w:?} {h:?}");
    assert_eq!(w.drops.total() + h.drops.total(), 0, "{w:?} {h:?}");
    assert!(h.tx_bytes >= 3 * 8042 && w.tx_bytes >= 3 * 8042, "{w:?} {h:?}");
}

/// Jumbo frames through a UDP tunnel port: the far end sends each frame longer than a
/// buffer as a chain in one datagram, the adapter's tunnel port receives it as a chain,
/// the `xdp.frags` program trims it and sends it back (XDP_TX) as one datagram, and the
/// far end receives it as a chain: exactly the trimmed frames, in order.
#[test]
fn jumbo_frames_cross_a_udp_tunnel_port_as_chains() {
    use spine_ports::{Burst, Pool, PoolConfig, Port, UdpPort};
    let (Some(here), Some(there)) = (NetNs::new(), NetNs::new()) else { return };
    here.veth("jtun0", "jtun1");
    here.ip(&format!("link set jtun1 netns {}", there.name()));
    here.ip("addr add 10.89.0.1/24 dev jtun0");
    there.ip("addr add 10.89.0.2/24 dev jtun1");
    there.ip("link set jtun1 up");
    let dir = TempDir::new("udp-jumbo");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/frags_port.c");
    let obj = dir.join("frags_port.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let text = format!(
        "[adapter]\nworkers = 1\n\
         [[port]]\nname = \"tunnel\"\nkind = \"udp\"\n\
         local = \"10.89.0.1:7000\"\npeer = \"10.89.0.2:7000\"\n\
         [[extension]]\nname = \"trim\"\nfile = \"{}\"\nsection = \"trim_tx\"\n\
         [[attach]]\nextension = \"trim\"\nport = \"tunnel\"\n",
        obj.display()
    );
    let running = here.enter(|| start(&text, dir.path()));
    let sent: Vec<Vec<u8>> = [9014usize, 200, 4000, 1500, 2049, 9014]
        .iter()
        .enumerate()
        .map(|(i, &n)| frame(i as u32, n))
        .collect();
    let back = there.enter(|| {
        let pool = Pool::new(PoolConfig::new(256)).unwrap();
        let mut cache = pool.cache();
        let peer = "10.89.0.1:7000".parse().unwrap();
        let mut far = UdpPort::open("far", "10.89.0.2:7000".parse().unwrap(), peer, 0).unwrap();
        let mut burst = Burst::with_capacity(32);
        let mut back = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        // One frame at a time: the first waits for ARP in a short queue.
        for f in &sent {
            let mut head = cache.alloc().unwrap();
            pool.write(&mut head, &f[..f.len().min(1792)]).unwrap();
            for piece in f[f.len().min(1792)..].chunks(1792) {
                let mut b = cache.alloc().unwrap();
                pool.write(&mut b, piece).unwrap();
                pool.chain(&mut head, b).unwrap();
            }
            burst.set_chained();
            burst.push(head).unwrap();
            while !burst.is_empty() {
                far.tx_burst(&mut cache, &mut burst).unwrap();
            }
            let want = back.len() + 1;
            while back.len() < want && Instant::now() < deadline {
                far.rx_burst(&mut cache, &mut burst).unwrap();
                for b in burst.iter() {
                    let mut whole = pool.data(b).unwrap().to_vec();
                    pool.frags(b).for_each(|p| whole.extend_from_slice(p));
                    back.push(whole);
                }
                cache.free_burst(&mut burst).unwrap();
            }
        }
        drop(far);
        drop(cache);
        assert_eq!(pool.shared_free(), 256, "the far end lost no buffer");
        back
    });
    let report = running.stop().unwrap();
    let want: Vec<Vec<u8>> = sent.iter().map(|f| trimmed(f)).collect();
    let t = report.totals.port("tunnel").unwrap();
    assert_eq!(back.len(), want.len(), "{t:?}");
    assert!(back == want, "each frame trimmed and sent back whole, in order");
    assert_eq!((t.rx_packets, t.verdicts.tx, t.tx_packets), (6, 6, 6), "{t:?}");
    assert_eq!(t.drops.total() + t.device.rx_drops + t.device.tx_drops, 0, "{t:?}");
}
