//! CO-RE: the `.BTF.ext` field, type and enum relocations of programs written against
//! `vmlinux.h` (`BPF_CORE_READ`, `__builtin_preserve_access_index`, `bpf_core_field_exists`
//! …), applied to the code as libbpf's `bpf_core_apply_relo_insn` does, against a target
//! BTF: the running kernel's (`/sys/kernel/btf/vmlinux`, read by the caller), a file the
//! user gives, or the object's own when none is given (every relocation then keeps the
//! value clang computed).
//!
//! For each relocation the local access (`0:1:2`: an index on the root pointer, then
//! member and array indices) is walked in the object's BTF; every target type of the
//! same kind and essential name (`task_struct___old` matches `task_struct`) is tried by
//! member *names*, recursing into anonymous members; all candidates that match must agree.
//! The instruction's immediate or offset must hold the local value before it is
//! patched. A field or type the target lacks makes `*_exists` 0; any other relocation on
//! it poisons its instruction (a call to helper `0xbad2310`, as libbpf does), which the
//! verifier refuses only if that code can run.

use std::collections::HashMap;

use spine_isa::{op, Insn};

use crate::btf::{Btf, Member, Type};
use crate::elf::Elf;
use crate::progs::Code;
use crate::{BtfError, ObjError};

/// The helper id libbpf writes into an instruction whose relocation failed.
pub const POISON_HELPER: i32 = 0x0bad_2310;

/// Why a CO-RE relocation could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreErrorKind {
    #[error(".BTF.ext: {0}")]
    BadExt(&'static str),
    #[error("unknown relocation kind {0}")]
    UnknownKind(u32),
    #[error("bad access string '{0}'")]
    BadAccess(String),
    #[error("instruction {0} is outside the section")]
    NoInsn(usize),
    #[error("the local type of '{0}' cannot be relocated (anonymous or not a named type)")]
    Anonymous(String),
    #[error("target types disagree on '{access}' of '{ty}': {a} and {b}")]
    Ambiguous { ty: String, access: String, a: u64, b: u64 },
    #[error("instruction {insn} holds {found}, not the local value {local}")]
    Unexpected { insn: usize, found: i64, local: u64 },
    #[error("instruction {insn} cannot take a relocation of this kind")]
    WrongInsn { insn: usize },
    #[error("value {value} does not fit instruction {insn}")]
    TooBig { insn: usize, value: u64 },
    #[error("target BTF: {0}")]
    Target(BtfError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Kind {
    FieldByteOffset = 0,
    FieldByteSize = 1,
    FieldExists = 2,
    FieldSigned = 3,
    FieldLshiftU64 = 4,
    FieldRshiftU64 = 5,
    TypeIdLocal = 6,
    TypeIdTarget = 7,
    TypeExists = 8,
    TypeSize = 9,
    EnumvalExists = 10,
    EnumvalValue = 11,
    TypeMatches = 12,
}

impl Kind {
    fn from(n: u32) -> Option<Kind> {
        use Kind::*;
        Some(match n {
            0 => FieldByteOffset,
            1 => FieldByteSize,
            2 => FieldExists,
            3 => FieldSigned,
            4 => FieldLshiftU64,
            5 => FieldRshiftU64,
            6 => TypeIdLocal,
            7 => TypeIdTarget,
            8 => TypeExists,
            9 => TypeSize,
            10 => EnumvalExists,
            11 => EnumvalValue,
            12 => TypeMatches,
            _ => return None,
        })
    }

    fn is_field(self) -> bool {
        (self as u32) <= 5
    }

    fn is_enum(self) -> bool {
        matches!(self, Kind::EnumvalExists | Kind::EnumvalValue)
    }

    /// The answer when the target has no such field, type or enumerator.
    fn missing(self) -> Option<u64> {
        matches!(
            self,
            Kind::FieldExists | Kind::TypeExists | Kind::EnumvalExists | Kind::TypeMatches
        )
        .then_some(0)
    }
}

/// One `bpf_core_relo` record.
#[derive(Debug, Clone)]
struct Relo<'a> {
    insn: usize,
    type_id: u32,
    access: &'a str,
    kind: u32,
}

/// The relocations of `.BTF.ext`, by code section name.
fn records<'a>(ext: &[u8], btf: &Btf<'a>) -> Result<Vec<(&'a str, Vec<Relo<'a>>)>, CoreErrorKind> {
    let bad = CoreErrorKind::BadExt;
    let rd = |at: usize| -> Result<u32, CoreErrorKind> {
        let w = ext.get(at..at + 4).ok_or(bad("truncated"))?;
        Ok(u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
    };
    if ext.len() < 8 || u16::from_le_bytes([ext[0], ext[1]]) != 0xeb9f {
        return Err(bad("bad magic"));
    }
    let hdr_len = rd(4)? as usize;
    // The core_relo fields came with a 32-byte header.
    if hdr_len < 32 {
        return Ok(Vec::new());
    }
    let (off, len) = (rd(24)? as usize, rd(28)? as usize);
    if len == 0 {
        return Ok(Vec::new());
    }
    let start = hdr_len.checked_add(off).ok_or(bad("core_relo offset"))?;
    let end = start.checked_add(len).filter(|&e| e <= ext.len()).ok_or(bad("core_relo length"))?;
    let rec_size = rd(start)? as usize;
    if rec_size < 16 {
        return Err(bad("core_relo record size"));
    }
    let mut at = start + 4;
    let mut out = Vec::new();
    while at < end {
        let sec = btf.name(rd(at)?).map_err(|_| bad("section name"))?;
        let n = rd(at + 4)? as usize;
        at += 8;
        let body =
            n.checked_mul(rec_size).filter(|b| at + b <= end).ok_or(bad("core_relo records"))?;
        let mut relos = Vec::with_capacity(n);
        for r in (at..at + body).step_by(rec_size) {
            let insn_off = rd(r)? as usize;
            if !insn_off.is_multiple_of(8) {
                return Err(bad("instruction offset not on an instruction"));
            }
            let access = btf.name(rd(r + 8)?).map_err(|_| bad("access string"))?;
            relos.push(Relo { insn: insn_off / 8, type_id: rd(r + 4)?, access, kind: rd(r + 12)? });
        }
        at += body;
        out.push((sec, relos));
    }
    Ok(out)
}

/// libbpf's essential name: up to the last `___flavor` suffix.
fn essential(name: &str) -> &str {
    let b = name.as_bytes();
    let mut i = b.len().saturating_sub(4);
    loop {
        if i + 3 < b.len()
            && &b[i..i + 3] == b"___"
            && b[i + 3] != b'_'
            && (i == 0 || b[i - 1] != b'_')
        {
            return &name[..i];
        }
        if i == 0 {
            return name;
        }
        i -= 1;
    }
}

/// Target types by (BTF kind, essential name).
struct Index<'t> {
    btf: &'t Btf<'t>,
    by_name: HashMap<&'t str, Vec<(u32, u32)>>,
}

impl<'t> Index<'t> {
    fn new(btf: &'t Btf<'t>) -> Self {
        let mut by_name: HashMap<&str, Vec<(u32, u32)>> = HashMap::new();
        for id in 1..btf.count() {
            let name = btf.type_name(id);
            if !name.is_empty() {
                by_name.entry(essential(name)).or_default().push((btf.kind(id), id));
            }
        }
        Index { btf, by_name }
    }

    /// Target types of BTF kind `kind` whose essential name is `name`'s (libbpf
    /// matches kinds exactly).
    fn candidates(&self, kind: u32, name: &str) -> Vec<u32> {
        let all = self.by_name.get(essential(name)).map_or(&[][..], Vec::as_slice);
        all.iter().filter(|(k, _)| *k == kind).map(|&(_, id)| id).collect()
    }
}

/// Where a field access ends: bit offset from the root, the field's type, and the member
/// when the last step was one (for bitfields).
#[derive(Debug, Clone, Copy)]
struct Field {
    bit_offset: u64,
    ty: u32,
    bitfield_size: u32,
}

/// One step of an access: a member by index (local) or name (target), or an array index.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Member(&'a str),
    Index(u32),
}

fn parse_access(s: &str) -> Result<Vec<u32>, CoreErrorKind> {
    s.split(':')
        .map(|p| p.parse().map_err(|_| CoreErrorKind::BadAccess(s.to_string())))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| if v.is_empty() { Err(CoreErrorKind::BadAccess(s.into())) } else { Ok(v) })
}

fn members(t: &Type) -> Option<&[Member]> {
    match t {
        Type::Struct { members, .. } | Type::Union { members, .. } => Some(members),
        _ => None,
    }
}

/// Walks `raw` (indices) from local `root`: the field reached and the steps by name.
fn local_spec<'a>(
    btf: &Btf<'a>,
    root: u32,
    raw: &[u32],
) -> Result<(Field, Vec<Step<'a>>), CoreErrorKind> {
    let e = |_| CoreErrorKind::BadAccess(format!("{raw:?}"));
    let size = btf.resolve_size(root).map_err(e)?;
    let mut f =
        Field { bit_offset: u64::from(raw[0]) * u64::from(size) * 8, ty: root, bitfield_size: 0 };
    let mut steps = Vec::new();
    for &i in &raw[1..] {
        let (_, t) = btf.skip_mods(f.ty).map_err(e)?;
        if let Some(ms) = members(t) {
            let m =
                ms.get(i as usize).ok_or_else(|| CoreErrorKind::BadAccess(format!("{raw:?}")))?;
            f = Field {
                bit_offset: f.bit_offset + u64::from(m.bit_offset),
                ty: m.ty,
                bitfield_size: m.bitfield_size,
            };
            let name = btf.name(m.name).map_err(e)?;
            // Anonymous members are no step of their own: the target is searched through
            // its anonymous members by name.
            if !name.is_empty() {
                steps.push(Step::Member(name));
            }
        } else if let Type::Array { elem, .. } = t {
            let es = btf.resolve_size(*elem).map_err(e)?;
            f = Field {
                bit_offset: f.bit_offset + u64::from(i) * u64::from(es) * 8,
                ty: *elem,
                bitfield_size: 0,
            };
            steps.push(Step::Index(i));
        } else {
            return Err(CoreErrorKind::BadAccess(format!("{raw:?}")));
        }
    }
    Ok((f, steps))
}

/// Finds member `name` in composite `id` of `btf`, through anonymous members.
fn find_member(btf: &Btf<'_>, id: u32, name: &str, depth: usize) -> Option<Field> {
    if depth > crate::btf::MAX_DEPTH {
        return None;
    }
    let (_, t) = btf.skip_mods(id).ok()?;
    for m in members(t)? {
        let n = btf.name(m.name).ok()?;
        if n == name {
            return Some(Field {
                bit_offset: u64::from(m.bit_offset),
                ty: m.ty,
                bitfield_size: m.bitfield_size,
            });
        }
        if n.is_empty() {
            if let Some(inner) = find_member(btf, m.ty, name, depth + 1) {
                return Some(Field {
                    bit_offset: inner.bit_offset + u64::from(m.bit_offset),
                    ..inner
                });
            }
        }
    }
    None
}

/// libbpf's `bpf_core_fields_are_compat`: composites with composites, integers and enums
/// with each other, pointers, floats, arrays of compatible elements.
fn compatible(lb: &Btf<'_>, l: u32, tb: &Btf<'_>, t: u32, depth: usize) -> bool {
    if depth > crate::btf::MAX_DEPTH {
        return false;
    }
    let (Ok((_, lt)), Ok((_, tt))) = (lb.skip_mods(l), tb.skip_mods(t)) else { return false };
    match (lt, tt) {
        (Type::Struct { .. } | Type::Union { .. }, Type::Struct { .. } | Type::Union { .. }) => {
            true
        }
        (Type::Int { .. } | Type::Enum { .. }, Type::Int { .. } | Type::Enum { .. }) => true,
        (Type::Ptr { .. }, Type::Ptr { .. }) | (Type::Float { .. }, Type::Float { .. }) => true,
        (Type::Array { elem: a, .. }, Type::Array { elem: b, .. }) => {
            compatible(lb, *a, tb, *b, depth + 1)
        }
        _ => false,
    }
}

/// The target field for `steps` from target `root`, or `None` where the target lacks it.
fn target_field(
    lb: &Btf<'_>,
    local: Field,
    tb: &Btf<'_>,
    root: u32,
    raw0: u32,
    steps: &[Step<'_>],
) -> Option<Field> {
    let size = tb.resolve_size(root).ok()?;
    let mut f =
        Field { bit_offset: u64::from(raw0) * u64::from(size) * 8, ty: root, bitfield_size: 0 };
    for s in steps {
        match *s {
            Step::Member(name) => {
                let m = find_member(tb, f.ty, name, 0)?;
                f = Field { bit_offset: f.bit_offset + m.bit_offset, ..m };
            }
            Step::Index(i) => {
                let (_, t) = tb.skip_mods(f.ty).ok()?;
                let Type::Array { elem, nelems } = t else { return None };
                // A flexible array (0 elements) takes any index, as in libbpf.
                if *nelems != 0 && i >= *nelems {
                    return None;
                }
                let es = tb.resolve_size(*elem).ok()?;
                f = Field {
                    bit_offset: f.bit_offset + u64::from(i) * u64::from(es) * 8,
                    ty: *elem,
                    bitfield_size: 0,
                };
            }
        }
    }
    compatible(lb, local.ty, tb, f.ty, 0).then_some(f)
}

/// libbpf's `bpf_core_calc_field_relo` for one side.
fn field_value(btf: &Btf<'_>, f: Field, kind: Kind) -> Option<u64> {
    let (_, t) = btf.skip_mods(f.ty).ok()?;
    let size = u64::from(btf.resolve_size(f.ty).ok()?);
    if f.bitfield_size == 0 {
        return Some(match kind {
            Kind::FieldByteOffset => f.bit_offset / 8,
            Kind::FieldByteSize => size,
            Kind::FieldExists => 1,
            Kind::FieldSigned => u64::from(match t {
                Type::Int { signed, .. } | Type::Enum { signed, .. } => *signed,
                _ => false,
            }),
            Kind::FieldLshiftU64 => 64u64.checked_sub(size * 8)?,
            Kind::FieldRshiftU64 => 64u64.checked_sub(size * 8)?,
            _ => return None,
        });
    }
    // A bitfield: the smallest naturally aligned load of the member's type size (or
    // larger) that holds it, as libbpf computes it.
    let bits = u64::from(f.bitfield_size);
    let mut byte_sz = size.max(1);
    let mut byte_off = f.bit_offset / 8 / byte_sz * byte_sz;
    while f.bit_offset + bits - byte_off * 8 > byte_sz * 8 {
        if byte_sz >= 8 {
            return None;
        }
        byte_sz *= 2;
        byte_off = f.bit_offset / 8 / byte_sz * byte_sz;
    }
    Some(match kind {
        Kind::FieldByteOffset => byte_off,
        Kind::FieldByteSize => byte_sz,
        Kind::FieldExists => 1,
        Kind::FieldSigned => {
            u64::from(matches!(t, Type::Int { signed: true, .. } | Type::Enum { signed: true, .. }))
        }
        Kind::FieldLshiftU64 => 64 - (f.bit_offset + bits - byte_off * 8),
        Kind::FieldRshiftU64 => 64 - bits,
        _ => return None,
    })
}

/// What a relocation resolved to: the local value the instruction must hold (`None`:
/// not checked, as for bitfields, where clang and libbpf size the load differently) and
/// the target's (`None`: poison the instruction).
struct Resolved {
    local: Option<u64>,
    value: Option<u64>,
}

/// Resolves relocation `r` against `target`.
fn resolve(
    r: &Relo<'_>,
    kind: Kind,
    local: &Btf<'_>,
    target: &Index<'_>,
) -> Result<Resolved, CoreErrorKind> {
    let tb = target.btf;
    if kind == Kind::TypeIdLocal {
        let id = Some(u64::from(r.type_id));
        return Ok(Resolved { local: id, value: id });
    }
    let name = local.type_name(r.type_id);
    if name.is_empty() {
        return Err(CoreErrorKind::Anonymous(r.access.to_string()));
    }
    let cands = target.candidates(local.kind(r.type_id), name);
    let raw = parse_access(r.access)?;
    let mut found: Option<u64> = None;
    let mut agree = |v: u64| -> Result<(), CoreErrorKind> {
        match found {
            Some(a) if a != v => {
                Err(CoreErrorKind::Ambiguous { ty: name.into(), access: r.access.into(), a, b: v })
            }
            _ => {
                found = Some(v);
                Ok(())
            }
        }
    };
    let local_value;
    let mut validate = true;
    if kind.is_field() {
        let (lf, steps) = local_spec(local, r.type_id, &raw)?;
        local_value =
            field_value(local, lf, kind).ok_or(CoreErrorKind::BadAccess(r.access.into()))?;
        validate = lf.bitfield_size == 0;
        for &c in &cands {
            if let Some(tf) = target_field(local, lf, tb, c, raw[0], &steps) {
                if let Some(v) = field_value(tb, tf, kind) {
                    agree(v)?;
                }
            }
        }
    } else if kind.is_enum() {
        let (_, lt) =
            local.skip_mods(r.type_id).map_err(|_| CoreErrorKind::BadAccess(r.access.into()))?;
        let Type::Enum { values, names, .. } = lt else {
            return Err(CoreErrorKind::BadAccess(r.access.into()));
        };
        let i = raw[0] as usize;
        let (lv, ln) =
            values.get(i).zip(names.get(i)).ok_or(CoreErrorKind::BadAccess(r.access.into()))?;
        let ln = essential(local.name(*ln).unwrap_or(""));
        local_value = if kind == Kind::EnumvalExists { 1 } else { *lv };
        for &c in &cands {
            let Ok((_, Type::Enum { values, names, .. })) = tb.skip_mods(c) else { continue };
            if let Some(j) = names.iter().position(|n| essential(tb.name(*n).unwrap_or("")) == ln) {
                agree(if kind == Kind::EnumvalExists { 1 } else { values[j] })?;
            }
        }
    } else {
        local_value = match kind {
            Kind::TypeIdTarget => u64::from(r.type_id),
            Kind::TypeSize => u64::from(
                local
                    .resolve_size(r.type_id)
                    .map_err(|_| CoreErrorKind::BadAccess(r.access.into()))?,
            ),
            _ => 1,
        };
        for &c in &cands {
            if !compatible_types(local, r.type_id, tb, c) {
                continue;
            }
            agree(match kind {
                Kind::TypeIdTarget => u64::from(c),
                Kind::TypeSize => match tb.resolve_size(c) {
                    Ok(s) => u64::from(s),
                    Err(_) => continue,
                },
                _ => 1,
            })?;
        }
    }
    Ok(Resolved { local: validate.then_some(local_value), value: found.or_else(|| kind.missing()) })
}

/// Types match for the type-based relocations: same kind after modifiers, and for
/// composites the same kind (struct or union), as libbpf's `bpf_core_types_are_compat`
/// checks at the top level.
fn compatible_types(lb: &Btf<'_>, l: u32, tb: &Btf<'_>, t: u32) -> bool {
    let (Ok((_, lt)), Ok((_, tt))) = (lb.skip_mods(l), tb.skip_mods(t)) else { return false };
    matches!(
        (lt, tt),
        (Type::Struct { .. }, Type::Struct { .. })
            | (Type::Union { .. }, Type::Union { .. })
            | (Type::Int { .. }, Type::Int { .. })
            | (Type::Enum { .. }, Type::Enum { .. })
            | (Type::Ptr { .. }, Type::Ptr { .. })
            | (Type::Float { .. }, Type::Float { .. })
            | (Type::Array { .. }, Type::Array { .. })
            | (Type::Fwd, Type::Fwd)
            | (Type::FuncProto, Type::FuncProto)
    )
}

/// Writes `value` into instruction `pc`, after checking it holds `local`.
fn patch(
    insns: &mut [Insn],
    pc: usize,
    local: Option<u64>,
    value: Option<u64>,
) -> Result<(), CoreErrorKind> {
    let insn = *insns.get(pc).ok_or(CoreErrorKind::NoInsn(pc))?;
    let Some(value) = value else {
        let lddw = insn.is_lddw();
        insns[pc] = Insn::new(op::JMP | op::CALL, 0, 0, 0, POISON_HELPER);
        if lddw {
            // The second slot becomes a no-op jump.
            if let Some(next) = insns.get_mut(pc + 1) {
                *next = Insn::new(op::JMP | op::JA, 0, 0, 0, 0);
            }
        }
        return Ok(());
    };
    let class = insn.code & 0x07;
    let unexpected =
        |found: i64| CoreErrorKind::Unexpected { insn: pc, found, local: local.unwrap_or(0) };
    let holds = |v: u64| local.is_none_or(|l| l == v);
    match class {
        // ALU and ALU64 with an immediate: `r1 = 8`, `r1 += 8`.
        0x04 | 0x07 if insn.code & 0x08 == 0 => {
            if !holds(i64::from(insn.imm) as u64) && !holds(insn.imm as u32 as u64) {
                return Err(unexpected(i64::from(insn.imm)));
            }
            let imm =
                i32::try_from(value).map_err(|_| CoreErrorKind::TooBig { insn: pc, value })?;
            insns[pc].imm = imm;
        }
        // Loads and stores through a register: the offset.
        0x01..=0x03 => {
            if !holds(i64::from(insn.off) as u64) {
                return Err(unexpected(i64::from(insn.off)));
            }
            let off =
                i16::try_from(value).map_err(|_| CoreErrorKind::TooBig { insn: pc, value })?;
            insns[pc].off = off;
        }
        // `lddw`: the 64-bit immediate over both slots.
        0x00 if insn.is_lddw() => {
            let hi = insns.get(pc + 1).ok_or(CoreErrorKind::NoInsn(pc + 1))?.imm;
            let cur = u64::from(insn.imm as u32) | u64::from(hi as u32) << 32;
            if !holds(cur) {
                return Err(unexpected(cur as i64));
            }
            insns[pc].imm = value as u32 as i32;
            insns[pc + 1].imm = (value >> 32) as u32 as i32;
        }
        _ => return Err(CoreErrorKind::WrongInsn { insn: pc }),
    }
    Ok(())
}

/// Applies every CO-RE relocation of the object to its code sections, against `target`
/// (raw BTF bytes) or the object's own BTF. Returns how many were applied.
pub(crate) fn apply(
    elf: &Elf<'_>,
    code: &mut Code<'_>,
    target: Option<&[u8]>,
) -> Result<usize, ObjError> {
    let Some(ext) = elf.section_by_name(".BTF.ext") else { return Ok(0) };
    let Some(btf_sec) = elf.section_by_name(".BTF") else { return Ok(0) };
    let local = Btf::parse(btf_sec.data)?;
    let err = |section: &str, insn: usize, kind| ObjError::Core {
        section: section.to_string(),
        insn,
        kind,
    };
    let all = records(ext.data, &local).map_err(|k| err(".BTF.ext", 0, k))?;
    if all.iter().all(|(_, r)| r.is_empty()) {
        return Ok(0);
    }
    let target_btf = match target {
        Some(t) => Some(Btf::parse(t).map_err(|e| err(".BTF.ext", 0, CoreErrorKind::Target(e)))?),
        None => None,
    };
    let index = Index::new(target_btf.as_ref().unwrap_or(&local));
    let mut applied = 0;
    for (sec_name, relos) in &all {
        let Some(sec) = code.sections.iter_mut().find(|s| s.name == *sec_name) else { continue };
        for r in relos {
            let kind = Kind::from(r.kind)
                .ok_or_else(|| err(sec_name, r.insn, CoreErrorKind::UnknownKind(r.kind)))?;
            let res = resolve(r, kind, &local, &index).map_err(|k| err(sec_name, r.insn, k))?;
            patch(&mut sec.insns, r.insn, res.local, res.value)
                .map_err(|k| err(sec_name, r.insn, k))?;
            applied += 1;
        }
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn essential_names_drop_the_flavor() {
        assert_eq!(essential("task_struct___old"), "task_struct");
        assert_eq!(essential("task_struct"), "task_struct");
        assert_eq!(essential("a___b___c"), "a___b");
        assert_eq!(essential("____x"), "____x");
        assert_eq!(essential("x____y"), "x____y");
    }
}
