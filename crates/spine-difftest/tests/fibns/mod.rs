//! The namespace both `bpf_fib_lookup` differential tests use: devices, addresses,
//! routes in several tables and neighbours of both families, and its mirror in spine's
//! FIB read back with `ip -j`; and what every `bpf_fib_lookup` differential test
//! shares (the generator, the host, the kernel's run of the probe program).
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use serde_json::Value;
use spine_fib::{FibOp, FibWriter, IpPrefix, Neigh, NextHop, NudState, Route, RouteType};
use spine_runtime::fib_lookup::{FibEnv, Iface};
use spine_runtime::Host;
use spine_testnet::netns::NetNs;

/// `net.ipv4.fib_multipath_hash_seed` of the namespace, given to spine too.
pub const SEED: u32 = 0x5eed_1234;

/// The namespace: `ip` commands, run in order.
const SETUP: &[&str] = &[
    "link add in0 type veth peer name in0p",
    "link add dn0 type veth peer name dn0p",
    "link add dn1 type veth peer name dn1p",
    "link add sm0 type veth peer name sm0p",
    "link add nf0 type veth peer name nf0p",
    "link set sm0 mtu 1280",
    "link set in0 up",
    "link set in0p up",
    "link set dn0 up",
    "link set dn0p up",
    "link set dn1 up",
    "link set dn1p up",
    "link set sm0 up",
    "link set sm0p up",
    "link set nf0 up",
    "link set nf0p up",
    "addr add 10.0.0.1/24 dev in0",
    "addr add 10.1.0.1/24 dev dn0",
    "addr add 10.1.1.1/24 dev dn0",
    "addr add 10.2.0.1/24 dev dn1",
    "addr add 10.3.0.1/24 dev sm0",
    "addr add 10.4.0.1/24 dev nf0",
    "-6 addr add 2001:db8::1/64 dev in0 nodad",
    "-6 addr add 2001:db8:1::1/64 dev dn0 nodad",
    "-6 addr add 2001:db8:2::1/64 dev dn1 nodad",
    "-6 addr add 2001:db8:3::1/64 dev sm0 nodad",
    "-6 addr add 2001:db8:4::1/64 dev nf0 nodad",
    // IPv4.
    "route add 172.16.0.0/16 via 10.1.0.2",
    "route add 172.16.5.0/24 via 10.2.0.2",
    "route add 172.17.0.0/16 via 10.1.0.3",
    "route add 172.18.0.0/16 nexthop via 10.1.0.2 dev dn0 nexthop via 10.2.0.2 dev dn1 weight 3",
    "route add 172.18.128.0/17 nexthop via 10.1.0.2 dev dn0 nexthop via 10.1.1.2 dev dn0 \
     nexthop via 10.2.0.2 dev dn1",
    "route add 172.19.0.0/16 via 10.3.0.2",
    "route add blackhole 172.20.0.0/16",
    "route add unreachable 172.21.0.0/16",
    "route add prohibit 172.22.0.0/16",
    "route add 172.23.0.0/16 via 10.1.0.2 mtu lock 1400",
    "route add 172.23.128.0/17 via 10.1.0.2 mtu 1300",
    "route add 172.24.0.0/16 dev dn1",
    "route add 172.25.0.0/16 via 10.1.0.2 metric 100",
    "route add 172.25.0.0/16 via 10.2.0.2 metric 50",
    "route add 172.26.0.0/16 via inet6 fe80::2 dev dn0",
    "route add 172.27.0.0/16 via 10.2.0.2 src 10.2.0.1",
    "route add 172.28.0.0/16 via 10.4.0.2",
    "route add throw 10.99.0.0/16",
    "route add 10.99.0.0/16 via 10.2.0.2 table default",
    "route add 198.18.0.0/15 via 10.1.0.2 table default",
    "route add 172.16.0.0/12 via 10.2.0.2 table 100",
    "route add unreachable 172.20.0.0/16 table 100",
    "route add default via 10.3.0.2 table 100",
    "route add throw 172.16.0.0/16 table 200",
    "route add 172.16.0.0/12 via 10.1.0.2 table 200",
    // IPv6.
    "-6 route add 2001:db8:10::/48 via 2001:db8:1::2",
    "-6 route add 2001:db8:10:5::/64 via 2001:db8:2::2",
    "-6 route add 2001:db8:11::/48 via 2001:db8:1::3",
    "-6 route add 2001:db8:12::/48 nexthop via fe80::2 dev dn0 nexthop via fe80::3 dev dn1",
    "-6 route add 2001:db8:12:8000::/49 nexthop via 2001:db8:1::2 dev dn0 \
     nexthop via 2001:db8:2::2 dev dn1 weight 2 nexthop via 2001:db8::2 dev in0",
    "-6 route add 2001:db8:13::/48 via 2001:db8:3::2",
    "-6 route add blackhole 2001:db8:14::/48",
    "-6 route add unreachable 2001:db8:15::/48",
    "-6 route add prohibit 2001:db8:16::/48",
    "-6 route add 2001:db8:17::/48 via 2001:db8:1::2 mtu lock 1300",
    "-6 route add 2001:db8:17:8000::/49 via 2001:db8:1::2 mtu 1400",
    "-6 route add 2001:db8:18::/48 dev dn1",
    "-6 route add 2001:db8:19::/48 via 2001:db8:1::2 metric 100",
    "-6 route add 2001:db8:19::/48 via 2001:db8:2::2 metric 50",
    "-6 route add 2001:db8:1a::/48 via 2001:db8:2::2 src 2001:db8:1::1",
    "-6 route add 2001:db8:1b::/48 via 2001:db8:4::2",
    // A range table local holds (AnyIP) under a longer prefix of main's: the kernel
    // answers local's route (NOT_FWDED) unless DIRECT looks in main alone.
    "-6 route add local 2001:db8:1c::/48 dev lo table local",
    "-6 route add 2001:db8:1c:1::/64 via 2001:db8:1::2",
    "-6 route add 2001:db8:10::/48 via 2001:db8:2::2 table 100",
    "-6 route add unreachable 2001:db8:14::/48 table 100",
    "-6 route add default via 2001:db8:3::2 table 100",
    // Neighbours: permanent and stale entries; 10.1.0.3, 2001:db8:1::3 have none.
    "neigh add 10.1.0.2 lladdr 02:00:00:00:01:02 dev dn0 nud permanent",
    "neigh add 10.1.1.2 lladdr 02:00:00:00:01:12 dev dn0 nud stale",
    "neigh add 10.2.0.2 lladdr 02:00:00:00:02:02 dev dn1 nud permanent",
    "neigh add 10.3.0.2 lladdr 02:00:00:00:03:02 dev sm0 nud permanent",
    "neigh add 10.4.0.2 lladdr 02:00:00:00:04:02 dev nf0 nud permanent",
    "neigh add 172.24.0.5 lladdr 02:00:00:00:24:05 dev dn1 nud permanent",
    "neigh add 172.24.0.6 lladdr 02:00:00:00:24:06 dev dn1 nud noarp",
    "neigh add fe80::2 lladdr 02:00:00:00:06:02 dev dn0 nud permanent",
    "neigh add fe80::3 lladdr 02:00:00:00:06:03 dev dn1 nud stale",
    "neigh add 2001:db8:1::2 lladdr 02:00:00:00:61:02 dev dn0 nud permanent",
    "neigh add 2001:db8:2::2 lladdr 02:00:00:00:62:02 dev dn1 nud permanent",
    "neigh add 2001:db8::2 lladdr 02:00:00:00:60:02 dev in0 nud permanent",
    "neigh add 2001:db8:3::2 lladdr 02:00:00:00:63:02 dev sm0 nud permanent",
    "neigh add 2001:db8:4::2 lladdr 02:00:00:00:64:02 dev nf0 nud permanent",
    "neigh add 2001:db8:18::5 lladdr 02:00:00:00:68:05 dev dn1 nud permanent",
];

fn sysctls(ns: &NetNs) {
    for kv in [
        "net.ipv6.conf.all.disable_ipv6=0",
        "net.ipv6.conf.default.disable_ipv6=0",
        "net.ipv6.conf.all.accept_dad=0",
        "net.ipv6.conf.default.accept_dad=0",
    ] {
        ns.exec(&["sysctl", "-qw", kv]);
    }
}

fn forwarding(ns: &NetNs) {
    for kv in [
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.nf0.forwarding=0",
        "net.ipv6.conf.nf0.forwarding=0",
    ] {
        ns.exec(&["sysctl", "-qw", kv]);
    }
    ns.exec(&["sysctl", "-qw", &format!("net.ipv4.fib_multipath_hash_seed={SEED}")]);
}

pub fn json(ns: &NetNs, args: &str) -> Vec<Value> {
    let out = ns.ip(&format!("-j {args}"));
    match serde_json::from_str(&out) {
        Ok(Value::Array(v)) => v,
        other => panic!("ip -j {args}: {other:?}"),
    }
}

fn sysctl(ns: &NetNs, key: &str) -> String {
    ns.exec(&["sysctl", "-n", key]).trim().to_string()
}

fn mac(s: &str) -> [u8; 6] {
    let mut m = [0u8; 6];
    for (i, b) in s.split(':').enumerate().take(6) {
        m[i] = u8::from_str_radix(b, 16).expect("a MAC");
    }
    m
}

/// The namespace's interfaces as `bpf_fib_lookup` sees them.
fn mirror_ifaces(ns: &NetNs) -> (Vec<Iface>, BTreeMap<String, u32>) {
    let mut names = BTreeMap::new();
    let mut out = Vec::new();
    for l in json(ns, "addr show") {
        let name = l["ifname"].as_str().expect("ifname").to_string();
        let ifindex = l["ifindex"].as_u64().expect("ifindex") as u32;
        names.insert(name.clone(), ifindex);
        let mut addrs = Vec::new();
        for a in l["addr_info"].as_array().into_iter().flatten() {
            if a["secondary"].as_bool() == Some(true) || a["tentative"].as_bool() == Some(true) {
                continue;
            }
            let ip: IpAddr = a["local"].as_str().expect("local").parse().expect("an address");
            addrs.push((ip, a["prefixlen"].as_u64().expect("prefixlen") as u8));
        }
        let fwd = |fam: &str| sysctl(ns, &format!("net.{fam}.conf.{name}.forwarding")) == "1";
        out.push(Iface {
            ifindex,
            mtu: l["mtu"].as_u64().expect("mtu") as u32,
            mac: l["address"].as_str().map_or([0; 6], mac),
            forward_v4: fwd("ipv4"),
            forward_v6: fwd("ipv6"),
            addrs,
        });
    }
    (out, names)
}

fn table(v: &Value) -> u32 {
    match v["table"].as_str() {
        None | Some("main") => spine_fib::table_id::MAIN,
        Some("local") => spine_fib::table_id::LOCAL,
        Some("default") => spine_fib::table_id::DEFAULT,
        Some(n) => n.parse().expect("a table id"),
    }
}

fn prefix(dst: &str, v6: bool) -> IpPrefix {
    let s = match (dst, v6) {
        ("default", false) => "0.0.0.0/0".to_string(),
        ("default", true) => "::/0".to_string(),
        (d, false) if !d.contains('/') => format!("{d}/32"),
        (d, true) if !d.contains('/') => format!("{d}/128"),
        (d, _) => d.to_string(),
    };
    s.parse().unwrap_or_else(|e| panic!("prefix {s}: {e:?}"))
}

/// Every route of the namespace as [`FibOp`]s. `ip -j` does not say whether an MTU is
/// locked, so the text form is read for that.
fn mirror_routes(ns: &NetNs, names: &BTreeMap<String, u32>) -> Vec<FibOp> {
    let mut ops = Vec::new();
    for (fam, v6) in [("-4", false), ("-6", true)] {
        let locked: BTreeSet<(u32, IpPrefix)> = ns
            .ip(&format!("{fam} route show table all"))
            .lines()
            .filter(|l| l.contains(" mtu lock "))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let dst = if RouteType::from_name(w[0]).is_some() { w[1] } else { w[0] };
                let t =
                    w.iter().position(|&x| x == "table").map_or(spine_fib::table_id::MAIN, |i| {
                        match w[i + 1] {
                            "local" => spine_fib::table_id::LOCAL,
                            "default" => spine_fib::table_id::DEFAULT,
                            n => n.parse().expect("table"),
                        }
                    });
                (t, prefix(dst, v6))
            })
            .collect();
        for r in json(ns, &format!("-d {fam} route show table all")) {
            let kind = RouteType::from_name(r["type"].as_str().unwrap_or("unicast"))
                .unwrap_or_else(|| panic!("route type in {r}"));
            let pfx = prefix(r["dst"].as_str().expect("dst"), v6);
            let tbl = table(&r);
            let dev = |v: &Value| v["dev"].as_str().map(|d| names[d]);
            let gw = |v: &Value| -> Option<IpAddr> {
                v["gateway"]
                    .as_str()
                    .or_else(|| v["via"]["host"].as_str())
                    .map(|g| g.parse().expect("a gateway"))
            };
            let nexthops = if !kind.takes_nexthop() {
                Vec::new()
            } else if let Some(list) = r["nexthops"].as_array() {
                list.iter()
                    .map(|n| NextHop {
                        gateway: gw(n),
                        ifindex: dev(n).expect("a next hop's dev"),
                        weight: n["weight"].as_u64().unwrap_or(1) as u16,
                        encap: false,
                    })
                    .collect()
            } else {
                vec![NextHop {
                    gateway: gw(&r),
                    ifindex: dev(&r).expect("dev"),
                    weight: 1,
                    encap: false,
                }]
            };
            let mtu = r["metrics"]
                .as_array()
                .into_iter()
                .flatten()
                .find_map(|m| m["mtu"].as_u64())
                .filter(|_| locked.contains(&(tbl, pfx)))
                .unwrap_or(0) as u32;
            ops.push(FibOp::Add(Route {
                table: tbl,
                prefix: pfx,
                kind,
                metric: r["metric"].as_u64().unwrap_or(0) as u32,
                nexthops,
                mtu,
                prefsrc: r["prefsrc"].as_str().map(|a| a.parse().expect("prefsrc")),
                nhid: 0,
            }));
        }
    }
    for (ifindex, ip, neigh) in mirror_neighs(ns, names) {
        ops.push(FibOp::SetNeigh { ifindex, ip, neigh });
    }
    ops
}

/// The namespace's neighbour entries that have a link-layer address.
fn mirror_neighs(ns: &NetNs, names: &BTreeMap<String, u32>) -> Vec<(u32, IpAddr, Neigh)> {
    let mut out = Vec::new();
    for n in json(ns, "neigh show nud all") {
        let Some(ll) = n["lladdr"].as_str() else { continue };
        let state = n["state"].as_array().into_iter().flatten().fold(0u16, |s, x| {
            s | match x.as_str() {
                Some("PERMANENT") => NudState::PERMANENT.0,
                Some("NOARP") => NudState::NOARP.0,
                Some("REACHABLE") => NudState::REACHABLE.0,
                Some("STALE") => NudState::STALE.0,
                Some("DELAY") => NudState::DELAY.0,
                Some("PROBE") => NudState::PROBE.0,
                Some("FAILED") => NudState::FAILED.0,
                Some("INCOMPLETE") => NudState::INCOMPLETE.0,
                _ => 0,
            }
        });
        out.push((
            names[n["dev"].as_str().expect("dev")],
            n["dst"].as_str().expect("dst").parse().expect("an address"),
            Neigh { mac: mac(ll), state: NudState(state) },
        ));
    }
    out
}

/// A FIB writer kept after [`build_live`], and the neighbour entries it was given.
pub struct Live {
    pub w: FibWriter,
    neighs: Vec<(u32, IpAddr)>,
}

/// After changes to the namespace's neighbours and interfaces, brings them into the
/// FIB of `live` in one batch: every entry mirrored before is deleted and the current
/// ones set, and every interface is set in the FIB itself; returns a view that reads
/// the interfaces from the FIB (none configured), on the same FIB.
pub fn resync(ns: &NetNs, live: &mut Live, names: &BTreeMap<String, u32>) -> FibEnv {
    for (ifindex, ip) in live.neighs.drain(..) {
        live.w.apply(FibOp::DelNeigh { ifindex, ip }).expect("del neigh");
    }
    for (ifindex, ip, neigh) in mirror_neighs(ns, names) {
        live.w.apply(FibOp::SetNeigh { ifindex, ip, neigh }).expect("set neigh");
        live.neighs.push((ifindex, ip));
    }
    let (ifaces, _) = mirror_ifaces(ns);
    for i in ifaces {
        live.w.apply(FibOp::SetIface(i)).expect("set iface");
    }
    live.w.publish();
    FibEnv::new(live.w.reader(), Vec::new()).with_multipath_seed(SEED)
}

/// After `ip route` changes to `prefixes` in table main, brings them into the FIB of
/// `live` (published by the next [`resync`]): every route the FIB holds for them is
/// deleted and the namespace's current ones are added, read back with `ip -j` as at
/// the start.
pub fn resync_routes(
    ns: &NetNs,
    live: &mut Live,
    names: &BTreeMap<String, u32>,
    prefixes: &[&str],
) {
    let ps: Vec<IpPrefix> = prefixes.iter().map(|p| p.parse().expect("a prefix")).collect();
    for &prefix in &ps {
        let sel = spine_fib::RouteSelector {
            table: spine_fib::table_id::MAIN,
            prefix,
            metric: None,
            kind: None,
        };
        while live.w.apply(FibOp::Delete(sel)).is_ok() {}
    }
    for op in mirror_routes(ns, names) {
        if let FibOp::Add(r) = &op {
            if r.table == spine_fib::table_id::MAIN && ps.contains(&r.prefix) {
                live.w.apply(op.clone()).expect("add a changed route");
            }
        }
    }
}

/// A deterministic generator (splitmix64).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

/// The namespace built and mirrored: the namespace, spine's view of it, and its
/// interface indexes by name. `None` (after a SKIP line) without root or bpf(2).
pub fn build() -> Option<(NetNs, FibEnv, BTreeMap<String, u32>)> {
    build_live().map(|(ns, env, names, _)| (ns, env, names))
}

/// As [`build`], keeping the FIB's writer for [`resync`].
pub fn build_live() -> Option<(NetNs, FibEnv, BTreeMap<String, u32>, Live)> {
    let ns = NetNs::new()?;
    sysctls(&ns);
    for cmd in SETUP {
        ns.ip(cmd);
    }
    forwarding(&ns);

    let (ifaces, names) = mirror_ifaces(&ns);
    let ops = mirror_routes(&ns, &names);
    let (mut w, r) = FibWriter::new();
    for op in ops {
        match w.apply(op.clone()) {
            Ok(()) => {}
            // The kernel keeps a link-local and a multicast route per device with one
            // prefix and metric; spine keeps one route per (table, prefix, metric).
            // Link-local and multicast destinations are never forwarded, so the
            // lookups do not depend on which one is kept.
            Err(spine_fib::FibError::Exists { prefix: IpPrefix::V6(p), .. })
                if p.addr() >> 118 == 0x3fa || p.addr() >> 120 == 0xff => {}
            Err(e) => panic!("{op:?}: {e}"),
        }
    }
    w.publish();
    let env = FibEnv::new(r, ifaces).with_multipath_seed(SEED);
    let neighs = mirror_neighs(&ns, &names).into_iter().map(|n| (n.0, n.1)).collect();
    Some((ns, env, names, Live { w, neighs }))
}

/// A host whose `bpf_fib_lookup` reads the mirrored FIB.
pub struct FibHost(pub FibEnv);
impl Host for FibHost {
    fn now_ns(&mut self) -> u64 {
        0
    }
    fn prandom_u32(&mut self) -> u32 {
        0
    }
    fn trace(&mut self, _cpu: usize, _line: &[u8]) {}
    fn fib(&self) -> Option<&FibEnv> {
        Some(&self.0)
    }
}

/// The probe program's return code, from the packet it left.
pub fn code_of(p: &[u8]) -> i64 {
    i64::from_ne_bytes(p[86..94].try_into().expect("8 bytes"))
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The kernel's answers: the probe program of `obj` loaded and run from inside `ns`,
/// each packet arriving on interface `in0` (so the helper looks up in the namespace's
/// tables); the packets as the program left them.
pub fn kernel_lookups(
    ns: &NetNs,
    obj: &spine_obj::Object,
    pkts: &[Vec<u8>],
    in0: u32,
) -> Vec<Vec<u8>> {
    use spine_sys::{TestRun, XdpMd};
    ns.enter(|| {
        let k = spine_sys::load_object_program(obj, obj.program(None).expect("program"))
            .expect("kernel load");
        pkts.iter()
            .map(|p| {
                let mut run = TestRun::new(p);
                run.ctx_in =
                    Some(XdpMd { ingress_ifindex: in0, ..XdpMd::for_packet(p.len() as u32, 0) });
                let out = k.prog.test_run(&run).expect("test run");
                assert_eq!(out.retval, 2, "XDP_PASS");
                out.data_out
            })
            .collect()
    })
}

/// Spine's answers to the same lookups on `engine`, against the kernel's packets
/// `kernel`: every packet must come out identical (the mismatches are printed, then the
/// test fails). Returns how often each return code was seen.
pub fn spine_lookups_match(
    obj: &spine_obj::Object,
    engine: spine_runtime::EngineKind,
    env: &FibEnv,
    pkts: &[Vec<u8>],
    kernel: &[Vec<u8>],
    in0: u32,
) -> BTreeMap<i64, usize> {
    use spine_runtime::{load_object, Budget, Frame, Geometry, LoadOptions, RxInfo, XdpRunner};
    let opts = LoadOptions { engine, ..LoadOptions::default() };
    let loaded = load_object(obj, &opts).expect("spine load");
    let ext = loaded.program(None).expect("program").clone();
    let mut runner = XdpRunner::new(ext, 0).expect("runner").with_budget(Budget::UNLIMITED);
    let mut host = FibHost(env.clone());
    let mut frame = Frame::new(Geometry::TEST_RUN);
    let mut codes: BTreeMap<i64, usize> = BTreeMap::new();
    let mut bad = Vec::new();
    for (i, (p, k)) in pkts.iter().zip(kernel).enumerate() {
        frame.load(p).expect("frame");
        let rx = RxInfo { ingress_ifindex: in0, rx_queue_index: 0 };
        assert_eq!(runner.run(&mut frame, rx, &mut host).expect("spine run"), 2, "XDP_PASS");
        *codes.entry(code_of(k)).or_default() += 1;
        if frame.meta_and_packet() != k.as_slice() {
            bad.push(format!(
                "lookup {i} ({engine:?}) flags {:#x}: kernel code {}, spine code {}\n  in     {}\n  kernel {}\n  spine  {}",
                u32::from_ne_bytes(p[78..82].try_into().unwrap()),
                code_of(k),
                code_of(frame.meta_and_packet()),
                hex(&p[14..78]),
                hex(&k[14..78]),
                hex(&frame.meta_and_packet()[14..78]),
            ));
        }
    }
    println!("{engine:?}: {} lookups, codes {codes:?}, {} mismatches", pkts.len(), bad.len());
    for b in bad.iter().take(16) {
        println!("{b}");
    }
    assert!(bad.is_empty(), "spine and the kernel disagree on {} lookups", bad.len());
    codes
}
