//! `bpf_timer` at run time, on both engines: the helpers' return codes, one-shot and
//! periodic timers fired by `XdpRunner::run_timers` against a fake clock, callbacks
//! given their element's key and value, timers freed with their element, and the
//! bound on callbacks per call.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spine_obj::Object;
use spine_runtime::{
    load_object, EngineKind, Extension, FixedHost, Frame, Geometry, LoadOptions, LoadedObject,
    RxInfo, TimerRun, XdpRunner, MAX_TIMERS_PER_CALL,
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

/// Handlers (and applets) have no runner that fires timers: they may not arm one.
#[test]
fn a_message_handler_may_not_arm_a_timer() {
    let obj = compile("timers_handler");
    let err = load_object(&obj, &LoadOptions::default()).expect_err("refused");
    let shown = err.to_string();
    assert!(shown.contains("bpf_timer_init#169 is not allowed"), "{shown}");
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
