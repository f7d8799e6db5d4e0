//! BTF-defined maps: the variables of the `.maps` section, whose types encode the map
//! attributes (`__uint(type, ...)` is a pointer to an array of that many elements,
//! `__type(key, T)` a pointer to `T`, `__array(values, ...)` a trailing zero-sized array
//! of pointers), and their initial slots from `.rel.maps`. This follows libbpf's
//! `bpf_object__init_user_btf_map`, `parse_btf_map_def` and
//! `bpf_object__collect_map_relos`.

use std::collections::HashMap;

use crate::btf::{Btf, Member, Type, VAR_GLOBAL};
use crate::elf::{Elf, Section, R_BPF_64_64, R_BPF_64_ABS64, STT_OBJECT};
use crate::maps::{adjust_ringbuf_size, blank_spec, check, loader_defaults, MapDef};
use crate::progs::Code;
use crate::{
    map_type, BtfError, MapErrorKind, MapOrigin, MapSpec, ObjError, RelocErrorKind, SlotTarget,
};

const PIN_NONE: u32 = 0;
const PIN_BY_NAME: u32 = 1;

/// Attributes gathered from one definition struct.
#[derive(Debug, Default)]
struct Def {
    map_type: u32,
    key: Size,
    value: Size,
    max_entries: u32,
    flags: u32,
    numa_node: u32,
    pinning: u32,
    map_extra: u64,
    inner: Option<Box<Def>>,
    values_offset: Option<u64>,
    spin_lock: Option<u32>,
    timer: Option<u32>,
    key_type: u32,
    value_type: u32,
}

/// A key or value size, from `*_size` or from a type, which must agree.
#[derive(Debug, Default)]
struct Size(Option<u32>);

impl Size {
    fn set(
        &mut self,
        new: u32,
        field: &'static str,
        field_type: &'static str,
    ) -> Result<(), MapErrorKind> {
        match self.0 {
            Some(old) if old != new => Err(MapErrorKind::ConflictingSize {
                field,
                field_type,
                declared: old,
                computed: new.into(),
            }),
            _ => {
                self.0 = Some(new);
                Ok(())
            }
        }
    }
}

fn bad(field: &str, reason: &'static str) -> MapErrorKind {
    MapErrorKind::BadField { field: field.to_string(), reason }
}

fn btf_err(field: &str) -> impl Fn(BtfError) -> MapErrorKind + '_ {
    move |error| MapErrorKind::Btf { field: field.to_string(), error }
}

/// `__uint(name, n)`: a pointer to an array of `n` elements; returns `n`.
fn get_int(btf: &Btf<'_>, m: &Member, name: &str) -> Result<u32, MapErrorKind> {
    let (_, t) = btf.skip_mods(m.ty).map_err(btf_err(name))?;
    let Type::Ptr { target } = t else {
        return Err(bad(name, "expected __uint(): a pointer to an array"));
    };
    match btf.get(*target) {
        Some(Type::Array { nelems, .. }) => Ok(*nelems),
        _ => Err(bad(name, "expected __uint(): a pointer to an array")),
    }
}

/// `__ulong(name, n)` (a one-value enum) or `__uint(name, n)`.
fn get_long(btf: &Btf<'_>, m: &Member, name: &str) -> Result<u64, MapErrorKind> {
    let (_, t) = btf.skip_mods(m.ty).map_err(btf_err(name))?;
    match t {
        Type::Ptr { .. } => get_int(btf, m, name).map(u64::from),
        Type::Enum { values, .. } if values.len() == 1 => Ok(values[0]),
        _ => Err(bad(name, "expected __ulong(): a one-value enum")),
    }
}

/// `__type(name, T)`: a pointer to `T`; returns `sizeof(T)`.
fn get_type_size(btf: &Btf<'_>, m: &Member, name: &str) -> Result<u32, MapErrorKind> {
    match btf.get(m.ty) {
        Some(Type::Ptr { target }) => btf.resolve_size(*target).map_err(btf_err(name)),
        _ => Err(bad(name, "expected __type(): a pointer to the type")),
    }
}

/// The type id `T` of `__type(name, T)` (a pointer to `T`), 0 if it is not one.
fn pointee(btf: &Btf<'_>, m: &Member) -> u32 {
    match btf.get(m.ty) {
        Some(Type::Ptr { target }) => *target,
        _ => 0,
    }
}

/// Where the value type of `__type(value, T)` holds its `struct bpf_spin_lock`: `T`
/// itself, or one of its top-level members (the kernel's `btf_find_field` for
/// `BPF_SPIN_LOCK`); two locks are refused.
fn find_spin_lock(btf: &Btf<'_>, m: &Member) -> Result<Option<u32>, MapErrorKind> {
    find_field(btf, m, "bpf_spin_lock", 4, "one 4-byte aligned struct bpf_spin_lock at most")
}

/// Where the value type holds its `struct bpf_timer` (16 bytes, 8-aligned), found as
/// [`find_spin_lock`] finds the lock (`BPF_TIMER`); two timers are refused.
fn find_timer(btf: &Btf<'_>, m: &Member) -> Result<Option<u32>, MapErrorKind> {
    find_field(btf, m, "bpf_timer", 16, "one 8-byte aligned struct bpf_timer at most")
}

/// The offset of the one struct `name` of `size` bytes, aligned to `min(size, 8)`, that
/// is the value type or a top-level member of it.
fn find_field(
    btf: &Btf<'_>,
    m: &Member,
    name: &str,
    size: u32,
    refusal: &'static str,
) -> Result<Option<u32>, MapErrorKind> {
    let err = btf_err("value");
    let Some(Type::Ptr { target }) = btf.get(m.ty) else { return Ok(None) };
    let (id, ty) = btf.skip_mods(*target).map_err(err)?;
    let is_field = |id: u32, ty: &Type| {
        matches!(ty, Type::Struct { size: s, .. } if *s == size) && btf.type_name(id) == name
    };
    if is_field(id, ty) {
        return Ok(Some(0));
    }
    let Type::Struct { members, .. } = ty else { return Ok(None) };
    let align_bits = size.min(8) * 8;
    let mut found = None;
    for mem in members {
        let (mid, mty) = btf.skip_mods(mem.ty).map_err(btf_err("value"))?;
        if is_field(mid, mty) {
            if found.is_some() || mem.bitfield_size != 0 || mem.bit_offset % align_bits != 0 {
                return Err(bad("value", refusal));
            }
            found = Some(mem.bit_offset / 8);
        }
    }
    Ok(found)
}

fn is_map_in_map(t: u32) -> bool {
    t == map_type::ARRAY_OF_MAPS || t == map_type::HASH_OF_MAPS
}

/// Reads the members of the definition struct of map `map`. `outer` is false for the
/// inner map of a map-in-map, which may not nest further or be pinned.
fn parse_def(btf: &Btf<'_>, members: &[Member], map: &str, outer: bool) -> Result<Def, ObjError> {
    parse_members(btf, members, map, outer)
        .map_err(|kind| ObjError::Map { map: map.to_string(), kind })?
}

/// [`parse_def`] with the map's own errors unwrapped; an inner definition's errors come
/// back already wrapped, naming the inner map (`outer.inner`) as libbpf's do.
fn parse_members(
    btf: &Btf<'_>,
    members: &[Member],
    map: &str,
    outer: bool,
) -> Result<Result<Def, ObjError>, MapErrorKind> {
    let mut def = Def::default();
    for (i, m) in members.iter().enumerate() {
        let name = btf.name(m.name).map_err(btf_err("<member>"))?;
        match name {
            "type" => def.map_type = get_int(btf, m, name)?,
            "max_entries" => def.max_entries = get_int(btf, m, name)?,
            "map_flags" => def.flags = get_int(btf, m, name)?,
            "numa_node" => def.numa_node = get_int(btf, m, name)?,
            "key_size" => def.key.set(get_int(btf, m, name)?, "key_size", "key")?,
            "value_size" => def.value.set(get_int(btf, m, name)?, "value_size", "value")?,
            "key" => {
                def.key.set(get_type_size(btf, m, name)?, "key_size", "key")?;
                def.key_type = pointee(btf, m);
            }
            "value" => {
                def.value.set(get_type_size(btf, m, name)?, "value_size", "value")?;
                def.value_type = pointee(btf, m);
                def.spin_lock = find_spin_lock(btf, m)?;
                def.timer = find_timer(btf, m)?;
            }
            "pinning" => {
                if !outer {
                    return Err(bad(name, "an inner map definition cannot be pinned"));
                }
                def.pinning = get_int(btf, m, name)?;
                if def.pinning != PIN_NONE && def.pinning != PIN_BY_NAME {
                    return Err(MapErrorKind::BadPinning(def.pinning));
                }
            }
            "map_extra" => def.map_extra = get_long(btf, m, name)?,
            "values" => {
                if !outer {
                    return Err(bad(name, "multi-level inner maps are not supported"));
                }
                if i + 1 != members.len() {
                    return Err(bad(name, "must be the last member"));
                }
                let prog_array = def.map_type == map_type::PROG_ARRAY;
                if !is_map_in_map(def.map_type) && !prog_array {
                    return Err(MapErrorKind::ValuesNotAllowed);
                }
                def.value.set(4, "value_size", "values")?;
                let elem = match btf.get(m.ty) {
                    Some(Type::Array { elem, nelems: 0 }) => *elem,
                    _ => return Err(bad(name, "expected __array(): a zero-sized array")),
                };
                let Type::Ptr { target } = btf.skip_mods(elem).map_err(btf_err(name))?.1 else {
                    return Err(bad(name, "expected an array of pointers"));
                };
                let pointee = btf.skip_mods(*target).map_err(btf_err(name))?.1;
                match pointee {
                    Type::FuncProto if prog_array => {}
                    Type::Struct { members, .. } if !prog_array => {
                        match parse_def(btf, members, &format!("{map}.inner"), false) {
                            Ok(inner) => def.inner = Some(Box::new(inner)),
                            Err(e) => return Ok(Err(e)),
                        }
                    }
                    _ if prog_array => {
                        return Err(bad(name, "program-array values must point to functions"))
                    }
                    _ => return Err(bad(name, "inner map definition is not a struct")),
                }
            }
            other => return Err(MapErrorKind::UnknownField(other.to_string())),
        }
    }
    if def.map_type == 0 {
        return Err(MapErrorKind::MissingType);
    }
    if let Some(last) = members.last() {
        if btf.name(last.name) == Ok("values") {
            def.values_offset = Some(u64::from(last.bit_offset / 8));
        }
    }
    Ok(Ok(def))
}

fn to_spec(name: &str, def: &Def) -> Result<MapSpec, ObjError> {
    let mut spec = blank_spec(name, MapOrigin::Btf);
    spec.map_type = def.map_type;
    spec.key_size = def.key.0.unwrap_or(0);
    spec.value_size = def.value.0.unwrap_or(0);
    spec.max_entries = def.max_entries;
    if spec.map_type == map_type::RINGBUF {
        spec.max_entries = adjust_ringbuf_size(spec.max_entries);
    }
    spec.flags = def.flags;
    spec.pinning = def.pinning;
    spec.numa_node = def.numa_node;
    spec.map_extra = def.map_extra;
    spec.spin_lock = def.spin_lock;
    spec.timer = def.timer;
    spec.btf_key_type_id = def.key_type;
    spec.btf_value_type_id = def.value_type;
    loader_defaults(&mut spec);
    check(&spec).map_err(|kind| ObjError::Map { map: name.to_string(), kind })?;
    if let Some(inner) = &def.inner {
        spec.inner = Some(Box::new(to_spec(&format!("{name}.inner"), inner)?));
    }
    Ok(spec)
}

/// The maps of the `.maps` section, ordered by offset as libbpf orders them after
/// filling in the offsets and size that clang leaves zero in the `DATASEC`.
pub(crate) fn btf_maps(
    elf: &Elf<'_>,
    sec: &Section<'_>,
    btf: &Btf<'_>,
) -> Result<Vec<MapDef>, ObjError> {
    let (_, datasec_size, vars) =
        btf.datasec(sec.name).ok_or_else(|| BtfError::NoDatasec(sec.name.to_string()))?;
    let fixup = datasec_size == 0;
    // libbpf's find_elf_var_sym: the first global object symbol of that name.
    let mut globals = HashMap::new();
    for s in elf.symbols.iter().filter(|s| s.kind() == STT_OBJECT && s.is_global()) {
        globals.entry(s.name).or_insert(s);
    }
    let mut entries = Vec::with_capacity(vars.len());
    for (index, vi) in vars.iter().enumerate() {
        let Some(&Type::Var { target, linkage }) = btf.get(vi.ty) else {
            return Err(BtfError::NotAVar { section: sec.name.to_string(), index }.into());
        };
        let name = btf.type_name(vi.ty);
        if name.is_empty() {
            return Err(ObjError::Map {
                map: format!("#{index}"),
                kind: bad("name", "a map variable has no name"),
            });
        }
        // libbpf accepts only global maps: static ones were supported briefly and
        // then rejected, since maps are found by name.
        if linkage != VAR_GLOBAL {
            return Err(ObjError::Map {
                map: name.to_string(),
                kind: bad("linkage", "only global maps are supported (not static or extern)"),
            });
        }
        let sym = globals
            .get(name)
            .filter(|s| s.shndx as usize == sec.index)
            .ok_or_else(|| ObjError::Map { map: name.to_string(), kind: MapErrorKind::NoSymbol })?;
        let offset = if fixup { sym.value } else { u64::from(vi.offset) };
        entries.push((offset, u64::from(vi.size), name, target));
    }
    entries.sort_by_key(|e| e.0);

    let mut defs = Vec::with_capacity(entries.len());
    for (offset, size, name, target) in entries {
        let err = |kind| ObjError::Map { map: name.to_string(), kind };
        if offset.saturating_add(size) > sec.size {
            return Err(err(MapErrorKind::DefinitionOutOfBounds {
                offset,
                size,
                section_size: sec.size,
            }));
        }
        let (_, t) = btf.skip_mods(target).map_err(|e| err(btf_err("<definition>")(e)))?;
        let Type::Struct { size: def_size, members } = t else {
            return Err(err(MapErrorKind::NotStruct));
        };
        if u64::from(*def_size) > size {
            return Err(err(bad("<definition>", "struct is larger than its variable")));
        }
        let def = parse_def(btf, members, name, true)?;
        let spec = to_spec(name, &def)?;
        defs.push(MapDef {
            spec,
            section: sec.index,
            offset,
            extent: size,
            values_offset: def.values_offset,
        });
    }
    Ok(defs)
}

/// Reads `.rel.maps`: each pointer in the `values` array of a map-in-map or program
/// array becomes an initial slot. `defs` are the BTF maps, which start at index
/// `first` of the object's map list.
pub(crate) fn init_slots(
    elf: &Elf<'_>,
    rel_sec: &Section<'_>,
    maps_sec: &Section<'_>,
    defs: &mut [MapDef],
    first: usize,
    code: &Code<'_>,
) -> Result<(), ObjError> {
    for rel in elf.rels(rel_sec)? {
        let reloc_err = |symbol: String, kind| ObjError::Reloc {
            section: maps_sec.name.to_string(),
            offset: rel.offset,
            symbol,
            kind,
        };
        let sym = elf.symbol(rel.sym).ok_or_else(|| {
            reloc_err(
                format!("#{}", rel.sym),
                RelocErrorKind::SymbolOutOfRange {
                    index: rel.sym.into(),
                    count: elf.symbols.len(),
                },
            )
        })?;
        let sym_name = elf.symbol_display(sym);
        if rel.rtype != R_BPF_64_ABS64 && rel.rtype != R_BPF_64_64 {
            return Err(reloc_err(sym_name, RelocErrorKind::UnsupportedType(rel.rtype)));
        }
        // `defs` are sorted by offset: the candidate is the last one starting at or
        // before the pointer.
        let Some(j) = defs
            .partition_point(|d| d.offset <= rel.offset)
            .checked_sub(1)
            .filter(|&j| rel.offset.saturating_add(8) <= defs[j].offset + defs[j].extent)
        else {
            return Err(reloc_err(sym_name, RelocErrorKind::NoMapAt(rel.offset)));
        };
        let map = &defs[j];
        let map_name = map.spec.name.clone();
        let err = |kind| ObjError::Map { map: map_name.clone(), kind };
        let slot_err = |reason| err(MapErrorKind::BadSlot { offset: rel.offset, reason });
        let t = map.spec.map_type;
        let target = if is_map_in_map(t) {
            if sym.shndx as usize != maps_sec.index {
                return Err(slot_err("target is not a BTF-defined map"));
            }
            if t == map_type::HASH_OF_MAPS && map.spec.key_size != 4 {
                return Err(err(bad(
                    "key",
                    "a hash of maps with initial values needs 4-byte keys",
                )));
            }
            let found = defs
                .binary_search_by_key(&sym.value, |d| d.offset)
                .ok()
                .filter(|&k| defs[k].spec.name == sym.name);
            SlotTarget::Map(first + found.ok_or_else(|| slot_err("target is not a map"))?)
        } else if t == map_type::PROG_ARRAY {
            let name = code
                .entry_at(sym.shndx as usize, sym.value)
                .filter(|n| *n == sym.name)
                .ok_or_else(|| slot_err("target is not an entry-point program"))?;
            SlotTarget::Program(name.to_string())
        } else {
            return Err(err(MapErrorKind::ValuesNotAllowed));
        };
        let Some(values) = map.values_offset else {
            return Err(slot_err("definition has no trailing 'values' member"));
        };
        let rel_in_def = rel.offset - map.offset;
        if rel_in_def < values {
            return Err(slot_err("pointer lies before the 'values' member"));
        }
        if !(rel_in_def - values).is_multiple_of(8) {
            return Err(slot_err("pointer is not 8-byte aligned within 'values'"));
        }
        let slot = (rel_in_def - values) / 8;
        let max_entries = map.spec.max_entries;
        if slot >= u64::from(max_entries) {
            return Err(err(MapErrorKind::SlotOutOfRange { slot, max_entries }));
        }
        let slots = &mut defs[j].spec.init_slots;
        let slot = slot as u32;
        match slots.binary_search_by_key(&slot, |s| s.0) {
            Ok(k) => slots[k].1 = target,
            Err(k) => slots.insert(k, (slot, target)),
        }
    }
    Ok(())
}
