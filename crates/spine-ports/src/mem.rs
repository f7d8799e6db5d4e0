//! The in-memory port, for benchmarks and tests: it replays a fixed list of packets
//! round-robin at full speed, and counts and frees whatever it is sent.
//!
//! Receiving costs one buffer allocation (taken in bulk per burst) and one copy of a
//! pre-built template per packet (the templates sit back to back in one allocation made
//! at construction).
//!
//! With [`MemPort::with_frags`] a template longer than one buffer is received as a chain
//! of buffers (a head and fragments, [`spine_pool::Pool::chain`]), as an AF_XDP socket
//! bound with `XDP_USE_SG` receives a jumbo frame; without it such a template is
//! counted `too_big` and skipped. Chained frames sent to the port are counted whole.

use spine_pool::{Buf, Burst, PoolCache};

use crate::{Capture, Port, PortError, PortErrorKind, PortStats};

/// Replays packets on receive; a sink on transmit.
#[derive(Debug)]
pub struct MemPort {
    name: String,
    /// Every template's bytes, back to back.
    bytes: Vec<u8>,
    /// `(offset, len)` of each template in `bytes`.
    spans: Vec<(usize, usize)>,
    /// The longest template's length.
    longest: usize,
    next: usize,
    /// Packets still to replay; `None` replays forever.
    remaining: Option<u64>,
    port_id: u32,
    /// Receive templates longer than a buffer as chains.
    frags: bool,
    stats: PortStats,
}

impl MemPort {
    /// Replays `packets` in order, round-robin, forever (see [`with_limit`](Self::with_limit)).
    pub fn replay<P: AsRef<[u8]>>(
        name: &str,
        packets: impl IntoIterator<Item = P>,
    ) -> Result<MemPort, PortError> {
        let mut bytes = Vec::new();
        let mut spans = Vec::new();
        for p in packets {
            let p = p.as_ref();
            spans.push((bytes.len(), p.len()));
            bytes.extend_from_slice(p);
        }
        if spans.is_empty() {
            return Err(PortError::new(
                name,
                PortErrorKind::Config { reason: "no packets to replay" },
            ));
        }
        let longest = spans.iter().map(|&(_, len)| len).max().unwrap_or(0);
        Ok(MemPort { name: name.to_owned(), bytes, spans, longest, ..MemPort::sink(name) })
    }

    /// Replays the packets of a capture.
    pub fn from_capture(name: &str, capture: &Capture) -> Result<MemPort, PortError> {
        Self::replay(name, capture.packets.iter().map(|p| &p.data))
    }

    /// A port that receives nothing and counts and frees what it is sent.
    pub fn sink(name: &str) -> MemPort {
        MemPort {
            name: name.to_owned(),
            bytes: Vec::new(),
            spans: Vec::new(),
            longest: 0,
            next: 0,
            remaining: None,
            port_id: 0,
            frags: false,
            stats: PortStats::default(),
        }
    }

    /// Stops after `total` more packets (received or dropped).
    pub fn with_limit(mut self, total: u64) -> Self {
        self.remaining = Some(total);
        self
    }

    /// The ingress port id written into received buffers.
    pub fn with_port_id(mut self, id: u32) -> Self {
        self.port_id = id;
        self
    }

    /// Receives templates longer than one buffer as chains of buffers (up to
    /// [`spine_pool::MAX_CHAIN`]; longer ones are counted `too_big`).
    pub fn with_frags(mut self) -> Self {
        self.frags = true;
        self
    }

    /// Builds the chain for `bytes` (longer than one buffer's room): the head holds the
    /// first `room` bytes, each fragment up to `room` more, all after the headroom.
    /// `Ok(None)` (and a `no_buffer` drop counted) when the pool runs short.
    fn rx_chain(&mut self, cache: &mut PoolCache, bytes: &[u8]) -> Result<Option<Buf>, PortError> {
        let pool = cache.pool().clone();
        let room = (pool.buf_size() - pool.headroom()) as usize;
        let err = |e: spine_pool::PoolError| PortError::new(&self.name, e.into());
        let Some(mut head) = cache.alloc() else {
            self.stats.rx_drops.no_buffer += 1;
            return Ok(None);
        };
        pool.write_rx(&mut head, &bytes[..room], self.port_id, 0).map_err(err)?;
        for piece in bytes[room..].chunks(room) {
            let Some(mut f) = cache.alloc() else {
                self.stats.rx_drops.no_buffer += 1;
                cache.free(head).map_err(err)?;
                return Ok(None);
            };
            pool.write(&mut f, piece).map_err(err)?;
            if let Err(e) = pool.chain(&mut head, f) {
                cache.free(e.buf).map_err(err)?;
                cache.free(head).map_err(err)?;
                return Err(err(e.error));
            }
        }
        Ok(Some(head))
    }

    /// Receive when a template may not fit the pool's buffers: each one is checked, and
    /// one that does not fit is counted and skipped.
    fn rx_burst_checked(
        &mut self,
        cache: &mut PoolCache,
        out: &mut Burst,
    ) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let mut got = 0;
        while !out.is_full() {
            if let Some(left) = &mut self.remaining {
                if *left == 0 {
                    break;
                }
                *left -= 1;
            }
            let (off, len) = self.spans[self.next];
            self.next = if self.next + 1 == self.spans.len() { 0 } else { self.next + 1 };
            let room = (pool.buf_size() - pool.headroom()) as usize;
            if self.frags && len > room {
                if len > room * spine_pool::MAX_CHAIN {
                    self.stats.rx_drops.too_big += 1;
                    continue;
                }
                let bytes = std::mem::take(&mut self.bytes);
                let chain = self.rx_chain(cache, &bytes[off..off + len]);
                self.bytes = bytes;
                let Some(head) = chain? else { break };
                self.stats.rx_packets += 1;
                self.stats.rx_bytes += len as u64;
                out.set_chained();
                let _ = out.push(head);
                got += 1;
                continue;
            }
            let Some(mut buf) = cache.alloc() else {
                // This packet is lost; the next burst tries again with the next one.
                self.stats.rx_drops.no_buffer += 1;
                break;
            };
            let filled = pool.write_rx(&mut buf, &self.bytes[off..off + len], self.port_id, 0);
            if filled.is_err() {
                self.stats.rx_drops.too_big += 1;
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                continue;
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += len as u64;
            let _ = out.push(buf);
            got += 1;
        }
        Ok(got)
    }

    /// Packets left to replay; `None` if unlimited.
    pub fn remaining(&self) -> Option<u64> {
        self.remaining
    }
}

impl Port for MemPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        if self.spans.is_empty() {
            return Ok(0);
        }
        let pool = cache.pool();
        if self.longest > (pool.buf_size() - pool.headroom()) as usize {
            return self.rx_burst_checked(cache, out);
        }
        let mut want = out.room();
        if let Some(left) = self.remaining {
            want = want.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        // Every template fits a buffer (checked above): the buffers are taken in bulk and
        // filled as they are handed out (their metadata written once), without a
        // per-packet size check or free.
        let (spans, all) = (&self.spans, &self.bytes);
        let mut next = self.next;
        let mut bytes = 0u64;
        let got = cache
            .alloc_rx_burst(out, want, self.longest, self.port_id, 0, || {
                let (off, len) = spans[next];
                next = if next + 1 == spans.len() { 0 } else { next + 1 };
                bytes += len as u64;
                &all[off..off + len]
            })
            .map_err(|e| PortError::new(&self.name, e.into()))?;
        self.next = next;
        let mut taken = got as u64;
        if got < want {
            // The next packet is lost; the next burst tries again with the one after.
            self.stats.rx_drops.no_buffer += 1;
            self.next = if self.next + 1 == self.spans.len() { 0 } else { self.next + 1 };
            taken += 1;
        }
        if let Some(left) = &mut self.remaining {
            *left -= taken;
        }
        self.stats.rx_packets += got as u64;
        self.stats.rx_bytes += bytes;
        Ok(got)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let n = pkts.len();
        let pool = cache.pool();
        let mut bad = 0;
        let chained = pkts.has_chains();
        // Only the lengths are counted: one metadata read per buffer, no view of bytes.
        for buf in pkts.iter() {
            match pool.meta(buf) {
                Ok(m) => {
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes +=
                        if chained { pool.frame_len(buf) } else { u64::from(m.len) };
                }
                Err(_) => bad += 1,
            }
        }
        // Sent: every buffer goes back to the pool in one go. A handle the pool refuses
        // (another pool's, or one not owned) is dropped here; a burst with refusals the
        // length check did not already count adds one more.
        if cache.free_burst(pkts).is_err() && bad == 0 {
            bad = 1;
        }
        self.stats.tx_drops.bad_buffer += bad;
        Ok(n)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn takes_frags(&self) -> bool {
        true
    }
}
