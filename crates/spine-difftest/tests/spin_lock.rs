//! `bpf_spin_lock` against the kernel (`tests/fixtures/spin_lock.c`): programs that
//! count under the lock of an array value and of a hash value (inserting, deleting and
//! replacing elements with `BPF_F_LOCK` as they go) and answer from map state, on both
//! engines; every verdict, byte and map (the kernel's read with `BPF_F_LOCK`) must
//! agree after every packet. Then the verifier: programs the kernel refuses (two locks,
//! a missing unlock, a helper call while locked, a lock in a value without one, the
//! lock word touched, an unlock without a lock, unlocking another element) must be
//! refused by spine too, and those it accepts accepted. The kernel finds the locks
//! through the object's own BTF, loaded by spine-sys. Needs root (bpf(2)); without it
//! each kernel test says SKIP loudly and passes.
//!
//! Two tests need no kernel: two workers counting into one hash value lose no
//! increment, and a program the watchdog stops while it holds a lock leaves it free.

mod common;

use common::{kernel_available, packet};

fn object(program: &str) -> Vec<u8> {
    common::fixture("spin_lock", program, &[&format!("-DPROG_{program}")])
}

/// `sizeof(struct probe)`: a packet shorter than the Ethernet header and this is
/// aborted.
const PROBE_SIZE: usize = 8;

/// Probes: key, op, and a length that changes the counts; deterministic.
fn packets() -> Vec<Vec<u8>> {
    let mut pkts = Vec::new();
    let mut x = 0x2545_f491u32;
    for i in 0..240u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let key = if i < 40 { i % 12 } else { x % 17 };
        let op = ((x >> 8) % 5) as u8;
        let mut probe = key.to_le_bytes().to_vec();
        probe.push(op);
        pkts.push(packet(&probe, (x >> 16) as usize % 90));
    }
    // Too short for the probe.
    pkts.push(packet(&[], 0));
    pkts.push(packet(&[1, 0], 0));
    pkts
}

/// The maps the kernel was given a `bpf_spin_lock` for, through BTF.
fn kernel_locked_maps(pair: &spine_difftest::Pair) -> usize {
    pair.kernel().maps.iter().filter(|m| m.has_spin_lock()).count()
}

#[test]
fn counting_under_an_array_values_lock_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let pkts = packets();
    let (r, pair) = common::check(&object("array"), "xdp", &pkts, |_| {});
    let v = r.verdicts;
    assert!(v[1] > 0 && v[2] > 0 && v[3] > 0, "drop, pass and tx all occur: {v:?}");
    assert_eq!(kernel_locked_maps(&pair), 2, "arr and hash created with their lock");
    let hits: u64 = pair.spine_map_u64("arr").iter().sum();
    let probes = pkts.iter().filter(|p| p.len() >= 14 + PROBE_SIZE).count();
    assert_eq!(hits, probes as u64, "every whole probe counted once, under the lock");
    assert_eq!(v[0], pkts.len() - probes, "the rest aborted");
}

#[test]
fn counting_under_a_hash_values_lock_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let (r, pair) = common::check(&object("hash"), "xdp", &packets(), |_| {});
    let v = r.verdicts;
    assert!(v[1] > 0 && v[2] > 0 && v[3] > 0, "full map, pass and tx all occur: {v:?}");
    let hash = pair.spine_map("hash").expect("hash map");
    assert!(!hash.is_empty(), "elements left in the map");
}

#[test]
fn a_function_called_under_the_lock_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let (r, pair) = common::check(&object("subcall"), "xdp", &packets(), |_| {});
    let v = r.verdicts;
    assert!(v[1] > 0 && v[2] > 0, "{v:?}");
    assert_eq!(pair.spine_map_u64("arr")[0], 242, "every packet counted, in the callee");
}

/// What the kernel and spine make of each program: accepted or refused (with why).
#[test]
fn the_verifier_accepts_and_refuses_lock_programs_as_the_kernel_does() {
    if !kernel_available() {
        return;
    }
    let cases = [
        ("array", true),
        ("hash", true),
        ("subcall", true),
        ("BAD_double", false),
        ("BAD_missing_unlock", false),
        ("BAD_helper", false),
        ("BAD_nolock_map", false),
        ("BAD_other_elem", false),
        ("BAD_touch_lock", false),
        ("BAD_unlock_only", false),
    ];
    let mut agreed = 0;
    for (program, accepted) in cases {
        let obj = spine_obj::parse(&object(program)).expect("parses");
        let prog = obj.program(None).expect("one program");
        let kernel = spine_sys::load_object_program(&obj, prog);
        let opts = spine_runtime::LoadOptions {
            ncpus: spine_sys::possible_cpus(),
            ..spine_runtime::LoadOptions::default()
        };
        let spine = spine_runtime::load_object(&obj, &opts);
        let why = |r: Result<(), String>| r.err().unwrap_or_else(|| "accepted".into());
        let kernel_why = why(kernel.as_ref().map(drop).map_err(ToString::to_string));
        let spine_why = why(spine.as_ref().map(drop).map_err(ToString::to_string));
        println!("{program}: kernel {kernel_why}\n{program}: spine  {spine_why}");
        assert_eq!(kernel.is_ok(), accepted, "{program}: the kernel: {kernel_why}");
        assert_eq!(spine.is_ok(), accepted, "{program}: spine: {spine_why}");
        agreed += 1;
    }
    assert_eq!(agreed, cases.len());
}

/// Loads `program` into spine alone, on the JIT.
fn spine_only(program: &str) -> std::sync::Arc<spine_runtime::Extension> {
    let obj = spine_obj::parse(&object(program)).expect("parses");
    let opts = spine_runtime::LoadOptions { ncpus: 2, ..spine_runtime::LoadOptions::default() };
    let loaded = spine_runtime::load_object(&obj, &opts).expect("spine accepts it");
    loaded.program(None).expect("one program").clone()
}

/// The extension's map `name`.
fn map_of(ext: &spine_runtime::Extension, name: &str) -> std::sync::Arc<spine_maps::Map> {
    ext.maps()
        .data_maps()
        .find(|m| &*m.def().name == name)
        .unwrap_or_else(|| panic!("no map {name}"))
        .clone()
}

fn run_one(runner: &mut spine_runtime::XdpRunner, pkt: &[u8]) -> Result<u32, Box<spine_vm::Fault>> {
    let mut frame = spine_runtime::Frame::new(spine_runtime::Geometry::TEST_RUN);
    frame.load(pkt).expect("fits");
    runner.run(&mut frame, spine_runtime::RxInfo::default(), &mut spine_runtime::FixedHost::new(1))
}

/// Two workers count into one hash value under its lock: no increment is lost.
#[test]
fn two_workers_count_into_one_hash_value_exactly() {
    let ext = spine_only("hash");
    let map = map_of(&ext, "hash");
    let key = 5u32.to_le_bytes();
    map.update_user(&key, &[0; 24], 0).expect("seeded");
    let mut probe = key.to_vec();
    probe.push(0);
    let pkt = packet(&probe, 3);
    const RUNS: usize = 20_000;
    let workers: Vec<_> = (0..2)
        .map(|cpu| {
            let ext = ext.clone();
            let pkt = pkt.clone();
            std::thread::spawn(move || {
                let mut r = spine_runtime::XdpRunner::new(ext, cpu)
                    .expect("runner")
                    .with_budget(spine_runtime::Budget::UNLIMITED);
                for _ in 0..RUNS {
                    run_one(&mut r, &pkt).expect("runs");
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let mut v = [0u8; 24];
    map.lookup_user_flags(&key, &mut v, spine_abi::update_flags::LOCK).unwrap();
    let hits = u64::from_le_bytes(v[..8].try_into().unwrap());
    let sum = u64::from_le_bytes(v[16..24].try_into().unwrap());
    assert_eq!(hits, 2 * RUNS as u64, "every increment made under the lock");
    assert_eq!(sum, 2 * RUNS as u64 * pkt.len() as u64);
}

/// A program stopped by the watchdog while it holds a lock leaves the lock free: the
/// next invocation takes it at once instead of faulting after its spin limit.
#[test]
fn a_program_stopped_while_holding_a_lock_leaves_it_free() {
    let stuck = spine_only("stuck");
    let mut r = spine_runtime::XdpRunner::new(stuck, 0).expect("runner");
    let mut probe = 7u32.to_le_bytes().to_vec();
    probe.push(0);
    let pkt = packet(&probe, 3);
    for _ in 0..3 {
        let f = run_one(&mut r, &pkt).expect_err("the watchdog stops it");
        assert!(matches!(*f, spine_vm::Fault::Budget { .. }), "{f}");
    }
    // The same map, through the same extension: the stuck program's own arr[0]. With
    // sum == key it takes the lock and returns at once; it could not if a stopped
    // invocation had left the lock taken (its wait would fault).
    let arr = map_of(r.extension(), "arr");
    let mut v = [0u8; 24];
    arr.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
    v[16..24].copy_from_slice(&7u64.to_le_bytes());
    arr.update_user(&0u32.to_le_bytes(), &v, spine_abi::update_flags::LOCK)
        .expect("the lock is free for user space too");
    assert_eq!(run_one(&mut r, &pkt).expect("runs to the end"), 2, "XDP_PASS");
}
