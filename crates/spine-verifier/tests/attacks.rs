//! The attack corpus: each file in `tests/attacks/` is a program the verifier must
//! refuse, with a header line `; expect: <VerifyErrorKind variant>` naming the rule it
//! breaks (`Isa(<IsaErrorKind>)` for structural errors) and, optionally, `; helpers:
//! <ids>` restricting the helper table (a protection domain). One test per file.

mod common;

use spine_verifier::KernelHelpers;

fn helpers_for(src: &str) -> KernelHelpers {
    match src.lines().find_map(|l| l.trim().strip_prefix("; helpers:")) {
        Some(ids) => {
            let ids: Vec<u32> =
                ids.split(',').map(|s| s.trim().parse().expect("helper id")).collect();
            KernelHelpers::only(&ids)
        }
        None => KernelHelpers::xdp(),
    }
}

fn check(name: &str, src: &str) {
    let expect = common::expected(src).unwrap_or_else(|| panic!("{name}: no `; expect:` header"));
    let insns = spine_isa::assemble(src).unwrap_or_else(|e| panic!("{name}: {e}"));
    match common::verify_with(&insns, &helpers_for(src), 1) {
        Ok(_) => panic!("{name}: accepted, expected {expect}"),
        Err(e) => {
            assert_eq!(e.kind.detail_name(), expect, "{name}: wrong reason: {e}");
            // Errors name the instruction and show the state, like the kernel's log.
            let shown = e.to_string();
            assert!(shown.starts_with(&format!("insn {}: ", e.pc)), "{name}: {shown}");
            if !matches!(e.kind, spine_verifier::VerifyErrorKind::Isa(_)) {
                assert!(e.pc < insns.len().max(1), "{name}: pc {} out of range", e.pc);
            }
        }
    }
}

macro_rules! attacks {
    ($($name:ident,)*) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name), include_str!(concat!("attacks/", stringify!($name), ".s")));
            }
        )*
        /// Every file in the directory has its test, and there are enough of them.
        #[test]
        fn corpus_is_complete() {
            let listed = [$(stringify!($name)),*];
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/attacks");
            let mut files: Vec<String> = std::fs::read_dir(dir)
                .expect("corpus directory")
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|f| f.strip_suffix(".s").map(str::to_string))
                .collect();
            files.sort();
            let mut listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
            listed.sort();
            assert_eq!(files, listed, "tests/attacks.rs must list every corpus file");
            assert!(listed.len() >= 60, "only {} attacks", listed.len());
        }
    };
}

attacks! {
    arith_on_ctx,
    dynptr_misaligned,
    dynptr_used_after_overwrite,
    dynptr_rdwr_slice_changes_stack_value,
    dynptr_rdwr_slice_forges_spill,
    dynptr_read_bytes,
    dynptr_slice_leaks_spill,
    dynptr_slice_outlives_frame,
    dynptr_slice_past_size,
    dynptr_slice_rdonly_write,
    dynptr_slice_size_unknown,
    dynptr_uninit_slice,
    arith_on_map_handle,
    arith_on_packet_end,
    bad_map_index,
    call_depth_nine_frames,
    callback_reads_past_context,
    callback_returns_two,
    callx,
    combined_stack_too_large,
    ctx_atomic,
    ctx_egress_ifindex,
    ctx_misaligned,
    ctx_narrow,
    ctx_oversized,
    ctx_past_end,
    ctx_sign_extending_load,
    ctx_write_data,
    ctx_write_ifindex,
    devmap_value_write,
    direct_value_of_hash,
    empty_program,
    exit_r0_uninit,
    falls_off_the_end,
    global_data_oob,
    helper_ctx_is_stack,
    helper_key_is_ctx,
    helper_key_too_small_on_stack,
    helper_map_is_number,
    helper_outside_domain,
    helper_size_exceeds_buffer,
    helper_size_negative,
    helper_size_unbounded,
    helper_size_zero,
    invalid_opcode,
    jump_across_functions,
    jump_into_lddw,
    jump_out_of_program,
    leak_invalidated_minus_live_pointer,
    leak_invalidated_pointer_into_map,
    leak_invalidated_pointer_moved,
    leak_pointer_32bit_copy,
    leak_pointer_as_helper_number,
    leak_pointer_atomic_operand,
    leak_pointer_into_map,
    leak_pointer_into_packet,
    leak_spill_through_helper_after_prune,
    leak_pointer_returned,
    leak_pointer_through_update_value,
    leak_truncated_pointer_stored,
    legacy_ld_abs,
    legacy_ld_ind,
    lookup_in_prog_array,
    map_value_loop_overrun,
    queue_lookup_with_key,
    bloom_lookup,
    bloom_pop,
    queue_peek_buffer_too_small,
    queue_peek_into_packet,
    queue_pop_from_read_only_stack,
    queue_push_leaks_pointer,
    queue_push_on_array,
    map_value_negative_fixed,
    map_value_negative_variable,
    map_value_compared_with_other_map,
    map_value_oob_fixed,
    map_value_oob_variable,
    map_value_unequal_to_checked_one,
    map_value_unbounded_index,
    meta_checked_against_end,
    meta_checked_past_max_packet_offset,
    meta_unchecked,
    null_arithmetic_before_check,
    null_branch_dereference,
    null_checked_after_use,
    null_checked_wrong_register,
    null_ringbuf_record_arithmetic,
    null_unchecked,
    pkt_check_against_wrong_pointer,
    pkt_check_on_one_path,
    pkt_check_other_packet_pointer,
    pkt_checked_past_max_packet_offset,
    pkt_many_paths_one_past_range,
    pkt_compare_32bit,
    pkt_counted_loop_last_iteration_past_range,
    pkt_end_dereference,
    pkt_insufficient_check,
    pkt_negative_fixed_offset,
    pkt_negative_variable_offset,
    pkt_no_check,
    pkt_off_by_one,
    pkt_off_by_one_ge,
    pkt_pointer_after_adjust_head,
    stale_pointer_moved_then_read,
    stale_pointer_compared_with_number,
    stale_moved_pointer_leaked_into_map,
    stale_pointer_compared_with_map_value,
    pkt_spilled_pointer_after_adjust_tail,
    pkt_var_offset_not_rechecked,
    pkt_var_offset_too_large_to_check,
    pkt_var_offset_unbounded,
    pkt_write_unchecked,
    pointer_32bit_add,
    pointer_compared_to_number,
    pointer_minus_other_region,
    pointer_multiplied,
    pointer_ored,
    pointer_plus_pointer,
    prune_fall_through_offset_one_path,
    prune_fall_through_smaller_range,
    prune_fall_through_unbounded_one_path,
    redirect_map_on_array,
    register_clobbered_by_call,
    register_clobbered_by_helper,
    ringbuf_record_leaked,
    ringbuf_size_not_constant,
    ringbuf_submit_not_reserved,
    rodata_atomic,
    rodata_write_after_lookup,
    rodata_write_direct,
    rodata_written_by_helper,
    same_insn_ctx_and_stack,
    scalar_minus_pointer,
    spin_lock_held_across_call,
    spin_lock_held_at_exit,
    spin_lock_held_at_exit_after_callee,
    spin_lock_twice,
    spin_lock_without_one,
    spin_lock_word_read,
    spin_lock_word_stored,
    spin_lock_wrong_offset,
    spin_unlock_after_pointer_join,
    spin_unlock_other_element,
    spin_unlock_without_lock,
    stack_above_fp,
    stack_below_frame,
    stack_callee_pointer_into_caller,
    stack_misaligned,
    stack_partially_uninit_read,
    stack_pointer_partial_fill,
    stack_pointer_partial_spill,
    stack_return_callee_pointer,
    stack_spill_partially_overwritten,
    stack_uninit_in_callee,
    stack_uninit_read,
    stack_var_write_over_spill,
    stack_variable_offset_oob,
    tail_call_below_large_frames,
    tail_call_holding_reference,
    tail_call_through_array,
    timer_callback_reads_past_value,
    timer_callback_returns_one,
    timer_field_read,
    timer_field_stored,
    timer_field_through_helper,
    timer_in_map_without_one,
    timer_on_stack,
    timer_wrong_map,
    timer_wrong_offset,
    unbounded_recursion,
    uninit_register_read,
    unknown_helper,
    write_to_frame_pointer,
    xsk_atomic_add,
    xsk_pointer_arithmetic,
    xsk_pointer_as_helper_key,
    xsk_pointer_returned,
    xsk_pointer_stored_into_map,
    xsk_read_eight_bytes,
    xsk_read_past_queue_id,
    xsk_read_queue_id_byte,
    xsk_sign_extending_read,
    xsk_unchecked_read,
    xsk_write_queue_id,
}
