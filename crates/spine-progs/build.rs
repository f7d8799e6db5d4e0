//! Compiles every `bpf/*.c` with clang into `OUT_DIR` and generates `bundled.rs`, the table
//! of bundled programs that the library `include!`s.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

include!("src/flags.rs");

fn main() {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let include = manifest.join("../../include");

    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    println!("cargo:rerun-if-changed={}", include.join("spine_helpers.h").display());
    println!("cargo:rerun-if-changed=src/flags.rs");
    println!("cargo:rerun-if-env-changed=CLANG");

    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    let flags = bpf_cflags(&include);
    let mut objects = String::new();
    let mut table = String::from("static ALL: &[Bundled] = &[\n");
    for (i, (name, src)) in sources(&bpf_dir).iter().enumerate() {
        println!("cargo:rerun-if-changed={}", src.display());
        let text = std::fs::read_to_string(src)
            .unwrap_or_else(|e| fail(&format!("reading {}: {e}", src.display())));
        let summary = summary(&text).unwrap_or_else(|| {
            fail(&format!(
                "{}: a bundled program must start with a comment whose first line says what \
                 it does",
                src.display()
            ))
        });
        let object = out_dir.join(format!("{name}.o"));
        let len = compile(&clang, &flags, src, &object);
        // Each object in its own aligned static: ELF readers take headers in place.
        writeln!(
            objects,
            "static OBJECT_{i}: Aligned<[u8; {len}]> = Aligned(*include_bytes!({:?}));",
            object.display().to_string()
        )
        .expect("writing to a String cannot fail");
        writeln!(
            table,
            "    Bundled {{ name: {name:?}, summary: {summary:?}, object: &OBJECT_{i}.0 }},"
        )
        .expect("writing to a String cannot fail");
    }
    table.push_str("];\n");
    table.push_str(&objects);
    let generated = out_dir.join("bundled.rs");
    std::fs::write(&generated, table)
        .unwrap_or_else(|e| fail(&format!("writing {}: {e}", generated.display())));
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| fail(&format!("cargo did not set {name}")))
}

/// Every `*.c` in `dir` with its program name (the file stem), sorted by name: the
/// library looks names up by binary search.
fn sources(dir: &Path) -> Vec<(String, PathBuf)> {
    let entries = std::fs::read_dir(dir)
        .unwrap_or_else(|e| fail(&format!("reading the program directory {}: {e}", dir.display())));
    let mut sources: Vec<(String, PathBuf)> = entries
        .map(|e| e.unwrap_or_else(|e| fail(&format!("reading {}: {e}", dir.display()))).path())
        .filter(|p| p.extension().is_some_and(|ext| ext == "c"))
        .map(|p| {
            let name = p
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or_else(|| fail(&format!("{}: the file name is not UTF-8", p.display())));
            (name.to_string(), p)
        })
        .collect();
    sources.sort();
    if sources.is_empty() {
        fail(&format!("no *.c programs in {}", dir.display()));
    }
    sources
}

/// The first non-empty line of the comment the file starts with, without comment markers.
fn summary(text: &str) -> Option<String> {
    let text = text.trim_start();
    let lines: Vec<&str> = if let Some(rest) = text.strip_prefix("/*") {
        let body = &rest[..rest.find("*/")?];
        body.lines().collect()
    } else {
        text.lines().map_while(|l| l.trim_start().strip_prefix("//")).collect()
    };
    lines
        .into_iter()
        .map(|l| l.trim().trim_start_matches('*').trim_start_matches('/').trim())
        .find(|l| !l.is_empty())
        .map(str::to_string)
}

/// Compiles `src` to `object` and returns the object's length.
fn compile(clang: &str, flags: &[String], src: &Path, object: &Path) -> usize {
    let output = Command::new(clang)
        .args(flags)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(object)
        .output()
        .unwrap_or_else(|e| {
            fail(&format!(
                "could not run `{clang}` ({e}). The bundled BPF programs are built with clang: \
                 install it with `make deps` (or point $CLANG at a clang binary)"
            ))
        });
    if !output.status.success() {
        fail(&format!(
            "clang failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let meta = std::fs::metadata(object)
        .unwrap_or_else(|e| fail(&format!("clang wrote no {}: {e}", object.display())));
    usize::try_from(meta.len()).unwrap_or_else(|_| fail("an object larger than memory"))
}

/// Stops the build with `message`; cargo shows a failed build script's stderr.
fn fail(message: &str) -> ! {
    eprintln!("error: spine-progs: {message}");
    std::process::exit(1)
}
