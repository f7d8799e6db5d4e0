//! XDP attachments through BPF links (`BPF_LINK_CREATE` with `BPF_XDP`, Linux 5.9+).
//! A link lives as long as its fd: when the process exits, however it exits (`kill -9`
//! included), the kernel closes the fd and detaches the program. A program attached
//! through netlink instead stays on the interface after its owner died; and while a
//! link holds an interface, netlink can neither replace nor remove its program, so no
//! other tool can take the interface away from a running owner.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use crate::netlink::XdpMode;
use crate::prog::{prog_info, ProgInfo};
use crate::sys::{bpf_fd, BpfAttr, Cmd, GetFdByIdAttr, LinkCreateAttr};
use crate::SysError;

/// `enum bpf_attach_type`'s `BPF_XDP`.
const BPF_XDP: u32 = 37;

/// An XDP program attached to an interface through a BPF link; dropping it detaches.
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    ifindex: u32,
    mode: XdpMode,
}

impl XdpLink {
    /// Attaches `prog` to `ifindex` in `mode`. Fails with `EBUSY` (or `EEXIST`) when
    /// any program is already attached in that mode, by a link or by netlink: a link
    /// never replaces a program.
    pub fn attach(ifindex: u32, prog: BorrowedFd<'_>, mode: XdpMode) -> Result<Self, SysError> {
        let mut attr = BpfAttr::zeroed();
        attr.link_create = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags: mode.flag(),
        };
        // SAFETY: the kernel reads only the integers of `link_create`; no pointers.
        let fd = unsafe { bpf_fd(Cmd::LinkCreate, &mut attr) }?;
        Ok(XdpLink { fd, ifindex, mode })
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn mode(&self) -> XdpMode {
        self.mode
    }
}

impl AsFd for XdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A handle on the loaded program with id `id` (`BPF_PROG_GET_FD_BY_ID`, needs
/// `CAP_SYS_ADMIN`) and what the kernel reports about it: which program, by name and tag,
/// holds an interface.
pub fn prog_by_id(id: u32) -> Result<(OwnedFd, ProgInfo), SysError> {
    let mut attr = BpfAttr::zeroed();
    attr.get_fd_by_id = GetFdByIdAttr { id, ..Default::default() };
    // SAFETY: integers only; on success the kernel returns a new program fd.
    let fd = unsafe { bpf_fd(Cmd::ProgGetFdById, &mut attr) }?;
    let info = prog_info(fd.as_fd())?;
    Ok((fd, info))
}
