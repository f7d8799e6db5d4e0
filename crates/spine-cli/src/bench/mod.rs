//! `spine bench …`: performance measured side by side with its reference, in one run,
//! reported as ratios. Figures go to stdout (and JSON/SVG with `--out`); nothing here is
//! a pass/fail test.

pub mod alloc_count;
pub mod control;
pub mod endpoint;
pub mod exec;
pub mod forward;
pub mod lpm;
mod machine;
pub mod router;
pub mod router_paths;
mod svg;
pub mod veth;

use std::io::Write;

pub use machine::{line as machine_line, machine};

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

/// min / median / max of a figure over the trials.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Stat {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Stat {
    /// All zero for no trials.
    pub fn of(mut v: Vec<f64>) -> Stat {
        let median = median(&mut v);
        Stat {
            min: v.first().copied().unwrap_or(0.0),
            median,
            max: v.last().copied().unwrap_or(0.0),
        }
    }
}

impl std::fmt::Display for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:7.1} [{:.1}-{:.1}]", self.median, self.min, self.max)
    }
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
