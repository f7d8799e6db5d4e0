//! A map's definition and creation options, and the kernel's creation checks
//! (`map_create`, `array_map_alloc_check`, `htab_map_alloc_check`, `trie_alloc`), in the
//! kernel's order so that a bad definition fails with the kernel's errno.
//!
//! The size limits are documented on [`MapDef`].

use std::sync::Arc;

use spine_abi::map_flags as mf;
use spine_abi::map_type as mt;

use crate::MapError;

/// A map as a program declares it: the fields of `union bpf_attr` for `BPF_MAP_CREATE`.
///
/// Size limits, the kernel's (x86-64, 4 KiB pages, measured against Linux 6.18):
/// - array, per-CPU array: `key_size == 4`; `value_size` 1..=`i32::MAX` (plain),
///   `round_up(value_size, 8) <= 32768` (per-CPU, `PCPU_MIN_UNIT_SIZE`).
/// - hash family: `key_size >= 1`, `value_size >= 1`, `key_size + value_size < 4 MiB - 48`
///   (`KMALLOC_MAX_SIZE - sizeof(struct htab_elem)`); per-CPU values as above;
///   `max_entries <= 2^27` (the kernel's bucket array limit). There is no separate
///   512-byte key limit in current kernels.
/// - LPM trie: `key_size` 5..=260 (a `u32` prefix length and 1..=256 data bytes),
///   `value_size` 1..=`4 MiB - 280`; `BPF_F_NO_PREALLOC` is mandatory.
///
/// Beyond the kernel's checks, the whole map must fit in [`MapOptions::max_bytes`]
/// (else `TooLarge`, `ENOMEM`), because spine preallocates every map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    pub name: Arc<str>,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
}

impl MapDef {
    pub fn new(
        name: &str,
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        flags: u32,
    ) -> MapDef {
        MapDef { name: Arc::from(name), map_type, key_size, value_size, max_entries, flags }
    }
}

/// How the adapter instantiates maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapOptions {
    /// Number of worker CPUs: the per-CPU slot count and the valid `cpu` arguments.
    pub ncpus: usize,
    /// Hash seed (the kernel's `hashrnd`, drawn at random per map there). Ignored with
    /// `BPF_F_ZERO_SEED`, which uses 0 as the kernel does.
    pub seed: u64,
    /// Most bytes one map may preallocate.
    pub max_bytes: u64,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions { ncpus: 1, seed: 0, max_bytes: 1 << 30 }
    }
}

/// `KMALLOC_MAX_SIZE` on x86-64.
const KMALLOC_MAX_SIZE: u64 = 4 << 20;
/// `sizeof(struct htab_elem)`.
const HTAB_ELEM_SIZE: u64 = 48;
/// `PCPU_MIN_UNIT_SIZE`: bound of a per-CPU value.
pub(crate) const PCPU_MAX_VALUE: u32 = 32 << 10;
/// Largest `max_entries` of a hash map (`n_buckets <= U32_MAX / sizeof(struct bucket)`).
pub(crate) const HASH_MAX_ENTRIES: u32 = 1 << 27;
/// LPM key: `struct bpf_lpm_trie_key_u8` (a `u32` prefix length) and 1..=256 data bytes.
pub(crate) const LPM_KEY_MIN: u32 = 4 + 1;
pub(crate) const LPM_KEY_MAX: u32 = 4 + 256;
/// `LPM_VAL_SIZE_MAX`: `KMALLOC_MAX_SIZE - 256 - sizeof(struct lpm_trie_node)`.
pub(crate) const LPM_VALUE_MAX: u32 = (KMALLOC_MAX_SIZE - 256 - 24) as u32;

const ACCESS_MASK: u32 = mf::RDONLY | mf::WRONLY | mf::RDONLY_PROG | mf::WRONLY_PROG;
const ARRAY_FLAGS: u32 = mf::NUMA_NODE | mf::MMAPABLE | ACCESS_MASK | mf::INNER_MAP;
const HASH_FLAGS: u32 =
    mf::NO_PREALLOC | mf::NO_COMMON_LRU | mf::NUMA_NODE | ACCESS_MASK | mf::ZERO_SEED;
const LPM_FLAGS: u32 = mf::NO_PREALLOC | mf::NUMA_NODE | ACCESS_MASK;

/// What kind of storage a checked definition gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    Array { percpu: bool },
    Hash { percpu: bool, lru: Option<LruMode> },
    Lpm,
}

/// LRU list layout: one common list, or one per CPU (`BPF_F_NO_COMMON_LRU`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LruMode {
    Common,
    PerCpu,
}

/// Runs the kernel's checks on `def` and returns the storage plan and the definition as
/// the kernel keeps it (a per-CPU LRU rounds `max_entries` to a multiple of `ncpus`).
pub(crate) fn check(def: &MapDef, ncpus: usize) -> Result<(Plan, MapDef), MapError> {
    let map = def.name.clone();
    let flags = def.flags;
    if ncpus == 0 {
        return Err(MapError::ZeroCpus { map });
    }
    // `bpf_get_file_flag`: user-space read-only and write-only at once.
    if flags & mf::RDONLY != 0 && flags & mf::WRONLY != 0 {
        return Err(MapError::MapFlags { map, flags });
    }
    // `bpf_map_flags_access_ok`: the same for programs.
    let access_ok = !(flags & mf::RDONLY_PROG != 0 && flags & mf::WRONLY_PROG != 0);
    let mut out = def.clone();
    let plan = match def.map_type {
        mt::ARRAY | mt::PERCPU_ARRAY => {
            let percpu = def.map_type == mt::PERCPU_ARRAY;
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            if def.key_size != 4 {
                return Err(MapError::KeySize { map, key_size: def.key_size, min: 4, max: 4 });
            }
            if def.value_size == 0 {
                let max = if percpu { PCPU_MAX_VALUE } else { i32::MAX as u32 };
                return Err(MapError::ValueSize { map, value_size: 0, min: 1, max });
            }
            let mut bad = flags & !ARRAY_FLAGS;
            if percpu {
                bad |= flags & (mf::NUMA_NODE | mf::MMAPABLE | mf::INNER_MAP);
            }
            if bad != 0 || !access_ok {
                return Err(MapError::MapFlags { map, flags });
            }
            if def.value_size > i32::MAX as u32 {
                return Err(too_large_value(map, def.value_size, i32::MAX as u32));
            }
            if percpu && round8(def.value_size as u64) > PCPU_MAX_VALUE as u64 {
                return Err(too_large_value(map, def.value_size, PCPU_MAX_VALUE));
            }
            Plan::Array { percpu }
        }
        mt::HASH | mt::PERCPU_HASH | mt::LRU_HASH | mt::LRU_PERCPU_HASH => {
            let percpu = matches!(def.map_type, mt::PERCPU_HASH | mt::LRU_PERCPU_HASH);
            let lru = matches!(def.map_type, mt::LRU_HASH | mt::LRU_PERCPU_HASH);
            let percpu_lru = flags & mf::NO_COMMON_LRU != 0;
            if flags & !HASH_FLAGS != 0 || !access_ok || (!lru && percpu_lru) {
                return Err(MapError::MapFlags { map, flags });
            }
            if lru && flags & mf::NO_PREALLOC != 0 {
                return Err(MapError::NeedsPrealloc { map });
            }
            if flags & mf::NUMA_NODE != 0 && (percpu || percpu_lru) {
                return Err(MapError::MapFlags { map, flags });
            }
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            let kv_max = KMALLOC_MAX_SIZE - HTAB_ELEM_SIZE - 1;
            if def.key_size == 0 {
                let max = kv_max.saturating_sub(def.value_size as u64).max(1) as u32;
                return Err(MapError::KeySize { map, key_size: 0, min: 1, max });
            }
            if def.value_size == 0 {
                let max = kv_max.saturating_sub(def.key_size as u64).max(1) as u32;
                return Err(MapError::ValueSize { map, value_size: 0, min: 1, max });
            }
            if def.key_size as u64 + def.value_size as u64 > kv_max {
                return Err(MapError::KeyValueTooLarge {
                    map,
                    key_size: def.key_size,
                    value_size: def.value_size,
                    max: kv_max,
                });
            }
            if percpu && round8(def.value_size as u64) > PCPU_MAX_VALUE as u64 {
                return Err(too_large_value(map, def.value_size, PCPU_MAX_VALUE));
            }
            if percpu_lru {
                // `htab_map_alloc`: every CPU's list gets the same number of elements.
                let n = ncpus as u64;
                let up = (def.max_entries as u64).div_ceil(n) * n;
                out.max_entries = if up > u32::MAX as u64 {
                    (def.max_entries as u64 / n * n) as u32
                } else {
                    up as u32
                };
                if out.max_entries == 0 {
                    // Fewer entries than CPUs and a rounding overflow cannot both happen,
                    // but a zero-sized list per CPU would be unusable.
                    return Err(MapError::ZeroEntries { map });
                }
            }
            if out.max_entries > HASH_MAX_ENTRIES {
                return Err(MapError::TooManyEntries {
                    map,
                    max_entries: out.max_entries,
                    max: HASH_MAX_ENTRIES,
                });
            }
            let lru = lru.then_some(if percpu_lru { LruMode::PerCpu } else { LruMode::Common });
            Plan::Hash { percpu, lru }
        }
        mt::LPM_TRIE => {
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            if flags & mf::NO_PREALLOC == 0 {
                return Err(MapError::NeedsNoPrealloc { map });
            }
            if flags & !LPM_FLAGS != 0 || !access_ok {
                return Err(MapError::MapFlags { map, flags });
            }
            if !(LPM_KEY_MIN..=LPM_KEY_MAX).contains(&def.key_size) {
                let (min, max) = (LPM_KEY_MIN, LPM_KEY_MAX);
                return Err(MapError::KeySize { map, key_size: def.key_size, min, max });
            }
            if !(1..=LPM_VALUE_MAX).contains(&def.value_size) {
                let (value_size, max) = (def.value_size, LPM_VALUE_MAX);
                return Err(MapError::ValueSize { map, value_size, min: 1, max });
            }
            Plan::Lpm
        }
        map_type => return Err(MapError::Unsupported { map, map_type }),
    };
    Ok((plan, out))
}

fn too_large_value(map: Arc<str>, value_size: u32, max: u32) -> MapError {
    MapError::ValueTooLarge { map, value_size, max }
}

pub(crate) fn round8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// Fails with `TooLarge` when `bytes` exceeds the limit.
pub(crate) fn check_budget(def: &MapDef, bytes: u128, limit: u64) -> Result<(), MapError> {
    if bytes > limit as u128 {
        return Err(MapError::TooLarge {
            map: def.name.clone(),
            bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno(t: u32, k: u32, v: u32, n: u32, f: u32) -> i64 {
        match check(&MapDef::new("t", t, k, v, n, f), 2) {
            Ok(_) => 0,
            Err(e) => e.errno(),
        }
    }

    /// Each row was measured with `bpf(BPF_MAP_CREATE)` on Linux 6.18 (2 CPUs).
    #[test]
    fn creation_errnos_match_the_kernel() {
        use mt::*;
        let rows: &[(&str, u32, u32, u32, u32, u32, i64)] = &[
            ("array ks8", ARRAY, 8, 4, 4, 0, -22),
            ("array vs0", ARRAY, 4, 0, 4, 0, -22),
            ("array me0", ARRAY, 4, 4, 0, 0, -22),
            ("array vs INT_MAX", ARRAY, 4, 0x7fff_ffff, 1, 0, 0),
            ("array vs INT_MAX+1", ARRAY, 4, 0x8000_0000, 1, 0, -7),
            ("array NO_PREALLOC", ARRAY, 4, 4, 4, mf::NO_PREALLOC, -22),
            ("array NO_COMMON_LRU", ARRAY, 4, 4, 4, mf::NO_COMMON_LRU, -22),
            ("array ZERO_SEED", ARRAY, 4, 4, 4, mf::ZERO_SEED, -22),
            ("array MMAPABLE", ARRAY, 4, 4, 4, mf::MMAPABLE, 0),
            ("pcpu array MMAPABLE", PERCPU_ARRAY, 4, 4, 4, mf::MMAPABLE, -22),
            ("pcpu array NUMA", PERCPU_ARRAY, 4, 4, 4, mf::NUMA_NODE, -22),
            ("array NUMA", ARRAY, 4, 4, 4, mf::NUMA_NODE, 0),
            ("array RDONLY|WRONLY", ARRAY, 4, 4, 4, mf::RDONLY | mf::WRONLY, -22),
            ("array RDONLY_PROG|WRONLY_PROG", ARRAY, 4, 4, 4, 0x180, -22),
            ("array INNER_MAP", ARRAY, 4, 4, 4, mf::INNER_MAP, 0),
            ("pcpu array INNER_MAP", PERCPU_ARRAY, 4, 4, 4, mf::INNER_MAP, -22),
            ("pcpu array vs 32768", PERCPU_ARRAY, 4, 32768, 1, 0, 0),
            ("pcpu array vs 32769", PERCPU_ARRAY, 4, 32769, 1, 0, -7),
            ("array bit 5", ARRAY, 4, 4, 4, 1 << 5, -22),
            ("array bit 11", ARRAY, 4, 4, 4, 1 << 11, -22),
            ("hash ks0", HASH, 0, 4, 4, 0, -22),
            ("hash ks513", HASH, 513, 4, 4, 0, 0),
            ("hash ks 100000", HASH, 100_000, 4, 4, 0, 0),
            ("hash ks 4MiB", HASH, 4 << 20, 4, 4, 0, -7),
            ("hash vs0", HASH, 4, 0, 4, 0, -22),
            ("hash kv at limit", HASH, 4, 4_194_251, 1, 0, 0),
            ("hash kv over limit", HASH, 4, 4_194_252, 1, 0, -7),
            ("hash NO_PREALLOC", HASH, 4, 4, 4, mf::NO_PREALLOC, 0),
            ("hash NO_COMMON_LRU", HASH, 4, 4, 4, mf::NO_COMMON_LRU, -22),
            ("hash MMAPABLE", HASH, 4, 4, 4, mf::MMAPABLE, -22),
            ("hash INNER_MAP", HASH, 4, 4, 4, mf::INNER_MAP, -22),
            ("hash NUMA", HASH, 4, 4, 4, mf::NUMA_NODE, 0),
            ("pcpu hash NUMA", PERCPU_HASH, 4, 4, 4, mf::NUMA_NODE, -22),
            ("pcpu hash vs 32768", PERCPU_HASH, 4, 32768, 1, 0, 0),
            ("pcpu hash vs 32769", PERCPU_HASH, 4, 32769, 1, 0, -7),
            ("hash me 2^27+1", HASH, 4, 8, (1 << 27) + 1, mf::NO_PREALLOC, -7),
            ("hash me 2^31+1", HASH, 4, 8, (1 << 31) + 1, 0, -7),
            ("hash WRONLY_PROG", HASH, 4, 8, 4, mf::WRONLY_PROG, 0),
            ("hash ZERO_SEED", HASH, 4, 8, 4, mf::ZERO_SEED, 0),
            ("lru NO_PREALLOC", LRU_HASH, 4, 4, 4, mf::NO_PREALLOC, -524),
            ("lru NO_COMMON_LRU", LRU_HASH, 4, 4, 4, mf::NO_COMMON_LRU, 0),
            ("lru pcpu NO_COMMON_LRU", LRU_PERCPU_HASH, 4, 4, 4, mf::NO_COMMON_LRU, 0),
            ("lpm no NO_PREALLOC", LPM_TRIE, 8, 4, 4, 0, -22),
            ("lpm ks8", LPM_TRIE, 8, 4, 4, mf::NO_PREALLOC, 0),
            ("lpm ks4", LPM_TRIE, 4, 4, 4, mf::NO_PREALLOC, -22),
            ("lpm ks5", LPM_TRIE, 5, 4, 4, mf::NO_PREALLOC, 0),
            ("lpm ks260", LPM_TRIE, 260, 4, 4, mf::NO_PREALLOC, 0),
            ("lpm ks261", LPM_TRIE, 261, 4, 4, mf::NO_PREALLOC, -22),
            ("lpm vs0", LPM_TRIE, 8, 0, 4, mf::NO_PREALLOC, -22),
            ("lpm vs max", LPM_TRIE, 8, 4_194_024, 4, mf::NO_PREALLOC, 0),
            ("lpm vs max+1", LPM_TRIE, 8, 4_194_025, 4, mf::NO_PREALLOC, -22),
            ("lpm RDONLY_PROG", LPM_TRIE, 8, 4, 4, mf::NO_PREALLOC | mf::RDONLY_PROG, 0),
            ("lpm ZERO_SEED", LPM_TRIE, 8, 4, 4, mf::NO_PREALLOC | mf::ZERO_SEED, -22),
            ("lpm me0", LPM_TRIE, 8, 4, 0, mf::NO_PREALLOC, -22),
            ("unknown type", 999, 4, 4, 4, 0, -22),
        ];
        for &(what, t, k, v, n, f, want) in rows {
            assert_eq!(errno(t, k, v, n, f), want, "{what}");
        }
    }

    #[test]
    fn per_cpu_lru_rounds_max_entries_to_cpus() {
        let def = MapDef::new("l", mt::LRU_HASH, 4, 4, 5, mf::NO_COMMON_LRU);
        let (plan, eff) = check(&def, 2).unwrap();
        assert_eq!(plan, Plan::Hash { percpu: false, lru: Some(LruMode::PerCpu) });
        assert_eq!(eff.max_entries, 6);
        let def = MapDef::new("l", mt::LRU_HASH, 4, 4, u32::MAX, mf::NO_COMMON_LRU);
        assert_eq!(check(&def, 2).unwrap_err().errno(), -7, "rounded down, then too many");
    }

    #[test]
    fn zero_cpus_is_refused() {
        let def = MapDef::new("a", mt::ARRAY, 4, 4, 1, 0);
        assert!(matches!(check(&def, 0), Err(MapError::ZeroCpus { .. })));
    }
}
