//! `BPF_MAP_TYPE_RINGBUF` (`kernel/bpf/ringbuf.c`): a multi-producer, single-consumer
//! ring of variable-length records. Programs reserve a record, fill it in place and
//! submit or discard it (`bpf_ringbuf_reserve/submit/discard`), or copy one in with
//! `bpf_ringbuf_output`; the control plane consumes committed records in order.
//!
//! Positions are the kernel's: a record of `size` bytes takes `round_up(size + 8, 8)`
//! bytes of the ring (an 8-byte header, then the data), producer and consumer positions
//! only grow, and a reservation fails when the ring would hold more than `size - 1`
//! bytes, so `bpf_ringbuf_query` reports what the kernel would.
//!
//! Layout, and how it differs from the kernel's:
//! - The kernel maps the data pages twice in a row so that a record crossing the end of
//!   the ring is contiguous. Without page mapping tricks, the data area here is twice the
//!   ring size: a record that crosses the end simply runs on into the second half (and
//!   the consumer reads it there), so its bytes are contiguous too. The second half is
//!   never aliased to the first, which is sound because the ring's bytes behind such a
//!   record are not reused before it is consumed.
//! - Record headers (length, busy and discard bits) live in a separate table, not in
//!   front of the record: programs can reach the whole data area (it is the map's value
//!   span) but never a header, so a program writing out of its record can spoil other
//!   records' bytes but not the ring's structure. The 8 bytes in front of each record
//!   are left unused, to keep the kernel's positions.
//! - Wakeups: the kernel queues an irq_work to wake a sleeping consumer. Here a submit
//!   that would have woken it sets a flag the control plane polls
//!   ([`RingBuf::take_wakeup`]); submit's `BPF_RB_NO_WAKEUP`/`BPF_RB_FORCE_WAKEUP` act
//!   on that flag as on the kernel's wakeup.
//!
//! Costs: a reserve takes a spin lock (as the kernel's does) held for a few loads and
//! stores; a submit is one compare-and-swap on the record's header. Memory is
//! 2.5 × the ring size (data area and header table).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, PoisonError};

use crate::def::MapDef;
use crate::spinlock::SpinLock;
use crate::storage::{zeroed_slice, Arena};
use crate::MapError;

/// `BPF_RINGBUF_BUSY_BIT`: the record is reserved and not yet committed.
pub const BUSY_BIT: u32 = 1 << 31;
/// `BPF_RINGBUF_DISCARD_BIT`: the record was discarded; the consumer skips it.
pub const DISCARD_BIT: u32 = 1 << 30;
/// `BPF_RINGBUF_HDR_SZ`.
pub const HDR_SIZE: u64 = 8;
/// `RINGBUF_MAX_RECORD_SZ`: the largest record a reserve considers.
pub const MAX_RECORD: u64 = u32::MAX as u64 / 4;

/// `bpf_ringbuf_submit`/`discard`/`output` flags.
pub const RB_NO_WAKEUP: u64 = 1;
pub const RB_FORCE_WAKEUP: u64 = 2;
/// `bpf_ringbuf_query` flags.
pub const RB_AVAIL_DATA: u64 = 0;
pub const RB_RING_SIZE: u64 = 1;
pub const RB_CONS_POS: u64 = 2;
pub const RB_PROD_POS: u64 = 3;

/// Bytes of the ring a record of `len` data bytes (a header length) occupies.
const fn record_span(len: u32) -> u64 {
    (((len & !(BUSY_BIT | DISCARD_BIT)) as u64) + HDR_SIZE).next_multiple_of(8)
}

/// A position on its own cache line: producers and the consumer write different ones.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Pos(AtomicU64);

/// A BPF ring buffer. `Send + Sync`; every method may be called from any thread, but
/// one consumer runs at a time ([`RingBuf::consume`] takes a lock).
#[derive(Debug)]
pub struct RingBuf {
    name: Arc<str>,
    size: u64,
    mask: u64,
    /// `2 * size` bytes: the ring and the run-on area of records crossing its end.
    data: Arena,
    /// One header per 8 bytes of the ring; only record starts are used.
    hdrs: Box<[AtomicU32]>,
    /// Serialises reservations (the kernel's `rb->spinlock`).
    lock: SpinLock,
    producer_pos: Pos,
    consumer_pos: Pos,
    /// Oldest record not yet committed, as far as the last reserve saw (under `lock`).
    pending_pos: AtomicU64,
    /// The consumer's copy buffer; holding it makes one consumer at a time.
    consumer: Mutex<Vec<u8>>,
    wakeup: AtomicBool,
}

impl RingBuf {
    /// Bytes the ring needs: data area and header table.
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        let size = def.max_entries as u128;
        2 * size + size / 8 * 4
    }

    /// Builds an empty ring; `def` passed the creation checks (`max_entries` a power of
    /// two, at least a page) and the byte budget.
    pub(crate) fn new(def: &MapDef) -> Result<RingBuf, MapError> {
        let size = def.max_entries as usize;
        let oom =
            |bytes: usize| MapError::OutOfMemory { map: def.name.clone(), bytes: bytes as u64 };
        let data = Arena::new(2 * size, 0, true).ok_or_else(|| oom(2 * size))?;
        let hdrs = zeroed_slice(size / 8).ok_or_else(|| oom(size / 2))?;
        Ok(RingBuf {
            name: def.name.clone(),
            size: size as u64,
            mask: size as u64 - 1,
            data,
            hdrs,
            lock: SpinLock::new(),
            producer_pos: Pos::default(),
            consumer_pos: Pos::default(),
            pending_pos: AtomicU64::new(0),
            consumer: Mutex::new(Vec::new()),
            wakeup: AtomicBool::new(false),
        })
    }

    pub(crate) fn data(&self) -> &Arena {
        &self.data
    }

    /// The ring's data size (`max_entries`).
    pub fn size(&self) -> u64 {
        self.size
    }

    fn hdr(&self, pos: u64) -> &AtomicU32 {
        &self.hdrs[((pos & self.mask) / 8) as usize]
    }

    // ---- program side ----

    /// `bpf_ringbuf_reserve`: room for a record of `size` bytes, 8-byte aligned, inside
    /// [`crate::Map::value_spans`]; `None` when `flags != 0`, the record is larger than
    /// the ring allows or the ring is full. Its contents are whatever the ring held
    /// (the kernel does not clear them either). The record must be submitted or
    /// discarded exactly once; until then the consumer waits at it and, once the ring
    /// has gone round, reservations fail. A runtime that aborts a program holding a
    /// reservation must discard it.
    pub fn reserve(&self, size: u64, flags: u64) -> Option<NonNull<u8>> {
        if flags != 0 || size > MAX_RECORD {
            return None;
        }
        let len = (size + HDR_SIZE).next_multiple_of(8);
        if len > self.size {
            return None;
        }
        let cons = self.consumer_pos.0.load(Acquire);
        let _g = self.lock.lock();
        let prod = self.producer_pos.0.load(Relaxed);
        let mut pend = self.pending_pos.load(Relaxed);
        while pend < prod {
            let h = self.hdr(pend).load(Acquire);
            if h & BUSY_BIT != 0 {
                break;
            }
            pend += record_span(h);
        }
        self.pending_pos.store(pend, Relaxed);
        let new_prod = prod + len;
        // Never more than `size - 1` bytes between the consumer (and the oldest
        // uncommitted record) and the producer.
        if new_prod - cons > self.mask || new_prod - pend > self.mask {
            return None;
        }
        // `size <= MAX_RECORD < 2^30`: it fits the header beside the busy and discard bits.
        self.hdr(prod).store(size as u32 | BUSY_BIT, Relaxed);
        self.producer_pos.0.store(new_prod, Release);
        Some(self.data.ptr_at(((prod & self.mask) + HDR_SIZE) as usize))
    }

    /// `bpf_ringbuf_submit`: commits the record at `addr` (a pointer [`RingBuf::reserve`]
    /// returned). The consumer sees the bytes the program wrote before this call.
    /// `NotReserved` if `addr` is not the start of a record that is reserved and not
    /// yet committed: the ring is left as it was. (The kernel's verifier guarantees
    /// this statically; a runtime should treat the error as a program fault. A stale
    /// pointer whose slot was reserved again by someone else cannot be told apart.)
    pub fn submit(&self, addr: u64, flags: u64) -> Result<(), MapError> {
        self.commit(addr, flags, false)
    }

    /// `bpf_ringbuf_discard`: as [`RingBuf::submit`], but the consumer skips the record.
    pub fn discard(&self, addr: u64, flags: u64) -> Result<(), MapError> {
        self.commit(addr, flags, true)
    }

    /// `bpf_ringbuf_output`: copies `data` into a new record and submits it. `EINVAL`
    /// for flags other than the wakeup flags, `EAGAIN` when the ring is full.
    pub fn output(&self, data: &[u8], flags: u64) -> Result<(), MapError> {
        if flags & !(RB_NO_WAKEUP | RB_FORCE_WAKEUP) != 0 {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let rec = self
            .reserve(data.len() as u64, 0)
            .ok_or_else(|| MapError::RingFull { map: self.name.clone() })?;
        let off = rec.as_ptr() as usize - self.data.base().as_ptr() as usize;
        self.data.write_bytes(off, data);
        self.commit(rec.as_ptr() as u64, flags, false)
    }

    /// One record of the concatenated `parts` (a perf sample: the program's data, then
    /// packet bytes), committed at once. `RingFull` when it does not fit now.
    pub fn output_parts(&self, parts: &[&[u8]]) -> Result<(), MapError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let rec = self
            .reserve(len as u64, 0)
            .ok_or_else(|| MapError::RingFull { map: self.name.clone() })?;
        let mut off = rec.as_ptr() as usize - self.data.base().as_ptr() as usize;
        for p in parts {
            self.data.write_bytes_at(off, p);
            off += p.len();
        }
        self.commit(rec.as_ptr() as u64, 0, false)
    }

    /// `bpf_ringbuf_query`: available bytes (`RB_AVAIL_DATA`), the ring size, the
    /// consumer or producer position; 0 for any other flag.
    pub fn query(&self, flag: u64) -> u64 {
        match flag {
            RB_AVAIL_DATA => self.avail_data(),
            RB_RING_SIZE => self.size,
            RB_CONS_POS => self.consumer_pos.0.load(Acquire),
            RB_PROD_POS => self.producer_pos.0.load(Acquire),
            _ => 0,
        }
    }

    /// The ring offset of the record whose data starts at `addr`, if `addr` can be one.
    fn record_at(&self, addr: u64) -> Option<u64> {
        let off = addr.checked_sub(self.data.base().as_ptr() as u64)?;
        (off >= HDR_SIZE && off <= self.size && off % 8 == 0).then(|| off - HDR_SIZE)
    }

    fn commit(&self, addr: u64, flags: u64, discard: bool) -> Result<(), MapError> {
        let not_reserved = || MapError::NotReserved { map: self.name.clone(), addr };
        let rec = self.record_at(addr).ok_or_else(not_reserved)?;
        let hdr = self.hdr(rec);
        let mut cur = hdr.load(Relaxed);
        loop {
            if cur & BUSY_BIT == 0 {
                return Err(not_reserved());
            }
            let new = (cur ^ BUSY_BIT) | if discard { DISCARD_BIT } else { 0 };
            match hdr.compare_exchange_weak(cur, new, Release, Relaxed) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        let cons = self.consumer_pos.0.load(Acquire) & self.mask;
        if flags & RB_FORCE_WAKEUP != 0 || (cons == rec && flags & RB_NO_WAKEUP == 0) {
            self.wakeup.store(true, Release);
        }
        Ok(())
    }

    // ---- control side ----

    /// Bytes between the consumer and the producer (committed, discarded and reserved
    /// records, headers included), as `BPF_RB_AVAIL_DATA`.
    pub fn avail_data(&self) -> u64 {
        let cons = self.consumer_pos.0.load(Acquire);
        let prod = self.producer_pos.0.load(Acquire);
        prod - cons
    }

    /// True if [`RingBuf::consume`] would find a record (committed or discarded) now:
    /// two position loads and a header load.
    pub fn has_data(&self) -> bool {
        let cons = self.consumer_pos.0.load(Acquire);
        cons != self.producer_pos.0.load(Acquire) && self.hdr(cons).load(Acquire) & BUSY_BIT == 0
    }

    /// True (once) if a submit since the last call would have woken the kernel's
    /// consumer: the ring went from empty to non-empty, or a producer forced it.
    pub fn take_wakeup(&self) -> bool {
        self.wakeup.swap(false, AcqRel)
    }

    /// Consumes every committed record in ring order, calling `f` with each one's bytes
    /// (discarded records are skipped, and not counted); stops at the first record still
    /// reserved. Returns the number of records passed to `f`. Each record is copied out
    /// and its room returned to producers before `f` runs. One consumer at a time: a
    /// second caller waits, and `f` must not consume this ring itself. With producers
    /// running this may go on as long as they keep up; [`RingBuf::consume_up_to`] is
    /// bounded.
    pub fn consume(&self, f: impl FnMut(&[u8])) -> usize {
        self.consume_up_to(usize::MAX, f)
    }

    /// As [`RingBuf::consume`], but passes at most `max` records to `f`.
    pub fn consume_up_to(&self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let mut buf = self.consumer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut cons = self.consumer_pos.0.load(Relaxed);
        let mut n = 0;
        loop {
            let prod = self.producer_pos.0.load(Acquire);
            if cons == prod || n == max {
                return n;
            }
            let h = self.hdr(cons).load(Acquire);
            if h & BUSY_BIT != 0 {
                return n;
            }
            let span = record_span(h);
            debug_assert!(span < self.size && cons + span <= prod, "headers are ours");
            let len = (h & !DISCARD_BIT) as usize;
            let discarded = h & DISCARD_BIT != 0;
            if !discarded {
                buf.resize(len, 0);
                let off = ((cons & self.mask) + HDR_SIZE) as usize;
                self.data.read_bytes(off, &mut buf);
            }
            cons += span;
            self.consumer_pos.0.store(cons, Release);
            if !discarded {
                f(&buf);
                n += 1;
            }
        }
    }
}
