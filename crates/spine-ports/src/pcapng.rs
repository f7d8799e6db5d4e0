//! pcapng files (draft-ietf-opsawg-pcapng): sections in either byte order, Interface
//! Description Blocks with `if_tsresol`/`if_tsoffset`, Enhanced, Simple and obsolete
//! Packet Blocks. Every other block is skipped unread, its trailer still checked.

use std::io::Read;

use crate::capture::{
    CaptureError, CaptureErrorKind, Located, Packet, Source, MAX_PACKET_LEN, PCAPNG_SHB,
};

const BYTE_ORDER_MAGIC: u32 = 0x1a2b_3c4d;

const BT_IDB: u32 = 0x0000_0001;
const BT_PB: u32 = 0x0000_0002;
const BT_SPB: u32 = 0x0000_0003;
const BT_EPB: u32 = 0x0000_0006;

const OPT_ENDOFOPT: u16 = 0;
const IF_TSRESOL: u16 = 9;
const IF_TSOFFSET: u16 = 14;

/// Smallest block: type, length, trailer.
const MIN_BLOCK_LEN: u32 = 12;
/// Smallest Section Header Block: the above plus magic, version and section length.
const MIN_SHB_LEN: u32 = 28;
/// Largest block this reader buffers: a maximal packet plus generous room for options.
/// Blocks it skips may be longer; they are never buffered.
pub(crate) const MAX_BLOCK_LEN: u32 = MAX_PACKET_LEN + 64 * 1024;

#[derive(Clone, Copy)]
struct Interface {
    linktype: u32,
    snaplen: u32,
    tsresol: u8,
    tsoffset_s: i64,
}

/// Reading position and the current section's interfaces.
pub(crate) struct NgState {
    big_endian: bool,
    interfaces: Vec<Interface>,
    next_block: u64,
    first_linktype: Option<u32>,
    body: Vec<u8>,
}

impl NgState {
    pub(crate) fn new() -> Self {
        NgState {
            big_endian: false,
            interfaces: Vec::new(),
            next_block: 0,
            first_linktype: None,
            body: Vec::new(),
        }
    }

    /// Link type of the first interface described in the file, if any.
    pub(crate) fn first_linktype(&self) -> Option<u32> {
        self.first_linktype
    }

    fn u16_at(&self, b: &[u8], o: usize) -> u16 {
        let v = [b[o], b[o + 1]];
        if self.big_endian {
            u16::from_be_bytes(v)
        } else {
            u16::from_le_bytes(v)
        }
    }

    fn u32_at(&self, b: &[u8], o: usize) -> u32 {
        let v = [b[o], b[o + 1], b[o + 2], b[o + 3]];
        if self.big_endian {
            u32::from_be_bytes(v)
        } else {
            u32::from_le_bytes(v)
        }
    }

    /// Reads blocks until one carries a packet; `Ok(None)` at a clean end of input.
    pub(crate) fn next<R: Read>(
        &mut self,
        src: &mut Source<R>,
        packet: &mut Packet,
    ) -> Result<Option<Located>, CaptureError> {
        loop {
            let record = self.next_block;
            let offset = src.offset();
            let located = |kind| CaptureError { record: Some(record), offset, kind };
            match self.block(src, packet) {
                Ok(Block::End) => return Ok(None),
                Ok(Block::Other) => self.next_block += 1,
                Ok(Block::Packet(linktype)) => {
                    self.next_block += 1;
                    return Ok(Some(Located { record, offset, linktype }));
                }
                Err(kind) => return Err(located(kind)),
            }
        }
    }

    /// Reads one block. Errors are located by the caller at the block's start.
    fn block<R: Read>(
        &mut self,
        src: &mut Source<R>,
        packet: &mut Packet,
    ) -> Result<Block, CaptureErrorKind> {
        let mut head = [0u8; 8];
        let got = read(src, &mut head)?;
        if got == 0 {
            return Ok(Block::End);
        }
        if got < head.len() {
            return Err(CaptureErrorKind::Truncated { needed: 8, available: got as u64 });
        }
        // The SHB type reads the same in both byte orders; its byte-order magic, not
        // the previous section, says how to read its length.
        let raw_type = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        if raw_type == PCAPNG_SHB {
            let mut bom = [0u8; 4];
            let got = read(src, &mut bom)?;
            if got < bom.len() {
                return Err(CaptureErrorKind::Truncated { needed: 12, available: 8 + got as u64 });
            }
            self.big_endian = match u32::from_le_bytes(bom) {
                BYTE_ORDER_MAGIC => false,
                m if m.swap_bytes() == BYTE_ORDER_MAGIC => true,
                _ => return Err(CaptureErrorKind::BadMagic { magic: u32::from_be_bytes(bom) }),
            };
            let len = self.u32_at(&head, 4);
            check_len(len, MIN_SHB_LEN)?;
            self.read_body(src, len, 12)?;
            let (major, minor) = (self.u16_at(&self.body, 0), self.u16_at(&self.body, 2));
            if major != 1 {
                return Err(CaptureErrorKind::UnsupportedVersion { major, minor });
            }
            // Options follow the version and the 64-bit section length.
            let opts = std::mem::take(&mut self.body);
            let result = self.options(&opts[12..], |_, _| Ok(()));
            self.body = opts;
            result?;
            self.interfaces.clear();
            return Ok(Block::Other);
        }
        let btype = self.u32_at(&head, 0);
        let len = self.u32_at(&head, 4);
        check_len(len, MIN_BLOCK_LEN)?;
        if !matches!(btype, BT_IDB | BT_PB | BT_SPB | BT_EPB) {
            let body = u64::from(len - MIN_BLOCK_LEN);
            let skipped = src.skip(body).map_err(CaptureErrorKind::Io)?;
            if skipped < body {
                return Err(CaptureErrorKind::Truncated {
                    needed: u64::from(len),
                    available: 8 + skipped,
                });
            }
            let mut trailer = [0u8; 4];
            let got = read(src, &mut trailer)?;
            if got < trailer.len() {
                return Err(CaptureErrorKind::Truncated {
                    needed: u64::from(len),
                    available: 8 + skipped + got as u64,
                });
            }
            let trailer = self.u32_at(&trailer, 0);
            if trailer != len {
                return Err(CaptureErrorKind::LengthMismatch { header: len, trailer });
            }
            return Ok(Block::Other);
        }
        self.read_body(src, len, 8)?;
        let body = std::mem::take(&mut self.body);
        let result = match btype {
            BT_IDB => self.interface(&body).map(|()| Block::Other),
            BT_SPB => self.simple_packet(&body, packet),
            _ => self.enhanced_packet(&body, btype == BT_PB, packet),
        };
        self.body = body;
        result
    }

    /// Reads the rest of a `len`-byte block of which `consumed` bytes are read, checks
    /// the trailer, and leaves the body without the trailer in `self.body`.
    fn read_body<R: Read>(
        &mut self,
        src: &mut Source<R>,
        len: u32,
        consumed: u32,
    ) -> Result<(), CaptureErrorKind> {
        if len > MAX_BLOCK_LEN {
            return Err(CaptureErrorKind::TooLarge {
                len: u64::from(len),
                max: u64::from(MAX_BLOCK_LEN),
            });
        }
        let rest = (len - consumed) as usize;
        self.body.clear();
        self.body.resize(rest, 0);
        let got = read(src, &mut self.body)?;
        if got < rest {
            return Err(CaptureErrorKind::Truncated {
                needed: u64::from(len),
                available: u64::from(consumed) + got as u64,
            });
        }
        let trailer = self.u32_at(&self.body, rest - 4);
        if trailer != len {
            return Err(CaptureErrorKind::LengthMismatch { header: len, trailer });
        }
        self.body.truncate(rest - 4);
        Ok(())
    }

    fn interface(&mut self, body: &[u8]) -> Result<(), CaptureErrorKind> {
        if body.len() < 8 {
            return Err(CaptureErrorKind::BadBlockLength { len: body.len() as u32 + 12, min: 20 });
        }
        let mut iface = Interface {
            linktype: u32::from(self.u16_at(body, 0)),
            snaplen: self.u32_at(body, 4),
            tsresol: 6,
            tsoffset_s: 0,
        };
        let big_endian = self.big_endian;
        self.options(&body[8..], |code, value| {
            match code {
                IF_TSRESOL => match value {
                    [r] => iface.tsresol = *r,
                    _ => return Err(()),
                },
                IF_TSOFFSET => {
                    let v: [u8; 8] = value.try_into().map_err(|_| ())?;
                    iface.tsoffset_s =
                        if big_endian { i64::from_be_bytes(v) } else { i64::from_le_bytes(v) };
                }
                _ => {}
            }
            Ok(())
        })?;
        self.first_linktype.get_or_insert(iface.linktype);
        self.interfaces.push(iface);
        Ok(())
    }

    fn interface_for(&self, id: u32) -> Result<Interface, CaptureErrorKind> {
        self.interfaces.get(id as usize).copied().ok_or(CaptureErrorKind::UnknownInterface {
            interface: id,
            known: self.interfaces.len() as u32,
        })
    }

    /// Enhanced Packet Block, or with `obsolete` the old Packet Block whose 16-bit
    /// interface id is followed by a 16-bit drop count.
    fn enhanced_packet(
        &self,
        body: &[u8],
        obsolete: bool,
        packet: &mut Packet,
    ) -> Result<Block, CaptureErrorKind> {
        const FIXED: usize = 20;
        if body.len() < FIXED {
            return Err(CaptureErrorKind::BadBlockLength { len: body.len() as u32 + 12, min: 32 });
        }
        let id = if obsolete { u32::from(self.u16_at(body, 0)) } else { self.u32_at(body, 0) };
        let iface = self.interface_for(id)?;
        let ts = (u64::from(self.u32_at(body, 4)) << 32) | u64::from(self.u32_at(body, 8));
        let captured = self.u32_at(body, 12);
        let orig_len = self.u32_at(body, 16);
        if captured > MAX_PACKET_LEN {
            return Err(CaptureErrorKind::TooLarge {
                len: u64::from(captured),
                max: u64::from(MAX_PACKET_LEN),
            });
        }
        let room = body.len() - FIXED;
        if captured as usize > room {
            return Err(CaptureErrorKind::BadCapturedLength { captured, room: room as u32 });
        }
        packet.data.clear();
        packet.data.extend_from_slice(&body[FIXED..FIXED + captured as usize]);
        packet.orig_len = orig_len;
        packet.ts_ns = ts_to_ns(ts, iface.tsresol, iface.tsoffset_s);
        Ok(Block::Packet(iface.linktype))
    }

    /// Simple Packet Block: interface 0, no timestamp; the captured length is the
    /// original length cut to the interface's snap length, and the block must hold it
    /// (libpcap and Wireshark insist too).
    fn simple_packet(&self, body: &[u8], packet: &mut Packet) -> Result<Block, CaptureErrorKind> {
        if body.len() < 4 {
            return Err(CaptureErrorKind::BadBlockLength { len: body.len() as u32 + 12, min: 16 });
        }
        let iface = self.interface_for(0)?;
        let orig_len = self.u32_at(body, 0);
        let mut captured = orig_len;
        if iface.snaplen != 0 {
            captured = captured.min(iface.snaplen);
        }
        let room = body.len() - 4;
        if captured > MAX_PACKET_LEN {
            return Err(CaptureErrorKind::TooLarge {
                len: u64::from(captured),
                max: u64::from(MAX_PACKET_LEN),
            });
        }
        if captured as usize > room {
            return Err(CaptureErrorKind::BadCapturedLength { captured, room: room as u32 });
        }
        packet.data.clear();
        packet.data.extend_from_slice(&body[4..4 + captured as usize]);
        packet.orig_len = orig_len;
        packet.ts_ns = 0;
        Ok(Block::Packet(iface.linktype))
    }

    /// Walks an option list, bounds-checking every option against `opts`, and hands
    /// each (code, value) to `f`, which rejects a malformed value with `Err(())`.
    fn options(
        &self,
        opts: &[u8],
        mut f: impl FnMut(u16, &[u8]) -> Result<(), ()>,
    ) -> Result<(), CaptureErrorKind> {
        let mut at = 0;
        while opts.len() - at >= 4 {
            let code = self.u16_at(opts, at);
            let len = self.u16_at(opts, at + 2);
            if code == OPT_ENDOFOPT {
                break;
            }
            let start = at + 4;
            let end = start + usize::from(len);
            if end > opts.len() {
                return Err(CaptureErrorKind::BadOption { code, len });
            }
            f(code, &opts[start..end]).map_err(|()| CaptureErrorKind::BadOption { code, len })?;
            // Values are padded to 32 bits; the last option's padding may be absent.
            at = ((end + 3) & !3).min(opts.len());
        }
        Ok(())
    }
}

enum Block {
    End,
    Other,
    Packet(u32),
}

fn read<R: Read>(src: &mut Source<R>, buf: &mut [u8]) -> Result<usize, CaptureErrorKind> {
    src.read_full(buf).map_err(CaptureErrorKind::Io)
}

fn check_len(len: u32, min: u32) -> Result<(), CaptureErrorKind> {
    if len < min || !len.is_multiple_of(4) {
        return Err(CaptureErrorKind::BadBlockLength { len, min });
    }
    Ok(())
}

/// Converts a timestamp in units of `if_tsresol` plus `if_tsoffset` seconds to
/// nanoseconds since the epoch, saturating at the ends of `u64` rather than failing:
/// a strange clock does not make the packet unreadable.
fn ts_to_ns(ts: u64, tsresol: u8, offset_s: i64) -> u64 {
    let exp = u32::from(tsresol & 0x7f);
    let ns: u128 = if tsresol & 0x80 == 0 {
        if exp <= 9 {
            u128::from(ts) * 10u128.pow(9 - exp)
        } else {
            10u128.checked_pow(exp - 9).map_or(0, |d| u128::from(ts) / d)
        }
    } else {
        // exp <= 127, so the shift is in range.
        (u128::from(ts) * 1_000_000_000) >> exp
    };
    let total = ns as i128 + i128::from(offset_s) * 1_000_000_000;
    total.clamp(0, i128::from(u64::MAX)) as u64
}

#[cfg(test)]
mod tests {
    use super::ts_to_ns;

    #[test]
    fn timestamp_resolutions() {
        assert_eq!(ts_to_ns(1_500_000, 6, 0), 1_500_000_000);
        assert_eq!(ts_to_ns(7, 9, 0), 7);
        assert_eq!(ts_to_ns(12_345, 12, 0), 12);
        assert_eq!(ts_to_ns(3, 0, 0), 3_000_000_000);
        // 2^-10 s units: 1024 units are one second.
        assert_eq!(ts_to_ns(1024, 0x80 | 10, 0), 1_000_000_000);
        assert_eq!(ts_to_ns(u64::MAX, 0x80 | 127, 0), 0);
        assert_eq!(ts_to_ns(u64::MAX, 127, 0), 0);
        assert_eq!(ts_to_ns(u64::MAX, 0, 0), u64::MAX);
        assert_eq!(ts_to_ns(5_000_000, 6, -2), 3_000_000_000);
        assert_eq!(ts_to_ns(1, 6, -2), 0);
    }
}
