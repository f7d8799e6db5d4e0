//! The context a program type receives in r1, as the verifier sees it: which byte
//! ranges may be loaded, which yield packet pointers, which may be written.

use spine_abi::xdp_md;

/// What a load of a context field yields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtxFieldKind {
    /// A pointer to the first packet byte (`xdp_md.data`).
    PacketStart,
    /// A pointer one past the last packet byte (`xdp_md.data_end`).
    PacketEnd,
    /// A pointer to the metadata area before the packet (`xdp_md.data_meta`).
    PacketMeta,
    /// A plain value, zero-extended from the field's size.
    Scalar,
    /// A plain value the runtime guarantees is at most this (a message's length).
    ScalarMax(u32),
}

/// One accessible field. Loads must match `off` and `size` exactly, as the kernel's
/// `xdp_is_valid_access` requires of `struct xdp_md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtxField {
    pub name: &'static str,
    pub off: u32,
    pub size: u32,
    pub kind: CtxFieldKind,
    /// Stores allowed (scalar fields only).
    pub writable: bool,
}

/// The layout of a context structure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtxLayout {
    /// `sizeof` the structure.
    pub size: u32,
    pub fields: Vec<CtxField>,
}

impl CtxLayout {
    /// The field starting exactly at `off`, with its index.
    pub fn field_at(&self, off: i64) -> Option<(usize, &CtxField)> {
        self.fields.iter().enumerate().find(|(_, f)| i64::from(f.off) == off)
    }
}

fn field(name: &'static str, off: i16, kind: CtxFieldKind) -> CtxField {
    CtxField { name, off: off as u32, size: 4, kind, writable: false }
}

/// `struct xdp_md` for programs attached to a device (not devmap programs): six read-only
/// `__u32` fields, of which `egress_ifindex` is refused, as in the kernel.
pub fn xdp_ctx() -> CtxLayout {
    let mut ctx = xdp_devmap_ctx();
    ctx.fields.retain(|f| f.name != "egress_ifindex");
    ctx
}

/// `struct xdp_md` for programs run from a devmap entry (`BPF_XDP_DEVMAP`), which may
/// also read `egress_ifindex`.
pub fn xdp_devmap_ctx() -> CtxLayout {
    use CtxFieldKind::*;
    CtxLayout {
        size: xdp_md::SIZE as u32,
        fields: vec![
            field("data", xdp_md::DATA, PacketStart),
            field("data_end", xdp_md::DATA_END, PacketEnd),
            field("data_meta", xdp_md::DATA_META, PacketMeta),
            field("ingress_ifindex", xdp_md::INGRESS_IFINDEX, Scalar),
            field("rx_queue_index", xdp_md::RX_QUEUE_INDEX, Scalar),
            field("egress_ifindex", xdp_md::EGRESS_IFINDEX, Scalar),
        ],
    }
}

/// spine's `struct spine_msg_md`, the context of an active-message handler
/// (`SEC("spine/handler/N")`): the payload as packet pointers (`data`, `data_end`), its
/// length (at most 240, which the verifier knows), the source endpoint and the handler
/// number; all read-only.
pub fn spine_msg_ctx() -> CtxLayout {
    use spine_abi::spine_msg_md as m;
    use CtxFieldKind::*;
    CtxLayout {
        size: m::SIZE as u32,
        fields: vec![
            field("data", m::DATA, PacketStart),
            field("data_end", m::DATA_END, PacketEnd),
            field("len", m::LEN, ScalarMax(m::MSG_MAX)),
            field("source", m::SOURCE, Scalar),
            field("handler", m::HANDLER, ScalarMax(255)),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_context_has_five_read_only_fields() {
        let c = spine_msg_ctx();
        assert_eq!((c.size, c.fields.len()), (20, 5));
        assert_eq!(c.field_at(8).map(|(_, f)| f.kind), Some(CtxFieldKind::ScalarMax(240)));
        assert!(c.field_at(20).is_none() && c.field_at(2).is_none());
        assert!(c.fields.iter().all(|f| f.size == 4 && !f.writable));
    }

    #[test]
    fn xdp_layout_matches_the_kernel() {
        let c = xdp_ctx();
        assert_eq!(c.size, 24);
        assert_eq!(c.fields.len(), 5);
        assert!(c.field_at(20).is_none(), "egress_ifindex only for devmap programs");
        assert_eq!(c.field_at(4).map(|(_, f)| f.kind), Some(CtxFieldKind::PacketEnd));
        assert!(c.fields.iter().all(|f| f.size == 4 && !f.writable));
        assert_eq!(xdp_devmap_ctx().field_at(20).map(|(i, _)| i), Some(5));
    }
}
