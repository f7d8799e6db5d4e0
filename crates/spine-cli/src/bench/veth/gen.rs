//! The load: trafgen in the gen namespace sending one 60-byte IPv4/UDP frame (64 bytes
//! on the wire) on g0, the same configuration for every competitor. It runs in
//! `sendto` mode (`-t 0`): trafgen's mmap TX ring stalls on a veth whose peer pushes
//! back, where one `sendto` per frame keeps going.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::proc::Proc;
use super::topo::Topology;

/// The frame's destination MAC: nobody's, except g1's when the kernel routes (an IP
/// router only accepts frames addressed to it); for the other competitors the kernel
/// stack drops the frame early as addressed to another host.
pub const DST_MAC: &str = "02:00:00:00:0b:01";
pub const SRC_MAC: &str = "02:00:00:00:0a:01";
/// Addresses from the benchmarking range (RFC 2544): sender side, sink side.
pub const SRC_IP: &str = "198.18.1.2";
pub const DST_IP: &str = "198.18.2.2";
/// Ethernet 14 + IPv4 20 + UDP 8 + 18 bytes of payload; 64 with the FCS.
pub const FRAME_BYTES: usize = 60;

/// trafgen's packet configuration (its own syntax; checksums and lengths it fills in).
pub fn config() -> String {
    let payload = FRAME_BYTES - 14 - 20 - 8;
    format!(
        "{{\n  eth(da={DST_MAC}, sa={SRC_MAC}, type=0x0800),\n  \
         ipv4(saddr={SRC_IP}, daddr={DST_IP}, ttl=64),\n  \
         udp(sp=1024, dp=9),\n  fill(0x00, {payload})\n}}\n"
    )
}

/// trafgen's arguments: one sending process (trafgen pins it to CPU 0), the host's
/// socket-memory sysctls and IRQ affinities left alone, at most `max_packets` so that
/// it ends even if the bench is killed outright.
pub fn args(dev: &str, cfg: &str, rate_pps: Option<u64>, max_packets: u64) -> Vec<String> {
    let mut a: Vec<String> = ["-o", dev, "-i", cfg, "-P", "1", "--no-sock-mem", "--notouch-irq"]
        .map(String::from)
        .to_vec();
    a.extend(["-n".to_string(), max_packets.to_string()]);
    match rate_pps {
        Some(r) => a.extend(["-b".to_string(), format!("{r}pps")]),
        None => a.extend(["-t".to_string(), "0".to_string()]),
    }
    a
}

/// Starts trafgen on g0 of `topo`, under `timeout`: trafgen forks its sender, and
/// `timeout` hands the stop signal to the whole process group (trafgen's parent ignores
/// a SIGINT of its own while its child sends), and ends it after `limit_s` even if the
/// bench was killed outright.
pub fn start(
    topo: &Topology,
    dir: &Path,
    k: usize,
    rate_pps: Option<u64>,
    limit_s: f64,
) -> Result<Proc> {
    let cfg = dir.join(format!("trafgen{k}.cfg"));
    std::fs::write(&cfg, config())?;
    let cfg = cfg.to_string_lossy().into_owned();
    // Far above what a veth carries: the packet cap is a second safety net only.
    let max_packets = (10_000_000.0 * limit_s) as u64;
    let limit = format!("{}", limit_s.ceil());
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &topo.gen, "timeout", "-s", "INT", "-k", "5", &limit, "trafgen"]);
    cmd.args(args(&topo.g0, &cfg, rate_pps, max_packets));
    Proc::spawn(&format!("trafgen{k}"), &mut cmd, dir, false)
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_udp_frame_of_minimum_size() {
        let c = super::config();
        assert!(c.contains("eth(da=02:00:00:00:0b:01, sa=02:00:00:00:0a:01, type=0x0800)"));
        assert!(c.contains("ipv4(saddr=198.18.1.2, daddr=198.18.2.2"));
        assert!(c.contains("fill(0x00, 18)"), "14 + 20 + 8 + 18 = 60 bytes: {c}");
    }

    #[test]
    fn flat_out_or_at_a_rate() {
        let flat = super::args("g0", "c.cfg", None, 100).join(" ");
        assert_eq!(flat, "-o g0 -i c.cfg -P 1 --no-sock-mem --notouch-irq -n 100 -t 0");
        let rated = super::args("g0", "c.cfg", Some(200_000), 100).join(" ");
        assert!(rated.ends_with("-n 100 -b 200000pps"), "{rated}");
    }
}
