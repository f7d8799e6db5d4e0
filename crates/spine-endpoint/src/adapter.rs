//! The adapter's side of an endpoint. Every index, address and length read from shared
//! memory is read once and checked before use; a failed check is counted and the entry
//! skipped, never trusted and never a panic. Frames are copied to and from the
//! adapter's own buffers, so whatever the client does, it holds none of them.

use std::sync::atomic::Ordering;

mod hostpath;
pub use hostpath::Returned;

use crate::layout::RingId;
use crate::ring::Ring;
use crate::{Desc, EndpointError, Layout, Payload, Shm, INLINE_BYTES};

/// Counters of one endpoint, adapter side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AdapterStats {
    pub rx_delivered: u64,
    pub tx_taken: u64,
    /// Receive dropped: no frame on the fill ring, or the receive ring full.
    pub rx_no_room: u64,
    /// Receive dropped: longer than the room left in the fill frame.
    pub rx_too_big: u64,
    /// Fill addresses or transmit descriptors that failed their checks.
    pub bad_desc: u64,
    /// Times a client index claimed more entries than its ring holds.
    pub bad_index: u64,
    /// Of `rx_delivered` and `tx_taken`: those that travelled inline in the ring.
    pub rx_inline: u64,
    pub tx_inline: u64,
    /// Valid transmit descriptors longer than the caller's buffer: dropped, the frame
    /// returned to the client.
    pub tx_too_big: u64,
    /// Active messages the client sent (valid descriptors), taken.
    pub msg_taken: u64,
    /// Active messages taken by a caller that serves none ([`AdapterEnd::take`]): dropped.
    pub msg_dropped: u64,
    /// Active messages delivered to the client ([`AdapterEnd::deliver_message`]).
    pub msg_delivered: u64,
    /// Of `rx_delivered`: frames delivered as several descriptors ([`Desc::CONTD`]).
    pub rx_multi: u64,
}

/// What [`AdapterEnd::take_entry`] took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Taken {
    /// A frame of this many bytes.
    Frame(usize),
    /// An active message for `handler` of `len` bytes (at most [`Desc::MSG_MAX`]), for
    /// the one extension `to` names ([`Desc::target`]; `None`: every extension of the
    /// endpoint's domain that registered the handler).
    Message { handler: u8, len: usize, to: Option<u16> },
    /// A bulk active message for `handler`: `len` bytes at offset `off` of the buffer
    /// area (checked when taken; read them with [`AdapterEnd::read_area`], which checks
    /// again); `to` as for [`Taken::Message`].
    Bulk { handler: u8, off: u64, len: u32, to: Option<u16> },
    /// A bulk message for another adapter ([`Desc::REMOTE`]): `len` bytes at offset
    /// `off` of the area (checked as for [`Taken::Bulk`]) for `handler` of endpoint
    /// `dest` over there ([`Desc::REMOTE_HANDLERS`]: its handlers).
    RemoteBulk { handler: u8, off: u64, len: u32, dest: u16 },
}

/// The adapter's handle on one endpoint.
#[derive(Debug)]
pub struct AdapterEnd {
    shm: Shm,
    layout: Layout,
    tx: Ring,
    rx: Ring,
    fill: Ring,
    comp: Ring,
    stats: AdapterStats,
    /// Regions of the area the client granted for bulk messages from tunnels
    /// ([`Desc::GRANT`]), oldest first: `(off, len)`, the first `grants` in use.
    granted: [(u64, u32); GRANTS],
    grants: usize,
    /// The client reads multi-buffer frames ([`Desc::CONTD`]).
    multi_buffer: bool,
}

/// Grants ([`Desc::GRANT`]) an endpoint may have outstanding; one past them is refused
/// (`bad_desc`).
pub const GRANTS: usize = 8;

/// Most receive descriptors one frame takes ([`AdapterEnd::deliver_pieces`]); a frame
/// that would need more is dropped (`rx_too_big`).
pub const MAX_PIECES: usize = 32;

impl AdapterEnd {
    /// Creates an endpoint region for `layout`. Hand [`AdapterEnd::shm`]'s fd to the client.
    pub fn create(layout: Layout) -> Result<Self, EndpointError> {
        let shm = Shm::create(&layout)?;
        let n = layout.ring_entries;
        Ok(AdapterEnd {
            tx: Ring::new(layout.ring_offset(RingId::Tx), n, false, 16),
            rx: Ring::new(layout.ring_offset(RingId::Rx), n, true, 16),
            fill: Ring::new(layout.ring_offset(RingId::Fill), n, false, 8),
            comp: Ring::new(layout.ring_offset(RingId::Completion), n, true, 8),
            shm,
            layout,
            stats: AdapterStats::default(),
            granted: [(0, 0); GRANTS],
            grants: 0,
            multi_buffer: false,
        })
    }

    pub fn shm(&self) -> &Shm {
        &self.shm
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn stats(&self) -> AdapterStats {
        self.stats
    }

    /// Whether a frame longer than one area frame may arrive as several descriptors
    /// ([`Desc::CONTD`]): AF_XDP's `XDP_USE_SG`, chosen when the endpoint is opened
    /// (the client must read the marks). Off: every frame takes one descriptor.
    pub fn set_multi_buffer(&mut self, on: bool) {
        self.multi_buffer = on;
    }

    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    fn ready(&mut self, which: RingId) -> u32 {
        let ring = match which {
            RingId::Tx => &self.tx,
            RingId::Rx => &self.rx,
            RingId::Fill => &self.fill,
            RingId::Completion => &self.comp,
        };
        match ring.ready(&self.shm) {
            Some(n) => n,
            None => {
                self.stats.bad_index += 1;
                0
            }
        }
    }

    /// Delivers one frame to the client: inline in the receive ring when it fits
    /// ([`INLINE_BYTES`]), else into a frame taken from the fill ring, then posts a
    /// receive descriptor. Returns false (and counts why) when it could not.
    pub fn deliver(&mut self, frame: &[u8]) -> bool {
        self.deliver_with(frame, None)
    }

    /// Delivers an active message for `handler` from `source` (an extension id), marked
    /// as such on the receive ring; `payload` is at most [`Desc::MSG_MAX`] bytes (longer
    /// ones are refused and counted as `rx_too_big`).
    pub fn deliver_message(&mut self, handler: u8, source: u16, payload: &[u8]) -> bool {
        if payload.len() > Desc::MSG_MAX {
            self.stats.rx_too_big += 1;
            return false;
        }
        let ok = self.deliver_with(payload, Some((handler, source)));
        if ok {
            self.stats.msg_delivered += 1;
        }
        ok
    }

    fn deliver_with(&mut self, frame: &[u8], msg: Option<(u8, u16)>) -> bool {
        let options = |inline: bool| match msg {
            Some((h, src)) => Desc::message_options(inline, h, src),
            None => u32::from(inline) * Desc::INLINE,
        };
        if self.ready(RingId::Rx) == 0 {
            self.stats.rx_no_room += 1;
            return false;
        }
        if frame.len() <= INLINE_BYTES {
            self.shm.write(self.rx.inline_slot(self.layout.inline_off(), 0), frame);
            self.post_rx(Desc { addr: 0, len: frame.len() as u32, options: options(true) });
            self.stats.rx_delivered += 1;
            self.stats.rx_inline += 1;
            return true;
        }
        self.deliver_in_fill_frame(frame, options(false))
    }

    /// Copies `frame` into the next good frame of the fill ring and posts it on the
    /// receive ring (which has room) with `options`. Bad fill entries are skipped, at
    /// most the ring's worth so a hostile client cannot keep the adapter here.
    pub(crate) fn deliver_in_fill_frame(&mut self, frame: &[u8], options: u32) -> bool {
        self.gather_in_fill_frame(&[frame], frame.len(), options)
    }

    /// As [`AdapterEnd::deliver_in_fill_frame`] for the frame made of `pieces` (of
    /// `total` bytes together).
    fn gather_in_fill_frame(&mut self, pieces: &[&[u8]], total: usize, options: u32) -> bool {
        let avail = self.ready(RingId::Fill);
        for _ in 0..avail {
            let addr = self.shm.u64_at(self.fill.slot(0)).load(Ordering::Relaxed);
            self.fill.advance(&self.shm, 1);
            let Some((_, room)) = self.layout.check_frame(addr) else {
                self.stats.bad_desc += 1;
                continue;
            };
            if total > room {
                self.stats.rx_too_big += 1;
                // The frame goes back to the client unused, as a zero-length receive.
                self.post_rx(Desc { addr, len: 0, options: 0 });
                return false;
            }
            self.write_gathered(self.layout.area_offset() + addr as usize, pieces, 0, total);
            self.post_rx(Desc { addr, len: total as u32, options });
            self.stats.rx_delivered += 1;
            return true;
        }
        self.stats.rx_no_room += 1;
        false
    }

    /// Writes `len` bytes of the concatenation of `pieces`, from its byte `skip`, at
    /// offset `at` of the region (inside it: the caller checked).
    fn write_gathered(&self, mut at: usize, pieces: &[&[u8]], mut skip: usize, mut len: usize) {
        for p in pieces {
            if len == 0 {
                break;
            }
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            let n = (p.len() - skip).min(len);
            self.shm.write(at, &p[skip..skip + n]);
            at += n;
            len -= n;
            skip = 0;
        }
    }

    /// Delivers one frame given as `pieces` (a chained frame's buffers, in order), all
    /// or nothing. Inline when it fits ([`INLINE_BYTES`]); else, on an endpoint that
    /// reads multi-buffer frames ([`AdapterEnd::set_multi_buffer`]), in as many fill
    /// frames as it needs (each filled to its end, at most [`MAX_PIECES`]), posted
    /// together as that many receive descriptors, every one but the last marked
    /// [`Desc::CONTD`]; on any other endpoint, in one fill frame as
    /// [`AdapterEnd::deliver`] does. When the fill ring or the receive ring has not
    /// room for every piece nothing is taken or posted (`rx_no_room`; `rx_too_big`
    /// past [`MAX_PIECES`] or, single-frame, past a frame's room). Each fill entry is
    /// read once; a bad one among those used is skipped and counted (`bad_desc`).
    pub fn deliver_pieces(&mut self, pieces: &[&[u8]]) -> bool {
        let total: usize = pieces.iter().map(|p| p.len()).sum();
        let rx_room = self.ready(RingId::Rx);
        if rx_room == 0 {
            self.stats.rx_no_room += 1;
            return false;
        }
        if total <= INLINE_BYTES {
            let at = self.rx.inline_slot(self.layout.inline_off(), 0);
            self.write_gathered(at, pieces, 0, total);
            self.post_rx(Desc { addr: 0, len: total as u32, options: Desc::INLINE });
            self.stats.rx_delivered += 1;
            self.stats.rx_inline += 1;
            return true;
        }
        if !self.multi_buffer {
            if total > self.layout.frame_size as usize || total > u32::MAX as usize {
                // No fill frame can hold it: nothing taken.
                self.stats.rx_too_big += 1;
                return false;
            }
            return self.gather_in_fill_frame(pieces, total, 0);
        }
        // The plan: fill frames in ring order, each read once, until they hold it.
        let most = MAX_PIECES.min(rx_room as usize);
        let avail = self.ready(RingId::Fill);
        let mut plan = [(0u64, 0usize); MAX_PIECES];
        let (mut used, mut read, mut bad, mut room) = (0, 0u32, 0, 0usize);
        while room < total && read < avail && used < most {
            let addr = self.shm.u64_at(self.fill.slot(read)).load(Ordering::Relaxed);
            read += 1;
            match self.layout.check_frame(addr) {
                Some((_, r)) => {
                    plan[used] = (addr, r);
                    used += 1;
                    room += r;
                }
                None => bad += 1,
            }
        }
        if room < total {
            if used == MAX_PIECES {
                self.stats.rx_too_big += 1;
            } else {
                self.stats.rx_no_room += 1;
            }
            return false;
        }
        self.fill.advance(&self.shm, read);
        self.stats.bad_desc += bad;
        let mut off = 0;
        for (i, &(addr, r)) in plan[..used].iter().enumerate() {
            let len = r.min(total - off);
            self.write_gathered(self.layout.area_offset() + addr as usize, pieces, off, len);
            off += len;
            let options = if i + 1 < used { Desc::CONTD } else { 0 };
            let d = Desc { addr, len: len as u32, options };
            let slot = self.rx.slot(i as u32);
            self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
            self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        }
        // One release for every piece: the client sees the whole frame or none of it.
        self.rx.advance(&self.shm, used as u32);
        self.stats.rx_delivered += 1;
        self.stats.rx_multi += u64::from(used > 1);
        true
    }

    fn post_rx(&mut self, d: Desc) {
        let slot = self.rx.slot(0);
        self.shm.u64_at(slot).store(d.addr, Ordering::Relaxed);
        self.shm.u64_at(slot + 8).store(d.word(), Ordering::Relaxed);
        self.rx.advance(&self.shm, 1);
    }

    /// Whether the client has posted anything on its transmit ring (one shared load):
    /// lets a caller skip preparing a destination for [`AdapterEnd::take`].
    pub fn tx_pending(&mut self) -> bool {
        self.ready(RingId::Tx) > 0
    }

    /// Takes one frame the client transmitted, copying it into `out`; returns its
    /// length, or `None` when there is nothing (valid) to take. For a caller that serves
    /// no active messages: a message met on the way is dropped and counted
    /// (`msg_dropped`). See [`AdapterEnd::take_entry`] for the rest.
    pub fn take(&mut self, out: &mut [u8]) -> Option<usize> {
        loop {
            match self.take_entry(out)? {
                Taken::Frame(len) => return Some(len),
                Taken::Message { .. } | Taken::Bulk { .. } | Taken::RemoteBulk { .. } => {
                    self.stats.msg_dropped += 1
                }
            }
        }
    }

    /// Takes one frame or active message the client transmitted, copying its payload
    /// into `out`, or `None` when there is nothing (valid) to take. A frame goes back to
    /// the client on the completion ring; an inline one needs no completion. A valid
    /// entry longer than `out` is dropped and counted (`tx_too_big`); an invalid
    /// descriptor (bad address, length, options, a message over [`Desc::MSG_MAX`]) is
    /// skipped and counted (`bad_desc`).
    pub fn take_entry(&mut self, out: &mut [u8]) -> Option<Taken> {
        let avail = self.ready(RingId::Tx);
        for _ in 0..avail {
            let slot = self.tx.slot(0);
            let d = Desc::from_words(
                self.shm.u64_at(slot).load(Ordering::Relaxed),
                self.shm.u64_at(slot + 8).load(Ordering::Relaxed),
            );
            let len = d.len as usize;
            if d.options == Desc::GRANT {
                self.tx.advance(&self.shm, 1);
                self.keep_grant(d);
                continue;
            }
            if d.options & !0xffff_ff00 == Desc::MESSAGE | Desc::BULK | Desc::REMOTE {
                // As a bulk reference below, for another adapter.
                self.tx.advance(&self.shm, 1);
                let local = Desc { options: d.options & !Desc::REMOTE & 0xffff, ..d };
                match self.layout.check_bulk(local) {
                    Some(handler) => {
                        self.count_taken(true);
                        let dest = (d.options >> 16) as u16;
                        return Some(Taken::RemoteBulk { handler, off: d.addr, len: d.len, dest });
                    }
                    None => {
                        self.stats.bad_desc += 1;
                        continue;
                    }
                }
            }
            if d.options & Desc::BULK != 0 {
                // A reference, not a payload: nothing to copy, nothing to complete.
                self.tx.advance(&self.shm, 1);
                match self.layout.check_bulk(d) {
                    Some(handler) => {
                        self.count_taken(true);
                        let to = d.target();
                        return Some(Taken::Bulk { handler, off: d.addr, len: d.len, to });
                    }
                    None => {
                        self.stats.bad_desc += 1;
                        continue;
                    }
                }
            }
            let (payload, msg) = match self.layout.check_entry(d) {
                None => {
                    self.tx.advance(&self.shm, 1);
                    self.stats.bad_desc += 1;
                    continue;
                }
                Some(x) => x,
            };
            let taken = match msg {
                Some((handler, _)) => Taken::Message { handler, len, to: d.target() },
                None => Taken::Frame(len),
            };
            let off = match payload {
                Payload::Inline => {
                    // The slot is the client's again once the index moves: copy first.
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
                    self.count_taken(msg.is_some());
                    self.stats.tx_inline += 1;
                    return Some(taken);
                }
                Payload::Frame(off) => off,
            };
            // The frame must be able to go back: leave the entry until there is room.
            if self.ready(RingId::Completion) == 0 {
                return None;
            }
            self.tx.advance(&self.shm, 1);
            let fits = len <= out.len();
            if fits {
                self.shm.read(self.layout.area_offset() + off, &mut out[..len]);
            }
            let cslot = self.comp.slot(0);
            self.shm.u64_at(cslot).store(d.addr, Ordering::Relaxed);
            self.comp.advance(&self.shm, 1);
            if !fits {
                self.stats.tx_too_big += 1;
                continue;
            }
            self.count_taken(msg.is_some());
            return Some(taken);
        }
        None
    }

    /// Writes `data` at offset `off` of the buffer area (`spine_msg_bulk_write`); `false`
    /// (nothing written) when the range is not wholly inside the area. The area is
    /// shared with the client: an extension writes only where the client told it to
    /// (a region it reserved), and only inside this endpoint's area.
    pub fn write_area(&self, off: u64, data: &[u8]) -> bool {
        if !self.layout.in_area(off, data.len()) {
            return false;
        }
        self.shm.write(self.layout.area_offset() + off as usize, data);
        true
    }

    /// Delivers a bulk active message for `handler` from extension `source`: a
    /// reference to `len` bytes (at least 1) at offset `off` of this endpoint's area,
    /// posted on the receive ring marked [`Desc::BULK`]. A reference outside the area
    /// is refused (`bad_desc`), as is a full ring (`rx_no_room`): `false`.
    pub fn deliver_bulk_message(&mut self, handler: u8, source: u16, off: u64, len: u32) -> bool {
        if len == 0 || !self.layout.in_area(off, len as usize) {
            self.stats.bad_desc += 1;
            return false;
        }
        if self.ready(RingId::Rx) == 0 {
            self.stats.rx_no_room += 1;
            return false;
        }
        let options = Desc::message_options(false, handler, source) | Desc::BULK;
        self.post_rx(Desc { addr: off, len, options });
        self.stats.msg_delivered += 1;
        true
    }

    /// Delivers a bulk message for `handler` from `source` (a tunnel's claimed sender)
    /// whose bytes are `data`, into the oldest region the client granted
    /// ([`Desc::GRANT`], including grants at the head of the transmit ring not taken
    /// yet) that holds it: written at its start and posted on the receive
    /// ring marked [`Desc::BULK`] (`msg_delivered`); the grant is used up. `false`,
    /// nothing written and the grants kept, when no grant holds `data` or the receive
    /// ring is full (`rx_no_room`), or `data` is empty (`rx_too_big`).
    pub fn deliver_bulk_granted(&mut self, handler: u8, source: u16, data: &[u8]) -> bool {
        if data.is_empty() || data.len() > u32::MAX as usize {
            self.stats.rx_too_big += 1;
            return false;
        }
        self.take_leading_grants();
        let fit = self.granted[..self.grants].iter().position(|&(_, n)| data.len() <= n as usize);
        let Some(i) = fit.filter(|_| self.ready(RingId::Rx) > 0) else {
            self.stats.rx_no_room += 1;
            return false;
        };
        let (off, _) = self.granted[i];
        // Checked when granted; the area's size never changes, so this holds still.
        if !self.write_area(off, data) {
            self.stats.bad_desc += 1;
            return false;
        }
        self.granted.copy_within(i + 1..self.grants, i);
        self.grants -= 1;
        let options = Desc::message_options(false, handler, source) | Desc::BULK;
        self.post_rx(Desc { addr: off, len: data.len() as u32, options });
        self.stats.msg_delivered += 1;
        true
    }

    /// Room for a bulk message from a tunnel ([`Desc::GRANT`], taken off the transmit
    /// ring): kept when inside the area, not empty and a grant is free, else refused
    /// (`bad_desc`). Nothing goes back on the completion ring.
    fn keep_grant(&mut self, d: Desc) {
        let fits = d.len > 0 && self.layout.in_area(d.addr, d.len as usize);
        if fits && self.grants < GRANTS {
            self.granted[self.grants] = (d.addr, d.len);
            self.grants += 1;
        } else {
            self.stats.bad_desc += 1;
        }
    }

    /// Takes the grants at the head of the transmit ring (up to the first entry that is
    /// not one, which stays for [`AdapterEnd::take_entry`]), so a grant the client
    /// posted before a message arrived is seen even when the worker has not served the
    /// transmit ring since. At most a ring's worth.
    fn take_leading_grants(&mut self) {
        let avail = self.ready(RingId::Tx);
        for _ in 0..avail {
            let slot = self.tx.slot(0);
            let d = Desc::from_words(
                self.shm.u64_at(slot).load(Ordering::Relaxed),
                self.shm.u64_at(slot + 8).load(Ordering::Relaxed),
            );
            if d.options != Desc::GRANT {
                return;
            }
            self.tx.advance(&self.shm, 1);
            self.keep_grant(d);
        }
    }

    /// Grants outstanding ([`Desc::GRANT`]).
    pub fn grants(&self) -> usize {
        self.grants
    }

    /// Copies `out.len()` bytes at offset `off` of the buffer area into `out`; `false`
    /// (nothing copied) when the range is not wholly inside the area. Checked on every
    /// call: the bytes are the client's and may change, but no read leaves its area.
    pub fn read_area(&self, off: u64, out: &mut [u8]) -> bool {
        if !self.layout.in_area(off, out.len()) {
            return false;
        }
        self.shm.read(self.layout.area_offset() + off as usize, out);
        true
    }

    /// Counts a message taken with [`AdapterEnd::take_entry`] that no handler took
    /// (`msg_dropped`).
    pub fn count_unhandled(&mut self) {
        self.stats.msg_dropped += 1;
    }

    fn count_taken(&mut self, message: bool) {
        if message {
            self.stats.msg_taken += 1;
        } else {
            self.stats.tx_taken += 1;
        }
    }
}
