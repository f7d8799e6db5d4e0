//! The fragments of a multi-buffer XDP frame, as the kernel keeps them in the
//! `skb_shared_info` of an `xdp_buff` with the frags flag: the program's `data`/`data_end`
//! cover only the linear head, and the rest of the packet lies in fragments of one
//! buffer each, which the program reaches only through helpers
//! (`bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes`/`store_bytes`, `bpf_xdp_adjust_tail`).
//!
//! Every fragment starts at offset 0 of its own buffer of [`Frags::frag_size`] bytes (as
//! the pages `BPF_PROG_TEST_RUN` allocates), so a fragment's tailroom is the rest of its
//! buffer. The buffers are allocated once, when the frame is made: loading a packet and
//! the helpers never allocate. Lengths and offsets here are spine's own; callers check
//! whatever a program passes before it reaches these methods.

/// Fragments one frame may have: the kernel's `MAX_SKB_FRAGS` (`CONFIG_MAX_SKB_FRAGS`,
/// 17 by default; `/proc/sys/net/core/max_skb_frags` shows it). `BPF_PROG_TEST_RUN`
/// refuses a packet that needs more with `ENOMEM`.
pub const MAX_FRAGS: usize = 17;

/// The fragments of one frame: `count` buffers in use, each holding `lens[i]` bytes from
/// its start.
#[derive(Debug, Clone)]
pub struct Frags {
    /// `capacity` buffers of `frag_size` bytes, back to back.
    mem: Box<[u8]>,
    lens: Box<[usize]>,
    count: usize,
    frag_size: usize,
    /// Bytes in all fragments (the kernel's `xdp_frags_size`).
    total: usize,
}

impl Frags {
    /// Room for `capacity` fragments of up to `frag_size` bytes each, none in use.
    pub fn new(frag_size: usize, capacity: usize) -> Frags {
        Frags {
            mem: vec![0u8; frag_size * capacity].into_boxed_slice(),
            lens: vec![0; capacity].into_boxed_slice(),
            count: 0,
            frag_size,
            total: 0,
        }
    }

    /// Bytes of one fragment's buffer (the kernel's `rxq->frag_size`).
    pub fn frag_size(&self) -> usize {
        self.frag_size
    }

    /// Most fragments a frame may have.
    pub fn capacity(&self) -> usize {
        self.lens.len()
    }

    /// Fragments in use (the kernel's `nr_frags`).
    pub fn count(&self) -> usize {
        self.count
    }

    /// Bytes in all fragments together.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Largest number of bytes the fragments can hold.
    pub fn max_total(&self) -> usize {
        self.frag_size * self.capacity()
    }

    /// Fragment `i` (`i < count`).
    pub fn frag(&self, i: usize) -> &[u8] {
        &self.mem[i * self.frag_size..][..self.lens[i]]
    }

    /// Every fragment in use, in packet order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        (0..self.count).map(|i| self.frag(i))
    }

    /// Drops every fragment: the frame is linear again.
    pub fn clear(&mut self) {
        self.count = 0;
        self.total = 0;
    }

    /// Puts `data` into fragments of `frag_size` bytes each, as `BPF_PROG_TEST_RUN` does
    /// with what follows the linear head. `false` (and nothing changed) if it needs more
    /// than [`Frags::capacity`] fragments.
    pub(crate) fn fill(&mut self, data: &[u8]) -> bool {
        if data.len() > self.max_total() {
            return false;
        }
        self.clear();
        for chunk in data.chunks(self.frag_size) {
            let i = self.count;
            self.mem[i * self.frag_size..][..chunk.len()].copy_from_slice(chunk);
            self.lens[i] = chunk.len();
            self.count += 1;
        }
        self.total = data.len();
        true
    }

    /// Appends `bytes` as one more fragment, as a port's receive does with each buffer
    /// after the head. `false` (nothing changed) if every fragment is in use or `bytes`
    /// is longer than [`Frags::frag_size`].
    pub fn push(&mut self, bytes: &[u8]) -> bool {
        let i = self.count;
        if i == self.capacity() || bytes.len() > self.frag_size {
            return false;
        }
        self.mem[i * self.frag_size..][..bytes.len()].copy_from_slice(bytes);
        self.lens[i] = bytes.len();
        self.count += 1;
        self.total += bytes.len();
        true
    }

    /// Copies the fragment bytes `[off, off + dst.len())` into `dst`.
    ///
    /// # Panics
    /// If the range passes [`Frags::total`] (the caller checked it).
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        let mut done = 0;
        self.pieces(off, dst.len(), |i, at, n| {
            dst[done..done + n].copy_from_slice(&self.mem[i * self.frag_size + at..][..n]);
            done += n;
        });
    }

    /// Copies `src` into the fragment bytes `[off, off + src.len())`.
    ///
    /// # Panics
    /// If the range passes [`Frags::total`] (the caller checked it).
    pub(crate) fn write(&mut self, off: usize, src: &[u8]) {
        let mut done = 0;
        let (mem, size) = (&mut self.mem, self.frag_size);
        Self::pieces_of(&self.lens[..self.count], off, src.len(), |i, at, n| {
            mem[i * size + at..][..n].copy_from_slice(&src[done..done + n]);
            done += n;
        });
    }

    fn pieces(&self, off: usize, len: usize, f: impl FnMut(usize, usize, usize)) {
        Self::pieces_of(&self.lens[..self.count], off, len, f);
    }

    /// Calls `f(fragment, offset in it, bytes)` for each part of `[off, off + len)`.
    fn pieces_of(
        lens: &[usize],
        mut off: usize,
        mut len: usize,
        mut f: impl FnMut(usize, usize, usize),
    ) {
        for (i, &flen) in lens.iter().enumerate() {
            if len == 0 {
                return;
            }
            if off < flen {
                let n = len.min(flen - off);
                f(i, off, n);
                len -= n;
                off = 0;
            } else {
                off -= flen;
            }
        }
        assert_eq!(len, 0, "fragment range past the end");
    }

    /// `bpf_xdp_adjust_tail` growing a multi-buffer frame: the last fragment grows by
    /// `delta` zeroed bytes, if its buffer has room (`false` otherwise, nothing changed).
    /// Needs at least one fragment.
    pub(crate) fn grow(&mut self, delta: usize) -> bool {
        let Some(last) = self.count.checked_sub(1) else { return false };
        let len = self.lens[last];
        if delta > self.frag_size - len {
            return false;
        }
        self.mem[last * self.frag_size + len..][..delta].fill(0);
        self.lens[last] += delta;
        self.total += delta;
        true
    }

    /// `bpf_xdp_adjust_tail` shrinking a multi-buffer frame: takes up to `n` bytes off
    /// the end of the fragments, last fragment first, dropping every fragment it empties
    /// (as the kernel returns their pages). Returns the bytes it could not take (those
    /// past all the fragments, which the caller takes off the head).
    pub(crate) fn shrink(&mut self, mut n: usize) -> usize {
        while n > 0 && self.count > 0 {
            let last = self.count - 1;
            let take = n.min(self.lens[last]);
            self.lens[last] -= take;
            self.total -= take;
            n -= take;
            if self.lens[last] == 0 {
                self.count -= 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn fill_splits_into_whole_buffers_and_refuses_what_does_not_fit() {
        let mut f = Frags::new(100, 3);
        let data = bytes(250);
        assert!(f.fill(&data));
        assert_eq!((f.count(), f.total()), (3, 250));
        assert_eq!(f.iter().map(<[u8]>::len).collect::<Vec<_>>(), [100, 100, 50]);
        assert_eq!(f.iter().flatten().copied().collect::<Vec<_>>(), data);
        assert!(!f.fill(&bytes(301)));
        assert_eq!(f.total(), 250, "a refused fill changes nothing");
        assert!(f.fill(&[]));
        assert_eq!((f.count(), f.total()), (0, 0));
    }

    #[test]
    fn push_appends_whole_fragments_up_to_the_capacity() {
        let mut f = Frags::new(100, 2);
        assert!(!f.push(&bytes(101)), "longer than a fragment's buffer");
        assert!(f.push(&bytes(100)));
        assert!(f.push(&bytes(3)));
        assert!(!f.push(&bytes(1)), "every fragment in use");
        assert_eq!((f.count(), f.total()), (2, 103));
        assert_eq!(f.frag(1), &bytes(3)[..]);
    }

    #[test]
    fn read_and_write_cross_fragment_boundaries() {
        let mut f = Frags::new(100, 3);
        let data = bytes(250);
        f.fill(&data);
        let mut out = [0u8; 120];
        f.read(90, &mut out);
        assert_eq!(&out[..], &data[90..210]);
        f.write(195, &[0xaa; 10]);
        let mut want = data.clone();
        want[195..205].fill(0xaa);
        assert_eq!(f.iter().flatten().copied().collect::<Vec<_>>(), want);
    }

    #[test]
    #[should_panic(expected = "past the end")]
    fn a_read_past_the_end_panics_rather_than_reading_stale_bytes() {
        let mut f = Frags::new(100, 3);
        f.fill(&bytes(150));
        f.read(140, &mut [0u8; 11]);
    }

    #[test]
    fn grow_fills_the_last_buffer_with_zeros_and_no_further() {
        let mut f = Frags::new(100, 3);
        f.fill(&[0xff; 130]);
        f.shrink(10);
        assert!(f.grow(10));
        assert_eq!(f.frag(1), &[&[0xffu8; 20][..], &[0; 10]].concat()[..]);
        assert!(f.grow(70));
        assert!(!f.grow(1), "the last buffer is full");
        assert_eq!(f.total(), 200);
        assert!(!Frags::new(100, 3).grow(0), "no fragment to grow");
    }

    #[test]
    fn shrink_drops_emptied_fragments_and_returns_what_is_left() {
        let mut f = Frags::new(100, 3);
        f.fill(&bytes(250));
        assert_eq!(f.shrink(50), 0);
        assert_eq!((f.count(), f.total()), (2, 200));
        assert_eq!(f.shrink(130), 0);
        assert_eq!((f.count(), f.total()), (1, 70));
        assert_eq!(f.shrink(100), 30);
        assert_eq!((f.count(), f.total()), (0, 0));
    }
}
