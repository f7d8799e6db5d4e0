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
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use spine_runtime::{Extension, XdpRunner};

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
}

impl Handlers {
    pub fn new(workers: usize) -> Self {
        Handlers { slot: Slot::new(None), seen: (0..workers).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Worker `me`'s view, starting on the current table.
    pub fn worker(&self, me: usize) -> WorkerHandlers {
        let mut w = WorkerHandlers {
            reader: self.slot.reader(),
            runners: Vec::new(),
            seen: self.seen.clone(),
            last: u64::MAX,
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
}

impl WorkerHandlers {
    /// Once per round: picks up a new table (cold). Costs one `Acquire` load and one
    /// comparison when nothing changed.
    #[inline]
    pub fn refresh(&mut self, me: usize) {
        if self.reader.refresh_changed() {
            self.rebuild(me);
        }
        if self.reader.seen() != self.last {
            self.acknowledge(me);
        }
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
