//! A plain AF_PACKET socket, independent of the ports under test: it injects frames into
//! one end of a veth pair and observes what arrives at the other.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::netns::ifindex;

#[derive(Debug)]
pub struct Raw {
    fd: OwnedFd,
}

impl Raw {
    /// Bound to `ifname` for all protocols; its own transmissions are not received.
    pub fn bind(ifname: &str) -> Raw {
        // SAFETY: socket(2); checked before it is owned.
        let raw = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            )
        };
        assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
        // SAFETY: a new descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex(ifname) as i32;
        // SAFETY: the kernel reads a sockaddr_ll of that length.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let one: i32 = 1;
        // SAFETY: the kernel reads an int.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                (&one as *const i32).cast(),
                4,
            )
        };
        // Room for every frame a test sends before it reads them.
        let rcvbuf: i32 = 16 << 20;
        // SAFETY: the kernel reads an int.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                (&rcvbuf as *const i32).cast(),
                4,
            )
        };
        Raw { fd }
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: the kernel reads frame.len() bytes.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(n, frame.len() as isize, "send: {}", std::io::Error::last_os_error());
    }

    /// Frames received within `wait`, up to `n` of them.
    pub fn recv(&self, n: usize, wait: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65_536];
        while out.len() < n && Instant::now() < deadline {
            // SAFETY: the kernel writes at most buf.len() bytes.
            let got = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if got > 0 {
                out.push(buf[..got as usize].to_vec());
            } else {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        out
    }
}

/// Test frame `i`: broadcast, a local experimental ethertype, `i` in the payload, `len`
/// bytes in all.
pub fn frame(i: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0x02, 0, 0, 0, 0x5e, 0x01]);
    f.extend_from_slice(&0x88b5u16.to_be_bytes());
    f.extend_from_slice(&i.to_le_bytes());
    while f.len() < len {
        f.push((f.len() as u32).wrapping_mul(31).wrapping_add(i) as u8);
    }
    f
}

/// Runs `f` on a thread whose credentials are those of `nobody` (uid and gid 65534, no
/// capabilities). setresuid(2) as a raw system call changes only the calling thread.
pub fn as_nobody<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: raw setresgid/setresuid affect only this thread, which ends after `f`.
            unsafe {
                assert_eq!(libc::syscall(libc::SYS_setresgid, 65534, 65534, 65534), 0);
                assert_eq!(libc::syscall(libc::SYS_setresuid, 65534, 65534, 65534), 0);
            }
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
