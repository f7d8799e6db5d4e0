//! One adapter managed from another network namespace over the remote (TLS) API: two
//! namespaces joined by a veth pair; `spine run … --tls-listen` in one, the `spine`
//! commands with `--remote` in the other load, attach, replace, read maps and counters,
//! detach and unload. A wrong token, a plain `http://` URL and an untrusted certificate
//! are refused and change nothing.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use spine_testnet::netns::NetNs;

const TOKEN: &str = "remote-token-0123456789abcdef";

mod common;

use common::{fails, json, ok, per_cpu_sum, Adapter, Dir};

/// `spine ARGS` run inside namespace `ns`.
fn spine_in(ns: &NetNs, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_spine")])
        .args(args)
        .output()
        .expect("run spine")
}

#[test]
fn an_adapter_in_another_namespace_is_managed_over_tls() {
    let (Some(mgr), Some(node)) = (NetNs::new(), NetNs::new()) else { return };
    mgr.veth("mgr0", "node0");
    mgr.ip(&format!("link set node0 netns {}", node.name()));
    mgr.ip("addr add 10.77.0.1/24 dev mgr0");
    node.ip("addr add 10.77.0.2/24 dev node0");
    node.ip("link set node0 up");

    let dir = Dir(std::env::temp_dir().join(format!("spine-remote-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    // The node's certificates from `spine tls init`; another authority's beside them.
    let (node_dir, other_dir) = (dir.0.join("node"), dir.0.join("other"));
    for d in [&node_dir, &other_dir] {
        let o = Command::new(env!("CARGO_BIN_EXE_spine"))
            .args(["tls", "init", "--ip", "10.77.0.2", "--out"])
            .arg(d)
            .output()
            .unwrap();
        ok(o);
    }
    let p = spine_control::tls::Pki {
        ca: node_dir.join("ca.pem"),
        cert: node_dir.join("cert.pem"),
        key: node_dir.join("key.pem"),
    };
    let other_ca = other_dir.join("ca.pem");
    let token = dir.0.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).unwrap();
    let obj = common::fixture(&dir.0, "live");
    let cfg = dir.0.join("adapter.toml");
    std::fs::write(
        &cfg,
        "[adapter]\npin = false\n\n[[port]]\nname = \"wire\"\nkind = \"mem\"\nudp4 = { flows = 4 }\n",
    )
    .unwrap();
    let sock = dir.0.join("spine.sock");
    let child = Command::new("ip")
        .args(["netns", "exec", node.name(), env!("CARGO_BIN_EXE_spine")])
        .args(["run", cfg.to_str().unwrap(), "--quiet", "--duration", "120", "--socket"])
        .arg(&sock)
        .args(["--tls-listen", "10.77.0.2:7443", "--tls-cert"])
        .arg(&p.cert)
        .arg("--tls-key")
        .arg(&p.key)
        .arg("--token-file")
        .arg(&token)
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

    let url = "https://10.77.0.2:7443";
    let (ca, tok, obj) = (p.ca.to_str().unwrap(), token.to_str().unwrap(), obj.to_str().unwrap());
    let remote = |args: &[&str]| {
        let mut a = args.to_vec();
        a.extend(["--remote", url, "--token-file", tok, "--cacert", ca]);
        spine_in(&mgr, &a)
    };

    // Refused, and nothing changes: a wrong token, plain http, an untrusted certificate.
    let e = fails(spine_in(
        &mgr,
        &[
            "ext",
            "load",
            "x",
            obj,
            "--remote",
            url,
            "--token",
            "wrong-token-0123456789",
            "--cacert",
            ca,
        ],
    ));
    assert!(e.contains("bearer token"), "{e}");
    let e = fails(spine_in(
        &mgr,
        &["ext", "list", "--remote", "http://10.77.0.2:7443", "--token-file", tok, "--cacert", ca],
    ));
    assert!(e.contains("TLS only"), "{e}");
    let other_ca = other_ca.to_str().unwrap();
    let e = fails(spine_in(
        &mgr,
        &["ext", "list", "--remote", url, "--token-file", tok, "--cacert", other_ca],
    ));
    assert!(e.contains("TLS"), "{e}");
    let e = fails(spine_in(&mgr, &["ext", "list", "--remote", url, "--cacert", ca]));
    assert!(e.contains("--token"), "{e}");
    assert_eq!(json(remote(&["ext", "list", "--json"])), serde_json::json!([]));

    // Load, attach, traffic, maps, replace, counters, detach, unload — all remote.
    let out = ok(remote(&["ext", "load", "a", obj, "--section", "version_a"]));
    assert!(out.contains("loaded 'a'"), "{out}");
    ok(remote(&["ext", "load", "b", obj, "--section", "version_b"]));
    ok(remote(&["ext", "attach", "a", "wire"]));
    loop {
        let d = json(remote(&["map", "dump", "a", "hits", "--json"]));
        if per_cpu_sum(d["entries"][0]["value"].as_str().unwrap()) > 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = ok(remote(&["ext", "replace", "wire", "b"]));
    assert!(out.contains("'a' replaced by 'b'"), "{out}");
    loop {
        let o = remote(&["map", "lookup", "b", "table", "7", "--json"]);
        if o.status.success() {
            assert_eq!(json(o)["value"], "01 00 00 00 00 00 00 00");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ok(remote(&["map", "update", "b", "table", "42", "5"]));
    let out = ok(remote(&["map", "lookup", "b", "table", "42"]));
    assert!(out.contains("value: 05 00 00 00 00 00 00 00"), "{out}");
    while json(remote(&["stats", "--json"]))["ports"][0]["rx_packets"] == 0 {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The local socket sees what the remote side did.
    let local =
        json(spine_in(&node, &["ext", "list", "--json", "--socket", sock.to_str().unwrap()]));
    let names: Vec<&str> =
        local.as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b"]);
    let out = ok(remote(&["ext", "detach", "wire"]));
    assert!(out.contains("'b' detached"), "{out}");
    ok(remote(&["ext", "unload", "a"]));
    ok(remote(&["ext", "unload", "b"]));
    assert_eq!(json(remote(&["ext", "list", "--json"])), serde_json::json!([]));
}
