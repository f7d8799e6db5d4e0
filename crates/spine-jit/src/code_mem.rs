//! Executable memory for one compiled program, kept W^X: the pages are mapped
//! read+write, filled, then switched to read+execute before anyone can run them, and are
//! never writable and executable at once. The mapping is removed on drop.
//!
//! This is the only place in the crate that talks to the OS.

use std::io;
use std::ptr::NonNull;

/// Machine code in its own private anonymous mapping, read+execute only.
#[derive(Debug)]
pub(crate) struct CodeMem {
    ptr: NonNull<u8>,
    /// Mapped bytes (the code length rounded up to whole pages).
    map_len: usize,
    code_len: usize,
}

// SAFETY: after `new` returns the mapping is immutable (read+execute) and owned by this
// value alone, so sharing or sending the pointer between threads is sound.
unsafe impl Send for CodeMem {}
// SAFETY: as for `Send`; no method mutates the mapping through `&self`.
unsafe impl Sync for CodeMem {}

impl CodeMem {
    /// Copies `code` into fresh pages and makes them read+execute.
    pub(crate) fn new(code: &[u8]) -> io::Result<Self> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096);
        let map_len = code.len().max(1).div_ceil(page) * page;
        // SAFETY: an anonymous private mapping with a null hint aliases no existing
        // memory; the result is checked against MAP_FAILED before use.
        let raw = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(raw.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        let mem = CodeMem { ptr, map_len, code_len: code.len() };
        // SAFETY: the mapping is `map_len >= code.len()` bytes, writable, and not shared
        // with anything else yet; `code` cannot overlap a mapping created just now.
        unsafe { std::ptr::copy_nonoverlapping(code.as_ptr(), ptr.as_ptr(), code.len()) };
        // SAFETY: changes the protection of our own whole mapping; from here on it is
        // never written again (x86-64 keeps instruction fetch coherent with stores).
        let rc = unsafe {
            libc::mprotect(ptr.as_ptr().cast(), map_len, libc::PROT_READ | libc::PROT_EXEC)
        };
        if rc != 0 {
            // `mem` is dropped here, which unmaps the pages.
            return Err(io::Error::last_os_error());
        }
        Ok(mem)
    }

    /// Start of the code.
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Bytes of machine code (not counting the padding to the page end).
    pub(crate) fn len(&self) -> usize {
        self.code_len
    }

    /// The machine code, for disassembly and profilers.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping is readable (R+X) and `code_len` bytes of it hold the code
        // for as long as `self` lives; it is never written after `new`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.code_len) }
    }
}

impl Drop for CodeMem {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`map_len` describe exactly the mapping made in `new`, which no
        // borrow of `self` can outlive; nothing runs code from it after the owner drops.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.map_len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_a_copy_of_the_code_in_whole_pages() {
        let code: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let m = CodeMem::new(&code).unwrap();
        assert_eq!(m.len(), 5000);
        assert_eq!(m.map_len % 4096, 0);
        assert!(m.map_len >= 5000);
        // SAFETY: the mapping is readable and `len()` bytes long while `m` lives.
        let copy = unsafe { std::slice::from_raw_parts(m.as_ptr(), m.len()) };
        assert_eq!(copy, &code[..]);
        let empty = CodeMem::new(&[]).unwrap();
        assert_eq!(empty.len(), 0);
    }
}
