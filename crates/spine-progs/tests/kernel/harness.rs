//! Loading a bundled program into the kernel with `bpftool` and running packets through it
//! with `BPF_PROG_TEST_RUN`, leaving nothing behind in bpffs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use serde_json::Value;

const BPFFS: &str = "/sys/fs/bpf";
/// Every pin directory these tests create starts with this, followed by the test's pid.
const PIN_PREFIX: &str = "spine-progs-test-";

/// Why the kernel tests cannot run here, or `None` if they can. Checked (and bpffs
/// mounted) once per test binary.
fn unavailable() -> Option<&'static str> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        if !is_root() {
            return Some("not root: loading BPF programs and pinning them needs root".into());
        }
        match Command::new("bpftool").arg("version").output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => return Some(format!("`bpftool version` failed: {}", stderr(&o))),
            Err(e) => return Some(format!("bpftool cannot be run: {e} (install it: `make deps`)")),
        }
        if !bpffs_mounted() {
            let mount = Command::new("mount").args(["-t", "bpf", "bpf", BPFFS]).output();
            match mount {
                Ok(o) if o.status.success() => {}
                Ok(o) => return Some(format!("mounting bpffs at {BPFFS} failed: {}", stderr(&o))),
                Err(e) => return Some(format!("mount cannot be run: {e}")),
            }
        }
        remove_stale_pins();
        None
    })
    .as_deref()
}

fn is_root() -> bool {
    // The effective uid is the second field of the `Uid:` line.
    std::fs::read_to_string("/proc/self/status").ok().is_some_and(|s| {
        s.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

fn bpffs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts").ok().is_some_and(|m| {
        m.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() > 2 && f[1] == BPFFS && f[2] == "bpf"
        })
    })
}

/// Removes pin directories of earlier test runs that were killed before they could clean
/// up (their pid is gone), so that their programs and maps do not stay in the kernel.
fn remove_stale_pins() {
    let Ok(entries) = std::fs::read_dir(BPFFS) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PIN_PREFIX)) else {
            continue;
        };
        let pid = rest.split('-').next().unwrap_or("");
        if !pid.is_empty() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).trim().to_string()
}

/// What one `BPF_PROG_TEST_RUN` returned.
#[derive(Debug)]
pub struct Run {
    pub verdict: u32,
    /// The frame as the program left it, from `data_meta` (metadata first) to `data_end`.
    pub out: Vec<u8>,
}

/// One map entry as `bpftool map dump` lists it: one value, or one per possible CPU.
#[derive(Debug)]
pub struct Entry {
    pub key: Vec<u8>,
    pub values: Vec<Vec<u8>>,
}

/// A bundled program loaded into the kernel and pinned, with its maps, under a directory
/// of bpffs that is removed (unpinning, hence unloading, everything) on drop, also when
/// the test panics.
#[derive(Debug)]
pub struct Loaded {
    name: &'static str,
    pins: PathBuf,
    files: PathBuf,
}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.pins) {
            if e.kind() != std::io::ErrorKind::NotFound {
                eprintln!("WARNING: could not remove {}: {e}", self.pins.display());
            }
        }
        let _ = std::fs::remove_dir_all(&self.files);
    }
}

impl Loaded {
    /// Loads the bundled program `name` (panicking, with bpftool's verifier log, if the
    /// kernel refuses it), or returns `None` after a loud SKIP if the kernel tests cannot
    /// run on this machine.
    pub fn load(name: &'static str) -> Option<Loaded> {
        if let Some(why) = unavailable() {
            eprintln!("SKIP: kernel test of '{name}' not run: {why}");
            return None;
        }
        static SEQ: AtomicUsize = AtomicUsize::new(0);
        let unique =
            format!("{}-{name}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        // The guard exists before anything is pinned, so a failed load cleans up too.
        let loaded = Loaded {
            name,
            pins: Path::new(BPFFS).join(format!("{PIN_PREFIX}{unique}")),
            files: std::env::temp_dir().join(format!("{PIN_PREFIX}{unique}")),
        };
        std::fs::create_dir_all(&loaded.files).expect("creating the temporary directory");
        let bundled = spine_progs::get(name).unwrap_or_else(|| panic!("no bundled program {name}"));
        let object = loaded.files.join(format!("{name}.o"));
        std::fs::write(&object, bundled.object).expect("writing the object");

        let out = Command::new("bpftool")
            .args(["prog", "loadall"])
            .arg(&object)
            .arg(&loaded.pins)
            .args(["type", "xdp", "pinmaps"])
            .arg(loaded.pins.join("maps"))
            .output()
            .expect("running bpftool");
        assert!(out.status.success(), "the kernel refused '{name}':\n{}", stderr(&out));
        Some(loaded)
    }

    /// Runs `packet` through the program once.
    pub fn run(&self, packet: &[u8]) -> Run {
        let data_in = self.files.join("in");
        let data_out = self.files.join("out");
        std::fs::write(&data_in, packet).expect("writing the packet");
        let _ = std::fs::remove_file(&data_out);
        let out = Command::new("bpftool")
            .args(["-j", "prog", "run", "pinned"])
            .arg(self.pins.join(self.name))
            .arg("data_in")
            .arg(&data_in)
            .arg("data_out")
            .arg(&data_out)
            .args(["data_size_out", "8192", "repeat", "1"])
            .output()
            .expect("running bpftool");
        assert!(out.status.success(), "'{}': prog run failed: {}", self.name, stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).expect("bpftool prints JSON");
        let verdict = json["retval"].as_u64().expect("retval in bpftool's output");
        Run {
            verdict: u32::try_from(verdict).expect("a 32-bit verdict"),
            out: std::fs::read(&data_out).expect("reading data_out"),
        }
    }

    /// Every entry of the program's map `map` (its name as libbpf pins it).
    pub fn map(&self, map: &str) -> Vec<Entry> {
        let out = Command::new("bpftool")
            .args(["-j", "map", "dump", "pinned"])
            .arg(self.pins.join("maps").join(map))
            .output()
            .expect("running bpftool");
        assert!(out.status.success(), "'{}': dumping {map} failed: {}", self.name, stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).expect("bpftool prints JSON");
        let entries = json.as_array().expect("a map dump is a JSON array");
        entries
            .iter()
            .map(|e| Entry {
                key: hex_bytes(&e["key"]),
                values: match e.get("values") {
                    Some(per_cpu) => per_cpu
                        .as_array()
                        .expect("per-CPU values are an array")
                        .iter()
                        .map(|v| hex_bytes(&v["value"]))
                        .collect(),
                    None => vec![hex_bytes(&e["value"])],
                },
            })
            .collect()
    }

    /// The names of the program's pinned maps.
    pub fn map_names(&self) -> Vec<String> {
        let dir = std::fs::read_dir(self.pins.join("maps")).expect("listing the pinned maps");
        dir.map(|e| e.expect("a directory entry").file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The `u64` counters of an array map of `u64` values, by index (per-CPU slots summed).
    pub fn counters(&self, map: &str) -> Vec<u64> {
        let mut entries = self.map(map);
        entries.sort_by_key(|e| le_u32(&e.key, 0));
        entries.iter().map(|e| e.values.iter().map(|v| le_u64(v, 0)).sum()).collect()
    }
}

/// `["0x01", "0xff"]` as bpftool prints bytes.
fn hex_bytes(v: &Value) -> Vec<u8> {
    v.as_array()
        .expect("bytes are a JSON array")
        .iter()
        .map(|b| {
            let s = b.as_str().expect("a byte is a string");
            u8::from_str_radix(s.trim_start_matches("0x"), 16).expect("a byte in hex")
        })
        .collect()
}

pub fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

pub fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

impl Loaded {
    /// Sets `key` to `value` in the program's map `map`, as a control plane would.
    pub fn update(&self, map: &str, key: &[u8], value: &[u8]) {
        let bytes = |b: &[u8]| b.iter().map(u8::to_string).collect::<Vec<_>>();
        let out = Command::new("bpftool")
            .args(["map", "update", "pinned"])
            .arg(self.pins.join("maps").join(map))
            .arg("key")
            .args(bytes(key))
            .arg("value")
            .args(bytes(value))
            .output()
            .expect("running bpftool");
        assert!(out.status.success(), "'{}': updating {map} failed: {}", self.name, stderr(&out));
    }

    /// The variables of a global-data section (`.data`, `.bss`, `.rodata`) by name, as
    /// bpftool formats them from the object's BTF.
    pub fn globals(&self, section: &str) -> serde_json::Map<String, Value> {
        // libbpf pins `.data` of `global_data.o` as `global_d_data`.
        let suffix = section.replace('.', "_");
        let name = self
            .map_names()
            .into_iter()
            .find(|m| m.ends_with(&suffix))
            .unwrap_or_else(|| panic!("'{}' has no {section} map", self.name));
        let out = Command::new("bpftool")
            .args(["-j", "map", "dump", "pinned"])
            .arg(self.pins.join("maps").join(&name))
            .output()
            .expect("running bpftool");
        assert!(out.status.success(), "'{}': dumping {name} failed: {}", self.name, stderr(&out));
        let json: Value = serde_json::from_slice(&out.stdout).expect("bpftool prints JSON");
        // `[{"formatted": {"value": {".data": [{"var": value}, ...]}}}]`
        let vars = json[0]["formatted"]["value"][section].as_array().cloned().unwrap_or_default();
        vars.into_iter().filter_map(|v| v.as_object().cloned()).flatten().collect()
    }
}
