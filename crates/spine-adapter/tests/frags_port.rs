//! Multi-buffer frames on the adapter's ports: a mem port with `with_frags` receives
//! frames longer than a pool buffer as chains (head and fragments), an `xdp.frags`
//! program (`tests/fixtures/frags_port.c`) reads past the head with
//! `bpf_xdp_load_bytes`, counts `bpf_xdp_get_buff_len` and trims with
//! `bpf_xdp_adjust_tail`, and the frame goes out of a port (XDP_TX, or a redirect)
//! whose transmit sees exactly the bytes the kernel's helpers would leave. A plain
//! `xdp` program never sees a chained frame: it is dropped and counted `drops.frags`.
//! Chains also go through cpumaps (delivered as `XDP_PASS` on the entry's worker) and
//! broadcasts (a copy per target, each its own buffers).
//! Every test checks that every buffer, fragments included, is back in the pool.

mod common;

use std::sync::{Arc, Mutex};

use common::TempDir;
use spine_adapter::{Adapter, AdapterBuilder, AdapterOptions, Assign, Device};
use spine_ports::{Burst, MemPort, PoolCache, PoolConfig, Port, PortError, PortStats};

/// Receives from a mem port (chained with `with_frags`) and records every frame it is
/// sent, head and fragments together.
struct Wire {
    rx: MemPort,
    frags: bool,
    sent: Sent,
    stats: PortStats,
}

/// The frames a [`Wire`] was sent, whole.
type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

impl Wire {
    /// The port as a device, and what it will have been sent.
    fn device(name: &str, frames: &[Vec<u8>], frags: bool) -> (Device, Sent) {
        let rx = if frames.is_empty() {
            MemPort::sink(name)
        } else {
            MemPort::replay(name, frames).unwrap().with_limit(frames.len() as u64).with_frags()
        };
        let sent = Arc::new(Mutex::new(Vec::new()));
        let w = Wire { rx, frags, sent: sent.clone(), stats: PortStats::default() };
        (Device::Other(Box::new(w)), sent)
    }
}

impl Port for Wire {
    fn name(&self) -> &str {
        self.rx.name()
    }

    fn rx_burst(&mut self, cache: &mut PoolCache, out: &mut Burst) -> Result<usize, PortError> {
        self.rx.rx_burst(cache, out)
    }

    fn tx_burst(&mut self, cache: &mut PoolCache, pkts: &mut Burst) -> Result<usize, PortError> {
        let pool = cache.pool().clone();
        let n = pkts.len();
        for buf in pkts.iter() {
            let mut f = pool.data(buf).unwrap().to_vec();
            assert!(pkts.has_chains() || !pool.has_frags(buf), "a chain in an unmarked burst");
            pool.frags(buf).for_each(|p| f.extend_from_slice(p));
            self.stats.tx_packets += 1;
            self.sent.lock().unwrap().push(f);
        }
        cache.free_burst(pkts).unwrap();
        Ok(n)
    }

    fn stats(&self) -> PortStats {
        let mut s = self.rx.stats();
        s.tx_packets = self.stats.tx_packets;
        s
    }

    fn takes_frags(&self) -> bool {
        self.frags
    }
}

fn object() -> Vec<u8> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/frags_port.c");
    let dir = TempDir::new("frags-port");
    spine_progs::compile_c(&src, &dir.join("frags_port.o"), &[]).expect("clang builds the fixture")
}

/// A frame of `len` bytes whose every byte depends on its position and on `len`.
fn frame(len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i * 13 + i / 256 + len) as u8).collect();
    f[12] = 0x88;
    f[13] = 0xb5;
    f
}

/// What `trim` leaves of `p`: its last 16 bytes at 14, 32 bytes from
/// `min(1784, len - 32)` at 30, and 100 bytes fewer.
fn trimmed(p: &[u8]) -> Vec<u8> {
    let len = p.len();
    let off = (len - 32).min(1784);
    let mut out = p.to_vec();
    out[14..30].copy_from_slice(&p[len - 16..]);
    out[30..62].copy_from_slice(&p[off..off + 32]);
    out.truncate(len - 100);
    out
}

/// 2,048-byte buffers with 256 of headroom: 1,792 bytes in the head.
const ROOM: usize = 1792;

/// Lengths around every boundary: one byte past the head, within the first fragment,
/// a jumbo frame, one that the trim makes linear again, and one filling many buffers.
const LENGTHS: [usize; 6] = [ROOM + 1, ROOM + 100, 2000, 4000, 9000, 3 * ROOM + 5];

fn build(section: &str, frames: &[Vec<u8>], out_takes_frags: bool) -> (Adapter, Sent, Sent) {
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(512), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let (wire, wire_sent) = Wire::device("wire", frames, true);
    let (out, out_sent) = Wire::device("out", &[], out_takes_frags);
    let w = b.add_port("wire", wire, None).unwrap();
    b.add_port("out", out, Some(100)).unwrap();
    let e = b.load_extension("trim", &object(), Some(section), "default", "test").unwrap();
    assert_eq!(b.extension(e).frags_aware(), section != "plain");
    b.attach(e, w).unwrap();
    (b.build().unwrap(), wire_sent, out_sent)
}

fn stats(a: &Adapter) -> Vec<u64> {
    let ext = a.extension("trim").unwrap();
    let m = ext.map("stats").unwrap();
    let mut v = [0u8; 8];
    (0..4u32)
        .map(|k| {
            m.lookup_user(&k.to_le_bytes(), &mut v).unwrap();
            u64::from_le_bytes(v)
        })
        .collect()
}

/// Runs to completion; returns the totals and the extension's `stats` after checking
/// that every buffer is back in the pool.
fn finish(mut a: Adapter) -> (spine_adapter::Totals, Vec<u64>) {
    a.run_to_completion(1000);
    let s = stats(&a);
    let pool = a.pool().clone();
    let report = a.finish().unwrap();
    assert_eq!(pool.shared_free(), pool.capacity(), "every buffer, fragments too, is back");
    (report.totals, s)
}

#[test]
fn chained_frames_run_as_multi_buffer_frames_and_go_out_of_their_port_whole() {
    let frames: Vec<Vec<u8>> = LENGTHS.iter().map(|&n| frame(n)).collect();
    let (a, wire_sent, _) = build("trim_tx", &frames, true);
    let (t, s) = finish(a);
    let n = frames.len() as u64;
    let total: usize = LENGTHS.iter().sum();
    assert_eq!(s, [n, total as u64, n, (total - 100 * LENGTHS.len()) as u64]);
    let wire = t.port("wire").unwrap();
    assert_eq!((wire.rx_packets, wire.verdicts.tx, wire.drops.total()), (n, n, 0));
    assert_eq!(wire.rx_bytes, total as u64, "received bytes count every fragment");
    assert_eq!(wire.tx_bytes, (total - 100 * LENGTHS.len()) as u64);
    let sent = wire_sent.lock().unwrap();
    let want: Vec<Vec<u8>> = frames.iter().map(|f| trimmed(f)).collect();
    assert_eq!(sent.len(), want.len());
    for (got, want) in sent.iter().zip(&want) {
        assert!(got == want, "frame of {} bytes differs", want.len() + 100);
    }
}

#[test]
fn a_redirect_sends_the_chain_to_another_port_and_a_port_without_chains_drops_it() {
    let frames: Vec<Vec<u8>> = [ROOM + 1, 4000, 120, 9000].iter().map(|&n| frame(n)).collect();
    let (a, _, out_sent) = build("trim_redirect", &frames, true);
    let (t, _) = finish(a);
    let mut want: Vec<Vec<u8>> = frames.iter().map(|f| trimmed_or_not(f)).collect();
    assert_eq!(*out_sent.lock().unwrap(), want);
    assert_eq!(t.port("wire").unwrap().verdicts.redirect, 4);
    // The same to a port that transmits one buffer per frame: the frames still chained
    // after the trim (4,000 and 9,000 bytes) are dropped; the one cut back to a single
    // buffer (1,793 bytes) and the short one go out.
    let (a, _, out_sent) = build("trim_redirect", &frames, false);
    let (t, _) = finish(a);
    want.remove(3);
    want.remove(1);
    assert_eq!(*out_sent.lock().unwrap(), want);
    assert_eq!(t.port("out").unwrap().drops.frags, 2);
}

/// `trim_redirect` on a frame: trimmed if long enough, as it came otherwise.
fn trimmed_or_not(f: &[u8]) -> Vec<u8> {
    if f.len() < 162 {
        f.to_vec()
    } else {
        trimmed(f)
    }
}

#[test]
fn a_program_not_loaded_as_xdp_frags_never_sees_a_chained_frame() {
    let frames: Vec<Vec<u8>> =
        [200, 4000, ROOM, ROOM + 1, 9000].iter().map(|&n| frame(n)).collect();
    let (a, _, out_sent) = build("plain", &frames, true);
    let (t, s) = finish(a);
    // The two frames that fit one buffer ran, linear (buff_len == data_end - data).
    assert_eq!(s[..3], [2, (200 + ROOM) as u64, 0]);
    assert_eq!(*out_sent.lock().unwrap(), vec![trimmed(&frames[0]), trimmed(&frames[2])]);
    let wire = t.port("wire").unwrap();
    assert_eq!((wire.rx_packets, wire.drops.frags), (5, 3));
    assert_eq!(t.extension("trim").unwrap().runs, 2);
}

#[test]
fn the_longest_chain_runs_and_a_longer_frame_is_dropped_by_the_port() {
    // 18 buffers (a head and the kernel's 17 fragments) hold 18 * 1,792 bytes.
    let frames: Vec<Vec<u8>> = [18 * ROOM, 18 * ROOM + 1, 4000].iter().map(|&n| frame(n)).collect();
    let (a, wire_sent, _) = build("trim_tx", &frames, true);
    let (t, s) = finish(a);
    assert_eq!(s[0], 2, "the frame too long for a chain never reached the program");
    let wire = t.port("wire").unwrap();
    assert_eq!((wire.rx_packets, wire.device.rx_drops), (2, 1));
    assert_eq!(*wire_sent.lock().unwrap(), vec![trimmed(&frames[0]), trimmed(&frames[2])]);
}

/// A wire port running `trim_pass` with port `host` (no program) as its host path; the
/// host receives `from_host`. Returns the adapter and what each port was sent.
fn with_host_path(
    frames: &[Vec<u8>],
    from_host: &[Vec<u8>],
    host_takes_frags: bool,
) -> (Adapter, Sent, Sent) {
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(512), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let (wire, wire_sent) = Wire::device("wire", frames, true);
    let (host, host_sent) = Wire::device("host", from_host, host_takes_frags);
    let w = b.add_port("wire", wire, None).unwrap();
    let h = b.add_port("host", host, None).unwrap();
    b.set_host_path(w, h).unwrap();
    let e = b.load_extension("trim", &object(), Some("trim_pass"), "default", "test").unwrap();
    b.attach(e, w).unwrap();
    (b.build().unwrap(), wire_sent, host_sent)
}

/// `XDP_PASS` of a chained frame sends it whole to the port's host path (a TAP in a
/// real adapter, which writes it with one `writev`); chained frames the host path
/// receives (the kernel's jumbo frames) go out of the wire port whole. A host path that
/// cannot send chains drops them, counted `drops.frags`. Every buffer comes back.
#[test]
fn passed_chains_reach_the_host_path_whole_and_the_host_s_chains_reach_the_wire() {
    let frames: Vec<Vec<u8>> = LENGTHS.iter().map(|&n| frame(n)).collect();
    let from_host: Vec<Vec<u8>> = [9000usize, 60, ROOM + 1].iter().map(|&n| frame(n)).collect();
    let (a, wire_sent, host_sent) = with_host_path(&frames, &from_host, true);
    let (t, _) = finish(a);
    let want: Vec<Vec<u8>> = frames.iter().map(|f| trimmed(f)).collect();
    assert!(*host_sent.lock().unwrap() == want, "each frame trimmed and passed whole");
    assert!(*wire_sent.lock().unwrap() == from_host, "the host's frames left by the wire");
    let (w, h) = (t.port("wire").unwrap(), t.port("host").unwrap());
    let n = frames.len() as u64;
    assert_eq!((w.verdicts.pass, w.to_host, w.drops.total()), (n, n, 0), "{w:?}");
    assert_eq!((h.rx_packets, h.unhandled, h.to_host, h.drops.total()), (3, 3, 3, 0), "{h:?}");

    // A host path that sends one buffer per frame: the frames still chained after the
    // trim (all but the two the trim brings within one buffer) are dropped there; its
    // own chains still leave.
    let (a, wire_sent, host_sent) = with_host_path(&frames, &from_host, false);
    let (t, _) = finish(a);
    let linear: Vec<Vec<u8>> = want.iter().filter(|f| f.len() <= ROOM).cloned().collect();
    assert_eq!(linear.len(), 2);
    assert!(*host_sent.lock().unwrap() == linear);
    assert!(*wire_sent.lock().unwrap() == from_host);
    assert_eq!(t.port("host").unwrap().drops.frags, n - 2);
}

/// A wire port on worker 0 running `trim_cpu` with port `host` (on worker `host_on`)
/// as its host path, and cpumap entries for workers 0 and 1.
fn through_cpumap(frames: &[Vec<u8>], host_takes_frags: bool, host_on: usize) -> (Adapter, Sent) {
    let opts = AdapterOptions {
        workers: 2,
        assign: Assign::Partition,
        pool: PoolConfig::new(512),
        ..Default::default()
    };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let (wire, _) = Wire::device("wire", frames, true);
    let (host, host_sent) = Wire::device("host", &[], host_takes_frags);
    let w = b.add_port("wire", wire, None).unwrap();
    let h = b.add_port("host", host, None).unwrap();
    b.set_host_path(w, h).unwrap();
    b.set_worker(w, 0).unwrap();
    b.set_worker(h, host_on).unwrap();
    let e = b.load_extension("trim", &object(), Some("trim_cpu"), "default", "test").unwrap();
    b.attach(e, w).unwrap();
    for cpu in [0u32, 1] {
        b.update_map(e, "cpus", &cpu.to_le_bytes(), &64u32.to_le_bytes()).unwrap();
    }
    (b.build().unwrap(), host_sent)
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// A chain redirected into a cpumap is delivered whole as `XDP_PASS` by the entry's
/// worker, the receiving one (key 0: even lengths) or the other (key 1: odd lengths),
/// as the kernel's cpumap builds an skb with every fragment; the host path gets exactly
/// the bytes the program left. A host path that sends one buffer per frame drops the
/// chains, counted `drops.frags`.
#[test]
fn chains_redirected_into_a_cpumap_are_passed_whole_by_the_entry_s_worker() {
    let lengths = [ROOM + 1, ROOM + 100, 2000, 4000, 9000, 3 * ROOM + 5, 8999, 300];
    let frames: Vec<Vec<u8>> = lengths.iter().map(|&n| frame(n)).collect();
    let odd = lengths.iter().filter(|&&n| n % 2 == 1).count() as u64;
    let n = frames.len() as u64;
    let want: Vec<Vec<u8>> = frames.iter().map(|f| trimmed(f)).collect();
    for host_on in [0, 1] {
        let (a, host_sent) = through_cpumap(&frames, true, host_on);
        let (t, s) = finish(a);
        assert_eq!(s[0], n);
        assert_eq!(sorted(host_sent.lock().unwrap().clone()), sorted(want.clone()));
        let w = t.port("wire").unwrap();
        assert_eq!((w.verdicts.redirect, w.to_host, w.drops.total()), (n, n, 0), "{w:?}");
        let h = t.port("host").unwrap();
        assert_eq!((h.tx_packets, h.drops.total()), (n, 0), "{h:?}");
        let bytes: usize = want.iter().map(Vec::len).sum();
        assert_eq!(h.tx_bytes, bytes as u64, "sent bytes count every fragment");
        // Odd lengths went to worker 1 (the cpumap); every frame that worker 0
        // delivered (even lengths) crossed to worker 1 when the host path is there, and
        // every one worker 1 delivered crossed back when it is not.
        let (w0, w1) = (&t.workers[0], &t.workers[1]);
        if host_on == 0 {
            assert_eq!((w0.peer_out, w1.peer_in, w1.peer_out, w0.peer_in), (odd, odd, odd, odd));
        } else {
            assert_eq!((w0.peer_out, w1.peer_in, w1.peer_out), (n, n, 0));
        }
    }
    let (a, host_sent) = through_cpumap(&frames, false, 0);
    let (t, _) = finish(a);
    let linear: Vec<Vec<u8>> = want.iter().filter(|f| f.len() <= ROOM).cloned().collect();
    assert_eq!(linear.len(), 3, "1,793 and 1,892 bytes are trimmed back into the head; 300");
    assert_eq!(sorted(host_sent.lock().unwrap().clone()), sorted(linear));
    assert_eq!(t.port("host").unwrap().drops.frags, n - 3);
}

/// A wire port (ifindex 10) running `trim_bcast` over devmap entries for ports `a`
/// (20), `b` (30), `c` (40; one buffer per frame) and the wire itself, in that order.
/// With two workers, `a` is on the second (the copy crosses to it) and the rest on the
/// first. Returns the adapter and what the wire, a, b and c were sent.
fn broadcast(frames: &[Vec<u8>], pool: PoolConfig, workers: usize) -> (Adapter, [Sent; 4]) {
    let opts = AdapterOptions { workers, assign: Assign::Partition, pool, ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let (wire, wire_sent) = Wire::device("wire", frames, true);
    let w = b.add_port("wire", wire, Some(10)).unwrap();
    let mut sent = vec![wire_sent];
    for (name, ifindex, frags) in [("a", 20, true), ("b", 30, true), ("c", 40, false)] {
        let (dev, s) = Wire::device(name, &[], frags);
        let q = b.add_port(name, dev, Some(ifindex)).unwrap();
        b.set_worker(q, if workers > 1 && name == "a" { 1 } else { 0 }).unwrap();
        sent.push(s);
    }
    b.set_worker(w, 0).unwrap();
    let e = b.load_extension("trim", &object(), Some("trim_bcast"), "default", "test").unwrap();
    b.attach(e, w).unwrap();
    for (k, ifindex) in [(0u32, 20u32), (1, 30), (2, 40), (3, 10)] {
        b.update_map(e, "ports", &k.to_le_bytes(), &ifindex.to_le_bytes()).unwrap();
    }
    (b.build().unwrap(), sent.try_into().unwrap())
}

/// `BPF_F_BROADCAST` of a chain: every port that sends chains gets the whole frame as
/// the program left it, each in buffers of its own (the last target the original, the
/// others copies); a port that sends one buffer per frame drops it, counted
/// `drops.frags` there, and still gets the frames cut back to one buffer.
#[test]
fn a_broadcast_chain_reaches_every_port_whole_in_buffers_of_its_own() {
    for workers in [1, 2] {
        broadcast_to_four(workers);
    }
}

fn broadcast_to_four(workers: usize) {
    let frames: Vec<Vec<u8>> = LENGTHS.iter().map(|&n| frame(n)).collect();
    let (a, [wire, pa, pb, pc]) = broadcast(&frames, PoolConfig::new(512), workers);
    let (t, s) = finish(a);
    let n = frames.len() as u64;
    assert_eq!(s[0], n);
    let want: Vec<Vec<u8>> = frames.iter().map(|f| trimmed(f)).collect();
    for (name, sent) in [("wire", &wire), ("a", &pa), ("b", &pb)] {
        assert!(*sent.lock().unwrap() == want, "port {name} got every frame whole");
        let p = t.port(name).unwrap();
        let bytes: usize = want.iter().map(Vec::len).sum();
        assert_eq!((p.tx_packets, p.tx_bytes), (n, bytes as u64), "{name}: {p:?}");
    }
    let linear: Vec<Vec<u8>> = want.iter().filter(|f| f.len() <= ROOM).cloned().collect();
    assert_eq!(linear.len(), 2);
    assert!(*pc.lock().unwrap() == linear);
    let c = t.port("c").unwrap();
    assert_eq!((c.tx_packets, c.drops.frags, c.drops.total()), (2, n - 2, n - 2));
    let w = t.port("wire").unwrap();
    assert_eq!((w.verdicts.redirect, w.drops.total()), (n, 0));
    if workers == 2 {
        assert_eq!((t.workers[0].peer_out, t.workers[1].peer_in), (n, n), "a's copies crossed");
    }
}

/// A broadcast copy the pool has no buffers for is counted `drops.no_buffer` against
/// its port; the copies made and the original still go out whole, and every buffer,
/// those of a copy given up mid-way included, is back in the pool. A 9,000-byte chain
/// (five buffers, trimmed to 8,900) to a, b, c and the wire: c sends no chains, so it
/// gets no copy (`drops.frags`); a and b each need a copy of five buffers, the wire
/// takes the original.
#[test]
fn a_broadcast_copy_the_pool_cannot_hold_is_counted_and_loses_no_buffer() {
    let frames = vec![frame(9000)];
    let want = vec![trimmed(&frames[0])];
    // Pool size: which of wire, a, b got the frame.
    for (buffers, sent_to) in
        [(9u32, [true, false, false]), (12, [true, true, false]), (15, [true; 3])]
    {
        let pool = PoolConfig { cache_batch: 4, ..PoolConfig::new(buffers) };
        let (a, sent) = broadcast(&frames, pool, 1);
        let (t, _) = finish(a);
        for (i, name) in ["wire", "a", "b"].into_iter().enumerate() {
            let got = sent[i].lock().unwrap();
            let p = t.port(name).unwrap();
            if sent_to[i] {
                assert!(*got == want, "{name} got the frame whole ({buffers} buffers)");
                assert_eq!((p.tx_packets, p.drops.no_buffer), (1, 0), "{name}: {p:?}");
            } else {
                assert!(got.is_empty(), "{name} ({buffers} buffers)");
                assert_eq!((p.tx_packets, p.drops.no_buffer), (0, 1), "{name}: {p:?}");
            }
        }
        let c = t.port("c").unwrap();
        assert_eq!((c.tx_packets, c.drops.frags, c.drops.total()), (0, 1, 1));
        assert!(sent[3].lock().unwrap().is_empty());
        assert_eq!(t.port("wire").unwrap().drops.total(), 0);
    }
}

/// A broadcast of a chain whose every target sends one buffer per frame: each counts
/// it `drops.frags`, nothing is copied, and the ingress port counts no other drop.
#[test]
fn a_broadcast_chain_with_no_port_that_sends_chains_is_counted_by_each_target() {
    let frames: Vec<Vec<u8>> = [9000usize, 4000].iter().map(|&n| frame(n)).collect();
    let opts = AdapterOptions { workers: 1, pool: PoolConfig::new(512), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let (wire, wire_sent) = Wire::device("wire", &frames, true);
    let w = b.add_port("wire", wire, Some(10)).unwrap();
    let (c, c_sent) = Wire::device("c", &[], false);
    let (d, d_sent) = Wire::device("d", &[], false);
    b.add_port("c", c, Some(40)).unwrap();
    b.add_port("d", d, Some(50)).unwrap();
    let e = b.load_extension("trim", &object(), Some("trim_bcast"), "default", "test").unwrap();
    b.attach(e, w).unwrap();
    for (k, ifindex) in [(0u32, 40u32), (2, 50)] {
        b.update_map(e, "ports", &k.to_le_bytes(), &ifindex.to_le_bytes()).unwrap();
    }
    let (t, _) = finish(b.build().unwrap());
    for name in ["c", "d"] {
        let p = t.port(name).unwrap();
        assert_eq!((p.tx_packets, p.drops.frags, p.drops.total()), (0, 2, 2), "{p:?}");
    }
    assert!(c_sent.lock().unwrap().is_empty() && d_sent.lock().unwrap().is_empty());
    assert!(wire_sent.lock().unwrap().is_empty());
    let w = t.port("wire").unwrap();
    assert_eq!((w.verdicts.redirect, w.drops.total()), (2, 0), "{w:?}");
}
