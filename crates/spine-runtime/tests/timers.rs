//! `bpf_timer` at run time, on both engines: the helpers' return codes, one-shot and
//! periodic timers fired by `XdpRunner::run_timers` against a fake clock, callbacks
//! given their element's key and value, timers freed with their element, and the
//! bound on callbacks per call.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spine_obj::Object;
use spine_runtime::{
    load_object, Dest, Domain, DomainSpec, EngineKind, Extension, FixedHost, Frame, Geometry,
    LoadOptions, LoadedObject, RxInfo, TimerRun, XdpRunner, MAX_TIMERS_PER_CALL,
};

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

/// Byte offsets in `struct elem` (timers.c).
const FIRED: usize = 0;
const CB_RC: usize = 32;
const KEY_SEEN: usize = 40;
const RC: usize = 48;
const ELEM: usize = RC + 12 * 8;

fn compile(name: &str) -> Object {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-timers-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = spine_progs::compile_c(&src, &dir.join(format!("{name}.o")), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    spine_obj::parse(&bytes).expect("parse")
}

fn load(engine: EngineKind) -> LoadedObject {
    let obj = compile("timers");
    load_object(&obj, &LoadOptions { engine, ncpus: 2, ..LoadOptions::default() }).expect("load")
}

/// A host whose clock stands at `now` until a test moves it.
fn host(now: u64) -> FixedHost {
    FixedHost { now, step: 0, ..FixedHost::new(1) }
}

fn send(runner: &mut XdpRunner, host: &mut FixedHost, cmd: u8) {
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load(&[cmd; 64]).unwrap();
    assert_eq!(runner.run(&mut f, RxInfo::default(), host), Ok(2), "XDP_PASS");
}

fn word(ext: &Arc<Extension>, map: &str, key: u32, off: usize) -> i64 {
    let mut v = vec![0u8; ELEM];
    ext.map(map).unwrap().lookup_user(&key.to_ne_bytes(), &mut v).expect("element");
    i64::from_ne_bytes(v[off..off + 8].try_into().unwrap())
}

/// Moves the clock to `now` and fires what is due.
fn tick(runner: &mut XdpRunner, host: &mut FixedHost, now: u64) -> TimerRun {
    host.now = now;
    runner.run_timers(now, host)
}

#[test]
fn helpers_return_the_kernels_codes() {
    const EINVAL: i64 = -22;
    const EBUSY: i64 = -16;
    for engine in ENGINES {
        let loaded = load(engine);
        let ext = loaded.program(Some("rcs")).unwrap().clone();
        let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
        let mut h = host(1_000);
        send(&mut runner, &mut h, 0);
        let rc: Vec<i64> = (0..12).map(|i| word(&ext, "timers", 1, RC + 8 * i)).collect();
        assert_eq!(
            rc,
            [EINVAL, EINVAL, 0, EBUSY, EINVAL, 0, EINVAL, 0, 0, 0, 1, EINVAL],
            "{engine:?}"
        );
        assert_eq!(tick(&mut runner, &mut h, u64::MAX).fired, 0, "cancelled: nothing fires");
    }
}

#[test]
fn a_one_shot_timer_fires_once_when_due_with_its_key_and_value() {
    for engine in ENGINES {
        let loaded = load(engine);
        let ext = loaded.program(Some("arm")).unwrap().clone();
        let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
        let mut other_cpu = XdpRunner::new(ext.clone(), 1).unwrap();
        let mut h = host(1_000);
        send(&mut runner, &mut h, 1);
        assert_eq!(tick(&mut runner, &mut h, 1_999), TimerRun::default(), "not yet");
        assert_eq!(tick(&mut other_cpu, &mut h, 2_000).fired, 0, "armed on CPU 0");
        assert_eq!(tick(&mut runner, &mut h, 2_000), TimerRun { fired: 1, faults: 0 });
        assert_eq!(word(&ext, "timers", 0, FIRED), 1, "{engine:?}");
        assert_eq!(word(&ext, "timers", 0, KEY_SEEN), 0);
        assert_eq!(word(&ext, "timers", 0, CB_RC), -35, "-EDEADLK from its own callback");
        assert_eq!(tick(&mut runner, &mut h, 1 << 40).fired, 0, "one-shot");
        assert_eq!(word(&ext, "timers", 0, FIRED), 1);
        assert_eq!(ext.health().faults(), 0);
    }
}

#[test]
fn a_periodic_timer_fires_each_period_until_cancelled() {
    for engine in ENGINES {
        let loaded = load(engine);
        let ext = loaded.program(Some("arm")).unwrap().clone();
        let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
        let mut h = host(1_000);
        send(&mut runner, &mut h, 2);
        for (now, fired) in [(1_499, 0), (1_500, 1), (1_999, 1), (2_000, 2), (2_600, 3)] {
            tick(&mut runner, &mut h, now);
            assert_eq!(word(&ext, "timers", 0, FIRED), fired, "{engine:?} at {now}");
        }
        send(&mut runner, &mut h, 3);
        assert_eq!(word(&ext, "timers", 0, CB_RC), 1, "cancelled an armed timer");
        assert_eq!(tick(&mut runner, &mut h, 1 << 40).fired, 0);
        assert_eq!(word(&ext, "timers", 0, FIRED), 3);
    }
}

#[test]
fn a_callback_that_rearms_at_once_runs_a_bounded_number_of_times_per_call() {
    for engine in ENGINES {
        let loaded = load(engine);
        let ext = loaded.program(Some("arm")).unwrap().clone();
        let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
        let mut h = host(1_000);
        send(&mut runner, &mut h, 4);
        let run = tick(&mut runner, &mut h, 2_000);
        assert_eq!(run.fired as usize, MAX_TIMERS_PER_CALL, "{engine:?}");
        assert_eq!(word(&ext, "timers", 0, FIRED), MAX_TIMERS_PER_CALL as i64);
        assert_eq!(tick(&mut runner, &mut h, 2_000).fired as usize, MAX_TIMERS_PER_CALL);
    }
}

#[test]
fn timers_go_with_their_elements() {
    for engine in ENGINES {
        let loaded = load(engine);
        let arm = loaded.program(Some("arm")).unwrap().clone();
        let mut runner = XdpRunner::new(arm.clone(), 0).unwrap();
        let mut h = host(1_000);
        // A user-space update of the value frees its timer, whatever it writes over it.
        send(&mut runner, &mut h, 2);
        let timers = arm.map("timers").unwrap();
        timers.update_user(&0u32.to_ne_bytes(), &[0xff; ELEM], 0).unwrap();
        assert_eq!(tick(&mut runner, &mut h, 1 << 40).fired, 0, "{engine:?}");

        // A timer in a hash value fires with its key, and goes when the key is deleted.
        let hash = loaded.program(Some("arm_hash")).unwrap().clone();
        let mut hrunner = XdpRunner::new(hash.clone(), 0).unwrap();
        send(&mut hrunner, &mut h, 0);
        let due = h.now + 100;
        assert_eq!(tick(&mut hrunner, &mut h, due).fired, 1);
        assert_eq!(word(&hash, "htimers", 3, KEY_SEEN), 3);
        send(&mut hrunner, &mut h, 0);
        hash.map("htimers").unwrap().delete_user(&3u32.to_ne_bytes()).unwrap();
        assert_eq!(tick(&mut hrunner, &mut h, 1 << 40).fired, 0);
    }
}

/// `timers_handler.c` loaded into a domain granting what it calls.
fn load_handler(engine: EngineKind) -> LoadedObject {
    let obj = compile("timers_handler");
    let names: Vec<String> = [
        "map_lookup_elem",
        "spine_msg_send",
        "timer_init",
        "timer_set_callback",
        "timer_start",
        "timer_cancel",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    let domain =
        Domain::new(DomainSpec { name: "t".into(), helpers, ..DomainSpec::default_domain() });
    load_object(&obj, &LoadOptions { engine, domain, ncpus: 2, ..LoadOptions::default() })
        .expect("a handler and an applet may arm timers")
}

/// Fires what is due at `now` one callback at a time (as the adapter's workers do),
/// collecting each callback's messages: (endpoint, handler, payload).
fn fire_all(runner: &mut XdpRunner, h: &mut FixedHost, now: u64) -> Vec<(u32, u8, Vec<u8>)> {
    h.now = now;
    let mut sent = Vec::new();
    while let Some(r) = runner.run_next_timer(now, h) {
        assert_eq!(r, Ok(0), "the callback returns 0");
        for m in runner.outbox() {
            let Dest::Endpoint(e) = m.to else { panic!("a send, not a post") };
            sent.push((e, m.handler, m.payload().to_vec()));
        }
    }
    sent
}

/// An active-message handler arms a one-shot timer and a periodic one that stops itself
/// after 4 runs; each run of the callback (which has no ctx) sends a message to the
/// endpoint that armed it. Fired one at a time against a fake clock: exactly one
/// message from the one-shot, exactly 4 from the periodic one, nothing after.
#[test]
fn a_handlers_timer_callback_sends_messages_one_shot_and_periodic() {
    for engine in ENGINES {
        let loaded = load_handler(engine);
        let handler = loaded.handlers[0].clone();
        assert!(handler.has_timers(), "{engine:?}");
        let mut r = XdpRunner::new(handler, 1).unwrap();
        let mut h = host(10_000);
        let arm = |r: &mut XdpRunner, h: &mut FixedHost, slot: u8, runs: u8| {
            let mut f = Frame::new(Geometry::TEST_RUN);
            f.load_message(&[slot, runs]).unwrap();
            assert_eq!(r.run_message(&mut f, 42, h), Ok(0), "{engine:?}: armed");
        };
        arm(&mut r, &mut h, 0, 1);
        assert!(fire_all(&mut r, &mut h, 10_000).is_empty(), "{engine:?}: not due yet");
        let mut got = Vec::new();
        for step in 1..20u64 {
            got.extend(fire_all(&mut r, &mut h, 20_000 + step * 5_000));
        }
        assert_eq!(got, [(42, 3, vec![0, 1])], "{engine:?}: the one-shot fired once");
        arm(&mut r, &mut h, 1, 4);
        let mut got = Vec::new();
        for step in 1..40u64 {
            got.extend(fire_all(&mut r, &mut h, 200_000 + step * 5_000));
        }
        let want: Vec<_> = (1..=4u8).map(|n| (42, 3, vec![1, n])).collect();
        assert_eq!(got, want, "{engine:?}: the periodic one ran 4 times, then stopped");
    }
}

/// A timer fires only on the CPU that armed it: another worker's runner of the same
/// handler never runs it.
#[test]
fn a_handlers_timer_fires_on_the_worker_that_armed_it() {
    let loaded = load_handler(EngineKind::Interpreter);
    let handler = loaded.handlers[0].clone();
    let mut on0 = XdpRunner::new(handler.clone(), 0).unwrap();
    let mut on1 = XdpRunner::new(handler, 1).unwrap();
    let mut h = host(0);
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load_message(&[2, 1]).unwrap();
    assert_eq!(on1.run_message(&mut f, 7, &mut h), Ok(0));
    assert!(fire_all(&mut on0, &mut h, u64::MAX / 2).is_empty(), "not worker 0's");
    assert_eq!(fire_all(&mut on1, &mut h, u64::MAX / 2), [(7, 3, vec![2, 1])]);
}

/// The watchdog detached the extension: its timers are cancelled (nothing stays
/// armed), and its callbacks run no more.
#[test]
fn a_detached_extensions_timers_are_cancelled() {
    let loaded = load_handler(EngineKind::Interpreter);
    let handler = loaded.handlers[0].clone();
    let map = handler.map("timers").unwrap().clone();
    let mut r = XdpRunner::new(handler.clone(), 0).unwrap();
    let mut h = host(0);
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load_message(&[0, 5]).unwrap();
    assert_eq!(r.run_message(&mut f, 7, &mut h), Ok(0));
    assert!(map.timers().unwrap().next_expiry().is_some(), "armed");
    handler.health().detach();
    assert!(r.run_next_timer(u64::MAX / 2, &mut h).is_none(), "detached: nothing runs");
    assert_eq!(map.timers().unwrap().next_expiry(), None, "and nothing stays armed");
}

/// An endpoint applet (an XDP program in all but name) arms timers the same way.
#[test]
fn an_applets_timer_callback_sends_messages() {
    let loaded = load_handler(EngineKind::Jit);
    let applet = loaded.applets[0].clone();
    let mut r = XdpRunner::new(applet, 0).unwrap();
    let mut h = host(0);
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load(&[3, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).unwrap();
    let rx = RxInfo { ingress_ifindex: 1, rx_queue_index: 9 };
    assert_eq!(r.run(&mut f, rx, &mut h), Ok(1), "XDP_DROP");
    let mut got = Vec::new();
    for step in 1..20u64 {
        got.extend(fire_all(&mut r, &mut h, step * 5_000));
    }
    assert_eq!(got, [(9, 4, vec![3, 1]), (9, 4, vec![3, 2])]);
}

/// A map may outlive the extension that armed its timers (a domain's shared map): the
/// extension's timers are cancelled when it goes, since nothing would fire them.
#[test]
fn an_extensions_timers_are_cancelled_when_it_goes() {
    let loaded = load(EngineKind::Interpreter);
    let ext = loaded.program(Some("arm")).unwrap().clone();
    let map = ext.map("timers").unwrap().clone();
    let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
    let mut h = host(1_000);
    send(&mut runner, &mut h, 2);
    assert_eq!(map.timers().unwrap().next_expiry(), Some(1_500));
    drop((runner, ext, loaded));
    assert_eq!(map.timers().unwrap().next_expiry(), None);
}
