//! Loading one program of a parsed object into the kernel, as libbpf does: load the
//! object's BTF, create every map of the object (BTF-defined ones with their key and
//! value types), write global data and freeze `.rodata`, fill map-in-map slots, point
//! each map reference of the program at the kernel map's fd, and load.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use spine_abi::{map_flags, map_type, update_flags};
use spine_isa::op;
use spine_obj::{MapOrigin, MapSpec, Object, Program, SlotTarget};

use crate::prog::{ProgLoad, ATTACH_XDP, PROG_F_XDP_HAS_FRAGS};
use crate::{KernelMap, KernelProg, MapBtf, MapDef, SysError};

/// An object's program loaded into the kernel, with the maps it was linked against.
#[derive(Debug)]
pub struct KernelObject {
    /// One kernel map per `Object::maps`, same indices.
    pub maps: Vec<KernelMap>,
    pub prog: KernelProg,
    /// The programs the object's program arrays name in their initial slots (tail-call
    /// targets), loaded against the same maps and put in their slots.
    pub targets: Vec<KernelProg>,
}

/// Why an object's program could not be loaded into the kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("map '{map}': {error}")]
    Map { map: String, error: SysError },
    #[error("map '{map}': a map-in-map needs an inner map template")]
    NoInnerTemplate { map: String },
    #[error("map '{map}': initial data of {len} bytes is longer than value_size {value_size}")]
    InitialTooLong { map: String, len: usize, value_size: u32 },
    #[error(
        "map '{map}': slot {slot} refers to map index {index}, but the object has {count} maps"
    )]
    BadSlot { map: String, slot: u32, index: usize, count: usize },
    #[error(
        "program '{program}': instruction {insn} refers to map index {index}, \
         but the object has {count} maps"
    )]
    BadMapRef { program: String, insn: usize, index: i32, count: usize },
    #[error("program '{program}': lddw at instruction {insn} has no second slot")]
    TruncatedLddw { program: String, insn: usize },
    #[error("program '{program}' (section '{section}') has no kernel program type")]
    NoKernelType { program: String, section: String },
    #[error("program '{program}': {error}")]
    Prog { program: String, error: SysError },
    #[error("map '{map}': slot {slot} names program '{program}', which the object does not have")]
    NoSlotProgram { map: String, slot: u32, program: String },
    #[error("map '{map}' holds a bpf_spin_lock or bpf_timer, which the kernel finds only through BTF, and the object's BTF did not load: {error}")]
    Btf { map: String, error: SysError },
    #[error("map '{map}' holds a bpf_spin_lock or bpf_timer, but the object has no BTF the kernel could load")]
    NoBtf { map: String },
    #[error("program '{program}': instruction {insn} calls kfunc {kfunc}, which the running kernel's BTF does not have")]
    NoKernelKfunc { program: String, insn: usize, kfunc: &'static str },
}

/// Loads `prog` of `obj` into the kernel with kernel maps for all of `obj.maps`.
///
/// The object's BTF ([`Object::btf`], fixed up as libbpf fixes it) is loaded, and each
/// BTF-defined map is created with its key and value types, so the kernel finds a
/// `bpf_spin_lock` in a value itself; as libbpf does, a map the kernel refuses with
/// BTF is created again without it, unless it needs BTF (a lock). Global-data maps get
/// their initial bytes at key 0 and are frozen when read-only, after being created with
/// `BPF_F_RDONLY_PROG` (libbpf's flags for `.rodata`), so the verifier may treat their
/// contents as constants exactly as it does for libbpf. Program-array slots are filled
/// with the programs they name (loaded too); pinning is not supported.
pub fn load_object_program(obj: &Object, prog: &Program) -> Result<KernelObject, LoadError> {
    let btf = load_btf(obj)?;
    let maps = obj
        .maps
        .iter()
        .map(|spec| create_map(spec, btf.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    for (spec, map) in obj.maps.iter().zip(&maps) {
        fill_slots(spec, map, &maps)?;
    }

    let kprog = load_linked(obj, prog, &maps)?;
    let mut targets = Vec::new();
    for spec in obj.maps.iter().filter(|m| m.map_type == map_type::PROG_ARRAY) {
        let map = &maps[obj.maps.iter().position(|m| std::ptr::eq(m, spec)).expect("listed")];
        for (slot, target) in &spec.init_slots {
            let SlotTarget::Program(name) = target else { continue };
            let fd = if *name == prog.name {
                kprog.fd().as_raw_fd()
            } else {
                let p = obj.programs.iter().find(|p| p.name == *name).ok_or_else(|| {
                    LoadError::NoSlotProgram {
                        map: spec.name.clone(),
                        slot: *slot,
                        program: name.clone(),
                    }
                })?;
                targets.push(load_linked(obj, p, &maps)?);
                targets.last().expect("pushed").fd().as_raw_fd()
            };
            map.update(&slot.to_ne_bytes(), &(fd as u32).to_ne_bytes(), update_flags::ANY)
                .map_err(map_err(spec))?;
        }
    }
    Ok(KernelObject { maps, prog: kprog, targets })
}

/// Loads `prog` with its map references pointing at `maps`.
fn load_linked(obj: &Object, prog: &Program, maps: &[KernelMap]) -> Result<KernelProg, LoadError> {
    let prog_type = prog.prog_type.kernel_type().ok_or_else(|| LoadError::NoKernelType {
        program: prog.name.clone(),
        section: prog.section.clone(),
    })?;
    let insns = link_maps(prog, maps)?;
    let (prog_flags, expected_attach_type) = match prog.prog_type {
        spine_obj::ProgType::Xdp => (0, ATTACH_XDP),
        spine_obj::ProgType::XdpFrags => (PROG_F_XDP_HAS_FRAGS, ATTACH_XDP),
        spine_obj::ProgType::SchedCls | spine_obj::ProgType::Spine => (0, 0),
    };
    ProgLoad {
        prog_type,
        insns: &insns,
        license: &obj.license,
        name: &prog.name,
        prog_flags,
        expected_attach_type,
        log_level: 0,
    }
    .load()
    .map_err(|error| LoadError::Prog { program: prog.name.clone(), error })
}

fn map_err(spec: &MapSpec) -> impl Fn(SysError) -> LoadError + '_ {
    move |error| LoadError::Map { map: spec.name.clone(), error }
}

/// Every map spec of the object, inner templates included.
fn all_specs(obj: &Object) -> impl Iterator<Item = &MapSpec> {
    obj.maps.iter().flat_map(|m| std::iter::once(m).chain(m.inner.as_deref()))
}

/// `BPF_BTF_LOAD` of the object's BTF. A failure matters only if a map needs BTF (its
/// value holds a `bpf_spin_lock` or a `bpf_timer`); otherwise the maps are created
/// without it.
fn load_btf(obj: &Object) -> Result<Option<OwnedFd>, LoadError> {
    let needs = all_specs(obj).find(|m| m.spin_lock.is_some() || m.timer.is_some());
    let Some(blob) = &obj.btf else {
        return match needs {
            Some(m) => Err(LoadError::NoBtf { map: m.name.clone() }),
            None => Ok(None),
        };
    };
    match crate::func_info::load_btf(blob) {
        Ok(fd) => Ok(Some(fd)),
        Err(error) => match needs {
            Some(m) => Err(LoadError::Btf { map: m.name.clone(), error }),
            None => Ok(None),
        },
    }
}

/// Creates one map (and, for a map-in-map, its temporary inner template) and writes its
/// global data.
fn create_map(spec: &MapSpec, btf: Option<&OwnedFd>) -> Result<KernelMap, LoadError> {
    let mut flags = spec.flags;
    if let MapOrigin::GlobalData { read_only: true, .. } = spec.origin {
        flags |= map_flags::RDONLY_PROG;
    }
    // As libbpf: a perf event array of no size gets a slot per possible CPU.
    let max_entries = match spec.max_entries {
        0 if spec.map_type == map_type::PERF_EVENT_ARRAY => crate::cpus::possible_cpus() as u32,
        n => n,
    };
    let def = MapDef {
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries,
        flags,
        numa_node: spec.numa_node,
        map_extra: spec.map_extra,
    };
    let is_map_in_map = matches!(spec.map_type, map_type::ARRAY_OF_MAPS | map_type::HASH_OF_MAPS);
    // libbpf creates the inner template, creates the outer map from it, then closes it.
    let inner = match (&spec.inner, is_map_in_map) {
        (Some(inner), true) => Some(create_map(inner, btf)?),
        (None, true) => return Err(LoadError::NoInnerTemplate { map: spec.name.clone() }),
        (_, false) => None,
    };
    let inner_fd = inner.as_ref().map(KernelMap::fd);
    let typed = btf.filter(|_| spec.btf_value_type_id != 0).map(|fd| MapBtf {
        fd: fd.as_fd(),
        key_type_id: spec.btf_key_type_id,
        value_type_id: spec.btf_value_type_id,
        spin_lock: spec.spin_lock.is_some(),
    });
    let map = match KernelMap::create_with_btf(&spec.name, def, inner_fd, typed) {
        Err(_) if typed.is_some() && spec.spin_lock.is_none() && spec.timer.is_none() => {
            KernelMap::create(&spec.name, def, inner_fd)
        }
        r => r,
    }
    .map_err(map_err(spec))?;
    drop(inner);

    if let MapOrigin::GlobalData { read_only, .. } = spec.origin {
        if let Some(initial) = &spec.initial {
            if initial.len() > spec.value_size as usize {
                return Err(LoadError::InitialTooLong {
                    map: spec.name.clone(),
                    len: initial.len(),
                    value_size: spec.value_size,
                });
            }
            let mut value = vec![0u8; spec.value_size as usize];
            value[..initial.len()].copy_from_slice(initial);
            map.update(&0u32.to_ne_bytes(), &value, update_flags::ANY).map_err(map_err(spec))?;
        }
        if read_only {
            map.freeze().map_err(map_err(spec))?;
        }
    }
    Ok(map)
}

/// Puts the fds of the maps a map-in-map's initial slots name into it.
fn fill_slots(spec: &MapSpec, map: &KernelMap, maps: &[KernelMap]) -> Result<(), LoadError> {
    for (slot, target) in &spec.init_slots {
        let index = match target {
            SlotTarget::Map(index) => *index,
            // Filled once the programs are loaded.
            SlotTarget::Program(_) => continue,
        };
        let inner = maps.get(index).ok_or_else(|| LoadError::BadSlot {
            map: spec.name.clone(),
            slot: *slot,
            index,
            count: maps.len(),
        })?;
        let fd = inner.fd().as_raw_fd() as u32;
        map.update(&slot.to_ne_bytes(), &fd.to_ne_bytes(), update_flags::ANY)
            .map_err(map_err(spec))?;
    }
    Ok(())
}

/// A copy of the program's code with each map reference's `imm` (a map index) replaced by
/// the kernel map's fd; `src` and a map-value offset in the second slot stay as they are.
fn link_maps(prog: &Program, maps: &[KernelMap]) -> Result<Vec<spine_isa::Insn>, LoadError> {
    let mut insns = prog.insns.clone();
    let mut pc = 0;
    while pc < insns.len() {
        let insn = insns[pc];
        // A kfunc spine numbers in its own range goes back to what libbpf loads: a
        // `BPF_PSEUDO_KFUNC_CALL` of the kfunc's id in the running kernel's BTF.
        if let Some(kfunc) =
            insn.is_helper_call().then(|| spine_abi::kfunc::name(insn.imm as u32)).flatten()
        {
            let id = crate::btf::kernel_func_id(kfunc).ok_or_else(|| LoadError::NoKernelKfunc {
                program: prog.name.clone(),
                insn: pc,
                kfunc,
            })?;
            insns[pc].src = op::PSEUDO_KFUNC_CALL;
            insns[pc].imm = id as i32;
        }
        if !insn.is_lddw() {
            pc += 1;
            continue;
        }
        if pc + 1 >= insns.len() {
            return Err(LoadError::TruncatedLddw { program: prog.name.clone(), insn: pc });
        }
        if matches!(insn.src, op::PSEUDO_MAP_FD | op::PSEUDO_MAP_VALUE) {
            let map =
                usize::try_from(insn.imm).ok().and_then(|i| maps.get(i)).ok_or_else(|| {
                    LoadError::BadMapRef {
                        program: prog.name.clone(),
                        insn: pc,
                        index: insn.imm,
                        count: maps.len(),
                    }
                })?;
            insns[pc].imm = map.fd().as_raw_fd();
        }
        pc += 2;
    }
    Ok(insns)
}
