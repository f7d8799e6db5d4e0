//! Tests of the map types through [`Map`]'s API, with access to crate internals
//! (bookkeeping checks, reads and writes through program pointers).
//!
//! Where a comment says "measured", the expected result was observed with `bpf(2)` on
//! Linux 6.18 with the same definition and operations.

mod array;
mod devmap;
mod hash;
mod lpm;
mod lru;
mod model;
mod model_entries;
mod outer;
mod queue;
mod ringbuf;
mod stress;
mod timers;

use crate::{Map, MapDef, MapError, MapOptions};

pub(super) fn opts(ncpus: usize) -> MapOptions {
    MapOptions { ncpus, seed: 0x5eed, ..MapOptions::default() }
}

pub(super) fn map(t: u32, key: u32, value: u32, max: u32, flags: u32, ncpus: usize) -> Map {
    Map::create(MapDef::new("t", t, key, value, max, flags), &opts(ncpus)).expect("create")
}

pub(super) fn k32(i: u32) -> [u8; 4] {
    i.to_ne_bytes()
}

/// 0 for success, else the negative errno.
pub(super) fn errno<T>(r: Result<T, MapError>) -> i64 {
    match r {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}

/// The user-side value of `key`, or the errno.
pub(super) fn get(m: &Map, key: &[u8]) -> Result<Vec<u8>, i64> {
    let mut out = vec![0u8; m.user_value_size()];
    m.lookup_user(key, &mut out).map_err(|e| e.errno())?;
    Ok(out)
}

/// Every key in `next_key` order.
pub(super) fn keys(m: &Map) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut cur: Option<Vec<u8>> = None;
    let mut next = vec![0u8; m.def().key_size as usize];
    while m.next_key(cur.as_deref(), &mut next).is_ok() {
        out.push(next.clone());
        cur = Some(next.clone());
        assert!(out.len() <= 1 << 20, "next_key does not terminate");
    }
    out
}
