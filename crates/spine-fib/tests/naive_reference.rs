//! The LPM structures on real tables against the most naive longest-prefix match there
//! is: a set of prefixes per length, probed from /32 (/128) down. The 2014 RouteViews
//! table (pyasn, 512 k IPv4 prefixes, values its origin ASes), the 2015 pyasn table's
//! IPv6 part, and the 2026 RIS table; built in bulk, then changed prefix by prefix
//! (a tenth of the table withdrawn, half of it announced again with new values); single
//! and burst lookups of uniform addresses and of addresses inside the table's prefixes.

mod common;

use std::collections::HashMap;

use common::Rng;
use spine_fib::{Address, Dir24, IpPrefix, Lpm, Lpm4, Lpm6, Prefix};

/// The reference: one map per prefix length.
struct Probe<A: Address> {
    by_len: Vec<HashMap<A, u32>>,
}

impl<A: Address + std::hash::Hash> Probe<A> {
    fn new() -> Self {
        Probe { by_len: (0..=A::BITS).map(|_| HashMap::new()).collect() }
    }
    fn insert(&mut self, p: Prefix<A>, v: u32) {
        self.by_len[p.len() as usize].insert(p.addr(), v);
    }
    fn remove(&mut self, p: Prefix<A>) -> Option<u32> {
        self.by_len[p.len() as usize].remove(&p.addr())
    }
    fn lookup(&self, a: A) -> Option<u32> {
        (0..=A::BITS).rev().find_map(|len| self.by_len[len as usize].get(&a.mask(len)).copied())
    }
}

fn check<A: Address + std::hash::Hash, L: Lpm<A>>(
    what: &str,
    table: &[(Prefix<A>, u32)],
    probes: usize,
    random: impl Fn(&mut Rng) -> A,
) {
    let mut t = L::new();
    t.extend(table.iter().copied()).unwrap();
    let mut r = Probe::new();
    for &(p, v) in table {
        r.insert(p, v);
    }
    let mut rng = Rng(0x2014_0513);
    let compare = |t: &L, r: &Probe<A>, rng: &mut Rng, when: &str| {
        let addrs: Vec<A> = (0..probes)
            .map(|i| {
                if i % 2 == 0 {
                    random(rng)
                } else {
                    let (p, _) = table[(rng.next() % table.len() as u64) as usize];
                    p.addr().with_host(p.len(), random(rng))
                }
            })
            .collect();
        let mut burst = vec![None; addrs.len()];
        t.lookup_batch(&addrs, &mut burst);
        let mut hits = 0;
        for (&a, b) in addrs.iter().zip(burst) {
            let want = r.lookup(a);
            hits += usize::from(want.is_some());
            assert_eq!(t.lookup(a), want, "{what} {} {when}", a.to_std());
            assert_eq!(b, want, "{what} burst {} {when}", a.to_std());
        }
        assert!(hits > probes / 3, "{what} {when}: only {hits} of {probes} probes matched");
    };
    compare(&t, &r, &mut rng, "after the build");
    for (i, &(p, v)) in table.iter().enumerate() {
        match i % 20 {
            0 => {
                assert_eq!(t.remove(p), r.remove(p), "{what} withdraw {p}");
            }
            1 => {
                assert_eq!(t.remove(p), r.remove(p), "{what} withdraw {p}");
                let v = v ^ 0x5a5a;
                t.insert(p, v).unwrap();
                r.insert(p, v);
            }
            _ => {}
        }
    }
    compare(&t, &r, &mut rng, "after the changes");
}

/// (prefix, value) of the family `A` in a list, deduplicated (the first value wins).
fn of_family<A: Address>(v: impl IntoIterator<Item = (IpPrefix, u32)>) -> Vec<(Prefix<A>, u32)>
where
    Prefix<A>: TryFrom<IpPrefix>,
{
    let mut m: Vec<(Prefix<A>, u32)> =
        v.into_iter().filter_map(|(p, v)| Prefix::<A>::try_from(p).ok().map(|p| (p, v))).collect();
    m.sort_by_key(|&(p, _)| p);
    m.dedup_by_key(|&mut (p, _)| p);
    m
}

fn pyasn(name: &str) -> Vec<(IpPrefix, u32)> {
    spine_fib::parse::pyasn::parse(&common::gunzip(name)).map(|r| r.unwrap()).collect()
}

#[test]
fn routeviews_2014_ipv4_matches_the_probe_reference() {
    if common::routes_dir().is_none() {
        return;
    }
    let t = of_family::<u32>(pyasn("ipasn_20140513.dat.gz"));
    assert!(t.len() > 500_000, "{} prefixes", t.len());
    check::<u32, Lpm4>("poptrie 2014", &t, 400_000, |r| r.next() as u32);
    check::<u32, Dir24>("dir-24-8 2014", &t, 200_000, |r| r.next() as u32);
}

#[test]
fn pyasn_2015_ipv6_matches_the_probe_reference() {
    if common::routes_dir().is_none() {
        return;
    }
    let t = of_family::<u128>(pyasn("ipasn6_20151101.dat.gz"));
    assert!(t.len() > 20_000, "{} prefixes", t.len());
    // Uniform IPv6 addresses almost never match: half the probes are inside the table.
    check::<u128, Lpm6>("poptrie 2015 v6", &t, 200_000, |r| {
        (0x2u128 << 124) | ((r.next() as u128) << 64 | r.next() as u128) >> 4
    });
}

#[test]
fn ris_2026_ipv4_matches_the_probe_reference() {
    if common::routes_dir().is_none() {
        return;
    }
    let t = of_family::<u32>(
        common::table(common::V4_TABLE).into_iter().enumerate().map(|(i, p)| (p, i as u32 % 977)),
    );
    assert!(t.len() > 1_000_000, "{} prefixes", t.len());
    check::<u32, Lpm4>("poptrie 2026", &t, 400_000, |r| r.next() as u32);
}
