//! A bounds-checked reader for the one kind of ELF file a BPF object is: 64-bit,
//! little-endian, relocatable, machine `EM_BPF`. It reads section headers, section
//! names, the symbol table and REL entries, and nothing else.
//!
//! Every offset and size is checked against the file before use, so a view handed
//! out by [`Elf`] is always inside the input and the number of sections, symbols and
//! relocations is bounded by the file length.

use crate::ObjError;

pub(crate) const SHT_PROGBITS: u32 = 1;
pub(crate) const SHT_SYMTAB: u32 = 2;
pub(crate) const SHT_STRTAB: u32 = 3;
pub(crate) const SHT_RELA: u32 = 4;
pub(crate) const SHT_NOBITS: u32 = 8;
pub(crate) const SHT_REL: u32 = 9;

pub(crate) const SHF_EXECINSTR: u64 = 0x4;

pub(crate) const SHN_UNDEF: u16 = 0;
pub(crate) const SHN_LORESERVE: u16 = 0xff00;
const SHN_XINDEX: u16 = 0xffff;

pub(crate) const STB_GLOBAL: u8 = 1;
pub(crate) const STB_WEAK: u8 = 2;
pub(crate) const STT_OBJECT: u8 = 1;
pub(crate) const STT_FUNC: u8 = 2;
pub(crate) const STT_SECTION: u8 = 3;

/// `R_BPF_64_64`: the 64-bit immediate of `lddw`.
pub(crate) const R_BPF_64_64: u32 = 1;
/// `R_BPF_64_ABS64`: a 64-bit data pointer (newer LLVM; older LLVM used `R_BPF_64_64`).
pub(crate) const R_BPF_64_ABS64: u32 = 2;
/// `R_BPF_64_32`: the immediate of a bpf-to-bpf call.
pub(crate) const R_BPF_64_32: u32 = 10;

/// Longest section or symbol name accepted. Names are copied into every program and
/// error that mentions them, so their length must not multiply with the file size.
pub(crate) const MAX_NAME_LEN: usize = 1024;

const EM_BPF: u16 = 247;
const ET_REL: u16 = 1;
const EHDR_SIZE: usize = 64;
const SHDR_SIZE: usize = 64;
const SYM_SIZE: usize = 24;
const REL_SIZE: usize = 16;

/// One section. `data` is empty for `SHT_NOBITS` (whose `size` is still meaningful).
#[derive(Debug, Clone)]
pub(crate) struct Section<'a> {
    pub index: usize,
    pub name: &'a str,
    pub sh_type: u32,
    pub flags: u64,
    /// File offset of `data`.
    pub offset: u64,
    pub size: u64,
    pub link: u32,
    pub info: u32,
    pub entsize: u64,
    pub data: &'a [u8],
}

impl Section<'_> {
    /// Code: `SHT_PROGBITS` with `SHF_EXECINSTR`, as libbpf recognises it.
    pub fn is_code(&self) -> bool {
        self.sh_type == SHT_PROGBITS && self.flags & SHF_EXECINSTR != 0
    }
}

/// One symbol-table entry.
#[derive(Debug, Clone)]
pub(crate) struct Symbol<'a> {
    pub index: usize,
    pub name: &'a str,
    pub info: u8,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

impl Symbol<'_> {
    pub fn bind(&self) -> u8 {
        self.info >> 4
    }

    pub fn kind(&self) -> u8 {
        self.info & 0xf
    }

    /// Global or weak: visible to other objects, as libbpf requires of programs and
    /// of the variables behind BTF `DATASEC` entries.
    pub fn is_global(&self) -> bool {
        matches!(self.bind(), STB_GLOBAL | STB_WEAK)
    }
}

/// One `Elf64_Rel` entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rel {
    pub offset: u64,
    pub sym: u32,
    pub rtype: u32,
}

/// A parsed object: all section headers and the symbol table.
#[derive(Debug)]
pub(crate) struct Elf<'a> {
    pub sections: Vec<Section<'a>>,
    pub symbols: Vec<Symbol<'a>>,
    /// Index of the `SHT_SYMTAB` section, if any.
    pub symtab: Option<usize>,
}

fn u16_at(b: &[u8; 64], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The NUL-terminated UTF-8 string at `offset` of a string table, if there is one.
pub(crate) fn cstr(table: &[u8], offset: u64) -> Option<&str> {
    let start = usize::try_from(offset).ok()?;
    let tail = table.get(start..)?;
    let len = tail.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&tail[..len]).ok()
}

/// `bytes[start..start + len]`, or `Truncated` naming `what`.
fn range<'a>(bytes: &'a [u8], start: u64, len: u64, what: &str) -> Result<&'a [u8], ObjError> {
    let file_len = bytes.len() as u64;
    let truncated = |end| ObjError::Truncated { what: what.to_string(), start, end, len: file_len };
    let end = start.checked_add(len).ok_or_else(|| truncated(u64::MAX))?;
    if end > file_len {
        return Err(truncated(end));
    }
    // Both bounds are at most `bytes.len()`, so they fit in usize.
    Ok(&bytes[start as usize..end as usize])
}

impl<'a> Elf<'a> {
    /// Parses the headers and the symbol table, checking every range against the file.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ObjError> {
        const MAGIC: [u8; 4] = [0x7f, b'E', b'L', b'F'];
        let n = bytes.len().min(4);
        if bytes[..n] != MAGIC[..n] {
            return Err(ObjError::NotElf);
        }
        let hdr: &[u8; EHDR_SIZE] = range(bytes, 0, EHDR_SIZE as u64, "ELF header")?
            .try_into()
            .map_err(|_| ObjError::BadHeader("ELF header"))?;
        if hdr[4] != 2 {
            return Err(ObjError::WrongClass(hdr[4]));
        }
        if hdr[5] != 1 {
            return Err(ObjError::WrongEndian(hdr[5]));
        }
        let e_type = u16_at(hdr, 16);
        let machine = u16_at(hdr, 18);
        if machine != EM_BPF {
            return Err(ObjError::WrongMachine(machine));
        }
        if e_type != ET_REL {
            return Err(ObjError::NotRelocatable(e_type));
        }
        let shoff = u64_at(hdr, 40);
        let shentsize = u16_at(hdr, 58);
        let mut shnum = u64::from(u16_at(hdr, 60));
        let mut shstrndx = u16_at(hdr, 62) as u32;
        if shoff == 0 {
            if shnum != 0 {
                return Err(ObjError::BadHeader("section headers announced at offset 0"));
            }
            return Ok(Elf { sections: Vec::new(), symbols: Vec::new(), symtab: None });
        }
        if shentsize as usize != SHDR_SIZE {
            return Err(ObjError::BadHeader("e_shentsize is not 64"));
        }
        // Section 0 carries the real count and name-table index when they overflow
        // the header fields (SHN_XINDEX conventions).
        let first = range(bytes, shoff, SHDR_SIZE as u64, "section header 0")?;
        if shnum == 0 {
            shnum = u64_at(first, 32);
        }
        if shstrndx == u32::from(SHN_XINDEX) {
            shstrndx = u32_at(first, 40);
        }
        let table_len = shnum
            .checked_mul(SHDR_SIZE as u64)
            .ok_or(ObjError::BadHeader("section count overflows"))?;
        let table = range(bytes, shoff, table_len, "section header table")?;
        let headers: Vec<&[u8]> = table.chunks_exact(SHDR_SIZE).collect();
        if headers.is_empty() {
            return Ok(Elf { sections: Vec::new(), symbols: Vec::new(), symtab: None });
        }

        // The section name table first: every other section needs it for its name.
        let shstrndx = shstrndx as usize;
        let Some(strhdr) = headers.get(shstrndx).filter(|_| shstrndx != 0) else {
            return Err(ObjError::BadHeader("e_shstrndx is not a section"));
        };
        if u32_at(strhdr, 4) != SHT_STRTAB {
            return Err(ObjError::BadHeader("e_shstrndx is not a string table"));
        }
        let names = range(bytes, u64_at(strhdr, 24), u64_at(strhdr, 32), "section name table")?;

        let mut sections = Vec::with_capacity(headers.len());
        for (index, h) in headers.iter().enumerate() {
            let name_off = u64::from(u32_at(h, 0));
            let sh_type = u32_at(h, 4);
            let offset = u64_at(h, 24);
            let size = u64_at(h, 32);
            let name = if index == 0 {
                ""
            } else {
                cstr(names, name_off).ok_or_else(|| ObjError::BadString {
                    table: "section names".to_string(),
                    offset: name_off,
                })?
            };
            if name.len() > MAX_NAME_LEN {
                return Err(ObjError::BadSectionHeader { index, reason: "name too long" });
            }
            let data = if index == 0 || sh_type == SHT_NOBITS || sh_type == 0 {
                &[][..]
            } else {
                if offset.checked_add(size).is_none() {
                    return Err(ObjError::BadSectionHeader {
                        index,
                        reason: "offset + size overflows",
                    });
                }
                range(bytes, offset, size, &format!("section '{name}'"))?
            };
            sections.push(Section {
                index,
                name,
                sh_type,
                flags: u64_at(h, 8),
                offset,
                size,
                link: u32_at(h, 40),
                info: u32_at(h, 44),
                entsize: u64_at(h, 56),
                data,
            });
        }

        check_overlaps(&sections)?;
        let mut symtab = None;
        for s in &sections {
            if s.sh_type == SHT_SYMTAB {
                if symtab.is_some() {
                    return Err(ObjError::MultipleSymbolTables);
                }
                symtab = Some(s.index);
            }
        }
        let symbols = match symtab {
            Some(i) => read_symbols(&sections, &sections[i])?,
            None => Vec::new(),
        };
        Ok(Elf { sections, symbols, symtab })
    }

    /// The section with ELF index `index`.
    pub fn section(&self, index: usize) -> Option<&Section<'a>> {
        self.sections.get(index)
    }

    /// The first section called `name`.
    pub fn section_by_name(&self, name: &str) -> Option<&Section<'a>> {
        self.sections.iter().find(|s| s.name == name)
    }

    /// The symbol with index `index` (0 is the null symbol).
    pub fn symbol(&self, index: u32) -> Option<&Symbol<'a>> {
        self.symbols.get(index as usize)
    }

    /// Name for messages: a section symbol's section name (libbpf's convention for
    /// relocations against static functions and data), else the symbol's own name.
    pub fn symbol_display(&self, sym: &Symbol<'a>) -> String {
        if sym.kind() == STT_SECTION && sym.name.is_empty() {
            if let Some(s) = self.section(sym.shndx as usize) {
                return s.name.to_string();
            }
        }
        sym.name.to_string()
    }

    /// The entries of a `SHT_REL` section.
    pub fn rels(&self, sec: &Section<'a>) -> Result<impl Iterator<Item = Rel> + 'a, ObjError> {
        if sec.entsize != REL_SIZE as u64 || !sec.data.len().is_multiple_of(REL_SIZE) {
            return Err(ObjError::BadSection {
                section: sec.name.to_string(),
                reason: "entry size is not 16 (Elf64_Rel)",
            });
        }
        let data: &'a [u8] = sec.data;
        Ok(data.chunks_exact(REL_SIZE).map(|r| {
            let info = u64_at(r, 8);
            Rel { offset: u64_at(r, 0), sym: (info >> 32) as u32, rtype: info as u32 }
        }))
    }
}

/// Refuses sections whose file bytes overlap: no linker produces them, and without
/// this rule many headers naming the same bytes would multiply what the loader copies.
fn check_overlaps(sections: &[Section<'_>]) -> Result<(), ObjError> {
    let mut ranges: Vec<(u64, u64, usize)> = sections
        .iter()
        .filter(|s| !s.data.is_empty())
        .map(|s| (s.offset, s.offset + s.data.len() as u64, s.index))
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(ObjError::BadSectionHeader {
                index: w[1].2,
                reason: "data overlaps another section",
            });
        }
    }
    Ok(())
}

fn read_symbols<'a>(
    sections: &[Section<'a>],
    symtab: &Section<'a>,
) -> Result<Vec<Symbol<'a>>, ObjError> {
    let bad = |reason| ObjError::BadSection { section: symtab.name.to_string(), reason };
    if symtab.entsize != SYM_SIZE as u64 || !symtab.data.len().is_multiple_of(SYM_SIZE) {
        return Err(bad("entry size is not 24 (Elf64_Sym)"));
    }
    let strtab = sections
        .get(symtab.link as usize)
        .filter(|s| s.index != 0 && s.sh_type == SHT_STRTAB)
        .ok_or_else(|| bad("sh_link is not a string table"))?;
    let mut symbols = Vec::with_capacity(symtab.data.len() / SYM_SIZE);
    for (index, e) in symtab.data.chunks_exact(SYM_SIZE).enumerate() {
        let name_off = u64::from(u32_at(e, 0));
        let name = cstr(strtab.data, name_off).ok_or_else(|| ObjError::BadString {
            table: strtab.name.to_string(),
            offset: name_off,
        })?;
        if name.len() > MAX_NAME_LEN {
            return Err(ObjError::BadSymbol { index, reason: "name too long" });
        }
        let shndx = u16::from_le_bytes([e[6], e[7]]);
        if shndx == SHN_XINDEX {
            return Err(ObjError::BadSymbol { index, reason: "extended section index" });
        }
        if shndx != SHN_UNDEF && shndx < SHN_LORESERVE && shndx as usize >= sections.len() {
            return Err(ObjError::BadSymbol { index, reason: "section index out of range" });
        }
        symbols.push(Symbol {
            index,
            name,
            info: e[4],
            shndx,
            value: u64_at(e, 8),
            size: u64_at(e, 16),
        });
    }
    Ok(symbols)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cstr_needs_terminator_and_bounds() {
        let t = b"\0abc\0de";
        assert_eq!(cstr(t, 0), Some(""));
        assert_eq!(cstr(t, 1), Some("abc"));
        assert_eq!(cstr(t, 2), Some("bc"));
        assert_eq!(cstr(t, 5), None, "no NUL before the end");
        assert_eq!(cstr(t, 7), None);
        assert_eq!(cstr(t, u64::MAX), None);
        assert_eq!(cstr(b"\xff\0", 0), None, "not UTF-8");
    }

    #[test]
    fn header_checks_in_order() {
        assert_eq!(
            Elf::parse(b"").unwrap_err(),
            ObjError::Truncated { what: "ELF header".into(), start: 0, end: 64, len: 0 }
        );
        assert_eq!(
            Elf::parse(b"\x7fEL").unwrap_err(),
            ObjError::Truncated { what: "ELF header".into(), start: 0, end: 64, len: 3 }
        );
        assert_eq!(Elf::parse(b"MZ\x90\0").unwrap_err(), ObjError::NotElf);
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 1;
        assert_eq!(Elf::parse(&h).unwrap_err(), ObjError::WrongClass(1));
        h[4] = 2;
        h[5] = 2;
        assert_eq!(Elf::parse(&h).unwrap_err(), ObjError::WrongEndian(2));
        h[5] = 1;
        h[18] = 62;
        assert_eq!(Elf::parse(&h).unwrap_err(), ObjError::WrongMachine(62));
        h[18] = 247;
        h[16] = 2;
        assert_eq!(Elf::parse(&h).unwrap_err(), ObjError::NotRelocatable(2));
        h[16] = 1;
        // No section headers at all: an empty object.
        let elf = Elf::parse(&h).unwrap();
        assert!(elf.sections.is_empty() && elf.symbols.is_empty());
        // Section headers beyond the end of the file.
        h[40] = 0x40;
        h[58] = 64;
        h[60] = 3;
        assert!(matches!(
            Elf::parse(&h).unwrap_err(),
            ObjError::Truncated { start: 64, end: 128, len: 64, .. }
        ));
    }
}
