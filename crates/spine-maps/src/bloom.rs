//! `BPF_MAP_TYPE_BLOOM_FILTER` (`kernel/bpf/bloom_filter.c`): a bit set that answers
//! "maybe present" or "certainly absent" for `value_size`-byte values, without keys.
//!
//! The geometry and hashing are the kernel's, so that with `BPF_F_ZERO_SEED` every
//! answer, false positives included, is the kernel's: `k = map_extra & 0xf` hash
//! functions (5 when 0); `max_entries * k * 7 / 5` bits (the kernel's approximation of
//! `n k / ln 2`, computed in `u32` with its truncating division), rounded up to a power
//! of two and to at least 64, or 2^32 bits when that overflows or passes 2^31; function
//! `i` is `jhash(value, seed + i)` masked to the bit count (`jhash2` over words when
//! `value_size` is a multiple of 4, which on a little-endian machine is the same
//! number). Bits are set atomically and read without a lock, as the kernel's
//! `set_bit`/`test_bit`; nothing is ever cleared.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use spine_abi::map_flags as mf;

use crate::def::MapDef;
use crate::hash::seed_to_hashrnd;
use crate::jhash::jhash;
use crate::storage::zeroed_slice;
use crate::MapError;

/// `nr_hash_funcs` when `map_extra` is 0.
const DEFAULT_HASHES: u32 = 5;

#[derive(Debug)]
pub(crate) struct Bloom {
    name: Arc<str>,
    value_size: usize,
    hashes: u32,
    /// Bit count minus one (a power of two minus one, or `u32::MAX`).
    mask: u32,
    seed: u32,
    bits: Box<[AtomicU64]>,
}

/// `(hash count, bit mask)` of a checked definition.
fn geometry(def: &MapDef) -> (u32, u32) {
    let hashes = match (def.map_extra & 0xf) as u32 {
        0 => DEFAULT_HASHES,
        k => k,
    };
    let bits = def
        .max_entries
        .checked_mul(hashes)
        .and_then(|n| (n / 5).checked_mul(7))
        .filter(|&n| n <= 1 << 31);
    let mask = match bits {
        None => u32::MAX,
        Some(n) if n <= 64 => 63,
        Some(n) => n.next_power_of_two() - 1,
    };
    (hashes, mask)
}

impl Bloom {
    /// Bytes of bit storage.
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        let (_, mask) = geometry(def);
        (u128::from(mask) + 1) / 8
    }

    /// An empty filter; `def` passed the creation checks and the byte budget. `seed` is
    /// the adapter's map seed, ignored under `BPF_F_ZERO_SEED` (seed 0, as the kernel).
    pub(crate) fn new(def: &MapDef, seed: u64) -> Result<Bloom, MapError> {
        let (hashes, mask) = geometry(def);
        let words = ((u64::from(mask) + 1) / 64) as usize;
        let bits = zeroed_slice::<AtomicU64>(words).ok_or_else(|| MapError::OutOfMemory {
            map: def.name.clone(),
            bytes: words as u64 * 8,
        })?;
        let seed = if def.flags & mf::ZERO_SEED != 0 { 0 } else { seed_to_hashrnd(seed) };
        Ok(Bloom {
            name: def.name.clone(),
            value_size: def.value_size as usize,
            hashes,
            mask,
            seed,
            bits,
        })
    }

    fn bit(&self, value: &[u8], i: u32) -> u32 {
        jhash(&value[..self.value_size], self.seed.wrapping_add(i)) & self.mask
    }

    /// `bloom_map_push_elem`: sets the value's bits. Flags other than `BPF_ANY` are
    /// `EINVAL`.
    pub(crate) fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags != 0 {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        for i in 0..self.hashes {
            let b = self.bit(value, i);
            let (word, mask) = ((b / 64) as usize, 1u64 << (b % 64));
            // Setting a bit already set would only move the cache line.
            if self.bits[word].load(Relaxed) & mask == 0 {
                self.bits[word].fetch_or(mask, Relaxed);
            }
        }
        Ok(())
    }

    /// `bloom_map_peek_elem`: `Ok` if every bit of the value is set (maybe present),
    /// `NotFound` (`ENOENT`) otherwise (certainly absent). `value` is only read.
    pub(crate) fn peek(&self, value: &[u8]) -> Result<(), MapError> {
        for i in 0..self.hashes {
            let b = self.bit(value, i);
            if self.bits[(b / 64) as usize].load(Relaxed) & (1u64 << (b % 64)) == 0 {
                return Err(MapError::NotFound { map: self.name.clone() });
            }
        }
        Ok(())
    }

    /// Bits set now (a slow walk; for tests and statistics).
    pub(crate) fn bits_set(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.load(Relaxed).count_ones())).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_abi::map_type::BLOOM_FILTER;

    fn def(value_size: u32, max_entries: u32, map_extra: u64) -> MapDef {
        MapDef::new("b", BLOOM_FILTER, 0, value_size, max_entries, mf::ZERO_SEED)
            .with_map_extra(map_extra)
    }

    #[test]
    fn geometry_is_the_kernels() {
        // 10 entries * 5 hashes = 50 bits * 7 / 5 = 70 -> 128.
        assert_eq!(geometry(&def(4, 10, 0)), (5, 127));
        // At least 64 bits.
        assert_eq!(geometry(&def(4, 1, 1)), (1, 63));
        // Truncating division before the multiplication: 3 * 3 = 9, 9 / 5 * 7 = 7.
        assert_eq!(geometry(&def(4, 3, 3)), (3, 63));
        // 1000 * 3 = 3000 / 5 * 7 = 4200 -> 8192.
        assert_eq!(geometry(&def(4, 1000, 3)), (3, 8191));
        // Overflow of the u32 product, or past 2^31 bits: 2^32 bits.
        assert_eq!(geometry(&def(4, u32::MAX, 15)).1, u32::MAX);
        assert_eq!(geometry(&def(4, 1 << 28, 15)).1, u32::MAX);
        assert_eq!(Bloom::bytes(&def(4, 10, 0)), 16);
        assert_eq!(Bloom::bytes(&def(4, u32::MAX, 0)), 1 << 29);
    }

    #[test]
    fn pushed_values_are_found_and_flags_refused() {
        let b = Bloom::new(&def(6, 100, 0), 0).unwrap();
        let values: Vec<[u8; 6]> = (0..100u32)
            .map(|i| {
                let x = i.wrapping_mul(0x9e37_79b9).to_le_bytes();
                [x[0], x[1], x[2], x[3], i as u8, 7]
            })
            .collect();
        for v in &values {
            b.push(v, 0).unwrap();
        }
        for v in &values {
            assert_eq!(b.peek(v), Ok(()));
        }
        assert!(b.bits_set() > 0 && b.bits_set() <= 500);
        let e = b.push(&values[0], 1).unwrap_err();
        assert_eq!(e.errno(), -22);
        // Most values never pushed are absent (the filter has ~7 bits per value).
        let absent = (1000..2000u32)
            .filter(|i| b.peek(&[i.to_le_bytes()[0], i.to_le_bytes()[1], 0, 0, 0, 1]).is_err())
            .count();
        assert!(absent > 900, "{absent}");
    }

    #[test]
    fn the_seed_changes_the_bits_unless_zero_seed() {
        let d = MapDef::new("b", BLOOM_FILTER, 0, 8, 64, 0);
        let (a, c) = (Bloom::new(&d, 1).unwrap(), Bloom::new(&d, 2).unwrap());
        assert_ne!(a.seed, c.seed);
        let z = def(8, 64, 0);
        assert_eq!(Bloom::new(&z, 1).unwrap().seed, 0);
        assert_eq!(Bloom::new(&z, 2).unwrap().seed, 0);
    }
}
