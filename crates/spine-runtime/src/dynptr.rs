//! XDP dynptrs: the kfuncs `bpf_dynptr_from_xdp`, `bpf_dynptr_slice`,
//! `bpf_dynptr_slice_rdwr`, `bpf_dynptr_adjust`, `bpf_dynptr_is_null`,
//! `bpf_dynptr_is_rdonly`, `bpf_dynptr_size` and `bpf_dynptr_clone`, and the helpers
//! `bpf_dynptr_read`, `bpf_dynptr_write` and `bpf_dynptr_data`, with the kernel's
//! results (`kernel/bpf/helpers.c`, `net/core/filter.c`: `bpf_xdp_pointer`,
//! `bpf_xdp_copy_buf`).
//!
//! A dynptr is 16 bytes of the program's stack, which the verifier lets only these
//! calls touch. spine keeps no address in it: the frame is always the invocation's
//! own. Layout (native-endian words): `kind` (0: null, [`KIND_XDP`]: the frame),
//! `offset` into the frame, `size`, and a zero word.

use spine_abi::{errno, helper};
use spine_vm::{CallAbort, Memory};

use crate::helpers::{neg, XdpEnv};

/// A dynptr over the invocation's frame (the kernel's `BPF_DYNPTR_TYPE_XDP`).
const KIND_XDP: u32 = 1;
/// `sizeof(struct bpf_dynptr)`.
const SIZE: usize = spine_abi::kfunc::DYNPTR_SIZE as usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dynptr {
    kind: u32,
    offset: u32,
    size: u32,
}

impl Dynptr {
    const NULL: Dynptr = Dynptr { kind: 0, offset: 0, size: 0 };

    fn is_null(self) -> bool {
        self.kind == 0
    }

    /// `bpf_dynptr_check_off_len`: `[offset, offset + len)` inside the dynptr.
    fn check_off_len(self, offset: u64, len: u64) -> Result<(), u64> {
        let size = u64::from(self.size);
        if len > size || offset > size - len {
            Err(neg(errno::E2BIG))
        } else {
            Ok(())
        }
    }
}

fn bad_ptr() -> CallAbort {
    CallAbort::Fault("dynptr argument outside the program's memory")
}

fn load(mem: &Memory, addr: u64) -> Result<Dynptr, CallAbort> {
    let b = mem.slice(addr, SIZE).ok_or_else(bad_ptr)?;
    let w = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    Ok(Dynptr { kind: w(0), offset: w(4), size: w(8) })
}

fn store(mem: &mut Memory, addr: u64, d: Dynptr) -> Result<(), CallAbort> {
    let b = mem.slice_mut(addr, SIZE).ok_or_else(bad_ptr)?;
    b[0..4].copy_from_slice(&d.kind.to_ne_bytes());
    b[4..8].copy_from_slice(&d.offset.to_ne_bytes());
    b[8..12].copy_from_slice(&d.size.to_ne_bytes());
    b[12..16].fill(0);
    Ok(())
}

/// Where `bpf_xdp_pointer` finds `[at, at + len)` of the frame.
enum Span {
    /// In the head, at this offset from `data`.
    Linear(u64),
    /// Across the head's end or in the fragments: copied (the kernel returns a pointer
    /// into a fragment where the range lies in one; spine programs cannot address
    /// fragments, so spine copies there too).
    Copy,
}

impl XdpEnv<'_> {
    /// A dynptr helper or kfunc (`id` one of [`spine_abi::helper`]'s dynptr numbers).
    pub(crate) fn dynptr_call(
        &mut self,
        id: u32,
        a: [u64; 5],
        mem: &mut Memory,
    ) -> Result<u64, CallAbort> {
        Ok(match id {
            helper::KFUNC_DYNPTR_FROM_XDP => {
                // `bpf_dynptr_from_xdp(ctx, flags, ptr__uninit)`.
                self.check_ctx(a[0])?;
                if a[1] != 0 {
                    store(mem, a[2], Dynptr::NULL)?;
                    return Ok(neg(errno::EINVAL));
                }
                let size = self.buff_len() as u32;
                store(mem, a[2], Dynptr { kind: KIND_XDP, offset: 0, size })?;
                0
            }
            helper::KFUNC_DYNPTR_SLICE | helper::KFUNC_DYNPTR_SLICE_RDWR => {
                // `bpf_dynptr_slice(ptr, u32 offset, buffer__opt, u32 buffer__szk)`.
                let d = load(mem, a[0])?;
                let (offset, len) = (u64::from(a[1] as u32), u64::from(a[3] as u32));
                if d.is_null() || d.check_off_len(offset, len).is_err() {
                    return Ok(0);
                }
                let at = u64::from(d.offset) + offset;
                match self.xdp_span(at, len) {
                    Ok(Span::Linear(off)) => self.ctx().data + off,
                    _ if a[2] == 0 => 0,
                    span => {
                        let buf = mem.slice_mut(a[2], len as usize).ok_or_else(bad_ptr)?;
                        let buf = buf.as_mut_ptr();
                        // Out of range (the frame shrank under the dynptr): the kernel's
                        // `bpf_xdp_copy_buf` copies what there is.
                        let n = match span {
                            Ok(_) => len,
                            Err(_) => self.buff_len().saturating_sub(at).min(len),
                        };
                        if n > 0 {
                            // SAFETY: `buf` is `len >= n` writable bytes of a region of
                            // the invocation; `[at, at + n)` lies in the frame.
                            unsafe { self.copy_packet(at as usize, buf, n as usize, false) };
                        }
                        a[2]
                    }
                }
            }
            helper::DYNPTR_READ => {
                // `bpf_dynptr_read(dst, u32 len, src, u32 offset, u64 flags)`.
                let d = load(mem, a[2])?;
                if d.is_null() || a[4] != 0 {
                    return Ok(neg(errno::EINVAL));
                }
                let (offset, len) = (u64::from(a[3] as u32), u64::from(a[1] as u32));
                if let Err(e) = d.check_off_len(offset, len) {
                    return Ok(e);
                }
                let at = u64::from(d.offset) + offset;
                if let Err(e) = self.xdp_span(at, len) {
                    return Ok(e);
                }
                let buf = mem.slice_mut(a[0], len as usize).ok_or_else(bad_ptr)?.as_mut_ptr();
                if len > 0 {
                    // SAFETY: `buf` is `len` writable bytes of a region of the invocation
                    // (it may overlap the head: `copy_packet` allows that); the range lies
                    // in the frame (checked by `xdp_span`).
                    unsafe { self.copy_packet(at as usize, buf, len as usize, false) };
                }
                0
            }
            helper::DYNPTR_WRITE => {
                // `bpf_dynptr_write(dst, u32 offset, src, u32 len, u64 flags)`; an XDP
                // dynptr is never read-only.
                let d = load(mem, a[0])?;
                if d.is_null() {
                    return Ok(neg(errno::EINVAL));
                }
                let (offset, len) = (u64::from(a[1] as u32), u64::from(a[3] as u32));
                if let Err(e) = d.check_off_len(offset, len) {
                    return Ok(e);
                }
                if a[4] != 0 {
                    return Ok(neg(errno::EINVAL));
                }
                let at = u64::from(d.offset) + offset;
                if let Err(e) = self.xdp_span(at, len) {
                    return Ok(e);
                }
                let src = mem.slice(a[2], len as usize).ok_or_else(bad_ptr)?.as_ptr().cast_mut();
                if len > 0 {
                    // SAFETY: `src` is `len` readable bytes of a region of the invocation,
                    // only read for a store; the range lies in the frame.
                    unsafe { self.copy_packet(at as usize, src, len as usize, true) };
                }
                0
            }
            // The kernel gives no direct pointer into an XDP dynptr here (programs use
            // the slices); the dynptr must still be one.
            helper::DYNPTR_DATA => {
                load(mem, a[0])?;
                0
            }
            helper::KFUNC_DYNPTR_ADJUST => {
                // `bpf_dynptr_adjust(ptr, u32 start, u32 end)`.
                let mut d = load(mem, a[0])?;
                let (start, end) = (a[1] as u32, a[2] as u32);
                if d.is_null() || start > end {
                    return Ok(neg(errno::EINVAL));
                }
                if start > d.size || end > d.size {
                    return Ok(neg(errno::ERANGE));
                }
                d.offset += start;
                d.size = end - start;
                store(mem, a[0], d)?;
                0
            }
            helper::KFUNC_DYNPTR_IS_NULL => u64::from(load(mem, a[0])?.is_null()),
            // Only a dynptr from a read-only source is; an XDP one never is.
            helper::KFUNC_DYNPTR_IS_RDONLY => {
                load(mem, a[0])?;
                0
            }
            helper::KFUNC_DYNPTR_SIZE => {
                let d = load(mem, a[0])?;
                // A `u32` result: -EINVAL truncated, as the kernel's.
                u64::from(if d.is_null() { neg(errno::EINVAL) as u32 } else { d.size })
            }
            helper::KFUNC_DYNPTR_CLONE => {
                let d = load(mem, a[0])?;
                store(mem, a[1], d)?;
                if d.is_null() {
                    return Ok(neg(errno::EINVAL));
                }
                0
            }
            _ => return Err(CallAbort::Unknown),
        })
    }

    /// The kernel's `bpf_xdp_pointer` for `[at, at + len)` of the frame: `-EFAULT` for
    /// an offset or length past 0xffff, `-EINVAL` past the end of the frame.
    fn xdp_span(&mut self, at: u64, len: u64) -> Result<Span, u64> {
        if at > 0xffff || len > 0xffff {
            return Err(neg(errno::EFAULT));
        }
        if at + len > self.buff_len() {
            return Err(neg(errno::EINVAL));
        }
        let c = self.ctx();
        Ok(if at + len <= c.data_end - c.data { Span::Linear(at) } else { Span::Copy })
    }
}
