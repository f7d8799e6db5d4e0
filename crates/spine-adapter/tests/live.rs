//! Live management of a running adapter on mem ports: extensions loaded, attached,
//! replaced, detached and unloaded while traffic flows, maps read and written with the
//! kernel's errnos. Every packet must be counted under exactly one program version.

mod common;

use std::sync::OnceLock;

use common::{frame, TempDir};
use spine_adapter::{AdapterBuilder, AdapterOptions, Device, Live, LiveError};
use spine_ports::{MemPort, PoolConfig};

fn live_object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    OBJ.get_or_init(|| {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/live.c");
        let dir = TempDir::new("live-fixture");
        spine_progs::compile_c(&src, &dir.join("live.o"), &[]).expect("clang builds the fixture")
    })
}

fn endless(name: &str) -> Device {
    let frames: Vec<Vec<u8>> = (0..64).map(|i| frame(i as u8, &[i as u8])).collect();
    Device::Mem { port: MemPort::replay(name, &frames).unwrap(), sink: false }
}

/// The sum of a per-CPU counter over every CPU, as a lookup returns it.
fn per_cpu_sum(live: &Live, ext: &str, map: &str) -> u64 {
    let v = live.map_lookup(ext, map, &0u32.to_le_bytes()).unwrap();
    v.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).sum()
}

/// Replaces the program of a port 1,000 times between two versions while two workers
/// run traffic on it (software RSS hands packets between them): each packet counts into
/// exactly one version's map, and the two counts add up to the packets received.
#[test]
fn replacement_under_load_counts_every_packet_under_exactly_one_version() {
    let opts = AdapterOptions { workers: 2, pool: PoolConfig::new(2048), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let wire = b.add_port("wire", endless("wire"), None).unwrap();
    b.add_port("wire2", endless("wire2"), None).unwrap();
    // Version a runs from the first packet (loaded at start-up); b is loaded live.
    let a = b.load_extension("a", live_object(), Some("version_a"), "default", "test").unwrap();
    b.attach(a, wire).unwrap();
    let running = b.build().unwrap().start().unwrap();
    let live = running.live();
    live.load("b", live_object(), Some("version_b"), "default").unwrap();
    // Let traffic flow under the first version before replacing.
    while per_cpu_sum(&live, "a", "hits") == 0 {
        std::thread::yield_now();
    }
    for i in 0..1_000 {
        let (new, old) = if i % 2 == 0 { ("b", "a") } else { ("a", "b") };
        assert_eq!(live.replace("wire", new).unwrap(), old);
        std::thread::yield_now();
    }
    assert_eq!(live.ports()[0].extension.as_deref(), Some("a"));
    assert_eq!(live.ports()[0].generation, 1_000);
    // b runs at least once whatever the machine's speed.
    assert_eq!(live.replace("wire", "b").unwrap(), "a");
    while per_cpu_sum(&live, "b", "hits") == 0 {
        std::thread::yield_now();
    }
    let report = running.stop().unwrap();
    let t = &report.totals;
    let wire = t.port("wire").unwrap();
    let (ha, hb) = (per_cpu_sum(&live, "a", "hits"), per_cpu_sum(&live, "b", "hits"));
    assert!(ha > 0 && hb > 0, "both versions ran: a {ha}, b {hb}");
    assert_eq!(ha + hb, wire.rx_packets, "every packet under exactly one version");
    assert_eq!(wire.unhandled, 0, "no packet ran under neither");
    assert_eq!(wire.drops.verdict, wire.rx_packets, "none lost: each was dropped by a verdict");
    let (ra, rb) = (t.extension("a").unwrap().runs, t.extension("b").unwrap().runs);
    assert_eq!(ra + rb, wire.rx_packets, "the extensions' counters agree");
    assert_eq!((ra, rb), (ha, hb));
    // The other port never had a program: all its packets went unhandled.
    let w2 = t.port("wire2").unwrap();
    assert_eq!(w2.unhandled, w2.rx_packets);
}

#[test]
fn attach_detach_unload_and_maps_follow_the_rules() {
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(1024), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    b.add_port("wire", endless("wire"), None).unwrap();
    let running = b.build().unwrap().start().unwrap();
    let live = running.live();

    // A program the verifier refuses: the error names it and carries the log.
    let e = live.load("bad", live_object(), Some("unchecked"), "default").unwrap_err();
    assert!(matches!(e, LiveError::Load { .. }), "{e}");
    assert!(e.to_string().contains("'bad'"), "{e}");
    let log = e.verifier_log().expect("a verifier log");
    assert!(log.contains("invalid access to packet") || log.contains("pkt"), "{log}");
    let e = live.load("junk", b"not an ELF object", None, "default").unwrap_err();
    assert_eq!(e.kind(), "bad_object", "{e}");
    assert!(matches!(
        live.load("x", live_object(), None, "nodomain"),
        Err(LiveError::NoDomain { .. })
    ));

    let v = live.load("b", live_object(), Some("version_b"), "default").unwrap();
    assert_eq!((v.program.as_str(), v.ports.len()), ("version_b", 0));
    assert!(v.maps.contains(&"table".to_string()) && v.maps.contains(&"hits".to_string()));
    assert!(matches!(
        live.load("b", live_object(), None, "default"),
        Err(LiveError::Exists { .. })
    ));
    assert!(matches!(live.attach("b", "nope"), Err(LiveError::NoPort { .. })));
    assert!(matches!(live.replace("wire", "b"), Err(LiveError::NotAttached { .. })));
    live.attach("b", "wire").unwrap();
    assert!(matches!(live.attach("b", "wire"), Err(LiveError::PortBusy { .. })));

    // Traffic marks key 7 of the hash map.
    let seven = 7u32.to_le_bytes();
    while live.map_lookup("b", "table", &seven).is_err() {
        std::thread::yield_now();
    }
    assert_eq!(live.map_lookup("b", "table", &seven).unwrap(), 1u64.to_le_bytes());
    // Missing keys, wrong sizes and flags give the kernel's errnos, naming map and key.
    let e = live.map_lookup("b", "table", &9u32.to_le_bytes()).unwrap_err();
    assert_eq!(e.errno(), Some(i64::from(libc::ENOENT)));
    assert!(e.to_string().contains("'table'") && e.to_string().contains("09 00 00 00"), "{e}");
    let e = live.map_lookup("b", "table", &[1, 2]).unwrap_err();
    assert_eq!(e.errno(), Some(i64::from(libc::EINVAL)));
    let e = live.map_update("b", "table", &seven, &5u64.to_le_bytes(), 1).unwrap_err();
    assert_eq!(e.errno(), Some(i64::from(libc::EEXIST)), "BPF_NOEXIST on a present key");
    live.map_update("b", "table", &3u32.to_le_bytes(), &42u64.to_le_bytes(), 0).unwrap();
    let dump = live.map_dump("b", "table").unwrap();
    assert_eq!(dump.len(), 2);
    assert!(dump.contains(&(3u32.to_le_bytes().to_vec(), 42u64.to_le_bytes().to_vec())));
    let first = live.map_next_key("b", "table", None).unwrap().unwrap();
    let second = live.map_next_key("b", "table", Some(&first)).unwrap().unwrap();
    assert_ne!(first, second);
    assert_eq!(live.map_next_key("b", "table", Some(&second)).unwrap(), None);
    live.map_delete("b", "table", &3u32.to_le_bytes()).unwrap();
    let e = live.map_delete("b", "table", &3u32.to_le_bytes()).unwrap_err();
    assert_eq!(e.errno(), Some(i64::from(libc::ENOENT)));
    assert!(matches!(live.map_lookup("b", "nomap", &seven), Err(LiveError::NoMap { .. })));

    // Unloading is refused while attached; force detaches first.
    let e = live.unload("b", false).unwrap_err();
    assert!(matches!(&e, LiveError::Attached { ports, .. } if ports == &["wire"]), "{e}");
    live.unload("b", true).unwrap();
    assert!(live.extensions().is_empty());
    assert_eq!(live.ports()[0].extension, None);
    assert!(matches!(live.map_lookup("b", "table", &seven), Err(LiveError::NoExtension { .. })));
    // Its counters left the listings with it.
    assert!(live.totals().extension("b").is_none());
    let report = running.stop().unwrap();
    let wire = report.totals.port("wire").unwrap();
    assert!(wire.unhandled > 0, "after the unload packets go on unhandled");
    // Once every worker has moved on, the unloaded extension is freed.
    assert_eq!(live.reap(), 0);
}
