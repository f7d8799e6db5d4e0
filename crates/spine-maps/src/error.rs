//! Map errors, each mapped to the errno the kernel returns for the same condition, so a
//! helper's return value and a control tool's message agree with bpf(2).

use std::sync::Arc;

use spine_abi::map_type;

pub use spine_abi::errno;

/// `ENOTSUPP` (524), the kernel-internal errno that `bpf(2)` leaks for an LRU hash map
/// created with `BPF_F_NO_PREALLOC`, for element operations on a ring buffer and for an
/// inner-map template the kernel cannot nest. Not in `spine_abi::errno` (not a uapi errno).
pub const ENOTSUPP: i64 = 524;
/// `EBADF`, `EAGAIN`, `ENODEV`, `EOVERFLOW`: uapi errnos the newer map types return that
/// `spine_abi::errno` does not list yet.
pub const EBADF: i64 = 9;
pub const EAGAIN: i64 = 11;
pub const ENODEV: i64 = 19;
pub const EOVERFLOW: i64 = 75;

/// A program-side operation the kernel's verifier refuses for some map types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgOp {
    Update,
    Delete,
    Push,
    Pop,
    Peek,
}

impl std::fmt::Display for ProgOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProgOp::Update => "bpf_map_update_elem",
            ProgOp::Delete => "bpf_map_delete_elem",
            ProgOp::Push => "bpf_map_push_elem",
            ProgOp::Pop => "bpf_map_pop_elem",
            ProgOp::Peek => "bpf_map_peek_elem",
        })
    }
}

/// Why a write was refused with `EPERM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOnlyReason {
    /// User-side write after `BPF_MAP_FREEZE`.
    Frozen,
    /// User-side write to a map created with `BPF_F_RDONLY`.
    RdonlyMap,
    /// Program-side update or delete on a `BPF_F_RDONLY_PROG` map (the kernel's verifier
    /// rejects such a program at load time with `EACCES`).
    RdonlyProg,
    /// User-side write to an endpoint map slot: only the adapter binds them.
    EndpointSlot,
}

impl std::fmt::Display for ReadOnlyReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReadOnlyReason::Frozen => "frozen",
            ReadOnlyReason::RdonlyMap => "created with BPF_F_RDONLY",
            ReadOnlyReason::RdonlyProg => "read-only for programs (BPF_F_RDONLY_PROG)",
            ReadOnlyReason::EndpointSlot => {
                "endpoint map slots are bound by opening an endpoint on them"
            }
        })
    }
}

/// Why a map could not be created or an operation on it failed. `map` is the map's
/// name (an `Arc` so that building an error on the data path does not allocate).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    // ---- creation ----
    #[error("map {map}: type {} ({map_type}) is not supported", map_type::name(*map_type))]
    Unsupported { map: Arc<str>, map_type: u32 },
    #[error("map {map}: key_size {key_size} outside {min}..={max}")]
    KeySize { map: Arc<str>, key_size: u32, min: u32, max: u32 },
    #[error("map {map}: value_size {value_size} outside {min}..={max}")]
    ValueSize { map: Arc<str>, value_size: u32, min: u32, max: u32 },
    #[error("map {map}: value_size {value_size} larger than {max}")]
    ValueTooLarge { map: Arc<str>, value_size: u32, max: u32 },
    #[error("map {map}: key_size {key_size} + value_size {value_size} larger than {max}")]
    KeyValueTooLarge { map: Arc<str>, key_size: u32, value_size: u32, max: u64 },
    #[error("map {map}: max_entries must be at least 1")]
    ZeroEntries { map: Arc<str> },
    #[error("map {map}: max_entries {max_entries} larger than {max}")]
    TooManyEntries { map: Arc<str>, max_entries: u32, max: u32 },
    #[error("map {map}: map_flags {flags:#x} include flags this map type does not accept")]
    MapFlags { map: Arc<str>, flags: u32 },
    #[error("map {map}: an LRU map cannot be created with BPF_F_NO_PREALLOC")]
    NeedsPrealloc { map: Arc<str> },
    #[error("map {map}: an LPM trie must be created with BPF_F_NO_PREALLOC")]
    NeedsNoPrealloc { map: Arc<str> },
    #[error("map {map}: needs {bytes} bytes of storage, more than the limit of {limit}")]
    TooLarge { map: Arc<str>, bytes: u64, limit: u64 },
    #[error("map {map}: allocating {bytes} bytes of storage failed")]
    OutOfMemory { map: Arc<str>, bytes: u64 },
    #[error("map {map}: a map needs at least one CPU")]
    ZeroCpus { map: Arc<str> },
    #[error("map {map}: initial contents of {len} bytes exceed value_size {value_size}")]
    InitialTooLong { map: Arc<str>, len: usize, value_size: u32 },
    #[error("map {map}: only a single-element (non-per-CPU) array map can have initial contents")]
    InitialNotArray { map: Arc<str> },
    #[error("map {map}: value_size {value_size} must be {a} or {b}")]
    ValueSizeChoice { map: Arc<str>, value_size: u32, a: u32, b: u32 },
    /// The kernel refuses this bound with `EINVAL` (a devmap_hash's bucket count).
    #[error("map {map}: max_entries {max_entries} larger than {max}")]
    MaxEntries { map: Arc<str>, max_entries: u32, max: u32 },
    #[error(
        "map {map}: ring buffer size {max_entries} is not a power of two and a multiple of 4096"
    )]
    RingSize { map: Arc<str>, max_entries: u32 },
    #[error("map {map}: map_extra {map_extra:#x} not accepted (a bloom filter's hash count is 0..=15; other types take 0)")]
    MapExtra { map: Arc<str>, map_extra: u64 },
    #[error("map {map}: a map-in-map needs an inner map template")]
    NoInnerTemplate { map: Arc<str> },
    #[error("map {map}: not a map-in-map (array_of_maps or hash_of_maps)")]
    NotOuter { map: Arc<str> },
    #[error("map {map}: inner map {inner} is itself a map-in-map (one level only)")]
    NestedOuter { map: Arc<str>, inner: Arc<str> },
    #[error("map {map}: maps of type {} cannot be inner maps", map_type::name(*map_type))]
    InnerNotSupported { map: Arc<str>, map_type: u32 },

    // ---- operations ----
    #[error("map {map}: inner map {inner} does not match the template (type, key and value size, flags, array max_entries, CPUs)")]
    InnerMismatch { map: Arc<str>, inner: Arc<str> },
    #[error(
        "map {map}: map-in-map slots are set with set_inner (spine has no map file descriptors)"
    )]
    InnerByFd { map: Arc<str> },
    #[error("map {map}: {op} is not allowed on this map type from a program")]
    NotFromProgram { map: Arc<str>, op: ProgOp },
    #[error("map {map}: a ring buffer has no elements to look up, update, delete or list")]
    NoElements { map: Arc<str> },
    #[error("map {map}: a devmap_hash entry needs a non-zero ifindex")]
    ZeroIfindex { map: Arc<str> },
    #[error("map {map}: entry programs (bpf_prog fd {fd}) are not supported yet")]
    EntryProgram { map: Arc<str>, map_type: u32, fd: i32 },
    #[error("map {map}: qsize {qsize} larger than {max}")]
    QueueSize { map: Arc<str>, qsize: u32, max: u32 },
    #[error("map {map}: CPU {cpu} does not exist ({ncpus} CPUs)")]
    NoSuchCpu { map: Arc<str>, cpu: u32, ncpus: usize },
    #[error("map {map}: index {index} out of range for a delete (max_entries {max_entries})")]
    DeleteOutOfRange { map: Arc<str>, index: u32, max_entries: u32 },
    #[error("map {map}: ring buffer full")]
    RingFull { map: Arc<str> },
    #[error("map {map}: slot {index} is CPU {index}'s, not CPU {cpu}'s")]
    OtherCpuSlot { map: Arc<str>, index: u32, cpu: usize },
    #[error("map {map}: slot {index}'s ring is full")]
    PerfRingFull { map: Arc<str>, index: u32 },
    #[error("map {map}: a perf event array's slots hold perf events and cannot be read")]
    PerfSlotUnreadable { map: Arc<str> },
    #[error("map {map}: {addr:#x} is not a record reserved in this ring buffer and not yet submitted or discarded")]
    NotReserved { map: Arc<str>, addr: u64 },
    #[error("map {map}: key of {len} bytes, key_size is {expected}")]
    KeyLen { map: Arc<str>, len: usize, expected: u32 },
    #[error("map {map}: value of {len} bytes, expected {expected}")]
    ValueLen { map: Arc<str>, len: usize, expected: usize },
    #[error("map {map}: invalid update flags {flags:#x}")]
    InvalidFlags { map: Arc<str>, flags: u64 },
    #[error("map {map}: BPF_F_LOCK needs a struct bpf_spin_lock in the value")]
    NoSpinLock { map: Arc<str> },
    #[error("map {map}: a struct bpf_spin_lock is not supported in a {} map (arrays and plain hash maps only)", map_type::name(*map_type))]
    SpinLockType { map: Arc<str>, map_type: u32 },
    #[error("map {map}: struct bpf_spin_lock at offset {off} does not fit a {value_size}-byte value aligned")]
    SpinLockPlace { map: Arc<str>, off: u32, value_size: u32 },
    #[error("map {map}: a struct bpf_timer is not supported in a {} map (arrays, hash and LRU hash maps only)", map_type::name(*map_type))]
    TimerType { map: Arc<str>, map_type: u32 },
    #[error("map {map}: struct bpf_timer at offset {off} does not fit a {value_size}-byte value 8-aligned, clear of its bpf_spin_lock")]
    TimerPlace { map: Arc<str>, off: u32, value_size: u32 },
    #[error("map {map}: its bpf_spin_lock stayed taken too long (a program waits 10 ms, user space a second)")]
    LockTimeout { map: Arc<str> },
    #[error("map {map}: no such key")]
    NotFound { map: Arc<str> },
    #[error("map {map}: key already exists")]
    Exists { map: Arc<str> },
    #[error("map {map}: index {index} out of range (max_entries {max_entries})")]
    IndexOutOfRange { map: Arc<str>, index: u32, max_entries: u32 },
    #[error("map {map}: full ({max_entries} entries)")]
    Full { map: Arc<str>, max_entries: u32 },
    #[error("map {map}: no space left ({max_entries} entries)")]
    NoSpace { map: Arc<str>, max_entries: u32 },
    #[error("map {map}: prefix length {prefixlen} larger than {max}")]
    PrefixLen { map: Arc<str>, prefixlen: u32, max: u32 },
    #[error("map {map}: no element could be freed for a new entry")]
    NoFreeElement { map: Arc<str> },
    #[error("map {map}: elements of an array map cannot be deleted")]
    DeleteFromArray { map: Arc<str> },
    #[error("map {map}: read-only ({why})")]
    ReadOnly { map: Arc<str>, why: ReadOnlyReason },
    #[error("map {map}: write-only for user space (BPF_F_WRONLY)")]
    WriteOnly { map: Arc<str> },
    #[error("map {map}: CPU {cpu} out of range ({ncpus} CPUs)")]
    CpuOutOfRange { map: Arc<str>, cpu: usize, ncpus: usize },
    #[error("map {map}: a queue or stack has no keys to delete or list (push, pop and peek its elements)")]
    NoKeys { map: Arc<str> },
    #[error(
        "map {map}: lookup-and-delete needs a queue or stack (a pop) or a hash map (with a key)"
    )]
    PopUnsupported { map: Arc<str> },
    #[error(
        "map {map}: a bloom filter has no keys to delete or list (push values, peek for them)"
    )]
    BloomNoKeys { map: Arc<str> },
}

impl MapError {
    /// The negative errno a helper (or bpf(2)) returns for this error.
    pub fn errno(&self) -> i64 {
        use errno::*;
        let e = match self {
            MapError::Unsupported { .. }
            | MapError::KeySize { .. }
            | MapError::ValueSize { .. }
            | MapError::ZeroEntries { .. }
            | MapError::MapFlags { .. }
            | MapError::NeedsNoPrealloc { .. }
            | MapError::ZeroCpus { .. }
            | MapError::InitialTooLong { .. }
            | MapError::InitialNotArray { .. }
            | MapError::KeyLen { .. }
            | MapError::ValueLen { .. }
            | MapError::InvalidFlags { .. }
            | MapError::NoSpinLock { .. }
            | MapError::SpinLockPlace { .. }
            | MapError::TimerPlace { .. }
            | MapError::PrefixLen { .. }
            | MapError::DeleteFromArray { .. }
            | MapError::CpuOutOfRange { .. }
            | MapError::ValueSizeChoice { .. }
            | MapError::MaxEntries { .. }
            | MapError::RingSize { .. }
            | MapError::NoInnerTemplate { .. }
            | MapError::NotOuter { .. }
            | MapError::NestedOuter { .. }
            | MapError::InnerMismatch { .. }
            | MapError::NotFromProgram { .. }
            | MapError::ZeroIfindex { .. }
            | MapError::DeleteOutOfRange { .. }
            | MapError::NoKeys { .. }
            | MapError::MapExtra { .. }
            | MapError::NotReserved { .. } => EINVAL,
            MapError::EntryProgram { map_type, .. } => {
                // An fd that names no usable program: `__dev_map_alloc_node` fails with
                // EINVAL, `__cpu_map_entry_alloc` returns NULL and the update ENOMEM.
                if *map_type == map_type::CPUMAP {
                    ENOMEM
                } else {
                    EINVAL
                }
            }
            MapError::InnerNotSupported { .. }
            | MapError::NoElements { .. }
            | MapError::PopUnsupported { .. }
            | MapError::PerfSlotUnreadable { .. } => ENOTSUPP,
            MapError::InnerByFd { .. } => EBADF,
            MapError::SpinLockType { .. }
            | MapError::TimerType { .. }
            | MapError::BloomNoKeys { .. } => EOPNOTSUPP,
            MapError::LockTimeout { .. } => EBUSY,
            MapError::QueueSize { .. } => EOVERFLOW,
            MapError::NoSuchCpu { .. } => ENODEV,
            MapError::RingFull { .. } => EAGAIN,
            MapError::OtherCpuSlot { .. } => EOPNOTSUPP,
            MapError::PerfRingFull { .. } => ENOSPC,
            MapError::ValueTooLarge { .. }
            | MapError::KeyValueTooLarge { .. }
            | MapError::TooManyEntries { .. }
            | MapError::IndexOutOfRange { .. }
            | MapError::Full { .. } => E2BIG,
            MapError::NeedsPrealloc { .. } => ENOTSUPP,
            MapError::TooLarge { .. }
            | MapError::OutOfMemory { .. }
            | MapError::NoFreeElement { .. } => ENOMEM,
            MapError::NotFound { .. } => ENOENT,
            MapError::Exists { .. } => EEXIST,
            MapError::NoSpace { .. } => ENOSPC,
            MapError::ReadOnly { .. } | MapError::WriteOnly { .. } => EPERM,
        };
        -e
    }

    /// Name of the map the error is about.
    pub fn map(&self) -> &str {
        match self {
            MapError::Unsupported { map, .. }
            | MapError::KeySize { map, .. }
            | MapError::ValueSize { map, .. }
            | MapError::ValueTooLarge { map, .. }
            | MapError::KeyValueTooLarge { map, .. }
            | MapError::ZeroEntries { map }
            | MapError::TooManyEntries { map, .. }
            | MapError::MapFlags { map, .. }
            | MapError::NeedsPrealloc { map }
            | MapError::NeedsNoPrealloc { map }
            | MapError::TooLarge { map, .. }
            | MapError::OutOfMemory { map, .. }
            | MapError::ZeroCpus { map }
            | MapError::InitialTooLong { map, .. }
            | MapError::InitialNotArray { map }
            | MapError::KeyLen { map, .. }
            | MapError::ValueLen { map, .. }
            | MapError::InvalidFlags { map, .. }
            | MapError::NoSpinLock { map }
            | MapError::SpinLockType { map, .. }
            | MapError::SpinLockPlace { map, .. }
            | MapError::TimerType { map, .. }
            | MapError::TimerPlace { map, .. }
            | MapError::LockTimeout { map }
            | MapError::NotFound { map }
            | MapError::Exists { map }
            | MapError::IndexOutOfRange { map, .. }
            | MapError::Full { map, .. }
            | MapError::NoSpace { map, .. }
            | MapError::PrefixLen { map, .. }
            | MapError::NoFreeElement { map }
            | MapError::DeleteFromArray { map }
            | MapError::ReadOnly { map, .. }
            | MapError::WriteOnly { map }
            | MapError::CpuOutOfRange { map, .. }
            | MapError::ValueSizeChoice { map, .. }
            | MapError::MaxEntries { map, .. }
            | MapError::RingSize { map, .. }
            | MapError::NoInnerTemplate { map }
            | MapError::NotOuter { map }
            | MapError::NestedOuter { map, .. }
            | MapError::InnerNotSupported { map, .. }
            | MapError::InnerMismatch { map, .. }
            | MapError::InnerByFd { map }
            | MapError::NotFromProgram { map, .. }
            | MapError::NoElements { map }
            | MapError::ZeroIfindex { map }
            | MapError::EntryProgram { map, .. }
            | MapError::QueueSize { map, .. }
            | MapError::NoSuchCpu { map, .. }
            | MapError::DeleteOutOfRange { map, .. }
            | MapError::RingFull { map }
            | MapError::OtherCpuSlot { map, .. }
            | MapError::PerfRingFull { map, .. }
            | MapError::PerfSlotUnreadable { map }
            | MapError::NoKeys { map }
            | MapError::PopUnsupported { map }
            | MapError::BloomNoKeys { map }
            | MapError::MapExtra { map, .. }
            | MapError::NotReserved { map, .. } => map,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_values_are_the_kernels() {
        let m: Arc<str> = Arc::from("m");
        assert_eq!(MapError::NotFound { map: m.clone() }.errno(), -2);
        assert_eq!(MapError::Exists { map: m.clone() }.errno(), -17);
        assert_eq!(MapError::Full { map: m.clone(), max_entries: 1 }.errno(), -7);
        assert_eq!(
            MapError::IndexOutOfRange { map: m.clone(), index: 9, max_entries: 1 }.errno(),
            -7
        );
        assert_eq!(MapError::InvalidFlags { map: m.clone(), flags: 3 }.errno(), -22);
        assert_eq!(MapError::DeleteFromArray { map: m.clone() }.errno(), -22);
        let frozen = MapError::ReadOnly { map: m.clone(), why: ReadOnlyReason::Frozen };
        assert_eq!(frozen.errno(), -1);
        assert_eq!(MapError::TooLarge { map: m.clone(), bytes: 1, limit: 0 }.errno(), -12);
        let big =
            MapError::KeyValueTooLarge { map: m.clone(), key_size: 4, value_size: 1 << 22, max: 1 };
        assert_eq!(big.errno(), -7);
        let array_key = MapError::KeySize { map: m.clone(), key_size: 8, min: 4, max: 4 };
        assert_eq!(array_key.errno(), -22);
        let zero = MapError::ValueSize { map: m.clone(), value_size: 0, min: 1, max: 8 };
        assert_eq!(zero.errno(), -22);
        assert_eq!(MapError::ValueTooLarge { map: m.clone(), value_size: 9, max: 8 }.errno(), -7);
        assert_eq!(MapError::TooManyEntries { map: m.clone(), max_entries: 9, max: 8 }.errno(), -7);
        assert_eq!(MapError::NeedsPrealloc { map: m.clone() }.errno(), -524);
        assert_eq!(MapError::NoSpace { map: m.clone(), max_entries: 1 }.errno(), -28);
        assert_eq!(MapError::WriteOnly { map: m.clone() }.errno(), -1);
        assert_eq!(MapError::NoSpinLock { map: m.clone() }.errno(), -22);
        let prog = |map_type| MapError::EntryProgram { map: m.clone(), map_type, fd: 3 };
        assert_eq!(prog(map_type::DEVMAP).errno(), -22);
        assert_eq!(prog(map_type::DEVMAP_HASH).errno(), -22);
        assert_eq!(prog(map_type::CPUMAP).errno(), -12);
        assert_eq!(MapError::NoElements { map: m.clone() }.errno(), -524);
        assert_eq!(MapError::RingFull { map: m.clone() }.errno(), -11);
        assert_eq!(MapError::InnerByFd { map: m.clone() }.errno(), -9);
        assert_eq!(MapError::QueueSize { map: m.clone(), qsize: 1, max: 0 }.errno(), -75);
        assert_eq!(MapError::NoSuchCpu { map: m.clone(), cpu: 2, ncpus: 2 }.errno(), -19);
        let t = map_type::PROG_ARRAY;
        assert_eq!(MapError::InnerNotSupported { map: m, map_type: t }.errno(), -524);
    }

    #[test]
    fn messages_name_the_map() {
        let e = MapError::Unsupported { map: Arc::from("xsks"), map_type: map_type::XSKMAP };
        assert_eq!(e.map(), "xsks");
        assert_eq!(e.to_string(), "map xsks: type xskmap (17) is not supported");
    }
}
