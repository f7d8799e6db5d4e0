//! The bundled table and its objects, without a kernel: every `bpf/*.c` is there, in
//! order, as a BPF ELF object that a kernel would load without BTF.

use std::path::{Path, PathBuf};

use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSection, ObjectSymbol, SymbolKind};

fn bpf_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf")
}

#[test]
fn every_source_is_bundled_in_name_order() {
    let mut sources: Vec<String> = std::fs::read_dir(bpf_dir())
        .expect("the bpf directory")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .map(|p| p.file_stem().expect("a file name").to_string_lossy().into_owned())
        .collect();
    sources.sort();
    let names: Vec<&str> = spine_progs::all().iter().map(|b| b.name).collect();
    assert_eq!(names, sources);
    assert!(names.len() >= 11, "the corpus has shrunk: {names:?}");
}

#[test]
fn get_finds_each_program_by_name_and_nothing_else() {
    for b in spine_progs::all() {
        let found = spine_progs::get(b.name).expect("a bundled name");
        assert!(std::ptr::eq(found, b));
    }
    for missing in ["", "pars", "parserx", "Parser", "zzz", "aaa"] {
        assert!(spine_progs::get(missing).is_none(), "{missing:?}");
    }
}

#[test]
fn summaries_are_the_first_comment_line() {
    for b in spine_progs::all() {
        let src = std::fs::read_to_string(bpf_dir().join(format!("{}.c", b.name))).unwrap();
        let first = src.lines().next().unwrap_or("");
        assert!(first.starts_with("/* "), "{}: starts with a comment", b.name);
        assert_eq!(b.summary, first.trim_start_matches("/* ").trim_end_matches(" */"));
        assert!(!b.summary.is_empty() && !b.summary.contains("*/"), "{}", b.name);
    }
}

#[test]
fn objects_are_gpl_bpf_elf_with_one_global_program() {
    for b in spine_progs::all() {
        assert_eq!(b.object.as_ptr() as usize % 8, 0, "{}: 8-byte aligned", b.name);
        let elf = ElfFile64::<Endianness>::parse(b.object)
            .unwrap_or_else(|e| panic!("{}: not a 64-bit ELF: {e}", b.name));
        let header = elf.elf_header();
        assert_eq!(header.e_machine.get(elf.endian()), object::elf::EM_BPF, "{}", b.name);
        assert!(elf.is_little_endian(), "{}", b.name);

        let license = elf.section_by_name("license").expect("a license section");
        assert_eq!(license.data().unwrap(), b"GPL\0", "{}", b.name);
        let xdp = elf.section_by_name("xdp").expect("an xdp section");
        assert!(!xdp.data().unwrap().is_empty() && xdp.size() % 8 == 0, "{}", b.name);

        // The kernel needs BTF for a global subprogram; without it, only the entry point
        // (named after the file) may be global.
        let global_funcs: Vec<&str> = elf
            .symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.is_global())
            .map(|s| s.name().unwrap())
            .collect();
        assert_eq!(global_funcs, [b.name], "{}: global functions", b.name);
    }
}

#[test]
fn compile_c_builds_exactly_as_the_build_script_does() {
    let dir = std::env::temp_dir().join(format!("spine-progs-objects-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = bpf_dir().join("mac_swap.c");
    let result = spine_progs::compile_c(&src, &dir.join("mac_swap.o"), &[]);
    let broken = dir.join("broken.c");
    std::fs::write(&broken, "int f(void) { return undeclared; }\n").unwrap();
    let failure = spine_progs::compile_c(&broken, &dir.join("broken.o"), &[]);
    std::fs::remove_dir_all(&dir).ok();

    let object = result.expect("clang builds mac_swap.c");
    assert_eq!(object, spine_progs::get("mac_swap").unwrap().object);
    match failure {
        Err(spine_progs::CompileError::Failed { path, stderr }) => {
            assert_eq!(path, broken);
            assert!(stderr.contains("undeclared"), "{stderr}");
        }
        other => panic!("expected a clang failure, got {other:?}"),
    }
}

#[test]
fn cflags_target_bpf_v3_with_spine_headers() {
    let flags = spine_progs::cflags();
    let joined = flags.join(" ");
    assert!(joined.contains("-O2 -g -target bpf -mcpu=v3 -Wall -Werror"), "{joined}");
    let include = format!("-I{}", spine_progs::include_dir().display());
    assert!(flags.contains(&include), "{joined}");
    assert!(spine_progs::include_dir().join("spine_helpers.h").is_file());
}
