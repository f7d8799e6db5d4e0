//! Shared by the kernel differential tests.
#![allow(dead_code, reason = "each test binary uses a different subset")]

/// Returns from the test, loudly, when this process cannot use bpf(2). Writes to the
/// stderr handle itself: `eprintln!` would be swallowed by the test harness's capture.
macro_rules! require_bpf {
    () => {
        if let Err(e) = spine_sys::probe() {
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIP: bpf(2) unavailable: {e}");
            return;
        }
    };
}
pub(crate) use require_bpf;

/// 0 for success, else the negative errno, for either side.
pub fn kerr<T>(r: Result<T, spine_sys::SysError>) -> i64 {
    match r {
        Ok(_) => 0,
        Err(e) => -i64::from(e.errno),
    }
}

pub fn serr<T>(r: Result<T, spine_maps::MapError>) -> i64 {
    match r {
        Ok(_) => 0,
        Err(e) => e.errno(),
    }
}
