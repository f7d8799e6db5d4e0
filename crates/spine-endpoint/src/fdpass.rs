//! Passing an endpoint's fds (region, eventfd) over a Unix socket with SCM_RIGHTS: how
//! a client receives its endpoint from the adapter.

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use crate::EndpointError;

/// The most fds one message carries.
pub const MAX_FDS: usize = 4;

const SPACE: usize = 64; // >= CMSG_SPACE(4 * sizeof(int)) on every Linux ABI

/// Sends `fds` with one byte of data.
pub fn send_fds(sock: &UnixStream, fds: &[BorrowedFd<'_>]) -> Result<(), EndpointError> {
    assert!(fds.len() <= MAX_FDS);
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut ctrl = [0u64; SPACE / 8];
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE((fds.len() * 4) as u32) } as usize;
    // SAFETY: msg_control points at `ctrl`, large enough for one header and MAX_FDS ints.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN((fds.len() * 4) as u32) as usize;
        let data = libc::CMSG_DATA(c).cast::<i32>();
        for (i, fd) in fds.iter().enumerate() {
            data.add(i).write_unaligned(fd.as_raw_fd());
        }
    }
    // SAFETY: every pointer in msg refers to live locals.
    if unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) } != 1 {
        return Err(EndpointError::last_os("sendmsg"));
    }
    Ok(())
}

/// Receives fds sent by [`send_fds`] (close-on-exec set).
pub fn recv_fds(sock: &UnixStream) -> Result<Vec<OwnedFd>, EndpointError> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut ctrl = [0u64; SPACE / 8];
    // SAFETY: plain data, all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl.as_mut_ptr().cast();
    msg.msg_controllen = SPACE;
    // SAFETY: every pointer in msg refers to live locals of the stated sizes.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(EndpointError::last_os("recvmsg"));
    }
    let mut out = Vec::new();
    // SAFETY: the kernel filled msg_control; the CMSG macros walk it within controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let count = ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / 4;
                let data = libc::CMSG_DATA(c).cast::<i32>();
                for i in 0..count {
                    out.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    if out.is_empty() {
        return Err(EndpointError::Layout("no fds in the message"));
    }
    Ok(out)
}

/// The pid of the process at the other end of `sock` when it connected
/// (`SO_PEERCRED`), for per-client limits; `None` when the kernel does not say.
pub fn peer_pid(sock: &UnixStream) -> Option<i32> {
    // SAFETY: ucred is plain data; all-zero is valid.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, a live local.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid)
}
