//! Tables local and main merged into one IPv4 LPM, against a naive reference that keeps
//! every route in a list and answers each table (and the kernel's merge of local and
//! main) by linear search: random adds, replaces, deletes and flushes of heavily
//! overlapping prefixes in tables local, main and default.

use std::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use spine_fib::{
    table_id, FibOp, FibWriter, IpPrefix, NextHop, Prefix4, Route, RouteSelector, RouteType,
};

const TABLES: [u32; 3] = [table_id::LOCAL, table_id::MAIN, table_id::DEFAULT];

#[derive(Debug, Clone)]
enum Op {
    Add { table: u32, prefix: Prefix4, metric: u32, dev: u32 },
    Replace { table: u32, prefix: Prefix4, metric: u32, dev: u32 },
    Delete { table: u32, prefix: Prefix4, metric: u32 },
    Flush(u32),
}

/// Addresses near a few bases, so that prefixes nest and collide.
fn addr() -> impl Strategy<Value = u32> + Clone {
    (0..3u32, any::<u32>(), 0..3u32).prop_map(|(base, r, spread)| {
        let hi = [0x0a00_0000u32, 0xc0a8_0000, 0][base as usize];
        hi | (r >> (8 + spread * 8))
    })
}

fn prefix() -> impl Strategy<Value = Prefix4> + Clone {
    (addr(), 0..=32u32).prop_map(|(a, l)| Prefix4::truncating(a, l).unwrap())
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
struct Naive(Vec<(u32, Prefix4, u32, u32)>);

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
    fn lookup(&self, tables: &[u32], a: u32) -> Option<(u32, u32)> {
        self.0
            .iter()
            .filter(|r| tables.contains(&r.0) && r.1.contains(a))
            // Longest prefix; on a tie local (255) before main (254); then the metric.
            .max_by_key(|r| (r.1.len(), r.0, std::cmp::Reverse(r.2)))
            .map(|r| (r.0, r.3))
    }
}

fn to_fib(op: &Op) -> FibOp {
    let route = |table, prefix: Prefix4, metric, dev| {
        let kind = if table == table_id::LOCAL { RouteType::Local } else { RouteType::Unicast };
        Route {
            table,
            metric,
            kind,
            ..Route::unicast(IpPrefix::V4(prefix), vec![NextHop::dev(dev)])
        }
    };
    match *op {
        Op::Add { table, prefix, metric, dev } => FibOp::Add(route(table, prefix, metric, dev)),
        Op::Replace { table, prefix, metric, dev } => {
            FibOp::Replace(route(table, prefix, metric, dev))
        }
        Op::Delete { table, prefix, metric } => FibOp::Delete(RouteSelector {
            table,
            prefix: IpPrefix::V4(prefix),
            metric: Some(metric),
            kind: None,
        }),
        Op::Flush(t) => FibOp::FlushTable(t),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn merged_local_and_main_answer_as_the_two_tables(
        ops in prop::collection::vec(op(), 1..80),
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
            let mut batch = vec![None; probes.len()];
            g.lookup_v4_merged_batch(&probes, &mut batch);
            for (&a, b) in probes.iter().zip(batch) {
                let ip = Ipv4Addr::from(a);
                let got = |x: Option<spine_fib::Resolved<'_>>| {
                    x.map(|x| (x.route.table, x.nexthop.unwrap().ifindex))
                };
                let want = naive.lookup(&[table_id::LOCAL, table_id::MAIN], a);
                prop_assert_eq!(got(g.lookup_v4_merged(ip, 0)), want, "merged {}", ip);
                let from_batch = b.and_then(|i| g.route(i)).map(|r| (r.table, r.nexthops[0].ifindex));
                prop_assert_eq!(from_batch, want, "merged burst {}", ip);
                for t in TABLES {
                    prop_assert_eq!(
                        got(g.lookup(t, IpAddr::V4(ip), 0)),
                        naive.lookup(&[t], a),
                        "table {} {}", t, ip
                    );
                }
                let mut one = [None];
                g.lookup_v4_batch(table_id::MAIN, &[a], &mut one);
                prop_assert_eq!(
                    one[0].and_then(|i| g.route(i)).map(|r| (r.table, r.nexthops[0].ifindex)),
                    naive.lookup(&[table_id::MAIN], a),
                    "main burst {}", ip
                );
                let rules = g.lookup_default_rules(IpAddr::V4(ip), 0);
                let want_rules = want.or_else(|| naive.lookup(&[table_id::DEFAULT], a));
                prop_assert_eq!(got(rules), want_rules, "default rules {}", ip);
            }
        }
    }
}
