//! Loads from a frozen read-only map value (`.rodata` once written and frozen) at a
//! constant offset read known numbers, as the kernel's `bpf_map_direct_read`: an index
//! taken from a `const volatile` setting needs no bounds check, and branches the
//! setting rules out are never explored. Only for a read-only map: a writable one's
//! contents are never trusted.

mod common;

use common::*;
use spine_verifier::{verify, xdp_ctx, KernelHelpers, Limits, VerifyEnv};

/// `.rodata` (map 2, 32 bytes): byte 4 is 3, the u32 at 12 is 0x1234.
fn rodata() -> std::sync::Arc<[u8]> {
    let mut v = vec![0u8; 32];
    v[4] = 3;
    v[12..16].copy_from_slice(&0x1234u32.to_le_bytes());
    v.into()
}

fn run(src: &str, frozen: Option<(usize, std::sync::Arc<[u8]>)>) -> Result<(), String> {
    let insns = asm(src);
    let ctx = xdp_ctx();
    let helpers = KernelHelpers::xdp();
    let mut maps = maps();
    if let Some((m, bytes)) = frozen {
        maps[m].frozen = Some(bytes);
    }
    let env = VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &maps,
        limits: Limits::default(),
        log_level: 0,
    };
    verify(&insns, &env).map(|_| ()).map_err(|e| e.to_string())
}

/// An index from `.rodata` scaled and added to a 64-byte value: in bounds only for the
/// value the setting has (3 * 8 + 32 + 8 = 64).
const INDEX: &str = "lddw %r2, map_value[2]+0
     ldxb %r3, [%r2+4]
     lsh %r3, 3
     lddw %r1, map_value[7]+0
     add %r1, %r3
     ldxdw %r0, [%r1+32]
     mov %r0, 2
     exit";

/// A branch on the u32 at 12 that only another setting would take, into code that
/// reads a register never written.
const DEAD_BRANCH: &str = "lddw %r2, map_value[2]+0
     ldxw %r3, [%r2+12]
     jne %r3, 0x1234, other
     mov %r0, 2
     exit
     other: mov %r0, %r9
     exit";

#[test]
fn a_setting_read_from_frozen_rodata_is_a_known_number() {
    run(INDEX, Some((RODATA, rodata()))).expect("the index is 3");
    let e = run(INDEX, None).expect_err("an unknown byte may be 255");
    assert!(e.contains("invalid access to map value"), "{e}");
}

#[test]
fn branches_a_frozen_setting_rules_out_are_not_explored() {
    run(DEAD_BRANCH, Some((RODATA, rodata()))).expect("the other branch is dead");
    let e = run(DEAD_BRANCH, None).expect_err("both branches live");
    assert!(e.contains("R9 !read_ok"), "{e}");
}

#[test]
fn a_writable_maps_contents_are_never_trusted() {
    // The same bytes as a writable map's (DATA, map 7): a program may have changed them.
    let src = INDEX.replace("map_value[2]", "map_value[7]");
    let mut bytes = vec![0u8; 64];
    bytes[4] = 3;
    let e = run(&src, Some((DATA, bytes.into()))).expect_err("not read-only");
    assert!(e.contains("invalid access to map value"), "{e}");
}
