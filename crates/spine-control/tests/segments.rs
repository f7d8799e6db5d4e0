//! Shared segments over the endpoint socket: an application asks a running adapter for
//! an extension's memory-mappable array, receives its memfd (SCM_RIGHTS) and maps it;
//! the application and the extension on two workers then count into one value under
//! its `bpf_spin_lock`, and the total is exact. Requests for what is not a segment get
//! clear refusals and the adapter goes on.

use spine_testnet::daemons::TempDir;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use spine_adapter::{AdapterBuilder, AdapterOptions, Device, Running};
use spine_client::{OpenError, Segment};
use spine_control::{serve, ServerConfig};
use spine_ports::{MemPort, PoolConfig};
use spine_runtime::{DomainSpec, FaultPolicy};

fn adapter(dir: &Path) -> Running {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../spine-adapter/tests/fixtures/segment.c");
    let obj = spine_progs::compile_c(&src, &dir.join("segment.o"), &[]).expect("clang builds it");
    let opts = AdapterOptions { workers: 2, pool: PoolConfig::new(2048), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5];
    f.resize(60, 0xee);
    let mut ports = Vec::new();
    for name in ["wire", "wire2"] {
        let port = MemPort::replay(name, std::slice::from_ref(&f)).unwrap();
        ports.push(b.add_port(name, Device::Mem { port, sink: false }, None).unwrap());
    }
    let faults = FaultPolicy { max_faults: 0, ..FaultPolicy::default() };
    b.add_domain(DomainSpec { name: "tenant".into(), faults, ..DomainSpec::default_domain() })
        .unwrap();
    let e = b.load_extension("seg", &obj, None, "tenant", "test").unwrap();
    for p in ports {
        b.attach(e, p).unwrap();
    }
    b.build().unwrap().start().unwrap()
}

#[test]
fn an_application_maps_a_segment_and_counts_with_two_workers_under_its_lock() {
    let dir = TempDir::new("seg");
    let running = adapter(dir.path());
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();

    let seg = Segment::open(server.path(), "seg", "shared").unwrap();
    let info = seg.info().clone();
    assert_eq!((info.value_size, info.max_entries, info.spin_lock), (24, 2, Some(0)));
    assert_eq!(info.len, 4096);
    let count = seg.value_offset(0) + 8;
    let t0 = Instant::now();
    while seg.u64(count).load(Ordering::Relaxed) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the extension counts");
        std::thread::yield_now();
    }
    const HOST: u64 = 100_000;
    for i in 0..HOST {
        let _g = seg.lock_value(0);
        // A plain read and write: only the lock keeps the total exact.
        let c = seg.u64(count).load(Ordering::Relaxed);
        for _ in 0..16 {
            std::hint::spin_loop();
        }
        // Nobody else writes while the lock is ours.
        assert_eq!(seg.u64(count).load(Ordering::Relaxed), c, "changed under the lock");
        assert_eq!(seg.u32(seg.value_offset(0)).load(Ordering::Relaxed), 1, "still ours");
        seg.u64(count).store(c + 1, Ordering::Relaxed);
        if i % 1024 == 0 {
            std::thread::yield_now();
        }
    }
    // A second mapping of the same segment sees the same bytes.
    let again = Segment::open(server.path(), "seg", "shared").unwrap();
    assert!(again.u64(count).load(Ordering::Relaxed) >= HOST);

    // What is not a segment is refused by name; the adapter keeps serving.
    for (ext, map, kind) in [("seg", "nosuch", "no_map"), ("nosuch", "shared", "no_extension")] {
        match Segment::open(server.path(), ext, map) {
            Err(OpenError::Refused { kind: k, message }) => {
                assert_eq!(k, kind, "{message}");
                assert!(message.contains(ext) || message.contains(map), "{message}");
            }
            other => panic!("{ext}/{map}: {other:?}"),
        }
    }
    server.stop();
    let report = running.stop().unwrap();
    let t = report.totals.extension("seg").unwrap();
    assert!(t.runs > 0, "the extension ran (it had counted before the host started)");
    // An invocation that waited past the adapter's limit (this thread preempted while
    // holding the lock on a busy machine) was stopped before its increment.
    let counted = t.runs - t.faults;
    assert_eq!(seg.u64(count).load(Ordering::Relaxed), counted + HOST, "every increment once");
}
