//! `BPF_MAP_TYPE_PERF_EVENT_ARRAY`: where `bpf_perf_event_output` sends samples.
//!
//! In the kernel each slot holds a perf event (`PERF_COUNT_SW_BPF_OUTPUT`) that user
//! space opened for one CPU and mapped to read its ring; a program writes a sample to
//! its own CPU's slot. spine has no perf events: a slot is a record ring of its own
//! ([`SLOT_BYTES`], made when the slot is first opened), and it is *open* while someone
//! reads it, as a slot holds an event while user space keeps its fd. User space opens
//! slot `i` by updating key `i` (with any value: the kernel's would be a perf event fd)
//! and closes it by deleting the key; a follower of the map opens every slot. Writing to
//! a closed slot gives `ENOENT`, to another CPU's slot `EOPNOTSUPP`, past the array
//! `E2BIG`, into a full ring `ENOSPC`: the kernel's answers for no event, an event
//! of another CPU, a bad index and a full perf ring.

use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, OnceLock};

use crate::def::MapDef;
use crate::ringbuf::RingBuf;
use crate::MapError;

/// Bytes of each slot's record ring (a power of two, as a ring buffer's size).
pub const SLOT_BYTES: u32 = 64 * 1024;

#[derive(Debug)]
struct Slot {
    open: AtomicBool,
    ring: OnceLock<RingBuf>,
}

#[derive(Debug)]
pub struct PerfEventArray {
    name: Arc<str>,
    slots: Box<[Slot]>,
}

impl PerfEventArray {
    /// Bytes the array may use once every slot is open.
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        let ring = MapDef { max_entries: SLOT_BYTES, ..def.clone() };
        u128::from(def.max_entries) * RingBuf::bytes(&ring)
    }

    pub(crate) fn new(def: &MapDef) -> PerfEventArray {
        let slots = (0..def.max_entries)
            .map(|_| Slot { open: AtomicBool::new(false), ring: OnceLock::new() })
            .collect();
        PerfEventArray { name: def.name.clone(), slots }
    }

    fn slot(&self, index: u32) -> Result<&Slot, MapError> {
        self.slots.get(index as usize).ok_or(MapError::IndexOutOfRange {
            map: self.name.clone(),
            index,
            max_entries: self.slots.len() as u32,
        })
    }

    /// Opens slot `index` for samples (its ring is made the first time).
    pub(crate) fn open(&self, index: u32) -> Result<(), MapError> {
        let slot = self.slot(index)?;
        if slot.ring.get().is_none() {
            let def = MapDef::new(&self.name, spine_abi::map_type::RINGBUF, 0, 0, SLOT_BYTES, 0);
            let ring = RingBuf::new(&def)?;
            let _ = slot.ring.set(ring);
        }
        slot.open.store(true, Release);
        Ok(())
    }

    /// Closes slot `index`: samples written to it from now on get `ENOENT`. Records
    /// already in its ring stay readable.
    pub(crate) fn close(&self, index: u32) -> Result<(), MapError> {
        let slot = self.slot(index)?;
        if !slot.open.swap(false, AcqRel) {
            return Err(MapError::NotFound { map: self.name.clone() });
        }
        Ok(())
    }

    pub fn is_open(&self, index: u32) -> Result<bool, MapError> {
        Ok(self.slot(index)?.open.load(Acquire))
    }

    /// Opens every slot (a follower reads them all).
    pub fn open_all(&self) -> Result<(), MapError> {
        (0..self.slots.len() as u32).try_for_each(|i| self.open(i))
    }

    /// `bpf_perf_event_output` from a program on CPU `cpu` into slot `index` (the
    /// flags' index, `BPF_F_CURRENT_CPU` already resolved to `cpu`): one record of the
    /// concatenated `parts`.
    pub fn output(&self, index: u32, cpu: usize, parts: &[&[u8]]) -> Result<(), MapError> {
        let slot = self.slot(index)?;
        let ring = match slot.ring.get() {
            Some(r) if slot.open.load(Acquire) => r,
            _ => return Err(MapError::NotFound { map: self.name.clone() }),
        };
        if index as usize != cpu {
            return Err(MapError::OtherCpuSlot { map: self.name.clone(), index, cpu });
        }
        ring.output_parts(parts)
            .map_err(|_| MapError::PerfRingFull { map: self.name.clone(), index })
    }

    /// Takes up to `max` records of every slot, slot by slot, passing each with its
    /// slot's index; how many.
    pub fn consume_up_to(&self, max: usize, mut f: impl FnMut(u32, &[u8])) -> usize {
        let mut n = 0;
        for (i, slot) in self.slots.iter().enumerate() {
            if let Some(r) = slot.ring.get() {
                n += r.consume_up_to(max - n, |rec| f(i as u32, rec));
            }
            if n >= max {
                break;
            }
        }
        n
    }

    /// Open slots.
    pub(crate) fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.open.load(Relaxed)).count()
    }

    /// `BPF_MAP_GET_NEXT_KEY`, as an array's: by index.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        let n = self.slots.len() as u32;
        let next = match key.map(|k| u32::from_ne_bytes([k[0], k[1], k[2], k[3]])) {
            Some(i) if i < n => i + 1,
            _ => 0,
        };
        if next >= n {
            return Err(MapError::NotFound { map: self.name.clone() });
        }
        out.copy_from_slice(&next.to_ne_bytes());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Map, MapDef, MapOptions, ENOTSUPP};
    use spine_abi::errno::*;
    use spine_abi::map_type::PERF_EVENT_ARRAY;

    fn perf(entries: u32) -> Map {
        let opts = MapOptions { ncpus: 2, ..MapOptions::default() };
        Map::create(MapDef::new("events", PERF_EVENT_ARRAY, 4, 4, entries, 0), &opts).unwrap()
    }

    fn errno(r: Result<(), crate::MapError>) -> i64 {
        r.map_or_else(|e| e.errno(), |()| 0)
    }

    #[test]
    fn samples_go_to_open_slots_of_their_own_cpu_with_the_kernels_errors() {
        let m = perf(2);
        let p = m.perf().expect("a perf event array");
        assert_eq!(errno(p.output(0, 0, &[b"x"])), -ENOENT, "no reader: no event in the slot");
        assert_eq!(errno(p.output(2, 0, &[b"x"])), -E2BIG);
        m.update_user(&0u32.to_ne_bytes(), &7u32.to_ne_bytes(), 0).unwrap();
        assert_eq!(errno(p.output(0, 1, &[b"x"])), -EOPNOTSUPP, "CPU 0's event, from CPU 1");
        p.output(0, 0, &[b"head", b"", b"tail"]).unwrap();
        p.output(0, 0, &[b"second"]).unwrap();
        let mut got = Vec::new();
        assert_eq!(p.consume_up_to(10, |i, r| got.push((i, r.to_vec()))), 2);
        assert_eq!(got, [(0, b"headtail".to_vec()), (0, b"second".to_vec())]);
        // The kernel's fd-array answers from user space.
        let mut v = [0u8; 4];
        assert_eq!(m.lookup_user(&0u32.to_ne_bytes(), &mut v).unwrap_err().errno(), -ENOTSUPP);
        assert_eq!(m.update_user(&5u32.to_ne_bytes(), &v, 0).unwrap_err().errno(), -E2BIG);
        assert_eq!(m.update_user(&1u32.to_ne_bytes(), &v, 2).unwrap_err().errno(), -EINVAL);
        assert_eq!(m.len(), 1);
        m.delete_user(&0u32.to_ne_bytes()).unwrap();
        assert_eq!(m.delete_user(&0u32.to_ne_bytes()).unwrap_err().errno(), -ENOENT);
        assert_eq!(errno(p.output(0, 0, &[b"x"])), -ENOENT, "closed again");
        let mut k = [0u8; 4];
        m.next_key(None, &mut k).unwrap();
        assert_eq!(u32::from_ne_bytes(k), 0);
        m.next_key(Some(&0u32.to_ne_bytes()), &mut k).unwrap();
        assert_eq!(u32::from_ne_bytes(k), 1);
        assert!(m.next_key(Some(&1u32.to_ne_bytes()), &mut k).is_err());
    }

    #[test]
    fn a_full_slot_refuses_with_enospc_until_read() {
        let m = perf(1);
        let p = m.perf().unwrap();
        p.open_all().unwrap();
        let big = vec![0xabu8; 4000];
        let mut n = 0;
        while p.output(0, 0, &[&big]).is_ok() {
            n += 1;
            assert!(n < 100, "a 64 KiB ring takes at most 16 such records");
        }
        assert_eq!(errno(p.output(0, 0, &[&big])), -ENOSPC);
        assert_eq!(p.consume_up_to(usize::MAX, |_, r| assert_eq!(r, &big[..])), n);
        p.output(0, 0, &[&big]).unwrap();
    }

    #[test]
    fn creation_checks_are_the_kernels() {
        let opts = MapOptions::default();
        let def = |k, v, n, f| MapDef::new("e", PERF_EVENT_ARRAY, k, v, n, f);
        for bad in [def(8, 4, 1, 0), def(4, 8, 1, 0), def(4, 4, 0, 0), def(4, 4, 1, 1)] {
            assert_eq!(Map::create(bad, &opts).unwrap_err().errno(), -EINVAL);
        }
    }
}
