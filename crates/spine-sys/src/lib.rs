//! Every bpf(2) call spine makes (and the thread placement its tests and workers need), behind a small typed interface (the counterpart of
//! aya's `sys` module). spine uses the Linux kernel as the reference for eBPF behaviour:
//! differential tests and benchmarks load the same program into spine and into the
//! kernel and compare `BPF_PROG_TEST_RUN` results. Nothing here is on spine's own data
//! path, and nothing else in the project calls bpf(2).
//!
//! - [`probe`]: can this process use bpf(2) at all? Tests that need the kernel skip
//!   loudly when it fails.
//! - [`KernelMap`]: create maps and read, write, iterate and freeze them.
//! - [`load_program`] / [`ProgLoad`]: the verifier, with its log in the error.
//! - [`KernelProg::test_run`]: run an XDP program on one packet ([`TestRun`]).
//! - [`load_object_program`]: one program of a parsed `spine_obj::Object` with kernel
//!   maps for all of the object's maps, as libbpf would load it.
//! - [`XskRedirect`]: the kernel side of an AF_XDP port (an xskmap and the program
//!   redirecting each receive queue to its socket); [`attach_xdp`], [`detach_xdp`] and
//!   [`query_xdp`]: XDP programs on interfaces, over netlink (`RTM_SETLINK`/`IFLA_XDP`).
//!
//! Errors are [`SysError`]: the command and the kernel's errno, never a string.
//!
//! Requires root (or `CAP_BPF` + `CAP_NET_ADMIN`) on Linux with BPF enabled.
#![deny(unsafe_code)]

mod btf;
mod cpus;
mod error;
#[expect(unsafe_code, reason = "BPF_BTF_LOAD reads the BTF blob")]
mod func_info;
#[expect(unsafe_code, reason = "BPF_LINK_CREATE and BPF_PROG_GET_FD_BY_ID return new fds")]
mod link;
#[expect(unsafe_code, reason = "element commands: the kernel reads and writes key/value buffers")]
mod map;
#[expect(unsafe_code, reason = "netlink socket calls read and write the request and reply buffers")]
mod netlink;
mod object;
#[expect(unsafe_code, reason = "BPF_PROG_LOAD reads the code and writes the log buffer")]
mod prog;
#[expect(unsafe_code, reason = "the bpf(2) syscall, the fds it returns and union reads")]
mod sys;
#[expect(unsafe_code, reason = "BPF_PROG_TEST_RUN reads and writes the packet and context")]
mod test_run;
#[expect(unsafe_code, reason = "sched_setaffinity takes a cpu_set_t; signal dispositions")]
mod thread;
mod xsk;

pub use btf::{kernel_btf, kernel_func_id, KERNEL_BTF};
pub use cpus::{parse_cpu_list, possible_cpus, possible_cpus_exact};
pub use error::SysError;
pub use link::{prog_by_id, XdpLink};
pub use map::{is_percpu, Entry, KernelMap, MapBtf, MapDef, MapInfo};
pub use netlink::{
    attach_xdp, detach_xdp, query_xdp, NetlinkError, XdpAttachment, XdpMode, XDP_FLAGS_DRV_MODE,
    XDP_FLAGS_HW_MODE, XDP_FLAGS_REPLACE, XDP_FLAGS_SKB_MODE, XDP_FLAGS_UPDATE_IF_NOEXIST,
};
pub use object::{load_object_program, KernelObject, LoadError};
pub use prog::{
    load_program, prog_info, KernelProg, ProgInfo, ProgLoad, ATTACH_XDP, LOG_BUF_MAX,
    LOG_BUF_START, PROG_F_XDP_HAS_FRAGS,
};
pub use sys::sanitize_name;
pub use test_run::{TestRun, TestRunOut, XdpMd, DATA_OUT_SLACK};
pub use thread::{default_sigpipe, enter_netns, ignore_sigpipe, pin_current_thread};
pub use xsk::{xsk_redirect_insns, XskRedirect};

/// Checks that this process can use bpf(2) by creating (and closing) a one-element array
/// map. Fails with `EPERM` without privileges, `ENOSYS` without BPF.
pub fn probe() -> Result<(), SysError> {
    let def = MapDef::new(spine_abi::map_type::ARRAY, 4, 4, 1);
    KernelMap::create("spine_probe", def, None).map(drop)
}
