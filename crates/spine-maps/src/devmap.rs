//! `BPF_MAP_TYPE_DEVMAP` and `BPF_MAP_TYPE_DEVMAP_HASH` (`kernel/bpf/devmap.c`): the
//! ports `bpf_redirect_map` sends packets to. A value is `u32 ifindex` (4 bytes) or
//! `struct bpf_devmap_val { u32 ifindex; union { int fd; u32 id; } bpf_prog; }` (8).
//!
//! A devmap is an array (every index exists for `next_key`, a missing entry is `ENOENT`
//! for a lookup, an update with ifindex 0 or a delete empties a slot); a devmap_hash is
//! a hash map keyed by the `u32` itself, in the kernel's bucket order.
//!
//! Differences from the kernel, by design of this layer:
//! - The kernel refuses an ifindex that names no network device (`EINVAL`). Maps have
//!   no devices, so any non-zero ifindex is accepted here; the adapter validates the
//!   port when it redirects.
//! - A program fd in `bpf_prog` (`> 0`) is refused with `EINVAL` (the kernel's answer
//!   for an fd that is no devmap program): devmap programs are not supported yet. A
//!   negative fd means "no program", as in the kernel, and reads back as id 0.
//! - The kernel's verifier allows programs only `bpf_map_lookup_elem` and
//!   `bpf_redirect_map` on these maps; the program-side update and delete refuse.

use std::ptr::NonNull;
use std::sync::Arc;

use spine_abi::map_type;
use spine_abi::update_flags::{ANY, EXIST, NOEXIST};

use crate::def::MapDef;
use crate::entry_array::{parse_value, EntryArray};
use crate::hash::{HashTab, KeyHash, Side};
use crate::storage::Arena;
use crate::MapError;

/// An array devmap.
#[derive(Debug)]
pub(crate) struct DevMap {
    entries: EntryArray,
}

impl DevMap {
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        EntryArray::bytes(def)
    }

    pub(crate) fn new(def: &MapDef) -> Result<DevMap, MapError> {
        Ok(DevMap { entries: EntryArray::new(def)? })
    }

    pub(crate) fn entries(&self) -> &EntryArray {
        &self.entries
    }

    /// `__dev_map_update_elem`, the checks in the kernel's order.
    pub(crate) fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        let e = &self.entries;
        let i = EntryArray::index(key);
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: e.name(), flags });
        }
        if i >= e.max_entries() {
            let max_entries = e.max_entries();
            return Err(MapError::IndexOutOfRange { map: e.name(), index: i, max_entries });
        }
        if flags == NOEXIST {
            return Err(MapError::Exists { map: e.name() });
        }
        let (ifindex, fd) = parse_value(value);
        if fd > 0 {
            // With ifindex 0 "can not specify fd"; otherwise no program is usable.
            return Err(entry_program(e.name(), map_type::DEVMAP, fd));
        }
        if ifindex == 0 {
            e.clear(i);
        } else {
            e.set(i, ifindex);
        }
        Ok(())
    }

    /// `dev_map_delete_elem`: empties the slot (`EINVAL` out of range, success when the
    /// slot is already empty).
    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.entries.delete_user(key)
    }
}

/// A devmap_hash: a preallocated hash table hashed by the key itself.
#[derive(Debug)]
pub(crate) struct DevMapHash {
    name: Arc<str>,
    value_size: usize,
    tab: HashTab,
}

impl DevMapHash {
    pub(crate) fn bytes(def: &MapDef, ncpus: usize) -> Option<u128> {
        HashTab::bytes(def, false, false, ncpus)
    }

    pub(crate) fn new(def: &MapDef, ncpus: usize) -> Result<DevMapHash, MapError> {
        Ok(DevMapHash {
            name: def.name.clone(),
            value_size: def.value_size as usize,
            tab: HashTab::new(def, false, None, ncpus, KeyHash::Identity)?,
        })
    }

    pub(crate) fn values(&self) -> &Arena {
        self.tab.values()
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Option<NonNull<u8>> {
        self.tab.lookup(key, 0)
    }

    /// `__dev_map_hash_update_elem`: `BPF_EXIST` is not checked (it inserts a missing
    /// key, as measured), ifindex 0 is `EINVAL`, the program is checked after `EEXIST`
    /// and before the map is found full.
    pub(crate) fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        let (ifindex, fd) = parse_value(value);
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        if ifindex == 0 {
            return Err(MapError::ZeroIfindex { map: self.name.clone() });
        }
        if fd > 0 {
            if flags == NOEXIST && self.tab.lookup(key, 0).is_some() {
                return Err(MapError::Exists { map: self.name.clone() });
            }
            return Err(entry_program(self.name.clone(), map_type::DEVMAP_HASH, fd));
        }
        let mut stored = [0u8; 8];
        stored[..4].copy_from_slice(&ifindex.to_ne_bytes());
        let flags = if flags == NOEXIST { NOEXIST } else { ANY };
        self.tab.update(key, &stored[..self.value_size], flags, Side::User)
    }

    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.tab.delete(key, Side::User)
    }

    pub(crate) fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        self.tab.lookup_user(key, out, false)
    }

    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        self.tab.next_key(key, out)
    }

    pub(crate) fn len(&self) -> usize {
        self.tab.len()
    }

    #[cfg(test)]
    pub(crate) fn check_consistency(&self) -> usize {
        self.tab.check_consistency()
    }
}

fn entry_program(map: Arc<str>, map_type: u32, fd: i32) -> MapError {
    MapError::EntryProgram { map, map_type, fd }
}
