//! The transmit/receive descriptor, in the AF_XDP `xdp_desc` layout.

/// One message: `len` bytes at byte `addr` of the buffer area. 16 bytes, as `xdp_desc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

impl Desc {
    /// Option bit: the payload is in the entry's inline slot, not in a frame (see
    /// [`crate::INLINE_BYTES`]). No other option bit is defined; any other is refused.
    pub const INLINE: u32 = 1;

    /// The descriptor's second word as stored in a ring: `len`, then `options`.
    pub(crate) fn word(&self) -> u64 {
        u64::from(self.len) | u64::from(self.options) << 32
    }

    pub(crate) fn from_words(addr: u64, word: u64) -> Self {
        Desc { addr, len: word as u32, options: (word >> 32) as u32 }
    }
}
