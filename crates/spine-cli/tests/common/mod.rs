//! What the tests that drive the `spine` binary against a running adapter share: a
//! temporary folder, the adapter process (stopped with Ctrl-C on drop), and checks of a
//! command's output.

use std::path::PathBuf;
use std::process::{Child, Command, Output};

/// A folder removed when dropped.
pub struct Dir(pub PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The adapter, stopped with Ctrl-C when dropped.
pub struct Adapter(pub Child);

impl Drop for Adapter {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-INT", &self.0.id().to_string()]).status();
        let _ = self.0.wait();
    }
}

pub fn ok(o: Output) -> String {
    let t = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{t}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn fails(o: Output) -> String {
    assert!(!o.status.success(), "expected a failure: {}", String::from_utf8_lossy(&o.stdout));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("JSON")
}

pub fn per_cpu_sum(hexv: &str) -> u64 {
    let b: Vec<u8> = hexv.split(' ').map(|x| u8::from_str_radix(x, 16).unwrap()).collect();
    b.chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).sum()
}

/// Builds crates/spine-adapter/tests/fixtures/`name`.c with clang into `dir`; the
/// object's path.
pub fn fixture(dir: &std::path::Path, name: &str) -> PathBuf {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../spine-adapter/tests/fixtures/{name}.c"));
    let obj = dir.join(format!("{name}.o"));
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    obj
}
