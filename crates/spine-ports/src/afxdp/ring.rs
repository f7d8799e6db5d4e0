//! One AF_XDP ring mapped from the socket: a power-of-two array of descriptors with a
//! producer and a consumer index shared with the kernel. The side we own keeps its
//! index locally and publishes it with a release store; the other side's index is read
//! with an acquire load and checked, since it comes from shared memory.

use std::os::fd::BorrowedFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::os::Mmap;

/// A mapped ring; `elem` is 8 (fill, completion: addresses) or 16 (rx, tx: `xdp_desc`).
#[derive(Debug)]
pub(super) struct Ring {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<u8>,
    mask: u32,
    size: u32,
    elem: usize,
    /// Our index: the producer for fill and TX rings, the consumer for RX and completion.
    local: u32,
    /// Times the other side's index was impossible (more entries than the ring holds).
    pub(super) corrupt: u64,
    _map: Mmap,
}

// SAFETY: the pointers all point into `_map`, which the ring owns; the ring moves
// between threads only as part of its port.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring at page offset `pgoff` and reads where both indices stand.
    pub(super) fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        elem: usize,
        pgoff: u64,
        producer_side: bool,
    ) -> Result<Ring, i32> {
        let len = off.desc as usize + size as usize * elem;
        let map = Mmap::new(fd, len, pgoff)?;
        let fits = |at: u64, n: usize| (at as usize).is_multiple_of(4) && at as usize + n <= len;
        if !fits(off.producer, 4)
            || !fits(off.consumer, 4)
            || !fits(off.flags, 4)
            || !fits(off.desc, 0)
        {
            return Err(libc::EINVAL);
        }
        let at = |o: u64| {
            // SAFETY: `o` was checked to lie inside the mapping.
            unsafe { map.ptr().add(o as usize) }
        };
        let (producer, consumer, flags, descs) =
            (at(off.producer).cast(), at(off.consumer).cast(), at(off.flags).cast(), at(off.desc));
        let mut ring = Ring {
            producer,
            consumer,
            flags,
            descs,
            mask: size - 1,
            size,
            elem,
            local: 0,
            corrupt: 0,
            _map: map,
        };
        ring.local = if producer_side {
            ring.prod().load(Ordering::Relaxed)
        } else {
            ring.cons().load(Ordering::Relaxed)
        };
        Ok(ring)
    }

    fn prod(&self) -> &AtomicU32 {
        // SAFETY: a checked, aligned pointer into the mapping this ring owns.
        unsafe { self.producer.as_ref() }
    }

    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as in `prod`.
        unsafe { self.consumer.as_ref() }
    }

    fn slot(&self, i: u32) -> *mut u8 {
        let at = (self.local.wrapping_add(i) & self.mask) as usize * self.elem;
        // SAFETY: at < size * elem, and the mapping holds size * elem bytes after desc.
        unsafe { self.descs.as_ptr().add(at) }
    }

    /// The kernel asks to be woken (`XDP_RING_NEED_WAKEUP`) before it looks at the ring.
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as in `prod`.
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // Consumer side (RX, completion).

    /// Entries the kernel has produced that we have not consumed.
    pub(super) fn available(&mut self) -> u32 {
        let n = self.prod().load(Ordering::Acquire).wrapping_sub(self.local);
        if n > self.size {
            self.corrupt += 1;
            return 0;
        }
        n
    }

    /// The `i`-th available address (fill and completion rings).
    pub(super) fn read_addr(&self, i: u32) -> u64 {
        // SAFETY: the slot is inside the mapping and 8-aligned (desc offset and element
        // size are multiples of 8); the kernel does not write it until we release it.
        unsafe { self.slot(i).cast::<u64>().read_volatile() }
    }

    /// The `i`-th available `xdp_desc`: address and length.
    pub(super) fn read_desc(&self, i: u32) -> (u64, u32) {
        let p = self.slot(i);
        // SAFETY: as in `read_addr`; `xdp_desc` is a u64 then two u32s.
        unsafe { (p.cast::<u64>().read_volatile(), p.add(8).cast::<u32>().read_volatile()) }
    }

    /// The `i`-th available `xdp_desc`'s options (`XDP_PKT_CONTD`: the packet goes on in
    /// the next descriptor).
    pub(super) fn read_options(&self, i: u32) -> u32 {
        // SAFETY: as in `read_desc`; the options are the u32 at offset 12.
        unsafe { self.slot(i).add(12).cast::<u32>().read_volatile() }
    }

    /// Gives `n` consumed entries back to the kernel.
    pub(super) fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.cons().store(self.local, Ordering::Release);
    }

    // Producer side (fill, TX).

    /// Entries we may still produce.
    pub(super) fn free_slots(&mut self) -> u32 {
        let used = self.local.wrapping_sub(self.cons().load(Ordering::Acquire));
        if used > self.size {
            self.corrupt += 1;
            return 0;
        }
        self.size - used
    }

    pub(super) fn write_addr(&mut self, i: u32, addr: u64) {
        // SAFETY: inside the mapping, 8-aligned, and not yet published: only we write it.
        unsafe { self.slot(i).cast::<u64>().write_volatile(addr) }
    }

    pub(super) fn write_desc(&mut self, i: u32, addr: u64, len: u32) {
        self.write_desc_opts(i, addr, len, 0);
    }

    /// As `write_desc`, with `options` (`XDP_PKT_CONTD` for all but a chain's last).
    pub(super) fn write_desc_opts(&mut self, i: u32, addr: u64, len: u32, options: u32) {
        let p = self.slot(i);
        // SAFETY: as in `write_addr`; `xdp_desc` is a u64 then two u32s.
        unsafe {
            p.cast::<u64>().write_volatile(addr);
            p.add(8).cast::<u32>().write_volatile(len);
            p.add(12).cast::<u32>().write_volatile(options);
        }
    }

    /// Publishes `n` written entries.
    pub(super) fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.prod().store(self.local, Ordering::Release);
    }
}
