//! The pool's one allocation: page-aligned and zeroed, so it can be registered with the
//! kernel as an AF_XDP UMEM and never shows a previous user's bytes.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ptr::NonNull;

use crate::PoolError;

/// Alignment of the region: the kernel requires a page-aligned UMEM.
pub(crate) const PAGE: usize = 4096;

/// Owns `len` zeroed bytes at a page-aligned address until dropped.
#[derive(Debug)]
pub(crate) struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the region is plain memory with no thread affinity; who may touch which bytes
// is decided by the pool's ownership rules, not by the thread that allocated it.
unsafe impl Send for Region {}
// SAFETY: as above; `Region` itself only hands out its base pointer and length.
unsafe impl Sync for Region {}

impl Region {
    pub(crate) fn new(len: usize) -> Result<Region, PoolError> {
        let layout = Layout::from_size_align(len.max(PAGE).next_multiple_of(PAGE), PAGE)
            .map_err(|_| PoolError::OutOfMemory { bytes: len })?;
        // SAFETY: `layout` has a non-zero size (at least one page).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(PoolError::OutOfMemory { bytes: layout.size() })?;
        Ok(Region { ptr, layout })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Bytes allocated: the requested length rounded up to whole pages.
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_aligned_and_rounded() {
        let r = Region::new(10_000).unwrap();
        assert_eq!(r.base().as_ptr() as usize % PAGE, 0);
        assert_eq!(r.len(), 12_288);
    }
}
