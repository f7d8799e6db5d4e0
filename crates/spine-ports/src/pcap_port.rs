//! Capture files as ports: a pcap or pcapng file replayed once on receive, and a pcap
//! file written on transmit (nanosecond timestamps, Wireshark reads it).

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use spine_pool::{Burst, PoolCache};

use crate::{CaptureReader, Packet, PcapWriter, Port, PortError, PortErrorKind, PortStats};

/// Replays a capture file once, in file order; receive returns 0 at its end.
#[derive(Debug)]
pub struct PcapSource {
    name: String,
    reader: CaptureReader<BufReader<File>>,
    packet: Packet,
    done: bool,
    port_id: u32,
    stats: PortStats,
}

impl PcapSource {
    pub fn open(path: &Path, port_id: u32) -> Result<PcapSource, PortError> {
        let name = path.display().to_string();
        let file = File::open(path)
            .map_err(|source| PortError::new(&name, PortErrorKind::Io { op: "open", source }))?;
        let reader = CaptureReader::new(BufReader::new(file))
            .map_err(|e| PortError::new(&name, PortErrorKind::Capture(e)))?;
        Ok(PcapSource {
            name,
            reader,
            packet: Packet::default(),
            done: false,
            port_id,
            stats: PortStats::default(),
        })
    }

    /// True once every packet of the file has been read.
    pub fn is_done(&self) -> bool {
        self.done
    }
}

impl Port for PcapSource {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let mut got = 0;
        while !out.is_full() && !self.done {
            let more = self
                .reader
                .read_next(&mut self.packet)
                .map_err(|e| PortError::new(&self.name, PortErrorKind::Capture(e)))?;
            if !more {
                self.done = true;
                break;
            }
            let Some(mut buf) = cache.alloc() else {
                // The packet just read is lost; the rest of the file waits.
                self.stats.rx_drops.no_buffer += 1;
                break;
            };
            let filled =
                pool.write_rx(&mut buf, &self.packet.data, self.port_id, self.packet.ts_ns);
            if filled.is_err() {
                self.stats.rx_drops.too_big += 1;
                cache.free(buf).map_err(|e| PortError::new(&self.name, e.into()))?;
                continue;
            }
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += self.packet.data.len() as u64;
            let _ = out.push(buf);
            got += 1;
        }
        Ok(got)
    }

    fn tx_burst(&mut self, _: &mut PoolCache, _: &mut Burst) -> Result<usize, PortError> {
        Err(PortError::new(&self.name, PortErrorKind::WrongDirection { direction: "transmit" }))
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}

/// Writes every transmitted packet to a pcap file, with the buffer's receive time or,
/// if it has none, the current time.
#[derive(Debug)]
pub struct PcapSink {
    name: String,
    writer: Option<PcapWriter<BufWriter<File>>>,
    stats: PortStats,
    /// A chained frame's bytes, gathered for writing.
    gather: Vec<u8>,
}

impl PcapSink {
    /// Creates (or truncates) `path` and writes the file header.
    pub fn create(path: &Path) -> Result<PcapSink, PortError> {
        let name = path.display().to_string();
        let io = |op| {
            let name = name.clone();
            move |source| PortError::new(&name, PortErrorKind::Io { op, source })
        };
        let file = File::create(path).map_err(io("create"))?;
        let writer = PcapWriter::ethernet(BufWriter::new(file)).map_err(io("write header"))?;
        Ok(PcapSink { name, writer: Some(writer), stats: PortStats::default(), gather: Vec::new() })
    }

    /// Flushes the file and closes it; errors that dropping would hide show up here.
    pub fn finish(mut self) -> Result<u64, PortError> {
        let writer = self.writer.take().expect("present until finish");
        let n = writer.count();
        writer.finish().map_err(|source| {
            PortError::new(&self.name, PortErrorKind::Io { op: "flush", source })
        })?;
        Ok(n)
    }
}

impl Port for PcapSink {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, _: &mut PoolCache, _: &mut Burst) -> Result<usize, PortError> {
        Ok(0)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let writer = self.writer.as_mut().expect("present until finish");
        let n = pkts.len();
        let mut failed = None;
        let pkts_chained = pkts.has_chains();
        for buf in pkts.drain_front(n) {
            match (pool.data(&buf), pool.meta(&buf)) {
                (Ok(d), Ok(m)) if failed.is_none() => {
                    let ts = if m.ts_ns != 0 { m.ts_ns } else { now_ns() };
                    // A chained frame is written whole: head and fragments, gathered
                    // into a buffer kept for the next one (files are not the fast path).
                    let d = if pkts_chained && pool.has_frags(&buf) {
                        self.gather.clear();
                        self.gather.extend_from_slice(d);
                        pool.frags(&buf).for_each(|f| self.gather.extend_from_slice(f));
                        &self.gather[..]
                    } else {
                        d
                    };
                    match writer.write(ts, d) {
                        Ok(()) => {
                            self.stats.tx_packets += 1;
                            self.stats.tx_bytes += d.len() as u64;
                        }
                        Err(source) => {
                            self.stats.tx_drops.device += 1;
                            failed = Some(source);
                        }
                    }
                }
                (Ok(_), Ok(_)) => self.stats.tx_drops.device += 1,
                _ => self.stats.tx_drops.bad_buffer += 1,
            }
            if cache.free(buf).is_err() {
                self.stats.tx_drops.bad_buffer += 1;
            }
        }
        match failed {
            Some(source) => {
                Err(PortError::new(&self.name, PortErrorKind::Io { op: "write", source }))
            }
            None => Ok(n),
        }
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn takes_frags(&self) -> bool {
        true
    }
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}
