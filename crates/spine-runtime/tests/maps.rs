//! Ring buffers and maps in maps through the runtime, on both engines: records written
//! with `bpf_ringbuf_output` and reserved in place reach the consumer in order, a
//! reservation held by an invocation the watchdog stops is discarded, inner maps are
//! reached (lookup, update, delete, redirect, ring buffers) through the handle an outer
//! lookup returns, replaced between runs from the control side, and one invocation
//! holds a bounded number of them.
//!
//! The same fixtures run against the kernel in `spine-adapter/tests/kernel_maps.rs`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spine_abi::{map_type, xdp_action};
use spine_maps::{Map, MapDef, MapOptions};
use spine_obj::Object;
use spine_runtime::{
    load_object, Domain, DomainSpec, EngineKind, Extension, FaultPolicy, FixedHost, Frame,
    Geometry, LoadOptions, LoadedObject, Redirect, RxInfo, XdpRunner,
};
use spine_vm::Fault;

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

fn compile(name: &str) -> Object {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-runtime-maps-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = spine_progs::compile_c(&src, &dir.join(format!("{name}.o")), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    spine_obj::parse(&bytes).expect("parse")
}

/// Loads `obj` in a domain that never detaches (these tests fault on purpose).
fn load(obj: &Object, engine: EngineKind) -> LoadedObject {
    let never = FaultPolicy { max_faults: 0, ..FaultPolicy::default() };
    let domain = Domain::new(DomainSpec { faults: never, ..DomainSpec::default_domain() });
    load_object(obj, &LoadOptions { engine, domain, ..LoadOptions::default() }).unwrap()
}

fn runner(l: &LoadedObject, prog: &str) -> XdpRunner {
    XdpRunner::new(l.program(Some(prog)).unwrap().clone(), 0).unwrap()
}

/// A 64-byte packet starting with `head`, the rest numbered.
fn packet(head: &[u8]) -> Frame {
    let mut p: Vec<u8> = (0..64u8).collect();
    p[..head.len()].copy_from_slice(head);
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load(&p).unwrap();
    f
}

fn run(r: &mut XdpRunner, head: &[u8]) -> Result<u32, Fault> {
    r.run(&mut packet(head), RxInfo::default(), &mut FixedHost::new(1)).map_err(|f| *f)
}

fn map<'a>(ext: &'a Extension, name: &str) -> &'a Arc<Map> {
    ext.map(name).unwrap_or_else(|| panic!("no map {name}"))
}

fn u64_at(m: &Map, key: u32) -> Option<u64> {
    let mut v = [0u8; 8];
    m.lookup_user(&key.to_le_bytes(), &mut v).ok().map(|()| u64::from_le_bytes(v))
}

fn drain(m: &Map) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    m.ringbuf().expect("a ring buffer").consume(|r| out.push(r.to_vec()));
    out
}

/// `struct event` of ringbuf.c: len, tag, the packet's first 16 bytes.
fn event(len: u32, tag: u32, head: &[u8]) -> Vec<u8> {
    let mut e = len.to_le_bytes().to_vec();
    e.extend_from_slice(&tag.to_le_bytes());
    e.extend_from_slice(&packet(head).packet()[..16]);
    e
}

const OUTPUT_TAG: u32 = 0x0a0a_0a0a;
const RESERVE_TAG: u32 = 0x0b0b_0b0b;

#[test]
fn output_records_reach_the_consumer_in_order_and_query_reports_positions() {
    let obj = compile("ringbuf");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut r = runner(&l, "output");
        let (events, stats) = (map(r.extension(), "events").clone(), map(r.extension(), "stats"));
        let stats = stats.clone();
        let heads: Vec<[u8; 2]> = (0..5u8).map(|i| [0x40 + i, 0]).collect();
        for h in &heads {
            assert_eq!(run(&mut r, h), Ok(xdp_action::PASS), "{engine:?}");
        }
        // Five 24-byte records, 32 bytes of the ring each, none consumed yet.
        let q = |k| u64_at(&stats, k).unwrap();
        assert_eq!((q(0), q(1), q(2), q(3), q(4)), (160, 160, 0, 4096, 0), "{engine:?}");
        let got = drain(&events);
        let want: Vec<Vec<u8>> = heads.iter().map(|h| event(64, OUTPUT_TAG, h)).collect();
        assert_eq!(got, want, "{engine:?}: records in order, as written");
        assert_eq!(events.ringbuf().unwrap().avail_data(), 0);
        assert_eq!(run(&mut r, &[1, 0]), Ok(xdp_action::PASS));
        assert_eq!((q(0), q(1), q(2)), (32, 192, 160), "{engine:?}: the consumer moved");
    }
}

#[test]
fn output_refuses_bad_flags_and_a_full_ring_with_the_kernels_errors() {
    let obj = compile("ringbuf");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut r = runner(&l, "output");
        let (events, stats) = (map(r.extension(), "events").clone(), map(r.extension(), "stats"));
        let stats = stats.clone();
        for flags in 1..4u8 {
            assert_eq!(run(&mut r, &[0, flags]), Ok(xdp_action::PASS), "wakeup flags {flags}");
        }
        for flags in 4..8u8 {
            assert_eq!(run(&mut r, &[0, flags]), Ok(xdp_action::DROP), "{engine:?}");
            assert_eq!(u64_at(&stats, 4), Some(-22i64 as u64), "flags {flags}: -EINVAL");
        }
        assert_eq!(drain(&events).len(), 3);
        // 4,096 bytes hold 127 records of 32 bytes (never more than size - 1 in use).
        for i in 0..127 {
            assert_eq!(run(&mut r, &[i as u8, 0]), Ok(xdp_action::PASS), "{engine:?}: {i}");
        }
        assert_eq!(run(&mut r, &[0, 0]), Ok(xdp_action::DROP), "{engine:?}: the ring is full");
        assert_eq!(u64_at(&stats, 4), Some(-11i64 as u64), "-EAGAIN");
        assert_eq!(drain(&events).len(), 127);
        assert_eq!(run(&mut r, &[0, 0]), Ok(xdp_action::PASS), "room again once consumed");
    }
}

#[test]
fn reserved_records_are_written_in_place_and_submitted_or_discarded() {
    let obj = compile("ringbuf");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut r = runner(&l, "reserve");
        let events = map(r.extension(), "events").clone();
        let stats = map(r.extension(), "stats").clone();
        let firsts = [2u8, 3, 4, 5, 7, 8];
        for &b in &firsts {
            let want = if b & 1 == 0 { xdp_action::PASS } else { xdp_action::DROP };
            assert_eq!(run(&mut r, &[b]), Ok(want), "{engine:?}: first byte {b}");
        }
        // Discarded records keep their room until the consumer passes them.
        assert_eq!(u64_at(&stats, 0), Some(6 * 32));
        let got = drain(&events);
        let want: Vec<Vec<u8>> =
            [2u8, 4, 8].iter().map(|&b| event(64, RESERVE_TAG, &[b])).collect();
        assert_eq!(got, want, "{engine:?}: only the submitted records, in order");
        assert_eq!(events.ringbuf().unwrap().avail_data(), 0);
        assert_eq!(u64_at(&stats, 5), Some(0), "no reservation failed");
    }
}

#[test]
fn an_invocation_stopped_by_the_watchdog_releases_its_reservation() {
    let obj = compile("ringbuf");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut spin = runner(&l, "reserve_then_spin");
        let mut ok = runner(&l, "reserve");
        let events = map(spin.extension(), "events").clone();
        let rb = events.ringbuf().unwrap();
        // Far more aborted invocations than the ring has room for: each one's record is
        // discarded, so the consumer never stalls and the ring never fills.
        for i in 0..300 {
            let r = run(&mut spin, &[0]);
            assert!(matches!(r, Err(Fault::Budget { .. })), "{engine:?} run {i}: {r:?}");
            assert!(rb.has_data(), "{engine:?}: the record is released, not left reserved");
            assert!(drain(&events).is_empty(), "{engine:?}: nothing was submitted");
            assert_eq!(rb.avail_data(), 0, "{engine:?} run {i}: the consumer passed it");
        }
        assert_eq!(spin.extension().health().faults(), 300);
        assert_eq!(run(&mut ok, &[6]), Ok(xdp_action::PASS));
        assert_eq!(drain(&events), vec![event(64, RESERVE_TAG, &[6])]);
    }
}

fn hash_def(name: &str) -> MapDef {
    MapDef::new(name, map_type::HASH, 4, 8, 16, 0)
}

fn new_map(def: MapDef) -> Arc<Map> {
    Arc::new(Map::create(def, &MapOptions::default()).unwrap())
}

#[test]
fn lookups_through_array_and_hash_of_maps_reach_the_inner_maps() {
    let obj = compile("inner");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut arr = runner(&l, "via_array");
        let mut hash = runner(&l, "via_hash");
        let ext = arr.extension().clone();
        let (a, b) = (map(&ext, "table_a"), map(&ext, "table_b"));
        // Slot 0 of by_slot is table_a and key 3 of by_key is table_b, from `.values`.
        assert_eq!(run(&mut arr, &[0, 1, 5]), Ok(xdp_action::TX), "{engine:?}: update");
        assert_eq!(u64_at(a, 5), Some(105));
        assert_eq!(run(&mut arr, &[0, 0, 5]), Ok(xdp_action::TX), "{engine:?}: lookup");
        assert_eq!(u64_at(a, 5), Some(106), "{engine:?}: written through the value pointer");
        assert_eq!(run(&mut arr, &[0, 0, 6]), Ok(xdp_action::PASS), "missing key");
        assert_eq!(run(&mut arr, &[0, 2, 5]), Ok(xdp_action::TX), "delete");
        assert_eq!(run(&mut arr, &[0, 2, 5]), Ok(xdp_action::DROP), "delete again: -ENOENT");
        assert_eq!(u64_at(a, 5), None);
        assert_eq!(run(&mut arr, &[1, 0, 5]), Ok(xdp_action::DROP), "an empty slot is NULL");
        assert_eq!(run(&mut arr, &[200, 0, 5]), Ok(xdp_action::DROP), "out of range is NULL");
        assert_eq!(run(&mut hash, &[3, 1, 7]), Ok(xdp_action::TX), "{engine:?}");
        assert_eq!(run(&mut hash, &[3, 0, 7]), Ok(xdp_action::TX), "{engine:?}");
        assert_eq!(u64_at(b, 7), Some(108));
        assert_eq!(u64_at(a, 7), None, "table_a untouched");
        assert_eq!(run(&mut hash, &[2, 1, 7]), Ok(xdp_action::DROP), "a missing key is NULL");
    }
}

#[test]
fn an_inner_map_replaced_between_runs_is_the_one_the_next_run_uses() {
    let obj = compile("inner");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut arr = runner(&l, "via_array");
        let mut hash = runner(&l, "via_hash");
        let mut log = runner(&l, "log_value");
        let ext = arr.extension().clone();
        let (by_slot, by_key) = (map(&ext, "by_slot"), map(&ext, "by_key"));
        let (a, ring) = (map(&ext, "table_a"), map(&ext, "ring_a"));
        assert_eq!(run(&mut arr, &[0, 1, 1]), Ok(xdp_action::TX));
        // The control side swaps a map it created (not one of the object's, so its values
        // are reachable only through the inner handle) into slot 0.
        let fresh = new_map(hash_def("fresh"));
        let slot0 = 0u32.to_ne_bytes();
        by_slot.set_inner(&slot0, Some(fresh.clone()), 0).unwrap();
        assert_eq!(run(&mut arr, &[0, 0, 1]), Ok(xdp_action::PASS), "{engine:?}: fresh is empty");
        assert_eq!(run(&mut arr, &[0, 1, 1]), Ok(xdp_action::TX));
        assert_eq!(run(&mut arr, &[0, 0, 1]), Ok(xdp_action::TX));
        assert_eq!((u64_at(&fresh, 1), u64_at(a, 1)), (Some(102), Some(101)), "{engine:?}");
        // A helper reads through a pointer into the control-created map.
        fresh.update_user(&9u32.to_le_bytes(), &0x1122_3344_5566_7788u64.to_le_bytes(), 0).unwrap();
        assert_eq!(run(&mut log, &[0, 0, 9]), Ok(xdp_action::TX), "{engine:?}");
        assert_eq!(drain(ring), vec![0x1122_3344_5566_7788u64.to_le_bytes().to_vec()]);
        // Emptied from the control side: the next lookup is NULL.
        by_slot.set_inner(&slot0, None, 0).unwrap();
        assert_eq!(run(&mut arr, &[0, 0, 1]), Ok(xdp_action::DROP));
        // hash_of_maps: a new key, then that key replaced.
        by_key.set_inner(&9u32.to_ne_bytes(), Some(fresh.clone()), 0).unwrap();
        assert_eq!(run(&mut hash, &[9, 1, 2]), Ok(xdp_action::TX), "{engine:?}");
        let other = new_map(hash_def("other"));
        by_key.set_inner(&9u32.to_ne_bytes(), Some(other.clone()), 0).unwrap();
        assert_eq!(run(&mut hash, &[9, 1, 3]), Ok(xdp_action::TX));
        assert_eq!((u64_at(&fresh, 2), u64_at(&fresh, 3)), (Some(102), None));
        assert_eq!(u64_at(&other, 3), Some(103), "{engine:?}");
        // An inner map that does not match the template is refused, as by the kernel.
        let wrong = new_map(MapDef::new("wrong", map_type::HASH, 4, 4, 16, 0));
        let err = by_slot.set_inner(&slot0, Some(wrong), 0).unwrap_err();
        assert!(matches!(err, spine_maps::MapError::InnerMismatch { .. }), "{err}");
    }
}

#[test]
fn inner_ring_buffers_and_devmaps_work_through_their_handles() {
    let obj = compile("inner");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut log = runner(&l, "log_inner");
        let mut redirect = runner(&l, "redirect_inner");
        let ext = log.extension().clone();
        let (rings, ring_a) = (map(&ext, "rings"), map(&ext, "ring_a"));
        let head = [9u8, 8, 7, 6, 5, 4, 3, 2];
        assert_eq!(run(&mut log, &head), Ok(xdp_action::PASS), "{engine:?}");
        let mut reserved = 64u64.to_le_bytes().to_vec();
        reserved.extend_from_slice(&head);
        assert_eq!(drain(ring_a), vec![reserved.clone(), head.to_vec()], "{engine:?}");
        let other = new_map(MapDef::new("other_ring", map_type::RINGBUF, 0, 0, 4096, 0));
        rings.set_inner(&0u32.to_ne_bytes(), Some(other.clone()), 0).unwrap();
        assert_eq!(run(&mut log, &head), Ok(xdp_action::PASS));
        assert!(drain(ring_a).is_empty(), "{engine:?}: the old ring gets nothing");
        assert_eq!(drain(&other), vec![reserved, head.to_vec()]);

        map(&ext, "ports_a").update_user(&0u32.to_le_bytes(), &42u32.to_le_bytes(), 0).unwrap();
        assert_eq!(run(&mut redirect, &[0]), Ok(xdp_action::REDIRECT), "{engine:?}");
        assert_eq!(redirect.redirect(), Some(Redirect::Port { ifindex: 42 }));
        assert_eq!(run(&mut redirect, &[1]), Ok(xdp_action::DROP), "missing: the flags' verdict");
        assert_eq!(redirect.redirect(), None);
    }
}

#[test]
fn one_invocation_holds_at_most_eight_inner_maps() {
    let obj = compile("inner");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut count = runner(&l, "count_held");
        let by_slot = map(count.extension(), "by_slot").clone();
        for slot in 1..12u32 {
            let m = new_map(hash_def(&format!("t{slot}")));
            by_slot.set_inner(&slot.to_ne_bytes(), Some(m), 0).unwrap();
        }
        // Twelve distinct inner maps: the ninth lookup on finds no room and is NULL.
        assert_eq!(run(&mut count, &[0]), Ok(8), "{engine:?}");
        // The same slot twelve times is one held map.
        assert_eq!(run(&mut count, &[1]), Ok(12), "{engine:?}");
        // Nothing is kept between invocations.
        assert_eq!(run(&mut count, &[0]), Ok(8), "{engine:?}");
    }
}

/// An XSKMAP lookup reads the entry's `queue_id` as the kernel's `struct bpf_xdp_sock`
/// gives it (spine: the entry's index) and redirects into the entry: to the port whose
/// ifindex user space stored, or to the endpoint bound to the slot; a missing entry
/// passes, and a `queue_id` that differed from the key would abort (`xsk_queue.c`).
/// The kernel's side (the program loads there and agrees on an empty map) is in
/// `spine-difftest/tests/xsk_queue.rs`; a kernel XSKMAP entry needs an AF_XDP socket,
/// so the bound entries are checked against spine's own expectations here.
#[test]
fn xskmap_lookup_reads_queue_id_and_redirects_into_the_entry() {
    let obj = compile("xsk_queue");
    for engine in ENGINES {
        let l = load(&obj, engine);
        let mut r = runner(&l, "xsk_queue");
        let ext = r.extension().clone();
        let (xsks, seen) = (map(&ext, "xsks_map"), map(&ext, "seen"));
        xsks.update_user(&1u32.to_ne_bytes(), &42u32.to_ne_bytes(), 0).unwrap();
        xsks.bind_endpoint(2, 5).unwrap();
        xsks.update_user(&0u32.to_ne_bytes(), &43u32.to_ne_bytes(), 0).unwrap();
        assert_eq!(run(&mut r, &[1]), Ok(xdp_action::REDIRECT), "{engine:?}");
        assert_eq!(r.redirect(), Some(Redirect::Port { ifindex: 42 }), "{engine:?}");
        assert_eq!(u64_at(seen, 1), Some(101), "{engine:?}: queue_id 1 read");
        assert_eq!(run(&mut r, &[2]), Ok(xdp_action::REDIRECT), "{engine:?}");
        assert_eq!(r.redirect(), Some(Redirect::Endpoint { id: 5 }), "{engine:?}");
        assert_eq!(u64_at(seen, 2), Some(102), "{engine:?}");
        assert_eq!(run(&mut r, &[0]), Ok(xdp_action::REDIRECT), "{engine:?}");
        assert_eq!(r.redirect(), Some(Redirect::Port { ifindex: 43 }), "{engine:?}");
        assert_eq!(u64_at(seen, 0), Some(100), "{engine:?}: queue 0 reads 0");
        assert_eq!(run(&mut r, &[3]), Ok(xdp_action::PASS), "{engine:?}: empty entry");
        assert_eq!(r.redirect(), None);
        assert_eq!(u64_at(seen, 3), Some(0), "{engine:?}: nothing read");
        assert_eq!(run(&mut r, &[6]), Ok(xdp_action::PASS), "{engine:?}: past the end");
        xsks.delete_user(&1u32.to_ne_bytes()).unwrap();
        assert_eq!(run(&mut r, &[1]), Ok(xdp_action::PASS), "{engine:?}: deleted");

        // libxdp's default program: the entry of the receive queue.
        let mut d = runner(&l, "xsk_default");
        let mut f = packet(&[0]);
        let rx = |q| RxInfo { rx_queue_index: q, ..RxInfo::default() };
        let host = &mut FixedHost::new(1);
        assert_eq!(d.run(&mut f, rx(2), host).map_err(|f| *f), Ok(xdp_action::REDIRECT));
        assert_eq!(d.redirect(), Some(Redirect::Endpoint { id: 5 }), "{engine:?}");
        assert_eq!(d.run(&mut f, rx(1), host).map_err(|f| *f), Ok(xdp_action::PASS));
        assert_eq!(d.redirect(), None, "{engine:?}");
    }
}
