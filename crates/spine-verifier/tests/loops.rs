//! Loops the verifier must accept: termination is not its job (the run-time watchdog
//! ends an invocation over budget), so bounded, unbounded and infinite loops verify as
//! long as every access in them is safe. One test per file in `tests/loops/`.

mod common;

fn check(name: &str, src: &str) {
    assert_eq!(common::expected(src).as_deref(), Some("accept"), "{name}: header");
    let v = common::accept(src);
    assert!(!v.loop_heads.is_empty() || src.contains("call 181"), "{name}: no loop head found");
}

macro_rules! loops {
    ($($name:ident,)*) => {
        $(
            #[test]
            fn $name() {
                check(stringify!($name), include_str!(concat!("loops/", stringify!($name), ".s")));
            }
        )*
        #[test]
        fn corpus_is_complete() {
            let listed = [$(stringify!($name)),*];
            let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/loops");
            let mut files: Vec<String> = std::fs::read_dir(dir)
                .expect("corpus directory")
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|f| f.strip_suffix(".s").map(str::to_string))
                .collect();
            files.sort();
            let mut listed: Vec<String> = listed.iter().map(|s| s.to_string()).collect();
            listed.sort();
            assert_eq!(files, listed, "tests/loops.rs must list every corpus file");
        }
    };
}

loops! {
    bounded_index_loop_writing_packet,
    bpf_loop_with_huge_count,
    countdown_loop,
    cursor_loop_variable_steps,
    do_while_stack_buffer,
    huge_counted_loop,
    infinite_empty_loop,
    infinite_loop_with_work,
    loop_in_callee,
    loop_over_map_value,
    loop_with_map_lookups,
    nested_loops,
    packet_loop_backwards,
    packet_walk_until_end,
    tlv_walk,
    while_true_guarded_packet_read,
}

#[test]
fn long_branchy_loop_of_unknown_count_still_converges() {
    // A loop of unknown count whose body (three branches on a packet byte, then 4,000
    // instructions) moves an index the stack read after it depends on: every iteration
    // arrives with different numbers, so unrolling it would spend the whole instruction
    // budget; past half of it, the loop head joins and widens instead.
    let mut src = String::from(
        "ldxw %r2, [%r1+0]
         ldxw %r3, [%r1+4]
         mov %r4, %r2
         add %r4, 8
         jgt %r4, %r3, out
         stdw [%r10-8], 0
         stdw [%r10-16], 0
         stdw [%r10-24], 0
         stdw [%r10-32], 0
         mov %r6, 0
         loop: ldxb %r5, [%r2+0]\n",
    );
    for k in 0..3 {
        src.push_str(&format!(
            "jset %r5, {}, a{k}\nadd %r6, {}\nja b{k}\na{k}: add %r6, {}\nb{k}: and %r6, 31\n",
            1 << k,
            k + 1,
            2 * k + 3
        ));
    }
    for k in 0..4000 {
        src.push_str(if k % 2 == 0 { "mov %r0, %r6\n" } else { "add %r0, 1\n" });
    }
    src.push_str(
        "mov %r7, %r10
         add %r7, -32
         add %r7, %r6
         ldxb %r0, [%r7+0]
         ldxb %r5, [%r2+1]
         jne %r5, 0, loop
         out: mov %r0, 2
         exit\n",
    );
    let v = common::accept(&src);
    assert!(v.insns_processed < 1_000_000, "{} processed", v.insns_processed);
}
