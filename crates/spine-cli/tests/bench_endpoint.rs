//! `spine bench endpoint` carries messages on every path it measures: a short run (its
//! timings are printed, never checked) must report each path at each size it carries,
//! leave out what a path cannot carry, and (as root) include the two veth paths and
//! leave no namespace behind.

use std::process::Command;

#[test]
fn every_path_carries_the_messages_it_reports() {
    let out = Command::new(env!("CARGO_BIN_EXE_spine"))
        .args(["bench", "endpoint", "--count", "20", "--sizes", "64,4000", "--json"])
        .output()
        .expect("run spine");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let rows = v["rows"].as_array().expect("rows");
    let has = |path: &str, bytes: u64| {
        rows.iter().any(|r| {
            r["path"].as_str().is_some_and(|p| p.starts_with(path))
                && r["bytes"] == bytes
                && r["median_us"].as_f64().is_some_and(|m| m > 0.0)
                && r["msgs_per_s"].as_f64().is_some_and(|m| m > 0.0)
        })
    };
    for path in ["spine endpoint", "kernel UDP loopback, busy", "spine, two adapters over a UDP"] {
        assert!(has(path, 64) && has(path, 4000), "{path}: {rows:?}");
    }
    use std::os::unix::fs::MetadataExt as _;
    let root = std::fs::metadata("/proc/self").expect("/proc/self").uid() == 0;
    if !root {
        assert!(v["not_measured"][0].as_str().is_some_and(|s| s.contains("veth")), "{v}");
        return;
    }
    for path in ["spine, two adapters over a veth", "AF_XDP sockets over the same veth"] {
        assert!(has(path, 64), "{path}: {rows:?}");
        assert!(!has(path, 4000), "{path}: 4,000 bytes exceed the veth's MTU: {rows:?}");
    }
    assert!(v["spine_over_kernel_busy"][0]["veth_over_af_xdp_median_ratio"].is_f64(), "{v}");
    let ns = Command::new("ip").args(["netns", "list"]).output().expect("ip");
    let left = String::from_utf8_lossy(&ns.stdout);
    assert!(!left.contains("spine-be"), "the bench's namespace was left: {left}");
}
