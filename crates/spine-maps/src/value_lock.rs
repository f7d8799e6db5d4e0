//! The `bpf_spin_lock` word inside a map value, as the map itself takes it for
//! `BPF_F_LOCK` updates and lookups (the kernel's `copy_map_value_locked`). Programs
//! take the same word through the runtime's `bpf_spin_lock` helper; a host application
//! may take an array's through a shared segment. Every wait is bounded, because the
//! holder may be a host application or a stopped worker.

use std::sync::atomic::{AtomicU32, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::MapError;

/// Who waits for a value's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiter {
    /// A program's `bpf_map_update_elem(..., BPF_F_LOCK)`: spins, never sleeps.
    Program,
    /// `bpf(2)`: spins briefly, then yields.
    User,
}

/// How long a program's `BPF_F_LOCK` update waits for the lock (spinning): the
/// runtime's limit for `bpf_spin_lock` too.
pub(crate) const PROG_LOCK_WAIT: Duration = Duration::from_millis(10);
/// How long user space waits (spinning, then yielding).
pub(crate) const USER_LOCK_WAIT: Duration = Duration::from_secs(1);

/// A lock word taken by [`take`]; released on drop.
pub(crate) struct LockGuard<'a>(&'a AtomicU32);

impl Drop for LockGuard<'_> {
    fn drop(&mut self) {
        self.0.store(0, Release);
    }
}

/// Takes `word` (0 free, 1 taken), giving up with `LockTimeout` (`EBUSY`) after the
/// waiter's limit.
pub(crate) fn take<'a>(
    word: &'a AtomicU32,
    side: Waiter,
    map: &Arc<str>,
) -> Result<LockGuard<'a>, MapError> {
    let limit = match side {
        Waiter::Program => PROG_LOCK_WAIT,
        Waiter::User => USER_LOCK_WAIT,
    };
    let t0 = Instant::now();
    let mut spins = 0u32;
    loop {
        if word.load(Relaxed) == 0 && word.compare_exchange_weak(0, 1, Acquire, Relaxed).is_ok() {
            return Ok(LockGuard(word));
        }
        spins = spins.wrapping_add(1);
        if spins.is_multiple_of(128) && t0.elapsed() > limit {
            return Err(MapError::LockTimeout { map: map.clone() });
        }
        if spins < 128 || side == Waiter::Program {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}
