//! An application endpoint as a port: what the client transmits the worker receives,
//! and what the worker transmits to it lands on the client's receive ring.
//!
//! Frames are copied between pool buffers and the endpoint's own buffer area (the pool
//! is never shared with a client, so a client can hold or lose none of its buffers):
//! one copy each way on the transmit side, two on the receive side today (area to a
//! frame-sized scratch, scratch to the pool buffer). The scratch is allocated once.

use spine_endpoint::{AdapterEnd, EventFd};
use spine_pool::{Burst, PoolCache};

use crate::{Port, PortError, PortStats};

/// The adapter's port onto one endpoint.
#[derive(Debug)]
pub struct EndpointPort {
    name: String,
    end: AdapterEnd,
    /// Signalled after a burst delivered something, for a client that sleeps.
    wake: Option<EventFd>,
    port_id: u32,
    scratch: Vec<u8>,
    stats: PortStats,
}

impl EndpointPort {
    pub fn new(name: &str, end: AdapterEnd, wake: Option<EventFd>, port_id: u32) -> Self {
        let scratch = vec![0; end.layout().frame_size as usize];
        EndpointPort {
            name: name.to_owned(),
            end,
            wake,
            port_id,
            scratch,
            stats: PortStats::default(),
        }
    }

    /// The endpoint's own counters (bad indices and descriptors among them).
    pub fn endpoint(&self) -> &AdapterEnd {
        &self.end
    }
}

impl Port for EndpointPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let mut got = 0;
        while !out.is_full() {
            let Some(len) = self.end.take(&mut self.scratch) else { break };
            let Some(mut buf) = cache.alloc() else {
                self.stats.rx_drops.no_buffer += 1;
                break;
            };
            if pool.write_rx(&mut buf, &self.scratch[..len], self.port_id, 0).is_err() {
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

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let n = pkts.len();
        let pool = cache.pool().clone();
        let mut delivered = 0;
        for buf in pkts.drain_front(n) {
            match pool.data(&buf) {
                Ok(d) if self.end.deliver(d) => {
                    delivered += 1;
                    self.stats.tx_packets += 1;
                    self.stats.tx_bytes += d.len() as u64;
                }
                // The client's rings are full or its fill frames too small: its loss.
                Ok(_) => self.stats.tx_drops.kernel += 1,
                Err(_) => self.stats.tx_drops.bad_buffer += 1,
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
        s.rx_drops.bad_desc = self.end.stats().bad_desc + self.end.stats().bad_index;
        s
    }
}
