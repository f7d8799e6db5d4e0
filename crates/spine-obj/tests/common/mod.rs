//! Shared by the integration tests: compiling fixtures with the project's clang flags,
//! hand-built objects, and an independent check of linked programs against the ELF
//! file as the `object` crate reads it.
#![allow(dead_code, reason = "each test binary uses a different subset")]

pub mod btf_builder;
pub mod elf_builder;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use object::{Object as _, ObjectSection as _, ObjectSymbol as _, RelocationTarget};
use spine_isa::{op, Insn};
use spine_obj::{Object, Program};

/// Every fixture in `tests/fixtures`.
pub const FIXTURES: &[&str] =
    &["btf_maps", "callback", "calls", "global_data", "legacy_maps", "mixed", "own_section"];

/// This process's scratch directory, inside the build's own temporary directory
/// (`target/tmp`, which cargo gives integration tests) so that nothing is left in `/tmp`.
pub fn scratch() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("spine-obj-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Compiles `tests/fixtures/<name>.c` once per test binary; returns (object path, bytes).
pub fn fixture(name: &str) -> (PathBuf, Vec<u8>) {
    type Cache = Mutex<HashMap<String, (PathBuf, Vec<u8>)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().unwrap().get(name) {
        return hit.clone();
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let out = scratch().join(format!("{name}.o"));
    let bytes = spine_progs::compile_c(&src, &out, &[]).unwrap_or_else(|e| panic!("{e}"));
    cache.lock().unwrap().insert(name.to_string(), (out.clone(), bytes.clone()));
    (out, bytes)
}

/// Compiles C source text (written to the scratch directory as `<name>.c`).
pub fn compile_source(name: &str, src: &str) -> Vec<u8> {
    let dir = scratch();
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).expect("write source");
    spine_progs::compile_c(&c, &dir.join(format!("{name}.o")), &[])
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs an LLVM tool and returns its stdout.
pub fn llvm(tool: &str, args: &[&str], path: &Path) -> String {
    let out = std::process::Command::new(tool)
        .args(args)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("{tool} is needed for this test (make deps): {e}"));
    assert!(out.status.success(), "{tool} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A function symbol as the `object` crate sees it.
#[derive(Debug, Clone)]
struct Func {
    name: String,
    section: object::SectionIndex,
    addr: u64,
    size: u64,
}

/// Checks every instruction of `p` against the original ELF file:
/// - each function in `p.functions` is the bytes of the symbol of that name, in order,
///   with nothing between them;
/// - unrelocated instructions are unchanged;
/// - every call and function address points at the slot of the function the ELF file
///   says it targets;
/// - every map reference names the map (or global-data section and offset) the
///   relocation names.
pub fn check_against_elf(bytes: &[u8], obj: &Object, p: &Program) {
    let file = object::File::parse(bytes).expect("object crate parses the fixture");
    let funcs: Vec<Func> = file
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
        .filter_map(|s| {
            Some(Func {
                name: s.name().ok()?.to_string(),
                section: s.section_index()?,
                addr: s.address(),
                size: s.size(),
            })
        })
        .collect();
    let func_at = |sec: object::SectionIndex, addr: u64| {
        funcs.iter().find(|f| f.section == sec && f.addr == addr).map(|f| f.name.clone())
    };
    let slot_name =
        |slot: i64| p.functions.iter().find(|(s, _)| *s as i64 == slot).map(|(_, n)| n.clone());
    assert_eq!(p.functions.first().map(|f| (f.0, f.1.as_str())), Some((0, p.name.as_str())));
    let mut names: Vec<_> = p.functions.iter().map(|f| &f.1).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), p.functions.len(), "{}: a function appended twice", p.name);

    for (k, (slot, name)) in p.functions.iter().enumerate() {
        let end = p.functions.get(k + 1).map_or(p.insns.len(), |f| f.0);
        let f = funcs.iter().find(|f| &f.name == name).expect("function symbol");
        let sec = file.section_by_index(f.section).unwrap();
        if k == 0 {
            assert_eq!(sec.name().unwrap(), p.section);
        }
        let data = sec.data().unwrap();
        let orig = Insn::decode_all(&data[f.addr as usize..(f.addr + f.size) as usize]).unwrap();
        assert_eq!(end - slot, orig.len(), "{}: length of {name}", p.name);
        let relocs: HashMap<u64, (object::SymbolIndex, u32)> = sec
            .relocations()
            .map(|(off, r)| {
                let RelocationTarget::Symbol(s) = r.target() else { panic!("reloc target") };
                let object::RelocationFlags::Elf { r_type } = r.flags() else { panic!("flags") };
                (off, (s, r_type))
            })
            .collect();
        let mut i = 0;
        while i < orig.len() {
            let (o, l) = (orig[i], p.insns[slot + i]);
            let pc = (slot + i) as i64;
            let what = format!("{}: {name}+{i}", p.name);
            match relocs.get(&(f.addr + 8 * i as u64)) {
                None if o.is_local_call() => {
                    let addr = f.addr as i64 + 8 * (i as i64 + 1 + o.imm as i64);
                    let target = func_at(f.section, addr as u64);
                    assert_eq!(
                        (l.code, l.src, l.dst, l.off),
                        (o.code, o.src, o.dst, o.off),
                        "{what}"
                    );
                    assert_eq!(slot_name(pc + 1 + l.imm as i64), target, "{what}: call target");
                }
                None => {
                    assert_eq!(l, o, "{what}");
                    if o.is_lddw() {
                        assert_eq!(p.insns[slot + i + 1], orig[i + 1], "{what}");
                    }
                }
                Some(&(sym, r_type)) => {
                    let sym = file.symbol_by_index(sym).unwrap();
                    let sym_sec = file.section_by_index(sym.section_index().unwrap()).unwrap();
                    let sec_name = sym_sec.name().unwrap();
                    assert_eq!((l.code, l.dst, l.off), (o.code, o.dst, o.off), "{what}");
                    if o.is_lddw() {
                        assert_eq!(r_type, 1, "{what}");
                        let next = p.insns[slot + i + 1];
                        if sec_name == ".maps" || sec_name == "maps" {
                            assert_eq!(l.src, op::PSEUDO_MAP_FD, "{what}");
                            assert_eq!(
                                obj.maps[l.imm as usize].name,
                                sym.name().unwrap(),
                                "{what}"
                            );
                        } else if sym_sec.kind() == object::SectionKind::Text {
                            assert_eq!(l.src, op::PSEUDO_FUNC, "{what}");
                            let target = func_at(
                                sym_sec.index(),
                                (sym.address() as i64 + o.imm as i64) as u64,
                            );
                            assert_eq!(
                                slot_name(pc + 1 + l.imm as i64),
                                target,
                                "{what}: callback"
                            );
                        } else {
                            assert_eq!(l.src, op::PSEUDO_MAP_VALUE, "{what}");
                            assert_eq!(obj.maps[l.imm as usize].name, sec_name, "{what}");
                            let off = o.imm as i64 + sym.address() as i64;
                            assert_eq!(next.imm as i64, off, "{what}: value offset");
                        }
                    } else {
                        assert_eq!(r_type, 10, "{what}");
                        assert!(o.is_local_call() && l.is_local_call(), "{what}");
                        let addr = sym.address() as i64 + 8 * (o.imm as i64 + 1);
                        let target = func_at(sym_sec.index(), addr as u64);
                        assert!(target.is_some(), "{what}: target in the ELF file");
                        assert_eq!(slot_name(pc + 1 + l.imm as i64), target, "{what}: call target");
                    }
                }
            }
            i += if o.is_lddw() { 2 } else { 1 };
        }
    }
    assert_eq!(spine_isa::validate(&p.insns), Ok(()), "{}", p.name);
}

/// Rows of `llvm-readelf -S`: (index, name, type, size).
pub fn readelf_sections(path: &Path) -> Vec<(usize, String, String, u64)> {
    let text = llvm("llvm-readelf", &["-S", "-W"], path);
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix('[')?;
            let (idx, rest) = l.split_once(']')?;
            let cols: Vec<&str> = rest.split_whitespace().collect();
            let idx = idx.trim().parse().ok()?;
            // Name Type Address Off Size ...; index 0 has an empty name.
            let (name, ty, size) = if cols.first() == Some(&"NULL") {
                (String::new(), "NULL".to_string(), 0)
            } else {
                (cols[0].to_string(), cols[1].to_string(), u64::from_str_radix(cols[4], 16).ok()?)
            };
            Some((idx, name, ty, size))
        })
        .collect()
}

/// Rows of `llvm-readelf -s`: (name, type, bind, section index or UND/ABS, value).
pub fn readelf_symbols(path: &Path) -> Vec<(String, String, String, String, u64)> {
    let text = llvm("llvm-readelf", &["-s", "-W"], path);
    text.lines()
        .filter_map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            if cols.len() < 8 || !cols[0].ends_with(':') {
                return None;
            }
            let value = u64::from_str_radix(cols[1], 16).ok()?;
            Some((
                cols[7].to_string(),
                cols[3].to_string(),
                cols[4].to_string(),
                cols[6].to_string(),
                value,
            ))
        })
        .collect()
}
