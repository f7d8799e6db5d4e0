//! Program assembly: the entry function, then every function it reaches by calls or
//! by taking its address, each appended once, in the depth-first order libbpf's
//! `bpf_object__reloc_code` appends them. Calls and function addresses are rewritten
//! relative to the new layout (target = pc + imm + 1); map references become the
//! pseudo `lddw` forms the kernel takes, with map indices where libbpf puts fds.

use std::collections::HashMap;

use crate::progs::Code;
use crate::reloc::{Relocs, Target};
use crate::{LinkErrorKind, ObjError, ProgType, Program};
use spine_isa::{op, Insn};

/// Most instructions in one program: the kernel's limit for privileged loaders
/// (`BPF_COMPLEXITY_LIMIT_INSNS`).
pub const MAX_INSNS: usize = 1_000_000;
/// Most instructions in all programs of an object together. Programs share their
/// subprograms by copy, so without this bound many small programs calling one large
/// function would multiply the file size.
pub const MAX_TOTAL_INSNS: usize = 4 * MAX_INSNS;

/// A function being rewritten: where it sits in the program and where in its section.
#[derive(Debug)]
struct Frame {
    section: usize,
    function: usize,
    /// Slot of its first instruction in the program.
    base: usize,
    /// Next instruction to look at, relative to the function start.
    next: usize,
}

struct Linker<'c, 'a> {
    code: &'c Code<'a>,
    relocs: &'c Relocs,
    program: &'a str,
    budget: usize,
    insns: Vec<Insn>,
    functions: Vec<(usize, String)>,
    placed: HashMap<(usize, usize), usize>,
    stack: Vec<Frame>,
}

/// Assembles the program whose entry is function `entry.1` of code section `entry.0`,
/// in at most `budget` instructions (what the object's total allows; never more than
/// [`MAX_INSNS`]).
pub(crate) fn link(
    code: &Code<'_>,
    relocs: &Relocs,
    entry: (usize, usize),
    prog_type: ProgType,
    budget: usize,
) -> Result<Program, ObjError> {
    let sec = &code.sections[entry.0];
    let f = &sec.functions[entry.1];
    let mut l = Linker {
        code,
        relocs,
        program: f.name,
        budget: budget.min(MAX_INSNS),
        insns: Vec::new(),
        functions: Vec::new(),
        placed: HashMap::new(),
        stack: Vec::new(),
    };
    l.place(entry.0, entry.1, None)?;
    while let Some(frame) = l.stack.last_mut() {
        let (section, function, base, i) = (frame.section, frame.function, frame.base, frame.next);
        let func = &l.code.sections[section].functions[function];
        if i >= func.len {
            l.stack.pop();
            continue;
        }
        let insn = l.insns[base + i];
        frame.next += if insn.is_lddw() { 2 } else { 1 };
        l.rewrite(section, function, base, i)?;
    }
    Ok(Program {
        name: f.name.to_string(),
        section: sec.name.to_string(),
        prog_type,
        insns: l.insns,
        functions: l.functions,
    })
}

impl Linker<'_, '_> {
    fn error(&self, section: usize, function: usize, i: usize, kind: LinkErrorKind) -> ObjError {
        let sec = &self.code.sections[section];
        let f = &sec.functions[function];
        ObjError::Link {
            program: self.program.to_string(),
            section: sec.name.to_string(),
            function: f.name.to_string(),
            insn: f.start + i,
            kind,
        }
    }

    /// The slot of function `function` of `section` in this program, appending it (and
    /// scheduling its rewrite before the caller resumes) the first time. `from` names
    /// the referring instruction for errors.
    fn place(
        &mut self,
        section: usize,
        function: usize,
        from: Option<(usize, usize, usize)>,
    ) -> Result<usize, ObjError> {
        if let Some(&slot) = self.placed.get(&(section, function)) {
            return Ok(slot);
        }
        let sec = &self.code.sections[section];
        let f = &sec.functions[function];
        let base = self.insns.len();
        if base + f.len > self.budget {
            let (s, fi, i) = from.unwrap_or((section, function, 0));
            let kind = if self.budget < MAX_INSNS {
                LinkErrorKind::ObjectTooLarge(MAX_TOTAL_INSNS)
            } else {
                LinkErrorKind::TooLarge(MAX_INSNS)
            };
            return Err(self.error(s, fi, i, kind));
        }
        self.insns.extend_from_slice(&sec.insns[f.start..f.start + f.len]);
        self.functions.push((base, f.name.to_string()));
        self.placed.insert((section, function), base);
        self.stack.push(Frame { section, function, base, next: 0 });
        Ok(base)
    }

    /// The function starting at instruction `target` of `section`.
    fn callee(
        &self,
        at: (usize, usize, usize),
        section: usize,
        target: i64,
    ) -> Result<usize, ObjError> {
        let sec = &self.code.sections[section];
        let Some(k) = sec.function_containing(target) else {
            return Err(self.error(
                at.0,
                at.1,
                at.2,
                LinkErrorKind::TargetOutsideFunctions(target),
            ));
        };
        let f = &sec.functions[k];
        if f.start as i64 != target {
            let kind =
                LinkErrorKind::TargetNotFunctionStart { target, function: f.name.to_string() };
            return Err(self.error(at.0, at.1, at.2, kind));
        }
        Ok(k)
    }

    /// Rewrites instruction `i` of a placed function.
    fn rewrite(
        &mut self,
        section: usize,
        function: usize,
        base: usize,
        i: usize,
    ) -> Result<(), ObjError> {
        let at = (section, function, i);
        let f = &self.code.sections[section].functions[function];
        let (start, len) = (f.start, f.len);
        let pc = base + i;
        let insn = self.insns[pc];
        let reloc = self.relocs.get(section, start + i);
        if insn.is_lddw() {
            if i + 1 >= len {
                return Err(self.error(section, function, i, LinkErrorKind::TruncatedLddw));
            }
            let Some(target) = reloc else {
                if insn.src != op::PSEUDO_NONE {
                    return Err(self.error(
                        section,
                        function,
                        i,
                        LinkErrorKind::UnexpectedPseudo(insn.src),
                    ));
                }
                return Ok(());
            };
            if insn.src != op::PSEUDO_NONE {
                return Err(self.error(
                    section,
                    function,
                    i,
                    LinkErrorKind::UnexpectedPseudo(insn.src),
                ));
            }
            match target {
                Target::Map(map) => {
                    self.insns[pc].src = op::PSEUDO_MAP_FD;
                    self.insns[pc].imm = map as i32;
                }
                Target::MapValue { map, offset } => {
                    self.insns[pc].src = op::PSEUDO_MAP_VALUE;
                    self.insns[pc].imm = map as i32;
                    self.insns[pc + 1].imm = offset as i32;
                }
                Target::FuncAddr { section: ts, insn: t } => {
                    let k = self.callee(at, ts, t)?;
                    let slot = self.place(ts, k, Some(at))?;
                    self.insns[pc].src = op::PSEUDO_FUNC;
                    self.insns[pc].imm = relative(slot, pc);
                }
                // Relocation collection attaches calls only to call instructions.
                Target::Call { .. } | Target::Kfunc(_) => {
                    let kind = LinkErrorKind::UnexpectedPseudo(op::PSEUDO_CALL);
                    return Err(self.error(section, function, i, kind));
                }
            }
            return Ok(());
        }
        if insn.code == op::JMP | op::CALL {
            if let Some(Target::Kfunc(id)) = reloc {
                self.insns[pc].src = 0;
                self.insns[pc].imm = id as i32;
                return Ok(());
            }
            let target = match (insn.src, reloc) {
                (op::PSEUDO_CALL, Some(Target::Call { section: ts, insn: t })) => (ts, t),
                // No relocation: pc-relative within the section.
                (op::PSEUDO_CALL, None) => (section, (start + i) as i64 + i64::from(insn.imm) + 1),
                (0, None) => return Ok(()),
                (src, _) => {
                    return Err(self.error(
                        section,
                        function,
                        i,
                        LinkErrorKind::UnexpectedCallSource(src),
                    ))
                }
            };
            let k = self.callee(at, target.0, target.1)?;
            let slot = self.place(target.0, k, Some(at))?;
            self.insns[pc].imm = relative(slot, pc);
            return Ok(());
        }
        if let Some(t) = insn.branch_target(i) {
            if t < 0 || t >= len as i64 {
                let kind = LinkErrorKind::JumpOutsideFunction(start as i64 + t);
                return Err(self.error(section, function, i, kind));
            }
        }
        Ok(())
    }
}

/// `imm` of an instruction at `pc` that refers to slot `slot` (`slot = pc + imm + 1`).
fn relative(slot: usize, pc: usize) -> i32 {
    // Both are below MAX_INSNS, so the difference fits.
    (slot as i64 - pc as i64 - 1) as i32
}
