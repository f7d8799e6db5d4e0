//! [`Map`]: one map instance, shared by every worker (program side) and the control
//! plane (user side, `bpf(2)` semantics).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::*};
use std::sync::Arc;

use spine_abi::map_flags as mf;
use spine_abi::update_flags::LOCK;

use crate::array::ArrayMap;
use crate::bloom::Bloom;
use crate::cpumap::CpuMap;
use crate::def::{self, check_budget, round8, MapDef, MapOptions, Plan};
use crate::devmap::{DevMap, DevMapHash};
use crate::error::{ProgOp, ReadOnlyReason};
use crate::hash::{HashTab, KeyHash, Side};
use crate::lpm::LpmTrie;
use crate::outer::{InnerRef, OuterMap};
use crate::perf::PerfEventArray;
use crate::queue::QueueStack;
use crate::ringbuf::RingBuf;
use crate::storage::Arena;
use crate::timer::Timers;
use crate::xskmap::XskMap;
use crate::MapError;

/// Source of [`Map::id`]s.
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

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
    DevMap(DevMap),
    DevMapHash(DevMapHash),
    CpuMap(CpuMap),
    XskMap(XskMap),
    RingBuf(RingBuf),
    Perf(PerfEventArray),
    Outer(OuterMap),
    Queue(QueueStack),
    Bloom(Bloom),
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
    id: u32,
    ncpus: usize,
    /// Storage the map reserved at creation (what a memory quota is charged).
    bytes: u64,
    frozen: AtomicBool,
    spans: Box<[ValueSpan]>,
    inner: Inner,
}

impl Map {
    /// Creates a map, failing as `BPF_MAP_CREATE` would (see [`MapDef`] for the
    /// limits), or with `TooLarge` past `opts.max_bytes`. A map-in-map needs
    /// [`Map::create_outer`] (here: `NoInnerTemplate`).
    pub fn create(def: MapDef, opts: &MapOptions) -> Result<Map, MapError> {
        let (plan, def) = def::check(&def, opts.ncpus)?;
        Self::build(plan, def, None, opts)
    }

    /// Creates an `ARRAY_OF_MAPS` or `HASH_OF_MAPS` whose inner maps must match
    /// `inner_template` (the kernel's `inner_map_fd`, given as a definition: it is
    /// checked as a map of its own would be, and may not be a map-in-map or a program
    /// array). `NotOuter` for any other type.
    pub fn create_outer(
        def: MapDef,
        inner_template: &MapDef,
        opts: &MapOptions,
    ) -> Result<Map, MapError> {
        let c = def::check_outer(&def, Some(inner_template), opts.ncpus)?;
        Self::build(c.plan, c.def, Some(c.template), opts)
    }

    fn build(
        plan: Plan,
        def: MapDef,
        template: Option<MapDef>,
        opts: &MapOptions,
    ) -> Result<Map, MapError> {
        let ncpus = opts.ncpus;
        let overflow =
            || MapError::TooLarge { map: def.name.clone(), bytes: u64::MAX, limit: opts.max_bytes };
        let budget = |bytes: u128| check_budget(&def, bytes, opts.max_bytes).map(|()| bytes);
        let seed = KeyHash::Jhash { seed: opts.seed };
        let (inner, bytes) = match plan {
            Plan::Array { percpu } => {
                let bytes = budget(ArrayMap::bytes(&def, percpu, ncpus))?;
                (Inner::Array(ArrayMap::new(&def, percpu, ncpus)?), bytes)
            }
            Plan::Hash { percpu, lru } => {
                let bytes = HashTab::bytes(&def, percpu, lru.is_some(), ncpus);
                let bytes = budget(bytes.ok_or_else(overflow)?)?;
                (Inner::Hash(HashTab::new(&def, percpu, lru, ncpus, seed)?), bytes)
            }
            Plan::Lpm => {
                let bytes = budget(LpmTrie::bytes(&def).ok_or_else(overflow)?)?;
                (Inner::Lpm(LpmTrie::new(&def, opts.lpm_index_at)?), bytes)
            }
            Plan::DevMap { hash: false } => {
                let bytes = budget(DevMap::bytes(&def))?;
                (Inner::DevMap(DevMap::new(&def)?), bytes)
            }
            Plan::DevMap { hash: true } => {
                let bytes = budget(DevMapHash::bytes(&def, ncpus).ok_or_else(overflow)?)?;
                (Inner::DevMapHash(DevMapHash::new(&def, ncpus)?), bytes)
            }
            Plan::XskMap => {
                let bytes = budget(XskMap::bytes(&def))?;
                (Inner::XskMap(XskMap::new(&def)?), bytes)
            }
            Plan::CpuMap => {
                let bytes = budget(CpuMap::bytes(&def))?;
                (Inner::CpuMap(CpuMap::new(&def, ncpus)?), bytes)
            }
            Plan::RingBuf => {
                let bytes = budget(RingBuf::bytes(&def))?;
                (Inner::RingBuf(RingBuf::new(&def)?), bytes)
            }
            Plan::Perf => {
                let bytes = budget(PerfEventArray::bytes(&def))?;
                (Inner::Perf(PerfEventArray::new(&def)), bytes)
            }
            Plan::Outer { hash } => {
                let template =
                    template.ok_or_else(|| MapError::NoInnerTemplate { map: def.name.clone() })?;
                let bytes = budget(OuterMap::bytes(&def, hash, ncpus).ok_or_else(overflow)?)?;
                (Inner::Outer(OuterMap::new(&def, template, hash, ncpus, opts.seed)?), bytes)
            }
            Plan::Queue { stack } => {
                let bytes = budget(QueueStack::bytes(&def))?;
                (Inner::Queue(QueueStack::new(&def, stack)?), bytes)
            }
            Plan::Bloom => {
                let bytes = budget(Bloom::bytes(&def))?;
                (Inner::Bloom(Bloom::new(&def, opts.seed)?), bytes)
            }
        };
        let readable = def.flags & mf::WRONLY_PROG == 0;
        let span = |arena: &Arena, writable: bool| ValueSpan {
            start: arena.base().as_ptr() as u64,
            len: arena.len() as u64,
            writable: writable && def.flags & mf::RDONLY_PROG == 0,
            readable,
        };
        let spans: Box<[ValueSpan]> = match &inner {
            Inner::Array(a) => Box::new([span(a.values(), true)]),
            Inner::Hash(h) => Box::new([span(h.values(), true)]),
            Inner::Lpm(t) => Box::new([span(t.values(), true)]),
            Inner::DevMap(d) => Box::new([span(d.entries().values(), false)]),
            Inner::DevMapHash(d) => Box::new([span(d.values(), false)]),
            // Programs never get a cpumap value from the kernel; the runtime's redirect
            // reads it, so it is covered, read-only.
            Inner::CpuMap(c) => Box::new([span(c.entries().values(), false)]),
            Inner::XskMap(c) => Box::new([span(c.entries().values(), false)]),
            Inner::RingBuf(r) => Box::new([span(r.data(), true)]),
            // Programs never see a perf slot's memory: the helper writes it.
            Inner::Perf(_) => Box::new([]),
            // Inner-map handles are opaque to programs, as kernel map pointers are.
            Inner::Outer(_) => Box::new([]),
            // Elements are copied in and out by the helpers; a bloom filter's bits are
            // only read and set by them.
            Inner::Queue(_) | Inner::Bloom(_) => Box::new([]),
        };
        // check_budget bounded `bytes` by `max_bytes`, a u64.
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        Ok(Map {
            def,
            id: NEXT_ID.fetch_add(1, Relaxed),
            ncpus,
            bytes,
            frozen: AtomicBool::new(false),
            spans,
            inner,
        })
    }

    /// The definition as the kernel keeps it (a per-CPU LRU's `max_entries` is rounded
    /// up to a multiple of the CPU count).
    pub fn def(&self) -> &MapDef {
        &self.def
    }

    /// Bytes of storage reserved at creation: what memory quotas are charged.
    pub fn storage_bytes(&self) -> u64 {
        self.bytes
    }

    /// A process-unique id (the kernel's map id, which is what user space reads from a
    /// map-in-map slot).
    pub fn id(&self) -> u32 {
        self.id
    }

    pub fn ncpus(&self) -> usize {
        self.ncpus
    }

    fn name(&self) -> Arc<str> {
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

    /// The `bpf_timer`s of the map's values, if its values hold one.
    pub fn timers(&self) -> Option<&Timers> {
        match &self.inner {
            Inner::Array(a) => a.timers(),
            Inner::Hash(h) => h.timers(),
            _ => None,
        }
    }

    /// The element whose value holds its `bpf_timer` at address `addr` (what a program
    /// passes the timer helpers), if one does.
    pub fn timer_elem(&self, addr: u64) -> Option<u32> {
        let value = addr.checked_sub(u64::from(self.def.timer?))?;
        let (arena, elem_at): (&Arena, &dyn Fn(usize) -> Option<u32>) = match &self.inner {
            Inner::Array(a) => (a.values(), &|o| a.elem_at(o)),
            Inner::Hash(h) => (h.values(), &|o| h.elem_at(o)),
            _ => return None,
        };
        let off = value.checked_sub(arena.base().as_ptr() as u64)?;
        if off >= arena.len() as u64 {
            return None;
        }
        elem_at(usize::try_from(off).ok()?)
    }

    /// The value of element `elem` (a slot of [`Map::timers`]) with its key written to
    /// `key` (`key_size` bytes): what a timer callback is called with.
    pub fn timer_target(&self, elem: u32, key: &mut [u8]) -> Option<NonNull<u8>> {
        match &self.inner {
            Inner::Array(a) => a.elem(elem, key),
            Inner::Hash(h) => h.elem(elem, key),
            _ => None,
        }
    }

    // ---- program side (helpers) ----

    /// `bpf_map_lookup_elem`: the value (this CPU's copy for a per-CPU map), or `None`
    /// (also for a key of the wrong length or `cpu >= ncpus`). The pointer is 8-byte
    /// aligned and inside [`Map::value_spans`] for the map's lifetime. For a per-CPU map
    /// this is also `bpf_map_lookup_percpu_elem` with `cpu` the CPU asked for.
    ///
    /// A devmap's or cpumap's value starts with the ifindex or qsize (`bpf_redirect_map`
    /// reads it; the kernel's verifier refuses this helper on a cpumap). A map-in-map
    /// returns the inner map's opaque handle, outside every value span (see
    /// [`Map::lookup_inner`]). A ring buffer has no elements: `None`.
    pub fn lookup(&self, key: &[u8], cpu: usize) -> Option<NonNull<u8>> {
        if cpu >= self.ncpus || key.len() != self.def.key_size as usize {
            return None;
        }
        match &self.inner {
            Inner::Array(a) => a.lookup(key, cpu),
            Inner::Hash(h) => h.lookup(key, cpu),
            Inner::Lpm(t) => t.lookup(key),
            Inner::DevMap(d) => d.entries().lookup(key),
            Inner::DevMapHash(d) => d.lookup(key),
            Inner::CpuMap(c) => c.entries().lookup(key),
            Inner::XskMap(c) => c.entries().lookup(key),
            Inner::RingBuf(_) | Inner::Perf(_) | Inner::Queue(_) | Inner::Bloom(_) => None,
            Inner::Outer(o) => o.lookup(key),
        }
    }

    /// `bpf_map_update_elem` from a program: `value` is `value_size` bytes; a per-CPU
    /// map's update writes only this CPU's copy (a new per-CPU hash element gets zeros
    /// on the other CPUs). `BPF_F_RDONLY_PROG` maps (devmaps among them) refuse with
    /// `EPERM`; cpumaps, ring buffers and maps-in-maps with `NotFromProgram` (`EINVAL`),
    /// where the kernel's verifier refuses the program.
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64, cpu: usize) -> Result<(), MapError> {
        self.check_prog_write(key, cpu)?;
        self.check_len(value.len(), self.def.value_size as usize)?;
        match &self.inner {
            Inner::Array(a) => a.update(key, value, flags, cpu),
            Inner::Hash(h) => h.update(key, value, flags, Side::Prog(cpu)),
            Inner::Lpm(t) => t.update(key, value, flags),
            _ => Err(MapError::NotFromProgram { map: self.name(), op: ProgOp::Update }),
        }
    }

    /// `bpf_map_delete_elem` from a program (arrays: `EINVAL`; the types `update`
    /// refuses: as there).
    pub fn delete(&self, key: &[u8], cpu: usize) -> Result<(), MapError> {
        self.check_prog_write(key, cpu)?;
        match &self.inner {
            Inner::Array(a) => a.delete(),
            Inner::Hash(h) => h.delete(key, Side::Prog(cpu)),
            Inner::Lpm(t) => t.delete(key),
            _ => Err(MapError::NotFromProgram { map: self.name(), op: ProgOp::Delete }),
        }
    }

    /// The queue or stack, without building an error for other maps.
    #[inline]
    fn queue(&self) -> Option<&QueueStack> {
        match &self.inner {
            Inner::Queue(q) => Some(q),
            _ => None,
        }
    }

    /// `bpf_map_push_elem` from a program on a `QUEUE` or `STACK`: `value` is
    /// `value_size` bytes; flags `BPF_ANY`, or `BPF_EXIST` to drop the oldest element
    /// when full (anything else `EINVAL`); full without `BPF_EXIST` is `Full` (`E2BIG`).
    /// `BPF_F_RDONLY_PROG` maps refuse with `EPERM` (the kernel's verifier refuses the
    /// program); other map types with `NotFromProgram`.
    ///
    /// On a `BLOOM_FILTER` it adds `value` (flags other than `BPF_ANY`: `EINVAL`).
    pub fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        let (Inner::Queue(_) | Inner::Bloom(_)) = &self.inner else {
            return Err(MapError::NotFromProgram { map: self.name(), op: ProgOp::Push });
        };
        if self.def.flags & mf::RDONLY_PROG != 0 {
            return Err(MapError::ReadOnly { map: self.name(), why: ReadOnlyReason::RdonlyProg });
        }
        self.check_len(value.len(), self.def.value_size as usize)?;
        match &self.inner {
            Inner::Bloom(b) => b.push(value, flags),
            Inner::Queue(q) => q.push(value, flags),
            _ => Err(MapError::NotFromProgram { map: self.name(), op: ProgOp::Push }),
        }
    }

    /// `bpf_map_pop_elem` (`delete`) or `bpf_map_peek_elem` from a program: the oldest
    /// element of a queue, the newest of a stack, copied to `out` (`value_size` bytes);
    /// an empty map zeroes `out` and answers `NotFound` (`ENOENT`), as the kernel.
    /// A pop on a `BPF_F_RDONLY_PROG` map is `EPERM`; other map types `NotFromProgram`.
    ///
    /// A peek on a `BLOOM_FILTER` only reads `out`: `Ok` if the value may have been
    /// pushed, `NotFound` if it certainly was not (a pop: `NotFromProgram`).
    pub fn pop_or_peek(&self, out: &mut [u8], delete: bool) -> Result<(), MapError> {
        if let (Inner::Bloom(b), false) = (&self.inner, delete) {
            self.check_len(out.len(), self.def.value_size as usize)?;
            return b.peek(out);
        }
        let Some(q) = self.queue() else {
            let op = if delete { ProgOp::Pop } else { ProgOp::Peek };
            return Err(MapError::NotFromProgram { map: self.name(), op });
        };
        if delete && self.def.flags & mf::RDONLY_PROG != 0 {
            return Err(MapError::ReadOnly { map: self.name(), why: ReadOnlyReason::RdonlyProg });
        }
        self.check_len(out.len(), self.def.value_size as usize)?;
        q.get(out, delete)
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

    /// A user-space value from one CPU's `value`: a per-CPU map gets it in every CPU's
    /// slot, as `bpftool map update` writes one value to all; other maps (and values that
    /// already span every CPU) take it as it is.
    pub fn user_value_for_all_cpus(&self, value: &[u8]) -> Vec<u8> {
        let per = self.def.value_size as usize;
        if self.user_value_size() == per || value.len() != per {
            return value.to_vec();
        }
        let stride = round8(per as u64) as usize;
        let mut out = vec![0u8; self.user_value_size()];
        for c in out.chunks_mut(stride) {
            c[..per].copy_from_slice(value);
        }
        out
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
    /// for LRU maps, as in the kernel. A devmap's or cpumap's program id reads 0; a
    /// map-in-map gives the inner map's [`Map::id`]; a ring buffer `ENOTSUPP`.
    pub fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        self.lookup_user_flags(key, out, 0)
    }

    /// [`Map::lookup_user`] with `BPF_MAP_LOOKUP_ELEM`'s flags: `BPF_F_LOCK` copies the
    /// value under its `bpf_spin_lock` (`EINVAL` if the value has none, `EBUSY` if the
    /// lock stays taken for a second); any other flag is `EINVAL`.
    pub fn lookup_user_flags(
        &self,
        key: &[u8],
        out: &mut [u8],
        flags: u64,
    ) -> Result<(), MapError> {
        if flags & !LOCK != 0 {
            return Err(MapError::InvalidFlags { map: self.name(), flags });
        }
        let lock = flags & LOCK != 0;
        if lock && self.def.spin_lock.is_none() {
            return Err(MapError::NoSpinLock { map: self.name() });
        }
        self.check_user_read()?;
        self.check_key(key)?;
        self.check_len(out.len(), self.user_value_size())?;
        match &self.inner {
            Inner::Array(a) => a.lookup_user(key, out, lock),
            Inner::Hash(h) => h.lookup_user(key, out, lock),
            Inner::Lpm(t) => t.lookup_user(key, out),
            Inner::DevMap(d) => d.entries().lookup_user(key, out),
            Inner::DevMapHash(d) => d.lookup_user(key, out),
            Inner::CpuMap(c) => c.entries().lookup_user(key, out),
            Inner::XskMap(c) => c.lookup_user(key, out),
            Inner::RingBuf(_) => Err(MapError::NoElements { map: self.name() }),
            Inner::Perf(_) => Err(MapError::PerfSlotUnreadable { map: self.name() }),
            Inner::Outer(o) => o.lookup_user(key, out),
            // The kernel's `bpf_map_copy_value` peeks.
            Inner::Queue(q) => q.get(out, false),
            // The value is the question (the kernel copies it in): `ENOENT` if absent.
            Inner::Bloom(b) => b.peek(out),
        }
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM`, the kernel's `map_lookup_and_delete_elem` in
    /// its order: flags other than `BPF_F_LOCK` are `EINVAL`; `EPERM` unless user space
    /// may both read and write (frozen, `BPF_F_RDONLY` or `BPF_F_WRONLY` maps); then
    /// - a `QUEUE` or `STACK` pops the next element into `out` (`value_size` bytes;
    ///   `key` is empty); any flag `EINVAL`, an empty map `ENOENT`;
    /// - a hash map of any flavour (plain, per-CPU, LRU, LRU per-CPU) copies the value
    ///   of `key` into `out` ([`Map::user_value_size`] bytes: every CPU's for a per-CPU
    ///   map) and deletes the element; `BPF_F_LOCK` reads under the value's
    ///   `bpf_spin_lock` (`EINVAL` without one); a missing key `ENOENT`;
    /// - other map types are `PopUnsupported` (`ENOTSUPP`, as the kernel's).
    pub fn lookup_and_delete_user(
        &self,
        key: &[u8],
        out: &mut [u8],
        flags: u64,
    ) -> Result<(), MapError> {
        if flags & !LOCK != 0 {
            return Err(MapError::InvalidFlags { map: self.name(), flags });
        }
        self.check_user_read()?;
        self.check_user_write()?;
        if flags != 0 && self.queue().is_some() {
            return Err(MapError::InvalidFlags { map: self.name(), flags });
        }
        let lock = flags & LOCK != 0;
        if lock && self.def.spin_lock.is_none() {
            return Err(MapError::NoSpinLock { map: self.name() });
        }
        self.check_key(key)?;
        match &self.inner {
            Inner::Queue(q) => {
                self.check_len(out.len(), self.def.value_size as usize)?;
                q.get(out, true)
            }
            Inner::Hash(h) => {
                self.check_len(out.len(), self.user_value_size())?;
                h.lookup_and_delete_user(key, out, lock)
            }
            _ => Err(MapError::PopUnsupported { map: self.name() }),
        }
    }

    /// `BPF_MAP_UPDATE_ELEM`: `value` is [`Map::user_value_size`] bytes (each CPU's
    /// padded copy for a per-CPU map). `EPERM` once frozen or for a `BPF_F_RDONLY` map;
    /// `BPF_F_LOCK` is `EINVAL` unless the value holds a `bpf_spin_lock`. A ring
    /// buffer is `ENOTSUPP`; a map-in-map's value would be a map fd, which spine does
    /// not have: `InnerByFd` (`EBADF`), use [`Map::set_inner`].
    pub fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.check_user_write()?;
        if flags & LOCK != 0 && self.def.spin_lock.is_none() {
            return Err(MapError::NoSpinLock { map: self.name() });
        }
        self.check_key(key)?;
        self.check_len(value.len(), self.user_value_size())?;
        match &self.inner {
            Inner::Array(a) => a.update_user(key, value, flags),
            Inner::Hash(h) => h.update(key, value, flags, Side::User),
            Inner::Lpm(t) => t.update(key, value, flags),
            Inner::DevMap(d) => d.update_user(key, value, flags),
            Inner::DevMapHash(d) => d.update_user(key, value, flags),
            Inner::CpuMap(c) => c.update_user(key, value, flags),
            Inner::XskMap(c) => c.update_user(key, value, flags),
            Inner::RingBuf(_) => Err(MapError::NoElements { map: self.name() }),
            // The kernel's value is a perf event fd; here any value opens the slot.
            Inner::Perf(_) if flags != 0 => Err(MapError::InvalidFlags { map: self.name(), flags }),
            Inner::Perf(p) => p.open(u32::from_ne_bytes([key[0], key[1], key[2], key[3]])),
            Inner::Outer(_) => Err(MapError::InnerByFd { map: self.name() }),
            // The kernel's `bpf_map_update_value` pushes (the key is NULL).
            Inner::Queue(q) => q.push(value, flags),
            Inner::Bloom(b) => b.push(value, flags),
        }
    }

    /// Endpoint map (`SPINE_ENDPOINT`) or XSKMAP: binds slot `index` to endpoint `id`
    /// (control path: the adapter, when an application opens an endpoint on the slot;
    /// an XSKMAP slot holds the id marked with [`crate::XSK_ENDPOINT`]). `Exists` if
    /// the slot is taken, `IndexOutOfRange` past the end, `Unsupported` for any other
    /// map type.
    pub fn bind_endpoint(&self, index: u32, id: u32) -> Result<(), MapError> {
        match &self.inner {
            Inner::XskMap(x) => x.bind(index, id),
            _ => Err(MapError::Unsupported { map: self.name(), map_type: self.def.map_type }),
        }
    }

    /// Endpoint map or XSKMAP: empties slot `index` if it still holds endpoint `id`;
    /// whether it did.
    pub fn unbind_endpoint(&self, index: u32, id: u32) -> bool {
        match &self.inner {
            Inner::XskMap(x) => x.unbind(index, id),
            _ => false,
        }
    }

    /// `BPF_MAP_DELETE_ELEM` (`EPERM` once frozen; arrays: `EINVAL`; a devmap or cpumap
    /// slot: emptied, `EINVAL` out of range; an array_of_maps slot: `E2BIG` out of
    /// range, `ENOENT` if empty; a ring buffer: `ENOTSUPP`).
    pub fn delete_user(&self, key: &[u8]) -> Result<(), MapError> {
        self.check_user_write()?;
        self.check_key(key)?;
        match &self.inner {
            Inner::Array(a) => a.delete(),
            Inner::Hash(h) => h.delete(key, Side::User),
            Inner::Lpm(t) => t.delete(key),
            Inner::DevMap(d) => d.delete(key),
            Inner::DevMapHash(d) => d.delete(key),
            Inner::CpuMap(c) => c.delete(key),
            Inner::XskMap(c) => c.delete(key),
            Inner::RingBuf(_) => Err(MapError::NoElements { map: self.name() }),
            Inner::Perf(p) => p.close(u32::from_ne_bytes([key[0], key[1], key[2], key[3]])),
            Inner::Outer(o) => o.delete(key),
            Inner::Queue(_) => Err(MapError::NoKeys { map: self.name() }),
            Inner::Bloom(_) => Err(MapError::BloomNoKeys { map: self.name() }),
        }
    }

    /// `BPF_MAP_GET_NEXT_KEY`: the first key when `key` is `None` or not in the map
    /// (arrays: out of range), `NotFound` after the last. Order: arrays, devmaps,
    /// cpumaps and array_of_maps by index (empty slots included, as in the kernel), hash
    /// maps by bucket (with `BPF_F_ZERO_SEED`, the kernel's order; a devmap_hash's is
    /// always the kernel's), LPM tries in post-order as the kernel. `out` must be
    /// `key_size` bytes. A ring buffer: `ENOTSUPP`.
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
            Inner::DevMap(d) => d.entries().next_key(key, out),
            Inner::DevMapHash(d) => d.next_key(key, out),
            Inner::CpuMap(c) => c.entries().next_key(key, out),
            Inner::XskMap(c) => c.entries().next_key(key, out),
            Inner::RingBuf(_) => Err(MapError::NoElements { map: self.name() }),
            Inner::Perf(p) => p.next_key(key, out),
            Inner::Outer(o) => o.next_key(key, out),
            Inner::Queue(_) => Err(MapError::NoKeys { map: self.name() }),
            Inner::Bloom(_) => Err(MapError::BloomNoKeys { map: self.name() }),
        }
    }

    /// One step of `bpf_for_each_map_elem`'s walk, from a program on worker `cpu`: the
    /// next element from `cursor` on (`[0, 0]` to start), its key written to `key`
    /// (`key_size` bytes) and the address of its value (this CPU's for per-CPU maps)
    /// returned, or `None` after the last. Arrays walk every index, as the kernel's
    /// `bpf_for_each_array_elem`; hash maps (every flavour) by bucket, as
    /// `bpf_for_each_hash_elem`, without touching LRU state. Other types (which the
    /// kernel cannot walk) have no elements.
    pub fn walk_next(
        &self,
        cursor: &mut [u64; 2],
        key: &mut [u8],
        cpu: usize,
    ) -> Option<NonNull<u8>> {
        if cpu >= self.ncpus || key.len() < self.def.key_size as usize {
            return None;
        }
        match &self.inner {
            Inner::Array(a) => {
                let i = u32::try_from(cursor[0]).ok()?;
                let k = i.to_le_bytes();
                let v = a.lookup(&k, cpu)?;
                cursor[0] += 1;
                key[..4].copy_from_slice(&k);
                Some(v)
            }
            Inner::Hash(h) => h.walk_next(cursor, key, cpu),
            _ => None,
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

    // ---- ring buffers ----

    /// The ring buffer, for a `RINGBUF` map: the program side (`reserve`, `submit`,
    /// `discard`, `output`, `query`) and the consumer.
    pub fn ringbuf(&self) -> Option<&RingBuf> {
        match &self.inner {
            Inner::RingBuf(r) => Some(r),
            _ => None,
        }
    }

    /// The slots of a `PERF_EVENT_ARRAY` map: `bpf_perf_event_output` and the reader.
    pub fn perf(&self) -> Option<&PerfEventArray> {
        match &self.inner {
            Inner::Perf(p) => Some(p),
            _ => None,
        }
    }

    /// A shared segment: the memfd holding a memory-mappable array's values
    /// (`BPF_F_MMAPABLE`) and the bytes to map (whole pages; value `i` at
    /// `i * round_up(value_size, 8)`). `None` for every other map. A process that maps
    /// it shares the values with the programs, as a kernel mmapable array's `mmap` does;
    /// what it writes there can only ever be values.
    pub fn segment(&self) -> Option<(std::os::fd::BorrowedFd<'_>, usize)> {
        match &self.inner {
            Inner::Array(a) => a.segment().map(|fd| (fd, a.segment_len())),
            _ => None,
        }
    }

    // ---- maps in maps ----

    /// The outer map without building an error (program-side paths).
    #[inline]
    fn outer_ref(&self) -> Option<&OuterMap> {
        match &self.inner {
            Inner::Outer(o) => Some(o),
            _ => None,
        }
    }

    fn outer(&self) -> Result<&OuterMap, MapError> {
        match &self.inner {
            Inner::Outer(o) => Ok(o),
            _ => Err(MapError::NotOuter { map: self.name() }),
        }
    }

    /// The inner-map template of a map-in-map, as the kernel keeps it.
    /// Cheap enough for the packet path: no error is built for other maps.
    #[inline]
    pub fn inner_template(&self) -> Option<&MapDef> {
        match &self.inner {
            Inner::Outer(o) => Some(o.template()),
            _ => None,
        }
    }

    /// Control side of a map-in-map: `Some` is `BPF_MAP_UPDATE_ELEM` with `inner` as the
    /// value (an array_of_maps takes only `BPF_ANY`; a hash_of_maps a hash map's flags;
    /// `InnerMismatch` unless `inner` matches the template as the kernel's
    /// `map_meta_equal` requires, and has this map's CPU count). `None` is
    /// `BPF_MAP_DELETE_ELEM` (`flags` must be 0). `EPERM` once frozen, as other writes.
    /// The replaced map is dropped here unless workers still hold it.
    pub fn set_inner(
        &self,
        key: &[u8],
        inner: Option<Arc<Map>>,
        flags: u64,
    ) -> Result<(), MapError> {
        let outer = self.outer()?;
        self.check_user_write()?;
        if flags & LOCK != 0 {
            return Err(MapError::NoSpinLock { map: self.name() });
        }
        self.check_key(key)?;
        match inner {
            Some(m) => outer.update(key, m, flags),
            None if flags != 0 => Err(MapError::InvalidFlags { map: self.name(), flags }),
            None => outer.delete(key),
        }
    }

    /// The inner map at `key` of a map-in-map (control side).
    pub fn inner(&self, key: &[u8]) -> Option<Arc<Map>> {
        self.check_key(key).ok()?;
        self.outer_ref()?.inner(key)
    }

    /// Program side of `bpf_map_lookup_elem` on a map-in-map: the inner map at `key`
    /// and the handle to give the program, which [`Map::inner_by_slot`] turns back into
    /// the map. Hold `map` for the rest of the invocation: values the program reads in
    /// it stay valid while the control plane replaces it (the kernel's RCU guarantee).
    pub fn lookup_inner(&self, key: &[u8]) -> Option<InnerRef> {
        self.check_key(key).ok()?;
        self.outer_ref()?.lookup_inner(key)
    }

    /// The map now in the slot whose handle is `handle` (from [`Map::lookup`] or
    /// [`Map::lookup_inner`] on this map); `None` if `handle` is not one of this map's
    /// slots (any `u64` may be passed: it is only compared) or the slot is empty. A
    /// hash_of_maps slot may have been given to another key since the handle was
    /// returned; a runtime that keeps [`InnerRef::map`] for the invocation does not
    /// depend on that.
    pub fn inner_by_slot(&self, handle: u64) -> Option<Arc<Map>> {
        self.outer_ref()?.inner_by_slot(handle)
    }

    /// Every byte range of value memory a program may reach through pointers this map
    /// returns.
    pub fn value_spans(&self) -> &[ValueSpan] {
        &self.spans
    }

    /// For array and per-CPU array maps, where element `i` lives (for inlined lookups).
    /// `None` for every other type (a devmap or cpumap lookup must check the entry is
    /// present, so it cannot be inlined as an address computation).
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

    /// Number of entries: `max_entries` for arrays; the entries present for the other
    /// types, by a walk (slow path, exact only while nobody writes); 0 for a ring buffer
    /// and a bloom filter (which keeps bits, not values: see [`Map::bloom_bits_set`]).
    pub fn len(&self) -> usize {
        match &self.inner {
            Inner::Array(_) => self.def.max_entries as usize,
            Inner::Hash(h) => h.len(),
            Inner::Lpm(t) => t.len(),
            Inner::DevMap(d) => d.entries().len(),
            Inner::DevMapHash(d) => d.len(),
            Inner::CpuMap(c) => c.entries().len(),
            Inner::XskMap(c) => c.entries().len(),
            Inner::RingBuf(_) => 0,
            Inner::Perf(p) => p.len(),
            Inner::Outer(o) => o.len(),
            Inner::Queue(q) => q.len(),
            // What was pushed is not recorded, only bits.
            Inner::Bloom(_) => 0,
        }
    }

    /// A bloom filter's bits set now (slow path); `None` for other types.
    pub fn bloom_bits_set(&self) -> Option<u64> {
        match &self.inner {
            Inner::Bloom(b) => Some(b.bits_set()),
            _ => None,
        }
    }

    /// True if the map holds no entry (never for arrays).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The arena and offset a program pointer refers to; panics if it lies outside
    /// the map's value spans.
    #[cfg(test)]
    pub(crate) fn resolve(&self, p: NonNull<u8>, len: usize) -> (&Arena, usize) {
        let addr = p.as_ptr() as u64;
        assert!(self.spans.iter().any(|s| s.contains(addr, len as u64)), "pointer outside spans");
        let arena = match &self.inner {
            Inner::Array(a) => a.values(),
            Inner::Hash(h) => h.values(),
            Inner::Lpm(t) => t.values(),
            Inner::DevMap(d) => d.entries().values(),
            Inner::DevMapHash(d) => d.values(),
            Inner::CpuMap(c) => c.entries().values(),
            Inner::XskMap(c) => c.entries().values(),
            Inner::RingBuf(r) => r.data(),
            Inner::Perf(_) | Inner::Outer(_) | Inner::Queue(_) | Inner::Bloom(_) => {
                unreachable!("no value spans")
            }
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
            Inner::DevMapHash(d) => d.check_consistency(),
            _ => self.len(),
        }
    }
}
