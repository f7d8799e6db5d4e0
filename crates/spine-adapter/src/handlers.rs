//! Active-message handlers as the workers see them: one table of every loaded
//! extension's handlers (`SEC("spine/handler/N")`), published to a [`Slot`] whenever an
//! extension is loaded or unloaded, as a port's program is published on attach.
//!
//! Each worker refreshes its reader once at the top of a round (one `Acquire` load), so
//! every message of a round is dispatched under one version of the table: an extension
//! loaded, replaced or unloaded through the control API is reachable (or gone) from the
//! next round on, for endpoints opened before it as for those opened after. On a change
//! (cold) the worker keeps its runners of the handlers still in the table (their
//! extension is the same `Arc`) and makes runners of the new ones.
//!
//! Each worker also keeps a fixed queue of messages extensions posted to their domain's
//! handlers (`spine_msg_post`, [`PostQueue`]); the worker runs them later, never inside
//! the sender's invocation.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use spine_endpoint::AdapterEnd;
use spine_runtime::fib_lookup::FibEnv;
use spine_runtime::{Event, Extension, Host, OutMsg, XdpRunner, MSG_MAX};

use crate::slot::{Slot, SlotReader};

/// One handler of one loaded extension.
#[derive(Debug)]
pub(crate) struct HandlerEntry {
    /// Its extension's domain (index into the adapter's domains).
    pub domain: u16,
    /// The handler number.
    pub number: u8,
    /// Its extension's id.
    pub ext: u16,
    pub prog: Arc<Extension>,
}

/// Every loaded extension's handlers.
#[derive(Debug, Default)]
pub(crate) struct HandlerTable {
    pub entries: Vec<HandlerEntry>,
}

/// Publishes the handlers of `exts` ((id, domain index, handlers) of each loaded
/// extension) to `slot`; `None` when there are none, so a worker with no handler
/// anywhere keeps an empty runner list.
pub(crate) fn publish<'a>(
    slot: &Slot<HandlerTable>,
    exts: impl Iterator<Item = (u16, u16, &'a [Arc<Extension>])>,
) {
    let mut entries = Vec::new();
    for (ext, domain, handlers) in exts {
        for h in handlers {
            if let Some(number) = h.handler() {
                entries.push(HandlerEntry { domain, number, ext, prog: h.clone() });
            }
        }
    }
    let table = (!entries.is_empty()).then(|| Arc::new(HandlerTable { entries }));
    slot.publish(table);
}

/// This worker's runner of one handler.
#[derive(Debug)]
pub(crate) struct HandlerRunner {
    pub domain: u16,
    pub number: u8,
    pub ext: u16,
    pub runner: XdpRunner,
}

/// The handler table's slot, and the version each worker runs (so the control side
/// can tell when a load or unload has reached every worker).
#[derive(Debug)]
pub(crate) struct Handlers {
    pub slot: Arc<Slot<HandlerTable>>,
    /// By worker: the slot generation whose table it runs.
    seen: Arc<[AtomicU64]>,
    /// The adapter's domains by index.
    domains: Arc<[String]>,
    /// By domain index, by port: whether the domain may use the port.
    domain_ports: Arc<[Box<[bool]>]>,
}

impl Handlers {
    pub fn new(workers: usize, domains: Vec<String>, domain_ports: Vec<Box<[bool]>>) -> Self {
        Handlers {
            slot: Slot::new(None),
            seen: (0..workers).map(|_| AtomicU64::new(0)).collect(),
            domains: domains.into(),
            domain_ports: domain_ports.into(),
        }
    }

    /// Worker `me`'s view, starting on the current table.
    pub fn worker(&self, me: usize) -> WorkerHandlers {
        let mut w = WorkerHandlers {
            reader: self.slot.reader(),
            runners: Vec::new(),
            seen: self.seen.clone(),
            last: u64::MAX,
            domains: self.domains.clone(),
            domain_ports: self.domain_ports.clone(),
            posted: PostQueue::new(POST_QUEUE),
            delayed: DelayQueue::new(DELAY_QUEUE),
        };
        w.rebuild(me);
        w
    }

    /// Whether every worker runs the table of the last publish.
    pub fn settled(&self) -> bool {
        let g = self.slot.generation();
        self.seen.iter().all(|s| s.load(Ordering::Acquire) >= g)
    }
}

/// A worker's runners of the handler table it last picked up.
#[derive(Debug)]
pub(crate) struct WorkerHandlers {
    reader: SlotReader<HandlerTable>,
    pub runners: Vec<HandlerRunner>,
    seen: Arc<[AtomicU64]>,
    /// The generation last stored into `seen`.
    last: u64,
    domains: Arc<[String]>,
    domain_ports: Arc<[Box<[bool]>]>,
    /// Extension → extension messages waiting for their handlers to run.
    pub posted: PostQueue,
    /// Delayed posts waiting to be due.
    pub delayed: DelayQueue,
}

impl WorkerHandlers {
    /// Once per round: picks up a new table (cold; `true` then). Costs one `Acquire`
    /// load and one comparison when nothing changed.
    #[inline]
    pub fn refresh(&mut self, me: usize) -> bool {
        let changed = self.reader.refresh_changed();
        if changed {
            self.rebuild(me);
        }
        if self.reader.seen() != self.last {
            self.acknowledge(me);
        }
        changed
    }

    /// The table the runners run and the domains by index, for the worker's host
    /// (`spine_msg_post_to` checks its target against them).
    #[cold]
    pub fn table(&self) -> (Option<Arc<HandlerTable>>, Arc<[String]>) {
        (self.reader.current().cloned(), self.domains.clone())
    }

    /// The index of domain `name` (cold: a short walk comparing names).
    #[cold]
    pub fn domain_index(&self, name: &str) -> Option<u16> {
        self.domains.iter().position(|d| d == name).map(|i| i as u16)
    }

    /// Whether domain `domain` may use port `port` (a message that came in on a tunnel
    /// port runs only the handlers of domains allowed it; one sent out of a tunnel port
    /// needs its sender's domain to be allowed it).
    #[inline]
    pub fn domain_may_use(&self, domain: u16, port: u16) -> bool {
        self.domain_ports
            .get(usize::from(domain))
            .and_then(|d| d.get(usize::from(port)))
            .copied()
            .unwrap_or(false)
    }

    #[cold]
    fn acknowledge(&mut self, me: usize) {
        self.last = self.reader.seen();
        if let Some(s) = self.seen.get(me) {
            s.store(self.last, Ordering::Release);
        }
    }

    /// The runners of the reader's current table: those of handlers still in it are
    /// kept, the others dropped, new ones made (a runner that cannot be made, as one
    /// past the extension's CPUs, leaves its handler out on this worker).
    #[cold]
    fn rebuild(&mut self, me: usize) {
        let mut old = std::mem::take(&mut self.runners);
        let Some(table) = self.reader.current().cloned() else { return };
        for e in &table.entries {
            let kept = old.iter().position(|r| Arc::ptr_eq(r.runner.extension(), &e.prog));
            let runner = match kept {
                Some(i) => old.swap_remove(i).runner,
                None => match XdpRunner::new(e.prog.clone(), me) {
                    Ok(r) => r,
                    Err(_) => continue,
                },
            };
            self.runners.push(HandlerRunner {
                domain: e.domain,
                number: e.number,
                ext: e.ext,
                runner,
            });
        }
    }
}

/// Messages a worker's queue of posted messages holds (about 63 KiB, allocated with the
/// worker): four outboxes' worth, so a round of bursts that each post their fill fits.
pub(crate) const POST_QUEUE: usize = 256;

/// A message an extension posted (`spine_msg_post`), waiting for its handlers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Posted {
    /// The sender's domain: only its extensions' handlers run.
    pub domain: u16,
    /// The sender's extension id.
    pub source: u16,
    /// The one extension whose handler runs (`spine_msg_post_to`); `None`: every
    /// extension of the domain that registered it.
    pub target: Option<u16>,
    pub handler: u8,
    len: u8,
    data: [u8; MSG_MAX],
}

impl Posted {
    pub fn payload(&self) -> &[u8] {
        &self.data[..usize::from(self.len)]
    }
}

/// A fixed ring of posted messages: nothing allocates after [`PostQueue::new`]; a push
/// into a full queue is refused (the caller counts the drop).
#[derive(Debug)]
pub(crate) struct PostQueue {
    slots: Box<[Posted]>,
    head: usize,
    len: usize,
}

impl PostQueue {
    pub fn new(capacity: usize) -> Self {
        let empty =
            Posted { domain: 0, source: 0, target: None, handler: 0, len: 0, data: [0; MSG_MAX] };
        PostQueue { slots: vec![empty; capacity.max(1)].into_boxed_slice(), head: 0, len: 0 }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Queues `msg` from extension `source` of domain `domain`; `false` when full.
    pub fn push(&mut self, domain: u16, source: u16, msg: &OutMsg) -> bool {
        if self.len == self.slots.len() {
            return false;
        }
        let at = (self.head + self.len) % self.slots.len();
        fill(&mut self.slots[at], domain, source, msg);
        self.len += 1;
        true
    }

    /// Whether the queue has no room for another message.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Queues `p` as it is (a delayed post come due); `false` when full.
    fn push_posted(&mut self, p: &Posted) -> bool {
        if self.is_full() {
            return false;
        }
        let at = (self.head + self.len) % self.slots.len();
        self.slots[at] = *p;
        self.len += 1;
        true
    }

    /// The oldest message, taken off the queue.
    pub fn pop(&mut self) -> Option<Posted> {
        if self.len == 0 {
            return None;
        }
        let p = self.slots[self.head];
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        Some(p)
    }
}

/// Delayed posts a worker's queue holds (about 16 KiB, allocated with the worker): a
/// delayed post asks for room at the call and is refused `-ENOSPC` when there is none.
pub(crate) const DELAY_QUEUE: usize = 64;

/// Posts not due yet (`spine_msg_post_to` with a delay), in a fixed array: nothing
/// allocates after [`DelayQueue::new`]. Once a round the worker moves those due into
/// its [`PostQueue`] ([`DelayQueue::release`]): one comparison with the earliest due
/// time while none is due, one walk of the array when some are (those due in the same
/// round move in the order they were posted).
#[derive(Debug)]
pub(crate) struct DelayQueue {
    slots: Box<[Posted]>,
    due: Box<[u64]>,
    len: usize,
    /// The earliest due time queued (`u64::MAX` when empty).
    next_due: u64,
}

impl DelayQueue {
    pub fn new(capacity: usize) -> Self {
        let empty =
            Posted { domain: 0, source: 0, target: None, handler: 0, len: 0, data: [0; MSG_MAX] };
        let capacity = capacity.max(1);
        DelayQueue {
            slots: vec![empty; capacity].into_boxed_slice(),
            due: vec![0; capacity].into_boxed_slice(),
            len: 0,
            next_due: u64::MAX,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Rooms left.
    #[inline]
    pub fn room(&self) -> usize {
        self.slots.len() - self.len
    }

    /// Queues `msg` (a delayed post: [`OutMsg::due_ns`]) from extension `source` of
    /// domain `domain`; `false` when full (or `msg` is not delayed).
    pub fn push(&mut self, domain: u16, source: u16, msg: &OutMsg) -> bool {
        let Some(due) = msg.due_ns() else { return false };
        if self.len == self.slots.len() {
            return false;
        }
        fill(&mut self.slots[self.len], domain, source, msg);
        self.due[self.len] = due;
        self.len += 1;
        self.next_due = self.next_due.min(due);
        true
    }

    /// Moves the posts due at `now` (CLOCK_MONOTONIC) into `into` while it has room (a
    /// post that finds none stays for a later round); returns how many moved.
    pub fn release(&mut self, now: u64, into: &mut PostQueue) -> usize {
        if now < self.next_due {
            return 0;
        }
        let (mut kept, mut moved, mut next) = (0, 0, u64::MAX);
        for i in 0..self.len {
            let due = self.due[i];
            if due <= now && into.push_posted(&self.slots[i]) {
                moved += 1;
                continue;
            }
            if kept != i {
                self.slots[kept] = self.slots[i];
                self.due[kept] = due;
            }
            next = next.min(due);
            kept += 1;
        }
        self.len = kept;
        self.next_due = next;
        moved
    }
}

/// Writes `msg` from extension `source` of domain `domain` into `slot`.
fn fill(slot: &mut Posted, domain: u16, source: u16, msg: &OutMsg) {
    let p = msg.payload();
    slot.domain = domain;
    slot.source = source;
    slot.target = match msg.to {
        spine_runtime::Dest::Extension(ext) => Some(ext),
        _ => None,
    };
    slot.handler = msg.handler;
    // An outbox message is at most MSG_MAX (240) bytes.
    slot.len = p.len() as u8;
    slot.data[..p.len()].copy_from_slice(p);
}

/// Where the data of the message being handled lies, for `spine_msg_bulk_len/read/write`.
pub(crate) enum MsgData<'a> {
    /// An endpoint's message: that endpoint's buffer area and, for a bulk message, its
    /// bulk data (`len` bytes at offset `off` of the area; `None` for a small message).
    /// Every read checks the range against `len` and, through [`AdapterEnd::read_area`],
    /// against the area; every write (`spine_msg_bulk_write`) against the area
    /// ([`AdapterEnd::write_area`]).
    Area { end: &'a AdapterEnd, bulk: Option<(u64, u32)> },
    /// A bulk message reassembled from a tunnel port: its bytes (in the port's
    /// reassembly slot, owned by the worker). Reads are checked against their length;
    /// `spine_msg_bulk_write` answers -EINVAL (there is no endpoint area to write into).
    Slice(&'a [u8]),
}

/// The host the handlers of a message run with: the worker's, plus the message's data.
pub(crate) struct MsgHost<'a> {
    pub inner: &'a mut dyn Host,
    pub data: MsgData<'a>,
}

impl Host for MsgHost<'_> {
    fn now_ns(&mut self) -> u64 {
        self.inner.now_ns()
    }
    fn tai_ns(&mut self) -> u64 {
        self.inner.tai_ns()
    }
    fn thread_cpu_ns(&mut self) -> Option<u64> {
        self.inner.thread_cpu_ns()
    }
    fn prandom_u32(&mut self) -> u32 {
        self.inner.prandom_u32()
    }
    fn trace(&mut self, cpu: usize, line: &[u8]) {
        self.inner.trace(cpu, line);
    }
    fn event(&mut self, ev: &Event<'_>) {
        self.inner.event(ev);
    }
    fn fib(&self) -> Option<&FibEnv> {
        self.inner.fib()
    }
    fn post_target(&mut self, domain: &str, ext: Option<u16>) -> Result<(), i64> {
        self.inner.post_target(domain, ext)
    }
    fn reserve_delayed(&mut self) -> Result<(), i64> {
        self.inner.reserve_delayed()
    }
    fn bulk_len(&self) -> u64 {
        match self.data {
            MsgData::Area { bulk, .. } => bulk.map_or(0, |(_, len)| u64::from(len)),
            MsgData::Slice(data) => data.len() as u64,
        }
    }
    fn bulk_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), i64> {
        use spine_abi::errno::{EFAULT, EINVAL};
        match self.data {
            MsgData::Area { end, bulk } => {
                let Some((off, len)) = bulk else { return Err(EINVAL) };
                let inside =
                    offset.checked_add(out.len() as u64).is_some_and(|e| e <= u64::from(len));
                match off.checked_add(offset) {
                    Some(at) if inside && end.read_area(at, out) => Ok(()),
                    _ => Err(EFAULT),
                }
            }
            MsgData::Slice(data) => {
                let src = usize::try_from(offset)
                    .ok()
                    .and_then(|o| data.get(o..o.checked_add(out.len())?))
                    .ok_or(EFAULT)?;
                out.copy_from_slice(src);
                Ok(())
            }
        }
    }
    fn bulk_write(&mut self, offset: u64, data: &[u8]) -> Result<(), i64> {
        match self.data {
            MsgData::Area { end, .. } if end.write_area(offset, data) => Ok(()),
            MsgData::Area { .. } => Err(spine_abi::errno::EFAULT),
            MsgData::Slice(_) => Err(spine_abi::errno::EINVAL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_post_queue_is_bounded_and_first_in_first_out() {
        let mut q = PostQueue::new(4);
        let msg = |b: u8| OutMsg::new(spine_runtime::Dest::Handlers, 9, &[b; 3]).unwrap();
        for b in 0..4 {
            assert!(q.push(1, 2, &msg(b)));
        }
        assert!(!q.push(1, 2, &msg(9)), "full: refused");
        assert_eq!(q.len(), 4);
        assert_eq!(q.pop().map(|p| p.payload().to_vec()), Some(vec![0; 3]));
        assert!(q.push(1, 2, &msg(4)), "room again, wrapping around");
        let got: Vec<u8> = std::iter::from_fn(|| q.pop()).map(|p| p.payload()[0]).collect();
        assert_eq!(got, [1, 2, 3, 4]);
        assert!(q.pop().is_none());
        let p = {
            q.push(5, 6, &msg(7));
            q.pop().unwrap()
        };
        assert_eq!((p.domain, p.source, p.handler, p.payload()), (5, 6, 9, &[7u8; 3][..]));
    }

    #[test]
    fn the_delay_queue_releases_only_what_is_due_in_post_order_and_is_bounded() {
        let msg = |b: u8, due: u64| {
            let mut m = OutMsg::new(spine_runtime::Dest::Extension(3), 5, &[b]).unwrap();
            m.set_due_ns(due);
            m
        };
        let mut d = DelayQueue::new(3);
        let mut q = PostQueue::new(2);
        assert!(!d.push(1, 2, &OutMsg::new(spine_runtime::Dest::Handlers, 5, b"x").unwrap()));
        assert!(d.push(1, 2, &msg(0, 300)));
        assert!(d.push(1, 2, &msg(1, 100)));
        assert!(d.push(1, 2, &msg(2, 200)));
        assert!(!d.push(1, 2, &msg(3, 50)), "full: refused");
        assert_eq!((d.len(), d.room()), (3, 0));
        assert_eq!(d.release(99, &mut q), 0, "nothing due before 100");
        assert_eq!(d.release(250, &mut q), 2);
        let got: Vec<(u8, Option<u16>)> =
            std::iter::from_fn(|| q.pop()).map(|p| (p.payload()[0], p.target)).collect();
        assert_eq!(got, [(1, Some(3)), (2, Some(3))]);
        assert_eq!((d.len(), d.room()), (1, 2));
        // A post queue with no room keeps what is due for a later round.
        assert!(q.push(0, 0, &msg(9, 0)) && q.push(0, 0, &msg(9, 0)));
        assert_eq!(d.release(1_000, &mut q), 0);
        assert_eq!(d.len(), 1);
        q.pop();
        assert_eq!(d.release(1_000, &mut q), 1);
        assert_eq!(d.len(), 0);
        assert_eq!(d.release(u64::MAX, &mut q), 0);
    }
}
