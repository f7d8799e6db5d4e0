//! Helpers the adapter's integration tests share: the C fixture, frames, temporary
//! folders and a port that records what happens to it.
#![allow(dead_code, reason = "each test binary uses a different subset")]

use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use spine_ports::{Burst, PoolCache, Port, PortError, PortStats};

/// A folder in the temporary directory, removed when dropped.
pub use spine_testnet::daemons::TempDir;

/// `tests/fixtures/steer.c`, compiled once per test binary.
pub fn steer_object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    OBJ.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/steer.c");
        let dir = TempDir::new("fixture");
        spine_progs::compile_c(&src, &dir.join("steer.o"), &[]).expect("clang builds the fixture")
    })
}

/// A 60-byte frame whose first payload byte is `code` (what `steer` reads), followed by
/// `extra`.
pub fn frame(code: u8, extra: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5, code];
    f.extend_from_slice(extra);
    f.resize(60, 0xee);
    f
}

/// What a [`Recorder`] saw, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// A receive call and the buffers (pool indices) it returned.
    Rx(String, Vec<u32>),
    /// A transmit call and the buffers it took.
    Tx(String, Vec<u32>),
}

pub type Log = Arc<Mutex<Vec<Call>>>;

/// A port that receives copies of `packet` (up to `limit` in all, `None`: forever) and
/// takes everything it is sent, logging every call with the buffers involved.
pub struct Recorder {
    pub name: String,
    pub packet: Vec<u8>,
    pub left: Option<u64>,
    pub log: Log,
    pub sent: Vec<Vec<u8>>,
    pub stats: PortStats,
}

impl Recorder {
    pub fn new(name: &str, packet: Vec<u8>, limit: Option<u64>, log: &Log) -> Recorder {
        Recorder {
            name: name.into(),
            packet,
            left: limit,
            log: log.clone(),
            sent: Vec::new(),
            stats: PortStats::default(),
        }
    }
}

impl Port for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let mut got = Vec::new();
        while !out.is_full() && self.left != Some(0) && !self.packet.is_empty() {
            let Some(mut b) = cache.alloc() else { break };
            pool.write(&mut b, &self.packet).unwrap();
            got.push(b.index());
            out.push(b).unwrap();
            if let Some(l) = &mut self.left {
                *l -= 1;
            }
        }
        if !got.is_empty() {
            self.log.lock().unwrap().push(Call::Rx(self.name.clone(), got.clone()));
        }
        self.stats.rx_packets += got.len() as u64;
        Ok(got.len())
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let n = pkts.len();
        let mut took = Vec::new();
        for b in pkts.drain_front(n) {
            took.push(b.index());
            self.sent.push(pool.data(&b).unwrap().to_vec());
            cache.free(b).unwrap();
        }
        self.stats.tx_packets += n as u64;
        self.log.lock().unwrap().push(Call::Tx(self.name.clone(), took));
        Ok(n)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }
}
