//! The OS side of an endpoint: the memfd region mapped shared, and the eventfd for
//! wake-ups. Every access to shared memory goes through the accessors here, which
//! bound-check offsets against the mapping (offsets come from a checked [`Layout`], so
//! the checks are cheap and never fail on a valid layout).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::layout::HEADER_BYTES;
use crate::{EndpointError, Layout};

/// A shared mapping of an endpoint's memfd.
#[derive(Debug)]
pub struct Shm {
    ptr: *mut u8,
    len: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory, accessed only through atomics and
// byte copies; nothing in it is tied to the creating thread.
unsafe impl Send for Shm {}

impl Shm {
    /// Creates a memfd sized for `layout`, maps it and writes the header.
    pub fn create(layout: &Layout) -> Result<Self, EndpointError> {
        // SAFETY: the name is a NUL-terminated literal.
        let raw = unsafe {
            libc::memfd_create(
                c"spine-endpoint".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if raw < 0 {
            return Err(EndpointError::last_os("memfd_create"));
        }
        // SAFETY: memfd_create returned a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = layout.total_bytes();
        // SAFETY: plain syscall on an fd we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(EndpointError::last_os("ftruncate"));
        }
        // The client gets this fd: sealed, it can write the region's data but never
        // shrink it (the adapter's accesses past the new end would SIGBUS) or grow it,
        // and cannot lift the seals.
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: plain fcntl on an fd we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return Err(EndpointError::last_os("fcntl(F_ADD_SEALS)"));
        }
        let shm = Self::map_fd(fd, len)?;
        for (i, w) in layout.header_words().iter().enumerate() {
            shm.u32_at(i * 4).store(*w, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(shm)
    }

    /// Maps an endpoint fd received from the adapter and reads its layout.
    pub fn open(fd: OwnedFd) -> Result<(Self, Layout), EndpointError> {
        // SAFETY: fstat writes into the zeroed struct we pass.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd, valid out pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(EndpointError::last_os("fstat"));
        }
        let len = st.st_size as usize;
        if len < HEADER_BYTES {
            return Err(EndpointError::TooSmall { have: len, need: HEADER_BYTES });
        }
        let shm = Self::map_fd(fd, len)?;
        let mut words = [0u32; 5];
        for (i, w) in words.iter_mut().enumerate() {
            *w = shm.u32_at(i * 4).load(std::sync::atomic::Ordering::Acquire);
        }
        let layout = Layout::from_header(words, len)?;
        Ok((shm, layout))
    }

    /// Maps all of `fd` (its size from fstat), with no header: a shared segment.
    pub(crate) fn map_whole(fd: OwnedFd) -> Result<Self, EndpointError> {
        // SAFETY: fstat writes into the zeroed struct we pass.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd, valid out pointer.
        if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
            return Err(EndpointError::last_os("fstat"));
        }
        let len = st.st_size as usize;
        if len == 0 {
            return Err(EndpointError::TooSmall { have: 0, need: 1 });
        }
        Self::map_fd(fd, len)
    }

    fn map_fd(fd: OwnedFd, len: usize) -> Result<Self, EndpointError> {
        // SAFETY: a fresh shared mapping of `len` bytes of our fd; the kernel picks the
        // address. The size cannot change under it: the adapter seals the memfds it
        // creates against shrinking and growing.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(EndpointError::last_os("mmap"));
        }
        Ok(Shm { ptr: ptr.cast(), len, fd })
    }

    /// The memfd, to hand to a client (SCM_RIGHTS or in-process `try_clone`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len, "offset from a checked layout");
        // SAFETY: in bounds and aligned (mmap is page-aligned); AtomicU32 has the layout
        // of u32, and all shared words are accessed only atomically.
        unsafe { &*self.ptr.add(off).cast::<AtomicU32>() }
    }

    pub(crate) fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len, "offset from a checked layout");
        // SAFETY: as `u32_at`, for 8-byte words.
        unsafe { &*self.ptr.add(off).cast::<AtomicU64>() }
    }

    /// Copies bytes out of the region. The other side may write them concurrently; the
    /// copy then holds some mix, which is the other side's problem, never a fault.
    pub(crate) fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off.checked_add(out.len()).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds; a byte copy from shared memory into our own buffer.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), out.len()) };
    }

    pub(crate) fn write(&self, off: usize, data: &[u8]) {
        assert!(off.checked_add(data.len()).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds; a byte copy into shared memory.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }

    /// The client's in-place view of part of its buffer area.
    pub(crate) fn bytes_mut(&mut self, off: usize, len: usize) -> &mut [u8] {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len));
        // SAFETY: in bounds; `&mut self` makes this the only view from this process. The
        // adapter touches a frame only while the client has handed it over.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(off), len) }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map_fd`; no references outlive self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A wake-up counter shared by adapter and client (non-blocking reads).
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> Result<Self, EndpointError> {
        // SAFETY: plain syscall.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(EndpointError::last_os("eventfd"));
        }
        // SAFETY: a new fd nothing else owns.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    pub fn from_fd(fd: OwnedFd) -> Self {
        EventFd(fd)
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }

    /// Wakes the other side. A full counter (never in practice) just drops the signal.
    pub fn signal(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer to our fd.
        unsafe { libc::write(self.0.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Waits up to `timeout_ms` (-1: forever) for a signal and clears it. Returns
    /// whether one came.
    pub fn wait(&self, timeout_ms: i32) -> Result<bool, EndpointError> {
        let mut pfd = libc::pollfd { fd: self.0.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(EndpointError::Os { call: "poll", err });
        }
        if n == 0 {
            return Ok(false);
        }
        let mut buf = [0u8; 8];
        // SAFETY: reads up to 8 bytes into a live buffer; EAGAIN is fine (raced).
        unsafe { libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), 8) };
        Ok(true)
    }
}
