//! Capture files in: the common packet model, typed errors, format detection and the
//! streaming reader that classic pcap and pcapng share.
//!
//! Input is untrusted. Every length is checked before it is used, no record may claim
//! more than [`MAX_PACKET_LEN`] bytes, and every failure is a [`CaptureError`] naming
//! the record and the byte offset where it starts.

use std::io::{self, Read};

use crate::pcap::PcapState;
use crate::pcapng::NgState;

/// Largest packet a capture record may carry (Wireshark's limit for standard link
/// types); a larger length is treated as corruption, never allocated.
pub const MAX_PACKET_LEN: u32 = 256 * 1024;

/// `LINKTYPE_ETHERNET`: frames start with an Ethernet II header.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// One captured packet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packet {
    /// Nanoseconds since the Unix epoch; 0 for pcapng Simple Packet Blocks, which carry
    /// no time.
    pub ts_ns: u64,
    /// The captured bytes, possibly fewer than `orig_len` if the capture was snapped.
    pub data: Vec<u8>,
    /// Length of the packet on the wire.
    pub orig_len: u32,
}

/// A whole capture file in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capture {
    /// The link type every packet shares: a classic pcap's header value (low 16 bits),
    /// or the interface of pcapng's first packet; [`LINKTYPE_ETHERNET`] for a pcapng
    /// file that has neither packets nor interfaces.
    pub linktype: u32,
    pub packets: Vec<Packet>,
}

/// The file format a [`CaptureReader`] detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap { nanos: bool, big_endian: bool, snaplen: u32 },
    Pcapng,
}

/// Why a capture could not be read, and where.
#[derive(Debug, thiserror::Error)]
#[error("{} at byte {offset}: {kind}", describe_record(*.record))]
pub struct CaptureError {
    /// Index of the record (pcap packet record or pcapng block, counting from 0) that
    /// failed; `None` for the classic pcap file header.
    pub record: Option<u64>,
    /// Byte offset in the input where that record (or header) starts.
    pub offset: u64,
    pub kind: CaptureErrorKind,
}

fn describe_record(record: Option<u64>) -> String {
    match record {
        Some(i) => format!("record {i}"),
        None => "file header".to_owned(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CaptureErrorKind {
    #[error("not a pcap or pcapng file (magic {magic:#010x})")]
    BadMagic { magic: u32 },
    #[error("unsupported format version {major}.{minor}")]
    UnsupportedVersion { major: u16, minor: u16 },
    #[error("truncated: needs {needed} bytes, only {available} present")]
    Truncated { needed: u64, available: u64 },
    #[error("length {len} exceeds the limit of {max} bytes")]
    TooLarge { len: u64, max: u64 },
    #[error("block length {len} is invalid (below {min} or not a multiple of 4)")]
    BadBlockLength { len: u32, min: u32 },
    #[error("block length {header} does not match its trailer {trailer}")]
    LengthMismatch { header: u32, trailer: u32 },
    #[error("captured length {captured} does not fit the block's {room} data bytes")]
    BadCapturedLength { captured: u32, room: u32 },
    #[error("option {code} of length {len} is malformed or overruns its block")]
    BadOption { code: u16, len: u16 },
    #[error("packet names interface {interface}, but the section has {known}")]
    UnknownInterface { interface: u32, known: u32 },
    #[error("packet has link type {found}, earlier packets {first}")]
    MixedLinktypes { first: u32, found: u32 },
    #[error("I/O error: {0}")]
    Io(io::Error),
}

/// The input with its byte offset; the format modules read only through it.
pub(crate) struct Source<R> {
    inner: R,
    offset: u64,
}

impl<R: Read> Source<R> {
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Fills `buf` as far as the input allows; fewer bytes only at end of input.
    pub(crate) fn read_full(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let got = read_full(&mut self.inner, buf)?;
        self.offset += got as u64;
        Ok(got)
    }

    /// Discards up to `n` bytes without buffering them; returns how many there were.
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<u64> {
        let got = io::copy(&mut (&mut self.inner).take(n), &mut io::sink())?;
        self.offset += got;
        Ok(got)
    }
}

/// Fills `buf` from `r` as far as it goes, retrying interrupted reads; fewer bytes
/// only at end of input.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

pub(crate) const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
pub(crate) const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
pub(crate) const PCAPNG_SHB: u32 = 0x0a0d_0d0a;

enum State {
    Pcap(PcapState),
    Pcapng(NgState),
}

type Input<R> = io::Chain<io::Cursor<[u8; 4]>, R>;

/// Reads a pcap or pcapng stream packet by packet, holding one record in memory.
///
/// After the first error it yields nothing more: a capture's framing cannot be trusted
/// past a corrupt record.
pub struct CaptureReader<R> {
    src: Source<Input<R>>,
    state: State,
    failed: bool,
    linktype: Option<u32>,
}

impl<R> std::fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("offset", &self.src.offset)
            .field("failed", &self.failed)
            .field("linktype", &self.linktype)
            .finish_non_exhaustive()
    }
}

impl<R: Read> CaptureReader<R> {
    /// Detects the format from the first bytes and reads the file header (pcap) or
    /// leaves the first Section Header Block to the first read (pcapng).
    pub fn new(mut reader: R) -> Result<Self, CaptureError> {
        let header_err = |kind| CaptureError { record: None, offset: 0, kind };
        let mut magic = [0u8; 4];
        let got =
            read_full(&mut reader, &mut magic).map_err(|e| header_err(CaptureErrorKind::Io(e)))?;
        if got < 4 {
            return Err(header_err(CaptureErrorKind::Truncated {
                needed: 4,
                available: got as u64,
            }));
        }
        let mut src = Source { inner: io::Cursor::new(magic).chain(reader), offset: 0 };
        let le = u32::from_le_bytes(magic);
        let be = u32::from_be_bytes(magic);
        let state = if le == PCAPNG_SHB {
            State::Pcapng(NgState::new())
        } else if [PCAP_MAGIC_US, PCAP_MAGIC_NS].contains(&le)
            || [PCAP_MAGIC_US, PCAP_MAGIC_NS].contains(&be)
        {
            State::Pcap(PcapState::read_header(&mut src)?)
        } else {
            return Err(header_err(CaptureErrorKind::BadMagic { magic: be }));
        };
        let linktype = match &state {
            State::Pcap(p) => Some(p.linktype()),
            State::Pcapng(_) => None,
        };
        Ok(CaptureReader { src, state, failed: false, linktype })
    }

    /// The format detected from the magic.
    pub fn format(&self) -> CaptureFormat {
        match &self.state {
            State::Pcap(p) => p.format(),
            State::Pcapng(_) => CaptureFormat::Pcapng,
        }
    }

    /// Link type of the packet last read; for classic pcap known from the header on.
    pub fn linktype(&self) -> Option<u32> {
        self.linktype
    }

    /// Reads the next packet into `packet`, reusing its buffer: no allocation once the
    /// buffer has grown to the largest packet. Returns `Ok(false)` at the clean end of
    /// the input.
    pub fn read_next(&mut self, packet: &mut Packet) -> Result<bool, CaptureError> {
        Ok(self.next_located(packet)?.is_some())
    }

    /// Like [`read_next`](Self::read_next), also returning the record index and offset
    /// of the packet read.
    fn next_located(&mut self, packet: &mut Packet) -> Result<Option<(u64, u64)>, CaptureError> {
        if self.failed {
            return Ok(None);
        }
        let result = match &mut self.state {
            State::Pcap(p) => p.next(&mut self.src, packet),
            State::Pcapng(n) => n.next(&mut self.src, packet),
        };
        match result {
            Ok(Some(rec)) => {
                self.linktype = Some(rec.linktype);
                Ok(Some((rec.record, rec.offset)))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }
}

/// Yields each packet in a vector of its own; [`CaptureReader::read_next`] reuses one.
impl<R: Read> Iterator for CaptureReader<R> {
    type Item = Result<Packet, CaptureError>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut packet = Packet::default();
        match self.read_next(&mut packet) {
            Ok(true) => Some(Ok(packet)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// Where a format module found a packet, and its link type.
pub(crate) struct Located {
    pub(crate) record: u64,
    pub(crate) offset: u64,
    pub(crate) linktype: u32,
}

/// Reads a whole pcap or pcapng capture (detected from its magic) into memory.
///
/// All packets must share one link type; a pcapng file mixing interfaces of different
/// link types fails with [`CaptureErrorKind::MixedLinktypes`] (use [`CaptureReader`] for such
/// files).
pub fn read_capture(bytes: &[u8]) -> Result<Capture, CaptureError> {
    let mut reader = CaptureReader::new(bytes)?;
    let mut packets = Vec::new();
    let mut first: Option<u32> = None;
    loop {
        let mut packet = Packet::default();
        let Some((record, offset)) = reader.next_located(&mut packet)? else { break };
        let found = reader.linktype.unwrap_or(LINKTYPE_ETHERNET);
        match first {
            None => first = Some(found),
            Some(first) if first != found => {
                return Err(CaptureError {
                    record: Some(record),
                    offset,
                    kind: CaptureErrorKind::MixedLinktypes { first, found },
                })
            }
            Some(_) => {}
        }
        packets.push(packet);
    }
    let linktype = match (&reader.state, first) {
        (_, Some(lt)) => lt,
        (State::Pcap(p), None) => p.linktype(),
        (State::Pcapng(n), None) => n.first_linktype().unwrap_or(LINKTYPE_ETHERNET),
    };
    Ok(Capture { linktype, packets })
}
