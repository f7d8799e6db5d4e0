//! Peer authentication for UDP tunnels: a keyed MAC on every datagram and a replay
//! window, computed over bytes only (no socket, no clock), so it is unit-tested here and
//! the port only feeds it.
//!
//! An authenticated datagram (header version 2) is:
//!
//! ```text
//! 0      2    3     4        12     20        36
//! | 53 50 | 02 | 00 | epoch  | seq  | tag     | Ethernet frame ...
//! ```
//!
//! `epoch` (u64, big-endian) names the sender's session: it is chosen when the port opens
//! and grows from one session to the next (wall-clock nanoseconds), so a restarted sender
//! is recognised and an old session's datagrams are not. `seq` (u64, big-endian) counts
//! the session's datagrams from 0. `tag` is the first 16 bytes of BLAKE3 in keyed mode
//! (the 32-byte shared key) over bytes 0..20 and then the frame, so it covers the header,
//! the sequence number and every byte of the frame.
//!
//! The receiver checks, in order: the datagram holds a whole header and tag (else
//! `auth_no_tag`); its epoch is not older than the session it follows and its sequence
//! number is inside the window and not seen (else `auth_too_old` or `auth_replay`; a
//! datagram carrying the receiver's own epoch, sent back to it, is a replay); the tag
//! (else `auth_bad_tag`). Only then is the window moved and the frame read. The window
//! is [`WINDOW`] sequence numbers wide, as in RFC 6479 and WireGuard: a datagram may
//! arrive that far behind the newest and still be taken once.

use std::path::{Path, PathBuf};

/// Bytes in the shared key.
pub const KEY_LEN: usize = 32;
/// Bytes of the tag carried.
pub const TAG_LEN: usize = 16;
/// Bytes covered by the tag before the frame: magic, version, kind, epoch, seq.
const SIGNED: usize = 20;
/// The authenticated header's length: magic, version, kind, epoch, seq, tag.
pub const AUTH_HEADER_LEN: usize = SIGNED + TAG_LEN;
/// Magic, version 2 (authenticated), kind 0 (frame).
pub const AUTH_HEADER_MAGIC: [u8; 4] = [0x53, 0x50, 2, 0];
/// How far behind the newest sequence number a datagram may arrive.
pub const WINDOW: u64 = 64 * WORDS as u64;
const WORDS: usize = 32;

/// A tunnel's shared key. Its bytes never appear in `Debug` output or in errors.
#[derive(Clone)]
pub struct TunnelKey([u8; KEY_LEN]);

impl std::fmt::Debug for TunnelKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TunnelKey(..)")
    }
}

/// A key file that cannot serve: which file, and why (never its contents).
#[derive(Debug, thiserror::Error)]
pub enum TunnelKeyError {
    #[error("tunnel key file {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("tunnel key file {} holds {len} bytes; it must hold exactly {KEY_LEN} random bytes (e.g. head -c 32 /dev/urandom)", path.display())]
    Length { path: PathBuf, len: u64 },
}

impl TunnelKey {
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> TunnelKey {
        TunnelKey(bytes)
    }

    /// Reads a key file: exactly [`KEY_LEN`] bytes, used as they are.
    pub fn from_file(path: &Path) -> Result<TunnelKey, TunnelKeyError> {
        let read = |source| TunnelKeyError::Read { path: path.to_owned(), source };
        let bytes = std::fs::read(path).map_err(read)?;
        let key: [u8; KEY_LEN] = bytes.as_slice().try_into().map_err(|_| {
            TunnelKeyError::Length { path: path.to_owned(), len: bytes.len() as u64 }
        })?;
        Ok(TunnelKey(key))
    }
}

/// Why an authenticated tunnel refused a datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthDrop {
    /// Too short for the authenticated header, or not an authenticated datagram.
    NoTag,
    /// The tag does not match: another key, or bytes changed on the way.
    BadTag,
    /// A sequence number already taken, or the receiver's own datagram sent back.
    Replay,
    /// Behind the window, or from an older session of the peer.
    TooOld,
}

/// Both directions of one tunnel end: seals what it sends, opens what it receives.
pub struct TunnelAuth {
    /// The keyed hasher, cloned per datagram (a copy, no allocation).
    mac: blake3::Hasher,
    /// This end's session, carried in what it sends.
    own_epoch: u64,
    next_seq: u64,
    /// The peer's session followed, and the sequence numbers seen in it.
    peer_epoch: u64,
    window: ReplayWindow,
}

impl std::fmt::Debug for TunnelAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelAuth")
            .field("own_epoch", &self.own_epoch)
            .field("next_seq", &self.next_seq)
            .field("peer_epoch", &self.peer_epoch)
            .finish_non_exhaustive()
    }
}

impl TunnelAuth {
    /// `epoch` must be larger than any this key was used with before by this end (the
    /// port uses wall-clock nanoseconds at open).
    pub fn new(key: &TunnelKey, epoch: u64) -> TunnelAuth {
        TunnelAuth {
            mac: blake3::Hasher::new_keyed(&key.0),
            own_epoch: epoch,
            next_seq: 0,
            peer_epoch: 0,
            window: ReplayWindow::new(),
        }
    }

    /// Writes the header for the next datagram into `hdr`; `feed` gives the frame's bytes
    /// to the MAC, in order (a chain: head, then each fragment).
    pub fn seal(
        &mut self,
        hdr: &mut [u8; AUTH_HEADER_LEN],
        feed: impl FnOnce(&mut blake3::Hasher),
    ) {
        hdr[..4].copy_from_slice(&AUTH_HEADER_MAGIC);
        hdr[4..12].copy_from_slice(&self.own_epoch.to_be_bytes());
        hdr[12..20].copy_from_slice(&self.next_seq.to_be_bytes());
        self.next_seq += 1;
        let mut h = self.mac.clone();
        h.update(&hdr[..SIGNED]);
        feed(&mut h);
        hdr[SIGNED..].copy_from_slice(&h.finalize().as_bytes()[..TAG_LEN]);
    }

    /// Checks a received datagram's header (`hdr`: its first bytes, as many as it has, up
    /// to [`AUTH_HEADER_LEN`]); `feed` gives the frame's bytes to the MAC. On `Ok` the
    /// sequence number is taken: the same datagram again is a replay.
    pub fn open(
        &mut self,
        hdr: &[u8],
        feed: impl FnOnce(&mut blake3::Hasher),
    ) -> Result<(), AuthDrop> {
        let Some(hdr) = hdr.first_chunk::<AUTH_HEADER_LEN>() else {
            return Err(AuthDrop::NoTag);
        };
        if hdr[..4] != AUTH_HEADER_MAGIC {
            return Err(AuthDrop::NoTag);
        }
        let epoch = u64::from_be_bytes(hdr[4..12].try_into().expect("8 bytes"));
        let seq = u64::from_be_bytes(hdr[12..20].try_into().expect("8 bytes"));
        if epoch == self.own_epoch {
            return Err(AuthDrop::Replay);
        }
        if epoch < self.peer_epoch {
            return Err(AuthDrop::TooOld);
        }
        if epoch == self.peer_epoch {
            self.window.check(seq)?;
        }
        let mut h = self.mac.clone();
        h.update(&hdr[..SIGNED]);
        feed(&mut h);
        if !tags_equal(&h.finalize().as_bytes()[..TAG_LEN], &hdr[SIGNED..]) {
            return Err(AuthDrop::BadTag);
        }
        if epoch > self.peer_epoch {
            self.peer_epoch = epoch;
            self.window = ReplayWindow::new();
        }
        self.window.take(seq);
        Ok(())
    }
}

/// Compares in time independent of where the bytes differ.
fn tags_equal(a: &[u8], b: &[u8]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0 && a.len() == b.len()
}

/// The sequence numbers taken in the last [`WINDOW`], as a ring of bits.
#[derive(Debug, Clone)]
struct ReplayWindow {
    /// One past the newest sequence number taken; 0 before the first.
    top: u64,
    bits: [u64; WORDS],
}

impl ReplayWindow {
    fn new() -> ReplayWindow {
        ReplayWindow { top: 0, bits: [0; WORDS] }
    }

    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    /// Whether `seq` may be taken, without taking it.
    fn check(&self, seq: u64) -> Result<(), AuthDrop> {
        if seq >= self.top {
            return Ok(());
        }
        if self.top - seq > WINDOW {
            return Err(AuthDrop::TooOld);
        }
        let (w, m) = Self::bit(seq);
        if self.bits[w] & m != 0 {
            return Err(AuthDrop::Replay);
        }
        Ok(())
    }

    /// Takes `seq`, which [`Self::check`] allowed.
    fn take(&mut self, seq: u64) {
        if seq >= self.top {
            if seq - self.top >= WINDOW {
                self.bits = [0; WORDS];
            } else {
                for s in self.top..seq {
                    let (w, m) = Self::bit(s);
                    self.bits[w] &= !m;
                }
            }
            self.top = seq + 1;
        }
        let (w, m) = Self::bit(seq);
        self.bits[w] |= m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> TunnelKey {
        TunnelKey::from_bytes([b; KEY_LEN])
    }

    /// One sealed datagram: header and frame.
    fn seal(a: &mut TunnelAuth, frame: &[u8]) -> Vec<u8> {
        let mut hdr = [0; AUTH_HEADER_LEN];
        a.seal(&mut hdr, |h| {
            h.update(frame);
        });
        [&hdr[..], frame].concat()
    }

    fn open(b: &mut TunnelAuth, d: &[u8]) -> Result<(), AuthDrop> {
        let n = d.len().min(AUTH_HEADER_LEN);
        b.open(&d[..n], |h| {
            h.update(&d[n..]);
        })
    }

    #[test]
    fn the_same_key_opens_each_datagram_once_and_a_changed_one_never() {
        let (mut a, mut b) = (TunnelAuth::new(&key(1), 10), TunnelAuth::new(&key(1), 20));
        let frame: Vec<u8> = (0..100).collect();
        let d = seal(&mut a, &frame);
        assert_eq!(d[..4], AUTH_HEADER_MAGIC);
        assert_eq!(open(&mut b, &d), Ok(()));
        assert_eq!(open(&mut b, &d), Err(AuthDrop::Replay), "replayed");
        let d2 = seal(&mut a, &frame);
        for bit in [0, 5 * 8 + 3, 13 * 8, 25 * 8 + 7, (d2.len() - 1) * 8] {
            let mut f = d2.clone();
            f[bit / 8] ^= 1 << (bit % 8);
            let want = if bit / 8 < 4 { AuthDrop::NoTag } else { AuthDrop::BadTag };
            assert_eq!(open(&mut b, &f), Err(want), "bit {bit} flipped");
        }
        assert_eq!(open(&mut b, &d2[..30]), Err(AuthDrop::NoTag), "tag cut short");
        assert_eq!(open(&mut b, &d2[..d2.len() - 1]), Err(AuthDrop::BadTag), "frame cut");
        let mut wrong = TunnelAuth::new(&key(2), 30);
        assert_eq!(open(&mut b, &seal(&mut wrong, &frame)), Err(AuthDrop::BadTag), "other key");
        assert_eq!(open(&mut b, &d2), Ok(()), "the untouched one still opens");
        // Sent back to its sender: refused though the key and tag are right.
        assert_eq!(open(&mut a, &d2), Err(AuthDrop::Replay), "reflected");
    }

    #[test]
    fn the_window_takes_late_datagrams_once_and_refuses_older_ones() {
        let (mut a, mut b) = (TunnelAuth::new(&key(1), 10), TunnelAuth::new(&key(1), 20));
        let ds: Vec<Vec<u8>> = (0..WINDOW + 10).map(|i| seal(&mut a, &i.to_be_bytes())).collect();
        // The newest first, then the rest backwards: all within the window open once.
        let last = ds.len() - 1;
        assert_eq!(open(&mut b, &ds[last]), Ok(()));
        for i in (0..last).rev() {
            let want = if (last - i) as u64 >= WINDOW { Err(AuthDrop::TooOld) } else { Ok(()) };
            assert_eq!(open(&mut b, &ds[i]), want, "seq {i}");
        }
        for i in [last, last - 1, last - 100] {
            assert_eq!(open(&mut b, &ds[i]), Err(AuthDrop::Replay), "seq {i} again");
        }
    }

    #[test]
    fn a_restarted_peer_is_followed_and_its_old_session_refused() {
        let mut b = TunnelAuth::new(&key(1), 5);
        let mut old = TunnelAuth::new(&key(1), 10);
        let d_old: Vec<Vec<u8>> = (0..3).map(|_| seal(&mut old, &[1; 20])).collect();
        assert_eq!(open(&mut b, &d_old[0]), Ok(()));
        let mut new = TunnelAuth::new(&key(1), 11);
        assert_eq!(open(&mut b, &seal(&mut new, &[2; 20])), Ok(()), "seq 0 of a new session");
        assert_eq!(open(&mut b, &d_old[1]), Err(AuthDrop::TooOld), "the old session");
        assert_eq!(open(&mut b, &seal(&mut new, &[3; 20])), Ok(()));
    }

    #[test]
    fn key_files_must_hold_exactly_32_bytes_and_errors_never_show_them() {
        let dir = std::env::temp_dir().join(format!("spine-key-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.key");
        std::fs::write(&good, [0x5a; KEY_LEN]).unwrap();
        let k = TunnelKey::from_file(&good).unwrap();
        assert_eq!(format!("{k:?}"), "TunnelKey(..)");
        let short = dir.join("short.key");
        std::fs::write(&short, b"secretsecret").unwrap();
        let e = TunnelKey::from_file(&short).unwrap_err().to_string();
        assert!(e.contains("short.key") && e.contains("holds 12 bytes"), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = TunnelKey::from_file(&dir.join("missing.key")).unwrap_err().to_string();
        assert!(e.contains("missing.key") && e.contains("No such file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
