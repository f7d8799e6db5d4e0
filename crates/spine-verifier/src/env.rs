//! What a program is verified against: its context, the helpers and maps it may use,
//! and the limits that keep verification itself bounded.

use crate::ctx::CtxLayout;
use crate::helpers::HelperTable;
use std::fmt;

/// A map as the verifier needs to know it. Built by the loader from the object's map
/// specifications, in the order of the `lddw` map indices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapInfo {
    pub name: String,
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    /// The program may not write values (`BPF_F_RDONLY_PROG`, `.rodata`).
    pub read_only: bool,
    /// For `array_of_maps`/`hash_of_maps`: the template every inner map matches.
    pub inner: Option<Box<MapInfo>>,
    /// Offset of the value's `struct bpf_spin_lock` (from BTF): the only place
    /// `bpf_spin_lock` may point, and bytes no load or store may touch.
    pub spin_lock: Option<u32>,
    /// Offset of the value's `struct bpf_timer` (from BTF; 16 bytes, 8-aligned): the
    /// only place the timer helpers may point, and bytes no load or store may touch.
    pub timer: Option<u32>,
    /// The value of a frozen, read-only, single-element array (`.rodata` once the
    /// loader wrote and froze it): a load at a constant offset reads a known number
    /// from it, as the kernel's `bpf_map_direct_read` does, so code that a `const
    /// volatile` setting rules out is never explored. `None`: values are unknown.
    pub frozen: Option<std::sync::Arc<[u8]>>,
}

impl MapInfo {
    pub fn new(
        name: &str,
        map_type: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
    ) -> Self {
        MapInfo {
            name: name.to_string(),
            map_type,
            key_size,
            value_size,
            max_entries,
            read_only: false,
            inner: None,
            spin_lock: None,
            timer: None,
            frozen: None,
        }
    }
}

/// Bounds on the verifier's own work and on what a program may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Instructions the analysis may process over all paths (the kernel's
    /// `BPF_COMPLEXITY_LIMIT_INSNS`, 1M).
    pub max_insns: u64,
    /// Abstract states kept for pruning and at loop heads, all together.
    pub max_states: usize,
    /// Bytes of abstract state held at once (kept and waiting to be explored): bounds
    /// the verifier's memory on hostile programs with deep call chains and wide stacks.
    pub max_state_bytes: usize,
    /// Deepest chain of bpf-to-bpf calls, counting the entry frame (the kernel: 8).
    pub max_call_frames: usize,
    /// Stack bytes of one frame (the kernel's `MAX_BPF_STACK`, 512).
    pub stack_per_frame: u32,
    /// Stack bytes of all frames of one call chain together, each frame's depth
    /// rounded up to 16 bytes as the kernel's JIT does (the kernel: 512).
    pub max_combined_stack: u32,
    /// Bytes of log kept; the rest is cut with a marker.
    pub max_log: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_insns: 1_000_000,
            max_states: 64 * 1024,
            max_state_bytes: 256 << 20,
            max_call_frames: spine_isa::MAX_CALL_FRAMES,
            stack_per_frame: spine_isa::STACK_SIZE as u32,
            max_combined_stack: spine_isa::STACK_SIZE as u32,
            max_log: 16 << 20,
        }
    }
}

/// Everything [`crate::verify`] checks a program against.
pub struct VerifyEnv<'a> {
    /// Context fields of this program type.
    pub ctx: &'a CtxLayout,
    /// Which helpers may be called, with their prototypes (already filtered by domain).
    pub helpers: &'a dyn HelperTable,
    /// Maps by the index `lddw` uses.
    pub maps: &'a [MapInfo],
    pub limits: Limits,
    /// 0: no log; 1: the error and the state at it; 2: every instruction with its state.
    pub log_level: u8,
}

impl fmt::Debug for VerifyEnv<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VerifyEnv")
            .field("ctx", &self.ctx)
            .field("maps", &self.maps)
            .field("limits", &self.limits)
            .field("log_level", &self.log_level)
            .finish_non_exhaustive()
    }
}
