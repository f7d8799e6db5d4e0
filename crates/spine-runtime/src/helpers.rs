//! The helpers an XDP extension may call, with the kernel's semantics and return values.
//!
//! Two ways in, one implementation: through [`Env::call`] (the interpreter, and the JIT's
//! generic trampoline), where every pointer argument is checked against the invocation's
//! regions; and as native functions the JIT calls directly (map operations, the hot
//! path), where the verifier has proved the pointer arguments and the bytes are read in
//! place.
//!
//! Map handles are the object's own (`MAP_HANDLE_BASE + index`) or, for an inner map
//! found through an array_of_maps or hash_of_maps, the handle of its slot, which the
//! invocation holds ([`Held`]) until it ends; every map helper accepts both. Ring-buffer
//! records are held the same way, so a record the program reserved and never committed
//! (it was stopped by a fault or the watchdog) is discarded when the invocation ends.

use std::ffi::c_void;
use std::sync::Arc;

use spine_abi::{errno, helper};
use spine_jit::NativeHelper;
use spine_maps::{Map, RingBuf, TimerCallback};
use spine_vm::{BudgetVerdict, CallAbort, Env, Fault, Iteration, Memory, Region, RunLimits, Step};

use crate::csum;
use crate::ctx::XdpCtx;
use crate::ext::{Engine, Extension};
use crate::frags::Frags;
use crate::frame::{Geometry, ETH_HLEN};
use crate::maps::{map_index, Held, MapTable};
use crate::printk;
use crate::Host;

const MAX_META: u64 = spine_abi::xdp_frame::MAX_META as u64;
/// Tail calls one invocation may make (the kernel's `MAX_TAIL_CALL_CNT`).
pub const MAX_TAIL_CALLS: u32 = 33;
/// Most iterations one `bpf_loop` call may ask for (the kernel's `BPF_MAX_LOOPS`).
pub const MAX_LOOPS: u32 = 1 << 23;
/// Largest key a `bpf_for_each_map_elem` callback is lent (the kernel's key size limit
/// for the maps it walks is the stack size).
pub(crate) const CB_KEY_MAX: usize = 512;
/// Bytes of callback key memory a runner keeps: one key per frame depth.
pub(crate) const CB_KEYS_BYTES: usize = CB_KEY_MAX * spine_isa::MAX_CALL_FRAMES;

/// Where an `XDP_REDIRECT` verdict sends its packet; the adapter resolves the target (and
/// checks the extension's domain may use it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redirect {
    /// To the port with this interface index (`bpf_redirect`, or a devmap entry).
    Port { ifindex: u32 },
    /// To the worker of this CPU (a cpumap entry).
    Cpu { cpu: u32 },
    /// `BPF_F_BROADCAST`: to the port of every entry of the devmap or devmap_hash at
    /// `map` in the extension's map table (as the kernel, the entries when the adapter
    /// acts on the verdict), except the ingress port with `BPF_F_EXCLUDE_INGRESS`.
    Broadcast { map: u32, exclude_ingress: bool },
    /// To the spine endpoint with this id (an endpoint map slot).
    Endpoint { id: u32 },
}

/// `bpf_redirect_map` flags: the low bits are the verdict when the key is missing.
const REDIRECT_ACTION_MASK: u64 = 3;
const BPF_F_BROADCAST: u64 = 1 << 3;
const BPF_F_EXCLUDE_INGRESS: u64 = 1 << 4;

/// Where the worker's CPU index lies in [`XdpEnv`], for JIT code that finds its per-CPU
/// array copy inline.
pub(crate) const CPU_OFFSET: usize = std::mem::offset_of!(XdpEnv<'static>, cpu);

/// The helper environment of one XDP invocation.
pub(crate) struct XdpEnv<'a> {
    pub maps: &'a MapTable,
    /// The worker's CPU index; JIT code reads it at [`CPU_OFFSET`] (a `u64`).
    pub cpu: usize,
    /// The host of the call in progress: set by the runner at the start of every call
    /// that runs code, from the `&mut dyn Host` that call borrows for its whole length
    /// (the environment outlives calls: the runner keeps it). Reached through
    /// [`XdpEnv::host`] only.
    pub host: *mut dyn Host,
    /// The context the program was given; helpers taking `ctx` must be passed this.
    pub ctx: *mut XdpCtx,
    /// The frame buffer, exclusively borrowed for the invocation.
    pub frame: *mut u8,
    /// The fragments of a multi-buffer frame, exclusively borrowed for the invocation;
    /// null for a linear frame (every frame of the adapter's pools).
    pub frags: *mut Frags,
    pub geometry: Geometry,
    /// Index of the packet region (`[data_meta, data_end)`) in the invocation's memory.
    pub pkt_region: usize,
    /// Set by `bpf_tail_call`: the program to run next, in place of the current one.
    pub tail: Option<Arc<Extension>>,
    /// Tail calls made so far in this invocation (in any frame: the kernel's count is
    /// shared by the whole chain).
    pub tail_calls: u32,
    /// One past the highest byte of the runner's stack, whose windows below the top one
    /// ([`spine_vm::Stack::window_top`]) hold the targets of tail calls made in callees.
    pub stack_top: u64,
    /// Windows below the top one (0 when the program cannot tail-call).
    pub tail_windows: usize,
    /// The window the running program uses (0: the top one).
    pub nest: usize,
    /// A fault of a nested run was already counted against the program that faulted.
    pub fault_recorded: bool,
    /// Set by `bpf_redirect`/`bpf_redirect_map`, read when the verdict is `XDP_REDIRECT`.
    pub redirect: Option<Redirect>,
    /// The watchdog's limits for this invocation.
    pub budget: crate::Budget,
    /// Set at the first clock check of the invocation, so invocations that never reach
    /// one (no loops, few calls: most packet programs) never read the clock.
    pub deadline: Option<u64>,
    /// Set when an invocation first runs past `deadline` on a host with a thread CPU
    /// clock: the same budget again, in the thread's own CPU time.
    pub cpu_deadline: Option<u64>,
    /// Inner maps and ring-buffer records the invocation holds (the runner's, empty
    /// between invocations); released on drop.
    pub held: Held,
    /// [`CB_KEYS_BYTES`] of read-only (to the program) memory where
    /// `bpf_for_each_map_elem` puts the key it lends its callback, one slot per frame
    /// depth; null when the runner registered none (the program does not walk maps).
    pub cb_keys: *mut u8,
    /// The program now running (the entry or a tail-call target), for its
    /// `inlined_loops`; set by the runner before each engine run.
    pub running: *const Extension,
    /// Where `spine_msg_send` puts the messages it sends (the runner's).
    pub outbox: crate::msg::Outbox,
    /// How far the running program's instructions sit from the extension's own: 0, or
    /// [`crate::ext::TIMER_WRAPPER_LEN`] in a timer callback's run, whose pcs (and
    /// function addresses) are the wrapper's.
    pub pc_shift: usize,
    /// In a timer callback's run: the map (id) and element whose timer it is.
    pub in_timer: Option<(u32, u32)>,
}

impl Drop for XdpEnv<'_> {
    /// The invocation is over, however it ended: a record still reserved (the program
    /// faulted or the watchdog stopped it before its submit) is discarded, so the ring
    /// does not stall at it, and held inner maps are let go.
    #[inline(always)]
    fn drop(&mut self) {
        if !self.held.is_empty() {
            self.held.release(self.maps);
        }
    }
}

pub(crate) fn neg(e: i64) -> u64 {
    (-e) as u64
}

fn map_result(r: Result<(), spine_maps::MapError>) -> u64 {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno() as u64,
    }
}

impl<'a> XdpEnv<'a> {
    /// The host of the call in progress.
    #[inline(always)]
    pub(crate) fn host(&mut self) -> &mut dyn Host {
        // SAFETY: helpers and engines only run inside a runner call, which first set
        // `host` from the `&mut dyn Host` it borrows for its whole length; nothing else
        // uses that host while the call runs.
        unsafe { &mut *self.host }
    }

    /// The map a handle names: one of the object's, or an inner map this invocation
    /// holds.
    fn map(&self, handle: u64) -> Result<&Map, CallAbort> {
        self.resolve(handle).ok_or(CallAbort::Fault("argument 1 is not a map"))
    }

    fn resolve(&self, handle: u64) -> Option<&Map> {
        match map_index(handle) {
            Some(i) => self.maps.data(i),
            None => self.held.inner(handle),
        }
    }

    /// The object's own map `handle` names.
    fn table_map(&self, handle: u64) -> Option<&'a Map> {
        let maps: &'a MapTable = self.maps;
        map_index(handle).and_then(|i| maps.data(i))
    }

    /// The array_of_maps or hash_of_maps `handle` names (outer maps are always the
    /// object's own: they do not nest).
    fn outer_map(&self, handle: u64) -> Option<&'a Map> {
        self.table_map(handle).filter(|m| m.inner_template().is_some())
    }

    /// `bpf_map_lookup_elem` on a map-in-map: the inner map's handle, held for the rest
    /// of the invocation, or 0.
    fn lookup_outer(&mut self, outer: &Map, key: &[u8]) -> u64 {
        match outer.lookup_inner(key) {
            None => 0,
            Some(r) => {
                self.held.hold_inner(r, outer.def().map_type == spine_abi::map_type::HASH_OF_MAPS)
            }
        }
    }

    fn ringbuf(&self, handle: u64) -> Result<&RingBuf, CallAbort> {
        self.map(handle)?.ringbuf().ok_or(CallAbort::Fault("argument 1 is not a ring buffer"))
    }

    /// `bpf_ringbuf_submit`/`bpf_ringbuf_discard`: the record must be one this
    /// invocation reserved and has not committed (the verifier's reference tracking
    /// guarantees it; anything else is a fault, and never touches another record).
    fn commit_record(&mut self, addr: u64, flags: u64, discard: bool) -> Result<u64, CallAbort> {
        let not_held = CallAbort::Fault("argument 1 is not a record this invocation reserved");
        let handle = self.held.take_record(addr).ok_or(not_held)?;
        let rb = self.ringbuf(handle)?;
        let r = if discard { rb.discard(addr, flags) } else { rb.submit(addr, flags) };
        r.map_err(|_| CallAbort::Fault("ring-buffer record already committed"))?;
        Ok(0)
    }

    pub(crate) fn check_ctx(&self, arg: u64) -> Result<(), CallAbort> {
        if arg == self.ctx as u64 {
            Ok(())
        } else {
            Err(CallAbort::Fault("argument 1 is not the context"))
        }
    }

    pub(crate) fn ctx(&self) -> XdpCtx {
        // SAFETY: `ctx` points at the invocation's context, valid for the whole call and
        // not otherwise borrowed while a helper runs.
        unsafe { *self.ctx }
    }

    /// Moves the packet pointers and the packet region together.
    fn set_bounds(&mut self, mem: &mut Memory, meta: u64, data: u64, end: u64) {
        // SAFETY: as in `ctx`.
        unsafe {
            (*self.ctx).data_meta = meta;
            (*self.ctx).data = data;
            (*self.ctx).data_end = end;
        }
        let r = Region { start: meta, len: end - meta, writable: true };
        // SAFETY: callers keep `[meta, end)` inside the frame buffer, which is exclusively
        // borrowed for the invocation.
        unsafe { mem.set(self.pkt_region, r) };
    }

    fn frame_addr(&self, off: usize) -> u64 {
        self.frame as u64 + off as u64
    }

    fn adjust_head(&mut self, mem: &mut Memory, delta: i64) -> u64 {
        let c = self.ctx();
        let metalen = c.data - c.data_meta;
        let data_start = self.frame_addr(self.geometry.reserved) + metalen;
        let data = c.data.wrapping_add(delta as u64);
        if data < data_start || data > c.data_end - ETH_HLEN as u64 {
            return neg(errno::EINVAL);
        }
        let meta = c.data_meta.wrapping_add(delta as u64);
        if metalen > 0 {
            // SAFETY: both ranges lie inside the frame buffer: the source is the current
            // metadata, the destination starts at or after `reserved` (checked above) and
            // ends before the packet end; `copy` handles overlap.
            unsafe { std::ptr::copy(c.data_meta as *const u8, meta as *mut u8, metalen as usize) };
        }
        self.set_bounds(mem, meta, data, c.data_end);
        0
    }

    fn adjust_meta(&mut self, mem: &mut Memory, delta: i64) -> u64 {
        let c = self.ctx();
        let meta = c.data_meta.wrapping_add(delta as u64);
        if meta < self.frame_addr(self.geometry.reserved) || meta > c.data {
            return neg(errno::EINVAL);
        }
        let metalen = c.data - meta;
        if !metalen.is_multiple_of(4) || metalen > MAX_META {
            return neg(13); // EACCES, as the kernel
        }
        self.set_bounds(mem, meta, c.data, c.data_end);
        0
    }

    /// The frame's fragments, when it has any (a multi-buffer frame: the kernel's
    /// `xdp_buff_has_frags`).
    fn frags_mut(&mut self) -> Option<&mut Frags> {
        // SAFETY: `frags` is null or points at the fragments the runner borrowed
        // exclusively for the invocation; no other reference to them lives while a
        // helper runs (programs cannot address fragments).
        unsafe { self.frags.as_mut() }.filter(|f| f.count() > 0)
    }

    /// `bpf_xdp_get_buff_len`: the head and every fragment.
    pub(crate) fn buff_len(&mut self) -> u64 {
        let c = self.ctx();
        let frags = self.frags_mut().map_or(0, |f| f.total());
        c.data_end - c.data + frags as u64
    }

    /// `bpf_xdp_adjust_tail`, as the kernel's: on a multi-buffer frame a negative delta
    /// takes bytes off the fragments (last first, dropping those it empties, then off
    /// the head once none is left) and may not leave less than `ETH_HLEN` bytes in all;
    /// a positive one grows the last fragment within its buffer. On a linear frame the
    /// end moves within the head buffer's hard end.
    fn adjust_tail(&mut self, mem: &mut Memory, delta: i32) -> u64 {
        let buff_len = self.buff_len();
        if let Some(f) = self.frags_mut() {
            if delta >= 0 {
                return if f.grow(delta as usize) { 0 } else { neg(errno::EINVAL) };
            }
            // The kernel negates in `int`: -INT_MIN stays negative, passes the check
            // below and takes nothing.
            let shrink = delta.wrapping_neg();
            if i64::from(shrink) > buff_len as i64 - ETH_HLEN as i64 {
                return neg(errno::EINVAL);
            }
            let left = f.shrink(shrink.max(0) as usize);
            if f.count() == 0 {
                // Every fragment went: the frame is linear again and the rest comes off
                // the head (which keeps ETH_HLEN bytes: checked above).
                let c = self.ctx();
                self.set_bounds(mem, c.data_meta, c.data, c.data_end - left as u64);
            }
            return 0;
        }
        let delta = i64::from(delta);
        let c = self.ctx();
        let end = c.data_end.wrapping_add(delta as u64);
        if end > self.frame_addr(self.geometry.hard_end()) || end < c.data + ETH_HLEN as u64 {
            return neg(errno::EINVAL);
        }
        if end > c.data_end {
            // SAFETY: `[data_end, end)` is inside the frame buffer (end <= hard end).
            unsafe { std::ptr::write_bytes(c.data_end as *mut u8, 0, (end - c.data_end) as usize) };
        }
        self.set_bounds(mem, c.data_meta, c.data, end);
        0
    }

    /// `bpf_xdp_load_bytes`/`store_bytes`: checks the packet range `[offset, offset +
    /// len)` as the kernel's `bpf_xdp_pointer`: an offset or length past 0xffff is
    /// `-EFAULT`, a range past the end of the frame (fragments included) `-EINVAL`.
    fn packet_range(&mut self, offset: u64, len: u64) -> Result<(usize, usize), u64> {
        if offset > 0xffff || len > 0xffff {
            return Err(neg(errno::EFAULT));
        }
        if len > 0 && offset + len <= self.buff_len() {
            Ok((offset as usize, len as usize))
        } else {
            Err(neg(errno::EINVAL))
        }
    }

    /// Copies the packet bytes `[offset, offset + len)` (checked by `packet_range`) to
    /// `buf`, or `buf` to them when `store`, across the head and the fragments.
    ///
    /// # Safety
    /// `buf` is `len` bytes of program memory (writable unless `store`), which may
    /// overlap the head but never the fragments.
    pub(crate) unsafe fn copy_packet(
        &mut self,
        offset: usize,
        buf: *mut u8,
        len: usize,
        store: bool,
    ) {
        let c = self.ctx();
        let head = (c.data_end - c.data) as usize;
        let n = len.min(head.saturating_sub(offset));
        if n > 0 {
            let p = (c.data + offset as u64) as *mut u8;
            // SAFETY: `[offset, offset + n)` lies in the head, inside the frame buffer
            // borrowed for the invocation; `buf` has `len >= n` bytes (the caller's
            // contract); `copy` allows the two to overlap.
            unsafe {
                if store {
                    std::ptr::copy(buf, p, n);
                } else {
                    std::ptr::copy(p, buf, n);
                }
            }
        }
        if n == len {
            return;
        }
        let at = offset + n - head;
        // `packet_range` counted the fragments: a range past the head means there are.
        if let Some(f) = self.frags_mut() {
            if store {
                // SAFETY: `buf + n .. buf + len` is the rest of the caller's buffer, which
                // does not overlap the fragments (programs cannot address them).
                let rest = unsafe { std::slice::from_raw_parts(buf.add(n), len - n) };
                f.write(at, rest);
            } else {
                // SAFETY: as above; the caller's buffer is writable for a load.
                let rest = unsafe { std::slice::from_raw_parts_mut(buf.add(n), len - n) };
                f.read(at, rest);
            }
        }
    }

    /// `bpf_perf_event_output` from XDP, as the kernel's `bpf_xdp_event_output`: flags
    /// other than the slot and the packet length `-EINVAL`, a packet length past the
    /// frame `-EFAULT`; then the slot's answers ([`spine_maps::PerfEventArray::output`]).
    /// The record is the program's `size` bytes at `data`, then the packet's first bytes
    /// (fragments included), with no copy but into the slot's ring.
    fn perf_event_output(
        &mut self,
        handle: u64,
        flags: u64,
        data: u64,
        size: u64,
        mem: &Memory,
    ) -> Result<u64, CallAbort> {
        use spine_abi::perf_flags as pf;
        if flags & !(pf::INDEX_MASK | pf::CTXLEN_MASK) != 0 {
            return Ok(neg(errno::EINVAL));
        }
        let ctx_len = ((flags & pf::CTXLEN_MASK) >> 32) as usize;
        if ctx_len as u64 > self.buff_len() {
            return Ok(neg(errno::EFAULT));
        }
        let meta = usize::try_from(size).ok().and_then(|n| mem.slice(data, n));
        let meta = meta.ok_or(CallAbort::Fault("pointer argument outside the program's memory"))?;
        let c = self.ctx();
        let head_len = ((c.data_end - c.data) as usize).min(ctx_len);
        // SAFETY: the head lies in the frame buffer borrowed for the invocation, which
        // nothing writes while the helper runs.
        let head = unsafe { std::slice::from_raw_parts(c.data as *const u8, head_len) };
        let mut parts: [&[u8]; 2 + crate::frags::MAX_FRAGS] = [&[]; 2 + crate::frags::MAX_FRAGS];
        parts[0] = meta;
        parts[1] = head;
        let (mut n, mut left) = (2, ctx_len - head_len);
        // SAFETY: `frags` is null or the fragments the runner borrowed for the run.
        if let Some(f) = unsafe { self.frags.as_ref() } {
            for frag in f.iter().take(crate::frags::MAX_FRAGS) {
                if left == 0 {
                    break;
                }
                let k = frag.len().min(left);
                parts[n] = &frag[..k];
                (n, left) = (n + 1, left - k);
            }
        }
        let cpu = self.cpu;
        let index = match flags & pf::INDEX_MASK {
            pf::CURRENT_CPU => cpu as u32,
            i => i as u32,
        };
        let perf = self.map(handle)?.perf();
        let perf = perf.ok_or(CallAbort::Fault("argument 2 is not a perf event array"))?;
        Ok(map_result(perf.output(index, cpu, &parts[..n])))
    }

    /// `bpf_redirect_map`, as the kernel's `__bpf_xdp_redirect_map`: flags other than the
    /// low bits (and, for devmaps, `BPF_F_BROADCAST`/`BPF_F_EXCLUDE_INGRESS`) are
    /// `XDP_ABORTED`; a missing key returns the low bits of `flags` as the verdict,
    /// unless broadcasting, which ignores the key and always redirects.
    fn redirect_map(&mut self, handle: u64, key: u64, flags: u64) -> Result<u64, CallAbort> {
        use spine_abi::{map_type as mt, xdp_action as act};
        let map = self.map(handle)?;
        let devmap = matches!(map.def().map_type, mt::DEVMAP | mt::DEVMAP_HASH);
        let flag_mask = if devmap { BPF_F_BROADCAST | BPF_F_EXCLUDE_INGRESS } else { 0 };
        if flags & !(REDIRECT_ACTION_MASK | flag_mask) != 0 {
            return Ok(u64::from(act::ABORTED));
        }
        if flags & BPF_F_BROADCAST != 0 {
            let Some(index) = map_index(handle) else {
                return Err(CallAbort::Fault("broadcast through an inner map"));
            };
            self.redirect = Some(Redirect::Broadcast {
                map: index as u32,
                exclude_ingress: flags & BPF_F_EXCLUDE_INGRESS != 0,
            });
            return Ok(u64::from(act::REDIRECT));
        }
        let key = key as u32;
        let Some(value) = map.lookup(&key.to_le_bytes(), self.cpu) else {
            self.redirect = None;
            return Ok(flags & REDIRECT_ACTION_MASK);
        };
        self.redirect = match map.def().map_type {
            mt::DEVMAP | mt::DEVMAP_HASH => {
                // SAFETY: devmap values are at least 4 bytes (the ifindex first), 8-aligned.
                let v = unsafe { value.as_ptr().cast::<u32>().read() };
                Some(Redirect::Port { ifindex: v })
            }
            mt::XSKMAP => {
                // An XSKMAP entry is the record `{ queue_id, target }`: the target is the
                // ifindex of the port bound for the socket, or the id of the endpoint
                // bound to it (marked).
                // SAFETY: xskmap entries are 8-byte words, 8-aligned; the target is the
                // second u32.
                let v = unsafe { value.as_ptr().cast::<u32>().add(1).read() };
                if v & spine_maps::XSK_ENDPOINT != 0 {
                    Some(Redirect::Endpoint { id: v & !spine_maps::XSK_ENDPOINT })
                } else {
                    Some(Redirect::Port { ifindex: v })
                }
            }
            mt::CPUMAP => Some(Redirect::Cpu { cpu: key }),
            mt::SPINE_ENDPOINT => {
                // SAFETY: endpoint map entries are xskmap records, 8-byte words, 8-aligned:
                // the endpoint id is the second u32.
                let id = unsafe { value.as_ptr().cast::<u32>().add(1).read() };
                Some(Redirect::Endpoint { id })
            }
            _ => {
                return Err(CallAbort::Fault(
                    "redirect through a map that is no devmap, cpumap or xskmap",
                ))
            }
        };
        Ok(u64::from(act::REDIRECT))
    }

    /// The next element of a `bpf_for_each_map_elem` walk: `it` holds the map handle,
    /// the map's cursor, the callback context and the elements visited.
    fn walk_step(&mut self, it: &mut Iteration, depth: usize) -> Result<Step, CallAbort> {
        let [handle, c0, c1, cb_ctx, count, _] = it.words;
        let map = self.map(handle)?;
        let key_size = map.def().key_size as usize;
        if self.cb_keys.is_null() || key_size > CB_KEY_MAX || depth >= spine_isa::MAX_CALL_FRAMES {
            return Err(CallAbort::Fault("no key memory for bpf_for_each_map_elem"));
        }
        // SAFETY: `cb_keys` points at `CB_KEYS_BYTES` the runner owns for as long as this
        // environment lives; slot `depth` is this walk's alone (walks active at once run
        // at distinct depths), and programs only read it (its region is read-only).
        let key = unsafe {
            std::slice::from_raw_parts_mut(self.cb_keys.add(depth * CB_KEY_MAX), key_size)
        };
        let mut cursor = [c0, c1];
        match map.walk_next(&mut cursor, key, self.cpu) {
            None => Ok(Step::Done(count)),
            Some(value) => {
                let key_addr = key.as_ptr() as u64;
                it.words = [handle, cursor[0], cursor[1], cb_ctx, count + 1, 0];
                Ok(Step::Call([handle, key_addr, value.as_ptr() as u64, cb_ctx, 0]))
            }
        }
    }

    /// `bpf_check_mtu` from XDP, as the kernel's `bpf_xdp_check_mtu`: flags `-EINVAL`
    /// (no multi-buffer check in the XDP variant), an unknown device `-ENODEV` (ifindex
    /// 0 is the ingress device); the length checked is the head's (`data_end - data`)
    /// or, when `*mtu_len` is not zero, `*mtu_len` plus the Ethernet header, plus
    /// `len_diff`, against the device's MTU plus the Ethernet header:
    /// `BPF_MTU_CHK_RET_FRAG_NEEDED` (1) above it, 0 otherwise; `*mtu_len` becomes the
    /// device's MTU. In `int` arithmetic, as the kernel's.
    fn check_mtu(
        &mut self,
        ifindex: u32,
        mtu_len: u64,
        len_diff: i32,
        flags: u64,
        mem: &mut Memory,
    ) -> Result<u64, CallAbort> {
        const FRAG_NEEDED: u64 = 1;
        if flags != 0 {
            return Ok(neg(errno::EINVAL));
        }
        let c = self.ctx();
        let dev = if ifindex == 0 { c.ingress_ifindex } else { ifindex };
        let Some(mtu) = self.host().mtu(dev) else { return Ok(neg(errno::ENODEV)) };
        let slot = mem
            .slice_mut(mtu_len, 4)
            .ok_or(CallAbort::Fault("bpf_check_mtu's mtu_len outside the program's memory"))?;
        let given = u32::from_ne_bytes([slot[0], slot[1], slot[2], slot[3]]);
        let hard_header = ETH_HLEN as u32;
        let mut len = (c.data_end - c.data) as i32;
        if given != 0 {
            len = given.wrapping_add(hard_header) as i32;
        }
        let len = len.wrapping_add(len_diff);
        let dev_len = mtu.wrapping_add(hard_header) as i32;
        slot.copy_from_slice(&mtu.to_ne_bytes());
        Ok(if len > dev_len { FRAG_NEEDED } else { 0 })
    }

    /// The map and element of the `bpf_timer` at `addr`: one of the object's maps
    /// whose value holds a timer exactly there (the verifier proved it; this keeps the
    /// runtime safe regardless: an address that names no timer is a fault). Timers in
    /// inner maps are not reached.
    fn timer(&self, addr: u64) -> Result<(&'a Map, u32), CallAbort> {
        let maps: &'a MapTable = self.maps;
        (0..maps.len())
            .filter_map(|i| maps.data(i))
            .filter(|m| m.timers().is_some())
            .find_map(|m| Some((m, m.timer_elem(addr)?)))
            .ok_or(CallAbort::Fault("argument 1 is not a bpf_timer in a map value"))
    }

    /// `bpf_timer_init`, `_set_callback`, `_start`, `_cancel`, with the kernel's
    /// return values ([`spine_maps::Timers`]).
    fn timer_call(&mut self, id: u32, a: [u64; 5]) -> Result<u64, CallAbort> {
        let (map, elem) = self.timer(a[0])?;
        let timers = map.timers().ok_or(CallAbort::Fault("no timers"))?;
        let r = match id {
            helper::TIMER_INIT => {
                if !self.resolve(a[1]).is_some_and(|m| std::ptr::eq(m, map)) {
                    return Err(CallAbort::Fault("argument 2 is not the timer's map"));
                }
                timers.init(elem, a[2])
            }
            helper::TIMER_SET_CALLBACK => {
                // SAFETY: `running` is the extension the runner runs now, kept alive
                // for the run.
                let ext = unsafe { &*self.running };
                let pc = a[1]
                    .checked_sub(self.pc_shift as u64)
                    .and_then(|f| spine_vm::callback_pc(f, &ext.callbacks))
                    .ok_or(CallAbort::Fault(spine_vm::NOT_A_CALLBACK))?;
                let callback = TimerCallback { owner: ext.id(), pc: pc as u32 };
                timers.set_callback(elem, callback)
            }
            helper::TIMER_START => {
                timers.start(elem, a[1], a[2], self.host().now_ns(), self.cpu as u32)
            }
            _ => timers.cancel(elem, self.in_timer == Some((map.id(), elem))),
        };
        Ok(r as u64)
    }

    fn tail_call(&mut self, map: u64, index: u64) -> Result<u64, CallAbort> {
        let Some(pa) = map_index(map).and_then(|i| self.maps.progs(i)) else {
            return Err(CallAbort::Fault("argument 2 is not a program array"));
        };
        if self.tail_calls >= MAX_TAIL_CALLS {
            return Ok(neg(errno::ENOENT));
        }
        let Some(target) = u32::try_from(index).ok().and_then(|i| pa.get(i)) else {
            return Ok(neg(errno::ENOENT));
        };
        self.tail_calls += 1;
        self.tail = Some(target);
        // Replaces the current frame: in the entry frame the runner then starts `tail` on
        // the same context; in a callee the engine asks `tail_call_in_subprog`.
        Err(CallAbort::Tail)
    }
}

impl Env for XdpEnv<'_> {
    /// Runs the pending tail call's target in the next window of the runner's stack, in
    /// place of the callee that made it, following the tail calls it makes from its
    /// entry frame, and returns the last target's r0 (to the callee's caller, as the
    /// kernel's JIT does). The count of tail calls stays the invocation's. A fault is
    /// counted against the target that faulted, here, and ends the invocation.
    fn tail_call_in_subprog(&mut self, pc: usize, mem: &mut Memory) -> Result<u64, Fault> {
        let level = self.nest + 1;
        let target = self.tail.take();
        let (Some(mut target), true) = (target, level <= self.tail_windows) else {
            // Unreachable: each window is entered by a tail call and there are as many
            // windows as tail calls an invocation may make.
            return Err(Fault::Helper { pc, id: helper::TAIL_CALL, reason: "no stack window" });
        };
        let top = self.stack_top - (level * spine_vm::Stack::BYTES) as u64;
        let outer = self.running;
        self.nest = level;
        let args = [self.ctx as u64, 0, 0, 0, 0];
        let limits = RunLimits { points: self.budget.points };
        let r = loop {
            let zeroed = target.stats().zeroed_stack;
            if zeroed > 0 {
                // SAFETY: `zeroed <= Stack::BYTES`, so the bytes lie in window `level` of
                // the runner's stack, which no frame of the suspended runs uses.
                unsafe { std::ptr::write_bytes((top - zeroed as u64) as *mut u8, 0, zeroed) };
            }
            self.running = &*target;
            let r = match &target.engine {
                // SAFETY: window `level` lies in the runner's stack, registered in `mem`
                // for the runner's life, and only this run uses it.
                Engine::Interp(vm) => unsafe {
                    vm.run_on_registered_stack(args, mem, top, self, limits)
                },
                // SAFETY: as above; the JIT registered `native_helpers`, which take this
                // `XdpEnv` as their runtime pointer.
                Engine::Jit(code) => unsafe {
                    code.run_with_env_runtime_on_registered_window(args, mem, top, self, limits)
                },
            };
            match r {
                Ok(r0) => match self.tail.take() {
                    Some(next) => target = next,
                    None => break Ok(r0),
                },
                Err(fault) => {
                    if !self.fault_recorded {
                        let cpu = self.cpu;
                        crate::xdp::record_fault(&target, cpu, &fault, self.host());
                        self.fault_recorded = true;
                    }
                    break Err(fault);
                }
            }
        };
        self.nest = level - 1;
        self.running = outer;
        r
    }

    fn call(&mut self, id: u32, a: [u64; 5], mem: &mut Memory) -> Result<u64, CallAbort> {
        let bad_ptr = || CallAbort::Fault("pointer argument outside the program's memory");
        if !self.held.is_empty() {
            // Inner maps a native (JIT) lookup held are registered before any pointer
            // into them is checked.
            self.held.sync_regions(mem);
        }
        Ok(match id {
            helper::MAP_LOOKUP_ELEM | helper::MAP_LOOKUP_PERCPU_ELEM => {
                if let Some(outer) = self.outer_map(a[0]) {
                    let key = mem.slice(a[1], outer.def().key_size as usize).ok_or_else(bad_ptr)?;
                    let handle = self.lookup_outer(outer, key);
                    self.held.sync_regions(mem);
                    return Ok(handle);
                }
                let map = self.map(a[0])?;
                let key = mem.slice(a[1], map.def().key_size as usize).ok_or_else(bad_ptr)?;
                let cpu = if id == helper::MAP_LOOKUP_ELEM { self.cpu } else { a[2] as usize };
                if cpu >= map.ncpus() {
                    return Ok(0);
                }
                map.lookup(key, cpu).map_or(0, |p| p.as_ptr() as u64)
            }
            helper::MAP_UPDATE_ELEM => {
                let map = self.map(a[0])?;
                let d = map.def();
                let key = mem.slice(a[1], d.key_size as usize).ok_or_else(bad_ptr)?;
                let value = mem.slice(a[2], d.value_size as usize).ok_or_else(bad_ptr)?;
                map_result(map.update(key, value, a[3], self.cpu))
            }
            helper::MAP_DELETE_ELEM => {
                let map = self.map(a[0])?;
                let key = mem.slice(a[1], map.def().key_size as usize).ok_or_else(bad_ptr)?;
                map_result(map.delete(key, self.cpu))
            }
            helper::MAP_PUSH_ELEM => {
                let map = self.map(a[0])?;
                let value = mem.slice(a[1], map.def().value_size as usize).ok_or_else(bad_ptr)?;
                map_result(map.push(value, a[2]))
            }
            helper::MAP_POP_ELEM | helper::MAP_PEEK_ELEM => {
                let map = self.map(a[0])?;
                let out = mem.slice_mut(a[1], map.def().value_size as usize).ok_or_else(bad_ptr)?;
                map_result(map.pop_or_peek(out, id == helper::MAP_POP_ELEM))
            }
            helper::SPINE_MSG_SEND => {
                // `spine_msg_send(ctx, endpoint, handler, data, len)`: the verifier proved
                // `data` readable for `len`; the run-time checks hold for the interpreter
                // and for values it could not bound.
                let (endpoint, handler, len) = (a[1], a[2], a[4]);
                if endpoint > u64::from(u32::MAX) || handler > 255 {
                    neg(errno::EINVAL)
                } else if len > crate::msg::MSG_MAX as u64 {
                    neg(errno::E2BIG)
                } else {
                    let data = mem.slice(a[3], len as usize).ok_or_else(bad_ptr)?;
                    match self.outbox.push(
                        crate::msg::Dest::Endpoint(endpoint as u32),
                        handler as u8,
                        data,
                    ) {
                        Ok(()) => 0,
                        Err(e) => neg(e),
                    }
                }
            }
            helper::SPINE_MSG_BULK_LEN => {
                self.check_ctx(a[0])?;
                self.host().bulk_len()
            }
            helper::SPINE_MSG_BULK_READ => {
                // `spine_msg_bulk_read(ctx, offset, dst, len)`: the verifier proved `dst`
                // writable for `len`; the host checks the range on every call. On an
                // error `dst` is zeroed (the verifier counts it written either way).
                self.check_ctx(a[0])?;
                let len = a[3] as u32 as usize;
                let dst = mem.slice_mut(a[2], len).ok_or_else(bad_ptr)?;
                match self.host().bulk_read(a[1], dst) {
                    Ok(()) => 0,
                    Err(e) => {
                        dst.fill(0);
                        neg(e)
                    }
                }
            }
            helper::SPINE_MSG_BULK_WRITE => {
                // `spine_msg_bulk_write(ctx, offset, src, len)`: the verifier proved `src`
                // readable for `len`; the host checks the range against the endpoint's
                // area on every call.
                self.check_ctx(a[0])?;
                let src = mem.slice(a[2], a[3] as u32 as usize).ok_or_else(bad_ptr)?;
                match self.host().bulk_write(a[1], src) {
                    Ok(()) => 0,
                    Err(e) => neg(e),
                }
            }
            helper::SPINE_MSG_SEND_BULK => {
                // `spine_msg_send_bulk(ctx, endpoint, handler, offset, len)`: queued as a
                // send; the adapter checks the reference against the endpoint's area
                // when it delivers it.
                let (endpoint, handler, off, len) = (a[1], a[2], a[3], a[4]);
                if endpoint > u64::from(u32::MAX) || handler > 255 || len == 0 {
                    neg(errno::EINVAL)
                } else if len > u64::from(u32::MAX) {
                    neg(errno::E2BIG)
                } else {
                    let to = crate::msg::Dest::Endpoint(endpoint as u32);
                    match self.outbox.push_bulk(to, handler as u8, off, len as u32) {
                        Ok(()) => 0,
                        Err(e) => neg(e),
                    }
                }
            }
            helper::SPINE_MSG_POST => {
                // `spine_msg_post(ctx, handler, data, len)`: queued in the outbox like a
                // send; the adapter runs the handlers later, never inside this call.
                let (handler, len) = (a[1], a[3]);
                if handler > 255 {
                    neg(errno::EINVAL)
                } else if len > crate::msg::MSG_MAX as u64 {
                    neg(errno::E2BIG)
                } else {
                    let data = mem.slice(a[2], len as usize).ok_or_else(bad_ptr)?;
                    match self.outbox.push(crate::msg::Dest::Handlers, handler as u8, data) {
                        Ok(()) => 0,
                        Err(e) => neg(e),
                    }
                }
            }
            helper::SPINE_MSG_POST_TO => {
                // `spine_msg_post_to(ctx, to, data, len, delay_ns)`: as `spine_msg_post`,
                // to handler `to & 0xff` of the extension `to` names (its id + 1 in bits
                // 16..32; 0: every extension of the domain), which the host checks is of
                // the sender's domain now, so the sender learns of a bad id at once.
                let (to, len, delay) = (a[1], a[3], a[4]);
                let Some((handler, target)) = spine_abi::msg_post::decode(to) else {
                    return Ok(neg(errno::EINVAL));
                };
                if delay > spine_abi::msg_post::DELAY_MAX_NS {
                    neg(errno::EINVAL)
                } else if len > crate::msg::MSG_MAX as u64 {
                    neg(errno::E2BIG)
                } else {
                    let data = mem.slice(a[2], len as usize).ok_or_else(bad_ptr)?;
                    // SAFETY: `running` is the extension the runner runs now, kept alive
                    // by the runner for the whole invocation (not borrowed from `self`).
                    let running: &Extension = unsafe { &*self.running };
                    let domain = running.domain();
                    let dest = match target {
                        Some(ext) => crate::msg::Dest::Extension(ext),
                        None => crate::msg::Dest::Handlers,
                    };
                    // A full outbox refuses first, before the host reserves anything.
                    if self.outbox.is_full() {
                        return Ok(neg(errno::ENOSPC));
                    }
                    // A delayed post is due `delay` after this call, read on the clock
                    // `bpf_ktime_get_ns` reads, so a handler never sees less.
                    let host = self.host();
                    let checked = host.post_target(domain.name(), target).and_then(|()| {
                        if delay == 0 {
                            return Ok(0);
                        }
                        host.reserve_delayed()?;
                        Ok(host.now_ns().saturating_add(delay).max(1))
                    });
                    match checked {
                        Err(e) => neg(e),
                        Ok(due) => match self.outbox.push_due(dest, handler, data, due) {
                            Ok(()) => 0,
                            Err(e) => neg(e),
                        },
                    }
                }
            }
            // The coarse clock is the monotonic one read at tick resolution: the same
            // base, so the precise reading is a valid coarse one.
            helper::KTIME_GET_NS | helper::KTIME_GET_BOOT_NS | helper::KTIME_GET_COARSE_NS => {
                self.host().now_ns()
            }
            helper::JIFFIES64 => self.host().jiffies64(),
            helper::KTIME_GET_TAI_NS => self.host().tai_ns(),
            helper::CHECK_MTU => {
                self.check_ctx(a[0])?;
                return self.check_mtu(a[1] as u32, a[2], a[3] as i32, a[4], mem);
            }
            helper::GET_PRANDOM_U32 => u64::from(self.host().prandom_u32()),
            helper::GET_SMP_PROCESSOR_ID => self.cpu as u64,
            helper::FIB_LOOKUP => {
                let (env, pinned) = self.host().fib_for_lookup();
                crate::fib_lookup::call(env, pinned, a, mem)?
            }
            helper::TRACE_PRINTK => {
                let fmt = mem.slice(a[0], a[1] as u32 as usize).ok_or_else(bad_ptr)?;
                match printk::format(fmt, [a[2], a[3], a[4]], mem) {
                    Ok(line) => {
                        let cpu = self.cpu;
                        self.host().trace(cpu, &line);
                        line.len() as u64
                    }
                    Err(()) => neg(errno::EINVAL),
                }
            }
            helper::CSUM_DIFF => {
                let (from_size, to_size) = (a[1] as u32, a[3] as u32);
                if (from_size | to_size) & 3 != 0 {
                    return Ok(neg(errno::EINVAL));
                }
                let from = mem.slice(a[0], from_size as usize).ok_or_else(bad_ptr)?;
                let to = mem.slice(a[2], to_size as usize).ok_or_else(bad_ptr)?;
                u64::from(csum::csum_diff(from, to, a[4] as u32))
            }
            helper::XDP_ADJUST_HEAD => {
                self.check_ctx(a[0])?;
                self.adjust_head(mem, i64::from(a[1] as i32))
            }
            helper::XDP_ADJUST_META => {
                self.check_ctx(a[0])?;
                self.adjust_meta(mem, i64::from(a[1] as i32))
            }
            helper::XDP_ADJUST_TAIL => {
                self.check_ctx(a[0])?;
                self.adjust_tail(mem, a[1] as i32)
            }
            helper::XDP_GET_BUFF_LEN => {
                self.check_ctx(a[0])?;
                self.buff_len()
            }
            helper::XDP_LOAD_BYTES | helper::XDP_STORE_BYTES => {
                self.check_ctx(a[0])?;
                let (offset, len) = match self.packet_range(a[1] as u32 as u64, a[3] as u32 as u64)
                {
                    Ok(range) => range,
                    Err(e) => return Ok(e),
                };
                let store = id == helper::XDP_STORE_BYTES;
                let buf = if store {
                    mem.slice(a[2], len).ok_or_else(bad_ptr)?.as_ptr().cast_mut()
                } else {
                    mem.slice_mut(a[2], len).ok_or_else(bad_ptr)?.as_mut_ptr()
                };
                // SAFETY: `buf` is `len` bytes of a region of the invocation (writable
                // for a load); program memory never includes the fragments, and overlaps
                // the head only through the packet region itself.
                unsafe { self.copy_packet(offset, buf, len, store) };
                0
            }
            helper::TAIL_CALL => {
                self.check_ctx(a[0])?;
                return self.tail_call(a[1], a[2]);
            }
            helper::REDIRECT => {
                // The kernel's XDP `bpf_redirect` takes no flags.
                if a[1] != 0 {
                    return Ok(u64::from(spine_abi::xdp_action::ABORTED));
                }
                self.redirect = Some(Redirect::Port { ifindex: a[0] as u32 });
                u64::from(spine_abi::xdp_action::REDIRECT)
            }
            helper::REDIRECT_MAP => return self.redirect_map(a[0], a[1], a[2]),
            helper::PERF_EVENT_OUTPUT => {
                self.check_ctx(a[0])?;
                return self.perf_event_output(a[1], a[2], a[3], a[4], mem);
            }
            helper::RINGBUF_OUTPUT => {
                let rb = self.ringbuf(a[0])?;
                let data = usize::try_from(a[2])
                    .ok()
                    .and_then(|len| mem.slice(a[1], len))
                    .ok_or_else(bad_ptr)?;
                map_result(rb.output(data, a[3]))
            }
            helper::RINGBUF_RESERVE => {
                if !self.held.has_record_room() {
                    return Ok(0);
                }
                match self.ringbuf(a[0])?.reserve(a[1], a[2]) {
                    None => 0,
                    Some(rec) => {
                        let addr = rec.as_ptr() as u64;
                        self.held.add_record(a[0], addr);
                        addr
                    }
                }
            }
            helper::RINGBUF_SUBMIT => return self.commit_record(a[0], a[1], false),
            helper::RINGBUF_DISCARD => return self.commit_record(a[0], a[1], true),
            helper::RINGBUF_QUERY => self.ringbuf(a[0])?.query(a[1]),
            helper::TIMER_INIT
            | helper::TIMER_SET_CALLBACK
            | helper::TIMER_START
            | helper::TIMER_CANCEL => return self.timer_call(id, a),
            helper::SPIN_LOCK | helper::SPIN_UNLOCK => {
                // The word must be writable program memory (a map value); the verifier
                // proved it is the value's lock, this keeps the runtime safe regardless.
                mem.slice_mut(a[0], 4).ok_or_else(bad_ptr)?;
                let r = if id == helper::SPIN_LOCK {
                    self.held.spin_lock(a[0])
                } else {
                    self.held.spin_unlock(a[0])
                };
                r.map_err(CallAbort::Fault)?;
                0
            }
            helper::DYNPTR_READ
            | helper::DYNPTR_WRITE
            | helper::DYNPTR_DATA
            | helper::KFUNC_DYNPTR_FROM_XDP
            | helper::KFUNC_DYNPTR_SLICE
            | helper::KFUNC_DYNPTR_SLICE_RDWR
            | helper::KFUNC_DYNPTR_ADJUST
            | helper::KFUNC_DYNPTR_IS_NULL
            | helper::KFUNC_DYNPTR_IS_RDONLY
            | helper::KFUNC_DYNPTR_SIZE
            | helper::KFUNC_DYNPTR_CLONE => return self.dynptr_call(id, a, mem),
            _ => return Err(CallAbort::Unknown),
        })
    }

    /// `bpf_loop` and `bpf_for_each_map_elem` as the kernel's: non-zero flags are
    /// `-EINVAL`; more than [`MAX_LOOPS`] iterations `-E2BIG`; any non-zero callback
    /// return stops the walk; the result is the number of callbacks run.
    fn callback_start(
        &mut self,
        pc: usize,
        id: u32,
        a: [u64; 5],
        it: &mut Iteration,
        depth: usize,
        _mem: &mut Memory,
    ) -> Result<Step, CallAbort> {
        match id {
            helper::LOOP => {
                // `bpf_loop(u32 nr_loops, callback, ctx, u64 flags)`; where the kernel
                // inlines it, the count is checked whole and -E2BIG is a 32-bit move.
                // A timer callback's run numbers its instructions from the wrapper.
                let pc = pc.wrapping_sub(self.pc_shift);
                // SAFETY: `running` is the extension the runner is running now, which
                // it keeps alive for the run (its own or a tail-call target's `Arc`).
                let inlined = unsafe { &*self.running }.inlined_loops.binary_search(&pc).is_ok();
                let nr = if inlined { a[0] } else { u64::from(a[0] as u32) };
                if a[3] != 0 {
                    return Ok(Step::Done(neg(errno::EINVAL)));
                }
                if nr > u64::from(MAX_LOOPS) {
                    let e2big = neg(errno::E2BIG);
                    return Ok(Step::Done(if inlined { u64::from(e2big as u32) } else { e2big }));
                }
                if nr == 0 {
                    return Ok(Step::Done(0));
                }
                it.words = [nr, 0, a[2], 0, 0, 0];
                Ok(Step::Call([0, a[2], 0, 0, 0]))
            }
            helper::FOR_EACH_MAP_ELEM => {
                use spine_abi::map_type as mt;
                if a[3] != 0 {
                    return Ok(Step::Done(neg(errno::EINVAL)));
                }
                let walkable = matches!(
                    self.map(a[0])?.def().map_type,
                    mt::ARRAY
                        | mt::PERCPU_ARRAY
                        | mt::HASH
                        | mt::PERCPU_HASH
                        | mt::LRU_HASH
                        | mt::LRU_PERCPU_HASH
                );
                if !walkable {
                    return Err(CallAbort::Fault("bpf_for_each_map_elem on a map it cannot walk"));
                }
                it.words = [a[0], 0, 0, a[2], 0, 0];
                self.walk_step(it, depth)
            }
            _ => Err(CallAbort::Unknown),
        }
    }

    fn callback_next(
        &mut self,
        id: u32,
        it: &mut Iteration,
        ret: u64,
        depth: usize,
        _mem: &mut Memory,
    ) -> Result<Step, CallAbort> {
        match id {
            helper::LOOP => {
                let [nr, i, cb_ctx, ..] = it.words;
                let i = i + 1;
                if ret != 0 || i >= nr {
                    return Ok(Step::Done(i));
                }
                it.words[1] = i;
                Ok(Step::Call([i, cb_ctx, 0, 0, 0]))
            }
            helper::FOR_EACH_MAP_ELEM => {
                if ret != 0 {
                    return Ok(Step::Done(it.words[4]));
                }
                self.walk_step(it, depth)
            }
            _ => Err(CallAbort::Unknown),
        }
    }

    fn budget_expired(&mut self) -> BudgetVerdict {
        let now = self.host().now_ns();
        let deadline = *self.deadline.get_or_insert(now.saturating_add(self.budget.ns));
        if now < deadline {
            return BudgetVerdict::Continue(self.budget.points);
        }
        // Past the wall-clock budget. A worker the OS preempted mid-invocation (a loaded
        // machine) has not run for all of that time: where the host has the thread's CPU
        // clock, the invocation gets the same budget again in CPU time it actually runs,
        // so a runaway program is still stopped after at most twice its budget of CPU.
        let Some(cpu) = self.host().thread_cpu_ns() else { return BudgetVerdict::Abort };
        let limit = *self.cpu_deadline.get_or_insert(cpu.saturating_add(self.budget.ns));
        if cpu < limit {
            BudgetVerdict::Continue(self.budget.points)
        } else {
            BudgetVerdict::Abort
        }
    }
}

/// The helpers the JIT calls directly, for verified programs: `rt` is the invocation's
/// [`XdpEnv`] (the runner enters the JIT with `run_with_env_runtime`) and pointer arguments were proven by the verifier (key and value pointers
/// to `key_size`/`value_size` readable bytes).
pub(crate) fn native_helpers() -> Vec<NativeHelper> {
    // SAFETY: each function reads only what the verifier proved for its arguments and
    // uses `rt` as the `XdpEnv` the runner passes to every JIT run of this extension.
    unsafe {
        vec![
            NativeHelper::new(helper::MAP_LOOKUP_ELEM, native_lookup),
            NativeHelper::new(helper::MAP_UPDATE_ELEM, native_update),
            NativeHelper::new(helper::MAP_DELETE_ELEM, native_delete),
            NativeHelper::new(helper::GET_SMP_PROCESSOR_ID, native_cpu),
            NativeHelper::new(helper::CSUM_DIFF, native_csum_diff),
            NativeHelper::with_memory(
                helper::XDP_ADJUST_HEAD,
                native_adjust::<{ helper::XDP_ADJUST_HEAD }>,
            ),
            NativeHelper::with_memory(
                helper::XDP_ADJUST_META,
                native_adjust::<{ helper::XDP_ADJUST_META }>,
            ),
            NativeHelper::with_memory(
                helper::XDP_ADJUST_TAIL,
                native_adjust::<{ helper::XDP_ADJUST_TAIL }>,
            ),
        ]
    }
}

/// # Safety
/// `rt` is the live `XdpEnv` of the run; `h` a handle the verifier typed as a map.
unsafe fn native_map<'a>(rt: *mut c_void, h: u64) -> Option<(&'a Map, usize)> {
    // SAFETY: the runner passes its `XdpEnv` as `rt` and keeps it alive for the run.
    let env = unsafe { &*rt.cast::<XdpEnv<'a>>() };
    Some((env.resolve(h)?, env.cpu))
}

/// # Safety
/// `ptr` points at `len` readable bytes (proven by the verifier); with `len == 0` it may
/// be anything, null included (`csum_diff` allows a null pointer of size zero).
unsafe fn bytes<'a>(ptr: u64, len: u32) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: the caller's contract; `len > 0`, so `ptr` is a real, non-null address.
    unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) }
}

unsafe extern "C" fn native_lookup(
    map: u64,
    key: u64,
    _: u64,
    _: u64,
    _: u64,
    rt: *mut c_void,
) -> u64 {
    // SAFETY: the runner passes its `XdpEnv` as `rt`, alive for the run, and nothing else
    // references it while a native helper runs.
    let env = unsafe { &mut *rt.cast::<XdpEnv<'_>>() };
    let cpu = env.cpu;
    let m = match env.table_map(map) {
        Some(outer) if outer.inner_template().is_some() => {
            // SAFETY: the verifier proved `key_size` readable bytes at `key`.
            let key = unsafe { bytes(key, outer.def().key_size) };
            // The inner map's regions are registered at the next `Env::call`; JIT code
            // reaches its values through proven, unchecked accesses.
            return env.lookup_outer(outer, key);
        }
        Some(m) => m,
        None => match env.held.inner(map) {
            Some(m) => m,
            None => return 0,
        },
    };
    // SAFETY: the verifier proved `key_size` readable bytes at `key`.
    let key = unsafe { bytes(key, m.def().key_size) };
    m.lookup(key, cpu).map_or(0, |p| p.as_ptr() as u64)
}

unsafe extern "C" fn native_update(
    map: u64,
    key: u64,
    value: u64,
    flags: u64,
    _: u64,
    rt: *mut c_void,
) -> u64 {
    // SAFETY: the contract of `native_helpers`.
    let Some((m, cpu)) = (unsafe { native_map(rt, map) }) else { return neg(errno::EINVAL) };
    let d = m.def();
    // SAFETY: the verifier proved `key_size` and `value_size` readable bytes.
    let (key, value) = unsafe { (bytes(key, d.key_size), bytes(value, d.value_size)) };
    map_result(m.update(key, value, flags, cpu))
}

unsafe extern "C" fn native_delete(
    map: u64,
    key: u64,
    _: u64,
    _: u64,
    _: u64,
    rt: *mut c_void,
) -> u64 {
    // SAFETY: the contract of `native_helpers`.
    let Some((m, cpu)) = (unsafe { native_map(rt, map) }) else { return neg(errno::EINVAL) };
    // SAFETY: the verifier proved `key_size` readable bytes at `key`.
    let key = unsafe { bytes(key, m.def().key_size) };
    map_result(m.delete(key, cpu))
}

/// The run's environment and memory, for the `bpf_xdp_adjust_*` helpers called natively.
/// r1 needs no `check_ctx`: the verifier admits only the unmodified context there
/// (`ArgType::Ctx`), which is the pointer the runner passed in r1, `env.ctx`.
///
/// # Safety
/// `rt` is the live `XdpEnv` of the run and `mem` the run's memory (the contract of
/// `native_helpers`); nothing else references either while the helper runs.
unsafe fn env_and_mem<'a, 'e>(
    rt: *mut c_void,
    mem: *mut Memory,
) -> (&'a mut XdpEnv<'e>, &'a mut Memory) {
    // SAFETY: the caller's contract.
    unsafe { (&mut *rt.cast::<XdpEnv<'e>>(), &mut *mem) }
}

/// `bpf_xdp_adjust_head`, `_meta` or `_tail` (`ID`) without the `Env::call` dispatch:
/// the same `XdpEnv::adjust_*`.
unsafe extern "C" fn native_adjust<const ID: u32>(
    ctx: u64,
    delta: u64,
    _: u64,
    _: u64,
    _: u64,
    rt: *mut c_void,
    mem: *mut Memory,
) -> u64 {
    // SAFETY: the contract of `native_helpers`.
    let (env, mem) = unsafe { env_and_mem(rt, mem) };
    debug_assert_eq!(ctx, env.ctx as u64);
    match ID {
        helper::XDP_ADJUST_HEAD => env.adjust_head(mem, i64::from(delta as i32)),
        helper::XDP_ADJUST_META => env.adjust_meta(mem, i64::from(delta as i32)),
        _ => env.adjust_tail(mem, delta as i32),
    }
}

/// `bpf_csum_diff` without a region search: the verifier proved `from_size` readable
/// bytes at `from` and `to_size` at `to` (or a size of zero), so the bytes are read in
/// place. Same result as the `Env::call` path, the size check included.
unsafe extern "C" fn native_csum_diff(
    from: u64,
    from_size: u64,
    to: u64,
    to_size: u64,
    seed: u64,
    _: *mut c_void,
) -> u64 {
    let (from_size, to_size) = (from_size as u32, to_size as u32);
    if (from_size | to_size) & 3 != 0 {
        return neg(errno::EINVAL);
    }
    // SAFETY: the verifier proved both ranges readable (see above).
    let (from, to) = unsafe { (bytes(from, from_size), bytes(to, to_size)) };
    u64::from(csum::csum_diff(from, to, seed as u32))
}

unsafe extern "C" fn native_cpu(_: u64, _: u64, _: u64, _: u64, _: u64, rt: *mut c_void) -> u64 {
    // SAFETY: the runner passes its `XdpEnv` as `rt`.
    let env = unsafe { &*rt.cast::<XdpEnv<'_>>() };
    env.cpu as u64
}
