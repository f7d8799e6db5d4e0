//! Value memory: one fixed, zeroed, 64-byte-aligned allocation per map, whose addresses
//! programs hold as raw pointers for the map's lifetime. The only `unsafe` in the crate.
//!
//! Programs (interpreter or JIT) read and write this memory with plain loads and stores
//! from several threads at once, exactly as kernel programs race on map values. The map's
//! own copies (user-space lookups and updates, helper updates) go through relaxed atomic
//! accesses so that they are data-race-free on our side. To avoid mixed-size atomic
//! accesses to the same bytes, every slot is split the same way by every operation:
//! bytes `[0, value_size & !7)` are accessed as aligned `u64` words, the rest of the
//! slot (up to `round_up(value_size, 8)`) byte by byte.
#![expect(unsafe_code, reason = "the one module that owns raw value memory")]

use std::alloc::{self, Layout};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering::Relaxed};

/// Alignment of every arena: a cache line, so per-CPU areas never share one.
pub(crate) const ARENA_ALIGN: usize = 64;
const PAGE: usize = 4096;

/// A fixed block of value slots. Slot offsets handed to the copy functions must be
/// multiples of 8, and every slot has the same `value_size` (fixed at construction).
#[derive(Debug)]
pub(crate) struct Arena {
    ptr: NonNull<u8>,
    layout: Layout,
    /// `value_size & !7`: the word-accessed prefix of every slot.
    split: usize,
    /// For a shared segment: the memfd the bytes live in (mapped `MAP_SHARED`, whole
    /// pages); `None` for heap memory.
    shared: Option<OwnedFd>,
}

// SAFETY: the arena owns its allocation; all access from this module is through atomics,
// and the pointers handed out are used by program engines that accept racing on values
// (the kernel's semantics). Nothing in the arena is tied to a thread.
unsafe impl Send for Arena {}
// SAFETY: as for `Send`: shared access only ever performs atomic operations here.
unsafe impl Sync for Arena {}

impl Arena {
    /// Allocates `len` zeroed bytes (`len > 0`) for slots of `value_size` bytes. With
    /// `commit`, every page is touched now so that no page fault lands on the data path
    /// (the kernel's preallocated maps); otherwise pages are committed on first use.
    /// `None` if the allocator refuses.
    pub(crate) fn new(len: usize, value_size: usize, commit: bool) -> Option<Arena> {
        let layout = Layout::from_size_align(len.max(1), ARENA_ALIGN).ok()?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        let arena = Arena { ptr, layout, split: value_size & !7, shared: None };
        if commit {
            for off in (0..layout.size()).step_by(PAGE) {
                // SAFETY: `off < size`, inside the allocation; a relaxed atomic store of
                // the zero already there, before the arena is shared.
                unsafe { AtomicU8::from_ptr(raw.add(off)) }.store(0, Relaxed);
            }
        }
        Some(arena)
    }

    /// `len` zeroed bytes in a new memfd named `name`, mapped shared and populated
    /// (whole pages): a segment other processes map through [`Arena::fd`]. `None` if
    /// the kernel refuses.
    pub(crate) fn shared(len: usize, value_size: usize, name: &str) -> Option<Arena> {
        let size = len.max(1).next_multiple_of(PAGE);
        let cname = std::ffi::CString::new(format!("spine-segment-{name}")).ok()?;
        // SAFETY: a valid C string; the flags are plain constants.
        let raw_fd = unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING)
        };
        if raw_fd < 0 {
            return None;
        }
        // SAFETY: memfd_create returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw_fd) };
        // SAFETY: ftruncate on our descriptor.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), size as libc::off_t) } != 0 {
            return None;
        }
        // Sealed against shrinking and growing: a host that maps the segment can change
        // its bytes, never its size (a shrunk file would fault the workers' accesses).
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
        // SAFETY: fcntl on our descriptor with plain integer arguments.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
            return None;
        }
        // SAFETY: a new shared mapping of the whole file; checked below.
        let raw = unsafe {
            libc::mmap(
                ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if raw == libc::MAP_FAILED {
            return None;
        }
        let ptr = NonNull::new(raw.cast::<u8>())?;
        let layout = Layout::from_size_align(size, PAGE).ok()?;
        Some(Arena { ptr, layout, split: value_size & !7, shared: Some(fd) })
    }

    /// The memfd of a shared segment.
    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.shared.as_ref().map(AsFd::as_fd)
    }

    /// The 4-byte lock word at `off` (a multiple of 4 inside the arena).
    pub(crate) fn lock_word(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len(), "lock word {off} out of range");
        // SAFETY: aligned (the base is 64-aligned) and inside the allocation, which lives
        // as long as `&self`.
        unsafe { AtomicU32::from_ptr(self.ptr.as_ptr().add(off).cast::<u32>()) }
    }

    /// Copies `src` into the slot at `off` byte by byte, leaving the 4 bytes at
    /// `off + hole` alone: a value holding a `bpf_spin_lock`, whose word others may be
    /// taking or releasing meanwhile (the kernel's `copy_map_value`).
    pub(crate) fn write_except(&self, off: usize, src: &[u8], hole: usize) {
        self.check(off, src.len());
        for (i, b) in src.iter().enumerate() {
            if !(hole..hole + 4).contains(&i) {
                self.byte(off + i).store(*b, Relaxed);
            }
        }
    }

    /// Start address of the arena.
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Size of the arena in bytes.
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }

    /// Address of byte `off`. Panics if `off` is outside the arena: callers compute
    /// offsets from validated indices, so this is an internal invariant.
    pub(crate) fn ptr_at(&self, off: usize) -> NonNull<u8> {
        assert!(off < self.len(), "arena offset {off} out of {}", self.len());
        // SAFETY: `off` is inside the allocation, so the result is in bounds and non-null.
        unsafe { self.ptr.add(off) }
    }

    fn check(&self, off: usize, len: usize) {
        assert!(
            off.is_multiple_of(8) && off.checked_add(len).is_some_and(|end| end <= self.len()),
            "arena range {off}+{len} out of {}",
            self.len()
        );
    }

    fn word(&self, off: usize) -> &AtomicU64 {
        // SAFETY: callers checked `off + 8 <= len` and `off % 8 == 0`; the base is
        // 64-aligned, so the word is aligned and inside the allocation, which lives as
        // long as `&self`. All our accesses to these bytes are atomic (module docs).
        unsafe { AtomicU64::from_ptr(self.ptr.as_ptr().add(off).cast::<u64>()) }
    }

    fn byte(&self, off: usize) -> &AtomicU8 {
        // SAFETY: callers checked `off < len`; see `word`.
        unsafe { AtomicU8::from_ptr(self.ptr.as_ptr().add(off)) }
    }

    /// Copies `dst.len()` bytes from slot offset `off` (at least `value_size & !7`
    /// bytes, at most the padded slot).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        debug_assert!(dst.len() >= self.split);
        let (words, tail) = dst.split_at_mut(self.split);
        for (i, chunk) in words.chunks_exact_mut(8).enumerate() {
            chunk.copy_from_slice(&self.word(off + i * 8).load(Relaxed).to_ne_bytes());
        }
        for (i, b) in tail.iter_mut().enumerate() {
            *b = self.byte(off + self.split + i).load(Relaxed);
        }
    }

    /// Copies `src` into the slot at `off` (same length rule as [`Arena::read`]).
    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        debug_assert!(src.len() >= self.split);
        let (words, tail) = src.split_at(self.split);
        for (i, chunk) in words.chunks_exact(8).enumerate() {
            let w = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
            self.word(off + i * 8).store(w, Relaxed);
        }
        for (i, b) in tail.iter().enumerate() {
            self.byte(off + self.split + i).store(*b, Relaxed);
        }
    }

    /// Copies `dst.len()` bytes from `off` (a multiple of 8), whatever the slot size:
    /// whole words as `u64`, the tail byte by byte. For a ring buffer, whose records
    /// have any length; a record's bytes are never accessed by two of our operations
    /// at once (the ring's positions order the producer's copy before the consumer's).
    pub(crate) fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        let done = dst.len() & !7;
        let mut words = dst.chunks_exact_mut(8);
        for (i, chunk) in (&mut words).enumerate() {
            chunk.copy_from_slice(&self.word(off + i * 8).load(Relaxed).to_ne_bytes());
        }
        for (i, b) in words.into_remainder().iter_mut().enumerate() {
            *b = self.byte(off + done + i).load(Relaxed);
        }
    }

    /// Copies `src` to `off` (a multiple of 8); see [`Arena::read_bytes`].
    pub(crate) fn write_bytes(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        let mut words = src.chunks_exact(8);
        for (i, chunk) in (&mut words).enumerate() {
            let w = u64::from_ne_bytes(chunk.try_into().expect("8-byte chunk"));
            self.word(off + i * 8).store(w, Relaxed);
        }
        let done = src.len() & !7;
        for (i, b) in words.remainder().iter().enumerate() {
            self.byte(off + done + i).store(*b, Relaxed);
        }
    }

    /// Copies `src` to `off`, any offset: bytes up to the next multiple of 8, then as
    /// [`Arena::write_bytes`] (the parts of a record written one after the other).
    pub(crate) fn write_bytes_at(&self, off: usize, src: &[u8]) {
        let head = (off.next_multiple_of(8) - off).min(src.len());
        assert!(off.checked_add(src.len()).is_some_and(|end| end <= self.len()), "arena range");
        for (i, b) in src[..head].iter().enumerate() {
            self.byte(off + i).store(*b, Relaxed);
        }
        if head < src.len() {
            self.write_bytes(off + head, &src[head..]);
        }
    }

    /// Zeroes `len` bytes of the slot at `off` (same length rule as [`Arena::read`]).
    pub(crate) fn zero(&self, off: usize, len: usize) {
        self.check(off, len);
        debug_assert!(len >= self.split);
        for i in 0..self.split / 8 {
            self.word(off + i * 8).store(0, Relaxed);
        }
        for i in self.split..len {
            self.byte(off + i).store(0, Relaxed);
        }
    }
}

#[cfg(test)]
impl Arena {
    /// Bytes at `off` read one by one (single-threaded tests).
    pub(crate) fn peek(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off.checked_add(len).is_some_and(|end| end <= self.len()));
        (off..off + len).map(|i| self.byte(i).load(Relaxed)).collect()
    }

    /// The aligned word at `off`, as a program's 8-byte load would see it.
    pub(crate) fn load_u64(&self, off: usize) -> u64 {
        self.check(off, 8);
        self.word(off).load(Relaxed)
    }

    /// Stores the aligned word at `off`, as a program's 8-byte store would.
    pub(crate) fn store_u64(&self, off: usize, v: u64) {
        self.check(off, 8);
        self.word(off).store(v, Relaxed)
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        if self.shared.is_some() {
            // SAFETY: mapped in `shared` with this size and not unmapped before; the
            // memfd closes after (other processes' mappings stay valid).
            unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.layout.size()) };
            return;
        }
        // SAFETY: allocated in `new` with this layout and not freed before.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Atomic integers: valid when every byte is zero.
pub(crate) trait ZeroIsValid {}
impl ZeroIsValid for AtomicBool {}
impl ZeroIsValid for AtomicU32 {}
impl ZeroIsValid for AtomicU64 {}

/// `n` zeroed atomics, or `None` if the allocator refuses (rather than aborting, as
/// collecting into a `Box` would). Large slices are committed on first touch.
pub(crate) fn zeroed_slice<T: ZeroIsValid>(n: usize) -> Option<Box<[T]>> {
    if n == 0 {
        return Some(Box::new([]));
    }
    let layout = Layout::array::<T>(n).ok()?;
    // SAFETY: `layout` has a non-zero size (`T` is a non-zero-sized atomic, `n > 0`).
    let p = unsafe { alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` is a fresh global-allocator block with the layout of `[T; n]`, which
    // is how `Box<[T]>` frees it; all-zero bytes are a valid `T` (`ZeroIsValid`).
    Some(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(p, n)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_aligned_and_round_trips() {
        let a = Arena::new(64, 12, true).unwrap();
        assert_eq!(a.base().as_ptr() as usize % ARENA_ALIGN, 0);
        let mut out = [0xffu8; 16];
        a.read(16, &mut out);
        assert_eq!(out, [0; 16]);
        let v: Vec<u8> = (1..=12).collect();
        a.write(16, &v);
        let mut back = [0u8; 12];
        a.read(16, &mut back);
        assert_eq!(&back[..], &v[..]);
        let mut padded = [0xffu8; 16];
        a.read(16, &mut padded);
        assert_eq!(&padded[..12], &v[..]);
        assert_eq!(&padded[12..], &[0; 4]);
        // Neighbouring slots are untouched.
        let mut next = [0xffu8; 16];
        a.read(32, &mut next);
        assert_eq!(next, [0; 16]);
        a.zero(16, 12);
        a.read(16, &mut back);
        assert_eq!(back, [0; 12]);
    }

    #[test]
    fn byte_ranges_of_any_length_round_trip() {
        let a = Arena::new(64, 0, true).unwrap();
        let v: Vec<u8> = (1..=21).collect();
        a.write_bytes(8, &v);
        let mut back = [0u8; 21];
        a.read_bytes(8, &mut back);
        assert_eq!(&back[..], &v[..]);
        assert_eq!(a.peek(0, 8), [0; 8]);
        assert_eq!(a.peek(29, 35), vec![0; 35], "nothing written past the range");
        a.read_bytes(64, &mut []);
    }

    #[test]
    fn pointers_match_copies() {
        let a = Arena::new(32, 8, false).unwrap();
        a.write(8, &7u64.to_ne_bytes());
        let p = a.ptr_at(8);
        assert_eq!(p.as_ptr() as usize, a.base().as_ptr() as usize + 8);
    }

    #[test]
    fn zeroed_slices_are_zero() {
        let s: Box<[AtomicU64]> = zeroed_slice(1000).unwrap();
        assert_eq!(s.len(), 1000);
        assert!(s.iter().all(|w| w.load(Relaxed) == 0));
        let e: Box<[AtomicU32]> = zeroed_slice(0).unwrap();
        assert!(e.is_empty());
        assert!(zeroed_slice::<AtomicU64>(usize::MAX / 4).is_none());
    }

    #[test]
    #[should_panic(expected = "out of")]
    fn out_of_range_offsets_panic() {
        let a = Arena::new(16, 8, false).unwrap();
        a.write(16, &[0; 8]);
    }
}
