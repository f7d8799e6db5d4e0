//! The few operating-system calls the adapter makes itself, all off the packet path
//! except the clocks: the monotonic clock extensions read (`bpf_ktime_get_ns` is
//! `CLOCK_MONOTONIC` in the kernel) and `CLOCK_TAI` (`bpf_ktime_get_tai_ns`), an interface's index (for ports whose type does not
//! report it), and a SIGINT flag so `spine run` stops cleanly on Ctrl-C.

use std::sync::atomic::{AtomicBool, Ordering};

/// `CLOCK_MONOTONIC` in nanoseconds, the clock the kernel's `bpf_ktime_get_ns` reads.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_TAI in nanoseconds (`bpf_ktime_get_tai_ns`); 0 if the clock cannot be read.
pub fn tai_ns() -> u64 {
    clock_ns(libc::CLOCK_TAI)
}

/// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID; a system call,
/// for the watchdog's slow path only); `None` if the clock cannot be read.
pub fn thread_cpu_ns() -> Option<u64> {
    Some(clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)).filter(|&t| t != 0)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into `ts`, which lives across the call.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// The index of interface `name` in the calling thread's network namespace; `None` if
/// there is no such interface.
pub fn ifindex(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    // SAFETY: `c` is a NUL-terminated string that lives across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

static SIGINT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    SIGINT.store(true, Ordering::Relaxed);
}

/// Makes SIGINT (Ctrl-C) and SIGTERM set a flag instead of killing the process, so the
/// caller can stop workers, close ports and print totals. Returns false if the handler
/// could not be installed.
pub fn catch_sigint() -> bool {
    let mut ok = true;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: all-zero is a valid sigaction (empty mask, no flags).
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_sigint as *const () as libc::sighandler_t;
        sa.sa_flags = libc::SA_RESTART;
        // SAFETY: installs a handler that only stores to an atomic; `sa` is a valid
        // sigaction and the old action is not requested.
        ok &= unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) } == 0;
    }
    ok
}

/// Whether SIGINT or SIGTERM arrived since [`catch_sigint`].
pub fn sigint_received() -> bool {
    SIGINT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_moves_forward_and_loopback_has_index_one() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
        assert_eq!(ifindex("lo"), Some(1));
        assert_eq!(ifindex("no-such-if0"), None);
        assert_eq!(ifindex("bad\0name"), None);
    }
}
