//! The host services extensions get when run from the command line: the monotonic
//! clock, a seeded generator, trace lines on stderr, and the MTUs of this network
//! namespace's interfaces (for `bpf_check_mtu`: a program run here receives on
//! loopback, as in the kernel's test run).

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
    /// `(ifindex, mtu)` of the namespace's interfaces, read once at creation.
    mtus: Vec<(u32, u32)>,
}

impl CliHost {
    pub fn new() -> Self {
        CliHost {
            epoch: Instant::now(),
            rng: 0x5eed,
            echo: true,
            traced: 0,
            faults: 0,
            mtus: interfaces(),
        }
    }
}

/// `(ifindex, mtu)` of every interface in this network namespace, from sysfs (none if
/// it cannot be read).
fn interfaces() -> Vec<(u32, u32)> {
    let read = |p: std::path::PathBuf| -> Option<u32> {
        std::fs::read_to_string(p).ok()?.trim().parse().ok()
    };
    let Ok(dir) = std::fs::read_dir("/sys/class/net") else { return Vec::new() };
    dir.filter_map(|e| {
        let d = e.ok()?.path();
        Some((read(d.join("ifindex"))?, read(d.join("mtu"))?))
    })
    .collect()
}

impl Host for CliHost {
    fn now_ns(&mut self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn mtu(&self, ifindex: u32) -> Option<u32> {
        self.mtus.iter().find(|(i, _)| *i == ifindex).map(|(_, m)| *m)
    }
    fn tai_ns(&mut self) -> u64 {
        spine_adapter::sys::tai_ns()
    }
    fn thread_cpu_ns(&mut self) -> Option<u64> {
        spine_adapter::sys::thread_cpu_ns()
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
