//! The application's side of an endpoint: it writes messages in place into its frames
//! and reads received ones in place. Single-threaded, non-blocking; pair it with the
//! endpoint's eventfd to sleep.

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;

mod hostpath;
pub use hostpath::HeaderIn;

use crate::layout::RingId;
use crate::ring::Ring;
use crate::{Desc, EndpointError, Layout, Payload, Shm, INLINE_BYTES};

/// An open endpoint, client side.
#[derive(Debug)]
pub struct ClientEnd {
    shm: Shm,
    layout: Layout,
    tx: Ring,
    rx: Ring,
    fill: Ring,
    comp: Ring,
    /// Frame addresses the client holds and may send from.
    free: Vec<u64>,
}

impl ClientEnd {
    /// Maps the endpoint fd and gives half of its frames to the adapter for receive.
    pub fn open(fd: OwnedFd) -> Result<Self, EndpointError> {
        let (shm, layout) = Shm::open(fd)?;
        let n = layout.ring_entries;
        let mut c = ClientEnd {
            tx: Ring::new(layout.ring_offset(RingId::Tx), n, true, 16),
            rx: Ring::new(layout.ring_offset(RingId::Rx), n, false, 16),
            fill: Ring::new(layout.ring_offset(RingId::Fill), n, true, 8),
            comp: Ring::new(layout.ring_offset(RingId::Completion), n, false, 8),
            free: (0..layout.frames).map(|f| u64::from(f) * u64::from(layout.frame_size)).collect(),
            shm,
            layout,
        };
        let give = (layout.frames / 2).max(1);
        for _ in 0..give {
            c.refill_one();
        }
        Ok(c)
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn refill_one(&mut self) -> bool {
        if self.fill.ready(&self.shm).unwrap_or(0) == 0 {
            return false;
        }
        let Some(addr) = self.free.pop() else { return false };
        self.shm.u64_at(self.fill.slot(0)).store(addr, Ordering::Relaxed);
        self.fill.advance(&self.shm, 1);
        true
    }

    fn reclaim(&mut self) {
        let n = self.comp.ready(&self.shm).unwrap_or(0);
        for _ in 0..n {
            let addr = self.shm.u64_at(self.comp.slot(0)).load(Ordering::Relaxed);
            self.comp.advance(&self.shm, 1);
            // Shared memory can hold anything (a hostile or buggy writer in this
            // process): only a frame of the area is taken back, by its start.
            if self.layout.check_frame(addr).is_some() {
                self.free.push(addr - addr % u64::from(self.layout.frame_size));
            }
        }
    }

    /// Sends one message of `len` bytes written in place by `write`: inline in the
    /// transmit ring when it fits ([`INLINE_BYTES`]), else in a free frame. Returns
    /// false when no frame or transmit slot is free (try again after the adapter has
    /// run).
    pub fn send_with(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> bool {
        self.send_entry(len, None, write)
    }

    /// Sends an active message for `handler` carrying `data` (at most
    /// [`Desc::MSG_MAX`] bytes; longer is refused with false, as a full ring is).
    pub fn send_message(&mut self, handler: u8, data: &[u8]) -> bool {
        self.send_message_to(None, handler, data)
    }

    /// As [`send_message`](Self::send_message), for the one extension `target` (its id;
    /// `None`: every extension of the domain that registered `handler`). Extension id
    /// 0xffff cannot be named: refused with false.
    pub fn send_message_to(&mut self, target: Option<u16>, handler: u8, data: &[u8]) -> bool {
        data.len() <= Desc::MSG_MAX
            && Desc::message_to(false, handler, target).is_some()
            && self.send_entry(data.len(), Some((handler, target)), |b| b.copy_from_slice(data))
    }

    fn send_entry(
        &mut self,
        len: usize,
        message: Option<(u8, Option<u16>)>,
        write: impl FnOnce(&mut [u8]),
    ) -> bool {
        self.reclaim();
        if len > self.layout.frame_size as usize || self.tx.ready(&self.shm).unwrap_or(0) == 0 {
            return false;
        }
        let options = |inline: bool| match message {
            Some((h, to)) => Desc::message_to(inline, h, to).unwrap_or(0),
            None => u32::from(inline) * Desc::INLINE,
        };
        let d = if len <= INLINE_BYTES {
            let at = self.tx.inline_slot(self.layout.inline_off(), 0);
            write(self.shm.bytes_mut(at, len));
            Desc { addr: 0, len: len as u32, options: options(true) }
        } else {
            let Some(addr) = self.free.pop() else { return false };
            let off = self.layout.area_offset() + addr as usize;
            write(self.shm.bytes_mut(off, len));
            Desc { addr, len: len as u32, options: options(false) }
        };
        let slot = self.tx.slot(0);
        self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
        self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        self.tx.advance(&self.shm, 1);
        true
    }

    /// Takes `frames` consecutive frames the client holds (none on the fill ring or in
    /// flight) out of its free list, for bulk data; returns the area offset of the
    /// first, or `None` when no such run is free. They stay the client's (the adapter
    /// never fills or completes them) until [`ClientEnd::release_area`].
    pub fn reserve_area(&mut self, frames: u32) -> Option<u64> {
        self.reclaim();
        let fs = u64::from(self.layout.frame_size);
        let mut starts: Vec<u64> = self.free.clone();
        starts.sort_unstable();
        let n = u64::from(frames.max(1));
        let first = starts
            .iter()
            .copied()
            .find(|&a| (0..n).all(|i| starts.binary_search(&(a + i * fs)).is_ok()))?;
        self.free.retain(|&a| a < first || a >= first + n * fs);
        Some(first)
    }

    /// Gives `frames` frames from `addr` (a [`ClientEnd::reserve_area`] result) back to
    /// the free list.
    pub fn release_area(&mut self, addr: u64, frames: u32) {
        let fs = u64::from(self.layout.frame_size);
        for i in 0..u64::from(frames.max(1)) {
            if self.layout.check_frame(addr + i * fs).is_some() {
                self.free.push(addr + i * fs);
            }
        }
    }

    /// Writes `data` at offset `off` of the buffer area; `false` when it does not fit
    /// inside the area.
    pub fn write_area(&mut self, off: u64, data: &[u8]) -> bool {
        if !self.layout.in_area(off, data.len()) {
            return false;
        }
        self.shm.write(self.layout.area_offset() + off as usize, data);
        true
    }

    /// Sends a bulk active message for `handler`: a reference to `len` bytes at offset
    /// `addr` of the buffer area (written there first, e.g. into a reserved region).
    /// Not checked here: the adapter checks it (a bad reference is counted `bad_desc`).
    /// Returns false when the transmit ring is full.
    pub fn send_bulk(&mut self, handler: u8, addr: u64, len: u32) -> bool {
        self.send_bulk_to(None, handler, addr, len)
    }

    /// As [`send_bulk`](Self::send_bulk), for the one extension `target` (see
    /// [`send_message_to`](Self::send_message_to)).
    pub fn send_bulk_to(&mut self, target: Option<u16>, handler: u8, addr: u64, len: u32) -> bool {
        let Some(options) = Desc::message_to(false, handler, target) else { return false };
        if self.tx.ready(&self.shm).unwrap_or(0) == 0 {
            return false;
        }
        let options = options | Desc::BULK;
        let d = Desc { addr, len, options };
        let slot = self.tx.slot(0);
        self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
        self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        self.tx.advance(&self.shm, 1);
        true
    }

    /// Sends a bulk active message for `handler` of endpoint `dest` on another adapter
    /// ([`Desc::REMOTE_HANDLERS`]: its handlers) over the tunnel port this endpoint is
    /// bound to: a reference to `len` bytes (1..=16 KiB) at offset `addr` of the buffer
    /// area, which the adapter reads out in pieces ([`Desc::REMOTE`]); keep them
    /// unchanged until the adapter has taken the descriptor. Not checked here (the
    /// adapter checks it). Returns false when the transmit ring is full.
    pub fn send_bulk_remote(&mut self, dest: u16, handler: u8, addr: u64, len: u32) -> bool {
        if self.tx.ready(&self.shm).unwrap_or(0) == 0 {
            return false;
        }
        let options = Desc::message_options(false, handler, dest) | Desc::BULK | Desc::REMOTE;
        let d = Desc { addr, len, options };
        let slot = self.tx.slot(0);
        self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
        self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        self.tx.advance(&self.shm, 1);
        true
    }

    /// Lends `len` bytes at offset `addr` of the buffer area (a region reserved with
    /// [`ClientEnd::reserve_area`]) to the adapter for one bulk message from another
    /// adapter ([`Desc::GRANT`]): it arrives through [`recv_marked`](Self::recv_marked)
    /// as a bulk message in that region, which is then the client's again. At most
    /// [`crate::GRANTS`] grants are outstanding (the adapter refuses more, `bad_desc`).
    /// Not checked here (the adapter checks it). Returns false when the transmit ring
    /// is full.
    pub fn grant_area(&mut self, addr: u64, len: u32) -> bool {
        if self.tx.ready(&self.shm).unwrap_or(0) == 0 {
            return false;
        }
        let d = Desc { addr, len, options: Desc::GRANT };
        let slot = self.tx.slot(0);
        self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
        self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        self.tx.advance(&self.shm, 1);
        true
    }

    /// Sends a copy of `data`.
    pub fn send(&mut self, data: &[u8]) -> bool {
        self.send_with(data.len(), |b| b.copy_from_slice(data))
    }

    /// Hands up to `max` received messages to `f` in place, returns their frames to the
    /// adapter, and returns how many entries it consumed (a descriptor that fails its
    /// checks is skipped, not handed on).
    /// Active messages are handed on as well; [`recv_marked`](Self::recv_marked) tells
    /// them apart.
    pub fn recv(&mut self, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        self.recv_marked(max, |data, _| f(data))
    }

    /// As [`recv`](Self::recv), with each entry's marking: `Some((handler, source))` for
    /// an active message (source: the sending extension's id), `None` for a frame. The
    /// pieces of a multi-buffer frame ([`Desc::CONTD`]) are handed on one by one, as
    /// frames: read them with [`recv_pieces`](Self::recv_pieces).
    pub fn recv_marked(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], Option<(u8, u16)>),
    ) -> usize {
        self.recv_entries(max, |data, mark, _| f(data, mark))
    }

    /// As [`recv_marked`](Self::recv_marked), each entry with whether more of its frame
    /// follows in the next one ([`Desc::CONTD`], AF_XDP's `XDP_PKT_CONTD`): a
    /// multi-buffer frame is the entries up to and including the first with `false`.
    /// The adapter posts a frame's pieces together, so a frame is cut between calls
    /// only by `max`.
    pub fn recv_pieces(
        &mut self,
        max: usize,
        f: impl FnMut(&[u8], Option<(u8, u16)>, bool),
    ) -> usize {
        self.recv_entries(max, f)
    }

    fn recv_entries(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], Option<(u8, u16)>, bool),
    ) -> usize {
        let n = (self.rx.ready(&self.shm).unwrap_or(0) as usize).min(max);
        for _ in 0..n {
            let slot = self.rx.slot(0);
            let d = Desc::from_words(
                self.shm.u64_at(slot).load(Ordering::Relaxed),
                self.shm.u64_at(slot + 8).load(Ordering::Relaxed),
            );
            if let Some(mark) = self.layout.check_bulk_rx(d) {
                // A bulk message an extension wrote into the area: handed in place;
                // the region stays the client's (it reserved it).
                f(
                    self.shm.bytes_mut(self.layout.area_offset() + d.addr as usize, d.len as usize),
                    Some(mark),
                    false,
                );
                self.rx.advance(&self.shm, 1);
                continue;
            }
            let more = d.options == Desc::CONTD;
            let plain = if more { Desc { options: 0, ..d } } else { d };
            match self.layout.check_entry(plain) {
                Some((Payload::Inline, msg)) if !more => {
                    let at = self.rx.inline_slot(self.layout.inline_off(), 0);
                    f(self.shm.bytes_mut(at, d.len as usize), msg, false);
                }
                Some((Payload::Frame(off), msg)) => {
                    let bytes = self.shm.bytes_mut(self.layout.area_offset() + off, d.len as usize);
                    f(bytes, msg, more);
                    let frame = d.addr - d.addr % u64::from(self.layout.frame_size);
                    self.free.push(frame);
                    self.refill_one();
                }
                _ => {}
            }
            self.rx.advance(&self.shm, 1);
        }
        n
    }

    /// Test and fuzz access: the raw shared words, to play a hostile client.
    pub fn poke_u32(&self, off: usize, v: u32) {
        self.shm.u32_at(off).store(v, Ordering::Release);
    }

    pub fn poke_u64(&self, off: usize, v: u64) {
        self.shm.u64_at(off).store(v, Ordering::Release);
    }
}
