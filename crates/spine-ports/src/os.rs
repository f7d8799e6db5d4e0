//! The system calls ports share: interface lookup and flags, sockets and their options,
//! and shared-memory ring mappings. Each port module adds only its own protocol's calls.

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::{PortError, PortErrorKind};

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

/// `ifname` as an `ifr_name`: at most 15 bytes, NUL-terminated; `None` if it cannot be.
fn ifr_name(ifname: &str) -> Option<[libc::c_char; libc::IFNAMSIZ]> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains(['\0', '/']) {
        return None;
    }
    let mut out = [0 as libc::c_char; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(ifname.bytes()) {
        *o = b as libc::c_char;
    }
    Some(out)
}

/// An `ifreq` for `ifname`, zeroed otherwise.
pub(crate) fn ifreq(port: &str, ifname: &str) -> Result<libc::ifreq, PortError> {
    let name = ifr_name(ifname).ok_or_else(|| {
        PortError::new(port, PortErrorKind::Config { reason: "interface name must be 1-15 bytes" })
    })?;
    // SAFETY: ifreq is plain integers and arrays; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name = name;
    Ok(req)
}

/// The index of `ifname` in the calling thread's network namespace.
pub(crate) fn ifindex(port: &str, ifname: &str) -> Result<u32, PortError> {
    ifr_name(ifname).ok_or_else(|| PortError::new(port, PortErrorKind::NoSuchInterface))?;
    let c =
        CString::new(ifname).map_err(|_| PortError::new(port, PortErrorKind::NoSuchInterface))?;
    // SAFETY: `c` is NUL-terminated and outlives the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(PortError::new(port, PortErrorKind::NoSuchInterface));
    }
    Ok(i)
}

/// A datagram socket for interface ioctls (any socket family serves).
fn ioctl_socket(port: &str) -> Result<OwnedFd, PortError> {
    socket(libc::AF_INET, libc::SOCK_DGRAM, 0)
        .map_err(|e| PortError::os(port, "socket(AF_INET)", e))
}

/// `SIOCGIFFLAGS`: the interface flags (`IFF_UP`, `IFF_PROMISC`, ...).
pub(crate) fn if_flags(port: &str, ifname: &str) -> Result<u32, PortError> {
    let sock = ioctl_socket(port)?;
    let mut req = ifreq(port, ifname)?;
    // SAFETY: SIOCGIFFLAGS reads the name and writes ifru_flags of `req`, which we own.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(PortError::os(port, "SIOCGIFFLAGS", errno()));
    }
    // SAFETY: the kernel filled the flags member of the union.
    Ok(u32::from(unsafe { req.ifr_ifru.ifru_flags } as u16))
}

/// Sets or clears `IFF_UP` (`ip link set ... up/down`).
pub(crate) fn set_if_up(port: &str, ifname: &str, up: bool) -> Result<(), PortError> {
    let sock = ioctl_socket(port)?;
    let mut req = ifreq(port, ifname)?;
    // SAFETY: as in `if_flags`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(PortError::os(port, "SIOCGIFFLAGS", errno()));
    }
    // SAFETY: the kernel filled the flags member; we write the same member back.
    unsafe {
        let f = req.ifr_ifru.ifru_flags;
        let up_flag = libc::IFF_UP as libc::c_short;
        req.ifr_ifru.ifru_flags = if up { f | up_flag } else { f & !up_flag };
    }
    // SAFETY: SIOCSIFFLAGS reads the name and flags of `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(PortError::os(port, "SIOCSIFFLAGS", errno()));
    }
    Ok(())
}

/// `SIOCGIFHWADDR`: the interface's MAC address.
pub(crate) fn if_mac(port: &str, ifname: &str) -> Result<[u8; 6], PortError> {
    let sock = ioctl_socket(port)?;
    let mut req = ifreq(port, ifname)?;
    // SAFETY: SIOCGIFHWADDR reads the name and writes ifru_hwaddr of `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } < 0 {
        return Err(PortError::os(port, "SIOCGIFHWADDR", errno()));
    }
    // SAFETY: the kernel filled the hwaddr member of the union.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    Ok(std::array::from_fn(|i| data[i] as u8))
}

/// `SIOCSIFHWADDR`: gives the interface the Ethernet address `mac`.
pub(crate) fn set_if_mac(port: &str, ifname: &str, mac: [u8; 6]) -> Result<(), PortError> {
    let sock = ioctl_socket(port)?;
    let mut req = ifreq(port, ifname)?;
    // SAFETY: writes the hwaddr member of the union of a zeroed ifreq we own.
    unsafe {
        req.ifr_ifru.ifru_hwaddr.sa_family = libc::ARPHRD_ETHER;
        for (d, b) in req.ifr_ifru.ifru_hwaddr.sa_data.iter_mut().zip(mac) {
            *d = b as libc::c_char;
        }
    }
    // SAFETY: SIOCSIFHWADDR reads the name and hwaddr of `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFHWADDR, &req) } < 0 {
        return Err(PortError::os(port, "SIOCSIFHWADDR", errno()));
    }
    Ok(())
}

/// `SIOCSIFMTU`: sets the interface's MTU.
pub(crate) fn set_if_mtu(port: &str, ifname: &str, mtu: u32) -> Result<(), PortError> {
    let sock = ioctl_socket(port)?;
    let mut req = ifreq(port, ifname)?;
    req.ifr_ifru.ifru_mtu = i32::try_from(mtu).unwrap_or(i32::MAX);
    // SAFETY: SIOCSIFMTU reads the name and mtu of `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFMTU, &req) } < 0 {
        return Err(PortError::os(port, "SIOCSIFMTU", errno()));
    }
    Ok(())
}

/// Fails with [`PortErrorKind::LinkDown`] unless `ifname` is administratively up.
pub(crate) fn require_up(port: &str, ifname: &str) -> Result<(), PortError> {
    if if_flags(port, ifname)? & libc::IFF_UP as u32 == 0 {
        return Err(PortError::new(port, PortErrorKind::LinkDown));
    }
    Ok(())
}

/// socket(2), close-on-exec; the errno on failure.
pub(crate) fn socket(domain: i32, ty: i32, proto: i32) -> Result<OwnedFd, i32> {
    // SAFETY: plain socket(2); the result is checked before it is owned.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, proto) };
    if fd < 0 {
        return Err(errno());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// setsockopt(2) with a plain-data value.
pub(crate) fn setsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    v: &T,
) -> Result<(), i32> {
    // SAFETY: the kernel reads size_of::<T>() bytes from `v`, a live reference; T is
    // plain data (the option's C struct or an int).
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (v as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

/// getsockopt(2) into a plain-data value; returns the length the kernel wrote.
pub(crate) fn getsockopt<T: Copy>(
    fd: BorrowedFd<'_>,
    level: i32,
    name: i32,
    v: &mut T,
) -> Result<usize, i32> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` = size_of::<T>() bytes into `v`; every
    // caller's T is integers only, so any bytes written are a valid T.
    let rc =
        unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (v as *mut T).cast(), &mut len) };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(len as usize)
    }
}

/// A shared mapping of a socket's ring memory, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; the port that owns it decides who touches
// which bytes, and ports move between threads only as a whole.
unsafe impl Send for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` at `offset`, read-write and shared with the kernel.
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize, offset: u64) -> Result<Mmap, i32> {
        // SAFETY: a fresh mapping chosen by the kernel; nothing is overwritten. The fd
        // is valid for the call.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(errno());
        }
        let ptr = NonNull::new(p.cast()).ok_or(libc::ENOMEM)?;
        Ok(Mmap { ptr, len })
    }

    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and is unmapped once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// [`setsockopt`] for port setup: a failure is a [`PortError`] naming the option.
pub(crate) fn set_opt<T: Copy>(
    fd: BorrowedFd<'_>,
    port: &str,
    op: &'static str,
    level: i32,
    name: i32,
    v: &T,
) -> Result<(), PortError> {
    setsockopt(fd, level, name, v).map_err(|e| PortError::os(port, op, e))
}
