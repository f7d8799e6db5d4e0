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
}
