//! Ring-buffer records as the control API follows them (`spine log --ring EXT/MAP -f`).
//!
//! A `BPF_MAP_TYPE_RINGBUF` has one consumer. The first follower of a ring makes the
//! control side its consumer: each request drains what workers committed into a bounded
//! history numbered by sequence, and every follower reads that history after the number
//! it last saw, as `spine log -f` reads the log; a request drains at most as many
//! records as it may return (and never more than [`RING_RECORDS`]), however fast
//! workers produce, so a follower that passes each answer's `next` misses nothing. Between requests records wait in the
//! ring itself; a ring that fills up makes `bpf_ringbuf_reserve` return NULL, as in the
//! kernel when user space does not consume. A ring that an `[[ringbuf]]` output of the
//! configuration reads ([`Adapter::ring_buffer`](crate::Adapter::ring_buffer)) is that
//! output's, and the API refuses to follow it rather than split its records.
//!
//! A `BPF_MAP_TYPE_PERF_EVENT_ARRAY` is followed the same way: its first follower opens
//! every slot (as user space opening a perf buffer on every CPU), from then on
//! `bpf_perf_event_output` into the slot of the program's CPU succeeds, and each record
//! carries the slot (`cpu`) it came from.
//!
//! Nothing here runs on a worker.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use spine_maps::Map;

/// Records kept per ring for followers; older ones give way (a gap in `seq`).
pub const RING_RECORDS: usize = 4096;
/// Bytes of record data kept per ring, whichever limit comes first.
pub const RING_BYTES: usize = 4 << 20;

/// One record a program committed (`bpf_ringbuf_submit`/`bpf_ringbuf_output`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingRecord {
    pub seq: u64,
    /// Seconds since the adapter started, when the control side drained it.
    pub time_s: f64,
    /// The record's bytes, in hex.
    pub data: String,
    /// A perf event array's sample: the slot (the CPU) it was written to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
}

/// What a follower gets: the records after the sequence number it asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RingPage {
    pub records: Vec<RingRecord>,
    /// Ask for records after this next time.
    pub next: u64,
}

/// One followed ring: its consumer side and the history followers read.
struct Follow {
    /// The map followed (an extension loaded again under the same name has a new one).
    ring: Arc<Map>,
    history: VecDeque<RingRecord>,
    /// Bytes of `history`'s records.
    bytes: usize,
    /// Sequence number of the last record drained.
    last: u64,
    /// A perf event array's slots were opened for this follower.
    opened: bool,
}

impl Follow {
    /// Numbers a drained record and keeps it; the oldest give way past the bounds.
    fn keep(&mut self, now_s: f64, cpu: Option<u32>, rec: &[u8]) {
        self.last += 1;
        let data: String = rec.iter().map(|b| format!("{b:02x}")).collect();
        self.bytes += data.len() / 2;
        self.history.push_back(RingRecord { seq: self.last, time_s: now_s, data, cpu });
        while self.history.len() > RING_RECORDS || self.bytes > RING_BYTES {
            let Some(old) = self.history.pop_front() else { break };
            self.bytes -= old.data.len() / 2;
        }
    }
}

/// Every followed ring, and the rings a configured output reads.
#[derive(Default)]
pub(crate) struct RingFollows {
    /// `(extension, map)` pairs read by an `[[ringbuf]]` output.
    owned: Mutex<Vec<(String, String)>>,
    follows: Mutex<HashMap<(String, String), Follow>>,
}

/// Why a ring cannot be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FollowRefusal {
    NotRing,
    Owned,
}

impl RingFollows {
    /// Marks the ring as read by a configured output.
    pub fn own(&self, ext: &str, map: &str) {
        let mut o = self.owned.lock().unwrap_or_else(PoisonError::into_inner);
        o.push((ext.to_string(), map.to_string()));
    }

    /// Drains `ring` (map `map` of `ext`) into its history and returns up to `max`
    /// records after `after`.
    pub fn since(
        &self,
        ext: &str,
        map: &str,
        ring: Arc<Map>,
        now_s: f64,
        after: u64,
        max: usize,
    ) -> Result<RingPage, FollowRefusal> {
        if ring.ringbuf().is_none() && ring.perf().is_none() {
            return Err(FollowRefusal::NotRing);
        }
        let key = (ext.to_string(), map.to_string());
        if self.owned.lock().unwrap_or_else(PoisonError::into_inner).contains(&key) {
            return Err(FollowRefusal::Owned);
        }
        let mut follows = self.follows.lock().unwrap_or_else(PoisonError::into_inner);
        let f = follows.entry(key).or_insert_with(|| Follow {
            ring: ring.clone(),
            history: VecDeque::new(),
            bytes: 0,
            last: 0,
            opened: false,
        });
        if !Arc::ptr_eq(&f.ring, &ring) {
            // Loaded again under the same name: a new ring, numbering carries on.
            f.ring = ring.clone();
            f.opened = false;
        }
        // Bounded by the page: producers may keep up with a drain for as long as it runs,
        // and a follower that reads every page never falls more than a history behind.
        let take = max.min(RING_RECORDS);
        if let Some(rb) = ring.ringbuf() {
            rb.consume_up_to(take, |rec| f.keep(now_s, None, rec));
        } else if let Some(perf) = ring.perf() {
            if !f.opened {
                // A slot whose ring cannot be made stays closed: its samples get ENOENT.
                let _ = perf.open_all();
                f.opened = true;
            }
            perf.consume_up_to(take, |cpu, rec| f.keep(now_s, Some(cpu), rec));
        }
        let records: Vec<RingRecord> =
            f.history.iter().filter(|r| r.seq > after).take(max).cloned().collect();
        let next = records.last().map_or(after, |r| r.seq);
        Ok(RingPage { records, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_maps::{MapDef, MapOptions};

    fn map(map_type: u32, key: u32, value: u32, entries: u32) -> Arc<Map> {
        let def = MapDef::new("m", map_type, key, value, entries, 0);
        Arc::new(Map::create(def, &MapOptions::default()).expect("a map"))
    }

    fn ring(size: u32) -> Arc<Map> {
        map(spine_abi::map_type::RINGBUF, 0, 0, size)
    }

    #[test]
    fn followers_read_every_record_once_drained_in_order() {
        let rf = RingFollows::default();
        let m = ring(4096);
        let rb = m.ringbuf().expect("ring");
        for i in 0u8..5 {
            rb.output(&[i, i + 1], 0).expect("room");
        }
        let p = rf.since("e", "events", m.clone(), 1.0, 0, 3).expect("followed");
        assert_eq!(
            p.records.iter().map(|r| r.data.as_str()).collect::<Vec<_>>(),
            ["0001", "0102", "0203"]
        );
        assert_eq!(p.next, 3);
        rb.output(&[9], 0).expect("room");
        let q = rf.since("e", "events", m.clone(), 2.0, p.next, 100).expect("followed");
        assert_eq!(q.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5, 6]);
        assert_eq!(q.records[2].data, "09");
        // A second follower from the start sees the same history.
        let all = rf.since("e", "events", m, 3.0, 0, 100).expect("followed");
        assert_eq!(all.records.len(), 6);
        assert_eq!(all.next, 6);
    }

    #[test]
    fn a_drain_takes_at_most_a_bounded_number_of_records() {
        let m = ring(1 << 20);
        let rb = m.ringbuf().expect("ring");
        for i in 0..RING_RECORDS as u32 + 100 {
            rb.output(&i.to_le_bytes(), 0).expect("room");
        }
        assert_eq!(rb.consume_up_to(10, |_| {}), 10);
        let rf = RingFollows::default();
        let small = rf.since("e", "r", m.clone(), 0.0, 0, 3).expect("followed");
        assert_eq!(small.records.len(), 3);
        assert_eq!(small.next, 3, "a page of 3 drains 3");
        // 3 + 4,096 drained: the history keeps the last 4,096, from the 4th record.
        let p = rf.since("e", "r", m.clone(), 0.0, 0, usize::MAX).expect("followed");
        assert_eq!(p.records.len(), RING_RECORDS, "one request drains a bounded amount");
        assert_eq!((p.records[0].seq, p.records[0].data.as_str()), (4, "0d000000"));
        assert_eq!(p.next, 3 + RING_RECORDS as u64);
        let q = rf.since("e", "r", m, 0.0, p.next, usize::MAX).expect("followed");
        assert_eq!(q.records.len(), 100 - 10 - 3, "the rest on the next request");
    }

    #[test]
    fn history_is_bounded_and_owned_rings_are_refused() {
        let rf = RingFollows::default();
        let m = ring(1 << 16);
        let rb = m.ringbuf().expect("ring");
        let mut drained = 0;
        for i in 0..RING_RECORDS + 10 {
            rb.output(&(i as u32).to_le_bytes(), 0).expect("room");
            if i % 1000 == 999 {
                drained =
                    rf.since("e", "r", m.clone(), 0.0, u64::MAX, 1000).expect("followed").next;
            }
        }
        assert_eq!(drained, u64::MAX, "nothing after MAX");
        let p = rf.since("e", "r", m.clone(), 0.0, 0, usize::MAX).expect("followed");
        assert_eq!(p.records.len(), RING_RECORDS);
        assert_eq!(p.records[0].seq, 11, "the oldest 10 gave way");
        assert_eq!(p.records[0].data, "0a000000");
        rf.own("e", "other");
        assert_eq!(rf.since("e", "other", m, 0.0, 0, 1), Err(FollowRefusal::Owned));
        let hash = map(spine_abi::map_type::HASH, 4, 4, 4);
        assert_eq!(rf.since("e", "h", hash, 0.0, 0, 1), Err(FollowRefusal::NotRing));
    }
}
