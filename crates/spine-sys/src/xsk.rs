//! The kernel side of an AF_XDP port: an `xskmap` from receive queue to socket and the
//! small XDP program that sends each queue's packets to its socket, as libxdp's default
//! program does: `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);` (a
//! queue without a socket passes its packets on to the kernel stack).

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use spine_abi::{helper, map_type, prog_type, xdp_action, xdp_md};
use spine_isa::{op, Insn};

use crate::{KernelMap, KernelProg, MapDef, ProgLoad, SysError, ATTACH_XDP};

/// The redirect program for the xskmap `map_fd`.
pub fn xsk_redirect_insns(map_fd: RawFd) -> Vec<Insn> {
    let [ld0, ld1] = Insn::lddw(1, op::PSEUDO_MAP_FD, map_fd as u32 as u64);
    vec![
        // r2 = ctx->rx_queue_index
        Insn::new(op::LDX | op::MEM | op::W, 2, 1, xdp_md::RX_QUEUE_INDEX, 0),
        ld0,
        ld1,
        // r3 = XDP_PASS: the verdict when the queue has no socket
        Insn::new(op::ALU64 | op::MOV | op::K, 3, 0, 0, xdp_action::PASS as i32),
        Insn::new(op::JMP | op::CALL, 0, 0, 0, helper::REDIRECT_MAP as i32),
        Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0),
    ]
}

/// `BPF_F_XDP_HAS_FRAGS` (`include/uapi/linux/bpf.h`).
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;

/// An xskmap and the redirect program bound to it, both closed when dropped. Attach the
/// program to an interface with [`attach_xdp`](crate::attach_xdp).
#[derive(Debug)]
pub struct XskRedirect {
    map: KernelMap,
    prog: KernelProg,
}

impl XskRedirect {
    /// Creates an xskmap with one slot per queue in `0..queues` and loads the program.
    pub fn load(name: &str, queues: u32) -> Result<XskRedirect, SysError> {
        Self::load_with(name, queues, false)
    }

    /// As [`XskRedirect::load`]; with `frags` the program is loaded multi-buffer aware
    /// (`BPF_F_XDP_HAS_FRAGS`), which a driver needs to attach it to a device whose MTU
    /// takes more than one buffer (and which an AF_XDP socket bound with `XDP_USE_SG`
    /// needs to receive such frames whole).
    pub fn load_with(name: &str, queues: u32, frags: bool) -> Result<XskRedirect, SysError> {
        let map = KernelMap::create(name, MapDef::new(map_type::XSKMAP, 4, 4, queues), None)?;
        let insns = xsk_redirect_insns(map.fd().as_raw_fd());
        let prog = ProgLoad {
            prog_type: prog_type::XDP,
            insns: &insns,
            license: "Dual BSD/GPL",
            name,
            prog_flags: if frags { BPF_F_XDP_HAS_FRAGS } else { 0 },
            expected_attach_type: ATTACH_XDP,
            log_level: 0,
        }
        .load()?;
        Ok(XskRedirect { map, prog })
    }

    pub fn map(&self) -> &KernelMap {
        &self.map
    }

    pub fn prog(&self) -> &KernelProg {
        &self.prog
    }

    /// Sends queue `queue`'s packets to the bound AF_XDP socket `xsk` (`EOPNOTSUPP` if it
    /// is not bound yet, `E2BIG` past the map's queues).
    pub fn insert(&self, queue: u32, xsk: BorrowedFd<'_>) -> Result<(), SysError> {
        let fd = xsk.as_raw_fd() as u32;
        self.map.update(&queue.to_ne_bytes(), &fd.to_ne_bytes(), 0)
    }

    /// Stops redirecting `queue` (its packets pass to the kernel stack again).
    pub fn remove(&self, queue: u32) -> Result<(), SysError> {
        self.map.delete(&queue.to_ne_bytes())
    }
}
