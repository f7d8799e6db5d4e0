//! What the endpoint and applet tests share.

use spine_testnet::daemons::TempDir;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds `clients/c/<name>.c` with the C client library, warning-free, into `dir`.
pub fn c_client(dir: &TempDir, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/c");
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "clang".into());
    let ok = Command::new(&cc)
        .args(["-Wall", "-Wextra", "-Werror", "-O2"])
        .arg(src.join("spine_endpoint.c"))
        .arg(src.join(format!("{name}.c")))
        .arg(format!("-I{}", src.display()))
        .arg("-o")
        .arg(&exe)
        .status()
        .expect("a C compiler (clang)")
        .success();
    assert!(ok, "the C client {name} builds warning-free");
    exe
}
