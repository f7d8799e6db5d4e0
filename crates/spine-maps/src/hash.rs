//! The hash family (`kernel/bpf/hashtab.c`): `HASH`, `PERCPU_HASH`, `LRU_HASH` and
//! `LRU_PERCPU_HASH`, all preallocated.
//!
//! Layout: `roundup_pow_of_two(max_entries)` buckets, each the head of a singly linked
//! list of element indices ending in a "nulls" marker that names the bucket (the
//! kernel's `hlist_nulls`), and a pool of elements whose links, hashes and keys are
//! atomics and whose values live in an [`Arena`]. Keys and links are kept away from
//! value memory, so a program scribbling over values can never corrupt the table.
//!
//! Readers (`lookup`, `next_key`) take no lock. Writers take the bucket's spin lock. A
//! deleted element goes back to a per-CPU free list at once and may be reused while a
//! reader is still walking it; the reader then ends on another bucket's nulls marker
//! and restarts, exactly as `lookup_nulls_elem_raw` does. A value pointer returned to a
//! program stays inside the map's value memory for the map's lifetime, but (as with the
//! kernel's preallocated maps) its element may be deleted and reused meanwhile.
//!
//! Updates of an existing key in a plain hash map link a fresh element and retire the
//! old one into this CPU's spare ("extra") element, as the kernel does; so replacing
//! works even when the map is full, and a reader sees either the old or the new value,
//! never a mix. Per-CPU maps update existing values in place.
//!
//! A plain hash map's value may hold a `bpf_spin_lock` (the kernel allows no other
//! hash flavour). Its word is never written by a value copy (`copy_map_value`): an
//! element deleted or replaced while a program holds its lock keeps the word taken
//! until that program releases it, even if the element is reused meanwhile, as in the
//! kernel. A `BPF_F_LOCK` update of an existing key copies the value in place under
//! the element's lock instead of linking a new element (`copy_map_value_locked`).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};

use spine_abi::map_flags as mf;
use spine_abi::update_flags::{EXIST, LOCK, NOEXIST};

use crate::def::{round8, LruMode, MapDef};
use crate::freelist::{FreeLists, NIL};
use crate::jhash::jhash;
use crate::lru::Lru;
use crate::spinlock::SpinLock;
use crate::storage::{zeroed_slice, Arena, ARENA_ALIGN};
use crate::timer::Timers;
use crate::value_lock::{self, LockGuard, Waiter};
use crate::MapError;

/// Set in a link that is a nulls marker; the low bits name the bucket.
const NULLS: u32 = 1 << 31;

const fn is_nulls(link: u32) -> bool {
    link & NULLS != 0
}

#[derive(Debug)]
struct Bucket {
    head: AtomicU32,
    lock: SpinLock,
}

/// How keys are hashed to buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeyHash {
    /// The hash family's `jhash` with a per-map seed (0 under `BPF_F_ZERO_SEED`).
    Jhash { seed: u64 },
    /// A devmap_hash's: the `u32` key itself (`dev_map_hash_bucket`), so the bucket
    /// order, and `next_key`'s, is the kernel's.
    Identity,
}

/// Which side asks, and so which CPU slot and free list it uses.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Side {
    /// A program on worker `cpu`: per-CPU values touch only this CPU's slot.
    Prog(usize),
    /// `bpf(2)`: per-CPU values are all CPUs' slots, each padded to 8 bytes.
    User,
}

#[derive(Debug)]
pub(crate) struct HashTab {
    name: Arc<str>,
    key_size: usize,
    key_words: usize,
    value_size: usize,
    stride: usize,
    ncpus: usize,
    percpu: bool,
    max_entries: u32,
    mask: u32,
    /// `None` for [`KeyHash::Identity`].
    hashrnd: Option<u32>,
    buckets: Box<[Bucket]>,
    next: Box<[AtomicU32]>,
    hashes: Box<[AtomicU32]>,
    keys: Box<[AtomicU64]>,
    values: Arena,
    cpu_stride: usize,
    free: FreeLists,
    /// Plain hash only: one spare element per CPU and one for user space.
    extra: Box<[AtomicU32]>,
    lru: Option<Lru>,
    /// Serialises user-space writers, so that they share the one user spare element.
    user_lock: Mutex<()>,
    /// Offset of the value's `bpf_spin_lock` (plain hash maps only).
    spin_lock: Option<usize>,
    /// The elements' `bpf_timer`s (plain and LRU hash maps), one per pool element;
    /// freed whenever an element is unlinked.
    timers: Option<Timers>,
    /// Offset of the value's `bpf_timer`, with `timers`.
    timer_at: Option<usize>,
}

/// Element and byte counts of a hash map with this definition.
struct Sizes {
    pool: usize,
    n_buckets: usize,
    key_words: usize,
    stride: usize,
    cpu_stride: usize,
    value_bytes: usize,
}

fn sizes(def: &MapDef, percpu: bool, lru: bool, ncpus: usize) -> Option<Sizes> {
    let extras = if percpu || lru { 0 } else { ncpus.checked_add(1)? };
    let pool = (def.max_entries as usize).checked_add(extras)?;
    let stride = round8(def.value_size as u64) as usize;
    let (cpu_stride, value_bytes) = if percpu {
        let cs = pool.checked_mul(stride)?.checked_next_multiple_of(ARENA_ALIGN)?;
        (cs, cs.checked_mul(ncpus)?)
    } else {
        (0, pool.checked_mul(stride)?)
    };
    Some(Sizes {
        pool,
        n_buckets: (def.max_entries as usize).next_power_of_two(),
        key_words: (def.key_size as usize).div_ceil(8),
        stride,
        cpu_stride,
        value_bytes,
    })
}

impl HashTab {
    /// Bytes the map needs, or `None` if that overflows.
    pub(crate) fn bytes(def: &MapDef, percpu: bool, lru: bool, ncpus: usize) -> Option<u128> {
        let s = sizes(def, percpu, lru, ncpus)?;
        if s.pool >= NULLS as usize {
            return None;
        }
        let per_elem =
            12 + s.key_words as u128 * 8 + if lru { Lru::bytes_per_elem() } else { 0 } as u128;
        Some(
            s.n_buckets as u128 * 8
                + s.pool as u128 * per_elem
                + s.value_bytes as u128
                + FreeLists::footprint(ncpus + 1, s.pool) as u128,
        )
    }

    /// Builds the table; `def` passed the creation checks and the byte budget.
    pub(crate) fn new(
        def: &MapDef,
        percpu: bool,
        lru: Option<LruMode>,
        ncpus: usize,
        key_hash: KeyHash,
    ) -> Result<HashTab, MapError> {
        let too_large = || MapError::TooLarge { map: def.name.clone(), bytes: u64::MAX, limit: 0 };
        let s = sizes(def, percpu, lru.is_some(), ncpus).ok_or_else(too_large)?;
        if s.pool >= NULLS as usize {
            return Err(too_large());
        }
        let commit = def.flags & mf::NO_PREALLOC == 0;
        let values =
            Arena::new(s.value_bytes, def.value_size as usize, commit).ok_or_else(|| {
                MapError::OutOfMemory { map: def.name.clone(), bytes: s.value_bytes as u64 }
            })?;
        let hashrnd = match key_hash {
            KeyHash::Identity => None,
            KeyHash::Jhash { .. } if def.flags & mf::ZERO_SEED != 0 => Some(0),
            KeyHash::Jhash { seed } => Some(seed_to_hashrnd(seed)),
        };
        let oom = || MapError::OutOfMemory { map: def.name.clone(), bytes: s.pool as u64 * 16 };
        let lru = match lru {
            Some(mode) => Some(Lru::new(mode, s.pool, ncpus).ok_or_else(oom)?),
            None => None,
        };
        let per_cpu_lru = matches!(lru.as_ref().map(Lru::mode), Some(LruMode::PerCpu));
        let free = if per_cpu_lru {
            FreeLists::new(ncpus, s.pool, false)
        } else {
            FreeLists::new(ncpus + 1, s.pool, true)
        }
        .ok_or_else(oom)?;
        let max_entries = def.max_entries as usize;
        // Elements 0..max_entries are free, in equal runs per CPU pushed in reverse so
        // that each CPU pops ascending indices; the rest are the spares.
        let run = max_entries.div_ceil(ncpus);
        for i in (0..max_entries).rev() {
            free.push(i / run, i as u32);
        }
        let extra = (max_entries..s.pool).map(|i| AtomicU32::new(i as u32)).collect();
        Ok(HashTab {
            name: def.name.clone(),
            key_size: def.key_size as usize,
            key_words: s.key_words,
            value_size: def.value_size as usize,
            stride: s.stride,
            ncpus,
            percpu,
            max_entries: def.max_entries,
            mask: (s.n_buckets - 1) as u32,
            hashrnd,
            buckets: (0..s.n_buckets)
                .map(|b| Bucket { head: AtomicU32::new(NULLS | b as u32), lock: SpinLock::new() })
                .collect(),
            next: zeroed_slice(s.pool).ok_or_else(oom)?,
            hashes: zeroed_slice(s.pool).ok_or_else(oom)?,
            keys: zeroed_slice(s.pool * s.key_words).ok_or_else(oom)?,
            values,
            cpu_stride: s.cpu_stride,
            free,
            extra,
            lru,
            user_lock: Mutex::new(()),
            spin_lock: def.spin_lock.map(|o| o as usize),
            timers: def.timer.map(|_| Timers::new(s.pool)),
            timer_at: def.timer.map(|o| o as usize),
        })
    }

    pub(crate) fn timers(&self) -> Option<&Timers> {
        self.timers.as_ref()
    }

    /// The element whose value starts at byte `off` of the values (plain maps).
    pub(crate) fn elem_at(&self, off: usize) -> Option<u32> {
        let i = u32::try_from(off / self.stride).ok()?;
        let pool = self.next.len();
        (off.is_multiple_of(self.stride) && (i as usize) < pool && !self.percpu).then_some(i)
    }

    /// Element `idx`'s value (CPU 0's) and its key (as last written: the caller knows
    /// the element is in the map, its timer being armed).
    pub(crate) fn elem(&self, idx: u32, key: &mut [u8]) -> Option<NonNull<u8>> {
        if idx as usize >= self.next.len() || key.len() != self.key_size {
            return None;
        }
        self.read_key(idx, key);
        Some(self.values.ptr_at(self.value_off(idx, 0)))
    }

    pub(crate) fn values(&self) -> &Arena {
        &self.values
    }

    fn hash(&self, key: &[u8]) -> u32 {
        match self.hashrnd {
            Some(rnd) => jhash(key, rnd),
            None => u32::from_ne_bytes([key[0], key[1], key[2], key[3]]),
        }
    }

    fn list(&self, side: Side) -> usize {
        match side {
            Side::Prog(cpu) => cpu,
            Side::User => self.ncpus,
        }
    }

    fn value_off(&self, idx: u32, cpu: usize) -> usize {
        cpu * self.cpu_stride + idx as usize * self.stride
    }

    fn key_slots(&self, idx: u32) -> &[AtomicU64] {
        let start = idx as usize * self.key_words;
        &self.keys[start..start + self.key_words]
    }

    fn key_eq(&self, idx: u32, key: &[u8]) -> bool {
        let slots = self.key_slots(idx);
        let mut chunks = key.chunks_exact(8);
        for (slot, chunk) in slots.iter().zip(&mut chunks) {
            let w = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
            if slot.load(Relaxed) != w {
                return false;
            }
        }
        let rest = chunks.remainder();
        rest.is_empty() || slots[self.key_words - 1].load(Relaxed) == tail_word(rest)
    }

    fn write_key(&self, idx: u32, key: &[u8]) {
        let slots = self.key_slots(idx);
        for (slot, chunk) in slots.iter().zip(key.chunks(8)) {
            slot.store(tail_word(chunk), Relaxed);
        }
    }

    fn read_key(&self, idx: u32, out: &mut [u8]) {
        for (slot, chunk) in self.key_slots(idx).iter().zip(out[..self.key_size].chunks_mut(8)) {
            let n = chunk.len();
            chunk.copy_from_slice(&slot.load(Relaxed).to_ne_bytes()[..n]);
        }
    }

    /// Lock-free search (`lookup_nulls_elem_raw`): restarts when the walk ends on a
    /// nulls marker of another bucket, because an element moved under the reader.
    fn find(&self, key: &[u8], hash: u32) -> Option<u32> {
        self.find_stepping(key, hash, |_| {})
    }

    /// [`HashTab::find`], calling `step` on each element before following its link
    /// (tests use it to move an element under a reader).
    #[inline(always)]
    fn find_stepping(&self, key: &[u8], hash: u32, mut step: impl FnMut(u32)) -> Option<u32> {
        let b = hash & self.mask;
        let head = &self.buckets[b as usize].head;
        loop {
            let mut cur = head.load(Acquire);
            while !is_nulls(cur) {
                if self.hashes[cur as usize].load(Relaxed) == hash && self.key_eq(cur, key) {
                    return Some(cur);
                }
                step(cur);
                cur = self.next[cur as usize].load(Acquire);
            }
            if cur == NULLS | b {
                return None;
            }
        }
    }

    /// Search with the bucket lock held: the chain cannot change under us.
    fn find_locked(&self, b: &Bucket, key: &[u8], hash: u32) -> Option<u32> {
        let mut cur = b.head.load(Relaxed);
        while !is_nulls(cur) {
            if self.hashes[cur as usize].load(Relaxed) == hash && self.key_eq(cur, key) {
                return Some(cur);
            }
            cur = self.next[cur as usize].load(Relaxed);
        }
        None
    }

    /// Links the filled element `idx` at the head of `b` (lock held).
    fn link_head(&self, b: &Bucket, idx: u32) {
        self.next[idx as usize].store(b.head.load(Relaxed), Relaxed);
        b.head.store(idx, Release);
    }

    /// Unlinks `idx` from `b` if it is there (lock held). The element keeps its own link
    /// so that a reader standing on it walks on.
    fn unlink(&self, b: &Bucket, idx: u32) -> bool {
        // The element leaves the map (deleted, replaced, evicted): so does its timer.
        if let Some(t) = &self.timers {
            t.free(idx);
        }
        let after = self.next[idx as usize].load(Relaxed);
        let mut cur = b.head.load(Relaxed);
        if cur == idx {
            b.head.store(after, Release);
            return true;
        }
        while !is_nulls(cur) {
            let link = &self.next[cur as usize];
            let n = link.load(Relaxed);
            if n == idx {
                link.store(after, Release);
                return true;
            }
            cur = n;
        }
        false
    }

    fn fill(&self, idx: u32, key: &[u8], hash: u32) {
        self.write_key(idx, key);
        self.hashes[idx as usize].store(hash, Relaxed);
    }

    /// Program-side lookup: this CPU's value. Marks an LRU element referenced.
    pub(crate) fn lookup(&self, key: &[u8], cpu: usize) -> Option<NonNull<u8>> {
        let idx = self.find(key, self.hash(key))?;
        if let Some(lru) = &self.lru {
            lru.touch(idx);
        }
        let cpu = if self.percpu { cpu } else { 0 };
        Some(self.values.ptr_at(self.value_off(idx, cpu)))
    }

    /// User-side lookup (`bpf_map_copy_value`): does not mark an LRU element. With
    /// `lock` (`BPF_F_LOCK`, checked by the caller) the value is read under its lock;
    /// the lock word reads as 0 either way (`check_and_init_map_value`).
    pub(crate) fn lookup_user(
        &self,
        key: &[u8],
        out: &mut [u8],
        lock: bool,
    ) -> Result<(), MapError> {
        let idx = self
            .find(key, self.hash(key))
            .ok_or_else(|| MapError::NotFound { map: self.name.clone() })?;
        if self.percpu {
            for cpu in 0..self.ncpus {
                let slot = &mut out[cpu * self.stride..(cpu + 1) * self.stride];
                self.values.read(self.value_off(idx, cpu), slot);
            }
        } else {
            let _g = if lock { Some(self.lock_element(idx, Waiter::User)?) } else { None };
            self.values.read(self.value_off(idx, 0), &mut out[..self.value_size]);
            if let Some(l) = self.spin_lock {
                out[l..l + 4].fill(0);
            }
            // So does the timer: its state is not in the value (`check_and_init_map_value`).
            if let Some(t) = self.timer_at {
                out[t..t + spine_abi::timer::SIZE as usize].fill(0);
            }
        }
        Ok(())
    }

    /// `__htab_map_lookup_and_delete_elem` (`BPF_MAP_LOOKUP_AND_DELETE_ELEM`): under
    /// the bucket's lock, copies the value out as [`HashTab::lookup_user`] does (every
    /// CPU's for a per-CPU map; with `lock` under the value's `bpf_spin_lock`) and
    /// unlinks the element, which goes back to the user side's free list (an LRU's
    /// included); a missing key is `NotFound` and leaves `out` as it was.
    pub(crate) fn lookup_and_delete_user(
        &self,
        key: &[u8],
        out: &mut [u8],
        lock: bool,
    ) -> Result<(), MapError> {
        let hash = self.hash(key);
        let b = &self.buckets[(hash & self.mask) as usize];
        let g = b.lock.lock();
        let idx = self
            .find_locked(b, key, hash)
            .ok_or_else(|| MapError::NotFound { map: self.name.clone() })?;
        if self.percpu {
            for cpu in 0..self.ncpus {
                let slot = &mut out[cpu * self.stride..(cpu + 1) * self.stride];
                self.values.read(self.value_off(idx, cpu), slot);
            }
        } else {
            let elem = if lock { Some(self.lock_element(idx, Waiter::User)?) } else { None };
            self.values.read(self.value_off(idx, 0), &mut out[..self.value_size]);
            drop(elem);
            if let Some(l) = self.spin_lock {
                out[l..l + 4].fill(0);
            }
            if let Some(t) = self.timer_at {
                out[t..t + spine_abi::timer::SIZE as usize].fill(0);
            }
        }
        self.unlink(b, idx);
        drop(g);
        let list = self.list(Side::User);
        match &self.lru {
            Some(lru) => self.lru_free(lru, idx, list),
            None => self.free.push(list, idx),
        }
        Ok(())
    }

    /// Takes element `idx`'s `bpf_spin_lock` (bounded wait, `EBUSY` after it).
    fn lock_element(&self, idx: u32, side: Waiter) -> Result<LockGuard<'_>, MapError> {
        let off = self.spin_lock.ok_or_else(|| MapError::NoSpinLock { map: self.name.clone() })?;
        value_lock::take(self.values.lock_word(self.value_off(idx, 0) + off), side, &self.name)
    }

    /// Writes a plain map's value, around its lock word if it has one.
    fn write_plain(&self, idx: u32, value: &[u8]) {
        let off = self.value_off(idx, 0);
        match self.spin_lock {
            Some(hole) => self.values.write_except(off, value, hole),
            None => self.values.write(off, value),
        }
    }

    /// Writes a new element's value(s) (`alloc_htab_elem` / `pcpu_init_value`): from a
    /// program, this CPU's value and zeros on the others; from user space, every CPU.
    fn init_value(&self, idx: u32, value: &[u8], side: Side) {
        if !self.percpu {
            self.write_plain(idx, value);
            return;
        }
        match side {
            Side::Prog(this) => {
                for cpu in 0..self.ncpus {
                    let off = self.value_off(idx, cpu);
                    if cpu == this {
                        self.values.zero(off, self.stride);
                        self.values.write(off, value);
                    } else {
                        self.values.zero(off, self.value_size);
                    }
                }
            }
            Side::User => self.copy_all_cpus(idx, value),
        }
    }

    fn copy_all_cpus(&self, idx: u32, value: &[u8]) {
        for (cpu, slot) in value.chunks_exact(self.stride).enumerate() {
            self.values.write(self.value_off(idx, cpu), slot);
        }
    }

    /// Per-CPU in-place update (`pcpu_copy_value`).
    fn copy_value(&self, idx: u32, value: &[u8], side: Side) {
        match side {
            Side::Prog(cpu) => self.values.write(self.value_off(idx, cpu), value),
            Side::User => self.copy_all_cpus(idx, value),
        }
    }

    fn check_flags(&self, old: Option<u32>, flags: u64) -> Result<(), MapError> {
        match (old, flags & !LOCK) {
            (Some(_), NOEXIST) => Err(MapError::Exists { map: self.name.clone() }),
            (None, EXIST) => Err(MapError::NotFound { map: self.name.clone() }),
            _ => Ok(()),
        }
    }

    fn full(&self) -> MapError {
        MapError::Full { map: self.name.clone(), max_entries: self.max_entries }
    }

    pub(crate) fn update(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        side: Side,
    ) -> Result<(), MapError> {
        let _user = match side {
            Side::User => Some(self.user_lock.lock().unwrap_or_else(|e| e.into_inner())),
            Side::Prog(_) => None,
        };
        match (&self.lru, self.percpu) {
            (None, false) => self.update_plain(key, value, flags, side),
            (None, true) => self.update_percpu(key, value, flags, side),
            (Some(lru), false) => self.update_lru(lru, key, value, flags, side),
            (Some(lru), true) => self.update_lru_percpu(lru, key, value, flags, side),
        }
    }

    /// `htab_map_update_elem` (preallocated).
    fn update_plain(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        side: Side,
    ) -> Result<(), MapError> {
        if flags & !LOCK > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let locked = flags & LOCK != 0;
        if locked && self.spin_lock.is_none() {
            return Err(MapError::NoSpinLock { map: self.name.clone() });
        }
        let list = self.list(side);
        let hash = self.hash(key);
        let b = &self.buckets[(hash & self.mask) as usize];
        let waiter = match side {
            Side::Prog(_) => Waiter::Program,
            Side::User => Waiter::User,
        };
        let (_g, old) = loop {
            if locked {
                // An existing element is updated in place under its own lock, found
                // without the bucket lock (`htab_map_update_elem`'s BPF_F_LOCK path).
                let old = self.find(key, hash);
                self.check_flags(old, flags)?;
                if let Some(idx) = old {
                    let _l = self.lock_element(idx, waiter)?;
                    self.write_plain(idx, value);
                    return Ok(());
                }
            }
            let g = b.lock.lock();
            let old = self.find_locked(b, key, hash);
            self.check_flags(old, flags)?;
            if locked && old.is_some() {
                // Inserted since the lock-free look: the kernel then takes the element's
                // lock inside the bucket's; spine never waits for a value lock (which a
                // program may hold) with a bucket lock held, so it looks again.
                drop(g);
                std::hint::spin_loop();
                continue;
            }
            break (g, old);
        };
        // A replacement takes this CPU's spare and leaves the old element as the new
        // spare. If the spare is in use (two threads sharing one `cpu`), it falls back
        // to the free list and returns the old element there.
        let (new, spare) = match old {
            Some(_) => match self.extra[list].swap(NIL, Acquire) {
                NIL => (self.free.pop(list).ok_or_else(|| self.full())?, false),
                e => (e, true),
            },
            None => (self.free.pop(list).ok_or_else(|| self.full())?, false),
        };
        self.fill(new, key, hash);
        self.init_value(new, value, side);
        self.link_head(b, new);
        if let Some(old) = old {
            self.unlink(b, old);
            if spare {
                self.extra[list].store(old, Release);
            } else {
                self.free.push(list, old);
            }
        }
        Ok(())
    }

    /// `__htab_percpu_map_update_elem` (preallocated).
    fn update_percpu(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        side: Side,
    ) -> Result<(), MapError> {
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let list = self.list(side);
        let hash = self.hash(key);
        let b = &self.buckets[(hash & self.mask) as usize];
        let _g = b.lock.lock();
        let old = self.find_locked(b, key, hash);
        self.check_flags(old, flags)?;
        match old {
            Some(idx) => self.copy_value(idx, value, side),
            None => {
                let new = self.free.pop(list).ok_or_else(|| self.full())?;
                self.fill(new, key, hash);
                self.init_value(new, value, side);
                self.link_head(b, new);
            }
        }
        Ok(())
    }

    /// A free element for an LRU insert, evicting one if none is free
    /// (`prealloc_lru_pop`). Called with no bucket lock held.
    fn lru_pop(&self, lru: &Lru, list: usize) -> Result<u32, MapError> {
        let home = lru.home(list);
        if let Some(i) = self.free.pop(home) {
            return Ok(i);
        }
        lru.evict(list, |idx| {
            let hash = self.hashes[idx as usize].load(Relaxed);
            let b = &self.buckets[(hash & self.mask) as usize];
            let _g = b.lock.lock();
            self.unlink(b, idx)
        })
        .ok_or(MapError::NoFreeElement { map: self.name.clone() })
    }

    fn lru_free(&self, lru: &Lru, idx: u32, list: usize) {
        self.free.push(lru.owner(idx, lru.home(list)), idx);
    }

    /// `htab_lru_map_update_elem`: the new element is taken (possibly evicting) before
    /// the flags are checked, so a failing update can still evict, as in the kernel.
    fn update_lru(
        &self,
        lru: &Lru,
        key: &[u8],
        value: &[u8],
        flags: u64,
        side: Side,
    ) -> Result<(), MapError> {
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let list = self.list(side);
        let hash = self.hash(key);
        let new = self.lru_pop(lru, list)?;
        self.fill(new, key, hash);
        self.init_value(new, value, side);
        lru.set_ref(new, false);
        let b = &self.buckets[(hash & self.mask) as usize];
        let g = b.lock.lock();
        let old = self.find_locked(b, key, hash);
        if let Err(e) = self.check_flags(old, flags) {
            drop(g);
            self.lru_free(lru, new, list);
            return Err(e);
        }
        self.link_head(b, new);
        if let Some(old) = old {
            lru.set_ref(new, true);
            self.unlink(b, old);
        }
        drop(g);
        if let Some(old) = old {
            self.lru_free(lru, old, list);
        }
        Ok(())
    }

    /// `__htab_lru_percpu_map_update_elem`: no element is taken for `BPF_EXIST`.
    fn update_lru_percpu(
        &self,
        lru: &Lru,
        key: &[u8],
        value: &[u8],
        flags: u64,
        side: Side,
    ) -> Result<(), MapError> {
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let list = self.list(side);
        let hash = self.hash(key);
        let new = if flags != EXIST { Some(self.lru_pop(lru, list)?) } else { None };
        if let Some(new) = new {
            self.fill(new, key, hash);
            lru.set_ref(new, false);
        }
        let b = &self.buckets[(hash & self.mask) as usize];
        let g = b.lock.lock();
        let old = self.find_locked(b, key, hash);
        let res = self.check_flags(old, flags);
        let unused = match (res.is_ok(), old, new) {
            (true, Some(old), new) => {
                lru.set_ref(old, true);
                self.copy_value(old, value, side);
                new
            }
            (true, None, Some(new)) => {
                self.init_value(new, value, side);
                self.link_head(b, new);
                None
            }
            (_, _, new) => new,
        };
        drop(g);
        if let Some(idx) = unused {
            self.lru_free(lru, idx, list);
        }
        res
    }

    /// Overwrites the value of an existing key of a plain map where it is, keeping its
    /// element and bucket position (a hash_of_maps' update of an existing key, as
    /// measured: the kernel does not move it to the bucket's head). `NotFound` if the
    /// key is missing.
    pub(crate) fn replace_in_place(&self, key: &[u8], value: &[u8]) -> Result<(), MapError> {
        let hash = self.hash(key);
        let b = &self.buckets[(hash & self.mask) as usize];
        let _g = b.lock.lock();
        let idx = self
            .find_locked(b, key, hash)
            .ok_or_else(|| MapError::NotFound { map: self.name.clone() })?;
        self.values.write(self.value_off(idx, 0), value);
        Ok(())
    }

    /// `htab_map_delete_elem` / `htab_lru_map_delete_elem`.
    pub(crate) fn delete(&self, key: &[u8], side: Side) -> Result<(), MapError> {
        let hash = self.hash(key);
        let b = &self.buckets[(hash & self.mask) as usize];
        let g = b.lock.lock();
        let idx = self
            .find_locked(b, key, hash)
            .ok_or_else(|| MapError::NotFound { map: self.name.clone() })?;
        self.unlink(b, idx);
        drop(g);
        let list = self.list(side);
        match &self.lru {
            Some(lru) => self.lru_free(lru, idx, list),
            None => self.free.push(list, idx),
        }
        Ok(())
    }

    /// `htab_map_get_next_key`: the next key in the same bucket, else the first key of
    /// the next non-empty bucket; a missing key restarts from the first bucket.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        let mut first = 0usize;
        if let Some(key) = key {
            let hash = self.hash(key);
            if let Some(idx) = self.find(key, hash) {
                let n = self.next[idx as usize].load(Acquire);
                if !is_nulls(n) {
                    self.read_key(n, out);
                    return Ok(());
                }
                first = (hash & self.mask) as usize + 1;
            }
        }
        for b in &self.buckets[first..] {
            let h = b.head.load(Acquire);
            if !is_nulls(h) {
                self.read_key(h, out);
                return Ok(());
            }
        }
        Err(MapError::NotFound { map: self.name.clone() })
    }

    /// One step of a program's walk (`bpf_for_each_hash_elem`): `cursor` is the bucket
    /// and one plus the element last returned (0 at the bucket's head); the next element
    /// has its key copied to `key` and the address of its value for `cpu` returned.
    /// Lock-free like a lookup and, like the kernel's walk under RCU, it follows the
    /// link of the element last returned even if the callback deleted it (an unlinked
    /// element keeps its link until it is reused). An element inserted meanwhile may be
    /// seen or not.
    pub(crate) fn walk_next(
        &self,
        cursor: &mut [u64; 2],
        key: &mut [u8],
        cpu: usize,
    ) -> Option<NonNull<u8>> {
        let mut cur = match cursor[1] {
            0 => self.buckets.get(usize::try_from(cursor[0]).ok()?)?.head.load(Acquire),
            last => self.next.get(usize::try_from(last - 1).ok()?)?.load(Acquire),
        };
        while is_nulls(cur) {
            cursor[0] += 1;
            cur = self.buckets.get(usize::try_from(cursor[0]).ok()?)?.head.load(Acquire);
        }
        cursor[1] = u64::from(cur) + 1;
        self.read_key(cur, key);
        let cpu = if self.percpu { cpu } else { 0 };
        Some(self.values.ptr_at(self.value_off(cur, cpu)))
    }

    /// Number of elements, by walking every bucket (slow path; exact when quiescent).
    pub(crate) fn len(&self) -> usize {
        let mut n = 0;
        for b in self.buckets.iter() {
            let _g = b.lock.lock();
            let mut cur = b.head.load(Relaxed);
            while !is_nulls(cur) {
                n += 1;
                cur = self.next[cur as usize].load(Relaxed);
            }
        }
        n
    }

    /// Checks the table's bookkeeping while nothing else runs: every element is linked
    /// in exactly one bucket (the one its hash names), free, or a spare; no key is linked
    /// twice; at most `max_entries` are linked. Returns the number linked.
    #[cfg(test)]
    pub(crate) fn check_consistency(&self) -> usize {
        use std::collections::HashSet;
        let pool = self.next.len();
        let mut owner = vec![0u8; pool];
        let mut keys = HashSet::new();
        let mut linked = 0;
        for (bi, b) in self.buckets.iter().enumerate() {
            let mut cur = b.head.load(Relaxed);
            while !is_nulls(cur) {
                assert_eq!(self.hashes[cur as usize].load(Relaxed) & self.mask, bi as u32);
                owner[cur as usize] += 1;
                let mut k = vec![0u8; self.key_size];
                self.read_key(cur, &mut k);
                assert!(keys.insert(k), "key linked twice");
                linked += 1;
                cur = self.next[cur as usize].load(Relaxed);
            }
            assert_eq!(cur, NULLS | bi as u32, "chain ends on its own nulls marker");
        }
        for i in self.free.members() {
            owner[i as usize] += 1;
        }
        for e in self.extra.iter() {
            let i = e.load(Relaxed);
            assert_ne!(i, NIL, "spare element lost");
            owner[i as usize] += 1;
        }
        for (i, &o) in owner.iter().enumerate() {
            assert_eq!(o, 1, "element {i} owned {o} times");
        }
        assert!(linked <= self.max_entries as usize);
        linked
    }
}

/// Up to 8 key bytes, zero-padded, as a native-endian word.
fn tail_word(chunk: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..chunk.len()].copy_from_slice(chunk);
    u64::from_ne_bytes(w)
}

/// The 32-bit `hashrnd` for a 64-bit seed (splitmix64's finaliser).
pub(crate) fn seed_to_hashrnd(seed: u64) -> u32 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_abi::map_type::HASH;

    fn table(max: u32) -> HashTab {
        let def = MapDef::new("h", HASH, 4, 8, max, mf::ZERO_SEED);
        HashTab::new(&def, false, None, 1, KeyHash::Jhash { seed: 0 }).unwrap()
    }

    fn key_in_bucket(t: &HashTab, bucket: u32, skip: &[u32]) -> u32 {
        (0..)
            .find(|k: &u32| t.hash(&k.to_ne_bytes()) & t.mask == bucket && !skip.contains(k))
            .unwrap()
    }

    /// A reader stands on an element that is deleted and reused in another bucket
    /// before it follows the link: it must end on a foreign nulls marker and restart,
    /// or it would miss the key behind that element.
    #[test]
    fn reader_restarts_when_its_element_moves_to_another_bucket() {
        let t = table(8);
        let stable = key_in_bucket(&t, 3, &[]);
        let mover = key_in_bucket(&t, 3, &[stable]);
        let elsewhere = key_in_bucket(&t, 5, &[]);
        t.update(&stable.to_ne_bytes(), &[1; 8], 0, Side::Prog(0)).unwrap();
        t.update(&mover.to_ne_bytes(), &[2; 8], 0, Side::Prog(0)).unwrap();
        let moving = t.find(&mover.to_ne_bytes(), t.hash(&mover.to_ne_bytes())).unwrap();
        let key = stable.to_ne_bytes();
        let mut moved = false;
        let found = t.find_stepping(&key, t.hash(&key), |idx| {
            if idx == moving && !moved {
                moved = true;
                t.delete(&mover.to_ne_bytes(), Side::Prog(0)).unwrap();
                t.update(&elsewhere.to_ne_bytes(), &[3; 8], 0, Side::Prog(0)).unwrap();
                let reused = t.find(&elsewhere.to_ne_bytes(), t.hash(&elsewhere.to_ne_bytes()));
                assert_eq!(reused, Some(moving), "the freed element is reused at once");
            }
        });
        assert!(moved, "the reader passed the moving element");
        let link = t.next[moving as usize].load(Relaxed);
        assert_eq!(link, NULLS | 5, "the reader was led to bucket 5's nulls marker");
        assert!(found.is_some());
        assert_eq!(found, t.find(&key, t.hash(&key)));
    }
}
