//! `BPF_MAP_TYPE_ARRAY` and `BPF_MAP_TYPE_PERCPU_ARRAY` (`kernel/bpf/arraymap.c`): every
//! element exists from creation, zero-initialised; elements are `round_up(value_size, 8)`
//! apart. A per-CPU array keeps each CPU's elements contiguous (`cpu_stride` apart, on
//! separate cache lines), so a worker only touches its own memory.

use std::ptr::NonNull;
use std::sync::Arc;

use spine_abi::update_flags::{EXIST, LOCK, NOEXIST};

use crate::def::{round8, MapDef};
use crate::storage::{Arena, ARENA_ALIGN};
use crate::timer::Timers;
use crate::value_lock::{self, LockGuard, Waiter};
use crate::MapError;

#[derive(Debug)]
pub(crate) struct ArrayMap {
    name: Arc<str>,
    max_entries: u32,
    value_size: usize,
    stride: usize,
    percpu: bool,
    ncpus: usize,
    cpu_stride: usize,
    values: Arena,
    /// Offset of the value's `bpf_spin_lock`.
    spin_lock: Option<usize>,
    /// The elements' `bpf_timer`s, when the value holds one.
    timers: Option<Timers>,
    /// Offset of the value's `bpf_timer`, with `timers`.
    timer_at: Option<usize>,
}

impl ArrayMap {
    /// Bytes of value memory the map needs.
    pub(crate) fn bytes(def: &MapDef, percpu: bool, ncpus: usize) -> u128 {
        let per_cpu = def.max_entries as u128 * round8(def.value_size as u64) as u128;
        if percpu {
            per_cpu.next_multiple_of(ARENA_ALIGN as u128) * ncpus as u128
        } else {
            per_cpu
        }
    }

    /// Allocates the elements; `def` has passed the creation checks and the byte budget.
    pub(crate) fn new(def: &MapDef, percpu: bool, ncpus: usize) -> Result<ArrayMap, MapError> {
        let stride = round8(def.value_size as u64) as usize;
        let per_cpu = def.max_entries as usize * stride;
        let (cpu_stride, len) = if percpu {
            let cs = per_cpu.next_multiple_of(ARENA_ALIGN);
            (cs, cs * ncpus)
        } else {
            (0, per_cpu)
        };
        // A memory-mappable array is a shared segment: its values live in a memfd.
        let values = if def.flags & spine_abi::map_flags::MMAPABLE != 0 {
            Arena::shared(len, def.value_size as usize, &def.name)
        } else {
            Arena::new(len, def.value_size as usize, true)
        }
        .ok_or_else(|| MapError::OutOfMemory { map: def.name.clone(), bytes: len as u64 })?;
        Ok(ArrayMap {
            name: def.name.clone(),
            max_entries: def.max_entries,
            value_size: def.value_size as usize,
            stride,
            percpu,
            ncpus,
            cpu_stride,
            values,
            spin_lock: def.spin_lock.map(|o| o as usize),
            timers: def.timer.map(|_| Timers::new(def.max_entries as usize)),
            timer_at: def.timer.map(|o| o as usize),
        })
    }

    /// The memfd of a memory-mappable array (`BPF_F_MMAPABLE`): a shared segment.
    pub(crate) fn segment(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self.values.fd()
    }

    /// Bytes of the segment a mapping covers: every value, `round_up(value_size, 8)`
    /// apart, as the kernel lays out a mmapable array (whole pages).
    pub(crate) fn segment_len(&self) -> usize {
        self.values.len()
    }

    /// Takes element `i`'s lock for a `BPF_F_LOCK` update or lookup: the holder may
    /// be a host application, so the wait is bounded (`EBUSY` after it; see
    /// [`value_lock::take`]).
    fn lock_element(&self, i: u32, side: Waiter) -> Result<LockGuard<'_>, MapError> {
        let off = self.spin_lock.ok_or_else(|| MapError::NoSpinLock { map: self.name.clone() })?;
        value_lock::take(self.values.lock_word(self.off(i, 0) + off), side, &self.name)
    }

    /// Writes a whole value, leaving the lock word alone when there is one (the
    /// kernel's `copy_map_value`), under the lock with `BPF_F_LOCK`.
    fn write_value(
        &self,
        i: u32,
        cpu: usize,
        value: &[u8],
        flags: u64,
        side: Waiter,
    ) -> Result<(), MapError> {
        let off = self.off(i, cpu);
        match self.spin_lock {
            None => self.values.write(off, value),
            Some(hole) => {
                let _g = if flags & LOCK != 0 { Some(self.lock_element(i, side)?) } else { None };
                self.values.write_except(off, value, hole);
            }
        }
        // An update frees the element's timer (`bpf_obj_free_fields` after the copy).
        if let Some(t) = &self.timers {
            t.free(i);
        }
        Ok(())
    }

    pub(crate) fn values(&self) -> &Arena {
        &self.values
    }

    pub(crate) fn timers(&self) -> Option<&Timers> {
        self.timers.as_ref()
    }

    /// The element whose value starts at byte `off` of the values, if one does.
    pub(crate) fn elem_at(&self, off: usize) -> Option<u32> {
        let i = u32::try_from(off / self.stride).ok()?;
        (off.is_multiple_of(self.stride) && i < self.max_entries && !self.percpu).then_some(i)
    }

    /// Element `i`'s value (CPU 0's) and its key.
    pub(crate) fn elem(&self, i: u32, key: &mut [u8]) -> Option<NonNull<u8>> {
        if i >= self.max_entries || key.len() != 4 {
            return None;
        }
        key.copy_from_slice(&i.to_ne_bytes());
        Some(self.values.ptr_at(self.off(i, 0)))
    }

    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    pub(crate) fn cpu_stride(&self) -> Option<usize> {
        self.percpu.then_some(self.cpu_stride)
    }

    /// The index a 4-byte key names (the caller checked the length).
    fn index(key: &[u8]) -> u32 {
        u32::from_ne_bytes([key[0], key[1], key[2], key[3]])
    }

    fn off(&self, index: u32, cpu: usize) -> usize {
        cpu * self.cpu_stride + index as usize * self.stride
    }

    pub(crate) fn lookup(&self, key: &[u8], cpu: usize) -> Option<NonNull<u8>> {
        let i = Self::index(key);
        (i < self.max_entries).then(|| self.values.ptr_at(self.off(i, cpu)))
    }

    /// `array_map_update_elem`, the checks in the kernel's order.
    fn check_update(&self, i: u32, flags: u64) -> Result<(), MapError> {
        let map = || self.name.clone();
        if flags & !LOCK > EXIST {
            return Err(MapError::InvalidFlags { map: map(), flags });
        }
        if i >= self.max_entries {
            return Err(MapError::IndexOutOfRange {
                map: map(),
                index: i,
                max_entries: self.max_entries,
            });
        }
        if flags & NOEXIST != 0 {
            return Err(MapError::Exists { map: map() });
        }
        if flags & LOCK != 0 && self.spin_lock.is_none() {
            return Err(MapError::NoSpinLock { map: map() });
        }
        Ok(())
    }

    /// Program-side update: writes this CPU's copy for a per-CPU array.
    pub(crate) fn update(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: usize,
    ) -> Result<(), MapError> {
        self.update_from(key, value, flags, cpu, Waiter::Program)
    }

    fn update_from(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u64,
        cpu: usize,
        side: Waiter,
    ) -> Result<(), MapError> {
        let i = Self::index(key);
        self.check_update(i, flags)?;
        self.write_value(i, if self.percpu { cpu } else { 0 }, value, flags, side)
    }

    /// User-side update: `value` is one padded slot per CPU for a per-CPU array
    /// (`bpf_percpu_array_update`, which takes no `BPF_F_LOCK`).
    pub(crate) fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        if !self.percpu {
            return self.update_from(key, value, flags, 0, Waiter::User);
        }
        let i = Self::index(key);
        let map = || self.name.clone();
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: map(), flags });
        }
        if i >= self.max_entries {
            let max_entries = self.max_entries;
            return Err(MapError::IndexOutOfRange { map: map(), index: i, max_entries });
        }
        if flags == NOEXIST {
            return Err(MapError::Exists { map: map() });
        }
        for (cpu, slot) in value.chunks_exact(self.stride).enumerate() {
            self.values.write(self.off(i, cpu), slot);
        }
        Ok(())
    }

    pub(crate) fn delete(&self) -> Result<(), MapError> {
        Err(MapError::DeleteFromArray { map: self.name.clone() })
    }

    /// User-side lookup: the value, or every CPU's padded slot for a per-CPU array;
    /// with `lock` (`BPF_F_LOCK`, checked by the caller) read under the value's lock.
    pub(crate) fn lookup_user(
        &self,
        key: &[u8],
        out: &mut [u8],
        lock: bool,
    ) -> Result<(), MapError> {
        let i = Self::index(key);
        if i >= self.max_entries {
            return Err(MapError::NotFound { map: self.name.clone() });
        }
        let _g = if lock { Some(self.lock_element(i, Waiter::User)?) } else { None };
        if self.percpu {
            for cpu in 0..self.ncpus {
                let slot = &mut out[cpu * self.stride..(cpu + 1) * self.stride];
                self.values.read(self.off(i, cpu), slot);
            }
        } else {
            self.values.read(self.off(i, 0), &mut out[..self.value_size]);
            // The lock word reads as zero (`check_and_init_map_value`).
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

    /// `array_map_get_next_key`: index 0 for no key or an out-of-range one.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        let i = key.map_or(u32::MAX, Self::index);
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

    /// Sets element 0 to `bytes` followed by zeros (global-data initial contents).
    pub(crate) fn write_initial(&self, bytes: &[u8]) -> Result<(), MapError> {
        if self.percpu || self.max_entries != 1 {
            return Err(MapError::InitialNotArray { map: self.name.clone() });
        }
        if bytes.len() > self.value_size {
            return Err(MapError::InitialTooLong {
                map: self.name.clone(),
                len: bytes.len(),
                value_size: self.value_size as u32,
            });
        }
        let mut v = vec![0u8; self.value_size];
        v[..bytes.len()].copy_from_slice(bytes);
        self.values.write(0, &v);
        Ok(())
    }
}
