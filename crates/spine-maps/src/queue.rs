//! `BPF_MAP_TYPE_QUEUE` and `BPF_MAP_TYPE_STACK` (`kernel/bpf/queue_stack_maps.c`):
//! a bounded FIFO or LIFO of `value_size`-byte elements, without keys.
//!
//! The layout and positions are the kernel's: a ring of `max_entries + 1` slots, `head`
//! the next slot to write and `tail` the oldest element, empty when `head == tail`, full
//! when `head + 1 == tail` (modulo the slot count). A push on a full map fails with
//! `E2BIG` unless its flags are `BPF_EXIST`, which drops the oldest element first (for a
//! stack too: the bottom one); `BPF_NOEXIST` and flags above `BPF_EXIST` are `EINVAL`.
//! A queue pops and peeks at `tail`, a stack at `head - 1`. On an empty map pop and peek
//! fail with `ENOENT` and zero the caller's buffer, as the kernel does.
//!
//! Every operation takes the map's spin lock (the kernel's `qs->lock`) for a position
//! update and one value copy. The elements live in an arena programs never address:
//! the helpers copy in and out of program memory, so the map has no value span.

use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::Arc;

use spine_abi::update_flags::{EXIST, NOEXIST};

use crate::def::{round8, MapDef};
use crate::spinlock::SpinLock;
use crate::storage::Arena;
use crate::MapError;

#[derive(Debug)]
pub(crate) struct QueueStack {
    name: Arc<str>,
    /// LIFO (`BPF_MAP_TYPE_STACK`) rather than FIFO.
    stack: bool,
    value_size: usize,
    stride: usize,
    /// `max_entries + 1`: one slot always stays free to tell full from empty.
    slots: u32,
    /// Guards `head`, `tail` and the slots' bytes; the atomics only make the shared
    /// fields `Sync` (every access is under the lock, so `Relaxed` suffices).
    lock: SpinLock,
    head: AtomicU32,
    tail: AtomicU32,
    elems: Arena,
}

impl QueueStack {
    /// Bytes of element storage: `max_entries + 1` slots, each padded to 8 bytes.
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        (u128::from(def.max_entries) + 1) * u128::from(round8(u64::from(def.value_size)))
    }

    /// An empty map; `def` passed the creation checks and the byte budget.
    pub(crate) fn new(def: &MapDef, stack: bool) -> Result<QueueStack, MapError> {
        let value_size = def.value_size as usize;
        let stride = round8(u64::from(def.value_size)) as usize;
        let slots = def.max_entries.checked_add(1);
        let len = slots.and_then(|n| (n as usize).checked_mul(stride));
        let oom = |bytes: u64| MapError::OutOfMemory { map: def.name.clone(), bytes };
        let (Some(slots), Some(len)) = (slots, len) else { return Err(oom(u64::MAX)) };
        let elems = Arena::new(len, value_size, true).ok_or_else(|| oom(len as u64))?;
        Ok(QueueStack {
            name: def.name.clone(),
            stack,
            value_size,
            stride,
            slots,
            lock: SpinLock::new(),
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            elems,
        })
    }

    fn next(&self, i: u32) -> u32 {
        if i + 1 >= self.slots {
            0
        } else {
            i + 1
        }
    }

    /// `queue_stack_map_push_elem` (the program's `bpf_map_push_elem`, user space's
    /// update with a NULL key): `value` is `value_size` bytes.
    pub(crate) fn push(&self, value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags & NOEXIST != 0 || flags > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let _g = self.lock.lock();
        let (head, mut tail) = (self.head.load(Relaxed), self.tail.load(Relaxed));
        if self.next(head) == tail {
            if flags & EXIST == 0 {
                let max_entries = self.slots - 1;
                return Err(MapError::Full { map: self.name.clone(), max_entries });
            }
            // Make room: the oldest element goes.
            tail = self.next(tail);
            self.tail.store(tail, Relaxed);
        }
        self.elems.write(head as usize * self.stride, &value[..self.value_size]);
        self.head.store(self.next(head), Relaxed);
        Ok(())
    }

    /// `__queue_map_get`/`__stack_map_get`: copies the next element (the oldest for a
    /// queue, the newest for a stack) to `out` (`value_size` bytes) and, when `delete`,
    /// removes it. Empty: `out` zeroed and `NotFound` (`ENOENT`).
    pub(crate) fn get(&self, out: &mut [u8], delete: bool) -> Result<(), MapError> {
        let out = &mut out[..self.value_size];
        let _g = self.lock.lock();
        let (head, tail) = (self.head.load(Relaxed), self.tail.load(Relaxed));
        if head == tail {
            out.fill(0);
            return Err(MapError::NotFound { map: self.name.clone() });
        }
        let index = if self.stack {
            if head == 0 {
                self.slots - 1
            } else {
                head - 1
            }
        } else {
            tail
        };
        self.elems.read(index as usize * self.stride, out);
        if delete {
            if self.stack {
                self.head.store(index, Relaxed);
            } else {
                self.tail.store(self.next(tail), Relaxed);
            }
        }
        Ok(())
    }

    /// Elements held now.
    pub(crate) fn len(&self) -> usize {
        let _g = self.lock.lock();
        let (head, tail) = (self.head.load(Relaxed), self.tail.load(Relaxed));
        ((u64::from(head) + u64::from(self.slots) - u64::from(tail)) % u64::from(self.slots))
            as usize
    }
}
