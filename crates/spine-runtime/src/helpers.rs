//! The helpers an XDP extension may call, with the kernel's semantics and return values.
//! Every pointer argument is checked against the invocation's regions before use.

use std::sync::Arc;

use spine_abi::{errno, helper};
use spine_maps::Map;
use spine_vm::{CallAbort, Env, Memory, Region};

use crate::csum;
use crate::ctx::XdpCtx;
use crate::ext::map_index;
use crate::frame::{Geometry, ETH_HLEN};
use crate::printk;
use crate::Host;

const MAX_META: u64 = spine_abi::xdp_frame::MAX_META as u64;

/// The helper environment of one XDP invocation.
pub(crate) struct XdpEnv<'a> {
    pub maps: &'a [Arc<Map>],
    pub cpu: usize,
    pub host: &'a mut dyn Host,
    /// The context the program was given; helpers taking `ctx` must be passed this.
    pub ctx: *mut XdpCtx,
    /// The frame buffer, exclusively borrowed for the invocation.
    pub frame: *mut u8,
    pub geometry: Geometry,
    /// Index of the packet region (`[data_meta, data_end)`) in the invocation's memory.
    pub pkt_region: usize,
}

fn neg(e: i64) -> u64 {
    (-e) as u64
}

impl XdpEnv<'_> {
    fn map(&self, handle: u64) -> Result<&Map, CallAbort> {
        map_index(handle)
            .and_then(|i| self.maps.get(i))
            .map(|m| &**m)
            .ok_or(CallAbort::Fault("argument 1 is not a map"))
    }

    fn check_ctx(&self, arg: u64) -> Result<(), CallAbort> {
        if arg == self.ctx as u64 {
            Ok(())
        } else {
            Err(CallAbort::Fault("argument 1 is not the context"))
        }
    }

    fn ctx(&self) -> XdpCtx {
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

    fn adjust_tail(&mut self, mem: &mut Memory, delta: i64) -> u64 {
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
}

impl Env for XdpEnv<'_> {
    fn call(&mut self, id: u32, a: [u64; 5], mem: &mut Memory) -> Result<u64, CallAbort> {
        let bad_ptr = CallAbort::Fault("pointer argument outside the program's memory");
        Ok(match id {
            helper::MAP_LOOKUP_ELEM => {
                let map = self.map(a[0])?;
                let key = mem.slice(a[1], map.def().key_size as usize).ok_or(bad_ptr)?;
                map.lookup(key, self.cpu).map_or(0, |p| p.as_ptr() as u64)
            }
            helper::MAP_UPDATE_ELEM => {
                let map = self.map(a[0])?;
                let d = map.def();
                let key = mem.slice(a[1], d.key_size as usize).ok_or(bad_ptr.clone())?;
                let value = mem.slice(a[2], d.value_size as usize).ok_or(bad_ptr)?;
                match map.update(key, value, a[3], self.cpu) {
                    Ok(()) => 0,
                    Err(e) => e.errno() as u64,
                }
            }
            helper::MAP_DELETE_ELEM => {
                let map = self.map(a[0])?;
                let key = mem.slice(a[1], map.def().key_size as usize).ok_or(bad_ptr)?;
                match map.delete(key, self.cpu) {
                    Ok(()) => 0,
                    Err(e) => e.errno() as u64,
                }
            }
            helper::KTIME_GET_NS | helper::KTIME_GET_BOOT_NS => self.host.now_ns(),
            helper::GET_PRANDOM_U32 => u64::from(self.host.prandom_u32()),
            helper::GET_SMP_PROCESSOR_ID => self.cpu as u64,
            helper::TRACE_PRINTK => {
                let fmt = mem.slice(a[0], a[1] as u32 as usize).ok_or(bad_ptr)?;
                match printk::format(fmt, [a[2], a[3], a[4]], mem) {
                    Ok(line) => {
                        self.host.trace(self.cpu, &line);
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
                let from = mem.slice(a[0], from_size as usize).ok_or(bad_ptr.clone())?;
                let to = mem.slice(a[2], to_size as usize).ok_or(bad_ptr)?;
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
                self.adjust_tail(mem, i64::from(a[1] as i32))
            }
            _ => return Err(CallAbort::Unknown),
        })
    }
}
