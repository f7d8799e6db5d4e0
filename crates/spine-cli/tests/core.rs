//! `spine prog run` resolves CO-RE relocations against the running kernel's BTF, or the
//! BTF file `--btf` names; a file that is no BTF is refused by name.

use std::path::PathBuf;
use std::process::{Command, Output};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spine")).args(args).output().expect("run spine")
}

#[test]
fn co_re_programs_run_against_the_kernels_btf_or_a_given_one() {
    if !std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
        eprintln!("SKIP: the kernel has no BTF");
        return;
    }
    let dir = Dir(std::env::temp_dir().join(format!("spine-core-cli-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spine-difftest/tests/fixtures/core.c");
    let obj = dir.0.join("core.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let mut pkt = vec![0u8; 66];
    pkt[12..14].copy_from_slice(&[0x08, 0x00]);
    pkt[14] = 0x45;
    let (pin, pout) = (dir.0.join("in.bin"), dir.0.join("out.bin"));
    std::fs::write(&pin, &pkt).unwrap();
    let (obj, pin, pout) = (obj.to_str().unwrap(), pin.to_str().unwrap(), pout.to_str().unwrap());

    for btf in [None, Some("/sys/kernel/btf/vmlinux")] {
        let mut args = vec!["prog", "run", obj, "--data-in", pin, "--data-out", pout];
        args.extend(btf.iter().flat_map(|b| ["--btf", *b]));
        let r = spine(&args);
        assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
        let out = std::fs::read(pout).unwrap();
        let w = |i: usize| u32::from_le_bytes(out[34 + 4 * i..38 + 4 * i].try_into().unwrap());
        let got: Vec<u32> = (0..8).map(w).collect();
        assert_eq!(got, vec![16, 2, 20, 0, 0, 4, 5, 0x0008], "--btf {btf:?}");
    }

    let r = spine(&["prog", "run", obj, "--data-in", pin, "--btf", pin]);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(err.contains("CO-RE") && err.contains("target BTF"), "{err}");
}
