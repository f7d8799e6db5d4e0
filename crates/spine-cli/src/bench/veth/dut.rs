//! The competitors: each forwards every frame arriving on g1 out of o1, in the dut
//! namespace, and is started and stopped here.
//!
//! | competitor | how |
//! | --- | --- |
//! | spine afxdp / afpacket | `spine run` on a generated `adapter.toml`: ports on g1 and o1, the forwarding object attached to g1, one worker pinned to the DUT's CPU |
//! | kernel XDP | the same object attached natively to g1 with `ip link set … xdpdrv` |
//! | Linux IP forwarding | `ip_forward=1`, addresses on g1 and o1, a permanent neighbour entry for the sink; g1 takes the frame's MAC |
//! | testpmd | `dpdk-testpmd --no-huge --total-num-mbufs=16384`, io forwarding between two `net_af_xdp` or `net_af_packet` vdevs on g1 and o1, the forwarding lcore on the DUT's CPU |

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::gen;
use super::parse;
use super::proc::{which, Proc};
use super::topo::Topology;

/// Debian 12 ships dpdk-testpmd in dpdk-dev and the two PMDs in packages of their own.
pub const TESTPMD_INSTALL: &str =
    "apt-get install -y dpdk-dev librte-net-af-xdp23 librte-net-af-packet23";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Competitor {
    SpineAfxdp,
    SpineAfpacket,
    KernelXdp,
    LinuxForward,
    TestpmdAfXdp,
    TestpmdAfPacket,
}

impl Competitor {
    pub const ALL: [Competitor; 6] = [
        Competitor::SpineAfxdp,
        Competitor::SpineAfpacket,
        Competitor::KernelXdp,
        Competitor::LinuxForward,
        Competitor::TestpmdAfXdp,
        Competitor::TestpmdAfPacket,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Competitor::SpineAfxdp => "spine afxdp",
            Competitor::SpineAfpacket => "spine afpacket",
            Competitor::KernelXdp => "kernel XDP (native)",
            Competitor::LinuxForward => "Linux IP forwarding",
            Competitor::TestpmdAfXdp => "testpmd net_af_xdp",
            Competitor::TestpmdAfPacket => "testpmd net_af_packet",
        }
    }

    /// The DPDK vdev driver of a testpmd competitor.
    fn pmd(self) -> Option<&'static str> {
        match self {
            Competitor::TestpmdAfXdp => Some("net_af_xdp"),
            Competitor::TestpmdAfPacket => Some("net_af_packet"),
            _ => None,
        }
    }

    /// Why this competitor cannot run on this machine, if it cannot.
    pub fn unavailable(self, ncpu: usize) -> Option<String> {
        let pmd = self.pmd()?;
        if which("dpdk-testpmd").is_none() {
            return Some(format!("dpdk-testpmd not found (install: {TESTPMD_INSTALL})"));
        }
        if ncpu < 2 {
            return Some("testpmd needs 2 CPUs (a main and a forwarding lcore)".into());
        }
        pmd_missing(&pmd_dirs(), pmd)
            .then(|| format!("DPDK's {pmd} driver is not installed (install: {TESTPMD_INSTALL})"))
    }
}

/// True if DPDK keeps its drivers in `dirs` and `pmd` (`librte_<pmd>.so…`) is in none of
/// them. Without such folders (a DPDK with its drivers linked in) testpmd will tell.
fn pmd_missing(dirs: &[PathBuf], pmd: &str) -> bool {
    let lib = format!("librte_{pmd}.so");
    let found = dirs.iter().any(|d| {
        std::fs::read_dir(d)
            .is_ok_and(|rd| rd.flatten().any(|e| e.file_name().to_string_lossy().starts_with(&lib)))
    });
    !dirs.is_empty() && !found
}

/// Folders where a distribution's DPDK keeps its drivers (`…/dpdk/pmds-<abi>`).
fn pmd_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for base in ["/usr/lib", "/usr/lib64", "/usr/local/lib"] {
        let mut libs = vec![PathBuf::from(base)];
        if let Ok(rd) = std::fs::read_dir(base) {
            libs.extend(rd.flatten().map(|e| e.path()));
        }
        for lib in libs {
            let Ok(rd) = std::fs::read_dir(lib.join("dpdk")) else { continue };
            out.extend(
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with("pmds-"))
                    .map(|e| e.path()),
            );
        }
    }
    out
}

/// What the competitor needs to know about the run.
#[derive(Debug)]
pub struct Env {
    pub dir: PathBuf,
    /// This program, for `spine run`.
    pub exe: PathBuf,
    /// The CPU the competitor's own thread is pinned to (trafgen sends from CPU 0).
    pub dut_cpu: usize,
    /// Longest a competitor may live: a safety net for a bench killed outright.
    pub limit_s: f64,
}

/// A started competitor; stopped and cleaned up on drop.
#[derive(Debug)]
pub struct Dut {
    procs: Vec<Proc>,
    /// testpmd's runtime folder (`/var/run/dpdk/<prefix>`), and whether the bench
    /// created `/var/run/dpdk` itself.
    dpdk_dir: Option<(PathBuf, bool)>,
}

impl Dut {
    pub fn start(
        c: Competitor,
        topo: &Topology,
        forward: &Path,
        env: &Env,
        k: usize,
    ) -> Result<Dut> {
        let mut dut = Dut { procs: Vec::new(), dpdk_dir: None };
        let (dut_ns, g1, o1) = (topo.dut.as_str(), topo.g1.as_str(), topo.o1.as_str());
        match c {
            Competitor::SpineAfxdp | Competitor::SpineAfpacket => {
                let kind = if c == Competitor::SpineAfxdp { "afxdp" } else { "afpacket" };
                let cfg = env.dir.join(format!("adapter{k}.toml"));
                std::fs::write(&cfg, spine_config(kind, g1, o1, forward, env.dut_cpu))?;
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", dut_ns]).arg(&env.exe).arg("run").arg(&cfg);
                cmd.args(["--quiet", "--json", "--duration", &format!("{}", env.limit_s)]);
                dut.procs.push(Proc::spawn(&format!("spine{k}"), &mut cmd, &env.dir, false)?);
            }
            Competitor::KernelXdp => {
                let obj = forward.to_str().context("object path is not UTF-8")?;
                topo.ip(dut_ns, &["link", "set", "dev", g1, "xdpdrv", "obj", obj, "sec", "xdp"])
                    .context("attaching the forwarding program to g1 (native XDP)")?;
            }
            Competitor::LinuxForward => {
                topo.ip(dut_ns, &["link", "set", "dev", g1, "address", gen::DST_MAC])?;
                topo.ip(dut_ns, &["addr", "add", "198.18.1.1/24", "dev", g1])?;
                topo.ip(dut_ns, &["addr", "add", "198.18.2.1/24", "dev", o1])?;
                let mac = topo.o0_mac.as_str();
                topo.ip(
                    dut_ns,
                    &["neigh", "add", gen::DST_IP, "lladdr", mac, "dev", o1, "nud", "permanent"],
                )?;
                topo.exec(dut_ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
            }
            Competitor::TestpmdAfXdp | Competitor::TestpmdAfPacket => {
                let prefix = format!("spine-vb{}-{k}", std::process::id());
                let base = Path::new("/var/run/dpdk");
                dut.dpdk_dir = Some((base.join(&prefix), !base.exists()));
                let mut cmd = Command::new("ip");
                cmd.args(["netns", "exec", dut_ns, "dpdk-testpmd"]);
                cmd.args(testpmd_args(c, g1, o1, env.dut_cpu, &prefix));
                // testpmd forwards until its stdin ends: closed by stop(), or by the
                // kernel if the bench dies.
                dut.procs.push(Proc::spawn(&format!("testpmd{k}"), &mut cmd, &env.dir, true)?);
            }
        }
        Ok(dut)
    }

    /// The processes whose threads (with g1's NAPI thread) make up the competitor.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().map(Proc::pid).collect()
    }

    /// `Some(why)` if a process of the competitor has exited.
    pub fn died(&mut self) -> Option<String> {
        self.procs.iter_mut().find_map(|p| {
            let status = p.exited()?;
            Some(format!("exited ({status}): {}", p.tail(4)))
        })
    }

    /// Stops the competitor; the packets it says it sent over its whole run, where it
    /// reports that (spine's o1 port, testpmd's TX-packets): a cross-check of the sink.
    pub fn stop(&mut self) -> Option<u64> {
        let mut sent = None;
        for p in &mut self.procs {
            p.stop();
            let out = p.stdout();
            sent = sent
                .or_else(|| parse::spine_port_tx(&out, "out"))
                .or_else(|| parse::testpmd_totals(&out).map(|t| t.tx_packets));
        }
        sent
    }
}

impl Drop for Dut {
    fn drop(&mut self) {
        for p in &mut self.procs {
            p.stop();
        }
        if let Some((dir, made_base)) = &self.dpdk_dir {
            let _ = std::fs::remove_dir_all(dir);
            if *made_base {
                // Only if empty: another DPDK program may have come meanwhile.
                let _ = std::fs::remove_dir("/var/run/dpdk");
            }
        }
    }
}

/// The adapter's configuration: ports on g1 and o1, the forwarding object on g1.
pub fn spine_config(kind: &str, g1: &str, o1: &str, forward: &Path, cpu: usize) -> String {
    format!(
        "[adapter]\nworkers = 1\ncpus = [{cpu}]\n\n\
         [[port]]\nname = \"in\"\nkind = \"{kind}\"\ninterface = \"{g1}\"\n\n\
         [[port]]\nname = \"out\"\nkind = \"{kind}\"\ninterface = \"{o1}\"\n\n\
         [[extension]]\nname = \"forward\"\nfile = {:?}\n\n\
         [[attach]]\nextension = \"forward\"\nport = \"in\"\n",
        forward.display().to_string()
    )
}

/// testpmd's command line: the main lcore on CPU 0, the forwarding lcore on `cpu`, no
/// hugepages, no PCI, no shared files but its runtime folder `prefix`.
pub fn testpmd_args(c: Competitor, g1: &str, o1: &str, cpu: usize, prefix: &str) -> Vec<String> {
    let pmd = c.pmd().unwrap_or("net_af_packet");
    let vdev = |i: usize, ifname: &str| match c {
        Competitor::TestpmdAfXdp => format!("{pmd}{i},iface={ifname},start_queue=0,queue_count=1"),
        _ => format!("{pmd}{i},iface={ifname}"),
    };
    let mut a: Vec<String> = vec![
        "-l".into(),
        format!("0,{cpu}"),
        "--main-lcore".into(),
        "0".into(),
        // --no-huge takes its memory from anonymous pages: 16384 mbufs need more than
        // the 64 MB EAL takes by default.
        "--no-huge".into(),
        "-m".into(),
        "256".into(),
        "--no-pci".into(),
        "--no-shconf".into(),
        "--file-prefix".into(),
        prefix.into(),
        "--vdev".into(),
        vdev(0, g1),
        "--vdev".into(),
        vdev(1, o1),
        "--".into(),
    ];
    a.extend(["--total-num-mbufs=16384", "--forward-mode=io", "--nb-cores=1"].map(String::from));
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_adapter_configuration_parses_as_spine_run_would_read_it() {
        let text = spine_config("afxdp", "v1g1", "v1o1", Path::new("/tmp/x y/forward0.o"), 1);
        let cfg = spine_adapter::Config::parse(&text, Path::new("/")).unwrap();
        assert_eq!(cfg.adapter.workers, 1);
        assert_eq!(cfg.adapter.cpus, Some(vec![1]));
        assert_eq!(cfg.ports.len(), 2);
        assert!(text.contains("file = \"/tmp/x y/forward0.o\""), "{text}");
    }

    #[test]
    fn testpmd_gets_the_issue_s_memory_settings_and_both_vdevs() {
        let a = testpmd_args(Competitor::TestpmdAfXdp, "v1g1", "v1o1", 1, "p").join(" ");
        assert!(a.starts_with("-l 0,1 --main-lcore 0 --no-huge"), "{a}");
        assert!(a.contains("--vdev net_af_xdp0,iface=v1g1,start_queue=0,queue_count=1"));
        assert!(a.contains("--vdev net_af_xdp1,iface=v1o1,"));
        assert!(a.ends_with("-- --total-num-mbufs=16384 --forward-mode=io --nb-cores=1"));
        let p = testpmd_args(Competitor::TestpmdAfPacket, "a", "b", 1, "p").join(" ");
        assert!(p.contains("--vdev net_af_packet0,iface=a --vdev net_af_packet1,iface=b --"));
    }

    #[test]
    fn a_missing_driver_is_found_missing() {
        let d = std::env::temp_dir().join(format!("spine-vb-pmds-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("librte_net_af_packet.so.23"), b"").unwrap();
        let dirs = [d.clone()];
        assert!(!pmd_missing(&dirs, "net_af_packet"));
        assert!(pmd_missing(&dirs, "net_af_xdp"));
        assert!(!pmd_missing(&[], "net_af_xdp"), "no driver folders: testpmd decides");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn only_testpmd_can_be_unavailable() {
        for c in [Competitor::SpineAfxdp, Competitor::KernelXdp, Competitor::LinuxForward] {
            assert_eq!(c.unavailable(1), None);
        }
        if which("dpdk-testpmd").is_some() {
            let why = Competitor::TestpmdAfXdp.unavailable(1).unwrap();
            assert!(why.contains("2 CPUs"), "{why}");
        } else {
            let why = Competitor::TestpmdAfPacket.unavailable(4).unwrap();
            assert!(why.contains("apt-get install"), "{why}");
        }
    }
}
