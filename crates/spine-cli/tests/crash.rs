//! `spine run` killed with SIGKILL leaves nothing attached to its interfaces: the AF_XDP
//! port holds its redirect program through a BPF link, which the kernel releases with
//! the process, so the next `spine run` on the same interface starts.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use spine_testnet::netns::NetNs;

/// `ip -d link show` of `dev` in `ns` mentions the redirect program.
fn attached(ns: &NetNs, dev: &str) -> bool {
    ns.ip(&format!("-d link show {dev}")).contains("spine_xsk")
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn spawn(ns: &NetNs, cfg: &std::path::Path) -> Child {
    Command::new("ip")
        .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_spine"), "run"])
        .arg(cfg)
        .args(["--duration", "60"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn spine run")
}

#[test]
fn kill_9_leaves_no_attachment_and_the_next_run_starts() {
    let Some(ns) = NetNs::new() else { return };
    ns.veth("k9a", "k9b");
    let dir = std::env::temp_dir().join(format!("spine-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("adapter.toml");
    std::fs::write(
        &cfg,
        "[adapter]\nworkers = 1\n\
         [[port]]\nname = \"wire\"\nkind = \"afxdp\"\ninterface = \"k9a\"\n\
         [[extension]]\nbundled = \"mac_swap\"\n\
         [[attach]]\nextension = \"mac_swap\"\nport = \"wire\"\n",
    )
    .unwrap();

    let mut first = spawn(&ns, &cfg);
    wait_until("the first run attached", || attached(&ns, "k9a"));
    first.kill().unwrap(); // SIGKILL: no destructor runs
    first.wait().unwrap();
    wait_until("the kernel released the link", || !attached(&ns, "k9a"));

    let mut second = spawn(&ns, &cfg);
    let pid = second.id().to_string();
    wait_until("the second run attached", || {
        if let Some(status) = second.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(second.stderr.as_mut().unwrap(), &mut err).unwrap();
            panic!("the second run stopped ({status}): {err}");
        }
        attached(&ns, "k9a")
    });
    let ok = Command::new("kill").args(["-INT", &pid]).status().unwrap().success();
    assert!(ok, "signal the second run");
    let out = second.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!attached(&ns, "k9a"), "a clean stop detaches too");
}
