//! Programs of the shapes clang produces for XDP, which the verifier must accept, and
//! the facts it must report about them.

mod common;

use common::*;
use spine_verifier::MemAccess;

#[test]
fn packet_parse_with_variable_header_length() {
    let v = accept(
        "mov %r6, %r1
         ldxw %r2, [%r6+0]
         ldxw %r3, [%r6+4]
         mov %r4, %r2
         add %r4, 14
         jgt %r4, %r3, drop
         ldxh %r5, [%r2+12]
         jne %r5, 0x8, pass
         mov %r4, %r2
         add %r4, 34
         jgt %r4, %r3, drop
         ldxb %r5, [%r2+14]
         and %r5, 0xf
         lsh %r5, 2
         jlt %r5, 20, drop
         mov %r7, %r2
         add %r7, 14
         add %r7, %r5
         mov %r4, %r7
         add %r4, 8
         jgt %r4, %r3, drop
         ldxh %r0, [%r7+2]
         jeq %r0, 0x3500, drop
         pass: mov %r0, 2
         exit
         drop: mov %r0, 1
         exit",
    );
    assert_eq!(v.insn_info[1].access, Some(MemAccess::Ctx { field: 0 }));
    assert_eq!(v.insn_info[6].access, Some(MemAccess::Packet));
    assert_eq!(v.insn_info[21].access, Some(MemAccess::Packet));
    assert!(v.loop_heads.is_empty());
    assert!(!v.stack_zeroing);
}

#[test]
fn map_lookup_null_check_update_and_atomics() {
    let v = accept(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[0]
         call 1
         jeq %r0, 0, out
         ldxdw %r1, [%r0+0]
         add %r1, 1
         stxdw [%r0+0], %r1
         mov %r1, 1
         lock add [%r0+8], %r1
         lock fetch add [%r0+56], %r1
         out: stdw [%r10-16], 7
         stdw [%r10-32], 0
         stdw [%r10-24], 0
         lddw %r1, map[1]
         mov %r2, %r10
         add %r2, -16
         mov %r3, %r10
         add %r3, -32
         mov %r4, 0
         call 2
         mov %r0, 2
         exit",
    );
    assert_eq!(v.insn_info[7].access, Some(MemAccess::MapValue { map: ARRAY }));
    assert_eq!(v.subprogs[0].stack_depth, 32);
}

#[test]
fn spilled_pointers_keep_their_type() {
    accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         stxdw [%r10-8], %r2
         stxdw [%r10-16], %r3
         stxdw [%r10-24], %r1
         ldxdw %r4, [%r10-8]
         ldxdw %r5, [%r10-16]
         mov %r0, %r4
         add %r0, 4
         jgt %r0, %r5, out
         ldxw %r0, [%r4+0]
         ldxw %r0, [%r2+0]
         ldxdw %r1, [%r10-24]
         ldxw %r0, [%r1+16]
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn bpf_to_bpf_call_writes_through_a_stack_pointer() {
    let v = accept(
        "stdw [%r10-8], 0
         mov %r1, %r10
         add %r1, -8
         mov %r2, 5
         call local set
         ldxdw %r0, [%r10-8]
         and %r0, 3
         exit
         set: stxdw [%r1+0], %r2
         stdw [%r10-16], 1
         mov %r0, 0
         exit",
    );
    assert_eq!(v.subprogs.len(), 2);
    assert_eq!(v.subprogs[1].entry, 8);
    assert_eq!(v.subprogs[1].stack_depth, 16);
    assert_eq!(v.subprogs[0].stack_depth, 8);
}

#[test]
fn callee_saved_registers_survive_calls() {
    accept(
        "ldxw %r6, [%r1+0]
         ldxw %r7, [%r1+4]
         call local f
         mov %r1, %r6
         add %r1, 2
         jgt %r1, %r7, out
         ldxh %r0, [%r6+0]
         out: mov %r0, 2
         exit
         f: mov %r6, 0
         mov %r0, 0
         exit",
    );
}

#[test]
fn bounded_loop_indexing_a_map_value() {
    let v = accept(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[0]
         call 1
         jeq %r0, 0, out
         mov %r1, 0
         loop: mov %r2, %r1
         lsh %r2, 3
         mov %r3, %r0
         add %r3, %r2
         ldxdw %r4, [%r3+0]
         add %r1, 1
         jlt %r1, 8, loop
         out: mov %r0, 2
         exit",
    );
    assert_eq!(v.loop_heads, vec![8]);
}

/// Two lookups of one key, the first checked: where the second equals it, it is not
/// null either (the kernel's `check_cond_jmp_op`; the selftests' `jne/jeq infer not null,
/// PTR_TO_MAP_VALUE_OR_NULL`), for `!=` and `==` (the other side:
/// `attacks/map_value_unequal_to_checked_one.s`).
#[test]
fn a_value_equal_to_a_checked_one_is_not_null() {
    for (test, read) in [
        ("jne %r6, %r7, out", "ldxdw %r0, [%r7+0]"),
        ("jeq %r6, %r7, same\n ja out", "same: ldxdw %r0, [%r7+8]"),
    ] {
        accept(&format!(
            "stdw [%r10-8], 0
             mov %r2, %r10
             add %r2, -8
             lddw %r1, map[1]
             call 1
             mov %r6, %r0
             mov %r2, %r10
             add %r2, -8
             lddw %r1, map[1]
             call 1
             mov %r7, %r0
             jeq %r6, 0, out
             {test}
             {read}
             out: mov %r0, 2
             exit"
        ));
    }
}

/// An XSKMAP lookup is the kernel's `PTR_TO_XDP_SOCK`: once tested for NULL (or found
/// equal to a tested lookup, `verifier_jeq_infer_not_null.c`), a program reads
/// `queue_id`, a `u32` at offset 0, and redirects into the entry, the AF_XDP idiom
/// `if (xs && xs->queue_id == q) return bpf_redirect_map(&xsks_map, q, 0)`. What else the
/// pointer may not do: `attacks/xsk_*.s`.
#[test]
fn an_xskmap_lookup_reads_queue_id() {
    for (test, read) in [
        ("", "ldxw %r0, [%r6+0]"),
        ("jne %r6, %r7, out", "ldxw %r0, [%r7+0]"),
        ("jeq %r6, %r7, same\n ja out", "same: ldxw %r0, [%r7+0]"),
    ] {
        accept(&format!(
            "ldxw %r8, [%r1+16]
             stw [%r10-4], 0
             stxw [%r10-4], %r8
             mov %r2, %r10
             add %r2, -4
             lddw %r1, map[16]
             call 1
             mov %r6, %r0
             mov %r2, %r10
             add %r2, -4
             lddw %r1, map[16]
             call 1
             mov %r7, %r0
             jeq %r6, 0, out
             {test}
             {read}
             jne %r0, %r8, out
             lddw %r1, map[16]
             mov %r2, %r8
             mov %r3, 0
             call 51
             exit
             out: mov %r0, 2
             exit"
        ));
    }
    // Spilled and filled, the pointer keeps its type.
    accept(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[16]
         call 1
         jeq %r0, 0, out
         stxdw [%r10-16], %r0
         ldxdw %r6, [%r10-16]
         ldxw %r0, [%r6+0]
         exit
         out: mov %r0, 2
         exit",
    );
}

/// The largest fixed offset a packet check proves a range from is the kernel's
/// `MAX_PACKET_OFF`, 65535 (one past it: `attacks/meta_checked_past_max_packet_offset.s`).
#[test]
fn a_check_at_the_largest_packet_offset_proves_a_range() {
    for (start, bound) in [(8, 0), (0, 4)] {
        let v = accept(&format!(
            "ldxw %r2, [%r1+{start}]
             ldxw %r3, [%r1+{bound}]
             mov %r4, %r2
             add %r4, 65535
             jgt %r4, %r3, out
             ldxb %r0, [%r2+0]
             out: mov %r0, 2
             exit"
        ));
        assert!(v.insn_info[5].access.is_some(), "data_meta at {start}");
    }
}

#[test]
fn unbounded_loop_over_the_packet() {
    let v = accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r0, 0
         loop: jge %r2, %r3, out
         ldxb %r4, [%r2+0]
         add %r0, %r4
         add %r2, 1
         ja loop
         out: and %r0, 3
         exit",
    );
    assert_eq!(v.loop_heads, vec![3]);
    assert_eq!(v.insn_info[4].access, Some(MemAccess::Packet));
}

#[test]
fn packet_loop_with_a_header_check_inside() {
    accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r0, 0
         loop: mov %r4, %r2
         add %r4, 4
         jgt %r4, %r3, out
         ldxw %r5, [%r2+0]
         xor %r0, %r5
         ldxb %r5, [%r2+3]
         and %r5, 3
         add %r5, 1
         add %r2, %r5
         ja loop
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn bpf_loop_callback() {
    let v = accept(
        "stdw [%r10-8], 0
         mov %r1, 100
         .insn 0x0000000800004218
         .insn 0
         mov %r3, %r10
         add %r3, -8
         mov %r4, 0
         call 181
         ldxdw %r0, [%r10-8]
         and %r0, 3
         exit
         cb: ldxdw %r3, [%r2+0]
         add %r3, %r1
         stxdw [%r2+0], %r3
         mov %r0, 0
         exit",
    );
    assert!(v.subprogs[1].is_callback);
}

#[test]
fn for_each_map_elem_callback() {
    accept(
        "stdw [%r10-8], 0
         lddw %r1, map[0]
         .insn 0x0000000700004218
         .insn 0
         mov %r3, %r10
         add %r3, -8
         mov %r4, 0
         call 164
         mov %r0, 2
         exit
         cb: ldxw %r5, [%r2+0]
         ldxdw %r5, [%r3+56]
         ldxdw %r6, [%r4+0]
         add %r6, %r5
         stxdw [%r4+0], %r6
         mov %r0, 0
         exit",
    );
}

#[test]
fn tail_call_redirect_and_helpers() {
    accept(
        "mov %r6, %r1
         mov %r1, %r6
         lddw %r2, map[3]
         mov %r3, 0
         call 12
         lddw %r1, map[4]
         mov %r2, 0
         mov %r3, 0
         call 51
         call 5
         call 7
         exit",
    );
}

#[test]
fn ringbuf_reserve_submit() {
    accept(
        "lddw %r1, map[5]
         mov %r2, 16
         mov %r3, 0
         call 131
         jeq %r0, 0, out
         stdw [%r0+0], 1
         stdw [%r0+8], 2
         mov %r1, %r0
         mov %r2, 0
         call 132
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn map_of_maps_lookup() {
    accept(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[6]
         call 1
         jeq %r0, 0, out
         mov %r1, %r0
         mov %r2, %r10
         add %r2, -4
         call 1
         jeq %r0, 0, out
         ldxdw %r0, [%r0+0]
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn global_data_direct_access() {
    let v = accept(
        "lddw %r1, map_value[7]+8
         ldxdw %r0, [%r1+0]
         stxdw [%r1+8], %r0
         lddw %r2, map_value[2]+0
         ldxw %r3, [%r2+4]
         mov %r0, 2
         exit",
    );
    assert_eq!(v.insn_info[2].access, Some(MemAccess::MapValue { map: DATA }));
    assert_eq!(v.insn_info[3].access, Some(MemAccess::MapValue { map: DATA }));
    assert_eq!(v.insn_info[6].access, Some(MemAccess::MapValue { map: RODATA }));
}

#[test]
fn packet_reloaded_after_adjust_head() {
    accept(
        "mov %r6, %r1
         mov %r2, -14
         call 44
         jne %r0, 0, drop
         ldxw %r2, [%r6+0]
         ldxw %r3, [%r6+4]
         mov %r4, %r2
         add %r4, 14
         jgt %r4, %r3, drop
         stxh [%r2+12], %r0
         mov %r0, 3
         exit
         drop: mov %r0, 1
         exit",
    );
}

/// Packet pointers kept across `bpf_xdp_adjust_head` are invalidated, but two of them
/// may still be subtracted, and the difference used as an offset on a reloaded pointer
/// (clang does so; the kernel, loading as root, keeps them as unknown numbers).
#[test]
fn invalidated_packet_pointers_subtract_to_a_number() {
    accept(
        "mov %r6, %r1
         ldxw %r9, [%r6+0]
         mov %r8, %r9
         add %r8, 22
         stxdw [%r10-8], %r8
         mov %r1, %r6
         mov %r2, -10
         call 44
         ldxdw %r8, [%r10-8]
         sub %r8, %r9
         and %r8, 0x3fff
         ldxw %r2, [%r6+0]
         ldxw %r3, [%r6+4]
         add %r2, %r8
         mov %r4, %r2
         add %r4, 2
         jgt %r4, %r3, drop
         ldxh %r0, [%r2+0]
         mov %r0, 3
         exit
         drop: mov %r0, 1
         exit",
    );
}

#[test]
fn metadata_checked_against_data() {
    let v = accept(
        "ldxw %r2, [%r1+8]
         ldxw %r3, [%r1+0]
         mov %r4, %r2
         add %r4, 4
         jgt %r4, %r3, out
         ldxw %r0, [%r2+0]
         out: mov %r0, 2
         exit",
    );
    assert_eq!(v.insn_info[5].access, Some(MemAccess::PacketMeta));
}

#[test]
fn all_four_comparison_directions_prove_ranges() {
    for check in [
        "jgt %r4, %r3, out",         // p + 8 > end: out
        "jlt %r3, %r4, out",         // end < p + 8: out
        "jge %r3, %r4, +1\n ja out", // end >= p + 8: go on
        "jle %r4, %r3, +1\n ja out", // p + 8 <= end: go on
    ] {
        accept(&format!(
            "ldxw %r2, [%r1+0]
             ldxw %r3, [%r1+4]
             mov %r4, %r2
             add %r4, 8
             {check}
             ldxdw %r0, [%r2+0]
             out: mov %r0, 2
             exit"
        ));
    }
    // Strict comparison: p < end proves one byte at p.
    accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         jge %r2, %r3, out
         ldxb %r0, [%r2+0]
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn fib_lookup_and_csum_diff_with_stack_memory() {
    let mut src = String::from("mov %r6, %r1\n");
    for k in 1..=8 {
        src.push_str(&format!("stdw [%r10-{}], 0\n", k * 8));
    }
    src.push_str(
        "mov %r1, %r6
         mov %r2, %r10
         add %r2, -64
         mov %r3, 64
         mov %r4, 0
         call 69
         ldxw %r5, [%r10-48]
         mov %r1, 0
         mov %r2, 0
         mov %r3, %r10
         add %r3, -8
         mov %r4, 4
         mov %r5, 0
         call 28
         mov %r0, 2
         exit",
    );
    accept(&src);
}

#[test]
fn spin_lock_around_an_update() {
    accept(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[9]
         call 1
         jeq %r0, 0, out
         mov %r6, %r0
         mov %r1, %r6
         call 93
         ldxdw %r2, [%r6+8]
         add %r2, 1
         stxdw [%r6+8], %r2
         mov %r1, %r6
         call 94
         out: mov %r0, 2
         exit",
    );
}

/// A hash value's lock taken through one copy of the pointer and released through
/// another: the element's id, not the register, names the lock.
#[test]
fn spin_lock_in_a_hash_value_through_copies() {
    accept(
        "stw [%r10-4], 3
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[10]
         call 1
         jeq %r0, 0, out
         mov %r6, %r0
         mov %r7, %r0
         stxdw [%r10-16], %r0
         mov %r1, %r7
         add %r1, 8
         call 93
         ldxdw %r2, [%r6+0]
         add %r2, 1
         stxdw [%r6+0], %r2
         ldxdw %r1, [%r10-16]
         add %r1, 8
         call 94
         out: mov %r0, 2
         exit",
    );
}

/// A static function may run with the lock held, and may release it (the kernel
/// allows bpf-to-bpf calls inside the critical section).
#[test]
fn spin_lock_held_across_a_bpf_to_bpf_call() {
    accept(
        "stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[10]
         call 1
         jeq %r0, 0, out
         mov %r6, %r0
         mov %r1, %r6
         add %r1, 8
         call 93
         mov %r1, %r6
         call local bump
         mov %r1, %r6
         call local release
         out: mov %r0, 2
         exit
         bump: ldxdw %r2, [%r1+0]
         add %r2, 1
         stxdw [%r1+0], %r2
         mov %r0, 0
         exit
         release: add %r1, 8
         call 94
         mov %r0, 0
         exit",
    );
}

#[test]
fn masked_and_signed_indices() {
    accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r4, %r2
         add %r4, 2
         jgt %r4, %r3, out
         ldxsb %r6, [%r2+0]
         ldxb %r7, [%r2+1]
         stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[0]
         call 1
         jeq %r0, 0, out
         and32 %r7, 7
         lsh %r7, 3
         mov %r1, %r0
         add %r1, %r7
         ldxdw %r3, [%r1+0]
         jslt %r6, 0, out
         jsgt %r6, 56, out
         mov %r1, %r0
         add %r1, %r6
         ldxdw %r3, [%r1+0]
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn copies_of_a_scalar_share_a_bounds_check() {
    accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r4, %r2
         add %r4, 1
         jgt %r4, %r3, out
         ldxb %r6, [%r2+0]
         mov %r7, %r6
         jgt %r7, 15, out
         stw [%r10-4], 0
         mov %r2, %r10
         add %r2, -4
         lddw %r1, map[0]
         call 1
         jeq %r0, 0, out
         lsh %r6, 2
         add %r0, %r6
         ldxw %r0, [%r0+0]
         out: mov %r0, 2
         exit",
    );
}

#[test]
fn partially_initialised_key_requests_stack_zeroing() {
    let v = accept(
        "stw [%r10-8], 1
         mov %r2, %r10
         add %r2, -8
         lddw %r1, map[1]
         call 1
         mov %r0, 2
         exit",
    );
    assert!(v.stack_zeroing, "bytes fp-4..fp-1 of the key were never written");
}

/// `n` header checks in a row, each followed by a two-way branch whose sides meet
/// again; `merge_failures` sends failed bounds checks to the meeting point instead of
/// to the drop exit.
fn branchy(n: usize, merge_failures: bool) -> Vec<spine_isa::Insn> {
    let mut src = String::from(
        "mov %r6, %r1
         ldxw %r7, [%r6+0]
         ldxw %r8, [%r6+4]
         mov %r9, 0\n",
    );
    for k in 0..n {
        let fail = if merge_failures { format!("l{k}") } else { "drop".to_string() };
        src.push_str(&format!(
            "mov %r4, %r7
             add %r4, {off}
             jgt %r4, %r8, {fail}
             ldxb %r1, [%r7+{k}]
             jne %r1, {k}, l{k}
             add %r9, 1
             stw [%r10-4], {k}
             mov %r2, %r10
             add %r2, -4
             lddw %r1, map[0]
             l{k}: mov %r0, 0\n",
            off = k + 1,
        ));
    }
    src.push_str("mov %r0, %r9\nand %r0, 3\nexit\ndrop: mov %r0, 1\nexit\n");
    asm(&src)
}

#[test]
fn a_thousand_instruction_program_stays_cheap() {
    // Without pruning the paths would number 2^100; the counter in r9 differs on every
    // one of them but matters for no safety check, so states still meet.
    let insns = branchy(100, false);
    assert!(insns.len() >= 1000, "{} insns", insns.len());
    let t = std::time::Instant::now();
    let v = verify_insns(&insns).expect("accepted");
    eprintln!(
        "{} insns verified in {:?}: {} processed, {} states",
        insns.len(),
        t.elapsed(),
        v.insns_processed,
        v.peak_states
    );
    assert!(
        v.insns_processed < 4 * insns.len() as u64,
        "pruning failed: {} processed",
        v.insns_processed
    );
}

#[test]
fn failed_checks_that_rejoin_stay_polynomial() {
    // Each failed bounds check rejoins with a shorter proven range, so up to k states
    // meet at check k (as in the kernel); the total stays quadratic, far below the limit.
    let insns = branchy(100, true);
    let v = verify_insns(&insns).expect("accepted");
    assert!(v.insns_processed < 200_000, "{} processed", v.insns_processed);
}

#[test]
fn division_by_a_possibly_zero_number_is_defined() {
    accept(
        "ldxw %r2, [%r1+12]
         mov %r0, 100
         div %r0, %r2
         mod %r0, %r2
         div32 %r0, %r2
         and %r0, 3
         exit",
    );
}

#[test]
fn load_bytes_initialises_the_stack_it_fills() {
    let v = accept(
        "mov %r6, %r1
         mov %r1, %r6
         mov %r2, 0
         mov %r3, %r10
         add %r3, -16
         mov %r4, 16
         call 189
         ldxdw %r0, [%r10-16]
         ldxdw %r0, [%r10-8]
         and %r0, 3
         exit",
    );
    assert!(!v.stack_zeroing, "the helper wrote every byte it was given");
}

#[test]
fn devmap_programs_may_read_egress_ifindex() {
    use spine_verifier::{verify, xdp_devmap_ctx, KernelHelpers, Limits, VerifyEnv};
    let prog = asm("ldxw %r0, [%r1+20]\nand %r0, 3\nexit");
    let ctx = xdp_devmap_ctx();
    let helpers = KernelHelpers::xdp();
    let env = VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &[],
        limits: Limits::default(),
        log_level: 0,
    };
    let v = verify(&prog, &env).expect("devmap program");
    assert_eq!(v.insn_info[0].access, Some(MemAccess::Ctx { field: 5 }));
    assert!(verify_insns(&prog).is_err(), "refused for a device program");
}

#[test]
fn analysis_limits_are_enforced_and_named() {
    use spine_verifier::{verify, xdp_ctx, KernelHelpers, Limits, VerifyEnv, VerifyErrorKind};
    let insns = branchy(30, true);
    let ctx = xdp_ctx();
    let helpers = KernelHelpers::xdp();
    let maps = maps();
    let env = VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &maps,
        limits: Limits { max_insns: 200, ..Limits::default() },
        log_level: 0,
    };
    let e = verify(&insns, &env).expect_err("over the limit");
    assert!(matches!(e.kind, VerifyErrorKind::TooComplex { processed: 201, .. }), "{e}");
    assert!(e.to_string().contains("program too complex"), "{e}");
    let env = VerifyEnv { limits: Limits { max_states: 3, ..Limits::default() }, ..env };
    let e = verify(&insns, &env).expect_err("too many states");
    assert!(matches!(e.kind, VerifyErrorKind::TooComplex { .. }), "{e}");
}

#[test]
fn errors_read_like_the_kernel_log() {
    // The failing read is at a prune point (the check's fall-through), where registers
    // no later instruction reads are forgotten: r3 is compared again after it, so the
    // state shown keeps it.
    let e = verify_src(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r4, %r2
         add %r4, 6
         jgt %r4, %r3, +3
         ldxw %r0, [%r2+8]
         jgt %r4, %r3, +0
         exit
         mov %r0, 1
         exit",
    )
    .expect_err("reads past the checked range");
    assert_eq!(e.pc, 5);
    assert_eq!(e.insn, "(61) r0 = *(u32 *)(r2 +8)");
    let text = e.to_string();
    assert!(
        text.starts_with("insn 5: (61) r0 = *(u32 *)(r2 +8): invalid access to packet, off=8 size=4, R2(id=0,off=0,r=6)"),
        "{text}"
    );
    assert!(
        e.state.contains("R2=pkt(off=0,r=6)") && e.state.contains("R3=pkt_end()"),
        "{}",
        e.state
    );
}

#[test]
fn log_levels() {
    use spine_verifier::KernelHelpers;
    let insns = asm("mov %r0, 2\nexit");
    assert!(verify_with(&insns, &KernelHelpers::xdp(), 0).expect("ok").log.is_empty());
    let log = verify_with(&insns, &KernelHelpers::xdp(), 2).expect("ok").log;
    assert!(log.contains("0: (b7) r0 = 2") && log.contains("1: (95) exit"), "{log}");
    let bad = asm("ldxdw %r0, [%r10-8]\nexit");
    let e = verify_with(&bad, &KernelHelpers::xdp(), 1).expect_err("uninit");
    assert!(e.log.contains("invalid read from stack"), "{}", e.log);
    // Level 1 shows the path that led to the error, not the branches that did not.
    let branchy = asm("ldxw %r2, [%r1+12]
         jeq %r2, 0, +2
         mov %r0, 1
         ja +1
         ldxdw %r0, [%r10-8]
         exit");
    let e = verify_with(&branchy, &KernelHelpers::xdp(), 1).expect_err("uninit on one side");
    assert!(
        e.log.contains(
            "path to the error:\n0: (61) r2 = *(u32 *)(r1 +12)\n1: (15) if r2 == 0x0 goto pc+2\n4: (79)"
        ),
        "{}",
        e.log
    );
}

#[test]
fn hostile_shape_explosion_ends_within_the_limits() {
    // A loop whose body may initialise any subset of 24 stack slots, all of which a
    // helper may read on the way out (so none is dead): 2^24 shapes in the loop.
    // The analysis must give up with "too complex", not run away.
    let mut src = String::from("mov %r7, %r1\nldxw %r6, [%r1+12]\nloop:\n");
    for k in 0..24 {
        src.push_str(&format!(
            "mov %r2, %r6\nand %r2, {}\njeq %r2, 0, s{k}\nstdw [%r10-{}], 0\ns{k}: mov %r0, 0\n",
            1u32 << k,
            8 * (k + 1)
        ));
    }
    src.push_str(
        "jne %r6, 77, next
         mov %r1, %r7
         mov %r2, 0
         mov %r3, %r10
         add %r3, -192
         mov %r4, 192
         call 190
         mov %r0, 2
         exit
         next: call 7
         mov %r6, %r0
         ja loop\n",
    );
    let e = verify_src(&src).expect_err("too many shapes");
    assert!(matches!(e.kind, spine_verifier::VerifyErrorKind::TooComplex { .. }), "{e}");
    assert!(e.to_string().contains("too many distinct states"), "{e}");
}

#[test]
fn dead_stack_slots_do_not_split_states() {
    // The body may write any subset of 24 slots that nothing reads again: 2^24 stack
    // shapes if slots were kept, one once dead slots are forgotten at prune points.
    let mut src = String::from("ldxw %r6, [%r1+12]\nloop:\n");
    for k in 0..24 {
        src.push_str(&format!(
            "mov %r2, %r6\nand %r2, {}\njeq %r2, 0, s{k}\nstdw [%r10-{}], 0\ns{k}: mov %r0, 0\n",
            1u32 << k,
            8 * (k + 1)
        ));
    }
    src.push_str("jeq %r6, 77, out\ncall 7\nmov %r6, %r0\nja loop\nout: mov %r0, 2\nexit\n");
    let v = accept(&src);
    assert!(v.peak_states < 500, "{} states", v.peak_states);
}

#[test]
fn live_stack_slots_survive_prune_points_however_they_are_read() {
    // Each slot is written on every path before a prune point and read after it: through
    // a derived address, by a callee handed its address, and back through a spilled
    // stack address. Forgetting any of them would make the read uninitialised.
    accept(
        "ldxw %r6, [%r1+12]
         stdw [%r10-8], 1
         stdw [%r10-16], 2
         stdw [%r10-24], 3
         mov %r2, %r10
         add %r2, -24
         stxdw [%r10-32], %r2
         jeq %r6, 0, l
         mov %r0, 0
         l: mov %r2, %r10
         add %r2, -16
         ldxdw %r0, [%r2+0]
         mov %r1, %r10
         add %r1, -8
         call local f
         ldxdw %r3, [%r10-32]
         ldxdw %r0, [%r3+0]
         and %r0, 3
         exit
         f: ldxdw %r0, [%r1+0]
         exit",
    );
}

#[test]
fn spilled_numbers_no_check_depends_on_do_not_split_states() {
    // Sixteen diamonds each store 1 or 2 into their own slot; a helper reads all of them
    // at the end (so they stay live), but no check depends on their values: 2^16
    // states if the values were kept apart, a few per diamond once they are forgotten.
    let mut src = String::from("mov %r7, %r1\nldxw %r6, [%r1+12]\n");
    for k in 0..16 {
        let off = 8 * (k + 1);
        src.push_str(&format!(
            "mov %r2, %r6\nand %r2, {}\njeq %r2, 0, a{k}\nstdw [%r10-{off}], 1\nja b{k}\n\
             a{k}: stdw [%r10-{off}], 2\nb{k}: mov %r0, 0\n",
            1u32 << k
        ));
    }
    src.push_str(
        "mov %r1, %r7\nmov %r2, 0\nmov %r3, %r10\nadd %r3, -128\nmov %r4, 128\ncall 190\n\
         mov %r0, 2\nexit\n",
    );
    let v = accept(&src);
    assert!(v.insns_processed < 5_000, "{} insns processed", v.insns_processed);
}

#[test]
fn spilled_numbers_a_check_depends_on_keep_their_value() {
    // The spilled length bounds a packet access after the prune point: forgetting it
    // would refuse a safe program.
    accept(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         ldxw %r6, [%r1+12]
         jeq %r6, 0, a
         stdw [%r10-8], 4
         ja b
         a: stdw [%r10-8], 8
         b: ldxdw %r4, [%r10-8]
         mov %r5, %r2
         add %r5, %r4
         mov %r0, %r5
         add %r0, 1
         jgt %r0, %r3, out
         ldxb %r0, [%r5+0]
         out: mov %r0, 2
         exit",
    );
}

/// `bpf_map_pop_elem` and `bpf_map_peek_elem` fill an uninitialised stack buffer (the
/// kernel's `MEM_UNINIT`), which may then be read; a push reads a map value's bytes.
#[test]
fn queue_pop_and_peek_fill_an_uninitialised_buffer() {
    accept(
        "mov %r2, %r10
         add %r2, -8
         lddw %r1, map[11]
         call 88
         ldxdw %r6, [%r10-8]
         mov %r2, %r10
         add %r2, -16
         lddw %r1, map[11]
         call 89
         ldxdw %r7, [%r10-16]
         stw [%r10-20], 0
         mov %r2, %r10
         add %r2, -20
         lddw %r1, map[0]
         call 1
         jeq %r0, 0, out
         mov %r2, %r0
         lddw %r1, map[11]
         mov %r3, 2
         call 87
         out: mov %r0, 2
         exit",
    );
}

/// Peeking a read-only stack is reading it: allowed, as in the kernel.
#[test]
fn queue_peek_on_a_read_only_stack() {
    accept(
        "mov %r2, %r10
         add %r2, -8
         lddw %r1, map[12]
         call 89
         ldxdw %r0, [%r10-8]
         mov %r0, 2
         exit",
    );
}

/// A bloom filter's push reads a value and its peek tests one (the kernel's prototypes:
/// a map value, and a buffer it calls uninitialised). The peek only reads: an unwritten
/// buffer is zeroed at each invocation (no stale bytes reach the hash), and a read of
/// it afterwards is refused, since the helper never wrote it.
#[test]
fn bloom_filter_push_and_peek() {
    let v = accept(
        "stdw [%r10-8], 7
         mov %r2, %r10
         add %r2, -8
         lddw %r1, map[15]
         mov %r3, 0
         call 87
         mov %r2, %r10
         add %r2, -8
         lddw %r1, map[15]
         call 89
         exit",
    );
    assert!(!v.stack_zeroing, "the pushed and peeked value was written");
    let v = accept(
        "mov %r2, %r10
         add %r2, -16
         lddw %r1, map[15]
         call 89
         exit",
    );
    assert!(v.stack_zeroing, "a peek of unwritten bytes zeroes the stack");
    let e = common::verify_src(
        "mov %r2, %r10
         add %r2, -16
         lddw %r1, map[15]
         call 89
         ldxdw %r0, [%r10-16]
         exit",
    )
    .expect_err("read of a buffer a bloom peek never wrote");
    assert!(e.to_string().contains("-16"), "{e}");
}
