//! The client's side of the host router's header-copy and in-place paths: headers
//! received with their handle and returned with an egress port; frames rewritten in
//! place in the area and handed back with an egress port.

use std::sync::atomic::Ordering;

use super::ClientEnd;
use crate::{Desc, INLINE_BYTES};

/// A header the adapter delivered ([`ClientEnd::recv_headers`]).
#[derive(Debug)]
pub struct HeaderIn<'a> {
    /// The adapter's handle on the buffer holding the whole frame.
    pub handle: u64,
    /// The whole frame's length.
    pub total: usize,
    /// The frame's first bytes (at most [`INLINE_BYTES`]), in the receive ring's slot.
    pub header: &'a [u8],
}

impl ClientEnd {
    /// Hands up to `max` delivered headers to `f` (a receive entry that is not a header
    /// is skipped); returns how many entries it consumed. The slot is the adapter's
    /// again after `f` returns: copy what is kept.
    pub fn recv_headers(&mut self, max: usize, mut f: impl FnMut(HeaderIn<'_>)) -> usize {
        let n = (self.rx.ready(&self.shm).unwrap_or(0) as usize).min(max);
        for _ in 0..n {
            let slot = self.rx.slot(0);
            let d = Desc::from_words(
                self.shm.u64_at(slot).load(Ordering::Relaxed),
                self.shm.u64_at(slot + 8).load(Ordering::Relaxed),
            );
            if d.options & 0xffff == Desc::INLINE | Desc::HEADER && d.len as usize <= INLINE_BYTES {
                let at = self.rx.inline_slot(self.layout.inline_off(), 0);
                let header = self.shm.bytes_mut(at, d.len as usize);
                f(HeaderIn { handle: d.addr, total: (d.options >> 16) as usize, header });
            }
            self.rx.advance(&self.shm, 1);
        }
        n
    }

    /// Returns a header (at most [`INLINE_BYTES`]) for the buffer `handle` names, to
    /// leave on port `egress` (`Desc::EGRESS_DROP` drops the buffer); the adapter
    /// splices it before the rest of the frame. False when the transmit ring is full or
    /// `header` is too long.
    pub fn return_header(&mut self, handle: u64, egress: u16, header: &[u8]) -> bool {
        if header.len() > INLINE_BYTES || self.tx.ready(&self.shm).unwrap_or(0) == 0 {
            return false;
        }
        let at = self.tx.inline_slot(self.layout.inline_off(), 0);
        self.shm.bytes_mut(at, header.len()).copy_from_slice(header);
        let options = Desc::INLINE | Desc::HEADER | u32::from(egress) << 16;
        self.post_tx(Desc { addr: handle, len: header.len() as u32, options });
        true
    }

    /// Free transmit slots (after taking back completed frames).
    pub fn tx_room(&mut self) -> usize {
        self.reclaim();
        self.tx.ready(&self.shm).unwrap_or(0) as usize
    }

    /// The in-place path: hands up to `max` received frames to `f` in place, in the
    /// area; `f` rewrites what it wants and answers the egress port (`None`: drop).
    /// A forwarded frame goes back to the adapter as it is, with no copy; a dropped
    /// one returns to the fill ring. Takes no more frames than the transmit ring has
    /// room for. Returns how many entries it consumed.
    pub fn forward_in_place(
        &mut self,
        max: usize,
        mut f: impl FnMut(&mut [u8]) -> Option<u16>,
    ) -> usize {
        let room = self.tx_room();
        let n = (self.rx.ready(&self.shm).unwrap_or(0) as usize).min(max).min(room);
        for _ in 0..n {
            let slot = self.rx.slot(0);
            let d = Desc::from_words(
                self.shm.u64_at(slot).load(Ordering::Relaxed),
                self.shm.u64_at(slot + 8).load(Ordering::Relaxed),
            );
            self.rx.advance(&self.shm, 1);
            // Only a plain frame of the area; anything else is skipped (an inline entry
            // holds no frame, a bad one is the adapter's bug or a hostile writer's).
            if d.options != 0 {
                continue;
            }
            let Some(off) = self.layout.check_desc(d.addr, d.len) else { continue };
            let frame = d.addr - d.addr % u64::from(self.layout.frame_size);
            let bytes = self.shm.bytes_mut(self.layout.area_offset() + off, d.len as usize);
            match (d.len > 0).then(|| f(bytes)).flatten() {
                Some(egress) => {
                    let options = Desc::FORWARD | u32::from(egress) << 16;
                    self.post_tx(Desc { addr: d.addr, len: d.len, options });
                }
                None => {
                    self.free.push(frame);
                    self.refill_one();
                }
            }
        }
        // Frames come back on the completion ring: keep the fill ring stocked.
        self.reclaim();
        while self.refill_one() {}
        n
    }

    fn post_tx(&mut self, d: Desc) {
        let slot = self.tx.slot(0);
        self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
        self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        self.tx.advance(&self.shm, 1);
    }
}
