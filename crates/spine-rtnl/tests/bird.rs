//! BIRD drives spine's FIB: BIRD in a namespace peers over BGP with a BIRD in a neighbour
//! namespace that announces 2,000 prefixes; BIRD installs them in the kernel, and spine's
//! mirror has every one (next hop, device) within seconds; when the neighbour goes away,
//! the withdrawal removes them all.

use std::net::IpAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use spine_fib::{table_id, FibReader, FibWriter};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_testnet::netns::{ifindex, NetNs};

const PREFIXES: u32 = 2_000;

/// A BIRD in the foreground in `ns`, killed when dropped.
struct Bird(Child);

impl Drop for Bird {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn bird(ns: &NetNs, dir: &std::path::Path, name: &str, conf: &str) -> Bird {
    let (cfg, sock) = (dir.join(format!("{name}.conf")), dir.join(format!("{name}.ctl")));
    std::fs::write(&cfg, conf).unwrap();
    let child = Command::new("ip")
        .args(["netns", "exec", ns.name(), "bird", "-f", "-c"])
        .arg(&cfg)
        .arg("-s")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("bird");
    Bird(child)
}

/// The `i`th announced prefix: 100.64.0.0/24, 100.64.1.0/24, ...
fn prefix(i: u32) -> [u8; 3] {
    [100, 64 + (i >> 8) as u8, i as u8]
}

fn count(reader: &FibReader) -> usize {
    let st = reader.load();
    (0..PREFIXES)
        .filter(|&i| {
            let [a, b, c] = prefix(i);
            st.lookup(table_id::MAIN, IpAddr::from([a, b, c, 9]), 0).is_some()
        })
        .count()
}

fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn bird_routes_reach_the_fib_and_their_withdrawal_removes_them() {
    if Command::new("bird").arg("--version").output().is_err() {
        eprintln!("SKIP: BIRD (bird2) is not installed");
        return;
    }
    let (Some(router), Some(peer)) = (NetNs::new(), NetNs::new()) else { return };
    router.veth("bgpr", "bgpp");
    router.ip(&format!("link set bgpp netns {}", peer.name()));
    router.ip("addr add 10.70.0.1/24 dev bgpr");
    peer.ip("addr add 10.70.0.2/24 dev bgpp");
    peer.ip("link set bgpp up");
    let dir = std::env::temp_dir().join(format!("spine-bird-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();

    let (fib, reader) = FibWriter::new();
    let mirror = router.enter(|| Mirror::start(RtnlSocket::open().unwrap(), fib)).unwrap();
    let timers = "hold time 6; keepalive time 2; connect retry time 1; connect delay time 1;";
    let _r = bird(
        &router,
        &dir,
        "router",
        &format!(
            "router id 10.70.0.1;\nprotocol device {{}}\n\
         protocol kernel {{ ipv4 {{ import none; export all; }}; }}\n\
         protocol bgp peer {{ local 10.70.0.1 as 65001; neighbor 10.70.0.2 as 65002; {timers}\n\
         ipv4 {{ import all; export none; }}; }}\n"
        ),
    );
    let statics: String = (0..PREFIXES)
        .map(|i| {
            let [a, b, c] = prefix(i);
            format!("route {a}.{b}.{c}.0/24 blackhole;\n")
        })
        .collect();
    let announcer = bird(
        &peer,
        &dir,
        "peer",
        &format!(
            "router id 10.70.0.2;\nprotocol device {{}}\n\
         protocol static {{ ipv4; {statics} }}\n\
         protocol bgp upstream {{ local 10.70.0.2 as 65002; neighbor 10.70.0.1 as 65001; {timers}\n\
         ipv4 {{ import none; export all; }}; }}\n"
        ),
    );

    wait_for("2,000 BGP routes in spine's FIB", 30, || count(&reader) == PREFIXES as usize);
    let bgpr = router.enter(|| ifindex("bgpr"));
    let st = reader.load();
    let r = st.lookup(table_id::MAIN, IpAddr::from([100, 71, 207, 1]), 0).expect("the last one");
    let nh = r.nexthop.expect("a next hop");
    assert_eq!((nh.gateway, nh.ifindex), (Some(IpAddr::from([10, 70, 0, 2])), bgpr));
    drop(st);

    drop(announcer); // the session closes; BIRD withdraws the routes from the kernel
    wait_for("the withdrawal of every BGP route", 30, || count(&reader) == 0);
    let resyncs = mirror.stats().resyncs.load(std::sync::atomic::Ordering::Relaxed);
    mirror.stop().expect("the mirror ran without error");
    std::fs::remove_dir_all(&dir).ok();
    println!("2,000 prefixes learned and withdrawn ({resyncs} resyncs)");
}
