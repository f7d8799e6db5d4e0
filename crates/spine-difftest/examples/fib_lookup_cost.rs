//! What one `bpf_fib_lookup` costs in spine and in the kernel, side by side in one run:
//! the probe program of the differential test, one IPv4 lookup that succeeds (a
//! connected route, a neighbour entry) in the namespace that test builds, run
//! `--repeat` times by `BPF_PROG_TEST_RUN` there and by spine's JIT over the mirrored
//! FIB. The lookup's answer is its own input, so every repetition does the same work.
//!
//! `cargo run --release -p spine-difftest --example fib_lookup_cost [-- ROUNDS REPEAT]`
//! (needs root). Prints ns per run for both and their ratio, per round.

#[path = "../tests/fibns/mod.rs"]
mod fibns;

use fibns::FibHost;
use spine_runtime::{
    load_object, Budget, EngineKind, Frame, Geometry, LoadOptions, RxInfo, XdpRunner,
};
use spine_sys::{TestRun, XdpMd};

fn main() {
    let args: Vec<u32> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let rounds = args.first().copied().unwrap_or(5);
    let repeat = args.get(1).copied().unwrap_or(200_000);
    let Some((ns, env, names)) = fibns::build() else { return };
    let dir = std::env::temp_dir().join(format!("spine-fib-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fib_probe.c");
    let object = spine_progs::compile_c(&src, &dir.join("fib_probe.o"), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    let obj = spine_obj::parse(&object).expect("parse");

    // 172.24.0.5 from dn1: a connected route out of dn1, a permanent neighbour. The
    // answer rewrites the struct with what it already holds (ifindex, mtu_result =
    // tot_len, metric 0 over tos/flowinfo, the MACs after the first run).
    let mut p = vec![0u8; 94];
    p[12] = 0x08;
    let s = &mut p[14..78];
    s[0] = 2;
    s[1] = 17;
    s[6..8].copy_from_slice(&1500u16.to_ne_bytes());
    s[8..12].copy_from_slice(&names["dn1"].to_ne_bytes());
    s[16..20].copy_from_slice(&[10, 2, 0, 1]);
    s[32..36].copy_from_slice(&[172, 24, 0, 5]);
    let rx = RxInfo { ingress_ifindex: names["in0"], rx_queue_index: 0 };

    let opts = LoadOptions { engine: EngineKind::Jit, ..LoadOptions::default() };
    let loaded = load_object(&obj, &opts).expect("spine load");
    let ext = loaded.program(None).expect("program").clone();
    let mut runner = XdpRunner::new(ext, 0).expect("runner").with_budget(Budget::UNLIMITED);
    let mut host = FibHost(env);
    let mut frame = Frame::new(Geometry::TEST_RUN);
    frame.load(&p).expect("frame");
    runner.run(&mut frame, rx, &mut host).expect("run");
    let code = i64::from_ne_bytes(frame.meta_and_packet()[86..94].try_into().expect("8"));
    assert_eq!(code, 0, "the lookup succeeds");

    for round in 0..rounds {
        let kernel_ns = ns.enter(|| {
            spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
            let k = spine_sys::load_object_program(&obj, obj.program(None).expect("program"))
                .expect("kernel load");
            let mut run = TestRun::new(&p);
            run.ctx_in =
                Some(XdpMd { ingress_ifindex: rx.ingress_ifindex, ..XdpMd::for_packet(94, 0) });
            run.repeat = repeat;
            k.prog.test_run(&run).expect("test run").duration_ns
        });
        spine_sys::pin_current_thread(0).expect("pinning to CPU 0");
        let t = std::time::Instant::now();
        for _ in 0..repeat {
            let _ = runner.run(&mut frame, rx, &mut host);
        }
        let spine_ns = t.elapsed().as_nanos() as f64 / f64::from(repeat);
        println!(
            "round {round}: kernel {kernel_ns} ns/run, spine (JIT) {spine_ns:.1} ns/run, \
             kernel/spine {:.2}",
            f64::from(kernel_ns) / spine_ns
        );
    }
}
