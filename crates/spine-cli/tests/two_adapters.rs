//! Two adapters, each a `spine run` in a network namespace of its own, form one network
//! for endpoints: joined by a veth pair (an AF_XDP port on each end) and by a UDP tunnel
//! (a `udp` port on each side, over a second veth pair with addresses). An application on
//! adapter A sends frames of many sizes through its endpoints; the application on adapter
//! B echoes what its endpoints receive; every frame comes back to A exactly, on both
//! links, and each adapter counts what crossed its ports.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use spine_client::{Channel, Endpoint};
use spine_testnet::netns::NetNs;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `spine run` in a namespace, stopped with Ctrl-C when dropped.
struct Adapter {
    child: Child,
    sock: PathBuf,
}

impl Adapter {
    fn start(ns: &NetNs, dir: &Path, name: &str, config: &str) -> Adapter {
        let cfg = dir.join(format!("{name}.toml"));
        std::fs::write(&cfg, config).unwrap();
        let sock = dir.join(format!("{name}.sock"));
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_spine"), "run"])
            .arg(&cfg)
            .args(["--quiet", "--duration", "120", "--socket"])
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut a = Adapter { child, sock };
        let t0 = Instant::now();
        while !a.sock.exists() {
            if let Ok(Some(st)) = a.child.try_wait() {
                let mut err = String::new();
                use std::io::Read as _;
                let _ = a.child.stderr.take().unwrap().read_to_string(&mut err);
                panic!("adapter {name} exited ({st}): {err}");
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "adapter {name} never served");
            std::thread::sleep(Duration::from_millis(20));
        }
        a
    }

    /// Opens an endpoint for UDP/IPv4 to `dst_port` on `port` and waits until the
    /// adapter's worker serves it.
    fn endpoint(&self, port: &str, dst_port: u16) -> Endpoint {
        let ep = Endpoint::open(&self.sock, &Channel::udp4(port, dst_port)).unwrap();
        let mut api = spine_control::Client::new(&self.sock);
        let t0 = Instant::now();
        while !api.endpoints().unwrap().iter().all(|e| e.served) {
            assert!(t0.elapsed() < Duration::from_secs(10), "the endpoint was never served");
            std::thread::sleep(Duration::from_millis(5));
        }
        ep
    }

    /// Packets received and sent on `port`, from `spine stats`.
    fn counts(&self, port: &str) -> (u64, u64) {
        let out = Command::new(env!("CARGO_BIN_EXE_spine"))
            .args(["stats", "--json", "--socket"])
            .arg(&self.sock)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let p = v["ports"].as_array().unwrap().iter().find(|p| p["name"] == port).unwrap();
        (p["rx_packets"].as_u64().unwrap(), p["tx_packets"].as_u64().unwrap())
    }
}

impl Drop for Adapter {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.child.id().to_string()]).status();
        let _ = self.child.wait();
    }
}

/// An Ethernet/IPv4/UDP frame to `dst_port` carrying `len` bytes numbered `i`.
fn frame(i: u32, dst_port: u16, len: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = [0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 91, 0, 1, 10, 91, 0, 2];
    ip[2..4].copy_from_slice(&((len + 28) as u16).to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&5000u16.to_be_bytes());
    f.extend_from_slice(&dst_port.to_be_bytes());
    f.extend_from_slice(&((len + 8) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&i.to_le_bytes());
    f.extend((4..len).map(|k| (k as u32 ^ i) as u8));
    f
}

const N: u32 = 60;

#[test]
fn endpoints_on_two_adapters_in_two_namespaces_over_veth_and_a_tunnel() {
    let (Some(a_ns), Some(b_ns)) = (NetNs::new(), NetNs::new()) else { return };
    // The wire: AF_XDP on both ends. The tunnel's link: addresses, no XDP.
    a_ns.veth("tw0", "tw1");
    a_ns.veth("tt0", "tt1");
    for end in ["tw1", "tt1"] {
        a_ns.ip(&format!("link set {end} netns {}", b_ns.name()));
        b_ns.ip(&format!("link set {end} up"));
    }
    a_ns.ip("addr add 10.90.0.1/24 dev tt0");
    b_ns.ip("addr add 10.90.0.2/24 dev tt1");
    let dir = Dir(std::env::temp_dir().join(format!("spine-two-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let config = |wire: &str, me: &str, peer: &str| {
        format!(
            "[adapter]\nworkers = 1\npin = false\n\n\
             [[port]]\nname = \"wire\"\nkind = \"afxdp\"\ninterface = \"{wire}\"\n\n\
             [[port]]\nname = \"tun\"\nkind = \"udp\"\nlocal = \"{me}:7300\"\npeer = \"{peer}:7300\"\n"
        )
    };
    let a = Adapter::start(&a_ns, &dir.0, "a", &config("tw0", "10.90.0.1", "10.90.0.2"));
    let b = Adapter::start(&b_ns, &dir.0, "b", &config("tw1", "10.90.0.2", "10.90.0.1"));

    // B's application echoes everything its two endpoints receive.
    let stop = Arc::new(AtomicBool::new(false));
    let echo = |mut ep: Endpoint, stop: Arc<AtomicBool>| {
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                held.clear();
                ep.recv_blocking(32, 20, |m| held.push(m.to_vec())).unwrap();
                for m in &held {
                    let t0 = Instant::now();
                    while !ep.send_with(m.len(), |b| b.copy_from_slice(m)) {
                        assert!(t0.elapsed() < Duration::from_secs(10), "B's ring stayed full");
                        std::thread::yield_now();
                    }
                }
            }
        })
    };
    let echoes =
        [echo(b.endpoint("wire", 7777), stop.clone()), echo(b.endpoint("tun", 7778), stop.clone())];

    for (port, dst) in [("wire", 7777u16), ("tun", 7778)] {
        let mut ep = a.endpoint(port, dst);
        let sent: Vec<Vec<u8>> =
            (0..N).map(|i| frame(i, dst, 8 + (i as usize * 47) % 1400)).collect();
        let mut got = Vec::new();
        for f in &sent {
            // One at a time: a frame lost on the way would show as a missing echo.
            assert!(ep.send_with(f.len(), |b| b.copy_from_slice(f)), "{port}: A's ring full");
            let t0 = Instant::now();
            let before = got.len();
            while got.len() == before {
                ep.recv_blocking(1, 20, |m| got.push(m.to_vec())).unwrap();
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{port}: frame {before} never came back"
                );
            }
        }
        assert!(got == sent, "{port}: the echoes differ from what was sent");
        // Counters reach the API a moment after the packets went through.
        for (name, adapter) in [("A", &a), ("B", &b)] {
            let t0 = Instant::now();
            loop {
                let (rx, tx) = adapter.counts(port);
                if rx >= u64::from(N) && tx >= u64::from(N) {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "{port} on {name}: rx {rx} tx {tx}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for e in echoes {
        e.join().expect("B's application");
    }
}
