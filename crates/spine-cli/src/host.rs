//! The host services extensions get when run from the command line: the monotonic
//! clock, a seeded generator, and trace lines on stderr.

use std::time::Instant;

use spine_runtime::{splitmix64, Event, Host};

#[derive(Debug)]
pub struct CliHost {
    epoch: Instant,
    rng: u64,
    /// Print trace lines (off while timing).
    pub echo: bool,
    pub traced: u64,
    pub faults: u64,
}

impl CliHost {
    pub fn new() -> Self {
        CliHost { epoch: Instant::now(), rng: 0x5eed, echo: true, traced: 0, faults: 0 }
    }
}

impl Host for CliHost {
    fn now_ns(&mut self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn tai_ns(&mut self) -> u64 {
        spine_adapter::sys::tai_ns()
    }
    fn prandom_u32(&mut self) -> u32 {
        (splitmix64(&mut self.rng) >> 32) as u32
    }
    fn trace(&mut self, cpu: usize, line: &[u8]) {
        self.traced += 1;
        if self.echo {
            eprintln!("trace cpu{cpu}: {}", String::from_utf8_lossy(line).trim_end());
        }
    }
    fn event(&mut self, ev: &Event<'_>) {
        match ev {
            // One line per fault would drown the log; the counters carry the numbers.
            Event::Fault { .. } => self.faults += 1,
            Event::Detached { ext, domain, faults } => {
                eprintln!("spine: extension {ext} (domain {domain}) detached after {faults} faults")
            }
        }
    }
}
