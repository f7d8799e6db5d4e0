//! `spine bench …`: performance measured side by side with its reference, in one run,
//! reported as ratios. Figures go to stdout (and JSON/SVG with `--out`); nothing here is
//! a pass/fail test.

pub mod alloc_count;
pub mod exec;
pub mod forward;
pub mod lpm;
mod svg;
pub mod veth;

use std::io::Write;

/// Median of `v` (sorted in place); 0 for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The machine a figure was taken on, for the JSON reports.
pub fn machine() -> serde_json::Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split(':').nth(1)))
        .map_or("unknown", str::trim)
        .to_string();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    serde_json::json!({
        "cpu": model,
        "cpus": std::thread::available_parallelism().map_or(0, std::num::NonZeroUsize::get),
        "kernel": kernel.trim(),
    })
}

/// A one-line progress bar on stderr: `[#####.....] 5/11 parser`.
pub fn progress(done: usize, total: usize, what: &str) {
    const WIDTH: usize = 30;
    let filled = (done * WIDTH).checked_div(total).unwrap_or(WIDTH);
    let bar: String = "#".repeat(filled) + &".".repeat(WIDTH - filled);
    eprint!("\r[{bar}] {done}/{total} {what:<24}");
    let _ = std::io::stderr().flush();
}

#[cfg(test)]
mod tests {
    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(super::median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(super::median(&mut []), 0.0);
    }
}
