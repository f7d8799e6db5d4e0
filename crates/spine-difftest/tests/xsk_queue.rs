//! The AF_XDP idiom on an XSKMAP (`spine-runtime/tests/fixtures/xsk_queue.c`): a lookup
//! tested for NULL, `queue_id` read through it (the kernel's `struct bpf_xdp_sock`), then
//! `bpf_redirect_map` into the entry. Against the kernel, on both engines: both load the
//! programs (the kernel's verifier accepts the read of `queue_id`, as spine's now does)
//! and agree on verdicts, bytes and maps with the XSKMAP empty; and with entry 0 bound:
//! in the kernel to a real AF_XDP socket bound to queue 0 of a veth in a namespace the
//! test creates, in spine to that socket's port (its ifindex), so both read `queue_id`
//! 0 and redirect. The kernel's test run does not say where a redirect goes, so the
//! targets (a port, an endpoint) are checked against spine's own expectations in
//! `spine-runtime/tests/maps.rs` (`xskmap_lookup_reads_queue_id_and_redirects_into_the_entry`).
//! An entry at an index other than its socket's queue is not compared: there the kernel
//! reads the socket's queue and spine the index (`spine-maps` `xskmap.rs`). Needs root
//! (bpf(2), namespaces); without it each test says SKIP loudly and passes.

mod common;

use common::kernel_available;

fn object() -> Vec<u8> {
    // Tests run in parallel: one directory per build.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-xsk-queue-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spine-runtime/tests/fixtures/xsk_queue.c");
    let object = spine_progs::compile_c(&src, &dir.join("xsk_queue.o"), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    object
}

#[test]
fn xskmap_queue_id_programs_load_and_agree_with_the_kernel_on_an_empty_map() {
    if !kernel_available() {
        return;
    }
    let object = object();
    let pkts: Vec<Vec<u8>> = (0u8..16).map(|k| [vec![k], vec![0; 63]].concat()).collect();
    for program in ["xsk_queue", "xsk_default"] {
        let (report, _) = common::check(&object, program, &pkts, |_| {});
        // Every entry is empty: every frame passes, on both sides.
        assert_eq!(report.verdicts[2], pkts.len(), "{program}: {report}");
    }
}

#[test]
fn queue_id_of_an_entry_bound_to_an_af_xdp_socket_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let object = object();
    // A socket on queue 0, then one on queue 1 (a veth with two queues), each at the
    // index of its queue as libxdp places it.
    for queue in [0u32, 1] {
        bound_entry(&object, queue);
    }
}

fn bound_entry(object: &[u8], queue: u32) {
    use spine_ports::{AfXdpConfig, AfXdpPort, Pool, PoolConfig};
    use std::os::fd::{AsFd, AsRawFd};
    let Some(ns) = spine_testnet::netns::NetNs::new() else {
        eprintln!("SKIP: no network namespace");
        return;
    };
    ns.ip("link add xq0 numtxqueues 2 numrxqueues 2 type veth peer name xq1 numtxqueues 2 numrxqueues 2");
    ns.ip("link set xq0 up");
    ns.ip("link set xq1 up");
    ns.enter(|| {
        let pool = Pool::new(PoolConfig::new(2048)).expect("pool");
        let mut cache = pool.cache();
        let cfg = AfXdpConfig { queue, ..AfXdpConfig::new("xq0") };
        let port = AfXdpPort::open(cfg, &mut cache).expect("AF_XDP socket");
        let fd = port.as_fd().as_raw_fd() as u32;
        let ifindex = port.ifindex();
        let pkts: Vec<Vec<u8>> = (0u8..16).map(|k| [vec![k], vec![0; 63]].concat()).collect();
        for program in ["xsk_queue", "xsk_default"] {
            let (report, pair) = common::check(object, program, &pkts, |pair| {
                let key = queue.to_ne_bytes();
                let km = pair.kernel().maps.iter().find(|m| m.name() == "xsks_map");
                km.expect("kernel xsks_map").update(&key, &fd.to_ne_bytes(), 0).expect("fd");
                let sm = pair.spine_map("xsks_map").expect("spine xsks_map");
                sm.update_user(&key, &ifindex.to_ne_bytes(), 0).expect("ifindex");
            });
            if program == "xsk_queue" {
                // Keys `queue` and `queue + 8` find the entry, read its queue_id (equal to
                // the key on both sides) and redirect; the rest pass.
                assert_eq!((report.verdicts[4], report.verdicts[2]), (2, 14), "{report}");
                let seen = pair.spine_map_u64("seen");
                assert_eq!(seen[queue as usize], 100 + u64::from(queue), "queue_id read");
            } else {
                // The test run's receive queue is 0: redirected only if entry 0 is bound.
                let redirected = if queue == 0 { pkts.len() } else { 0 };
                assert_eq!(report.verdicts[4], redirected, "{report}");
            }
        }
        drop(port);
    });
}
