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
/// - devmap, devmap_hash: `key_size == 4`, `value_size` 4 (ifindex) or 8 (ifindex and a
///   program fd); flags `NUMA_NODE`, `RDONLY`, `WRONLY` only; `BPF_F_RDONLY_PROG` is
///   added (programs only read entries); devmap_hash `max_entries <= 2^31` (`EINVAL`).
/// - cpumap: `key_size == 4`, `value_size` 4 (qsize) or 8 (qsize and a program fd);
///   flag `NUMA_NODE` only; `max_entries <= 256`, the reference kernel's `NR_CPUS`
///   (`E2BIG`).
/// - ring buffer: `key_size == 0`, `value_size == 0`, `max_entries` (the data size) a
///   power of two and a multiple of 4096; flag `NUMA_NODE` only.
/// - queue, stack: `key_size == 0`, `value_size` 1..=4 MiB (`KMALLOC_MAX_SIZE`; more is
///   `E2BIG`), `max_entries >= 1`; flags `NUMA_NODE` and the access flags only.
/// - bloom filter: `key_size == 0`, `value_size` 1..=4 MiB (more is `E2BIG`),
///   `max_entries >= 1`, `map_extra` below 16 (the hash count, 0 meaning 5); flags
///   `NUMA_NODE`, `ZERO_SEED` and the access flags only.
/// - array_of_maps, hash_of_maps: `value_size == 4` (an fd in the kernel), otherwise an
///   array's or a hash's rules (arrays without `MMAPABLE`, `INNER_MAP` and the program
///   access flags); created with an inner template ([`crate::Map::create_outer`]).
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
    /// Offset of the value's `struct bpf_spin_lock` (from the object's BTF), if any.
    pub spin_lock: Option<u32>,
    /// Offset of the value's `struct bpf_timer` (from the object's BTF), if any.
    pub timer: Option<u32>,
    /// `map_extra`: a bloom filter's hash-function count (low 4 bits; 0 means 5); must
    /// be 0 for every other type (`EINVAL`, as `map_create`).
    pub map_extra: u64,
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
        MapDef {
            name: Arc::from(name),
            map_type,
            key_size,
            value_size,
            max_entries,
            flags,
            spin_lock: None,
            timer: None,
            map_extra: 0,
        }
    }

    /// The same definition with `map_extra` set (a bloom filter's hash count).
    pub fn with_map_extra(mut self, map_extra: u64) -> MapDef {
        self.map_extra = map_extra;
        self
    }

    /// The same definition with a `struct bpf_timer` at `off` in the value.
    pub fn with_timer(mut self, off: Option<u32>) -> MapDef {
        self.timer = off;
        self
    }

    /// The same definition with a `struct bpf_spin_lock` at `off` in the value.
    pub fn with_spin_lock(mut self, off: Option<u32>) -> MapDef {
        self.spin_lock = off;
        self
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
    /// Entries at which an IPv4 or IPv6 LPM trie (4- or 16-byte data) builds a
    /// Poptrie index for full-length lookups (`spine-fib`; about 2 × 1 MiB for IPv4,
    /// 2 × 4 MiB for IPv6, plus the prefixes); `None`: never, every lookup walks the
    /// kernel's trie.
    pub lpm_index_at: Option<u32>,
}

impl Default for MapOptions {
    fn default() -> Self {
        MapOptions { ncpus: 1, seed: 0, max_bytes: 1 << 30, lpm_index_at: Some(LPM_INDEX_AT) }
    }
}

/// Default [`MapOptions::lpm_index_at`]: below it, a trie walk is a few cached nodes
/// and the index's direct table would cost more memory than it saves time.
pub const LPM_INDEX_AT: u32 = 256;

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

/// `NR_CPUS` of the reference kernel (`CONFIG_NR_CPUS=256`): `cpu_map_alloc` refuses a
/// larger cpumap with `E2BIG` before it looks at which CPUs exist.
pub(crate) const CPUMAP_MAX_ENTRIES: u32 = 256;
/// `dev_map_init_map`: a devmap_hash's bucket count must fit (`EINVAL` beyond).
pub(crate) const DEVMAP_HASH_MAX_ENTRIES: u32 = 1 << 31;
/// A ring buffer's size is a power of two and a multiple of the page size.
pub(crate) const RINGBUF_PAGE: u32 = 4096;

const ACCESS_MASK: u32 = mf::RDONLY | mf::WRONLY | mf::RDONLY_PROG | mf::WRONLY_PROG;
const DEV_FLAGS: u32 = mf::NUMA_NODE | mf::RDONLY | mf::WRONLY;
const ARRAY_FLAGS: u32 = mf::NUMA_NODE | mf::MMAPABLE | ACCESS_MASK | mf::INNER_MAP;
const HASH_FLAGS: u32 =
    mf::NO_PREALLOC | mf::NO_COMMON_LRU | mf::NUMA_NODE | ACCESS_MASK | mf::ZERO_SEED;
const LPM_FLAGS: u32 = mf::NO_PREALLOC | mf::NUMA_NODE | ACCESS_MASK;

/// What kind of storage a checked definition gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    Array {
        percpu: bool,
    },
    Hash {
        percpu: bool,
        lru: Option<LruMode>,
    },
    Lpm,
    /// `DEVMAP` (an array of ifindexes) or `DEVMAP_HASH`.
    DevMap {
        hash: bool,
    },
    CpuMap,
    XskMap,
    RingBuf,
    /// `PERF_EVENT_ARRAY`.
    Perf,
    /// `ARRAY_OF_MAPS` or `HASH_OF_MAPS`.
    Outer {
        hash: bool,
    },
    /// `QUEUE` or (`stack`) `STACK`.
    Queue {
        stack: bool,
    },
    /// `BLOOM_FILTER`.
    Bloom,
}

/// LRU list layout: one common list, or one per CPU (`BPF_F_NO_COMMON_LRU`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LruMode {
    Common,
    PerCpu,
}

/// A checked map-in-map: its plan and definition, and the inner template as the kernel
/// keeps it (checked like any map, then normalised as its creation would).
#[derive(Debug)]
pub(crate) struct CheckedOuter {
    pub(crate) plan: Plan,
    pub(crate) def: MapDef,
    pub(crate) template: MapDef,
}

/// Runs the kernel's checks on `def` and returns the storage plan and the definition as
/// the kernel keeps it (a per-CPU LRU rounds `max_entries` to a multiple of `ncpus`; a
/// devmap gains `BPF_F_RDONLY_PROG`). A map-in-map fails here with `NoInnerTemplate`
/// once its own checks pass: it is created by [`check_outer`].
pub(crate) fn check(def: &MapDef, ncpus: usize) -> Result<(Plan, MapDef), MapError> {
    if matches!(def.map_type, mt::ARRAY_OF_MAPS | mt::HASH_OF_MAPS) {
        return Err(match check_outer(def, None, ncpus) {
            Err(e) => e,
            Ok(_) => MapError::NoInnerTemplate { map: def.name.clone() },
        });
    }
    check_common(def, ncpus)?;
    check_spin_lock(def)?;
    check_timer(def)?;
    let map = def.name.clone();
    let flags = def.flags;
    let mut out = def.clone();
    let plan = match def.map_type {
        mt::ARRAY | mt::PERCPU_ARRAY => check_array(def)?,
        mt::HASH | mt::PERCPU_HASH | mt::LRU_HASH | mt::LRU_PERCPU_HASH => {
            let plan = check_hash(def, ncpus, &mut out)?;
            check_hash_entries(&out)?;
            plan
        }
        mt::LPM_TRIE => {
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            if flags & mf::NO_PREALLOC == 0 {
                return Err(MapError::NeedsNoPrealloc { map });
            }
            if flags & !LPM_FLAGS != 0 || !access_ok(flags) {
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
        mt::DEVMAP | mt::DEVMAP_HASH => {
            // `dev_map_init_map`: one combined check, all EINVAL.
            check_entry_map(def, DEV_FLAGS)?;
            let hash = def.map_type == mt::DEVMAP_HASH;
            if hash && def.max_entries > DEVMAP_HASH_MAX_ENTRIES {
                let max = DEVMAP_HASH_MAX_ENTRIES;
                return Err(MapError::MaxEntries { map, max_entries: def.max_entries, max });
            }
            // "Lookup returns a pointer straight to dev->ifindex, so make sure the
            // verifier prevents writes from the BPF side."
            out.flags |= mf::RDONLY_PROG;
            Plan::DevMap { hash }
        }
        mt::CPUMAP => {
            check_entry_map(def, mf::NUMA_NODE)?;
            if def.max_entries > CPUMAP_MAX_ENTRIES {
                let (max_entries, max) = (def.max_entries, CPUMAP_MAX_ENTRIES);
                return Err(MapError::TooManyEntries { map, max_entries, max });
            }
            Plan::CpuMap
        }
        mt::XSKMAP | mt::SPINE_ENDPOINT => {
            // `xsk_map_alloc`: key and value 4 bytes, one combined EINVAL.
            check_entry_map(def, mf::NUMA_NODE | mf::RDONLY | mf::WRONLY)?;
            if def.value_size != 4 {
                let value_size = def.value_size;
                return Err(MapError::ValueSize { map, value_size, min: 4, max: 4 });
            }
            // Programs only look entries up and redirect (the kernel's verifier refuses
            // their updates).
            out.flags |= mf::RDONLY_PROG;
            Plan::XskMap
        }
        mt::RINGBUF => {
            if flags & !mf::NUMA_NODE != 0 {
                return Err(MapError::MapFlags { map, flags });
            }
            if def.key_size != 0 {
                return Err(MapError::KeySize { map, key_size: def.key_size, min: 0, max: 0 });
            }
            if def.value_size != 0 {
                let value_size = def.value_size;
                return Err(MapError::ValueSize { map, value_size, min: 0, max: 0 });
            }
            let n = def.max_entries;
            if !n.is_power_of_two() || !n.is_multiple_of(RINGBUF_PAGE) {
                return Err(MapError::RingSize { map, max_entries: n });
            }
            Plan::RingBuf
        }
        mt::PERF_EVENT_ARRAY => {
            // `fd_array_map_alloc_check`: key and value 4 bytes (a CPU, a perf event
            // fd), at least one entry, only the access flags.
            if def.key_size != 4 {
                return Err(MapError::KeySize { map, key_size: def.key_size, min: 4, max: 4 });
            }
            if def.value_size != 4 {
                let value_size = def.value_size;
                return Err(MapError::ValueSize { map, value_size, min: 4, max: 4 });
            }
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            if flags
                & !(mf::NUMA_NODE | mf::RDONLY | mf::WRONLY | mf::INNER_MAP | mf::PRESERVE_ELEMS)
                != 0
            {
                return Err(MapError::MapFlags { map, flags });
            }
            Plan::Perf
        }
        mt::QUEUE | mt::STACK => {
            // `queue_stack_map_alloc_check`: one combined EINVAL, then E2BIG for a
            // value user space could not copy.
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            if def.key_size != 0 {
                return Err(MapError::KeySize { map, key_size: def.key_size, min: 0, max: 0 });
            }
            if def.value_size == 0 {
                let max = KMALLOC_MAX_SIZE as u32;
                return Err(MapError::ValueSize { map, value_size: 0, min: 1, max });
            }
            if flags & !(mf::NUMA_NODE | ACCESS_MASK) != 0 || !access_ok(flags) {
                return Err(MapError::MapFlags { map, flags });
            }
            if u64::from(def.value_size) > KMALLOC_MAX_SIZE {
                return Err(too_large_value(map, def.value_size, KMALLOC_MAX_SIZE as u32));
            }
            Plan::Queue { stack: def.map_type == mt::STACK }
        }
        mt::BLOOM_FILTER => {
            // `bloom_map_alloc_check` (E2BIG for a value user space could not copy),
            // then `bloom_map_alloc`'s one combined EINVAL.
            if u64::from(def.value_size) > KMALLOC_MAX_SIZE {
                return Err(too_large_value(map, def.value_size, KMALLOC_MAX_SIZE as u32));
            }
            if def.key_size != 0 {
                return Err(MapError::KeySize { map, key_size: def.key_size, min: 0, max: 0 });
            }
            if def.value_size == 0 {
                let max = KMALLOC_MAX_SIZE as u32;
                return Err(MapError::ValueSize { map, value_size: 0, min: 1, max });
            }
            if def.max_entries == 0 {
                return Err(MapError::ZeroEntries { map });
            }
            if flags & !(mf::NUMA_NODE | mf::ZERO_SEED | ACCESS_MASK) != 0 || !access_ok(flags) {
                return Err(MapError::MapFlags { map, flags });
            }
            if def.map_extra & !0xf != 0 {
                return Err(MapError::MapExtra { map, map_extra: def.map_extra });
            }
            Plan::Bloom
        }
        map_type => return Err(MapError::Unsupported { map, map_type }),
    };
    Ok((plan, out))
}

/// The checks of an `ARRAY_OF_MAPS` or `HASH_OF_MAPS` and of its inner template, in the
/// kernel's order: the outer map's own attribute checks (`fd_array_map_alloc_check`,
/// `fd_htab_map_alloc_check`), then the template (`bpf_map_meta_alloc`), then the
/// outer storage limits.
pub(crate) fn check_outer(
    def: &MapDef,
    template: Option<&MapDef>,
    ncpus: usize,
) -> Result<CheckedOuter, MapError> {
    let map = def.name.clone();
    let flags = def.flags;
    let hash = match def.map_type {
        mt::ARRAY_OF_MAPS => false,
        mt::HASH_OF_MAPS => true,
        _ => return Err(MapError::NotOuter { map }),
    };
    check_common(def, ncpus)?;
    // Only a `u32` file descriptor can be stored.
    if def.value_size != 4 {
        let value_size = def.value_size;
        return Err(MapError::ValueSize { map, value_size, min: 4, max: 4 });
    }
    let mut out = def.clone();
    if hash {
        check_hash(def, ncpus, &mut out)?;
    } else {
        if flags & (mf::RDONLY_PROG | mf::WRONLY_PROG) != 0 {
            return Err(MapError::MapFlags { map, flags });
        }
        check_array(def)?;
        if flags & (mf::MMAPABLE | mf::INNER_MAP) != 0 {
            return Err(MapError::MapFlags { map, flags });
        }
    }
    let template = template.ok_or_else(|| MapError::NoInnerTemplate { map: map.clone() })?;
    match template.map_type {
        mt::ARRAY_OF_MAPS | mt::HASH_OF_MAPS => {
            return Err(MapError::NestedOuter { map, inner: template.name.clone() })
        }
        // No `map_meta_equal`: the kernel cannot compare such maps.
        mt::PROG_ARRAY | mt::PERF_EVENT_ARRAY => {
            return Err(MapError::InnerNotSupported { map, map_type: template.map_type })
        }
        _ => {}
    }
    let (_, template) = check(template, ncpus)?;
    if hash {
        check_hash_entries(&out)?;
    }
    Ok(CheckedOuter { plan: Plan::Outer { hash }, def: out, template })
}

/// `map_create`'s checks common to every type.
fn check_common(def: &MapDef, ncpus: usize) -> Result<(), MapError> {
    let map = def.name.clone();
    // `map_create`: only a bloom filter (and an arena, which spine lacks) takes
    // `map_extra`.
    if def.map_extra != 0 && def.map_type != mt::BLOOM_FILTER {
        return Err(MapError::MapExtra { map, map_extra: def.map_extra });
    }
    if ncpus == 0 {
        return Err(MapError::ZeroCpus { map });
    }
    // `bpf_get_file_flag`: user-space read-only and write-only at once.
    if def.flags & mf::RDONLY != 0 && def.flags & mf::WRONLY != 0 {
        return Err(MapError::MapFlags { map, flags: def.flags });
    }
    Ok(())
}

/// `map_check_btf` for a value with a `bpf_spin_lock`: inside the value, 4-byte
/// aligned, and only in arrays and plain hash maps, the kernel's `EOPNOTSUPP` for the
/// other types spine has (it also allows local storages, which spine has not; per-CPU
/// and LRU flavours it refuses).
fn check_spin_lock(def: &MapDef) -> Result<(), MapError> {
    let Some(off) = def.spin_lock else { return Ok(()) };
    let map = def.name.clone();
    if def.map_type != mt::ARRAY && def.map_type != mt::HASH {
        return Err(MapError::SpinLockType { map, map_type: def.map_type });
    }
    if !off.is_multiple_of(4) || u64::from(off) + 4 > u64::from(def.value_size) {
        return Err(MapError::SpinLockPlace { map, off, value_size: def.value_size });
    }
    Ok(())
}

/// `map_check_btf` for a value with a `bpf_timer`: inside the value, 8-byte aligned,
/// not overlapping a `bpf_spin_lock`, and only in arrays, hash and LRU hash maps (the
/// kernel's `EOPNOTSUPP` for the others).
fn check_timer(def: &MapDef) -> Result<(), MapError> {
    let Some(off) = def.timer else { return Ok(()) };
    let map = def.name.clone();
    if !matches!(def.map_type, mt::ARRAY | mt::HASH | mt::LRU_HASH) {
        return Err(MapError::TimerType { map, map_type: def.map_type });
    }
    let size = spine_abi::timer::SIZE;
    let overlaps_lock = def.spin_lock.is_some_and(|l| l < off + size && off < l + 4);
    if !off.is_multiple_of(8)
        || u64::from(off) + u64::from(size) > u64::from(def.value_size)
        || overlaps_lock
    {
        return Err(MapError::TimerPlace { map, off, value_size: def.value_size });
    }
    Ok(())
}

/// `bpf_map_flags_access_ok`: programs may not be read-only and write-only at once.
fn access_ok(flags: u32) -> bool {
    !(flags & mf::RDONLY_PROG != 0 && flags & mf::WRONLY_PROG != 0)
}

/// `array_map_alloc_check` (plain and per-CPU arrays, and array_of_maps).
fn check_array(def: &MapDef) -> Result<Plan, MapError> {
    let map = def.name.clone();
    let flags = def.flags;
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
    if bad != 0 || !access_ok(flags) {
        return Err(MapError::MapFlags { map, flags });
    }
    if def.value_size > i32::MAX as u32 {
        return Err(too_large_value(map, def.value_size, i32::MAX as u32));
    }
    if percpu && round8(def.value_size as u64) > PCPU_MAX_VALUE as u64 {
        return Err(too_large_value(map, def.value_size, PCPU_MAX_VALUE));
    }
    Ok(Plan::Array { percpu })
}

/// `htab_map_alloc_check` and the rounding of `htab_map_alloc` (the hash family and
/// hash_of_maps); the entry limit is [`check_hash_entries`], which the kernel applies
/// after a hash_of_maps' template.
fn check_hash(def: &MapDef, ncpus: usize, out: &mut MapDef) -> Result<Plan, MapError> {
    let map = def.name.clone();
    let flags = def.flags;
    let percpu = matches!(def.map_type, mt::PERCPU_HASH | mt::LRU_PERCPU_HASH);
    let lru = matches!(def.map_type, mt::LRU_HASH | mt::LRU_PERCPU_HASH);
    let percpu_lru = flags & mf::NO_COMMON_LRU != 0;
    if flags & !HASH_FLAGS != 0 || !access_ok(flags) || (!lru && percpu_lru) {
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
        out.max_entries =
            if up > u32::MAX as u64 { (def.max_entries as u64 / n * n) as u32 } else { up as u32 };
        if out.max_entries == 0 {
            // Fewer entries than CPUs and a rounding overflow cannot both happen,
            // but a zero-sized list per CPU would be unusable.
            return Err(MapError::ZeroEntries { map });
        }
    }
    let lru = lru.then_some(if percpu_lru { LruMode::PerCpu } else { LruMode::Common });
    Ok(Plan::Hash { percpu, lru })
}

/// The bucket-array limit of `htab_map_alloc`.
fn check_hash_entries(def: &MapDef) -> Result<(), MapError> {
    if def.max_entries > HASH_MAX_ENTRIES {
        return Err(MapError::TooManyEntries {
            map: def.name.clone(),
            max_entries: def.max_entries,
            max: HASH_MAX_ENTRIES,
        });
    }
    Ok(())
}

/// The one combined check of `dev_map_init_map` and `cpu_map_alloc` (all `EINVAL`):
/// entries, a `u32` key, a 4- or 8-byte value (the second word a program fd), flags.
fn check_entry_map(def: &MapDef, allowed_flags: u32) -> Result<(), MapError> {
    let map = def.name.clone();
    if def.max_entries == 0 {
        return Err(MapError::ZeroEntries { map });
    }
    if def.key_size != 4 {
        return Err(MapError::KeySize { map, key_size: def.key_size, min: 4, max: 4 });
    }
    if def.value_size != 4 && def.value_size != 8 {
        return Err(MapError::ValueSizeChoice { map, value_size: def.value_size, a: 4, b: 8 });
    }
    if def.flags & !allowed_flags != 0 {
        return Err(MapError::MapFlags { map, flags: def.flags });
    }
    Ok(())
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

    #[test]
    fn timers_only_in_arrays_and_hashes_inside_the_value_and_aligned() {
        use spine_abi::errno::{EINVAL, EOPNOTSUPP};
        let timer = |t: u32, v: u32, off: u32, lock: Option<u32>| {
            let def = MapDef::new("t", t, 4, v, 4, 0).with_timer(Some(off)).with_spin_lock(lock);
            check(&def, 2).err().map_or(0, |e| e.errno())
        };
        assert_eq!(timer(mt::ARRAY, 16, 0, None), 0);
        assert_eq!(timer(mt::HASH, 32, 8, None), 0);
        assert_eq!(timer(mt::LRU_HASH, 24, 8, None), 0);
        assert_eq!(timer(mt::PERCPU_ARRAY, 16, 0, None), -EOPNOTSUPP);
        assert_eq!(timer(mt::LRU_PERCPU_HASH, 16, 0, None), -EOPNOTSUPP);
        assert_eq!(timer(mt::ARRAY, 24, 4, None), -EINVAL, "4-aligned only");
        assert_eq!(timer(mt::ARRAY, 16, 8, None), -EINVAL, "past the value's end");
        assert_eq!(timer(mt::ARRAY, 24, 0, Some(12)), -EINVAL, "over the lock");
        assert_eq!(timer(mt::ARRAY, 24, 8, Some(0)), 0);
    }

    #[test]
    fn spin_locks_only_in_arrays_and_hashes_inside_the_value_and_aligned() {
        let lock = |t: u32, v: u32, off: u32| {
            let def = MapDef::new("t", t, 4, v, 4, 0).with_spin_lock(Some(off));
            check(&def, 2).err().map_or(0, |e| e.errno())
        };
        assert_eq!(lock(mt::ARRAY, 16, 0), 0);
        assert_eq!(lock(mt::ARRAY, 16, 12), 0);
        assert_eq!(lock(mt::ARRAY, 16, 14), -22, "unaligned");
        assert_eq!(lock(mt::ARRAY, 16, 16), -22, "past the value");
        assert_eq!(lock(mt::PERCPU_ARRAY, 16, 0), -95, "the kernel's EOPNOTSUPP");
        assert_eq!(lock(mt::LRU_HASH, 16, 0), -95);
        assert_eq!(lock(mt::HASH, 16, 8), 0);
        assert_eq!(lock(mt::HASH, 16, 13), -22, "unaligned");
        assert_eq!(lock(mt::PERCPU_HASH, 16, 0), -95);
        assert_eq!(lock(mt::LRU_PERCPU_HASH, 16, 0), -95);
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
            ("devmap ok", DEVMAP, 4, 4, 4, 0, 0),
            ("devmap vs8", DEVMAP, 4, 8, 4, 0, 0),
            ("devmap vs12", DEVMAP, 4, 12, 4, 0, -22),
            ("devmap vs0", DEVMAP, 4, 0, 4, 0, -22),
            ("devmap ks8", DEVMAP, 8, 4, 4, 0, -22),
            ("devmap me0", DEVMAP, 4, 4, 0, 0, -22),
            ("devmap RDONLY", DEVMAP, 4, 4, 4, mf::RDONLY, 0),
            ("devmap WRONLY", DEVMAP, 4, 4, 4, mf::WRONLY, 0),
            ("devmap RDONLY|WRONLY", DEVMAP, 4, 4, 4, mf::RDONLY | mf::WRONLY, -22),
            ("devmap RDONLY_PROG", DEVMAP, 4, 4, 4, mf::RDONLY_PROG, -22),
            ("devmap WRONLY_PROG", DEVMAP, 4, 4, 4, mf::WRONLY_PROG, -22),
            ("devmap NUMA", DEVMAP, 4, 4, 4, mf::NUMA_NODE, 0),
            ("devmap NO_PREALLOC", DEVMAP, 4, 4, 4, mf::NO_PREALLOC, -22),
            ("devmap ZERO_SEED", DEVMAP, 4, 4, 4, mf::ZERO_SEED, -22),
            ("devmap MMAPABLE", DEVMAP, 4, 4, 4, mf::MMAPABLE, -22),
            ("devmap INNER_MAP", DEVMAP, 4, 4, 4, mf::INNER_MAP, -22),
            ("devmap_hash ok", DEVMAP_HASH, 4, 4, 4, 0, 0),
            ("devmap_hash vs8", DEVMAP_HASH, 4, 8, 4, 0, 0),
            ("devmap_hash vs12", DEVMAP_HASH, 4, 12, 4, 0, -22),
            ("devmap_hash ks8", DEVMAP_HASH, 8, 4, 4, 0, -22),
            ("devmap_hash me0", DEVMAP_HASH, 4, 4, 0, 0, -22),
            ("devmap_hash RDONLY_PROG", DEVMAP_HASH, 4, 4, 4, mf::RDONLY_PROG, -22),
            ("devmap_hash NO_PREALLOC", DEVMAP_HASH, 4, 4, 4, mf::NO_PREALLOC, -22),
            ("devmap_hash me 2^31+1", DEVMAP_HASH, 4, 4, (1 << 31) + 1, 0, -22),
            ("devmap_hash me u32::MAX", DEVMAP_HASH, 4, 4, u32::MAX, 0, -22),
            ("cpumap ok", CPUMAP, 4, 4, 4, 0, 0),
            ("cpumap vs8", CPUMAP, 4, 8, 4, 0, 0),
            ("cpumap vs12", CPUMAP, 4, 12, 4, 0, -22),
            ("cpumap vs0", CPUMAP, 4, 0, 4, 0, -22),
            ("cpumap ks8", CPUMAP, 8, 4, 4, 0, -22),
            ("cpumap me0", CPUMAP, 4, 4, 0, 0, -22),
            ("cpumap me256", CPUMAP, 4, 4, 256, 0, 0),
            ("cpumap me257", CPUMAP, 4, 4, 257, 0, -7),
            ("cpumap me u32::MAX", CPUMAP, 4, 4, u32::MAX, 0, -7),
            ("cpumap RDONLY", CPUMAP, 4, 4, 4, mf::RDONLY, -22),
            ("cpumap WRONLY", CPUMAP, 4, 4, 4, mf::WRONLY, -22),
            ("cpumap RDONLY_PROG", CPUMAP, 4, 4, 4, mf::RDONLY_PROG, -22),
            ("cpumap NUMA", CPUMAP, 4, 4, 4, mf::NUMA_NODE, 0),
            ("cpumap ks8 me257", CPUMAP, 8, 4, 257, 0, -22),
            ("cpumap me257 RDONLY", CPUMAP, 4, 4, 257, mf::RDONLY, -22),
            ("xskmap ok", XSKMAP, 4, 4, 4, 0, 0),
            ("xskmap vs8", XSKMAP, 4, 8, 4, 0, -22),
            ("xskmap ks8", XSKMAP, 8, 4, 4, 0, -22),
            ("xskmap me0", XSKMAP, 4, 4, 0, 0, -22),
            ("xskmap RDONLY", XSKMAP, 4, 4, 4, mf::RDONLY, 0),
            ("xskmap WRONLY", XSKMAP, 4, 4, 4, mf::WRONLY, 0),
            ("xskmap RDONLY|WRONLY", XSKMAP, 4, 4, 4, mf::RDONLY | mf::WRONLY, -22),
            ("xskmap RDONLY_PROG", XSKMAP, 4, 4, 4, mf::RDONLY_PROG, -22),
            ("xskmap NUMA", XSKMAP, 4, 4, 4, mf::NUMA_NODE, 0),
            ("ringbuf 4096", RINGBUF, 0, 0, 4096, 0, 0),
            ("ringbuf 8192", RINGBUF, 0, 0, 8192, 0, 0),
            ("ringbuf 2048", RINGBUF, 0, 0, 2048, 0, -22),
            ("ringbuf 12288", RINGBUF, 0, 0, 12288, 0, -22),
            ("ringbuf 0", RINGBUF, 0, 0, 0, 0, -22),
            ("ringbuf ks4", RINGBUF, 4, 0, 4096, 0, -22),
            ("ringbuf vs4", RINGBUF, 0, 4, 4096, 0, -22),
            ("ringbuf NUMA", RINGBUF, 0, 0, 4096, mf::NUMA_NODE, 0),
            ("ringbuf RDONLY", RINGBUF, 0, 0, 4096, mf::RDONLY, -22),
            ("ringbuf WRONLY", RINGBUF, 0, 0, 4096, mf::WRONLY, -22),
            ("ringbuf RDONLY_PROG", RINGBUF, 0, 0, 4096, mf::RDONLY_PROG, -22),
            ("ringbuf MMAPABLE", RINGBUF, 0, 0, 4096, mf::MMAPABLE, -22),
            ("ringbuf NO_PREALLOC", RINGBUF, 0, 0, 4096, mf::NO_PREALLOC, -22),
            ("ringbuf bit 16", RINGBUF, 0, 0, 4096, 1 << 16, -22),
            ("array_of_maps no template", ARRAY_OF_MAPS, 4, 4, 4, 0, -22),
            ("hash_of_maps no template", HASH_OF_MAPS, 4, 4, 4, 0, -22),
        ];
        for &(what, t, k, v, n, f, want) in rows {
            assert_eq!(errno(t, k, v, n, f), want, "{what}");
        }
    }

    fn outer_errno(t: u32, k: u32, v: u32, n: u32, f: u32, template: Option<&MapDef>) -> i64 {
        match check_outer(&MapDef::new("o", t, k, v, n, f), template, 2) {
            Ok(_) => 0,
            Err(e) => e.errno(),
        }
    }

    /// Each row was measured with `bpf(BPF_MAP_CREATE)` on Linux 6.18, the template an
    /// `ARRAY(4, 4, 1)` (or no inner map fd: fd 0, not a map).
    #[test]
    fn outer_creation_errnos_match_the_kernel() {
        use mt::*;
        let t = MapDef::new("t", ARRAY, 4, 4, 1, 0);
        // (what, type, key_size, value_size, max_entries, flags, with template, errno)
        type Row = (&'static str, u32, u32, u32, u32, u32, bool, i64);
        let rows: &[Row] = &[
            ("aom ok", ARRAY_OF_MAPS, 4, 4, 4, 0, true, 0),
            ("aom no inner", ARRAY_OF_MAPS, 4, 4, 4, 0, false, -22),
            ("aom vs8", ARRAY_OF_MAPS, 4, 8, 4, 0, true, -22),
            ("aom ks8", ARRAY_OF_MAPS, 8, 4, 4, 0, true, -22),
            ("aom me0", ARRAY_OF_MAPS, 4, 4, 0, 0, true, -22),
            ("aom RDONLY", ARRAY_OF_MAPS, 4, 4, 4, mf::RDONLY, true, 0),
            ("aom WRONLY", ARRAY_OF_MAPS, 4, 4, 4, mf::WRONLY, true, 0),
            ("aom RDONLY_PROG", ARRAY_OF_MAPS, 4, 4, 4, mf::RDONLY_PROG, true, -22),
            ("aom WRONLY_PROG", ARRAY_OF_MAPS, 4, 4, 4, mf::WRONLY_PROG, true, -22),
            ("aom NUMA", ARRAY_OF_MAPS, 4, 4, 4, mf::NUMA_NODE, true, 0),
            ("aom MMAPABLE", ARRAY_OF_MAPS, 4, 4, 4, mf::MMAPABLE, true, -22),
            ("aom INNER_MAP", ARRAY_OF_MAPS, 4, 4, 4, mf::INNER_MAP, true, -22),
            ("aom NO_PREALLOC", ARRAY_OF_MAPS, 4, 4, 4, mf::NO_PREALLOC, true, -22),
            ("hom ok", HASH_OF_MAPS, 4, 4, 4, 0, true, 0),
            ("hom ks8", HASH_OF_MAPS, 8, 4, 4, 0, true, 0),
            ("hom ks0", HASH_OF_MAPS, 0, 4, 4, 0, true, -22),
            ("hom vs8", HASH_OF_MAPS, 4, 8, 4, 0, true, -22),
            ("hom me0", HASH_OF_MAPS, 4, 4, 0, 0, true, -22),
            ("hom no inner", HASH_OF_MAPS, 4, 4, 4, 0, false, -22),
            ("hom RDONLY_PROG", HASH_OF_MAPS, 4, 4, 4, mf::RDONLY_PROG, true, 0),
            ("hom WRONLY_PROG", HASH_OF_MAPS, 4, 4, 4, mf::WRONLY_PROG, true, 0),
            ("hom NO_PREALLOC", HASH_OF_MAPS, 4, 4, 4, mf::NO_PREALLOC, true, 0),
            ("hom ZERO_SEED", HASH_OF_MAPS, 4, 4, 4, mf::ZERO_SEED, true, 0),
            ("hom NO_COMMON_LRU", HASH_OF_MAPS, 4, 4, 4, mf::NO_COMMON_LRU, true, -22),
            ("hom INNER_MAP", HASH_OF_MAPS, 4, 4, 4, mf::INNER_MAP, true, -22),
            ("hom RDONLY", HASH_OF_MAPS, 4, 4, 4, mf::RDONLY, true, 0),
            ("hom me 2^27+1", HASH_OF_MAPS, 4, 4, (1 << 27) + 1, 1, true, -7),
        ];
        for &(what, ty, k, v, n, f, with, want) in rows {
            assert_eq!(outer_errno(ty, k, v, n, f, with.then_some(&t)), want, "{what}");
        }
        // The template is checked after the outer map's attributes and before its
        // entry limit (measured with a program-array template: ENOTSUPP).
        let pa = MapDef::new("pa", PROG_ARRAY, 4, 4, 4, 0);
        assert_eq!(outer_errno(HASH_OF_MAPS, 4, 4, (1 << 27) + 1, 1, Some(&pa)), -524);
        assert_eq!(outer_errno(HASH_OF_MAPS, 4, 8, 4, 0, Some(&pa)), -22);
        assert_eq!(outer_errno(ARRAY_OF_MAPS, 4, 4, 4, 0, Some(&pa)), -524);
        let nested = MapDef::new("n", ARRAY_OF_MAPS, 4, 4, 4, 0);
        assert_eq!(outer_errno(ARRAY_OF_MAPS, 4, 4, 4, 0, Some(&nested)), -22);
        assert_eq!(outer_errno(HASH, 4, 4, 4, 0, Some(&t)), -22, "not a map-in-map");
        let bad = MapDef::new("bad", HASH, 0, 4, 4, 0);
        let e = check_outer(&MapDef::new("o", ARRAY_OF_MAPS, 4, 4, 4, 0), Some(&bad), 2);
        assert!(matches!(e, Err(MapError::KeySize { ref map, .. }) if &**map == "bad"));
        // Measured: every map type spine has may be an inner map.
        for inner in [
            MapDef::new("i", HASH, 4, 4, 4, 0),
            MapDef::new("i", PERCPU_ARRAY, 4, 4, 4, 0),
            MapDef::new("i", PERCPU_HASH, 4, 4, 4, 0),
            MapDef::new("i", LRU_HASH, 4, 4, 4, 0),
            MapDef::new("i", LRU_PERCPU_HASH, 4, 4, 4, 0),
            MapDef::new("i", LPM_TRIE, 8, 4, 4, mf::NO_PREALLOC),
            MapDef::new("i", DEVMAP, 4, 4, 4, 0),
            MapDef::new("i", DEVMAP_HASH, 4, 4, 4, 0),
            MapDef::new("i", CPUMAP, 4, 4, 4, 0),
            MapDef::new("i", RINGBUF, 0, 0, 4096, 0),
        ] {
            assert_eq!(outer_errno(ARRAY_OF_MAPS, 4, 4, 2, 0, Some(&inner)), 0, "{inner:?}");
            assert_eq!(outer_errno(HASH_OF_MAPS, 4, 4, 2, 0, Some(&inner)), 0, "{inner:?}");
        }
        let dm = check_outer(
            &MapDef::new("o", ARRAY_OF_MAPS, 4, 4, 2, 0),
            Some(&MapDef::new("i", DEVMAP, 4, 4, 4, 0)),
            2,
        )
        .unwrap();
        assert_eq!(dm.template.flags, mf::RDONLY_PROG, "the template as the kernel keeps it");
    }

    #[test]
    fn devmaps_gain_rdonly_prog() {
        let (_, d) = check(&MapDef::new("d", mt::DEVMAP, 4, 4, 4, mf::NUMA_NODE), 2).unwrap();
        assert_eq!(d.flags, mf::NUMA_NODE | mf::RDONLY_PROG, "measured: info.flags 0x84");
        let (_, c) = check(&MapDef::new("c", mt::CPUMAP, 4, 4, 4, 0), 2).unwrap();
        assert_eq!(c.flags, 0, "measured: a cpumap's flags stay as given");
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
