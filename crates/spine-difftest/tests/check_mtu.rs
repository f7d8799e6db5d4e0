//! `bpf_check_mtu` from XDP against the kernel (`tests/fixtures/check_mtu.c`): the
//! ingress device (ifindex 0: loopback in the kernel's test run), every other interface
//! of this namespace and a missing one (`-ENODEV`), `mtu_len` given or not, `len_diff`
//! on both sides of the limit and at `int` extremes, flags (`-EINVAL`); the return
//! value, the MTU written back and the verdict compared on both engines, spine's host
//! given the namespace's interfaces and MTUs as the kernel sees them. Also that
//! `bpf_jiffies64` and `bpf_ktime_get_tai_ns` run and go forward on both sides. Needs
//! root (bpf(2)); without it each test says SKIP loudly and passes.

mod common;

use common::{kernel_available, packet, ENGINES};
use spine_difftest::Pair;

const XDP_DROP: usize = 1;
const XDP_PASS: usize = 2;
const XDP_TX: usize = 3;

/// `(ifindex, mtu)` of every interface in this network namespace, from sysfs.
fn interfaces() -> Vec<(u32, u32)> {
    let read = |p: std::path::PathBuf| -> Option<u32> {
        std::fs::read_to_string(p).ok()?.trim().parse().ok()
    };
    let mut out: Vec<(u32, u32)> = std::fs::read_dir("/sys/class/net")
        .expect("sysfs")
        .filter_map(|e| {
            let d = e.ok()?.path();
            Some((read(d.join("ifindex"))?, read(d.join("mtu"))?))
        })
        .collect();
    out.sort();
    out
}

fn probe(ifindex: u32, mtu_len: u32, len_diff: i32, flags: u64, room: usize) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&ifindex.to_le_bytes());
    v.extend_from_slice(&mtu_len.to_le_bytes());
    v.extend_from_slice(&len_diff.to_le_bytes());
    v.extend_from_slice(&[0; 4]);
    v.extend_from_slice(&flags.to_le_bytes());
    v.extend_from_slice(&[0xee; 16]);
    packet(&v, room)
}

#[test]
fn bpf_check_mtu_matches_the_kernel() {
    if !kernel_available() {
        return;
    }
    let ifaces = interfaces();
    let lo = ifaces.iter().find(|i| i.0 == 1).map_or(65536, |i| i.1);
    let missing = ifaces.iter().map(|i| i.0).max().unwrap_or(1) + 1000;
    let mut ifindexes: Vec<u32> = vec![0, missing];
    ifindexes.extend(ifaces.iter().map(|i| i.0));
    let mut pkts = Vec::new();
    for &ifindex in &ifindexes {
        let mtu = ifaces.iter().find(|i| i.0 == ifindex).map_or(lo, |i| i.1);
        for mtu_len in [0u32, 1, 576, 1400, 1500, mtu - 1, mtu, mtu + 1, 65536, u32::MAX - 13] {
            for len_diff in [0i32, 1, -1, 14, -14, 100, -100, 1500, -1500, i32::MAX, i32::MIN] {
                pkts.push(probe(ifindex, mtu_len, len_diff, 0, 8));
            }
        }
        // The packet's own length against the limit: mtu_len 0 measures the head.
        for room in [0usize, 100, 1000, 1400, 1500, 3000] {
            for len_diff in [0i32, 1, -1] {
                let base = 14 + 40 + room as i32;
                let edge = mtu as i32 + 14 - base;
                pkts.push(probe(ifindex, 0, len_diff + edge.clamp(-100_000, 100_000), 0, room));
                pkts.push(probe(ifindex, 0, len_diff, 0, room));
            }
        }
        for flags in [1u64, 2, 1 << 63] {
            pkts.push(probe(ifindex, 0, 0, flags, 8));
        }
    }
    pkts.push(packet(&[1, 2, 3], 0));
    let object = common::fixture("check_mtu", "mtu", &[]);
    spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
    for engine in ENGINES {
        let mut pair = Pair::load(&object, Some("check_mtu"), 0, engine).expect("load");
        pair.host_mut().mtus = ifaces.clone();
        let report = pair.run(&pkts, 5).expect("run");
        println!("check_mtu ({engine:?}): {report}");
        for m in &report.mismatches {
            println!("  {m}");
        }
        assert!(report.mismatches.is_empty(), "{engine:?}: spine and the kernel disagree");
        assert_eq!(report.packets, pkts.len());
        let v = report.verdicts;
        // FRAG_NEEDED (TX), within the MTU (PASS), -ENODEV and -EINVAL (DROP).
        assert!(v[XDP_TX] > 50 && v[XDP_PASS] > 50 && v[XDP_DROP] > 30, "{v:?}");
    }
}

#[test]
fn jiffies64_and_tai_go_forward_on_both_sides() {
    if !kernel_available() {
        return;
    }
    let object = common::fixture("check_mtu", "clocks", &[]);
    let pkts: Vec<_> = (0..8).map(|_| packet(&[0; 8], 0)).collect();
    let (report, _) = common::check(&object, "clocks_forward", &pkts, |_| {});
    assert_eq!(report.verdicts[XDP_PASS], pkts.len(), "{report}");
}
