//! The adapter's log as the control API follows it (`spine log -f`): `bpf_trace_printk`
//! lines and the watchdog's fault and detach events, kept in a bounded buffer that
//! followers read by sequence number.
//!
//! Workers only write here on paths that are already slow (a `bpf_trace_printk` call,
//! a fault) and never wait: with the lock held by a reader the line is counted as
//! dropped. Nothing is kept until the buffer is enabled (when the API is served).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// Lines kept; older ones are overwritten (a follower sees the gap in `seq`).
pub const LOG_LINES: usize = 4096;

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    pub seq: u64,
    pub worker: usize,
    /// Seconds since the adapter started.
    pub time_s: f64,
    /// `trace` (`bpf_trace_printk`), `fault` or `detach`.
    pub kind: String,
    pub text: String,
}

/// What a follower gets: the lines after the sequence number it asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    /// Ask for lines after this next time.
    pub next: u64,
    /// Lines workers could not write (a reader held the buffer), since the start.
    pub dropped: u64,
}

#[derive(Debug, Default)]
pub(crate) struct LogBuf {
    enabled: AtomicBool,
    dropped: AtomicU64,
    lines: Mutex<(VecDeque<LogLine>, u64)>,
    epoch_ns: u64,
}

impl LogBuf {
    pub fn new(epoch_ns: u64) -> Self {
        LogBuf { epoch_ns, ..LogBuf::default() }
    }

    pub fn enable(&self) {
        self.enabled.store(true, Ordering::Relaxed);
    }

    /// Adds a line (built only when the buffer is enabled); never waits.
    pub fn push(&self, worker: usize, kind: &str, text: impl FnOnce() -> String) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut g) = self.lines.try_lock() else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let (lines, next) = &mut *g;
        *next += 1;
        if lines.len() == LOG_LINES {
            lines.pop_front();
        }
        let time_s = crate::sys::monotonic_ns().saturating_sub(self.epoch_ns) as f64 / 1e9;
        lines.push_back(LogLine { seq: *next, worker, time_s, kind: kind.into(), text: text() });
    }

    /// Up to `max` lines after `after`.
    pub fn since(&self, after: u64, max: usize) -> LogPage {
        let g = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let lines: Vec<LogLine> = g.0.iter().filter(|l| l.seq > after).take(max).cloned().collect();
        let next = lines.last().map_or(after, |l| l.seq);
        LogPage { lines, next, dropped: self.dropped.load(Ordering::Relaxed) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn followers_read_by_sequence_and_old_lines_give_way() {
        let b = LogBuf::new(0);
        b.push(0, "trace", || "before".into());
        assert!(b.since(0, 10).lines.is_empty(), "nothing kept until enabled");
        b.enable();
        for i in 0..LOG_LINES + 10 {
            b.push(i % 2, "trace", || format!("line {i}"));
        }
        let p = b.since(0, 5);
        assert_eq!(p.lines[0].seq, 11, "the oldest 10 were overwritten");
        assert_eq!(p.lines[0].text, "line 10");
        assert_eq!(p.next, 15);
        let p = b.since(p.next, usize::MAX);
        assert_eq!(p.lines.len(), LOG_LINES - 5);
        assert_eq!(p.lines.last().unwrap().text, format!("line {}", LOG_LINES + 9));
        assert!(b.since(p.next, 10).lines.is_empty());
        assert_eq!(b.since(p.next, 10).next, p.next);
    }
}
