//! `bpf_timer` on the adapter: a program on a mem port arms a timer on its fifth packet;
//! the workers fire its callback, which re-arms itself until it has run three times.
//! The test steps the adapter until the callbacks have run (the wait is bounded only to
//! fail rather than hang) and checks the counts exactly.

mod common;

use std::time::{Duration, Instant};

use common::{frame, TempDir};
use spine_adapter::{AdapterBuilder, AdapterOptions, Device};
use spine_ports::{MemPort, PoolConfig};

fn timers_object() -> Vec<u8> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/timers.c");
    let dir = TempDir::new("timers-fixture");
    spine_progs::compile_c(&src, &dir.join("timers.o"), &[]).expect("clang builds the fixture")
}

fn word(v: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(v[i * 8..i * 8 + 8].try_into().unwrap())
}

#[test]
fn a_timer_armed_by_a_packet_fires_from_the_workers_until_it_stops_rearming() {
    let opts =
        AdapterOptions { workers: 1, pool: PoolConfig::new(256), ..AdapterOptions::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let sent: Vec<Vec<u8>> = (0..20).map(|i| frame(1, &[i as u8])).collect();
    let port = MemPort::replay("wire", &sent).unwrap().with_limit(sent.len() as u64);
    let wire = b.add_port("wire", Device::Mem { port, sink: false }, None).unwrap();
    let e =
        b.load_extension("t", &timers_object(), Some("arm_on_fifth"), "default", "test").unwrap();
    b.attach(e, wire).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(10_000);
    let state = a.extension("t").unwrap().map("state").unwrap().clone();
    let read = || {
        let mut v = [0u8; 40];
        state.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
        v
    };
    assert_eq!(word(&read(), 0), 20, "every packet counted");
    assert_eq!(word(&read(), 4), 5, "armed by the fifth");
    let deadline = Instant::now() + Duration::from_secs(60);
    while word(&read(), 3) < 3 {
        assert!(Instant::now() < deadline, "fired {} times in a minute", word(&read(), 3));
        a.step();
        std::thread::sleep(Duration::from_micros(20));
    }
    // It stopped re-arming: however long the workers go on, it runs no more.
    let timers = state.timers().unwrap();
    assert_eq!(timers.next_expiry(), None, "nothing armed");
    for _ in 0..100 {
        a.step();
    }
    assert_eq!(word(&read(), 3), 3);
    let t = a.totals();
    let ext = t.extension("t").unwrap();
    assert_eq!((ext.runs, ext.timers, ext.faults), (20, 3, 0));
    a.finish().unwrap();
}
