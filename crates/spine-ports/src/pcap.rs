//! Classic libpcap files: reading either byte order with microsecond or nanosecond
//! timestamps, and writing the nanosecond little-endian variant.

use std::io::{self, Read, Write};

use crate::capture::{
    CaptureError, CaptureErrorKind, CaptureFormat, Located, Packet, Source, MAX_PACKET_LEN,
    PCAP_MAGIC_NS, PCAP_MAGIC_US,
};

const FILE_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 16;

/// Snap length a [`PcapWriter`] records when given 0: tcpdump's `-s 0` default.
pub const DEFAULT_SNAPLEN: u32 = 262_144;

/// Reading position and parameters of a classic pcap stream after its file header.
pub(crate) struct PcapState {
    big_endian: bool,
    nanos: bool,
    snaplen: u32,
    linktype: u32,
    record: u64,
}

impl PcapState {
    /// Reads and checks the 24-byte file header; the magic has been recognised already.
    pub(crate) fn read_header<R: Read>(src: &mut Source<R>) -> Result<Self, CaptureError> {
        let err = |kind| CaptureError { record: None, offset: 0, kind };
        let mut h = [0u8; FILE_HEADER_LEN];
        let got = src.read_full(&mut h).map_err(|e| err(CaptureErrorKind::Io(e)))?;
        if got < FILE_HEADER_LEN {
            return Err(err(CaptureErrorKind::Truncated {
                needed: FILE_HEADER_LEN as u64,
                available: got as u64,
            }));
        }
        let magic_le = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let big_endian = !(magic_le == PCAP_MAGIC_US || magic_le == PCAP_MAGIC_NS);
        let u16_at = |o: usize| {
            let b = [h[o], h[o + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |o: usize| {
            let b = [h[o], h[o + 1], h[o + 2], h[o + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let nanos = u32_at(0) == PCAP_MAGIC_NS;
        let (major, minor) = (u16_at(4), u16_at(6));
        if major != 2 {
            return Err(err(CaptureErrorKind::UnsupportedVersion { major, minor }));
        }
        // The upper bits of the link type field carry FCS information, not the type.
        let linktype = u32_at(20) & 0xffff;
        Ok(PcapState { big_endian, nanos, snaplen: u32_at(16), linktype, record: 0 })
    }

    pub(crate) fn linktype(&self) -> u32 {
        self.linktype
    }

    pub(crate) fn format(&self) -> CaptureFormat {
        CaptureFormat::Pcap {
            nanos: self.nanos,
            big_endian: self.big_endian,
            snaplen: self.snaplen,
        }
    }

    /// Reads the next record into `packet`; `Ok(None)` at a clean end of input.
    pub(crate) fn next<R: Read>(
        &mut self,
        src: &mut Source<R>,
        packet: &mut Packet,
    ) -> Result<Option<Located>, CaptureError> {
        let record = self.record;
        let offset = src.offset();
        let err = |kind| CaptureError { record: Some(record), offset, kind };
        let mut h = [0u8; RECORD_HEADER_LEN];
        let got = src.read_full(&mut h).map_err(|e| err(CaptureErrorKind::Io(e)))?;
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_HEADER_LEN {
            return Err(err(CaptureErrorKind::Truncated {
                needed: RECORD_HEADER_LEN as u64,
                available: got as u64,
            }));
        }
        let word = |i: usize| {
            let b = [h[4 * i], h[4 * i + 1], h[4 * i + 2], h[4 * i + 3]];
            if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (sec, frac, incl_len, orig_len) = (word(0), word(1), word(2), word(3));
        if incl_len > MAX_PACKET_LEN {
            return Err(err(CaptureErrorKind::TooLarge {
                len: u64::from(incl_len),
                max: u64::from(MAX_PACKET_LEN),
            }));
        }
        packet.data.clear();
        packet.data.resize(incl_len as usize, 0);
        let got = src.read_full(&mut packet.data).map_err(|e| err(CaptureErrorKind::Io(e)))?;
        if got < incl_len as usize {
            return Err(err(CaptureErrorKind::Truncated {
                needed: (RECORD_HEADER_LEN as u64) + u64::from(incl_len),
                available: (RECORD_HEADER_LEN + got) as u64,
            }));
        }
        let frac_ns = if self.nanos { u64::from(frac) } else { u64::from(frac) * 1000 };
        // u32::MAX seconds plus any 32-bit fraction still fits in u64 nanoseconds.
        packet.ts_ns = u64::from(sec) * 1_000_000_000 + frac_ns;
        packet.orig_len = orig_len;
        self.record += 1;
        Ok(Some(Located { record, offset, linktype: self.linktype }))
    }
}

/// Writes a classic pcap file with nanosecond timestamps (magic `0xa1b23c4d`,
/// little-endian), which Wireshark and tcpdump read.
///
/// Packets longer than the snap length are stored truncated with their original
/// length, as a capturing tool would. Writes go straight to `W`: wrap files in a
/// `BufWriter`.
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
    written: u64,
}

impl<W: Write> std::fmt::Debug for PcapWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapWriter")
            .field("snaplen", &self.snaplen)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the file header. A `snaplen` of 0 means [`DEFAULT_SNAPLEN`].
    pub fn new(mut out: W, linktype: u32, snaplen: u32) -> io::Result<Self> {
        let snaplen = if snaplen == 0 { DEFAULT_SNAPLEN } else { snaplen };
        let mut h = [0u8; FILE_HEADER_LEN];
        h[0..4].copy_from_slice(&PCAP_MAGIC_NS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0, as every modern writer leaves them.
        h[16..20].copy_from_slice(&snaplen.to_le_bytes());
        h[20..24].copy_from_slice(&linktype.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, snaplen, written: 0 })
    }

    /// An Ethernet capture with the default snap length.
    pub fn ethernet(out: W) -> io::Result<Self> {
        Self::new(out, crate::LINKTYPE_ETHERNET, DEFAULT_SNAPLEN)
    }

    /// Appends one packet captured at `ts_ns` (nanoseconds since the epoch).
    pub fn write(&mut self, ts_ns: u64, data: &[u8]) -> io::Result<()> {
        let orig_len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        self.write_with_orig_len(ts_ns, data, orig_len)
    }

    /// Appends a packet read from another capture, keeping its original length.
    pub fn write_packet(&mut self, packet: &Packet) -> io::Result<()> {
        self.write_with_orig_len(packet.ts_ns, &packet.data, packet.orig_len)
    }

    fn write_with_orig_len(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let sec = u32::try_from(ts_ns / 1_000_000_000).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, "timestamp beyond the year 2106")
        })?;
        let nsec = (ts_ns % 1_000_000_000) as u32;
        let incl = data.len().min(self.snaplen as usize);
        let mut h = [0u8; RECORD_HEADER_LEN];
        h[0..4].copy_from_slice(&sec.to_le_bytes());
        h[4..8].copy_from_slice(&nsec.to_le_bytes());
        h[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.max(incl as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&data[..incl])?;
        self.written += 1;
        Ok(())
    }

    /// Packets written so far.
    pub fn count(&self) -> u64 {
        self.written
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
