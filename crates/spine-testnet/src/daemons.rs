//! Routing daemons for tests, each inside a [`NetNs`]: BIRD ([`bird`]) and FRR's zebra
//! with bgpd ([`frr`]). Their configuration, control sockets and pid files live in a
//! [`TempDir`] the test owns; each process is killed when its guard drops and the
//! folder is removed when its guard drops, also when the test fails. Nothing is
//! installed or started outside the namespace, and no system-wide FRR or BIRD instance
//! is touched.
//!
//! Also the BIRD and FRR configurations the FIB tests share: a BGP speaker announcing
//! `n` /24 prefixes ([`announcer_conf`], [`announced`]).

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::netns::NetNs;

/// A folder in the temporary directory, removed when dropped. Anyone may write in it:
/// FRR's daemons drop to user `frr` and create their sockets there.
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("spine-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create a temporary folder");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777))
            .expect("open the temporary folder to the daemons");
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A daemon running in the foreground, killed (and reaped) when dropped.
#[derive(Debug)]
pub struct Daemon {
    name: String,
    child: Child,
}

impl Daemon {
    /// Starts `cmd` with `args` in `ns` (`ip netns exec` execs it, so the child is the
    /// daemon itself); its output goes to `dir/NAME.log`.
    pub fn start(ns: &NetNs, dir: &TempDir, name: &str, cmd: &str, args: &[&str]) -> Daemon {
        let log = std::fs::File::create(dir.join(&format!("{name}.log"))).expect("daemon log");
        let child = Command::new("ip")
            .args(["netns", "exec", ns.name(), cmd])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("daemon log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name} ({cmd}): {e}"));
        Daemon { name: name.to_string(), child }
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `path` (a program) exists; if not, says `SKIP: WHY` on stderr.
pub fn have(path: &str, why: &str) -> bool {
    let found = Path::new(path).exists()
        || Command::new("sh")
            .args(["-c", &format!("command -v {path}")])
            .output()
            .is_ok_and(|o| o.status.success());
    if !found {
        let _ =
            writeln!(std::io::stderr(), "SKIP: {why} ({path} not found; `make deps` installs it)");
    }
    found
}

/// BIRD in the foreground in `ns` with configuration `conf`, its control socket in
/// `dir`.
pub fn bird(ns: &NetNs, dir: &TempDir, name: &str, conf: &str) -> Daemon {
    let (cfg, sock) = (dir.join(&format!("{name}.conf")), dir.join(&format!("{name}.ctl")));
    std::fs::write(&cfg, conf).expect("write the BIRD configuration");
    let (cfg, sock) = (cfg.to_string_lossy().into_owned(), sock.to_string_lossy().into_owned());
    Daemon::start(ns, dir, name, "bird", &["-f", "-c", &cfg, "-s", &sock])
}

/// BGP timers short enough for a test (BIRD's syntax).
pub const BIRD_TIMERS: &str =
    "hold time 6; keepalive time 2; connect retry time 1; connect delay time 1;";

/// The `i`th announced prefix's first three octets: 100.64.0.0/24, 100.64.1.0/24, ...
pub fn announced(i: u32) -> [u8; 3] {
    [100, 64 + (i >> 8) as u8, i as u8]
}

/// A BIRD configuration that announces `n` prefixes ([`announced`], as blackholes of its
/// own) over eBGP from `local` (AS 65002) to each neighbour in `peers` (AS 65001), and
/// imports nothing.
pub fn announcer_conf(local: Ipv4Addr, peers: &[(Ipv4Addr, Ipv4Addr)], n: u32) -> String {
    let statics: String = (0..n)
        .map(|i| {
            let [a, b, c] = announced(i);
            format!("route {a}.{b}.{c}.0/24 blackhole;\n")
        })
        .collect();
    let sessions: String = peers
        .iter()
        .enumerate()
        .map(|(k, (src, peer))| {
            format!(
                "protocol bgp up{k} {{ local {src} as 65002; neighbor {peer} as 65001; {BIRD_TIMERS}\n\
                 ipv4 {{ import none; export all; }}; }}\n"
            )
        })
        .collect();
    format!("router id {local};\nprotocol device {{}}\nprotocol static {{ ipv4; {statics} }}\n{sessions}")
}

/// A BIRD configuration for the router side: learns what neighbour `peer` (AS 65002)
/// announces to `local` (AS 65001) over eBGP and exports it to the kernel's main table.
pub fn bird_router_conf(local: Ipv4Addr, peer: Ipv4Addr) -> String {
    format!(
        "router id {local};\nprotocol device {{}}\n\
         protocol kernel {{ ipv4 {{ import none; export all; }}; }}\n\
         protocol bgp peer {{ local {local} as 65001; neighbor {peer} as 65002; {BIRD_TIMERS}\n\
         ipv4 {{ import all; export none; }}; }}\n"
    )
}

/// FRR's zebra and bgpd in one namespace, talking over a zserv socket in their folder;
/// both killed when dropped (bgpd first).
#[derive(Debug)]
pub struct Frr {
    // Field order is drop order.
    pub bgpd: Daemon,
    pub zebra: Daemon,
    vty: PathBuf,
}

/// Where Debian's `frr` package puts the daemons.
pub const FRR_DIR: &str = "/usr/lib/frr";

/// Starts zebra, then bgpd with configuration `bgpd_conf`, in `ns`; `None` (after a
/// loud `SKIP:`) if FRR is not installed. They run as user `frr` (the packaged daemons
/// refuse root outside group `frrvty`), without a vty TCP port.
pub fn frr(ns: &NetNs, dir: &TempDir, bgpd_conf: &str) -> Option<Frr> {
    let (zebra, bgpd) = (format!("{FRR_DIR}/zebra"), format!("{FRR_DIR}/bgpd"));
    if !have(&zebra, "FRR (frr) is not installed") || !have(&bgpd, "FRR's bgpd is missing") {
        return None;
    }
    std::fs::write(dir.join("zebra.conf"), "hostname spine-test\n").expect("zebra.conf");
    std::fs::write(dir.join("bgpd.conf"), bgpd_conf).expect("bgpd.conf");
    let p = |f: &str| dir.join(f).to_string_lossy().into_owned();
    let (zserv, vty) = (p("zserv.api"), dir.path().to_string_lossy().into_owned());
    let common = ["-u", "frr", "-g", "frr", "-P", "0", "--log", "stdout", "-z", &zserv];
    let common = common.iter().copied().chain(["--vty_socket", &vty]);
    let (zc, zp) = (p("zebra.conf"), p("zebra.pid"));
    let zargs: Vec<&str> = common.clone().chain(["-f", &zc, "-i", &zp]).collect();
    let zebra = Daemon::start(ns, dir, "zebra", &zebra, &zargs);
    // bgpd retries until zebra's socket answers.
    let (bc, bp) = (p("bgpd.conf"), p("bgpd.pid"));
    let bargs: Vec<&str> = common.chain(["-f", &bc, "-i", &bp]).collect();
    let bgpd = Daemon::start(ns, dir, "bgpd", &bgpd, &bargs);
    Some(Frr { bgpd, zebra, vty: dir.path().to_path_buf() })
}

impl Frr {
    /// `vtysh -c CMD` against these daemons: its output, for a failure message.
    pub fn vtysh(&self, cmd: &str) -> String {
        let out =
            Command::new("vtysh").arg("--vty_socket").arg(&self.vty).args(["-c", cmd]).output();
        match out {
            Ok(o) => String::from_utf8_lossy(&o.stdout).into_owned(),
            Err(e) => format!("(vtysh: {e})"),
        }
    }

    /// Whether both daemons still run.
    pub fn running(&mut self) -> bool {
        self.zebra.running() && self.bgpd.running()
    }
}
