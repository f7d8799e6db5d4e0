//! Why an object was refused. Every variant carries the section, symbol, map or
//! instruction involved, so a user can find the offending construct in the C source.

/// An object that cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjError {
    #[error("not an ELF file (bad magic)")]
    NotElf,
    #[error("ELF class {0} is not 64-bit (ELFCLASS64 = 2)")]
    WrongClass(u8),
    #[error("ELF data encoding {0} is not little-endian (ELFDATA2LSB = 1)")]
    WrongEndian(u8),
    #[error("ELF machine {0} is not BPF (EM_BPF = 247)")]
    WrongMachine(u16),
    #[error("ELF type {0} is not a relocatable object (ET_REL = 1)")]
    NotRelocatable(u16),
    #[error("malformed ELF header: {0}")]
    BadHeader(&'static str),
    #[error("truncated: {what} needs bytes {start}..{end} but the file has {len}")]
    Truncated { what: String, start: u64, end: u64, len: u64 },
    #[error("malformed section header {index}: {reason}")]
    BadSectionHeader { index: usize, reason: &'static str },
    #[error("malformed section '{section}': {reason}")]
    BadSection { section: String, reason: &'static str },
    #[error("malformed symbol {index}: {reason}")]
    BadSymbol { index: usize, reason: &'static str },
    #[error(
        "string offset {offset} outside string table '{table}', not NUL-terminated or not UTF-8"
    )]
    BadString { table: String, offset: u64 },
    #[error("object has code but no symbol table")]
    NoSymbolTable,
    #[error("object has more than one symbol table")]
    MultipleSymbolTables,
    #[error("section '{section}' has RELA relocations; BPF objects use REL")]
    RelaUnsupported { section: String },
    #[error(
        "a program type is given for section '{section}', which is no code section of the object"
    )]
    NoSuchSection { section: String },
    #[error("malformed BTF: {0}")]
    Btf(#[from] BtfError),
    #[error("map '{map}': {kind}")]
    Map { map: String, kind: MapErrorKind },
    #[error("no map '{map}' to size (the object's maps: {maps})")]
    NoSuchMap { map: String, maps: String },
    #[error("relocation at {section}+{offset:#x} against '{symbol}': {kind}")]
    Reloc { section: String, offset: u64, symbol: String, kind: RelocErrorKind },
    /// `insn` counts instruction slots from the start of `section`, as `llvm-objdump -d`
    /// numbers them.
    #[error("CO-RE relocation in '{section}', instruction {insn}: {kind}")]
    Core { section: String, insn: usize, kind: crate::core::CoreErrorKind },
    #[error(
        "program '{program}': function '{function}' in '{section}', instruction {insn}: {kind}"
    )]
    Link { program: String, section: String, function: String, insn: usize, kind: LinkErrorKind },
}

/// Problems with one map definition (BTF-defined, legacy or global data).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapErrorKind {
    #[error("unknown or unsupported map type {0}")]
    UnknownType(u32),
    #[error("no map type given")]
    MissingType,
    #[error("max_entries is 0 (a loader sets it before loading: give the size, e.g. `--max-entries NAME=N`)")]
    ZeroMaxEntries,
    #[error("key_size is 0")]
    ZeroKeySize,
    #[error("value_size is 0")]
    ZeroValueSize,
    #[error("key_size {0} exceeds the limit of {max} bytes", max = crate::maps::MAX_KEY_SIZE)]
    KeyTooLarge(u64),
    #[error("value_size {0} exceeds the limit of {max} bytes", max = crate::maps::MAX_VALUE_SIZE)]
    ValueTooLarge(u64),
    #[error("{field} is {declared} but the {field_type} type is {computed} bytes")]
    ConflictingSize { field: &'static str, field_type: &'static str, declared: u32, computed: u64 },
    #[error("definition is not a struct")]
    NotStruct,
    #[error("field '{field}': {reason}")]
    BadField { field: String, reason: &'static str },
    #[error("unknown field '{0}'")]
    UnknownField(String),
    #[error("pinning {0} is neither 0 (none) nor 1 (by name)")]
    BadPinning(u32),
    #[error("declared in BTF but has no symbol in '.maps'")]
    NoSymbol,
    #[error("definition at offset {offset} needs {need} bytes but section 'maps' has {size}")]
    LegacyTruncated { offset: u64, need: u64, size: u64 },
    #[error("'values' is only allowed on map-in-map and program-array maps")]
    ValuesNotAllowed,
    #[error("initial slot {slot} is beyond max_entries {max_entries}")]
    SlotOutOfRange { slot: u64, max_entries: u32 },
    #[error("initial value at offset {offset:#x}: {reason}")]
    BadSlot { offset: u64, reason: &'static str },
    #[error("field '{field}': {error}")]
    Btf { field: String, error: BtfError },
    #[error("definition at offset {offset} needs {size} bytes but its section has {section_size}")]
    DefinitionOutOfBounds { offset: u64, size: u64, section_size: u64 },
    #[error("definition has non-zero bytes beyond struct bpf_map_def (unsupported options)")]
    UnsupportedOptions,
    #[error("global data sections together exceed {limit} bytes")]
    GlobalDataTooLarge { limit: u64 },
}

/// Problems with one relocation entry of a code section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RelocErrorKind {
    #[error("symbol index {index} is outside the symbol table ({count} symbols)")]
    SymbolOutOfRange { index: u64, count: usize },
    #[error("offset is outside the section ({size} bytes)")]
    OutsideSection { size: u64 },
    #[error("offset is not on an instruction boundary")]
    Misaligned,
    #[error("relocation type {0} is not supported in code")]
    UnsupportedType(u32),
    #[error("R_BPF_64_64 on instruction {code:#04x}, which is not lddw")]
    NotLddw { code: u8 },
    #[error("R_BPF_64_32 on instruction {code:#04x}, which is not a bpf-to-bpf call")]
    NotCall { code: u8 },
    #[error("symbol is undefined (extern variables, kfuncs and ksyms are not supported)")]
    Extern,
    /// A call to an XDP metadata kfunc (`bpf_xdp_metadata_rx_timestamp`, `_rx_hash`,
    /// `_rx_vlan_tag`): the kernel refuses a program that is not bound to a device
    /// with this reason (`EINVAL`), and spine has no device-bound programs.
    #[error("kfunc call: metadata kfuncs require device-bound program (the kernel's verdict for a program not bound to a device; spine has no device-bound programs)")]
    KfuncNeedsDevice,
    /// A call to a kfunc spine does not offer (an extern function the kernel would
    /// resolve in its BTF); those it offers are listed in [`spine_abi::kfunc::TABLE`].
    #[error(
        "kfunc call: this kfunc is not supported (spine offers the kernel's helpers and the kfuncs bpf_dynptr_from_xdp, bpf_dynptr_slice, bpf_dynptr_slice_rdwr, bpf_dynptr_adjust, bpf_dynptr_is_null, bpf_dynptr_is_rdonly, bpf_dynptr_size and bpf_dynptr_clone)"
    )]
    Kfunc,
    #[error("symbol lives in special section {0:#x}; forgot to initialise a global variable?")]
    SpecialSection(u16),
    #[error("symbol lives in '{0}', which is neither code, a map section nor global data")]
    UnsupportedTarget(String),
    #[error("call target lives in '{0}', which is not code")]
    CallIntoData(String),
    #[error("no map is defined at offset {0:#x} of the map section")]
    NoMapAt(u64),
    #[error("offset {offset} is outside the {size}-byte global-data section")]
    ValueOffset { offset: i64, size: u64 },
    #[error("function address {0} is not on an instruction boundary")]
    FunctionMisaligned(i64),
    #[error("call target lives in program section '{0}'; callees must be in .text or the caller's own section")]
    CallIntoOtherSection(String),
    #[error("a second relocation for the same instruction")]
    Duplicate,
}

/// Problems assembling a program from its functions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkErrorKind {
    #[error("target instruction {0} of its section is outside every function")]
    TargetOutsideFunctions(i64),
    #[error("target instruction {target} is inside function '{function}', not at its start")]
    TargetNotFunctionStart { target: i64, function: String },
    #[error("lddw is missing its second slot")]
    TruncatedLddw,
    #[error("lddw with pseudo source {0} is not produced by the compiler")]
    UnexpectedPseudo(u8),
    #[error("program exceeds {0} instructions")]
    TooLarge(usize),
    #[error("the object's programs together exceed {0} instructions")]
    ObjectTooLarge(usize),
    #[error("jump to instruction {0} of its section leaves the function")]
    JumpOutsideFunction(i64),
    #[error("call with source {0} is not produced by the compiler without a relocation")]
    UnexpectedCallSource(u8),
}

/// Problems with the `.BTF` section.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BtfError {
    #[error("section '{0}' needs BTF but the object has no .BTF section")]
    Missing(String),
    #[error("bad magic {0:#06x}")]
    BadMagic(u16),
    #[error("unsupported version {0}")]
    BadVersion(u8),
    #[error("header: {0}")]
    BadHeader(&'static str),
    #[error("{0} is outside the section")]
    OutOfBounds(&'static str),
    #[error("type {id} is truncated")]
    TruncatedType { id: u32 },
    #[error("type {id} has unknown kind {kind}")]
    UnknownKind { id: u32, kind: u32 },
    #[error("string offset {0} is outside the string section or not NUL-terminated")]
    BadString(u32),
    #[error("type {id} refers to type {referenced}, which does not exist")]
    BadTypeId { id: u32, referenced: u32 },
    #[error("type chain from {0} is too deep or cyclic")]
    TooDeep(u32),
    #[error("type {id} ({kind}) has no size")]
    NoSize { id: u32, kind: &'static str },
    #[error("size of type {0} overflows")]
    SizeOverflow(u32),
    #[error("no DATASEC for section '{0}'")]
    NoDatasec(String),
    #[error("DATASEC '{section}' entry {index} is not a variable")]
    NotAVar { section: String, index: usize },
    #[error("type {id} is {size} bytes, the data {got}")]
    DataSize { id: u32, size: u32, got: usize },
    #[error("type {id} ({kind}) has no value to print")]
    NotPrintable { id: u32, kind: &'static str },
}
