//! `BPF_PROG_TEST_RUN` for XDP programs: one packet in, the verdict and the packet as the
//! program left it out. This is how the kernel serves as spine's reference.
//!
//! How the kernel builds the frame (`bpf_prog_test_run_xdp`, `net/bpf/test_run.c`): a
//! 4096-byte buffer with `XDP_PACKET_HEADROOM` (256) bytes before the packet and
//! `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` (320 on x86-64) after the largest
//! linear packet, which is therefore 3520 bytes; the rest of a longer `data_in` goes into
//! up to `MAX_SKB_FRAGS` (17) page fragments, longer is `ENOMEM`. Any XDP program gets
//! such a frame: the test run does not look at `BPF_F_XDP_HAS_FRAGS` (a plain program
//! sees `bpf_xdp_get_buff_len` count the fragments). `data_in` must hold at least
//! 14 bytes (`ETH_HLEN`) after any metadata, else `EINVAL`. Without a context
//! `data_meta == data`.
//!
//! A context (`struct xdp_md` in `ctx_in`) must describe that packet, as the kernel and
//! its `xdp_convert_md_to_buff` check, all fields being offsets into `data_in`
//! (anything else is `EINVAL`):
//! - `data_meta` must be 0;
//! - `data_end` must equal `data_in.len()`. Since Linux 6.18 (and stable kernels that
//!   took the change) it may also be smaller: it then sets the length of the linear part
//!   and the rest of `data_in` goes into fragments;
//! - `data` (the metadata length: the first `data` bytes of `data_in` are metadata, taken
//!   out of the headroom) must be `<= data_end` and a multiple of 4, and fit the headroom
//!   less `struct xdp_frame`: at most 216 bytes on Linux 6.18 (older kernels took 32);
//! - `egress_ifindex` must be 0;
//! - `ingress_ifindex`, when non-zero, must name a device in the caller's network
//!   namespace (`ENODEV` otherwise) and `rx_queue_index` one of its registered receive
//!   queues; the program then sees both. A non-zero `rx_queue_index` needs a non-zero
//!   `ingress_ifindex`. Without them the program sees the loopback device, queue 0.
//!
//! The output is the frame from `data_meta` to `data_end` (plus fragments): metadata the
//! program added with `bpf_xdp_adjust_meta`, or that `ctx_in` supplied, comes first. The
//! context out holds `data` and `data_end` as offsets from `data_meta`, i.e. into the
//! output bytes, and the interface fields as they went in.
//!
//! `flags` accepts only `BPF_F_TEST_XDP_LIVE_FRAMES` for XDP; the kernel ignores `cpu`
//! for XDP (it is for raw tracepoints). `duration_ns` is the mean over `repeat` runs.

use std::os::fd::AsRawFd;

use spine_abi::xdp_md;

use crate::sys::{self, bpf, BpfAttr, Cmd, TestRunAttr};
use crate::{KernelProg, SysError};

/// Output room beyond the input length. A program can grow the output by at most the
/// usable headroom (`adjust_head`/`adjust_meta`: 256 minus the 40 bytes of
/// `struct xdp_frame`) plus less than a page at the tail (`adjust_tail` within the linear
/// page or the last fragment's page), so input + 4096 + 256 always fits.
pub const DATA_OUT_SLACK: usize = 4096 + 256;

/// `struct xdp_md` as user space hands it to `BPF_PROG_TEST_RUN`: offsets into the
/// packet buffer instead of pointers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpMd {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

impl XdpMd {
    /// The context of a `len`-byte packet whose first `meta_len` bytes are metadata.
    pub fn for_packet(len: u32, meta_len: u32) -> Self {
        XdpMd { data: meta_len, data_end: len, ..XdpMd::default() }
    }

    /// Native-endian bytes, in `xdp_md` field order.
    pub fn to_bytes(self) -> [u8; xdp_md::SIZE] {
        let mut b = [0u8; xdp_md::SIZE];
        let fields = [
            self.data,
            self.data_end,
            self.data_meta,
            self.ingress_ifindex,
            self.rx_queue_index,
            self.egress_ifindex,
        ];
        for (chunk, f) in b.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&f.to_ne_bytes());
        }
        b
    }

    pub fn from_bytes(b: &[u8; xdp_md::SIZE]) -> Self {
        let w = |i: usize| u32::from_ne_bytes(b[i * 4..i * 4 + 4].try_into().expect("4"));
        XdpMd {
            data: w(0),
            data_end: w(1),
            data_meta: w(2),
            ingress_ifindex: w(3),
            rx_queue_index: w(4),
            egress_ifindex: w(5),
        }
    }
}

/// One `BPF_PROG_TEST_RUN` request.
#[derive(Debug, Clone)]
pub struct TestRun<'a> {
    pub data_in: &'a [u8],
    /// Bytes of room for the output packet; the kernel refuses with `ENOSPC` (after
    /// running the program) when the output is longer. 0 asks for no output bytes.
    pub data_out_capacity: usize,
    /// The context the program starts with (see the module docs for the kernel's rules).
    pub ctx_in: Option<XdpMd>,
    /// Return the context as the run left it. Without `ctx_in` the default context of
    /// the packet is sent, since the kernel refuses a context out with none in.
    pub ctx_out: bool,
    /// Runs (0 means 1, as in the kernel); the packet is reset before each.
    pub repeat: u32,
    pub flags: u32,
    pub cpu: u32,
}

impl<'a> TestRun<'a> {
    /// One run of `data_in` with no context, output room [`DATA_OUT_SLACK`] beyond it.
    pub fn new(data_in: &'a [u8]) -> Self {
        TestRun {
            data_in,
            data_out_capacity: data_in.len() + DATA_OUT_SLACK,
            ctx_in: None,
            ctx_out: false,
            repeat: 1,
            flags: 0,
            cpu: 0,
        }
    }
}

/// What a test run returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRunOut {
    /// The program's return value (the XDP verdict) of the last run.
    pub retval: u32,
    /// Mean nanoseconds per run, as the kernel measured it (saturating at `u32::MAX`).
    pub duration_ns: u32,
    /// The frame from `data_meta` to `data_end` after the last run.
    pub data_out: Vec<u8>,
    /// The context after the run, when [`TestRun::ctx_out`] asked for it.
    pub ctx_out: Option<XdpMd>,
}

impl KernelProg {
    /// Runs the program on one packet in the kernel.
    pub fn test_run(&self, run: &TestRun<'_>) -> Result<TestRunOut, SysError> {
        let op = Cmd::ProgTestRun;
        let data_size_in = sys::len_u32(op, run.data_in.len())?;
        // Never 0 with a buffer: the kernel copies the whole output when the size is 0.
        let data_size_out = sys::len_u32(op, run.data_out_capacity)?;
        let mut data_out = vec![0u8; run.data_out_capacity];
        let ctx_in = match (run.ctx_in, run.ctx_out) {
            (Some(ctx), _) => Some(ctx.to_bytes()),
            (None, true) => Some(XdpMd::for_packet(data_size_in, 0).to_bytes()),
            (None, false) => None,
        };
        let mut ctx_out = [0u8; xdp_md::SIZE];
        let mut attr = BpfAttr::zeroed();
        attr.test_run = TestRunAttr {
            prog_fd: self.fd().as_raw_fd() as u32,
            data_size_in,
            data_size_out,
            data_in: sys::uptr(run.data_in),
            data_out: sys::uptr_mut(&mut data_out),
            repeat: run.repeat,
            ctx_size_in: if ctx_in.is_some() { xdp_md::SIZE as u32 } else { 0 },
            ctx_size_out: if run.ctx_out { xdp_md::SIZE as u32 } else { 0 },
            ctx_in: ctx_in.as_ref().map_or(0, |c| sys::uptr(c)),
            ctx_out: if run.ctx_out { sys::uptr_mut(&mut ctx_out) } else { 0 },
            flags: run.flags,
            cpu: run.cpu,
            ..TestRunAttr::default()
        };
        // SAFETY: the kernel reads data_size_in bytes of `data_in` and ctx_size_in bytes
        // of `ctx_in`, and writes at most data_size_out bytes to `data_out` and
        // ctx_size_out bytes to `ctx_out`: each size is its buffer's length (or 0 with a
        // null pointer).
        unsafe { bpf(op, &mut attr) }?;
        let out = attr.test_run_out();
        // The kernel reports the full output length; it copied at most our capacity.
        data_out.truncate((out.data_size_out as usize).min(data_out.len()));
        Ok(TestRunOut {
            retval: out.retval,
            duration_ns: out.duration,
            data_out,
            ctx_out: run.ctx_out.then(|| XdpMd::from_bytes(&ctx_out)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_md_bytes_round_trip_in_field_order() {
        let md = XdpMd {
            data: 4,
            data_end: 64,
            data_meta: 0,
            ingress_ifindex: 1,
            rx_queue_index: 2,
            egress_ifindex: 3,
        };
        let b = md.to_bytes();
        assert_eq!(&b[xdp_md::DATA_END as usize..][..4], &64u32.to_ne_bytes());
        assert_eq!(&b[xdp_md::INGRESS_IFINDEX as usize..][..4], &1u32.to_ne_bytes());
        assert_eq!(&b[xdp_md::EGRESS_IFINDEX as usize..][..4], &3u32.to_ne_bytes());
        assert_eq!(XdpMd::from_bytes(&b), md);
    }

    #[test]
    fn default_run_has_room_for_growth() {
        let pkt = [0u8; 60];
        let run = TestRun::new(&pkt);
        assert_eq!(run.data_out_capacity, 60 + DATA_OUT_SLACK);
        assert_eq!(run.repeat, 1);
        assert_eq!(XdpMd::for_packet(60, 8), XdpMd { data: 8, data_end: 60, ..XdpMd::default() });
    }
}
