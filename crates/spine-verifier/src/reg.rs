//! Abstract register values: what a register may hold (its kind: a scalar or a
//! pointer into one memory region) and, for pointers, where in that region.
//!
//! A pointer is `base + var + off`: `off` a fixed byte offset, `var` a scalar. For
//! packet pointers, `range = Some(r)` records the proven fact `base + var + r <=
//! data_end` (mathematically, without wrap-around); every packet pointer with the same
//! `id` shares `var`, so one bounds check serves them all. An `id` of 0 on a packet
//! pointer means `var == 0`.

use crate::scalar::Scalar;

/// Largest constant or variable pointer offset (the kernel's `BPF_MAX_VAR_OFF`).
pub const MAX_VAR_OFF: i64 = 1 << 29;

/// Map index in the verifier's map table (the program's maps, then inner-map templates).
pub type MapIdx = u16;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Kind {
    /// Never written, or clobbered: may not be read.
    #[default]
    NotInit,
    Scalar,
    /// The context structure (r1 at entry).
    Ctx,
    Packet,
    PacketMeta,
    PacketEnd,
    /// Into the stack of call frame `frame` (0 = the entry function).
    Stack {
        frame: u8,
    },
    MapValue {
        map: MapIdx,
    },
    MapValueOrNull {
        map: MapIdx,
    },
    /// A map handle (`CONST_PTR_TO_MAP`), usable only as a helper argument.
    MapHandle {
        map: MapIdx,
    },
    /// An inner map from a map-of-maps lookup, or NULL.
    MapHandleOrNull {
        map: MapIdx,
    },
    /// `size` bytes of helper-provided memory: a ring-buffer record, or a slice of a
    /// dynptr (`bpf_dynptr_slice`: into the packet or the program's buffer).
    Mem {
        size: u32,
        slice: Slice,
    },
    MemOrNull {
        size: u32,
        slice: Slice,
    },
    /// A map key handed to a `bpf_for_each_map_elem` callback (read-only).
    MapKey {
        map: MapIdx,
    },
    /// The address of the function at this instruction (a callback).
    Func {
        pc: u32,
    },
    /// The low 32 bits of a pointer into `region` (see [`Kind::region`]), from `w1 = w2`:
    /// useful only to subtract another pointer into the same region (clang's 32-bit
    /// `data_end - pos`); any other use would leak an address.
    Trunc32 {
        region: u32,
    },
    /// A pointer a helper invalidated (a packet pointer after the packet may have
    /// moved, a released record): it may not be used as a pointer any more, but two of
    /// one region may still be subtracted (the kernel, loading as root, keeps them as
    /// unknown numbers; spine keeps their addresses from leaking). `region` is
    /// [`STALE`] with the old region's code.
    Stale {
        region: u32,
    },
}

/// What helper memory ([`Kind::Mem`]) is a slice of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Slice {
    /// Not a slice (a ring-buffer record).
    #[default]
    No,
    /// From `bpf_dynptr_slice`: read-only; packet memory (or the program's buffer),
    /// invalid once a helper may have moved the packet.
    ReadOnly,
    /// From `bpf_dynptr_slice_rdwr` (or `bpf_dynptr_data`): writable, invalid once a
    /// helper may have moved the packet.
    ReadWrite,
    /// From `bpf_dynptr_slice` given the buffer at `off` of frame `frame`'s stack (as
    /// many bytes as the slice): it may be that buffer, so while the slice lives no
    /// pointer may be spilled there (a read through the slice would leak it), and the
    /// slice dies with the frame.
    ReadOnlyStack { frame: u8, off: i16 },
    /// From `bpf_dynptr_slice_rdwr` given a stack buffer, likewise; and stores there
    /// keep no value while it lives (a write through the slice may change it).
    ReadWriteStack { frame: u8, off: i16 },
}

impl Slice {
    pub fn is_rdonly(self) -> bool {
        matches!(self, Slice::ReadOnly | Slice::ReadOnlyStack { .. })
    }

    /// The stack buffer the slice may be: its frame and offset.
    pub fn stack_buffer(self) -> Option<(u8, i16)> {
        match self {
            Slice::ReadOnlyStack { frame, off } | Slice::ReadWriteStack { frame, off } => {
                Some((frame, off))
            }
            _ => None,
        }
    }
}

/// Marks a [`Kind::Stale`] region code, so that it never equals a live region's.
pub const STALE: u32 = 0x8000_0000;

impl Kind {
    pub fn is_pointer(self) -> bool {
        !matches!(self, Kind::NotInit | Kind::Scalar)
    }

    pub fn is_nullable(self) -> bool {
        matches!(
            self,
            Kind::MapValueOrNull { .. } | Kind::MapHandleOrNull { .. } | Kind::MemOrNull { .. }
        )
    }

    /// A slice of an XDP dynptr: packet memory (or a copy), invalid once a helper may
    /// have moved the packet, as packet pointers are.
    pub fn is_pkt_slice(self) -> bool {
        matches!(self, Kind::Mem { slice, .. } | Kind::MemOrNull { slice, .. } if slice != Slice::No)
    }

    /// Packet-relative pointers, which may be compared with each other.
    pub fn is_packet_family(self) -> bool {
        matches!(self, Kind::Packet | Kind::PacketMeta | Kind::PacketEnd)
    }

    /// The kernel's name of the type, for messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NotInit => "not_init",
            Kind::Scalar => "scalar",
            Kind::Ctx => "ctx",
            Kind::Packet => "pkt",
            Kind::PacketMeta => "pkt_meta",
            Kind::PacketEnd => "pkt_end",
            Kind::Stack { .. } => "fp",
            Kind::MapValue { .. } => "map_value",
            Kind::MapValueOrNull { .. } => "map_value_or_null",
            Kind::MapHandle { .. } => "map_ptr",
            Kind::MapHandleOrNull { .. } => "map_ptr_or_null",
            Kind::Mem { slice, .. } if slice.is_rdonly() => "rdonly_mem",
            Kind::Mem { .. } => "mem",
            Kind::MemOrNull { slice, .. } if slice.is_rdonly() => "rdonly_mem_or_null",
            Kind::MemOrNull { .. } => "mem_or_null",
            Kind::MapKey { .. } => "map_key",
            Kind::Func { .. } => "func",
            Kind::Trunc32 { .. } => "ptr_low32",
            Kind::Stale { .. } => "invalidated_ptr",
        }
    }

    /// Pointers whose differences are plain numbers about one region share a code:
    /// the packet family, one frame's stack, one map's values, helper memory.
    pub fn region(self) -> Option<u32> {
        match self {
            k if k.is_packet_family() => Some(1),
            Kind::Stack { frame } => Some(0x200 | u32::from(frame)),
            Kind::MapValue { map } => Some(0x3_0000 | u32::from(map)),
            Kind::Mem { slice: Slice::No, .. } => Some(4),
            Kind::Mem { .. } => Some(5),
            Kind::Trunc32 { region } | Kind::Stale { region } => Some(region),
            _ => None,
        }
    }

    /// What a register of this kind becomes when a helper invalidates it.
    pub fn stale(self) -> Kind {
        match self {
            Kind::Stale { .. } => self,
            k => Kind::Stale { region: STALE | k.region().unwrap_or(0) },
        }
    }

    /// The same kind after a successful null check.
    pub fn non_null(self) -> Kind {
        match self {
            Kind::MapValueOrNull { map } => Kind::MapValue { map },
            Kind::MapHandleOrNull { map } => Kind::MapHandle { map },
            Kind::MemOrNull { size, slice } => Kind::Mem { size, slice },
            k => k,
        }
    }
}

/// One register's abstract value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Reg {
    pub kind: Kind,
    /// Fixed offset of a pointer.
    pub off: i32,
    /// Packet pointers: the proven fact `base + var + range <= end` (`None`: nothing).
    /// Negative after a variable advance that may pass the end (`p += len` in a
    /// type-length-value walk): it still bounds `var`, so a later check is meaningful.
    pub range: Option<i32>,
    /// Scalars: equal to every scalar with the same id. Packet pointers: share `var`.
    /// Nullable pointers: null together with every copy.
    pub id: u32,
    /// An acquired reference (ring-buffer record) that must be released.
    pub ref_id: u32,
    /// The value of a scalar, or the variable offset of a pointer.
    pub v: Scalar,
    /// Scalars: the value is `b(sym) + sym_d`, where `b(sym)` names a fixed number.
    /// Packet pointers: the fact `base + var + b(sym) + sym_d <= end` holds. A loop
    /// counter and the packet range it indexes keep their relation through joins.
    pub sym: u32,
    pub sym_d: i64,
    /// Packet pointers made by adding a scalar to another (`from_s != 0`): `var ==
    /// var(group from_g) + b(from_s) + from_d`, so a bounds check on this pointer also
    /// teaches group `from_g` (which may be 0, the group with no variable part).
    pub from_g: u32,
    pub from_s: u32,
    pub from_d: i64,
    /// Scalars linked by `id` (each `base + off`, `off` their distance): this one is
    /// `(base + off) mod 2^32`, made by a 32-bit add on a copy of a base that fits in
    /// 32 bits (`w2 = w1; w2 += -201`).
    pub link32: bool,
}

impl Reg {
    pub const NOT_INIT: Reg = Reg {
        kind: Kind::NotInit,
        off: 0,
        range: None,
        id: 0,
        ref_id: 0,
        v: Scalar::unknown(),
        sym: 0,
        sym_d: 0,
        from_g: 0,
        from_s: 0,
        from_d: 0,
        link32: false,
    };

    pub fn scalar(v: Scalar) -> Reg {
        Reg { kind: Kind::Scalar, v, ..Reg::NOT_INIT }
    }

    pub fn unknown() -> Reg {
        Reg::scalar(Scalar::unknown())
    }

    pub fn constant(c: u64) -> Reg {
        Reg::scalar(Scalar::constant(c))
    }

    /// A pointer of `kind` at fixed offset `off` with no variable part.
    pub fn ptr(kind: Kind, off: i32) -> Reg {
        Reg { kind, off, v: Scalar::constant(0), ..Reg::NOT_INIT }
    }

    pub fn is_scalar(&self) -> bool {
        self.kind == Kind::Scalar
    }

    pub fn is_init(&self) -> bool {
        self.kind != Kind::NotInit
    }

    /// A scalar known to be zero (a NULL).
    pub fn is_null(&self) -> bool {
        self.is_scalar() && self.v.const_value() == Some(0)
    }

    /// The pointer's fixed offset plus a constant variable part, if the latter is known.
    pub fn const_off(&self) -> Option<i64> {
        self.v.const_value().map(|c| i64::from(self.off) + c as i64)
    }
}
