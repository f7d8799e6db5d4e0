//! What one `bpf_fib_lookup` costs (`FibEnv::lookup`, the helper's body without the
//! program around it) on the full tables of `../shared/data/routes`, per kind of route:
//!
//! ```text
//! cargo build --release -p spine-runtime --example fib_cost
//! valgrind --tool=callgrind --toggle-collect='fib_cost::one' \
//!     target/release/examples/fib_cost ROUTES_DIR SCENARIO 20
//! target/release/examples/fib_cost ROUTES_DIR all 200 both  # timed, every scenario
//! ```
//!
//! A fifth argument gives the lookups' flags as a number (16: `SRC`, 2: `OUTPUT`, the
//! lookups then from the routes' device; 0 by default).
//! A fourth argument `pinned` runs the lookups in bursts of 32 through one loaded FIB
//! state (`FibEnv::lookup_in`, as the adapter's workers do; collect
//! `fib_cost::pinned_burst`), `both` each way; the default loads per lookup.
//!
//! Every scenario's FIB also holds the routes the kernel keeps for the two devices'
//! addresses and loopback (table local, main's connected routes: `kernel_routes`).
//!
//! Scenarios: `v4` (1.04 M IPv4 prefixes, each through one of 16 gateways), `v6` (the
//! 246 k IPv6 prefixes, likewise), `ecmp4`/`ecmp6` (each prefix a multipath route over
//! two of the gateways), `group4` (each through one of 8 nexthop objects of two
//! members, as `spine_rtnl` resolves them), `res4` (the same groups resilient, 128
//! buckets each). 4,096 lookups to destinations inside the table's prefixes, from
//! varying sources, each answered SUCCESS (checked), repeated ROUNDS times.
//! Instructions per lookup = the collected total / (4,096 × ROUNDS). The timed run
//! prints ns per lookup; on shared machines only ratios measured in one run mean
//! anything.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::time::Instant;

use spine_fib::{FibOp, FibWriter, IpPrefix, Neigh, NextHop, NudState, Route};
use spine_runtime::fib_lookup::{FibEnv, Iface, PARAMS_LEN};

const GATEWAYS: u32 = 16;
const LOOKUPS: usize = 4096;
const IN: u32 = 2;
const OUT: u32 = 3;

fn gw(v6: bool, i: u32) -> IpAddr {
    let i = i % GATEWAYS;
    if v6 {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1 + i as u16))
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 200, 0, 1 + i as u8))
    }
}

fn load(dir: &Path, v6: bool) -> Vec<IpPrefix> {
    let name = if v6 {
        "20260511-initial-state-peer-193.0.0.56AS3333-ipv6.txt.gz"
    } else {
        "20260511-initial-state-peer-193.0.0.56AS3333.txt.gz"
    };
    let out = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(dir.join(name))
        .output()
        .expect("gzip -dc");
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let mut t: Vec<IpPrefix> = spine_fib::parse::routes::parse(&text)
        .filter_map(|r| r.ok().map(|r| r.prefix))
        .filter(|p| matches!(p, IpPrefix::V6(_)) == v6 && p.len() >= 8)
        .collect();
    t.sort();
    t.dedup();
    t
}

/// A hash of the prefix: which gateway (or group) it goes through.
fn pick(p: &IpPrefix) -> u32 {
    let a = match p {
        IpPrefix::V4(q) => q.addr(),
        IpPrefix::V6(q) => (q.addr() >> 96) as u32 ^ (q.addr() >> 64) as u32,
    };
    (a.wrapping_mul(0x9e37_79b1) ^ p.len()).rotate_left(7)
}

fn fib(table: &[IpPrefix], v6: bool, scenario: &str) -> FibEnv {
    let (mut w, r) = FibWriter::new();
    for p in table {
        let k = pick(p);
        let nh = |i| NextHop::via(gw(v6, i), OUT);
        let mut route = match scenario {
            "v4" | "v6" => Route::unicast(*p, vec![nh(k)]),
            _ => Route::unicast(*p, vec![nh(k % 8), nh(k % 8 + 8)]),
        };
        if scenario == "group4" || scenario == "res4" {
            route.nexthops = vec![nh(k % 8), nh(k % 8 + 8)];
            route.nhid = 1 + k % 8;
        }
        w.add(route).expect("route");
    }
    for r in kernel_routes(v6) {
        // A connected route the table already holds stays the table's.
        let _ = w.add(r);
    }
    if scenario == "res4" {
        for nhid in 1..=8 {
            let buckets = (0..128u16).map(|b| b % 2).collect();
            w.apply(FibOp::SetBuckets { nhid, buckets }).expect("buckets");
        }
    }
    for g in 0..GATEWAYS {
        let neigh = Neigh { mac: [2, 0, 0, 0, 0xcc, g as u8], state: NudState::PERMANENT };
        w.apply(FibOp::SetNeigh { ifindex: OUT, ip: gw(v6, g), neigh }).expect("neigh");
    }
    w.publish();
    let iface = |ifindex, a: &str, a6: &str| Iface {
        ifindex,
        mtu: 1500,
        mac: [2, 0, 0, 0, 0xbb, ifindex as u8],
        forward_v4: true,
        forward_v6: true,
        addrs: vec![(a.parse().expect("v4"), 24), (a6.parse().expect("v6"), 64)],
    };
    let ifaces =
        vec![iface(IN, "10.100.0.1", "fd00:100::1"), iface(OUT, "10.200.0.254", "fd00::fe")];
    FibEnv::new(r, ifaces).with_multipath_seed(0x5eed)
}

/// What the kernel puts in a namespace with the two devices (addresses
/// 10.100.0.1/24 and fd00:100::1/64 on IN, 10.200.0.254/24 and fd00::fe/64 on OUT) and
/// loopback: table local's local, broadcast, anycast and multicast routes, and main's
/// connected routes. The IPv6 lookup walks local as well as main (the kernel does not
/// merge them), so a table without them would not show that walk.
fn kernel_routes(v6: bool) -> Vec<Route> {
    use spine_fib::{table_id, RouteType};
    let r = |table, kind, p: &str, dev| Route {
        table,
        kind,
        metric: if v6 && table == table_id::MAIN { 256 } else { 0 },
        ..Route::unicast(p.parse().expect("prefix"), vec![NextHop::dev(dev)])
    };
    let (local, main) = (table_id::LOCAL, table_id::MAIN);
    if v6 {
        vec![
            r(local, RouteType::Local, "::1/128", 1),
            r(local, RouteType::Local, "fd00:100::1/128", IN),
            r(local, RouteType::Local, "fd00::fe/128", OUT),
            r(local, RouteType::Anycast, "fd00:100::/128", IN),
            r(local, RouteType::Anycast, "fd00::/128", OUT),
            r(local, RouteType::Multicast, "ff00::/8", OUT),
            r(main, RouteType::Unicast, "fd00:100::/64", IN),
            r(main, RouteType::Unicast, "fd00::/64", OUT),
            r(main, RouteType::Unicast, "fe80::/64", OUT),
        ]
    } else {
        vec![
            r(local, RouteType::Local, "127.0.0.0/8", 1),
            r(local, RouteType::Local, "127.0.0.1/32", 1),
            r(local, RouteType::Broadcast, "127.255.255.255/32", 1),
            r(local, RouteType::Local, "10.100.0.1/32", IN),
            r(local, RouteType::Broadcast, "10.100.0.255/32", IN),
            r(local, RouteType::Local, "10.200.0.254/32", OUT),
            r(local, RouteType::Broadcast, "10.200.0.255/32", OUT),
            r(main, RouteType::Unicast, "10.100.0.0/24", IN),
            r(main, RouteType::Unicast, "10.200.0.0/24", OUT),
        ]
    }
}

fn lookups(table: &[IpPrefix], v6: bool) -> Vec<[u8; PARAMS_LEN]> {
    let mut x = 0x5eed_u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..LOOKUPS)
        .map(|_| {
            let p = table[(next() % table.len() as u64) as usize];
            let mut s = [0u8; PARAMS_LEN];
            s[1] = 17;
            s[2..6].copy_from_slice(&(next() as u32).to_ne_bytes());
            s[6..8].copy_from_slice(&64u16.to_ne_bytes());
            s[8..12].copy_from_slice(&IN.to_ne_bytes());
            match p {
                IpPrefix::V4(q) => {
                    let host = next() as u32 & !(u32::MAX.checked_shl(32 - q.len()).unwrap_or(0));
                    s[0] = 2;
                    s[16..20].copy_from_slice(&(next() as u32 | 0x0100_0000).to_be_bytes());
                    s[32..36].copy_from_slice(&(q.addr() | host).to_be_bytes());
                }
                IpPrefix::V6(q) => {
                    let r = u128::from(next()) << 64 | u128::from(next());
                    let host = r & !(u128::MAX.checked_shl(128 - q.len()).unwrap_or(0));
                    s[0] = 10;
                    let src = 0x2001_0db8_u128 << 96 | u128::from(next());
                    s[16..32].copy_from_slice(&src.to_be_bytes());
                    s[32..48].copy_from_slice(&(q.addr() | host).to_be_bytes());
                }
            }
            assert!(v6 == (s[0] == 10));
            s
        })
        .collect()
}

#[inline(never)]
fn one(env: &FibEnv, p: &mut [u8; PARAMS_LEN], fl: u64) -> i64 {
    env.lookup(p, PARAMS_LEN as u64, fl)
}

/// 32 lookups in one FIB state loaded once, as a worker's burst does
/// (`WorkerHost::pin_fib`); collect `fib_cost::pinned_burst` for its cost.
#[inline(never)]
fn pinned_burst(env: &FibEnv, pkts: &[[u8; PARAMS_LEN]], fl: u64) {
    let st = env.fib.load();
    for s in pkts {
        let mut p = *s;
        let rc = env.lookup_in(&st, std::hint::black_box(&mut p), PARAMS_LEN as u64, fl);
        assert_eq!(rc, 0, "every lookup succeeds");
    }
}

fn run(env: &FibEnv, pkts: &[[u8; PARAMS_LEN]], rounds: u32, pinned: bool, fl: u64) -> f64 {
    let t = Instant::now();
    for _ in 0..rounds {
        if pinned {
            for b in pkts.chunks(32) {
                pinned_burst(env, b, fl);
            }
            continue;
        }
        for s in pkts {
            let mut p = *s;
            let rc = one(env, std::hint::black_box(&mut p), fl);
            assert_eq!(rc, 0, "every lookup succeeds");
        }
    }
    t.elapsed().as_nanos() as f64 / (pkts.len() as f64 * f64::from(rounds))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = Path::new(args.first().map_or("../shared/data/routes", String::as_str));
    let which = args.get(1).map_or("all", String::as_str);
    let rounds: u32 = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(20);
    // `pinned`: bursts of 32 in one loaded state; `both`: each way, alternated.
    let mode = args.get(3).map_or("loaded", String::as_str);
    // The lookups' flags (`BPF_FIB_LOOKUP_*` bits, e.g. 16 for SRC); 0 by default.
    let fl: u64 = args.get(4).and_then(|f| f.parse().ok()).unwrap_or(0);
    let all = ["v4", "v6", "ecmp4", "ecmp6", "group4", "res4"];
    let list: Vec<&str> = if which == "all" { all.to_vec() } else { vec![which] };
    let (mut t4, mut t6) = (None, None);
    for s in list {
        let v6 = s.ends_with('6');
        let slot = if v6 { &mut t6 } else { &mut t4 };
        let table = slot.get_or_insert_with(|| load(dir, v6));
        let env = fib(table, v6, s);
        let mut pkts = lookups(table, v6);
        if fl & 2 != 0 {
            // OUTPUT: from the routes' device (only routes through it match).
            for s in &mut pkts {
                s[8..12].copy_from_slice(&OUT.to_ne_bytes());
            }
        }
        for pinned in [false, true] {
            if (pinned && mode == "loaded") || (!pinned && mode == "pinned") {
                continue;
            }
            run(&env, &pkts, 1, pinned, fl); // warm
            let ns = run(&env, &pkts, rounds, pinned, fl);
            let how = if pinned { "pinned per 32" } else { "loaded per lookup" };
            println!(
                "{s} ({how}): {} prefixes, {ns:.1} ns/lookup, {:.2} M lookups/s",
                table.len(),
                1e3 / ns
            );
        }
    }
}
