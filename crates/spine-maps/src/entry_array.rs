//! The storage of a devmap and a cpumap: an array of optional entries, one 8-byte word
//! per index and a presence flag. The word's first `u32` is the entry (an ifindex, a
//! queue size, never 0), the second the id of the entry's program (always 0: entry
//! programs are not supported yet).
//!
//! Every word is read and written whole, with one atomic access, so a worker redirecting
//! through an entry sees the old or the new one, never half of each. The kernel swaps a
//! pointer to a new entry under RCU, so a program that looked an entry up keeps reading
//! a valid one even if it is deleted meanwhile; here a delete only clears the presence
//! flag and leaves the word, so a pointer from a successful lookup always reads a
//! non-zero entry (a later update may show through it, where the kernel would show the
//! old entry).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;

use crate::def::MapDef;
use crate::storage::{zeroed_slice, Arena};
use crate::MapError;

/// Bytes of one entry: the padded `value_size` (4 or 8).
const WORD: usize = 8;

#[derive(Debug)]
pub(crate) struct EntryArray {
    name: Arc<str>,
    max_entries: u32,
    value_size: usize,
    values: Arena,
    /// Set after the word is written (release), read before it (acquire).
    present: Box<[AtomicBool]>,
}

impl EntryArray {
    /// Bytes of value memory the map needs.
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        def.max_entries as u128 * (WORD as u128 + 1)
    }

    /// Allocates the entries, all absent; `def` passed the creation checks and the budget.
    pub(crate) fn new(def: &MapDef) -> Result<EntryArray, MapError> {
        let len = def.max_entries as usize * WORD;
        // `value_size` 8 for the arena: every access is one aligned word.
        let oom = || MapError::OutOfMemory { map: def.name.clone(), bytes: len as u64 };
        let values = Arena::new(len, WORD, true).ok_or_else(oom)?;
        let present = zeroed_slice(def.max_entries as usize).ok_or_else(oom)?;
        Ok(EntryArray {
            name: def.name.clone(),
            max_entries: def.max_entries,
            value_size: def.value_size as usize,
            values,
            present,
        })
    }

    pub(crate) fn values(&self) -> &Arena {
        &self.values
    }

    pub(crate) fn max_entries(&self) -> u32 {
        self.max_entries
    }

    pub(crate) fn name(&self) -> Arc<str> {
        self.name.clone()
    }

    /// The index a 4-byte key names (the caller checked the length).
    pub(crate) fn index(key: &[u8]) -> u32 {
        u32::from_ne_bytes([key[0], key[1], key[2], key[3]])
    }

    fn word(&self, i: u32) -> [u8; WORD] {
        let mut w = [0u8; WORD];
        self.values.read(i as usize * WORD, &mut w);
        w
    }

    fn is_present(&self, i: u32) -> bool {
        self.present.get(i as usize).is_some_and(|p| p.load(Acquire))
    }

    /// The entry at `i`, if `i` is in range and the entry present.
    fn get(&self, i: u32) -> Option<[u8; WORD]> {
        self.is_present(i).then(|| self.word(i))
    }

    /// Program side: the entry's value, if present.
    pub(crate) fn lookup(&self, key: &[u8]) -> Option<NonNull<u8>> {
        let i = Self::index(key);
        self.is_present(i).then(|| self.values.ptr_at(i as usize * WORD))
    }

    /// Sets entry `i` (in range) to `first` (non-zero) and a zero program id.
    pub(crate) fn set(&self, i: u32, first: u32) {
        debug_assert_ne!(first, 0, "a zero entry is an absent one");
        let mut w = [0u8; WORD];
        w[..4].copy_from_slice(&first.to_ne_bytes());
        self.values.write(i as usize * WORD, &w);
        self.present[i as usize].store(true, Release);
    }

    /// Sets entry `i` (in range) to the whole word `first`, `second` (an xskmap's
    /// record: the queue id, then the port or endpoint it stands for; `second` non-zero).
    pub(crate) fn set_pair(&self, i: u32, first: u32, second: u32) {
        debug_assert_ne!(second, 0, "a zero entry is an absent one");
        let mut w = [0u8; WORD];
        w[..4].copy_from_slice(&first.to_ne_bytes());
        w[4..].copy_from_slice(&second.to_ne_bytes());
        self.values.write(i as usize * WORD, &w);
        self.present[i as usize].store(true, Release);
    }

    /// The second `u32` of entry `i`'s word, if `i` is in range and the entry present.
    pub(crate) fn second(&self, i: u32) -> Option<u32> {
        let w = self.get(i)?;
        Some(u32::from_ne_bytes([w[4], w[5], w[6], w[7]]))
    }

    /// Makes entry `i` (in range) absent; its word stays for readers that hold it.
    pub(crate) fn clear(&self, i: u32) {
        self.present[i as usize].store(false, Release);
    }

    /// `BPF_MAP_DELETE_ELEM` as the devmap, cpumap and xskmap have it: `EINVAL` for an
    /// index out of range, success on an empty slot.
    pub(crate) fn delete_user(&self, key: &[u8]) -> Result<(), MapError> {
        let i = Self::index(key);
        if i >= self.max_entries {
            let max_entries = self.max_entries;
            return Err(MapError::DeleteOutOfRange { map: self.name(), index: i, max_entries });
        }
        self.clear(i);
        Ok(())
    }

    /// `BPF_MAP_LOOKUP_ELEM`: `ENOENT` for an index out of range or an absent entry.
    pub(crate) fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        let w = self.get(Self::index(key)).ok_or(MapError::NotFound { map: self.name() })?;
        out.copy_from_slice(&w[..self.value_size]);
        Ok(())
    }

    /// `dev_map_get_next_key` / `cpu_map_get_next_key`: every index, present or not, as
    /// an array's; index 0 for no key or an out-of-range one.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        let i = key.map_or(u32::MAX, Self::index);
        let next = if i >= self.max_entries {
            0
        } else if i == self.max_entries - 1 {
            return Err(MapError::NotFound { map: self.name() });
        } else {
            i + 1
        };
        out[..4].copy_from_slice(&next.to_ne_bytes());
        Ok(())
    }

    /// Number of present entries (a walk of the array: slow path).
    pub(crate) fn len(&self) -> usize {
        (0..self.max_entries).filter(|&i| self.is_present(i)).count()
    }
}

/// A devmap or cpumap value as user space writes it: the entry and, for an 8-byte value,
/// the program fd (`union { int fd; u32 id; } bpf_prog`).
pub(crate) fn parse_value(value: &[u8]) -> (u32, i32) {
    let first = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]);
    let fd = match value.get(4..8) {
        Some(b) => i32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    };
    (first, fd)
}
