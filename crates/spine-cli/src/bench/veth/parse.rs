//! Readers for what the veth bench learns from the system and from its peers: the
//! machine's CPU time in `/proc/stat`, a task's run time, `ip -s -j link` counters,
//! testpmd's closing statistics. Pure functions over text, so that malformed input is a
//! `None` (never a panic) and every one is unit-tested.

/// Machine-wide CPU time from the `cpu ` line of `/proc/stat`, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// user + nice + system + irq + softirq (guest time is already inside user).
    pub busy: u64,
    /// busy + idle + iowait + steal.
    pub total: u64,
}

/// The first line of `/proc/stat` (`cpu  user nice system idle iowait irq softirq steal
/// …`); `None` if it is missing or has fewer than the four fields every kernel writes.
pub fn proc_stat_cpu(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> =
        line.split_whitespace().skip(1).map(|f| f.parse().ok()).collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = [0, 1, 2, 5, 6].iter().map(|&i| get(i)).fold(0u64, u64::saturating_add);
    let total = busy.saturating_add(get(3)).saturating_add(get(4)).saturating_add(get(7));
    Some(CpuTicks { busy, total })
}

/// Nanoseconds a task has run, the first field of `/proc/<tid>/schedstat`. The kernel
/// counts it exactly (not by ticks), including interrupts taken while the task ran.
pub fn schedstat_ns(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// utime + stime of `/proc/<tid>/stat`, in ticks: the fallback where schedstat is off.
/// The command name may hold spaces and parentheses, so fields are counted after the
/// last `)`.
pub fn stat_ticks(text: &str) -> Option<u64> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14 and 15 of the line; the state (field 3) is the first after the name.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime.saturating_add(stime))
}

/// The process ids in `/proc/<pid>/task/<tid>/children`.
pub fn children(text: &str) -> Vec<u32> {
    text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// True if a kernel thread's name says it polls `ifname` (threaded NAPI: `napi/<if>-<id>`).
pub fn is_napi_of(comm: &str, ifname: &str) -> bool {
    comm.trim_end()
        .strip_prefix("napi/")
        .and_then(|r| r.strip_prefix(ifname))
        .is_some_and(|r| r.starts_with('-'))
}

/// The effective user id from `/proc/self/status`.
pub fn effective_uid(status: &str) -> Option<u32> {
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// One interface's packet counters, as `ip -s -j link show dev X` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// The counters of the first interface in `ip -s -j link` output (`stats64`).
pub fn ip_link_counters(json: &str) -> Option<LinkCounters> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let s = v.get(0)?.get("stats64")?;
    let n = |dir: &str, key: &str| s.get(dir)?.get(key)?.as_u64();
    Some(LinkCounters {
        rx_packets: n("rx", "packets")?,
        tx_packets: n("tx", "packets")?,
        tx_dropped: n("tx", "dropped")?,
    })
}

/// The `ifindex` and `address` of the first interface in `ip -j link` output.
pub fn ip_link_identity(json: &str) -> Option<(u32, String)> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let l = v.get(0)?;
    let index = u32::try_from(l.get("ifindex")?.as_u64()?).ok()?;
    Some((index, l.get("address")?.as_str()?.to_string()))
}

/// testpmd's totals over its whole run: the block after "Accumulated forward
/// statistics for all ports", printed when forwarding stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestpmdTotals {
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
}

/// The last "Accumulated forward statistics" block of testpmd's output, if complete.
pub fn testpmd_totals(out: &str) -> Option<TestpmdTotals> {
    let start = out.rfind("Accumulated forward statistics")?;
    let words: Vec<&str> = out[start..].split_whitespace().take(40).collect();
    let after = |key: &str| {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse().ok()
    };
    Some(TestpmdTotals {
        rx_packets: after("RX-packets:")?,
        rx_dropped: after("RX-dropped:")?,
        tx_packets: after("TX-packets:")?,
    })
}

/// Packets the adapter sent on port `port` over its run, from `spine run --json`.
pub fn spine_port_tx(json: &str, port: &str) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v.get("ports")?
        .as_array()?
        .iter()
        .find(|p| p.get("name").and_then(|n| n.as_str()) == Some(port))?
        .get("tx_packets")?
        .as_u64()
}

/// The process id in a namespace name this bench made (`spine-vb<pid>-<role>`).
pub fn bench_netns_owner(name: &str) -> Option<u32> {
    let rest = name.split_whitespace().next()?.strip_prefix("spine-vb")?;
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_busy_excludes_idle_iowait_and_steal() {
        let text = "cpu  100 5 50 1000 20 3 7 9 40 0\ncpu0 1 2 3 4 5 6 7 8 9 0\nintr 1\n";
        let c = proc_stat_cpu(text).unwrap();
        assert_eq!(c.busy, 100 + 5 + 50 + 3 + 7);
        assert_eq!(c.total, c.busy + 1000 + 20 + 9);
        // Old kernels write only four fields.
        assert_eq!(proc_stat_cpu("cpu 1 2 3 4\n"), Some(CpuTicks { busy: 6, total: 10 }));
        assert_eq!(proc_stat_cpu("cpu 1 2\n"), None);
        assert_eq!(proc_stat_cpu("cpu 1 x 3 4\n"), None);
        assert_eq!(proc_stat_cpu("cpu0 1 2 3 4\n"), None, "only the machine-wide line");
    }

    #[test]
    fn task_times_from_schedstat_and_stat() {
        assert_eq!(schedstat_ns("2556950 48428 2\n"), Some(2_556_950));
        assert_eq!(schedstat_ns(""), None);
        let stat = "12056 (napi/g1 (x) 3) S 2 0 0 0 -1 2129984 0 0 0 0 17 42 0 0 20 0 1 0";
        assert_eq!(stat_ticks(stat), Some(59));
        assert_eq!(stat_ticks("12 (short) S 1 2"), None);
        assert_eq!(stat_ticks("no parenthesis"), None);
    }

    #[test]
    fn napi_threads_match_only_their_interface() {
        assert!(is_napi_of("napi/v4120g1-350\n", "v4120g1"));
        assert!(!is_napi_of("napi/v4120g10-350", "v4120g1"));
        assert!(!is_napi_of("kworker/1:0", "v4120g1"));
        assert!(!is_napi_of("napi/v4120g1", "v4120g1"));
        assert_eq!(children("14016 14020 \n"), vec![14016, 14020]);
        assert!(children("").is_empty());
    }

    #[test]
    fn uid_and_netns_owner() {
        let status = "Name:\tspine\nUid:\t1000\t0\t0\t0\nGid:\t0\t0\t0\t0\n";
        assert_eq!(effective_uid(status), Some(0));
        assert_eq!(effective_uid("Name: x\n"), None);
        assert_eq!(bench_netns_owner("spine-vb1234-dut"), Some(1234));
        assert_eq!(bench_netns_owner("spine-vb1234-sink (id: 3)"), Some(1234));
        assert_eq!(bench_netns_owner("spine-a6031-2"), None);
        assert_eq!(bench_netns_owner("spine-vbx-dut"), None);
    }

    #[test]
    fn ip_json_counters_and_identity() {
        let j = r#"[{"ifindex":3,"ifname":"o1","address":"be:73:ed:d9:d1:e3",
            "stats64":{"rx":{"bytes":0,"packets":17,"errors":0,"dropped":0},
                       "tx":{"bytes":73002,"packets":1587,"errors":0,"dropped":4}}}]"#;
        assert_eq!(
            ip_link_counters(j),
            Some(LinkCounters { rx_packets: 17, tx_packets: 1587, tx_dropped: 4 })
        );
        assert_eq!(ip_link_identity(j), Some((3, "be:73:ed:d9:d1:e3".to_string())));
        assert_eq!(ip_link_counters(r#"[{"ifindex":3}]"#), None);
        assert_eq!(ip_link_counters("[]"), None);
        assert_eq!(ip_link_counters("Device \"x\" does not exist."), None);
    }

    #[test]
    fn testpmd_final_block_is_read() {
        let out = "\
  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 1215960        RX-dropped: 503642        RX-total: 1719602
  TX-packets: 0              TX-dropped: 0             TX-total: 0
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 1215960        RX-dropped: 503642        RX-total: 1719602
  TX-packets: 1215958        TX-dropped: 2             TX-total: 1215960
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

Done.
";
        assert_eq!(
            testpmd_totals(out),
            Some(TestpmdTotals {
                rx_packets: 1_215_960,
                rx_dropped: 503_642,
                tx_packets: 1_215_958
            })
        );
        assert_eq!(testpmd_totals("EAL: Error - exiting with code: 1"), None);
        // Cut off in the middle (killed while printing).
        assert_eq!(testpmd_totals("Accumulated forward statistics\n  RX-packets: 5"), None);
    }

    #[test]
    fn spine_totals_json() {
        let j = r#"{"ports":[{"name":"in","tx_packets":0},{"name":"out","tx_packets":921810}]}"#;
        assert_eq!(spine_port_tx(j, "out"), Some(921_810));
        assert_eq!(spine_port_tx(j, "nope"), None);
        assert_eq!(spine_port_tx("", "out"), None);
    }
}
