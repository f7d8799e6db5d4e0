//! The object's BTF made loadable by the kernel, as libbpf's `btf_fixup_datasec`
//! makes it: clang leaves each `DATASEC` (`.maps`, `.data`, `license`, ...) with size 0
//! and every variable at offset 0, which the kernel's BTF checks refuse. Each data
//! section gets its ELF section's size and each variable its symbol's offset, sorted by
//! offset. Pure byte rewriting; loading is the caller's (spine-sys).

use crate::elf::{cstr, Elf};

const KIND_INT: u32 = 1;
const KIND_ARRAY: u32 = 3;
const KIND_STRUCT: u32 = 4;
const KIND_UNION: u32 = 5;
const KIND_ENUM: u32 = 6;
const KIND_FUNC_PROTO: u32 = 13;
const KIND_VAR: u32 = 14;
const KIND_DATASEC: u32 = 15;
const KIND_DECL_TAG: u32 = 17;
const KIND_ENUM64: u32 = 19;

fn rd32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn wr32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// Bytes following a type's 12-byte header.
fn extra(kind: u32, vlen: usize) -> Option<usize> {
    Some(match kind {
        KIND_INT | KIND_VAR | KIND_DECL_TAG => 4,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION | KIND_DATASEC | KIND_ENUM64 => vlen * 12,
        KIND_ENUM | KIND_FUNC_PROTO => vlen * 8,
        2 | 7..=12 | 16 | 18 => 0,
        _ => return None,
    })
}

/// The `.BTF` section of `elf` with its data sections fixed up; `None` if the object
/// has no BTF, or BTF this walk cannot read (little-endian only, known kinds; the
/// parser proper reports what is wrong with it), or a variable whose symbol is missing.
pub(crate) fn kernel_btf(elf: &Elf<'_>) -> Option<Vec<u8>> {
    let mut btf = elf.section_by_name(".BTF")?.data.to_vec();
    if btf.get(..2)? != 0xeb9fu16.to_le_bytes() {
        return None;
    }
    let hdr_len = rd32(&btf, 4)? as usize;
    let type_start = hdr_len.checked_add(rd32(&btf, 8)? as usize)?;
    let type_end = type_start.checked_add(rd32(&btf, 12)? as usize)?;
    let str_start = hdr_len.checked_add(rd32(&btf, 16)? as usize)?;
    let str_end = str_start.checked_add(rd32(&btf, 20)? as usize)?;
    let strings = btf.get(str_start..str_end)?.to_vec();
    let name = |off: u32| cstr(&strings, u64::from(off));
    if type_end > btf.len() {
        return None;
    }
    // Offsets of every type (id 1 first) and of each DATASEC.
    let mut at = type_start;
    let mut offsets = Vec::new();
    let mut datasecs = Vec::new();
    while at < type_end {
        let info = rd32(&btf, at + 4)?;
        let kind = (info >> 24) & 0x1f;
        let vlen = (info & 0xffff) as usize;
        offsets.push(at);
        if kind == KIND_DATASEC {
            datasecs.push(at);
        }
        at = at.checked_add(12 + extra(kind, vlen)?)?;
    }
    if at != type_end {
        return None;
    }
    for ds in datasecs {
        let sec_name = name(rd32(&btf, ds)?)?;
        let Some(sec) = elf.section_by_name(sec_name) else { continue };
        wr32(&mut btf, ds + 8, u32::try_from(sec.size).ok()?);
        let vlen = (rd32(&btf, ds + 4)? & 0xffff) as usize;
        let mut vars = Vec::with_capacity(vlen);
        for v in 0..vlen {
            let e = ds + 12 + v * 12;
            let (ty, size) = (rd32(&btf, e)?, rd32(&btf, e + 8)?);
            let var_at = *offsets.get((ty as usize).checked_sub(1)?)?;
            if (rd32(&btf, var_at + 4)? >> 24) & 0x1f != KIND_VAR {
                continue;
            }
            let var_name = name(rd32(&btf, var_at)?)?;
            let sym = elf
                .symbols
                .iter()
                .find(|s| usize::from(s.shndx) == sec.index && s.name == var_name)?;
            vars.push((u32::try_from(sym.value).ok()?, ty, size));
        }
        vars.sort_unstable();
        for (v, (off, ty, size)) in vars.into_iter().enumerate() {
            let e = ds + 12 + v * 12;
            wr32(&mut btf, e, ty);
            wr32(&mut btf, e + 4, off);
            wr32(&mut btf, e + 8, size);
        }
    }
    Some(btf)
}
