//! Soundness: every program the verifier accepts runs in the interpreter, on any packet,
//! without touching memory outside the regions it was given. The interpreter checks
//! every access against exactly the stack, the context blob, the packet and one value
//! per map; helpers check the memory they are handed. Programs come from a biased random
//! generator and from mutating accepted programs.

mod common;

use proptest::prelude::*;
use spine_abi::map_type as mt;
use spine_isa::{op, Insn};
use spine_verifier::{
    verify, CtxField, CtxFieldKind, CtxLayout, KernelHelpers, Limits, MapInfo, VerifyEnv,
};
use spine_vm::{CallAbort, Env, Fault, Interpreter, Memory, Region, RunLimits, Stack};

const HANDLE_BASE: u64 = 0x5ead_0000;

/// A context whose pointer fields are 64 bits wide, so programs load real addresses.
fn ctx64() -> CtxLayout {
    let f = |name, off, kind| CtxField { name, off, size: 8, kind, writable: false };
    CtxLayout {
        size: 24,
        fields: vec![
            f("data", 0, CtxFieldKind::PacketStart),
            f("data_end", 8, CtxFieldKind::PacketEnd),
            f("data_meta", 16, CtxFieldKind::PacketMeta),
        ],
    }
}

/// The verifier's map table: the fixture maps, then inner-map templates.
fn flat_maps() -> Vec<MapInfo> {
    let mut v = common::maps();
    let inner: Vec<MapInfo> = v.iter().filter_map(|m| m.inner.as_deref().cloned()).collect();
    v.extend(inner);
    v
}

fn read_only(m: &MapInfo) -> bool {
    m.read_only
        || matches!(m.map_type, mt::DEVMAP | mt::DEVMAP_HASH | mt::XSKMAP | mt::SPINE_ENDPOINT)
}

/// Helpers that check every pointer they get against the invocation's regions.
struct TestEnv {
    maps: Vec<MapInfo>,
    values: Vec<u64>,
    seed: u64,
}

impl TestEnv {
    fn next(&mut self) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        self.seed
    }

    fn map(&self, handle: u64) -> Result<usize, CallAbort> {
        let i = handle.wrapping_sub(HANDLE_BASE) as usize;
        if i < self.maps.len() {
            Ok(i)
        } else {
            Err(CallAbort::Fault("not a map handle"))
        }
    }
}

const BAD_MEM: &str = "helper memory outside the regions";

impl Env for TestEnv {
    fn call(&mut self, id: u32, a: [u64; 5], mem: &mut Memory) -> Result<u64, CallAbort> {
        let readable = |mem: &Memory, p: u64, n: u64| {
            mem.slice(p, n as usize).map(|_| ()).ok_or(CallAbort::Fault(BAD_MEM))
        };
        match id {
            1 | 195 => {
                let m = self.map(a[0])?;
                readable(mem, a[1], self.maps[m].key_size.into())?;
                if self.next().is_multiple_of(4) {
                    return Ok(0);
                }
                if let Some(inner) = &self.maps[m].inner {
                    let k = self.maps.iter().position(|x| x.name == inner.name).unwrap_or(0);
                    return Ok(HANDLE_BASE + k as u64);
                }
                Ok(self.values[m])
            }
            2 => {
                let m = self.map(a[0])?;
                readable(mem, a[1], self.maps[m].key_size.into())?;
                readable(mem, a[2], self.maps[m].value_size.into())?;
                Ok(0)
            }
            3 => {
                let m = self.map(a[0])?;
                readable(mem, a[1], self.maps[m].key_size.into())?;
                Ok(0)
            }
            5 | 7 | 8 | 118 | 125 | 160 | 208 => Ok(self.next() & 0xffff_ffff),
            12 => Ok(u64::MAX),
            23 | 51 => Ok(0),
            28 => {
                readable(mem, a[0], a[1])?;
                readable(mem, a[2], a[3])?;
                Ok(self.next() & 0xffff)
            }
            44 | 54 | 65 => Ok((-22i64) as u64),
            69 => {
                mem.slice_mut(a[1], a[2] as usize).ok_or(CallAbort::Fault(BAD_MEM))?;
                Ok(0)
            }
            // bpf_map_push_elem reads a value; pop and peek write one.
            87 => {
                let m = self.map(a[0])?;
                readable(mem, a[1], self.maps[m].value_size.into())?;
                Ok(0)
            }
            88 | 89 => {
                let m = self.map(a[0])?;
                let n = self.maps[m].value_size as usize;
                mem.slice_mut(a[1], n).ok_or(CallAbort::Fault(BAD_MEM))?.fill(0x5a);
                Ok(if self.next().is_multiple_of(3) { (-2i64) as u64 } else { 0 })
            }
            _ => Err(CallAbort::Unknown),
        }
    }
}

/// Memory for one run: the context, a frame holding the packet, one value per map.
struct World {
    ctx: Box<[u64; 3]>,
    frame: Box<[u8; 4096]>,
    values: Vec<Box<[u8]>>,
}

impl World {
    fn new(maps: &[MapInfo]) -> World {
        World {
            ctx: Box::new([0; 3]),
            frame: Box::new([0; 4096]),
            values: maps
                .iter()
                .map(|m| vec![0u8; m.value_size.max(1) as usize].into_boxed_slice())
                .collect(),
        }
    }
}

/// Replaces map references by what the runtime would put there.
fn relocate(insns: &[Insn], values: &[u64]) -> Vec<Insn> {
    let mut out = insns.to_vec();
    let mut pc = 0;
    while pc < out.len() {
        let i = out[pc];
        if i.is_lddw() {
            let idx = i.imm as u32 as usize;
            let v = match i.src {
                op::PSEUDO_MAP_FD => Some(HANDLE_BASE + idx as u64),
                op::PSEUDO_MAP_VALUE => Some(values[idx] + u64::from(out[pc + 1].imm as u32)),
                _ => None,
            };
            if let Some(v) = v {
                let [a, b] = Insn::lddw(i.dst, 0, v);
                out[pc] = a;
                out[pc + 1] = b;
            }
            pc += 2;
        } else {
            pc += 1;
        }
    }
    out
}

/// Runs an accepted program on `packets`; returns the first memory-safety fault.
fn run_all(insns: &[Insn], maps: &[MapInfo], packets: &[(Vec<u8>, usize)]) -> Option<String> {
    let mut w = World::new(maps);
    let values: Vec<u64> = w.values.iter().map(|v| v.as_ptr() as u64).collect();
    let prog = match Interpreter::new(relocate(insns, &values)) {
        Ok(p) => p,
        Err(e) => return Some(format!("interpreter refused a verified program: {e}")),
    };
    let mut stack = Stack::new();
    for (bytes, meta) in packets {
        let base = w.frame.as_mut_ptr() as u64;
        let data = base + 256;
        let end = data + bytes.len() as u64;
        let meta_ptr = data - *meta as u64;
        w.frame[256..256 + bytes.len()].copy_from_slice(bytes);
        *w.ctx = [data, end, meta_ptr];
        let mut mem = Memory::new();
        let ctx_addr = w.ctx.as_ptr() as u64;
        // SAFETY: every region below points into `w`, which outlives `mem` and is not
        // otherwise borrowed while the interpreter runs.
        unsafe {
            mem.push(Region { start: ctx_addr, len: 24, writable: false });
            mem.push(Region { start: meta_ptr, len: end - meta_ptr, writable: true });
            for (m, v) in maps.iter().zip(w.values.iter_mut()) {
                if m.value_size > 0 {
                    mem.push(Region {
                        start: v.as_mut_ptr() as u64,
                        len: m.value_size.into(),
                        writable: !read_only(m),
                    });
                }
            }
        }
        let mut env = TestEnv {
            maps: maps.to_vec(),
            values: values.clone(),
            seed: 0x9e37_79b9_7f4a_7c15 ^ bytes.len() as u64,
        };
        let r = prog.run(
            [ctx_addr, 0, 0, 0, 0],
            &mut mem,
            &mut stack,
            &mut env,
            RunLimits { points: 2000 },
        );
        match r {
            Err(f @ Fault::OutOfBounds { .. }) => {
                return Some(format!("{f} (packet len {})", bytes.len()))
            }
            Err(f @ Fault::PcOutOfRange { .. }) => return Some(format!("{f}")),
            Err(Fault::Helper { reason, .. }) if reason == BAD_MEM => {
                return Some(reason.to_string())
            }
            _ => {}
        }
    }
    None
}

fn verify64(insns: &[Insn]) -> bool {
    let ctx = ctx64();
    let helpers = KernelHelpers::xdp();
    let maps = common::maps();
    let env = VerifyEnv {
        ctx: &ctx,
        helpers: &helpers,
        maps: &maps,
        limits: Limits { max_insns: 200_000, ..Limits::default() },
        log_level: 0,
    };
    verify(insns, &env).is_ok()
}

fn packets(seed: u64) -> Vec<(Vec<u8>, usize)> {
    let mut s = seed | 1;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut out = vec![(Vec::new(), 0), (vec![0xff; 1], 0), (vec![0; 14], 4)];
    for _ in 0..5 {
        let len = (next() % 160) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        out.push((bytes, (next() % 33) as usize));
    }
    out
}

fn at(r: usize, off: i64) -> String {
    if off < 0 {
        format!("[%r{r}{off}]")
    } else {
        format!("[%r{r}+{off}]")
    }
}

/// Builds a program from random choices: a prologue holding ctx, data, data_end and
/// data_meta in r6..r9 and small numbers in r0..r5, then snippets biased towards what
/// XDP programs do (bounds checks, near-miss accesses, stack spills, map lookups,
/// arithmetic on indices, short loops), then `r0 = 2; exit`.
fn generate(choices: &[u32]) -> Vec<Insn> {
    let mut src = String::from(
        "mov %r6, %r1
         ldxdw %r7, [%r6+0]
         ldxdw %r8, [%r6+8]
         ldxdw %r9, [%r6+16]
         mov %r0, 0
         mov %r1, 1
         mov %r2, 2
         mov %r3, 3
         mov %r4, %r7
         mov %r5, %r7
         stdw [%r10-8], 0
         stdw [%r10-16], 0
         stdw [%r10-24], 0
         stdw [%r10-32], 0\n",
    );
    let n = choices.len();
    for (k, &c) in choices.iter().enumerate() {
        let a = (c >> 8) as usize;
        // r0..r3 hold numbers, r4 and r5 pointers being worked on.
        let dst = a % 4;
        let src_r = (a >> 3) % 4;
        let p = 4 + (a >> 2) % 2;
        let q = 9 - p;
        let small = ((c >> 14) % 24) as i64 - 4;
        let (size, sb) = [("b", 1), ("h", 2), ("w", 4), ("dw", 8)][(a >> 6) % 4];
        let fwd = 1 + (a >> 9) % 4;
        let fwd = if k + fwd < n { format!("l{}", k + fwd) } else { "end".to_string() };
        let k16 = ((a >> 11) % 24).max(sb as usize);
        // Mostly inside the checked range, sometimes just outside it.
        let near = |k: i64| {
            if c % 7 == 0 {
                k - sb + small / 6
            } else {
                (k - sb).max(0) * ((a >> 13) % 3) as i64 / 2
            }
        };
        let line = match c % 24 {
            // Extreme numbers, and pointers moved by them.
            20 => format!(
                "lddw %r{dst}, {:#x}",
                [i64::MIN as u64, u64::MAX, 1 << 32, 1 << 31, (1 << 29) - 1, 0xffff, 1 << 63 | 7][a % 7]
            ),
            21 => format!("add %r{p}, %r{dst}\nldxb %r{src_r}, [%r{p}+0]"),
            22 => format!("mul %r{dst}, %r{src_r}\nmov %r{p}, %r10\nadd %r{p}, -8\nsub %r{p}, %r{dst}\nstb [%r{p}+0], 1"),
            0..=2 => format!(
                "mov %r{p}, %r7\nadd %r{p}, {k16}\njgt %r{p}, %r8, {fwd}\nldx{size} %r{dst}, {}",
                at(7, near(k16 as i64))
            ),
            3 => format!(
                "mov %r{p}, %r7\nadd %r{p}, {k16}\njgt %r{p}, %r8, {fwd}\nstx{size} {}, %r{dst}",
                at(7, near(k16 as i64))
            ),
            4 => {
                let off = -8 * (1 + (a >> 4) % 4) as i64 + if c % 7 == 0 { small } else { 0 };
                format!("ldx{size} %r{dst}, {}", at(10, off))
            }
            5 => format!("stxdw [%r10-{}], %r{src_r}", 8 * (1 + a % 4)),
            6 => format!("ldxdw %r{dst}, [%r10-{}]", 8 * (1 + a % 4)),
            7 => format!("mov %r{dst}, {}", small * 3),
            8 => format!("and %r{dst}, {}", (1u32 << (a % 7)) - 1),
            9 => format!("add %r{dst}, %r{src_r}"),
            10 => format!("j{} %r{dst}, {small}, {fwd}", ["gt", "ge", "lt", "le", "eq", "ne", "sgt", "slt"][a % 8]),
            11 => format!("j{} %r{dst}, %r{src_r}, {fwd}", ["gt", "ge", "lt", "le", "eq", "ne"][a % 6]),
            12 => format!(
                "stdw [%r10-8], {}
                 mov %r2, %r10
                 add %r2, -8
                 lddw %r1, map[{}]
                 call 1
                 mov %r{p}, %r0
                 mov %r{q}, %r7
                 mov %r0, 0
                 mov %r1, 1
                 mov %r2, 2
                 mov %r3, 3
                 jeq %r{p}, 0, {fwd}
                 ldxb %r1, [%r{p}+{}]
                 stxb [%r{p}+{}], %r1",
                a % 3,
                [0, 0, 1, 7, 8][a % 5],
                (a >> 3) % 17,
                (a >> 5) % 10
            ),
            // Index the packet by a packet byte, masked, then check and access.
            13 => format!(
                "mov %r{p}, %r7\nadd %r{p}, 1\njgt %r{p}, %r8, {fwd}\nldxb %r{dst}, [%r7+0]\nand %r{dst}, {}\nmov %r{p}, %r7\nadd %r{p}, %r{dst}\nmov %r{src_r}, %r{p}\nadd %r{src_r}, 2\njgt %r{src_r}, %r8, {fwd}\nldxh %r{dst}, {}",
                [7, 15, 31, 255][a % 4],
                at(p, near(2))
            ),
            14 => format!("mov %r{p}, %r9\nadd %r{p}, {}\njgt %r{p}, %r7, {fwd}\nldxb %r{dst}, {}", k16 % 12, at(9, near((k16 % 12) as i64))),
            15 => format!("lsh %r{dst}, {}", a % 5),
            16 => format!("sub %r{dst}, %r{src_r}"),
            17 => {
                let base = ((a % 8) * 8) as i64;
                let off = if c % 7 == 0 { 56 - base + small / 6 } else { (56 - base) * ((a >> 13) % 3) as i64 / 2 };
                format!("lddw %r{p}, map_value[7]+{base}\nldxdw %r{dst}, {}", at(p, off))
            }
            18 => format!("rsh %r{dst}, {}", a % 9),
            // A queue push, pop or peek (map 11, 8-byte values) through the stack, at
            // times too near its top, or through the packet after a check (the kernel
            // lets a push read the packet, never a pop or a peek write it).
            23 => {
                let buf = if (a >> 2).is_multiple_of(4) {
                    format!("mov %r2, %r7\nmov %r3, %r7\nadd %r3, 8\njgt %r3, %r8, {fwd}\n")
                } else {
                    let off = -8 * (1 + (a >> 4) % 4) as i64 + if c % 7 == 0 { small } else { 0 };
                    format!("mov %r2, %r10\nadd %r2, {off}\n")
                };
                format!(
                    "{buf}lddw %r1, map[11]\nmov %r3, {}\ncall {}\nmov %r{dst}, %r0\nmov %r4, %r7\nmov %r5, %r7\nmov %r0, 0\nmov %r1, 1\nmov %r2, 2\nmov %r3, 3",
                    a % 3,
                    [87, 88, 89][a % 3]
                )
            }
            // A short loop over the packet with a check inside.
            _ => format!(
                "mov %r{p}, %r7
                 l{k}b: mov %r{dst}, %r{p}
                 add %r{dst}, {}
                 jgt %r{dst}, %r8, {fwd}
                 ldxb %r{dst}, {}
                 add %r{p}, 1
                 ja l{k}b",
                1 + a % 4,
                at(p, near(1 + (a % 4) as i64))
            ),
        };
        src.push_str(&format!("l{k}: {line}\n"));
    }
    src.push_str("end: mov %r0, 2\nexit\n");
    match spine_isa::assemble(&src) {
        Ok(p) => p,
        Err(e) => panic!("generator wrote bad assembly: {e}\n{src}"),
    }
}

/// Accepted programs to mutate, in the 64-bit context layout.
const SEEDS: &[&str] = &[
    "ldxdw %r2, [%r1+0]
     ldxdw %r3, [%r1+8]
     mov %r4, %r2
     add %r4, 14
     jgt %r4, %r3, +3
     ldxh %r0, [%r2+12]
     stxb [%r2+13], %r0
     exit
     mov %r0, 1
     exit",
    "ldxdw %r2, [%r1+0]
     ldxdw %r3, [%r1+8]
     mov %r0, 0
     jge %r2, %r3, +4
     ldxb %r4, [%r2+0]
     add %r0, %r4
     add %r2, 1
     ja -5
     and %r0, 3
     exit",
    "stw [%r10-4], 1
     mov %r2, %r10
     add %r2, -4
     lddw %r1, map[0]
     call 1
     jeq %r0, 0, +5
     ldxdw %r1, [%r0+56]
     add %r1, 1
     stxdw [%r0+56], %r1
     ldxw %r2, [%r0+60]
     mov %r0, 2
     exit",
    "ldxdw %r2, [%r1+0]
     ldxdw %r3, [%r1+8]
     mov %r4, %r2
     add %r4, 2
     jgt %r4, %r3, +12
     ldxb %r6, [%r2+0]
     and %r6, 7
     stw [%r10-4], 0
     mov %r2, %r10
     add %r2, -4
     lddw %r1, map[0]
     call 1
     jeq %r0, 0, +3
     lsh %r6, 3
     add %r0, %r6
     ldxdw %r0, [%r0+0]
     mov %r0, 2
     exit",
    "ldxdw %r6, [%r1+0]
     ldxdw %r7, [%r1+8]
     mov %r1, %r6
     add %r1, 1
     jgt %r1, %r7, +8
     mov %r3, 0
     mov %r5, %r6
     add %r5, %r3
     stb [%r5+0], 7
     jgt %r3, 30, +3
     add %r3, 1
     add %r5, 2
     jle %r5, %r7, -7
     mov %r0, 2
     exit",
    "ldxdw %r2, [%r1+16]
     ldxdw %r3, [%r1+0]
     mov %r4, %r2
     add %r4, 8
     jgt %r4, %r3, +2
     ldxdw %r0, [%r2+0]
     stxw [%r2+4], %r0
     mov %r0, 2
     exit",
    "stdw [%r10-8], 0
     mov %r1, %r10
     add %r1, -8
     mov %r2, 5
     call local f
     ldxdw %r0, [%r10-8]
     and %r0, 3
     exit
     f: stxdw [%r1+0], %r2
     mov %r0, 0
     exit",
    // A type-length-value walk: the pointer may pass data_end before the next check.
    "ldxdw %r2, [%r1+0]
     ldxdw %r3, [%r1+8]
     mov %r0, 2
     mov %r4, %r2
     add %r4, 2
     jgt %r4, %r3, +7
     ldxb %r5, [%r2+1]
     ldxb %r6, [%r2+0]
     jeq %r6, 0, +4
     stxb [%r2+1], %r6
     add %r5, 2
     add %r2, %r5
     ja -10
     exit",
    // Variable IPv4 header length, then the transport header.
    "ldxdw %r2, [%r1+0]
     ldxdw %r3, [%r1+8]
     mov %r4, %r2
     add %r4, 34
     jgt %r4, %r3, +11
     ldxb %r5, [%r2+14]
     and %r5, 15
     lsh %r5, 2
     jlt %r5, 20, +7
     mov %r7, %r2
     add %r7, 14
     add %r7, %r5
     mov %r4, %r7
     add %r4, 8
     jgt %r4, %r3, +1
     ldxh %r0, [%r7+6]
     mov %r0, 2
     exit",
    // A counted loop advancing a packet cursor by a length read from the packet (kept
    // precise only when the loop is unrolled), each step checked against the end.
    "ldxdw %r2, [%r1+0]
     ldxdw %r3, [%r1+8]
     mov %r6, 4
     mov %r4, %r2
     add %r4, 2
     jgt %r4, %r3, +11
     ldxb %r5, [%r2+1]
     and %r5, 7
     add %r5, 1
     add %r2, %r5
     sub %r6, 1
     jne %r6, 0, -9
     mov %r4, %r2
     add %r4, 4
     jgt %r4, %r3, +2
     ldxw %r0, [%r2+0]
     stxb [%r2+3], %r0
     mov %r0, 2
     exit",
    // A counted loop over a map value.
    "stw [%r10-4], 0
     mov %r2, %r10
     add %r2, -4
     lddw %r1, map[0]
     call 1
     jeq %r0, 0, +9
     mov %r1, 0
     mov %r2, %r1
     lsh %r2, 3
     mov %r3, %r0
     add %r3, %r2
     ldxdw %r4, [%r3+0]
     stxdw [%r3+0], %r1
     add %r1, 1
     jlt %r1, 8, -8
     mov %r0, 2
     exit",
];

fn mutate(insns: &mut [Insn], choices: &[u32]) {
    for &c in choices {
        let pc = c as usize % insns.len();
        let i = &mut insns[pc];
        let delta = ((c >> 16) % 9) as i32 - 4;
        match (c >> 8) % 5 {
            0 => i.off = i.off.wrapping_add(delta as i16),
            1 => i.imm = i.imm.wrapping_add(delta),
            2 if matches!(i.class(), op::JMP | op::JMP32) && i.code & 0xf0 >= op::JEQ => {
                let ops =
                    [op::JEQ, op::JGT, op::JGE, op::JNE, op::JLT, op::JLE, op::JSGT, op::JSLT];
                i.code = (i.code & 0x0f) | ops[(c >> 12) as usize % ops.len()];
            }
            3 if i.dst < 10 => i.dst = ((i.dst as u32 + (c >> 12)) % 10) as u8,
            _ if i.src < 10 && i.class() != op::LD && i.src != 0 => {
                i.src = ((i.src as u32 + (c >> 12)) % 11) as u8
            }
            _ => {}
        }
    }
}

proptest! {
    // `SOUNDNESS_CASES=100000 cargo test --test soundness` for a longer hunt.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("SOUNDNESS_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(1500),
        ..ProptestConfig::default()
    })]

    #[test]
    fn accepted_random_programs_never_fault(choices in proptest::collection::vec(any::<u32>(), 2..14), seed: u64) {
        let insns = generate(&choices);
        prop_assume!(!insns.is_empty());
        if verify64(&insns) {
            let maps = flat_maps();
            if let Some(f) = run_all(&insns, &maps, &packets(seed)) {
                prop_assert!(false, "verified program faulted: {f}\n{}", spine_verifier::fmt::insn_listing(&insns, &maps));
            }
        }
    }

    #[test]
    fn accepted_mutants_never_fault(which in 0usize..SEEDS.len(), choices in proptest::collection::vec(any::<u32>(), 1..4), seed: u64) {
        let mut insns = common::asm(SEEDS[which]);
        mutate(&mut insns, &choices);
        if verify64(&insns) {
            let maps = flat_maps();
            if let Some(f) = run_all(&insns, &maps, &packets(seed)) {
                prop_assert!(false, "verified mutant faulted: {f}\n{}", spine_verifier::fmt::insn_listing(&insns, &maps));
            }
        }
    }
}

#[test]
fn seeds_are_accepted_and_run_clean() {
    let maps = flat_maps();
    for (k, s) in SEEDS.iter().enumerate() {
        let insns = common::asm(s);
        if !verify64(&insns) {
            let ctx = ctx64();
            let helpers = KernelHelpers::xdp();
            let maps = common::maps();
            let env = VerifyEnv {
                ctx: &ctx,
                helpers: &helpers,
                maps: &maps,
                limits: Limits::default(),
                log_level: 0,
            };
            panic!(
                "seed {k} refused: {}",
                verify(&insns, &env).err().map(|e| e.to_string()).unwrap_or_default()
            );
        }
        assert_eq!(run_all(&insns, &maps, &packets(k as u64 + 1)), None, "seed {k}");
    }
}

#[test]
fn the_generator_produces_accepted_programs() {
    // The random test means something only if a fair share of programs is accepted.
    let mut accepted = 0;
    let mut s = 12345u32;
    for _ in 0..400 {
        let choices: Vec<u32> = (0..8)
            .map(|_| {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                s
            })
            .collect();
        let insns = generate(&choices);
        if !insns.is_empty() && verify64(&insns) {
            accepted += 1;
        } else if std::env::var("SHOW").is_ok() {
            let ctx = ctx64();
            let helpers = KernelHelpers::xdp();
            let maps = common::maps();
            let env = VerifyEnv {
                ctx: &ctx,
                helpers: &helpers,
                maps: &maps,
                limits: Limits::default(),
                log_level: 0,
            };
            eprintln!(
                "{} insns: {:?}",
                insns.len(),
                verify(&insns, &env).err().map(|e| e.to_string())
            );
        }
    }
    eprintln!("{accepted} of 400 random programs accepted");
    assert!(accepted >= 40, "only {accepted} of 400 random programs accepted");
}

#[test]
fn the_generator_reaches_accepted_queue_helper_calls() {
    // Programs whose first choice is a queue call: pushes, pops and peeks are accepted
    // (the random tests above then run such programs), and a pop or a peek into the
    // packet never is.
    let (mut ok, mut pkt_pop) = ([0usize; 3], 0);
    for a in 0..4096u32 {
        let c = 23 + 24 * (a % 2000);
        let insns = generate(&[c, c.rotate_left(7) | 1]);
        if !verify64(&insns) {
            continue;
        }
        let choice = (c >> 8) as usize;
        ok[choice % 3] += 1;
        if (choice >> 2).is_multiple_of(4) && !choice.is_multiple_of(3) {
            pkt_pop += 1;
        }
    }
    assert!(ok.iter().all(|&n| n > 10), "accepted push/pop/peek programs: {ok:?}");
    assert_eq!(pkt_pop, 0, "a pop or peek into the packet was accepted");
}
