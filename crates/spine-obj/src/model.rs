//! What a loaded object is: programs whose instructions are self-contained (every
//! bpf-to-bpf callee appended, every call and map reference resolved), and the map
//! specifications they refer to by index. This mirrors what libbpf hands to bpf(2),
//! with map indices where libbpf would put file descriptors.

use spine_isa::Insn;

pub use spine_abi::map_type;

/// Where a map definition came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapOrigin {
    /// A BTF-defined map in `.maps`.
    Btf,
    /// A `struct bpf_map_def` in the legacy `maps` section.
    Legacy,
    /// A global-data section (`.data`, `.rodata`, `.bss`, `.rodata.str1.1`, `.data.foo`, ...)
    /// exposed as a one-element array map whose value is the section.
    GlobalData { section: String, read_only: bool },
}

/// A map as declared by the object. Sizes are taken from the object unchecked beyond
/// what loading needs; the map layer validates them against its own limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapSpec {
    /// Symbol name (`counters`), or the section name for global data (`.bss`).
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// libbpf `pinning` attribute (0 = none, 1 = by name).
    pub pinning: u32,
    /// `numa_node` attribute of a BTF-defined map (0 when absent), passed to the kernel
    /// as is; spine itself has no NUMA placement.
    pub numa_node: u32,
    /// `map_extra` attribute of a BTF-defined map (0 when absent), e.g. the hash count
    /// of a bloom filter.
    pub map_extra: u64,
    /// Initial bytes of the single value of a global-data map (`.bss`: zeros).
    pub initial: Option<Vec<u8>>,
    pub origin: MapOrigin,
    /// Template of the inner maps of an `array_of_maps`/`hash_of_maps`, from
    /// `__array(values, struct { ... })`; `None` for every other map.
    pub inner: Option<Box<MapSpec>>,
    /// Slots filled at load time, from `.values = { [i] = &x }` in a BTF map-in-map or
    /// program array, in slot order.
    pub init_slots: Vec<(u32, SlotTarget)>,
    /// Offset of the `struct bpf_spin_lock` in the value (a top-level member of the
    /// value type, found through BTF as the kernel finds it); `None` without one.
    pub spin_lock: Option<u32>,
    /// Offset of the `struct bpf_timer` in the value, found as `spin_lock` is.
    pub timer: Option<u32>,
    /// Ids of the key and value types in [`Object::btf`] (`__type(key, T)`,
    /// `__type(value, T)`), what `BPF_MAP_CREATE` takes as `btf_key_type_id` and
    /// `btf_value_type_id`; 0 when the definition gives none.
    pub btf_key_type_id: u32,
    pub btf_value_type_id: u32,
}

/// What an initial slot of a map-in-map or program array refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlotTarget {
    /// Index into [`Object::maps`].
    Map(usize),
    /// Name of a program in [`Object::programs`] (its entry function).
    Program(String),
}

/// Program type implied by the section name (libbpf's `SEC()` conventions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgType {
    Xdp,
    /// `xdp.frags`: XDP with multi-buffer support.
    XdpFrags,
    /// `tc`, `classifier`, `tcx/ingress`, `tcx/egress`: scheduler classifier.
    SchedCls,
    /// spine's own hook sections (`spine/...`); the suffix names the hook.
    Spine,
}

impl ProgType {
    /// The kernel's `enum bpf_prog_type` value, where the kernel has one.
    pub fn kernel_type(self) -> Option<u32> {
        match self {
            ProgType::Xdp | ProgType::XdpFrags => Some(6),
            ProgType::SchedCls => Some(3),
            ProgType::Spine => None,
        }
    }
}

/// One program, ready to hand to an engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Function symbol name (`xdp_prog`).
    pub name: String,
    /// ELF section it came from (`xdp`, `xdp.frags`, `spine/msg`).
    pub section: String,
    pub prog_type: ProgType,
    /// The entry function followed by every bpf-to-bpf callee it reaches, with call
    /// offsets fixed for this layout. Map references are `lddw` with
    /// `src == PSEUDO_MAP_FD` and `imm` the index into [`Object::maps`], or
    /// `src == PSEUDO_MAP_VALUE`, `imm` the map index and the second slot's `imm`
    /// the byte offset into the value.
    pub insns: Vec<Insn>,
    /// Entry slots of each function in `insns` (0 first), with their names, for
    /// disassembly and the verifier's call graph.
    pub functions: Vec<(usize, String)>,
}

/// A parsed object file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Contents of the `license` section up to its NUL; empty when the object has none.
    pub license: String,
    pub programs: Vec<Program>,
    pub maps: Vec<MapSpec>,
    /// Entry functions in sections whose program type spine does not run (`kprobe/`,
    /// `iter/`, ...) or that the section name does not give (`xdp_sock`) and no
    /// [`ParseOptions::section_types`] entry set: listed, never loaded, so that their
    /// siblings still load.
    pub skipped: Vec<SkippedProgram>,
    /// The object's `.BTF`, fixed up as libbpf fixes it for `BPF_BTF_LOAD` (data
    /// sections sized, variables placed); `None` without BTF or when it cannot be.
    pub btf: Option<std::sync::Arc<[u8]>>,
}

/// A program of the object that was not loaded, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedProgram {
    pub name: String,
    pub section: String,
    pub reason: String,
}

/// How to read an object beyond its own conventions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Program type of named code sections, overriding the section-name conventions,
    /// as `bpftool prog load ... type xdp` or `ip link ... sec xdp_sock` do. A name
    /// that is no code section of the object is an error.
    pub section_types: Vec<(String, ProgType)>,
    /// The BTF that CO-RE relocations are resolved against (raw BTF, as
    /// `/sys/kernel/btf/vmlinux` holds it); `None`: the object's own, so every relocation
    /// keeps the value clang computed.
    pub target_btf: Option<std::sync::Arc<[u8]>>,
    /// `max_entries` of named maps, as a loader sets them before loading
    /// (`bpf_map__set_max_entries`): programs whose maps are declared without a size
    /// (xdp-bench's per-CPU counters, sized to the machine) need them. A name that is no
    /// map of the object is an error.
    pub max_entries: Vec<(String, u32)>,
}

impl Object {
    /// The skipped program in `section` or named `section`, to explain a refusal.
    pub fn skipped_program(&self, section: &str) -> Option<&SkippedProgram> {
        self.skipped.iter().find(|p| p.section == section || p.name == section)
    }

    /// The program in `section` (exact section name), or the only program when `None`
    /// and there is exactly one; otherwise the first program.
    pub fn program(&self, section: Option<&str>) -> Option<&Program> {
        match section {
            Some(s) => self
                .programs
                .iter()
                .find(|p| p.section == s)
                .or_else(|| self.programs.iter().find(|p| p.name == s)),
            None => self.programs.first(),
        }
    }
}
