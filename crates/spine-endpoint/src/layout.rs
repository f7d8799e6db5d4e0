//! Where everything lies in an endpoint's shared region. The adapter keeps its own
//! [`Layout`] and never reads it back from shared memory; the client reads the header
//! once at open and checks it against the region's size.

use crate::{Desc, EndpointError};

/// Where a checked descriptor's bytes are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload {
    /// In the buffer area, from this byte offset of the area.
    Frame(usize),
    /// In the inline slot of the descriptor's ring entry.
    Inline,
}

/// "SPEP" little-endian: the first word of every endpoint region.
pub(crate) const MAGIC: u32 = 0x5045_5053;
/// 2: descriptor rings carry an inline slot per entry (small messages in the ring).
pub(crate) const VERSION: u32 = 2;
/// Header words: magic, version, ring entries, frame size, frames.
pub(crate) const HEADER_BYTES: usize = 4096;
/// Producer at 0, consumer at 64: each index on its own cache line, as AF_XDP.
pub(crate) const PRODUCER_OFF: usize = 0;
pub(crate) const CONSUMER_OFF: usize = 64;
pub(crate) const ENTRIES_OFF: usize = 128;
/// Descriptor rings (transmit, receive) hold 16-byte entries; address rings (fill,
/// completion) 8-byte ones. All four get a descriptor ring's space, so ring offsets
/// depend only on the entry count.
pub(crate) const ENTRY_BYTES: usize = 16;
/// Bytes of payload a descriptor can carry inline: each entry of a descriptor ring has
/// its own 64-byte slot (one cache line), in an array after the entries (64-byte
/// aligned), at the same index as its entry. A descriptor with [`crate::Desc::INLINE`]
/// set has its `len` bytes there, `addr` 0, and uses no frame.
pub const INLINE_BYTES: usize = 64;

/// The four rings, in region order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RingId {
    Tx = 0,
    Rx = 1,
    Fill = 2,
    Completion = 3,
}

/// The geometry of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Entries per ring, a power of two.
    pub ring_entries: u32,
    /// Bytes per frame of the buffer area, a power of two of at least 64.
    pub frame_size: u32,
    /// Frames in the buffer area.
    pub frames: u32,
}

impl Layout {
    /// Checks the geometry: power-of-two rings (index arithmetic masks) and frames
    /// (address checks mask), and a region under 4 GiB.
    pub fn new(ring_entries: u32, frame_size: u32, frames: u32) -> Result<Self, EndpointError> {
        if !ring_entries.is_power_of_two() || !(2..=1 << 16).contains(&ring_entries) {
            return Err(EndpointError::Layout("ring entries must be a power of two in 2..=65536"));
        }
        if !frame_size.is_power_of_two() || !(64..=1 << 16).contains(&frame_size) {
            return Err(EndpointError::Layout("frame size must be a power of two in 64..=65536"));
        }
        if frames == 0 || u64::from(frames) * u64::from(frame_size) > 1 << 31 {
            return Err(EndpointError::Layout("frames must be 1 or more, area under 2 GiB"));
        }
        Ok(Layout { ring_entries, frame_size, frames })
    }

    /// Offset of the inline slots within a ring.
    pub(crate) fn inline_off(&self) -> usize {
        (ENTRIES_OFF + self.ring_entries as usize * ENTRY_BYTES).next_multiple_of(64)
    }

    pub(crate) fn ring_bytes(&self) -> usize {
        self.inline_off() + self.ring_entries as usize * INLINE_BYTES
    }

    pub(crate) fn ring_offset(&self, ring: RingId) -> usize {
        HEADER_BYTES + ring as usize * self.ring_bytes()
    }

    /// Where the buffer area starts: page-aligned after the rings.
    pub fn area_offset(&self) -> usize {
        (HEADER_BYTES + 4 * self.ring_bytes()).next_multiple_of(4096)
    }

    pub fn area_bytes(&self) -> usize {
        self.frames as usize * self.frame_size as usize
    }

    /// The whole region.
    pub fn total_bytes(&self) -> usize {
        self.area_offset() + self.area_bytes()
    }

    pub(crate) fn header_words(&self) -> [u32; 5] {
        [MAGIC, VERSION, self.ring_entries, self.frame_size, self.frames]
    }

    pub(crate) fn from_header(words: [u32; 5], region_len: usize) -> Result<Self, EndpointError> {
        if words[0] != MAGIC || words[1] != VERSION {
            return Err(EndpointError::Layout("not an endpoint region (magic or version)"));
        }
        let layout = Layout::new(words[2], words[3], words[4])?;
        if layout.total_bytes() > region_len {
            return Err(EndpointError::TooSmall { have: region_len, need: layout.total_bytes() });
        }
        Ok(layout)
    }

    /// Checks a descriptor the client wrote: it must lie within one frame. Returns the
    /// area offset of its first byte.
    pub fn check_desc(&self, addr: u64, len: u32) -> Option<usize> {
        let frame = u64::from(self.frame_size);
        let start = addr;
        let end = addr.checked_add(u64::from(len))?;
        if start >= self.area_bytes() as u64 || len > self.frame_size {
            return None;
        }
        // Same frame: the last byte's frame is the first byte's frame (len 0 is fine).
        if len > 0 && (end - 1) / frame != start / frame {
            return None;
        }
        Some(start as usize)
    }

    /// Checks a whole descriptor the client wrote: either inline (`options` exactly
    /// [`Desc::INLINE`], `addr` 0, `len` at most [`INLINE_BYTES`]) or in a frame
    /// (`options` 0, and [`Layout::check_desc`]). Any other option bit is refused.
    pub fn check_payload(&self, d: Desc) -> Option<Payload> {
        match d.options {
            0 => self.check_desc(d.addr, d.len).map(Payload::Frame),
            Desc::INLINE if d.addr == 0 && d.len as usize <= INLINE_BYTES => Some(Payload::Inline),
            _ => None,
        }
    }

    /// Checks descriptor `d` as a frame or an active message: a message's options are
    /// [`Desc::MESSAGE`], maybe [`Desc::INLINE`], the handler in bits 8..16 and in bits
    /// 16..32 a source (the receive ring, written by the adapter) or a target
    /// extension (the transmit ring, [`Desc::target`]); its payload at most
    /// [`Desc::MSG_MAX`] bytes, inline or in one frame. Returns the payload's place and,
    /// for a message, its handler and bits 16..32.
    pub fn check_entry(&self, d: Desc) -> Option<(Payload, Option<(u8, u16)>)> {
        if d.options & Desc::MESSAGE == 0 {
            return self.check_payload(d).map(|p| (p, None));
        }
        let flags = d.options & !0xffff_ff00;
        if d.len as usize > Desc::MSG_MAX
            || (flags != Desc::MESSAGE && flags != Desc::MESSAGE | Desc::INLINE)
        {
            return None;
        }
        let plain = Desc { options: flags & Desc::INLINE, ..d };
        self.check_payload(plain).map(|p| (p, d.message()))
    }

    /// Checks a bulk message descriptor from the transmit ring (options exactly
    /// [`Desc::MESSAGE`] | [`Desc::BULK`], a handler in bits 8..16 and a target in bits
    /// 16..32 ([`Desc::target`]); `len` at least 1; `addr..addr + len` within the buffer
    /// area, any frames). Returns its handler.
    pub fn check_bulk(&self, d: Desc) -> Option<u8> {
        if d.options & !0xffff_ff00 != Desc::MESSAGE | Desc::BULK || d.len == 0 {
            return None;
        }
        let end = d.addr.checked_add(u64::from(d.len))?;
        (end <= self.area_bytes() as u64).then_some((d.options >> 8) as u8)
    }

    /// Checks a bulk message descriptor from the receive ring (options exactly
    /// [`Desc::MESSAGE`] | [`Desc::BULK`], the handler in bits 8..16 and the source in
    /// bits 16..32; `len` at least 1; `addr..addr + len` within the area). Returns its
    /// handler and source.
    pub fn check_bulk_rx(&self, d: Desc) -> Option<(u8, u16)> {
        if d.options & !0xffff_ff00 != Desc::MESSAGE | Desc::BULK || d.len == 0 {
            return None;
        }
        if !self.in_area(d.addr, d.len as usize) {
            return None;
        }
        d.message()
    }

    /// Whether `len` bytes at offset `off` lie within the buffer area.
    pub fn in_area(&self, off: u64, len: usize) -> bool {
        off.checked_add(len as u64).is_some_and(|end| end <= self.area_bytes() as u64)
    }

    /// Checks a frame address from the fill ring: in the area, any offset within the
    /// frame (the client picks its headroom). Returns (frame index, room in the frame).
    pub fn check_frame(&self, addr: u64) -> Option<(u32, usize)> {
        if addr >= self.area_bytes() as u64 {
            return None;
        }
        let frame = u64::from(self.frame_size);
        Some(((addr / frame) as u32, (frame - addr % frame) as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_messages_on_the_receive_ring_stay_inside_the_area() {
        let l = Layout::new(8, 2048, 4).unwrap();
        let bulk = |addr: u64, len: u32, options: u32| Desc { addr, len, options };
        let opts = Desc::message_options(false, 13, 0x1234) | Desc::BULK;
        assert_eq!(l.check_bulk_rx(bulk(1000, 3000, opts)), Some((13, 0x1234)), "across frames");
        assert_eq!(l.check_bulk_rx(bulk(4 * 2048 - 1, 1, opts)), Some((13, 0x1234)));
        assert_eq!(l.check_bulk_rx(bulk(4 * 2048 - 1, 2, opts)), None, "past the area");
        assert_eq!(l.check_bulk_rx(bulk(u64::MAX, 2, opts)), None, "wraps");
        assert_eq!(l.check_bulk_rx(bulk(0, 0, opts)), None, "empty");
        assert_eq!(l.check_bulk_rx(bulk(0, 8, opts | Desc::INLINE)), None, "other bits");
        assert_eq!(l.check_bulk_rx(bulk(0, 8, opts & !Desc::MESSAGE)), None, "not a message");
    }

    #[test]
    fn descriptors_stay_in_one_frame() {
        let l = Layout::new(8, 2048, 4).unwrap();
        assert_eq!(l.check_desc(0, 2048), Some(0));
        assert_eq!(l.check_desc(100, 1948), Some(100));
        assert_eq!(l.check_desc(100, 1949), None, "crosses into the next frame");
        assert_eq!(l.check_desc(3 * 2048, 2048), Some(3 * 2048));
        assert_eq!(l.check_desc(4 * 2048, 0), None, "past the area");
        assert_eq!(l.check_desc(u64::MAX, 2), None, "wraps");
        assert_eq!(l.check_frame(2048 + 10), Some((1, 2038)));
        assert_eq!(l.check_frame(8192), None);
    }

    #[test]
    fn header_round_trips_and_rejects_garbage() {
        let l = Layout::new(64, 2048, 128).unwrap();
        assert_eq!(Layout::from_header(l.header_words(), l.total_bytes()).unwrap(), l);
        assert!(Layout::from_header(l.header_words(), l.total_bytes() - 1).is_err());
        assert!(Layout::from_header([MAGIC, VERSION, 3, 2048, 1], 1 << 20).is_err());
        assert!(Layout::from_header([0, VERSION, 8, 2048, 1], 1 << 20).is_err());
        assert!(Layout::new(8, 100, 1).is_err());
    }

    #[test]
    fn message_descriptors_carry_a_handler_and_at_most_240_bytes() {
        let l = Layout::new(8, 2048, 4).unwrap();
        let d = |addr, len, options| Desc { addr, len, options };
        let m = |inline, h| Desc::message_options(inline, h, 0);
        assert_eq!(l.check_entry(d(0, 64, m(true, 7))), Some((Payload::Inline, Some((7, 0)))));
        assert_eq!(
            l.check_entry(d(2048, 240, m(false, 255))),
            Some((Payload::Frame(2048), Some((255, 0))))
        );
        assert_eq!(l.check_entry(d(2048, 241, m(false, 1))), None, "over 240 bytes");
        assert_eq!(l.check_entry(d(0, 65, m(true, 1))), None, "longer than a slot");
        assert_eq!(l.check_entry(d(8192, 10, m(false, 1))), None, "past the area");
        assert_eq!(l.check_entry(d(0, 8, m(true, 1) | 4)), None, "an unknown bit");
        let sourced = Desc::message_options(true, 3, 9);
        assert_eq!(l.check_entry(d(0, 8, sourced)), Some((Payload::Inline, Some((3, 9)))));
        let to = Desc::message_to(true, 3, Some(8)).unwrap();
        assert_eq!(to, sourced, "a client names extension 8 as 9 in bits 16..32");
        assert_eq!(d(0, 8, to).target(), Some(8));
        assert_eq!(d(0, 8, Desc::message_to(true, 3, None).unwrap()).target(), None);
        assert_eq!(Desc::message_to(true, 3, Some(0xffff)), None, "id 0xffff unnamed");
        assert_eq!(l.check_entry(d(0, 8, to)), Some((Payload::Inline, Some((3, 9)))));
        assert_eq!(l.check_entry(d(0, 8, Desc::INLINE)), Some((Payload::Inline, None)));
        assert_eq!(l.check_entry(d(0, 8, Desc::INLINE | 0x100)), None, "a handler needs MESSAGE");
        assert_eq!(
            l.check_payload(d(0, 8, m(true, 1))),
            None,
            "a frame-only reader refuses messages"
        );
    }

    #[test]
    fn inline_descriptors_need_the_flag_alone_addr_zero_and_64_bytes_at_most() {
        let l = Layout::new(8, 2048, 4).unwrap();
        let d = |addr, len, options| Desc { addr, len, options };
        assert_eq!(l.check_payload(d(0, 64, Desc::INLINE)), Some(Payload::Inline));
        assert_eq!(l.check_payload(d(0, 0, Desc::INLINE)), Some(Payload::Inline));
        assert_eq!(l.check_payload(d(0, 65, Desc::INLINE)), None, "longer than a slot");
        assert_eq!(l.check_payload(d(8, 4, Desc::INLINE)), None, "inline with an address");
        assert_eq!(l.check_payload(d(0, 4, Desc::INLINE | 2)), None, "unknown option bit");
        assert_eq!(l.check_payload(d(0, 4, 2)), None, "unknown option bit");
        assert_eq!(l.check_payload(d(2048, 100, 0)), Some(Payload::Frame(2048)));
        // Inline slots: 64-byte aligned, after the entries, inside the ring.
        assert_eq!(l.inline_off() % 64, 0);
        assert!(l.inline_off() >= ENTRIES_OFF + 8 * ENTRY_BYTES);
        assert_eq!(l.ring_bytes(), l.inline_off() + 8 * INLINE_BYTES);
        let tiny = Layout::new(2, 64, 1).unwrap();
        assert_eq!((tiny.inline_off(), tiny.ring_bytes()), (192, 320));
    }
}
