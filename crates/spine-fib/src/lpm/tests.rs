//! Every structure against a naive reference (a list of prefixes searched linearly),
//! on random prefixes and random insert/remove sequences that overlap heavily.

use proptest::prelude::*;

use super::*;
use crate::addr::Address;

/// The reference: longest match by linear search.
struct Naive<A: Address>(Vec<(Prefix<A>, u32)>);

impl<A: Address> Naive<A> {
    fn insert(&mut self, p: Prefix<A>, v: u32) -> Option<u32> {
        match self.0.iter_mut().find(|(q, _)| *q == p) {
            Some(e) => Some(std::mem::replace(&mut e.1, v)),
            None => {
                self.0.push((p, v));
                None
            }
        }
    }
    fn remove(&mut self, p: Prefix<A>) -> Option<u32> {
        let i = self.0.iter().position(|(q, _)| *q == p)?;
        Some(self.0.swap_remove(i).1)
    }
    fn lookup(&self, a: A) -> Option<u32> {
        self.0.iter().filter(|(p, _)| p.contains(a)).max_by_key(|(p, _)| p.len()).map(|e| e.1)
    }
}

#[derive(Debug, Clone)]
enum Op<A: Address> {
    Insert(Prefix<A>, u32),
    Remove(Prefix<A>),
}

/// Addresses near a few bases, so prefixes nest and collide.
fn addr4() -> impl Strategy<Value = u32> + Clone {
    (0..4u32, any::<u32>(), 0..3u32).prop_map(|(base, r, spread)| {
        let hi = [0x0a00_0000u32, 0xc0a8_0000, 0x0a0a_0000, 0][base as usize];
        hi | (r >> (8 + spread * 8))
    })
}

fn addr6() -> impl Strategy<Value = u128> + Clone {
    (0..3u32, any::<u128>(), 0..4u32).prop_map(|(base, r, spread)| {
        let hi = [0x2001_0db8u128 << 96, 0x2a00u128 << 112, 0][base as usize];
        hi | (r >> (16 + spread * 24))
    })
}

fn prefix<A: Address>(addr: impl Strategy<Value = A>) -> impl Strategy<Value = Prefix<A>> {
    (addr, 0..=A::BITS).prop_map(|(a, l)| Prefix::truncating(a, l).unwrap())
}

fn ops<A: Address>(addr: impl Strategy<Value = A> + Clone) -> impl Strategy<Value = Vec<Op<A>>> {
    let op = prop_oneof![
        3 => (prefix(addr.clone()), 0..1000u32).prop_map(|(p, v)| Op::Insert(p, v)),
        1 => prefix(addr).prop_map(Op::Remove),
    ];
    prop::collection::vec(op, 1..120)
}

fn check<A: Address, L: Lpm<A>>(ops: &[Op<A>], probes: &[A], bulk_first: usize) {
    let mut t = L::new();
    let mut r = Naive(Vec::new());
    // The first `bulk_first` inserts go through `extend`, the rest one at a time.
    let (bulk, rest) = ops.split_at(bulk_first.min(ops.len()));
    let mut entries = Vec::new();
    for op in bulk {
        if let Op::Insert(p, v) = op {
            r.insert(*p, *v);
            entries.push((*p, *v));
        }
    }
    // `extend` keeps the last value given for a prefix, like the reference.
    t.extend(entries).unwrap();
    for (i, op) in rest.iter().enumerate() {
        match op {
            Op::Insert(p, v) => assert_eq!(t.insert(*p, *v).unwrap(), r.insert(*p, *v), "op {i}"),
            Op::Remove(p) => assert_eq!(t.remove(*p), r.remove(*p), "op {i}"),
        }
        // Probe every prefix's first and last address, and the given addresses.
        for (p, _) in &r.0 {
            for a in [p.addr(), p.last()] {
                assert_eq!(t.lookup(a), r.lookup(a), "{} after op {i} ({op:?})", a.to_std());
            }
        }
    }
    assert_eq!(t.len(), r.0.len());
    let mut out = vec![None; probes.len()];
    t.lookup_batch(probes, &mut out);
    for (a, o) in probes.iter().zip(&out) {
        assert_eq!(t.lookup(*a), r.lookup(*a), "{}", a.to_std());
        assert_eq!(*o, r.lookup(*a), "batch {}", a.to_std());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn poptrie4_matches_reference(ops in ops(addr4()), probes in prop::collection::vec(addr4(), 0..64), bulk in 0..60usize) {
        check::<u32, Lpm4>(&ops, &probes, bulk);
    }

    #[test]
    fn poptrie4_small_stride_matches_reference(ops in ops(addr4()), probes in prop::collection::vec(addr4(), 0..64), bulk in 0..60usize) {
        check::<u32, Poptrie<u32, 4>>(&ops, &probes, bulk);
    }


    #[test]
    fn poptrie6_matches_reference(ops in ops(addr6()), probes in prop::collection::vec(addr6(), 0..64), bulk in 0..60usize) {
        check::<u128, Lpm6>(&ops, &probes, bulk);
    }
}

proptest! {
    // Each case zeroes DIR-24-8's 64 MiB table: fewer cases.
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn dir24_matches_reference(ops in ops(addr4()), probes in prop::collection::vec(addr4(), 0..64), bulk in 0..60usize) {
        check::<u32, Dir24>(&ops, &probes, bulk);
    }
}

#[test]
fn default_route_and_host_routes() {
    let mut t = Lpm4::new();
    let p = |s: &str| s.parse::<Prefix<u32>>().unwrap();
    t.insert(p("0.0.0.0/0"), 1).unwrap();
    t.insert(p("10.0.0.0/8"), 2).unwrap();
    t.insert(p("10.1.2.3/32"), 3).unwrap();
    assert_eq!(t.lookup(0x0a01_0203), Some(3));
    assert_eq!(t.lookup(0x0a01_0204), Some(2));
    assert_eq!(t.lookup(0x0b00_0000), Some(1));
    assert_eq!(t.remove(p("0.0.0.0/0")), Some(1));
    assert_eq!(t.lookup(0x0b00_0000), None);
    assert_eq!(
        t.insert(p("1.0.0.0/8"), MAX_VALUE + 1),
        Err(LpmError::ValueTooLarge(MAX_VALUE + 1))
    );
    assert_eq!(t.get(p("10.0.0.0/8")), Some(2));
    let mut s = Lpm6::new();
    let q = |s: &str| s.parse::<Prefix<u128>>().unwrap();
    s.insert(q("::/0"), 7).unwrap();
    s.insert(q("2001:db8::1/128"), 8).unwrap();
    assert_eq!(s.lookup(0x2001_0db8u128 << 96 | 1), Some(8));
    assert_eq!(s.lookup(0x2001_0db8u128 << 96 | 2), Some(7));
}
