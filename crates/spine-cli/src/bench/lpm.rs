//! `spine bench lpm`: longest-prefix match on real BGP tables (`--routes DIR`, the
//! RIPE RIS tables of 2026: 1.04 M IPv4 / 246 k IPv6 prefixes, and their 24-hour
//! mutation trace), per family: build time, memory, lookups per second on one core
//! (uniformly random addresses, and addresses inside the table's prefixes; one at a
//! time and in interleaved bursts), and updates per second replaying the trace. Side
//! by side, same keys, same run: spine-fib's Poptrie and DIR-24-8, the `prefix-trie`
//! crate, and spine's `BPF_MAP_TYPE_LPM_TRIE` walking the kernel's trie and with its
//! Poptrie index. Every competitor's answers are checked against Poptrie's on a sample.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use prefix_trie::PrefixMap;
use serde_json::json;
use spine_fib::parse::ris::Mutation;
use spine_fib::publish::{LpmOp, Writer};
use spine_fib::{Address, Dir24, IpPrefix, Lpm, Lpm4, Lpm6, Prefix};
use spine_maps::{Map, MapDef, MapOptions};

use super::{alloc_count, progress, svg, Stat};

#[derive(clap::Args, Debug)]
pub struct LpmArgs {
    /// Folder with the RIS tables and traces (gzip'd text).
    #[arg(long)]
    routes: Option<PathBuf>,
    /// Trials per figure: min, median and max are reported.
    #[arg(long, default_value_t = 3)]
    repeat_trials: usize,
    /// Lookups per trial.
    #[arg(long, default_value_t = 10_000_000)]
    lookups: usize,
    /// v4, v6 or all.
    #[arg(long, default_value = "all")]
    family: String,
    #[arg(long)]
    json: bool,
    /// Also write bench-lpm.json and bench-lpm-{lookups,updates}.svg here.
    #[arg(long)]
    out: Option<PathBuf>,
}

const NEXT_HOP_RULE: &str =
    "next hop of a prefix = ((fold(address) ^ length) * 0x9E3779B97F4A7C15) >> 60, one of 16";
const BURST: usize = 32;

/// The next hop a prefix is given (the tables carry none).
fn next_hop<A: Address>(p: Prefix<A>) -> u32 {
    ((p.addr().fold() ^ p.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as u32
}

#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    family: &'static str,
    name: String,
    build_s: f64,
    /// Heap bytes the structure holds after the build (the lookup structure alone in
    /// parentheses where it can say).
    memory_bytes: i64,
    lookup_bytes: Option<usize>,
    random_mlps: Stat,
    table_mlps: Stat,
    random_burst_mlps: Option<Stat>,
    table_burst_mlps: Option<Stat>,
    updates_per_s: Option<Stat>,
    /// Answers on the check sample that differ from Poptrie's.
    mismatches: usize,
}

fn gunzip(path: &Path) -> Result<String> {
    let f = std::fs::File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut s = String::new();
    flate2::read::GzDecoder::new(f)
        .read_to_string(&mut s)
        .with_context(|| format!("gunzip {}", path.display()))?;
    Ok(s)
}

fn default_routes() -> PathBuf {
    let here = PathBuf::from("../shared/data/routes");
    if here.is_dir() {
        return here;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/routes")
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Per-family plumbing: the competitors' key types.
trait Family: Address {
    const NAME: &'static str;
    type Fib: Lpm<Self>;
    fn pick(p: IpPrefix) -> Option<Prefix<Self>>;
    fn random(r: &mut Rng) -> Self;
    fn map_key(a: Self, plen: u32) -> Vec<u8>;
    /// `base | (host & (base ^ last))`: the prefix's bits, the host's below them.
    fn from_bits_within(base: Self, last: Self, host: Self) -> Self;
    /// Rows only this family has (DIR-24-8 is IPv4 only).
    fn extra(
        a: &LpmArgs,
        d: &Data<Self>,
        trials: usize,
        sample: &[Self],
        expect: &[Option<u32>],
    ) -> Result<Vec<Row>>;
}

impl Family for u32 {
    const NAME: &'static str = "IPv4";
    type Fib = Lpm4;
    fn pick(p: IpPrefix) -> Option<Prefix<u32>> {
        match p {
            IpPrefix::V4(p) => Some(p),
            IpPrefix::V6(_) => None,
        }
    }
    fn random(r: &mut Rng) -> u32 {
        (r.next() >> 32) as u32
    }
    fn map_key(a: u32, plen: u32) -> Vec<u8> {
        [&plen.to_ne_bytes()[..], &a.to_be_bytes()[..]].concat()
    }
    fn from_bits_within(base: u32, last: u32, host: u32) -> u32 {
        base | (host & (base ^ last))
    }
    fn extra(
        a: &LpmArgs,
        d: &Data<u32>,
        trials: usize,
        sample: &[u32],
        expect: &[Option<u32>],
    ) -> Result<Vec<Row>> {
        Ok(vec![dir24(a, d, trials, sample, expect)?])
    }
}

impl Family for u128 {
    const NAME: &'static str = "IPv6";
    type Fib = Lpm6;
    fn pick(p: IpPrefix) -> Option<Prefix<u128>> {
        match p {
            IpPrefix::V6(p) => Some(p),
            IpPrefix::V4(_) => None,
        }
    }
    fn random(r: &mut Rng) -> u128 {
        (r.next() as u128) << 64 | r.next() as u128
    }
    fn map_key(a: u128, plen: u32) -> Vec<u8> {
        [&plen.to_ne_bytes()[..], &a.to_be_bytes()[..]].concat()
    }
    fn from_bits_within(base: u128, last: u128, host: u128) -> u128 {
        base | (host & (base ^ last))
    }
    fn extra(
        _: &LpmArgs,
        _: &Data<u128>,
        _: usize,
        _: &[u128],
        _: &[Option<u32>],
    ) -> Result<Vec<Row>> {
        Ok(Vec::new())
    }
}

struct Data<A: Address> {
    table: Vec<(Prefix<A>, u32)>,
    trace: Vec<(bool, Prefix<A>)>,
    random: Vec<A>,
    inside: Vec<A>,
}

fn load<A: Family>(dir: &Path, table: &str, trace: &str) -> Result<Data<A>> {
    let text = gunzip(&dir.join(table))?;
    let mut t = Vec::new();
    for r in spine_fib::parse::routes::parse(&text) {
        let p = r.with_context(|| table.to_string())?.prefix;
        t.push(A::pick(p).with_context(|| format!("{table}: {p} is of the other family"))?);
    }
    t.sort();
    t.dedup();
    let table: Vec<_> = t.into_iter().map(|p| (p, next_hop(p))).collect();
    let text = gunzip(&dir.join(trace))?;
    let mut tr = Vec::new();
    for m in spine_fib::parse::ris::parse(&text) {
        let m = m.with_context(|| trace.to_string())?;
        let p = A::pick(m.prefix())
            .with_context(|| format!("{trace}: {} is of the other family", m.prefix()))?;
        tr.push((matches!(m, Mutation::Announce(_)), p));
    }
    let mut rng = Rng(0x5eed_1234_5678_9abc);
    let n = 1 << 20;
    let random = (0..n).map(|_| A::random(&mut rng)).collect();
    let inside = (0..n)
        .map(|_| {
            let (p, _) = table[(rng.next() % table.len() as u64) as usize];
            let host = A::random(&mut rng);
            let keep = p.addr().last_of(p.len());
            // The prefix's bits, random host bits.
            A::from_bits_within(p.addr(), keep, host)
        })
        .collect();
    Ok(Data { table, trace: tr, random, inside })
}

/// Million lookups per second over `keys`, `total` lookups per trial.
fn mlps<K>(trials: usize, total: usize, keys: &[K], f: impl Fn(&[K]) -> u64) -> Stat {
    let rounds = total.div_ceil(keys.len()).max(1);
    let v = (0..trials)
        .map(|_| {
            let t = Instant::now();
            let mut sum = 0u64;
            for _ in 0..rounds {
                sum = sum.wrapping_add(f(keys));
            }
            std::hint::black_box(sum);
            (rounds * keys.len()) as f64 / t.elapsed().as_secs_f64() / 1e6
        })
        .collect();
    Stat::of(v)
}

fn val(o: Option<u32>) -> u64 {
    o.map_or(0, |v| v as u64 + 1)
}

fn burst<A: Address>(keys: &[A], f: impl Fn(&[A], &mut [Option<u32>])) -> u64 {
    let mut out = [None; BURST];
    let mut sum = 0u64;
    for c in keys.chunks(BURST) {
        f(c, &mut out[..c.len()]);
        sum = out[..c.len()].iter().fold(sum, |s, o| s.wrapping_add(val(*o)));
    }
    sum
}

/// Times `f` on a fresh copy per trial: updates per second over `n` updates.
fn ups<T: Clone>(trials: usize, n: usize, base: &T, mut f: impl FnMut(&mut T)) -> Stat {
    let v = (0..trials)
        .map(|_| {
            let mut t = base.clone();
            let s = Instant::now();
            f(&mut t);
            n as f64 / s.elapsed().as_secs_f64()
        })
        .collect();
    Stat::of(v)
}

fn family<A: Family>(
    a: &LpmArgs,
    dir: &Path,
    files: (&str, &str),
    step: &mut dyn FnMut(&str),
) -> Result<Vec<Row>>
where
    (A, u8): prefix_trie::Prefix,
{
    step(&format!("{} load", A::NAME));
    let d = load::<A>(dir, files.0, files.1)?;
    let trials = a.repeat_trials.max(1);
    let sample = &d.inside[..10_000.min(d.inside.len())];
    let mut rows = Vec::new();

    // Poptrie: the reference every other answer is checked against.
    step(&format!("{} poptrie", A::NAME));
    let m0 = alloc_count::live();
    let t0 = Instant::now();
    let mut pop = A::Fib::new();
    pop.extend(d.table.iter().copied())?;
    let build = t0.elapsed().as_secs_f64();
    let mem = alloc_count::live() - m0;
    let expect: Vec<Option<u32>> = sample.iter().map(|&x| pop.lookup(x)).collect();
    let trace_ops = |t: &mut A::Fib| {
        for &(ann, p) in &d.trace {
            if ann {
                t.insert(p, next_hop(p)).expect("small values");
            } else {
                t.remove(p);
            }
        }
    };
    rows.push(Row {
        family: A::NAME,
        name: "spine-fib poptrie".into(),
        build_s: build,
        memory_bytes: mem as i64,
        lookup_bytes: Some(pop.memory().lookup),
        random_mlps: mlps(trials, a.lookups, &d.random, |k| {
            k.iter().fold(0, |s, &x| s.wrapping_add(val(pop.lookup(x))))
        }),
        table_mlps: mlps(trials, a.lookups, &d.inside, |k| {
            k.iter().fold(0, |s, &x| s.wrapping_add(val(pop.lookup(x))))
        }),
        random_burst_mlps: Some(mlps(trials, a.lookups, &d.random, |k| {
            burst(k, |c, o| pop.lookup_batch(c, o))
        })),
        table_burst_mlps: Some(mlps(trials, a.lookups, &d.inside, |k| {
            burst(k, |c, o| pop.lookup_batch(c, o))
        })),
        updates_per_s: Some(ups(trials, d.trace.len(), &pop, trace_ops)),
        mismatches: 0,
    });

    // Every update a new value (as in the map, where each is a new node): no update
    // can be skipped as unchanged.
    step(&format!("{} poptrie, new values", A::NAME));
    let fresh = |t: &mut A::Fib| {
        for (i, &(ann, p)) in d.trace.iter().enumerate() {
            if ann {
                t.insert(p, next_hop(p) | (i as u32 & 0xffff) << 4).expect("small values");
            } else {
                t.remove(p);
            }
        }
    };
    rows.push(Row {
        name: "poptrie, every update a new value".into(),
        random_burst_mlps: None,
        table_burst_mlps: None,
        updates_per_s: Some(ups(trials, d.trace.len(), &pop, fresh)),
        ..rows[0].clone()
    });

    // The same, published to readers: every update alone, or 1,000 per publish.
    for per in [1usize, 1000] {
        step(&format!("{} poptrie published/{per}", A::NAME));
        let v = (0..trials)
            .map(|_| {
                let (mut w, r) = Writer::<A::Fib, LpmOp<A>>::new(pop.clone());
                let s = Instant::now();
                for (i, &(ann, p)) in d.trace.iter().enumerate() {
                    let op = if ann { LpmOp::Insert(p, next_hop(p)) } else { LpmOp::Remove(p) };
                    w.apply(op).expect("small values");
                    if (i + 1) % per == 0 {
                        w.publish();
                    }
                }
                w.publish();
                let rate = d.trace.len() as f64 / s.elapsed().as_secs_f64();
                drop(r);
                rate
            })
            .collect();
        let mem = pop.memory();
        rows.push(Row {
            family: A::NAME,
            name: format!("poptrie, published every {per}"),
            build_s: build,
            memory_bytes: 2 * (mem.lookup + mem.update) as i64,
            lookup_bytes: Some(2 * mem.lookup),
            random_mlps: rows[0].random_mlps,
            table_mlps: rows[0].table_mlps,
            random_burst_mlps: None,
            table_burst_mlps: None,
            updates_per_s: Some(Stat::of(v)),
            mismatches: 0,
        });
    }

    if A::BITS == 32 {
        step("IPv4 dir-24-8");
    }
    rows.extend(A::extra(a, &d, trials, sample, &expect)?);

    step(&format!("{} prefix-trie", A::NAME));
    let m0 = alloc_count::live();
    let t0 = Instant::now();
    let mut pt: PrefixMap<(A, u8), u32> = PrefixMap::new();
    for &(p, v) in &d.table {
        pt.insert((p.addr(), p.len() as u8), v);
    }
    let build = t0.elapsed().as_secs_f64();
    let mem = alloc_count::live() - m0;
    let bits = A::BITS as u8;
    let look = |x: A| pt.get_lpm(&(x, bits)).map(|(_, v)| *v);
    let mismatches = sample.iter().zip(&expect).filter(|(x, e)| look(**x) != **e).count();
    rows.push(Row {
        family: A::NAME,
        name: "prefix-trie".into(),
        build_s: build,
        memory_bytes: mem as i64,
        lookup_bytes: None,
        random_mlps: mlps(trials, a.lookups / 4, &d.random, |k| {
            k.iter().fold(0, |s, &x| s.wrapping_add(val(look(x))))
        }),
        table_mlps: mlps(trials, a.lookups / 4, &d.inside, |k| {
            k.iter().fold(0, |s, &x| s.wrapping_add(val(look(x))))
        }),
        random_burst_mlps: None,
        table_burst_mlps: None,
        updates_per_s: Some(ups(trials, d.trace.len(), &pt, |t| {
            for &(ann, p) in &d.trace {
                if ann {
                    t.insert((p.addr(), p.len() as u8), next_hop(p));
                } else {
                    t.remove(&(p.addr(), p.len() as u8));
                }
            }
        })),
        mismatches,
    });

    for index in [false, true] {
        let name =
            if index { "lpm_trie map + poptrie index" } else { "lpm_trie map (kernel trie)" };
        step(&format!("{} {name}", A::NAME));
        rows.push(map_row::<A>(a, &d, trials, index, name, sample, &expect)?);
    }
    Ok(rows)
}

fn dir24(
    a: &LpmArgs,
    d: &Data<u32>,
    trials: usize,
    sample: &[u32],
    expect: &[Option<u32>],
) -> Result<Row> {
    let m0 = alloc_count::live();
    let t0 = Instant::now();
    let mut t = Dir24::new();
    t.extend(d.table.iter().copied())?;
    let build = t0.elapsed().as_secs_f64();
    let mem = alloc_count::live() - m0;
    let mismatches = sample.iter().zip(expect).filter(|(x, e)| t.lookup(**x) != **e).count();
    Ok(Row {
        family: "IPv4",
        name: "spine-fib dir-24-8".into(),
        build_s: build,
        memory_bytes: mem as i64,
        lookup_bytes: Some(t.memory().lookup),
        random_mlps: mlps(trials, a.lookups, &d.random, |k| {
            k.iter().fold(0, |s, &x| s.wrapping_add(val(t.lookup(x))))
        }),
        table_mlps: mlps(trials, a.lookups, &d.inside, |k| {
            k.iter().fold(0, |s, &x| s.wrapping_add(val(t.lookup(x))))
        }),
        random_burst_mlps: Some(mlps(trials, a.lookups, &d.random, |k| {
            burst(k, |c, o| t.lookup_batch(c, o))
        })),
        table_burst_mlps: Some(mlps(trials, a.lookups, &d.inside, |k| {
            burst(k, |c, o| t.lookup_batch(c, o))
        })),
        updates_per_s: Some(ups(trials, d.trace.len(), &t, |t| {
            for &(ann, p) in &d.trace {
                if ann {
                    t.insert(p, next_hop(p)).expect("small values");
                } else {
                    t.remove(p);
                }
            }
        })),
        mismatches,
    })
}

/// spine's `BPF_MAP_TYPE_LPM_TRIE` holding the table (value: the next hop as `u32`).
/// Built and updated once (a map cannot be copied); lookups over `trials`.
fn map_row<A: Family>(
    a: &LpmArgs,
    d: &Data<A>,
    trials: usize,
    index: bool,
    name: &str,
    sample: &[A],
    expect: &[Option<u32>],
) -> Result<Row> {
    let key_size = 4 + A::BITS / 8;
    let max = (d.table.len() * 2) as u32;
    let def = MapDef::new(
        "bench",
        spine_abi::map_type::LPM_TRIE,
        key_size,
        4,
        max,
        spine_abi::map_flags::NO_PREALLOC,
    );
    let lpm_index_at = if index { Some(spine_maps::LPM_INDEX_AT) } else { None };
    let opts = MapOptions { lpm_index_at, max_bytes: 1 << 34, ..MapOptions::default() };
    let m0 = alloc_count::live();
    let t0 = Instant::now();
    let map = Map::create(def, &opts)?;
    for &(p, v) in &d.table {
        map.update_user(&A::map_key(p.addr(), p.len()), &v.to_ne_bytes(), 0)?;
    }
    let build = t0.elapsed().as_secs_f64();
    let mem = alloc_count::live() - m0;
    let keys = |v: &[A]| -> Vec<Vec<u8>> { v.iter().map(|&x| A::map_key(x, A::BITS)).collect() };
    let get = |k: &[u8]| {
        let mut out = [0u8; 4];
        map.lookup_user(k, &mut out).ok().map(|()| u32::from_ne_bytes(out))
    };
    let mismatches = keys(sample).iter().zip(expect).filter(|(k, e)| get(k) != **e).count();
    let (random, inside) = (keys(&d.random), keys(&d.inside));
    let f = |k: &[Vec<u8>]| {
        k.iter()
            .fold(0u64, |s, k| s.wrapping_add(map.lookup(k, 0).map_or(0, |p| p.as_ptr() as u64)))
    };
    let n = if index { a.lookups } else { a.lookups / 10 };
    let random_mlps = mlps(trials, n, &random, f);
    let table_mlps = mlps(trials, n, &inside, f);
    let s = Instant::now();
    for &(ann, p) in &d.trace {
        let k = A::map_key(p.addr(), p.len());
        if ann {
            map.update_user(&k, &next_hop(p).to_ne_bytes(), 0)?;
        } else {
            let _ = map.delete_user(&k);
        }
    }
    let u = d.trace.len() as f64 / s.elapsed().as_secs_f64();
    Ok(Row {
        family: A::NAME,
        name: name.into(),
        build_s: build,
        memory_bytes: mem as i64,
        lookup_bytes: None,
        random_mlps,
        table_mlps,
        random_burst_mlps: None,
        table_burst_mlps: None,
        updates_per_s: Some(Stat { min: u, median: u, max: u }),
        mismatches,
    })
}

fn mib(b: i64) -> f64 {
    b as f64 / (1 << 20) as f64
}

pub fn main(a: &LpmArgs) -> Result<()> {
    let dir = a.routes.clone().unwrap_or_else(default_routes);
    if !dir.is_dir() {
        bail!("no routes folder at {} (give --routes DIR)", dir.display());
    }
    let (v4, v6) = match a.family.as_str() {
        "all" => (true, true),
        "v4" => (true, false),
        "v6" => (false, true),
        f => bail!("--family {f}: v4, v6 or all"),
    };
    let total = (v4 as usize) * 9 + (v6 as usize) * 8;
    let mut done = 0;
    let mut step = |what: &str| {
        progress(done, total, what);
        done += 1;
    };
    let mut rows = Vec::new();
    if v4 {
        rows.extend(family::<u32>(
            a,
            &dir,
            (
                "20260511-initial-state-peer-193.0.0.56AS3333.txt.gz",
                "20260511-mutations-peer-193.0.0.56AS3333.txt.gz",
            ),
            &mut step,
        )?);
    }
    if v6 {
        rows.extend(family::<u128>(
            a,
            &dir,
            (
                "20260511-initial-state-peer-193.0.0.56AS3333-ipv6.txt.gz",
                "20260511-mutations-peer-193.0.0.56AS3333-ipv6.txt.gz",
            ),
            &mut step,
        )?);
    }
    progress(total, total, "done");
    eprintln!();
    let report = json!({
        "machine": super::machine(),
        "routes": dir.display().to_string(),
        "next_hops": NEXT_HOP_RULE,
        "trials": a.repeat_trials.max(1),
        "burst": BURST,
        "rows": rows,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&rows);
        println!("machine: {}", super::machine_line(&report["machine"]));
    }
    if let Some(out) = &a.out {
        std::fs::create_dir_all(out)?;
        std::fs::write(out.join("bench-lpm.json"), serde_json::to_string_pretty(&report)?)?;
        let labels: Vec<String> = rows.iter().map(|r| format!("{} {}", r.family, r.name)).collect();
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let med = |f: &dyn Fn(&Row) -> Option<Stat>| {
            rows.iter().map(|r| f(r).map_or(0.0, |s| s.median)).collect::<Vec<_>>()
        };
        let lookups = svg::bars(
            "LPM lookups, M/s per core (median)",
            &labels,
            &[
                ("random", med(&|r| Some(r.random_mlps))),
                ("in table", med(&|r| Some(r.table_mlps))),
                ("random, bursts", med(&|r| r.random_burst_mlps)),
                ("in table, bursts", med(&|r| r.table_burst_mlps)),
            ],
            true,
        );
        std::fs::write(out.join("bench-lpm-lookups.svg"), lookups)?;
        let upd = svg::bars(
            "LPM updates/s replaying the 24-hour trace (median)",
            &labels,
            &[("updates/s", med(&|r| r.updates_per_s))],
            true,
        );
        std::fs::write(out.join("bench-lpm-updates.svg"), upd)?;
    }
    Ok(())
}

fn print_table(rows: &[Row]) {
    println!("{NEXT_HOP_RULE}; lookups in M/s per core, median [min-max]");
    println!(
        "{:5} {:32} {:>8} {:>9} {:>9} {:>22} {:>22} {:>22} {:>22} {:>26} {:>5}",
        "",
        "structure",
        "build s",
        "MiB",
        "lookup",
        "random",
        "in table",
        "random, bursts",
        "in table, bursts",
        "updates/s (trace)",
        "wrong"
    );
    for r in rows {
        let opt = |s: Option<Stat>| s.map_or_else(|| "-".to_string(), |s| s.to_string());
        let ups = r
            .updates_per_s
            .map_or_else(|| "-".into(), |s| format!("{:.0} [{:.0}-{:.0}]", s.median, s.min, s.max));
        println!(
            "{:5} {:32} {:8.2} {:9.1} {:>9} {:>22} {:>22} {:>22} {:>22} {:>26} {:>5}",
            r.family,
            r.name,
            r.build_s,
            mib(r.memory_bytes),
            r.lookup_bytes.map_or_else(|| "-".into(), |b| format!("{:.1}", mib(b as i64))),
            r.random_mlps.to_string(),
            r.table_mlps.to_string(),
            opt(r.random_burst_mlps),
            opt(r.table_burst_mlps),
            ups,
            r.mismatches
        );
    }
    let pick = |fam: &str, name: &str| rows.iter().find(|r| r.family == fam && r.name == name);
    for fam in ["IPv4", "IPv6"] {
        if let (Some(p), Some(t)) = (pick(fam, "spine-fib poptrie"), pick(fam, "prefix-trie")) {
            println!(
                "{fam}: poptrie / prefix-trie lookups: random {:.2}x, in table {:.2}x; updates {:.2}x",
                p.random_mlps.median / t.random_mlps.median,
                p.table_mlps.median / t.table_mlps.median,
                p.updates_per_s.map_or(0.0, |s| s.median) / t.updates_per_s.map_or(1.0, |s| s.median)
            );
        }
        if let (Some(i), Some(k)) =
            (pick(fam, "lpm_trie map + poptrie index"), pick(fam, "lpm_trie map (kernel trie)"))
        {
            println!(
                "{fam}: lpm_trie map with index / kernel trie walk: lookups random {:.2}x, in table {:.2}x; updates {:.2}x",
                i.random_mlps.median / k.random_mlps.median,
                i.table_mlps.median / k.table_mlps.median,
                i.updates_per_s.map_or(0.0, |s| s.median) / k.updates_per_s.map_or(1.0, |s| s.median)
            );
        }
    }
}
