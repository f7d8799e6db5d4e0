//! The bundled router (`bpf/router.c`) forwarding through the adapter with a FIB:
//! frames from a pcap port go out of the port their route names, with the next hop's
//! MAC, the egress port's MAC and the TTL or hop limit one lower (the IPv4 checksum
//! recomputed here from scratch to check the router's incremental update); what the
//! router leaves to the host reaches the host path unchanged; blackholed and malformed
//! frames go nowhere.

mod common;

use std::net::IpAddr;

use common::TempDir;
use spine_adapter::{Adapter, AdapterOptions, Config};
use spine_fib::{FibOp, FibWriter, Neigh, NextHop, NudState, Route, RouteType};
use spine_ports::{read_capture, PcapWriter};
use spine_runtime::fib_lookup::{FibEnv, Iface};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];
const MAC_C: [u8; 6] = [2, 0, 0, 0, 0, 0x0c];
const NEXT_B: [u8; 6] = [2, 0, 0, 0, 1, 0x0b];
const NEXT_C: [u8; 6] = [2, 0, 0, 0, 1, 0x0c];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Ports wire (10), b (11), c (12): routes out of b and c, a gateway without a
/// neighbour, a blackhole, the router's own address.
fn fib() -> (FibWriter, FibEnv) {
    let (mut w, r) = FibWriter::new();
    let route = |p: &str, nh: Vec<NextHop>| Route::unicast(p.parse().unwrap(), nh);
    w.add(route("10.1.0.0/16", vec![NextHop::via(ip("192.0.2.1"), 11)])).unwrap();
    w.add(route("10.2.0.0/16", vec![NextHop::via(ip("198.51.100.1"), 12)])).unwrap();
    w.add(Route { kind: RouteType::Blackhole, ..route("10.9.0.0/16", vec![]) }).unwrap();
    w.add(Route {
        table: spine_fib::table_id::LOCAL,
        kind: RouteType::Local,
        ..route("10.0.0.1/32", vec![NextHop::dev(10)])
    })
    .unwrap();
    w.add(route("2001:db8:1::/48", vec![NextHop::via(ip("fe80::1"), 12)])).unwrap();
    for (ifindex, a, mac) in [(11, "192.0.2.1", NEXT_B), (12, "fe80::1", NEXT_C)] {
        let neigh = Neigh { mac, state: NudState::PERMANENT };
        w.apply(FibOp::SetNeigh { ifindex, ip: ip(a), neigh }).unwrap();
    }
    w.publish();
    let iface = |ifindex, mac, a: &str| Iface {
        ifindex,
        mtu: 1500,
        mac,
        forward_v4: true,
        forward_v6: true,
        addrs: vec![(ip(a), 24)],
    };
    let ifaces = vec![
        iface(10, MAC_A, "10.0.0.1"),
        iface(11, MAC_B, "192.0.2.7"),
        iface(12, MAC_C, "198.51.100.7"),
    ];
    (w, FibEnv::new(r, ifaces))
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(c[1])).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn v4(dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = [MAC_A.as_slice(), &[2, 0, 0, 0, 9, 9], &[0x08, 0x00]].concat();
    let mut h = vec![0x45, 0, 0, 48, 0x12, 0x34, 0x40, 0, ttl, 17, 0, 0, 10, 0, 0, 5];
    h.extend_from_slice(&dst);
    let c = csum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend((0..28).map(|i| i as u8));
    f
}

fn v6(dst: &str, hops: u8) -> Vec<u8> {
    let mut f = [MAC_A.as_slice(), &[2, 0, 0, 0, 9, 9], &[0x86, 0xdd]].concat();
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 17, hops]);
    f.extend_from_slice(
        &ip("2001:db8:aa::5").to_string().parse::<std::net::Ipv6Addr>().unwrap().octets(),
    );
    f.extend_from_slice(&dst.parse::<std::net::Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    f
}

/// What the router makes of a forwarded IPv4 frame (`l3`: where IPv4 starts).
fn forwarded_v4(f: &[u8], l3: usize, dmac: [u8; 6], smac: [u8; 6]) -> Vec<u8> {
    let mut o = [dmac.as_slice(), &smac, &[0x08, 0x00]].concat();
    let mut h = f[l3..].to_vec();
    h[8] -= 1;
    h[10..12].copy_from_slice(&[0, 0]);
    let c = csum(&h[..20]);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    o.extend_from_slice(&h);
    o
}

/// The frames, what should leave on b, c and the host path, and the input size.
struct Case {
    input: Vec<Vec<u8>>,
    b: Vec<Vec<u8>>,
    c: Vec<Vec<u8>>,
    host: Vec<Vec<u8>>,
}

fn case() -> Case {
    let fwd = v4([10, 1, 2, 3], 64);
    let mut tagged = [MAC_A.as_slice(), &[2, 0, 0, 0, 9, 9], &[0x81, 0x00, 0x00, 0x07]].concat();
    tagged.extend_from_slice(&v4([10, 1, 9, 9], 2)[12..]);
    let six = v6("2001:db8:1::5", 64);
    let expired = v4([10, 1, 2, 4], 1);
    let no_neigh = v4([10, 2, 0, 1], 64);
    let local = v4([10, 0, 0, 1], 64);
    let arp = [MAC_A.as_slice(), &[2, 0, 0, 0, 9, 9], &[0x08, 0x06], &[0u8; 28]].concat();
    let blackholed = v4([10, 9, 0, 1], 64);
    let truncated = v4([10, 1, 2, 3], 64)[..30].to_vec();
    let mut six_out = [NEXT_C.as_slice(), &MAC_C].concat();
    six_out.extend_from_slice(&six[12..]);
    six_out[14 + 7] -= 1;
    Case {
        b: vec![forwarded_v4(&fwd, 14, NEXT_B, MAC_B), forwarded_v4(&tagged, 18, NEXT_B, MAC_B)],
        c: vec![six_out],
        host: vec![expired.clone(), no_neigh.clone(), local.clone(), arp.clone()],
        input: vec![fwd, tagged, six, expired, no_neigh, local, arp, blackholed, truncated],
    }
}

/// Runs the router over the case's frames; `extra` is appended to the configuration.
fn run(extra: &str, fib: Option<FibEnv>) {
    run_traced(extra, fib, false);
}

/// [`run`], with the trace on (`trace`: every packet takes the per-packet path);
/// returns the FIB states the workers' lookups loaded (`fib_loads`).
fn run_traced(extra: &str, fib: Option<FibEnv>, trace: bool) -> u64 {
    let dir = TempDir::new("router");
    let c = case();
    let file = std::fs::File::create(dir.join("in.pcap")).unwrap();
    let mut w = PcapWriter::ethernet(file).unwrap();
    for (i, f) in c.input.iter().enumerate() {
        w.write(i as u64 * 1000, f).unwrap();
    }
    w.finish().unwrap();
    let text = format!(
        "[adapter]\nworkers = 1\npin = false\n\
         [[port]]\nname = \"wire\"\nkind = \"pcap\"\ninput = \"in.pcap\"\nifindex = 10\nhost_path = \"host\"\n\
         [[port]]\nname = \"b\"\nkind = \"pcap\"\noutput = \"b.pcap\"\nifindex = 11\n\
         [[port]]\nname = \"c\"\nkind = \"pcap\"\noutput = \"c.pcap\"\nifindex = 12\n\
         [[port]]\nname = \"host\"\nkind = \"pcap\"\noutput = \"host.pcap\"\n\
         [[extension]]\nbundled = \"router\"\n\
         [[attach]]\nextension = \"router\"\nport = \"wire\"\n{extra}"
    );
    let cfg = Config::parse(&text, dir.path()).unwrap();
    let mut opts = AdapterOptions { fib, ..AdapterOptions::from_config(&cfg.adapter) };
    opts.trace_events = trace.then_some(4096);
    let mut a = Adapter::from_config(&cfg, opts).unwrap();
    a.run_to_completion(100_000);
    let report = a.finish().unwrap();
    assert!(report.close_errors.is_empty(), "{:?}", report.close_errors);
    let out = |name: &str| -> Vec<Vec<u8>> {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        read_capture(&bytes).unwrap().packets.into_iter().map(|p| p.data).collect()
    };
    assert_eq!(out("b.pcap"), c.b);
    assert_eq!(out("c.pcap"), c.c);
    assert_eq!(out("host.pcap"), c.host);
    let wire = report.totals.port("wire").unwrap();
    assert_eq!(wire.rx_packets, c.input.len() as u64);
    assert_eq!(wire.verdicts.total(), wire.rx_packets);
    report.totals.workers.iter().map(|w| w.fib_loads).sum()
}

/// The per-packet path (here: the trace on) loads the FIB state once per received
/// burst, as the burst path does, not once per `bpf_fib_lookup`: the case's six
/// lookups (four IPv4 routed, one IPv6, one to a local address) arrive in the same
/// bursts either way. Loading per lookup, the traced run counts one load per lookup.
#[test]
fn the_per_packet_path_loads_the_fib_once_per_burst() {
    let (_w1, env) = fib();
    let bursts = run_traced("", Some(env), false);
    let (_w2, env) = fib();
    let traced = run_traced("", Some(env), true);
    assert!(bursts >= 1, "the router looked something up: {bursts} loads");
    assert_eq!(traced, bursts, "traced: {traced} loads, burst path: {bursts}");
    assert!(traced < 6, "one load per lookup: {traced}");
}

#[test]
fn the_router_forwards_through_the_adapter() {
    let (_writer, env) = fib();
    run("", Some(env));
}

/// The same FIB written as `[fib]` in the configuration, routes in a file and inline.
const FIB_TOML: &str = r#"
[fib]
routes = ["10.1.0.0/16 via 192.0.2.1 dev 11", "blackhole 10.9.0.0/16"]
route_files = ["routes.txt"]
[[fib.interface]]
port = "wire"
mac = "02:00:00:00:00:0a"
addresses = ["10.0.0.1/24"]
[[fib.interface]]
port = "b"
mac = "02:00:00:00:00:0b"
addresses = ["192.0.2.7/24"]
[[fib.interface]]
port = "c"
mac = "02:00:00:00:00:0c"
addresses = ["198.51.100.7/24"]
[[fib.neighbour]]
port = "b"
ip = "192.0.2.1"
mac = "02:00:00:00:01:0b"
[[fib.neighbour]]
port = "c"
ip = "fe80::1"
mac = "02:00:00:00:01:0c"
"#;

#[test]
fn the_router_forwards_with_the_configurations_fib() {
    // The route file lives in a folder of its own, named by its absolute path.
    let dir = TempDir::new("router-routes");
    let routes = dir.join("routes.txt");
    std::fs::write(
        &routes,
        "10.2.0.0/16 via 198.51.100.1 dev 12
         local 10.0.0.1/32 dev 10 table local
         2001:db8:1::/48 via fe80::1 dev 12
",
    )
    .unwrap();
    run(&FIB_TOML.replace("routes.txt", &routes.display().to_string()), None);
}

#[test]
fn fib_configuration_errors_name_the_key() {
    let parse = |extra: &str| {
        let text = format!("[[port]]\nname = \"b\"\nkind = \"mem\"\n{extra}");
        Config::parse(&text, std::path::Path::new("/")).map(|_| ()).unwrap_err().to_string()
    };
    let e = parse("[fib]\nroutes = [\"10.0.0.0/88 dev 1\"]\n");
    assert!(e.contains("fib.routes") && e.contains("line 1"), "{e}");
    let e = parse("[[fib.interface]]\nport = \"b\"\nmac = \"02:00\"\n");
    assert!(e.contains("fib.interface[0].mac"), "{e}");
    let e = parse(
        "[[fib.neighbour]]\nport = \"b\"\nip = \"10.0.0.300\"\nmac = \"02:00:00:00:00:01\"\n",
    );
    assert!(e.contains("fib.neighbour[0].ip"), "{e}");
    let e = parse("[fib]\nroute = []\n");
    assert!(e.contains("fib.route"), "{e}");
    // A port the FIB names must exist.
    let text = "[[port]]\nname = \"b\"\nkind = \"mem\"\n[[fib.neighbour]]\nport = \"x\"\nip = \"10.0.0.1\"\nmac = \"02:00:00:00:00:01\"\n";
    let cfg = Config::parse(text, std::path::Path::new("/")).unwrap();
    let e = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap_err();
    assert!(e.to_string().contains("no port named 'x'"), "{e}");
}
