//! The one error type of a bpf(2) call: which command failed and the errno the kernel
//! returned, so callers can match on the errno exactly as the kernel defines it.

use std::fmt;

/// A failed bpf(2) command. `errno` is the kernel's positive errno (`libc::ENOENT`, ...);
/// `log` is the verifier log of a failed `BPF_PROG_LOAD` (absent when the kernel wrote none).
///
/// A few preconditions are checked here before the kernel is asked, as libbpf's
/// `bpf_map__lookup_elem` and friends do, and reported with the errno the kernel would
/// give: `EINVAL` for a key or value buffer that is not the map's size, `E2BIG` for a
/// buffer whose length does not fit the attribute's 32-bit field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SysError {
    /// The bpf(2) command (`BPF_MAP_CREATE`), or the file read, that failed.
    pub op: &'static str,
    /// Positive errno.
    pub errno: i32,
    /// The kernel verifier log, for program loads.
    pub log: Option<String>,
}

impl SysError {
    pub(crate) fn new(op: &'static str, errno: i32) -> Self {
        SysError { op, errno, log: None }
    }

    /// True when the kernel returned `errno`.
    pub fn is(&self, errno: i32) -> bool {
        self.errno == errno
    }

    /// The last line of the verifier log before its statistics: where the kernel says
    /// why it refused.
    pub fn log_tail(&self) -> Option<&str> {
        self.log.as_deref()?.lines().rev().map(str::trim).find(|l| !l.is_empty() && !is_stats(l))
    }
}

/// The summary lines the verifier appends to every log (`processed N insns ...`, and with
/// `log_level` 4 the time and stack depth).
fn is_stats(line: &str) -> bool {
    ["processed ", "verification time ", "stack depth "].iter().any(|p| line.starts_with(p))
}

impl fmt::Display for SysError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, std::io::Error::from_raw_os_error(self.errno))?;
        if let Some(tail) = self.log_tail() {
            // The whole log can be megabytes; its last line names the refusal.
            write!(f, "; verifier: {tail}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_op_and_strerror() {
        let e = SysError::new("BPF_MAP_CREATE", libc::EPERM);
        let s = e.to_string();
        assert!(s.starts_with("BPF_MAP_CREATE: "), "{s}");
        assert!(s.contains("Operation not permitted"), "{s}");
        assert!(!s.contains("verifier"), "{s}");
    }

    #[test]
    fn display_quotes_last_log_line() {
        let e = SysError {
            op: "BPF_PROG_LOAD",
            errno: libc::EACCES,
            log: Some(
                "0: (95) exit\nR0 !read_ok\nprocessed 1 insns (limit 1000000) max_states_per_insn \
                 0\n\n"
                    .into(),
            ),
        };
        assert_eq!(e.log_tail(), Some("R0 !read_ok"));
        assert!(e.to_string().ends_with("; verifier: R0 !read_ok"), "{e}");
        assert!(e.is(libc::EACCES));
        assert!(!e.is(libc::EINVAL));
    }
}
