//! The numbers of the kernel's eBPF ABI (`include/uapi/linux/bpf.h`) that spine matches
//! exactly: map types, helper ids, XDP actions, program types, map and update flags,
//! the `xdp_md` layout and errno values. One place, so every layer agrees.
//!
//! Constants only: no code that could disagree with the kernel.
#![deny(unsafe_code)]

/// `enum bpf_map_type`.
pub mod map_type {
    pub const HASH: u32 = 1;
    pub const ARRAY: u32 = 2;
    pub const PROG_ARRAY: u32 = 3;
    pub const PERF_EVENT_ARRAY: u32 = 4;
    pub const PERCPU_HASH: u32 = 5;
    pub const PERCPU_ARRAY: u32 = 6;
    pub const LRU_HASH: u32 = 9;
    pub const LRU_PERCPU_HASH: u32 = 10;
    pub const LPM_TRIE: u32 = 11;
    pub const ARRAY_OF_MAPS: u32 = 12;
    pub const HASH_OF_MAPS: u32 = 13;
    pub const DEVMAP: u32 = 14;
    pub const CPUMAP: u32 = 16;
    pub const XSKMAP: u32 = 17;
    pub const QUEUE: u32 = 22;
    pub const STACK: u32 = 23;
    pub const DEVMAP_HASH: u32 = 25;
    pub const RINGBUF: u32 = 27;
    pub const BLOOM_FILTER: u32 = 30;
    /// spine's endpoint map (`SPINE_MAP_TYPE_ENDPOINT` in `include/spine_helpers.h`): an
    /// xskmap whose slots hold spine endpoints. Numbered far outside the kernel's
    /// `enum bpf_map_type` so it can never collide with a future kernel type.
    pub const SPINE_ENDPOINT: u32 = 0x5350_0001;

    /// Kernel name of a map type, for messages.
    pub fn name(t: u32) -> &'static str {
        match t {
            HASH => "hash",
            ARRAY => "array",
            PROG_ARRAY => "prog_array",
            PERF_EVENT_ARRAY => "perf_event_array",
            PERCPU_HASH => "percpu_hash",
            PERCPU_ARRAY => "percpu_array",
            LRU_HASH => "lru_hash",
            LRU_PERCPU_HASH => "lru_percpu_hash",
            LPM_TRIE => "lpm_trie",
            ARRAY_OF_MAPS => "array_of_maps",
            HASH_OF_MAPS => "hash_of_maps",
            DEVMAP => "devmap",
            CPUMAP => "cpumap",
            XSKMAP => "xskmap",
            QUEUE => "queue",
            STACK => "stack",
            DEVMAP_HASH => "devmap_hash",
            RINGBUF => "ringbuf",
            BLOOM_FILTER => "bloom_filter",
            SPINE_ENDPOINT => "spine_endpoint",
            _ => "unknown",
        }
    }

    /// True for the per-CPU map types, whose user-space value is one slot per CPU.
    pub fn is_percpu(t: u32) -> bool {
        matches!(t, PERCPU_HASH | PERCPU_ARRAY | LRU_PERCPU_HASH)
    }
}

/// `enum bpf_prog_type` values spine uses.
pub mod prog_type {
    pub const SCHED_CLS: u32 = 3;
    pub const XDP: u32 = 6;
}

/// `enum xdp_action`.
pub mod xdp_action {
    pub const ABORTED: u32 = 0;
    pub const DROP: u32 = 1;
    pub const PASS: u32 = 2;
    pub const TX: u32 = 3;
    pub const REDIRECT: u32 = 4;

    /// Kernel name of a verdict (`XDP_PASS`), or `None` for an unknown value.
    pub fn name(v: u64) -> Option<&'static str> {
        Some(match v {
            0 => "XDP_ABORTED",
            1 => "XDP_DROP",
            2 => "XDP_PASS",
            3 => "XDP_TX",
            4 => "XDP_REDIRECT",
            _ => return None,
        })
    }
}

/// spine's `struct spine_msg_md` (`include/spine_helpers.h`), the context of an
/// active-message handler (`SEC("spine/handler/N")`): five `__u32` fields.
pub mod spine_msg_md {
    /// The first payload byte (a packet pointer, as `xdp_md.data`).
    pub const DATA: i16 = 0;
    /// One past the last payload byte.
    pub const DATA_END: i16 = 4;
    /// Payload bytes, at most [`MSG_MAX`].
    pub const LEN: i16 = 8;
    /// The id of the endpoint that sent the message.
    pub const SOURCE: i16 = 12;
    /// The handler number (0..=255).
    pub const HANDLER: i16 = 16;
    pub const SIZE: usize = 20;
    /// Largest payload of a small active message.
    pub const MSG_MAX: u32 = 240;
}

/// `struct xdp_md`: six `__u32` fields at these byte offsets.
pub mod xdp_md {
    pub const DATA: i16 = 0;
    pub const DATA_END: i16 = 4;
    pub const DATA_META: i16 = 8;
    pub const INGRESS_IFINDEX: i16 = 12;
    pub const RX_QUEUE_INDEX: i16 = 16;
    pub const EGRESS_IFINDEX: i16 = 20;
    /// `sizeof(struct xdp_md)`.
    pub const SIZE: usize = 24;
}

/// Frame geometry of an XDP buffer as the kernel lays it out.
pub mod xdp_frame {
    /// `XDP_PACKET_HEADROOM`: bytes before the packet for `xdp_adjust_head`/`meta`.
    pub const HEADROOM: usize = 256;
    /// `sizeof(struct xdp_frame)`: the start of the headroom the kernel keeps for itself.
    pub const FRAME_STRUCT: usize = 40;
    /// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64: the tail reserve.
    pub const TAILROOM: usize = 320;
    /// Largest `data_meta` area by its length field: the kernel keeps the length in a
    /// `u8` and requires 4-byte multiples (`xdp_metalen_invalid`). The headroom limits it
    /// further: 216 bytes in a fresh 256-byte headroom after `struct xdp_frame`.
    pub const MAX_META: usize = 252;
}

/// `enum bpf_func_id`: helper numbers.
pub mod helper {
    pub const MAP_LOOKUP_ELEM: u32 = 1;
    pub const MAP_UPDATE_ELEM: u32 = 2;
    pub const MAP_DELETE_ELEM: u32 = 3;
    pub const KTIME_GET_NS: u32 = 5;
    pub const TRACE_PRINTK: u32 = 6;
    pub const GET_PRANDOM_U32: u32 = 7;
    pub const GET_SMP_PROCESSOR_ID: u32 = 8;
    pub const TAIL_CALL: u32 = 12;
    pub const REDIRECT: u32 = 23;
    pub const PERF_EVENT_OUTPUT: u32 = 25;
    pub const CSUM_DIFF: u32 = 28;
    pub const XDP_ADJUST_HEAD: u32 = 44;
    pub const REDIRECT_MAP: u32 = 51;
    pub const XDP_ADJUST_META: u32 = 54;
    pub const XDP_ADJUST_TAIL: u32 = 65;
    pub const FIB_LOOKUP: u32 = 69;
    pub const MAP_PUSH_ELEM: u32 = 87;
    pub const MAP_POP_ELEM: u32 = 88;
    pub const MAP_PEEK_ELEM: u32 = 89;
    pub const SPIN_LOCK: u32 = 93;
    pub const SPIN_UNLOCK: u32 = 94;
    pub const JIFFIES64: u32 = 118;
    pub const KTIME_GET_BOOT_NS: u32 = 125;
    pub const RINGBUF_OUTPUT: u32 = 130;
    pub const RINGBUF_RESERVE: u32 = 131;
    pub const RINGBUF_SUBMIT: u32 = 132;
    pub const RINGBUF_DISCARD: u32 = 133;
    pub const RINGBUF_QUERY: u32 = 134;
    pub const KTIME_GET_COARSE_NS: u32 = 160;
    pub const CHECK_MTU: u32 = 163;
    pub const FOR_EACH_MAP_ELEM: u32 = 164;
    pub const TIMER_INIT: u32 = 169;
    pub const TIMER_SET_CALLBACK: u32 = 170;
    pub const TIMER_START: u32 = 171;
    pub const TIMER_CANCEL: u32 = 172;
    pub const LOOP: u32 = 181;
    pub const XDP_GET_BUFF_LEN: u32 = 188;
    pub const XDP_LOAD_BYTES: u32 = 189;
    pub const XDP_STORE_BYTES: u32 = 190;
    pub const MAP_LOOKUP_PERCPU_ELEM: u32 = 195;
    pub const DYNPTR_READ: u32 = 201;
    pub const DYNPTR_WRITE: u32 = 202;
    pub const DYNPTR_DATA: u32 = 203;
    pub const KTIME_GET_TAI_NS: u32 = 208;
    /// spine's `spine_msg_send(ctx, endpoint, handler, data, len)` (declared in
    /// `include/spine_helpers.h`): an active message to a host endpoint. Numbered far
    /// outside the kernel's `enum bpf_func_id`.
    pub const SPINE_MSG_SEND: u32 = 0x5350_0001;
    /// spine's `spine_msg_post(ctx, handler, data, len)`: an active message to handler
    /// `handler` of the extensions of the sender's domain on the same adapter, run
    /// later by the adapter (queued), never inside the sender's invocation.
    pub const SPINE_MSG_POST: u32 = 0x5350_0002;
    /// spine's `spine_msg_bulk_len(ctx)`: the length of the bulk data of the message a
    /// handler runs on (0 for a small message).
    pub const SPINE_MSG_BULK_LEN: u32 = 0x5350_0003;
    /// spine's `spine_msg_bulk_read(ctx, offset, dst, len)`: copies bulk data out of the
    /// sending endpoint's buffer area, bounds-checked on every call.
    pub const SPINE_MSG_BULK_READ: u32 = 0x5350_0004;
    /// spine's `spine_msg_bulk_write(ctx, offset, src, len)`: copies into the buffer
    /// area of the endpoint whose message a handler runs on, bounds-checked to that
    /// area on every call.
    pub const SPINE_MSG_BULK_WRITE: u32 = 0x5350_0005;
    /// spine's `spine_msg_send_bulk(ctx, endpoint, handler, offset, len)`: a bulk
    /// active message to a host endpoint, a reference to `len` bytes at `offset` of
    /// that endpoint's buffer area (checked against it on delivery).
    pub const SPINE_MSG_SEND_BULK: u32 = 0x5350_0006;
    /// spine's `spine_msg_post_to(ctx, to, data, len, delay_ns)`: `spine_msg_post` to
    /// handler `to & 0xff` of one named extension of the sender's domain (its id + 1 in
    /// bits 16..32 of `to`, as a host's message descriptor names it; 0 there: every
    /// extension of the domain, as `spine_msg_post`), delivered no earlier than
    /// `delay_ns` nanoseconds later (0: the next round). See [`crate::msg_post`].
    pub const SPINE_MSG_POST_TO: u32 = 0x5350_0007;

    /// The kernel kfuncs spine offers, numbered in spine's own range (see
    /// [`crate::kfunc`]): the object loader turns a call to the extern kfunc of that
    /// name into a helper call of this number, and the kernel loader back into a
    /// `BPF_PSEUDO_KFUNC_CALL` of the running kernel's BTF id.
    pub const KFUNC_DYNPTR_FROM_XDP: u32 = 0x5350_0101;
    pub const KFUNC_DYNPTR_SLICE: u32 = 0x5350_0102;
    pub const KFUNC_DYNPTR_SLICE_RDWR: u32 = 0x5350_0103;
    pub const KFUNC_DYNPTR_ADJUST: u32 = 0x5350_0104;
    pub const KFUNC_DYNPTR_IS_NULL: u32 = 0x5350_0105;
    pub const KFUNC_DYNPTR_IS_RDONLY: u32 = 0x5350_0106;
    pub const KFUNC_DYNPTR_SIZE: u32 = 0x5350_0107;
    pub const KFUNC_DYNPTR_CLONE: u32 = 0x5350_0108;

    /// Kernel name of a helper (`bpf_map_lookup_elem`), for messages; `None` if spine
    /// does not know it.
    pub fn name(id: u32) -> Option<&'static str> {
        Some(match id {
            MAP_LOOKUP_ELEM => "bpf_map_lookup_elem",
            MAP_UPDATE_ELEM => "bpf_map_update_elem",
            MAP_DELETE_ELEM => "bpf_map_delete_elem",
            KTIME_GET_NS => "bpf_ktime_get_ns",
            TRACE_PRINTK => "bpf_trace_printk",
            GET_PRANDOM_U32 => "bpf_get_prandom_u32",
            GET_SMP_PROCESSOR_ID => "bpf_get_smp_processor_id",
            TAIL_CALL => "bpf_tail_call",
            REDIRECT => "bpf_redirect",
            PERF_EVENT_OUTPUT => "bpf_perf_event_output",
            CSUM_DIFF => "bpf_csum_diff",
            XDP_ADJUST_HEAD => "bpf_xdp_adjust_head",
            REDIRECT_MAP => "bpf_redirect_map",
            XDP_ADJUST_META => "bpf_xdp_adjust_meta",
            XDP_ADJUST_TAIL => "bpf_xdp_adjust_tail",
            FIB_LOOKUP => "bpf_fib_lookup",
            MAP_PUSH_ELEM => "bpf_map_push_elem",
            MAP_POP_ELEM => "bpf_map_pop_elem",
            MAP_PEEK_ELEM => "bpf_map_peek_elem",
            SPIN_LOCK => "bpf_spin_lock",
            SPIN_UNLOCK => "bpf_spin_unlock",
            JIFFIES64 => "bpf_jiffies64",
            KTIME_GET_BOOT_NS => "bpf_ktime_get_boot_ns",
            RINGBUF_OUTPUT => "bpf_ringbuf_output",
            RINGBUF_RESERVE => "bpf_ringbuf_reserve",
            RINGBUF_SUBMIT => "bpf_ringbuf_submit",
            RINGBUF_DISCARD => "bpf_ringbuf_discard",
            RINGBUF_QUERY => "bpf_ringbuf_query",
            KTIME_GET_COARSE_NS => "bpf_ktime_get_coarse_ns",
            CHECK_MTU => "bpf_check_mtu",
            FOR_EACH_MAP_ELEM => "bpf_for_each_map_elem",
            TIMER_INIT => "bpf_timer_init",
            TIMER_SET_CALLBACK => "bpf_timer_set_callback",
            TIMER_START => "bpf_timer_start",
            TIMER_CANCEL => "bpf_timer_cancel",
            LOOP => "bpf_loop",
            XDP_GET_BUFF_LEN => "bpf_xdp_get_buff_len",
            XDP_LOAD_BYTES => "bpf_xdp_load_bytes",
            XDP_STORE_BYTES => "bpf_xdp_store_bytes",
            MAP_LOOKUP_PERCPU_ELEM => "bpf_map_lookup_percpu_elem",
            KTIME_GET_TAI_NS => "bpf_ktime_get_tai_ns",
            DYNPTR_READ => "bpf_dynptr_read",
            DYNPTR_WRITE => "bpf_dynptr_write",
            DYNPTR_DATA => "bpf_dynptr_data",
            KFUNC_DYNPTR_FROM_XDP => "bpf_dynptr_from_xdp",
            KFUNC_DYNPTR_SLICE => "bpf_dynptr_slice",
            KFUNC_DYNPTR_SLICE_RDWR => "bpf_dynptr_slice_rdwr",
            KFUNC_DYNPTR_ADJUST => "bpf_dynptr_adjust",
            KFUNC_DYNPTR_IS_NULL => "bpf_dynptr_is_null",
            KFUNC_DYNPTR_IS_RDONLY => "bpf_dynptr_is_rdonly",
            KFUNC_DYNPTR_SIZE => "bpf_dynptr_size",
            KFUNC_DYNPTR_CLONE => "bpf_dynptr_clone",
            SPINE_MSG_SEND => "spine_msg_send",
            SPINE_MSG_POST => "spine_msg_post",
            SPINE_MSG_BULK_LEN => "spine_msg_bulk_len",
            SPINE_MSG_BULK_READ => "spine_msg_bulk_read",
            SPINE_MSG_BULK_WRITE => "spine_msg_bulk_write",
            SPINE_MSG_SEND_BULK => "spine_msg_send_bulk",
            SPINE_MSG_POST_TO => "spine_msg_post_to",
            _ => return None,
        })
    }
}

/// The `to` argument of `spine_msg_post_to` (see [`helper::SPINE_MSG_POST_TO`]).
pub mod msg_post {
    /// The handler number: bits 0..8.
    pub const HANDLER_MASK: u64 = 0xff;
    /// The target extension's id + 1 is in bits 16..32 (0: every extension of the
    /// sender's domain that registered the handler).
    pub const TARGET_SHIFT: u32 = 16;
    /// Bits that must be clear (8..16 and 32..64): a post with any set is refused
    /// (`-EINVAL`), so they stay free for later use.
    pub const RESERVED_MASK: u64 = !0xffff_00ff;
    /// The longest delay a post may ask for (10 s): a delayed message holds a slot of
    /// its worker's bounded queue until it is due; a longer one is refused (`-EINVAL`).
    pub const DELAY_MAX_NS: u64 = 10_000_000_000;

    /// `to` for handler `handler` of extension `ext` alone (`SPINE_MSG_TO(ext,
    /// handler)` in `include/spine_helpers.h`).
    pub const fn to(ext: u16, handler: u8) -> u64 {
        ((ext as u64 + 1) << TARGET_SHIFT) | handler as u64
    }

    /// The handler and the target extension (`None`: every extension of the domain) a
    /// `to` names; `None` when a reserved bit is set.
    pub const fn decode(to: u64) -> Option<(u8, Option<u16>)> {
        if to & RESERVED_MASK != 0 {
            return None;
        }
        let target = (to >> TARGET_SHIFT) as u16;
        let ext = if target == 0 { None } else { Some(target - 1) };
        Some(((to & HANDLER_MASK) as u8, ext))
    }
}

/// The kernel kfuncs spine offers (each an XDP program's kfunc in the kernel): the
/// extern an object calls, by name, and the number spine runs it under. Any other kfunc
/// is refused by name when the object is read.
pub mod kfunc {
    use crate::helper as h;

    /// Every kfunc spine offers: (kernel name, spine number).
    pub const TABLE: [(&str, u32); 8] = [
        ("bpf_dynptr_from_xdp", h::KFUNC_DYNPTR_FROM_XDP),
        ("bpf_dynptr_slice", h::KFUNC_DYNPTR_SLICE),
        ("bpf_dynptr_slice_rdwr", h::KFUNC_DYNPTR_SLICE_RDWR),
        ("bpf_dynptr_adjust", h::KFUNC_DYNPTR_ADJUST),
        ("bpf_dynptr_is_null", h::KFUNC_DYNPTR_IS_NULL),
        ("bpf_dynptr_is_rdonly", h::KFUNC_DYNPTR_IS_RDONLY),
        ("bpf_dynptr_size", h::KFUNC_DYNPTR_SIZE),
        ("bpf_dynptr_clone", h::KFUNC_DYNPTR_CLONE),
    ];

    /// spine's number for the kfunc `name`, if spine offers it.
    pub fn by_name(name: &str) -> Option<u32> {
        TABLE.iter().find(|(n, _)| *n == name).map(|&(_, id)| id)
    }

    /// The kernel name of the kfunc spine numbers `id`, if `id` is one.
    pub fn name(id: u32) -> Option<&'static str> {
        TABLE.iter().find(|(_, i)| *i == id).map(|&(n, _)| n)
    }

    /// `sizeof(struct bpf_dynptr)`: the 16 stack bytes a dynptr lives in.
    pub const DYNPTR_SIZE: u32 = 16;
}

/// `struct bpf_timer` and the flags of the timer helpers (`bpf_timer_init`'s clock ids,
/// `bpf_timer_start`'s `BPF_F_TIMER_*`).
pub mod timer {
    /// `sizeof(struct bpf_timer)`; it is 8-aligned in a map value.
    pub const SIZE: u32 = 16;
    pub const CLOCK_REALTIME: u64 = 0;
    pub const CLOCK_MONOTONIC: u64 = 1;
    pub const CLOCK_BOOTTIME: u64 = 7;
    /// `nsecs` is an absolute time on the timer's clock, not a delay.
    pub const F_TIMER_ABS: u64 = 1 << 0;
    /// Fire on the CPU that started the timer (spine always does).
    pub const F_TIMER_CPU_PIN: u64 = 1 << 1;
}

/// `bpf_perf_event_output`'s flags: the slot (`BPF_F_INDEX_MASK`, with
/// `BPF_F_CURRENT_CPU` for the calling CPU's) and, in the upper half, how many bytes of
/// the packet to append (`BPF_F_CTXLEN_MASK`).
pub mod perf_flags {
    pub const INDEX_MASK: u64 = 0xffff_ffff;
    pub const CURRENT_CPU: u64 = INDEX_MASK;
    pub const CTXLEN_MASK: u64 = 0xf_ffff << 32;
}

/// Map creation flags (`map_flags`).
pub mod map_flags {
    pub const NO_PREALLOC: u32 = 1 << 0;
    pub const NO_COMMON_LRU: u32 = 1 << 1;
    pub const NUMA_NODE: u32 = 1 << 2;
    pub const RDONLY: u32 = 1 << 3;
    pub const WRONLY: u32 = 1 << 4;
    pub const ZERO_SEED: u32 = 1 << 6;
    pub const RDONLY_PROG: u32 = 1 << 7;
    pub const WRONLY_PROG: u32 = 1 << 8;
    pub const MMAPABLE: u32 = 1 << 10;
    pub const PRESERVE_ELEMS: u32 = 1 << 11;
    pub const INNER_MAP: u32 = 1 << 12;
}

/// `flags` of `bpf_map_update_elem`.
pub mod update_flags {
    pub const ANY: u64 = 0;
    pub const NOEXIST: u64 = 1;
    pub const EXIST: u64 = 2;
    pub const LOCK: u64 = 4;
}

/// Kernel errno values that helpers and map operations return (negated).
pub mod errno {
    pub const EPERM: i64 = 1;
    pub const ENOENT: i64 = 2;
    pub const E2BIG: i64 = 7;
    pub const EBUSY: i64 = 16;
    pub const ENOMEM: i64 = 12;
    pub const EFAULT: i64 = 14;
    pub const EEXIST: i64 = 17;
    pub const EINVAL: i64 = 22;
    pub const ENODEV: i64 = 19;
    pub const ENOSPC: i64 = 28;
    pub const ERANGE: i64 = 34;
    pub const EDEADLK: i64 = 35;
    pub const EOPNOTSUPP: i64 = 95;
}

#[cfg(test)]
mod tests {
    use super::msg_post;

    #[test]
    fn a_post_names_one_extension_by_its_id_plus_one_in_bits_16_to_32() {
        assert_eq!(msg_post::to(0, 9), 0x1_0009);
        assert_eq!(msg_post::decode(msg_post::to(41, 200)), Some((200, Some(41))));
        assert_eq!(msg_post::decode(9), Some((9, None)), "0 there: every extension");
        assert_eq!(msg_post::decode(msg_post::to(0xfffe, 1)), Some((1, Some(0xfffe))));
        assert_eq!(msg_post::decode(msg_post::to(3, 9) | 1 << 8), None, "bits 8..16");
        assert_eq!(msg_post::decode(1 << 32 | 9), None, "bits 32..64");
    }
}
