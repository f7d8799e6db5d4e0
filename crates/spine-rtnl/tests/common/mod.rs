//! Helpers the mirror's tests share.
#![allow(dead_code)]

use std::net::IpAddr;
use std::time::{Duration, Instant};

use spine_fib::{FibReader, FibState};

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Waits until the published FIB satisfies `cond`: the "within a second".
pub fn eventually(reader: &FibReader, what: &str, cond: impl Fn(&FibState) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while !cond(&reader.load()) {
        assert!(Instant::now() < deadline, "not within a second: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
