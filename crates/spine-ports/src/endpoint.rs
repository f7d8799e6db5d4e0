//! An application endpoint as a port: what the client transmits the worker receives,
//! and what the worker transmits to it lands on the client's receive ring.
//!
//! Frames are copied between pool buffers and the endpoint's own buffer area (the pool
//! is never shared with a client, so a client can hold or lose none of its buffers):
//! one copy each way. On receive the endpoint copies straight from its area (or the
//! ring's inline slot) into the pool buffer, after the headroom; on transmit from the
//! pool buffer into a fill frame (or inline slot).
//!
//! A client that goes away is reclaimed: once the endpoint's [`Liveness`] says so (set by
//! a [`spine_endpoint::ClientWatch`] on the control thread, or by the adapter's own
//! policy such as [`EndpointPort::with_garbage_limit`]), the next burst drops the endpoint (unmapping its region and closing its fds:
//! a one-time slow path), and from then on receive yields nothing and transmit frees
//! every buffer it is given, counted as `tx_drops.device`.

use spine_endpoint::{AdapterEnd, AdapterStats, EventFd, Liveness};
use spine_pool::{BufMeta, Burst, PoolCache};

use crate::{Port, PortError, PortStats};

/// The adapter's port onto one endpoint.
#[derive(Debug)]
pub struct EndpointPort {
    name: String,
    /// `None` once the endpoint has been reclaimed.
    end: Option<AdapterEnd>,
    /// Signalled after a burst delivered something, for a client that sleeps.
    wake: Option<EventFd>,
    live: Liveness,
    port_id: u32,
    stats: PortStats,
    /// The endpoint's counters as they were when it was reclaimed.
    last: AdapterStats,
    /// Frames sent to the endpoint after its client was gone.
    dead_drops: u64,
    /// Failed checks (bad descriptors and indices) after which the client is declared
    /// dead; `u64::MAX`: never.
    garbage_limit: u64,
}

impl EndpointPort {
    /// A port onto `end`, alive until [`EndpointPort::liveness`] is marked dead.
    pub fn new(name: &str, end: AdapterEnd, wake: Option<EventFd>, port_id: u32) -> Self {
        EndpointPort {
            name: name.to_owned(),
            end: Some(end),
            wake,
            live: Liveness::new(),
            port_id,
            stats: PortStats::default(),
            last: AdapterStats::default(),
            dead_drops: 0,
            garbage_limit: u64::MAX,
        }
    }

    /// Declares the client dead, and reclaims its endpoint, once `limit` of the words it
    /// wrote have failed their checks. An honest client never fails one; an index left
    /// impossible fails once per burst, so a client whose rings stay broken is
    /// reclaimed after `limit` bursts.
    pub fn with_garbage_limit(mut self, limit: u64) -> Self {
        self.garbage_limit = limit;
        self
    }

    /// Uses `live` (from the client's [`spine_endpoint::ClientWatch`]) as this
    /// endpoint's liveness flag.
    pub fn with_liveness(mut self, live: Liveness) -> Self {
        self.live = live;
        self
    }

    /// The flag that, once marked dead, makes the next burst reclaim the endpoint.
    pub fn liveness(&self) -> Liveness {
        self.live.clone()
    }

    /// The endpoint, until it is reclaimed.
    pub fn endpoint(&self) -> Option<&AdapterEnd> {
        self.end.as_ref()
    }

    /// Whether the endpoint has been reclaimed (its region and fds released).
    pub fn is_reclaimed(&self) -> bool {
        self.end.is_none()
    }

    /// The endpoint's own counters (bad indices and descriptors among them), frozen at
    /// reclaim.
    pub fn endpoint_stats(&self) -> AdapterStats {
        self.end.as_ref().map_or(self.last, AdapterEnd::stats)
    }

    /// Frames the worker sent to the endpoint after it was reclaimed.
    pub fn dead_drops(&self) -> u64 {
        self.dead_drops
    }

    /// Reclaims the endpoint if its client is gone: one relaxed load per burst, and
    /// the release itself (munmap, close) once.
    fn reap(&mut self) {
        if let Some(end) = &self.end {
            let s = end.stats();
            if s.bad_desc.saturating_add(s.bad_index) >= self.garbage_limit {
                self.live.mark_dead();
            }
        }
        if self.end.is_some() && self.live.is_dead() {
            if let Some(end) = self.end.take() {
                self.last = end.stats();
            }
            self.wake = None;
        }
    }
}

impl Port for EndpointPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        self.reap();
        let Some(end) = self.end.as_mut() else { return Ok(0) };
        let pool = cache.pool().clone();
        let head = pool.headroom();
        let mut got = 0;
        while !out.is_full() && end.tx_pending() {
            let Some(mut buf) = cache.alloc() else {
                self.stats.rx_drops.no_buffer += 1;
                break;
            };
            // The one copy: from the endpoint straight into the buffer, after the headroom.
            let taken = match pool.frame_mut(&mut buf) {
                Ok(frame) => frame.get_mut(head as usize..).and_then(|room| end.take(room)),
                Err(_) => None,
            };
            let meta = taken.map(|len| BufMeta {
                data_off: head,
                len: len as u32,
                meta_len: 0,
                port: self.port_id,
                ts_ns: 0,
            });
            let Some(meta) = meta.filter(|m| pool.set_meta(&mut buf, *m).is_ok()) else {
                // Nothing valid left to take (bad entries are counted by the endpoint).
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                break;
            };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += u64::from(meta.len);
            let _ = out.push(buf);
            got += 1;
        }
        Ok(got)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        self.reap();
        let n = pkts.len();
        let pool = cache.pool().clone();
        let mut delivered = 0;
        for buf in pkts.drain_front(n) {
            match (self.end.as_mut(), pool.data(&buf)) {
                (Some(end), Ok(d)) => {
                    if end.deliver(d) {
                        delivered += 1;
                        self.stats.tx_packets += 1;
                        self.stats.tx_bytes += d.len() as u64;
                    } else {
                        // The client's rings are full or its fill frames too small: its loss.
                        self.stats.tx_drops.kernel += 1;
                    }
                }
                (_, Err(_)) => self.stats.tx_drops.bad_buffer += 1,
                // The client is gone: nobody to deliver to.
                (None, Ok(_)) => {
                    self.stats.tx_drops.device += 1;
                    self.dead_drops += 1;
                }
            }
            if cache.free(buf).is_err() {
                self.stats.tx_drops.bad_buffer += 1;
            }
        }
        if delivered > 0 {
            if let Some(w) = &self.wake {
                w.signal();
            }
        }
        Ok(n)
    }

    fn stats(&self) -> PortStats {
        let mut s = self.stats;
        let e = self.endpoint_stats();
        s.rx_drops.bad_desc = e.bad_desc + e.bad_index;
        s.rx_drops.too_big += e.tx_too_big;
        s
    }
}
