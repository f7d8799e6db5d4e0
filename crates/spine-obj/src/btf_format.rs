//! Map keys and values printed from the object's BTF, as `bpftool map dump` prints them
//! (its `btf_dumper`): integers in decimal, `bool` as `true`/`false`, printable `char`s
//! as one-character strings, `char` arrays holding printable text up to a NUL as strings, enums by
//! their enumerator's name (else as a signed number), structs and unions as objects of
//! their members (an anonymous member under `""`, bitfields as hex strings), arrays as
//! lists, pointers as numbers, 128-bit integers as hex strings. The output is JSON text,
//! compared with bpftool's in `spine-difftest/tests/btf_dump.rs`.
//!
//! The data comes from a map and the types from an object: neither is trusted. Sizes are
//! checked against the data, and nesting is bounded (a type that contains itself is an
//! error, not a stack overflow).

use std::fmt::Write;

use crate::btf::{Btf, Member, Type, MAX_DEPTH};
use crate::BtfError;

/// Prints values of the types of one `.BTF` section.
#[derive(Debug)]
pub struct BtfFormatter<'a> {
    btf: Btf<'a>,
}

impl<'a> BtfFormatter<'a> {
    /// Parses and validates `raw`, a `.BTF` section (such as [`crate::Object::btf`]).
    pub fn new(raw: &'a [u8]) -> Result<Self, BtfError> {
        Ok(BtfFormatter { btf: Btf::parse(raw)? })
    }

    /// `data` as a value of type `id`, in JSON. The data must hold at least the type's
    /// size; bytes past it are ignored (per-CPU slots are padded to 8 bytes).
    pub fn json(&self, id: u32, data: &[u8]) -> Result<String, BtfError> {
        let size = self.btf.resolve_size(id)?;
        if data.len() < size as usize {
            return Err(BtfError::DataSize { id, size, got: data.len() });
        }
        let mut out = String::new();
        self.value(id, &data[..size as usize], 0, &mut out)?;
        Ok(out)
    }

    fn value(&self, id: u32, data: &[u8], depth: usize, out: &mut String) -> Result<(), BtfError> {
        if depth > MAX_DEPTH {
            return Err(BtfError::TooDeep(id));
        }
        let (id, ty) = self.btf.skip_mods(id)?;
        match ty {
            Type::Int { size, signed, encoding, bit_off, bits } => {
                let bits = if *bits == 0 { 8 * *size as u8 } else { *bits };
                self.int(data, *size, *signed, *encoding, u32::from(*bit_off), u32::from(bits), out)
            }
            Type::Ptr { .. } => {
                let _ = write!(out, "{}", le(data, 8));
                Ok(())
            }
            Type::Enum { size, values, names, .. } => {
                // As bpftool: matched against the enumerators, else the value read as a
                // signed integer of the enum's size.
                let bits = 8 * *size;
                let raw = le(data, *size as usize) & mask(bits);
                let name = values
                    .iter()
                    .position(|e| e & mask(bits) == raw)
                    .and_then(|i| self.btf.name(names[i]).ok())
                    .filter(|n| !n.is_empty());
                match name {
                    Some(n) => string(n, out),
                    None => {
                        let _ = write!(out, "{}", sign_extend(raw, bits));
                    }
                }
                Ok(())
            }
            Type::Float { size } => {
                let v = match size {
                    4 => f64::from(f32::from_le_bytes(data[..4].try_into().unwrap_or([0; 4]))),
                    8 => f64::from_le_bytes(data[..8].try_into().unwrap_or([0; 8])),
                    _ => return Err(BtfError::NotPrintable { id, kind: "float" }),
                };
                if v.is_finite() {
                    let _ = write!(out, "{v}");
                } else {
                    string(&v.to_string(), out);
                }
                Ok(())
            }
            Type::Array { elem, nelems } => {
                let esize = self.btf.resolve_size(*elem)? as usize;
                if self.is_char(*elem)? {
                    if let Some(s) = c_string(data) {
                        string(s, out);
                        return Ok(());
                    }
                }
                out.push('[');
                for i in 0..*nelems as usize {
                    if i > 0 {
                        out.push(',');
                    }
                    self.value(*elem, &data[i * esize..(i + 1) * esize], depth + 1, out)?;
                }
                out.push(']');
                Ok(())
            }
            Type::Struct { members, .. } | Type::Union { members, .. } => {
                out.push('{');
                self.members(members, data, depth, out)?;
                out.push('}');
                Ok(())
            }
            Type::Datasec { vars, .. } => {
                out.push('{');
                for (i, v) in vars.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let name = match self.btf.get(v.ty) {
                        Some(Type::Var { .. }) => self.btf.type_name(v.ty),
                        _ => "",
                    };
                    string(name, out);
                    out.push(':');
                    let (off, size) = (v.offset as usize, v.size as usize);
                    let bytes = data.get(off..off + size).ok_or(BtfError::DataSize {
                        id: v.ty,
                        size: v.size,
                        got: data.len().saturating_sub(off),
                    })?;
                    self.value(v.ty, bytes, depth + 1, out)?;
                }
                out.push('}');
                Ok(())
            }
            Type::Var { target, .. } => self.value(*target, data, depth + 1, out),
            Type::Void
            | Type::Fwd
            | Type::Func
            | Type::FuncProto
            | Type::DeclTag { .. }
            | Type::Modifier { .. } => {
                Err(BtfError::NotPrintable { id, kind: self.btf.kind_name(id) })
            }
        }
    }

    /// The members of a struct or union (an anonymous member under the name `""`, as
    /// `bpftool` prints it).
    fn members(
        &self,
        members: &[Member],
        data: &[u8],
        depth: usize,
        out: &mut String,
    ) -> Result<(), BtfError> {
        for (i, m) in members.iter().enumerate() {
            let name = self.btf.name(m.name)?;
            let byte = (m.bit_offset / 8) as usize;
            if i > 0 {
                out.push(',');
            }
            string(name, out);
            out.push(':');
            if m.bitfield_size > 0 {
                // As bpftool: a bitfield's bits in hex, whatever its type's sign.
                let size = (m.bit_offset % 8 + m.bitfield_size).div_ceil(8) as usize;
                let bytes = field(data, byte, size, m.ty)?;
                let v = (le(bytes, size) >> (m.bit_offset % 8)) & mask(m.bitfield_size);
                let _ = write!(out, "\"{v:#x}\"");
                continue;
            }
            let size = self.btf.resolve_size(m.ty)? as usize;
            self.value(m.ty, field(data, byte, size, m.ty)?, depth + 1, out)?;
        }
        Ok(())
    }

    /// An integer of `size` bytes whose `bits` bits start at bit `bit_off`.
    #[allow(clippy::too_many_arguments)]
    fn int(
        &self,
        data: &[u8],
        size: u32,
        signed: bool,
        encoding: u8,
        bit_off: u32,
        bits: u32,
        out: &mut String,
    ) -> Result<(), BtfError> {
        if size > 8 {
            // 128-bit integers: hex, as bpftool prints them.
            out.push_str("\"0x");
            let digits: String = data.iter().rev().map(|b| format!("{b:02x}")).collect();
            let t = digits.trim_start_matches('0');
            out.push_str(if t.is_empty() { "0" } else { t });
            out.push('"');
            return Ok(());
        }
        let raw = le(data, size as usize);
        let v = (raw >> bit_off.min(63)) & mask(bits);
        if encoding & 4 != 0 {
            out.push_str(if v != 0 { "true" } else { "false" });
        } else if encoding & 2 != 0 && size == 1 {
            let c = v as u8;
            if c.is_ascii_graphic() || c == b' ' {
                string(&(c as char).to_string(), out);
            } else {
                let _ = write!(out, "{c}");
            }
        } else if signed {
            let _ = write!(out, "{}", sign_extend(v, bits));
        } else {
            let _ = write!(out, "{v}");
        }
        Ok(())
    }

    /// Whether `id` is a one-byte character type (`char`, `signed char`, `unsigned
    /// char`), whose arrays print as strings when they hold one.
    fn is_char(&self, id: u32) -> Result<bool, BtfError> {
        let (id, ty) = self.btf.skip_mods(id)?;
        Ok(match ty {
            Type::Int { size: 1, encoding, .. } => {
                encoding & 2 != 0 || self.btf.type_name(id).contains("char")
            }
            _ => false,
        })
    }
}

/// The bytes of a member, checked against the data.
fn field(data: &[u8], at: usize, len: usize, id: u32) -> Result<&[u8], BtfError> {
    data.get(at..at.saturating_add(len)).ok_or(BtfError::DataSize {
        id,
        size: len as u32,
        got: data.len().saturating_sub(at),
    })
}

/// Little-endian unsigned value of the first `n` (≤ 8) bytes.
fn le(data: &[u8], n: usize) -> u64 {
    data.iter().take(n.min(8)).rev().fold(0, |v, &b| v << 8 | u64::from(b))
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn sign_extend(v: u64, bits: u32) -> i64 {
    if bits == 0 || bits >= 64 {
        return v as i64;
    }
    let shift = 64 - bits;
    ((v << shift) as i64) >> shift
}

/// The array as a string if it holds one, as bpftool decides: printable ASCII up to a
/// NUL (whatever follows the NUL).
fn c_string(data: &[u8]) -> Option<&str> {
    let end = data.iter().position(|&b| b == 0)?;
    let s = &data[..end];
    s.iter().all(|&b| (0x20..0x7f).contains(&b)).then(|| std::str::from_utf8(s).ok()).flatten()
}

/// `s` as a JSON string.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
