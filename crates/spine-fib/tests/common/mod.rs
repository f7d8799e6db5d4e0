//! The real tables of `shared/data/routes` (or `SPINE_ROUTES_DIR`), for tests that
//! print `SKIP:` and pass where the folder is absent.

#![allow(dead_code)]

use std::io::Read;
use std::path::PathBuf;

use spine_fib::parse::ris::Mutation;
use spine_fib::IpPrefix;

pub const V4_TABLE: &str = "20260511-initial-state-peer-193.0.0.56AS3333.txt.gz";
pub const V4_TRACE: &str = "20260511-mutations-peer-193.0.0.56AS3333.txt.gz";
pub const V6_TABLE: &str = "20260511-initial-state-peer-193.0.0.56AS3333-ipv6.txt.gz";
pub const V6_TRACE: &str = "20260511-mutations-peer-193.0.0.56AS3333-ipv6.txt.gz";

pub fn routes_dir() -> Option<PathBuf> {
    let d = match std::env::var_os("SPINE_ROUTES_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/routes"),
    };
    if d.join(V4_TABLE).is_file() {
        Some(d)
    } else {
        println!("SKIP: no route tables at {}", d.display());
        None
    }
}

pub fn gunzip(name: &str) -> String {
    let d = routes_dir().expect("checked by the caller");
    let f = std::fs::File::open(d.join(name)).unwrap();
    let mut s = String::new();
    flate2::read::GzDecoder::new(f).read_to_string(&mut s).unwrap();
    s
}

pub fn table(name: &str) -> Vec<IpPrefix> {
    spine_fib::parse::routes::parse(&gunzip(name)).map(|r| r.unwrap().prefix).collect()
}

pub fn trace(name: &str) -> Vec<Mutation> {
    spine_fib::parse::ris::parse(&gunzip(name)).map(|m| m.unwrap()).collect()
}

/// A small deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}
