//! `spine run … --socket` and the commands that speak to it, end to end on mem ports:
//! ext load → attach → traffic → map dump → ext replace → map update/lookup/delete →
//! ext detach → ext unload, with `--json`, and errors that name the object, map or key;
//! and the same on an AF_XDP port of a veth pair in a namespace.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{fails, json, ok, per_cpu_sum, Adapter, Dir};

fn spine(socket: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spine"))
        .args(args)
        .arg("--socket")
        .arg(socket)
        .output()
        .expect("run spine")
}

#[test]
fn extensions_and_maps_of_a_running_adapter_from_the_command_line() {
    let dir = Dir(std::env::temp_dir().join(format!("spine-ctl-cli-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let obj = common::fixture(&dir.0, "live");
    let cfg = dir.0.join("adapter.toml");
    std::fs::write(
        &cfg,
        "[adapter]\npin = false\n\n[[port]]\nname = \"wire\"\nkind = \"mem\"\nudp4 = { flows = 4 }\n",
    )
    .unwrap();
    let sock = dir.0.join("spine.sock");
    let child = Command::new(env!("CARGO_BIN_EXE_spine"))
        .args(["run", cfg.to_str().unwrap(), "--quiet", "--duration", "120", "--socket"])
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _adapter = Adapter(child);
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "the adapter never served its socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let obj = obj.to_str().unwrap();

    // Clients that ask and hang up before the answer: the adapter must not die of the
    // broken pipe (the `spine` binary restores SIGPIPE's default for its pipes).
    for _ in 0..20 {
        use std::io::Write;
        let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
        s.write_all(b"GET /v1/maps HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(json(spine(&sock, &["ext", "list", "--json"])), serde_json::json!([]));

    // Load; a program the verifier refuses prints its log and names the extension.
    let e = fails(spine(&sock, &["ext", "load", "bad", obj, "--section", "unchecked"]));
    assert!(e.contains("'bad'") && e.contains("verifier"), "{e}");
    let out = ok(spine(&sock, &["ext", "load", "a", obj, "--section", "version_a"]));
    assert!(out.contains("loaded 'a'"), "{out}");
    ok(spine(&sock, &["ext", "load", "b", obj, "--section", "version_b"]));
    let list = json(spine(&sock, &["ext", "list", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 2);

    ok(spine(&sock, &["ext", "attach", "a", "wire"]));
    let e = fails(spine(&sock, &["ext", "attach", "b", "wire"]));
    assert!(e.contains("port 'wire' already runs extension 'a'"), "{e}");
    // Traffic runs under a.
    loop {
        let d = json(spine(&sock, &["map", "dump", "a", "hits", "--json"]));
        let v = d["entries"][0]["value"].as_str().unwrap().to_string();
        if per_cpu_sum(&v) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = ok(spine(&sock, &["map", "dump", "a", "hits"]));
    assert!(text.contains("key: 00 00 00 00") && text.contains("Found 1 element"), "{text}");
    // Printed from the object's BTF too (`__type(key, __u32)`, a per-CPU `__u64`).
    assert!(text.contains(r#"{"key":0,"values":[{"cpu":0,"value":"#), "{text}");

    let out = ok(spine(&sock, &["ext", "replace", "wire", "b"]));
    assert!(out.contains("'a' replaced by 'b'"), "{out}");
    loop {
        let o = spine(&sock, &["map", "lookup", "b", "table", "7", "--json"]);
        if o.status.success() {
            assert_eq!(json(o)["value"], "01 00 00 00 00 00 00 00");
            break;
        }
        let e = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(e.contains("'table'") && e.contains("07 00 00 00"), "{e}");
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(spine(&sock, &["map", "update", "b", "table", "0x2a000000", "5"]));
    let out = ok(spine(&sock, &["map", "lookup", "b", "table", "42"]));
    assert!(out.contains("key: 2a 00 00 00  value: 05 00 00 00 00 00 00 00"), "{out}");
    let e = fails(spine(&sock, &["map", "update", "b", "table", "42", "6", "--flags", "noexist"]));
    assert!(e.contains("File exists") || e.contains("exists"), "{e}");
    ok(spine(&sock, &["map", "delete", "b", "table", "42"]));
    let e = fails(spine(&sock, &["map", "lookup", "b", "table", "42"]));
    assert!(e.contains("map 'table'") && e.contains("2a 00 00 00"), "{e}");
    // Lookup-and-delete: the value, then the entry is gone (ENOENT for a second one).
    ok(spine(&sock, &["map", "update", "b", "table", "43", "9"]));
    let out = ok(spine(&sock, &["map", "lookup-and-delete", "b", "table", "43"]));
    assert!(out.contains("key: 2b 00 00 00  value: 09 00 00 00 00 00 00 00  (deleted)"), "{out}");
    let e = fails(spine(&sock, &["map", "lookup-and-delete", "b", "table", "43"]));
    assert!(e.contains("map 'table'") && e.contains("2b 00 00 00"), "{e}");
    let e = fails(spine(&sock, &["map", "lookup-and-delete", "b", "table", "43", "--lock"]));
    assert!(e.contains("bpf_spin_lock"), "{e}");
    let e = fails(spine(&sock, &["map", "lookup", "b", "nosuchmap", "1"]));
    assert!(e.contains("'nosuchmap'"), "{e}");
    let maps = json(spine(&sock, &["map", "list", "--json"]));
    assert!(maps.as_array().unwrap().iter().any(|m| m["name"] == "table" && m["type"] == "hash"));

    // The workers publish their counters every ~100 ms.
    while json(spine(&sock, &["stats", "--json"]))["ports"][0]["rx_packets"] == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stats = json(spine(&sock, &["stats", "--json"]));
    assert_eq!(stats["ports"][0]["name"], "wire");
    let text = ok(spine(&sock, &["stats"]));
    assert!(text.contains("wire"), "{text}");
    let prom = ok(spine(&sock, &["stats", "--prometheus"]));
    assert!(prom.contains("spine_control_requests_total"), "{prom}");

    // A trace recorded while b runs: its runs are named, with their verdict.
    let e = fails(spine(&sock, &["trace", "stop"]));
    assert!(e.contains("no trace is running"), "{e}");
    ok(spine(&sock, &["trace", "start", "--events", "1024"]));
    let e = fails(spine(&sock, &["trace", "get"]));
    assert!(e.contains("still running"), "{e}");
    std::thread::sleep(Duration::from_millis(50));
    ok(spine(&sock, &["trace", "stop"]));
    let trace_file = dir.0.join("trace.json");
    ok(spine(&sock, &["trace", "get", "-o", trace_file.to_str().unwrap()]));
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&trace_file).unwrap()).unwrap();
    let runs: Vec<&serde_json::Value> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "extension")
        .collect();
    assert!(!runs.is_empty(), "the trace has runs");
    assert!(runs.iter().all(|e| e["name"] == "b" && e["args"]["verdict"] == "XDP_DROP"));

    let e = fails(spine(&sock, &["ext", "unload", "b"]));
    assert!(e.contains("'b' is attached to wire"), "{e}");
    let out = ok(spine(&sock, &["ext", "detach", "wire"]));
    assert!(out.contains("'b' detached"), "{out}");
    ok(spine(&sock, &["ext", "unload", "a"]));
    ok(spine(&sock, &["ext", "unload", "b"]));
    assert_eq!(json(spine(&sock, &["ext", "list", "--json"])), serde_json::json!([]));

    // A ring buffer's records, followed from the command line (`log_all` writes one
    // 24-byte record per frame), numbered from 1 without a gap across calls.
    let maps_obj = common::fixture(&dir.0, "maps");
    ok(spine(&sock, &["ext", "load", "log", maps_obj.to_str().unwrap(), "--section", "log_all"]));
    let e = fails(spine(&sock, &["log", "--ring", "log"]));
    assert!(e.contains("expected EXT/MAP"), "{e}");
    let e = fails(spine(&sock, &["log", "--ring", "log/lost"]));
    assert!(e.contains("'lost'") && e.contains("not a ring buffer"), "{e}");
    ok(spine(&sock, &["ext", "attach", "log", "wire"]));
    let mut seqs = Vec::new();
    while seqs.len() < 600 {
        for line in ok(spine(&sock, &["log", "--ring", "log/events"])).lines() {
            let r: serde_json::Value = serde_json::from_str(line).expect("one JSON object a line");
            assert_eq!((r["extension"].as_str(), r["map"].as_str()), (Some("log"), Some("events")));
            assert_eq!((r["len"].as_u64(), r["data"].as_str().map(str::len)), (Some(24), Some(48)));
            seqs.push(r["seq"].as_u64().unwrap());
        }
    }
    // Each call prints what the adapter keeps (the last 4,096, a page of 1,000), in order
    // and without a gap; the numbering carries on across calls.
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1 || w[1] <= w[0]), "{:?}", &seqs[..20]);
    assert!(seqs[0] >= 1);
    ok(spine(&sock, &["ext", "detach", "wire"]));
    ok(spine(&sock, &["ext", "unload", "log"]));
    let e = fails(spine(&dir.0.join("nothing.sock"), &["ext", "list"]));
    assert!(e.contains("nothing.sock"), "a missing socket is named: {e}");
}

/// The same life cycle on a veth pair: the adapter (`spine run … --socket` in a
/// namespace) runs an AF_XDP port on one end, frames are injected at the other, and
/// every injected frame is counted under the extension that ran it.
#[test]
fn extensions_on_a_veth_port_of_a_running_adapter_from_the_command_line() {
    use spine_testnet::netns::NetNs;
    use spine_testnet::raw::{frame, Raw};
    let Some(ns) = NetNs::new() else { return };
    ns.veth("cw0", "cw1");
    let dir = Dir(std::env::temp_dir().join(format!("spine-ctl-veth-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let obj = common::fixture(&dir.0, "live");
    let cfg = dir.0.join("adapter.toml");
    std::fs::write(
        &cfg,
        "[adapter]\nworkers = 1\npin = false\n\n[[port]]\nname = \"wire\"\nkind = \"afxdp\"\ninterface = \"cw0\"\n",
    )
    .unwrap();
    let sock = dir.0.join("spine.sock");
    let child = Command::new("ip")
        .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_spine"), "run"])
        .arg(&cfg)
        .args(["--quiet", "--duration", "120", "--socket"])
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _adapter = Adapter(child);
    let t0 = Instant::now();
    while !sock.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "the adapter never served its socket");
        std::thread::sleep(Duration::from_millis(20));
    }
    let obj = obj.to_str().unwrap();
    let hits = |ext: &str| {
        let d = json(spine(&sock, &["map", "dump", ext, "hits", "--json"]));
        per_cpu_sum(d["entries"][0]["value"].as_str().unwrap())
    };
    let inject = |from: u32, n: u32| {
        ns.enter(|| {
            let raw = Raw::bind("cw1");
            for i in from..from + n {
                raw.send(&frame(i, 64));
            }
        })
    };
    let wait_for = |what: &str, f: &dyn Fn() -> bool| {
        let t0 = Instant::now();
        while !f() {
            assert!(t0.elapsed() < Duration::from_secs(30), "{what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };

    ok(spine(&sock, &["ext", "load", "a", obj, "--section", "version_a"]));
    ok(spine(&sock, &["ext", "load", "b", obj, "--section", "version_b"]));
    ok(spine(&sock, &["ext", "attach", "a", "wire"]));
    inject(0, 100);
    wait_for("a counts the 100 frames", &|| hits("a") >= 100);
    let out = ok(spine(&sock, &["ext", "replace", "wire", "b"]));
    assert!(out.contains("'a' replaced by 'b'"), "{out}");
    inject(100, 50);
    wait_for("b counts the 50 frames", &|| hits("b") >= 50);
    // Only the injected frames reached the port (IPv6 is off in the namespace).
    assert_eq!((hits("a"), hits("b")), (100, 50), "each frame under exactly one version");
    assert_eq!(
        json(spine(&sock, &["map", "lookup", "b", "table", "7", "--json"]))["value"],
        "01 00 00 00 00 00 00 00"
    );
    let stats = json(spine(&sock, &["stats", "--json"]));
    assert_eq!(stats["ports"][0]["name"], "wire");
    ok(spine(&sock, &["ext", "detach", "wire"]));
    ok(spine(&sock, &["ext", "unload", "a"]));
    ok(spine(&sock, &["ext", "unload", "b"]));
    assert_eq!(json(spine(&sock, &["ext", "list", "--json"])), serde_json::json!([]));
}
