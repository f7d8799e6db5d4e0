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
