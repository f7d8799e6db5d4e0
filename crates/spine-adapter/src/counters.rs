//! Counters: plain integers each worker owns and bumps on its packet path (no atomics,
//! no sharing), published to a snapshot a few times a second and summed on read.
//!
//! Ingress counters (received, verdicts, drops by reason) belong to the port a packet
//! came in on; egress counters (handed to the port, transmit drops) to the port it
//! leaves by. Extension counters count invocations and their outcomes.

use serde::{Deserialize, Serialize};
use spine_ports::PortStats;

/// XDP verdicts by action number (`XDP_ABORTED` 0 … `XDP_REDIRECT` 4), and values
/// outside the enum.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdicts {
    pub aborted: u64,
    pub drop: u64,
    pub pass: u64,
    pub tx: u64,
    pub redirect: u64,
    /// Return values that are no XDP action: the kernel warns and drops.
    pub invalid: u64,
}

impl Verdicts {
    #[inline]
    pub fn count(&mut self, verdict: u32) {
        match verdict {
            0 => self.aborted += 1,
            1 => self.drop += 1,
            2 => self.pass += 1,
            3 => self.tx += 1,
            4 => self.redirect += 1,
            _ => self.invalid += 1,
        }
    }

    pub fn total(&self) -> u64 {
        self.aborted + self.drop + self.pass + self.tx + self.redirect + self.invalid
    }

    fn add(&mut self, o: &Verdicts) {
        self.aborted += o.aborted;
        self.drop += o.drop;
        self.pass += o.pass;
        self.tx += o.tx;
        self.redirect += o.redirect;
        self.invalid += o.invalid;
    }
}

/// Why the adapter dropped a packet (the port's own losses are in [`PortTotals::device`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// The extension said `XDP_DROP`.
    pub verdict: u64,
    /// The extension said `XDP_ABORTED`.
    pub aborted: u64,
    /// The extension faulted (out of budget, bad access): the packet is aborted.
    pub fault: u64,
    /// A return value that is no XDP action.
    pub invalid: u64,
    /// `XDP_PASS` (or no extension) on a port without a host path.
    pub no_host_path: u64,
    /// `XDP_REDIRECT` without a target (a map lookup that found nothing).
    pub redirect_no_target: u64,
    /// `XDP_REDIRECT` to an ifindex no port has.
    pub redirect_no_port: u64,
    /// `XDP_REDIRECT` to a port the extension's domain may not use.
    pub redirect_refused: u64,
    /// `XDP_REDIRECT` to a CPU no worker runs on.
    pub redirect_bad_cpu: u64,
    /// A worker-to-worker ring was full.
    pub peer_full: u64,
    /// Egress: the port's transmit queue stayed full.
    pub tx_full: u64,
    /// Egress: the port failed (its error was logged once).
    pub tx_error: u64,
    /// A multi-buffer (chained) frame where none may go: a port whose program is not
    /// `xdp.frags` (or that has none), a verdict or port that cannot take fragments.
    #[serde(default)]
    pub frags: u64,
    /// The pool had no buffers for a copy a multi-buffer frame needed (a broadcast
    /// sends each extra target a copy of its own).
    #[serde(default)]
    pub no_buffer: u64,
}

impl Drops {
    pub fn total(&self) -> u64 {
        self.verdict
            + self.aborted
            + self.fault
            + self.invalid
            + self.no_host_path
            + self.redirect_no_target
            + self.redirect_no_port
            + self.redirect_refused
            + self.redirect_bad_cpu
            + self.peer_full
            + self.tx_full
            + self.tx_error
            + self.frags
            + self.no_buffer
    }

    fn add(&mut self, o: &Drops) {
        self.verdict += o.verdict;
        self.aborted += o.aborted;
        self.fault += o.fault;
        self.invalid += o.invalid;
        self.no_host_path += o.no_host_path;
        self.redirect_no_target += o.redirect_no_target;
        self.redirect_no_port += o.redirect_no_port;
        self.redirect_refused += o.redirect_refused;
        self.redirect_bad_cpu += o.redirect_bad_cpu;
        self.peer_full += o.peer_full;
        self.tx_full += o.tx_full;
        self.tx_error += o.tx_error;
        self.frags += o.frags;
        self.no_buffer += o.no_buffer;
    }
}

/// One port's counters on one worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Handed to the port for transmission.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Verdicts of the extension attached to this port.
    pub verdicts: Verdicts,
    /// Delivered to the host path (`XDP_PASS`, or no extension attached).
    pub to_host: u64,
    /// Received while no extension ran (none attached, or detached).
    pub unhandled: u64,
    pub drops: Drops,
}

/// One extension's counters on one worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtCounters {
    pub runs: u64,
    pub bytes: u64,
    pub verdicts: Verdicts,
    pub faults: u64,
    /// `bpf_timer` callbacks run (their faults are in `faults`).
    pub timers: u64,
}

/// A worker's own activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerCounters {
    pub rounds: u64,
    /// Rounds in which no source had anything.
    pub idle_rounds: u64,
    /// Packets received from other workers' rings.
    pub peer_in: u64,
    /// Packets handed to other workers.
    pub peer_out: u64,
    /// `bpf_trace_printk` lines.
    pub trace_lines: u64,
    /// Active messages XDP programs sent with `spine_msg_send`, delivered to an
    /// endpoint this worker serves in the program's domain (including those another
    /// worker handed over, and messages from a tunnel port addressed to an endpoint).
    #[serde(default)]
    pub msg_delivered: u64,
    /// Those that named no such endpoint (or found it full): dropped.
    #[serde(default)]
    pub msg_undelivered: u64,
    /// Extension → extension messages (`spine_msg_post`) queued on this worker.
    #[serde(default)]
    pub msg_posted: u64,
    /// Posted messages dropped because the worker's queue was full (or no pool buffer
    /// was free to run them on).
    #[serde(default)]
    pub msg_post_dropped: u64,
    /// Posted messages no handler of the sender's domain took.
    #[serde(default)]
    pub msg_post_unhandled: u64,
    /// Handler runs on posted messages.
    #[serde(default)]
    pub msg_post_runs: u64,
    /// `spine_msg_post_to` calls refused because the extension they name does not
    /// exist, registers no handler or is of another domain (`-ENOENT` to the sender).
    #[serde(default)]
    pub msg_post_refused: u64,
    /// Delayed posts (`spine_msg_post_to` with a delay) queued on this worker.
    #[serde(default)]
    pub msg_post_delayed: u64,
    /// Delayed posts refused because the worker's queue of delayed posts was full
    /// (`-ENOSPC` to the sender).
    #[serde(default)]
    pub msg_post_delay_full: u64,
    /// FIB states `bpf_fib_lookup` loaded (`arc-swap` loads of the published state):
    /// one per burst that looks something up, on the burst path and the per-packet
    /// paths alike (`WorkerHost::pin_fib`), one per lookup outside a burst.
    #[serde(default)]
    pub fib_loads: u64,
    /// Messages for an endpoint another worker serves, handed to that worker through
    /// the worker rings (it counts them `msg_delivered` or `msg_undelivered`).
    #[serde(default)]
    pub msg_handed: u64,
    /// Those the ring to that worker had no room for (or no pool buffer was free to
    /// carry): dropped.
    #[serde(default)]
    pub msg_handoff_dropped: u64,
    /// Active-message frames (ethertype 0x88B6) received on tunnel ports.
    #[serde(default)]
    pub msg_remote_in: u64,
    /// Those that were malformed (short, bad magic or version, bad length): dropped.
    #[serde(default)]
    pub msg_remote_bad: u64,
    /// Handler runs on messages from tunnel ports.
    #[serde(default)]
    pub msg_remote_runs: u64,
    /// Messages from tunnel ports that no handler took (none registered by a domain
    /// allowed the port) or no endpoint of the port took: dropped.
    #[serde(default)]
    pub msg_remote_unhandled: u64,
    /// Messages handlers sent to a remote source, queued out of its tunnel port.
    #[serde(default)]
    pub msg_remote_out: u64,
    /// Those that could not be sent (the sender's domain may not use the port, no
    /// pool buffer, or the port is no tunnel): dropped.
    #[serde(default)]
    pub msg_remote_out_dropped: u64,
    /// Bulk messages (`spine_msg_send_bulk`) addressed to a remote source and refused:
    /// sent from anywhere but a handler run on an endpoint's message (no endpoint area
    /// the reference could be into), over 16 KiB, outside that endpoint's area, to a
    /// port that is no tunnel or the sender's domain may not use, or cut short for want
    /// of pool buffers (the pieces already sent are discarded over there).
    #[serde(default)]
    pub msg_bulk_remote_refused: u64,
    /// Pieces of bulk messages (frames of version 2) received on tunnel ports.
    #[serde(default)]
    pub msg_bulk_pieces_in: u64,
    /// Those refused: malformed (short, a total of 0 or over 16 KiB, an offset off a
    /// piece boundary or past the total, a length not the piece's), a duplicate, or
    /// one whose handler, destination or total differ from its message's first piece.
    #[serde(default)]
    pub msg_bulk_piece_refused: u64,
    /// Incomplete bulk messages discarded: evicted by a newer message when every
    /// reassembly slot of the port was busy.
    #[serde(default)]
    pub msg_bulk_discarded: u64,
    /// Incomplete bulk messages expired: not whole `[adapter] bulk_expiry_ms` after
    /// their first piece (their slot freed whether or not another piece arrives).
    #[serde(default)]
    pub msg_bulk_expired: u64,
    /// Bulk messages reassembled whole from a tunnel port (their handlers then run, or
    /// `msg_remote_unhandled`).
    #[serde(default)]
    pub msg_bulk_remote_in: u64,
    /// Bulk messages handlers sent to a remote source from an endpoint's message
    /// (`spine_msg_send_bulk`, the reference into that endpoint's area), queued out of
    /// the tunnel port in pieces.
    #[serde(default)]
    pub msg_bulk_remote_out: u64,
    /// Pieces of a bulk message made whole a moment ago (one of the last 8 per port)
    /// that arrived again (a resend that crossed the ACK): refused, and the message
    /// ACKed again.
    #[serde(default)]
    pub msg_bulk_piece_late: u64,
    /// ACKs sent for bulk messages made whole (and again for late pieces).
    #[serde(default)]
    pub msg_bulk_acks_out: u64,
    /// NACKs sent for bulk messages in reassembly with no new piece for
    /// `[adapter] bulk_nack_ms`.
    #[serde(default)]
    pub msg_bulk_nacks_out: u64,
    /// ACKs of bulk messages this worker sent: their kept copies freed.
    #[serde(default)]
    pub msg_bulk_acks_in: u64,
    /// NACKs of bulk messages this worker sent, honoured: the pieces named sent again.
    #[serde(default)]
    pub msg_bulk_nacks_in: u64,
    /// Pieces sent again on a NACK.
    #[serde(default)]
    pub msg_bulk_pieces_resent: u64,
    /// ACK and NACK frames refused: malformed (short, a bad kind, a total of 0 or over
    /// 16 KiB, a bitmap out of range) or naming no message kept for that port (never
    /// sent, already ACKed, expired, evicted; another `from` or total). The ACKs and
    /// NACKs of bulk messages an application built and sent as frames itself land
    /// here too: the adapter keeps no copy of those.
    #[serde(default)]
    pub msg_bulk_ctl_refused: u64,
    /// NACKs refused because their message was already resent `[adapter]
    /// bulk_retx_max` times.
    #[serde(default)]
    pub msg_bulk_resend_capped: u64,
    /// Kept bulk messages dropped neither ACKed nor NACKed for `[adapter]
    /// bulk_expiry_ms`.
    #[serde(default)]
    pub msg_bulk_retx_expired: u64,
    /// Kept bulk messages evicted, unacknowledged, by a newer one when the store was
    /// full (`[adapter] bulk_retx_slots`): no longer retransmitted.
    #[serde(default)]
    pub msg_bulk_retx_evicted: u64,
}

/// Everything one worker counts, indexed by port and extension id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    pub ports: Vec<PortCounters>,
    pub exts: Vec<ExtCounters>,
    pub worker: WorkerCounters,
    /// The port's own counters, for the ports this worker owns (others: `None`).
    pub devices: Vec<Option<PortStats>>,
}

impl Counters {
    pub fn new(ports: usize, exts: usize) -> Self {
        Counters {
            ports: vec![PortCounters::default(); ports],
            exts: vec![ExtCounters::default(); exts],
            worker: WorkerCounters::default(),
            devices: vec![None; ports],
        }
    }
}

/// A port's totals over every worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortTotals {
    pub name: String,
    pub kind: String,
    pub ifindex: u32,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub verdicts: Verdicts,
    pub to_host: u64,
    pub unhandled: u64,
    pub drops: Drops,
    /// What the port itself counted (its own losses: no buffer, kernel, bad descriptor).
    pub device: DeviceTotals,
}

/// [`PortStats`], as reported.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTotals {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_drops: u64,
    pub tx_drops: u64,
    pub tx_copied: u64,
    /// A `udp` tunnel port's receive drops by reason (part of `rx_drops`); zero elsewhere.
    #[serde(default)]
    pub tunnel: TunnelTotals,
}

/// Datagrams a tunnel port refused, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelTotals {
    /// From an address other than the configured peer.
    pub wrong_peer: u64,
    /// With a key: too short for the authenticated header, or without one.
    #[serde(default)]
    pub auth_no_tag: u64,
    /// With a key: the tag did not match (another key, or changed bytes).
    #[serde(default)]
    pub auth_bad_tag: u64,
    /// With a key: seen before, or the port's own datagram sent back.
    #[serde(default)]
    pub auth_replay: u64,
    /// With a key: behind the replay window, or from an older session of the peer.
    #[serde(default)]
    pub auth_too_old: u64,
}

impl TunnelTotals {
    /// Each reason with its name, as in metrics and `spine stats`.
    pub fn list(&self) -> [(&'static str, u64); 5] {
        [
            ("wrong_peer", self.wrong_peer),
            ("auth_no_tag", self.auth_no_tag),
            ("auth_bad_tag", self.auth_bad_tag),
            ("auth_replay", self.auth_replay),
            ("auth_too_old", self.auth_too_old),
        ]
    }

    pub fn total(&self) -> u64 {
        self.list().iter().map(|(_, n)| n).sum()
    }
}

impl From<PortStats> for DeviceTotals {
    fn from(s: PortStats) -> Self {
        DeviceTotals {
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
            rx_drops: s.rx_drops.total(),
            tx_drops: s.tx_drops.total(),
            tx_copied: s.tx_copied,
            tunnel: TunnelTotals {
                wrong_peer: s.rx_drops.wrong_peer,
                auth_no_tag: s.rx_drops.auth_no_tag,
                auth_bad_tag: s.rx_drops.auth_bad_tag,
                auth_replay: s.rx_drops.auth_replay,
                auth_too_old: s.rx_drops.auth_too_old,
            },
        }
    }
}

/// An extension's totals over every worker.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtTotals {
    pub name: String,
    pub domain: String,
    pub runs: u64,
    pub bytes: u64,
    pub verdicts: Verdicts,
    pub faults: u64,
    /// `bpf_timer` callbacks run.
    #[serde(default)]
    pub timers: u64,
    pub detached: bool,
}

/// Every counter of the adapter, summed over workers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Seconds since the adapter started.
    pub elapsed_s: f64,
    pub ports: Vec<PortTotals>,
    pub extensions: Vec<ExtTotals>,
    pub workers: Vec<WorkerCounters>,
}

/// Names of what the counters are indexed by.
#[derive(Debug, Clone, Default)]
pub struct Labels {
    /// (name, kind, ifindex) per port.
    pub ports: Vec<(String, &'static str, u32)>,
    /// (name, domain) per extension.
    pub exts: Vec<(String, String)>,
}

impl Totals {
    /// Sums per-worker counters; `detached` says which extensions the watchdog detached.
    pub fn sum(labels: &Labels, workers: &[Counters], detached: &[bool], elapsed_s: f64) -> Self {
        let mut ports: Vec<PortTotals> = labels
            .ports
            .iter()
            .map(|(n, k, i)| PortTotals {
                name: n.clone(),
                kind: k.to_string(),
                ifindex: *i,
                ..PortTotals::default()
            })
            .collect();
        let mut exts: Vec<ExtTotals> = labels
            .exts
            .iter()
            .enumerate()
            .map(|(i, (n, d))| ExtTotals {
                name: n.clone(),
                domain: d.clone(),
                detached: detached.get(i).copied().unwrap_or(false),
                ..ExtTotals::default()
            })
            .collect();
        for w in workers {
            for (t, c) in ports.iter_mut().zip(&w.ports) {
                t.rx_packets += c.rx_packets;
                t.rx_bytes += c.rx_bytes;
                t.tx_packets += c.tx_packets;
                t.tx_bytes += c.tx_bytes;
                t.verdicts.add(&c.verdicts);
                t.to_host += c.to_host;
                t.unhandled += c.unhandled;
                t.drops.add(&c.drops);
            }
            for (t, d) in ports.iter_mut().zip(&w.devices) {
                if let Some(d) = d {
                    t.device = DeviceTotals::from(*d);
                }
            }
            for (t, c) in exts.iter_mut().zip(&w.exts) {
                t.runs += c.runs;
                t.bytes += c.bytes;
                t.verdicts.add(&c.verdicts);
                t.faults += c.faults;
                t.timers += c.timers;
            }
        }
        Totals {
            elapsed_s,
            ports,
            extensions: exts,
            workers: workers.iter().map(|w| w.worker).collect(),
        }
    }

    pub fn port(&self, name: &str) -> Option<&PortTotals> {
        self.ports.iter().find(|p| p.name == name)
    }

    pub fn extension(&self, name: &str) -> Option<&ExtTotals> {
        self.extensions.iter().find(|e| e.name == name)
    }

    pub fn rx_packets(&self) -> u64 {
        self.ports.iter().map(|p| p.rx_packets).sum()
    }

    pub fn tx_packets(&self) -> u64 {
        self.ports.iter().map(|p| p.tx_packets).sum()
    }

    pub fn drops(&self) -> u64 {
        self.ports.iter().map(|p| p.drops.total()).sum()
    }

    /// The counters in the Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let port = |p: &PortTotals| format!("port=\"{}\"", esc(&p.name));
        let ports = |f: fn(&PortTotals) -> u64| -> Vec<(String, u64)> {
            self.ports.iter().map(|p| (port(p), f(p))).collect()
        };
        metric(&mut s, "port_rx_packets_total", "Packets received.", ports(|p| p.rx_packets));
        metric(&mut s, "port_rx_bytes_total", "Bytes received.", ports(|p| p.rx_bytes));
        metric(
            &mut s,
            "port_tx_packets_total",
            "Packets handed to the port.",
            ports(|p| p.tx_packets),
        );
        metric(&mut s, "port_tx_bytes_total", "Bytes handed to the port.", ports(|p| p.tx_bytes));
        metric(
            &mut s,
            "port_to_host_total",
            "Packets sent to the host path.",
            ports(|p| p.to_host),
        );
        let mut rows = Vec::new();
        for p in &self.ports {
            for (v, n) in verdict_list(&p.verdicts) {
                rows.push((format!("{},verdict=\"{v}\"", port(p)), n));
            }
        }
        metric(&mut s, "port_verdicts_total", "Verdicts of the port's extension.", rows);
        let mut rows = Vec::new();
        for p in &self.ports {
            for (r, n) in drop_list(&p.drops) {
                rows.push((format!("{},reason=\"{r}\"", port(p)), n));
            }
            rows.push((format!("{},reason=\"device_rx\"", port(p)), p.device.rx_drops));
            rows.push((format!("{},reason=\"device_tx\"", port(p)), p.device.tx_drops));
        }
        metric(&mut s, "port_drops_total", "Packets dropped, by reason.", rows);
        let mut rows = Vec::new();
        for p in self.ports.iter().filter(|p| p.kind == "udp") {
            for (r, n) in p.device.tunnel.list() {
                rows.push((format!("{},reason=\"{r}\"", port(p)), n));
            }
        }
        metric(
            &mut s,
            "port_tunnel_drops_total",
            "Tunnel datagrams refused before parsing, by reason (also in device_rx).",
            rows,
        );
        let ext =
            |e: &ExtTotals| format!("extension=\"{}\",domain=\"{}\"", esc(&e.name), esc(&e.domain));
        let rows = self.extensions.iter().map(|e| (ext(e), e.runs)).collect();
        metric(&mut s, "extension_runs_total", "Invocations.", rows);
        let rows = self.extensions.iter().map(|e| (ext(e), e.faults)).collect();
        metric(&mut s, "extension_faults_total", "Invocations stopped by a fault.", rows);
        let mut rows = Vec::new();
        for e in &self.extensions {
            for (v, n) in verdict_list(&e.verdicts) {
                rows.push((format!("{},verdict=\"{v}\"", ext(e)), n));
            }
        }
        metric(&mut s, "extension_verdicts_total", "Verdicts.", rows);
        let _ = writeln!(s, "# HELP spine_extension_detached Whether the watchdog detached it.");
        let _ = writeln!(s, "# TYPE spine_extension_detached gauge");
        for e in &self.extensions {
            let _ = writeln!(s, "spine_extension_detached{{{}}} {}", ext(e), u8::from(e.detached));
        }
        let workers = |f: fn(&WorkerCounters) -> u64| -> Vec<(String, u64)> {
            self.workers
                .iter()
                .enumerate()
                .map(|(i, c)| (format!("worker=\"{i}\""), f(c)))
                .collect()
        };
        metric(&mut s, "worker_rounds_total", "Dispatch rounds.", workers(|c| c.rounds));
        metric(
            &mut s,
            "worker_idle_rounds_total",
            "Rounds with no work.",
            workers(|c| c.idle_rounds),
        );
        metric(
            &mut s,
            "worker_peer_in_total",
            "Packets from other workers.",
            workers(|c| c.peer_in),
        );
        metric(
            &mut s,
            "worker_peer_out_total",
            "Packets to other workers.",
            workers(|c| c.peer_out),
        );
        s
    }
}

fn metric(s: &mut String, name: &str, help: &str, rows: Vec<(String, u64)>) {
    use std::fmt::Write;
    let _ = writeln!(s, "# HELP spine_{name} {help}");
    let _ = writeln!(s, "# TYPE spine_{name} counter");
    for (labels, v) in rows {
        let _ = writeln!(s, "spine_{name}{{{labels}}} {v}");
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn verdict_list(v: &Verdicts) -> [(&'static str, u64); 6] {
    [
        ("aborted", v.aborted),
        ("drop", v.drop),
        ("pass", v.pass),
        ("tx", v.tx),
        ("redirect", v.redirect),
        ("invalid", v.invalid),
    ]
}

fn drop_list(d: &Drops) -> [(&'static str, u64); 14] {
    [
        ("verdict", d.verdict),
        ("aborted", d.aborted),
        ("fault", d.fault),
        ("invalid", d.invalid),
        ("no_host_path", d.no_host_path),
        ("redirect_no_target", d.redirect_no_target),
        ("redirect_no_port", d.redirect_no_port),
        ("redirect_refused", d.redirect_refused),
        ("redirect_bad_cpu", d.redirect_bad_cpu),
        ("peer_full", d.peer_full),
        ("tx_full", d.tx_full),
        ("tx_error", d.tx_error),
        ("frags", d.frags),
        ("no_buffer", d.no_buffer),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels {
            ports: vec![("a".into(), "mem", 1), ("b".into(), "tap", 7)],
            exts: vec![("swap".into(), "default".into())],
        }
    }

    #[test]
    fn workers_are_summed_per_port_and_extension() {
        let mut w0 = Counters::new(2, 1);
        let mut w1 = Counters::new(2, 1);
        w0.ports[0].rx_packets = 3;
        w1.ports[0].rx_packets = 4;
        w0.ports[0].verdicts.count(3);
        w1.ports[0].verdicts.count(3);
        w1.ports[0].verdicts.count(9);
        w1.ports[1].drops.tx_full = 2;
        w0.exts[0].runs = 5;
        w1.exts[0].faults = 1;
        let t = Totals::sum(&labels(), &[w0, w1], &[true], 1.0);
        assert_eq!(t.port("a").unwrap().rx_packets, 7);
        assert_eq!(t.port("a").unwrap().verdicts.tx, 2);
        assert_eq!(t.port("a").unwrap().verdicts.invalid, 1);
        assert_eq!(t.port("b").unwrap().drops.total(), 2);
        assert_eq!(t.extension("swap").unwrap().runs, 5);
        assert!(t.extension("swap").unwrap().detached);
        assert_eq!(t.rx_packets(), 7);
        assert_eq!(t.drops(), 2);
    }

    #[test]
    fn prometheus_text_has_one_sample_per_label_set() {
        let mut w = Counters::new(2, 1);
        w.ports[1].rx_packets = 42;
        w.ports[0].drops.no_host_path = 5;
        let t = Totals::sum(&labels(), &[w], &[false], 1.0);
        let text = t.prometheus();
        assert!(text.contains("spine_port_rx_packets_total{port=\"b\"} 42\n"), "{text}");
        assert!(text.contains("spine_port_drops_total{port=\"a\",reason=\"no_host_path\"} 5\n"));
        assert!(text.contains("# TYPE spine_port_rx_packets_total counter\n"));
        assert!(
            text.contains("spine_extension_detached{extension=\"swap\",domain=\"default\"} 0\n")
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').unwrap();
            assert!(v.parse::<u64>().is_ok(), "{line}");
        }
    }
    /// A tunnel port's refusals by reason reach the totals (inside `device.rx_drops`)
    /// and the metrics; other ports have no tunnel rows.
    #[test]
    fn tunnel_refusals_are_reported_by_reason() {
        let w = Counters::new(2, 1);
        let mut t = Totals::sum(&labels(), &[w], &[false], 1.0);
        let stats = spine_ports::PortStats {
            rx_drops: spine_ports::Drops {
                wrong_peer: 3,
                bad_desc: 1,
                auth_replay: 2,
                ..Default::default()
            },
            ..Default::default()
        };
        t.ports[0].kind = "udp".into();
        t.ports[0].device = DeviceTotals::from(stats);
        assert_eq!(t.ports[0].device.rx_drops, 6);
        assert_eq!(t.ports[0].device.tunnel.wrong_peer, 3);
        assert_eq!(t.ports[0].device.tunnel.auth_replay, 2);
        let text = t.prometheus();
        assert!(
            text.contains("spine_port_tunnel_drops_total{port=\"a\",reason=\"wrong_peer\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("spine_port_tunnel_drops_total{port=\"a\",reason=\"auth_replay\"} 2\n")
        );
        assert!(!text.contains("spine_port_tunnel_drops_total{port=\"b\""), "{text}");
    }
}
