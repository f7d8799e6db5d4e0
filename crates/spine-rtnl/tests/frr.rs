//! FRR drives spine's FIB: zebra and bgpd (Debian's `frr`, 8.4) in a router namespace
//! peer over two links with a BIRD in a neighbour namespace that announces 2,000
//! prefixes on both sessions. bgpd keeps both paths (`maximum-paths 2`), and zebra
//! installs every prefix as a route through a nexthop group object (`nhid`), the way
//! FRR 8 programs the kernel. spine's mirror has every prefix with both next hops and
//! picks the kernel's next hop for each flow (`ip route get`); when one session goes
//! down, zebra moves the routes to a single nexthop and the FIB follows; when the
//! neighbour goes away, the withdrawal removes them all. The daemons run with their
//! files in a temporary folder and are killed at the end, also on failure.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant};

use spine_fib::{mphash, table_id, FibReader, FibWriter};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_testnet::daemons::{announced, announcer_conf, bird, frr, have, TempDir};
use spine_testnet::netns::NetNs;

const PREFIXES: u32 = 2_000;
const SEED: u32 = 0x0f22_0011;

/// The gateways of each announced prefix's route in spine's FIB, counted by set.
fn gateways(reader: &FibReader) -> Vec<BTreeSet<IpAddr>> {
    let st = reader.load();
    (0..PREFIXES)
        .filter_map(|i| {
            let [a, b, c] = announced(i);
            let r = st.lookup(table_id::MAIN, IpAddr::from([a, b, c, 9]), 0)?;
            Some(r.route.nexthops.iter().filter_map(|h| h.gateway).collect())
        })
        .collect()
}

fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool, why: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}\n{}", why());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ip route get DST` in `ns`: the gateway, if it forwards.
fn kernel_gateway(ns: &NetNs, dst: IpAddr) -> Option<IpAddr> {
    let out = Command::new("ip")
        .args(["-n", ns.name(), "route", "get", &dst.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let words: Vec<&str> = text.split_whitespace().collect();
    let i = words.iter().position(|w| *w == "via")?;
    words[i + 1].parse().ok()
}

#[test]
fn frr_routes_through_nexthop_groups_reach_the_fib_and_their_withdrawal_removes_them() {
    if !have("bird", "BIRD (bird2) is not installed") || !have("birdc", "birdc is missing") {
        return;
    }
    let (Some(router), Some(peer)) = (NetNs::new(), NetNs::new()) else { return };
    let dir = TempDir::new("frr");
    router.exec(&["sysctl", "-qw", &format!("net.ipv4.fib_multipath_hash_seed={SEED}")]);
    for k in 0..2 {
        router.veth(&format!("frr{k}"), &format!("frp{k}"));
        router.ip(&format!("link set frp{k} netns {}", peer.name()));
        router.ip(&format!("addr add 10.72.{k}.1/24 dev frr{k}"));
        peer.ip(&format!("addr add 10.72.{k}.2/24 dev frp{k}"));
        peer.ip(&format!("link set frp{k} up"));
    }
    let (fib, reader) = FibWriter::new();
    let mirror = router.enter(|| Mirror::start(RtnlSocket::open().unwrap(), fib)).unwrap();

    let bgpd = "router bgp 65001\n bgp router-id 10.72.0.1\n no bgp ebgp-requires-policy\n \
                timers bgp 2 6\n neighbor 10.72.0.2 remote-as 65002\n \
                neighbor 10.72.0.2 timers connect 1\n neighbor 10.72.1.2 remote-as 65002\n \
                neighbor 10.72.1.2 timers connect 1\n address-family ipv4 unicast\n  \
                maximum-paths 2\n  neighbor 10.72.0.2 activate\n  neighbor 10.72.1.2 activate\n \
                exit-address-family\n";
    let Some(mut frr) = frr(&router, &dir, bgpd) else { return };
    let p = |k: u8| Ipv4Addr::new(10, 72, k, 2);
    let r = |k: u8| Ipv4Addr::new(10, 72, k, 1);
    let peer_conf = announcer_conf(p(0), &[(p(0), r(0)), (p(1), r(1))], PREFIXES);
    let announcer = bird(&peer, &dir, "peer", &peer_conf);
    let both: BTreeSet<IpAddr> = [p(0), p(1)].into_iter().map(IpAddr::V4).collect();
    let log = |frr: &spine_testnet::daemons::Frr| {
        format!(
            "{}\n{}\nzebra: {}",
            frr.vtysh("show bgp summary"),
            frr.vtysh("show ip route summary"),
            std::fs::read_to_string(dir.join("zebra.log")).unwrap_or_default()
        )
    };

    wait_for(
        "2,000 BGP routes with both next hops in spine's FIB",
        60,
        || gateways(&reader).iter().filter(|g| **g == both).count() == PREFIXES as usize,
        || log(&frr),
    );
    assert!(frr.running(), "zebra and bgpd run");
    // zebra installed them through a nexthop group object, not as multipath routes.
    let shown = router.ip("route show 100.71.207.0/24");
    assert!(shown.contains("nhid"), "a route through a nexthop object: {shown}");
    let group = router.ip("nexthop show");
    assert!(group.contains("group"), "zebra made a nexthop group: {group}");
    // Each flow takes the kernel's next hop (no source address, the namespace's seed).
    let st = reader.load();
    let mut spread = BTreeSet::new();
    for i in (0..PREFIXES).step_by(50) {
        let [a, b, c] = announced(i);
        let dst = IpAddr::from([a, b, c, (i % 251) as u8]);
        let hash = mphash::hash_v4([0; 4], [a, b, c, (i % 251) as u8], SEED);
        let ours =
            st.lookup(table_id::MAIN, dst, hash).and_then(|r| r.nexthop).and_then(|h| h.gateway);
        assert_eq!(ours, kernel_gateway(&router, dst), "the next hop for {dst}");
        spread.extend(ours);
    }
    assert_eq!(spread, both, "flows use both next hops");
    drop(st);

    // One session goes down: zebra moves every route to the remaining next hop.
    let ctl = dir.join("peer.ctl");
    let out = Command::new("birdc").arg("-s").arg(&ctl).args(["disable", "up1"]).output().unwrap();
    assert!(out.status.success(), "birdc: {}", String::from_utf8_lossy(&out.stderr));
    let one: BTreeSet<IpAddr> = [IpAddr::V4(p(0))].into();
    wait_for(
        "every route on the remaining next hop",
        30,
        || gateways(&reader).iter().filter(|g| **g == one).count() == PREFIXES as usize,
        || log(&frr),
    );

    drop(announcer); // the session closes; bgpd withdraws, zebra removes the routes
    wait_for(
        "the withdrawal of every BGP route",
        30,
        || gateways(&reader).is_empty(),
        || log(&frr),
    );
    let stats = mirror.stats();
    let nexthops = stats.nexthops.load(std::sync::atomic::Ordering::Relaxed);
    let resyncs = stats.resyncs.load(std::sync::atomic::Ordering::Relaxed);
    mirror.stop().expect("the mirror ran without error");
    println!(
        "FRR: 2,000 prefixes learned over two sessions, moved to one, withdrawn \
         ({nexthops} nexthop messages, {resyncs} resyncs)"
    );
}
