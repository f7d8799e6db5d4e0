//! The verifier's soundness, fuzzed: any program it accepts runs on the checking
//! interpreter without ever touching memory outside the regions it was given (the
//! interpreter checks every access and every helper pointer), on a packet taken from the
//! same input. Budget faults are fine (loops are allowed); anything else is a verifier bug.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spine_isa::Insn;
use spine_obj::{MapOrigin, MapSpec, Object, ProgType, Program};
use spine_runtime::{load_object, EngineKind, FixedHost, Frame, Geometry, LoadOptions, RxInfo, XdpRunner};
use spine_vm::Fault;

fn map(name: &str, map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> MapSpec {
    MapSpec {
        name: name.into(),
        map_type,
        key_size,
        value_size,
        max_entries,
        flags: 0,
        pinning: 0,
        numa_node: 0,
        map_extra: 0,
        initial: None,
        origin: MapOrigin::Btf,
        inner: None,
        init_slots: Vec::new(),
        spin_lock: None,
        timer: None,
        btf_key_type_id: 0,
        btf_value_type_id: 0,
    }
}

fuzz_target!(|data: &[u8]| {
    // Input: [packet length (2 bytes)] [packet] [program: 8-byte instructions]
    if data.len() < 2 {
        return;
    }
    let plen = (usize::from(u16::from_le_bytes([data[0], data[1]])) % 256).max(14);
    let rest = &data[2..];
    if rest.len() < plen + 8 {
        return;
    }
    let (packet, code) = rest.split_at(plen);
    let Some(insns) = Insn::decode_all(&code[..code.len() - code.len() % 8]) else { return };
    use spine_abi::map_type::*;
    let obj = Object {
        license: "GPL".into(),
        programs: vec![Program {
            name: "fuzz".into(),
            section: "xdp".into(),
            prog_type: ProgType::Xdp,
            insns,
            functions: vec![(0, "fuzz".into())],
        }],
        maps: vec![
            map("arr", ARRAY, 4, 16, 4),
            map("hash", HASH, 8, 8, 8),
            map("pcpu", PERCPU_ARRAY, 4, 8, 2),
            map("queue", QUEUE, 0, 8, 4),
            map("stack", STACK, 0, 12, 2),
        ],
        skipped: Vec::new(),
        btf: None,
    };
    let opts = LoadOptions { engine: EngineKind::Interpreter, ..LoadOptions::default() };
    let Ok(loaded) = load_object(&obj, &opts) else { return };
    let ext = loaded.programs[0].clone();
    let mut runner = XdpRunner::new(ext, 0).expect("runner");
    let mut frame = Frame::new(Geometry::TEST_RUN);
    frame.load(packet).expect("14..=255 bytes fit");
    if let Err(f) = runner.run(&mut frame, RxInfo::default(), &mut FixedHost::new(1)) {
        assert!(matches!(*f, Fault::Budget { .. }), "a verified program faulted: {f}");
    }
});
