//! Attaching XDP programs to interfaces: `RTM_SETLINK` with a nested `IFLA_XDP`
//! attribute over `NETLINK_ROUTE`, as `ip link set dev X xdp ...` and libbpf's
//! `bpf_xdp_attach` do, and `RTM_GETLINK` to see what is attached. Errors carry the
//! kernel's errno and its extended-ack message (`"Native and generic XDP can't be
//! active at the same time."`), which says far more than the errno alone.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `XDP_FLAGS_UPDATE_IF_NOEXIST`: fail with `EBUSY` instead of replacing a program.
pub const XDP_FLAGS_UPDATE_IF_NOEXIST: u32 = 1 << 0;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, after the skb is built; every driver has it.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver (veth has it).
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `XDP_FLAGS_HW_MODE`: offloaded to the NIC.
pub const XDP_FLAGS_HW_MODE: u32 = 1 << 3;
/// `XDP_FLAGS_REPLACE`: act only if the attached program is `IFLA_XDP_EXPECTED_FD`'s.
pub const XDP_FLAGS_REPLACE: u32 = 1 << 4;

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_SETLINK: u16 = 19;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLM_F_CAPPED: u16 = 0x100;
const NLM_F_ACK_TLVS: u16 = 0x200;
const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSGERR_ATTR_MSG: u16 = 1;
const SOL_NETLINK: i32 = 270;
const NETLINK_CAP_ACK: i32 = 10;
const NETLINK_EXT_ACK: i32 = 11;

const IFLA_XDP: u16 = 43;
const IFLA_XDP_FD: u16 = 1;
const IFLA_XDP_ATTACHED: u16 = 2;
const IFLA_XDP_FLAGS: u16 = 3;
const IFLA_XDP_PROG_ID: u16 = 4;
const IFLA_XDP_EXPECTED_FD: u16 = 8;

const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;

/// Where an XDP program runs on an interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver, before an skb exists (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// Generic XDP on the skb (`XDP_FLAGS_SKB_MODE`), available on every interface.
    Skb,
    /// Offloaded to the NIC (`XDP_FLAGS_HW_MODE`).
    Hw,
}

impl XdpMode {
    pub fn flag(self) -> u32 {
        match self {
            XdpMode::Native => XDP_FLAGS_DRV_MODE,
            XdpMode::Skb => XDP_FLAGS_SKB_MODE,
            XdpMode::Hw => XDP_FLAGS_HW_MODE,
        }
    }
}

/// What `RTM_GETLINK` reports about an interface's XDP program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpAttachment {
    /// `None` when no program is attached; `XDP_ATTACHED_MULTI` reads as `Native`.
    pub mode: Option<XdpMode>,
    /// The program's id (`KernelProg::info().id`), 0 when none.
    pub prog_id: u32,
}

/// A refused netlink request: the operation, the interface, the kernel's errno and its
/// extended-ack message when it sent one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op} on ifindex {ifindex}: {}{}", std::io::Error::from_raw_os_error(*.errno), .message.as_ref().map(|m| format!(" ({m})")).unwrap_or_default())]
pub struct NetlinkError {
    pub op: &'static str,
    pub ifindex: u32,
    /// Positive errno.
    pub errno: i32,
    pub message: Option<String>,
}

impl NetlinkError {
    pub fn is(&self, errno: i32) -> bool {
        self.errno == errno
    }
}

/// Attaches `prog` to interface `ifindex` in `mode`. Without `replace` an attached
/// program is left alone and the call fails with `EBUSY`.
pub fn attach_xdp(
    ifindex: u32,
    prog: BorrowedFd<'_>,
    mode: XdpMode,
    replace: bool,
) -> Result<(), NetlinkError> {
    let flags = mode.flag() | if replace { 0 } else { XDP_FLAGS_UPDATE_IF_NOEXIST };
    set_xdp("attach XDP", ifindex, prog.as_raw_fd(), flags, None)
}

/// Detaches the `mode` program of `ifindex`. With `expected`, only if that program is
/// still the one attached (`EEXIST` otherwise), so a program someone else attached
/// meanwhile is never removed.
pub fn detach_xdp(
    ifindex: u32,
    mode: XdpMode,
    expected: Option<BorrowedFd<'_>>,
) -> Result<(), NetlinkError> {
    let (flags, expected) = match expected {
        Some(fd) => (mode.flag() | XDP_FLAGS_REPLACE, Some(fd.as_raw_fd())),
        None => (mode.flag(), None),
    };
    set_xdp("detach XDP", ifindex, -1, flags, expected)
}

/// The XDP program attached to `ifindex`, if any.
pub fn query_xdp(ifindex: u32) -> Result<XdpAttachment, NetlinkError> {
    let op = "query XDP";
    let mut msg = Msg::new(RTM_GETLINK, ifindex);
    let nl = Netlink::open(op, ifindex)?;
    let mut found = XdpAttachment { mode: None, prog_id: 0 };
    nl.request(op, ifindex, msg.finish(), |ty, payload| {
        if ty != RTM_NEWLINK || payload.len() < IFINFOMSG_LEN {
            return;
        }
        for (t, v) in attrs(&payload[IFINFOMSG_LEN..]) {
            if t != IFLA_XDP {
                continue;
            }
            for (t, v) in attrs(v) {
                match (t, v) {
                    (IFLA_XDP_ATTACHED, [a, ..]) => {
                        found.mode = match a {
                            1 | 4 => Some(XdpMode::Native),
                            2 => Some(XdpMode::Skb),
                            3 => Some(XdpMode::Hw),
                            _ => None,
                        }
                    }
                    (IFLA_XDP_PROG_ID, [a, b, c, d, ..]) => {
                        found.prog_id = u32::from_ne_bytes([*a, *b, *c, *d])
                    }
                    _ => {}
                }
            }
        }
    })?;
    Ok(found)
}

fn set_xdp(
    op: &'static str,
    ifindex: u32,
    fd: i32,
    flags: u32,
    expected: Option<i32>,
) -> Result<(), NetlinkError> {
    let mut msg = Msg::new(RTM_SETLINK, ifindex);
    let nest = msg.begin_nest(IFLA_XDP);
    msg.attr(IFLA_XDP_FD, &fd.to_ne_bytes());
    msg.attr(IFLA_XDP_FLAGS, &flags.to_ne_bytes());
    if let Some(e) = expected {
        msg.attr(IFLA_XDP_EXPECTED_FD, &e.to_ne_bytes());
    }
    msg.end_nest(nest);
    Netlink::open(op, ifindex)?.request(op, ifindex, msg.finish(), |_, _| {})
}

/// A request under construction: header, `ifinfomsg`, attributes.
struct Msg(Vec<u8>);

impl Msg {
    fn new(ty: u16, ifindex: u32) -> Msg {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(&0u32.to_ne_bytes()); // length, set by finish
        b.extend_from_slice(&ty.to_ne_bytes());
        b.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        b.extend_from_slice(&1u32.to_ne_bytes()); // sequence
        b.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel
                                                  // struct ifinfomsg: family AF_UNSPEC, type 0, index, flags 0, change 0.
        b.extend_from_slice(&[0, 0, 0, 0]);
        b.extend_from_slice(&(ifindex as i32).to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        Msg(b)
    }

    fn attr(&mut self, ty: u16, value: &[u8]) {
        let len = (4 + value.len()) as u16;
        self.0.extend_from_slice(&len.to_ne_bytes());
        self.0.extend_from_slice(&ty.to_ne_bytes());
        self.0.extend_from_slice(value);
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
    }

    fn begin_nest(&mut self, ty: u16) -> usize {
        let at = self.0.len();
        self.attr(ty | NLA_F_NESTED, &[]);
        at
    }

    fn end_nest(&mut self, at: usize) {
        let len = (self.0.len() - at) as u16;
        self.0[at..at + 2].copy_from_slice(&len.to_ne_bytes());
    }

    fn finish(&mut self) -> &[u8] {
        let len = self.0.len() as u32;
        self.0[..4].copy_from_slice(&len.to_ne_bytes());
        &self.0
    }
}

/// Iterates the `(type, value)` attributes of `b`; stops at the first malformed one.
fn attrs(mut b: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = u16::from_ne_bytes([b[0], b[1]]) as usize;
        let ty = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            return None;
        }
        let value = &b[4..len];
        b = &b[len.next_multiple_of(4).min(b.len())..];
        Some((ty, value))
    })
}

/// A `NETLINK_ROUTE` socket with extended acks, closed when dropped.
struct Netlink {
    fd: OwnedFd,
}

impl Netlink {
    fn open(op: &'static str, ifindex: u32) -> Result<Netlink, NetlinkError> {
        let err = |errno| NetlinkError { op, ifindex, errno, message: None };
        // SAFETY: plain socket(2); the result is checked before it is owned.
        let raw = unsafe {
            libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE)
        };
        if raw < 0 {
            return Err(err(last_errno()));
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        for opt in [NETLINK_EXT_ACK, NETLINK_CAP_ACK] {
            // Best effort: without them errors just lack the kernel's message.
            // SAFETY: the kernel reads an int from `one`, which lives across the call.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    SOL_NETLINK,
                    opt,
                    (&one as *const libc::c_int).cast(),
                    size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
        // A kernel that never answers must not hang the caller.
        let tv = libc::timeval { tv_sec: 5, tv_usec: 0 };
        // SAFETY: the kernel reads a timeval from `tv`, which lives across the call.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        Ok(Netlink { fd })
    }

    /// Sends `msg` and reads replies until the acknowledgement; every other message of
    /// the reply goes to `each` as `(type, payload)`.
    fn request(
        &self,
        op: &'static str,
        ifindex: u32,
        msg: &[u8],
        mut each: impl FnMut(u16, &[u8]),
    ) -> Result<(), NetlinkError> {
        let err = |errno, message| NetlinkError { op, ifindex, errno, message };
        // SAFETY: all-zero is a valid sockaddr_nl (pid 0 is the kernel).
        let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the kernel reads msg.len() bytes of `msg` and a sockaddr_nl from `to`.
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&to as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(err(last_errno(), None));
        }
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            // SAFETY: the kernel writes at most buf.len() bytes into `buf`.
            let got =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if got < 0 {
                let e = last_errno();
                if e == libc::EINTR {
                    continue;
                }
                return Err(err(e, None));
            }
            let mut rest = &buf[..got as usize];
            while rest.len() >= NLMSG_HDRLEN {
                let len = u32::from_ne_bytes(rest[0..4].try_into().expect("4")) as usize;
                let ty = u16::from_ne_bytes([rest[4], rest[5]]);
                let flags = u16::from_ne_bytes([rest[6], rest[7]]);
                if len < NLMSG_HDRLEN || len > rest.len() {
                    return Err(err(libc::EBADMSG, None));
                }
                let payload = &rest[NLMSG_HDRLEN..len];
                if ty == NLMSG_ERROR {
                    let Some(code) = payload.get(..4) else {
                        return Err(err(libc::EBADMSG, None));
                    };
                    let code = i32::from_ne_bytes(code.try_into().expect("4"));
                    if code == 0 {
                        return Ok(());
                    }
                    return Err(err(-code, ext_ack_message(payload, flags)));
                }
                each(ty, payload);
                rest = &rest[len.next_multiple_of(4).min(rest.len())..];
            }
        }
    }
}

/// The `NLMSGERR_ATTR_MSG` text of an error payload (`struct nlmsgerr` then TLVs).
fn ext_ack_message(payload: &[u8], flags: u16) -> Option<String> {
    if flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    // The echoed request: its header only when capped, else the whole message.
    let inner = payload.get(4..8).map(|l| u32::from_ne_bytes(l.try_into().expect("4")))?;
    let echoed = if flags & NLM_F_CAPPED != 0 { NLMSG_HDRLEN } else { inner as usize };
    let tlvs = payload.get(4 + echoed.next_multiple_of(4)..)?;
    attrs(tlvs).find(|(t, _)| *t == NLMSGERR_ATTR_MSG).map(|(_, v)| {
        let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
        String::from_utf8_lossy(&v[..end]).into_owned()
    })
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_layout_is_the_kernels() {
        let mut m = Msg::new(RTM_SETLINK, 7);
        let nest = m.begin_nest(IFLA_XDP);
        m.attr(IFLA_XDP_FD, &(-1i32).to_ne_bytes());
        m.attr(IFLA_XDP_FLAGS, &XDP_FLAGS_SKB_MODE.to_ne_bytes());
        m.end_nest(nest);
        let b = m.finish().to_vec();
        assert_eq!(b.len(), 16 + 16 + 4 + 8 + 8);
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), b.len() as u32);
        assert_eq!(i32::from_ne_bytes(b[20..24].try_into().unwrap()), 7);
        // The nest covers both attributes and has the nested bit.
        assert_eq!(u16::from_ne_bytes([b[32], b[33]]), 20);
        assert_eq!(u16::from_ne_bytes([b[34], b[35]]), IFLA_XDP | NLA_F_NESTED);
        let inner: Vec<_> =
            attrs(attrs(&b[32..]).next().unwrap().1).map(|(t, v)| (t, v.to_vec())).collect();
        assert_eq!(inner[0], (IFLA_XDP_FD, (-1i32).to_ne_bytes().to_vec()));
        assert_eq!(inner[1], (IFLA_XDP_FLAGS, 2u32.to_ne_bytes().to_vec()));
    }

    #[test]
    fn malformed_attributes_end_iteration() {
        assert_eq!(attrs(&[8, 0, 1, 0, 1, 2]).count(), 0, "length past the end");
        assert_eq!(attrs(&[2, 0, 1, 0]).count(), 0, "length below the header");
        assert_eq!(attrs(&[5, 0, 1, 0, 9, 0, 0, 0, 4, 0, 2, 0]).count(), 2);
    }

    #[test]
    fn ext_ack_text_is_found_after_the_capped_echo() {
        let mut p = (-22i32).to_ne_bytes().to_vec();
        p.extend_from_slice(&40u32.to_ne_bytes());
        p.extend_from_slice(&[0; 12]);
        p.extend_from_slice(&[9, 0, 1, 0, b'b', b'a', b'd', b'!', 0, 0, 0, 0]);
        assert_eq!(ext_ack_message(&p, NLM_F_CAPPED | NLM_F_ACK_TLVS).as_deref(), Some("bad!"));
        assert_eq!(ext_ack_message(&p, NLM_F_CAPPED), None);
    }
}
