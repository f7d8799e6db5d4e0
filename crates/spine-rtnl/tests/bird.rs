//! BIRD drives spine's FIB: BIRD in a namespace peers over BGP with a BIRD in a neighbour
//! namespace that announces 2,000 prefixes; BIRD installs them in the kernel, and spine's
//! mirror has every one (next hop, device) within seconds; when the neighbour goes away,
//! the withdrawal removes them all.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use spine_fib::{table_id, FibReader, FibWriter};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_testnet::daemons::{announced, announcer_conf, bird, bird_router_conf, have, TempDir};
use spine_testnet::netns::{ifindex, NetNs};

const PREFIXES: u32 = 2_000;

fn count(reader: &FibReader) -> usize {
    let st = reader.load();
    (0..PREFIXES)
        .filter(|&i| {
            let [a, b, c] = announced(i);
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
    if !have("bird", "BIRD (bird2) is not installed") {
        return;
    }
    let (Some(router), Some(peer)) = (NetNs::new(), NetNs::new()) else { return };
    router.veth("bgpr", "bgpp");
    router.ip(&format!("link set bgpp netns {}", peer.name()));
    router.ip("addr add 10.70.0.1/24 dev bgpr");
    peer.ip("addr add 10.70.0.2/24 dev bgpp");
    peer.ip("link set bgpp up");
    let dir = TempDir::new("bird");
    let (r, p) = (Ipv4Addr::new(10, 70, 0, 1), Ipv4Addr::new(10, 70, 0, 2));

    let (fib, reader) = FibWriter::new();
    let mirror = router.enter(|| Mirror::start(RtnlSocket::open().unwrap(), fib)).unwrap();
    let _r = bird(&router, &dir, "router", &bird_router_conf(r, p));
    let announcer = bird(&peer, &dir, "peer", &announcer_conf(p, &[(p, r)], PREFIXES));

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
    println!("2,000 prefixes learned and withdrawn ({resyncs} resyncs)");
}
