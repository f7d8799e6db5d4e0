//! Helper prototypes: the argument and return types the kernel declares for each
//! helper (`struct bpf_func_proto`), and the table a protection domain filters.

use spine_abi::{helper as h, map_type as mt};

/// What a helper argument register must hold (the kernel's `enum bpf_arg_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgType {
    /// Not an argument of this helper; not checked.
    DontCare,
    /// Any initialised scalar (`ARG_ANYTHING`). Pointers are refused: they would leak.
    Anything,
    /// A map handle from `lddw map[N]` (`ARG_CONST_MAP_PTR`).
    ConstMapPtr,
    /// `key_size` readable bytes of the map in the map argument (`ARG_PTR_TO_MAP_KEY`).
    MapKey,
    /// `value_size` readable bytes of that map (`ARG_PTR_TO_MAP_VALUE`).
    MapValue,
    /// `value_size` writable bytes of that map's value that the helper fills
    /// (`ARG_PTR_TO_MAP_VALUE | MEM_UNINIT | MEM_WRITE`, `bpf_map_pop_elem`'s and
    /// `bpf_map_peek_elem`'s buffer): they need not be initialised and are afterwards.
    UninitMapValue,
    /// Memory of the size in the next argument (`ARG_PTR_TO_MEM`): read by the helper
    /// when `rdonly`, written otherwise; `maybe_null` also takes a NULL with size 0.
    Mem { rdonly: bool, maybe_null: bool },
    /// Memory of the size in the next argument that the helper fills
    /// (`ARG_PTR_TO_UNINIT_MEM`): it need not be initialised and is afterwards.
    UninitMem,
    /// Memory of a fixed size that the helper fills (`ARG_PTR_TO_FIXED_SIZE_MEM |
    /// MEM_UNINIT | MEM_ALIGNED`, `bpf_check_mtu`'s `mtu_len`).
    FixedUninitMem { size: u32 },
    /// Size of the memory in the previous argument, bounded and not zero.
    ConstSize,
    /// As `ConstSize`, but zero is allowed.
    ConstSizeOrZero,
    /// A known constant size for an allocation (`bpf_ringbuf_reserve`).
    ConstAllocSizeOrZero,
    /// The context pointer, unmodified (`ARG_PTR_TO_CTX`).
    Ctx,
    /// The context pointer, unmodified, or NULL: spine's message senders, whose context
    /// argument a `bpf_timer` callback (which has none) passes as 0.
    CtxOrNull,
    /// A callback from `lddw PSEUDO_FUNC` (`ARG_PTR_TO_FUNC`).
    Func,
    /// A stack pointer or NULL (`ARG_PTR_TO_STACK_OR_NULL`, a callback's context).
    StackOrNull,
    /// A ring-buffer record from `bpf_ringbuf_reserve`, released by the call.
    RingbufRecord,
    /// A `struct bpf_spin_lock` inside a map value.
    SpinLock,
    /// A `struct bpf_timer` inside a map value, at the timer's exact offset
    /// (`ARG_PTR_TO_TIMER`).
    Timer,
    /// 16 bytes of the program's stack at a constant, 8-aligned offset that become a
    /// dynptr (`ARG_PTR_TO_DYNPTR | MEM_UNINIT`, a kfunc's `ptr__uninit`). A dynptr
    /// already there is re-initialised; one only partly overlapped is refused.
    DynptrUninit,
    /// An initialised dynptr on the stack, pointed at its start (`ARG_PTR_TO_DYNPTR`).
    Dynptr,
    /// `bpf_dynptr_slice`'s `buffer__opt`: NULL, or memory of the size in the next
    /// argument that the call may fill.
    SliceBuffer,
    /// `buffer__szk`: a size known at verification (a constant), the size of the slice.
    ConstSizeKnown,
}

/// What a helper leaves in r0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetType {
    Integer,
    /// Nothing: r0 is uninitialised afterwards.
    Void,
    /// A value of the map argument, or NULL (for a map of maps: an inner map or NULL).
    MapValueOrNull,
    /// A ring-buffer record of the size in arg 2, or NULL; a reference to release.
    RingbufRecordOrNull,
    /// A slice of a dynptr of the constant size in the last size argument, or NULL:
    /// read-only (`bpf_dynptr_slice`) or writable (`bpf_dynptr_slice_rdwr`,
    /// `bpf_dynptr_data`); invalid once a helper may have moved the packet.
    SliceOrNull {
        rdonly: bool,
    },
}

/// A callback helper's calling convention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallbackKind {
    /// `bpf_loop(nr, cb, ctx, flags)`: `cb(u64 index, void *ctx)`.
    Loop,
    /// `bpf_for_each_map_elem(map, cb, ctx, flags)`: `cb(map, key *, value *, ctx)`.
    ForEachMapElem,
    /// `bpf_timer_set_callback(timer, cb)`: `cb(map, key *, value *)` runs later, on
    /// its own (the kernel's async callback): verified once as a function entered
    /// with those arguments, returning 0.
    Timer,
}

/// A helper's prototype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelperProto {
    pub id: u32,
    pub name: &'static str,
    pub args: [ArgType; 5],
    pub ret: RetType,
    /// The helper may move or resize the packet: every packet pointer is invalid after.
    pub changes_pkt_data: bool,
    pub callback: Option<CallbackKind>,
}

impl HelperProto {
    /// Number of leading arguments that are not `DontCare`.
    pub fn nargs(&self) -> usize {
        self.args.iter().take_while(|a| **a != ArgType::DontCare).count()
    }
}

/// Which helpers a program may call, with their prototypes.
pub trait HelperTable {
    fn proto(&self, id: u32) -> Option<&HelperProto>;
}

/// The kernel's prototype of helper `id`, for every helper in [`spine_abi::helper`].
pub fn kernel_helper_proto(id: u32) -> Option<HelperProto> {
    use ArgType::*;
    let d = DontCare;
    let mem_ro = Mem { rdonly: true, maybe_null: false };
    let (args, ret) = match id {
        h::MAP_LOOKUP_ELEM => ([ConstMapPtr, MapKey, d, d, d], RetType::MapValueOrNull),
        h::MAP_UPDATE_ELEM => ([ConstMapPtr, MapKey, MapValue, Anything, d], RetType::Integer),
        h::MAP_DELETE_ELEM => ([ConstMapPtr, MapKey, d, d, d], RetType::Integer),
        h::MAP_LOOKUP_PERCPU_ELEM => {
            ([ConstMapPtr, MapKey, Anything, d, d], RetType::MapValueOrNull)
        }
        h::MAP_PUSH_ELEM => ([ConstMapPtr, MapValue, Anything, d, d], RetType::Integer),
        h::MAP_POP_ELEM | h::MAP_PEEK_ELEM => {
            ([ConstMapPtr, UninitMapValue, d, d, d], RetType::Integer)
        }
        h::KTIME_GET_NS
        | h::GET_PRANDOM_U32
        | h::GET_SMP_PROCESSOR_ID
        | h::JIFFIES64
        | h::KTIME_GET_BOOT_NS
        | h::KTIME_GET_COARSE_NS
        | h::KTIME_GET_TAI_NS => ([d; 5], RetType::Integer),
        h::TRACE_PRINTK => ([mem_ro, ConstSize, d, d, d], RetType::Integer),
        h::TAIL_CALL => ([Ctx, ConstMapPtr, Anything, d, d], RetType::Void),
        h::REDIRECT => ([Anything, Anything, d, d, d], RetType::Integer),
        h::PERF_EVENT_OUTPUT => {
            ([Ctx, ConstMapPtr, Anything, mem_ro, ConstSizeOrZero], RetType::Integer)
        }
        h::REDIRECT_MAP => ([ConstMapPtr, Anything, Anything, d, d], RetType::Integer),
        h::CSUM_DIFF => {
            let m = Mem { rdonly: true, maybe_null: true };
            ([m, ConstSizeOrZero, m, ConstSizeOrZero, Anything], RetType::Integer)
        }
        h::XDP_ADJUST_HEAD | h::XDP_ADJUST_META | h::XDP_ADJUST_TAIL => {
            ([Ctx, Anything, d, d, d], RetType::Integer)
        }
        h::FIB_LOOKUP => (
            [Ctx, Mem { rdonly: false, maybe_null: false }, ConstSize, Anything, d],
            RetType::Integer,
        ),
        h::SPIN_LOCK | h::SPIN_UNLOCK => ([SpinLock, d, d, d, d], RetType::Void),
        h::RINGBUF_OUTPUT => {
            ([ConstMapPtr, mem_ro, ConstSizeOrZero, Anything, d], RetType::Integer)
        }
        h::RINGBUF_RESERVE => {
            ([ConstMapPtr, ConstAllocSizeOrZero, Anything, d, d], RetType::RingbufRecordOrNull)
        }
        h::RINGBUF_SUBMIT | h::RINGBUF_DISCARD => {
            ([RingbufRecord, Anything, d, d, d], RetType::Void)
        }
        h::RINGBUF_QUERY => ([ConstMapPtr, Anything, d, d, d], RetType::Integer),
        h::CHECK_MTU => {
            ([Ctx, Anything, FixedUninitMem { size: 4 }, Anything, Anything], RetType::Integer)
        }
        h::FOR_EACH_MAP_ELEM => ([ConstMapPtr, Func, StackOrNull, Anything, d], RetType::Integer),
        h::LOOP => ([Anything, Func, StackOrNull, Anything, d], RetType::Integer),
        h::TIMER_INIT => ([Timer, ConstMapPtr, Anything, d, d], RetType::Integer),
        h::TIMER_SET_CALLBACK => ([Timer, Func, d, d, d], RetType::Integer),
        h::TIMER_START => ([Timer, Anything, Anything, d, d], RetType::Integer),
        h::TIMER_CANCEL => ([Timer, d, d, d, d], RetType::Integer),
        h::XDP_GET_BUFF_LEN => ([Ctx, d, d, d, d], RetType::Integer),
        h::XDP_LOAD_BYTES => ([Ctx, Anything, UninitMem, ConstSize, d], RetType::Integer),
        h::XDP_STORE_BYTES => ([Ctx, Anything, mem_ro, ConstSize, d], RetType::Integer),
        // A timer callback has no context: it passes NULL to the senders, whose message
        // goes to the outbox of the invocation that runs them either way.
        h::DYNPTR_READ => {
            ([UninitMem, ConstSizeOrZero, Dynptr, Anything, Anything], RetType::Integer)
        }
        h::DYNPTR_WRITE => {
            ([Dynptr, Anything, mem_ro, ConstSizeOrZero, Anything], RetType::Integer)
        }
        h::DYNPTR_DATA => {
            ([Dynptr, Anything, ConstAllocSizeOrZero, d, d], RetType::SliceOrNull { rdonly: false })
        }
        // The kfuncs (spine numbers them as helpers; see `spine_abi::kfunc`).
        h::KFUNC_DYNPTR_FROM_XDP => ([Ctx, Anything, DynptrUninit, d, d], RetType::Integer),
        h::KFUNC_DYNPTR_SLICE | h::KFUNC_DYNPTR_SLICE_RDWR => (
            [Dynptr, Anything, SliceBuffer, ConstSizeKnown, d],
            RetType::SliceOrNull { rdonly: id == h::KFUNC_DYNPTR_SLICE },
        ),
        h::KFUNC_DYNPTR_ADJUST => ([Dynptr, Anything, Anything, d, d], RetType::Integer),
        h::KFUNC_DYNPTR_IS_NULL | h::KFUNC_DYNPTR_IS_RDONLY | h::KFUNC_DYNPTR_SIZE => {
            ([Dynptr, d, d, d, d], RetType::Integer)
        }
        h::KFUNC_DYNPTR_CLONE => ([Dynptr, DynptrUninit, d, d, d], RetType::Integer),
        h::SPINE_MSG_SEND => ([CtxOrNull, Anything, Anything, mem_ro, ConstSize], RetType::Integer),
        h::SPINE_MSG_POST => ([CtxOrNull, Anything, mem_ro, ConstSize, d], RetType::Integer),
        // `spine_msg_post_to(ctx, to, data, len, delay_ns)`: `to` (handler and target
        // extension) and `delay_ns` are plain scalars the helper checks.
        h::SPINE_MSG_POST_TO => {
            ([CtxOrNull, Anything, mem_ro, ConstSize, Anything], RetType::Integer)
        }
        h::SPINE_MSG_BULK_LEN => ([Ctx, d, d, d, d], RetType::Integer),
        h::SPINE_MSG_BULK_READ => ([Ctx, Anything, UninitMem, ConstSize, d], RetType::Integer),
        h::SPINE_MSG_BULK_WRITE => ([Ctx, Anything, mem_ro, ConstSize, d], RetType::Integer),
        h::SPINE_MSG_SEND_BULK => {
            ([CtxOrNull, Anything, Anything, Anything, Anything], RetType::Integer)
        }
        _ => return None,
    };
    Some(HelperProto {
        id,
        name: h::name(id)?,
        args,
        ret,
        changes_pkt_data: matches!(
            id,
            h::XDP_ADJUST_HEAD | h::XDP_ADJUST_META | h::XDP_ADJUST_TAIL
        ),
        callback: match id {
            h::LOOP => Some(CallbackKind::Loop),
            h::FOR_EACH_MAP_ELEM => Some(CallbackKind::ForEachMapElem),
            h::TIMER_SET_CALLBACK => Some(CallbackKind::Timer),
            _ => None,
        },
    })
}

/// Every helper id spine knows (those of [`spine_abi::helper`]).
pub const KNOWN_HELPERS: [u32; 59] = [
    h::MAP_LOOKUP_ELEM,
    h::MAP_UPDATE_ELEM,
    h::MAP_DELETE_ELEM,
    h::KTIME_GET_NS,
    h::TRACE_PRINTK,
    h::GET_PRANDOM_U32,
    h::GET_SMP_PROCESSOR_ID,
    h::TAIL_CALL,
    h::REDIRECT,
    h::PERF_EVENT_OUTPUT,
    h::CSUM_DIFF,
    h::XDP_ADJUST_HEAD,
    h::REDIRECT_MAP,
    h::XDP_ADJUST_META,
    h::XDP_ADJUST_TAIL,
    h::FIB_LOOKUP,
    h::MAP_PUSH_ELEM,
    h::MAP_POP_ELEM,
    h::MAP_PEEK_ELEM,
    h::SPIN_LOCK,
    h::SPIN_UNLOCK,
    h::JIFFIES64,
    h::KTIME_GET_BOOT_NS,
    h::RINGBUF_OUTPUT,
    h::RINGBUF_RESERVE,
    h::RINGBUF_SUBMIT,
    h::RINGBUF_DISCARD,
    h::RINGBUF_QUERY,
    h::KTIME_GET_COARSE_NS,
    h::CHECK_MTU,
    h::FOR_EACH_MAP_ELEM,
    h::TIMER_INIT,
    h::TIMER_SET_CALLBACK,
    h::TIMER_START,
    h::TIMER_CANCEL,
    h::LOOP,
    h::XDP_GET_BUFF_LEN,
    h::XDP_LOAD_BYTES,
    h::XDP_STORE_BYTES,
    h::MAP_LOOKUP_PERCPU_ELEM,
    h::KTIME_GET_TAI_NS,
    h::DYNPTR_READ,
    h::DYNPTR_WRITE,
    h::DYNPTR_DATA,
    h::KFUNC_DYNPTR_FROM_XDP,
    h::KFUNC_DYNPTR_SLICE,
    h::KFUNC_DYNPTR_SLICE_RDWR,
    h::KFUNC_DYNPTR_ADJUST,
    h::KFUNC_DYNPTR_IS_NULL,
    h::KFUNC_DYNPTR_IS_RDONLY,
    h::KFUNC_DYNPTR_SIZE,
    h::KFUNC_DYNPTR_CLONE,
    h::SPINE_MSG_SEND,
    h::SPINE_MSG_POST,
    h::SPINE_MSG_BULK_LEN,
    h::SPINE_MSG_BULK_READ,
    h::SPINE_MSG_BULK_WRITE,
    h::SPINE_MSG_SEND_BULK,
    h::SPINE_MSG_POST_TO,
];

/// A table of kernel prototypes for a chosen set of helpers.
#[derive(Debug, Clone)]
pub struct KernelHelpers {
    /// Sorted by id.
    protos: Vec<HelperProto>,
}

impl KernelHelpers {
    /// Every helper the kernel offers XDP programs that spine knows.
    pub fn xdp() -> KernelHelpers {
        KernelHelpers::only(&KNOWN_HELPERS)
    }

    /// Only the helpers in `ids` (a protection domain's allow list); unknown ids are
    /// ignored.
    pub fn only(ids: &[u32]) -> KernelHelpers {
        let mut protos: Vec<HelperProto> =
            ids.iter().filter_map(|&id| kernel_helper_proto(id)).collect();
        protos.sort_by_key(|p| p.id);
        protos.dedup_by_key(|p| p.id);
        KernelHelpers { protos }
    }
}

impl HelperTable for KernelHelpers {
    fn proto(&self, id: u32) -> Option<&HelperProto> {
        self.protos.binary_search_by_key(&id, |p| p.id).ok().map(|i| &self.protos[i])
    }
}

/// Whether helper `id` may be used with a map of type `map_type`, in both directions
/// of the kernel's `check_map_func_compatibility`.
pub fn map_func_compatible(id: u32, map_type: u32) -> bool {
    let map_ok = match map_type {
        mt::PROG_ARRAY => id == h::TAIL_CALL,
        mt::DEVMAP | mt::DEVMAP_HASH => matches!(id, h::REDIRECT_MAP | h::MAP_LOOKUP_ELEM),
        mt::CPUMAP => id == h::REDIRECT_MAP,
        mt::XSKMAP | mt::SPINE_ENDPOINT => matches!(id, h::REDIRECT_MAP | h::MAP_LOOKUP_ELEM),
        mt::RINGBUF => matches!(id, h::RINGBUF_OUTPUT | h::RINGBUF_RESERVE | h::RINGBUF_QUERY),
        mt::PERF_EVENT_ARRAY => id == h::PERF_EVENT_OUTPUT,
        mt::ARRAY_OF_MAPS | mt::HASH_OF_MAPS => id == h::MAP_LOOKUP_ELEM,
        mt::QUEUE | mt::STACK => {
            matches!(id, h::MAP_PUSH_ELEM | h::MAP_POP_ELEM | h::MAP_PEEK_ELEM)
        }
        // Values go in with push and are tested with peek; lookups, updates, deletes
        // and pops are refused, as the kernel's verifier refuses them.
        mt::BLOOM_FILTER => matches!(id, h::MAP_PUSH_ELEM | h::MAP_PEEK_ELEM),
        _ => true,
    };
    let func_ok = match id {
        h::TAIL_CALL => map_type == mt::PROG_ARRAY,
        h::REDIRECT_MAP => {
            matches!(
                map_type,
                mt::DEVMAP | mt::DEVMAP_HASH | mt::CPUMAP | mt::XSKMAP | mt::SPINE_ENDPOINT
            )
        }
        h::RINGBUF_OUTPUT | h::RINGBUF_RESERVE | h::RINGBUF_QUERY => map_type == mt::RINGBUF,
        h::PERF_EVENT_OUTPUT => map_type == mt::PERF_EVENT_ARRAY,
        h::FOR_EACH_MAP_ELEM => matches!(
            map_type,
            mt::ARRAY
                | mt::PERCPU_ARRAY
                | mt::HASH
                | mt::PERCPU_HASH
                | mt::LRU_HASH
                | mt::LRU_PERCPU_HASH
        ),
        h::MAP_LOOKUP_PERCPU_ELEM => {
            matches!(map_type, mt::PERCPU_ARRAY | mt::PERCPU_HASH | mt::LRU_PERCPU_HASH)
        }
        h::MAP_PUSH_ELEM | h::MAP_PEEK_ELEM => {
            matches!(map_type, mt::QUEUE | mt::STACK | mt::BLOOM_FILTER)
        }
        h::MAP_POP_ELEM => matches!(map_type, mt::QUEUE | mt::STACK),
        // The maps whose values may hold a `struct bpf_timer`.
        h::TIMER_INIT => matches!(map_type, mt::ARRAY | mt::HASH | mt::LRU_HASH),
        _ => true,
    };
    map_ok && func_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_helper_has_a_prototype() {
        for id in KNOWN_HELPERS {
            let p = kernel_helper_proto(id).unwrap_or_else(|| panic!("helper {id}"));
            assert_eq!(Some(p.name), h::name(id));
            // Sizes always follow a memory argument.
            for w in p.args.windows(2) {
                if matches!(w[1], ArgType::ConstSize | ArgType::ConstSizeOrZero) {
                    assert!(matches!(w[0], ArgType::Mem { .. } | ArgType::UninitMem), "{}", p.name);
                }
            }
        }
        assert!(kernel_helper_proto(9999).is_none());
    }

    #[test]
    fn tables_filter_and_maps_match() {
        let t = KernelHelpers::only(&[h::MAP_LOOKUP_ELEM, h::REDIRECT]);
        assert!(t.proto(h::MAP_LOOKUP_ELEM).is_some());
        assert!(t.proto(h::TAIL_CALL).is_none());
        assert_eq!(KernelHelpers::xdp().proto(h::LOOP).map(|p| p.nargs()), Some(4));
        assert!(!map_func_compatible(h::MAP_LOOKUP_ELEM, mt::PROG_ARRAY));
        assert!(!map_func_compatible(h::TAIL_CALL, mt::ARRAY));
        assert!(map_func_compatible(h::REDIRECT_MAP, mt::XSKMAP));
        assert!(!map_func_compatible(h::REDIRECT_MAP, mt::HASH));
        assert!(map_func_compatible(h::MAP_UPDATE_ELEM, mt::LPM_TRIE));
        for q in [mt::QUEUE, mt::STACK] {
            for id in [h::MAP_PUSH_ELEM, h::MAP_POP_ELEM, h::MAP_PEEK_ELEM] {
                assert!(map_func_compatible(id, q));
                assert!(!map_func_compatible(id, mt::HASH));
            }
            for id in [h::MAP_LOOKUP_ELEM, h::MAP_UPDATE_ELEM, h::MAP_DELETE_ELEM, h::LOOP] {
                assert!(!map_func_compatible(id, q), "{id} on {q}");
            }
        }
        let bloom = mt::BLOOM_FILTER;
        assert!(map_func_compatible(h::MAP_PUSH_ELEM, bloom));
        assert!(map_func_compatible(h::MAP_PEEK_ELEM, bloom));
        for id in [h::MAP_POP_ELEM, h::MAP_LOOKUP_ELEM, h::MAP_UPDATE_ELEM, h::MAP_DELETE_ELEM] {
            assert!(!map_func_compatible(id, bloom), "{id} on a bloom filter");
        }
    }
}
