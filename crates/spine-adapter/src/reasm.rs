//! Reassembly of bulk messages arriving over a tunnel port in pieces
//! (`spine_endpoint::remote::parse_piece`): a fixed set of [`SLOTS`] messages in
//! flight per tunnel port, each with its own [`BULK_MAX`]-byte buffer, allocated once
//! when the worker is built; nothing is allocated per piece.
//!
//! A piece is stored into the slot of its message (the peer's claimed sender `from`
//! and its message id); the first piece of a new message takes a free slot or, when
//! all are busy, the one started longest ago, whose incomplete message is discarded
//! (counted). A message not complete [`TIMEOUT_NS`] after its first piece is
//! discarded (counted) when the next piece arrives. A piece whose handler, `to` or
//! total differ from its message's first piece, or one already received, is refused
//! and stores nothing. [`parse_piece`](spine_endpoint::remote::parse_piece) has already
//! checked the piece's own fields (its offset is a whole piece index inside the total,
//! its length exactly that piece's), so pieces cannot overlap or pass the total.
use spine_endpoint::remote::{Piece, BULK_MAX, PIECE_MAX};

/// Messages in reassembly per tunnel port.
pub(crate) const SLOTS: usize = 4;
/// How long a message may take to arrive whole (from its first piece), in ns.
pub(crate) const TIMEOUT_NS: u64 = 1_000_000_000;

#[derive(Debug)]
struct Slot {
    busy: bool,
    from: u32,
    id: u32,
    handler: u8,
    to: u32,
    total: u32,
    /// Bit i: piece i has arrived.
    have: u32,
    started_ns: u64,
    data: Box<[u8]>,
}

/// What became of a piece offered to [`Reassembly::offer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Offer {
    /// Stored; the message is still incomplete.
    Stored,
    /// Stored, and its message is whole in slot `.0` ([`Reassembly::message`]), until
    /// [`Reassembly::release`].
    Complete(usize),
    /// A piece already received.
    Duplicate,
    /// Handler, destination or total differ from those of its message's first piece.
    Mismatch,
}

/// A whole message, as [`Reassembly::message`] gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Whole<'a> {
    pub handler: u8,
    pub to: u32,
    pub from: u32,
    pub data: &'a [u8],
}

/// One tunnel port's messages in reassembly.
#[derive(Debug)]
pub(crate) struct Reassembly {
    slots: Box<[Slot]>,
}

/// The bits of every piece of a `total`-byte message.
fn all_pieces(total: u32) -> u32 {
    let n = (total as usize).div_ceil(PIECE_MAX) as u32;
    if n >= 32 {
        u32::MAX
    } else {
        (1 << n) - 1
    }
}

impl Reassembly {
    /// [`SLOTS`] empty slots of [`BULK_MAX`] bytes each (the only allocation).
    pub fn new() -> Self {
        let slot = || Slot {
            busy: false,
            from: 0,
            id: 0,
            handler: 0,
            to: 0,
            total: 0,
            have: 0,
            started_ns: 0,
            data: vec![0; BULK_MAX].into_boxed_slice(),
        };
        Reassembly { slots: (0..SLOTS).map(|_| slot()).collect() }
    }

    /// Messages in reassembly.
    #[cfg(test)]
    pub fn busy(&self) -> usize {
        self.slots.iter().filter(|s| s.busy).count()
    }

    /// Takes piece `p` (already checked by `parse_piece`) arriving at `now` (ns);
    /// returns what became of it and how many incomplete messages were discarded to
    /// make room or for being late.
    pub fn offer(&mut self, p: &Piece<'_>, now: u64) -> (Offer, u32) {
        let mut discarded = 0;
        for s in self.slots.iter_mut() {
            if s.busy && now.saturating_sub(s.started_ns) > TIMEOUT_NS {
                s.busy = false;
                discarded += 1;
            }
        }
        let at = match self.slots.iter().position(|s| s.busy && s.from == p.from && s.id == p.id) {
            Some(i) => {
                let s = &self.slots[i];
                if (s.handler, s.to, s.total) != (p.handler, p.to, p.total) {
                    return (Offer::Mismatch, discarded);
                }
                i
            }
            None => {
                let i = match self.slots.iter().position(|s| !s.busy) {
                    Some(i) => i,
                    None => {
                        discarded += 1;
                        let oldest =
                            self.slots.iter().enumerate().min_by_key(|(_, s)| s.started_ns);
                        oldest.map_or(0, |(i, _)| i)
                    }
                };
                let s = &mut self.slots[i];
                s.busy = true;
                (s.from, s.id, s.handler, s.to, s.total) = (p.from, p.id, p.handler, p.to, p.total);
                s.have = 0;
                s.started_ns = now;
                i
            }
        };
        let s = &mut self.slots[at];
        let bit = 1u32 << p.index();
        if s.have & bit != 0 {
            return (Offer::Duplicate, discarded);
        }
        let off = p.offset as usize;
        // parse_piece proved off + len <= total <= BULK_MAX; `get_mut` keeps a broken
        // caller from panicking all the same.
        let Some(room) = s.data.get_mut(off..off + p.data.len()) else {
            return (Offer::Mismatch, discarded);
        };
        room.copy_from_slice(p.data);
        s.have |= bit;
        if s.have == all_pieces(s.total) {
            (Offer::Complete(at), discarded)
        } else {
            (Offer::Stored, discarded)
        }
    }

    /// The whole message in slot `i` (after [`Offer::Complete`]).
    pub fn message(&self, i: usize) -> Option<Whole<'_>> {
        let s = self.slots.get(i).filter(|s| s.busy && s.have == all_pieces(s.total))?;
        Some(Whole {
            handler: s.handler,
            to: s.to,
            from: s.from,
            data: &s.data[..s.total as usize],
        })
    }

    /// Frees slot `i` (its message has been handled).
    pub fn release(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            s.busy = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_endpoint::remote::{bulk_frames, parse_piece};

    fn frames(id: u32, from: u32, msg: &[u8]) -> Vec<Vec<u8>> {
        bulk_frames(12, 0xffff_ffff, from, id, msg).unwrap()
    }

    #[test]
    fn pieces_in_any_order_make_the_message_once() {
        let mut r = Reassembly::new();
        let msg: Vec<u8> = (0..8000u32).map(|i| (i ^ (i >> 8)) as u8).collect();
        let fs = frames(1, 5, &msg);
        let order = [3, 0, 7, 1, 6, 2, 5, 4];
        for (k, &i) in order.iter().enumerate() {
            let (o, d) = r.offer(&parse_piece(&fs[i]).unwrap(), 10);
            assert_eq!(d, 0);
            if k + 1 < order.len() {
                assert_eq!(o, Offer::Stored);
                // A duplicate is refused, and stores nothing new.
                assert_eq!(r.offer(&parse_piece(&fs[i]).unwrap(), 10).0, Offer::Duplicate);
            } else {
                let Offer::Complete(at) = o else { panic!("{o:?}") };
                let m = r.message(at).unwrap();
                assert_eq!((m.handler, m.to, m.from, m.data), (12, u32::MAX, 5, &msg[..]));
                r.release(at);
            }
        }
        assert_eq!(r.busy(), 0);
        // A single-piece message completes at once.
        let one = frames(2, 5, b"tiny");
        assert!(matches!(r.offer(&parse_piece(&one[0]).unwrap(), 10).0, Offer::Complete(_)));
    }

    #[test]
    fn interleaved_messages_and_mismatches_and_eviction_and_timeout() {
        let mut r = Reassembly::new();
        let a: Vec<u8> = vec![1; 3000];
        let b: Vec<u8> = vec![2; 3000];
        let (fa, fb) = (frames(1, 5, &a), frames(2, 5, &b));
        for i in 0..3 {
            let oa = r.offer(&parse_piece(&fa[i]).unwrap(), 0).0;
            let ob = r.offer(&parse_piece(&fb[i]).unwrap(), 0).0;
            if i < 2 {
                assert_eq!((oa, ob), (Offer::Stored, Offer::Stored));
            } else {
                let (Offer::Complete(x), Offer::Complete(y)) = (oa, ob) else { panic!() };
                assert_eq!(r.message(x).unwrap().data, &a[..]);
                assert_eq!(r.message(y).unwrap().data, &b[..]);
                r.release(x);
                r.release(y);
            }
        }
        // The same id and sender with another total: refused.
        let c = frames(3, 5, &[3; 3000]);
        let c_other = frames(3, 5, &[3; 2500]);
        assert_eq!(r.offer(&parse_piece(&c[0]).unwrap(), 0).0, Offer::Stored);
        assert_eq!(r.offer(&parse_piece(&c_other[1]).unwrap(), 0).0, Offer::Mismatch);
        // The same id from another sender is another message.
        assert_eq!(
            r.offer(&parse_piece(&frames(3, 6, &[3; 3000])[0]).unwrap(), 1).0,
            Offer::Stored
        );
        assert_eq!(r.busy(), 2);
        // Two more fill the slots; a fifth evicts the oldest (id 3 from 5, at 0).
        for (id, t) in [(10, 2), (11, 3)] {
            assert_eq!(
                r.offer(&parse_piece(&frames(id, 5, &a)[0]).unwrap(), t),
                (Offer::Stored, 0)
            );
        }
        assert_eq!(r.offer(&parse_piece(&frames(12, 5, &a)[0]).unwrap(), 4), (Offer::Stored, 1));
        assert_eq!(r.busy(), SLOTS);
        // Id 3's last pieces now start a new message, which never completes.
        assert_eq!(r.offer(&parse_piece(&c[1]).unwrap(), 5), (Offer::Stored, 1));
        // Past the timeout every one of them is discarded when the next piece comes.
        let late = TIMEOUT_NS + 10;
        assert_eq!(r.offer(&parse_piece(&frames(20, 5, b"x")[0]).unwrap(), late).1, SLOTS as u32);
    }
}
