//! kfunc calls against the kernel: a program calling an XDP metadata kfunc
//! (`bpf_xdp_metadata_rx_timestamp`, `_rx_hash`, `_rx_vlan_tag`) that is not bound to a
//! device is refused by the kernel at load ("metadata kfuncs require device-bound
//! program", `EINVAL`); spine refuses the same object with that reason, naming the
//! kfunc. A kfunc spine does not offer is refused by spine with an error naming it (the
//! dynptr kfuncs it offers are tested in `dynptr.rs`). The kernel side
//! is loaded from instructions with a `BPF_PSEUDO_KFUNC_CALL` whose immediate is the
//! kfunc's id in the running kernel's BTF, as libbpf would resolve it. Needs root
//! (bpf(2)); without it each test says SKIP loudly and passes.

mod common;

use common::kernel_available;
use spine_abi::prog_type::XDP;
use spine_isa::{op, Insn};

/// The id of `FUNC name` in the kernel's BTF, as libbpf resolves a kfunc extern.
fn kernel_func_id(name: &str) -> Option<i32> {
    spine_sys::kernel_func_id(name).and_then(|id| i32::try_from(id).ok())
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
