//! Shared fixtures: the maps every test program may name by index, and helpers to
//! assemble and verify.
#![allow(dead_code)]

use spine_abi::map_type as mt;
use spine_isa::{assemble, Insn};
use spine_verifier::{
    verify, xdp_ctx, KernelHelpers, Limits, MapInfo, Verified, VerifyEnv, VerifyError,
};

/// Map indices of the fixture set, as `lddw %rX, map[N]` names them.
pub const ARRAY: usize = 0; // key 4, value 64, 8 entries
pub const HASH: usize = 1; // key 8, value 16
pub const RODATA: usize = 2; // read-only array, value 32, 1 entry
pub const PROG_ARRAY: usize = 3;
pub const DEVMAP: usize = 4;
pub const RINGBUF: usize = 5;
pub const MAP_OF_MAPS: usize = 6; // inner: array key 4 value 8
pub const DATA: usize = 7; // .data-like: array, value 64, 1 entry
pub const PERCPU: usize = 8; // percpu array key 4 value 8
pub const LOCKED: usize = 9; // array key 4 value 16, a bpf_spin_lock at offset 0
pub const LOCKED_HASH: usize = 10; // hash key 4 value 16, a bpf_spin_lock at offset 8
pub const QUEUE: usize = 11; // queue, value 8, 4 entries
pub const RO_STACK: usize = 12; // stack, value 8, BPF_F_RDONLY_PROG
pub const TIMERS: usize = 13; // array key 4 value 32, a bpf_timer at offset 8
pub const TIMER_HASH: usize = 14; // hash key 4 value 24, a bpf_timer at offset 0
pub const BLOOM: usize = 15; // bloom filter, value 8
pub const XSKS: usize = 16; // xskmap, 4 entries: a lookup reads `queue_id` only

pub fn maps() -> Vec<MapInfo> {
    let mut rodata = MapInfo::new(".rodata", mt::ARRAY, 4, 32, 1);
    rodata.read_only = true;
    let mut mom = MapInfo::new("outer", mt::ARRAY_OF_MAPS, 4, 4, 4);
    mom.inner = Some(Box::new(MapInfo::new("inner", mt::ARRAY, 4, 8, 4)));
    let mut locked = MapInfo::new("locked", mt::ARRAY, 4, 16, 4);
    locked.spin_lock = Some(0);
    let mut locked_hash = MapInfo::new("locked_hash", mt::HASH, 4, 16, 8);
    locked_hash.spin_lock = Some(8);
    let mut ro_stack = MapInfo::new("ro_stack", mt::STACK, 0, 8, 4);
    ro_stack.read_only = true;
    let mut timers = MapInfo::new("timers", mt::ARRAY, 4, 32, 4);
    timers.timer = Some(8);
    let mut timer_hash = MapInfo::new("timer_hash", mt::HASH, 4, 24, 16);
    timer_hash.timer = Some(0);
    vec![
        MapInfo::new("array", mt::ARRAY, 4, 64, 8),
        MapInfo::new("hash", mt::HASH, 8, 16, 64),
        rodata,
        MapInfo::new("jmp_table", mt::PROG_ARRAY, 4, 4, 4),
        MapInfo::new("tx_ports", mt::DEVMAP, 4, 4, 8),
        MapInfo::new("events", mt::RINGBUF, 0, 0, 4096),
        mom,
        MapInfo::new(".data", mt::ARRAY, 4, 64, 1),
        MapInfo::new("percpu", mt::PERCPU_ARRAY, 4, 8, 4),
        locked,
        locked_hash,
        MapInfo::new("queue", mt::QUEUE, 0, 8, 4),
        ro_stack,
        timers,
        timer_hash,
        MapInfo::new("bloom", mt::BLOOM_FILTER, 0, 8, 16),
        MapInfo::new("xsks_map", mt::XSKMAP, 4, 4, 4),
    ]
}

pub fn asm(src: &str) -> Vec<Insn> {
    assemble(src).unwrap_or_else(|e| panic!("assembly failed: {e}\n{src}"))
}

pub fn verify_insns(insns: &[Insn]) -> Result<Verified, VerifyError> {
    verify_with(insns, &KernelHelpers::xdp(), 0)
}

pub fn verify_with(
    insns: &[Insn],
    helpers: &KernelHelpers,
    log_level: u8,
) -> Result<Verified, VerifyError> {
    let ctx = xdp_ctx();
    let maps = maps();
    let env = VerifyEnv { ctx: &ctx, helpers, maps: &maps, limits: Limits::default(), log_level };
    verify(insns, &env)
}

pub fn verify_src(src: &str) -> Result<Verified, VerifyError> {
    verify_insns(&asm(src))
}

/// Verifies and panics with the full error (and log) if refused.
pub fn accept(src: &str) -> Verified {
    let insns = asm(src);
    match verify_insns(&insns) {
        Ok(v) => v,
        Err(e) => {
            let logged = verify_with(&insns, &KernelHelpers::xdp(), 2)
                .err()
                .map(|e| e.log)
                .unwrap_or_default();
            let tail: String = logged
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            panic!("refused: {e}\n--- log tail ---\n{tail}\n--- program ---\n{src}")
        }
    }
}

/// The `; expect: Kind` header of a corpus file.
pub fn expected(src: &str) -> Option<String> {
    src.lines().find_map(|l| l.trim().strip_prefix("; expect:").map(|s| s.trim().to_string()))
}
