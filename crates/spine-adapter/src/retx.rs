//! The sender's side of bulk-message retransmission: a worker's store of the bulk
//! messages it sent over tunnel ports and the peer has not yet acknowledged
//! (`spine_endpoint::remote`, version 3 frames).
//!
//! The store has a fixed number of entries (`[adapter] bulk_retx_slots`, default
//! [`DEFAULT_SLOTS`]), each with its own [`BULK_MAX`]-byte copy of a message, allocated
//! once with the worker; nothing is allocated per message. A new message takes a free
//! entry or, when all are busy, the one whose last activity is oldest: that message
//! loses its chance of retransmission (counted `msg_bulk_retx_evicted` by the worker),
//! never the new one its send (sending never waits on the peer's acknowledgements).
//!
//! The peer's ACK frees the entry. Its NACK names missing pieces: the worker sends
//! just those again, at most `max_resends` times per message (`[adapter]
//! bulk_retx_max`; a NACK past that is refused, so a peer NACKing forever gets at most
//! `max_resends` × 16 pieces per message). An entry neither ACKed nor NACKed for the
//! expiry (`[adapter] bulk_expiry_ms`, from its send or its last honoured NACK) is
//! dropped ([`RetxStore::expire`]). An ACK or NACK is honoured only when its port, id,
//! `from` and total name a message the store holds: anything else is refused.
use spine_endpoint::remote::{all_pieces, BULK_MAX};

/// Entries per worker unless configured.
pub(crate) const DEFAULT_SLOTS: usize = 8;
/// Largest configurable number of entries.
pub(crate) const MAX_SLOTS: usize = 256;
/// How many NACKs of one message are honoured unless configured.
pub(crate) const DEFAULT_MAX_RESENDS: u32 = 8;

/// A message's fields as its pieces carry them: (handler, to, from, id).
pub(crate) type Fields = (u8, u32, u32, u32);

#[derive(Debug)]
struct Entry {
    busy: bool,
    port: u16,
    fields: Fields,
    total: u32,
    /// The send, or the last honoured NACK.
    last_ns: u64,
    resends: u32,
    data: Box<[u8]>,
}

/// Why an ACK or NACK was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No message of the store has that port, id, `from` and total (never sent, already
    /// ACKed, expired or evicted).
    Unknown,
    /// A NACK of a message already resent `max_resends` times.
    OverCap,
}

/// One worker's unacknowledged bulk messages.
#[derive(Debug)]
pub(crate) struct RetxStore {
    entries: Box<[Entry]>,
    expiry_ns: u64,
    max_resends: u32,
    /// The earliest time a busy entry expires (`u64::MAX`: none busy).
    next_expiry: u64,
}

impl RetxStore {
    /// `slots` empty entries of [`BULK_MAX`] bytes each (the only allocation; none for
    /// 0 slots, which keeps nothing and retransmits nothing).
    pub fn new(slots: usize, expiry_ns: u64, max_resends: u32) -> Self {
        let entry = || Entry {
            busy: false,
            port: 0,
            fields: (0, 0, 0, 0),
            total: 0,
            last_ns: 0,
            resends: 0,
            data: vec![0; BULK_MAX].into_boxed_slice(),
        };
        let entries = (0..slots.min(MAX_SLOTS)).map(|_| entry()).collect();
        RetxStore { entries, expiry_ns, max_resends, next_expiry: u64::MAX }
    }

    /// Whether some message waits for its acknowledgement (then the worker reads its
    /// clock and calls [`RetxStore::expire`]).
    #[inline]
    pub fn pending(&self) -> bool {
        self.next_expiry != u64::MAX
    }

    /// Messages held.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.entries.iter().filter(|e| e.busy).count()
    }

    /// Takes an entry for a `total`-byte message (1..=[`BULK_MAX`]) sent at `now` on
    /// `port`; returns its index and whether a held message was evicted for it, or
    /// `None` when the store has no entries or `total` is out of range. The caller
    /// writes the message into [`RetxStore::data_mut`] (or [`RetxStore::forget`]s it).
    pub fn take(
        &mut self,
        port: u16,
        fields: Fields,
        total: usize,
        now: u64,
    ) -> Option<(usize, bool)> {
        if total == 0 || total > BULK_MAX || self.entries.is_empty() {
            return None;
        }
        let (at, evicted) = match self.entries.iter().position(|e| !e.busy) {
            Some(i) => (i, false),
            None => {
                let oldest = self.entries.iter().enumerate().min_by_key(|(_, e)| e.last_ns);
                (oldest.map_or(0, |(i, _)| i), true)
            }
        };
        let e = &mut self.entries[at];
        (e.busy, e.port, e.fields, e.total, e.last_ns, e.resends) =
            (true, port, fields, total as u32, now, 0);
        self.recompute();
        Some((at, evicted))
    }

    /// The room of entry `i`'s message (its total's length).
    pub fn data_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let e = self.entries.get_mut(i).filter(|e| e.busy)?;
        e.data.get_mut(..e.total as usize)
    }

    /// Entry `i`'s message: its port, fields and bytes.
    pub fn message(&self, i: usize) -> Option<(u16, Fields, &[u8])> {
        let e = self.entries.get(i).filter(|e| e.busy)?;
        Some((e.port, e.fields, e.data.get(..e.total as usize)?))
    }

    /// Frees entry `i` (its message could not be sent whole).
    pub fn forget(&mut self, i: usize) {
        if let Some(e) = self.entries.get_mut(i) {
            e.busy = false;
        }
        self.recompute();
    }

    /// The entry of the message an acknowledgement that arrived on `port` names.
    fn find(&self, port: u16, from: u32, id: u32, total: u32) -> Option<usize> {
        self.entries.iter().position(|e| {
            e.busy && e.port == port && e.fields.3 == id && e.fields.2 == from && e.total == total
        })
    }

    /// The peer's ACK of message `id` (with `from` and `total`) on `port`: its entry is
    /// freed.
    pub fn ack(&mut self, port: u16, from: u32, id: u32, total: u32) -> Result<(), Refused> {
        let i = self.find(port, from, id, total).ok_or(Refused::Unknown)?;
        self.forget(i);
        Ok(())
    }

    /// The peer's NACK of message `id` on `port` at `now`, naming `missing` pieces
    /// (checked by `parse_ctl` against `total`; masked again here): returns the entry
    /// and the pieces to send again, counting one resend. Refused when unknown or
    /// already resent `max_resends` times.
    pub fn nack(
        &mut self,
        port: u16,
        (from, id, total, missing): (u32, u32, u32, u32),
        now: u64,
    ) -> Result<(usize, u32), Refused> {
        let i = self.find(port, from, id, total).ok_or(Refused::Unknown)?;
        let e = &mut self.entries[i];
        if e.resends >= self.max_resends {
            return Err(Refused::OverCap);
        }
        e.resends += 1;
        e.last_ns = now;
        self.recompute();
        Ok((i, missing & all_pieces(total)))
    }

    /// Drops every message neither ACKed nor NACKed `expiry_ns` after its send or last
    /// honoured NACK at `now`; returns how many. Cheap when none is due.
    pub fn expire(&mut self, now: u64) -> u32 {
        if now < self.next_expiry {
            return 0;
        }
        let mut dropped = 0;
        for e in self.entries.iter_mut() {
            if e.busy && now.saturating_sub(e.last_ns) >= self.expiry_ns {
                e.busy = false;
                dropped += 1;
            }
        }
        self.recompute();
        dropped
    }

    fn recompute(&mut self) {
        let x = self.expiry_ns;
        self.next_expiry = self
            .entries
            .iter()
            .filter(|e| e.busy)
            .map(|e| e.last_ns.saturating_add(x))
            .min()
            .unwrap_or(u64::MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(s: &mut RetxStore, id: u32, data: &[u8], now: u64) -> (usize, bool) {
        let got = s.take(3, (12, u32::MAX, 5, id), data.len(), now).unwrap();
        s.data_mut(got.0).unwrap().copy_from_slice(data);
        got
    }

    #[test]
    fn ack_frees_and_nack_names_pieces_up_to_the_cap() {
        let mut s = RetxStore::new(2, 1000, 2);
        let a: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let (i, ev) = put(&mut s, 7, &a, 0);
        assert!(!ev);
        assert_eq!(s.message(i).unwrap(), (3, (12, u32::MAX, 5, 7), &a[..]));
        // Wrong port, id, from or total: refused.
        assert_eq!(s.ack(4, 5, 7, 3000), Err(Refused::Unknown));
        assert_eq!(s.ack(3, 5, 8, 3000), Err(Refused::Unknown));
        assert_eq!(s.ack(3, 6, 7, 3000), Err(Refused::Unknown));
        assert_eq!(s.nack(3, (5, 7, 2999, 1), 0), Err(Refused::Unknown));
        // Two NACKs honoured (bits past the message masked), the third refused.
        assert_eq!(s.nack(3, (5, 7, 3000, 0b1010), 10), Ok((i, 0b010)));
        assert_eq!(s.nack(3, (5, 7, 3000, 0b100), 20), Ok((i, 0b100)));
        assert_eq!(s.nack(3, (5, 7, 3000, 0b100), 30), Err(Refused::OverCap));
        assert_eq!(s.held(), 1);
        assert_eq!(s.ack(3, 5, 7, 3000), Ok(()));
        assert_eq!(s.held(), 0);
        assert!(!s.pending());
        assert_eq!(s.ack(3, 5, 7, 3000), Err(Refused::Unknown), "ACKed once");
        assert_eq!(s.nack(3, (5, 7, 3000, 1), 40), Err(Refused::Unknown));
    }

    #[test]
    fn the_oldest_is_evicted_when_full_and_unacknowledged_ones_expire() {
        let mut s = RetxStore::new(2, 1000, 8);
        put(&mut s, 1, b"one", 0);
        put(&mut s, 2, b"two", 100);
        // A NACK of 1 at 200 makes 2 the oldest.
        assert!(s.nack(3, (5, 1, 3, 1), 200).is_ok());
        let (_, ev) = put(&mut s, 3, b"three", 300);
        assert!(ev, "full: one evicted");
        assert_eq!(s.ack(3, 5, 2, 3), Err(Refused::Unknown), "2 was the oldest");
        assert_eq!(s.held(), 2);
        assert_eq!(s.expire(1199), 0);
        assert_eq!(s.expire(1200), 1, "1, a second after its NACK");
        assert_eq!(s.expire(1300), 1, "3, a second after its send");
        assert!(!s.pending());
        // No entries: nothing taken.
        let mut none = RetxStore::new(0, 1000, 8);
        assert!(none.take(3, (1, 1, 1, 1), 10, 0).is_none());
        assert!(s.take(3, (1, 1, 1, 1), 0, 0).is_none());
        assert!(s.take(3, (1, 1, 1, 1), BULK_MAX + 1, 0).is_none());
    }
}
