//! The adapter's side of the host router's data paths (header-copy and in-place, see
//! `docs/ARCHITECTURE.md`, "The host router's four data paths"). The adapter delivers
//! a header with a handle, or a whole frame into the area, and takes back what the
//! client returns with the egress port it chose. As everywhere here, each word the
//! client writes is read once and checked; handles are opaque to this layer (the
//! caller validates them against what it handed out).

use std::sync::atomic::Ordering;

use super::AdapterEnd;
use crate::layout::RingId;
use crate::{Desc, INLINE_BYTES};

/// What [`AdapterEnd::take_returned`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returned {
    /// A header of `len` bytes (copied out) for the buffer `handle` names, to leave on
    /// port `egress` ([`Desc::EGRESS_DROP`]: drop it).
    Header { handle: u64, egress: u16, len: usize },
    /// A frame of `len` bytes (copied out) rewritten in place, to leave on `egress`; its
    /// frame went back to the client on the completion ring.
    Forward { egress: u16, len: usize },
}

impl AdapterEnd {
    /// Delivers the first bytes of a frame (`header`, at most [`INLINE_BYTES`]) inline
    /// with `handle` (in the descriptor's address) and the frame's whole length
    /// `total`; false (counted as `rx_no_room`) when the receive ring is full.
    pub fn deliver_header(&mut self, header: &[u8], handle: u64, total: u16) -> bool {
        if header.len() > INLINE_BYTES {
            self.stats.rx_too_big += 1;
            return false;
        }
        if self.ready(RingId::Rx) == 0 {
            self.stats.rx_no_room += 1;
            return false;
        }
        self.shm.write(self.rx.inline_slot(self.layout.inline_off(), 0), header);
        let options = Desc::INLINE | Desc::HEADER | u32::from(total) << 16;
        self.post_rx(Desc { addr: handle, len: header.len() as u32, options });
        self.stats.rx_delivered += 1;
        self.stats.rx_inline += 1;
        true
    }

    /// Delivers `frame` into a frame of the area taken from the fill ring, never inline
    /// (the in-place path: the client rewrites it there and hands the same frame back).
    /// False (counted) when there is no room.
    pub fn deliver_in_frame(&mut self, frame: &[u8]) -> bool {
        if self.ready(RingId::Rx) == 0 {
            self.stats.rx_no_room += 1;
            return false;
        }
        self.deliver_in_fill_frame(frame, 0)
    }

    /// Takes one returned header ([`Desc::HEADER`]) or in-place frame
    /// ([`Desc::FORWARD`]) from the transmit ring, copying its bytes into `out`; `None`
    /// when there is nothing (valid) to take. Any other descriptor, or one whose
    /// options, address or length fail their checks, is skipped and counted
    /// (`bad_desc`); bytes longer than `out` are dropped and counted (`tx_too_big`).
    pub fn take_returned(&mut self, out: &mut [u8]) -> Option<Returned> {
        let avail = self.ready(RingId::Tx);
        for _ in 0..avail {
            let slot = self.tx.slot(0);
            let d = Desc::from_words(
                self.shm.u64_at(slot).load(Ordering::Relaxed),
                self.shm.u64_at(slot + 8).load(Ordering::Relaxed),
            );
            let len = d.len as usize;
            let egress = (d.options >> 16) as u16;
            match d.options & 0xffff {
                f if f == Desc::INLINE | Desc::HEADER && len <= INLINE_BYTES => {
                    let fits = len <= out.len();
                    if fits {
                        let at = self.tx.inline_slot(self.layout.inline_off(), 0);
                        self.shm.read(at, &mut out[..len]);
                    }
                    self.tx.advance(&self.shm, 1);
                    if !fits {
                        self.stats.tx_too_big += 1;
                        continue;
                    }
                    self.stats.tx_taken += 1;
                    self.stats.tx_inline += 1;
                    return Some(Returned::Header { handle: d.addr, egress, len });
                }
                Desc::FORWARD if self.layout.check_desc(d.addr, d.len).is_some() => {
                    if self.ready(RingId::Completion) == 0 {
                        return None;
                    }
                    self.tx.advance(&self.shm, 1);
                    let fits = len <= out.len();
                    if fits {
                        self.shm.read(self.layout.area_offset() + d.addr as usize, &mut out[..len]);
                    }
                    let cslot = self.comp.slot(0);
                    self.shm.u64_at(cslot).store(d.addr, Ordering::Relaxed);
                    self.comp.advance(&self.shm, 1);
                    if !fits {
                        self.stats.tx_too_big += 1;
                        continue;
                    }
                    self.stats.tx_taken += 1;
                    return Some(Returned::Forward { egress, len });
                }
                _ => {
                    self.tx.advance(&self.shm, 1);
                    self.stats.bad_desc += 1;
                }
            }
        }
        None
    }
}
