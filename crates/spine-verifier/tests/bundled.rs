//! Every bundled clang-built XDP program (the kernel accepts each one) verifies, with
//! the maps its object declares.

use spine_obj::{MapOrigin, MapSpec};
use spine_verifier::{verify, xdp_ctx, KernelHelpers, Limits, MapInfo, VerifyEnv};

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

#[test]
fn every_bundled_program_verifies() {
    let ctx = xdp_ctx();
    let helpers = KernelHelpers::xdp();
    let mut verified = 0;
    assert!(!spine_progs::all().is_empty(), "no bundled programs");
    for b in spine_progs::all() {
        let obj = spine_obj::parse(b.object).unwrap_or_else(|e| panic!("{}: {e}", b.name));
        let maps: Vec<MapInfo> = obj.maps.iter().map(map_info).collect();
        for p in &obj.programs {
            let env = VerifyEnv {
                ctx: &ctx,
                helpers: &helpers,
                maps: &maps,
                limits: Limits::default(),
                log_level: 0,
            };
            match verify(&p.insns, &env) {
                Ok(v) => {
                    eprintln!(
                        "{}/{}: {} insns, {} processed, {} states, loops at {:?}",
                        b.name,
                        p.name,
                        p.insns.len(),
                        v.insns_processed,
                        v.peak_states,
                        v.loop_heads
                    );
                    assert!(v.insn_info[0].reached);
                    verified += 1;
                }
                Err(e) => {
                    let env = VerifyEnv { log_level: 2, ..env };
                    let log = verify(&p.insns, &env).err().map(|e| e.log).unwrap_or_default();
                    let tail: Vec<&str> = log.lines().rev().take(60).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    panic!(
                        "{}/{} refused: {e}\n--- log tail ---\n{}",
                        b.name,
                        p.name,
                        tail.join("\n")
                    );
                }
            }
        }
    }
    assert!(verified >= spine_progs::all().len());
}

/// The load benchmark's program (`spine_obj::synthetic`, 52 blocks of a packet check, a
/// map lookup and two branches): paths that failed different earlier checks reach each
/// check with different packet ranges, and meet again only on its fall-through side,
/// where the check proved the same range for all of them. That side being a prune
/// point, each block's body is explored about twice instead of once per earlier block
/// (28,899 instructions processed before it was one).
#[test]
fn the_load_benchmark_program_explores_each_block_body_a_bounded_number_of_times() {
    let obj = spine_obj::synthetic(1000);
    let ctx = xdp_ctx();
    let helpers = KernelHelpers::xdp();
    let maps: Vec<MapInfo> = obj.maps.iter().map(map_info).collect();
    let env = VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &maps,
        limits: Limits::default(),
        log_level: 0,
    };
    let v = verify(&obj.programs[0].insns, &env).expect("verifies");
    assert!(v.insns_processed < 12_000, "{} instructions processed", v.insns_processed);
}
