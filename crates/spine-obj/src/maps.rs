//! The maps an object declares, in libbpf's order: legacy `maps` definitions, then
//! BTF-defined `.maps` (see `btf_maps`), then one array map per global-data section.
//! Each definition remembers where it lives in the ELF file so that relocations can
//! find it by (section, offset) as libbpf does.

use std::collections::HashMap;

use crate::elf::{Elf, Section, SHT_NOBITS, SHT_PROGBITS, STT_SECTION};
use crate::{map_type, MapErrorKind, MapOrigin, MapSpec, ObjError};
use spine_abi::map_flags;

/// Largest key a map may declare: keys are built on the 512-byte BPF stack.
pub const MAX_KEY_SIZE: u64 = 512;
/// Largest value a map (or a global-data section) may declare. It also bounds what the
/// loader allocates for a `.bss` section, whose size the file does not back.
pub const MAX_VALUE_SIZE: u64 = 1 << 20;

/// Most bytes all global-data maps may hold together: `.bss` sections are not backed by
/// the file, so their sizes alone must not decide what the loader allocates.
pub const MAX_GLOBAL_DATA: u64 = 16 * MAX_VALUE_SIZE;

/// `sizeof(struct bpf_map_def)` in libbpf: type, key_size, value_size, max_entries,
/// map_flags. Longer legacy definitions must be zero beyond it.
const LEGACY_DEF_SIZE: usize = 20;

/// libbpf rounds ring-buffer sizes to a power-of-two multiple of the page size;
/// spine's kernel reference is x86-64, whose pages are 4 KiB.
const PAGE_SIZE: u32 = 4096;

/// One map and the ELF bytes it was declared by.
#[derive(Debug, Clone)]
pub(crate) struct MapDef {
    pub spec: MapSpec,
    /// ELF index of the section holding the definition (or the data).
    pub section: usize,
    /// Byte offset of the definition in that section (0 for global data).
    pub offset: u64,
    /// Bytes the definition covers from `offset`.
    pub extent: u64,
    /// Byte offset, inside the definition, of a trailing `values` member.
    pub values_offset: Option<u64>,
}

/// Which kind of global data a section holds, by libbpf's naming rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataKind {
    Data,
    Rodata,
    Bss,
}

/// The global-data kind of `sec`, or `None` if it is not global data.
pub(crate) fn data_kind(sec: &Section<'_>) -> Option<DataKind> {
    let named = |base: &str| {
        sec.name == base || sec.name.strip_prefix(base).is_some_and(|r| r.starts_with('.'))
    };
    if sec.is_code() {
        return None;
    }
    match sec.sh_type {
        SHT_PROGBITS if named(".data") => Some(DataKind::Data),
        SHT_PROGBITS if named(".rodata") => Some(DataKind::Rodata),
        SHT_NOBITS if named(".bss") => Some(DataKind::Bss),
        _ => None,
    }
}

/// libbpf's `adjust_ringbuf_sz`: the smallest power-of-two multiple of the page size
/// that holds `sz`; 0 stays 0 so that the error is reported.
pub(crate) fn adjust_ringbuf_size(sz: u32) -> u32 {
    if sz == 0 || (sz.is_multiple_of(PAGE_SIZE) && (sz / PAGE_SIZE).is_power_of_two()) {
        return sz;
    }
    let mut mul: u32 = 1;
    while mul <= u32::MAX / PAGE_SIZE {
        if mul * PAGE_SIZE > sz {
            return mul * PAGE_SIZE;
        }
        mul <<= 1;
    }
    sz
}

/// Sizes a loader fills in where the definition leaves them out: a perf event array's
/// key and value are a CPU index and a perf event fd, 4 bytes each, the only sizes the
/// kernel takes; cilium/ebpf and goebpf create it so when the object gives 0 (libbpf
/// passes the 0 on and the kernel refuses it). Any other size is left for the checks.
pub(crate) fn loader_defaults(spec: &mut MapSpec) {
    if spec.map_type == map_type::PERF_EVENT_ARRAY {
        if spec.key_size == 0 {
            spec.key_size = 4;
        }
        if spec.value_size == 0 {
            spec.value_size = 4;
        }
    }
}

/// The checks every map specification must pass before anything is sized from it.
pub(crate) fn check(spec: &MapSpec) -> Result<(), MapErrorKind> {
    let t = spec.map_type;
    if t == 0 {
        return Err(MapErrorKind::MissingType);
    }
    if map_type::name(t) == "unknown" {
        return Err(MapErrorKind::UnknownType(t));
    }
    // A ring buffer has neither key nor value, a queue, stack or bloom filter no key;
    // everything else has both.
    let keyless = matches!(t, map_type::QUEUE | map_type::STACK | map_type::BLOOM_FILTER);
    if t != map_type::RINGBUF {
        if spec.key_size == 0 && !keyless {
            return Err(MapErrorKind::ZeroKeySize);
        }
        if spec.value_size == 0 {
            return Err(MapErrorKind::ZeroValueSize);
        }
    }
    if u64::from(spec.key_size) > MAX_KEY_SIZE {
        return Err(MapErrorKind::KeyTooLarge(spec.key_size.into()));
    }
    if u64::from(spec.value_size) > MAX_VALUE_SIZE {
        return Err(MapErrorKind::ValueTooLarge(spec.value_size.into()));
    }
    // max_entries 0 is allowed here, as libbpf opens such an object: its loader sets the
    // size before loading (`bpf_map__set_max_entries`); `check_sized` runs once the
    // sizes a caller gives ([`crate::ParseOptions::max_entries`]) are in.
    Ok(())
}

/// The size check that waits for the loader's sizes: every map but a perf event array
/// (which libbpf sizes to the number of CPUs when it creates it) needs entries.
pub(crate) fn check_sized(spec: &MapSpec) -> Result<(), MapErrorKind> {
    if spec.max_entries == 0 && spec.map_type != map_type::PERF_EVENT_ARRAY {
        return Err(MapErrorKind::ZeroMaxEntries);
    }
    spec.inner.as_deref().map_or(Ok(()), check_sized)
}

/// A map specification with every optional attribute absent.
pub(crate) fn blank_spec(name: &str, origin: MapOrigin) -> MapSpec {
    MapSpec {
        name: name.to_string(),
        map_type: 0,
        key_size: 0,
        value_size: 0,
        max_entries: 0,
        flags: 0,
        pinning: 0,
        numa_node: 0,
        map_extra: 0,
        initial: None,
        origin,
        inner: None,
        init_slots: Vec::new(),
        spin_lock: None,
        timer: None,
        btf_key_type_id: 0,
        btf_value_type_id: 0,
    }
}

fn map_err(map: &str, kind: MapErrorKind) -> ObjError {
    ObjError::Map { map: map.to_string(), kind }
}

/// Legacy `struct bpf_map_def` definitions in the `maps` section, as libbpf 0.x read
/// them: the section is split evenly between its symbols, one map per symbol, in
/// symbol-table order.
pub(crate) fn legacy_maps(elf: &Elf<'_>, sec: &Section<'_>) -> Result<Vec<MapDef>, ObjError> {
    let syms: Vec<_> = elf
        .symbols
        .iter()
        .filter(|s| s.shndx as usize == sec.index && s.kind() != STT_SECTION)
        .collect();
    let size = sec.data.len() as u64;
    if size == 0 || syms.is_empty() || !size.is_multiple_of(syms.len() as u64) {
        return Err(ObjError::BadSection {
            section: sec.name.to_string(),
            reason: "cannot split into equally sized map definitions, one per symbol",
        });
    }
    let def_size = size / syms.len() as u64;
    let mut defs = Vec::with_capacity(syms.len());
    for sym in syms {
        let name = sym.name;
        let end = sym.value.checked_add(def_size).filter(|&e| e <= size).ok_or_else(|| {
            map_err(name, MapErrorKind::LegacyTruncated { offset: sym.value, need: def_size, size })
        })?;
        let raw = &sec.data[sym.value as usize..end as usize];
        if raw.get(LEGACY_DEF_SIZE..).is_some_and(|tail| tail.iter().any(|&b| b != 0)) {
            return Err(map_err(name, MapErrorKind::UnsupportedOptions));
        }
        // A shorter definition leaves the missing fields zero, as libbpf's memcpy does.
        let field = |i: usize| {
            let mut w = [0u8; 4];
            for (k, b) in w.iter_mut().enumerate() {
                *b = raw.get(4 * i + k).copied().unwrap_or(0);
            }
            u32::from_le_bytes(w)
        };
        let mut spec = blank_spec(name, MapOrigin::Legacy);
        spec.map_type = field(0);
        spec.key_size = field(1);
        spec.value_size = field(2);
        spec.max_entries = field(3);
        spec.flags = field(4);
        if spec.map_type == map_type::RINGBUF {
            spec.max_entries = adjust_ringbuf_size(spec.max_entries);
        }
        loader_defaults(&mut spec);
        // An LPM trie is never preallocated and the kernel wants the flag that says so:
        // goebpf's loader (whose `BPF_MAP_DEF` maps are legacy definitions) adds it.
        if spec.map_type == map_type::LPM_TRIE {
            spec.flags |= map_flags::NO_PREALLOC;
        }
        check(&spec).map_err(|k| map_err(name, k))?;
        defs.push(MapDef {
            spec,
            section: sec.index,
            offset: sym.value,
            extent: def_size,
            values_offset: None,
        });
    }
    Ok(defs)
}

/// One single-element array map per non-empty global-data section, in section order;
/// the value is the section's bytes (zeros for `.bss`). Read-only data gets
/// `BPF_F_RDONLY_PROG`, as libbpf gives it.
pub(crate) fn global_data_maps(elf: &Elf<'_>) -> Result<Vec<MapDef>, ObjError> {
    let mut defs = Vec::new();
    let mut total = 0u64;
    for sec in &elf.sections {
        let Some(kind) = data_kind(sec) else { continue };
        if sec.size == 0 {
            continue;
        }
        let value_size = u32::try_from(sec.size)
            .ok()
            .filter(|&s| u64::from(s) <= MAX_VALUE_SIZE)
            .ok_or_else(|| map_err(sec.name, MapErrorKind::ValueTooLarge(sec.size)))?;
        total += sec.size;
        if total > MAX_GLOBAL_DATA {
            let kind = MapErrorKind::GlobalDataTooLarge { limit: MAX_GLOBAL_DATA };
            return Err(map_err(sec.name, kind));
        }
        let read_only = kind == DataKind::Rodata;
        let mut spec = blank_spec(
            sec.name,
            MapOrigin::GlobalData { section: sec.name.to_string(), read_only },
        );
        spec.map_type = map_type::ARRAY;
        spec.key_size = 4;
        spec.value_size = value_size;
        spec.max_entries = 1;
        spec.flags = if read_only { map_flags::RDONLY_PROG } else { 0 };
        spec.initial = Some(match kind {
            DataKind::Bss => vec![0; value_size as usize],
            _ => sec.data.to_vec(),
        });
        defs.push(MapDef {
            spec,
            section: sec.index,
            offset: 0,
            extent: sec.size,
            values_offset: None,
        });
    }
    Ok(defs)
}

/// Where relocations find maps: by (section, offset) for legacy and BTF maps, by
/// section for global data. Indices are those of [`crate::Object::maps`].
#[derive(Debug, Default)]
pub(crate) struct MapIndex {
    defs: HashMap<(usize, u64), usize>,
    data: HashMap<usize, (usize, u64)>,
}

impl MapIndex {
    pub fn new(defs: &[MapDef]) -> Self {
        let mut index = MapIndex::default();
        for (i, d) in defs.iter().enumerate() {
            if matches!(d.spec.origin, MapOrigin::GlobalData { .. }) {
                index.data.entry(d.section).or_insert((i, d.extent));
            } else {
                // The first of several definitions at one offset wins, as in libbpf.
                index.defs.entry((d.section, d.offset)).or_insert(i);
            }
        }
        index
    }

    /// The legacy or BTF map defined at exactly `offset` of section `section`.
    pub fn at(&self, section: usize, offset: u64) -> Option<usize> {
        self.defs.get(&(section, offset)).copied()
    }

    /// The global-data map of section `section`, with the section size.
    pub fn data(&self, section: usize) -> Option<(usize, u64)> {
        self.data.get(&section).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(t: u32, k: u32, v: u32, n: u32) -> MapSpec {
        let mut s = blank_spec("m", MapOrigin::Btf);
        (s.map_type, s.key_size, s.value_size, s.max_entries) = (t, k, v, n);
        s
    }

    #[test]
    fn checks_sizes_and_types() {
        use map_type::*;
        assert_eq!(check(&spec(HASH, 4, 8, 16)), Ok(()));
        assert_eq!(check(&spec(HASH, 4, 8, 0)), Ok(()), "sized later by the loader");
        assert_eq!(check_sized(&spec(HASH, 4, 8, 0)), Err(MapErrorKind::ZeroMaxEntries));
        assert_eq!(check_sized(&spec(PERF_EVENT_ARRAY, 4, 4, 0)), Ok(()));
        assert_eq!(check(&spec(0, 4, 8, 16)), Err(MapErrorKind::MissingType));
        assert_eq!(check(&spec(7, 4, 8, 16)), Err(MapErrorKind::UnknownType(7)));
        assert_eq!(check(&spec(999, 4, 8, 16)), Err(MapErrorKind::UnknownType(999)));
        assert_eq!(check(&spec(HASH, 0, 8, 16)), Err(MapErrorKind::ZeroKeySize));
        assert_eq!(check(&spec(HASH, 4, 0, 16)), Err(MapErrorKind::ZeroValueSize));
        assert_eq!(check(&spec(HASH, 513, 8, 1)), Err(MapErrorKind::KeyTooLarge(513)));
        assert_eq!(check(&spec(HASH, 512, 8, 1)), Ok(()));
        assert_eq!(
            check(&spec(ARRAY, 4, u32::MAX, 1)),
            Err(MapErrorKind::ValueTooLarge(u32::MAX as u64))
        );
        assert_eq!(check(&spec(RINGBUF, 0, 0, 4096)), Ok(()));
        assert_eq!(check_sized(&spec(RINGBUF, 0, 0, 0)), Err(MapErrorKind::ZeroMaxEntries));
        assert_eq!(check(&spec(PERF_EVENT_ARRAY, 4, 4, 0)), Ok(()));
        assert_eq!(check(&spec(QUEUE, 0, 8, 16)), Ok(()));
        assert_eq!(check(&spec(STACK, 0, 8, 16)), Ok(()));
        assert_eq!(check(&spec(STACK, 0, 0, 16)), Err(MapErrorKind::ZeroValueSize));
        assert_eq!(check(&spec(BLOOM_FILTER, 0, 4, 16)), Ok(()));
        assert_eq!(check(&spec(BLOOM_FILTER, 0, 0, 16)), Err(MapErrorKind::ZeroValueSize));
    }

    #[test]
    fn ringbuf_sizes_round_like_libbpf() {
        assert_eq!(adjust_ringbuf_size(0), 0);
        assert_eq!(adjust_ringbuf_size(1), 4096);
        assert_eq!(adjust_ringbuf_size(4096), 4096);
        assert_eq!(adjust_ringbuf_size(4097), 8192);
        assert_eq!(adjust_ringbuf_size(3 * 4096), 4 * 4096);
        assert_eq!(adjust_ringbuf_size(1 << 24), 1 << 24);
        // No power-of-two page multiple above it fits in u32: passed through.
        assert_eq!(adjust_ringbuf_size(u32::MAX), u32::MAX);
        assert_eq!(adjust_ringbuf_size((1 << 31) + 1), (1 << 31) + 1);
    }
}
