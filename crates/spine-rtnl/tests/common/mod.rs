//! Helpers the mirror's tests share.
#![allow(dead_code)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use spine_fib::{FibReader, FibState};

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Waits until the published FIB satisfies `cond`. The mirror applies events as they
/// arrive (well within the second on an idle machine); the deadline only bounds
/// a broken run, generously, since tests share a loaded machine: no timing is asserted.
pub fn eventually(reader: &FibReader, what: &str, cond: impl Fn(&FibState) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond(&reader.load()) {
        assert!(Instant::now() < deadline, "never happened (10 s): {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
