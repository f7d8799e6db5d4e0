//! Retransmission of bulk messages over tunnel ports, on the worker (the store is
//! `crate::retx`, the receiver's gap timing `crate::reasm`, the frames
//! `spine_endpoint::remote`, version 3).
//!
//! - The sender keeps each bulk message it sends in its store, under an id whose top
//!   byte is the worker's index, so an acknowledgement reaching the tunnel port's worker
//!   finds the worker that sent the message ([`MsgKind::BulkCtl`] over the hand-over
//!   ring when that is another).
//! - The receiver ACKs a message when it is whole (and again when a late piece of it
//!   arrives: the ACK may have been lost), and NACKs one whose reassembly has had no new
//!   piece for `[adapter] bulk_nack_ms`, naming the missing pieces.
//! - On a NACK the sender sends those pieces again, from its copy, at most
//!   `bulk_retx_max` times per message; on an ACK it frees the copy.
//!
//! Every acknowledgement is untrusted input: malformed ones (`parse_ctl`) and those
//! naming no message the store holds on that port are refused (`msg_bulk_ctl_refused`),
//! NACKs past the cap too (`msg_bulk_resend_capped`). What a peer can make the sender
//! send is bounded by the store: slots × `bulk_retx_max` × 16 pieces until the
//! expiry frees them. Nothing here is on the per-packet path: it runs for frames of the
//! message ethertype on tunnel ports, and once a round while something is pending.

use spine_endpoint::remote::{
    encode_ctl, encode_piece_header, parse_ctl, parse_piece, Ctl, CtlKind, PIECE_HEADER_LEN,
    PIECE_MAX,
};
use spine_pool::{Buf, BufMeta};

use super::{Msg, MsgKind, Worker};
use crate::retx::{Fields, Refused};

/// Where a piece's bytes come from when it is sent.
#[derive(Debug, Clone, Copy)]
pub(super) enum PieceFrom {
    /// The copy in entry `.0` of the worker's retransmit store.
    Kept(usize),
    /// Owned endpoint `.0`'s area, the message starting at offset `.1` (no room in the
    /// store: a store of 0 slots).
    Area(usize, u64),
}

impl Worker {
    /// The id of this worker's next bulk message: its index in the top byte, a
    /// sequence number in the rest.
    pub(super) fn next_bulk_id(&mut self) -> u32 {
        self.bulk_seq = self.bulk_seq.wrapping_add(1);
        (self.index as u32) << 24 | (self.bulk_seq & 0x00ff_ffff)
    }

    /// Sends the piece at `at` of a `total`-byte message with `fields` out of tunnel
    /// port `q`, its bytes read from `from` into a fresh pool buffer behind the
    /// headers. False when the pool is dry or the bytes cannot be read (nothing sent).
    pub(super) fn send_piece(
        &mut self,
        q: u16,
        fields: Fields,
        total: usize,
        at: usize,
        from: PieceFrom,
    ) -> bool {
        let Some(mut buf) = self.cache.alloc() else { return false };
        let head = self.pool.headroom() as usize;
        let n = PIECE_MAX.min(total.saturating_sub(at));
        let (eps, retx) = (&self.eps, &self.retx);
        let written = match self.pool.frame_mut(&mut buf) {
            Ok(frame) => frame.get_mut(head..).and_then(|room| {
                let piece = room.get_mut(PIECE_HEADER_LEN..PIECE_HEADER_LEN + n)?;
                match from {
                    PieceFrom::Kept(i) => {
                        let (_, _, data) = retx.message(i)?;
                        piece.copy_from_slice(data.get(at..at + n)?);
                    }
                    // The range was checked against the area by the caller; checked
                    // again here.
                    PieceFrom::Area(k, off) => {
                        eps.owned.get(k)?.end.read_area(off + at as u64, piece).then_some(())?
                    }
                }
                encode_piece_header(room, fields, total, at)
            }),
            Err(_) => None,
        };
        if !self.set_tunnel_meta(&mut buf, written, q) {
            let _ = self.cache.free(buf);
            return false;
        }
        self.transmit(buf, q, q, 0);
        true
    }

    /// Sets `buf`'s metadata for a frame of `len` bytes (`None`: not written) written
    /// behind the headroom, to go out of port `q`.
    fn set_tunnel_meta(&mut self, buf: &mut Buf, len: Option<usize>, q: u16) -> bool {
        let head = self.pool.headroom();
        let meta = len.map(|len| BufMeta {
            data_off: head,
            len: len as u32,
            meta_len: 0,
            port: u32::from(q),
            ts_ns: 0,
        });
        meta.is_some_and(|m| self.pool.set_meta(buf, m).is_ok())
    }

    /// Sends acknowledgement `c` out of tunnel port `p` (nothing when the pool is dry).
    fn send_ctl(&mut self, p: u16, c: &Ctl) -> bool {
        let Some(mut buf) = self.cache.alloc() else { return false };
        let head = self.pool.headroom() as usize;
        let len = match self.pool.frame_mut(&mut buf) {
            Ok(frame) => frame.get_mut(head..).and_then(|room| encode_ctl(room, c)),
            Err(_) => None,
        };
        if !self.set_tunnel_meta(&mut buf, len, p) {
            let _ = self.cache.free(buf);
            return false;
        }
        self.transmit(buf, p, p, 0);
        true
    }

    /// ACKs the message of the piece in `buf` (received on tunnel port `p`, already
    /// checked whole or late) to the peer: `msg_bulk_acks_out`.
    pub(super) fn ack_piece(&mut self, buf: &Buf, p: u16) {
        let piece = self.pool.data(buf).ok().and_then(|f| parse_piece(f).ok());
        let Some(pc) = piece else { return };
        let ack = Ctl { kind: CtlKind::Ack, from: pc.from, id: pc.id, total: pc.total, missing: 0 };
        if self.send_ctl(p, &ack) {
            self.counters.worker.msg_bulk_acks_out += 1;
        }
    }

    /// Once a round while a message is in reassembly or kept for retransmission (the
    /// clock read once): expires incomplete messages (`msg_bulk_expired`), NACKs the
    /// gaps that have lasted the NACK delay (`msg_bulk_nacks_out`) and drops kept
    /// messages neither ACKed nor NACKed for the expiry (`msg_bulk_retx_expired`).
    #[cold]
    pub(super) fn sweep_bulk(&mut self) -> usize {
        let now = crate::sys::monotonic_ns();
        let mut work = 0;
        for pi in 0..self.reasm.len() {
            let Some(r) = self.reasm[pi].as_mut() else { continue };
            let expired = r.expire(now);
            self.counters.worker.msg_bulk_expired += u64::from(expired);
            work += expired as usize;
            // Each due message once (its delay restarts as it is taken).
            while let Some(c) = self.reasm[pi].as_mut().and_then(|r| r.next_nack(now)) {
                if self.send_ctl(pi as u16, &c) {
                    self.counters.worker.msg_bulk_nacks_out += 1;
                }
                work += 1;
            }
        }
        let dropped = self.retx.expire(now);
        self.counters.worker.msg_bulk_retx_expired += u64::from(dropped);
        work + dropped as usize
    }

    /// A bulk acknowledgement in `buf`, received on tunnel port `p`: checked
    /// (`parse_ctl`), then acted on here if this worker sent the message (the id's top
    /// byte), else handed to the worker that did; refused (`msg_bulk_ctl_refused`)
    /// when malformed or naming no worker.
    #[cold]
    pub(super) fn bulk_control(&mut self, buf: Buf, p: u16) {
        let ctl = self.pool.data(&buf).ok().and_then(|f| parse_ctl(f).ok());
        let Some(c) = ctl else {
            self.counters.worker.msg_bulk_ctl_refused += 1;
            let _ = self.cache.free(buf);
            return;
        };
        let sender = (c.id >> 24) as usize;
        if sender == self.index {
            return self.bulk_control_here(buf, p);
        }
        if sender >= self.wiring.workers {
            self.counters.worker.msg_bulk_ctl_refused += 1;
            let _ = self.cache.free(buf);
            return;
        }
        let ring = self.out[sender].as_mut().expect("a ring to every other worker");
        match ring.push(Msg { buf, kind: MsgKind::BulkCtl, port: p, packet: 0 }) {
            Ok(()) => {
                self.counters.worker.msg_handed += 1;
                self.counters.worker.peer_out += 1;
            }
            Err(m) => {
                self.counters.worker.msg_handoff_dropped += 1;
                let _ = self.cache.free(m.buf);
            }
        }
    }

    /// A bulk acknowledgement in `buf` (received on tunnel port `p`) for a message this
    /// worker sent: an ACK frees its copy (`msg_bulk_acks_in`); a NACK sends the named
    /// pieces again from the copy (`msg_bulk_nacks_in`, `msg_bulk_pieces_resent`),
    /// unless the message was resent `bulk_retx_max` times (`msg_bulk_resend_capped`).
    /// Malformed, or naming no message kept for port `p`: `msg_bulk_ctl_refused`. The
    /// buffer goes back to the pool.
    #[cold]
    pub(super) fn bulk_control_here(&mut self, buf: Buf, p: u16) {
        let ctl = self.pool.data(&buf).ok().and_then(|f| parse_ctl(f).ok());
        let _ = self.cache.free(buf);
        let Some(c) = ctl else {
            self.counters.worker.msg_bulk_ctl_refused += 1;
            return;
        };
        let w = &mut self.counters.worker;
        match c.kind {
            CtlKind::Ack => match self.retx.ack(p, c.from, c.id, c.total) {
                Ok(()) => w.msg_bulk_acks_in += 1,
                Err(_) => w.msg_bulk_ctl_refused += 1,
            },
            CtlKind::Nack => {
                let now = crate::sys::monotonic_ns();
                match self.retx.nack(p, (c.from, c.id, c.total, c.missing), now) {
                    Ok((i, missing)) => {
                        w.msg_bulk_nacks_in += 1;
                        self.resend(i, missing);
                    }
                    Err(Refused::OverCap) => w.msg_bulk_resend_capped += 1,
                    Err(Refused::Unknown) => w.msg_bulk_ctl_refused += 1,
                }
            }
        }
    }

    /// Sends the pieces `missing` names (bit i: piece i) of kept message `i` again.
    fn resend(&mut self, i: usize, missing: u32) {
        let Some((q, fields, data)) = self.retx.message(i) else { return };
        let total = data.len();
        for piece in 0..total.div_ceil(PIECE_MAX) {
            if missing & (1 << piece) == 0 {
                continue;
            }
            if !self.send_piece(q, fields, total, piece * PIECE_MAX, PieceFrom::Kept(i)) {
                // The pool is dry: the receiver NACKs again.
                return;
            }
            self.counters.worker.msg_bulk_pieces_resent += 1;
        }
    }
}
