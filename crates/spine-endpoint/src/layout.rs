//! Where everything lies in an endpoint's shared region. The adapter keeps its own
//! [`Layout`] and never reads it back from shared memory; the client reads the header
//! once at open and checks it against the region's size.

use crate::EndpointError;

/// "SPEP" little-endian: the first word of every endpoint region.
pub(crate) const MAGIC: u32 = 0x5045_5053;
pub(crate) const VERSION: u32 = 1;
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

    pub(crate) fn ring_bytes(&self) -> usize {
        (ENTRIES_OFF + self.ring_entries as usize * ENTRY_BYTES).next_multiple_of(64)
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
}
