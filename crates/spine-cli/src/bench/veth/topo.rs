//! The test network, built fresh for each competitor in three network namespaces of its
//! own and removed when it drops (on errors and Ctrl-C too):
//!
//! ```text
//!  gen netns               dut netns                           sink netns
//!  trafgen → g0 ══ veth ══ g1 → [competitor] → o1 ══ veth ══ o0 → XDP_DROP, counted
//! ```
//!
//! - g0 has TSO/GSO off, so that every frame trafgen sends is eligible for g1's NAPI
//!   path (veth hands TSO-capable senders' skbs to the backlog otherwise).
//! - g1 has GRO on (which gives a veth a NAPI context even without XDP) and threaded
//!   NAPI: the kernel's share of the forwarding runs in a kernel thread `napi/<g1>-<id>`
//!   whose CPU time is read exactly, instead of hiding in softirqs charged to whoever
//!   was interrupted.
//! - o0 drops everything with a native XDP program, in a NAPI thread of its own: the
//!   cheapest sink there is, which never answers and is not charged to the competitor.
//! - IPv6 is off in all three, so no autoconfiguration traffic reaches the sink.

use std::path::Path;

use anyhow::{Context, Result};

use super::parse::{self, LinkCounters};
use super::proc::run;

/// Three namespaces and two veth pairs; deleted on drop.
#[derive(Debug)]
pub struct Topology {
    pub gen: String,
    pub dut: String,
    pub sink: String,
    pub g0: String,
    pub g1: String,
    pub o1: String,
    pub o0: String,
    pub o0_mac: String,
    /// o1's index in the dut namespace: where the forwarding program redirects.
    pub o1_ifindex: u32,
    /// Whether g1 polls in a NAPI thread; without it the kernel's share of the
    /// forwarding cannot be measured and the competitor's CPU figure is too low.
    pub threaded: bool,
    /// Whether o0 polls in a NAPI thread; without it the sink's drops run in the
    /// forwarder's context and are charged to it.
    pub sink_threaded: bool,
    made: Vec<String>,
}

impl Topology {
    /// Builds the network for run `k` of this process; `sink_obj` is the XDP_DROP object
    /// attached to o0. Anything made before a failure is removed again.
    pub fn create(k: usize, sink_obj: &Path) -> Result<Topology> {
        let pid = std::process::id();
        let ns = |role: &str| format!("spine-vb{pid}-{k}-{role}");
        // Short names: a kernel thread's name holds 15 characters, "napi/<if>-" included.
        let ifname = |end: &str| format!("v{}{}{end}", pid % 1000, k % 10);
        let mut t = Topology {
            gen: ns("gen"),
            dut: ns("dut"),
            sink: ns("sink"),
            g0: ifname("g0"),
            g1: ifname("g1"),
            o1: ifname("o1"),
            o0: ifname("o0"),
            o0_mac: String::new(),
            o1_ifindex: 0,
            threaded: false,
            sink_threaded: false,
            made: Vec::new(),
        };
        for name in [t.gen.clone(), t.dut.clone(), t.sink.clone()] {
            run("ip", &["netns", "add", &name])?;
            t.made.push(name.clone());
            t.exec(
                &name,
                &[
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
            t.ip(&name, &["link", "set", "lo", "up"])?;
        }
        let (gen, dut, sink) = (t.gen.clone(), t.dut.clone(), t.sink.clone());
        let (g0, g1, o1, o0) = (t.g0.clone(), t.g1.clone(), t.o1.clone(), t.o0.clone());
        run(
            "ip",
            &[
                "link", "add", &g0, "netns", &gen, "type", "veth", "peer", "name", &g1, "netns",
                &dut,
            ],
        )?;
        run(
            "ip",
            &[
                "link", "add", &o1, "netns", &dut, "type", "veth", "peer", "name", &o0, "netns",
                &sink,
            ],
        )?;
        t.exec(&gen, &["ethtool", "-K", &g0, "tso", "off", "gso", "off"])?;
        for (n, i) in [(&gen, &g0), (&dut, &g1), (&dut, &o1), (&sink, &o0)] {
            t.ip(n, &["link", "set", i, "up"])?;
        }
        t.exec(&dut, &["ethtool", "-K", &g1, "gro", "on"])?;
        t.threaded = t.set_threaded(&dut, &g1).is_ok();
        let obj = sink_obj.to_str().context("object path is not UTF-8")?;
        t.ip(&sink, &["link", "set", "dev", &o0, "xdpdrv", "obj", obj, "sec", "xdp"])
            .context("attaching the sink's XDP_DROP program to o0 (native XDP on veth)")?;
        t.sink_threaded = t.set_threaded(&sink, &o0).is_ok();
        let json = t.ip(&dut, &["-j", "link", "show", "dev", &o1])?;
        t.o1_ifindex = parse::ip_link_identity(&json).context("o1's ifindex")?.0;
        let json = t.ip(&sink, &["-j", "link", "show", "dev", &o0])?;
        t.o0_mac = parse::ip_link_identity(&json).context("o0's address")?.1;
        Ok(t)
    }

    /// `ip -n NS ARGS`.
    pub fn ip(&self, ns: &str, args: &[&str]) -> Result<String> {
        let mut full = vec!["-n", ns];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// `ip netns exec NS CMD`.
    pub fn exec(&self, ns: &str, cmd: &[&str]) -> Result<String> {
        let mut full = vec!["netns", "exec", ns];
        full.extend_from_slice(cmd);
        run("ip", &full)
    }

    fn set_threaded(&self, ns: &str, ifname: &str) -> Result<String> {
        let script = format!("echo 1 > /sys/class/net/{ifname}/threaded");
        self.exec(ns, &["sh", "-c", &script])
    }

    /// An interface's counters (`ip -s -j link`).
    pub fn counters(&self, ns: &str, ifname: &str) -> Result<LinkCounters> {
        let json = self.ip(ns, &["-s", "-j", "link", "show", "dev", ifname])?;
        parse::ip_link_counters(&json).with_context(|| format!("counters of {ifname}"))
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and with them their peers.
        for name in self.made.iter().rev() {
            if let Err(e) = run("ip", &["netns", "del", name]) {
                eprintln!("bench: could not remove namespace {name}: {e:#}");
            }
        }
    }
}

/// Removes namespaces left by bench runs that were killed outright (SIGKILL leaves no
/// chance to clean up); their owner's pid is in the name.
pub fn remove_stale() {
    let Ok(list) = run("ip", &["netns", "list"]) else { return };
    for line in list.lines() {
        let Some(owner) = parse::bench_netns_owner(line) else { continue };
        if Path::new(&format!("/proc/{owner}")).exists() {
            continue;
        }
        if let Some(name) = line.split_whitespace().next() {
            eprintln!("bench: removing namespace {name} left by an earlier run");
            let _ = run("ip", &["netns", "del", name]);
        }
    }
}
