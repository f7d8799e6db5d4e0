//! Why a program was refused: the instruction, the reason as a typed kind, and the
//! abstract register and stack state at that point, printed like the kernel's log.

use spine_isa::IsaErrorKind;
use std::fmt;

/// A helper's kernel name, for messages.
fn hname(id: u32) -> &'static str {
    spine_abi::helper::name(id).unwrap_or("helper")
}

fn alu_name(op: u8) -> &'static str {
    match op {
        0x00 => "+=",
        0x10 => "-=",
        0x20 => "*=",
        0x30 => "/=",
        0x40 => "|=",
        0x50 => "&=",
        0x60 => "<<=",
        0x70 => ">>=",
        0x90 => "%=",
        0xa0 => "^=",
        0xc0 => "s>>=",
        _ => "op",
    }
}

/// Where a pointer would have escaped to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeakTarget {
    MapValue,
    Packet,
    Ctx,
    Mem,
    /// Returned in r0 from the program.
    Return,
    /// Passed where a helper takes a plain number.
    HelperArg,
    /// Turned into a number (partial copy, atomic operand).
    Scalar,
    /// Into stack memory a helper reads or writes.
    HelperMem,
}

impl fmt::Display for LeakTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LeakTarget::MapValue => "map",
            LeakTarget::Packet => "packet",
            LeakTarget::Ctx => "ctx",
            LeakTarget::Mem => "mem",
            LeakTarget::Return => "the return value",
            LeakTarget::HelperArg => "helper function",
            LeakTarget::Scalar => "a scalar",
            LeakTarget::HelperMem => "memory a helper accesses",
        })
    }
}

/// The reason a program was refused; one variant per rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyErrorKind {
    #[error("{0}")]
    Isa(IsaErrorKind),
    #[error("BPF_LD_[ABS|IND] (legacy packet access) is not supported")]
    LegacyPacketLoad,
    #[error("unsupported instruction: {0}")]
    UnsupportedInsn(&'static str),
    #[error("jump out of range from insn {from} to {to} (crosses a function boundary)")]
    JumpOutOfSubprog { from: usize, to: usize },
    #[error("last insn of the function at {entry} is not an exit or jmp")]
    SubprogFallsThrough { entry: usize },
    #[error("map index {index} does not exist ({count} maps)")]
    BadMapIndex { index: u32, count: usize },
    #[error("direct value access into map {map} at offset {off} is not allowed")]
    BadMapValueRef { map: u32, off: u32 },

    #[error("R{reg} !read_ok (uninitialised register)")]
    UninitRegister { reg: u8 },
    #[error("invalid read from stack off {off} size {size} (uninitialised)")]
    UninitStack { off: i64, size: u64 },
    #[error("invalid stack access off={off} size={size}")]
    StackOutOfBounds { off: i64, size: u64 },
    #[error("misaligned stack access off={off} size={size}")]
    MisalignedStack { off: i64, size: u64 },
    #[error("invalid size of register spill or fill at stack off {off} (size {size})")]
    InvalidSpillSize { off: i64, size: u64 },
    #[error("spilled pointer at stack off {off} in range of a variable-offset stack write")]
    VarOffsetOverSpill { off: i64 },
    #[error("cannot spill a pointer to a callee's stack into the stack of frame {frame}")]
    StackPointerToCaller { frame: usize },
    #[error("cannot return a pointer to the callee's stack to the caller")]
    ReturnStackPointer,

    #[error(
        "invalid access to packet, off={off} size={size}, R{reg}(id={id},off={ptr_off},r={range})"
    )]
    PacketOutOfBounds { reg: u8, off: i64, size: u64, id: u32, ptr_off: i64, range: i64 },
    #[error("invalid access to map value, value_size={value_size} off={off} size={size}")]
    MapValueOutOfBounds { reg: u8, map: u32, off: i64, size: u64, value_size: u32 },
    #[error("invalid access to memory, mem_size={mem_size} off={off} size={size}")]
    MemOutOfBounds { reg: u8, off: i64, size: u64, mem_size: u32 },
    #[error(
        "R{reg} min value is negative, either use unsigned index or do a if (index >=0) check"
    )]
    NegativeOffset { reg: u8, min: i64 },
    #[error("R{reg} unbounded memory access, make sure to bounds check any such access")]
    UnboundedAccess { reg: u8 },
    #[error("invalid bpf_context access off={off} size={size}")]
    CtxAccess { off: i64, size: u64 },
    #[error("write to read-only context field `{field}` at off={off}")]
    ReadOnlyCtx { off: i64, field: &'static str },
    #[error("R{reg} invalid mem access '{kind}'")]
    InvalidMemAccess { reg: u8, kind: &'static str },
    #[error("R{reg} invalid mem access '{kind}': null-check it first")]
    NullableDeref { reg: u8, kind: &'static str },
    #[error("write into read-only map '{name}'")]
    ReadOnlyMap { map: u32, name: String },
    /// A load through an XSKMAP lookup's pointer (the kernel's `PTR_TO_XDP_SOCK`) other
    /// than `struct bpf_xdp_sock`'s `queue_id`, a `u32` at offset 0.
    #[error("R{reg} invalid xdp_sock access off={off} size={size} (map '{name}': only queue_id, 4 bytes at offset 0)")]
    XdpSockAccess { reg: u8, name: String, off: i32, size: u8 },
    /// A store or atomic through an XSKMAP lookup's pointer.
    #[error("R{reg} cannot write into xdp_sock (map '{name}')")]
    XdpSockWrite { reg: u8, name: String },
    #[error("misaligned access off={off} size={size} (atomic operations need natural alignment)")]
    MisalignedAccess { reg: u8, off: i64, size: u64 },
    #[error("BPF_ATOMIC stores into R{reg} {kind} are not allowed")]
    AtomicNotAllowed { reg: u8, kind: &'static str },
    #[error("same insn cannot be used with the context and with other pointers")]
    MixedCtxAccess,

    #[error("R{reg} leaks addr into {into}")]
    PointerLeak { reg: u8, into: LeakTarget },
    #[error("R{reg} pointer arithmetic on {kind} prohibited")]
    PointerArithProhibited { reg: u8, kind: &'static str },
    #[error("R{reg} {op} on pointer prohibited")]
    PointerOpProhibited { reg: u8, op: &'static str },
    /// `op` is the ALU operation (`BPF_ADD`, `BPF_SUB`, ...).
    #[error("R{reg} pointer {} pointer prohibited ({left} and {right})", alu_name(*op))]
    PointerPointerArith { reg: u8, op: u8, left: &'static str, right: &'static str },
    #[error("math between {kind} pointer and a register with unbounded or too large value is not allowed")]
    PointerOffsetUnbounded { reg: u8, kind: &'static str },
    #[error("R{reg} pointer comparison prohibited ({left} and {right})")]
    PointerComparison { reg: u8, left: &'static str, right: &'static str },

    #[error("unknown helper {id}")]
    UnknownHelper { id: u32 },
    #[error("helper {name}#{id} is not allowed for this program")]
    HelperNotAllowed { id: u32, name: &'static str },
    #[error("{}: R{reg} type={found} expected={expected}", hname(*helper))]
    HelperArgType { helper: u32, reg: u8, expected: &'static str, found: &'static str },
    #[error("{}: R{reg} unbounded memory access size (umax={umax})", hname(*helper))]
    HelperSizeUnbounded { helper: u32, reg: u8, umax: u64 },
    #[error("{}: R{reg} min value is negative (size {smin})", hname(*helper))]
    HelperSizeNegative { helper: u32, reg: u8, smin: i64 },
    #[error("{}: R{reg} invalid zero-sized read", hname(*helper))]
    HelperSizeZero { helper: u32, reg: u8 },
    #[error("{}: R{reg} size must be a known constant", hname(*helper))]
    HelperSizeNotConst { helper: u32, reg: u8 },
    #[error("cannot pass map {map} of type {} into func {}", spine_abi::map_type::name(*map_type), hname(*helper))]
    MapTypeMismatch { helper: u32, map: u32, map_type: u32 },
    #[error("{}: R{reg} is not a reference acquired by bpf_ringbuf_reserve", hname(*helper))]
    InvalidRelease { helper: u32, reg: u8 },
    #[error(
        "unreleased reference id={id} (a ring buffer record was neither submitted nor discarded)"
    )]
    UnreleasedReference { id: u32 },
    #[error("callback returns R0 outside [0, 1]: {found}")]
    CallbackReturn { found: String },

    #[error("the call stack of {frames} frames is too deep")]
    CallTooDeep { frames: usize },
    #[error("combined stack size of {frames} calls is {bytes}. Too large")]
    CombinedStackTooLarge { frames: usize, bytes: u32 },
    #[error(
        "tail_calls are not allowed when call stack of previous frames is {bytes} bytes. Too large"
    )]
    TailCallStack { bytes: u32 },
    #[error("tail_call would lead to reference leak")]
    TailCallWithReference,
    /// The kernel refuses a tail call straight in a callback's body (a callee that
    /// tail-calls may still run from a callback, as kernel 6.18 allows).
    #[error("cannot tail call within a callback function")]
    TailCallInCallback,

    #[error("bpf_spin_lock while a lock is already held")]
    LockAlreadyHeld,
    #[error("bpf_spin_unlock without a taken lock")]
    UnlockWithoutLock,
    #[error("bpf_spin_unlock of different lock (held: map {held_map}'s value with pointer id {held_id}; given: map {given_map}'s, id {given_id})")]
    UnlockOtherLock { held_map: u16, held_id: u32, given_map: u16, given_id: u32 },
    #[error("function calls are not allowed while holding a lock")]
    CallWhileLocked,
    #[error("bpf_spin_unlock is missing at exit")]
    ExitWithLock,
    #[error("map '{name}' has no valid bpf_spin_lock (its value type in BTF has none)")]
    NoSpinLock { map: u32, name: String },
    #[error("off {off} doesn't point to 'struct bpf_spin_lock' that is at {at}")]
    SpinLockOffset { off: i64, at: u32 },
    #[error("R{reg} bpf_spin_lock cannot be accessed directly by load/store (map '{name}', bytes {at}..{end})", end = at + 4)]
    SpinLockAccess { reg: u8, name: String, at: u32 },

    #[error("map '{name}' has no valid bpf_timer (its value type in BTF has none)")]
    NoTimer { map: u32, name: String },
    #[error("off {off} doesn't point to 'struct bpf_timer' that is at {at}")]
    TimerOffset { off: i64, at: u32 },
    #[error("timer pointer in R1 is map {timer_map}'s value, the map pointer in R2 is map {map}")]
    TimerMapMismatch { timer_map: u16, map: u32 },
    #[error("R{reg} bpf_timer cannot be accessed directly by load/store (map '{name}', bytes {at}..{end})", end = at + 16)]
    TimerAccess { reg: u8, name: String, at: u32 },
    #[error("At async callback the register R0 has value {found}; should have been 0")]
    AsyncCallbackReturn { found: String },

    #[error("invalid access to the dynptr at stack off {dynptr} (byte off {off}): its 16 bytes may only be passed to dynptr helpers and kfuncs, or overwritten whole by stores at fixed offsets (which destroy it)")]
    DynptrAccess { off: i64, dynptr: i64 },
    #[error("{}: R{reg} dynptr has to be at a constant, 8-byte aligned stack offset with 16 bytes below the frame top (off={off})", hname(*helper))]
    DynptrOffset { helper: u32, reg: u8, off: i64 },
    #[error("{}: Expected an initialized dynptr as arg #{reg} (R{reg} points at stack off {off})", hname(*helper))]
    DynptrUninit { helper: u32, reg: u8, off: i64 },
    #[error("R{reg} cannot write into rdonly_mem (a bpf_dynptr_slice is read-only; use bpf_dynptr_slice_rdwr)")]
    ReadOnlySlice { reg: u8 },
    #[error("cannot spill a pointer to stack off {off}: it may be the buffer of a live bpf_dynptr_slice_rdwr slice, which a write through the slice could change")]
    SpillUnderSlice { off: i64 },

    #[error("program too complex: {reason} ({processed} insns processed, {states} states)")]
    TooComplex { reason: &'static str, processed: u64, states: usize },
}

impl VerifyErrorKind {
    /// The variant's name (`PacketOutOfBounds`), for tests and scripts.
    pub fn name(&self) -> &'static str {
        use VerifyErrorKind::*;
        match self {
            Isa(_) => "Isa",
            LegacyPacketLoad => "LegacyPacketLoad",
            UnsupportedInsn(_) => "UnsupportedInsn",
            JumpOutOfSubprog { .. } => "JumpOutOfSubprog",
            SubprogFallsThrough { .. } => "SubprogFallsThrough",
            BadMapIndex { .. } => "BadMapIndex",
            BadMapValueRef { .. } => "BadMapValueRef",
            UninitRegister { .. } => "UninitRegister",
            UninitStack { .. } => "UninitStack",
            StackOutOfBounds { .. } => "StackOutOfBounds",
            MisalignedStack { .. } => "MisalignedStack",
            InvalidSpillSize { .. } => "InvalidSpillSize",
            VarOffsetOverSpill { .. } => "VarOffsetOverSpill",
            StackPointerToCaller { .. } => "StackPointerToCaller",
            ReturnStackPointer => "ReturnStackPointer",
            PacketOutOfBounds { .. } => "PacketOutOfBounds",
            MapValueOutOfBounds { .. } => "MapValueOutOfBounds",
            MemOutOfBounds { .. } => "MemOutOfBounds",
            NegativeOffset { .. } => "NegativeOffset",
            UnboundedAccess { .. } => "UnboundedAccess",
            CtxAccess { .. } => "CtxAccess",
            ReadOnlyCtx { .. } => "ReadOnlyCtx",
            InvalidMemAccess { .. } => "InvalidMemAccess",
            NullableDeref { .. } => "NullableDeref",
            ReadOnlyMap { .. } => "ReadOnlyMap",
            XdpSockAccess { .. } => "XdpSockAccess",
            XdpSockWrite { .. } => "XdpSockWrite",
            MisalignedAccess { .. } => "MisalignedAccess",
            AtomicNotAllowed { .. } => "AtomicNotAllowed",
            MixedCtxAccess => "MixedCtxAccess",
            PointerLeak { .. } => "PointerLeak",
            PointerArithProhibited { .. } => "PointerArithProhibited",
            PointerOpProhibited { .. } => "PointerOpProhibited",
            PointerPointerArith { .. } => "PointerPointerArith",
            PointerOffsetUnbounded { .. } => "PointerOffsetUnbounded",
            PointerComparison { .. } => "PointerComparison",
            UnknownHelper { .. } => "UnknownHelper",
            HelperNotAllowed { .. } => "HelperNotAllowed",
            HelperArgType { .. } => "HelperArgType",
            HelperSizeUnbounded { .. } => "HelperSizeUnbounded",
            HelperSizeNegative { .. } => "HelperSizeNegative",
            HelperSizeZero { .. } => "HelperSizeZero",
            HelperSizeNotConst { .. } => "HelperSizeNotConst",
            MapTypeMismatch { .. } => "MapTypeMismatch",
            InvalidRelease { .. } => "InvalidRelease",
            UnreleasedReference { .. } => "UnreleasedReference",
            CallbackReturn { .. } => "CallbackReturn",
            CallTooDeep { .. } => "CallTooDeep",
            CombinedStackTooLarge { .. } => "CombinedStackTooLarge",
            TailCallStack { .. } => "TailCallStack",
            TailCallWithReference => "TailCallWithReference",
            TailCallInCallback => "TailCallInCallback",
            LockAlreadyHeld => "LockAlreadyHeld",
            UnlockWithoutLock => "UnlockWithoutLock",
            UnlockOtherLock { .. } => "UnlockOtherLock",
            CallWhileLocked => "CallWhileLocked",
            ExitWithLock => "ExitWithLock",
            NoSpinLock { .. } => "NoSpinLock",
            SpinLockOffset { .. } => "SpinLockOffset",
            SpinLockAccess { .. } => "SpinLockAccess",
            NoTimer { .. } => "NoTimer",
            TimerOffset { .. } => "TimerOffset",
            TimerMapMismatch { .. } => "TimerMapMismatch",
            TimerAccess { .. } => "TimerAccess",
            AsyncCallbackReturn { .. } => "AsyncCallbackReturn",
            DynptrAccess { .. } => "DynptrAccess",
            DynptrOffset { .. } => "DynptrOffset",
            DynptrUninit { .. } => "DynptrUninit",
            ReadOnlySlice { .. } => "ReadOnlySlice",
            SpillUnderSlice { .. } => "SpillUnderSlice",
            TooComplex { .. } => "TooComplex",
        }
    }

    /// [`VerifyErrorKind::name`], with the structural error's own name for
    /// [`VerifyErrorKind::Isa`]: `Isa(JumpIntoLddw)`.
    pub fn detail_name(&self) -> String {
        match self {
            VerifyErrorKind::Isa(k) => {
                let s = format!("{k:?}");
                format!("Isa({})", s.split(['(', ' ', '{']).next().unwrap_or(""))
            }
            k => k.name().to_string(),
        }
    }
}

/// A refused program: where, why, and the abstract state there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    /// Instruction index.
    pub pc: usize,
    /// The instruction, in the kernel log's syntax (`(61) r3 = *(u32 *)(r2 +8)`).
    pub insn: String,
    pub kind: VerifyErrorKind,
    /// Registers and stack at `pc`, like the kernel log: `R1=ctx() R2=pkt(off=0,r=14)`.
    pub state: String,
    /// The verifier log up to the error (empty at log level 0).
    pub log: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "insn {}: {}: {}", self.pc, self.insn, self.kind)?;
        if !self.state.is_empty() {
            write!(f, "\n{}", self.state)?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_stay_small_enough_to_return() {
        // Callers return `Result<_, VerifyError>` freely: keep it under clippy's
        // `result_large_err` threshold.
        assert!(std::mem::size_of::<VerifyError>() < 128, "{}", std::mem::size_of::<VerifyError>());
    }
}
