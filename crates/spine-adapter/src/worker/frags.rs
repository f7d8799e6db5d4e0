//! Chained (multi-buffer) frames on the worker: a frame a port received in more than
//! one pool buffer (`spine_pool::Pool::chain`) runs as the kernel runs a multi-buffer
//! `xdp_buff`, and only where the kernel would run it.
//!
//! - Only an `xdp.frags` program (`Extension::frags_aware`, the kernel's
//!   `BPF_F_XDP_HAS_FRAGS`) gets such a frame. The kernel refuses to attach a plain
//!   program to a device whose MTU needs fragments; spine's ports do not know their
//!   MTU, so its equivalent is per frame: a chained frame on a port whose program is not
//!   frags-aware is dropped and counted `drops.frags`.
//! - The head buffer is the program's `data`..`data_end`, in place. The fragments'
//!   bytes are copied into the worker's `Frags` (fragments of one pool buffer each,
//!   `buf_size` bytes of room) for the frags helpers, and copied back after the run,
//!   each fragment then starting at offset 0 of its buffer; fragments the program
//!   emptied (`bpf_xdp_adjust_tail`) go back to the pool. This copy is the slow path's
//!   cost; linear frames never come here.
//! - Afterwards a frame still chained may go out of its own port (`XDP_TX`), be
//!   redirected to a port that transmits chains whole (`Port::takes_frags`), or be
//!   passed (`XDP_PASS`) to the port's host path (a TAP, which writes it whole), or to
//!   a cpumap entry (`XDP_PASS` on that worker, as the kernel's cpumap builds its skb
//!   with every fragment), or be broadcast (`BPF_F_BROADCAST`: a copy of the whole
//!   chain per target port, see `Worker::devmap_broadcast`), or go to an endpoint (an
//!   endpoint map or XSKMAP redirect, or `XDP_PASS` on a port whose endpoint's tag
//!   matches its head), which takes it as several receive descriptors if it asked for
//!   multi-buffer frames, else in one area frame when it fits (`Worker::deliver_chain`).
//!   A port that cannot send it drops it, counted `drops.frags`. A frame the program
//!   cut back to one buffer goes on as any linear frame.
//! - A chained frame on a port without a program (a host path's TAP receiving a jumbo
//!   frame from the kernel) is passed on the same way: out of the port the host path
//!   serves, if that port transmits chains.

use spine_abi::xdp_action as act;
use spine_pool::{Buf, BufMeta, PoolError, MAX_CHAIN};
use spine_runtime::{Bounds, RxInfo, XdpRunner};

use super::{decide, Action, Msg, MsgKind, Why, Worker};

impl Worker {
    /// Runs port `p`'s extension on the chained frame headed by `buf` (see the module
    /// docs) and acts on the verdict.
    pub(crate) fn handle_frags(&mut self, mut buf: Buf, p: u16, seq: u32) {
        let pi = usize::from(p);
        let Some(e) = self.progs[pi].attached() else {
            // No program: passed on, as a linear frame would be.
            self.counters.ports[pi].unhandled += 1;
            return self.pass_frags(buf, p, seq);
        };
        let Some(runner) = self.progs[pi].runner.as_mut() else {
            unreachable!("attached() found a runner")
        };
        if !runner.extension().frags_aware() {
            return self.drop(buf, p, Why::Frags, seq);
        }
        let pool = &*self.pool;
        let frags = &mut self.scratch.frags;
        frags.clear();
        if !pool.frags(&buf).all(|f| frags.push(f)) {
            // More fragments than the kernel allows, or one longer than a buffer.
            return self.drop(buf, p, Why::Frags, seq);
        }
        let len = pool.frame_len(&buf);
        let Ok((frame, meta)) = pool.frame_and_meta_mut(&mut buf) else {
            // Shared (or not ours): its fragments cannot be written.
            return self.drop(buf, p, Why::Frags, seq);
        };
        let info = &self.wiring.ports[pi];
        let rx = RxInfo { ingress_ifindex: info.ifindex, rx_queue_index: info.queue };
        let before = Bounds {
            meta: (meta.data_off - meta.meta_len) as usize,
            data: meta.data_off as usize,
            end: (meta.data_off + meta.len) as usize,
        };
        let mut b = before;
        let result = runner.run_raw_frags(frame, self.geometry, &mut b, frags, rx, &mut self.host);
        if b != before {
            let placed = BufMeta {
                data_off: b.data as u32,
                len: (b.end - b.data) as u32,
                meta_len: (b.data - b.meta) as u32,
                ..meta
            };
            // The runner keeps its bounds inside the buffer, so this cannot fail.
            let _ = pool.set_meta(&mut buf, placed);
        }
        self.rewrite_frags(&mut buf);
        let ec = &mut self.counters.exts[e];
        ec.runs += 1;
        ec.bytes += len;
        let verdict = match result {
            Ok(v) => v,
            Err(_) => {
                ec.faults += 1;
                self.counters.ports[pi].verdicts.count(act::ABORTED);
                return self.drop(buf, p, Why::Fault, seq);
            }
        };
        ec.verdicts.count(verdict);
        self.counters.ports[pi].verdicts.count(verdict);
        self.drain_outbox(pi, e);
        let prog = &self.progs[pi];
        let redirect = prog.runner.as_ref().and_then(XdpRunner::redirect);
        let a = decide(&self.wiring, prog.may_use(), verdict, redirect);
        if !self.pool.has_frags(&buf) {
            return self.act(a, buf, p, e, seq);
        }
        match a {
            Action::Tx => self.transmit_frags(buf, p, p, seq),
            Action::Redirect(q) => self.transmit_frags(buf, q, p, seq),
            Action::Pass => self.pass_frags(buf, p, seq),
            // A cpumap entry (no entry program: spine's cpumaps refuse them) delivers
            // the frame as `XDP_PASS`, fragments and all, as the kernel's
            // `__xdp_build_skb_from_frame` does on the entry's CPU.
            Action::Cpu(w) if w == self.index => self.pass_frags(buf, p, seq),
            Action::Cpu(w) => {
                let msg = Msg { buf, kind: MsgKind::PassFrags, port: p, packet: seq };
                self.handoff(w, msg, p)
            }
            // `devmap_broadcast` sees the chain and copies it per target.
            Action::Broadcast { .. } | Action::Drop(_) => self.act(a, buf, p, e, seq),
            Action::Endpoint(id) => self.redirect_to_endpoint(buf, p, id, seq),
        }
    }

    /// `XDP_PASS` for the chained frame `buf` of port `p`: to an endpoint of the port
    /// whose tag matches its head, else to the port's host path (or, for a host path,
    /// the port it serves) if that port transmits chains whole. A port without a host
    /// path counts it `drops.no_host_path` as for a linear frame.
    pub(crate) fn pass_frags(&mut self, buf: Buf, p: u16, seq: u32) {
        let pi = usize::from(p);
        let buf = if self.eps.on_port[pi] {
            match self.pass_to_endpoint(buf, p, seq, MsgKind::PassFrags) {
                Some(b) => b,
                None => return,
            }
        } else {
            buf
        };
        match self.wiring.ports[pi].uplink {
            Some(h) => {
                self.counters.ports[pi].to_host += 1;
                self.transmit_frags(buf, h, p, seq);
            }
            None => self.drop(buf, p, Why::NoHostPath, seq),
        }
    }

    /// Writes the worker's `Frags` (what the program left) back into `head`'s fragment
    /// buffers, in order, each from offset 0; frees the buffers of fragments no longer
    /// in use. Needs `head`'s only reference (the caller ran the program on it).
    fn rewrite_frags(&mut self, head: &mut Buf) {
        let pool = &*self.pool;
        let frags = &self.scratch.frags;
        let mut next = pool.unchain(head).ok().flatten();
        let mut i = 0;
        while let Some(mut f) = next {
            next = pool.unchain(&mut f).ok().flatten();
            if i < frags.count() {
                let bytes = frags.frag(i);
                // Cannot fail: `f` has one holder and a fragment is at most a buffer.
                let written = pool
                    .set_data(&mut f, 0, bytes.len() as u32)
                    .and_then(|()| pool.data_mut(&mut f).map(|d| d.copy_from_slice(bytes)));
                match written {
                    Ok(()) => match pool.chain(head, f) {
                        Ok(()) => {}
                        Err(e) => {
                            let _ = self.cache.free(e.buf);
                        }
                    },
                    Err(PoolError::Foreign { .. }) => {}
                    Err(_) => {
                        let _ = self.cache.free(f);
                    }
                }
            } else {
                let _ = self.cache.free(f);
            }
            i += 1;
        }
    }

    /// Queues the chained frame `buf` on port `q` (or hands it to `q`'s worker), if `q`
    /// transmits chains whole; otherwise drops it, counted against `q`.
    pub(crate) fn transmit_frags(&mut self, buf: Buf, q: u16, from: u16, seq: u32) {
        let qi = usize::from(q);
        if !self.wiring.ports[qi].frags {
            return self.drop(buf, q, Why::Frags, seq);
        }
        let home = self.wiring.ports[qi].home;
        if home != self.index {
            let msg = Msg { buf, kind: MsgKind::TxFrags, port: q, packet: seq };
            return self.handoff(home, msg, from);
        }
        if self.pending[qi].is_full() {
            self.flush_port(qi);
        }
        self.pending[qi].set_chained();
        if let Err(buf) = self.pending[qi].push(buf) {
            self.drop(buf, q, Why::TxFull, seq);
        }
    }
}

impl Worker {
    /// Delivers the chained frame `buf` (of port `p`) to owned endpoint `k`, then frees
    /// it: its pieces are copied into the endpoint's area, as several descriptors if
    /// the endpoint asked for multi-buffer frames, else into one area frame
    /// ([`spine_endpoint::AdapterEnd::deliver_pieces`], which counts a frame without
    /// room). A host-path endpoint, or one with a `doRx` applet (applets see one
    /// buffer), drops it, counted `drops.frags`.
    pub(crate) fn deliver_chain(&mut self, k: usize, buf: Buf, p: u16) {
        let o = &self.eps.owned[k];
        let rx_applet = o.applets.as_ref().is_some_and(|a| a.rx.is_some());
        if o.path() != crate::endpoints::HostPath::Frames || rx_applet {
            return self.drop(buf, p, Why::Frags, 0);
        }
        let pool = &*self.pool;
        let Ok(head) = pool.data(&buf) else { return self.drop(buf, p, Why::Frags, 0) };
        let mut pieces: [&[u8]; MAX_CHAIN] = [&[]; MAX_CHAIN];
        pieces[0] = head;
        let mut n = 1;
        for f in pool.frags(&buf) {
            if n == MAX_CHAIN {
                break;
            }
            pieces[n] = f;
            n += 1;
        }
        let o = &mut self.eps.owned[k];
        if o.end.deliver_pieces(&pieces[..n]) {
            o.woke = true;
        }
        let _ = self.cache.free(buf);
    }
}
