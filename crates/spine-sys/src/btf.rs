//! The running kernel's BTF, which CO-RE relocations are resolved against.

use std::sync::{Arc, OnceLock};

/// Where the kernel publishes its own type information.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's BTF (`/sys/kernel/btf/vmlinux`), read once per process; `None` when the
/// kernel was built without it.
pub fn kernel_btf() -> Option<Arc<[u8]>> {
    static BTF: OnceLock<Option<Arc<[u8]>>> = OnceLock::new();
    BTF.get_or_init(|| std::fs::read(KERNEL_BTF).ok().map(Arc::from)).clone()
}

/// The id of `FUNC name` in the kernel's BTF (what libbpf resolves a kfunc extern to),
/// by a minimal walk of the type section; `None` if the kernel has no BTF or no such
/// function.
pub fn kernel_func_id(name: &str) -> Option<u32> {
    let btf = kernel_btf()?;
    let u32_at = |off: usize| -> Option<u32> {
        Some(u32::from_le_bytes(btf.get(off..off + 4)?.try_into().ok()?))
    };
    let hdr_len = u32_at(4)? as usize;
    let (type_off, type_len) = (u32_at(8)? as usize, u32_at(12)? as usize);
    let str_off = u32_at(16)? as usize;
    let (types, strs) = (hdr_len + type_off, hdr_len + str_off);
    let mut at = types;
    let mut id: u32 = 1;
    while at < types + type_len {
        let (name_off, info) = (u32_at(at)? as usize, u32_at(at + 4)?);
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == 12 {
            let s = btf.get(strs + name_off..)?;
            let end = s.iter().position(|&b| b == 0)?;
            if &s[..end] == name.as_bytes() {
                return Some(id);
            }
        }
        at += 12
            + match kind {
                1 | 14 | 17 => 4,             // INT, VAR, DECL_TAG
                3 => 12,                      // ARRAY
                4 | 5 | 15 | 19 => 12 * vlen, // STRUCT, UNION, DATASEC, ENUM64
                6 | 13 => 8 * vlen,           // ENUM, FUNC_PROTO
                _ => 0,
            };
        id += 1;
    }
    None
}
