//! Typical clang-built XDP programs beyond the bundled ones (loops clang did not unroll,
//! helpers with memory arguments, a `bpf_loop` callback, global data, a bpf-to-bpf call
//! filling its caller's struct, packet edits after `bpf_xdp_adjust_head`). Each was
//! checked to load into the kernel (6.18) with `bpftool prog load ... type xdp`; spine
//! must accept them too.

use spine_obj::{MapOrigin, MapSpec};
use spine_verifier::{verify, xdp_ctx, KernelHelpers, Limits, MapInfo, VerifyEnv, VerifyError};
use std::path::Path;

fn map_info(m: &MapSpec) -> MapInfo {
    let global_ro = matches!(m.origin, MapOrigin::GlobalData { read_only: true, .. });
    MapInfo {
        name: m.name.clone(),
        map_type: m.map_type,
        key_size: m.key_size,
        value_size: m.value_size,
        max_entries: m.max_entries,
        read_only: global_ro || m.flags & spine_abi::map_flags::RDONLY_PROG != 0,
        inner: m.inner.as_deref().map(|i| Box::new(map_info(i))),
        spin_lock: m.spin_lock,
        timer: m.timer,
        frozen: None,
    }
}

fn check(name: &str) {
    if let Err(b) = check_with(name, &[]) {
        let (prog, e, log) = *b;
        panic!("{name}/{prog} refused: {e}\n{log}");
    }
}

/// Compiles `name` with `extra` flags and verifies every program of it.
fn check_with(name: &str, extra: &[&str]) -> Result<(), Box<(String, VerifyError, String)>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c").join(format!("{name}.c"));
    // Tests run in parallel: one output per build.
    let tag = extra.join("").replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let out =
        std::env::temp_dir().join(format!("spine-verifier-{}-{name}{tag}.o", std::process::id()));
    let bytes = spine_progs::compile_c(&src, &out, extra).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_file(&out);
    let obj = spine_obj::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    let maps: Vec<MapInfo> = obj.maps.iter().map(map_info).collect();
    let ctx = xdp_ctx();
    let helpers = KernelHelpers::xdp();
    assert!(!obj.programs.is_empty());
    for p in &obj.programs {
        let env = VerifyEnv {
            ctx: &ctx,
            helpers: &helpers,
            maps: &maps,
            limits: Limits::default(),
            log_level: 0,
        };
        if let Err(e) = verify(&p.insns, &env) {
            let env = VerifyEnv { log_level: 1, ..env };
            let log = verify(&p.insns, &env).err().map(|e| e.log).unwrap_or_default();
            return Err(Box::new((p.name.clone(), e, log)));
        }
    }
    Ok(())
}

#[test]
fn loops_clang_did_not_unroll() {
    check("loops");
}

#[test]
fn helpers_callbacks_and_global_data() {
    check("helpers");
}

#[test]
fn copies_options_and_pushes_a_header() {
    check("copy");
}

#[test]
fn cursor_loop_load_bytes_and_for_each() {
    check("walk");
}

#[test]
fn header_walk_with_variable_lengths_and_a_rule_table() {
    // Up to 2 VLAN tags, IPv4 options, six IPv6 extension headers, TCP options: a
    // thousand and more paths meet at the address lookups after the walk, each with the
    // packet range it proved, which must survive to the read through the address header.
    check("hdr_filter");
}

#[test]
fn header_walk_reading_past_its_proven_range_is_refused() {
    let (prog, e, _) = *check_with("hdr_filter", &["-DUNSAFE_NEIGHBOUR"]).expect_err("unsafe");
    assert_eq!(prog, "hdr_filter");
    assert!(e.to_string().contains("invalid access to packet"), "{e}");
}

#[test]
fn extension_header_walk_in_a_function_advancing_its_callers_cursor() {
    // The unrolled walk's last step only stores the advanced pointer through the
    // cursor: the length added to it must keep its bounds all the same.
    check("ext_cursor");
}

#[test]
fn extension_header_walk_with_an_unbounded_length_is_refused() {
    let (prog, e, _) =
        *check_with("ext_cursor", &["-DUNBOUNDED_LEN"]).expect_err("unbounded length");
    assert_eq!(prog, "ext_cursor");
    assert!(e.to_string().contains("invalid access to packet"), "{e}");
}

#[test]
fn extension_header_walk_kept_as_a_bounded_loop() {
    // Each iteration advances the cursor by a different length: joined at the loop
    // head, the cursor's offset grows without bound; unrolled, as in the kernel, each
    // iteration keeps the range it proved.
    check_with("ext_cursor", &["-DLOOPS"]).unwrap_or_else(|b| {
        let (prog, e, log) = *b;
        panic!("ext_cursor/{prog} (bounded loop) refused: {e}\n{log}")
    });
}

#[test]
fn extension_header_walk_kept_as_a_loop_with_an_unbounded_length_is_refused() {
    let (prog, e, _) =
        *check_with("ext_cursor", &["-DLOOPS", "-DUNBOUNDED_LEN"]).expect_err("unbounded length");
    assert_eq!(prog, "ext_cursor");
    assert!(e.to_string().contains("invalid access to packet"), "{e}");
}

#[test]
fn length_returned_through_an_out_parameter_keeps_its_bounds() {
    check("out_param");
}

#[test]
fn unbounded_length_returned_through_an_out_parameter_is_refused() {
    let (prog, e, _) =
        *check_with("out_param", &["-DUNBOUNDED_LEN"]).expect_err("unbounded length");
    assert_eq!(prog, "out_param");
    assert!(e.to_string().contains("invalid access to packet"), "{e}");
}

#[test]
fn a_cursor_walked_to_the_packets_end_byte_by_byte_keeps_its_offset() {
    check("scan_to_end");
}

/// The same walk with a count no exploration covers (the kernel refuses it: "The
/// sequence of 8193 jumps is too complex"): spine unrolls within its budget, then joins
/// the passes and still proves the access (the watchdog bounds the run).
#[test]
fn a_walk_too_long_to_unroll_is_joined_and_still_proven() {
    if let Err(b) = check_with("scan_to_end", &["-DSCAN_MAX=1000000"]) {
        let (prog, e, log) = *b;
        panic!("{prog} refused: {e}\n{log}");
    }
}
