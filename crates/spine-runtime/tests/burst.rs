//! A burst is a sequence of invocations: every frame of `XdpRunner::run_burst` ends
//! with exactly the verdict, bytes and bounds a single `run` of it gives, even when a
//! frame in the middle faults or runs out of budget, tail-calls, or moves its bounds.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spine_abi::xdp_action;
use spine_runtime::{
    load_object, Bounds, Budget, Domain, DomainSpec, EngineKind, Extension, FaultPolicy, FixedHost,
    Frame, Geometry, LoadOptions, LoadedObject, RxInfo, Verdict, XdpRunner,
};

/// 10 µs, the clock checked every 1,024 progress points: with the fixed host's clock
/// (1 µs per read) `by_length` finishes on 14 to 20 bytes and is stopped on 1,500.
const BUDGET: Budget = Budget { ns: 10_000, points: 1024 };

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

fn compile(name: &str) -> spine_obj::Object {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-burst-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = spine_progs::compile_c(&src, &dir.join(format!("{name}.o")), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    spine_obj::parse(&bytes).expect("parse")
}

fn load(obj: &spine_obj::Object, engine: EngineKind, domain: &Arc<Domain>) -> LoadedObject {
    load_object(obj, &LoadOptions { engine, domain: domain.clone(), ..LoadOptions::default() })
        .unwrap()
}

fn packet(first: u8, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
    p[0] = first;
    p
}

/// What a single run gives: the verdict as a burst reports it, and the metadata and
/// packet bytes (what `BPF_PROG_TEST_RUN` copies out).
fn single(r: &mut XdpRunner, p: &[u8], rx: RxInfo) -> (Verdict, Vec<u8>) {
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load(p).unwrap();
    let mut host = FixedHost::new(5);
    let v = match r.run(&mut f, rx, &mut host) {
        Ok(action) => Verdict::Action { action, redirect: r.redirect() },
        Err(_) => Verdict::Fault,
    };
    (v, f.meta_and_packet().to_vec())
}

/// Runs `packets` as one burst on `r` and checks each frame against a single run on
/// `fresh` (a second runner of the same program).
fn same_as_single(ext: &Arc<Extension>, packets: &[Vec<u8>], what: &str) -> Vec<Verdict> {
    let budget = BUDGET;
    let g = Geometry::TEST_RUN;
    let rx = RxInfo { ingress_ifindex: 4, rx_queue_index: 1 };
    let mut bufs: Vec<Vec<u8>> = packets
        .iter()
        .map(|p| {
            let mut b = vec![0u8; g.size];
            b[g.headroom..g.headroom + p.len()].copy_from_slice(p);
            b
        })
        .collect();
    let mut frames: Vec<(&mut [u8], Bounds)> = bufs
        .iter_mut()
        .zip(packets)
        .map(|(b, p)| {
            let at = g.headroom;
            (b.as_mut_slice(), Bounds { meta: at, data: at, end: at + p.len() })
        })
        .collect();
    let mut verdicts = vec![Verdict::default(); frames.len()];
    let mut burst_runner = XdpRunner::new(ext.clone(), 0).unwrap().with_budget(budget);
    let mut host = FixedHost::new(5);
    burst_runner.run_burst(&mut frames, &mut verdicts, g, rx, &mut host);
    let got: Vec<(Verdict, Vec<u8>)> = frames
        .iter()
        .zip(&verdicts)
        .map(|((b, bounds), v)| (*v, b[bounds.meta..bounds.end].to_vec()))
        .collect();
    let mut single_runner = XdpRunner::new(ext.clone(), 0).unwrap().with_budget(budget);
    for (i, p) in packets.iter().enumerate() {
        let (v, bytes) = single(&mut single_runner, p, rx);
        assert_eq!(got[i].0, v, "{what}: frame {i}: verdict");
        assert_eq!(got[i].1, bytes, "{what}: frame {i}: metadata and packet bytes");
    }
    verdicts
}

#[test]
fn a_burst_with_a_budget_fault_in_the_middle_matches_single_runs() {
    let obj = compile("runaway");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain());
        let ext = loaded.program(Some("by_length")).unwrap().clone();
        // Short frames finish (TX); 1,500 bytes run past the budget; the frames after it are unaffected.
        let packets = [packet(0, 14), packet(1, 1500), packet(2, 14), packet(3, 20)];
        let v = same_as_single(&ext, &packets, &format!("by_length {engine:?}"));
        let tx = Verdict::Action { action: xdp_action::TX, redirect: None };
        assert_eq!(v, [tx, Verdict::Fault, tx, tx], "{engine:?}");
    }
}

#[test]
fn tail_calls_are_counted_per_packet_within_a_burst() {
    let obj = compile("tail");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain());
        let ext = loaded.program(Some("dispatch")).unwrap().clone();
        // Slot 1 tail-calls itself up to the kernel's limit: if the count carried over
        // from one frame to the next, the second such frame would stop early.
        let packets = [packet(0, 64), packet(1, 64), packet(1, 64), packet(3, 64), packet(200, 64)];
        let v = same_as_single(&ext, &packets, &format!("tail {engine:?}"));
        let a = |action| Verdict::Action { action, redirect: None };
        assert_eq!(
            v,
            [
                a(xdp_action::TX),
                a(xdp_action::PASS),
                a(xdp_action::PASS),
                a(xdp_action::DROP),
                a(xdp_action::DROP)
            ],
            "{engine:?}"
        );
    }
}

#[test]
fn bundled_programs_give_the_same_bytes_in_a_burst() {
    // Programs that rewrite, grow and shrink packets (bounds move per frame).
    for name in ["vlan", "trim", "encap", "mac_swap", "rewrite"] {
        let Some(b) = spine_progs::get(name) else { panic!("bundled program {name}") };
        let obj = spine_obj::parse(b.object).expect("parse");
        for engine in ENGINES {
            let loaded = load(&obj, engine, &Domain::default_domain());
            let ext = loaded.program(None).unwrap().clone();
            let mut packets = Vec::new();
            for len in [60usize, 64, 128, 600, 14, 1400] {
                let mut p = packet(0, len);
                // An IPv4/UDP-looking header, so parsers take their long paths.
                if len >= 42 {
                    p[12] = 0x08;
                    p[13] = 0x00;
                    p[14] = 0x45;
                    p[23] = 17;
                }
                packets.push(p);
            }
            same_as_single(&ext, &packets, &format!("{name} {engine:?}"));
        }
    }
}

#[test]
fn a_fault_that_detaches_the_extension_stops_the_rest_of_the_burst() {
    let policy = FaultPolicy { max_faults: 2, window_ns: 1_000_000_000 };
    let domain = Domain::new(DomainSpec { faults: policy, ..DomainSpec::default_domain() });
    let obj = compile("runaway");
    for engine in ENGINES {
        let loaded = load(&obj, engine, &domain);
        let ext = loaded.program(Some("by_length")).unwrap().clone();
        let g = Geometry::TEST_RUN;
        let lens = [14usize, 1500, 14, 1500, 14, 14];
        let mut bufs: Vec<Vec<u8>> = lens.iter().map(|_| vec![0u8; g.size]).collect();
        let mut frames: Vec<(&mut [u8], Bounds)> = bufs
            .iter_mut()
            .zip(lens)
            .map(|(b, l)| {
                let h = g.headroom;
                (b.as_mut_slice(), Bounds { meta: h, data: h, end: h + l })
            })
            .collect();
        let mut verdicts = vec![Verdict::default(); frames.len()];
        let mut runner = XdpRunner::new(ext.clone(), 0).unwrap().with_budget(BUDGET);
        let mut host = FixedHost::new(5);
        runner.run_burst(&mut frames, &mut verdicts, g, RxInfo::default(), &mut host);
        let tx = Verdict::Action { action: xdp_action::TX, redirect: None };
        // The second fault detaches it: the frames after it are not run.
        assert_eq!(
            verdicts,
            [tx, Verdict::Fault, tx, Verdict::Fault, Verdict::Detached, Verdict::Detached],
            "{engine:?}"
        );
        assert!(!runner.is_attached());
        assert_eq!(ext.health().faults(), 2);
    }
}

/// What packet `first` of `leftovers.c` must come to, whatever ran before it.
fn leftover_verdict(first: u8) -> Verdict {
    let a = |action| Verdict::Action { action, redirect: None };
    match first {
        0 => Verdict::Action {
            action: xdp_action::REDIRECT,
            redirect: Some(spine_runtime::Redirect::Port { ifindex: 7 }),
        },
        1 => a(xdp_action::REDIRECT),
        2 => a(xdp_action::PASS),
        3 => Verdict::Fault,
        4 => a(xdp_action::DROP),
        _ => a(xdp_action::TX),
    }
}

/// The runner keeps its environment and the JIT its run context from one call to the
/// next: a redirect target, moved bounds, a watchdog fault, a tail-call count left by
/// one packet must never reach the next one, whether the packets come one call at a
/// time (`run`) or as one burst, and each must come out as on a fresh runner.
#[test]
fn nothing_one_packet_leaves_reaches_the_next_in_a_reused_runner() {
    let obj = compile("leftovers");
    // Each kind after each other kind, and twice in a row.
    let order: [u8; 16] = [0, 1, 2, 3, 4, 9, 0, 0, 3, 3, 1, 4, 4, 2, 2, 1];
    let packets: Vec<Vec<u8>> = order.iter().map(|&f| packet(f, 64)).collect();
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain());
        let ext = loaded.program(Some("leftovers")).unwrap().clone();
        let runs = ext.map("runs").unwrap().clone();
        let count = || {
            let mut v = [0u8; 8];
            runs.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
            u64::from_le_bytes(v)
        };
        // One call at a time on one runner, against a fresh runner per packet.
        let mut reused = XdpRunner::new(ext.clone(), 0).unwrap().with_budget(BUDGET);
        for (i, p) in packets.iter().enumerate() {
            let before = count();
            let (v, bytes) = single(&mut reused, p, RxInfo::default());
            let mut fresh = XdpRunner::new(ext.clone(), 0).unwrap().with_budget(BUDGET);
            let (fv, fbytes) = single(&mut fresh, p, RxInfo::default());
            let what = format!("{engine:?}: packet {i} (kind {})", p[0]);
            assert_eq!(v, leftover_verdict(p[0]), "{what}: verdict on the reused runner");
            assert_eq!((v, &bytes), (fv, &fbytes), "{what}: reused vs fresh runner");
            let expect_bytes = if p[0] == 2 { &p[4..] } else { &p[..] };
            assert_eq!(bytes, expect_bytes, "{what}: bytes");
            // 1 run and 33 tail calls, on each runner: a count carried over would stop
            // the reused runner's chain early.
            let expect_runs =
                if p[0] == 4 { 2 * (1 + u64::from(spine_runtime::MAX_TAIL_CALLS)) } else { 0 };
            assert_eq!(count() - before, expect_runs, "{what}: runs of the tail-call chain");
        }
        // All of them as one burst (and `same_as_single` checks each against a run).
        let v = same_as_single(&ext, &packets, &format!("leftovers {engine:?}"));
        let expected: Vec<Verdict> = order.iter().map(|&f| leftover_verdict(f)).collect();
        assert_eq!(v, expected, "{engine:?}: the burst's verdicts");
    }
}

/// The JIT's run context is bound to the runner's stack once per burst, and a packet's
/// run writes only its own countdown, abort flag and pointers there: a runner moved
/// between bursts (its fields at new addresses) still runs every packet of the next
/// burst as a fresh runner would, after bursts that left a fault, a tail-call chain and
/// a redirect target behind.
#[test]
fn a_runner_moved_between_bursts_runs_each_packet_as_its_own_invocation() {
    let obj = compile("leftovers");
    let g = Geometry::TEST_RUN;
    let bursts: [&[u8]; 3] = [&[3, 0, 4, 1], &[4, 3, 9, 1, 2, 0], &[1, 2, 3, 4, 0, 9]];
    for engine in ENGINES {
        let loaded = load(&obj, engine, &Domain::default_domain());
        let ext = loaded.program(Some("leftovers")).unwrap().clone();
        let mut runners: Vec<XdpRunner> =
            vec![XdpRunner::new(ext.clone(), 0).unwrap().with_budget(BUDGET)];
        for (n, kinds) in bursts.iter().enumerate() {
            // Move the runner to a new place before each burst.
            let runner = runners.pop().unwrap();
            let mut moved = Box::new(runner);
            let packets: Vec<Vec<u8>> = kinds.iter().map(|&f| packet(f, 64)).collect();
            let mut bufs: Vec<Vec<u8>> = packets
                .iter()
                .map(|p| {
                    let mut b = vec![0u8; g.size];
                    b[g.headroom..g.headroom + p.len()].copy_from_slice(p);
                    b
                })
                .collect();
            let mut frames: Vec<(&mut [u8], Bounds)> = bufs
                .iter_mut()
                .map(|b| {
                    (
                        b.as_mut_slice(),
                        Bounds { meta: g.headroom, data: g.headroom, end: g.headroom + 64 },
                    )
                })
                .collect();
            let mut verdicts = vec![Verdict::default(); frames.len()];
            let mut host = FixedHost::new(5);
            moved.run_burst(&mut frames, &mut verdicts, g, RxInfo::default(), &mut host);
            let expected: Vec<Verdict> = kinds.iter().map(|&f| leftover_verdict(f)).collect();
            assert_eq!(verdicts, expected, "{engine:?}: burst {n}");
            for (i, (p, (b, bounds))) in packets.iter().zip(&frames).enumerate() {
                let mut fresh = XdpRunner::new(ext.clone(), 0).unwrap().with_budget(BUDGET);
                let (_, fbytes) = single(&mut fresh, p, RxInfo::default());
                assert_eq!(
                    &b[bounds.meta..bounds.end],
                    &fbytes[..],
                    "{engine:?}: burst {n}, frame {i}"
                );
            }
            // The runner's last redirect is the last packet's own.
            let last = *expected.last().unwrap();
            let want = match last {
                Verdict::Action { redirect, .. } => redirect,
                _ => None,
            };
            assert_eq!(moved.redirect(), want, "{engine:?}: burst {n}: the last run's redirect");
            runners.push(*moved);
        }
    }
}
