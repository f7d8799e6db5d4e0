//! The peer programs the bench runs (trafgen, testpmd, `spine run`) as guarded child
//! processes, and the CPU time of tasks read from `/proc`.
//!
//! A [`Proc`] is stopped when it drops, on every path out of the bench (errors and
//! Ctrl-C included): gently first (stdin closed or SIGINT, so it prints its totals),
//! then SIGKILL. It is only ever signalled while unreaped, so its pid cannot have been
//! reused by another process.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::parse;

/// How long a stopped child may take to print its totals and exit before SIGKILL.
const GRACE: Duration = Duration::from_secs(5);

/// A running child process, stopped on drop; its stdout and stderr go to files.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    /// Present for children that stop at end of input (testpmd's "Press enter").
    stdin: Option<ChildStdin>,
    out: PathBuf,
    err: PathBuf,
}

impl Proc {
    /// Starts `cmd` with its output in `dir/<name>.out` and `.err`; with `stdin_pipe`
    /// its standard input is a pipe that [`Proc::stop`] closes (also when this process
    /// dies, so such a child cannot outlive the bench).
    pub fn spawn(name: &str, cmd: &mut Command, dir: &Path, stdin_pipe: bool) -> Result<Proc> {
        let out = dir.join(format!("{name}.out"));
        let err = dir.join(format!("{name}.err"));
        let mut child = cmd
            .stdin(if stdin_pipe { Stdio::piped() } else { Stdio::null() })
            .stdout(File::create(&out)?)
            .stderr(File::create(&err)?)
            .spawn()
            .with_context(|| format!("starting {name} ({cmd:?})"))?;
        let stdin = child.stdin.take();
        Ok(Proc { name: name.to_string(), child, stdin, out, err })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(description)` once the child has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown state ({e})")),
        }
    }

    /// Stops the child (end of input if it reads stdin, else SIGINT), waits up to the
    /// grace period, then kills it. Idempotent.
    pub fn stop(&mut self) {
        if self.exited().is_some() {
            return;
        }
        if self.stdin.take().is_none() {
            // The child is unreaped (try_wait said so), so the pid is still its own.
            let _ = Command::new("kill")
                .args(["-s", "INT", &self.pid().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("bench: {} did not stop within {GRACE:?}; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// The last `n` non-empty lines of stderr and stdout: why a child failed.
    pub fn tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.err).unwrap_or_default() + &self.stdout();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }

    /// Writes `line` to the child's stdin, if it has a pipe.
    #[cfg(test)]
    pub fn send(&mut self, line: &str) -> std::io::Result<()> {
        use std::io::Write as _;
        match &mut self.stdin {
            Some(s) => writeln!(s, "{line}"),
            None => Ok(()),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Every thread of `pid` and of its descendants.
pub fn tree_tids(pid: u32) -> Vec<u32> {
    let mut tids = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{p}/task")) else { continue };
        for e in dir.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            tids.push(tid);
            let kids = std::fs::read_to_string(e.path().join("children")).unwrap_or_default();
            todo.extend(parse::children(&kids));
        }
    }
    tids
}

/// The threaded-NAPI kernel threads polling `ifname` (`napi/<ifname>-<id>`).
pub fn napi_threads(ifname: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| parse::is_napi_of(&c, ifname))
        })
        .collect()
}

/// Nanoseconds each task has run, `None` for a task that is gone. Exact from schedstat;
/// from utime + stime (10 ms ticks) where the kernel has no schedstat.
pub fn runtimes_ns(tids: &[u32]) -> Vec<Option<u64>> {
    tids.iter()
        .map(|tid| {
            if let Ok(t) = std::fs::read_to_string(format!("/proc/{tid}/schedstat")) {
                return parse::schedstat_ns(&t);
            }
            let t = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
            parse::stat_ticks(&t).map(|ticks| ticks.saturating_mul(10_000_000))
        })
        .collect()
}

/// The machine's CPU time so far.
pub fn machine_cpu() -> parse::CpuTicks {
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| parse::proc_stat_cpu(&t))
        .unwrap_or_default()
}

/// The full path of `tool` on `PATH` (and the sbin folders, where root's tools live).
pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"])
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(tool))
        .find(|p| p.is_file());
    found
}

/// Runs a short command to completion; its stdout, or an error with its stderr.
pub fn run(prog: &str, args: &[&str]) -> Result<String> {
    let out = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {prog}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{prog} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("spine-vb-test-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_child_reading_stdin_stops_at_end_of_input_and_its_output_is_kept() {
        let dir = tempdir("stdin");
        let mut p = Proc::spawn("cat", &mut Command::new("cat"), &dir, true).unwrap();
        p.send("hello").unwrap();
        assert!(p.exited().is_none());
        p.stop();
        assert!(p.exited().is_some());
        assert_eq!(p.stdout(), "hello\n");
        assert_eq!(p.tail(5), "hello");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_child_is_interrupted_on_drop_and_its_cpu_time_is_readable() {
        let dir = tempdir("int");
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        let p = Proc::spawn("sleep", &mut cmd, &dir, false).unwrap();
        let pid = p.pid();
        let tids = tree_tids(pid);
        assert_eq!(tids, vec![pid]);
        assert!(runtimes_ns(&tids)[0].is_some());
        let t = Instant::now();
        drop(p);
        assert!(t.elapsed() < GRACE, "SIGINT ended it, no kill needed");
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
        assert_eq!(runtimes_ns(&[pid]), vec![None], "gone");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn descendants_are_found() {
        let dir = tempdir("tree");
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 3 & sleep 3 & wait"]);
        let p = Proc::spawn("sh", &mut cmd, &dir, false).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while tree_tids(p.pid()).len() < 3 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(tree_tids(p.pid()).len(), 3, "the shell and its two sleeps");
        drop(p);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn which_finds_a_shell_and_not_a_fantasy() {
        assert!(which("sh").is_some());
        assert!(which("no-such-tool-spine").is_none());
    }
}
