//! The C (`clients/c`) and Python (`clients/python`) client libraries against the adapter
//! side of an endpoint: an application receives the endpoint's fds over a Unix socket, and
//! every message the adapter delivers comes back from it reversed, through the shared
//! rings.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use spine_client::{EventFd, Layout};
use spine_endpoint::{send_fds, AdapterEnd};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_c_application_echoes_through_its_endpoint() {
    let dir = Dir(std::env::temp_dir().join(format!("spine-cclient-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/c");
    let (lib, exe) = (dir.0.join("libspine_endpoint.so"), dir.0.join("echo"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "clang".into());
    let build = |args: &[&std::ffi::OsStr]| {
        let ok = Command::new(&cc).args(args).status().expect("a C compiler (clang)").success();
        assert!(ok, "builds warning-free: {args:?}");
    };
    let flags = ["-Wall", "-Wextra", "-Werror", "-O2"].map(std::ffi::OsStr::new);
    // The shared library, and the example linked against it as an application would be.
    let c = src.join("spine_endpoint.c");
    build(
        &[
            &flags[..],
            &["-shared".as_ref(), "-fPIC".as_ref(), c.as_os_str(), "-o".as_ref(), lib.as_os_str()],
        ]
        .concat(),
    );
    let rpath = format!("-Wl,-rpath,{}", dir.0.display());
    let (e, inc, libdir) =
        (src.join("echo.c"), format!("-I{}", src.display()), format!("-L{}", dir.0.display()));
    build(
        &[
            &flags[..],
            &[
                e.as_os_str(),
                inc.as_ref(),
                libdir.as_ref(),
                "-lspine_endpoint".as_ref(),
                rpath.as_ref(),
                "-o".as_ref(),
                exe.as_os_str(),
            ],
        ]
        .concat(),
    );
    echo_through(Command::new(&exe), &dir.0, 500);
}

/// The same against the pure-Python client (`clients/python`).
#[test]
fn a_python_application_echoes_through_its_endpoint() {
    let dir = Dir(std::env::temp_dir().join(format!("spine-pyclient-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python/echo.py");
    let mut py = Command::new("python3");
    py.arg(script);
    echo_through(py, &dir.0, 200);
}

/// Starts `app` with a socket path and a count, hands it an endpoint, delivers `n`
/// messages of many lengths and checks each comes back reversed.
fn echo_through(mut app: Command, dir: &Path, n: usize) {
    let sock_path = dir.join("ep.sock");
    let listener = UnixListener::bind(&sock_path).unwrap();
    let mut child = app.arg(&sock_path).arg(n.to_string()).spawn().unwrap();
    let (sock, _) = listener.accept().unwrap();
    let mut end = AdapterEnd::create(Layout::new(64, 2048, 64).unwrap()).unwrap();
    let wake = EventFd::new().unwrap();
    send_fds(&sock, &[end.shm().fd(), wake.fd()]).unwrap();

    // Every length from 1 to 70 first (inline up to 64, in frames from 65), then many.
    let len = |i: usize| if i < 70 { 1 + i } else { 1 + (i * 13) % 2000 };
    let msgs: Vec<Vec<u8>> =
        (0..n).map(|i| (0..len(i)).map(|b| (b * 7 + i) as u8).collect()).collect();
    let mut back = Vec::new();
    let mut buf = vec![0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sent = 0;
    while back.len() < n {
        assert!(Instant::now() < deadline, "{} of {n} came back", back.len());
        // Keep a few in flight: the application's receive frames are limited.
        if sent < n && sent - back.len() < 8 && end.deliver(&msgs[sent]) {
            wake.signal();
            sent += 1;
        }
        if let Some(len) = end.take(&mut buf) {
            back.push(buf[..len].to_vec());
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "the application saw every message");
    for (m, b) in msgs.iter().zip(&back) {
        let rev: Vec<u8> = m.iter().rev().copied().collect();
        assert_eq!(&rev, b);
    }
    let s = end.stats();
    assert_eq!((s.bad_desc, s.bad_index), (0, 0));
    // Messages of 64 bytes or less went inline both ways, the rest in frames.
    let small = msgs.iter().filter(|m| m.len() <= spine_client::INLINE_BYTES).count() as u64;
    assert!(small > 0);
    assert_eq!((s.rx_inline, s.tx_inline), (small, small));
}
