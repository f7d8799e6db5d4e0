//! Network namespaces for tests that touch interfaces: each test gets a fresh namespace
//! with a unique name (process id and a counter), removed when the guard drops, also
//! when the test fails. Code runs inside it on a scoped thread that joined it with
//! setns(2), so the test harness's own threads never change namespace.

use std::io::Write as _;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A network namespace of this test run, deleted on drop.
#[derive(Debug)]
pub struct NetNs {
    name: String,
}

impl NetNs {
    /// A new namespace with IPv6 off (no autoconfiguration chatter on its links) and `lo`
    /// up; `None`, after a loud `SKIP:` on stderr, when this process cannot create one.
    pub fn new() -> Option<NetNs> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            let _ = writeln!(std::io::stderr(), "SKIP: not root, cannot create namespaces");
            return None;
        }
        let name =
            format!("spine-t{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let out = Command::new("ip").args(["netns", "add", &name]).output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIP: ip netns add failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                return None;
            }
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "SKIP: cannot run ip: {e}");
                return None;
            }
        }
        let ns = NetNs { name };
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        ns.ip("link set lo up");
        Some(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NS ARGS` (whitespace-separated); panics with ip's message on failure.
    pub fn ip(&self, args: &str) -> String {
        let mut full = vec!["-n", self.name.as_str()];
        full.extend(args.split_whitespace());
        run("ip", &full)
    }

    /// Runs a command inside the namespace (`ip netns exec`).
    pub fn exec(&self, cmd: &[&str]) -> String {
        let mut full = vec!["netns", "exec", self.name.as_str()];
        full.extend_from_slice(cmd);
        run("ip", &full)
    }

    /// A veth pair `a`–`b`, both ends up.
    pub fn veth(&self, a: &str, b: &str) {
        self.ip(&format!("link add {a} type veth peer name {b}"));
        self.ip(&format!("link set {a} up"));
        self.ip(&format!("link set {b} up"));
    }

    /// Runs `f` on a thread that has entered the namespace; sockets, TAP devices and
    /// netlink requests made there belong to it. A panic in `f` is re-raised here.
    pub fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let file =
            std::fs::File::open(format!("/var/run/netns/{}", self.name)).expect("namespace file");
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a namespace fd we hold open; it changes this thread's
                // network namespace only.
                let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }
}

impl Drop for NetNs {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).output();
    }
}

fn run(prog: &str, args: &[&str]) -> String {
    let out = Command::new(prog).args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "{prog} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The index of interface `name` in the calling thread's namespace.
pub fn ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: `c` is a NUL-terminated string that lives across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert_ne!(i, 0, "no interface {name}");
    i
}
