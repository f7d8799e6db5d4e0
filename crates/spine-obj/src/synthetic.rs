//! A generated object for benchmarks that measure loading and running.

use crate::{MapOrigin, MapSpec, Object, ProgType, Program};

/// The synthetic XDP object of the load and run benchmarks (`spine bench exec`, the
/// runtime's `run_cost` example): one program of exactly `n` instructions (at least
/// 6) of bounds-checked packet reads, arithmetic, branches and array-map lookups, and
/// its 16-entry array map.
pub fn synthetic(n: usize) -> Object {
    let mut src = String::from("ldxw %r6, [%r1+0]\nldxw %r7, [%r1+4]\nmov %r8, %r1\nmov %r9, 0\n");
    // Instructions so far (the header is 4; a block 19, its `lddw` taking two slots).
    let mut count = 4;
    let mut block = 0;
    // Each block: check 8 more bytes, read them, mix them in, look one up in the map.
    while count + 19 + 2 <= n {
        let off = 8 * (block % 64) + 8;
        src.push_str(&format!(
            "mov %r2, %r6\nadd %r2, {off}\njgt %r2, %r7, +14\nldxdw %r3, [%r6+{}]\nxor %r9, %r3\n\
             rsh %r3, 7\nand %r3, 15\nstw [%r10-4], 0\nstxw [%r10-4], %r3\nlddw %r1, map[0]\n\
             mov %r2, %r10\nadd %r2, -4\ncall 1\njeq %r0, 0, +2\nldxdw %r4, [%r0+0]\nadd %r9, %r4\n\
             jsgt %r9, 1000, +1\nadd %r9, 1\n",
            off - 8
        ));
        count += 19;
        block += 1;
    }
    while count + 2 < n {
        src.push_str("add %r9, 3\n");
        count += 1;
    }
    src.push_str("mov %r0, 2\nexit\n");
    let insns: Vec<spine_isa::Insn> =
        spine_isa::assemble(&src).expect("synthetic program assembles");
    let map = MapSpec {
        name: "counts".into(),
        map_type: spine_abi::map_type::ARRAY,
        key_size: 4,
        value_size: 8,
        max_entries: 16,
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
    };
    Object {
        license: "GPL".into(),
        skipped: Vec::new(),
        btf: None,
        programs: vec![Program {
            name: "synthetic".into(),
            section: "xdp".into(),
            prog_type: ProgType::Xdp,
            insns,
            functions: vec![(0, "synthetic".into())],
        }],
        maps: vec![map],
    }
}
