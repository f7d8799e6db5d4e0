//! The full 2026 RIS tables in every structure, checked against the `prefix-trie`
//! crate on millions of addresses (uniform and inside the table's prefixes), before
//! and after replaying part of the 24-hour mutation trace.

mod common;

use common::Rng;
use prefix_trie::PrefixMap;
use spine_fib::parse::ris::Mutation;
use spine_fib::{Address, Dir24, IpPrefix, Lpm, Lpm4, Lpm6, Prefix};

fn nh<A: Address>(p: Prefix<A>) -> u32 {
    ((p.addr().fold() ^ p.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as u32
}

fn check<A: Address, L: Lpm<A>>(
    table: &[Prefix<A>],
    trace: &[(bool, Prefix<A>)],
    probes: usize,
    random: impl Fn(&mut Rng) -> A,
) where
    (A, u8): prefix_trie::Prefix,
{
    let mut t = L::new();
    t.extend(table.iter().map(|&p| (p, nh(p)))).unwrap();
    let mut r: PrefixMap<(A, u8), u32> = PrefixMap::new();
    for &p in table {
        r.insert((p.addr(), p.len() as u8), nh(p));
    }
    let compare = |t: &L, r: &PrefixMap<(A, u8), u32>, rng: &mut Rng, when: &str| {
        let mut inside = Vec::new();
        for i in 0..probes {
            let a = if i % 2 == 0 {
                random(rng)
            } else {
                let p = table[(rng.next() % table.len() as u64) as usize];
                let host = random(rng);
                p.addr().with_host(p.len(), host)
            };
            let want = r.get_lpm(&(a, A::BITS as u8)).map(|(_, v)| *v);
            assert_eq!(t.lookup(a), want, "{} {when}", a.to_std());
            inside.push(a);
        }
        let mut out = vec![None; inside.len()];
        t.lookup_batch(&inside, &mut out);
        for (a, o) in inside.iter().zip(out) {
            assert_eq!(o, t.lookup(*a), "burst {} {when}", a.to_std());
        }
    };
    let mut rng = Rng(0xfeed_5eed);
    compare(&t, &r, &mut rng, "after the build");
    assert_eq!(t.len(), r.len());
    for &(ann, p) in trace {
        if ann {
            t.insert(p, nh(p)).unwrap();
            r.insert((p.addr(), p.len() as u8), nh(p));
        } else {
            assert_eq!(t.remove(p), r.remove(&(p.addr(), p.len() as u8)), "withdraw {p}");
        }
    }
    compare(&t, &r, &mut rng, "after the trace");
    assert_eq!(t.len(), r.len());
}

/// A trace as (announce?, prefix).
type Trace<A> = Vec<(bool, Prefix<A>)>;

fn family<A: Address>(table: &str, trace: &str) -> (Vec<Prefix<A>>, Trace<A>)
where
    Prefix<A>: TryFrom<IpPrefix>,
{
    let t =
        common::table(table).into_iter().filter_map(|p| Prefix::<A>::try_from(p).ok()).collect();
    let m = common::trace(trace)
        .into_iter()
        .take(200_000)
        .filter_map(|m| {
            let ann = matches!(m, Mutation::Announce(_));
            Prefix::<A>::try_from(m.prefix()).ok().map(|p| (ann, p))
        })
        .collect();
    (t, m)
}

#[test]
fn ipv4_full_table_matches_prefix_trie() {
    if common::routes_dir().is_none() {
        return;
    }
    let (t, m) = family::<u32>(common::V4_TABLE, common::V4_TRACE);
    assert!(t.len() > 1_000_000, "{} prefixes", t.len());
    check::<u32, Lpm4>(&t, &m, 2_000_000, |r| r.next() as u32);
    check::<u32, Dir24>(&t, &m, 500_000, |r| r.next() as u32);
}

#[test]
fn ipv6_full_table_matches_prefix_trie() {
    if common::routes_dir().is_none() {
        return;
    }
    let (t, m) = family::<u128>(common::V6_TABLE, common::V6_TRACE);
    assert!(t.len() > 200_000, "{} prefixes", t.len());
    // Uniform IPv6 addresses almost never match: draw them from 2000::/4 instead.
    check::<u128, Lpm6>(&t, &m, 1_000_000, |r| {
        (0x2u128 << 124) | ((r.next() as u128) << 64 | r.next() as u128) >> 4
    });
}
