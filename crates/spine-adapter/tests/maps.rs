//! The adapter's map-driven paths end to end on mem ports: `XDP_REDIRECT` through a
//! devmap and a devmap_hash to another port (entries written from the control side and
//! from `[[map]]` in the configuration), through a cpumap to another worker, and a ring
//! buffer that the control side drains while traffic flows (`[[ringbuf]]`). Counters
//! must equal what was sent.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{frame, TempDir};
use spine_adapter::{
    Adapter, AdapterBuilder, AdapterError, AdapterOptions, Assign, Config, Device, Totals,
};
use spine_ports::{MemPort, PoolConfig};

/// `tests/fixtures/maps.c`, compiled once per test binary.
fn maps_object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    OBJ.get_or_init(|| {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/maps.c");
        let dir = TempDir::new("maps-fixture");
        spine_progs::compile_c(&src, &dir.join("maps.o"), &[]).expect("clang builds the fixture")
    })
}

fn opts(workers: usize) -> AdapterOptions {
    AdapterOptions { workers, pool: PoolConfig::new(1024), ..AdapterOptions::default() }
}

fn mem(name: &str, frames: &[Vec<u8>], limit: Option<u64>) -> Device {
    let port = MemPort::replay(name, frames).unwrap();
    let port = match limit {
        Some(l) => port.with_limit(l),
        None => port,
    };
    Device::Mem { port, sink: false }
}

fn sink(name: &str) -> Device {
    Device::Mem { port: MemPort::sink(name), sink: true }
}

fn finish(a: Adapter) -> Totals {
    let pool = a.pool().clone();
    let report = a.finish().unwrap();
    assert!(report.close_errors.is_empty());
    assert_eq!(pool.shared_free(), pool.capacity(), "every buffer is back in the pool");
    report.totals
}

/// Frames whose first payload byte (the maps' key) cycles through `codes`, `n` in all.
fn frames(codes: &[u8], n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| frame(codes[i % codes.len()], &[i as u8])).collect()
}

fn count(frames: &[Vec<u8>], code: u8) -> u64 {
    frames.iter().filter(|f| f[14] == code).count() as u64
}

#[test]
fn redirects_through_a_devmap_reach_the_port_of_the_entrys_ifindex() {
    let mut b = AdapterBuilder::new(opts(1)).unwrap();
    // Keys 0 and 1 have entries; 2 does not (XDP_DROP, the flags' verdict).
    let sent = frames(&[0, 1, 0, 2, 1, 0], 300);
    let wire = b.add_port("wire", mem("wire", &sent, Some(sent.len() as u64)), None).unwrap();
    b.add_port("a", sink("a"), Some(20)).unwrap();
    b.add_port("b", sink("b"), Some(30)).unwrap();
    let e = b.load_extension("dev", maps_object(), Some("to_devmap"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    b.update_map(e, "tx_ports", &0u32.to_le_bytes(), &20u32.to_le_bytes()).unwrap();
    b.update_map(e, "tx_ports", &1u32.to_le_bytes(), &30u32.to_le_bytes()).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(10_000);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    assert_eq!(w.rx_packets, 300);
    assert_eq!(w.verdicts.redirect, count(&sent, 0) + count(&sent, 1));
    assert_eq!(w.verdicts.drop, count(&sent, 2), "a missing key gives the flags' verdict");
    assert_eq!(w.drops.total(), count(&sent, 2));
    assert_eq!(t.port("a").unwrap().tx_packets, count(&sent, 0));
    assert_eq!(t.port("b").unwrap().tx_packets, count(&sent, 1));
    assert_eq!(t.port("a").unwrap().tx_bytes, 60 * count(&sent, 0));
    assert_eq!(t.extension("dev").unwrap().runs, 300);
}

#[test]
fn broadcast_redirects_reach_every_port_of_the_devmap_except_ingress_when_asked() {
    let mut b = AdapterBuilder::new(opts(1)).unwrap();
    // Code 0: broadcast; code 1: broadcast excluding the ingress port.
    let sent = frames(&[0, 1, 0, 0, 1], 300);
    let wire = b.add_port("wire", mem("wire", &sent, Some(sent.len() as u64)), Some(10)).unwrap();
    b.add_port("a", sink("a"), Some(20)).unwrap();
    b.add_port("b", sink("b"), Some(30)).unwrap();
    b.add_port("c", sink("c"), Some(40)).unwrap();
    let e = b.load_extension("bc", maps_object(), Some("broadcast"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    // Entries for a, b and the ingress port itself; c is in no entry; slot 3 is empty.
    for (k, ifindex) in [(0u32, 20u32), (1, 30), (2, 10)] {
        b.update_map(e, "tx_ports", &k.to_le_bytes(), &ifindex.to_le_bytes()).unwrap();
    }
    let mut a = b.build().unwrap();
    a.run_to_completion(10_000);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    let (all, excluding) = (count(&sent, 0), count(&sent, 1));
    assert_eq!((w.rx_packets, w.verdicts.redirect, w.drops.total()), (300, 300, 0));
    assert_eq!(t.port("a").unwrap().tx_packets, all + excluding);
    assert_eq!(t.port("b").unwrap().tx_packets, all + excluding);
    assert_eq!(t.port("a").unwrap().tx_bytes, 60 * (all + excluding));
    assert_eq!(w.tx_packets, all, "the ingress port only without BPF_F_EXCLUDE_INGRESS");
    assert_eq!(t.port("c").unwrap().tx_packets, 0);
}

#[test]
fn redirects_into_an_xskmap_entry_reach_the_port_bound_there() {
    for bound in [true, false] {
        let mut b = AdapterBuilder::new(opts(1)).unwrap();
        let sent = frames(&[0, 1], 100);
        let wire = b.add_port("wire", mem("wire", &sent, Some(sent.len() as u64)), None).unwrap();
        b.add_port("sock", sink("sock"), Some(20)).unwrap();
        b.add_port("host", sink("host"), None).unwrap();
        let e = b.load_extension("xsk", maps_object(), Some("to_xsk"), "default", "test").unwrap();
        b.attach(e, wire).unwrap();
        if bound {
            // Queue 0's entry: the port standing for its socket.
            b.update_map(e, "xsks", &0u32.to_le_bytes(), &20u32.to_le_bytes()).unwrap();
        }
        let mut a = b.build().unwrap();
        a.run_to_completion(10_000);
        let t = finish(a);
        let w = t.port("wire").unwrap();
        if bound {
            assert_eq!((w.verdicts.redirect, w.drops.total()), (100, 0));
            assert_eq!(t.port("sock").unwrap().tx_packets, 100);
        } else {
            // No socket on the queue: the flags' XDP_PASS.
            assert_eq!((w.verdicts.redirect, w.verdicts.pass), (0, 100));
            assert_eq!(t.port("sock").unwrap().tx_packets, 0);
        }
    }
}

#[test]
fn a_broadcast_through_an_empty_devmap_is_a_drop_without_target() {
    let mut b = AdapterBuilder::new(opts(1)).unwrap();
    let sent = frames(&[0, 1], 100);
    let wire = b.add_port("wire", mem("wire", &sent, Some(sent.len() as u64)), Some(10)).unwrap();
    b.add_port("a", sink("a"), Some(20)).unwrap();
    let e = b.load_extension("bc", maps_object(), Some("broadcast"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(10_000);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    assert_eq!((w.verdicts.redirect, w.drops.redirect_no_target), (100, 100));
    assert_eq!(t.port("a").unwrap().tx_packets, 0);
}

#[test]
fn redirects_through_a_devmap_hash_filled_from_the_configuration() {
    let dir = TempDir::new("devmap-hash");
    std::fs::write(dir.join("maps.o"), maps_object()).unwrap();
    // udp4 frames: the first payload byte is the IPv4 version and length, 0x45.
    let text = r#"
        [adapter]
        pin = false

        [[port]]
        name = "wire"
        kind = "mem"
        udp4 = { flows = 4 }
        limit = 500

        [[port]]
        name = "out"
        kind = "mem"
        ifindex = 30

        [[port]]
        name = "other"
        kind = "mem"
        ifindex = 31

        [[extension]]
        name = "hash"
        file = "maps.o"
        section = "to_devmap_hash"

        [[attach]]
        extension = "hash"
        port = "wire"

        [[map]]
        extension = "hash"
        name = "tx_by_id"
        entries = [{ key = 0x45, value = 30 }, { key = 7, value = 31 }]
    "#;
    let cfg = Config::parse(text, dir.path()).unwrap();
    let mut a = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap();
    a.run_to_completion(10_000);
    let t = finish(a);
    let w = t.port("wire").unwrap();
    assert_eq!((w.rx_packets, w.verdicts.redirect, w.drops.total()), (500, 500, 0));
    assert_eq!(t.port("out").unwrap().tx_packets, 500);
    assert_eq!(t.port("other").unwrap().tx_packets, 0);

    // A value for an ifindex of 0 is refused as the kernel refuses it, naming the entry.
    let bad = text.replace("value = 31", "value = 0");
    let cfg = Config::parse(&bad, dir.path()).unwrap();
    let err = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap_err();
    assert!(
        matches!(&err, AdapterError::Map { at, map, .. } if at == "map[0].entries[1]" && map == "tx_by_id"),
        "{err}"
    );
}

#[test]
fn redirects_through_a_cpumap_hand_packets_to_another_worker() {
    let opts = AdapterOptions { assign: Assign::Partition, ..opts(2) };
    let mut b = AdapterBuilder::new(opts).unwrap();
    // 1: to worker 1; 0: to worker 0, the receiving one; 3: no entry, XDP_PASS here.
    let sent = frames(&[1, 0, 1, 3, 1], 250);
    let wire = b.add_port("wire", mem("wire", &sent, Some(sent.len() as u64)), None).unwrap();
    let host = b.add_port("host", sink("host"), None).unwrap();
    b.set_host_path(wire, host).unwrap();
    b.set_worker(wire, 0).unwrap();
    b.set_worker(host, 0).unwrap();
    let e = b.load_extension("cpu", maps_object(), Some("to_cpu"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    for cpu in [0u32, 1] {
        b.update_map(e, "cpus", &cpu.to_le_bytes(), &64u32.to_le_bytes()).unwrap();
    }
    // The map's CPUs are the adapter's workers: there is no third.
    let err = b.update_map(e, "cpus", &2u32.to_le_bytes(), &64u32.to_le_bytes()).unwrap_err();
    assert!(matches!(&err, AdapterError::Map { source, .. } if source.errno() == -19), "{err}");
    let mut a = b.build().unwrap();
    a.run_to_completion(10_000);
    let t = finish(a);
    let (to1, to0, none) = (count(&sent, 1), count(&sent, 0), count(&sent, 3));
    let w = t.port("wire").unwrap();
    assert_eq!(w.verdicts.redirect, to1 + to0);
    assert_eq!(w.verdicts.pass, none);
    assert_eq!(w.to_host, 250, "every packet was delivered as XDP_PASS, wherever");
    assert_eq!(t.port("host").unwrap().tx_packets, 250);
    // Worker 1 received exactly the packets redirected to it and, the host path living
    // on worker 0, handed each back for transmission.
    assert_eq!(t.workers[1].peer_in, to1);
    assert_eq!(t.workers[1].peer_out, to1);
    assert_eq!(t.workers[0].peer_out, to1);
    assert_eq!(w.drops.total(), 0);
}

/// `struct event` of maps.c: length, ingress ifindex, the first 16 bytes.
fn check_record(r: &[u8], sent: &[Vec<u8>], ifindex: u32) {
    assert_eq!(r.len(), 24);
    assert_eq!(u32::from_le_bytes(r[..4].try_into().unwrap()), 60);
    assert_eq!(u32::from_le_bytes(r[4..8].try_into().unwrap()), ifindex);
    assert!(sent.iter().any(|f| f[..16] == r[8..]), "a record of a frame that was sent");
}

#[test]
fn the_control_side_drains_a_ring_buffer_while_traffic_flows() {
    let mut b = AdapterBuilder::new(opts(1)).unwrap();
    let sent = frames(&[5, 6, 7, 8], 16);
    // Replays forever: the ring (511 records) fills many times over unless drained.
    let wire = b.add_port("wire", mem("wire", &sent, None), None).unwrap();
    let e = b.load_extension("log", maps_object(), Some("log_all"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    let a = b.build().unwrap();
    assert!(matches!(a.ring_buffer("log", "lost"), Err(AdapterError::Wiring { .. })));
    assert!(matches!(a.ring_buffer("log", "nope"), Err(AdapterError::Wiring { .. })));
    assert!(matches!(a.ring_buffer("nope", "events"), Err(AdapterError::Wiring { .. })));
    let running = a.start().unwrap();
    let ring = running.ring_buffer("log", "events").unwrap();
    let lost = running.extension("log").unwrap().map("lost").unwrap().clone();
    let rb = ring.ringbuf().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut drained = 0u64;
    while drained < 20 * 511 {
        drained += rb.consume(|r| check_record(r, &sent, 10_000)) as u64;
        assert!(Instant::now() < deadline, "only {drained} records in two minutes");
        std::thread::sleep(Duration::from_micros(200));
    }
    let report = running.stop().unwrap();
    drained += rb.consume(|r| check_record(r, &sent, 10_000)) as u64;
    let mut v = [0u8; 8];
    lost.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
    let rx = report.totals.port("wire").unwrap().rx_packets;
    assert_eq!(drained + u64::from_le_bytes(v), rx, "every packet logged or counted as lost");
    assert_eq!(report.totals.extension("log").unwrap().runs, rx);
    assert_eq!(rb.avail_data(), 0);
}

#[test]
fn ring_buffers_in_the_configuration_are_checked_by_name_and_type() {
    let dir = TempDir::new("ringbuf-config");
    std::fs::write(dir.join("maps.o"), maps_object()).unwrap();
    let base = r#"
        [adapter]
        pin = false

        [[port]]
        name = "wire"
        kind = "mem"
        udp4 = {}
        limit = 10

        [[extension]]
        name = "log"
        file = "maps.o"
        section = "log_all"

        [[attach]]
        extension = "log"
        port = "wire"
    "#;
    let with = |extra: &str| format!("{base}\n{extra}");
    let good = with("[[ringbuf]]\nextension = \"log\"\nname = \"events\"\noutput = \"ev.jsonl\"");
    let cfg = Config::parse(&good, dir.path()).unwrap();
    assert_eq!(cfg.ringbufs.len(), 1);
    assert_eq!(cfg.ringbufs[0].output.as_deref(), Some(dir.join("ev.jsonl").as_path()));
    let a = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap();
    assert!(a.ring_buffer("log", "events").is_ok());

    let parse_err = |extra: &str| Config::parse(&with(extra), dir.path()).unwrap_err().to_string();
    let e = parse_err("[[ringbuf]]\nextension = \"nope\"\nname = \"events\"");
    assert_eq!(e, "ringbuf[0].extension: no extension named 'nope'");
    let e = parse_err("[[ringbuf]]\nextension = \"log\"");
    assert_eq!(e, "ringbuf[0].name: missing");
    let e = parse_err("[[ringbuf]]\nextension = \"log\"\nname = \"events\"\nformat = \"csv\"");
    assert!(e.starts_with("ringbuf[0].format: unknown key"), "{e}");
    let twice = "[[ringbuf]]\nextension = \"log\"\nname = \"events\"\noutput = \"a\"\n\
                 [[ringbuf]]\nextension = \"log\"\nname = \"events\"\noutput = \"b\"";
    assert!(parse_err(twice).starts_with("ringbuf[1].name: ring buffer 'events' is defined twice"));

    let not_ring = with("[[ringbuf]]\nextension = \"log\"\nname = \"lost\"");
    let cfg = Config::parse(&not_ring, dir.path()).unwrap();
    let err = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap_err();
    assert_eq!(err.to_string(), "ringbuf[0].name: map 'lost' is not a ring buffer (type array)");
    let missing = with("[[ringbuf]]\nextension = \"log\"\nname = \"gone\"");
    let cfg = Config::parse(&missing, dir.path()).unwrap();
    let err = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap_err();
    assert_eq!(err.to_string(), "ringbuf[0].name: no map 'gone'");
}
