//! Thread placement: pinning the calling thread to one CPU. Workers pin themselves to
//! their cores, and differential tests pin themselves because the kernel runs
//! `BPF_PROG_TEST_RUN` on the calling CPU, whose per-CPU map slots spine must mirror.

use crate::SysError;

/// Pins the calling thread to `cpu` (`sched_setaffinity`).
pub fn pin_current_thread(cpu: usize) -> Result<(), SysError> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(SysError::new("sched_setaffinity", libc::EINVAL));
    }
    // SAFETY: `cpu_set_t` is plain data for which all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above), so CPU_SET stays inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL);
        Err(SysError::new("sched_setaffinity", errno))
    }
}

/// Restores the default action of SIGPIPE (terminate quietly), which Rust programs
/// ignore by default: a command-line tool piped into `head` should stop, not panic.
pub fn default_sigpipe() {
    // SAFETY: installing SIG_DFL for SIGPIPE has no preconditions and no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Ignores SIGPIPE, as Rust programs do by default: writing to a socket whose peer has
/// gone then fails with `EPIPE` instead of killing the process. What a process that
/// serves clients (the control API) must do, whatever [`default_sigpipe`] set for its
/// command-line use.
pub fn ignore_sigpipe() {
    // SAFETY: installing SIG_IGN for SIGPIPE has no preconditions and no handler runs.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
}

/// Moves the calling thread into the network namespace named `name` (as `ip netns`
/// names them, a file under `/var/run/netns`). Netlink, `BPF_PROG_TEST_RUN`'s
/// `bpf_fib_lookup` and interface names of this thread then refer to that namespace;
/// other threads stay where they are.
pub fn enter_netns(name: &str) -> Result<(), SysError> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/var/run/netns/{name}"))
        .map_err(|e| SysError::new("open netns", e.raw_os_error().unwrap_or(libc::ENOENT)))?;
    // SAFETY: setns on the calling thread with an fd of a namespace file held open.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(SysError::new(
            "setns",
            std::io::Error::last_os_error().raw_os_error().unwrap_or(0),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_to_an_allowed_cpu_and_refuses_an_absurd_one() {
        std::thread::spawn(|| {
            pin_current_thread(0).expect("CPU 0 exists");
            // SAFETY: sched_getcpu has no preconditions.
            assert_eq!(unsafe { libc::sched_getcpu() }, 0);
            assert_eq!(pin_current_thread(1 << 20).unwrap_err().errno, libc::EINVAL);
        })
        .join()
        .unwrap();
    }
}
