//! kfunc calls against the kernel: a program calling an XDP metadata kfunc
//! (`bpf_xdp_metadata_rx_timestamp`, `_rx_hash`, `_rx_vlan_tag`) that is not bound to a
//! device is refused by the kernel at load ("metadata kfuncs require device-bound
//! program", `EINVAL`); spine refuses the same object with that reason, naming the
//! kfunc. Any other kfunc is refused by spine with an error naming it. The kernel side
//! is loaded from instructions with a `BPF_PSEUDO_KFUNC_CALL` whose immediate is the
//! kfunc's id in the running kernel's BTF, as libbpf would resolve it. Needs root
//! (bpf(2)); without it each test says SKIP loudly and passes.

mod common;

use common::kernel_available;
use spine_abi::prog_type::XDP;
use spine_isa::{op, Insn};

/// The id of `FUNC name` in the kernel's BTF (a minimal walk of the type section).
fn kernel_func_id(name: &str) -> Option<i32> {
    let btf = spine_sys::kernel_btf()?;
    let u32_at = |off: usize| u32::from_le_bytes(btf[off..off + 4].try_into().expect("4 bytes"));
    let hdr_len = u32_at(4) as usize;
    let (type_off, type_len) = (u32_at(8) as usize, u32_at(12) as usize);
    let str_off = u32_at(16) as usize;
    let (types, strs) = (hdr_len + type_off, hdr_len + str_off);
    let mut at = types;
    let mut id: u32 = 1;
    while at < types + type_len {
        let (name_off, info) = (u32_at(at) as usize, u32_at(at + 4));
        let (kind, vlen) = ((info >> 24) & 0x1f, (info & 0xffff) as usize);
        if kind == 12 {
            let s = &btf[strs + name_off..];
            let end = s.iter().position(|&b| b == 0)?;
            if &s[..end] == name.as_bytes() {
                return i32::try_from(id).ok();
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

/// `ts = 0; return kfunc(ctx, &ts, &ts + 8 ...)`: every pointer argument to
/// initialised stack, as the C fixture passes them.
fn kernel_program(kfunc_id: i32) -> Vec<Insn> {
    vec![
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -8, 0),
        Insn::new(op::ST | op::MEM | op::DW, 10, 0, -16, 0),
        Insn::new(op::ALU64 | op::MOV | op::X, 2, 10, 0, 0),
        Insn::new(op::ALU64 | op::ADD | op::K, 2, 0, 0, -8),
        Insn::new(op::ALU64 | op::MOV | op::X, 3, 10, 0, 0),
        Insn::new(op::ALU64 | op::ADD | op::K, 3, 0, 0, -16),
        Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_KFUNC_CALL, 0, kfunc_id),
        Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0),
    ]
}

#[test]
fn xdp_metadata_kfuncs_are_refused_as_the_kernel_refuses_them_off_device() {
    if !kernel_available() {
        return;
    }
    for (n, kfunc) in [
        (1, "bpf_xdp_metadata_rx_timestamp"),
        (2, "bpf_xdp_metadata_rx_hash"),
        (3, "bpf_xdp_metadata_rx_vlan_tag"),
    ] {
        let id = kernel_func_id(kfunc).unwrap_or_else(|| panic!("{kfunc} in the kernel's BTF"));
        let k = spine_sys::load_program(XDP, &kernel_program(id), "GPL", kfunc, 1)
            .expect_err("the kernel loaded a metadata kfunc call off device");
        assert_eq!(k.errno, 22, "{kfunc}: {k}");
        let log = k.log.unwrap_or_default();
        assert!(log.contains("metadata kfuncs require device-bound program"), "{kfunc}: {log}");
        let object = common::fixture("kfunc", &format!("meta{n}"), &[&format!("-DMETADATA={n}")]);
        let e = spine_obj::parse(&object).expect_err("spine accepted a metadata kfunc call");
        let e = e.to_string();
        assert!(e.contains(kfunc), "{e}");
        assert!(e.contains("metadata kfuncs require device-bound program"), "{e}");
    }
}

#[test]
fn any_other_kfunc_is_refused_naming_it() {
    let object = common::fixture("kfunc", "other", &[]);
    let e = spine_obj::parse(&object).expect_err("spine accepted a kfunc call").to_string();
    assert!(e.contains("bpf_cast_to_kern_ctx") && e.contains("this kfunc is not supported"), "{e}");
}
