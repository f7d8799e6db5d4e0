//! The `struct bpf_timer`s of a map's values (`bpf_timer_init`, `_set_callback`,
//! `_start`, `_cancel`), with the kernel's return values.
//!
//! A timer's state lives here, beside the map, one slot per element (an array index or
//! a hash element), never in the value bytes: the 16 bytes of the value's `bpf_timer`
//! field mean nothing, so neither a program (the verifier keeps it off them) nor user
//! space (whose writes may cover them) can forge a timer. The map frees an element's
//! timer whenever the element goes: deleted, replaced by an update, evicted from an LRU
//! map, or overwritten by an array update (the kernel's `bpf_obj_free_fields`).
//!
//! Sans-IO: times are nanoseconds the caller reads from its clock. Nothing here runs a
//! callback: [`Timers::take_due`] hands the runtime the next one due on a CPU, already
//! disarmed, so the callback may re-arm it (a periodic timer). Capacity is fixed at map
//! creation; the helpers take one mutex per map (the kernel takes one per timer), off
//! the packet path unless the program calls them on every packet.

use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Mutex;

use spine_abi::errno::{EBUSY, EDEADLK, EINVAL};
use spine_abi::timer as t;

/// Whose callback a timer runs: an opaque id of the extension that set it (the
/// runtime's) and the instruction its callback starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimerCallback {
    pub owner: u64,
    pub pc: u32,
}

/// A timer whose time came, taken off the armed list: run `callback` for `elem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DueTimer {
    pub elem: u32,
    pub callback: TimerCallback,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// `bpf_timer_init` succeeded, with this clock id.
    clock: Option<u8>,
    callback: Option<TimerCallback>,
    /// Armed: expiry (ns) and the CPU that fires it.
    armed: Option<(u64, u32)>,
}

#[derive(Debug)]
struct Slots {
    slots: Box<[Slot]>,
    /// Elements whose timer is armed (capacity: every element, never grown).
    armed: Vec<u32>,
}

/// The timers of one map.
#[derive(Debug)]
pub struct Timers {
    inner: Mutex<Slots>,
    /// Earliest expiry armed (`u64::MAX`: none), read without the lock so that a
    /// worker with nothing due pays one load.
    next: AtomicU64,
}

/// `-e` as a helper returns it.
fn neg(e: i64) -> i64 {
    -e
}

impl Timers {
    /// Room for the timers of `elements` elements.
    pub fn new(elements: usize) -> Timers {
        Timers {
            inner: Mutex::new(Slots {
                slots: vec![Slot::default(); elements].into_boxed_slice(),
                armed: Vec::with_capacity(elements),
            }),
            next: AtomicU64::new(u64::MAX),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `bpf_timer_init(timer, map, flags)`: `-EINVAL` for a clock other than
    /// `CLOCK_MONOTONIC`, `CLOCK_REALTIME` or `CLOCK_BOOTTIME`, `-EBUSY` if already
    /// initialised.
    pub fn init(&self, elem: u32, flags: u64) -> i64 {
        if !matches!(flags, t::CLOCK_MONOTONIC | t::CLOCK_REALTIME | t::CLOCK_BOOTTIME) {
            return neg(EINVAL);
        }
        let mut s = self.lock();
        let Some(slot) = s.slots.get_mut(elem as usize) else { return neg(EINVAL) };
        if slot.clock.is_some() {
            return neg(EBUSY);
        }
        *slot = Slot { clock: Some(flags as u8), callback: None, armed: None };
        0
    }

    /// `bpf_timer_set_callback(timer, cb)`: `-EINVAL` if not initialised.
    pub fn set_callback(&self, elem: u32, callback: TimerCallback) -> i64 {
        let mut s = self.lock();
        match s.slots.get_mut(elem as usize) {
            Some(slot) if slot.clock.is_some() => {
                slot.callback = Some(callback);
                0
            }
            _ => neg(EINVAL),
        }
    }

    /// `bpf_timer_start(timer, nsecs, flags)` at time `now`: fires `nsecs` from now (or
    /// at `nsecs` with `BPF_F_TIMER_ABS`) on `cpu`, replacing any earlier expiry.
    /// `-EINVAL` for unknown flags, or if not initialised or without a callback.
    pub fn start(&self, elem: u32, nsecs: u64, flags: u64, now: u64, cpu: u32) -> i64 {
        if flags & !(t::F_TIMER_ABS | t::F_TIMER_CPU_PIN) != 0 {
            return neg(EINVAL);
        }
        let at = if flags & t::F_TIMER_ABS != 0 { nsecs } else { now.saturating_add(nsecs) };
        let mut s = self.lock();
        let Some(slot) = s.slots.get_mut(elem as usize) else { return neg(EINVAL) };
        if slot.clock.is_none() || slot.callback.is_none() {
            return neg(EINVAL);
        }
        let was_armed = slot.armed.replace((at, cpu)).is_some();
        if !was_armed {
            s.armed.push(elem);
        }
        self.next.fetch_min(at, AcqRel);
        if was_armed {
            self.recompute_next(&s);
        }
        0
    }

    /// `bpf_timer_cancel(timer)`: 1 if it was armed, 0 if not; the callback is dropped
    /// either way (it must be set again before the next start), as the kernel's
    /// `drop_prog_refcnt`. `-EINVAL` if not initialised; `-EDEADLK` from the timer's
    /// own callback (`in_own_callback`), where the kernel would wait for itself.
    pub fn cancel(&self, elem: u32, in_own_callback: bool) -> i64 {
        let mut s = self.lock();
        let Some(slot) = s.slots.get_mut(elem as usize) else { return neg(EINVAL) };
        if slot.clock.is_none() {
            return neg(EINVAL);
        }
        if in_own_callback {
            return neg(EDEADLK);
        }
        slot.callback = None;
        let was_armed = slot.armed.take().is_some();
        if was_armed {
            s.armed.retain(|&e| e != elem);
            self.recompute_next(&s);
        }
        i64::from(was_armed)
    }

    /// The element is gone (deleted, replaced, evicted, overwritten): its timer is
    /// cancelled and uninitialised (`bpf_timer_cancel_and_free`).
    pub fn free(&self, elem: u32) {
        let mut s = self.lock();
        let Some(slot) = s.slots.get_mut(elem as usize) else { return };
        let was_armed = slot.armed.is_some();
        *slot = Slot::default();
        if was_armed {
            s.armed.retain(|&e| e != elem);
            self.recompute_next(&s);
        }
    }

    /// The extension `owner` is gone: every timer whose callback it set is cancelled and
    /// loses its callback (it stays initialised, as after `bpf_timer_cancel`), so no
    /// timer waits on a runner that will never come.
    pub fn drop_owner(&self, owner: u64) {
        let mut s = self.lock();
        let Slots { slots, armed } = &mut *s;
        for slot in slots.iter_mut().filter(|t| t.callback.is_some_and(|c| c.owner == owner)) {
            slot.callback = None;
            slot.armed = None;
        }
        armed.retain(|&e| slots[e as usize].armed.is_some());
        self.recompute_next(&s);
    }

    /// Every timer freed (the map's contents are going).
    pub fn free_all(&self) {
        let mut s = self.lock();
        s.slots.fill(Slot::default());
        s.armed.clear();
        self.next.store(u64::MAX, Release);
    }

    /// Whether a timer may be due at `now`: one atomic load, the check a worker makes
    /// each round before [`Timers::take_due`].
    #[inline]
    pub fn any_due(&self, now: u64) -> bool {
        self.next.load(Acquire) <= now
    }

    /// The earliest armed expiry, `None` if no timer is armed.
    pub fn next_expiry(&self) -> Option<u64> {
        Some(self.next.load(Acquire)).filter(|&n| n != u64::MAX)
    }

    /// Takes the earliest timer due at `now` that fires on `cpu` with a callback of
    /// `owner`, disarming it (its callback stays set, so the callback may start it
    /// again). Timers of other CPUs or owners are left for their runners.
    pub fn take_due(&self, now: u64, cpu: u32, owner: u64) -> Option<DueTimer> {
        if !self.any_due(now) {
            return None;
        }
        let mut s = self.lock();
        let mut best: Option<(u64, usize)> = None;
        for (i, &e) in s.armed.iter().enumerate() {
            let slot = &s.slots[e as usize];
            let (Some((at, on)), Some(cb)) = (slot.armed, slot.callback) else { continue };
            if at <= now && on == cpu && cb.owner == owner && best.is_none_or(|(b, _)| at < b) {
                best = Some((at, i));
            }
        }
        let (_, i) = best?;
        let elem = s.armed.swap_remove(i);
        let slot = &mut s.slots[elem as usize];
        slot.armed = None;
        let callback = slot.callback?;
        self.recompute_next(&s);
        Some(DueTimer { elem, callback })
    }

    /// Whether `elem`'s timer is armed (tests, introspection).
    pub fn is_armed(&self, elem: u32) -> bool {
        self.lock().slots.get(elem as usize).is_some_and(|s| s.armed.is_some())
    }

    fn recompute_next(&self, s: &Slots) {
        let next = s
            .armed
            .iter()
            .filter_map(|&e| s.slots[e as usize].armed.map(|(at, _)| at))
            .min()
            .unwrap_or(u64::MAX);
        self.next.store(next, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CB: TimerCallback = TimerCallback { owner: 7, pc: 12 };

    #[test]
    fn init_callback_start_follow_the_kernels_return_values() {
        let t = Timers::new(4);
        assert_eq!(t.set_callback(0, CB), -EINVAL, "not initialised");
        assert_eq!(t.start(0, 10, 0, 0, 0), -EINVAL, "not initialised");
        assert_eq!(t.cancel(0, false), -EINVAL, "not initialised");
        assert_eq!(t.init(0, 2), -EINVAL, "CLOCK_PROCESS_CPUTIME_ID");
        assert_eq!(t.init(0, t::CLOCK_MONOTONIC | 1 << 32), -EINVAL);
        assert_eq!(t.init(0, t::CLOCK_MONOTONIC), 0);
        assert_eq!(t.init(0, t::CLOCK_BOOTTIME), -EBUSY);
        assert_eq!(t.start(0, 10, 0, 0, 0), -EINVAL, "no callback");
        assert_eq!(t.cancel(0, false), 0, "not armed");
        assert_eq!(t.set_callback(0, CB), 0);
        assert_eq!(t.start(0, 10, 4, 0, 0), -EINVAL, "unknown flag");
        assert_eq!(t.start(0, 10, t::F_TIMER_CPU_PIN, 100, 0), 0);
        assert_eq!(t.next_expiry(), Some(110));
        assert_eq!(t.cancel(0, true), -EDEADLK);
        assert_eq!(t.cancel(0, false), 1);
        assert_eq!(t.next_expiry(), None);
        assert_eq!(t.start(0, 10, 0, 0, 0), -EINVAL, "cancel dropped the callback");
        assert_eq!(t.init(9, t::CLOCK_MONOTONIC), -EINVAL, "no such element");
    }

    #[test]
    fn due_timers_come_out_earliest_first_per_cpu_and_owner() {
        let t = Timers::new(4);
        for e in 0..4 {
            assert_eq!(t.init(e, t::CLOCK_MONOTONIC), 0);
            assert_eq!(t.set_callback(e, CB), 0);
        }
        assert_eq!(t.start(0, 300, 0, 0, 0), 0);
        assert_eq!(t.start(1, 100, 0, 0, 0), 0);
        assert_eq!(t.start(2, 50, t::F_TIMER_ABS, 1000, 1), 0, "absolute: due at 50");
        assert_eq!(t.start(3, 200, 0, 0, 0), 0);
        assert!(!t.any_due(49));
        assert_eq!(t.take_due(99, 0, 7), None, "cpu 1's is not cpu 0's");
        assert_eq!(t.take_due(250, 0, 8), None, "another owner's");
        assert_eq!(t.take_due(250, 0, 7).map(|d| d.elem), Some(1));
        assert_eq!(t.take_due(250, 0, 7).map(|d| d.elem), Some(3));
        assert_eq!(t.take_due(250, 0, 7), None, "element 0 is due at 300");
        assert_eq!(t.take_due(250, 1, 7), Some(DueTimer { elem: 2, callback: CB }));
        assert_eq!(t.next_expiry(), Some(300));
        // Re-arming (what a periodic callback does) and restarting move the expiry.
        assert_eq!(t.start(1, 10, 0, 250, 0), 0);
        assert_eq!(t.start(0, 5, 0, 250, 0), 0);
        assert_eq!(t.next_expiry(), Some(255));
        assert!(t.is_armed(0) && t.is_armed(1) && !t.is_armed(3));
    }

    #[test]
    fn freeing_an_element_cancels_and_uninitialises_its_timer() {
        let t = Timers::new(2);
        assert_eq!(t.init(1, t::CLOCK_REALTIME), 0);
        assert_eq!(t.set_callback(1, CB), 0);
        assert_eq!(t.start(1, 10, 0, 0, 0), 0);
        t.free(1);
        assert_eq!(t.next_expiry(), None);
        assert_eq!(t.take_due(u64::MAX, 0, 7), None);
        assert_eq!(t.init(1, t::CLOCK_MONOTONIC), 0, "free again after the element went");
        t.free_all();
        assert_eq!(t.cancel(1, false), -EINVAL);
    }

    #[test]
    fn an_owners_timers_go_with_it() {
        let t = Timers::new(3);
        let other = TimerCallback { owner: 8, pc: 1 };
        for (e, cb) in [(0, CB), (1, other), (2, CB)] {
            assert_eq!(t.init(e, t::CLOCK_MONOTONIC), 0);
            assert_eq!(t.set_callback(e, cb), 0);
            assert_eq!(t.start(e, 10 * u64::from(e + 1), 0, 0, 0), 0);
        }
        t.drop_owner(CB.owner);
        assert_eq!(t.next_expiry(), Some(20), "only the other owner's timer is armed");
        assert!(!t.is_armed(0) && t.is_armed(1) && !t.is_armed(2));
        assert_eq!(t.start(0, 10, 0, 0, 0), -EINVAL, "its callback went too");
        assert_eq!(t.init(0, t::CLOCK_MONOTONIC), -EBUSY, "still initialised");
    }
}
