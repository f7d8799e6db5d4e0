//! A packet inside its buffer, laid out as the kernel lays out an XDP frame: headroom
//! before the packet (for `xdp_adjust_head`/`meta`), the packet, free space, and a tail
//! reserve. The geometry decides where those helpers succeed and fail, so spine and the
//! kernel agree on every boundary. A frame made with [`Frame::with_frags`] also takes
//! packets longer than one buffer, as a multi-buffer `xdp_buff`: the head as above, the
//! rest in [`Frags`].

use spine_abi::xdp_frame;

use crate::frags::Frags;

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
    /// Where a packet longer than the head goes (frames made by `with_frags`).
    frags: Option<Frags>,
}

impl Frame {
    /// An empty frame (no packet yet) of the given geometry.
    pub fn new(geometry: Geometry) -> Self {
        let h = geometry.headroom;
        Frame {
            buf: vec![0u8; geometry.size].into_boxed_slice(),
            geometry,
            bounds: Bounds { meta: h, data: h, end: h },
            frags: None,
        }
    }

    /// An empty frame that also takes packets longer than its head, as the kernel's
    /// `BPF_PROG_TEST_RUN` lays them out: the head holds the first
    /// [`Geometry::max_packet`] bytes, the rest goes into up to `max_frags` fragments of
    /// `geometry.size` bytes each (one page each in the kernel).
    pub fn with_frags(geometry: Geometry, max_frags: usize) -> Self {
        Frame { frags: Some(Frags::new(geometry.size, max_frags)), ..Frame::new(geometry) }
    }

    /// Longest packet [`Frame::load`] takes.
    pub fn max_len(&self) -> usize {
        self.geometry.max_packet() + self.frags.as_ref().map_or(0, Frags::max_total)
    }

    /// Places `packet` at the headroom, as a driver (or the kernel's test run) does; in a
    /// frame with fragments, what does not fit the head goes into fragments.
    /// The rest of the buffer is zeroed so nothing from an earlier packet shows through.
    pub fn load(&mut self, packet: &[u8]) -> Result<(), FrameError> {
        if packet.len() < ETH_HLEN {
            return Err(FrameError::TooShort { len: packet.len() });
        }
        let g = self.geometry;
        if packet.len() > self.max_len() {
            return Err(FrameError::TooLong { len: packet.len(), max: self.max_len() });
        }
        let (head, rest) = packet.split_at(packet.len().min(g.max_packet()));
        if let Some(f) = &mut self.frags {
            let filled = f.fill(rest);
            debug_assert!(filled, "length checked above");
        }
        self.place_head(head);
        Ok(())
    }

    /// Places an active message's payload (any length the head holds, no Ethernet
    /// header needed) at the headroom, for [`crate::XdpRunner::run_message`].
    pub fn load_message(&mut self, packet: &[u8]) -> Result<(), FrameError> {
        let g = self.geometry;
        if packet.len() > g.max_packet() {
            return Err(FrameError::TooLong { len: packet.len(), max: g.max_packet() });
        }
        if let Some(f) = &mut self.frags {
            f.clear();
        }
        self.place_head(packet);
        Ok(())
    }

    /// `head` at the headroom, the rest of the buffer zeroed so nothing from an earlier
    /// packet shows through.
    fn place_head(&mut self, head: &[u8]) {
        let g = self.geometry;
        self.buf.fill(0);
        self.bounds = Bounds { meta: g.headroom, data: g.headroom, end: g.headroom + head.len() };
        self.bytes_mut()[g.headroom..g.headroom + head.len()].copy_from_slice(head);
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The fragments after the head: `None` for a frame made by [`Frame::new`], none in
    /// use when the packet fits the head.
    pub fn frags(&self) -> Option<&Frags> {
        self.frags.as_ref()
    }

    /// Whether the packet lies in fragments beyond the head (a multi-buffer frame).
    pub fn is_multi_buffer(&self) -> bool {
        self.frags.as_ref().is_some_and(|f| f.count() > 0)
    }

    /// The packet's length, fragments included (what `bpf_xdp_get_buff_len` returns).
    pub fn len(&self) -> usize {
        self.bounds.end - self.bounds.data + self.frags.as_ref().map_or(0, Frags::total)
    }

    /// Whether the frame holds no packet bytes (a fresh frame).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the metadata, the head and every fragment to `out` (emptied first): what
    /// `BPF_PROG_TEST_RUN` copies out. Allocates only if `out` is too small.
    pub fn copy_out(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(self.meta());
        self.append_packet(out);
    }

    /// Writes the whole packet (head and fragments, no metadata) to `out` (emptied first).
    pub fn copy_packet(&self, out: &mut Vec<u8>) {
        out.clear();
        self.append_packet(out);
    }

    fn append_packet(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.packet());
        for f in self.frags.iter().flat_map(Frags::iter) {
            out.extend_from_slice(f);
        }
    }

    /// The packet's head: `[data, data_end)` (the whole packet unless
    /// [`Frame::is_multi_buffer`]).
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
    /// place (copying the bounds out and back costs a store-forwarding stall per run),
    /// and the fragments when the packet has any.
    pub(crate) fn parts(&mut self) -> (&mut [u8], Geometry, &mut Bounds, Option<&mut Frags>) {
        let frags = self.frags.as_mut().filter(|f| f.count() > 0);
        (&mut self.buf, self.geometry, &mut self.bounds, frags)
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

    #[test]
    fn a_frame_with_frags_splits_as_the_kernels_test_run() {
        let mut f = Frame::with_frags(Geometry::TEST_RUN, crate::MAX_FRAGS);
        assert_eq!(f.max_len(), 3520 + 17 * 4096);
        let pkt: Vec<u8> = (0..9000u32).map(|i| (i % 253) as u8).collect();
        f.load(&pkt).unwrap();
        assert!(f.is_multi_buffer());
        assert_eq!((f.packet().len(), f.len()), (3520, 9000));
        let frags: Vec<usize> = f.frags().unwrap().iter().map(<[u8]>::len).collect();
        assert_eq!(frags, [4096, 9000 - 3520 - 4096]);
        let mut out = Vec::new();
        f.copy_out(&mut out);
        assert_eq!(out, pkt);
        f.load(&pkt[..3520]).unwrap();
        assert!(!f.is_multi_buffer(), "a packet that fits the head has no fragments");
        f.copy_packet(&mut out);
        assert_eq!(out, &pkt[..3520]);
        assert_eq!(
            f.load(&vec![0; 3520 + 17 * 4096 + 1]),
            Err(FrameError::TooLong { len: 73153, max: 73152 })
        );
    }
}
