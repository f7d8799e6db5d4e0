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
    /// [`crate::INLINE_BYTES`]).
    pub const INLINE: u32 = 1;
    /// Option bit: an active message, not a frame. Its handler number is in bits 8..16
    /// of the options and, on the receive ring, its source (the sending extension's id)
    /// in bits 16..32; on the transmit ring those name the one extension to run it (its
    /// id + 1, see [`Desc::target`]; 0: every extension of the endpoint's domain that
    /// registered the handler). Its payload, inline or in
    /// a frame as any message's, is at most [`Desc::MSG_MAX`] bytes. No other option
    /// bit is defined; any other is refused.
    pub const MESSAGE: u32 = 2;
    /// Option bit (with [`Desc::INLINE`]), the host router's header-copy path: on the
    /// receive ring, the first bytes of a frame the adapter keeps, `addr` its handle and
    /// bits 16..32 the whole frame's length; on the transmit ring, a rewritten header
    /// for the buffer `addr` names and the egress port in bits 16..32. Only an endpoint
    /// opened for that path reads or writes it (see `docs/ARCHITECTURE.md`).
    pub const HEADER: u32 = 4;
    /// Option bit, the host router's in-place path (transmit ring only, alone): the
    /// frame at `addr`, rewritten where it was received, leaves on the egress port in
    /// bits 16..32.
    pub const FORWARD: u32 = 8;
    /// Option bit (transmit ring only, with [`Desc::MESSAGE`] and nothing else but the
    /// handler in bits 8..16): a bulk active message. `addr` and `len` are no payload
    /// but a reference to `len` bytes (at least 1) at offset `addr` of the endpoint's
    /// buffer area, which the handler reads with `spine_msg_bulk_read`, checked against
    /// the area on every read. The area stays the client's: nothing goes back on the
    /// completion ring. On the receive ring (with [`Desc::MESSAGE`], the handler in
    /// bits 8..16 and the sending extension's id in bits 16..32): a bulk message an
    /// extension sent, `len` bytes at offset `addr` of the area that it wrote there
    /// (`spine_msg_bulk_write`); no fill frame is used and none comes back.
    pub const BULK: u32 = 16;
    /// Option bit (transmit ring only, alone: options exactly this): a grant. The
    /// client lends `len` bytes (at least 1) at offset `addr` of its buffer area to the
    /// adapter for one bulk message arriving from another adapter over a tunnel; the
    /// adapter writes such a message at the start of the first grant it fits and
    /// posts a [`Desc::BULK`] receive descriptor for it, after which the region is the
    /// client's again. Nothing goes back on the completion ring.
    pub const GRANT: u32 = 32;
    /// Option bit (transmit ring only, with [`Desc::MESSAGE`] | [`Desc::BULK`], the
    /// handler in bits 8..16 and a destination in bits 16..32): a bulk message for
    /// another adapter, sent by the adapter out of the endpoint's port (a tunnel) in
    /// pieces read from the area reference, to the endpoint over there whose id is in
    /// bits 16..32, or to its handlers with [`Desc::REMOTE_HANDLERS`].
    pub const REMOTE: u32 = 64;
    /// Option bit (receive ring only, alone: options exactly this): AF_XDP's
    /// `XDP_PKT_CONTD`. The frame goes on in the next descriptor: a multi-buffer frame
    /// arrives as several frame descriptors, every one but the last marked, posted
    /// together (the client never sees part of one). Only an endpoint opened with
    /// `multi_buffer` gets them ([`crate::AdapterEnd::set_multi_buffer`]). AF_XDP keeps
    /// the bit at 0; here bit 0 is [`Desc::INLINE`], so it is bit 7. The transmit ring
    /// refuses it (`bad_desc`): a client sends one frame per descriptor.
    pub const CONTD: u32 = 128;
    /// The destination of a [`Desc::REMOTE`] bulk message that names the other
    /// adapter's handlers rather than one of its endpoints.
    pub const REMOTE_HANDLERS: u16 = 0xffff;
    /// The egress port of a [`Desc::HEADER`] return that drops the buffer.
    pub const EGRESS_DROP: u16 = 0xffff;
    /// Largest active-message payload (a small message: 256 bytes with its header).
    pub const MSG_MAX: usize = 240;

    /// The options of a message for `handler` from `source`.
    pub fn message_options(inline: bool, handler: u8, source: u16) -> u32 {
        Desc::MESSAGE | u32::from(inline) | u32::from(handler) << 8 | u32::from(source) << 16
    }

    /// The options of a message for `handler` from the client, for the one extension
    /// `target` (its id; `None`: every extension of the domain registering `handler`).
    /// Extension id 0xffff cannot be named (`None` is then returned).
    pub fn message_to(inline: bool, handler: u8, target: Option<u16>) -> Option<u32> {
        let to = match target {
            None => 0,
            Some(id) => id.checked_add(1)?,
        };
        Some(Desc::message_options(inline, handler, to))
    }

    /// For a message from the transmit ring: the one extension it is for (bits 16..32
    /// less 1), or `None` for every extension registering its handler.
    pub fn target(&self) -> Option<u16> {
        ((self.options >> 16) as u16).checked_sub(1)
    }

    /// For a message descriptor: its handler number and source.
    pub fn message(&self) -> Option<(u8, u16)> {
        (self.options & Desc::MESSAGE != 0)
            .then_some(((self.options >> 8) as u8, (self.options >> 16) as u16))
    }

    /// The descriptor's second word as stored in a ring: `len`, then `options`.
    pub(crate) fn word(&self) -> u64 {
        u64::from(self.len) | u64::from(self.options) << 32
    }

    pub(crate) fn from_words(addr: u64, word: u64) -> Self {
        Desc { addr, len: word as u32, options: (word >> 32) as u32 }
    }
}
