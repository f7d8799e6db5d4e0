//! A reader for the `.BTF` section: the type graph that BTF-defined maps are written
//! in. Parsing validates every type as libbpf's `btf__new` does (known kinds, records
//! inside the section, names inside the string table, referenced ids that exist), so
//! the accessors afterwards only have cycles and depth left to guard against.

use crate::BtfError;

/// Hand-built `.BTF` sections, shared with the integration tests.
#[cfg(test)]
#[path = "../tests/common/btf_builder.rs"]
pub(crate) mod build;

const MAGIC: u16 = 0xeb9f;
const HEADER_LEN: usize = 24;
/// libbpf's `MAX_RESOLVE_DEPTH`: longest modifier/typedef/array chain followed.
pub(crate) const MAX_DEPTH: usize = 32;
/// Size of a BPF pointer, whatever the host.
const PTR_SIZE: u32 = 8;

pub(crate) const VAR_GLOBAL: u32 = 1;

/// A struct or union member.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    pub name: u32,
    pub ty: u32,
    /// Offset in bits (bitfield size already masked off).
    pub bit_offset: u32,
    /// Width of a bitfield member in bits; 0 for a plain member.
    pub bitfield_size: u32,
}

/// One entry of a `DATASEC`.
#[derive(Debug, Clone)]
pub(crate) struct VarSecinfo {
    pub ty: u32,
    pub offset: u32,
    pub size: u32,
}

/// One BTF type, decoded. Id 0 is `Void`.
#[derive(Debug, Clone)]
pub(crate) enum Type {
    Void,
    Int {
        size: u32,
        signed: bool,
        /// `BTF_INT_ENCODING` (`SIGNED` 1, `CHAR` 2, `BOOL` 4).
        encoding: u8,
        /// `BTF_INT_OFFSET` and `BTF_INT_BITS`: the value's bits within its bytes.
        bit_off: u8,
        bits: u8,
    },
    Ptr {
        target: u32,
    },
    Array {
        elem: u32,
        nelems: u32,
    },
    Struct {
        size: u32,
        members: Vec<Member>,
    },
    Union {
        size: u32,
        members: Vec<Member>,
    },
    /// `ENUM` and `ENUM64`; values are sign- or zero-extended as libbpf reads them.
    Enum {
        size: u32,
        values: Vec<u64>,
        /// Name offsets of the enumerators, in the order of `values`.
        names: Vec<u32>,
        signed: bool,
    },
    Fwd,
    /// `TYPEDEF`, `VOLATILE`, `CONST`, `RESTRICT`, `TYPE_TAG`: no storage of their own.
    Modifier {
        target: u32,
    },
    Func,
    FuncProto,
    Var {
        target: u32,
        linkage: u32,
    },
    Datasec {
        size: u32,
        vars: Vec<VarSecinfo>,
    },
    Float {
        size: u32,
    },
    DeclTag {
        target: u32,
    },
}

const KIND_NAMES: [&str; 20] = [
    "void",
    "int",
    "ptr",
    "array",
    "struct",
    "union",
    "enum",
    "fwd",
    "typedef",
    "volatile",
    "const",
    "restrict",
    "func",
    "func_proto",
    "var",
    "datasec",
    "float",
    "decl_tag",
    "type_tag",
    "enum64",
];

/// A parsed `.BTF` section.
#[derive(Debug)]
pub(crate) struct Btf<'a> {
    types: Vec<(u32, Type)>,
    kinds: Vec<u32>,
    strings: &'a [u8],
}

fn rd32(b: &[u8], at: usize) -> Option<u32> {
    let w = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

impl<'a> Btf<'a> {
    /// Parses and validates a `.BTF` section.
    pub fn parse(data: &'a [u8]) -> Result<Self, BtfError> {
        let hdr = data.get(..HEADER_LEN).ok_or(BtfError::OutOfBounds("header"))?;
        let magic = u16::from_le_bytes([hdr[0], hdr[1]]);
        if magic != MAGIC {
            return Err(BtfError::BadMagic(magic));
        }
        if hdr[2] != 1 {
            return Err(BtfError::BadVersion(hdr[2]));
        }
        let field = |at| rd32(hdr, at).unwrap_or(0) as u64;
        let (hdr_len, type_off, type_len, str_off, str_len) =
            (field(4), field(8), field(12), field(16), field(20));
        if hdr_len < HEADER_LEN as u64 || hdr_len > data.len() as u64 {
            return Err(BtfError::BadHeader("hdr_len"));
        }
        // A newer header may be longer; libbpf accepts it only if the extra is zero.
        if data[HEADER_LEN..hdr_len as usize].iter().any(|&b| b != 0) {
            return Err(BtfError::BadHeader("unknown non-zero header fields"));
        }
        if type_off % 4 != 0 {
            return Err(BtfError::BadHeader("type section is not 4-byte aligned"));
        }
        let body = &data[hdr_len as usize..];
        let section = |off: u64, len: u64, what| {
            let end = off.checked_add(len).ok_or(BtfError::OutOfBounds(what))?;
            body.get(off as usize..end as usize)
                .filter(|_| end <= body.len() as u64)
                .ok_or(BtfError::OutOfBounds(what))
        };
        let types_raw = section(type_off, type_len, "type section")?;
        let strings = section(str_off, str_len, "string section")?;
        if type_off < str_off.saturating_add(str_len) && str_off < type_off.saturating_add(type_len)
        {
            return Err(BtfError::BadHeader("type and string sections overlap"));
        }
        if strings.first() != Some(&0) || strings.last() != Some(&0) {
            return Err(BtfError::BadHeader("string section must start and end with NUL"));
        }

        let mut btf = Btf { types: vec![(0, Type::Void)], kinds: vec![0], strings };
        let mut at = 0usize;
        while at < types_raw.len() {
            let id = btf.types.len() as u32;
            let (name, kind, ty, len) = decode(types_raw, at, id)?;
            btf.name(name)?;
            btf.types.push((name, ty));
            btf.kinds.push(kind);
            at += len;
        }
        btf.check_references()?;
        Ok(btf)
    }

    /// Number of types including void.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.types.len()
    }

    /// Number of type ids, void included: valid ids are `0..count()`.
    pub fn count(&self) -> u32 {
        self.types.len() as u32
    }

    /// The raw `BTF_KIND_*` of type `id` (0 for an unknown id).
    pub fn kind(&self, id: u32) -> u32 {
        self.kinds.get(id as usize).copied().unwrap_or(0)
    }

    pub fn get(&self, id: u32) -> Option<&Type> {
        self.types.get(id as usize).map(|(_, t)| t)
    }

    /// The name of type `id` (empty for anonymous types).
    pub fn type_name(&self, id: u32) -> &'a str {
        let off = self.types.get(id as usize).map_or(0, |(n, _)| *n);
        self.name(off).unwrap_or("")
    }

    /// Kind name of type `id`, for messages.
    pub fn kind_name(&self, id: u32) -> &'static str {
        let k = self.kinds.get(id as usize).copied().unwrap_or(0) as usize;
        KIND_NAMES.get(k).copied().unwrap_or("unknown")
    }

    /// The string at `off` of the string section.
    pub fn name(&self, off: u32) -> Result<&'a str, BtfError> {
        crate::elf::cstr(self.strings, u64::from(off)).ok_or(BtfError::BadString(off))
    }

    fn check_references(&self) -> Result<(), BtfError> {
        let n = self.types.len() as u64;
        for (id, (_, t)) in self.types.iter().enumerate() {
            let id = id as u32;
            let check = |r: u32| {
                if u64::from(r) < n {
                    Ok(())
                } else {
                    Err(BtfError::BadTypeId { id, referenced: r })
                }
            };
            match t {
                Type::Ptr { target }
                | Type::Modifier { target }
                | Type::Var { target, .. }
                | Type::DeclTag { target } => check(*target)?,
                Type::Array { elem, .. } => check(*elem)?,
                Type::Struct { members, .. } | Type::Union { members, .. } => {
                    for m in members {
                        self.name(m.name)?;
                        check(m.ty)?;
                    }
                }
                Type::Datasec { vars, .. } => {
                    for v in vars {
                        check(v.ty)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Follows typedefs and modifiers (`const`, `volatile`, `restrict`, `type_tag`) to
    /// the type they name, as libbpf's `skip_mods_and_typedefs` does.
    pub fn skip_mods(&self, start: u32) -> Result<(u32, &Type), BtfError> {
        let mut id = start;
        for _ in 0..=MAX_DEPTH {
            match self.get(id) {
                Some(Type::Modifier { target }) => id = *target,
                Some(t) => return Ok((id, t)),
                None => return Err(BtfError::BadTypeId { id: start, referenced: id }),
            }
        }
        Err(BtfError::TooDeep(start))
    }

    /// Size in bytes of type `id`, as libbpf's `btf__resolve_size` computes it.
    pub fn resolve_size(&self, start: u32) -> Result<u32, BtfError> {
        let mut id = start;
        let mut nelems: u64 = 1;
        for _ in 0..MAX_DEPTH {
            let t = self.get(id).ok_or(BtfError::BadTypeId { id: start, referenced: id })?;
            let size = match t {
                Type::Int { size, .. }
                | Type::Struct { size, .. }
                | Type::Union { size, .. }
                | Type::Enum { size, .. }
                | Type::Datasec { size, .. }
                | Type::Float { size } => *size,
                Type::Ptr { .. } => PTR_SIZE,
                Type::Modifier { target } | Type::Var { target, .. } => {
                    id = *target;
                    continue;
                }
                Type::DeclTag { target } => {
                    id = *target;
                    continue;
                }
                Type::Array { elem, nelems: n } => {
                    nelems = nelems.saturating_mul(u64::from(*n));
                    if nelems > u64::from(u32::MAX) {
                        return Err(BtfError::SizeOverflow(start));
                    }
                    id = *elem;
                    continue;
                }
                Type::Void | Type::Fwd | Type::Func | Type::FuncProto => {
                    return Err(BtfError::NoSize { id, kind: self.kind_name(id) })
                }
            };
            let total = nelems * u64::from(size);
            return u32::try_from(total).map_err(|_| BtfError::SizeOverflow(start));
        }
        Err(BtfError::TooDeep(start))
    }

    /// The `DATASEC` called `name`, with its id.
    pub fn datasec(&self, name: &str) -> Option<(u32, u32, &[VarSecinfo])> {
        self.types.iter().enumerate().find_map(|(id, (n, t))| match t {
            Type::Datasec { size, vars } if self.name(*n).ok() == Some(name) => {
                Some((id as u32, *size, vars.as_slice()))
            }
            _ => None,
        })
    }
}

/// Decodes the type record at `at`: (name offset, kind, type, record length).
fn decode(raw: &[u8], at: usize, id: u32) -> Result<(u32, u32, Type, usize), BtfError> {
    let trunc = BtfError::TruncatedType { id };
    let word = |i: usize| rd32(raw, at + 4 * i).ok_or(trunc.clone());
    let name = word(0)?;
    let info = word(1)?;
    let size_or_type = word(2)?;
    let vlen = (info & 0xffff) as usize;
    let kind = (info >> 24) & 0x1f;
    let kind_flag = info >> 31 != 0;
    // Bytes after the 12-byte common header.
    let extra_at = at + 12;
    let need = |len: usize| -> Result<&[u8], BtfError> {
        raw.get(extra_at..extra_at.checked_add(len).ok_or(trunc.clone())?).ok_or(trunc.clone())
    };
    let ex = |b: &[u8], i: usize| rd32(b, 4 * i).unwrap_or(0);
    let (ty, extra) = match kind {
        1 => {
            let b = need(4)?;
            // BTF_INT_ENCODING (bits 24..28; bit 0 is BTF_INT_SIGNED), BTF_INT_OFFSET
            // (16..24), BTF_INT_BITS (0..8).
            let w = ex(b, 0);
            let encoding = ((w >> 24) & 0x0f) as u8;
            let int = Type::Int {
                size: size_or_type,
                signed: encoding & 1 != 0,
                encoding,
                bit_off: (w >> 16) as u8,
                bits: w as u8,
            };
            (int, 4)
        }
        2 => (Type::Ptr { target: size_or_type }, 0),
        3 => {
            let b = need(12)?;
            (Type::Array { elem: ex(b, 0), nelems: ex(b, 2) }, 12)
        }
        4 | 5 => {
            let b = need(vlen * 12)?;
            let members = b
                .chunks_exact(12)
                .map(|m| {
                    let off = ex(m, 2);
                    Member {
                        name: ex(m, 0),
                        ty: ex(m, 1),
                        bit_offset: if kind_flag { off & 0xff_ffff } else { off },
                        bitfield_size: if kind_flag { off >> 24 } else { 0 },
                    }
                })
                .collect();
            let t = if kind == 4 {
                Type::Struct { size: size_or_type, members }
            } else {
                Type::Union { size: size_or_type, members }
            };
            (t, vlen * 12)
        }
        6 => {
            let b = need(vlen * 8)?;
            let values = b
                .chunks_exact(8)
                .map(
                    |e| if kind_flag { ex(e, 1) as i32 as i64 as u64 } else { u64::from(ex(e, 1)) },
                )
                .collect();
            let names = b.chunks_exact(8).map(|e| ex(e, 0)).collect();
            (Type::Enum { size: size_or_type, values, names, signed: kind_flag }, vlen * 8)
        }
        7 => (Type::Fwd, 0),
        8..=11 | 18 => (Type::Modifier { target: size_or_type }, 0),
        12 => (Type::Func, 0),
        13 => {
            need(vlen * 8)?;
            (Type::FuncProto, vlen * 8)
        }
        14 => {
            let b = need(4)?;
            (Type::Var { target: size_or_type, linkage: ex(b, 0) }, 4)
        }
        15 => {
            let b = need(vlen * 12)?;
            let vars = b
                .chunks_exact(12)
                .map(|v| VarSecinfo { ty: ex(v, 0), offset: ex(v, 1), size: ex(v, 2) })
                .collect();
            (Type::Datasec { size: size_or_type, vars }, vlen * 12)
        }
        16 => (Type::Float { size: size_or_type }, 0),
        17 => {
            need(4)?;
            (Type::DeclTag { target: size_or_type }, 4)
        }
        19 => {
            let b = need(vlen * 12)?;
            let values = b
                .chunks_exact(12)
                .map(|e| u64::from(ex(e, 1)) | u64::from(ex(e, 2)) << 32)
                .collect();
            let names = b.chunks_exact(12).map(|e| ex(e, 0)).collect();
            (Type::Enum { size: size_or_type, values, names, signed: kind_flag }, vlen * 12)
        }
        _ => return Err(BtfError::UnknownKind { id, kind }),
    };
    Ok((name, kind, ty, 12 + extra))
}

#[cfg(test)]
mod tests {
    use super::build::BtfBuilder;
    use super::*;

    #[test]
    fn sizes_through_modifier_and_array_chains() {
        let mut b = BtfBuilder::new();
        let u32_ = b.int("u32", 4);
        let s = b.strukt("s", 16, &[("a", u32_, 0)]);
        let c = b.raw("", 10, 0, s, &[]); // const
        let v = b.raw("", 9, 0, c, &[]); // volatile
        let td = b.raw("stats_t", 8, 0, v, &[]); // typedef
        let arr = b.array(td, u32_, 3);
        let tag = b.raw("tag", 18, 0, arr, &[]); // type_tag
        let p = b.ptr(tag);
        let data = b.finish();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.len(), 9);
        assert_eq!(btf.resolve_size(td), Ok(16));
        assert_eq!(btf.resolve_size(arr), Ok(48));
        assert_eq!(btf.resolve_size(tag), Ok(48));
        assert_eq!(btf.resolve_size(p), Ok(8));
        assert_eq!(btf.resolve_size(0), Err(BtfError::NoSize { id: 0, kind: "void" }));
        assert_eq!(btf.skip_mods(td).unwrap().0, s);
        assert_eq!(btf.type_name(td), "stats_t");
        assert_eq!(btf.kind_name(arr), "array");
    }

    #[test]
    fn array_size_overflow_is_an_error() {
        let mut b = BtfBuilder::new();
        let u64_ = b.int("u64", 8);
        let a = b.array(u64_, u64_, 0x2000_0000);
        let aa = b.array(a, u64_, 0x10);
        let data = b.finish();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.resolve_size(a), Err(BtfError::SizeOverflow(a)));
        assert_eq!(btf.resolve_size(aa), Err(BtfError::SizeOverflow(aa)));
    }

    #[test]
    fn cycles_and_deep_chains_are_bounded() {
        let mut b = BtfBuilder::new();
        // 1 -> 2 -> 1: typedef cycle.
        b.raw("a", 8, 0, 2, &[]);
        b.raw("b", 8, 0, 1, &[]);
        // A chain of 40 consts ending at an int.
        let int = b.int("int", 4);
        let mut last = int;
        for _ in 0..40 {
            last = b.raw("", 10, 0, last, &[]);
        }
        // An array cycle: an array of one of itself.
        let me = b.count + 1;
        let arr = b.array(me, int, 1);
        // Arrays of arrays whose element count overflows before the depth limit.
        let me2 = b.count + 1;
        let arr2 = b.array(me2, int, 2);
        let data = b.finish();
        let btf = Btf::parse(&data).unwrap();
        assert_eq!(btf.resolve_size(1), Err(BtfError::TooDeep(1)));
        assert_eq!(btf.skip_mods(1).unwrap_err(), BtfError::TooDeep(1));
        assert_eq!(btf.resolve_size(last), Err(BtfError::TooDeep(last)));
        assert_eq!(btf.resolve_size(arr), Err(BtfError::TooDeep(arr)));
        assert_eq!(btf.resolve_size(arr2), Err(BtfError::SizeOverflow(arr2)));
        // 30 consts is within the limit.
        assert_eq!(btf.resolve_size(int + 30), Ok(4));
    }

    #[test]
    fn header_and_record_errors() {
        let mut b = BtfBuilder::new();
        let int = b.int("int", 4);
        b.ptr(int);
        let good = b.finish();
        assert!(Btf::parse(&good).is_ok());

        // Big-endian BTF.
        let mut bad = good.clone();
        bad[0] = 0xeb;
        bad[1] = 0x9f;
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::BadMagic(0x9feb));
        let mut bad = good.clone();
        bad[2] = 2;
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::BadVersion(2));
        let mut bad = good.clone();
        bad[4] = 8; // hdr_len
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::BadHeader("hdr_len"));
        let mut bad = good.clone();
        bad[16] = 0xf0; // str_off far away
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::OutOfBounds("string section"));
        let mut bad = good.clone();
        bad[12] = 200; // type_len
        assert!(matches!(Btf::parse(&bad).unwrap_err(), BtfError::OutOfBounds(_)));
        let mut bad = good.clone();
        bad[8] = 2; // type_off misaligned
        assert!(matches!(Btf::parse(&bad).unwrap_err(), BtfError::BadHeader(_)));
        // Unknown kind 31 in the second type.
        let mut bad = good.clone();
        bad[24 + 16 + 7] = 31;
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::UnknownKind { id: 2, kind: 31 });
        // Pointer to a type that does not exist.
        let mut bad = good.clone();
        bad[24 + 16 + 8] = 9;
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::BadTypeId { id: 2, referenced: 9 });
        // Name offset past the strings.
        let mut bad = good.clone();
        bad[24] = 0x7f;
        assert_eq!(Btf::parse(&bad).unwrap_err(), BtfError::BadString(0x7f));
        // Short header.
        assert_eq!(Btf::parse(&good[..10]).unwrap_err(), BtfError::OutOfBounds("header"));
    }

    #[test]
    fn truncated_records_are_reported_by_id() {
        let mut b = BtfBuilder::new();
        let int = b.int("int", 4);
        b.strukt("s", 8, &[("a", int, 0), ("b", int, 4)]);
        let mut data = b.finish();
        // Claim a third member the type section does not hold.
        let info_at = 24 + 16 + 4;
        data[info_at] = 3;
        assert_eq!(Btf::parse(&data).unwrap_err(), BtfError::TruncatedType { id: 2 });
    }
}
