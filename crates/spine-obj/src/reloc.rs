//! Relocations of code sections, resolved to what each one means, as libbpf's
//! `bpf_object__collect_prog_relos` and `bpf_program__record_reloc` classify them:
//! a bpf-to-bpf call, the address of a function (a callback), a map, or a byte in a
//! global-data section. Relocations of other sections are not read here (`.rel.maps`
//! lives in `btf_maps`; `.BTF`, `.BTF.ext` and DWARF relocations are ignored).

use std::collections::BTreeMap;

use crate::elf::{
    Elf, Rel, Symbol, R_BPF_64_32, R_BPF_64_64, SHN_LORESERVE, SHN_UNDEF, SHT_REL, STT_FUNC,
    STT_SECTION,
};
use crate::maps::MapIndex;
use crate::progs::{Code, CodeSection};
use crate::{ObjError, RelocErrorKind};
use spine_isa::{op, INSN_SIZE};

/// What a relocated instruction refers to. Code locations are (position in
/// [`Code::sections`], instruction index in that section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// `lddw` of a legacy or BTF map: becomes `PSEUDO_MAP_FD`.
    Map(usize),
    /// `lddw` of a global-data byte: becomes `PSEUDO_MAP_VALUE`.
    MapValue { map: usize, offset: u32 },
    /// `lddw` of a function address: becomes `PSEUDO_FUNC`.
    FuncAddr { section: usize, insn: i64 },
    /// A bpf-to-bpf call.
    Call { section: usize, insn: i64 },
    /// A call to a kfunc spine offers: becomes a call of spine's number for it
    /// ([`spine_abi::kfunc`]).
    Kfunc(u32),
}

/// Resolved relocations of all code, by (section position, instruction index).
#[derive(Debug, Default)]
pub(crate) struct Relocs {
    pub map: BTreeMap<(usize, usize), Target>,
}

impl Relocs {
    pub fn get(&self, section: usize, insn: usize) -> Option<Target> {
        self.map.get(&(section, insn)).copied()
    }
}

/// Reads every REL section whose target is code.
pub(crate) fn collect(elf: &Elf<'_>, code: &Code<'_>, maps: &MapIndex) -> Result<Relocs, ObjError> {
    let mut relocs = Relocs::default();
    for rel_sec in elf.sections.iter().filter(|s| s.sh_type == SHT_REL) {
        let Some(target) = elf.section(rel_sec.info as usize) else {
            return Err(ObjError::BadSectionHeader {
                index: rel_sec.index,
                reason: "relocated section index (sh_info) out of range",
            });
        };
        if !target.is_code() {
            continue;
        }
        let Some(pos) = code.position(target.index) else { continue };
        for rel in elf.rels(rel_sec)? {
            record(elf, code, maps, pos, rel, &mut relocs)?;
        }
    }
    Ok(relocs)
}

fn record(
    elf: &Elf<'_>,
    code: &Code<'_>,
    maps: &MapIndex,
    pos: usize,
    rel: Rel,
    relocs: &mut Relocs,
) -> Result<(), ObjError> {
    let cs = &code.sections[pos];
    let err = |symbol: String, kind| ObjError::Reloc {
        section: cs.name.to_string(),
        offset: rel.offset,
        symbol,
        kind,
    };
    let sym = elf.symbol(rel.sym).ok_or_else(|| {
        err(
            format!("#{}", rel.sym),
            RelocErrorKind::SymbolOutOfRange { index: rel.sym.into(), count: elf.symbols.len() },
        )
    })?;
    let name = elf.symbol_display(sym);
    if !rel.offset.is_multiple_of(INSN_SIZE as u64) {
        return Err(err(name, RelocErrorKind::Misaligned));
    }
    let size = (cs.insns.len() * INSN_SIZE) as u64;
    if rel.offset >= size {
        return Err(err(name, RelocErrorKind::OutsideSection { size }));
    }
    let idx = (rel.offset / INSN_SIZE as u64) as usize;
    // Like libbpf, ignore relocations of instructions that belong to no function.
    if cs.function_containing(idx as i64).is_none() {
        return Ok(());
    }
    let insn = cs.insns[idx];
    let target = match rel.rtype {
        R_BPF_64_64 => {
            if !insn.is_lddw() {
                return Err(err(name, RelocErrorKind::NotLddw { code: insn.code }));
            }
            if idx + 1 >= cs.insns.len() {
                return Err(err(name, RelocErrorKind::OutsideSection { size }));
            }
            ld_target(elf, code, maps, pos, sym, i64::from(insn.imm))
        }
        R_BPF_64_32 => {
            if insn.code != op::JMP | op::CALL {
                return Err(err(name, RelocErrorKind::NotCall { code: insn.code }));
            }
            // A call to an undefined symbol is a kfunc call (libbpf resolves it by name
            // in the kernel's BTF): name that, not the opcode.
            if sym.shndx == SHN_UNDEF {
                let target = if XDP_METADATA_KFUNCS.contains(&name.as_str()) {
                    Err(RelocErrorKind::KfuncNeedsDevice)
                } else {
                    spine_abi::kfunc::by_name(&name).map(Target::Kfunc).ok_or(RelocErrorKind::Kfunc)
                };
                let target = target.map_err(|kind| err(name.clone(), kind))?;
                if relocs.map.insert((pos, idx), target).is_some() {
                    return Err(err(name, RelocErrorKind::Duplicate));
                }
                return Ok(());
            }
            if !insn.is_local_call() {
                return Err(err(name, RelocErrorKind::NotCall { code: insn.code }));
            }
            call_target(elf, code, pos, sym, i64::from(insn.imm))
        }
        t => Err(RelocErrorKind::UnsupportedType(t)),
    }
    .map_err(|kind| err(name.clone(), kind))?;
    if relocs.map.insert((pos, idx), target).is_some() {
        return Err(err(name, RelocErrorKind::Duplicate));
    }
    Ok(())
}

/// The kernel's XDP metadata kfuncs (`XDP_METADATA_KFUNC_xxx`), which only a program
/// bound to a device may call.
const XDP_METADATA_KFUNCS: [&str; 3] =
    ["bpf_xdp_metadata_rx_timestamp", "bpf_xdp_metadata_rx_hash", "bpf_xdp_metadata_rx_vlan_tag"];

/// The code section a call or function address may target: `.text`, or the section
/// of the instruction itself.
fn code_target<'c>(
    elf: &Elf<'_>,
    code: &'c Code<'_>,
    from: usize,
    sym: &Symbol<'_>,
) -> Result<Option<(usize, &'c CodeSection<'c>)>, RelocErrorKind> {
    if sym.shndx == SHN_UNDEF {
        return Err(RelocErrorKind::Extern);
    }
    if sym.shndx >= SHN_LORESERVE {
        return Err(RelocErrorKind::SpecialSection(sym.shndx));
    }
    let sec = elf.section(sym.shndx as usize).ok_or(RelocErrorKind::SpecialSection(sym.shndx))?;
    if !sec.is_code() {
        return Ok(None);
    }
    let pos = code
        .position(sec.index)
        .ok_or_else(|| RelocErrorKind::UnsupportedTarget(sec.name.to_string()))?;
    let target = &code.sections[pos];
    if target.prog_type.is_some() && pos != from {
        return Err(RelocErrorKind::CallIntoOtherSection(sec.name.to_string()));
    }
    Ok(Some((pos, target)))
}

/// A call's callee: the symbol's instruction plus `imm + 1`. For a global function
/// clang sets `imm = -1`; for a static one the symbol is the section and `imm` counts
/// from its start.
fn call_target(
    elf: &Elf<'_>,
    code: &Code<'_>,
    from: usize,
    sym: &Symbol<'_>,
    imm: i64,
) -> Result<Target, RelocErrorKind> {
    let Some((section, _)) = code_target(elf, code, from, sym)? else {
        let name = elf.section(sym.shndx as usize).map_or("", |s| s.name);
        return Err(RelocErrorKind::CallIntoData(name.to_string()));
    };
    if !sym.value.is_multiple_of(INSN_SIZE as u64) {
        return Err(RelocErrorKind::FunctionMisaligned(sym.value as i64));
    }
    let insn = (sym.value / INSN_SIZE as u64) as i64 + imm + 1;
    Ok(Target::Call { section, insn })
}

/// What an `lddw` loads: a function address, a map or a global-data byte.
fn ld_target(
    elf: &Elf<'_>,
    code: &Code<'_>,
    maps: &MapIndex,
    from: usize,
    sym: &Symbol<'_>,
    imm: i64,
) -> Result<Target, RelocErrorKind> {
    if let Some((section, _)) = code_target(elf, code, from, sym)? {
        let sec = elf.section(sym.shndx as usize).map_or("", |s| s.name);
        if sym.kind() != STT_FUNC && sym.kind() != STT_SECTION {
            return Err(RelocErrorKind::UnsupportedTarget(sec.to_string()));
        }
        let addr = i128::from(sym.value) + i128::from(imm);
        if addr < 0 || addr % INSN_SIZE as i128 != 0 {
            return Err(RelocErrorKind::FunctionMisaligned(addr as i64));
        }
        return Ok(Target::FuncAddr { section, insn: (addr / INSN_SIZE as i128) as i64 });
    }
    let shndx = sym.shndx as usize;
    if let Some((map, size)) = maps.data(shndx) {
        let offset = i128::from(sym.value) + i128::from(imm);
        if offset < 0 || offset >= i128::from(size) {
            let offset = offset.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            return Err(RelocErrorKind::ValueOffset { offset, size });
        }
        return Ok(Target::MapValue { map, offset: offset as u32 });
    }
    let sec = elf.section(shndx).map_or("", |s| s.name);
    if sec == "maps" || sec == ".maps" {
        // The definition at symbol + addend; clang's addend is 0 for (global) maps.
        let at = sym.value.wrapping_add(imm as u64);
        let map = maps.at(shndx, at).ok_or(RelocErrorKind::NoMapAt(at))?;
        return Ok(Target::Map(map));
    }
    Err(RelocErrorKind::UnsupportedTarget(sec.to_string()))
}
