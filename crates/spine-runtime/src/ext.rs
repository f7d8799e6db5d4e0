//! Turning a parsed object into a runnable extension: one map per map the object
//! declares, map references resolved, context loads rewritten, the engine prepared.

use std::sync::Arc;

use spine_isa::{op, Insn};
use spine_maps::{Map, MapDef, MapError, MapOptions};
use spine_obj::{MapOrigin, Object, ProgType};
use spine_vm::Interpreter;

use crate::ctx::{self, CtxError};

/// Register value a program holds for a map (`lddw rX, map`): opaque to the program (it
/// is no address any region covers) and decoded only by helpers.
pub const MAP_HANDLE_BASE: u64 = 0xffff_5350_0000_0000;
/// Most maps one extension may reference.
pub const MAX_MAPS: usize = 4096;

/// Decodes a map handle into a map index, if it is one.
pub fn map_index(handle: u64) -> Option<usize> {
    let idx = handle.wrapping_sub(MAP_HANDLE_BASE);
    (idx < MAX_MAPS as u64).then_some(idx as usize)
}

/// How to instantiate an extension.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Workers that will run the extension: the number of slots of per-CPU maps.
    pub ncpus: usize,
    /// Seed mixed into hash maps' hash function.
    pub map_seed: u64,
    /// Most bytes of storage one map may take.
    pub max_map_bytes: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions { ncpus: 1, map_seed: 0, max_map_bytes: MapOptions::default().max_bytes }
    }
}

/// Why an extension could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("no program {wanted} in the object (it has: {})", available.join(", "))]
    NoProgram { wanted: String, available: Vec<String> },
    #[error("program '{program}' is a {prog_type:?} program; this hook runs XDP programs")]
    WrongType { program: String, prog_type: ProgType },
    #[error("map '{map}': {source}")]
    Map {
        map: String,
        #[source]
        source: MapError,
    },
    #[error("object declares {0} maps, more than the limit of {MAX_MAPS}")]
    TooManyMaps(usize),
    #[error("instruction {pc}: map reference {index} but the object has {count} maps")]
    NoSuchMap { pc: usize, index: u32, count: usize },
    #[error("instruction {pc}: value reference into map '{map}' needs an array map of one element with the offset {offset} inside its {value_size}-byte value")]
    BadValueRef { pc: usize, map: String, offset: i64, value_size: u32 },
    #[error("instruction {pc}: {what} is not supported yet")]
    Unsupported { pc: usize, what: &'static str },
    #[error(transparent)]
    Ctx(#[from] CtxError),
    #[error(transparent)]
    Engine(#[from] spine_vm::LoadError),
}

/// A loaded extension: immutable after load, shared by every worker that runs it.
#[derive(Debug)]
pub struct Extension {
    name: String,
    section: String,
    license: String,
    maps: Vec<Arc<Map>>,
    insns: Vec<Insn>,
    interp: Interpreter,
}

impl Extension {
    /// Loads the XDP program of `obj` in `section` (a section or function name; the first
    /// program when `None`), creating its maps.
    pub fn load_xdp(
        obj: &Object,
        section: Option<&str>,
        opts: &LoadOptions,
    ) -> Result<Extension, LoadError> {
        let prog = obj.program(section).ok_or_else(|| LoadError::NoProgram {
            wanted: section.map_or_else(|| "at all".to_string(), |s| format!("'{s}'")),
            available: obj.programs.iter().map(|p| format!("{} ({})", p.section, p.name)).collect(),
        })?;
        if !matches!(prog.prog_type, ProgType::Xdp | ProgType::XdpFrags) {
            return Err(LoadError::WrongType {
                program: prog.name.clone(),
                prog_type: prog.prog_type,
            });
        }
        let maps = create_maps(obj, opts)?;
        let mut insns = prog.insns.clone();
        link(&mut insns, &maps)?;
        let functions: Vec<usize> = prog.functions.iter().map(|(pc, _)| *pc).collect();
        ctx::rewrite(&mut insns, &functions)?;
        let interp = Interpreter::new(insns.clone())?;
        Ok(Extension {
            name: prog.name.clone(),
            section: prog.section.clone(),
            license: obj.license.clone(),
            maps,
            insns,
            interp,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn section(&self) -> &str {
        &self.section
    }
    pub fn license(&self) -> &str {
        &self.license
    }
    /// The maps, in the object's order.
    pub fn maps(&self) -> &[Arc<Map>] {
        &self.maps
    }
    /// The map called `name`.
    pub fn map(&self, name: &str) -> Option<&Arc<Map>> {
        self.maps.iter().find(|m| &*m.def().name == name)
    }
    /// The final instructions: maps linked, context loads rewritten.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }
    pub(crate) fn interp(&self) -> &Interpreter {
        &self.interp
    }
}

fn create_maps(obj: &Object, opts: &LoadOptions) -> Result<Vec<Arc<Map>>, LoadError> {
    if obj.maps.len() > MAX_MAPS {
        return Err(LoadError::TooManyMaps(obj.maps.len()));
    }
    let mopts =
        MapOptions { ncpus: opts.ncpus, seed: opts.map_seed, max_bytes: opts.max_map_bytes };
    obj.maps
        .iter()
        .map(|spec| {
            let wrap = |source| LoadError::Map { map: spec.name.clone(), source };
            let def = MapDef {
                name: Arc::from(spec.name.as_str()),
                map_type: spec.map_type,
                key_size: spec.key_size,
                value_size: spec.value_size,
                max_entries: spec.max_entries,
                flags: spec.flags,
            };
            let map = Map::create(def, &mopts).map_err(wrap)?;
            if let Some(init) = &spec.initial {
                map.write_initial(init).map_err(wrap)?;
            }
            // As libbpf does: read-only global data is frozen once initialised.
            if matches!(spec.origin, MapOrigin::GlobalData { read_only: true, .. }) {
                map.freeze();
            }
            Ok(Arc::new(map))
        })
        .collect()
}

/// Resolves the loader's map references: a map handle for `PSEUDO_MAP_FD`, the value's
/// address for `PSEUDO_MAP_VALUE`.
fn link(insns: &mut [Insn], maps: &[Arc<Map>]) -> Result<(), LoadError> {
    let mut pc = 0;
    while pc < insns.len() {
        let i = insns[pc];
        if !i.is_lddw() {
            pc += 1;
            continue;
        }
        let Some(second) = insns.get(pc + 1).copied() else {
            return Ok(()); // structural validation reports the truncated lddw
        };
        let get = |index: i32| {
            maps.get(index as u32 as usize).ok_or(LoadError::NoSuchMap {
                pc,
                index: index as u32,
                count: maps.len(),
            })
        };
        let value = match i.src {
            op::PSEUDO_NONE => None,
            op::PSEUDO_MAP_FD => {
                get(i.imm)?;
                Some(MAP_HANDLE_BASE + u64::from(i.imm as u32))
            }
            op::PSEUDO_MAP_VALUE => {
                let map = get(i.imm)?;
                let def = map.def();
                let offset = i64::from(second.imm);
                let bad = || LoadError::BadValueRef {
                    pc,
                    map: def.name.to_string(),
                    offset,
                    value_size: def.value_size,
                };
                if map.array_layout().is_none()
                    || def.max_entries != 1
                    || offset < 0
                    || offset >= i64::from(def.value_size)
                {
                    return Err(bad());
                }
                let base = map.lookup(&0u32.to_le_bytes(), 0).ok_or_else(bad)?;
                Some(base.as_ptr() as u64 + offset as u64)
            }
            op::PSEUDO_FUNC => {
                return Err(LoadError::Unsupported { pc, what: "a function address (callback)" })
            }
            _ => return Err(LoadError::Unsupported { pc, what: "this lddw pseudo source" }),
        };
        if let Some(v) = value {
            let [a, b] = Insn::lddw(i.dst, op::PSEUDO_NONE, v);
            insns[pc] = a;
            insns[pc + 1] = b;
        }
        pc += 2;
    }
    Ok(())
}
