//! `func_info` for programs whose functions the kernel must know by BTF: the verifier
//! refuses a program that takes a function's address (`lddw PSEUDO_FUNC`, the callbacks
//! of `bpf_loop` and `bpf_for_each_map_elem`) without it ("missing btf func_info"), and
//! a tail call in a bpf-to-bpf callee.
//!
//! Rather than loading the object's own BTF (which needs libbpf's fix-ups of data
//! sections), a minimal BTF is made: `int`, one prototype `int (void)` and one `FUNC`
//! per function (the entry global, the others static, which the kernel does not check
//! against their arguments), with a record per function start.

use std::os::fd::OwnedFd;

use spine_isa::{op, Insn};

use crate::sys::{self, bpf_fd, BpfAttr, BtfLoadAttr, Cmd};
use crate::SysError;

const BTF_MAGIC: u16 = 0xeb9f;
const KIND_INT: u32 = 1;
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
const LINKAGE_STATIC: u32 = 0;
const LINKAGE_GLOBAL: u32 = 1;

/// A BTF blob and the `struct bpf_func_info` records (`insn_off`, `type_id`) of a
/// program, one per function in instruction order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FuncInfo {
    pub btf: Vec<u8>,
    pub records: Vec<[u32; 2]>,
}

/// The program's function starts as the kernel finds them: 0, every bpf-to-bpf call
/// target and every function address.
fn starts(insns: &[Insn]) -> Vec<usize> {
    let mut v = vec![0usize];
    for (pc, i) in insns.iter().enumerate() {
        let target = if i.is_local_call() || (i.is_lddw() && i.src == op::PSEUDO_FUNC) {
            pc as i64 + 1 + i64::from(i.imm)
        } else {
            continue;
        };
        if let Ok(t) = usize::try_from(target) {
            v.push(t);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

/// `bpf_tail_call`'s helper id.
const TAIL_CALL: i32 = 12;

/// `func_info` for `insns` if the kernel needs it (the program takes a function's
/// address, or has bpf-to-bpf calls and tail calls: "tail_call is not allowed in subprogs
/// without BTF"), else `None`.
pub(crate) fn func_info(insns: &[Insn]) -> Option<FuncInfo> {
    let takes_address = insns.iter().any(|i| i.is_lddw() && i.src == op::PSEUDO_FUNC);
    let calls_and_tails = insns.iter().any(|i| i.is_local_call())
        && insns.iter().any(|i| i.is_helper_call() && i.imm == TAIL_CALL);
    if !takes_address && !calls_and_tails {
        return None;
    }
    let starts = starts(insns);
    let mut strings = b"\0int\0".to_vec();
    let mut types: Vec<u32> = Vec::new();
    // [1] int: 4 bytes, signed, 32 bits.
    types.extend([1, KIND_INT << 24, 4, (1 << 24) | 32]);
    // [2] int (void).
    types.extend([0, KIND_FUNC_PROTO << 24, 1]);
    let mut records = Vec::with_capacity(starts.len());
    for (n, &start) in starts.iter().enumerate() {
        let name_off = strings.len() as u32;
        strings.extend_from_slice(format!("f{n}\0").as_bytes());
        let linkage = if n == 0 { LINKAGE_GLOBAL } else { LINKAGE_STATIC };
        types.extend([name_off, KIND_FUNC << 24 | linkage, 2]);
        records.push([start as u32, 3 + n as u32]);
    }
    let type_len = (types.len() * 4) as u32;
    let mut btf = Vec::new();
    btf.extend_from_slice(&BTF_MAGIC.to_le_bytes());
    btf.extend_from_slice(&[1, 0]);
    for w in [24u32, 0, type_len, type_len, strings.len() as u32] {
        btf.extend_from_slice(&w.to_le_bytes());
    }
    for w in types {
        btf.extend_from_slice(&w.to_le_bytes());
    }
    btf.extend_from_slice(&strings);
    Some(FuncInfo { btf, records })
}

/// `BPF_BTF_LOAD` of `btf`.
pub(crate) fn load_btf(btf: &[u8]) -> Result<OwnedFd, SysError> {
    let mut attr = BpfAttr::zeroed();
    attr.btf_load = BtfLoadAttr {
        btf: sys::uptr(btf),
        btf_size: sys::len_u32(Cmd::BtfLoad, btf.len())?,
        ..BtfLoadAttr::default()
    };
    // SAFETY: the kernel reads `btf_size` bytes of `btf`, which is that long; no log.
    unsafe { bpf_fd(Cmd::BtfLoad, &mut attr) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_programs_taking_function_addresses_need_it() {
        let plain = spine_isa::assemble("call local f\nexit\nf: mov %r0, 0\nexit").unwrap();
        assert_eq!(func_info(&plain), None);
        let [a, b] = Insn::lddw(2, op::PSEUDO_FUNC, 3);
        let mut insns = vec![a, b];
        insns.extend(spine_isa::assemble("call 181\nexit\nmov %r0, 0\nexit").unwrap());
        let fi = func_info(&insns).unwrap();
        assert_eq!(fi.records, vec![[0, 3], [4, 4]]);
        assert_eq!(&fi.btf[..2], &BTF_MAGIC.to_le_bytes());
    }
}
