//! How many CPUs the kernel sizes per-CPU map values by: the weight of
//! `cpu_possible_mask`, which it prints in `/sys/devices/system/cpu/possible`. A per-CPU
//! value read from user space is one `round_up(value_size, 8)` slot per possible CPU, in
//! CPU order, so this count must be exactly the kernel's.

use std::sync::OnceLock;

use crate::SysError;

const POSSIBLE: &str = "/sys/devices/system/cpu/possible";

/// The number of possible CPUs (not online ones: the kernel sizes per-CPU storage by
/// possible CPUs). Falls back to the number of CPUs the process can use if sysfs cannot be
/// read; per-CPU maps are refused in that case, because a wrong count would make the
/// kernel write past a value buffer.
pub fn possible_cpus() -> usize {
    possible_cpus_exact().unwrap_or_else(|_| {
        std::thread::available_parallelism().map(std::num::NonZeroUsize::get).unwrap_or(1)
    })
}

/// The kernel's possible-CPU count, or why it could not be read.
pub fn possible_cpus_exact() -> Result<usize, SysError> {
    static CACHE: OnceLock<Result<usize, SysError>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let text = std::fs::read_to_string(POSSIBLE).map_err(|e| {
                SysError::new(
                    "read /sys/devices/system/cpu/possible",
                    e.raw_os_error().unwrap_or(libc::EIO),
                )
            })?;
            parse_cpu_list(&text)
                .ok_or(SysError::new("parse /sys/devices/system/cpu/possible", libc::EINVAL))
        })
        .clone()
}

/// Counts the CPUs in a kernel CPU list (`0-1`, `0,2-5`, `7`); `None` if it is malformed,
/// empty, has a descending range, or is not in increasing order as the kernel prints it.
pub fn parse_cpu_list(text: &str) -> Option<usize> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut count = 0usize;
    let mut next_min = 0u32;
    for part in text.split(',') {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (parse_cpu(lo)?, parse_cpu(hi)?),
            None => {
                let c = parse_cpu(part)?;
                (c, c)
            }
        };
        if hi < lo || lo < next_min {
            return None;
        }
        count = count.checked_add((hi - lo) as usize + 1)?;
        next_min = hi.checked_add(1)?;
    }
    Some(count)
}

fn parse_cpu(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_singles() {
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0,2-5"), Some(5));
        assert_eq!(parse_cpu_list("0-3,8-11"), Some(8));
        assert_eq!(parse_cpu_list("5"), Some(1));
        assert_eq!(parse_cpu_list("0-255"), Some(256));
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in
            ["", "\n", "a", "0-", "-1", "3-1", "0,,1", "0-1,1", "2,0", "0 - 1", "+1", "0-1-2"]
        {
            assert_eq!(parse_cpu_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn this_machine_has_at_least_one() {
        let n = possible_cpus();
        assert!(n >= 1);
        if let Ok(exact) = possible_cpus_exact() {
            assert_eq!(exact, n);
        }
    }
}
