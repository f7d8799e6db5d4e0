//! `spine prog verify|run` on an object laid out as public projects ship them: a section
//! whose name says no type, a sibling the verifier refuses, a program of another type.
//! Each program is loaded alone, so one's refusal never blocks another.

use std::path::PathBuf;
use std::process::{Command, Output};

struct Files {
    dir: PathBuf,
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spine")).args(args).output().expect("run spine")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[test]
fn each_program_of_a_mixed_object_verifies_and_runs_alone() {
    let files =
        Files { dir: std::env::temp_dir().join(format!("spine-sec-{}", std::process::id())) };
    std::fs::create_dir_all(&files.dir).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../spine-adapter/tests/fixtures/sections.c");
    let obj = files.dir.join("sections.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let pkt = files.dir.join("pkt.bin");
    std::fs::write(&pkt, [0u8; 64]).unwrap();
    let (obj, pkt) = (obj.to_str().unwrap(), pkt.to_str().unwrap());

    // Every XDP program is reported; the refused one makes the exit status non-zero.
    let all = spine(&["prog", "verify", obj]);
    let out = text(&all);
    assert!(!all.status.success(), "{out}");
    assert!(out.contains("unchecked: REFUSED"), "{out}");
    assert!(out.contains("drop_all: verified"), "{out}");
    assert!(out.contains("patch_ports: skipped") && out.contains("--type xdp"), "{out}");

    let typed = spine(&["prog", "verify", obj, "--section", "xdp_patch_ports", "--type", "xdp"]);
    assert!(typed.status.success(), "{}", text(&typed));

    let run = |section: &str, extra: &[&str]| {
        let mut args = vec!["prog", "run", "--section", section, "--data-in", pkt, obj];
        args.extend_from_slice(extra);
        spine(&args)
    };
    let drop = run("drop_all", &[]);
    assert!(drop.status.success() && text(&drop).contains("XDP_DROP"), "{}", text(&drop));
    let tx = run("xdp_patch_ports", &["--type", "xdp"]);
    assert!(tx.status.success() && text(&tx).contains("XDP_TX"), "{}", text(&tx));

    for (section, says) in [
        ("unchecked", "refused by the verifier"),
        ("xdp_patch_ports", "--type xdp"),
        ("tc", "'classifier'"),
        ("nothing_here", "no program 'nothing_here'"),
    ] {
        let r = run(section, &[]);
        assert!(!r.status.success(), "{section} must be refused");
        assert!(text(&r).contains(says), "{section}: {}", text(&r));
    }
}

/// A map declared without a size is refused by name, with the way to size it; given a
/// size (`--max-entries NAME=N`, as the object's own loader would set it) the program
/// verifies and runs; a size for a map the object lacks names the maps it has.
#[test]
fn maps_declared_without_a_size_take_the_loaders_size() {
    let files =
        Files { dir: std::env::temp_dir().join(format!("spine-unsized-{}", std::process::id())) };
    std::fs::create_dir_all(&files.dir).unwrap();
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spine-adapter/tests/fixtures/unsized.c");
    let obj = files.dir.join("unsized.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let pkt = files.dir.join("pkt.bin");
    std::fs::write(&pkt, [0u8; 64]).unwrap();
    let (obj, pkt) = (obj.to_str().unwrap(), pkt.to_str().unwrap());

    let bare = spine(&["prog", "verify", obj]);
    let out = text(&bare);
    assert!(!bare.status.success(), "{out}");
    assert!(out.contains("'rx_cnt'") && out.contains("--max-entries"), "{out}");

    let sized = spine(&["prog", "verify", obj, "--max-entries", "rx_cnt=4"]);
    assert!(sized.status.success(), "{}", text(&sized));
    let ran = spine(&["prog", "run", obj, "--max-entries", "rx_cnt=4", "--data-in", pkt, "--json"]);
    let out = text(&ran);
    assert!(ran.status.success() && out.contains("\"retval\":2"), "XDP_PASS: {out}");
    // Too small: slot 3 is missing, the program aborts.
    let small =
        spine(&["prog", "run", obj, "--max-entries", "rx_cnt=2", "--data-in", pkt, "--json"]);
    assert!(text(&small).contains("\"retval\":0"), "XDP_ABORTED: {}", text(&small));

    let wrong = spine(&["prog", "verify", obj, "--max-entries", "tx_cnt=4"]);
    let out = text(&wrong);
    assert!(!wrong.status.success() && out.contains("tx_cnt") && out.contains("rx_cnt"), "{out}");
    let zero = spine(&["prog", "verify", obj, "--max-entries", "rx_cnt=0"]);
    assert!(!zero.status.success() && text(&zero).contains("at least 1"), "{}", text(&zero));
}
