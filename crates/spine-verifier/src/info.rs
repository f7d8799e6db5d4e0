//! What a successful verification proves, per instruction and per function, for the
//! engines that run the program: which memory each load and store touches (so the
//! runtime can rewrite context loads and a JIT can drop checks) and how much stack
//! each function uses.

/// The memory an instruction accesses on every path that reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemAccess {
    /// The stack (of the instruction's own frame or, through a pointer argument, a
    /// caller's).
    Stack,
    Packet,
    PacketMeta,
    /// The value of this map (index as in `lddw`; inner maps follow the program's maps).
    MapValue {
        map: usize,
    },
    /// The context field with this index in [`crate::CtxLayout::fields`].
    Ctx {
        field: usize,
    },
    /// Helper-provided memory (a ring-buffer record).
    Mem,
    /// A map key handed to a callback.
    MapKey,
    /// Different regions on different paths, none of them the context.
    Mixed,
}

/// Per-instruction facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InsnInfo {
    /// Some path reaches the instruction (unreachable code is allowed, never run).
    pub reached: bool,
    /// For loads, stores and atomics: the memory proven accessed, in bounds.
    pub access: Option<MemAccess>,
}

impl InsnInfo {
    /// Records one more path's access; `Err` if it mixes the context with other memory,
    /// which a rewritten context load could not serve.
    pub(crate) fn record(&mut self, a: MemAccess) -> Result<(), ()> {
        self.access = Some(match self.access {
            None => a,
            Some(p) if p == a => a,
            Some(MemAccess::Ctx { .. }) => return Err(()),
            Some(_) if matches!(a, MemAccess::Ctx { .. }) => return Err(()),
            Some(_) => MemAccess::Mixed,
        });
        Ok(())
    }
}

/// One function of the program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubprogInfo {
    pub entry: usize,
    /// One past its last instruction.
    pub end: usize,
    /// Deepest stack byte used below its frame pointer.
    pub stack_depth: u32,
    /// Named by `lddw PSEUDO_FUNC` (a callback of `bpf_loop`/`bpf_for_each_map_elem`).
    pub is_callback: bool,
    /// Contains a `bpf_tail_call`.
    pub has_tail_call: bool,
}

/// A verified program, with what the verification proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub insn_info: Vec<InsnInfo>,
    /// Targets of back-edges: where the analysis joined and widened.
    pub loop_heads: Vec<usize>,
    pub subprogs: Vec<SubprogInfo>,
    /// Some helper may read stack bytes the program never wrote (allowed, as the kernel
    /// allows it for privileged programs). The engine must then zero each call frame's
    /// stack when the frame is entered, so no bytes of an earlier invocation or call
    /// can reach a map.
    pub stack_zeroing: bool,
    /// The `bpf_loop` call sites the kernel inlines (`inline_bpf_loop`): flags a known 0
    /// and one callback on every path. There the kernel checks the 64-bit count and
    /// `-E2BIG` is a 32-bit value (r0 = 0xffff_fff9), unlike the helper's. Sorted.
    pub inlined_loops: Vec<usize>,
    pub insns_processed: u64,
    /// Most abstract states held at once (pruning cache and loop heads).
    pub peak_states: usize,
    pub log: String,
}
