//! The dispatcher, stepped round by round in the test's thread (deterministic): every
//! verdict goes where XDP sends it, redirects hand buffers over uncopied and respect
//! domains, sources share each round fairly, RSS spreads flows over workers, a runaway
//! extension is detached while the other ports keep forwarding, and no buffer leaks.

mod common;

use std::sync::{Arc, Mutex};

use common::{frame, steer_object, Call, Log, Recorder};
use spine_adapter::{Adapter, AdapterBuilder, AdapterOptions, Assign, Device};
use spine_ports::{MemPort, PoolConfig};
use spine_runtime::{Budget, DomainSpec, FaultPolicy};

fn opts(workers: usize, burst: usize) -> AdapterOptions {
    AdapterOptions { workers, burst, pool: PoolConfig::new(1024), ..AdapterOptions::default() }
}

fn mem(name: &str, frames: &[Vec<u8>], limit: u64) -> Device {
    Device::Mem { port: MemPort::replay(name, frames).unwrap().with_limit(limit), sink: false }
}

fn sink(name: &str) -> Device {
    Device::Mem { port: MemPort::sink(name), sink: true }
}

fn finish(a: Adapter) -> spine_adapter::Totals {
    let pool = a.pool().clone();
    let report = a.finish().unwrap();
    assert!(report.close_errors.is_empty());
    assert_eq!(pool.shared_free(), pool.capacity(), "every buffer is back in the pool");
    report.totals
}

#[test]
fn every_verdict_goes_where_xdp_sends_it() {
    let mut b = AdapterBuilder::new(opts(1, 32)).unwrap();
    let frames = vec![
        frame(0, &[]),                    // XDP_ABORTED
        frame(1, &[]),                    // XDP_DROP
        frame(2, &[]),                    // XDP_PASS → host path
        frame(3, &[]),                    // XDP_TX → back out of wire
        frame(4, &[]),                    // redirect to `redirect_to` (other)
        frame(5, &20u32.to_le_bytes()),   // redirect to ifindex 20 (other)
        frame(5, &4242u32.to_le_bytes()), // redirect to an ifindex no port has
        frame(6, &[]),                    // 99: no XDP action
        vec![0u8; 16],                    // too short for steer: XDP_DROP
    ];
    let wire = b.add_port("wire", mem("wire", &frames, frames.len() as u64), None).unwrap();
    let host = b.add_port("host", sink("host"), None).unwrap();
    b.add_port("other", sink("other"), Some(20)).unwrap();
    b.set_host_path(wire, host).unwrap();
    let e = b.load_extension("steer", steer_object(), Some("steer"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    b.update_map(e, "redirect_to", &0u32.to_le_bytes(), &20u32.to_le_bytes()).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(100);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    assert_eq!((w.rx_packets, w.rx_bytes), (9, 8 * 60 + 16));
    let v = w.verdicts;
    assert_eq!((v.aborted, v.drop, v.pass, v.tx, v.redirect, v.invalid), (1, 2, 1, 1, 3, 1));
    assert_eq!(w.drops.aborted, 1);
    assert_eq!(w.drops.verdict, 2);
    assert_eq!(w.drops.redirect_no_port, 1);
    assert_eq!(w.drops.invalid, 1);
    assert_eq!(w.drops.total(), 5);
    assert_eq!(w.to_host, 1);
    assert_eq!(w.tx_packets, 1, "XDP_TX leaves by the receiving port");
    assert_eq!(t.port("other").unwrap().tx_packets, 2, "both redirects");
    assert_eq!(t.port("host").unwrap().tx_packets, 1, "XDP_PASS reaches the host path");
    assert_eq!(t.extension("steer").unwrap().runs, 9);
    assert_eq!(t.extension("steer").unwrap().faults, 0);
}

#[test]
fn pass_without_a_host_path_and_ports_without_extensions() {
    let mut b = AdapterBuilder::new(opts(1, 32)).unwrap();
    let a_frames = vec![frame(2, &[])];
    let wire = b.add_port("wire", mem("wire", &a_frames, 5), None).unwrap();
    let plain = b.add_port("plain", mem("plain", &a_frames, 7), None).unwrap();
    let host = b.add_port("host", sink("host"), None).unwrap();
    b.set_host_path(plain, host).unwrap();
    let e = b.load_extension("steer", steer_object(), Some("steer"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(100);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    assert_eq!((w.verdicts.pass, w.drops.no_host_path), (5, 5), "passed, nowhere to go");
    let p = t.port("plain").unwrap();
    assert_eq!((p.unhandled, p.to_host), (7, 7), "no extension: straight to the host path");
    assert_eq!(t.port("host").unwrap().tx_packets, 7);
}

#[test]
fn a_domain_may_only_redirect_to_its_own_ports() {
    let mut b = AdapterBuilder::new(opts(1, 32)).unwrap();
    let frames = vec![frame(4, &[])];
    let wire = b.add_port("wire", mem("wire", &frames, 4), None).unwrap();
    let ok = b.add_port("ok", sink("ok"), Some(31)).unwrap();
    let _secret = b.add_port("secret", sink("secret"), Some(32)).unwrap();
    let spec = DomainSpec {
        name: "tenant".into(),
        ports: Some(vec!["wire".into(), "ok".into()]),
        ..DomainSpec::default_domain()
    };
    b.add_domain(spec).unwrap();
    let e = b.load_extension("to_secret", steer_object(), Some("steer"), "tenant", "t").unwrap();
    b.attach(e, wire).unwrap();
    b.update_map(e, "redirect_to", &0u32.to_le_bytes(), &32u32.to_le_bytes()).unwrap();
    let e2 = b.load_extension("to_ok", steer_object(), Some("steer"), "tenant", "t").unwrap();
    let err = b.attach(e2, _secret).unwrap_err().to_string();
    assert!(err.contains("may not use this port"), "{err}");
    let mut a = b.build().unwrap();
    a.run_to_completion(100);
    let t = finish(a);
    assert_eq!(t.port("wire").unwrap().drops.redirect_refused, 4);
    assert_eq!(t.port("secret").unwrap().tx_packets, 0);
    let _ = ok;
}

#[test]
fn a_redirect_hands_the_received_buffer_over_without_a_copy() {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let mut b = AdapterBuilder::new(opts(1, 8)).unwrap();
    let src = Recorder::new("src", frame(4, &[]), Some(20), &log);
    let dst = Recorder::new("dst", Vec::new(), Some(0), &log);
    let s = b.add_port("src", Device::Other(Box::new(src)), None).unwrap();
    let d = b.add_port("dst", Device::Other(Box::new(dst)), Some(55)).unwrap();
    let e = b.load_extension("steer", steer_object(), Some("steer"), "default", "t").unwrap();
    b.attach(e, s).unwrap();
    b.update_map(e, "redirect_to", &0u32.to_le_bytes(), &55u32.to_le_bytes()).unwrap();
    let mut a = b.build().unwrap();
    for _ in 0..5 {
        a.step();
    }
    let t = finish(a);
    assert_eq!(t.port("dst").unwrap().tx_packets, 20);
    let calls = log.lock().unwrap().clone();
    let rx: Vec<u32> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Rx(_, v) => Some(v.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    let tx: Vec<u32> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Tx(p, v) if p == "dst" => Some(v.clone()),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(rx.len(), 20);
    assert_eq!(rx, tx, "the very buffers received are the ones sent, in order");
    let _ = d;
}

/// SPINE's adapter swung between long receive bursts and long transmit bursts. Here each
/// round takes at most one burst from each source and sends what it produced before the
/// next source is read.
#[test]
fn sources_take_turns_a_burst_at_a_time_and_transmit_in_between() {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let mut b = AdapterBuilder::new(opts(1, 8)).unwrap();
    // Two sources that never run dry and one with 5 packets; no extension, so each
    // passes its packets to its own host path.
    for (name, limit) in [("a", None), ("b", None), ("c", Some(5))] {
        let src = Recorder::new(name, frame(3, &[]), limit, &log);
        let p = b.add_port(name, Device::Other(Box::new(src)), None).unwrap();
        let host = format!("h{name}");
        let h = Recorder::new(&host, Vec::new(), Some(0), &log);
        let h = b.add_port(&host, Device::Other(Box::new(h)), None).unwrap();
        b.set_host_path(p, h).unwrap();
    }
    let mut a = b.build().unwrap();
    for _ in 0..10 {
        a.step();
    }
    let t = finish(a);
    assert_eq!(t.port("a").unwrap().rx_packets, 80, "8 per round, every round");
    assert_eq!(t.port("b").unwrap().rx_packets, 80, "not starved by a");
    assert_eq!(t.port("c").unwrap().rx_packets, 5);
    let calls: Vec<String> = log
        .lock()
        .unwrap()
        .iter()
        .map(|c| match c {
            Call::Rx(p, v) => format!("rx {p} {}", v.len()),
            Call::Tx(p, v) => format!("tx {p} {}", v.len()),
        })
        .collect();
    let round1 = ["rx a 8", "tx ha 8", "rx b 8", "tx hb 8", "rx c 5", "tx hc 5"];
    let later = ["rx a 8", "tx ha 8", "rx b 8", "tx hb 8"];
    assert_eq!(calls[..6], round1, "each source one burst, its transmissions right after");
    assert_eq!(calls.len(), 6 + 9 * 4);
    for r in calls[6..].chunks(4) {
        assert_eq!(r, later);
    }
}

#[test]
fn rss_spreads_flows_over_workers_and_counts_every_packet() {
    let mut b = AdapterBuilder::new(AdapterOptions { assign: Assign::Rss, ..opts(2, 16) }).unwrap();
    let frames = spine_adapter::mem_packets(
        "gen",
        &spine_adapter::config::MemPackets::Udp4 { flows: 64, size: 60 },
    )
    .unwrap();
    let wire = b.add_port("wire", mem("wire", &frames, 6400), None).unwrap();
    let swap = spine_progs::get("mac_swap").unwrap().object;
    let e = b.load_extension("mac_swap", swap, None, "default", "t").unwrap();
    b.attach(e, wire).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(100_000);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    assert_eq!((w.rx_packets, w.verdicts.tx, w.tx_packets), (6400, 6400, 6400));
    assert_eq!(w.drops.total(), 0);
    let (w0, w1) = (t.workers[0], t.workers[1]);
    assert!(w0.peer_out > 1000, "worker 0 hands flows to worker 1: {w0:?}");
    assert_eq!(w0.peer_out, w1.peer_in);
    assert_eq!(w1.peer_out, w1.peer_in, "worker 1 sends every XDP_TX back to the port's worker");
}

#[test]
fn a_runaway_extension_is_detached_and_the_other_ports_keep_forwarding() {
    let mut b = AdapterBuilder::new(opts(1, 32)).unwrap();
    let spec = DomainSpec {
        name: "untrusted".into(),
        budget: Budget { ns: 5_000, ..Budget::default() },
        faults: FaultPolicy { max_faults: 3, window_ns: 60_000_000_000 },
        ..DomainSpec::default_domain()
    };
    b.add_domain(spec).unwrap();
    let frames = vec![frame(3, &[])];
    let bad = b.add_port("bad", mem("bad", &frames, 200), None).unwrap();
    let bad_host = b.add_port("bad_host", sink("bad_host"), None).unwrap();
    let good = b.add_port("good", mem("good", &frames, 200), None).unwrap();
    b.set_host_path(bad, bad_host).unwrap();
    let spin = b.load_extension("spin", steer_object(), Some("spin"), "untrusted", "t").unwrap();
    b.attach(spin, bad).unwrap();
    let swap = spine_progs::get("mac_swap").unwrap().object;
    let s = b.load_extension("mac_swap", swap, None, "default", "t").unwrap();
    b.attach(s, good).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(1000);
    let ext = a.extension("spin").unwrap().clone();
    let t = finish(a);
    assert!(ext.health().is_detached());
    let e = t.extension("spin").unwrap();
    assert!(e.detached);
    assert_eq!((e.runs, e.faults), (3, 3), "three faults, then never run again");
    let p = t.port("bad").unwrap();
    assert_eq!(p.drops.fault, 3, "the faulting invocations' packets are dropped");
    assert_eq!(
        (p.unhandled, p.to_host),
        (197, 197),
        "then packets pass as if nothing were attached"
    );
    assert_eq!(t.port("bad_host").unwrap().tx_packets, 197);
    let g = t.port("good").unwrap();
    assert_eq!((g.rx_packets, g.tx_packets), (200, 200), "the other port forwarded everything");
}

#[test]
fn threads_run_until_the_inputs_are_done_and_stop_cleanly_with_a_trace() {
    let mut o = AdapterOptions { pool: PoolConfig::new(8192), ..opts(2, 32) };
    o.trace_events = Some(4096);
    let mut b = AdapterBuilder::new(o).unwrap();
    let frames = vec![frame(2, &[]), frame(3, &[])];
    let wire = b.add_port("wire", mem("wire", &frames, 50_000), None).unwrap();
    let host = b.add_port("host", sink("host"), None).unwrap();
    b.set_host_path(wire, host).unwrap();
    let e = b.load_extension("steer", steer_object(), Some("steer"), "default", "t").unwrap();
    b.attach(e, wire).unwrap();
    let a = b.build().unwrap();
    let pool = a.pool().clone();
    let running = a.start().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !running.exhausted() {
        assert!(std::time::Instant::now() < deadline, "never finished");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let report = running.stop().unwrap();
    let t = &report.totals;
    let w = t.port("wire").unwrap();
    // The mem port counts a packet it had no buffer for as its own receive drop.
    assert_eq!(w.rx_packets + w.device.rx_drops, 50_000);
    assert!(w.rx_packets > 0);
    assert_eq!(w.verdicts.pass + w.verdicts.tx, w.rx_packets, "one verdict per packet");
    assert_eq!(w.to_host, w.verdicts.pass);
    assert_eq!(w.tx_packets, w.verdicts.tx);
    assert_eq!(w.drops.total(), 0);
    assert_eq!(t.port("host").unwrap().tx_packets, w.to_host, "handed between workers");
    let trace = report.trace.as_ref().expect("tracing was on");
    let events = trace["traceEvents"].as_array().unwrap();
    for cat in ["rx", "extension", "tx", "pass"] {
        assert!(events.iter().any(|e| e["ph"] == "X" && e["cat"] == cat), "no {cat} event");
    }
    assert!(events.iter().all(|e| e["pid"] == 1));
    drop(report);
    assert_eq!(pool.shared_free(), pool.capacity(), "no buffer leaked");
}

#[test]
fn the_burst_path_counts_and_forwards_exactly_as_the_per_packet_path() {
    // With the trace on each packet takes the per-packet path; off, the burst path. Mixed
    // verdicts in every burst (drops freed in bulk next to transmits, redirects, passes
    // and invalid verdicts) must end in the same counters on every port and extension.
    let frames = vec![
        frame(1, &[]),
        frame(3, &[]),
        frame(2, &[]),
        frame(0, &[]),
        frame(4, &[]),
        frame(1, &[]),
        frame(5, &20u32.to_le_bytes()),
        frame(5, &4242u32.to_le_bytes()),
        frame(6, &[]),
        vec![0u8; 16],
        frame(1, &[]),
    ];
    let run = |trace: bool| {
        let mut o = opts(1, 8);
        o.trace_events = trace.then_some(1 << 16);
        let mut b = AdapterBuilder::new(o).unwrap();
        let wire = b.add_port("wire", mem("wire", &frames, 1_000), None).unwrap();
        let host = b.add_port("host", sink("host"), None).unwrap();
        b.add_port("other", sink("other"), Some(20)).unwrap();
        b.set_host_path(wire, host).unwrap();
        let e = b.load_extension("steer", steer_object(), Some("steer"), "default", "t").unwrap();
        b.attach(e, wire).unwrap();
        b.update_map(e, "redirect_to", &0u32.to_le_bytes(), &20u32.to_le_bytes()).unwrap();
        let mut a = b.build().unwrap();
        a.run_to_completion(1_000);
        finish(a)
    };
    let (per_packet, burst) = (run(true), run(false));
    let w = burst.port("wire").unwrap();
    assert_eq!(w.rx_packets, 1_000);
    assert!(w.drops.verdict > 0 && w.tx_packets > 0 && w.to_host > 0, "{w:?}");
    assert_eq!(burst.ports, per_packet.ports);
    assert_eq!(burst.extensions, per_packet.extensions);
}

/// A port that receives nothing and records the sequence byte (offset 19) of every
/// frame it is sent, in the order it is sent them.
struct SeqTap {
    name: String,
    seen: Arc<Mutex<Vec<u8>>>,
    stats: spine_ports::PortStats,
}

impl spine_ports::Port for SeqTap {
    fn name(&self) -> &str {
        &self.name
    }

    fn rx_burst(
        &mut self,
        _: &mut spine_pool::PoolCache,
        _: &mut spine_pool::Burst,
    ) -> Result<usize, spine_ports::PortError> {
        Ok(0)
    }

    fn tx_burst(
        &mut self,
        cache: &mut spine_pool::PoolCache,
        pkts: &mut spine_pool::Burst,
    ) -> Result<usize, spine_ports::PortError> {
        let pool = cache.pool().clone();
        let n = pkts.len();
        let mut seen = self.seen.lock().unwrap();
        for b in pkts.drain_front(n) {
            seen.push(pool.data(&b).unwrap()[19]);
            cache.free(b).unwrap();
        }
        self.stats.tx_packets += n as u64;
        Ok(n)
    }

    fn stats(&self) -> spine_ports::PortStats {
        self.stats
    }
}

#[test]
fn the_burst_path_keeps_each_transmit_queue_in_arrival_order() {
    // XDP_PASS (to the host path, acted on after the burst) and redirects to that same
    // port (queued at once while nothing waits) in one burst: the host path must be sent
    // them in arrival order, exactly as by the per-packet path. Drops, XDP_TX and
    // invalid verdicts in between.
    let codes = [5, 5, 2, 5, 1, 3, 5, 2, 2, 5, 6, 5, 3, 3, 2, 5, 1, 5, 2, 5, 5, 5, 2, 1];
    let frames: Vec<Vec<u8>> = codes
        .iter()
        .enumerate()
        .map(|(seq, &code)| {
            let mut extra = 20u32.to_le_bytes().to_vec();
            extra.push(seq as u8);
            frame(code, &extra)
        })
        .collect();
    let rounds = 5;
    let run = |trace: bool| {
        let mut o = opts(1, 8);
        o.trace_events = trace.then_some(1 << 16);
        let mut b = AdapterBuilder::new(o).unwrap();
        let limit = (frames.len() * rounds) as u64;
        let wire = b.add_port("wire", mem("wire", &frames, limit), None).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tap = SeqTap { name: "tap".into(), seen: seen.clone(), stats: Default::default() };
        let host = b.add_port("tap", Device::Other(Box::new(tap)), Some(20)).unwrap();
        b.set_host_path(wire, host).unwrap();
        let e = b.load_extension("steer", steer_object(), Some("steer"), "default", "t").unwrap();
        b.attach(e, wire).unwrap();
        let mut a = b.build().unwrap();
        a.run_to_completion(1_000);
        let totals = finish(a);
        let seen = seen.lock().unwrap().clone();
        (seen, totals)
    };
    let (per_packet, per_packet_totals) = run(true);
    let (burst, burst_totals) = run(false);
    let arrival: Vec<u8> = (0..rounds)
        .flat_map(|_| codes.iter().enumerate().filter(|(_, &c)| c == 2 || c == 5))
        .map(|(seq, _)| seq as u8)
        .collect();
    assert_eq!(per_packet, arrival);
    assert_eq!(burst, arrival, "the burst path reordered the host path's queue");
    let w = burst_totals.port("wire").unwrap();
    assert!(w.verdicts.redirect > 0 && w.verdicts.pass > 0 && w.verdicts.tx > 0, "{w:?}");
    assert_eq!(burst_totals.ports, per_packet_totals.ports);
    assert_eq!(burst_totals.extensions, per_packet_totals.extensions);
}
