//! Turning a parsed object into runnable extensions: the object's maps created in its
//! protection domain, every program verified against the domain's helpers and the maps,
//! map references resolved, context loads rewritten from what the verifier proved, and
//! an engine prepared (the JIT by default, or the interpreter).

use std::sync::Arc;

use spine_abi::{helper, map_type};
use spine_isa::{op, Insn};
use spine_jit::{InlineArrayLookup, JitOptions, JitProgram, PerCpuLookup};
use spine_obj::{Object, ProgType, SlotTarget};
use spine_verifier::{
    CtxLayout, KernelHelpers, Limits, MapInfo, MemAccess, Verified, VerifyEnv, VerifyError,
};
use spine_vm::Interpreter;

use crate::ctx;
use crate::domain::{Domain, DomainError};
use crate::maps::{MapTable, ProgArrayError, RtMap, MAP_HANDLE_BASE};
use crate::watchdog::Health;

/// Which engine runs an extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineKind {
    /// Native code; accesses the verifier proved run unchecked.
    #[default]
    Jit,
    /// The reference interpreter; every access checked against the invocation's regions.
    Interpreter,
}

/// How to load an object.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Workers that will run the extensions: the number of slots of per-CPU maps.
    pub ncpus: usize,
    /// Seed mixed into hash maps' hash function.
    pub map_seed: u64,
    pub engine: EngineKind,
    /// The domain the extensions load into.
    pub domain: Arc<Domain>,
    /// Verifier log detail kept on the extension (0 none, 1 errors, 2 every instruction).
    pub log_level: u8,
    /// Compile the watchdog's progress-point countdown into JIT code. Off only to measure
    /// what the watchdog costs: without it a runaway JIT program is never stopped. The
    /// interpreter always counts.
    pub watchdog: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            ncpus: 1,
            map_seed: 0,
            engine: EngineKind::default(),
            domain: Domain::default_domain(),
            log_level: 0,
            watchdog: true,
        }
    }
}

/// Why an object or one of its programs could not be loaded.
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
        source: spine_maps::MapError,
    },
    #[error("object declares {0} maps, more than the limit of {max}", max = crate::maps::MAX_MAPS)]
    TooManyMaps(usize),
    #[error("program '{program}' refused by the verifier: {error}")]
    Verify { program: String, error: Box<VerifyError> },
    #[error("program '{program}', instruction {pc}: value reference into map '{map}' needs an array map of one element with the offset {offset} inside its value")]
    BadValueRef { program: String, pc: usize, map: String, offset: i64 },
    #[error("program '{program}', instruction {pc}: {what} is not supported yet")]
    Unsupported { program: String, pc: usize, what: &'static str },
    #[error(transparent)]
    Domain(#[from] DomainError),
    #[error("program '{program}': {source}")]
    Interp {
        program: String,
        #[source]
        source: spine_vm::LoadError,
    },
    #[error("program '{program}': the JIT failed: {source}")]
    Jit {
        program: String,
        #[source]
        source: spine_jit::JitError,
    },
    #[error("initial slots of program array: {0}")]
    ProgArray(#[from] ProgArrayError),
    #[error("map '{map}' slot {slot}: no program '{program}' in the object")]
    NoSlotProgram { map: String, slot: u32, program: String },
    #[error("program '{program}' (section '{section}') is not loaded: {reason}")]
    Skipped { program: String, section: String, reason: String },
}

/// What verification measured, kept for `prog verify` and benchmarks.
#[derive(Debug, Clone, Default)]
pub struct VerifyStats {
    pub insns_processed: u64,
    pub peak_states: usize,
    /// Stack bytes zeroed at each invocation (the verifier saw a helper read stack bytes
    /// the program may not have written).
    pub zeroed_stack: usize,
    pub log: String,
}

pub(crate) enum Engine {
    Interp(Interpreter),
    Jit(JitProgram),
}

/// A loaded extension: immutable after load, shared by every worker that runs it.
pub struct Extension {
    name: String,
    section: String,
    /// Loaded as `xdp.frags` (the kernel's `BPF_F_XDP_HAS_FRAGS`).
    frags_aware: bool,
    license: String,
    domain: Arc<Domain>,
    maps: Arc<MapTable>,
    insns: Vec<Insn>,
    stats: VerifyStats,
    pub(crate) engine: Engine,
    health: Health,
    /// The `bpf_loop` calls the kernel would inline (see
    /// `spine_verifier::Verified::inlined_loops`), whose edge cases differ.
    pub(crate) inlined_loops: Vec<usize>,
    /// For an active-message handler (`SEC("spine/handler/N")`): its number.
    handler: Option<u8>,
    /// For an endpoint applet (`SEC("spine/applet/tx|rx")`): its hook.
    applet: Option<crate::msg::AppletHook>,
    /// Unique among the extensions of this process: a timer's callback names its
    /// extension by it.
    id: u64,
    /// The functions `lddw PSEUDO_FUNC` names (sorted): what `bpf_timer_set_callback`
    /// accepts.
    pub(crate) callbacks: Vec<usize>,
    /// For each timer callback (its first instruction), the program entered through
    /// it: the program behind a two-instruction wrapper that calls it and exits (see
    /// [`timer_wrapper`]). Empty unless the program calls `bpf_timer_set_callback`.
    pub(crate) timer_entries: Vec<(usize, Engine)>,
}

/// Where the instructions of a timer entry's program sit against the extension's own:
/// two further on, behind the wrapper.
pub(crate) const TIMER_WRAPPER_LEN: usize = 2;

static NEXT_EXTENSION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl std::fmt::Debug for Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extension")
            .field("name", &self.name)
            .field("section", &self.section)
            .field("domain", &self.domain.name())
            .field("insns", &self.insns.len())
            .finish()
    }
}

/// Every XDP program of an object, sharing the object's maps: the user's handle on a
/// loaded object. Dropping it clears the object's program arrays (as the kernel clears a
/// program array when its last user reference goes), so programs that tail-call each
/// other do not keep each other alive; extensions still held elsewhere keep running.
#[derive(Debug)]
pub struct LoadedObject {
    pub maps: Arc<MapTable>,
    pub programs: Vec<Arc<Extension>>,
    /// Its active-message handlers (`SEC("spine/handler/N")`), sharing its maps.
    pub handlers: Vec<Arc<Extension>>,
    /// Its endpoint applets (`SEC("spine/applet/tx")`, `SEC("spine/applet/rx")`): XDP
    /// programs in all but name, sharing its maps, that endpoints attach to their hooks.
    pub applets: Vec<Arc<Extension>>,
    /// Programs of the object that are neither XDP programs nor handlers: (name,
    /// section, type).
    pub skipped: Vec<(String, String, ProgType)>,
}

impl LoadedObject {
    /// The program in `section` (a section or function name), or the first when `None`.
    pub fn program(&self, section: Option<&str>) -> Result<&Arc<Extension>, LoadError> {
        let found = match section {
            None => self.programs.first(),
            Some(s) => self
                .programs
                .iter()
                .find(|p| p.section == s)
                .or_else(|| self.programs.iter().find(|p| p.name == s)),
        };
        if let Some(p) = found {
            return Ok(p);
        }
        if let Some((name, _, t)) = self
            .skipped
            .iter()
            .find(|(n, sec, _)| Some(sec.as_str()) == section || Some(n.as_str()) == section)
        {
            return Err(LoadError::WrongType { program: name.clone(), prog_type: *t });
        }
        Err(LoadError::NoProgram {
            wanted: section.map_or_else(|| "at all".to_string(), |s| format!("'{s}'")),
            available: self
                .programs
                .iter()
                .map(|p| format!("{} ({})", p.section, p.name))
                .collect(),
        })
    }
}

impl Drop for Extension {
    /// The timers whose callbacks it set in its maps (which may outlive it: a domain's
    /// shared maps) are cancelled: no runner of it is left to fire them.
    fn drop(&mut self) {
        self.cancel_timers();
    }
}

impl Drop for LoadedObject {
    fn drop(&mut self) {
        for m in self.maps.iter() {
            if let RtMap::Progs(pa) = m {
                pa.clear();
            }
        }
    }
}

/// Loads every XDP program of `obj` into `opts.domain`, creating the object's maps and
/// filling program arrays from the object's initial slots.
pub fn load_object(obj: &Object, opts: &LoadOptions) -> Result<LoadedObject, LoadError> {
    let maps = Arc::new(MapTable::create(obj, &opts.domain, opts.ncpus, opts.map_seed)?);
    let infos: Vec<MapInfo> = obj.maps.iter().map(map_info).collect();
    let mut programs = Vec::new();
    let mut handlers = Vec::new();
    let mut applets = Vec::new();
    let mut skipped = Vec::new();
    for prog in &obj.programs {
        if is_handler(prog) {
            handlers.push(Arc::new(load_program(obj, prog, &maps, &infos, opts)?));
            continue;
        }
        if is_applet(prog) {
            applets.push(Arc::new(load_program(obj, prog, &maps, &infos, opts)?));
            continue;
        }
        if !matches!(prog.prog_type, ProgType::Xdp | ProgType::XdpFrags) {
            skipped.push((prog.name.clone(), prog.section.clone(), prog.prog_type));
            continue;
        }
        programs.push(Arc::new(load_program(obj, prog, &maps, &infos, opts)?));
    }
    for (i, spec) in obj.maps.iter().enumerate() {
        let Some(RtMap::Progs(pa)) = maps.get(i) else { continue };
        for (slot, target) in &spec.init_slots {
            let SlotTarget::Program(name) = target else { continue };
            let p = programs.iter().find(|p| &p.name == name).ok_or_else(|| {
                LoadError::NoSlotProgram {
                    map: spec.name.clone(),
                    slot: *slot,
                    program: name.clone(),
                }
            })?;
            pa.set(*slot, Some(p), &maps)?;
        }
    }
    Ok(LoadedObject { maps, programs, handlers, applets, skipped })
}

/// Whether `prog` is an active-message handler (`SEC("spine/handler/N")`, N 0..=255).
fn is_handler(prog: &spine_obj::Program) -> bool {
    prog.prog_type == ProgType::Spine && crate::msg::handler_of_section(&prog.section).is_some()
}

/// Whether `prog` is an endpoint applet (`SEC("spine/applet/tx")` or `"spine/applet/rx"`):
/// verified and run as an XDP program.
fn is_applet(prog: &spine_obj::Program) -> bool {
    prog.prog_type == ProgType::Spine && crate::msg::applet_of_section(&prog.section).is_some()
}

/// The program of `obj` in or named `section`, else its first XDP program: the one that
/// `prog verify|run|test` and an adapter's `[[extension]]` mean. A program of another type,
/// or one the parser skipped, is refused by name.
pub fn select_program<'o>(
    obj: &'o Object,
    section: Option<&str>,
) -> Result<&'o spine_obj::Program, LoadError> {
    let xdp = |p: &spine_obj::Program| matches!(p.prog_type, ProgType::Xdp | ProgType::XdpFrags);
    let found = match section {
        Some(s) => obj.program(Some(s)),
        None => obj.programs.iter().find(|p| xdp(p)),
    };
    match found {
        Some(p) if xdp(p) => Ok(p),
        Some(p) => Err(LoadError::WrongType { program: p.name.clone(), prog_type: p.prog_type }),
        None => match section.and_then(|s| obj.skipped_program(s)) {
            Some(k) => Err(LoadError::Skipped {
                program: k.name.clone(),
                section: k.section.clone(),
                reason: k.reason.clone(),
            }),
            None => Err(LoadError::NoProgram {
                wanted: section.map_or_else(|| "of type XDP".to_string(), |s| format!("'{s}'")),
                available: obj
                    .programs
                    .iter()
                    .map(|p| format!("{} ({})", p.section, p.name))
                    .collect(),
            }),
        },
    }
}

/// Loads the program [`select_program`] picks, with only the programs the object's program
/// arrays name in their initial slots (its tail-call targets): a sibling the verifier
/// refuses, or one of another type, never blocks it. Returns the loaded object (it keeps
/// the maps and the tail-call targets alive) and the chosen extension.
pub fn load_selected(
    obj: &Object,
    section: Option<&str>,
    opts: &LoadOptions,
) -> Result<(LoadedObject, Arc<Extension>), LoadError> {
    let prog = select_program(obj, section)?;
    let slotted = |p: &spine_obj::Program| {
        obj.maps
            .iter()
            .flat_map(|m| &m.init_slots)
            .any(|(_, t)| matches!(t, SlotTarget::Program(n) if *n == p.name))
    };
    let others = obj
        .programs
        .iter()
        .filter(|p| !std::ptr::eq(*p, prog) && (slotted(p) || is_handler(p) || is_applet(p)));
    let only =
        Object { programs: std::iter::once(prog).chain(others).cloned().collect(), ..obj.clone() };
    let loaded = load_object(&only, opts)?;
    let ext = loaded.programs.first().expect("the selected program loads first").clone();
    Ok((loaded, ext))
}

/// Verifies one program of `obj` as loading it into `opts.domain` would: against the
/// domain's helpers and instruction quota, the object's maps and the XDP context.
pub fn verify_program(
    obj: &Object,
    prog: &spine_obj::Program,
    opts: &LoadOptions,
) -> Result<Verified, LoadError> {
    let infos: Vec<MapInfo> = obj.maps.iter().map(map_info).collect();
    verify_with(prog, &infos, &ctx_layout(prog), opts)
}

fn ctx_layout(prog: &spine_obj::Program) -> CtxLayout {
    if is_handler(prog) {
        spine_verifier::spine_msg_ctx()
    } else if is_devmap(prog) {
        spine_verifier::xdp_devmap_ctx()
    } else {
        spine_verifier::xdp_ctx()
    }
}

/// A program libbpf loads with `BPF_XDP_DEVMAP` (run from a devmap entry, which may read
/// `egress_ifindex`): sections `xdp/devmap` and, multi-buffer, `xdp.frags/devmap`.
fn is_devmap(prog: &spine_obj::Program) -> bool {
    prog.section.starts_with("xdp/devmap") || prog.section.starts_with("xdp.frags/devmap")
}

fn verify_with(
    prog: &spine_obj::Program,
    infos: &[MapInfo],
    ctx: &CtxLayout,
    opts: &LoadOptions,
) -> Result<Verified, LoadError> {
    let handler = is_handler(prog);
    if !handler && !is_applet(prog) && !matches!(prog.prog_type, ProgType::Xdp | ProgType::XdpFrags)
    {
        return Err(LoadError::WrongType { program: prog.name.clone(), prog_type: prog.prog_type });
    }
    opts.domain.check_insns(prog.insns.len())?;
    // Handlers and applets may arm timers too: the adapter's workers fire every
    // runner's timers (port programs', handlers', applets'), each on the worker that
    // armed it.
    let ids = if handler { opts.domain.handler_helpers() } else { opts.domain.xdp_helpers() };
    let helpers = KernelHelpers::only(&ids);
    let env = VerifyEnv {
        ctx,
        helpers: &helpers,
        maps: infos,
        limits: Limits::default(),
        log_level: opts.log_level,
    };
    spine_verifier::verify(&prog.insns, &env)
        .map_err(|error| LoadError::Verify { program: prog.name.clone(), error: Box::new(error) })
}

fn map_info(spec: &spine_obj::MapSpec) -> MapInfo {
    let read_only = spec.flags & spine_abi::map_flags::RDONLY_PROG != 0;
    // `.rodata` is written with its initial bytes and frozen before any program of the
    // object runs (`MapTable::create_one`), and programs cannot write it: the verifier
    // may read it as the kernel reads a frozen read-only array.
    let frozen_data =
        matches!(spec.origin, spine_obj::MapOrigin::GlobalData { read_only: true, .. })
            && read_only
            && spec.map_type == spine_abi::map_type::ARRAY
            && spec.max_entries == 1;
    let frozen = spec.initial.as_ref().filter(|_| frozen_data).map(|init| {
        let mut v = init.clone();
        v.resize(spec.value_size as usize, 0);
        std::sync::Arc::from(v)
    });
    MapInfo {
        name: spec.name.clone(),
        map_type: spec.map_type,
        key_size: spec.key_size,
        value_size: spec.value_size,
        max_entries: spec.max_entries,
        read_only,
        inner: spec.inner.as_deref().map(|i| Box::new(map_info(i))),
        spin_lock: spec.spin_lock,
        timer: spec.timer,
        frozen,
    }
}

fn load_program(
    obj: &Object,
    prog: &spine_obj::Program,
    maps: &Arc<MapTable>,
    infos: &[MapInfo],
    opts: &LoadOptions,
) -> Result<Extension, LoadError> {
    let domain = &opts.domain;
    let program = prog.name.clone();
    let ctx_layout = ctx_layout(prog);
    let verified = verify_with(prog, infos, &ctx_layout, opts)?;
    let mut insns = prog.insns.clone();
    link(&program, &mut insns, maps)?;
    for (pc, info) in verified.insn_info.iter().enumerate() {
        if let Some(MemAccess::Ctx { field }) = info.access {
            let off = ctx_layout.fields[field].off;
            let rewrite = if is_handler(prog) { ctx::rewrite_msg_load } else { ctx::rewrite_load };
            insns[pc] = rewrite(insns[pc], off).ok_or(LoadError::Unsupported {
                program: program.clone(),
                pc,
                what: "this context access",
            })?;
        }
    }
    let zeroed_stack = if verified.stack_zeroing {
        let depth: u32 = verified.subprogs.iter().map(|s| s.stack_depth.next_multiple_of(16)).sum();
        (depth as usize).min(spine_vm::Stack::BYTES)
    } else {
        0
    };
    let build = |insns: &[Insn]| -> Result<Engine, LoadError> {
        Ok(match opts.engine {
            EngineKind::Interpreter => Engine::Interp(
                Interpreter::new(insns.to_vec())
                    .map_err(|source| LoadError::Interp { program: program.clone(), source })?,
            ),
            EngineKind::Jit => {
                let jopts = JitOptions {
                    proven: Some(vec![true; insns.len()]),
                    budget: opts.watchdog,
                    native_helpers: crate::helpers::native_helpers(),
                    inline_array_lookups: inline_lookups(maps),
                };
                Engine::Jit(
                    spine_jit::compile(insns, &jopts)
                        .map_err(|source| LoadError::Jit { program: program.clone(), source })?,
                )
            }
        })
    };
    let engine = build(&insns)?;
    let callbacks = spine_vm::callback_entries(&insns);
    let sets_timers =
        insns.iter().any(|i| i.is_helper_call() && i.imm as u32 == helper::TIMER_SET_CALLBACK);
    let mut timer_entries = Vec::new();
    if sets_timers {
        for &pc in &callbacks {
            timer_entries.push((pc, build(&timer_wrapper(&insns, pc))?));
        }
    }
    Ok(Extension {
        name: program,
        section: prog.section.clone(),
        frags_aware: prog.prog_type == ProgType::XdpFrags,
        license: obj.license.clone(),
        domain: domain.clone(),
        maps: maps.clone(),
        insns,
        stats: VerifyStats {
            insns_processed: verified.insns_processed,
            peak_states: verified.peak_states,
            zeroed_stack,
            log: verified.log,
        },
        engine,
        health: Health::default(),
        inlined_loops: verified.inlined_loops,
        handler: crate::msg::handler_of_section(&prog.section).filter(|_| is_handler(prog)),
        applet: crate::msg::applet_of_section(&prog.section).filter(|_| is_applet(prog)),
        id: NEXT_EXTENSION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        callbacks,
        timer_entries,
    })
}

/// The program a timer callback at `entry` runs as: `call entry; exit` in front of the
/// extension's instructions, whose relative jumps and calls all stay valid. The
/// callback then runs as the verifier checked it: a function called with r1-r3 (map,
/// key, value) below a frame that holds nothing, its r0 the run's.
pub(crate) fn timer_wrapper(insns: &[Insn], entry: usize) -> Vec<Insn> {
    let mut w = Vec::with_capacity(insns.len() + TIMER_WRAPPER_LEN);
    // `call` goes to pc + 1 + imm: the callback, `TIMER_WRAPPER_LEN` further on.
    w.push(Insn::new(op::JMP | op::CALL, 0, op::PSEUDO_CALL, 0, (entry + 1) as i32));
    w.push(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
    w.extend_from_slice(insns);
    w
}

/// Array lookups the JIT may expand inline, as the kernel's verifier inlines them: plain
/// and per-CPU arrays, whose value addresses are fixed for the map's life (a per-CPU
/// array's copy is found from the worker's CPU in the helpers' environment).
fn inline_lookups(maps: &MapTable) -> Vec<InlineArrayLookup> {
    (0..maps.len())
        .filter_map(|i| {
            let m = maps.data(i)?;
            if !matches!(m.def().map_type, map_type::ARRAY | map_type::PERCPU_ARRAY) {
                return None;
            }
            let l = m.array_layout()?;
            let per_cpu = match l.cpu_stride {
                None => None,
                Some(stride) => Some(PerCpuLookup {
                    cpu_stride: stride,
                    cpu_offset: i32::try_from(crate::helpers::CPU_OFFSET).ok()?,
                }),
            };
            Some(InlineArrayLookup {
                helper_id: helper::MAP_LOOKUP_ELEM,
                map_handle: MAP_HANDLE_BASE + i as u64,
                base: l.base,
                value_size: u32::try_from(l.elem_stride).ok()?,
                max_entries: l.max_entries,
                per_cpu,
            })
        })
        .collect()
}

impl Extension {
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn section(&self) -> &str {
        &self.section
    }
    /// Whether the program was loaded as multi-buffer aware (`xdp.frags`, the kernel's
    /// `BPF_F_XDP_HAS_FRAGS`): an attach point that delivers frames longer than one
    /// buffer takes only such programs, as the kernel's drivers do.
    pub fn frags_aware(&self) -> bool {
        self.frags_aware
    }
    pub fn license(&self) -> &str {
        &self.license
    }
    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }
    /// The handler number of an active-message handler; `None` for an XDP program.
    pub fn handler(&self) -> Option<u8> {
        self.handler
    }

    /// The endpoint hook of an applet; `None` for anything else.
    pub fn applet(&self) -> Option<crate::msg::AppletHook> {
        self.applet
    }
    /// The object's maps (shared with the object's other programs).
    pub fn maps(&self) -> &Arc<MapTable> {
        &self.maps
    }
    /// The data map called `name`.
    pub fn map(&self, name: &str) -> Option<&Arc<spine_maps::Map>> {
        self.maps.data_maps().find(|m| &*m.def().name == name)
    }

    /// The object's BTF with the key and value type ids of map `name`, if it has them.
    pub fn map_btf_types(&self, name: &str) -> Option<(Arc<[u8]>, u32, u32)> {
        self.maps.btf_types(name)
    }
    /// The final instructions: maps linked, context loads rewritten.
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }
    pub fn stats(&self) -> &VerifyStats {
        &self.stats
    }
    pub fn engine_kind(&self) -> EngineKind {
        match self.engine {
            Engine::Interp(_) => EngineKind::Interpreter,
            Engine::Jit(_) => EngineKind::Jit,
        }
    }
    /// The JIT's machine code, when the extension runs on the JIT.
    pub fn native_code(&self) -> Option<&[u8]> {
        match &self.engine {
            Engine::Jit(code) => Some(code.code()),
            Engine::Interp(_) => None,
        }
    }
    /// Faults and attachment state, shared by every worker.
    pub fn health(&self) -> &Health {
        &self.health
    }
    /// This extension's id among the extensions of the process (what its timers'
    /// callbacks name).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Whether the program may set timer callbacks (its runners fire its timers).
    pub fn has_timers(&self) -> bool {
        !self.timer_entries.is_empty()
    }
    /// Cancels every timer whose callback this extension set (they keep their
    /// initialisation, as after `bpf_timer_cancel`): when it goes, or when the watchdog
    /// detached it, so that no timer waits on a callback that will never run.
    pub fn cancel_timers(&self) {
        if self.timer_entries.is_empty() {
            return;
        }
        for t in self.maps.data_maps().filter_map(|m| m.timers()) {
            t.drop_owner(self.id);
        }
    }
}

/// Resolves the loader's map references: a map handle for `PSEUDO_MAP_FD`, the value's
/// address for `PSEUDO_MAP_VALUE`.
fn link(program: &str, insns: &mut [Insn], maps: &MapTable) -> Result<(), LoadError> {
    let mut pc = 0;
    while pc < insns.len() {
        let i = insns[pc];
        if !i.is_lddw() || pc + 1 >= insns.len() {
            pc += 1;
            continue;
        }
        let index = i.imm as u32 as usize;
        let value = match i.src {
            op::PSEUDO_NONE => None,
            // The verifier checked the index against the object's maps.
            op::PSEUDO_MAP_FD => Some(MAP_HANDLE_BASE + index as u64),
            op::PSEUDO_MAP_VALUE => {
                let offset = i64::from(insns[pc + 1].imm);
                let bad = || LoadError::BadValueRef {
                    program: program.to_string(),
                    pc,
                    map: maps.get(index).map_or("?", RtMap::name).to_string(),
                    offset,
                };
                let map = maps.data(index).ok_or_else(bad)?;
                if map.array_layout().is_none()
                    || map.def().max_entries != 1
                    || !(0..i64::from(map.def().value_size)).contains(&offset)
                {
                    return Err(bad());
                }
                let base = map.lookup(&0u32.to_le_bytes(), 0).ok_or_else(bad)?;
                Some(base.as_ptr() as u64 + offset as u64)
            }
            // A callback's address: the engines resolve it (`spine_vm::FUNC_BASE`).
            op::PSEUDO_FUNC => None,
            _ => {
                return Err(LoadError::Unsupported {
                    program: program.to_string(),
                    pc,
                    what: "an unknown lddw pseudo source",
                })
            }
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

#[cfg(test)]
mod devmap_tests {
    use super::*;

    fn prog(section: &str) -> spine_obj::Program {
        spine_obj::Program {
            name: "p".into(),
            section: section.into(),
            prog_type: spine_obj::ProgType::from_section(section).unwrap_or(ProgType::Xdp),
            insns: Vec::new(),
            functions: Vec::new(),
        }
    }

    #[test]
    fn devmap_sections_may_read_egress_ifindex_as_in_libbpf() {
        let reads = |s: &str| ctx_layout(&prog(s)).field_at(20).is_some();
        assert!(reads("xdp/devmap"));
        assert!(reads("xdp.frags/devmap"), "libbpf's multi-buffer devmap section");
        assert!(!reads("xdp"));
        assert!(!reads("xdp.frags"));
        assert!(!reads("xdp/cpumap"));
    }
}
