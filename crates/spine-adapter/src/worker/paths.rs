//! The worker's side of the host router's header-copy and in-place paths (see
//! `crate::hostpath`): delivering to such an endpoint, and taking back what its client
//! returns with the egress port it chose. Kept apart from the frame endpoints' code.

use spine_endpoint::{Desc, Returned, INLINE_BYTES};
use spine_pool::{Buf, BufMeta};

use super::{Why, Worker};
use crate::endpoints::HostPath;

impl Worker {
    /// Delivers `buf` to owned endpoint `k`, a header-copy or in-place one: its header
    /// with a handle on the buffer, which stays here; or the whole frame into a frame of
    /// the endpoint's area. Counted by the endpoint (delivered, or dropped for want of
    /// room or of a free handle).
    pub(crate) fn deliver_host_path(&mut self, k: usize, buf: Buf) {
        let o = &mut self.eps.owned[k];
        let Ok(data) = self.pool.data(&buf) else {
            let _ = self.cache.free(buf);
            return;
        };
        if o.path() != HostPath::HeaderCopy {
            if o.end.deliver_in_frame(data) {
                o.woke = true;
            }
            let _ = self.cache.free(buf);
            return;
        }
        let total = data.len().min(usize::from(u16::MAX));
        let hl = total.min(usize::from(o.header_bytes()));
        let mut hdr = [0u8; INLINE_BYTES];
        hdr[..hl].copy_from_slice(&data[..hl]);
        let Some(parked) = o.parked.as_mut() else {
            let _ = self.cache.free(buf);
            return;
        };
        let handle = match parked.park(buf, hl as u16) {
            Ok(h) => h,
            Err(buf) => {
                let _ = self.cache.free(buf);
                return;
            }
        };
        if o.end.deliver_header(&hdr[..hl], handle, total as u16) {
            o.woke = true;
        } else if let Some(buf) = parked.cancel(handle) {
            let _ = self.cache.free(buf);
        }
    }

    /// Takes up to a burst of returns from owned endpoint `k` (header-copy or in-place)
    /// and sends each to the egress port it names; returns how many entries it took.
    /// A header's handle is checked against the endpoint's table and refused (counted,
    /// `bad_handle`) unless it names a buffer it holds; an egress port that does not
    /// exist or that the endpoint's domain may not use is refused the same way and the
    /// buffer freed (an in-place frame: dropped as `redirect_no_target`).
    pub(super) fn serve_host_path(&mut self, k: usize) -> usize {
        let pool = self.pool.clone();
        let head = pool.headroom() as usize;
        let p = self.eps.owned[k].port();
        let header = self.eps.owned[k].path() == HostPath::HeaderCopy;
        let mut n = 0;
        while n < self.wiring.burst && self.eps.owned[k].end.tx_pending() {
            if header {
                let mut hdr = [0u8; INLINE_BYTES];
                let Some(r) = self.eps.owned[k].end.take_returned(&mut hdr) else { break };
                n += 1;
                let o = &mut self.eps.owned[k];
                let may_send = match r {
                    Returned::Header { egress, .. } => o.may_send(egress),
                    Returned::Forward { .. } => false,
                };
                let Some(parked) = o.parked.as_mut() else { break };
                let Returned::Header { handle, egress, len } = r else {
                    // An in-place return on a header-copy endpoint: its frame went back
                    // to the client; nothing to send.
                    parked.bad_handle += 1;
                    continue;
                };
                let Some((mut buf, hl)) = parked.take(handle) else { continue };
                if egress == Desc::EGRESS_DROP {
                    let _ = self.cache.free(buf);
                    continue;
                }
                if !may_send {
                    parked.bad_handle += 1;
                    let _ = self.cache.free(buf);
                    continue;
                }
                let Ok(meta) = pool.meta(&buf) else {
                    let _ = self.cache.free(buf);
                    continue;
                };
                // The payload starts `hl` bytes in; the returned header goes just before
                // it (the headroom takes a longer one).
                let start = meta.data_off as usize + usize::from(hl);
                let spliced = start.checked_sub(len).and_then(|at| {
                    let frame = pool.frame_mut(&mut buf).ok()?;
                    frame.get_mut(at..start)?.copy_from_slice(&hdr[..len]);
                    let m = BufMeta {
                        data_off: at as u32,
                        len: meta.len - u32::from(hl) + len as u32,
                        meta_len: 0,
                        ..meta
                    };
                    pool.set_meta(&mut buf, m).ok()
                });
                if spliced.is_none() {
                    self.drop(buf, p, Why::NoTarget, 0);
                    continue;
                }
                self.transmit(buf, egress, p, 0);
            } else {
                let Some(mut buf) = self.cache.alloc() else {
                    self.counters.ports[usize::from(p)].drops.tx_full += 1;
                    break;
                };
                let end = &mut self.eps.owned[k].end;
                let taken = match pool.frame_mut(&mut buf) {
                    Ok(frame) => frame.get_mut(head..).and_then(|room| end.take_returned(room)),
                    Err(_) => None,
                };
                let Some(r) = taken else {
                    let _ = self.cache.free(buf);
                    break;
                };
                n += 1;
                let Returned::Forward { egress, len } = r else {
                    self.drop(buf, p, Why::NoTarget, 0);
                    continue;
                };
                let meta = BufMeta {
                    data_off: head as u32,
                    len: len as u32,
                    meta_len: 0,
                    port: u32::from(p),
                    ts_ns: 0,
                };
                if !self.eps.owned[k].may_send(egress) || pool.set_meta(&mut buf, meta).is_err() {
                    self.drop(buf, p, Why::NoTarget, 0);
                    continue;
                }
                self.transmit(buf, egress, p, 0);
            }
        }
        n
    }

    /// Frees the buffers of endpoints that went (their held ones).
    #[cold]
    pub(super) fn free_released(&mut self) {
        for b in self.eps.released.drain(..) {
            let _ = self.cache.free(b);
        }
    }
}
