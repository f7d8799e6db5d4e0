//! Tables local and main merged into one IPv6 LPM, against a naive reference that keeps
//! every route in a list and answers each table, and the kernel's IPv6 default rules
//! (local's longest prefix if local has one, else main's: the kernel does not merge
//! them), by linear search: random adds, replaces, deletes and flushes of heavily
//! overlapping prefixes in tables local, main and default, local holding short prefixes
//! (more than the few the merged lookup checks inline, and fewer) under main's longer
//! ones.

use std::net::{IpAddr, Ipv6Addr};

use proptest::prelude::*;
use spine_fib::{
    table_id, FibOp, FibWriter, IpPrefix, NextHop, Prefix6, Route, RouteSelector, RouteType,
};

const TABLES: [u32; 3] = [table_id::LOCAL, table_id::MAIN, table_id::DEFAULT];

#[derive(Debug, Clone)]
enum Op {
    Add { table: u32, prefix: Prefix6, metric: u32, dev: u32 },
    Replace { table: u32, prefix: Prefix6, metric: u32, dev: u32 },
    Delete { table: u32, prefix: Prefix6, metric: u32 },
    Flush(u32),
}

/// Addresses near a few bases, so that prefixes nest and collide.
fn addr() -> impl Strategy<Value = u128> + Clone {
    (0..3u32, any::<u128>(), 0..4u32).prop_map(|(base, r, spread)| {
        let hi = [0x2001_0db8_u128 << 96, 0xfd00_u128 << 112, 0][base as usize];
        hi | (r >> (32 + spread * 24))
    })
}

fn prefix() -> impl Strategy<Value = Prefix6> + Clone {
    // Lengths near the ends as often as between: /128 local routes, short covers.
    let len = prop_oneof![0..=128u32, 120..=128u32, 0..=16u32];
    (addr(), len).prop_map(|(a, l)| Prefix6::truncating(a, l).unwrap())
}

fn op() -> impl Strategy<Value = Op> {
    let table = prop::sample::select(TABLES.to_vec());
    prop_oneof![
        6 => (table.clone(), prefix(), 0..3u32, 1..100u32)
            .prop_map(|(table, prefix, metric, dev)| Op::Add { table, prefix, metric, dev }),
        2 => (table.clone(), prefix(), 0..3u32, 1..100u32)
            .prop_map(|(table, prefix, metric, dev)| Op::Replace { table, prefix, metric, dev }),
        3 => (table.clone(), prefix(), 0..3u32)
            .prop_map(|(table, prefix, metric)| Op::Delete { table, prefix, metric }),
        1 => table.prop_map(Op::Flush),
    ]
}

/// The reference: (table, prefix, metric, dev) of every route.
#[derive(Default)]
struct Naive(Vec<(u32, Prefix6, u32, u32)>);

impl Naive {
    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Add { table, prefix, metric, dev } => {
                if !self.0.iter().any(|r| (r.0, r.1, r.2) == (table, prefix, metric)) {
                    self.0.push((table, prefix, metric, dev));
                }
            }
            Op::Replace { table, prefix, metric, dev } => {
                self.0.retain(|r| (r.0, r.1, r.2) != (table, prefix, metric));
                self.0.push((table, prefix, metric, dev));
            }
            Op::Delete { table, prefix, metric } => {
                self.0.retain(|r| (r.0, r.1, r.2) != (table, prefix, metric));
            }
            Op::Flush(t) => self.0.retain(|r| r.0 != t),
        }
    }

    /// Table `table`'s answer: the longest prefix, then the lowest metric.
    fn lookup(&self, table: u32, a: u128) -> Option<(u32, u32)> {
        self.0
            .iter()
            .filter(|r| r.0 == table && r.1.contains(a))
            .max_by_key(|r| (r.1.len(), std::cmp::Reverse(r.2)))
            .map(|r| (r.0, r.3))
    }

    /// The kernel's IPv6 default rules: the first table with an answer.
    fn rules(&self, a: u128) -> Option<(u32, u32)> {
        TABLES.iter().find_map(|&t| self.lookup(t, a))
    }
}

/// Local's routes are `local` routes, or unicast ones on an even device (which a
/// forwarding record would stand for if local's IPv6 routes got records).
fn to_fib(op: &Op) -> FibOp {
    let route = |table, prefix: Prefix6, metric, dev: u32| {
        let kind = if table == table_id::LOCAL && dev % 2 == 1 {
            RouteType::Local
        } else {
            RouteType::Unicast
        };
        Route {
            table,
            metric,
            kind,
            ..Route::unicast(IpPrefix::V6(prefix), vec![NextHop::dev(dev)])
        }
    };
    match *op {
        Op::Add { table, prefix, metric, dev } => FibOp::Add(route(table, prefix, metric, dev)),
        Op::Replace { table, prefix, metric, dev } => {
            FibOp::Replace(route(table, prefix, metric, dev))
        }
        Op::Delete { table, prefix, metric } => FibOp::Delete(RouteSelector {
            table,
            prefix: IpPrefix::V6(prefix),
            metric: Some(metric),
            kind: None,
        }),
        Op::Flush(t) => FibOp::FlushTable(t),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn merged_ipv6_local_and_main_answer_as_the_kernels_walk(
        ops in prop::collection::vec(op(), 1..120),
        probes in prop::collection::vec(addr(), 64),
    ) {
        let (mut w, r) = FibWriter::new();
        let mut naive = Naive::default();
        for (i, op) in ops.iter().enumerate() {
            // Refused operations (an add that exists, a delete of nothing) change
            // neither side.
            let _ = w.apply(to_fib(op));
            naive.apply(op);
            if i % 16 != 15 && i + 1 != ops.len() {
                continue;
            }
            w.publish();
            let g = r.load();
            for &a in &probes {
                let ip = IpAddr::V6(Ipv6Addr::from(a));
                let of = |i: Option<u32>| {
                    i.and_then(|i| g.route(i)).map(|r| (r.table, r.nexthops[0].ifindex))
                };
                let got = |x: Option<spine_fib::Resolved<'_>>| {
                    x.map(|x| (x.route.table, x.nexthop.unwrap().ifindex))
                };
                let local_then_main =
                    naive.lookup(table_id::LOCAL, a).or_else(|| naive.lookup(table_id::MAIN, a));
                prop_assert_eq!(
                    of(g.lookup_v6_default_index(a)), local_then_main, "local, main {}", ip
                );
                for t in TABLES {
                    prop_assert_eq!(got(g.lookup(t, ip, 0)), naive.lookup(t, a), "table {} {}", t, ip);
                    prop_assert_eq!(of(g.lookup_v6_index(t, a)), naive.lookup(t, a), "index {} {}", t, ip);
                }
                // A route with a record found in the merged LPM is main's answer.
                let m = g.lookup_v6_merged_index(a);
                if m.and_then(|i| g.fast_v6(i)).is_some() {
                    prop_assert_eq!(of(m), naive.lookup(table_id::MAIN, a), "direct {}", ip);
                }
                prop_assert_eq!(got(g.lookup_default_rules(ip, 0)), naive.rules(a), "rules {}", ip);
            }
        }
    }
}
