//! A packet inside its buffer, laid out as the kernel lays out an XDP frame: headroom
//! before the packet (for `xdp_adjust_head`/`meta`), the packet, free space, and a tail
//! reserve. The geometry decides where those helpers succeed and fail, so spine and the
//! kernel agree on every boundary.

use spine_abi::xdp_frame;

/// Sizes that bound where `data_meta`, `data` and `data_end` may move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes in the whole buffer (the kernel's `frame_sz`).
    pub size: usize,
    /// Where `data` starts in a fresh frame.
    pub headroom: usize,
    /// Bytes at the start of the buffer that the packet never reaches (the kernel keeps its
    /// `struct xdp_frame` there).
    pub reserved: usize,
    /// Bytes at the end of the buffer that the packet never reaches (`skb_shared_info`).
    pub tailroom: usize,
}

impl Geometry {
    /// The frame `BPF_PROG_TEST_RUN` builds: one 4 KiB page, 256 bytes of headroom, the
    /// x86-64 `skb_shared_info` reserve at the end.
    pub const TEST_RUN: Geometry = Geometry {
        size: 4096,
        headroom: xdp_frame::HEADROOM,
        reserved: xdp_frame::FRAME_STRUCT,
        tailroom: xdp_frame::TAILROOM,
    };

    /// A spine pool buffer (`spine_pool`): `size` bytes with `headroom` before the packet
    /// and no reserve at either end (spine keeps no kernel structures in its buffers),
    /// so a packet may grow to the buffer's end, as an AF_XDP frame may.
    pub const fn pool(size: usize, headroom: usize) -> Geometry {
        Geometry { size, headroom, reserved: 0, tailroom: 0 }
    }

    /// Whether `b` describes a packet this geometry allows in a buffer of `len` bytes.
    pub fn holds(&self, b: &Bounds, len: usize) -> bool {
        len == self.size
            && self.reserved <= b.meta
            && b.meta <= b.data
            && b.data <= b.end
            && b.end <= self.hard_end()
    }

    /// Largest packet a fresh frame holds.
    pub const fn max_packet(&self) -> usize {
        self.size - self.headroom - self.tailroom
    }

    /// Offset past which `data_end` may not grow.
    pub const fn hard_end(&self) -> usize {
        self.size - self.tailroom
    }
}

/// Why a packet does not fit a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("packet of {len} bytes is shorter than an Ethernet header (14 bytes)")]
    TooShort { len: usize },
    #[error("packet of {len} bytes exceeds the frame's {max} bytes")]
    TooLong { len: usize, max: usize },
}

/// Shortest packet an XDP frame may hold (`ETH_HLEN`); `xdp_adjust_head/tail` keep it.
pub const ETH_HLEN: usize = 14;

/// Where a packet lies in its buffer: the metadata `[meta, data)`, the packet
/// `[data, end)`. A geometry's invariant: `reserved <= meta <= data <= end <= hard_end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bounds {
    pub meta: usize,
    pub data: usize,
    pub end: usize,
}

/// A packet in an owned, zero-initialised buffer (tests, replays, the kernel-shaped test
/// run); the adapter runs extensions on pool buffers through `XdpRunner::run_raw` instead.
#[derive(Debug, Clone)]
pub struct Frame {
    buf: Box<[u8]>,
    geometry: Geometry,
    bounds: Bounds,
}

impl Frame {
    /// An empty frame (no packet yet) of the given geometry.
    pub fn new(geometry: Geometry) -> Self {
        let h = geometry.headroom;
        Frame {
            buf: vec![0u8; geometry.size].into_boxed_slice(),
            geometry,
            bounds: Bounds { meta: h, data: h, end: h },
        }
    }

    /// Places `packet` at the headroom, as a driver (or the kernel's test run) does.
    /// The rest of the buffer is zeroed so nothing from an earlier packet shows through.
    pub fn load(&mut self, packet: &[u8]) -> Result<(), FrameError> {
        if packet.len() < ETH_HLEN {
            return Err(FrameError::TooShort { len: packet.len() });
        }
        self.load_message(packet)
    }

    /// Places an active message's payload (any length the frame holds, no Ethernet
    /// header needed) at the headroom, for [`crate::XdpRunner::run_message`].
    pub fn load_message(&mut self, packet: &[u8]) -> Result<(), FrameError> {
        let g = self.geometry;
        if packet.len() > g.max_packet() {
            return Err(FrameError::TooLong { len: packet.len(), max: g.max_packet() });
        }
        self.buf.fill(0);
        self.bounds = Bounds { meta: g.headroom, data: g.headroom, end: g.headroom + packet.len() };
        self.bytes_mut()[g.headroom..g.headroom + packet.len()].copy_from_slice(packet);
        Ok(())
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The packet: `[data, data_end)`.
    pub fn packet(&self) -> &[u8] {
        &self.bytes()[self.bounds.data..self.bounds.end]
    }

    /// The metadata area in front of the packet: `[data_meta, data)`.
    pub fn meta(&self) -> &[u8] {
        &self.bytes()[self.bounds.meta..self.bounds.data]
    }

    /// Metadata followed by the packet: what `BPF_PROG_TEST_RUN` copies out.
    pub fn meta_and_packet(&self) -> &[u8] {
        &self.bytes()[self.bounds.meta..self.bounds.end]
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// The buffer and the packet's place in it, for `XdpRunner::run_raw` to update in
    /// place (copying the bounds out and back costs a store-forwarding stall per run).
    pub(crate) fn parts(&mut self) -> (&mut [u8], Geometry, &mut Bounds) {
        (&mut self.buf, self.geometry, &mut self.bounds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_places_packet_at_headroom_and_clears_the_rest() {
        let mut f = Frame::new(Geometry::TEST_RUN);
        f.load(&[0xaa; 100]).unwrap();
        f.load(&[1; 20]).unwrap();
        assert_eq!(f.packet(), &[1; 20]);
        assert!(f.meta().is_empty());
        assert!(f.bytes()[256 + 20..].iter().all(|&b| b == 0), "old bytes must not show through");
        assert_eq!(f.bytes().len(), 4096);
    }

    #[test]
    fn pool_geometry_lets_packets_grow_to_the_buffer_end() {
        let g = Geometry::pool(2048, 256);
        assert_eq!(g.max_packet(), 1792);
        assert!(g.holds(&Bounds { meta: 0, data: 0, end: 2048 }, 2048));
        assert!(!g.holds(&Bounds { meta: 0, data: 0, end: 2049 }, 2048));
        assert!(!g.holds(&Bounds { meta: 10, data: 5, end: 20 }, 2048));
        assert!(!g.holds(&Bounds { meta: 0, data: 0, end: 20 }, 4096), "buffer of another size");
    }

    #[test]
    fn load_refuses_what_the_kernel_refuses() {
        let mut f = Frame::new(Geometry::TEST_RUN);
        assert_eq!(f.load(&[0; 13]), Err(FrameError::TooShort { len: 13 }));
        assert_eq!(Geometry::TEST_RUN.max_packet(), 3520);
        assert_eq!(f.load(&[0; 3521]), Err(FrameError::TooLong { len: 3521, max: 3520 }));
        assert!(f.load(&[0; 3520]).is_ok());
    }
}
