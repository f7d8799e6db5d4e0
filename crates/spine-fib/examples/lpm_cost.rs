//! Instructions per IPv4 lookup of the default Poptrie ([`Lpm4`]) on a real table, for
//! callgrind: one function for single lookups and one for bursts, so that one run
//! gives each its own inclusive count.
//!
//! ```text
//! cargo build --release -p spine-fib --example lpm_cost
//! valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --collect-atstart=no \
//!   --toggle-collect='lpm_cost::singles' --toggle-collect='lpm_cost::bursts' \
//!   target/release/examples/lpm_cost /work/shared/data/routes/20260511-initial-state-peer-193.0.0.56AS3333.txt.gz
//! callgrind_annotate --inclusive=yes callgrind.out.PID | grep lpm_cost::
//! ```
//!
//! Each function does `N` lookups (the second argument, 200,000 by default) on uniformly
//! random addresses, then `N` on addresses inside the table's prefixes (drawn as
//! `spine bench lpm` draws them): divide its inclusive count by `2 N`.

use std::io::Read;

use spine_fib::{Address, IpPrefix, Lpm, Lpm4};

/// xorshift64*, as `spine bench lpm`.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn val(o: Option<u32>) -> u64 {
    o.map_or(0, |v| v as u64 + 1)
}

fn single(t: &Lpm4, addrs: &[u32]) -> u64 {
    addrs.iter().fold(0u64, |s, &a| s.wrapping_add(val(t.lookup(a))))
}

fn burst(t: &Lpm4, addrs: &[u32]) -> u64 {
    let mut out = [None; 32];
    let mut sum = 0u64;
    for c in addrs.chunks(32) {
        t.lookup_batch(c, &mut out[..c.len()]);
        sum = out[..c.len()].iter().fold(sum, |s, o| s.wrapping_add(val(*o)));
    }
    sum
}

/// The single lookups, random addresses then addresses inside the table.
#[inline(never)]
fn singles(t: &Lpm4, random: &[u32], inside: &[u32]) -> [u64; 2] {
    [single(t, random), single(t, inside)]
}

/// The same addresses in bursts of 32 ([`Lpm::lookup_batch`]).
#[inline(never)]
fn bursts(t: &Lpm4, random: &[u32], inside: &[u32]) -> [u64; 2] {
    [burst(t, random), burst(t, inside)]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("usage: lpm_cost TABLE.txt[.gz] [LOOKUPS]");
    let n: usize = args.next().map_or(200_000, |s| s.parse().expect("LOOKUPS is a number"));
    let f = std::fs::File::open(&path).expect("the table opens");
    let mut text = String::new();
    if path.ends_with(".gz") {
        flate2::read::GzDecoder::new(f).read_to_string(&mut text).expect("gunzip");
    } else {
        std::io::BufReader::new(f).read_to_string(&mut text).expect("read");
    }
    let table: Vec<_> = spine_fib::parse::routes::parse(&text)
        .filter_map(|r| match r.expect("a route").prefix {
            IpPrefix::V4(p) => Some(p),
            IpPrefix::V6(_) => None,
        })
        .collect();
    let mut t = Lpm4::new();
    t.extend(table.iter().map(|&p| (p, p.addr() >> 8 & 0xffff))).expect("small values");
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    let random: Vec<u32> = (0..n).map(|_| (rng.next() >> 32) as u32).collect();
    let inside: Vec<u32> = (0..n)
        .map(|_| {
            let p = table[(rng.next() % table.len() as u64) as usize];
            p.addr().with_host(p.len(), (rng.next() >> 32) as u32)
        })
        .collect();
    let one = singles(&t, &random, &inside);
    let burst = bursts(&t, &random, &inside);
    assert_eq!(one, burst, "bursts answer as single lookups");
    println!("{} prefixes, 2 x {n} lookups per function, sums {one:?}", table.len());
}
