//! Helpers every integration test of this crate uses: temporary files and tcpdump,
//! the independent reader that says whether what we write is a valid capture.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A file in the temporary directory, removed when dropped.
pub struct TempFile(PathBuf);

impl TempFile {
    pub fn new(name: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let file = format!("spine-ports-{}-{n}-{name}", std::process::id());
        TempFile(std::env::temp_dir().join(file))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs tcpdump with `args` (as root it keeps its privileges, so it may write where we
/// can). Returns its stdout, or `None` after saying loudly that the test is skipped if
/// tcpdump is not installed. Fails the test if tcpdump rejects the input.
pub fn tcpdump(args: &[&std::ffi::OsStr]) -> Option<String> {
    let out = match Command::new("tcpdump").args(["-Z", "root"]).args(args).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!("SKIPPED: tcpdump is not installed; the interoperability check did not run");
            return None;
        }
        Err(e) => panic!("cannot run tcpdump: {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tcpdump {args:?} failed: {stderr}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// tcpdump's one-line summaries of the packets in `path`, with nanosecond timestamps;
/// `None` if tcpdump is missing.
pub fn tcpdump_packets(path: &Path) -> Option<Vec<String>> {
    let stdout = tcpdump(&[
        "-r".as_ref(),
        path.as_os_str(),
        "-nn".as_ref(),
        "-tt".as_ref(),
        "--time-stamp-precision=nano".as_ref(),
    ])?;
    // Every packet line starts with its "seconds.nanoseconds" stamp; continuation
    // lines some decoders print start with whitespace.
    let is_packet = |l: &&str| {
        let stamp = l.split(' ').next().unwrap_or("");
        let mut parts = stamp.split('.');
        let (sec, frac) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        !sec.is_empty()
            && sec.bytes().all(|b| b.is_ascii_digit())
            && frac.len() == 9
            && frac.bytes().all(|b| b.is_ascii_digit())
    };
    Some(stdout.lines().filter(is_packet).map(str::to_owned).collect())
}
