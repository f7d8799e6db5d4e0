//! The control API end to end on mem ports, through the client library: load → attach
//! → traffic → map dump → replace → detach → unload; hostile clients (malformed JSON,
//! unknown routes, oversize bodies, objects that fail to verify, clients that never
//! speak, more connections than allowed); and the socket's permissions.

use spine_testnet::daemons::TempDir;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::Duration;

use spine_adapter::{AdapterBuilder, AdapterOptions, Device, Running};
use spine_control::{serve, Client, ServerConfig};
use spine_ports::{MemPort, PoolConfig};

/// An object built from crates/spine-adapter/tests/fixtures/`name`.c, once.
fn fixture(name: &str, built: &'static OnceLock<Vec<u8>>) -> &'static [u8] {
    built.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../spine-adapter/tests/fixtures/{name}.c"));
        let dir = TempDir::new("fixture");
        spine_progs::compile_c(&src, &dir.join(&format!("{name}.o")), &[])
            .expect("clang builds the fixture")
    })
}

/// The adapter's live-management fixture.
fn live_object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    fixture("live", &OBJ)
}

/// The adapter's map fixture: `log_all` writes a 24-byte record per frame into ring
/// buffer `events`.
fn maps_object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    fixture("maps", &OBJ)
}

/// A queue `seen` that `push_seen` feeds with byte 14 of every frame.
fn queue_object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    fixture("queue", &OBJ)
}

fn frame(i: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x88, 0xb5, i];
    f.resize(60, 0xee);
    f
}

/// An adapter with one endless mem port, `wire`, and nothing attached.
fn adapter() -> Running {
    let frames: Vec<Vec<u8>> = (0..32).map(frame).collect();
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(1024), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let port = MemPort::replay("wire", &frames).unwrap();
    b.add_port("wire", Device::Mem { port, sink: false }, None).unwrap();
    b.build().unwrap().start().unwrap()
}

fn per_cpu_sum(v: &[u8]) -> u64 {
    v.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).sum()
}

#[test]
fn load_attach_traffic_dump_replace_detach_unload_through_the_client() {
    let dir = TempDir::new("e2e");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    assert_eq!(c.version().unwrap().api, "v1");
    let ports = c.ports().unwrap();
    assert_eq!((ports[0].name.as_str(), ports[0].extension.as_deref()), ("wire", None));
    assert_eq!(c.domains().unwrap()[0].name, "default");

    let a = c.load("a", live_object(), Some("version_a"), None).unwrap();
    assert_eq!((a.name.as_str(), a.program.as_str()), ("a", "version_a"));
    c.load("b", live_object(), Some("version_b"), Some("default")).unwrap();
    assert_eq!(c.extensions().unwrap().len(), 2);
    let att = c.attach("a", "wire").unwrap();
    assert_eq!((att.extension.as_deref(), att.previous), (Some("a"), None));
    assert_eq!(c.ports().unwrap()[0].extension.as_deref(), Some("a"));

    // Traffic runs under a: its counter grows.
    let zero = 0u32.to_le_bytes();
    while per_cpu_sum(&c.lookup("a", "hits", &zero).unwrap()) == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let dump = c.dump("a", "hits").unwrap();
    assert_eq!((dump.map.map_type.as_str(), dump.entries.len()), ("percpu_array", 1));
    assert_eq!(dump.entries[0].key, "00 00 00 00");
    assert!(c.maps().unwrap().iter().any(|m| m.extension == "b" && m.name == "table"));

    let r = c.replace("wire", "b").unwrap();
    assert_eq!((r.extension.as_deref(), r.previous.as_deref()), (Some("b"), Some("a")));
    // b marks key 7 of its table.
    let seven = 7u32.to_le_bytes();
    loop {
        match c.lookup("b", "table", &seven) {
            Ok(v) => break assert_eq!(v, 1u64.to_le_bytes()),
            Err(e) => {
                let api = e.api().expect("an API error");
                assert_eq!((api.kind.as_str(), api.errno), ("map", Some(2)), "{e}");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
    c.update("b", "table", &seven, &9u64.to_le_bytes(), 2).unwrap();
    c.update("b", "table", &1u32.to_le_bytes(), &3u64.to_le_bytes(), 0).unwrap();
    let first = c.next_key("b", "table", None).unwrap().expect("two keys");
    assert!(c.next_key("b", "table", Some(&first)).unwrap().is_some());
    c.delete("b", "table", &1u32.to_le_bytes()).unwrap();
    let e = c.delete("b", "table", &1u32.to_le_bytes()).unwrap_err();
    assert!(e.to_string().contains("'table'") && e.to_string().contains("01 00 00 00"), "{e}");
    assert_eq!(e.api().unwrap().errno, Some(2));

    // The counters are published by the workers every ~100 ms.
    while c.stats().unwrap().extension("b").unwrap().runs == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = c.stats().unwrap();
    assert!(stats.extension("a").unwrap().runs > 0, "a ran");
    let metrics = c.metrics().unwrap();
    assert!(metrics.contains("spine_port_rx_packets"));
    assert!(metrics.contains("spine_control_open_connections 1\n"), "this one: {metrics}");

    // Unload refuses while attached and names the port; detach, then unload.
    let e = c.unload("b", false).unwrap_err();
    assert_eq!(e.api().unwrap().kind, "attached");
    assert!(e.to_string().contains("wire"), "{e}");
    assert_eq!(c.detach("wire").unwrap().previous.as_deref(), Some("b"));
    c.unload("a", false).unwrap();
    c.unload("b", false).unwrap();
    assert!(c.extensions().unwrap().is_empty());
    let e = c.unload("a", false).unwrap_err();
    assert_eq!(e.api().unwrap().kind, "no_extension");
    assert!(e.to_string().contains("'a'"), "{e}");

    server.stop();
    assert!(!dir.join("spine.sock").exists(), "the socket is removed");
    let report = running.stop().unwrap();
    let w = report.totals.port("wire").unwrap();
    assert!(w.rx_packets > 0 && w.unhandled > 0 && w.verdicts.drop > 0);
}

#[test]
fn hostile_clients_get_clear_errors_and_others_are_still_served() {
    let dir = TempDir::new("hostile");
    let running = adapter();
    let mut cfg = ServerConfig::new(dir.join("spine.sock"));
    cfg.max_body = 1 << 20;
    cfg.header_timeout = Duration::from_millis(300);
    let server = serve(running.live(), cfg).unwrap();
    let mut c = Client::new(server.path());
    c.load("b", live_object(), Some("version_b"), None).unwrap();

    // Malformed JSON.
    let r =
        c.request("POST", "/v1/ports/wire/attach", Some(("application/json", b"{\"ext"))).unwrap();
    assert_eq!(r.status, 400);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["error"]["kind"], "bad_json", "{body}");
    // The right shape with a wrong field.
    let r = c
        .request("POST", "/v1/ports/wire/attach", Some(("application/json", b"{\"x\":1}")))
        .unwrap();
    assert_eq!(r.status, 400);
    // Unknown routes and methods.
    let r = c.request("GET", "/v1/frobnicate", None).unwrap();
    assert_eq!(r.status, 404);
    let body: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(body["error"]["kind"], "not_found");
    assert!(body["error"]["message"].as_str().unwrap().contains("/v1/frobnicate"));
    let r = c.request("PUT", "/v1/ports", None).unwrap();
    assert_eq!(r.status, 405);
    assert!(String::from_utf8_lossy(&r.body).contains("method_not_allowed"));
    // An oversize upload.
    let big = vec![0u8; 2 << 20];
    let r = c
        .request("POST", "/v1/extensions?name=big", Some(("application/octet-stream", &big)))
        .unwrap();
    assert_eq!(r.status, 413);
    assert!(String::from_utf8_lossy(&r.body).contains("too_large"));
    // Objects that fail to parse or to verify.
    let e = c.load("junk", b"\x7fELF but not really", None, None).unwrap_err();
    assert_eq!(e.api().unwrap().kind, "bad_object");
    assert!(e.to_string().contains("'junk'"));
    let e = c.load("bad", live_object(), Some("unchecked"), None).unwrap_err();
    let api = e.api().unwrap();
    assert_eq!(api.kind, "load_failed");
    assert!(api.message.contains("verifier"), "{}", api.message);
    assert!(api.log.as_deref().is_some_and(|l| !l.is_empty()), "the verifier's log comes back");
    // A map operation with a key of the wrong size.
    let e = c.lookup("b", "table", &[1]).unwrap_err();
    assert_eq!(e.api().unwrap().errno, Some(22));
    assert!(e.to_string().contains("'table'"));

    // A client that connects and never speaks is cut off, while others are served.
    let mut silent = UnixStream::connect(server.path()).unwrap();
    silent.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    assert_eq!(c.ports().unwrap().len(), 1, "served while the silent one waits");
    let mut buf = [0u8; 16];
    let n = silent.read(&mut buf).expect("closed by the server, not timed out here");
    assert_eq!(n, 0, "cut off without an answer");
    assert!(server.stats().idle_cut.load(Ordering::Relaxed) >= 1);
    assert_eq!(c.extensions().unwrap().len(), 1, "still serving");

    // A client that asks once and then sits on its kept-alive connection is cut off too.
    let mut idle = UnixStream::connect(server.path()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    std::io::Write::write_all(&mut idle, b"GET /v1/version HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = idle.read(&mut buf).expect("closed by the server, not timed out here");
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "answered, then closed");
    server.stop();
    running.stop().unwrap();
}

#[test]
fn a_thousand_connections_beyond_the_limit_are_refused_until_one_frees() {
    let dir = TempDir::new("many");
    let running = adapter();
    let mut cfg = ServerConfig::new(dir.join("spine.sock"));
    cfg.max_connections = 4;
    cfg.header_timeout = Duration::from_millis(500);
    let server = serve(running.live(), cfg).unwrap();
    // A thousand at once (and the server's side of each): room for them first.
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit write and read the struct passed.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_cur.max(4096.min(lim.rlim_max));
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
    let silent: Vec<UnixStream> =
        (0..1_000).map(|_| UnixStream::connect(server.path()).unwrap()).collect();
    // Every connection is accepted in order: ours comes after the silent ones, which
    // hold every slot until they are cut off.
    let mut c = Client::new(server.path());
    let mut refused = 0;
    let ports = loop {
        match c.ports() {
            Ok(p) => break p,
            Err(e) => {
                assert_eq!(e.api().expect("a JSON error").kind, "busy", "{e}");
                refused += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    assert_eq!(ports.len(), 1, "served once the silent ones were cut off");
    assert!(refused >= 1, "refused while every slot was held");
    assert!(server.stats().refused.load(Ordering::Relaxed) >= 996 - 4);
    drop(silent);
    drop(c);
    // Nothing leaks: every connection's descriptor is closed on the server's side too.
    let t0 = std::time::Instant::now();
    let open = || server.stats().open.load(Ordering::Relaxed);
    while open() > 0 && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open(), 0, "connections still open");
    assert!(server.stats().connections.load(Ordering::Relaxed) >= 1_001);
    server.stop();
    running.stop().unwrap();
}

#[test]
fn the_socket_is_owner_and_group_only() {
    let dir = TempDir::new("perm");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mode = std::fs::metadata(server.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o660);
    // A second server on the same socket is refused while the first serves.
    let e = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap_err();
    assert!(e.to_string().contains("another adapter"), "{e}");
    // A user outside the owner and group (nobody) cannot connect.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // The probe is this test binary, copied where that user can run it (the build
    // folder may sit under a home only root can enter).
    let probe = dir.join("probe");
    std::fs::copy(std::env::current_exe().unwrap(), &probe).unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::process::Command::new(&probe)
        .args(["--ignored", "--exact", "connect_probe", "--nocapture"])
        .env("SPINE_PROBE_SOCKET", server.path())
        .uid(65534)
        .gid(65534)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("probe: refused: permission denied"), "{text}");
    server.stop();
    running.stop().unwrap();
}

use std::os::unix::process::CommandExt;

/// Run by `the_socket_is_owner_and_group_only` as another user: tries the socket.
#[test]
#[ignore = "a helper, run as another user by the_socket_is_owner_and_group_only"]
fn connect_probe() {
    let path = std::env::var("SPINE_PROBE_SOCKET").expect("SPINE_PROBE_SOCKET");
    match UnixStream::connect(&path) {
        Ok(_) => println!("probe: connected"),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            println!("probe: refused: permission denied")
        }
        Err(e) => println!("probe: other error: {e}"),
    }
}

#[test]
fn ring_buffer_records_are_followed_by_sequence_and_none_is_lost() {
    let dir = TempDir::new("ring");
    let running = adapter();
    let live = running.live();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    c.load("log", maps_object(), Some("log_all"), None).unwrap();
    let kind = |e: spine_control::ClientError| e.api().expect("an API error").kind.clone();
    assert_eq!(kind(c.ring_since("log", "lost", 0).unwrap_err()), "not_ring");
    assert_eq!(kind(c.ring_since("log", "nope", 0).unwrap_err()), "no_map");
    assert!(c.ring_since("log", "events", 0).unwrap().records.is_empty(), "no traffic yet");
    c.attach("log", "wire").unwrap();
    let sent: Vec<Vec<u8>> = (0..32).map(frame).collect();
    let check = |r: &spine_adapter::RingRecord| {
        let b: Vec<u8> = (0..r.data.len() / 2)
            .map(|i| u8::from_str_radix(&r.data[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert_eq!(b.len(), 24, "struct event");
        assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 60);
        assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 10_000, "the mem port");
        assert!(sent.iter().any(|f| f[..16] == b[8..]), "a record of a frame that was sent");
    };
    // The ring holds 511 records and the port replays forever: the follower must keep
    // draining it (what it misses is counted in `lost` by the program, never skipped).
    let (mut after, mut records) = (0u64, 0u64);
    while records < 2500 {
        let page = c.ring_since("log", "events", after).unwrap();
        for r in &page.records {
            assert_eq!(r.seq, after + 1, "no record skipped or repeated");
            check(r);
            after = r.seq;
        }
        records += page.records.len() as u64;
        assert_eq!(page.next, after);
    }
    // Another follower starting later reads the history kept: the last 4,096 records,
    // numbered without a gap. Its request first drains what was committed since. The
    // program is detached first: with the producer still running, a drain of one page
    // may take more than the ring holds, and the history could have given way by then.
    c.detach("wire").unwrap();
    let from_start = c.ring_since("log", "events", 0).unwrap();
    let first = from_start.records.first().map(|r| r.seq).expect("a history");
    assert!((1..=after + 1).contains(&first), "history from {first}, read up to {after}");
    assert!(from_start.records.windows(2).all(|w| w[1].seq == w[0].seq + 1));
    // Detached, the ring holds at most 511 records the first follower did not read, and
    // a worker's burst in flight adds at most 32.
    if after + 511 + 32 <= 4096 {
        assert_eq!(first, 1, "nothing can have given way yet");
    }
    server.stop();
    let lost = running.extension("log").unwrap().map("lost").unwrap().clone();
    let report = running.stop().unwrap();
    // What the workers committed before stopping is still in the ring.
    let rest = live.ring_since("log", "events", after, usize::MAX).unwrap();
    for r in &rest.records {
        assert_eq!(r.seq, after + 1);
        check(r);
        after = r.seq;
    }
    let mut v = [0u8; 8];
    lost.lookup_user(&0u32.to_le_bytes(), &mut v).unwrap();
    let runs = report.totals.extension("log").unwrap().runs;
    assert_eq!(after + u64::from_le_bytes(v), runs, "every run followed or counted as lost");
}

/// A perf event array followed over the API: before a follower its slots hold no
/// reader and every sample is refused with ENOENT (as with no perf event in the slot);
/// once followed, samples of the worker's CPU arrive, in order, with their slot.
#[test]
fn perf_event_samples_are_followed_once_a_reader_opens_the_slots() {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    let dir = TempDir::new("perf");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    c.load("perf", fixture("perf_sample", &OBJ), Some("sample_all"), None).unwrap();
    c.attach("perf", "wire").unwrap();
    let refused = |c: &mut Client| {
        let v = c.lookup("perf", "refused", &2u32.to_le_bytes()).unwrap();
        u64::from_le_bytes(v[..8].try_into().unwrap())
    };
    let t0 = std::time::Instant::now();
    while refused(&mut c) == 0 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(10), "no ENOENT counted");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (mut after, mut got) = (0u64, 0usize);
    while got < 200 {
        let page = c.ring_since("perf", "samples", after).unwrap();
        for r in &page.records {
            assert_eq!(r.seq, after + 1, "no record skipped or repeated");
            assert_eq!(r.cpu, Some(0), "the one worker's slot");
            let b: Vec<u8> = (0..r.data.len() / 2)
                .map(|i| u8::from_str_radix(&r.data[2 * i..2 * i + 2], 16).unwrap())
                .collect();
            assert_eq!(b.len(), 8 + 16, "struct sample and 16 packet bytes");
            assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()), 0x5350_494e);
            assert_eq!(u32::from_le_bytes(b[4..8].try_into().unwrap()), 60, "the frame's length");
            assert_eq!(b[8..], frame(b[22])[..16], "the frame's first bytes");
            after = r.seq;
        }
        got += page.records.len();
        assert!(t0.elapsed() < std::time::Duration::from_secs(30), "samples stopped at {got}");
    }
    server.stop();
    running.stop().unwrap();
}

/// `struct flow` and `struct stats` of spine-difftest's btf_dump.c fixture, as bytes.
fn flow_key() -> Vec<u8> {
    let mut k = 0x0a00_0001u32.to_le_bytes().to_vec();
    k.extend_from_slice(&80u16.to_le_bytes());
    k.extend_from_slice(&[6, b'x']);
    k
}

#[test]
fn map_entries_print_from_the_objects_btf() {
    let dir = TempDir::new("btf");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../spine-difftest/tests/fixtures/btf_dump.c");
    let obj = spine_progs::compile_c(&src, &dir.join("btf_dump.o"), &[]).expect("clang");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    c.load("b", &obj, Some("keep"), None).unwrap();
    let info = c.map_info("b", "flows").unwrap();
    let mut v = vec![0u8; info.value_size as usize];
    v[..8].copy_from_slice(&7u64.to_le_bytes()); // packets
    v[8..12].copy_from_slice(&(-2i32).to_le_bytes()); // delta
    v[12] = 1; // up
    v[16..20].copy_from_slice(&2u32.to_le_bytes()); // color GREEN
    v[29..32].copy_from_slice(b"web"); // name
    c.update("b", "flows", &flow_key(), &v, 0).unwrap();
    let d = c.dump("b", "flows").unwrap();
    assert_eq!(d.entries.len(), 1);
    let f = d.entries[0].formatted.as_ref().expect("the map has BTF types");
    // A plain `char` is signed in clang's BTF, and bpftool prints it as a number.
    assert_eq!(
        f["key"],
        serde_json::json!({"addr": 167_772_161, "port": 80, "proto": 6, "tag": 120})
    );
    let val = &f["value"];
    assert_eq!(
        (&val["packets"], &val["delta"], &val["up"]),
        (&7.into(), &(-2).into(), &true.into())
    );
    assert_eq!((&val["color"], &val["name"]), (&"GREEN".into(), &"web".into()));
    // Per CPU: one value per CPU, the key printed once.
    c.update("b", "per_cpu", &1u32.to_le_bytes(), &flow_key(), 0).unwrap();
    let d = c.dump("b", "per_cpu").unwrap();
    let one = d.entries.iter().find(|e| e.key == "01 00 00 00").expect("key 1");
    let f = one.formatted.as_ref().expect("BTF types");
    assert_eq!(f["key"], 1);
    let values = f["values"].as_array().expect("per-CPU values");
    assert!(!values.is_empty());
    assert!(values.iter().enumerate().all(|(i, s)| s["cpu"] == i && s["value"]["port"] == 80));
    server.stop();
    running.stop().unwrap();
}

#[test]
fn a_ring_read_by_a_configured_output_is_not_followed() {
    let dir = TempDir::new("ring-owned");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    c.load("log", maps_object(), Some("log_all"), None).unwrap();
    // What `spine run` does for an `[[ringbuf]]` of the configuration.
    let _ring = running.ring_buffer("log", "events").unwrap();
    let e = c.ring_since("log", "events", 0).unwrap_err();
    let api = e.api().expect("an API error");
    assert_eq!(api.kind, "ring_owned", "{e}");
    assert!(api.message.contains("[[ringbuf]]"), "{e}");
    server.stop();
    running.stop().unwrap();
}

#[test]
fn the_log_follows_bpf_trace_printk_lines_by_sequence() {
    let dir = TempDir::new("log");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    assert!(c.log_since(0).unwrap().lines.is_empty(), "nothing printed yet");
    c.load("p", live_object(), Some("printer"), None).unwrap();
    c.attach("p", "wire").unwrap();
    let mut seen = Vec::new();
    let mut after = 0;
    while seen.len() < 3 {
        let page = c.log_since(after).unwrap();
        for l in &page.lines {
            assert!(l.seq > after, "sequence numbers grow");
            after = l.seq;
        }
        seen.extend(page.lines);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The mem port's ifindex is 10000 (the first virtual one).
    assert!(
        seen.iter().all(|l| l.kind == "trace" && l.text == "seen on ifindex 10000"),
        "{seen:?}"
    );
    assert!(c.log_since(u64::MAX - 1).unwrap().lines.is_empty());
    c.detach("wire").unwrap();
    server.stop();
    running.stop().unwrap();
}

/// Replaces the port's program 1,000 times through the API while traffic flows: each
/// packet counts into exactly one version's map, none is lost.
#[test]
fn replacement_through_the_api_under_load_loses_no_packet() {
    let dir = TempDir::new("replace");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    c.load("a", live_object(), Some("version_a"), None).unwrap();
    c.load("b", live_object(), Some("version_b"), None).unwrap();
    let zero = 0u32.to_le_bytes();
    // Packets before the first attach are unhandled; count from the attach on.
    c.attach("a", "wire").unwrap();
    // Each version runs at least once whatever the machine's speed: a before the
    // replacements, b after them.
    let ran = |c: &mut Client, ext: &str| {
        while per_cpu_sum(&c.lookup(ext, "hits", &zero).unwrap()) == 0 {
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    ran(&mut c, "a");
    for i in 0..1_000 {
        let (new, old) = if i % 2 == 0 { ("b", "a") } else { ("a", "b") };
        let r = c.replace("wire", new).unwrap();
        assert_eq!(r.previous.as_deref(), Some(old));
    }
    c.replace("wire", "b").unwrap();
    ran(&mut c, "b");
    c.detach("wire").unwrap();
    server.stop();
    // Read once every worker is done: a round under way finishes under its program.
    let live = running.live();
    let report = running.stop().unwrap();
    let ha = per_cpu_sum(&live.map_lookup("a", "hits", &zero).unwrap());
    let hb = per_cpu_sum(&live.map_lookup("b", "hits", &zero).unwrap());
    let w = report.totals.port("wire").unwrap();
    assert!(ha > 0 && hb > 0, "both versions ran: a {ha}, b {hb}");
    assert_eq!(ha + hb + w.unhandled, w.rx_packets, "each packet under one version or none");
    assert_eq!(w.verdicts.drop, ha + hb, "every packet a version saw was dropped by it");
    let t = &report.totals;
    assert_eq!(t.extension("a").unwrap().runs, ha);
    assert_eq!(t.extension("b").unwrap().runs, hb);
}

#[test]
fn a_hash_entry_is_looked_up_and_deleted_through_the_client() {
    let dir = TempDir::new("lookdel");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    // Not attached: user space alone writes its maps.
    c.load("b", live_object(), Some("version_b"), None).unwrap();
    let (k, v) = (42u32.to_le_bytes(), 0x1122_3344u64.to_le_bytes());
    c.update("b", "table", &k, &v, 0).unwrap();
    assert_eq!(c.lookup_and_delete("b", "table", &k, 0).unwrap(), v);
    // Gone: lookup and a second lookup-and-delete are ENOENT, naming the map and key.
    assert_eq!(c.lookup("b", "table", &k).unwrap_err().api().unwrap().errno, Some(2));
    let e = c.lookup_and_delete("b", "table", &k, 0).unwrap_err();
    assert_eq!(e.api().unwrap().errno, Some(2), "{e}");
    assert!(e.to_string().contains("'table'") && e.to_string().contains("2a 00 00 00"), "{e}");
    // The kernel's errnos: flags other than BPF_F_LOCK, and BPF_F_LOCK on a value with
    // no bpf_spin_lock, are EINVAL; a map type without the operation ENOTSUPP.
    c.update("b", "table", &k, &v, 0).unwrap();
    assert_eq!(
        c.lookup_and_delete("b", "table", &k, 1).unwrap_err().api().unwrap().errno,
        Some(22)
    );
    assert_eq!(
        c.lookup_and_delete("b", "table", &k, 4).unwrap_err().api().unwrap().errno,
        Some(22)
    );
    assert_eq!(c.lookup("b", "table", &k).unwrap(), v, "a refused call deletes nothing");
    let e = c.lookup_and_delete("b", "hits", &0u32.to_le_bytes(), 0).unwrap_err();
    assert_eq!(e.api().unwrap().errno, Some(524), "{e}");
    // pop stays for queues and stacks: on a hash map it is ENOTSUPP.
    assert_eq!(c.pop("b", "table").unwrap_err().api().unwrap().errno, Some(524));
}

#[test]
fn a_queue_is_pushed_peeked_and_popped_through_the_client() {
    let dir = TempDir::new("queue");
    let running = adapter();
    let server = serve(running.live(), ServerConfig::new(dir.join("spine.sock"))).unwrap();
    let mut c = Client::new(server.path());
    c.load("q", queue_object(), Some("push_seen"), None).unwrap();
    c.attach("q", "wire").unwrap();
    // Traffic pushes the frames' byte 14 (0..31, replayed endlessly).
    let got = loop {
        if let Some(v) = c.pop("q", "seen").unwrap() {
            break v;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert!(u64::from_le_bytes(got.clone().try_into().unwrap()) < 32, "{got:?}");
    // A second instance that no traffic reaches (its own maps): user space alone.
    c.load("u", queue_object(), Some("push_seen"), None).unwrap();
    assert_eq!(c.pop("u", "seen").unwrap(), None, "empty");
    let e = c.lookup("u", "seen", &[]).unwrap_err();
    assert_eq!(e.api().unwrap().errno, Some(2), "peek on an empty queue: {e}");
    // Update with an empty key pushes; lookup peeks; pop takes, oldest first.
    for v in [7u64, 8, 9] {
        c.update("u", "seen", &[], &v.to_le_bytes(), 0).unwrap();
    }
    assert_eq!(c.lookup("u", "seen", &[]).unwrap(), 7u64.to_le_bytes());
    assert_eq!(c.pop("u", "seen").unwrap(), Some(7u64.to_le_bytes().to_vec()));
    assert_eq!(c.pop("u", "seen").unwrap(), Some(8u64.to_le_bytes().to_vec()));
    // No keys: delete and get_next_key are EINVAL, as in the kernel.
    assert_eq!(c.delete("u", "seen", &[]).unwrap_err().api().unwrap().errno, Some(22));
    assert_eq!(c.next_key("u", "seen", None).unwrap_err().api().unwrap().errno, Some(22));
    // Full: a plain push is E2BIG, BPF_EXIST drops the oldest.
    for v in 0..7u64 {
        c.update("u", "seen", &[], &v.to_le_bytes(), 0).unwrap();
    }
    let e = c.update("u", "seen", &[], &99u64.to_le_bytes(), 0).unwrap_err();
    assert_eq!(e.api().unwrap().errno, Some(7), "{e}");
    c.update("u", "seen", &[], &99u64.to_le_bytes(), 2).unwrap();
    assert_eq!(
        c.pop("u", "seen").unwrap(),
        Some(0u64.to_le_bytes().to_vec()),
        "9, the oldest, went"
    );
    // Pop on a map that is no queue: ENOTSUPP, naming the map.
    c.load("b", live_object(), Some("version_b"), None).unwrap();
    let e = c.pop("b", "table").unwrap_err();
    assert!(e.to_string().contains("'table'"), "{e}");
    assert_eq!(e.api().unwrap().errno, Some(524), "{e}");
}
