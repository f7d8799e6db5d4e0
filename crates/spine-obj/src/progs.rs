//! Code sections and the functions in them. Every `FUNC` symbol marks a function;
//! global (or weak) functions outside `.text` are programs, whose type the section
//! name gives (libbpf's `SEC()` conventions). `.text` holds only subprograms.

use std::collections::HashMap;

use crate::elf::{Elf, Symbol, STT_FUNC};
use crate::{ObjError, ProgType, SkippedProgram};
use spine_isa::{Insn, INSN_SIZE};

impl ProgType {
    /// The program type of a code section called `section`, or `None` if the name
    /// follows none of the conventions spine supports.
    pub fn from_section(section: &str) -> Option<ProgType> {
        let with_suffix = |base: &str| {
            section == base
                || section.strip_prefix(base).is_some_and(|r| r.len() > 1 && r.starts_with('/'))
        };
        if with_suffix("xdp") {
            Some(ProgType::Xdp)
        } else if with_suffix("xdp.frags") {
            Some(ProgType::XdpFrags)
        } else if matches!(
            section,
            "tc" | "classifier" | "tcx/ingress" | "tcx/egress" | "tc/ingress" | "tc/egress"
        ) {
            Some(ProgType::SchedCls)
        } else if section.strip_prefix("spine/").is_some_and(|hook| !hook.is_empty()) {
            Some(ProgType::Spine)
        } else {
            None
        }
    }
}

/// The kind of program libbpf 1.x gives a section spine does not run (`kprobe/...`,
/// `iter/...`), by its name up to the first `/`; `None` when libbpf knows no such
/// section either (`xdp_sock`, which the kernel world loads only with a type given).
pub fn foreign_section_kind(section: &str) -> Option<&'static str> {
    let base = section.split('/').next().unwrap_or(section);
    let base = base.strip_suffix(".s").unwrap_or(base);
    Some(match base {
        "socket" => "socket filter",
        "kprobe" | "kretprobe" | "kprobe.multi" | "kretprobe.multi" | "kprobe.session"
        | "ksyscall" | "kretsyscall" => "kprobe",
        "uprobe" | "uretprobe" | "uprobe.multi" | "uretprobe.multi" | "usdt" => "uprobe",
        "tracepoint" | "tp" => "tracepoint",
        "raw_tracepoint" | "raw_tp" | "raw_tracepoint.w" | "raw_tp.w" => "raw tracepoint",
        "tp_btf" | "fentry" | "fexit" | "fmod_ret" | "freplace" => "tracing",
        "lsm" | "lsm_cgroup" => "LSM",
        "iter" => "iterator",
        "syscall" => "syscall",
        "perf_event" => "perf event",
        "action" => "tc action",
        "netkit" => "netkit",
        "cgroup_skb" | "cgroup" => "cgroup",
        "sockops" => "sock_ops",
        "sk_skb" => "sk_skb",
        "sk_msg" => "sk_msg",
        "sk_reuseport" => "sk_reuseport",
        "sk_lookup" => "sk_lookup",
        "lirc_mode2" => "lirc",
        "flow_dissector" => "flow dissector",
        "struct_ops" => "struct_ops",
        "netfilter" => "netfilter",
        "tcx" | "tc" => "tc",
        _ => return None,
    })
}

/// A function: a `FUNC` symbol's instructions.
#[derive(Debug, Clone)]
pub(crate) struct Function<'a> {
    pub name: &'a str,
    /// First instruction, counted from the start of the section.
    pub start: usize,
    pub len: usize,
    /// Global or weak binding.
    pub global: bool,
}

/// One non-empty code section.
#[derive(Debug)]
pub(crate) struct CodeSection<'a> {
    pub name: &'a str,
    pub insns: Vec<Insn>,
    /// Sorted by `start`, never overlapping.
    pub functions: Vec<Function<'a>>,
    /// `None` for `.text` and skipped sections.
    pub prog_type: Option<ProgType>,
    /// Why a code section other than `.text` has no program type.
    pub skip_reason: Option<String>,
}

impl CodeSection<'_> {
    /// The function whose instructions include `insn`.
    pub fn function_containing(&self, insn: i64) -> Option<usize> {
        let insn = usize::try_from(insn).ok()?;
        let k = self.functions.partition_point(|f| f.start <= insn);
        let f = self.functions.get(k.checked_sub(1)?)?;
        (insn < f.start + f.len).then_some(k - 1)
    }
}

/// All code of an object.
#[derive(Debug, Default)]
pub(crate) struct Code<'a> {
    /// In ELF section order.
    pub sections: Vec<CodeSection<'a>>,
    /// Position in `sections` by ELF section index.
    by_elf: Vec<Option<usize>>,
}

impl<'a> Code<'a> {
    /// Finds the code sections and their functions.
    pub fn collect(elf: &Elf<'a>, types: &[(String, ProgType)]) -> Result<Self, ObjError> {
        if let Some((name, _)) = types.iter().find(|(name, _)| {
            !elf.sections.iter().any(|s| s.is_code() && s.size > 0 && s.name == name)
        }) {
            return Err(ObjError::NoSuchSection { section: name.clone() });
        }
        let mut by_elf = vec![None; elf.sections.len()];
        let mut funcs_by_section: HashMap<usize, Vec<&Symbol<'a>>> = HashMap::new();
        for sym in elf.symbols.iter().filter(|s| s.kind() == STT_FUNC) {
            funcs_by_section.entry(sym.shndx as usize).or_default().push(sym);
        }
        let mut sections = Vec::new();
        for sec in elf.sections.iter().filter(|s| s.is_code() && s.size > 0) {
            if elf.symtab.is_none() {
                return Err(ObjError::NoSymbolTable);
            }
            let insns = Insn::decode_all(sec.data).ok_or_else(|| ObjError::BadSection {
                section: sec.name.to_string(),
                reason: "code size is not a multiple of 8",
            })?;
            let given = types.iter().find(|(name, _)| name == sec.name).map(|(_, t)| *t);
            let prog_type = if sec.name == ".text" {
                None
            } else {
                given.or_else(|| ProgType::from_section(sec.name))
            };
            let skip_reason = match (sec.name, prog_type) {
                (".text", _) | (_, Some(_)) => None,
                (name, None) => Some(match foreign_section_kind(name) {
                    Some(kind) => format!(
                        "section '{name}' holds a program of type {kind}; spine runs XDP, tc and spine/ \
                         programs"
                    ),
                    None => format!(
                        "section '{name}' names no program type; give one (--type xdp) to \
                         load it"
                    ),
                }),
            };
            let mut functions = Vec::new();
            for sym in funcs_by_section.get(&sec.index).into_iter().flatten() {
                let bad = |reason| ObjError::BadSymbol { index: sym.index, reason };
                let step = INSN_SIZE as u64;
                if sym.value % step != 0 || sym.size % step != 0 {
                    return Err(bad("function is not on instruction boundaries"));
                }
                if sym.size == 0 {
                    return Err(bad("function has size 0"));
                }
                if sym.value.checked_add(sym.size).is_none_or(|end| end > sec.size) {
                    return Err(bad("function extends past its section"));
                }
                functions.push((
                    sym.index,
                    Function {
                        name: sym.name,
                        start: (sym.value / step) as usize,
                        len: (sym.size / step) as usize,
                        global: sym.is_global(),
                    },
                ));
            }
            functions.sort_by_key(|(_, f)| f.start);
            for pair in functions.windows(2) {
                if pair[0].1.start + pair[0].1.len > pair[1].1.start {
                    return Err(ObjError::BadSymbol {
                        index: pair[1].0,
                        reason: "function overlaps another",
                    });
                }
            }
            by_elf[sec.index] = Some(sections.len());
            sections.push(CodeSection {
                name: sec.name,
                insns,
                functions: functions.into_iter().map(|(_, f)| f).collect(),
                prog_type,
                skip_reason,
            });
        }
        Ok(Code { sections, by_elf })
    }

    /// Position in `sections` of the code section with ELF index `index`.
    pub fn position(&self, index: usize) -> Option<usize> {
        self.by_elf.get(index).copied().flatten()
    }

    /// Entry points as (section position, function index, type), in libbpf's
    /// program order: by section, then by offset.
    pub fn entries(&self) -> Vec<(usize, usize, ProgType)> {
        let mut out = Vec::new();
        for (p, s) in self.sections.iter().enumerate() {
            let Some(t) = s.prog_type else { continue };
            let globals = s.functions.iter().enumerate().filter(|(_, f)| f.global);
            out.extend(globals.map(|(i, _)| (p, i, t)));
        }
        out
    }

    /// The programs of sections without a program type, with the reason.
    pub fn skipped(&self) -> Vec<SkippedProgram> {
        let mut out = Vec::new();
        for s in &self.sections {
            let Some(reason) = &s.skip_reason else { continue };
            out.extend(s.functions.iter().filter(|f| f.global).map(|f| SkippedProgram {
                name: f.name.to_string(),
                section: s.name.to_string(),
                reason: reason.clone(),
            }));
        }
        out
    }

    /// Name of the entry-point program starting at byte `value` of ELF section `index`.
    pub fn entry_at(&self, index: usize, value: u64) -> Option<&'a str> {
        let s = &self.sections[self.position(index)?];
        s.prog_type?;
        if !value.is_multiple_of(INSN_SIZE as u64) {
            return None;
        }
        let start = usize::try_from(value / INSN_SIZE as u64).ok()?;
        let k = s.functions.binary_search_by_key(&start, |f| f.start).ok()?;
        let f = &s.functions[k];
        f.global.then_some(f.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn section_names_map_to_program_types() {
        use ProgType::*;
        for (name, t) in [
            ("xdp", Some(Xdp)),
            ("xdp/devmap", Some(Xdp)),
            ("xdp/anything", Some(Xdp)),
            ("xdp.frags", Some(XdpFrags)),
            ("xdp.frags/cpumap", Some(XdpFrags)),
            ("tc", Some(SchedCls)),
            ("classifier", Some(SchedCls)),
            ("tcx/ingress", Some(SchedCls)),
            ("tcx/egress", Some(SchedCls)),
            ("spine/msg", Some(Spine)),
            ("spine/", None),
            ("spine", None),
            ("xdp/", None),
            ("xdpfoo", None),
            ("xdp_prog", None),
            ("tcx/sideways", None),
            ("kprobe/sys_open", None),
            (".text.foo", None),
            ("", None),
        ] {
            assert_eq!(ProgType::from_section(name), t, "{name}");
        }
    }

    #[test]
    fn foreign_sections_are_named_as_libbpf_does() {
        for (name, kind) in [
            ("kprobe/sys_open", Some("kprobe")),
            ("iter/task", Some("iterator")),
            ("iter.s/task", Some("iterator")),
            ("tracepoint/syscalls/sys_enter_open", Some("tracepoint")),
            ("tp/sched/sched_switch", Some("tracepoint")),
            ("fentry/do_unlinkat", Some("tracing")),
            ("cgroup_skb/ingress", Some("cgroup")),
            ("tc/sideways", Some("tc")),
            ("xdp_sock", None),
            ("xdp_patch_ports", None),
            ("bogus", None),
        ] {
            assert_eq!(foreign_section_kind(name), kind, "{name}");
        }
    }
}
