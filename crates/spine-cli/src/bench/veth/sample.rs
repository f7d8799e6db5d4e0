//! One measurement window: two samples of the packet counters and the CPU time of the
//! generator, the device under test and the sink, and the rates that follow from them.
//! Pure arithmetic; the sampling itself is in `proc.rs` and `topo.rs`.

use super::parse::CpuTicks;

/// `/proc/stat` counts in USER_HZ, which Linux fixes at 100 on every architecture the
/// bench runs on.
pub const USER_HZ: f64 = 100.0;

/// The state of the world at one instant of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Seconds on a monotonic clock.
    pub at_s: f64,
    /// Frames the generator put on the wire: g0's `tx_packets + tx_dropped`.
    pub offered: u64,
    /// Frames that reached the sink: o0's `rx_packets`.
    pub arrived: u64,
    /// Run time (ns) of each task of the device under test, `None` once it is gone. The
    /// same tasks, in the same order, in both samples of a window.
    pub dut_ns: Vec<Option<u64>>,
    pub gen_ns: Vec<Option<u64>>,
    pub sink_ns: Vec<Option<u64>>,
    pub machine: CpuTicks,
}

/// What one competitor achieved in one window.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Measured {
    pub seconds: f64,
    pub offered_pps: f64,
    pub forwarded_pps: f64,
    /// Share of the offered frames that did not reach the sink (0 when none offered).
    pub loss_pct: f64,
    /// CPU seconds the device under test used in the window (its processes' threads and
    /// the NAPI threads of its interfaces).
    pub dut_cpu_s: f64,
    /// `dut_cpu_s` as a percentage of one CPU.
    pub dut_cpu_pct: f64,
    /// CPU seconds per million forwarded packets, which is also CPU µs per packet;
    /// `None` when nothing was forwarded.
    pub cpu_s_per_mpkt: Option<f64>,
    pub gen_cpu_pct: f64,
    pub sink_cpu_pct: f64,
    /// Busy machine time not accounted to generator, device or sink (other programs,
    /// interrupts elsewhere), as a percentage of one CPU: how disturbed the window was.
    pub other_cpu_pct: f64,
}

/// Sum of the tasks' increases from `a` to `b`, over tasks present in both (a task that
/// ended in between contributes nothing; a counter that went backwards, nothing).
pub fn task_delta_ns(a: &[Option<u64>], b: &[Option<u64>]) -> u64 {
    a.iter()
        .zip(b)
        .filter_map(|(x, y)| Some(y.as_ref()?.saturating_sub(*x.as_ref()?)))
        .fold(0, u64::saturating_add)
}

impl Measured {
    /// The rates of the window from `a` to `b`; `None` unless `b` is later than `a`.
    pub fn between(a: &Sample, b: &Sample) -> Option<Measured> {
        let seconds = b.at_s - a.at_s;
        if seconds.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return None;
        }
        let offered = b.offered.saturating_sub(a.offered) as f64;
        let forwarded = b.arrived.saturating_sub(a.arrived) as f64;
        let secs = |ns: u64| ns as f64 / 1e9;
        let dut = secs(task_delta_ns(&a.dut_ns, &b.dut_ns));
        let gen = secs(task_delta_ns(&a.gen_ns, &b.gen_ns));
        let sink = secs(task_delta_ns(&a.sink_ns, &b.sink_ns));
        let busy = b.machine.busy.saturating_sub(a.machine.busy) as f64 / USER_HZ;
        let pct = |s: f64| s / seconds * 100.0;
        Some(Measured {
            seconds,
            offered_pps: offered / seconds,
            forwarded_pps: forwarded / seconds,
            loss_pct: if offered > 0.0 {
                ((offered - forwarded) / offered * 100.0).clamp(0.0, 100.0)
            } else {
                0.0
            },
            dut_cpu_s: dut,
            dut_cpu_pct: pct(dut),
            cpu_s_per_mpkt: (forwarded > 0.0).then(|| dut / (forwarded / 1e6)),
            gen_cpu_pct: pct(gen),
            sink_cpu_pct: pct(sink),
            other_cpu_pct: pct((busy - dut - gen - sink).max(0.0)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at_s: f64, offered: u64, arrived: u64, dut: u64, busy: u64) -> Sample {
        Sample {
            at_s,
            offered,
            arrived,
            dut_ns: vec![Some(dut), Some(dut / 2)],
            gen_ns: vec![Some(0)],
            sink_ns: vec![Some(0)],
            machine: CpuTicks { busy, total: busy * 2 },
        }
    }

    #[test]
    fn deltas_skip_tasks_that_ended_or_appeared() {
        let a = [Some(10), Some(5), None, Some(7)];
        let b = [Some(30), None, Some(100), Some(6)];
        assert_eq!(task_delta_ns(&a, &b), 20, "only the first task was there throughout");
        assert_eq!(task_delta_ns(&[], &[Some(1)]), 0);
    }

    #[test]
    fn rates_and_cpu_per_million_packets() {
        let a = sample(10.0, 1_000, 500, 1_000_000_000, 1_000);
        let mut b = sample(12.0, 1_001_000, 800_500, 2_000_000_000, 1_400);
        b.gen_ns = vec![Some(1_500_000_000)];
        b.sink_ns = vec![Some(500_000_000)];
        let m = Measured::between(&a, &b).unwrap();
        assert_eq!(m.seconds, 2.0);
        assert_eq!(m.offered_pps, 500_000.0);
        assert_eq!(m.forwarded_pps, 400_000.0);
        assert!((m.loss_pct - 20.0).abs() < 1e-9);
        // Two DUT tasks: +1.0 s and +0.5 s.
        assert!((m.dut_cpu_s - 1.5).abs() < 1e-9);
        assert!((m.dut_cpu_pct - 75.0).abs() < 1e-9);
        // 1.5 CPU-s for 0.8 M packets.
        assert!((m.cpu_s_per_mpkt.unwrap() - 1.875).abs() < 1e-9);
        assert!((m.gen_cpu_pct - 75.0).abs() < 1e-9);
        assert!((m.sink_cpu_pct - 25.0).abs() < 1e-9);
        // 400 ticks = 4 s busy; 1.5 + 1.5 + 0.5 accounted; 0.5 s over 2 s.
        assert!((m.other_cpu_pct - 25.0).abs() < 1e-9);
    }

    #[test]
    fn nothing_forwarded_and_empty_windows() {
        let a = sample(1.0, 0, 0, 0, 0);
        let b = sample(2.0, 0, 0, 0, 0);
        let m = Measured::between(&a, &b).unwrap();
        assert_eq!((m.forwarded_pps, m.loss_pct, m.cpu_s_per_mpkt), (0.0, 0.0, None));
        assert_eq!(m.other_cpu_pct, 0.0, "never negative");
        assert!(Measured::between(&b, &a).is_none());
        assert!(Measured::between(&a, &a).is_none());
        let nan = Sample { at_s: f64::NAN, ..a.clone() };
        assert!(Measured::between(&a, &nan).is_none());
    }

    #[test]
    fn more_arrivals_than_offers_at_the_window_edge_is_no_negative_loss() {
        let a = sample(0.0, 100, 0, 0, 0);
        let b = sample(1.0, 200, 105, 0, 0);
        assert_eq!(Measured::between(&a, &b).unwrap().loss_pct, 0.0);
    }
}
