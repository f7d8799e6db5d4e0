//! The transmit/receive descriptor, in the AF_XDP `xdp_desc` layout.

/// One message: `len` bytes at byte `addr` of the buffer area. 16 bytes, as `xdp_desc`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Desc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}
