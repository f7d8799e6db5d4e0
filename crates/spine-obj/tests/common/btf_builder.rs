//! Builds `.BTF` sections by hand. Shared by the unit tests of `src/btf.rs` (through a
//! `#[path]` module) and the integration tests, so both speak the same format.
#![allow(dead_code, reason = "each test binary uses a different subset")]

/// A BTF section under construction: types are appended with ids from 1.
#[derive(Debug, Default)]
pub struct BtfBuilder {
    pub types: Vec<u8>,
    pub strings: Vec<u8>,
    pub count: u32,
}

impl BtfBuilder {
    pub fn new() -> Self {
        BtfBuilder { types: Vec::new(), strings: vec![0], count: 0 }
    }

    /// Adds a string and returns its offset.
    pub fn str(&mut self, s: &str) -> u32 {
        if s.is_empty() {
            return 0;
        }
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        off
    }

    /// Appends a raw type: common header plus `extra` words. Returns its id.
    pub fn raw(&mut self, name: &str, kind: u32, vlen: u32, st: u32, extra: &[u32]) -> u32 {
        let name = self.str(name);
        for w in [name, kind << 24 | vlen, st].iter().chain(extra) {
            self.types.extend_from_slice(&w.to_le_bytes());
        }
        self.count += 1;
        self.count
    }

    pub fn int(&mut self, name: &str, size: u32) -> u32 {
        self.raw(name, 1, 0, size, &[size * 8])
    }

    pub fn ptr(&mut self, to: u32) -> u32 {
        self.raw("", 2, 0, to, &[])
    }

    pub fn array(&mut self, elem: u32, index: u32, n: u32) -> u32 {
        self.raw("", 3, 0, 0, &[elem, index, n])
    }

    /// `struct name { members }`, members as (name, type, byte offset).
    pub fn strukt(&mut self, name: &str, size: u32, members: &[(&str, u32, u32)]) -> u32 {
        let mut extra = Vec::new();
        for (n, t, off) in members {
            extra.extend([self.str(n), *t, off * 8]);
        }
        self.raw(name, 4, members.len() as u32, size, &extra)
    }

    pub fn var(&mut self, name: &str, ty: u32, linkage: u32) -> u32 {
        self.raw(name, 14, 0, ty, &[linkage])
    }

    /// `DATASEC name`, vars as (type, offset, size).
    pub fn datasec(&mut self, name: &str, size: u32, vars: &[(u32, u32, u32)]) -> u32 {
        let extra: Vec<u32> = vars.iter().flat_map(|(t, o, s)| [*t, *o, *s]).collect();
        self.raw(name, 15, vars.len() as u32, size, &extra)
    }

    /// `__uint(name, v)`: a pointer to an array of `v` ints. Returns the pointer id.
    pub fn uint_field(&mut self, int: u32, v: u32) -> u32 {
        let arr = self.array(int, int, v);
        self.ptr(arr)
    }

    /// The section bytes.
    pub fn finish(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&0xeb9fu16.to_le_bytes());
        out.extend_from_slice(&[1, 0]);
        let tl = self.types.len() as u32;
        for w in [24u32, 0, tl, tl, self.strings.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(&self.types);
        out.extend_from_slice(&self.strings);
        out
    }
}
