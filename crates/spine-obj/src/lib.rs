//! Loads eBPF ELF objects built by `clang -O2 -g -target bpf` exactly as libbpf
//! interprets them, without I/O or syscalls: [`parse`] turns bytes into an [`Object`]
//! whose programs are self-contained (bpf-to-bpf callees appended, calls and map
//! references resolved) and whose maps are plain specifications.
//!
//! The object is untrusted input: every offset, size and index is checked before use,
//! allocations are bounded by the file length or by fixed limits (`.bss` by
//! [`maps::MAX_GLOBAL_DATA`], linked code by [`MAX_TOTAL_INSNS`]), and every refusal is
//! an [`ObjError`] naming what is wrong.
//!
//! Layout: `elf` (sections, symbols, relocations), `btf` (the type graph), `maps`
//! (legacy and global-data maps, shared checks), `btf_maps` (`.maps` and its initial
//! slots), `progs` (code sections, functions, program types), `reloc` (what each code
//! relocation means) and `link` (program assembly).
#![deny(unsafe_code)]

mod btf;
mod btf_fixup;
mod btf_format;
mod btf_maps;
mod core;
mod elf;
mod error;
mod link;
pub mod maps;
mod model;
mod progs;
mod reloc;
mod synthetic;

pub use crate::btf_format::BtfFormatter;
pub use crate::core::{CoreErrorKind, POISON_HELPER};
pub use error::*;
pub use link::{MAX_INSNS, MAX_TOTAL_INSNS};
pub use model::*;
pub use synthetic::synthetic;

use elf::{Elf, SHT_PROGBITS, SHT_REL, SHT_RELA};

/// libbpf keeps at most 63 bytes of the license.
const MAX_LICENSE: usize = 63;

/// Parses an eBPF object file. Never panics and never allocates more than the input
/// justifies; a malformed object is an error naming the offending section, symbol,
/// map or instruction.
pub fn parse(bytes: &[u8]) -> Result<Object, ObjError> {
    parse_with(bytes, &ParseOptions::default())
}

/// [`parse`], with program types given for sections by the user.
pub fn parse_with(bytes: &[u8], options: &ParseOptions) -> Result<Object, ObjError> {
    let elf = Elf::parse(bytes)?;
    if let Some(s) = elf.sections.iter().find(|s| s.sh_type == SHT_RELA) {
        return Err(ObjError::RelaUnsupported { section: s.name.to_string() });
    }
    if let Some(s) = elf.section_by_name(".BTF").filter(|s| s.sh_type != SHT_PROGBITS) {
        return Err(ObjError::BadSection { section: s.name.to_string(), reason: "not PROGBITS" });
    }
    let mut code = progs::Code::collect(&elf, &options.section_types)?;
    crate::core::apply(&elf, &mut code, options.target_btf.as_deref())?;

    let mut defs = Vec::new();
    if let Some(sec) = elf.section_by_name("maps") {
        defs.extend(maps::legacy_maps(&elf, sec)?);
    }
    if let Some(sec) = elf.section_by_name(".maps") {
        let data = elf
            .section_by_name(".BTF")
            .ok_or_else(|| BtfError::Missing(sec.name.to_string()))?
            .data;
        let btf = btf::Btf::parse(data)?;
        let first = defs.len();
        defs.extend(btf_maps::btf_maps(&elf, sec, &btf)?);
        let rel_maps = elf.sections.iter().filter(|r| r.sh_type == SHT_REL);
        for rel in rel_maps.filter(|r| r.info as usize == sec.index) {
            btf_maps::init_slots(&elf, rel, sec, &mut defs[first..], first, &code)?;
        }
    }
    defs.extend(maps::global_data_maps(&elf)?);
    for (name, n) in &options.max_entries {
        let Some(d) = defs.iter_mut().find(|d| &d.spec.name == name) else {
            let maps: Vec<&str> = defs.iter().map(|d| d.spec.name.as_str()).collect();
            return Err(ObjError::NoSuchMap { map: name.clone(), maps: maps.join(", ") });
        };
        d.spec.max_entries = *n;
    }
    for d in &defs {
        let map = || d.spec.name.clone();
        maps::check_sized(&d.spec).map_err(|kind| ObjError::Map { map: map(), kind })?;
    }

    let relocs = reloc::collect(&elf, &code, &maps::MapIndex::new(&defs))?;
    let mut programs = Vec::new();
    let mut budget = MAX_TOTAL_INSNS;
    for (s, f, t) in code.entries() {
        let p = link::link(&code, &relocs, (s, f), t, budget)?;
        budget -= p.insns.len();
        programs.push(p);
    }

    Ok(Object {
        license: license(&elf),
        programs,
        maps: defs.into_iter().map(|d| d.spec).collect(),
        skipped: code.skipped(),
        btf: btf_fixup::kernel_btf(&elf).map(std::sync::Arc::from),
    })
}

/// The `license` section up to its first NUL, at most 63 bytes as libbpf keeps it.
fn license(elf: &Elf<'_>) -> String {
    let Some(sec) = elf.section_by_name("license") else { return String::new() };
    let text = sec.data.split(|&b| b == 0).next().unwrap_or(&[]);
    String::from_utf8_lossy(&text[..text.len().min(MAX_LICENSE)]).into_owned()
}
