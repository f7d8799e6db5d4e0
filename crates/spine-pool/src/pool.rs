//! The pool itself: the buffer memory, the per-buffer side table and the shared free list.
//!
//! Ownership rules, which make handing out `&mut [u8]` sound:
//! - a buffer's `refs` word is 0 while it is free, `LENT` while the kernel (or another
//!   party reached through a descriptor ring) holds it, and otherwise the number of live
//!   [`Buf`] handles for it;
//! - a [`Buf`] is created only by allocation, [`Pool::share`] (one more reference) or
//!   [`Pool::reclaim`] (from `LENT`), and cannot be copied, so `refs == 1` together with
//!   `&mut Buf` means exclusive access to the buffer's bytes and metadata;
//! - the per-buffer metadata is kept in atomics (relaxed loads and stores compile to
//!   plain moves on x86-64), so no interleaving of safe calls is a data race.

use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::region::Region;
use crate::{PoolCache, PoolError};

/// Most references one buffer may have (one per port it is being sent on, plus one).
pub const MAX_REFS: u32 = 1 << 16;

const FREE: u32 = 0;
const LENT: u32 = u32::MAX;

/// Largest pool: 16 Mi buffers (indices stay far from the sentinel values).
const MAX_BUFFERS: u32 = 1 << 24;

/// Source of pool tags: a handle names its pool, so a foreign handle is an error, not
/// silently someone else's buffer.
static NEXT_TAG: AtomicU32 = AtomicU32::new(1);

/// Shape of a pool, fixed at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Number of buffers.
    pub buffers: u32,
    /// Bytes per buffer (the AF_XDP chunk size): a multiple of 64, at least 256 more
    /// than `headroom`, at most 65,536.
    pub buf_size: u32,
    /// Bytes before the packet data of a fresh buffer, for `xdp_adjust_head/meta`
    /// (the kernel's `XDP_PACKET_HEADROOM` is 256).
    pub headroom: u32,
    /// Buffers a [`PoolCache`] moves to or from the shared free list at once.
    pub cache_batch: u32,
}

impl PoolConfig {
    pub const DEFAULT_BUF_SIZE: u32 = 2048;
    pub const DEFAULT_HEADROOM: u32 = 256;
    pub const DEFAULT_BATCH: u32 = 64;

    /// `buffers` buffers of the default geometry (2,048 bytes, 256 of headroom).
    pub fn new(buffers: u32) -> Self {
        PoolConfig {
            buffers,
            buf_size: Self::DEFAULT_BUF_SIZE,
            headroom: Self::DEFAULT_HEADROOM,
            cache_batch: Self::DEFAULT_BATCH,
        }
    }

    fn validate(&self) -> Result<(), PoolError> {
        let bad = |reason| Err(PoolError::BadConfig { reason });
        if self.buffers == 0 || self.buffers > MAX_BUFFERS {
            return bad("buffers must be in 1..=16777216");
        }
        if !self.buf_size.is_multiple_of(64) || self.buf_size > 65_536 {
            return bad("buf_size must be a multiple of 64 and at most 65536");
        }
        if self.headroom.saturating_add(256) > self.buf_size {
            return bad("buf_size must leave at least 256 bytes after the headroom");
        }
        if self.cache_batch == 0 {
            return bad("cache_batch must be at least 1");
        }
        Ok(())
    }
}

/// An owned reference to one pool buffer: an index and the pool's tag, not a pointer.
///
/// Not `Clone`: each handle is one reference ([`Pool::share`] makes another). Give it
/// back with [`PoolCache::free`]; a handle that is simply dropped leaks its buffer until
/// the pool itself is dropped.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a dropped Buf leaks its buffer; free it through a PoolCache"]
pub struct Buf {
    index: u32,
    tag: u32,
}

impl Buf {
    /// Position of the buffer in the pool (its UMEM chunk number).
    pub fn index(&self) -> u32 {
        self.index
    }
}

/// The metadata of one buffer: where the packet is and what is known about it.
///
/// Invariant kept by every setter: `meta_len <= data_off` and
/// `data_off + len <= buf_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BufMeta {
    /// Offset of the first packet byte in the buffer.
    pub data_off: u32,
    /// Packet bytes.
    pub len: u32,
    /// Bytes of XDP metadata immediately before the packet.
    pub meta_len: u32,
    /// Port the packet came in on.
    pub port: u32,
    /// Receive time in nanoseconds (0 when the port does not know it).
    pub ts_ns: u64,
}

/// Identifies who lent a buffer (an AF_XDP socket), so its buffers can be taken back
/// together when it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LenderId(u32);

/// [`Pool::lend`] refused: the handle comes back with the reason.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct LendError {
    pub buf: Buf,
    pub error: PoolError,
}

/// One buffer's side-table entry.
#[derive(Debug)]
#[repr(align(32))]
struct Slot {
    refs: AtomicU32,
    data_off: AtomicU32,
    len: AtomicU32,
    meta_len: AtomicU32,
    port: AtomicU32,
    lender: AtomicU32,
    ts_ns: AtomicU64,
    /// The next buffer of a chained (multi-buffer) frame, as index + 1; 0 ends the
    /// chain. Buffers in a chain after the head have `refs == 1` and no handle: the
    /// head's last reference owns them (`chain.rs`). 0 for every free or lent buffer.
    next: AtomicU32,
}

/// The buffer pool, shared between workers through an `Arc` (see the module docs for
/// the ownership rules).
pub struct Pool {
    region: Region,
    slots: Box<[Slot]>,
    /// Indices of free buffers not held in any cache; locked once per batch.
    shared: Mutex<Vec<u32>>,
    cfg: PoolConfig,
    tag: u32,
    next_lender: AtomicU32,
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("cfg", &self.cfg)
            .field("tag", &self.tag)
            .field("bytes", &self.region.len())
            .finish_non_exhaustive()
    }
}

// SAFETY: the raw memory in `region` is only reached through the ownership rules in the
// module docs (exclusive access needs the only handle), and all other state is atomics
// or behind a mutex.
unsafe impl Sync for Pool {}
// SAFETY: as above; nothing in the pool is tied to the creating thread.
unsafe impl Send for Pool {}

impl Pool {
    /// Allocates the zeroed buffer memory and the side table; every buffer starts free.
    pub fn new(cfg: PoolConfig) -> Result<Arc<Pool>, PoolError> {
        cfg.validate()?;
        let bytes = cfg.buffers as usize * cfg.buf_size as usize;
        let region = Region::new(bytes)?;
        let slots = (0..cfg.buffers)
            .map(|_| Slot {
                refs: AtomicU32::new(FREE),
                data_off: AtomicU32::new(cfg.headroom),
                len: AtomicU32::new(0),
                meta_len: AtomicU32::new(0),
                port: AtomicU32::new(0),
                lender: AtomicU32::new(0),
                ts_ns: AtomicU64::new(0),
                next: AtomicU32::new(0),
            })
            .collect();
        // Reversed, so that caches pop low indices first: buffer 0 is the first handed out.
        let shared = (0..cfg.buffers).rev().collect();
        Ok(Arc::new(Pool {
            region,
            slots,
            shared: Mutex::new(shared),
            cfg,
            tag: NEXT_TAG.fetch_add(1, Ordering::Relaxed),
            next_lender: AtomicU32::new(1),
        }))
    }

    /// A new per-worker cache of this pool.
    pub fn cache(self: &Arc<Self>) -> PoolCache {
        PoolCache::new(Arc::clone(self))
    }

    pub fn config(&self) -> PoolConfig {
        self.cfg
    }

    pub fn capacity(&self) -> u32 {
        self.cfg.buffers
    }

    pub fn buf_size(&self) -> u32 {
        self.cfg.buf_size
    }

    pub fn headroom(&self) -> u32 {
        self.cfg.headroom
    }

    /// Free buffers on the shared list (not counting those parked in caches). Equals
    /// [`capacity`](Self::capacity) once every buffer is freed and every cache dropped.
    pub fn shared_free(&self) -> u32 {
        self.lock_shared().len() as u32
    }

    /// Base address and length of the buffer memory, page-aligned, for registering it
    /// as a UMEM. Buffer `i` occupies `[i * buf_size, (i + 1) * buf_size)`.
    pub fn memory(&self) -> (NonNull<u8>, usize) {
        (self.region.base(), self.cfg.buffers as usize * self.cfg.buf_size as usize)
    }

    /// The packet bytes `[data_off, data_off + len)` of `buf`. Borrows the handle, so the
    /// buffer cannot be freed while the bytes are in use.
    pub fn data<'a>(&'a self, buf: &'a Buf) -> Result<&'a [u8], PoolError> {
        let slot = self.slot(buf)?;
        let (off, len) = (slot.data_off.load(Ordering::Relaxed), slot.len.load(Ordering::Relaxed));
        let frame = self.frame(buf)?;
        Ok(frame.get(off as usize..(off as usize + len as usize)).unwrap_or_default())
    }

    /// The packet bytes of `buf` for writing; needs the only reference.
    pub fn data_mut<'a>(&'a self, buf: &'a mut Buf) -> Result<&'a mut [u8], PoolError> {
        let slot = self.unique_slot(buf)?;
        let (off, len) = (slot.data_off.load(Ordering::Relaxed), slot.len.load(Ordering::Relaxed));
        let frame = self.frame_mut(buf)?;
        Ok(frame.get_mut(off as usize..(off as usize + len as usize)).unwrap_or_default())
    }

    /// The whole buffer (headroom, packet and tail), read-only.
    pub fn frame<'a>(&'a self, buf: &'a Buf) -> Result<&'a [u8], PoolError> {
        self.slot(buf)?;
        let size = self.cfg.buf_size as usize;
        // SAFETY: `buf` is a live handle of this pool (tag and index checked), so the
        // buffer is owned and not lent: no one holds a mutable view while this shared
        // borrow of the handle lives (writers need `&mut Buf` and the only reference).
        // The range is inside the region: index < buffers.
        Ok(unsafe {
            std::slice::from_raw_parts(self.chunk_ptr(buf.index).as_ptr().cast_const(), size)
        })
    }

    /// The whole buffer for writing; needs the only reference.
    pub fn frame_mut<'a>(&'a self, buf: &'a mut Buf) -> Result<&'a mut [u8], PoolError> {
        self.unique_slot(buf)?;
        let size = self.cfg.buf_size as usize;
        // SAFETY: `buf` is the only handle of its buffer (refs == 1, checked) and is
        // borrowed mutably for the slice's lifetime, so no other view of these bytes
        // exists or can be made; the range is inside the region.
        Ok(unsafe { std::slice::from_raw_parts_mut(self.chunk_ptr(buf.index).as_ptr(), size) })
    }

    /// [`Pool::frame_mut`] and [`Pool::meta`] in one check: the packet path's view of a
    /// received buffer.
    pub fn frame_and_meta_mut<'a>(
        &'a self,
        buf: &'a mut Buf,
    ) -> Result<(&'a mut [u8], BufMeta), PoolError> {
        let s = self.unique_slot(buf)?;
        let meta = Self::read_meta(s);
        let size = self.cfg.buf_size as usize;
        // SAFETY: as in `frame_mut`: `buf` is the only handle of its buffer (checked) and
        // is borrowed mutably for the slice's lifetime; the range is inside the region.
        let frame =
            unsafe { std::slice::from_raw_parts_mut(self.chunk_ptr(buf.index).as_ptr(), size) };
        Ok((frame, meta))
    }

    fn read_meta(s: &Slot) -> BufMeta {
        BufMeta {
            data_off: s.data_off.load(Ordering::Relaxed),
            len: s.len.load(Ordering::Relaxed),
            meta_len: s.meta_len.load(Ordering::Relaxed),
            port: s.port.load(Ordering::Relaxed),
            ts_ns: s.ts_ns.load(Ordering::Relaxed),
        }
    }

    /// The metadata of `buf`.
    pub fn meta(&self, buf: &Buf) -> Result<BufMeta, PoolError> {
        Ok(Self::read_meta(self.slot(buf)?))
    }

    /// Replaces the metadata of `buf` (needs the only reference); refused if the ranges
    /// do not fit the buffer.
    pub fn set_meta(&self, buf: &mut Buf, meta: BufMeta) -> Result<(), PoolError> {
        let s = self.unique_slot(buf)?;
        let fits = meta.meta_len <= meta.data_off
            && u64::from(meta.data_off) + u64::from(meta.len) <= u64::from(self.cfg.buf_size);
        if !fits {
            return Err(PoolError::BadRange {
                offset: meta.data_off,
                len: meta.len,
                meta_len: meta.meta_len,
                buf_size: self.cfg.buf_size,
            });
        }
        s.data_off.store(meta.data_off, Ordering::Relaxed);
        s.len.store(meta.len, Ordering::Relaxed);
        s.meta_len.store(meta.meta_len, Ordering::Relaxed);
        s.port.store(meta.port, Ordering::Relaxed);
        s.ts_ns.store(meta.ts_ns, Ordering::Relaxed);
        Ok(())
    }

    /// Sets where the packet is (metadata length 0); needs the only reference.
    pub fn set_data(&self, buf: &mut Buf, data_off: u32, len: u32) -> Result<(), PoolError> {
        let meta = BufMeta { data_off, len, meta_len: 0, ..self.meta(buf)? };
        self.set_meta(buf, meta)
    }

    /// Records the ingress port and receive time; needs the only reference.
    pub fn set_rx_info(&self, buf: &mut Buf, port: u32, ts_ns: u64) -> Result<(), PoolError> {
        let s = self.unique_slot(buf)?;
        s.port.store(port, Ordering::Relaxed);
        s.ts_ns.store(ts_ns, Ordering::Relaxed);
        Ok(())
    }

    /// Copies `bytes` in as the packet, right after the headroom.
    pub fn write(&self, buf: &mut Buf, bytes: &[u8]) -> Result<(), PoolError> {
        let head = self.cfg.headroom;
        let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
        self.set_data(buf, head, len)?;
        self.data_mut(buf)?.copy_from_slice(bytes);
        Ok(())
    }

    /// Copies `bytes` in as a freshly received packet, right after the headroom, and
    /// records its ingress port and receive time: one ownership check for the receive
    /// path instead of one per field.
    pub fn write_rx(
        &self,
        buf: &mut Buf,
        bytes: &[u8],
        port: u32,
        ts_ns: u64,
    ) -> Result<(), PoolError> {
        let s = self.unique_slot(buf)?;
        let head = self.cfg.headroom;
        let room = (self.cfg.buf_size - head) as usize;
        if bytes.len() > room {
            return Err(PoolError::BadRange {
                offset: head,
                len: u32::try_from(bytes.len()).unwrap_or(u32::MAX),
                meta_len: 0,
                buf_size: self.cfg.buf_size,
            });
        }
        s.data_off.store(head, Ordering::Relaxed);
        s.len.store(bytes.len() as u32, Ordering::Relaxed);
        s.meta_len.store(0, Ordering::Relaxed);
        s.port.store(port, Ordering::Relaxed);
        s.ts_ns.store(ts_ns, Ordering::Relaxed);
        let at = self.chunk_ptr(buf.index).as_ptr();
        // SAFETY: `buf` is the only handle of its buffer (checked above) and borrowed
        // mutably, so no other view of these bytes exists; headroom + len <= buf_size
        // keeps the copy inside the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(head as usize), bytes.len())
        };
        Ok(())
    }

    /// Asks the CPU to start loading `buf`'s metadata and the first line of its packet
    /// (where received packets start), so a burst can touch the next buffer while it
    /// works on this one. A hint only: it changes nothing and cannot fault.
    #[inline]
    pub fn prefetch(&self, buf: &Buf) {
        let Some(slot) = self.slots.get(buf.index as usize) else { return };
        let packet = self.chunk_ptr(buf.index).as_ptr().wrapping_add(self.cfg.headroom as usize);
        prefetch_line((slot as *const Slot).cast());
        prefetch_line(packet.cast_const());
    }

    /// References `buf` currently has.
    pub fn refs(&self, buf: &Buf) -> Result<u32, PoolError> {
        Ok(self.slot(buf)?.refs.load(Ordering::Acquire))
    }

    /// Another reference to the same buffer, e.g. to send it on a second port. While
    /// there are several, the bytes are read-only.
    pub fn share(&self, buf: &Buf) -> Result<Buf, PoolError> {
        let s = self.slot(buf)?;
        let mut cur = s.refs.load(Ordering::Relaxed);
        loop {
            if cur == FREE || cur == LENT {
                return Err(PoolError::NotOwned { index: buf.index });
            }
            if cur >= MAX_REFS {
                return Err(PoolError::TooManyRefs { index: buf.index });
            }
            // Relaxed suffices for an increment, as in `Arc::clone`: the caller already
            // holds a reference, so the buffer cannot be freed meanwhile.
            match s.refs.compare_exchange_weak(cur, cur + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(Buf { index: buf.index, tag: self.tag }),
                Err(now) => cur = now,
            }
        }
    }

    /// Byte offset of `buf` in [`memory`](Self::memory): its UMEM chunk address.
    pub fn offset(&self, buf: &Buf) -> Result<u64, PoolError> {
        self.slot(buf)?;
        Ok(u64::from(buf.index) * u64::from(self.cfg.buf_size))
    }

    /// A fresh lender identity for [`lend`](Self::lend).
    pub fn new_lender(&self) -> LenderId {
        LenderId(self.next_lender.fetch_add(1, Ordering::Relaxed))
    }

    /// Hands `buf` to the kernel (or any party reached through shared memory): the
    /// handle is consumed and the chunk's offset returned. Needs the only reference.
    pub fn lend(&self, buf: Buf, lender: LenderId) -> Result<u64, LendError> {
        let s = match self.slot(&buf) {
            Ok(s) => s,
            Err(error) => return Err(LendError { buf, error }),
        };
        if s.next.load(Ordering::Relaxed) != 0 {
            // The kernel gives each chunk back on its own: a chain is lent buffer by
            // buffer, after `Pool::unchain`.
            let error = PoolError::Chained { index: buf.index };
            return Err(LendError { buf, error });
        }
        s.lender.store(lender.0, Ordering::Relaxed);
        // Release: the bytes written so far are complete before anyone sees it lent.
        match s.refs.compare_exchange(1, LENT, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => Ok(u64::from(buf.index) * u64::from(self.cfg.buf_size)),
            Err(refs) => {
                let error = if refs == FREE || refs == LENT {
                    PoolError::NotOwned { index: buf.index }
                } else {
                    PoolError::Shared { index: buf.index, refs }
                };
                Err(LendError { buf, error })
            }
        }
    }

    /// Takes back a lent buffer from an offset anywhere inside its chunk (as AF_XDP
    /// descriptors give it). The offset is untrusted: out of range, not lent, or lent by
    /// someone else is an error and changes nothing. The metadata is left as it was;
    /// the caller sets where the packet now is.
    pub fn reclaim(&self, offset: u64, lender: LenderId) -> Result<Buf, PoolError> {
        let total = u64::from(self.cfg.buffers) * u64::from(self.cfg.buf_size);
        if offset >= total {
            return Err(PoolError::OffsetOutOfRange { offset, len: total });
        }
        let index = (offset / u64::from(self.cfg.buf_size)) as u32;
        let s = &self.slots[index as usize];
        if s.refs.load(Ordering::Relaxed) != LENT {
            return Err(PoolError::NotLent { index });
        }
        if s.lender.load(Ordering::Relaxed) != lender.0 {
            return Err(PoolError::WrongLender { index });
        }
        match s.refs.compare_exchange(LENT, 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Ok(Buf { index, tag: self.tag }),
            Err(_) => Err(PoolError::NotLent { index }),
        }
    }

    /// Frees every buffer still lent by `lender` (after its kernel object is closed, so
    /// nothing will give them back); returns how many. Slow path: scans the side table.
    pub fn reclaim_all(&self, lender: LenderId) -> u32 {
        let mut back = Vec::new();
        for (i, s) in self.slots.iter().enumerate() {
            if s.lender.load(Ordering::Relaxed) == lender.0
                && s.refs.compare_exchange(LENT, FREE, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                back.push(i as u32);
            }
        }
        let n = back.len() as u32;
        self.lock_shared().extend(back);
        n
    }

    /// Buffers currently lent by `lender`. Slow path: scans the side table.
    pub fn lent_by(&self, lender: LenderId) -> u32 {
        self.slots
            .iter()
            .filter(|s| {
                s.refs.load(Ordering::Relaxed) == LENT
                    && s.lender.load(Ordering::Relaxed) == lender.0
            })
            .count() as u32
    }

    /// Drops one reference; `Ok(Some(index))` when it was the last, so the buffer is free
    /// and belongs to the caller's free stack.
    pub(crate) fn release(&self, buf: Buf) -> Result<Option<u32>, PoolError> {
        let s = self.slot(&buf)?;
        // Acquire pairs with the Release decrements of holders gone before: their reads of
        // the bytes happen before the reuse.
        let mut cur = s.refs.load(Ordering::Acquire);
        if cur == 1 {
            // The only holder, and it is giving its handle up: nobody can change the count
            // meanwhile (a new reference needs a handle), so a plain store frees it without
            // a locked read-modify-write (DPDK's refcnt == 1 fast path).
            s.refs.store(FREE, Ordering::Relaxed);
            return Ok(Some(buf.index));
        }
        loop {
            if cur == FREE || cur == LENT {
                return Err(PoolError::NotOwned { index: buf.index });
            }
            match s.refs.compare_exchange_weak(cur, cur - 1, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        if cur == 1 {
            // Every other holder's last use of the bytes happens before the reuse.
            fence(Ordering::Acquire);
            Ok(Some(buf.index))
        } else {
            Ok(None)
        }
    }

    /// [`release`](Self::release) of the common case, in one look at the buffer's slot:
    /// the only reference to a buffer that heads no chain. Frees the buffer and returns
    /// its index; any other case (shared, chained, foreign, not owned) gives the handle
    /// back untouched, for `release`.
    #[inline]
    pub(crate) fn release_sole(&self, buf: Buf) -> Result<u32, Buf> {
        if buf.tag == self.tag {
            if let Some(s) = self.slots.get(buf.index as usize) {
                // Acquire as in `release`; `next` is only written by the sole holder.
                if s.refs.load(Ordering::Acquire) == 1 && s.next.load(Ordering::Relaxed) == 0 {
                    s.refs.store(FREE, Ordering::Relaxed);
                    return Ok(buf.index);
                }
            }
        }
        Err(buf)
    }

    /// Turns a free index from a cache's stack into a fresh handle with default metadata.
    pub(crate) fn hand_out(&self, index: u32) -> Buf {
        let s = &self.slots[index as usize];
        s.refs.store(1, Ordering::Relaxed);
        s.data_off.store(self.cfg.headroom, Ordering::Relaxed);
        s.len.store(0, Ordering::Relaxed);
        s.meta_len.store(0, Ordering::Relaxed);
        s.port.store(0, Ordering::Relaxed);
        s.ts_ns.store(0, Ordering::Relaxed);
        Buf { index, tag: self.tag }
    }

    /// Turns a free index into a handle of a freshly received packet: `bytes` (at most
    /// the room after the headroom, which the caller has checked) copied in right after
    /// the headroom, ingress `port` and receive time `ts_ns`. The receive path's
    /// [`hand_out`](Self::hand_out) and [`write_rx`](Self::write_rx) in one: each field
    /// of the metadata is written once, and no ownership check is made (the index came
    /// off a free stack: nobody else holds the buffer).
    #[inline]
    pub(crate) fn hand_out_rx(&self, index: u32, bytes: &[u8], port: u32, ts_ns: u64) -> Buf {
        let head = self.cfg.headroom;
        assert!(bytes.len() <= (self.cfg.buf_size - head) as usize, "checked by the caller");
        let s = &self.slots[index as usize];
        s.refs.store(1, Ordering::Relaxed);
        s.data_off.store(head, Ordering::Relaxed);
        s.len.store(bytes.len() as u32, Ordering::Relaxed);
        s.meta_len.store(0, Ordering::Relaxed);
        s.port.store(port, Ordering::Relaxed);
        s.ts_ns.store(ts_ns, Ordering::Relaxed);
        let at = self.chunk_ptr(index).as_ptr();
        // SAFETY: `index` came off a free stack (checked in range by the slot lookup
        // above) and was just made owned with one reference, which this call returns:
        // no other view of these bytes exists; headroom + len <= buf_size (asserted)
        // keeps the copy inside the buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), at.add(head as usize), bytes.len())
        };
        Buf { index, tag: self.tag }
    }

    /// Moves up to `n` free indices from the shared list onto `stack`; returns how many.
    pub(crate) fn take_batch(&self, stack: &mut Vec<u32>, n: usize) -> usize {
        let mut shared = self.lock_shared();
        let take = n.min(shared.len());
        let from = shared.len() - take;
        stack.extend(shared.drain(from..));
        take
    }

    /// Moves the top `n` indices of `stack` to the shared list.
    pub(crate) fn give_batch(&self, stack: &mut Vec<u32>, n: usize) {
        let from = stack.len().saturating_sub(n);
        self.lock_shared().extend(stack.drain(from..));
    }

    fn lock_shared(&self) -> std::sync::MutexGuard<'_, Vec<u32>> {
        // The list is a plain Vec of indices: a panic elsewhere cannot leave it torn.
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn slot(&self, buf: &Buf) -> Result<&Slot, PoolError> {
        if buf.tag != self.tag {
            return Err(PoolError::Foreign { index: buf.index });
        }
        self.slots.get(buf.index as usize).ok_or(PoolError::Foreign { index: buf.index })
    }

    fn unique_slot(&self, buf: &Buf) -> Result<&Slot, PoolError> {
        let s = self.slot(buf)?;
        // Acquire pairs with the Release decrement of a reference dropped elsewhere: its
        // reads of the bytes happen before our writes.
        match s.refs.load(Ordering::Acquire) {
            1 => Ok(s),
            FREE | LENT => Err(PoolError::NotOwned { index: buf.index }),
            refs => Err(PoolError::Shared { index: buf.index, refs }),
        }
    }

    fn chunk_ptr(&self, index: u32) -> NonNull<u8> {
        let at = index as usize * self.cfg.buf_size as usize;
        // SAFETY: callers pass a checked index < buffers, so `at` is inside the region
        // (which is at least buffers * buf_size bytes).
        unsafe { self.region.base().add(at) }
    }
}

/// A read prefetch of the cache line at `p` into every level.
#[inline(always)]
fn prefetch_line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, whatever the address, and reads
    // nothing the program can see.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

mod chain;

pub use chain::{ChainError, MAX_CHAIN};

#[cfg(test)]
mod tests;
