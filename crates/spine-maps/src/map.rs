//! [`Map`]: one map instance, shared by every worker (program side) and the control
//! plane (user side, `bpf(2)` semantics).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering::*};

use spine_abi::map_flags as mf;
use spine_abi::update_flags::LOCK;

use crate::array::ArrayMap;
use crate::def::{self, check_budget, round8, MapDef, MapOptions, Plan};
use crate::error::ReadOnlyReason;
use crate::hash::{HashTab, Side};
use crate::lpm::LpmTrie;
use crate::storage::Arena;
use crate::MapError;

/// A byte range of value memory that programs may touch through the pointers a map
/// hands out. `writable` is false for `BPF_F_RDONLY_PROG` maps and `readable` false for
/// `BPF_F_WRONLY_PROG` maps (the kernel's verifier enforces both at load time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValueSpan {
    pub start: u64,
    pub len: u64,
    pub writable: bool,
    pub readable: bool,
}

impl ValueSpan {
    /// True if `[addr, addr + len)` lies inside the span.
    pub fn contains(&self, addr: u64, len: u64) -> bool {
        addr >= self.start && len <= self.len && addr - self.start <= self.len - len
    }
}

/// Where an array's values live, so a JIT can inline `bpf_map_lookup_elem`:
/// element `i` of CPU `c` is at `base + c * cpu_stride + i * elem_stride`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArrayLayout {
    pub base: u64,
    /// `round_up(value_size, 8)`.
    pub elem_stride: u64,
    /// Distance between two CPUs' copies of an element; `None` for a plain array.
    pub cpu_stride: Option<u64>,
    pub max_entries: u32,
}

#[derive(Debug)]
enum Inner {
    Array(ArrayMap),
    Hash(HashTab),
    Lpm(LpmTrie),
}

/// A map with kernel semantics. `Send + Sync`: share it with `Arc`.
///
/// Program-side operations (`lookup`, `update`, `delete`) may run concurrently on every
/// worker; `cpu` is the calling worker's index (below `ncpus`), and two threads should
/// not use the same `cpu` at once (as two programs never run on one kernel CPU at once;
/// if they do, nothing breaks, but a full hash map may refuse a replacing update).
/// They never allocate; lookups take no lock, hash updates take one bucket's lock, LPM
/// updates the trie's lock, as in the kernel.
///
/// Programs read and write values through raw pointers, racing with each other and
/// with user-side copies exactly as kernel programs do; use atomics or per-CPU maps
/// for consistent counters, as in the kernel.
#[derive(Debug)]
pub struct Map {
    def: MapDef,
    ncpus: usize,
    frozen: AtomicBool,
    spans: Box<[ValueSpan]>,
    inner: Inner,
}

impl Map {
    /// Creates a map, failing as `BPF_MAP_CREATE` would (see [`MapDef`] for the
    /// limits), or with `TooLarge` past `opts.max_bytes`.
    pub fn create(def: MapDef, opts: &MapOptions) -> Result<Map, MapError> {
        let (plan, def) = def::check(&def, opts.ncpus)?;
        let ncpus = opts.ncpus;
        let overflow =
            || MapError::TooLarge { map: def.name.clone(), bytes: u64::MAX, limit: opts.max_bytes };
        let inner = match plan {
            Plan::Array { percpu } => {
                check_budget(&def, ArrayMap::bytes(&def, percpu, ncpus), opts.max_bytes)?;
                Inner::Array(ArrayMap::new(&def, percpu, ncpus)?)
            }
            Plan::Hash { percpu, lru } => {
                let bytes =
                    HashTab::bytes(&def, percpu, lru.is_some(), ncpus).ok_or_else(overflow)?;
                check_budget(&def, bytes, opts.max_bytes)?;
                Inner::Hash(HashTab::new(&def, percpu, lru, ncpus, opts.seed)?)
            }
            Plan::Lpm => {
                check_budget(&def, LpmTrie::bytes(&def).ok_or_else(overflow)?, opts.max_bytes)?;
                Inner::Lpm(LpmTrie::new(&def)?)
            }
        };
        let arena: &Arena = match &inner {
            Inner::Array(a) => a.values(),
            Inner::Hash(h) => h.values(),
            Inner::Lpm(t) => t.values(),
        };
        let span = ValueSpan {
            start: arena.base().as_ptr() as u64,
            len: arena.len() as u64,
            writable: def.flags & mf::RDONLY_PROG == 0,
            readable: def.flags & mf::WRONLY_PROG == 0,
        };
        Ok(Map { def, ncpus, frozen: AtomicBool::new(false), spans: Box::new([span]), inner })
    }

    /// The definition as the kernel keeps it (a per-CPU LRU's `max_entries` is rounded
    /// up to a multiple of the CPU count).
    pub fn def(&self) -> &MapDef {
        &self.def
    }

    pub fn ncpus(&self) -> usize {
        self.ncpus
    }

    fn name(&self) -> std::sync::Arc<str> {
        self.def.name.clone()
    }

    fn is_percpu(&self) -> bool {
        spine_abi::map_type::is_percpu(self.def.map_type)
    }

    fn check_key(&self, key: &[u8]) -> Result<(), MapError> {
        if key.len() != self.def.key_size as usize {
            return Err(MapError::KeyLen {
                map: self.name(),
                len: key.len(),
                expected: self.def.key_size,
            });
        }
        Ok(())
    }

    fn check_len(&self, len: usize, expected: usize) -> Result<(), MapError> {
        if len != expected {
            return Err(MapError::ValueLen { map: self.name(), len, expected });
        }
        Ok(())
    }

    fn check_prog_write(&self, key: &[u8], cpu: usize) -> Result<(), MapError> {
        if cpu >= self.ncpus {
            return Err(MapError::CpuOutOfRange { map: self.name(), cpu, ncpus: self.ncpus });
        }
        self.check_key(key)?;
        if self.def.flags & mf::RDONLY_PROG != 0 {
            return Err(MapError::ReadOnly { map: self.name(), why: ReadOnlyReason::RdonlyProg });
        }
        Ok(())
    }

    // ---- program side (helpers) ----

    /// `bpf_map_lookup_elem`: the value (this CPU's copy for a per-CPU map), or `None`
    /// (also for a key of the wrong length or `cpu >= ncpus`). The pointer is 8-byte
    /// aligned and inside [`Map::value_spans`] for the map's lifetime. For a per-CPU map
    /// this is also `bpf_map_lookup_percpu_elem` with `cpu` the CPU asked for.
    pub fn lookup(&self, key: &[u8], cpu: usize) -> Option<NonNull<u8>> {
        if cpu >= self.ncpus || key.len() != self.def.key_size as usize {
            return None;
        }
        match &self.inner {
            Inner::Array(a) => a.lookup(key, cpu),
            Inner::Hash(h) => h.lookup(key, cpu),
            Inner::Lpm(t) => t.lookup(key),
        }
    }

    /// `bpf_map_update_elem` from a program: `value` is `value_size` bytes; a per-CPU
    /// map's update writes only this CPU's copy (a new per-CPU hash element gets zeros
    /// on the other CPUs). `BPF_F_RDONLY_PROG` maps refuse with `EPERM`.
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64, cpu: usize) -> Result<(), MapError> {
        self.check_prog_write(key, cpu)?;
        self.check_len(value.len(), self.def.value_size as usize)?;
        match &self.inner {
            Inner::Array(a) => a.update(key, value, flags, cpu),
            Inner::Hash(h) => h.update(key, value, flags, Side::Prog(cpu)),
            Inner::Lpm(t) => t.update(key, value, flags),
        }
    }

    /// `bpf_map_delete_elem` from a program (arrays: `EINVAL`).
    pub fn delete(&self, key: &[u8], cpu: usize) -> Result<(), MapError> {
        self.check_prog_write(key, cpu)?;
        match &self.inner {
            Inner::Array(a) => a.delete(),
            Inner::Hash(h) => h.delete(key, Side::Prog(cpu)),
            Inner::Lpm(t) => t.delete(key),
        }
    }

    // ---- user side (bpf(2)) ----

    /// `value_size`, or `ncpus * round_up(value_size, 8)` for per-CPU maps (all CPUs'
    /// copies, as `bpf(2)` exchanges them).
    pub fn user_value_size(&self) -> usize {
        if self.is_percpu() {
            self.ncpus * round8(self.def.value_size as u64) as usize
        } else {
            self.def.value_size as usize
        }
    }

    fn check_user_write(&self) -> Result<(), MapError> {
        let why = if self.frozen.load(Acquire) {
            ReadOnlyReason::Frozen
        } else if self.def.flags & mf::RDONLY != 0 {
            ReadOnlyReason::RdonlyMap
        } else {
            return Ok(());
        };
        Err(MapError::ReadOnly { map: self.name(), why })
    }

    fn check_user_read(&self) -> Result<(), MapError> {
        if self.def.flags & mf::WRONLY != 0 {
            return Err(MapError::WriteOnly { map: self.name() });
        }
        Ok(())
    }

    /// `BPF_MAP_LOOKUP_ELEM`: copies the value (every CPU's, padded, for per-CPU maps)
    /// into `out`, which must be [`Map::user_value_size`] bytes. Does not count as a use
    /// for LRU maps, as in the kernel.
    pub fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        self.check_user_read()?;
        self.check_key(key)?;
        self.check_len(out.len(), self.user_value_size())?;
        match &self.inner {
            Inner::Array(a) => a.lookup_user(key, out),
            Inner::Hash(h) => h.lookup_user(key, out),
            Inner::Lpm(t) => t.lookup_user(key, out),
        }
    }

    /// `BPF_MAP_UPDATE_ELEM`: `value` is [`Map::user_value_size`] bytes (each CPU's
    /// padded copy for a per-CPU map). `EPERM` once frozen or for a `BPF_F_RDONLY` map;
    /// `BPF_F_LOCK` is `EINVAL` (no map value holds a `bpf_spin_lock` yet).
    pub fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_user_write()?;
        if flags & LOCK != 0 {
            return Err(MapError::NoSpinLock { map: self.name() });
        }
        self.check_key(key)?;
        self.check_len(value.len(), self.user_value_size())?;
        match &self.inner {
            Inner::Array(a) => a.update_user(key, value, flags),
            Inner::Hash(h) => h.update(key, value, flags, Side::User),
            Inner::Lpm(t) => t.update(key, value, flags),
        }
    }

    /// `BPF_MAP_DELETE_ELEM` (`EPERM` once frozen; arrays: `EINVAL`).
    pub fn delete_user(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_user_write()?;
        self.check_key(key)?;
        match &self.inner {
            Inner::Array(a) => a.delete(),
            Inner::Hash(h) => h.delete(key, Side::User),
            Inner::Lpm(t) => t.delete(key),
        }
    }

    /// `BPF_MAP_GET_NEXT_KEY`: the first key when `key` is `None` or not in the map
    /// (arrays: out of range), `NotFound` after the last. Order: arrays by index, hash
    /// maps by bucket (with `BPF_F_ZERO_SEED`, the kernel's order), LPM tries in
    /// post-order as the kernel. `out` must be `key_size` bytes.
    pub fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        self.check_user_read()?;
        if let Some(k) = key {
            self.check_key(k)?;
        }
        self.check_len(out.len(), self.def.key_size as usize)?;
        match &self.inner {
            Inner::Array(a) => a.next_key(key, out),
            Inner::Hash(h) => h.next_key(key, out),
            Inner::Lpm(t) => t.next_key(key, out),
        }
    }

    /// `BPF_MAP_FREEZE`: user-side writes fail with `EPERM` from now on; programs are
    /// unaffected. Idempotent (see [`Map::try_freeze`] for the kernel's errors).
    pub fn freeze(&self) {
        self.frozen.store(true, Release);
    }

    /// `BPF_MAP_FREEZE` with the kernel's errors: `EPERM` if already frozen or created
    /// with `BPF_F_RDONLY` (both mean the caller may not write).
    pub fn try_freeze(&self) -> Result<(), MapError> {
        self.check_user_write()?;
        self.freeze();
        Ok(())
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen.load(Acquire)
    }

    /// Sets the single value of a global-data array (`.data`, `.rodata`, `.bss`) to
    /// `bytes` followed by zeros, as libbpf does before freezing `.rodata`. Works on
    /// `BPF_F_RDONLY_PROG` maps; fails once frozen.
    pub fn write_initial(&self, bytes: &[u8]) -> Result<(), MapError> {
        if self.is_frozen() {
            return Err(MapError::ReadOnly { map: self.name(), why: ReadOnlyReason::Frozen });
        }
        match &self.inner {
            Inner::Array(a) => a.write_initial(bytes),
            _ => Err(MapError::InitialNotArray { map: self.name() }),
        }
    }

    /// Every byte range of value memory a program may reach through pointers this map
    /// returns.
    pub fn value_spans(&self) -> &[ValueSpan] {
        &self.spans
    }

    /// For array and per-CPU array maps, where element `i` lives (for inlined lookups).
    pub fn array_layout(&self) -> Option<ArrayLayout> {
        match &self.inner {
            Inner::Array(a) => Some(ArrayLayout {
                base: a.values().base().as_ptr() as u64,
                elem_stride: a.stride() as u64,
                cpu_stride: a.cpu_stride().map(|s| s as u64),
                max_entries: self.def.max_entries,
            }),
            _ => None,
        }
    }

    /// Number of entries: `max_entries` for arrays; for hash maps a walk of every
    /// bucket (slow path, exact only while nobody writes).
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Array(_) => self.def.max_entries as usize,
            Inner::Hash(h) => h.len(),
            Inner::Lpm(t) => t.len(),
        }
    }

    /// True if the map holds no entry (never for arrays).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arena and offset a program pointer refers to; panics if it lies outside
    /// the map's value spans.
    #[cfg(test)]
    fn resolve(&self, p: NonNull<u8>, len: usize) -> (&Arena, usize) {
        let addr = p.as_ptr() as u64;
        assert!(self.spans.iter().any(|s| s.contains(addr, len as u64)), "pointer outside spans");
        let arena = match &self.inner {
            Inner::Array(a) => a.values(),
            Inner::Hash(h) => h.values(),
            Inner::Lpm(t) => t.values(),
        };
        (arena, (addr - arena.base().as_ptr() as u64) as usize)
    }

    /// Reads `len` bytes through a pointer this map returned (single-threaded tests).
    #[cfg(test)]
    pub(crate) fn peek(&self, p: NonNull<u8>, len: usize) -> Vec<u8> {
        let (a, off) = self.resolve(p, len);
        a.peek(off, len)
    }

    /// A program's 8-byte load through a pointer this map returned.
    #[cfg(test)]
    pub(crate) fn load_u64(&self, p: NonNull<u8>) -> u64 {
        let (a, off) = self.resolve(p, 8);
        a.load_u64(off)
    }

    /// A program's 8-byte store through a pointer this map returned.
    #[cfg(test)]
    pub(crate) fn store_u64(&self, p: NonNull<u8>, v: u64) {
        let (a, off) = self.resolve(p, 8);
        a.store_u64(off, v)
    }

    /// Checks a hash map's internal bookkeeping (tests only; nothing may run
    /// concurrently) and returns its element count.
    #[cfg(test)]
    pub(crate) fn check_consistency(&self) -> usize {
        match &self.inner {
            Inner::Hash(h) => h.check_consistency(),
            _ => self.len(),
        }
    }
}
