//! An object's maps as its extensions see them: data maps (`spine_maps`) and program
//! arrays (tail-call tables, which hold extensions and so live in the runtime). One table
//! per loaded object; every program of the object shares it, as with libbpf.

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::sync::{Arc, PoisonError, RwLock};

use spine_abi::{map_type, update_flags};
use spine_maps::{InnerRef, Map, MapDef, MapError, MapOptions};
use spine_obj::{MapOrigin, MapSpec, Object, SlotTarget};
use spine_vm::{AccessKind, Memory, Region};

use crate::domain::{Domain, DomainError};
use crate::ext::{Extension, LoadError};

/// Register value a program holds for a map (`lddw rX, map`): opaque to the program (no
/// region covers it) and decoded only by helpers.
pub const MAP_HANDLE_BASE: u64 = 0xffff_5350_0000_0000;
/// Most maps one object may declare.
pub const MAX_MAPS: usize = 4096;

/// Decodes a map handle into a map index, if it is one.
pub fn map_index(handle: u64) -> Option<usize> {
    let idx = handle.wrapping_sub(MAP_HANDLE_BASE);
    (idx < MAX_MAPS as u64).then_some(idx as usize)
}

/// One map of the table.
#[derive(Debug, Clone)]
pub enum RtMap {
    Data(Arc<Map>),
    Progs(Arc<ProgArray>),
}

impl RtMap {
    pub fn name(&self) -> &str {
        match self {
            RtMap::Data(m) => &m.def().name,
            RtMap::Progs(p) => &p.name,
        }
    }
}

/// The maps of one object, by the index its programs' `lddw` uses.
#[derive(Debug)]
pub struct MapTable {
    maps: Vec<RtMap>,
    domain: Arc<Domain>,
    /// The object's BTF and each map's key and value type ids in it (0: none), to print
    /// entries as bpftool does.
    btf: Option<Arc<[u8]>>,
    types: Vec<(u32, u32)>,
}

impl MapTable {
    /// Creates the object's maps in `domain`: shared names resolve to the domain's
    /// instance, everything else is created and charged to the domain's quota.
    pub fn create(
        obj: &Object,
        domain: &Arc<Domain>,
        ncpus: usize,
        seed: u64,
    ) -> Result<MapTable, LoadError> {
        if obj.maps.len() > MAX_MAPS {
            return Err(LoadError::TooManyMaps(obj.maps.len()));
        }
        let mut maps = Vec::with_capacity(obj.maps.len());
        let mut fresh = Vec::with_capacity(obj.maps.len());
        for spec in &obj.maps {
            let (map, created) = Self::create_one(spec, domain, ncpus, seed)?;
            maps.push(map);
            fresh.push(created);
        }
        let types = obj.maps.iter().map(|m| (m.btf_key_type_id, m.btf_value_type_id)).collect();
        let table = MapTable { maps, domain: domain.clone(), btf: obj.btf.clone(), types };
        // As libbpf: a map-in-map's `.values = { [i] = &inner }` fills slot `i` (the key,
        // for a hash of maps) once every map exists. A map the domain already shared was
        // filled by the object that created it.
        for (i, (spec, created)) in obj.maps.iter().zip(fresh).enumerate() {
            if created {
                table.fill_inner_slots(i, spec)?;
            }
        }
        Ok(table)
    }

    /// The object's BTF and the key and value type ids of map `name` in it, when the
    /// map was defined with BTF types (`__type(key, T)`, `__type(value, T)`).
    pub fn btf_types(&self, name: &str) -> Option<(Arc<[u8]>, u32, u32)> {
        let i = self.maps.iter().position(|m| m.name() == name)?;
        let (k, v) = *self.types.get(i)?;
        let btf = self.btf.clone().filter(|_| k != 0 || v != 0)?;
        Some((btf, k, v))
    }

    fn fill_inner_slots(&self, index: usize, spec: &MapSpec) -> Result<(), LoadError> {
        let map_err = |source| LoadError::Map { map: spec.name.clone(), source };
        let Some(outer) = self.data(index).filter(|m| m.inner_template().is_some()) else {
            return Ok(());
        };
        for (slot, target) in &spec.init_slots {
            let SlotTarget::Map(index) = target else { continue };
            let inner = match self.maps.get(*index) {
                Some(RtMap::Data(m)) => m.clone(),
                other => {
                    return Err(map_err(MapError::InnerMismatch {
                        map: outer.def().name.clone(),
                        inner: Arc::from(other.map_or("?", RtMap::name)),
                    }))
                }
            };
            outer
                .set_inner(&slot.to_ne_bytes(), Some(inner), update_flags::ANY)
                .map_err(map_err)?;
        }
        Ok(())
    }

    /// The map for `spec` and whether it was created here (`false`: the domain's shared
    /// instance).
    fn create_one(
        spec: &MapSpec,
        domain: &Arc<Domain>,
        ncpus: usize,
        seed: u64,
    ) -> Result<(RtMap, bool), LoadError> {
        let map_err = |source| LoadError::Map { map: spec.name.clone(), source };
        if spec.map_type == map_type::PROG_ARRAY {
            if spec.key_size != 4 || spec.value_size != 4 || spec.max_entries == 0 {
                return Err(map_err(MapError::KeySize {
                    map: Arc::from(spec.name.as_str()),
                    key_size: spec.key_size,
                    min: 4,
                    max: 4,
                }));
            }
            let progs = ProgArray::new(&spec.name, spec.max_entries);
            return Ok((RtMap::Progs(Arc::new(progs)), true));
        }
        let mut def = map_def(spec);
        // As libbpf: a perf event array of no size gets a slot per CPU.
        if def.map_type == map_type::PERF_EVENT_ARRAY && def.max_entries == 0 {
            def.max_entries = ncpus as u32;
        }
        let template = spec.inner.as_deref().map(map_def);
        let is_data = matches!(spec.origin, MapOrigin::GlobalData { .. });
        if !is_data {
            if let Some(shared) = domain.shared(&spec.name) {
                let d = shared.def();
                if !same_def(d, &def) || !same_template(shared.inner_template(), template.as_ref())
                {
                    return Err(LoadError::Domain(DomainError::MapMismatch {
                        domain: domain.name().to_string(),
                        map: spec.name.clone(),
                        existing: describe(d, shared.inner_template()),
                        wanted: describe(&def, template.as_ref()),
                    }));
                }
                return Ok((RtMap::Data(shared), false));
            }
        }
        let opts =
            MapOptions { ncpus, seed, max_bytes: domain.map_bytes_left(), ..MapOptions::default() };
        // A map-in-map is created from its inner template, as libbpf creates one from
        // the `__array(values, struct inner)` definition (an outer map without one is
        // `NoInnerTemplate`).
        let created = match (&template, is_outer(spec.map_type)) {
            (Some(t), true) => Map::create_outer(def, t, &opts),
            _ => Map::create(def, &opts),
        };
        let map = created.map_err(|e| match e {
            MapError::TooLarge { bytes, .. } => LoadError::Domain(DomainError::MapBytes {
                domain: domain.name().to_string(),
                map: spec.name.clone(),
                bytes,
                left: domain.map_bytes_left(),
                quota: domain.spec().quota.map_bytes,
            }),
            e => map_err(e),
        })?;
        if let Some(init) = &spec.initial {
            map.write_initial(init).map_err(map_err)?;
        }
        // As libbpf does: read-only global data is frozen once initialised.
        if matches!(spec.origin, MapOrigin::GlobalData { read_only: true, .. }) {
            map.freeze();
        }
        let map = domain.adopt(Arc::new(map)).map_err(LoadError::Domain)?;
        Ok((RtMap::Data(map), true))
    }

    pub fn get(&self, index: usize) -> Option<&RtMap> {
        self.maps.get(index)
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &RtMap> {
        self.maps.iter()
    }

    /// The data maps, in table order (program arrays left out).
    pub fn data_maps(&self) -> impl Iterator<Item = &Arc<Map>> {
        self.maps.iter().filter_map(|m| match m {
            RtMap::Data(d) => Some(d),
            RtMap::Progs(_) => None,
        })
    }

    /// Whether any map of the table is a program array (tail calls are possible).
    pub fn has_prog_arrays(&self) -> bool {
        self.maps.iter().any(|m| matches!(m, RtMap::Progs(_)))
    }

    /// The data map at `index`.
    pub fn data(&self, index: usize) -> Option<&Map> {
        match self.maps.get(index)? {
            RtMap::Data(m) => Some(m),
            RtMap::Progs(_) => None,
        }
    }

    /// The program array at `index`.
    pub fn progs(&self, index: usize) -> Option<&ProgArray> {
        match self.maps.get(index)? {
            RtMap::Progs(p) => Some(p),
            RtMap::Data(_) => None,
        }
    }

    /// The map called `name`.
    pub fn by_name(&self, name: &str) -> Option<&RtMap> {
        self.maps.iter().find(|m| m.name() == name)
    }
}

impl Drop for MapTable {
    /// Returns the bytes of maps nobody else holds to the domain's quota (maps the
    /// domain shares stay registered, and charged, while the domain lives). Map-in-maps
    /// going away let go of their inner maps first, so an inner map of this object held
    /// only by them is returned too.
    fn drop(&mut self) {
        for m in &self.maps {
            if let RtMap::Data(map) = m {
                if Arc::strong_count(map) == 1 && map.inner_template().is_some() {
                    empty_slots(map);
                }
            }
        }
        for m in &self.maps {
            if let RtMap::Data(map) = m {
                if Arc::strong_count(map) == 1 {
                    self.domain.release(map);
                }
            }
        }
    }
}

/// Deletes every entry of a map-in-map (a frozen one keeps them).
fn empty_slots(map: &Map) {
    let mut k = vec![0u8; map.def().key_size as usize];
    match map.def().map_type {
        map_type::ARRAY_OF_MAPS => {
            for i in 0..map.def().max_entries {
                let _ = map.set_inner(&i.to_ne_bytes(), None, 0);
            }
        }
        _ => {
            for _ in 0..=map.def().max_entries {
                if map.next_key(None, &mut k).is_err() || map.set_inner(&k, None, 0).is_err() {
                    break;
                }
            }
        }
    }
}

fn map_def(spec: &MapSpec) -> MapDef {
    MapDef {
        name: Arc::from(spec.name.as_str()),
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        flags: spec.flags,
        spin_lock: spec.spin_lock,
        timer: spec.timer,
        map_extra: spec.map_extra,
    }
}

fn is_outer(t: u32) -> bool {
    matches!(t, map_type::ARRAY_OF_MAPS | map_type::HASH_OF_MAPS)
}

fn same_def(a: &MapDef, b: &MapDef) -> bool {
    (a.map_type, a.key_size, a.value_size, a.max_entries, a.flags, a.spin_lock, a.map_extra)
        == (b.map_type, b.key_size, b.value_size, b.max_entries, b.flags, b.spin_lock, b.map_extra)
}

fn same_template(a: Option<&MapDef>, b: Option<&MapDef>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => same_def(a, b),
        (a, b) => a.is_none() && b.is_none(),
    }
}

fn describe(d: &MapDef, template: Option<&MapDef>) -> String {
    let mut s = format!(
        "{} key {} value {} max_entries {} flags {:#x}",
        map_type::name(d.map_type),
        d.key_size,
        d.value_size,
        d.max_entries,
        d.flags
    );
    if let Some(t) = template {
        s += &format!(" of ({})", describe(t, None));
    }
    s
}

/// A program array: the targets of `bpf_tail_call`. Its programs share the array's
/// object, so slots and programs form a cycle; as in the kernel, the array is cleared
/// when the object's user handle ([`crate::LoadedObject`]) goes away, which breaks it.
#[derive(Debug)]
pub struct ProgArray {
    name: String,
    /// Written only from the control side; tail calls take the read lock briefly.
    slots: RwLock<Vec<Option<Arc<Extension>>>>,
}

/// Why a program-array update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgArrayError {
    #[error("program array '{map}': index {index} out of range (max_entries {max_entries})")]
    Index { map: String, index: u32, max_entries: u32 },
    #[error(
        "program array '{map}': tail-call targets must come from the same object as the array"
    )]
    ForeignProgram { map: String },
}

impl ProgArray {
    pub fn new(name: &str, max_entries: u32) -> Self {
        ProgArray { name: name.to_string(), slots: RwLock::new(vec![None; max_entries as usize]) }
    }

    pub fn max_entries(&self) -> u32 {
        self.slots.read().unwrap_or_else(PoisonError::into_inner).len() as u32
    }

    /// Puts `prog` into `index` (`None` empties it). Targets must share `table` (the
    /// array's own object), so a tail call never changes which maps are reachable.
    pub fn set(
        &self,
        index: u32,
        prog: Option<&Arc<Extension>>,
        table: &Arc<MapTable>,
    ) -> Result<(), ProgArrayError> {
        if let Some(p) = prog {
            if !Arc::ptr_eq(p.maps(), table) {
                return Err(ProgArrayError::ForeignProgram { map: self.name.clone() });
            }
        }
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let max_entries = slots.len() as u32;
        let slot = slots.get_mut(index as usize).ok_or(ProgArrayError::Index {
            map: self.name.clone(),
            index,
            max_entries,
        })?;
        *slot = prog.cloned();
        Ok(())
    }

    /// The program in `index`, if any.
    pub fn get(&self, index: u32) -> Option<Arc<Extension>> {
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        slots.get(index as usize)?.clone()
    }

    /// Empties every slot.
    pub fn clear(&self) {
        self.slots
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .iter_mut()
            .for_each(|s| *s = None);
    }
}

/// Most inner maps (distinct map-in-map slots) one invocation holds; a lookup that
/// would hold one more returns NULL, which every verified program handles.
pub(crate) const MAX_HELD_INNER: usize = 8;
/// Most ring-buffer records one invocation holds reserved at once; a reserve past it
/// returns NULL, as a full ring does.
pub(crate) const MAX_HELD_RECORDS: usize = 8;

/// What one invocation holds until it ends: the inner maps its map-in-map lookups
/// returned (kept alive as the kernel's RCU read section keeps them, and resolved by
/// handle for the helpers), and the ring-buffer records it reserved and has not yet
/// submitted or discarded. Fixed capacity, nothing allocated; an [`XdpEnv`] releases it
/// when the invocation ends, however it ends.
///
/// [`XdpEnv`]: crate::helpers::XdpEnv
pub(crate) struct Held {
    inner: FixedVec<InnerRef, MAX_HELD_INNER>,
    /// `(map handle, record address)`.
    records: FixedVec<(u64, u64), MAX_HELD_RECORDS>,
    /// Inner maps whose value spans are registered in the engine's memory, and the
    /// memory's length just after: a different length means a new engine run (a tail
    /// call) removed them.
    synced: usize,
    synced_len: usize,
    /// The `bpf_spin_lock` word this invocation holds (0: none).
    lock: u64,
}

// SAFETY: a `Held` belongs to one runner, used by one thread at a time; what it holds is
// `Arc<Map>`s (`Send` and `Sync`) and, in each `InnerRef`, the address of an inner-map
// slot that is only compared, never dereferenced through the `Held`.
unsafe impl Send for Held {}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("inner_maps", &self.inner.len)
            .field("records", &self.records.len)
            .finish()
    }
}

impl Held {
    pub(crate) const fn new() -> Held {
        Held { inner: FixedVec::new(), records: FixedVec::new(), synced: 0, synced_len: 0, lock: 0 }
    }

    /// Nothing held: the common case, one compare (of the three counts or'ed
    /// together: no branch per field).
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        (self.inner.len as u64 | self.records.len as u64 | self.lock) == 0
    }

    /// Takes the `bpf_spin_lock` at `addr` (4-aligned, inside a map value, as the
    /// verifier proved): spins, and gives up after [`SPIN_LIMIT`] when a host
    /// application or a stopped holder keeps it (the invocation is then stopped).
    /// One lock at a time, as the verifier allows.
    pub(crate) fn spin_lock(&mut self, addr: u64) -> Result<(), &'static str> {
        if self.lock != 0 || !addr.is_multiple_of(4) {
            return Err("bpf_spin_lock while holding a lock");
        }
        // SAFETY: `addr` is the 4-aligned lock word of a live map value (the verifier
        // proved where it points, the caller checked it is in the program's memory);
        // every access to the word is atomic.
        let word = unsafe { std::sync::atomic::AtomicU32::from_ptr(addr as *mut u32) };
        let mut since: Option<std::time::Instant> = None;
        let mut spins = 0u32;
        loop {
            if word.load(Relaxed) == 0 && word.compare_exchange_weak(0, 1, Acquire, Relaxed).is_ok()
            {
                self.lock = addr;
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            // The clock is read once per 256 tries (PAUSE may be slow under a
            // hypervisor, so a try count alone bounds nothing in time).
            if spins.is_multiple_of(256) {
                let t0 = *since.get_or_insert_with(std::time::Instant::now);
                if t0.elapsed() > SPIN_LIMIT {
                    return Err("bpf_spin_lock: the lock stayed taken too long");
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Releases the lock taken by [`Held::spin_lock`]; `addr` must be that lock.
    pub(crate) fn spin_unlock(&mut self, addr: u64) -> Result<(), &'static str> {
        if self.lock == 0 || self.lock != addr {
            return Err("bpf_spin_unlock of a lock this invocation does not hold");
        }
        self.unlock();
        Ok(())
    }

    fn unlock(&mut self) {
        if self.lock != 0 {
            // SAFETY: the word `spin_lock` took, in a map value that outlives the
            // invocation.
            let word = unsafe { std::sync::atomic::AtomicU32::from_ptr(self.lock as *mut u32) };
            word.store(0, Release);
            self.lock = 0;
        }
    }

    /// The inner map whose handle is `handle`, if this invocation holds it.
    pub(crate) fn inner(&self, handle: u64) -> Option<&Map> {
        self.inner.as_slice().iter().find(|r| r.handle.as_ptr() as u64 == handle).map(|r| &*r.map)
    }

    /// Holds the inner map a lookup found and returns the handle for the program, or 0
    /// (NULL) when all slots are taken or when the program already holds a different
    /// map under the same handle: the slot was refilled during this invocation. An
    /// array_of_maps slot then keeps resolving to the map first seen there (as if the
    /// update came after this invocation); a hash_of_maps slot may now belong to another
    /// key, so that lookup finds nothing.
    pub(crate) fn hold_inner(&mut self, r: InnerRef, outer_is_hash: bool) -> u64 {
        let handle = r.handle.as_ptr() as u64;
        if let Some(held) = self.inner.as_slice().iter().find(|h| h.handle == r.handle) {
            return if Arc::ptr_eq(&held.map, &r.map) || !outer_is_hash { handle } else { 0 };
        }
        match self.inner.push(r) {
            Ok(()) => handle,
            Err(_) => 0,
        }
    }

    /// Registers the value spans of held inner maps in the engine's `mem`, so checked
    /// accesses (the interpreter, helper arguments) reach them as they reach the
    /// object's own maps. Spans already covered are skipped; a span that finds no free
    /// region stays unreachable to checked accesses (they fault), which is safe.
    pub(crate) fn sync_regions(&mut self, mem: &mut Memory) {
        if mem.len() != self.synced_len {
            self.synced = 0;
        }
        let held = self.inner.as_slice();
        while self.synced < held.len() {
            for span in held[self.synced].map.value_spans() {
                let kind = if span.writable { AccessKind::Write } else { AccessKind::Read };
                if mem.check(span.start, span.len as usize, kind) {
                    continue;
                }
                let r = Region { start: span.start, len: span.len, writable: span.writable };
                // SAFETY: the span is the value memory of a map this invocation holds (an
                // `Arc` in `inner`) and maps never move their storage; engines remove
                // every region registered during a run before returning, and `inner` is
                // emptied only after the last run of the invocation.
                let _ = unsafe { mem.push(r) };
            }
            self.synced += 1;
        }
        self.synced_len = mem.len();
    }

    /// Whether another reserved record can be held.
    pub(crate) fn has_record_room(&self) -> bool {
        self.records.len < MAX_HELD_RECORDS
    }

    /// Remembers a record reserved from the ring buffer whose handle is `map`; the
    /// caller checked [`Held::has_record_room`].
    pub(crate) fn add_record(&mut self, map: u64, addr: u64) {
        let pushed = self.records.push((map, addr));
        debug_assert!(pushed.is_ok(), "room checked by the caller");
    }

    /// Forgets the record at `addr` and returns its ring buffer's handle, if this
    /// invocation reserved it and has not committed it yet.
    pub(crate) fn take_record(&mut self, addr: u64) -> Option<u64> {
        let i = self.records.as_slice().iter().position(|&(_, a)| a == addr)?;
        Some(self.records.swap_remove(i).0)
    }

    /// Ends the invocation's hold: every record still reserved is discarded (the
    /// program was stopped between reserve and submit), then the inner maps are let go.
    #[cold]
    #[inline(never)]
    pub(crate) fn release(&mut self, maps: &MapTable) {
        while self.records.len > 0 {
            let (handle, addr) = self.records.swap_remove(self.records.len - 1);
            let map = map_index(handle).and_then(|i| maps.data(i)).or_else(|| self.inner(handle));
            if let Some(rb) = map.and_then(Map::ringbuf) {
                let _ = rb.discard(addr, 0);
            }
        }
        self.inner.clear();
        self.synced = 0;
        self.synced_len = 0;
        // A program stopped between lock and unlock (watchdog, fault) leaves no lock
        // taken behind it.
        self.unlock();
    }
}

/// How long `bpf_spin_lock` waits for a lock before the invocation is stopped: far
/// beyond any critical section a verified program can have (no calls, no loops
/// without bound), so only a host application or a stopped worker holding the word
/// reaches it.
pub(crate) const SPIN_LIMIT: std::time::Duration = std::time::Duration::from_millis(10);

/// A vector of at most `N` elements stored inline: pushing never allocates and creating
/// one writes no element, which keeps [`Held`] free on the per-packet path.
struct FixedVec<T, const N: usize> {
    items: [MaybeUninit<T>; N],
    /// The first `len` items are initialised.
    len: usize,
}

impl<T, const N: usize> FixedVec<T, N> {
    const fn new() -> Self {
        FixedVec { items: [const { MaybeUninit::uninit() }; N], len: 0 }
    }

    fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` items are initialised, and `MaybeUninit<T>` has the
        // layout of `T`.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr().cast::<T>(), self.len) }
    }

    fn push(&mut self, v: T) -> Result<(), T> {
        let Some(slot) = self.items.get_mut(self.len) else { return Err(v) };
        slot.write(v);
        self.len += 1;
        Ok(())
    }

    /// Removes item `i` (which must exist), moving the last one into its place.
    fn swap_remove(&mut self, i: usize) -> T {
        assert!(i < self.len, "index {i} of {} items", self.len);
        let last = self.len - 1;
        self.items.swap(i, last);
        self.len = last;
        // SAFETY: item `last` was initialised (it was below the old `len`) and is no
        // longer counted, so it is read exactly once.
        unsafe { self.items[last].assume_init_read() }
    }

    fn clear(&mut self) {
        while self.len > 0 {
            drop(self.swap_remove(self.len - 1));
        }
    }
}

impl<T, const N: usize> Drop for FixedVec<T, N> {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_map(name: &str, map_type: u32, key: u32, value: u32, entries: u32) -> Arc<Map> {
        let def = MapDef::new(name, map_type, key, value, entries, 0);
        Arc::new(Map::create(def, &MapOptions::default()).unwrap())
    }

    fn outer(map_type: u32) -> Map {
        let def = MapDef::new("outer", map_type, 4, 4, 4, 0);
        let template = MapDef::new("t", map_type::ARRAY, 4, 8, 2, 0);
        Map::create_outer(def, &template, &MapOptions::default()).unwrap()
    }

    fn table() -> MapTable {
        MapTable::create(&object(Vec::new()), &Domain::default_domain(), 1, 0).unwrap()
    }

    fn key(k: u32) -> [u8; 4] {
        k.to_ne_bytes()
    }

    fn spec(name: &str, map_type: u32, value_size: u32) -> MapSpec {
        MapSpec {
            name: name.into(),
            map_type,
            key_size: 4,
            value_size,
            max_entries: 4,
            flags: 0,
            pinning: 0,
            numa_node: 0,
            map_extra: 0,
            initial: None,
            origin: MapOrigin::Btf,
            inner: None,
            init_slots: Vec::new(),
            spin_lock: None,
            timer: None,
            btf_key_type_id: 0,
            btf_value_type_id: 0,
        }
    }

    fn object(maps: Vec<MapSpec>) -> Object {
        Object {
            license: String::new(),
            programs: Vec::new(),
            maps,
            skipped: Vec::new(),
            btf: None,
        }
    }

    #[test]
    fn outer_maps_are_created_from_their_template_and_filled_from_their_slots() {
        let inner = spec("inner", map_type::ARRAY, 8);
        let mut outer = spec("outer", map_type::HASH_OF_MAPS, 4);
        outer.inner = Some(Box::new(spec("outer.inner", map_type::ARRAY, 8)));
        outer.init_slots = vec![(2, SlotTarget::Map(0))];
        let domain = Domain::default_domain();
        let t = MapTable::create(&object(vec![inner.clone(), outer.clone()]), &domain, 1, 0);
        let t = t.unwrap();
        let (i, o) = (t.data(0).unwrap(), t.data(1).unwrap());
        assert_eq!(o.inner_template().map(|d| d.value_size), Some(8));
        let slot2 = o.inner(&key(2)).unwrap();
        assert!(std::ptr::eq(&*slot2, i), "slot 2 holds the object's `inner`");
        assert!(o.inner(&key(0)).is_none());

        let mut no_template = outer.clone();
        no_template.inner = None;
        let err = MapTable::create(&object(vec![inner.clone(), no_template]), &domain, 1, 0);
        let err = err.err().unwrap();
        assert!(
            matches!(&err, LoadError::Map { map, source: MapError::NoInnerTemplate { .. } } if map == "outer"),
            "{err}"
        );
        let mut wrong = inner.clone();
        wrong.value_size = 4;
        let err = MapTable::create(&object(vec![wrong, outer.clone()]), &domain, 1, 0);
        let err = err.err().unwrap();
        assert!(matches!(&err, LoadError::Map { source: MapError::InnerMismatch { .. }, .. }));
        let progs = spec("progs", map_type::PROG_ARRAY, 4);
        let err = MapTable::create(&object(vec![progs, outer.clone()]), &domain, 1, 0);
        let err = err.err().unwrap();
        assert!(matches!(&err, LoadError::Map { source: MapError::InnerMismatch { .. }, .. }));
    }

    #[test]
    fn unloading_returns_the_bytes_of_inner_maps_held_only_by_outer_maps() {
        let domain = Domain::default_domain();
        let before = domain.map_bytes_left();
        for map_type in [map_type::ARRAY_OF_MAPS, map_type::HASH_OF_MAPS] {
            let inner = spec("inner", map_type::ARRAY, 8);
            let mut outer = spec("outer", map_type, 4);
            outer.inner = Some(Box::new(spec("outer.inner", map_type::ARRAY, 8)));
            outer.init_slots = vec![(1, SlotTarget::Map(0))];
            let t = MapTable::create(&object(vec![inner, outer]), &domain, 1, 0).unwrap();
            assert!(domain.map_bytes_left() < before);
            drop(t);
            assert_eq!(domain.map_bytes_left(), before, "type {map_type}");
        }
    }

    #[test]
    fn a_shared_outer_map_must_match_in_its_template_and_keeps_its_slots() {
        let domain = Domain::new(crate::DomainSpec {
            shared_maps: vec!["outer".into()],
            ..crate::DomainSpec::default_domain()
        });
        let inner = spec("inner", map_type::ARRAY, 8);
        let mut outer = spec("outer", map_type::ARRAY_OF_MAPS, 4);
        outer.inner = Some(Box::new(spec("outer.inner", map_type::ARRAY, 8)));
        outer.init_slots = vec![(1, SlotTarget::Map(0))];
        let first = MapTable::create(&object(vec![inner.clone(), outer.clone()]), &domain, 1, 0);
        let first = first.unwrap();
        let second = MapTable::create(&object(vec![inner.clone(), outer.clone()]), &domain, 1, 0);
        let second = second.unwrap();
        let (o1, o2) = (first.data(1).unwrap(), second.data(1).unwrap());
        assert!(std::ptr::eq(o1, o2), "one shared instance");
        let in_slot = o1.inner(&key(1)).unwrap();
        assert!(std::ptr::eq(&*in_slot, first.data(0).unwrap()), "the creator's slots stay");
        let mut other = outer.clone();
        other.inner = Some(Box::new(spec("outer.inner", map_type::ARRAY, 16)));
        let err = MapTable::create(&object(vec![inner, other]), &domain, 1, 0).err().unwrap();
        assert!(matches!(err, LoadError::Domain(DomainError::MapMismatch { .. })), "{err}");
    }

    #[test]
    fn a_slot_refilled_during_an_invocation_never_changes_what_its_handle_names() {
        let (m1, m2) =
            (new_map("m1", map_type::ARRAY, 4, 8, 2), new_map("m2", map_type::ARRAY, 4, 8, 2));
        // array_of_maps: the handle keeps naming the map first seen in its slot.
        let arr = outer(map_type::ARRAY_OF_MAPS);
        arr.set_inner(&key(0), Some(m1.clone()), 0).unwrap();
        let mut held = Held::new();
        let h = held.hold_inner(arr.lookup_inner(&key(0)).unwrap(), false);
        arr.set_inner(&key(0), Some(m2.clone()), 0).unwrap();
        assert_eq!(held.hold_inner(arr.lookup_inner(&key(0)).unwrap(), false), h);
        assert!(std::ptr::eq(held.inner(h).unwrap(), &*m1));
        // hash_of_maps: a freed slot may go to another key; that lookup finds nothing.
        let hash = outer(map_type::HASH_OF_MAPS);
        hash.set_inner(&key(1), Some(m1.clone()), 0).unwrap();
        let mut held = Held::new();
        let h = held.hold_inner(hash.lookup_inner(&key(1)).unwrap(), true);
        hash.set_inner(&key(1), None, 0).unwrap();
        hash.set_inner(&key(2), Some(m2.clone()), 0).unwrap();
        let r = hash.lookup_inner(&key(2)).unwrap();
        assert_eq!(r.handle.as_ptr() as u64, h, "the freed slot was reused");
        assert_eq!(held.hold_inner(r, true), 0);
        assert!(std::ptr::eq(held.inner(h).unwrap(), &*m1));
        held.release(&table());
        assert!(held.is_empty() && held.inner(h).is_none());
    }

    #[test]
    fn holding_is_bounded_and_release_discards_reserved_records() {
        // Distinct handles from distinct outer maps, all alive (as an object's are).
        let outers: Vec<Map> = (0..MAX_HELD_INNER + 3)
            .map(|_| {
                let o = outer(map_type::ARRAY_OF_MAPS);
                o.set_inner(&key(0), Some(new_map("m", map_type::ARRAY, 4, 8, 2)), 0).unwrap();
                o
            })
            .collect();
        let mut held = Held::new();
        let handles: Vec<u64> = outers
            .iter()
            .map(|o| held.hold_inner(o.lookup_inner(&key(0)).unwrap(), false))
            .collect();
        assert!(handles[..MAX_HELD_INNER].iter().all(|&h| h != 0));
        assert!(handles[MAX_HELD_INNER..].iter().all(|&h| h == 0), "{handles:x?}");
        assert_eq!(held.hold_inner(outers[0].lookup_inner(&key(0)).unwrap(), false), handles[0]);

        let ring = new_map("ring", map_type::RINGBUF, 0, 0, 4096);
        let rb = ring.ringbuf().unwrap();
        let rings = Map::create_outer(
            MapDef::new("rings", map_type::ARRAY_OF_MAPS, 4, 4, 1, 0),
            ring.def(),
            &MapOptions::default(),
        )
        .unwrap();
        rings.set_inner(&key(0), Some(ring.clone()), 0).unwrap();
        let mut held = Held::new();
        let ring_handle = held.hold_inner(rings.lookup_inner(&key(0)).unwrap(), false);
        for _ in 0..MAX_HELD_RECORDS {
            assert!(held.has_record_room());
            let rec = rb.reserve(16, 0).unwrap();
            held.add_record(ring_handle, rec.as_ptr() as u64);
        }
        assert!(!held.has_record_room());
        assert!(!rb.has_data(), "the consumer waits at a reserved record");
        held.release(&table());
        assert!(held.is_empty());
        assert_eq!(rb.consume(|_| panic!("discarded records are skipped")), 0);
        assert_eq!(rb.avail_data(), 0, "the consumer passed every released record");
    }

    #[test]
    fn inner_map_regions_are_registered_once_per_engine_run() {
        let arr = outer(map_type::ARRAY_OF_MAPS);
        let m = new_map("m", map_type::ARRAY, 4, 8, 2);
        arr.set_inner(&key(0), Some(m.clone()), 0).unwrap();
        let mut held = Held::new();
        held.hold_inner(arr.lookup_inner(&key(0)).unwrap(), false);
        let span = m.value_spans()[0];
        let mut mem = Memory::new();
        assert!(!mem.check(span.start, 8, AccessKind::Write));
        held.sync_regions(&mut mem);
        held.sync_regions(&mut mem);
        assert_eq!(mem.len(), 1, "registered once");
        assert!(mem.check(span.start, span.len as usize, AccessKind::Write));
        // A new engine run (a tail call) starts without them: registered again.
        mem.truncate(0);
        held.sync_regions(&mut mem);
        assert!(mem.check(span.start, 8, AccessKind::Read));
    }
}
