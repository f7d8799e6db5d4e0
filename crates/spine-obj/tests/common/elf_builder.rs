//! Builds small BPF ELF objects by hand, so malformed-input tests can construct exactly
//! the defect they are about, and patch helpers for compiled objects.

use spine_isa::Insn;

pub const SHT_PROGBITS: u32 = 1;
pub const SHT_SYMTAB: u32 = 2;
pub const SHT_STRTAB: u32 = 3;
pub const SHT_RELA: u32 = 4;
pub const SHT_NOBITS: u32 = 8;
pub const SHT_REL: u32 = 9;
pub const SHF_WRITE: u64 = 1;
pub const SHF_ALLOC: u64 = 2;
pub const SHF_EXECINSTR: u64 = 4;
pub const STB_LOCAL: u8 = 0;
pub const STB_GLOBAL: u8 = 1;
pub const STT_NOTYPE: u8 = 0;
pub const STT_OBJECT: u8 = 1;
pub const STT_FUNC: u8 = 2;
pub const STT_SECTION: u8 = 3;
pub const R_BPF_64_64: u32 = 1;
pub const R_BPF_64_ABS64: u32 = 2;
pub const R_BPF_64_32: u32 = 10;

/// A section header: (name, type, flags, offset, size, link, info, entsize).
type Shdr = (u32, u32, u64, u64, u64, u32, u32, u64);

#[derive(Debug, Clone)]
pub struct SecSpec {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub data: Vec<u8>,
    /// Size of a NOBITS section.
    pub nobits_size: u64,
    /// `sh_link`; `None` links a REL section to the symbol table.
    pub link: Option<u32>,
    pub info: u32,
    pub entsize: u64,
}

#[derive(Debug, Clone)]
pub struct SymSpec {
    pub name: String,
    pub bind: u8,
    pub kind: u8,
    pub shndx: u16,
    pub value: u64,
    pub size: u64,
}

/// An object under construction. Sections get ELF indices from 1 in the order they
/// are added; `.symtab`, `.strtab` and `.shstrtab` follow them. Symbols get indices
/// from 1 (0 is the null symbol).
#[derive(Debug, Clone, Default)]
pub struct ElfBuilder {
    pub sections: Vec<SecSpec>,
    pub symbols: Vec<SymSpec>,
    pub no_symtab: bool,
}

impl ElfBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn section(&mut self, name: &str, sh_type: u32, flags: u64, data: &[u8]) -> u16 {
        self.sections.push(SecSpec {
            name: name.to_string(),
            sh_type,
            flags,
            data: data.to_vec(),
            nobits_size: 0,
            link: Some(0),
            info: 0,
            entsize: 0,
        });
        self.sections.len() as u16
    }

    pub fn code(&mut self, name: &str, insns: &[Insn]) -> u16 {
        self.section(name, SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, &Insn::encode_all(insns))
    }

    pub fn data(&mut self, name: &str, bytes: &[u8]) -> u16 {
        self.section(name, SHT_PROGBITS, SHF_ALLOC | SHF_WRITE, bytes)
    }

    pub fn bss(&mut self, name: &str, size: u64) -> u16 {
        let i = self.section(name, SHT_NOBITS, SHF_ALLOC | SHF_WRITE, &[]);
        self.sections[i as usize - 1].nobits_size = size;
        i
    }

    pub fn symbol(
        &mut self,
        name: &str,
        bind: u8,
        kind: u8,
        shndx: u16,
        value: u64,
        size: u64,
    ) -> u32 {
        self.symbols.push(SymSpec { name: name.to_string(), bind, kind, shndx, value, size });
        self.symbols.len() as u32
    }

    /// A global function of `len` instructions starting at instruction `start`.
    pub fn func(&mut self, name: &str, shndx: u16, start: u64, len: u64) -> u32 {
        self.symbol(name, STB_GLOBAL, STT_FUNC, shndx, start * 8, len * 8)
    }

    /// A global object symbol.
    pub fn object(&mut self, name: &str, shndx: u16, value: u64, size: u64) -> u32 {
        self.symbol(name, STB_GLOBAL, STT_OBJECT, shndx, value, size)
    }

    /// The local section symbol of section `shndx`.
    pub fn section_symbol(&mut self, shndx: u16) -> u32 {
        self.symbol("", STB_LOCAL, STT_SECTION, shndx, 0, 0)
    }

    /// A REL section for `target` with entries (offset, symbol, type).
    pub fn rel(&mut self, target: u16, entries: &[(u64, u32, u32)]) -> u16 {
        let mut data = Vec::new();
        for &(off, sym, ty) in entries {
            data.extend_from_slice(&off.to_le_bytes());
            data.extend_from_slice(&((u64::from(sym) << 32) | u64::from(ty)).to_le_bytes());
        }
        let name = format!(".rel{}", self.sections[target as usize - 1].name);
        let i = self.section(&name, SHT_REL, 0, &data);
        let s = &mut self.sections[i as usize - 1];
        s.link = None;
        s.info = u32::from(target);
        s.entsize = 16;
        i
    }

    /// ELF index of the symbol table in the built file.
    pub fn symtab_index(&self) -> u32 {
        self.sections.len() as u32 + 1
    }

    pub fn build(&self) -> Vec<u8> {
        let mut out = vec![0u8; 64];
        let align = |out: &mut Vec<u8>| {
            while !out.len().is_multiple_of(8) {
                out.push(0);
            }
        };
        let mut shstrtab = vec![0u8];
        fn name_off(names: &mut Vec<u8>, s: &str) -> u32 {
            let off = names.len() as u32;
            names.extend_from_slice(s.as_bytes());
            names.push(0);
            off
        }
        let mut headers: Vec<Shdr> = vec![(0, 0, 0, 0, 0, 0, 0, 0)];
        let symtab_idx = self.symtab_index();
        for s in &self.sections {
            align(&mut out);
            let off = out.len() as u64;
            out.extend_from_slice(&s.data);
            let size = if s.sh_type == SHT_NOBITS { s.nobits_size } else { s.data.len() as u64 };
            let link = s.link.unwrap_or(symtab_idx);
            let n = name_off(&mut shstrtab, &s.name);
            headers.push((n, s.sh_type, s.flags, off, size, link, s.info, s.entsize));
        }
        if !self.no_symtab {
            let mut strtab = vec![0u8];
            let mut syms = vec![0u8; 24];
            for s in &self.symbols {
                let n = if s.name.is_empty() { 0 } else { name_off(&mut strtab, &s.name) };
                syms.extend_from_slice(&n.to_le_bytes());
                syms.push(s.bind << 4 | s.kind);
                syms.push(0);
                syms.extend_from_slice(&s.shndx.to_le_bytes());
                syms.extend_from_slice(&s.value.to_le_bytes());
                syms.extend_from_slice(&s.size.to_le_bytes());
            }
            align(&mut out);
            let off = out.len() as u64;
            out.extend_from_slice(&syms);
            let n = name_off(&mut shstrtab, ".symtab");
            headers.push((n, SHT_SYMTAB, 0, off, syms.len() as u64, symtab_idx + 1, 1, 24));
            let off = out.len() as u64;
            out.extend_from_slice(&strtab);
            let n = name_off(&mut shstrtab, ".strtab");
            headers.push((n, SHT_STRTAB, 0, off, strtab.len() as u64, 0, 0, 0));
        }
        let n = name_off(&mut shstrtab, ".shstrtab");
        let shstrndx = headers.len() as u16;
        let off = out.len() as u64;
        let len = shstrtab.len() as u64 + ".shstrtab".len() as u64 + 1;
        headers.push((n, SHT_STRTAB, 0, off, len, 0, 0, 0));
        out.extend_from_slice(&shstrtab);
        out.extend_from_slice(b".shstrtab\0");
        align(&mut out);
        let shoff = out.len() as u64;
        for (name, ty, flags, off, size, link, info, entsize) in &headers {
            out.extend_from_slice(&name.to_le_bytes());
            out.extend_from_slice(&ty.to_le_bytes());
            out.extend_from_slice(&flags.to_le_bytes());
            out.extend_from_slice(&0u64.to_le_bytes());
            out.extend_from_slice(&off.to_le_bytes());
            out.extend_from_slice(&size.to_le_bytes());
            out.extend_from_slice(&link.to_le_bytes());
            out.extend_from_slice(&info.to_le_bytes());
            out.extend_from_slice(&8u64.to_le_bytes());
            out.extend_from_slice(&entsize.to_le_bytes());
        }
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2; // ELFCLASS64
        out[5] = 1; // ELFDATA2LSB
        out[6] = 1; // EV_CURRENT
        out[16..18].copy_from_slice(&1u16.to_le_bytes()); // ET_REL
        out[18..20].copy_from_slice(&247u16.to_le_bytes()); // EM_BPF
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out[52..54].copy_from_slice(&64u16.to_le_bytes());
        out[58..60].copy_from_slice(&64u16.to_le_bytes());
        out[60..62].copy_from_slice(&(headers.len() as u16).to_le_bytes());
        out[62..64].copy_from_slice(&shstrndx.to_le_bytes());
        out
    }
}

pub fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

pub fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

pub fn get_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

pub fn get_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// File offset of the header of section `index` of a well-formed object.
pub fn shdr(b: &[u8], index: usize) -> usize {
    get_u64(b, 40) as usize + 64 * index
}

/// ELF index of the section called `name` in a well-formed object.
pub fn section_index(b: &[u8], name: &str) -> usize {
    let shnum = u16::from_le_bytes([b[60], b[61]]) as usize;
    let shstrndx = u16::from_le_bytes([b[62], b[63]]) as usize;
    let names = get_u64(b, shdr(b, shstrndx) + 24) as usize;
    (0..shnum)
        .find(|&i| {
            let off = names + get_u32(b, shdr(b, i)) as usize;
            let end = off + b[off..].iter().position(|&c| c == 0).unwrap();
            &b[off..end] == name.as_bytes()
        })
        .unwrap_or_else(|| panic!("no section {name}"))
}

/// (file offset, size) of the data of section `name`.
pub fn section_data(b: &[u8], name: &str) -> (usize, usize) {
    let h = shdr(b, section_index(b, name));
    (get_u64(b, h + 24) as usize, get_u64(b, h + 32) as usize)
}
