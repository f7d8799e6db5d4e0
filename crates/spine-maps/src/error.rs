//! Map errors, each mapped to the errno the kernel returns for the same condition, so a
//! helper's return value and a control tool's message agree with bpf(2).

use std::sync::Arc;

use spine_abi::map_type;

pub use spine_abi::errno;

/// `ENOTSUPP` (524), the kernel-internal errno that `bpf(2)` leaks for an LRU hash map
/// created with `BPF_F_NO_PREALLOC`. Not in `spine_abi::errno` (it is not a uapi errno).
pub const ENOTSUPP: i64 = 524;

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
}

impl std::fmt::Display for ReadOnlyReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ReadOnlyReason::Frozen => "frozen",
            ReadOnlyReason::RdonlyMap => "created with BPF_F_RDONLY",
            ReadOnlyReason::RdonlyProg => "read-only for programs (BPF_F_RDONLY_PROG)",
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

    // ---- operations ----
    #[error("map {map}: key of {len} bytes, key_size is {expected}")]
    KeyLen { map: Arc<str>, len: usize, expected: u32 },
    #[error("map {map}: value of {len} bytes, expected {expected}")]
    ValueLen { map: Arc<str>, len: usize, expected: usize },
    #[error("map {map}: invalid update flags {flags:#x}")]
    InvalidFlags { map: Arc<str>, flags: u64 },
    #[error("map {map}: BPF_F_LOCK needs a struct bpf_spin_lock in the value (not supported)")]
    NoSpinLock { map: Arc<str> },
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
            | MapError::PrefixLen { .. }
            | MapError::DeleteFromArray { .. }
            | MapError::CpuOutOfRange { .. } => EINVAL,
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
            | MapError::CpuOutOfRange { map, .. } => map,
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
        assert_eq!(MapError::NoSpinLock { map: m }.errno(), -22);
    }

    #[test]
    fn messages_name_the_map() {
        let e = MapError::Unsupported { map: Arc::from("ring"), map_type: map_type::RINGBUF };
        assert_eq!(e.map(), "ring");
        assert_eq!(e.to_string(), "map ring: type ringbuf (27) is not supported");
    }
}
