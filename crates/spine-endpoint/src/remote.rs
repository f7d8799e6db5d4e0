//! Active messages between adapters (adapter → adapter over a tunnel port): one message
//! per Ethernet frame of ethertype [`ETHERTYPE`] (0x88B6, IEEE 802's "local
//! experimental" ethertype 2, which no public protocol uses).
//!
//! Layout after the 14-byte Ethernet header (all numbers big-endian):
//!
//! | bytes | field                                                        |
//! |-------|--------------------------------------------------------------|
//! | 0..2  | magic `S` `M`                                                |
//! | 2     | version 1                                                    |
//! | 3     | handler number                                               |
//! | 4..8  | `to`: [`TO_HANDLERS`], or an endpoint id of the receiver     |
//! | 8..12 | `from`: the sender's claim (an endpoint or extension id)     |
//! | 12..14| payload length, 0..=[`MSG_MAX`]                              |
//! | 14..  | payload (the frame may be longer: Ethernet padding, ignored) |
//!
//! The receiving adapter recognises the ethertype followed by the magic on a tunnel
//! port's receive path only ([`is_message`]: other frames of the ethertype, which is
//! free for anyone's experiments, pass as ordinary frames), checks the rest with [`parse`] and never trusts `from` beyond marking it as the
//! peer's claim (the handler's `source` says which tunnel port it came in on).
//!
//! **Bulk messages** travel as pieces, one per frame, with version [`BULK_VERSION`]
//! (2) and a longer header (all big-endian):
//!
//! | bytes | field                                                          |
//! |-------|----------------------------------------------------------------|
//! | 0..2  | magic `S` `M`                                                  |
//! | 2     | version 2                                                      |
//! | 3     | handler number                                                 |
//! | 4..8  | `to`, as above                                                 |
//! | 8..12 | `from`, as above                                               |
//! | 12..14| this piece's length, 1..=[`PIECE_MAX`]                         |
//! | 14..18| message id (the sender's, to tell its messages apart)          |
//! | 18..22| the message's total length, 1..=[`BULK_MAX`]                   |
//! | 22..26| this piece's offset in the message, a multiple of [`PIECE_MAX`] |
//! | 26..  | the piece                                                      |
//!
//! Every piece but the last is exactly [`PIECE_MAX`] bytes and the last carries the
//! rest ([`parse_piece`] refuses any other length, offset or total), so two pieces of
//! one message never overlap: each is known by its index, `offset / PIECE_MAX`.
//!
//! **Acknowledgements** of bulk messages go back the other way, with version
//! [`CTL_VERSION`] (3), one per frame (all big-endian):
//!
//! | bytes | field                                                          |
//! |-------|----------------------------------------------------------------|
//! | 0..2  | magic `S` `M`                                                  |
//! | 2     | version 3                                                      |
//! | 3     | kind: [`CtlKind::Ack`] (1) or [`CtlKind::Nack`] (2)            |
//! | 4..8  | `from` of the message's pieces (the sender's claim)            |
//! | 8..12 | the message id, as in its pieces                               |
//! | 12..16| the message's total length, 1..=[`BULK_MAX`]                   |
//! | 16..20| missing pieces: bit i set when piece i is missing; 0 in an ACK, |
//! |       | in a NACK not 0 and no bit at or past the message's piece count |
//!
//! The receiver ACKs a message when it is whole (the sender then forgets it) and NACKs
//! one whose reassembly has had a gap for a while (the sender then sends again just
//! the pieces named). [`parse_ctl`] checks every field against the others; the sender
//! also checks that the id, `from` and total name a message it still holds.

/// The ethertype of a spine active message frame.
pub const ETHERTYPE: u16 = 0x88B6;
/// `to` asking the receiver to run its handlers (instead of delivering to an endpoint).
pub const TO_HANDLERS: u32 = u32::MAX;
/// Largest payload.
pub const MSG_MAX: usize = 240;
/// Ethernet header plus message header: the payload's offset in the frame.
pub const HEADER_LEN: usize = 14 + 14;
/// Largest frame [`encode`] writes.
pub const FRAME_MAX: usize = HEADER_LEN + MSG_MAX;

const MAGIC: [u8; 2] = *b"SM";
const VERSION: u8 = 1;
/// The version byte of a bulk message's piece.
pub const BULK_VERSION: u8 = 2;
/// Largest piece of a bulk message (every piece but the last is this long).
pub const PIECE_MAX: usize = 1024;
/// Largest bulk message a tunnel carries (and a receiver reassembles): 16 pieces.
pub const BULK_MAX: usize = 16 * PIECE_MAX;
/// Ethernet header plus piece header: the piece's offset in the frame.
pub const PIECE_HEADER_LEN: usize = 14 + 26;
/// Largest frame [`encode_piece`] writes.
pub const PIECE_FRAME_MAX: usize = PIECE_HEADER_LEN + PIECE_MAX;

/// The version byte of a bulk message's acknowledgement (ACK or NACK).
pub const CTL_VERSION: u8 = 3;
/// Ethernet header plus acknowledgement: the length of its frame (a longer one is
/// Ethernet padding, ignored).
pub const CTL_FRAME_LEN: usize = 14 + 20;

/// The kind of an acknowledgement frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtlKind {
    /// The message arrived whole.
    Ack = 1,
    /// Pieces of the message are missing.
    Nack = 2,
}

/// An acknowledgement read out of a frame ([`parse_ctl`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctl {
    pub kind: CtlKind,
    /// The `from` of the message's pieces.
    pub from: u32,
    /// The message id.
    pub id: u32,
    /// The message's total length.
    pub total: u32,
    /// Bit i: piece i is missing (0 in an ACK).
    pub missing: u32,
}

/// Why an acknowledgement frame is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    #[error("bulk acknowledgement frame of {len} bytes is shorter than {CTL_FRAME_LEN}")]
    Short { len: usize },
    #[error("bulk acknowledgement frame has a bad magic or version")]
    BadHeader,
    #[error("bulk acknowledgement of kind {kind} is neither ACK (1) nor NACK (2)")]
    BadKind { kind: u8 },
    #[error("bulk acknowledgement names a total of {total} bytes, 0 or over {BULK_MAX}")]
    BadTotal { total: u32 },
    #[error("bulk acknowledgement's missing bitmap {missing:#x} is out of range for a total of {total} bytes")]
    BadMissing { missing: u32, total: u32 },
}

/// The bits of every piece of a `total`-byte message (bit i: piece i), for totals
/// 1..=[`BULK_MAX`] (0 for 0).
pub fn all_pieces(total: u32) -> u32 {
    let n = (total as usize).div_ceil(PIECE_MAX);
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// Reads the acknowledgement of `frame` (which [`is_message`], version
/// [`CTL_VERSION`]): kind ACK or NACK, total 1..=[`BULK_MAX`], an ACK's bitmap 0, a
/// NACK's not 0 and inside the message's pieces.
pub fn parse_ctl(frame: &[u8]) -> Result<Ctl, CtlError> {
    if frame.len() < CTL_FRAME_LEN {
        return Err(CtlError::Short { len: frame.len() });
    }
    let h = &frame[14..CTL_FRAME_LEN];
    if h[0..2] != MAGIC || h[2] != CTL_VERSION {
        return Err(CtlError::BadHeader);
    }
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let kind = match h[3] {
        1 => CtlKind::Ack,
        2 => CtlKind::Nack,
        kind => return Err(CtlError::BadKind { kind }),
    };
    let (from, id, total, missing) =
        (be32(&h[4..8]), be32(&h[8..12]), be32(&h[12..16]), be32(&h[16..20]));
    if total == 0 || total as usize > BULK_MAX {
        return Err(CtlError::BadTotal { total });
    }
    let fits = match kind {
        CtlKind::Ack => missing == 0,
        CtlKind::Nack => missing != 0 && missing & !all_pieces(total) == 0,
    };
    if !fits {
        return Err(CtlError::BadMissing { missing, total });
    }
    Ok(Ctl { kind, from, id, total, missing })
}

/// Writes acknowledgement `c` as a frame into `out` (broadcast destination, zero
/// source address); returns its length ([`CTL_FRAME_LEN`]), or `None` when `out` is
/// shorter. Nothing is checked: [`parse_ctl`] is the receiver's check.
pub fn encode_ctl(out: &mut [u8], c: &Ctl) -> Option<usize> {
    let out = out.get_mut(..CTL_FRAME_LEN)?;
    out[0..6].fill(0xff);
    out[6..12].fill(0);
    out[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    out[14..16].copy_from_slice(&MAGIC);
    out[16] = CTL_VERSION;
    out[17] = c.kind as u8;
    out[18..22].copy_from_slice(&c.from.to_be_bytes());
    out[22..26].copy_from_slice(&c.id.to_be_bytes());
    out[26..30].copy_from_slice(&c.total.to_be_bytes());
    out[30..34].copy_from_slice(&c.missing.to_be_bytes());
    Some(CTL_FRAME_LEN)
}

/// An acknowledgement frame as a vector (for tests and clients; the adapter uses
/// [`encode_ctl`]).
pub fn ctl_frame(c: &Ctl) -> Vec<u8> {
    let mut out = vec![0; CTL_FRAME_LEN];
    encode_ctl(&mut out, c);
    out
}

/// One piece of a bulk message read out of a frame ([`parse_piece`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    pub handler: u8,
    pub to: u32,
    pub from: u32,
    /// The sender's message id.
    pub id: u32,
    /// The whole message's length.
    pub total: u32,
    /// Where this piece goes in the message.
    pub offset: u32,
    pub data: &'a [u8],
}

impl Piece<'_> {
    /// The piece's index in its message (`offset / PIECE_MAX`, below 16).
    pub fn index(&self) -> usize {
        self.offset as usize / PIECE_MAX
    }
}

/// Why a piece frame is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PieceError {
    #[error("bulk piece frame of {len} bytes is shorter than its {PIECE_HEADER_LEN}-byte header")]
    Short { len: usize },
    #[error("bulk piece frame has a bad magic or version")]
    BadHeader,
    #[error("bulk message total of {total} bytes is 0 or over {BULK_MAX}")]
    BadTotal { total: u32 },
    #[error("bulk piece at offset {offset} is not on a {PIECE_MAX}-byte boundary inside the total {total}")]
    BadOffset { offset: u32, total: u32 },
    #[error("bulk piece of {len} bytes at offset {offset} is not the piece's length for total {total}, or passes the frame's end")]
    BadLength { len: usize, offset: u32, total: u32 },
}

/// A message read out of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteMsg<'a> {
    pub handler: u8,
    pub to: u32,
    pub from: u32,
    pub payload: &'a [u8],
}

/// Why a frame of [`ETHERTYPE`] is no valid message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    #[error("remote message frame of {len} bytes is shorter than its {HEADER_LEN}-byte header")]
    Short { len: usize },
    #[error("remote message frame has a bad magic or version")]
    BadHeader,
    #[error("remote message payload of {len} bytes is over {MSG_MAX} or past the frame's end")]
    BadLength { len: usize },
}

/// Whether `frame` has the message ethertype followed by the magic (one four-byte
/// comparison).
#[inline]
pub fn is_message(frame: &[u8]) -> bool {
    let [e0, e1] = ETHERTYPE.to_be_bytes();
    frame.get(12..16) == Some(&[e0, e1, MAGIC[0], MAGIC[1]][..])
}

/// Reads the message of `frame` (which [`is_message`]), checking magic, version and
/// length.
pub fn parse(frame: &[u8]) -> Result<RemoteMsg<'_>, RemoteError> {
    if frame.len() < HEADER_LEN {
        return Err(RemoteError::Short { len: frame.len() });
    }
    let h = &frame[14..HEADER_LEN];
    if h[0..2] != MAGIC || h[2] != VERSION {
        return Err(RemoteError::BadHeader);
    }
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let len = usize::from(u16::from_be_bytes([h[12], h[13]]));
    let payload = frame
        .get(HEADER_LEN..HEADER_LEN + len)
        .filter(|_| len <= MSG_MAX)
        .ok_or(RemoteError::BadLength { len })?;
    Ok(RemoteMsg { handler: h[3], to: be32(&h[4..8]), from: be32(&h[8..12]), payload })
}

/// Writes a message frame into `out` (broadcast destination, zero source address);
/// returns its length, or `None` when the payload is over [`MSG_MAX`] or `out` is
/// shorter than the frame.
pub fn encode(out: &mut [u8], handler: u8, to: u32, from: u32, payload: &[u8]) -> Option<usize> {
    let n = HEADER_LEN + payload.len();
    if payload.len() > MSG_MAX || out.len() < n {
        return None;
    }
    out[0..6].fill(0xff);
    out[6..12].fill(0);
    out[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    out[14..16].copy_from_slice(&MAGIC);
    out[16] = VERSION;
    out[17] = handler;
    out[18..22].copy_from_slice(&to.to_be_bytes());
    out[22..26].copy_from_slice(&from.to_be_bytes());
    out[26..28].copy_from_slice(&(payload.len() as u16).to_be_bytes());
    out[HEADER_LEN..n].copy_from_slice(payload);
    Some(n)
}

/// A message frame as a vector (for clients; the adapter uses [`encode`]).
pub fn frame(handler: u8, to: u32, from: u32, payload: &[u8]) -> Option<Vec<u8>> {
    let mut out = vec![0; HEADER_LEN + payload.len()];
    encode(&mut out, handler, to, from, payload)?;
    Some(out)
}

/// The version byte of a frame that [`is_message`] (1: a small message, 2: a bulk
/// message's piece, 3: a bulk message's acknowledgement; anything else is refused by
/// the parsers).
#[inline]
pub fn version(frame: &[u8]) -> Option<u8> {
    frame.get(16).copied()
}

/// Reads the piece of `frame` (which [`is_message`], version [`BULK_VERSION`]), checking
/// every field against the others: total 1..=[`BULK_MAX`], offset a multiple of
/// [`PIECE_MAX`] below the total, length exactly `min(PIECE_MAX, total - offset)` and
/// inside the frame. Nothing in the frame is trusted otherwise.
pub fn parse_piece(frame: &[u8]) -> Result<Piece<'_>, PieceError> {
    if frame.len() < PIECE_HEADER_LEN {
        return Err(PieceError::Short { len: frame.len() });
    }
    let h = &frame[14..PIECE_HEADER_LEN];
    if h[0..2] != MAGIC || h[2] != BULK_VERSION {
        return Err(PieceError::BadHeader);
    }
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let len = usize::from(u16::from_be_bytes([h[12], h[13]]));
    let (id, total, offset) = (be32(&h[14..18]), be32(&h[18..22]), be32(&h[22..26]));
    if total == 0 || total as usize > BULK_MAX {
        return Err(PieceError::BadTotal { total });
    }
    if offset >= total || !(offset as usize).is_multiple_of(PIECE_MAX) {
        return Err(PieceError::BadOffset { offset, total });
    }
    let want = PIECE_MAX.min((total - offset) as usize);
    let data = frame
        .get(PIECE_HEADER_LEN..PIECE_HEADER_LEN + len)
        .filter(|_| len == want)
        .ok_or(PieceError::BadLength { len, offset, total })?;
    Ok(Piece { handler: h[3], to: be32(&h[4..8]), from: be32(&h[8..12]), id, total, offset, data })
}

/// Writes the piece of `msg` at `offset` (a multiple of [`PIECE_MAX`] below its
/// length, at most [`BULK_MAX`]) into `out` as a frame; returns its length, or `None`
/// when the arguments break those rules or `out` is too short.
pub fn encode_piece(
    out: &mut [u8],
    (handler, to, from, id): (u8, u32, u32, u32),
    msg: &[u8],
    offset: usize,
) -> Option<usize> {
    if msg.is_empty()
        || msg.len() > BULK_MAX
        || offset >= msg.len()
        || !offset.is_multiple_of(PIECE_MAX)
    {
        return None;
    }
    let data = &msg[offset..msg.len().min(offset + PIECE_MAX)];
    let n = PIECE_HEADER_LEN + data.len();
    let out = out.get_mut(..n)?;
    out[PIECE_HEADER_LEN..n].copy_from_slice(data);
    encode_piece_header(out, (handler, to, from, id), msg.len(), offset)
}

/// Writes the headers of the piece at `offset` of a `total`-byte message into `out`,
/// whose bytes from [`PIECE_HEADER_LEN`] on already hold the piece (for a sender that
/// copies the piece into place itself); returns the frame's length, or `None` when
/// `total` is 0 or over [`BULK_MAX`], `offset` is no piece boundary below it, or `out`
/// is too short for the piece.
pub fn encode_piece_header(
    out: &mut [u8],
    (handler, to, from, id): (u8, u32, u32, u32),
    total: usize,
    offset: usize,
) -> Option<usize> {
    if total == 0 || total > BULK_MAX || offset >= total || !offset.is_multiple_of(PIECE_MAX) {
        return None;
    }
    let len = PIECE_MAX.min(total - offset);
    let n = PIECE_HEADER_LEN + len;
    let out = out.get_mut(..n)?;
    out[0..6].fill(0xff);
    out[6..12].fill(0);
    out[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    out[14..16].copy_from_slice(&MAGIC);
    out[16] = BULK_VERSION;
    out[17] = handler;
    out[18..22].copy_from_slice(&to.to_be_bytes());
    out[22..26].copy_from_slice(&from.to_be_bytes());
    out[26..28].copy_from_slice(&(len as u16).to_be_bytes());
    out[28..32].copy_from_slice(&id.to_be_bytes());
    out[32..36].copy_from_slice(&(total as u32).to_be_bytes());
    out[36..40].copy_from_slice(&(offset as u32).to_be_bytes());
    Some(n)
}

/// The frames of bulk message `msg` (1..=[`BULK_MAX`] bytes) for handler `handler` of
/// `to`, from `from`, with message id `id`, in order; `None` when `msg` is empty or
/// too long. For clients: send them through an endpoint bound to a tunnel port.
pub fn bulk_frames(handler: u8, to: u32, from: u32, id: u32, msg: &[u8]) -> Option<Vec<Vec<u8>>> {
    if msg.is_empty() || msg.len() > BULK_MAX {
        return None;
    }
    (0..msg.len())
        .step_by(PIECE_MAX)
        .map(|off| {
            let mut f = vec![0; PIECE_FRAME_MAX];
            let n = encode_piece(&mut f, (handler, to, from, id), msg, off)?;
            f.truncate(n);
            Some(f)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_bad_ones_are_refused() {
        let f = frame(7, TO_HANDLERS, 3, b"hello").unwrap();
        assert!(is_message(&f));
        let m = parse(&f).unwrap();
        assert_eq!((m.handler, m.to, m.from, m.payload), (7, TO_HANDLERS, 3, &b"hello"[..]));
        // Ethernet padding after the payload is ignored.
        let mut padded = f.clone();
        padded.resize(60, 0);
        assert_eq!(parse(&padded).unwrap().payload, b"hello");
        assert!(frame(1, 1, 1, &[0; MSG_MAX + 1]).is_none());
        assert_eq!(parse(&f[..20]), Err(RemoteError::Short { len: 20 }));
        let mut bad = f.clone();
        bad[16] = 2;
        assert_eq!(parse(&bad), Err(RemoteError::BadHeader));
        let mut long = f.clone();
        long[26..28].copy_from_slice(&6u16.to_be_bytes());
        assert_eq!(parse(&long), Err(RemoteError::BadLength { len: 6 }));
        let mut huge = vec![0; 600];
        huge[..f.len()].copy_from_slice(&f);
        huge[26..28].copy_from_slice(&241u16.to_be_bytes());
        assert_eq!(parse(&huge), Err(RemoteError::BadLength { len: 241 }));
        assert!(!is_message(&[0; 13]));
        let mut other = f.clone();
        other[14] = b'X';
        assert!(!is_message(&other), "the ethertype without the magic is someone else's");
    }

    #[test]
    fn bulk_pieces_round_trip_and_every_bad_field_is_refused() {
        let msg: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
        let fs = bulk_frames(12, TO_HANDLERS, 5, 77, &msg).unwrap();
        assert_eq!(fs.len(), 3);
        let mut back = vec![0u8; msg.len()];
        for (i, f) in fs.iter().enumerate() {
            assert!(is_message(f));
            assert_eq!(version(f), Some(BULK_VERSION));
            assert!(parse(f).is_err(), "a piece is no small message");
            let p = parse_piece(f).unwrap();
            assert_eq!((p.handler, p.to, p.from, p.id, p.total), (12, TO_HANDLERS, 5, 77, 3000));
            assert_eq!(p.index(), i);
            back[p.offset as usize..p.offset as usize + p.data.len()].copy_from_slice(p.data);
        }
        assert_eq!(back, msg);
        assert_eq!(fs[2].len(), PIECE_HEADER_LEN + 3000 - 2 * PIECE_MAX);
        assert!(bulk_frames(1, 1, 1, 1, &[]).is_none());
        assert!(bulk_frames(1, 1, 1, 1, &vec![0; BULK_MAX + 1]).is_none());
        assert_eq!(bulk_frames(1, 1, 1, 1, &vec![0; BULK_MAX]).unwrap().len(), 16);
        let small = frame(7, TO_HANDLERS, 3, &[1; 40]).unwrap();
        assert_eq!(parse_piece(&small), Err(PieceError::BadHeader));

        let set = |f: &[u8], at: usize, v: u32| {
            let mut g = f.to_vec();
            g[at..at + 4].copy_from_slice(&v.to_be_bytes());
            g
        };
        let f0 = &fs[0];
        assert_eq!(parse_piece(&f0[..30]), Err(PieceError::Short { len: 30 }));
        for total in [0, BULK_MAX as u32 + 1, u32::MAX] {
            assert_eq!(parse_piece(&set(f0, 32, total)), Err(PieceError::BadTotal { total }));
        }
        // Overlapping (not on a piece boundary), and past the total.
        for offset in [1, 512, 3072, u32::MAX - 1023] {
            assert_eq!(
                parse_piece(&set(f0, 36, offset)),
                Err(PieceError::BadOffset { offset, total: 3000 })
            );
        }
        // A first piece claiming a total shorter than itself, a last piece cut short,
        // a length past the frame's end.
        assert_eq!(
            parse_piece(&set(f0, 32, 100)),
            Err(PieceError::BadLength { len: PIECE_MAX, offset: 0, total: 100 })
        );
        let last = &fs[2];
        assert!(matches!(parse_piece(&last[..last.len() - 1]), Err(PieceError::BadLength { .. })));
        let mut long = last.clone();
        long[26..28].copy_from_slice(&2000u16.to_be_bytes());
        assert!(matches!(parse_piece(&long), Err(PieceError::BadLength { len: 2000, .. })));
        // Ethernet padding after a short last piece is ignored.
        let tiny = bulk_frames(3, 9, 9, 1, b"abc").unwrap().remove(0);
        let mut padded = tiny.clone();
        padded.resize(64, 0);
        assert_eq!(parse_piece(&padded).unwrap().data, b"abc");
        let mut out = [0u8; 60];
        assert!(encode_piece(&mut out, (1, 1, 1, 1), &msg, 0).is_none(), "too short an out");
        assert!(encode_piece(&mut [0; 2000], (1, 1, 1, 1), &msg, 100).is_none(), "unaligned");
        assert!(encode_piece(&mut [0; 2000], (1, 1, 1, 1), &msg, 3072).is_none(), "past end");
    }

    #[test]
    fn acknowledgements_round_trip_and_every_bad_field_is_refused() {
        let nack =
            Ctl { kind: CtlKind::Nack, from: 5, id: 0x0100_0007, total: 3000, missing: 0b101 };
        let f = ctl_frame(&nack);
        assert!(is_message(&f));
        assert_eq!(version(&f), Some(CTL_VERSION));
        assert_eq!(parse_ctl(&f), Ok(nack));
        assert!(parse(&f).is_err() && parse_piece(&f).is_err(), "no message, no piece");
        let ack = Ctl { kind: CtlKind::Ack, missing: 0, ..nack };
        let mut padded = ctl_frame(&ack);
        padded.resize(60, 0);
        assert_eq!(parse_ctl(&padded), Ok(ack), "Ethernet padding ignored");
        assert_eq!(parse_ctl(&f[..33]), Err(CtlError::Short { len: 33 }));
        let piece = bulk_frames(1, 1, 1, 1, b"abc").unwrap().remove(0);
        assert_eq!(parse_ctl(&piece), Err(CtlError::BadHeader));
        let mut k = f.clone();
        for kind in [0u8, 3, 255] {
            k[17] = kind;
            assert_eq!(parse_ctl(&k), Err(CtlError::BadKind { kind }));
        }
        for total in [0, BULK_MAX as u32 + 1, u32::MAX] {
            assert_eq!(
                parse_ctl(&ctl_frame(&Ctl { total, ..nack })),
                Err(CtlError::BadTotal { total })
            );
        }
        // A NACK naming no piece, or a piece past the message (3 pieces of 3,000
        // bytes: bits 0..3); an ACK naming any.
        for (c, missing) in [(nack, 0), (nack, 0b1000), (nack, u32::MAX), (ack, 1)] {
            let bad = Ctl { missing, ..c };
            assert_eq!(
                parse_ctl(&ctl_frame(&bad)),
                Err(CtlError::BadMissing { missing, total: 3000 })
            );
        }
        let full = Ctl { total: BULK_MAX as u32, missing: 0xffff, ..nack };
        assert_eq!(parse_ctl(&ctl_frame(&full)), Ok(full), "all 16 pieces of the largest");
        assert_eq!(all_pieces(1), 1);
        assert_eq!(all_pieces(1025), 0b11);
        assert!(encode_ctl(&mut [0; 33], &nack).is_none());
    }
}
