//! `BPF_MAP_TYPE_CPUMAP` (`kernel/bpf/cpumap.c`): the CPUs `bpf_redirect_map` hands
//! packets to, keyed by CPU index (in spine, the worker index). A value is `u32 qsize`
//! (4 bytes) or `struct bpf_cpumap_val { u32 qsize; union { int fd; u32 id; } bpf_prog; }`
//! (8). An update with qsize 0 empties the slot, as a delete does.
//!
//! Differences from the kernel:
//! - The CPUs that exist are the map's `ncpus` workers (the kernel's possible CPUs):
//!   an entry for a higher index is `ENODEV`. `max_entries` is bounded by the reference
//!   kernel's `NR_CPUS` (256).
//! - The queue itself (the kernel's per-entry kthread and ptr_ring of `qsize` frames)
//!   belongs to the adapter; the map only records `qsize`.
//! - A program fd in `bpf_prog` (`> 0`) is refused with `ENOMEM`, the kernel's answer
//!   for an fd that is no cpumap program: cpumap programs are not supported yet.
//! - The kernel's verifier allows programs only `bpf_redirect_map` on a cpumap (not even
//!   a lookup); [`crate::Map::lookup`] still answers, for the runtime's redirect.

use spine_abi::map_type;
use spine_abi::update_flags::{EXIST, NOEXIST};

use crate::def::MapDef;
use crate::entry_array::{parse_value, EntryArray};
use crate::MapError;

/// The kernel's sanity limit on a cpumap entry's queue size.
pub(crate) const MAX_QSIZE: u32 = 16384;

#[derive(Debug)]
pub(crate) struct CpuMap {
    entries: EntryArray,
    ncpus: usize,
}

impl CpuMap {
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        EntryArray::bytes(def)
    }

    pub(crate) fn new(def: &MapDef, ncpus: usize) -> Result<CpuMap, MapError> {
        Ok(CpuMap { entries: EntryArray::new(def)?, ncpus })
    }

    pub(crate) fn entries(&self) -> &EntryArray {
        &self.entries
    }

    /// `cpu_map_update_elem`, the checks in the kernel's order.
    pub(crate) fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        let e = &self.entries;
        let cpu = EntryArray::index(key);
        let (qsize, fd) = parse_value(value);
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: e.name(), flags });
        }
        if cpu >= e.max_entries() {
            let max_entries = e.max_entries();
            return Err(MapError::IndexOutOfRange { map: e.name(), index: cpu, max_entries });
        }
        if flags == NOEXIST {
            return Err(MapError::Exists { map: e.name() });
        }
        if qsize > MAX_QSIZE {
            return Err(MapError::QueueSize { map: e.name(), qsize, max: MAX_QSIZE });
        }
        if cpu as usize >= self.ncpus {
            return Err(MapError::NoSuchCpu { map: e.name(), cpu, ncpus: self.ncpus });
        }
        if qsize == 0 {
            e.clear(cpu);
            return Ok(());
        }
        if fd > 0 {
            return Err(MapError::EntryProgram { map: e.name(), map_type: map_type::CPUMAP, fd });
        }
        e.set(cpu, qsize);
        Ok(())
    }

    /// `cpu_map_delete_elem`: `EINVAL` out of range, success on an empty slot.
    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.entries.delete_user(key)
    }
}
