//! The event trace: per worker, a fixed-size ring of what happened (a receive burst,
//! each extension run, each hand-off, drop and transmit burst), oldest overwritten
//! first, exported in the Chrome/Perfetto trace format so a person can follow packets
//! through receive → extension → transmit on a timeline. Off by default; off, it costs a
//! branch per event site.

use serde_json::{json, Value};

use crate::counters::Labels;

/// What a trace event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A receive burst from a port (`arg`: packets).
    Rx,
    /// One extension invocation (`arg`: verdict; `u32::MAX` for a fault).
    Run,
    /// A transmit burst handed to a port (`arg`: packets).
    Tx,
    /// A packet sent to another port by `XDP_REDIRECT` (`arg`: the target port).
    Redirect,
    /// A packet handed to another worker (`arg`: the worker).
    Handoff,
    /// A packet delivered to the host path (`arg`: the host port).
    Pass,
    /// A packet dropped (`arg`: the reason, an index into [`DROP_REASONS`]).
    Drop,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Rx => "rx",
            Kind::Run => "extension",
            Kind::Tx => "tx",
            Kind::Redirect => "redirect",
            Kind::Handoff => "handoff",
            Kind::Pass => "pass",
            Kind::Drop => "drop",
        }
    }
}

/// Drop reasons in [`Kind::Drop`] events, in the order of `counters::Drops`.
pub const DROP_REASONS: [&str; 14] = [
    "verdict",
    "aborted",
    "fault",
    "invalid",
    "no_host_path",
    "redirect_no_target",
    "redirect_no_port",
    "redirect_refused",
    "redirect_bad_cpu",
    "peer_full",
    "tx_full",
    "tx_error",
    "frags",
    "no_buffer",
];

/// One event: 32 bytes, written in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// `CLOCK_MONOTONIC` ns at the start.
    pub ts_ns: u64,
    pub dur_ns: u32,
    /// The worker's packet number (receive order), or 0 for burst events.
    pub packet: u32,
    pub arg: u32,
    pub port: u16,
    /// Extension index, or `u16::MAX` for none.
    pub ext: u16,
    pub kind: Kind,
}

/// A worker's ring of the last `capacity` events.
#[derive(Debug)]
pub struct TraceRing {
    events: Box<[Event]>,
    next: usize,
    wrapped: bool,
}

impl TraceRing {
    pub fn new(capacity: usize) -> Self {
        let blank =
            Event { ts_ns: 0, dur_ns: 0, packet: 0, arg: 0, port: 0, ext: 0, kind: Kind::Rx };
        TraceRing {
            events: vec![blank; capacity.max(1)].into_boxed_slice(),
            next: 0,
            wrapped: false,
        }
    }

    #[inline]
    pub fn push(&mut self, ev: Event) {
        self.events[self.next] = ev;
        self.next += 1;
        if self.next == self.events.len() {
            self.next = 0;
            self.wrapped = true;
        }
    }

    /// Events oldest first.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        // When wrapped, the oldest events are those after `next`.
        let older = if self.wrapped { &self.events[self.next..] } else { &[] };
        older.iter().chain(&self.events[..self.next])
    }

    pub fn len(&self) -> usize {
        if self.wrapped {
            self.events.len()
        } else {
            self.next
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The Chrome/Perfetto trace of every worker's ring: complete (`"X"`) events with
/// `ts`/`dur` in microseconds from `epoch_ns`, `pid` 1 (the adapter), `tid` the worker.
pub fn chrome_trace(rings: &[(usize, &TraceRing)], labels: &Labels, epoch_ns: u64) -> Value {
    let mut out = vec![json!({
        "name": "process_name", "ph": "M", "pid": 1, "tid": 0,
        "args": {"name": "spine adapter"}
    })];
    for (w, _) in rings {
        out.push(json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": w,
            "args": {"name": format!("worker {w}")}
        }));
    }
    let port = |i: u16| labels.ports.get(i as usize).map_or("?", |p| p.0.as_str());
    for (w, ring) in rings {
        for e in ring.events() {
            let mut args = serde_json::Map::new();
            args.insert("port".into(), json!(port(e.port)));
            if e.packet != 0 {
                args.insert("packet".into(), json!(e.packet));
            }
            if let Some((name, _)) = labels.exts.get(e.ext as usize) {
                args.insert("extension".into(), json!(name));
            }
            let name = match e.kind {
                Kind::Rx | Kind::Tx => {
                    args.insert("packets".into(), json!(e.arg));
                    format!("{} {}", e.kind.name(), port(e.port))
                }
                Kind::Run => {
                    let verdict = if e.arg == u32::MAX {
                        "fault".to_string()
                    } else {
                        spine_abi::xdp_action::name(u64::from(e.arg))
                            .map_or_else(|| format!("invalid({})", e.arg), str::to_string)
                    };
                    args.insert("verdict".into(), json!(verdict));
                    labels
                        .exts
                        .get(e.ext as usize)
                        .map_or("extension", |x| x.0.as_str())
                        .to_string()
                }
                Kind::Redirect | Kind::Pass => {
                    args.insert("to".into(), json!(port(e.arg as u16)));
                    e.kind.name().to_string()
                }
                Kind::Handoff => {
                    args.insert("to_worker".into(), json!(e.arg));
                    e.kind.name().to_string()
                }
                Kind::Drop => {
                    let reason = DROP_REASONS.get(e.arg as usize).copied().unwrap_or("?");
                    args.insert("reason".into(), json!(reason));
                    e.kind.name().to_string()
                }
            };
            out.push(json!({
                "name": name,
                "cat": e.kind.name(),
                "ph": "X",
                "ts": e.ts_ns.saturating_sub(epoch_ns) as f64 / 1000.0,
                "dur": f64::from(e.dur_ns) / 1000.0,
                "pid": 1,
                "tid": w,
                "args": Value::Object(args),
            }));
        }
    }
    json!({ "traceEvents": out, "displayTimeUnit": "ns" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, kind: Kind) -> Event {
        Event { ts_ns: ts, dur_ns: 500, packet: ts as u32, arg: 3, port: 0, ext: 0, kind }
    }

    #[test]
    fn ring_keeps_the_newest_events_in_order() {
        let mut r = TraceRing::new(3);
        assert!(r.is_empty());
        for t in 1..=5 {
            r.push(ev(t, Kind::Run));
        }
        let ts: Vec<u64> = r.events().map(|e| e.ts_ns).collect();
        assert_eq!(ts, vec![3, 4, 5]);
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn chrome_format_has_complete_events_in_microseconds() {
        let mut r = TraceRing::new(8);
        r.push(ev(2_000, Kind::Rx));
        r.push(ev(3_000, Kind::Run));
        r.push(Event { arg: 4, ..ev(4_000, Kind::Drop) });
        let labels = Labels {
            ports: vec![("wire".into(), "mem", 1)],
            exts: vec![("swap".into(), "default".into())],
        };
        let v = chrome_trace(&[(1, &r)], &labels, 1_000);
        let evs = v["traceEvents"].as_array().unwrap();
        let x: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 3);
        assert_eq!(x[0]["name"], "rx wire");
        assert_eq!(x[0]["ts"], 1.0);
        assert_eq!(x[0]["dur"], 0.5);
        assert_eq!(x[0]["tid"], 1);
        assert_eq!(x[1]["name"], "swap");
        assert_eq!(x[1]["args"]["verdict"], "XDP_TX");
        assert_eq!(x[2]["args"]["reason"], "no_host_path");
        assert!(evs.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == "worker 1"));
    }
}
