//! Reassembly of bulk messages arriving over a tunnel port in pieces
//! (`spine_endpoint::remote::parse_piece`): a fixed set of messages in flight per
//! tunnel port (`[adapter] bulk_reasm_slots`, [`SLOTS`] unless configured, at most
//! [`MAX_SLOTS`]), each with its own buffer of the largest message the port takes
//! (`[adapter] bulk_reasm_bytes`, [`BULK_MAX`] unless configured, at least one
//! piece), allocated once when the worker is built; nothing is allocated per piece. A
//! piece of a message whose total is over that size is refused ([`Offer::TooBig`]).
//!
//! A piece is stored into the slot of its message (the peer's claimed sender `from`
//! and its message id); the first piece of a new message takes a free slot or, when
//! all are busy, the one started longest ago, whose incomplete message is discarded
//! (counted). A message not complete within the port's expiry (the adapter's
//! monotonic clock, [`DEFAULT_EXPIRY_NS`] unless configured: `[adapter]
//! bulk_expiry_ms`) after its first piece expires (counted apart): the worker sweeps
//! the slots once a round while any is busy ([`Reassembly::expire`]), and before every
//! piece is offered, so an abandoned message frees its slot without waiting for another
//! piece. A piece whose handler, `to` or
//! total differ from its message's first piece, or one already received, is refused
//! and stores nothing. [`parse_piece`](spine_endpoint::remote::parse_piece) has already
//! checked the piece's own fields (its offset is a whole piece index inside the total,
//! its length exactly that piece's), so pieces cannot overlap or pass the total.
//!
//! Retransmission (the receiver's side): a message that has had no new piece for the
//! NACK delay (`[adapter] bulk_nack_ms`, well below the expiry; 0: never) is due a NACK
//! naming its missing pieces ([`Reassembly::next_nack`]), again every delay until it is
//! whole or expires; the worker sends them and ACKs every whole message. The last
//! [`DONE`] messages made whole are remembered, so a late copy of one of their pieces
//! (a resend that crossed the ACK) is refused ([`Offer::Late`]) instead of starting a
//! message that could never complete.
use spine_endpoint::remote::{all_pieces, Ctl, CtlKind, Piece, BULK_MAX, PIECE_MAX};

/// Messages in reassembly per tunnel port unless configured.
pub(crate) const SLOTS: usize = 4;
/// Largest configurable number of messages in reassembly per tunnel port.
pub(crate) const MAX_SLOTS: usize = 64;
/// Messages made whole that a port remembers (by sender and id).
pub(crate) const DONE: usize = 8;
/// How long a message in reassembly may go without a new piece before the receiver
/// NACKs its missing pieces, in ns, unless configured otherwise.
pub(crate) const DEFAULT_NACK_NS: u64 = 20_000_000;
/// How long a message may take to arrive whole (from its first piece), in ns, unless
/// configured otherwise.
pub(crate) const DEFAULT_EXPIRY_NS: u64 = 1_000_000_000;

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
    /// The last piece's arrival, or the last NACK.
    last_ns: u64,
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
    /// A piece of a message made whole a moment ago (one of the last [`DONE`]).
    Late,
    /// A piece of a message longer than the port's slots take.
    TooBig,
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
    /// How long a message may take to arrive whole, in ns.
    expiry_ns: u64,
    /// The earliest time a busy slot expires (`u64::MAX`: none busy).
    next_expiry: u64,
    /// How long a message may go without a new piece before it is NACKed, in ns
    /// (0: never).
    nack_ns: u64,
    /// The (sender, id) of the last [`DONE`] messages made whole, and where the next
    /// goes.
    done: [(u32, u32); DONE],
    done_at: usize,
    /// How many of `done` are set.
    done_len: usize,
}

impl Reassembly {
    /// `slots` empty slots (1..=[`MAX_SLOTS`], clamped) of `bytes` bytes each
    /// ([`PIECE_MAX`]..=[`BULK_MAX`], clamped; the only allocation), whose messages
    /// expire `expiry_ns` after their first piece and are NACKed after `nack_ns`
    /// without a new piece (0, or not below `expiry_ns`: never).
    pub fn new(slots: usize, bytes: usize, expiry_ns: u64, nack_ns: u64) -> Self {
        let bytes = bytes.clamp(PIECE_MAX, BULK_MAX);
        let slot = || Slot {
            busy: false,
            from: 0,
            id: 0,
            handler: 0,
            to: 0,
            total: 0,
            have: 0,
            started_ns: 0,
            last_ns: 0,
            data: vec![0; bytes].into_boxed_slice(),
        };
        Reassembly {
            slots: (0..slots.clamp(1, MAX_SLOTS)).map(|_| slot()).collect(),
            expiry_ns,
            next_expiry: u64::MAX,
            nack_ns: if nack_ns < expiry_ns { nack_ns } else { 0 },
            done: [(0, 0); DONE],
            done_at: 0,
            done_len: 0,
        }
    }

    /// A NACK for a message in reassembly that has had no new piece (nor NACK) for
    /// the NACK delay at `now`, naming its missing pieces; its delay restarts, so
    /// calling again until `None` gives each due message once. (Call
    /// [`Reassembly::expire`] first.)
    pub fn next_nack(&mut self, now: u64) -> Option<Ctl> {
        if self.nack_ns == 0 {
            return None;
        }
        let nack_ns = self.nack_ns;
        let s = self.slots.iter_mut().find(|s| {
            s.busy && now.saturating_sub(s.last_ns) >= nack_ns && all_pieces(s.total) & !s.have != 0
        })?;
        s.last_ns = now;
        let missing = all_pieces(s.total) & !s.have;
        Some(Ctl { kind: CtlKind::Nack, from: s.from, id: s.id, total: s.total, missing })
    }

    /// Whether message `id` from `from` is one of the last [`DONE`] made whole.
    fn was_done(&self, from: u32, id: u32) -> bool {
        self.done[..self.done_len].contains(&(from, id))
    }

    /// Whether some message is in reassembly (then the worker reads its clock and
    /// calls [`Reassembly::expire`]).
    #[inline]
    pub fn pending(&self) -> bool {
        self.next_expiry != u64::MAX
    }

    /// Discards every incomplete message not whole `expiry_ns` after its first piece
    /// at `now` (ns); returns how many. Cheap when none is due (one comparison).
    pub fn expire(&mut self, now: u64) -> u32 {
        if now < self.next_expiry {
            return 0;
        }
        let mut expired = 0;
        for s in self.slots.iter_mut() {
            if s.busy && now.saturating_sub(s.started_ns) >= self.expiry_ns {
                s.busy = false;
                expired += 1;
            }
        }
        self.recompute();
        expired
    }

    /// Recomputes `next_expiry` from the busy slots.
    fn recompute(&mut self) {
        let e = self.expiry_ns;
        self.next_expiry = self
            .slots
            .iter()
            .filter(|s| s.busy)
            .map(|s| s.started_ns.saturating_add(e))
            .min()
            .unwrap_or(u64::MAX);
    }

    /// Messages in reassembly.
    #[cfg(test)]
    pub fn busy(&self) -> usize {
        self.slots.iter().filter(|s| s.busy).count()
    }

    /// Takes piece `p` (already checked by `parse_piece`) arriving at `now` (ns);
    /// returns what became of it and how many incomplete messages were evicted to
    /// make room. (Call [`Reassembly::expire`] first: an expired message's piece then
    /// starts a new message instead of completing a stale one.)
    pub fn offer(&mut self, p: &Piece<'_>, now: u64) -> (Offer, u32) {
        let mut discarded = 0;
        if p.total as usize > self.slots[0].data.len() {
            return (Offer::TooBig, discarded);
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
                if self.was_done(p.from, p.id) {
                    return (Offer::Late, discarded);
                }
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
                self.next_expiry = self.next_expiry.min(now.saturating_add(self.expiry_ns));
                if discarded > 0 {
                    self.recompute();
                }
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
        s.last_ns = now;
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

    /// Frees slot `i` (its message has been handled), remembering its message as
    /// made whole.
    pub fn release(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i) {
            if s.busy && s.have == all_pieces(s.total) {
                self.done[self.done_at] = (s.from, s.id);
                self.done_at = (self.done_at + 1) % DONE;
                self.done_len = (self.done_len + 1).min(DONE);
            }
            s.busy = false;
        }
        self.recompute();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_endpoint::remote::{bulk_frames, parse_piece};

    /// Every NACK due at `now`, pushed onto `got`; how many.
    fn drain(r: &mut Reassembly, now: u64, got: &mut Vec<Ctl>) -> u32 {
        let mut n = 0;
        while let Some(c) = r.next_nack(now) {
            got.push(c);
            n += 1;
        }
        n
    }

    fn frames(id: u32, from: u32, msg: &[u8]) -> Vec<Vec<u8>> {
        bulk_frames(12, 0xffff_ffff, from, id, msg).unwrap()
    }

    #[test]
    fn pieces_in_any_order_make_the_message_once() {
        let mut r = Reassembly::new(SLOTS, BULK_MAX, DEFAULT_EXPIRY_NS, 0);
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
        let mut r = Reassembly::new(SLOTS, BULK_MAX, DEFAULT_EXPIRY_NS, 0);
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
        // Past the expiry every one of them expires at once, with no piece arriving.
        let late = DEFAULT_EXPIRY_NS + 10;
        assert_eq!(r.expire(late), SLOTS as u32);
        assert_eq!(r.busy(), 0);
        assert!(!r.pending());
        assert_eq!(r.offer(&parse_piece(&frames(20, 5, b"x")[0]).unwrap(), late).1, 0);
    }

    /// The expiry on a driven clock: a partial message holds its slot until exactly
    /// `expiry` after its first piece, whatever arrives or not; then it is gone, its
    /// late pieces start a new message (not completing the stale one), and every slot
    /// can take a whole message again without evicting anything.
    #[test]
    fn partial_messages_expire_on_the_clock_and_free_their_slots() {
        const E: u64 = 5_000;
        let mut r = Reassembly::new(SLOTS, BULK_MAX, E, 0);
        assert!(!r.pending());
        assert_eq!(r.expire(u64::MAX), 0, "nothing to expire");
        let a: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let fa = frames(1, 5, &a);
        assert_eq!(r.offer(&parse_piece(&fa[0]).unwrap(), 100), (Offer::Stored, 0));
        // Three more partial messages, later: every slot busy.
        for (id, t) in [(2, 200), (3, 300), (4, 400)] {
            assert_eq!(r.offer(&parse_piece(&frames(id, 5, &a)[0]).unwrap(), t).0, Offer::Stored);
        }
        assert!(r.pending());
        assert_eq!(r.expire(100 + E - 1), 0, "not yet");
        assert_eq!(r.busy(), SLOTS);
        assert_eq!(r.expire(100 + E), 1, "the first, exactly at its expiry");
        assert_eq!(r.busy(), SLOTS - 1);
        assert_eq!(r.expire(100 + E), 0, "counted once");
        // Its late pieces start a new message, which does not complete.
        assert_eq!(r.offer(&parse_piece(&fa[1]).unwrap(), 100 + E), (Offer::Stored, 0));
        assert_eq!(r.offer(&parse_piece(&fa[2]).unwrap(), 100 + E), (Offer::Stored, 0));
        assert_eq!(r.busy(), SLOTS);
        // Much later all expire; whole messages then take every slot, evicting nothing.
        assert_eq!(r.expire(1 << 40), SLOTS as u32);
        assert!(!r.pending());
        for id in 10..10 + SLOTS as u32 {
            let f = frames(id, 5, &a);
            let t = 1 << 40;
            assert_eq!(r.offer(&parse_piece(&f[0]).unwrap(), t), (Offer::Stored, 0));
            assert_eq!(r.offer(&parse_piece(&f[1]).unwrap(), t), (Offer::Stored, 0));
        }
        let last = frames(10, 5, &a);
        let (Offer::Complete(at), 0) = r.offer(&parse_piece(&last[2]).unwrap(), 1 << 40) else {
            panic!("message 10 completes")
        };
        assert_eq!(r.message(at).unwrap().data, &a[..]);
        r.release(at);
        assert!(r.pending(), "three still in reassembly");
        assert_eq!(r.expire((1 << 40) + E), 3);
        assert!(!r.pending());
    }

    /// NACKs on a driven clock: none before the delay without a new piece, then one
    /// naming exactly the missing pieces (the trailing one included), again only after
    /// another delay; a message made whole is remembered, so a late copy of its piece
    /// is refused rather than starting a message. No NACK with the delay at 0 or not
    /// below the expiry.
    #[test]
    fn gaps_are_nacked_after_the_delay_and_late_pieces_are_refused() {
        const E: u64 = 10_000;
        const N: u64 = 100;
        let mut r = Reassembly::new(SLOTS, BULK_MAX, E, N);
        let a: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let fa = frames(9, 5, &a);
        let mut got = Vec::new();
        for (i, t) in [(0, 0), (2, 50)] {
            assert_eq!(r.offer(&parse_piece(&fa[i]).unwrap(), t).0, Offer::Stored);
        }
        assert_eq!(drain(&mut r, 149, &mut got), 0, "a piece came at 50");
        assert_eq!(drain(&mut r, 150, &mut got), 1);
        let want = Ctl { kind: CtlKind::Nack, from: 5, id: 9, total: 5000, missing: 0b11010 };
        assert_eq!(got, vec![want]);
        assert_eq!(drain(&mut r, 249, &mut got), 0, "once per delay");
        assert_eq!(drain(&mut r, 250, &mut got), 1);
        for (i, t) in [(1, 260), (3, 261)] {
            assert_eq!(r.offer(&parse_piece(&fa[i]).unwrap(), t).0, Offer::Stored);
        }
        assert_eq!(drain(&mut r, 360, &mut got), 0);
        assert_eq!(drain(&mut r, 361, &mut got), 1);
        assert_eq!(got[2].missing, 0b10000, "the last piece alone");
        let Offer::Complete(at) = r.offer(&parse_piece(&fa[4]).unwrap(), 400).0 else {
            panic!("whole")
        };
        assert_eq!(r.message(at).unwrap().data, &a[..]);
        r.release(at);
        assert_eq!(r.offer(&parse_piece(&fa[4]).unwrap(), 410).0, Offer::Late);
        assert_eq!(r.busy(), 0, "a late piece starts nothing");
        assert_eq!(drain(&mut r, 1 << 20, &mut got), 0, "nothing to NACK");
        // The same id from another sender is another message.
        assert_eq!(r.offer(&parse_piece(&frames(9, 6, &a)[0]).unwrap(), 420).0, Offer::Stored);
        for nack in [0, E, E + 1] {
            let mut q = Reassembly::new(SLOTS, BULK_MAX, E, nack);
            assert_eq!(q.offer(&parse_piece(&fa[0]).unwrap(), 0).0, Offer::Stored);
            assert_eq!(q.next_nack(E - 1), None, "no NACK");
        }
    }

    /// Configured limits: 2 slots of 2 KiB take messages of up to 2,048 bytes (a third
    /// evicts the oldest); a piece of a longer message is refused, storing nothing.
    #[test]
    fn configured_slots_and_size_bound_what_is_taken() {
        let mut r = Reassembly::new(2, 2048, DEFAULT_EXPIRY_NS, 0);
        let big = frames(1, 5, &[7; 2049]);
        assert_eq!(r.offer(&parse_piece(&big[0]).unwrap(), 0), (Offer::TooBig, 0));
        assert_eq!(r.busy(), 0);
        for id in 2..4 {
            let f = frames(id, 5, &[id as u8; 2048]);
            assert_eq!(r.offer(&parse_piece(&f[0]).unwrap(), u64::from(id)), (Offer::Stored, 0));
        }
        let f = frames(4, 5, &[4; 2048]);
        assert_eq!(r.offer(&parse_piece(&f[0]).unwrap(), 9), (Offer::Stored, 1), "evicts");
        let Offer::Complete(at) = r.offer(&parse_piece(&f[1]).unwrap(), 9).0 else {
            panic!("whole")
        };
        assert_eq!(r.message(at).unwrap().data, &[4; 2048][..]);
        // Out-of-range limits are clamped: at least one slot of one piece.
        let mut tiny = Reassembly::new(0, 0, DEFAULT_EXPIRY_NS, 0);
        let one = frames(1, 5, &[1; PIECE_MAX]);
        assert!(matches!(tiny.offer(&parse_piece(&one[0]).unwrap(), 0).0, Offer::Complete(_)));
    }
}
