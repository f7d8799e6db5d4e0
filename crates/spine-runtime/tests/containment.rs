//! Safety at run time: the watchdog stops runaway invocations identically on both
//! engines and detaches extensions that keep faulting while other extensions go on;
//! tail calls dispatch and stop at the kernel's limit; protection domains refuse what
//! lies outside them and share maps only within themselves.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spine_abi::{helper, xdp_action};
use spine_obj::Object;
use spine_runtime::{
    load_object, Budget, Domain, DomainError, DomainSpec, EngineKind, FaultPolicy, FixedHost,
    Frame, Geometry, LoadError, LoadOptions, LoadedObject, Quota, RxInfo, VerifyErrorKind,
    XdpRunner,
};
use spine_vm::Fault;

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

fn compile(name: &str) -> Object {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    // One directory per call: tests run in parallel and remove theirs when done.
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-runtime-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = spine_progs::compile_c(&src, &dir.join(format!("{name}.o")), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    spine_obj::parse(&bytes).expect("parse")
}

fn load(obj: &Object, engine: EngineKind, domain: &Arc<Domain>) -> Result<LoadedObject, LoadError> {
    load_object(obj, &LoadOptions { engine, domain: domain.clone(), ..LoadOptions::default() })
}

fn packet(first: u8, len: usize) -> Frame {
    let mut p = vec![0u8; len];
    p[0] = first;
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load(&p).unwrap();
    f
}

#[test]
fn runaway_loops_stop_at_the_budget_identically_on_both_engines() {
    let obj = compile("runaway");
    for prog in ["forever", "huge"] {
        let mut faults = Vec::new();
        for engine in ENGINES {
            let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
            let ext = loaded.program(Some(prog)).unwrap().clone();
            // The fixed host's clock moves 1 µs per read: the 10 µs budget ends after a
            // deterministic number of clock checks, so both engines stop at the same point.
            let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
            let mut host = FixedHost::new(7);
            let r = runner.run(&mut packet(0, 64), RxInfo::default(), &mut host);
            let Err(fault) = r.map_err(|f| *f) else { panic!("{prog} on {engine:?}: finished") };
            assert!(matches!(fault, Fault::Budget { .. }), "{prog} on {engine:?}: {fault}");
            assert_eq!(ext.health().faults(), 1);
            assert!(host.events.iter().any(|e| e.starts_with(&format!("fault {prog}"))));
            faults.push(fault);
        }
        assert_eq!(
            faults[0], faults[1],
            "{prog}: the interpreter and the JIT stop at the same place"
        );
    }
}

#[test]
fn callback_loops_are_bounded_by_the_budget_identically_on_both_engines() {
    let obj = compile("runaway_cb");
    for prog in ["nested_loops", "long_walk"] {
        let mut faults = Vec::new();
        for engine in ENGINES {
            let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
            let ext = loaded.program(Some(prog)).unwrap().clone();
            let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
            let mut host = FixedHost::new(7);
            let r = runner.run(&mut packet(0, 64), RxInfo::default(), &mut host);
            let Err(fault) = r.map_err(|f| *f) else { panic!("{prog} on {engine:?}: finished") };
            assert!(matches!(fault, Fault::Budget { .. }), "{prog} on {engine:?}: {fault}");
            faults.push(fault);
        }
        assert_eq!(faults[0], faults[1], "{prog}: both engines stop at the same place");
    }
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
        let ext = loaded.program(Some("short_loop")).unwrap().clone();
        let mut runner = XdpRunner::new(ext, 0).unwrap();
        let r = runner.run(&mut packet(0, 64), RxInfo::default(), &mut FixedHost::new(7));
        assert_eq!(r.map_err(|f| *f), Ok(xdp_action::TX), "short_loop on {engine:?}");
    }
}

#[test]
fn a_long_loop_within_budget_finishes_and_beyond_it_is_stopped() {
    let obj = compile("runaway");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
        let ext = loaded.program(Some("by_length")).unwrap().clone();
        let mut runner = XdpRunner::new(ext, 0).unwrap().with_budget(Budget::UNLIMITED);
        let mut host = FixedHost::new(1);
        // 14-byte packet: 2,744 iterations, fine without a time limit.
        assert_eq!(
            runner.run(&mut packet(0, 14), RxInfo::default(), &mut host),
            Ok(xdp_action::TX)
        );
        let mut runner = runner.with_budget(Budget::default());
        let r = runner.run(&mut packet(0, 1500), RxInfo::default(), &mut host);
        assert!(
            matches!(r.as_ref().map_err(|f| &**f), Err(Fault::Budget { .. })),
            "{engine:?}: {r:?}"
        );
    }
}

/// A worker the OS preempts mid-invocation: its wall clock jumps 1 ms between two clock
/// checks while the thread itself runs 10 ns. Time not run is not charged: past the wall
/// budget the invocation gets the same budget again in the thread's CPU time.
struct Preempted {
    inner: FixedHost,
    cpu: u64,
}

impl spine_runtime::Host for Preempted {
    fn now_ns(&mut self) -> u64 {
        self.inner.now += 1_000_000;
        self.inner.now
    }
    fn thread_cpu_ns(&mut self) -> Option<u64> {
        self.cpu += 10;
        Some(self.cpu)
    }
    fn prandom_u32(&mut self) -> u32 {
        self.inner.prandom_u32()
    }
    fn trace(&mut self, cpu: usize, line: &[u8]) {
        self.inner.trace(cpu, line);
    }
}

#[test]
fn time_the_worker_did_not_run_is_not_charged_and_runaways_still_stop() {
    let obj = compile("runaway");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
        let ext = loaded.program(Some("by_length")).unwrap().clone();
        // 2,744 iterations, some 43 clock checks: every one past the wall budget, but
        // 430 ns of the thread's CPU time.
        let mut runner = XdpRunner::new(ext, 0).unwrap();
        let mut host = Preempted { inner: FixedHost::new(1), cpu: 0 };
        assert_eq!(
            runner.run(&mut packet(0, 14), RxInfo::default(), &mut host),
            Ok(xdp_action::TX),
            "{engine:?}: a preempted run that finishes is not stopped"
        );
        // Without a CPU clock the wall clock alone decides: the same run is stopped.
        let r = runner.run(&mut packet(0, 14), RxInfo::default(), &mut host.inner);
        assert!(matches!(r.as_ref().map_err(|f| &**f), Err(Fault::Budget { .. })), "{r:?}");
        // A runaway is stopped once it has run its budget of CPU time after the wall one.
        let ext = loaded.program(Some("forever")).unwrap().clone();
        let mut runner = XdpRunner::new(ext, 0).unwrap();
        let mut host = Preempted { inner: FixedHost::new(1), cpu: 0 };
        let r = runner.run(&mut packet(0, 64), RxInfo::default(), &mut host);
        assert!(matches!(r.as_ref().map_err(|f| &**f), Err(Fault::Budget { .. })), "{r:?}");
        let checks = host.cpu / 10;
        assert!(
            (1_000..=1_002).contains(&checks),
            "{engine:?}: stopped after {checks} clock checks past the wall budget"
        );
    }
}

#[test]
fn repeated_faults_detach_the_extension_and_other_traffic_keeps_flowing() {
    let policy = FaultPolicy { max_faults: 5, window_ns: 1_000_000_000 };
    let domain = Domain::new(DomainSpec { faults: policy, ..DomainSpec::default_domain() });
    let bad_obj = compile("runaway");
    let good_obj = compile("tenant");
    for engine in ENGINES {
        let bad = load(&bad_obj, engine, &domain).unwrap();
        let good = load(&good_obj, engine, &domain).unwrap();
        let mut bad_runner =
            XdpRunner::new(bad.program(Some("forever")).unwrap().clone(), 0).unwrap();
        let good_ext = good.program(Some("count")).unwrap().clone();
        let mut good_runner = XdpRunner::new(good_ext.clone(), 0).unwrap();
        let mut host = FixedHost::new(3);
        let mut passed = 0;
        for i in 0..20 {
            if bad_runner.is_attached() {
                let r = bad_runner.run(&mut packet(0, 64), RxInfo::default(), &mut host);
                assert!(r.is_err(), "packet {i}: the runaway program never finishes");
            }
            let r = good_runner.run(&mut packet(0, 64), RxInfo::default(), &mut host);
            assert_eq!(r, Ok(xdp_action::PASS));
            passed += 1;
        }
        assert!(
            !bad_runner.is_attached(),
            "{engine:?}: detached after {} faults",
            policy.max_faults
        );
        assert_eq!(bad_runner.extension().health().faults(), u64::from(policy.max_faults));
        assert_eq!(host.events.iter().filter(|e| e.starts_with("detached forever")).count(), 1);
        assert!(good_runner.is_attached());
        let count = good_ext.map("shared_count").unwrap();
        let mut v = [0u8; 8];
        count.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
        assert_eq!(
            u64::from_le_bytes(v),
            passed,
            "{engine:?}: every packet of the healthy extension counted"
        );
    }
}

#[test]
fn tail_calls_dispatch_and_stop_after_the_kernels_limit() {
    let obj = compile("tail");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
        let dispatch = loaded.program(Some("dispatch")).unwrap().clone();
        let mut runner = XdpRunner::new(dispatch.clone(), 0).unwrap();
        let mut host = FixedHost::new(1);
        let mut run = |first| runner.run(&mut packet(first, 64), RxInfo::default(), &mut host);
        assert_eq!(run(0), Ok(xdp_action::TX), "{engine:?}: slot 0 is `tx`");
        assert_eq!(run(3), Ok(xdp_action::DROP), "{engine:?}: an empty slot falls through");
        assert_eq!(run(200), Ok(xdp_action::DROP), "{engine:?}: out of range falls through");
        // Slot 1 tail-calls itself: 33 tail calls succeed (the first from dispatch), then
        // the 34th fails and the program returns.
        assert_eq!(run(1), Ok(xdp_action::PASS));
        let depth = dispatch.map("depth").unwrap();
        let mut v = [0u8; 8];
        depth.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
        assert_eq!(u64::from_le_bytes(v), u64::from(spine_runtime::MAX_TAIL_CALLS));
    }
}

#[test]
fn a_target_tail_called_from_a_callee_that_runs_away_is_stopped_and_blamed() {
    let obj = compile("tail");
    let mut faults = Vec::new();
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
        let via = loaded.program(Some("via_callee")).unwrap().clone();
        let spin = loaded.program(Some("spin")).unwrap().clone();
        let mut runner = XdpRunner::new(via.clone(), 0).unwrap();
        let mut host = FixedHost::new(3);
        let mut run = |first| runner.run(&mut packet(first, 64), RxInfo::default(), &mut host);
        assert_eq!(run(0), Ok(xdp_action::TX), "{engine:?}: `tx` returned through the callee");
        assert_eq!(run(3), Ok(50 + 3), "{engine:?}: an empty slot falls through");
        // Slot 1 tail-calls itself from its entry frame, nested under the callee.
        assert_eq!(run(1), Ok(xdp_action::PASS), "{engine:?}");
        let fault = run(2).map_err(|f| *f).expect_err("the watchdog stops `spin`");
        assert!(matches!(fault, Fault::Budget { .. }), "{engine:?}: {fault}");
        assert_eq!(spin.health().faults(), 1, "{engine:?}: counted against the target");
        assert_eq!(via.health().faults(), 0, "{engine:?}: not against its caller");
        faults.push(fault);
    }
    assert_eq!(faults[0], faults[1], "the same fault on both engines");
}

#[test]
fn dropping_the_object_empties_its_program_arrays() {
    let obj = compile("tail");
    let loaded = load(&obj, EngineKind::Jit, &Domain::default_domain()).unwrap();
    let dispatch = loaded.program(Some("dispatch")).unwrap().clone();
    drop(loaded);
    let mut runner = XdpRunner::new(dispatch, 0).unwrap();
    let r = runner.run(&mut packet(0, 64), RxInfo::default(), &mut FixedHost::new(1));
    assert_eq!(r, Ok(xdp_action::DROP), "the targets are gone, the dispatcher still runs");
}

#[test]
fn a_helper_outside_the_domain_is_refused_at_load_naming_it() {
    let obj = compile("tenant");
    let spec = DomainSpec {
        name: "strict".into(),
        helpers: Some(vec![helper::MAP_LOOKUP_ELEM]),
        ..DomainSpec::default_domain()
    };
    let err = load(&obj, EngineKind::Jit, &Domain::new(spec)).unwrap_err();
    let LoadError::Verify { program, error } = &err else { panic!("{err}") };
    assert_eq!(program, "stamp");
    assert!(matches!(error.kind, VerifyErrorKind::HelperNotAllowed { .. }), "{:?}", error.kind);
    assert!(err.to_string().contains("bpf_ktime_get_ns"), "{err}");
}

#[test]
fn maps_are_shared_by_name_within_a_domain_and_never_across() {
    let obj = compile("tenant");
    let shared = Domain::new(DomainSpec {
        shared_maps: vec!["shared_count".into()],
        ..DomainSpec::default_domain()
    });
    let other = Domain::default_domain();
    let a = load(&obj, EngineKind::Jit, &shared).unwrap();
    let b = load(&obj, EngineKind::Interpreter, &shared).unwrap();
    let c = load(&obj, EngineKind::Jit, &other).unwrap();
    let mut host = FixedHost::new(1);
    for l in [&a, &b, &c] {
        let mut r = XdpRunner::new(l.program(Some("count")).unwrap().clone(), 0).unwrap();
        assert_eq!(r.run(&mut packet(0, 64), RxInfo::default(), &mut host), Ok(xdp_action::PASS));
    }
    let read = |l: &LoadedObject| {
        let mut v = [0u8; 8];
        let m = l.program(Some("count")).unwrap().map("shared_count").unwrap().clone();
        m.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
        u64::from_le_bytes(v)
    };
    assert_eq!((read(&a), read(&b)), (2, 2), "one instance in the sharing domain");
    assert_eq!(read(&c), 1, "another domain's map is its own");
}

#[test]
fn quotas_refuse_oversized_programs_and_maps_naming_them() {
    let obj = compile("tenant");
    let tiny_maps = Domain::new(DomainSpec {
        name: "tiny".into(),
        quota: Quota { map_bytes: 4, insns: 1_000_000 },
        ..DomainSpec::default_domain()
    });
    let err = load(&obj, EngineKind::Jit, &tiny_maps).unwrap_err();
    assert!(
        matches!(&err, LoadError::Domain(DomainError::MapBytes { map, domain, .. }) if map == "shared_count" && domain == "tiny"),
        "{err}"
    );
    let tiny_code = Domain::new(DomainSpec {
        quota: Quota { map_bytes: 1 << 20, insns: 5 },
        ..DomainSpec::default_domain()
    });
    let err = load(&obj, EngineKind::Jit, &tiny_code).unwrap_err();
    assert!(matches!(err, LoadError::Domain(DomainError::Insns { quota: 5, .. })), "{err}");
}

#[test]
fn per_cpu_maps_give_each_worker_its_own_copy() {
    let obj = compile("percpu");
    for engine in ENGINES {
        let opts = LoadOptions { engine, ncpus: 3, ..LoadOptions::default() };
        let loaded = load_object(&obj, &opts).unwrap();
        let ext = loaded.program(None).unwrap().clone();
        let mut host = FixedHost::new(1);
        for (cpu, runs) in [(1usize, 5u64), (2, 2)] {
            let mut r = XdpRunner::new(ext.clone(), cpu).unwrap();
            for _ in 0..runs {
                assert_eq!(
                    r.run(&mut packet(0, 64), RxInfo::default(), &mut host),
                    Ok(xdp_action::PASS)
                );
            }
        }
        let hits = ext.map("hits").unwrap();
        let mut v = vec![0u8; hits.user_value_size()];
        hits.lookup_user(&2u32.to_le_bytes(), &mut v).unwrap();
        let per_cpu: Vec<u64> =
            v.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(per_cpu, vec![0, 5, 2], "{engine:?}: slots of CPUs 0, 1, 2");
        assert!(matches!(
            XdpRunner::new(ext.clone(), 3),
            Err(spine_runtime::RunnerError::Cpu { cpu: 3, .. })
        ));
    }
}

/// The monotonic clocks read the host's clock on both engines: the coarse one (at the
/// kernel's tick resolution, the same base) included.
#[test]
fn the_clock_helpers_read_the_hosts_monotonic_clock() {
    let obj = compile("clocks");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain()).unwrap();
        let ext = loaded.program(Some("clocks")).unwrap().clone();
        let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
        let mut host = FixedHost::new(7);
        let r = runner.run(&mut packet(0, 64), RxInfo::default(), &mut host).unwrap();
        assert_eq!(r, xdp_action::PASS);
        let seen = ext.map("seen").unwrap();
        let read = |k: u32| {
            let mut v = [0u8; 8];
            seen.lookup_user(&k.to_le_bytes(), &mut v).unwrap();
            u64::from_le_bytes(v)
        };
        let (mono, boot, coarse) = (read(0), read(1), read(2));
        assert!(mono > 0 && boot >= mono && coarse >= boot, "{engine:?}: {mono} {boot} {coarse}");
        // jiffies: the kernel's INITIAL_JIFFIES plus the host's clock in 4 ms ticks
        // (250 Hz); the fixed host's clock is at 4 µs. A second later: 250 ticks more.
        let (jiffies, tai) = (read(3), read(4));
        assert_eq!(jiffies, spine_runtime::INITIAL_JIFFIES, "{engine:?}");
        assert_eq!(spine_runtime::INITIAL_JIFFIES, 0xfffe_db08, "-300 * HZ as a u32");
        assert!(tai > coarse, "{engine:?}: TAI {tai} (the fixed host's TAI is its clock)");
        host.now += 1_000_000_000;
        runner.run(&mut packet(0, 64), RxInfo::default(), &mut host).unwrap();
        let later = read(3);
        assert_eq!(later - jiffies, spine_runtime::JIFFIES_HZ, "{engine:?}");
        assert!(read(4) >= tai + 1_000_000_000, "{engine:?}");
    }
}

/// The watchdog's countdown is compiled in only where a program has progress points
/// (backward jumps, counted bpf-to-bpf calls, callback helper calls): a bundled program
/// without any gets JIT code of the same size with the watchdog on and off, so the
/// watchdog costs it nothing whatever a noisy `spine bench exec` row says; one with
/// them gets the countdown.
#[test]
fn the_watchdog_adds_code_only_to_programs_with_progress_points() {
    let (mut with, mut without) = (0, 0);
    for b in spine_progs::all() {
        let obj = spine_obj::parse(b.object).expect("bundled object parses");
        let load = |watchdog| {
            let opts = LoadOptions { engine: EngineKind::Jit, watchdog, ..LoadOptions::default() };
            load_object(&obj, &opts).expect("bundled program loads").program(None).unwrap().clone()
        };
        let (on, off) = (load(true), load(false));
        let insns = on.insns();
        let points = spine_vm::counted_calls(insns).iter().any(|&c| c)
            || insns.iter().enumerate().any(|(pc, i)| {
                (i.is_helper_call() && spine_vm::is_callback_helper(i.imm as u32))
                    || (!i.is_local_call() && i.branch_target(pc).is_some_and(|t| t as usize <= pc))
            });
        let (a, b_len) = (on.native_code().unwrap().len(), off.native_code().unwrap().len());
        if points {
            with += 1;
            assert_ne!(a, b_len, "{}: progress points but no countdown code", b.name);
        } else {
            without += 1;
            assert_eq!(a, b_len, "{}: no progress point, yet the watchdog added code", b.name);
        }
    }
    assert!(with > 0 && without > 0, "bundled programs of both kinds ({with}, {without})");
}
