//! The XDP context. Programs read `struct xdp_md`: six `u32` fields, three of them packet
//! pointers. spine hands programs a pointer to its own [`XdpCtx`] with full 64-bit
//! pointers and rewrites every context load to read the real field, as the kernel's
//! `convert_ctx_accesses` does. Which loads read the context is what the verifier
//! proved (`MemAccess::Ctx`); it also refused every write and every access of the
//! wrong size or offset.

use spine_abi::xdp_md;
use spine_isa::{op, Insn};

/// What a rewritten program's context pointer points at. The packet pointers are
/// addresses; the program sees this struct read-only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct XdpCtx {
    pub data: u64,
    pub data_end: u64,
    pub data_meta: u64,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
    pub _pad: u32,
}

/// Bytes of [`XdpCtx`] the program may read.
pub const XDP_CTX_SIZE: usize = std::mem::size_of::<XdpCtx>();

/// Where a load of `struct xdp_md` at `off` goes in [`XdpCtx`]: (offset, size code).
fn field(off: u32) -> Option<(i16, u8)> {
    Some(match i16::try_from(off).ok()? {
        xdp_md::DATA => (0, op::DW),
        xdp_md::DATA_END => (8, op::DW),
        xdp_md::DATA_META => (16, op::DW),
        xdp_md::INGRESS_IFINDEX => (24, op::W),
        xdp_md::RX_QUEUE_INDEX => (28, op::W),
        xdp_md::EGRESS_IFINDEX => (32, op::W),
        _ => return None,
    })
}

/// The load `i` of the `xdp_md` field at `field_off`, rewritten to read [`XdpCtx`].
/// `None` if `i` is not a plain load or the offset is no field (the verifier lets
/// neither through).
pub fn rewrite_load(i: Insn, field_off: u32) -> Option<Insn> {
    if i.class() != op::LDX || i.code & 0xe0 != op::MEM {
        return None;
    }
    let (off, size) = field(field_off)?;
    Some(Insn::new(op::LDX | op::MEM | size, i.dst, i.src, off, 0))
}

/// The load `i` of the `struct spine_msg_md` field at `field_off` (a message handler's
/// context), rewritten to read [`XdpCtx`], where the runner keeps a message's fields:
/// the payload as the packet, `len` in `egress_ifindex`, `source` in
/// `ingress_ifindex`, `handler` in `rx_queue_index`.
pub fn rewrite_msg_load(i: Insn, field_off: u32) -> Option<Insn> {
    use spine_abi::spine_msg_md as m;
    if i.class() != op::LDX || i.code & 0xe0 != op::MEM {
        return None;
    }
    let (off, size) = match i16::try_from(field_off).ok()? {
        m::DATA => (0, op::DW),
        m::DATA_END => (8, op::DW),
        m::LEN => (32, op::W),
        m::SOURCE => (24, op::W),
        m::HANDLER => (28, op::W),
        _ => return None,
    };
    Some(Insn::new(op::LDX | op::MEM | size, i.dst, i.src, off, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ldxw(dst: u8, src: u8, off: i16) -> Insn {
        Insn::new(op::LDX | op::MEM | op::W, dst, src, off, 0)
    }

    #[test]
    fn every_field_is_redirected_to_its_wide_slot() {
        let cases = [
            (xdp_md::DATA, Insn::new(op::LDX | op::MEM | op::DW, 2, 1, 0, 0)),
            (xdp_md::DATA_END, Insn::new(op::LDX | op::MEM | op::DW, 2, 1, 8, 0)),
            (xdp_md::DATA_META, Insn::new(op::LDX | op::MEM | op::DW, 2, 1, 16, 0)),
            (xdp_md::INGRESS_IFINDEX, ldxw(2, 1, 24)),
            (xdp_md::RX_QUEUE_INDEX, ldxw(2, 1, 28)),
            (xdp_md::EGRESS_IFINDEX, ldxw(2, 1, 32)),
        ];
        for (off, want) in cases {
            assert_eq!(rewrite_load(ldxw(2, 1, off), off as u32), Some(want), "field at {off}");
        }
        const { assert!(XDP_CTX_SIZE >= 36) };
    }

    #[test]
    fn non_loads_and_unknown_offsets_are_refused() {
        assert_eq!(rewrite_load(ldxw(2, 1, 2), 2), None);
        assert_eq!(rewrite_load(Insn::new(op::ST | op::MEM | op::W, 1, 0, 0, 1), 0), None);
    }
}
