//! `BPF_MAP_TYPE_ARRAY_OF_MAPS` and `BPF_MAP_TYPE_HASH_OF_MAPS` (`kernel/bpf/arraymap.c`,
//! `hashtab.c`, `map_in_map.c`): maps whose values are other maps, all matching the
//! template the outer map was created with.
//!
//! Inner maps live in *slots*: each holds an `Arc<Map>` behind a short lock, and a word
//! at a fixed address (the slot's index) that stands for the slot. A program-side lookup
//! returns that word's address: the runtime gives it to the program as the inner map's
//! handle and resolves it with [`OuterMap::inner_by_slot`] (no region covers the word,
//! so the program cannot dereference it, as it cannot dereference a kernel `bpf_map *`).
//! An array_of_maps' slot `i` is index `i`. A hash_of_maps keeps key → (slot, generation)
//! in a hash table and takes a free slot for every update; an existing key's entry is
//! rewritten in place (it keeps its place in `next_key` order, as measured on the
//! kernel) and the old slot is emptied afterwards, so readers racing with a replacement
//! see the old or the new map.
//!
//! Lifetime: `inner_by_slot` and `lookup_inner` clone the `Arc` under the slot's lock, so
//! a map replaced or deleted while a worker uses it stays alive until the worker drops
//! its clone. The kernel keeps an inner map alive for a whole program run through RCU;
//! the runtime gets the same by holding the clone for the invocation. Cost per resolve:
//! an uncontended mutex (two atomic read-modify-writes) and the `Arc` count (one more,
//! and one to drop it), on cache lines shared by every worker using the slot; the kernel
//! pays nothing. Writers (the control plane only: programs cannot update these maps)
//! are serialised by one mutex.

use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use spine_abi::map_flags as mf;
use spine_abi::map_type as mt;
use spine_abi::update_flags::{ANY, EXIST, NOEXIST};

use crate::def::MapDef;
use crate::hash::{HashTab, KeyHash, Side};
use crate::{Map, MapError};

/// What a slot holds; `gen` changes on every assignment, so a hash entry that names an
/// emptied or reassigned slot is recognised as stale.
#[derive(Debug, Default)]
struct SlotState {
    gen: u32,
    map: Option<Arc<Map>>,
}

#[derive(Debug)]
struct Slot {
    /// The slot's index; its address is the handle programs get.
    index: u64,
    state: Mutex<SlotState>,
}

impl Slot {
    fn state(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An inner map found by a program-side lookup: the handle to give the program (stable
/// for the outer map's life) and the map, kept alive by this clone.
#[derive(Debug, Clone)]
pub struct InnerRef {
    pub handle: NonNull<u8>,
    pub map: Arc<Map>,
}

#[derive(Debug)]
enum Index {
    Array,
    /// Key → `slot | gen << 32`, and the free slots (under `writer`).
    Hash {
        tab: Box<HashTab>,
        free: Mutex<Vec<u32>>,
    },
}

#[derive(Debug)]
pub(crate) struct OuterMap {
    name: Arc<str>,
    max_entries: u32,
    ncpus: usize,
    template: MapDef,
    slots: Box<[Slot]>,
    index: Index,
    /// Serialises control-plane writers.
    writer: Mutex<()>,
}

/// Bounded retries of a hash_of_maps lookup that keeps finding a stale slot (only under
/// a writer replacing the same key continuously).
const STALE_RETRIES: usize = 16;

impl OuterMap {
    /// Bytes the map needs (slots, and for a hash_of_maps its table), or `None` on
    /// overflow.
    pub(crate) fn bytes(def: &MapDef, hash: bool, ncpus: usize) -> Option<u128> {
        let slots = (def.max_entries as u128 + 1) * std::mem::size_of::<Slot>() as u128;
        if hash {
            Some(slots + HashTab::bytes(&Self::table_def(def), false, false, ncpus)?)
        } else {
            Some(slots)
        }
    }

    /// The hash table of a hash_of_maps: its key, an 8-byte slot reference.
    fn table_def(def: &MapDef) -> MapDef {
        MapDef { map_type: mt::HASH, value_size: 8, ..def.clone() }
    }

    /// Builds the map; `def` and `template` passed the creation checks and the budget.
    pub(crate) fn new(
        def: &MapDef,
        template: MapDef,
        hash: bool,
        ncpus: usize,
        seed: u64,
    ) -> Result<OuterMap, MapError> {
        // A hash_of_maps needs one spare slot: an update fills a new slot before the
        // old one is emptied.
        let n = def.max_entries as usize + usize::from(hash);
        let slots = (0..n as u64).map(|index| Slot { index, state: Mutex::default() }).collect();
        let index = if hash {
            let key_hash = KeyHash::Jhash { seed };
            let tab = Box::new(HashTab::new(&Self::table_def(def), false, None, ncpus, key_hash)?);
            Index::Hash { tab, free: Mutex::new((0..n as u32).rev().collect()) }
        } else {
            Index::Array
        };
        Ok(OuterMap {
            name: def.name.clone(),
            max_entries: def.max_entries,
            ncpus,
            template,
            slots,
            index,
            writer: Mutex::new(()),
        })
    }

    pub(crate) fn template(&self) -> &MapDef {
        &self.template
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writer.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `bpf_map_meta_equal` (and `array_map_meta_equal` for an array template without
    /// `BPF_F_INNER_MAP`): type, key and value size and flags as the template's (but for
    /// the user-space access flags, which the kernel does not keep in `map_flags`); a
    /// plain array's `max_entries` too; and, spine's addition, the same CPU count.
    fn check_inner(&self, inner: &Map) -> Result<(), MapError> {
        let (t, d) = (&self.template, inner.def());
        let same_size = t.map_type != mt::ARRAY
            || t.flags & mf::INNER_MAP != 0
            || t.max_entries == d.max_entries;
        let kept = |flags: u32| flags & !(mf::RDONLY | mf::WRONLY);
        if (t.map_type, t.key_size, t.value_size, kept(t.flags))
            == (d.map_type, d.key_size, d.value_size, kept(d.flags))
            && same_size
            && inner.ncpus() == self.ncpus
        {
            Ok(())
        } else {
            Err(MapError::InnerMismatch { map: self.name.clone(), inner: d.name.clone() })
        }
    }

    fn array_index(&self, key: &[u8]) -> u32 {
        u32::from_ne_bytes([key[0], key[1], key[2], key[3]])
    }

    /// The slot and generation a hash_of_maps entry names.
    fn hash_slot(tab: &HashTab, key: &[u8]) -> Option<(u32, u32)> {
        let mut v = [0u8; 8];
        tab.lookup_user(key, &mut v, false).ok()?;
        let w = u64::from_ne_bytes(v);
        Some((w as u32, (w >> 32) as u32))
    }

    fn slot_ptr(&self, slot: usize) -> NonNull<u8> {
        NonNull::from(&self.slots[slot].index).cast()
    }

    /// Program side: the handle of the inner map at `key`, if any. Use
    /// [`OuterMap::lookup_inner`] to also hold the map.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<NonNull<u8>> {
        self.lookup_inner(key).map(|r| r.handle)
    }

    /// Program side: the inner map at `key` and its handle.
    pub(crate) fn lookup_inner(&self, key: &[u8]) -> Option<InnerRef> {
        match &self.index {
            Index::Array => {
                let i = self.array_index(key);
                let map = self.slots.get(i as usize)?.state().map.clone()?;
                Some(InnerRef { handle: self.slot_ptr(i as usize), map })
            }
            Index::Hash { tab, .. } => {
                for _ in 0..STALE_RETRIES {
                    let (slot, gen) = Self::hash_slot(tab, key)?;
                    let st = self.slots[slot as usize].state();
                    if st.gen == gen {
                        let map = st.map.clone()?;
                        return Some(InnerRef { handle: self.slot_ptr(slot as usize), map });
                    }
                }
                None
            }
        }
    }

    /// The map currently in the slot whose handle is `addr`; `None` if `addr` is no
    /// slot handle of this map or the slot is empty.
    pub(crate) fn inner_by_slot(&self, addr: u64) -> Option<Arc<Map>> {
        let base = self.slots.as_ptr() as u64;
        let stride = std::mem::size_of::<Slot>() as u64;
        let off = addr.checked_sub(base + std::mem::offset_of!(Slot, index) as u64)?;
        if off % stride != 0 {
            return None;
        }
        self.slots.get((off / stride) as usize)?.state().map.clone()
    }

    /// The map at `key` (control plane).
    pub(crate) fn inner(&self, key: &[u8]) -> Option<Arc<Map>> {
        self.lookup_inner(key).map(|r| r.map)
    }

    /// `BPF_MAP_LOOKUP_ELEM`: the inner map's id, as the kernel's `map_fd_sys_lookup_elem`.
    pub(crate) fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        let m = self.inner(key).ok_or_else(|| MapError::NotFound { map: self.name.clone() })?;
        out.copy_from_slice(&m.id().to_ne_bytes());
        Ok(())
    }

    /// `BPF_MAP_UPDATE_ELEM` with `inner` as the value, in the kernel's order: an
    /// array_of_maps checks the flags (only `BPF_ANY`) and the index before the inner
    /// map; a hash_of_maps checks the inner map first, then a hash map's rules.
    pub(crate) fn update(&self, key: &[u8], inner: Arc<Map>, flags: u64) -> Result<(), MapError> {
        let _w = self.writer();
        match &self.index {
            Index::Array => {
                let i = self.array_index(key);
                if flags != ANY {
                    return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
                }
                if i >= self.max_entries {
                    let max_entries = self.max_entries;
                    return Err(MapError::IndexOutOfRange {
                        map: self.name.clone(),
                        index: i,
                        max_entries,
                    });
                }
                self.check_inner(&inner)?;
                let old = {
                    let mut st = self.slots[i as usize].state();
                    st.gen = st.gen.wrapping_add(1);
                    st.map.replace(inner)
                };
                drop(old);
                Ok(())
            }
            Index::Hash { tab, free } => {
                self.check_inner(&inner)?;
                if flags > EXIST {
                    return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
                }
                let old = Self::hash_slot(tab, key);
                let mut free = free.lock().unwrap_or_else(PoisonError::into_inner);
                // Writers are serialised and every held slot is linked, so at most
                // `max_entries` are held and the spare is free.
                let full =
                    || MapError::Full { map: self.name.clone(), max_entries: self.max_entries };
                let slot = free.pop().ok_or_else(full)?;
                let gen = {
                    let mut st = self.slots[slot as usize].state();
                    st.gen = st.gen.wrapping_add(1);
                    st.map = Some(inner);
                    st.gen
                };
                let word = (u64::from(slot) | u64::from(gen) << 32).to_ne_bytes();
                // An existing key's entry is rewritten where it is (one atomic word, so
                // readers see the old slot or the new one); a new key is linked.
                let res = match old {
                    Some(_) if flags == NOEXIST => Err(MapError::Exists { map: self.name.clone() }),
                    Some(_) => tab.replace_in_place(key, &word),
                    None => tab.update(key, &word, flags, Side::User),
                };
                // On failure the new slot is emptied; on success the old one.
                let retired = if res.is_ok() { old.map(|(s, _)| s) } else { Some(slot) };
                if let Some(s) = retired {
                    let map = {
                        let mut st = self.slots[s as usize].state();
                        st.gen = st.gen.wrapping_add(1);
                        st.map.take()
                    };
                    free.push(s);
                    drop(map);
                }
                res
            }
        }
    }

    /// `BPF_MAP_DELETE_ELEM`: an array_of_maps empties the slot (`E2BIG` out of range,
    /// `ENOENT` if empty); a hash_of_maps removes the key (`ENOENT` if missing).
    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let _w = self.writer();
        let not_found = || MapError::NotFound { map: self.name.clone() };
        let (slot, tab_free) = match &self.index {
            Index::Array => {
                let i = self.array_index(key);
                if i >= self.max_entries {
                    let max_entries = self.max_entries;
                    let map = self.name.clone();
                    return Err(MapError::IndexOutOfRange { map, index: i, max_entries });
                }
                (i, None)
            }
            Index::Hash { tab, free } => {
                let (slot, _) = Self::hash_slot(tab, key).ok_or_else(not_found)?;
                tab.delete(key, Side::User)?;
                (slot, Some(free))
            }
        };
        let map = {
            let mut st = self.slots[slot as usize].state();
            st.gen = st.gen.wrapping_add(1);
            st.map.take()
        };
        if let Some(free) = tab_free {
            free.lock().unwrap_or_else(PoisonError::into_inner).push(slot);
        }
        map.map(drop).ok_or_else(not_found)
    }

    /// `BPF_MAP_GET_NEXT_KEY`: an array_of_maps lists every index, a hash_of_maps its keys
    /// in bucket order.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        match &self.index {
            Index::Array => {
                let i = key.map_or(u32::MAX, |k| self.array_index(k));
                let next = if i >= self.max_entries {
                    0
                } else if i == self.max_entries - 1 {
                    return Err(MapError::NotFound { map: self.name.clone() });
                } else {
                    i + 1
                };
                out[..4].copy_from_slice(&next.to_ne_bytes());
                Ok(())
            }
            Index::Hash { tab, .. } => tab.next_key(key, out),
        }
    }

    /// Number of inner maps held (slow path).
    pub(crate) fn len(&self) -> usize {
        match &self.index {
            Index::Array => self.slots.iter().filter(|s| s.state().map.is_some()).count(),
            Index::Hash { tab, .. } => tab.len(),
        }
    }
}
