//! spine's ring buffer against the kernel's: the same scripts of
//! `bpf_ringbuf_output/reserve/submit/discard/query` run in a kernel XDP program
//! (BPF_PROG_TEST_RUN) and on a spine `RingBuf`; every helper result, every record the
//! consumer reads (the kernel's through its mmap, as libbpf reads it) and the positions
//! must agree, over enough rounds for the ring to go round several times. Needs root;
//! without bpf(2) the test says SKIP loudly and passes.

mod common;

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

use common::require_bpf;
use spine_abi::{helper, map_type, prog_type, xdp_action};
use spine_isa::{op, Insn};
use spine_maps::ringbuf::{BUSY_BIT, DISCARD_BIT};
use spine_maps::{Map, MapDef, MapOptions, RingBuf};
use spine_sys::{load_program, KernelMap, TestRun};

const RING: u32 = 4096;
const PAGE: usize = 4096;
/// Bytes of the source value `bpf_ringbuf_output` copies from.
const SRC: usize = 1152;

#[derive(Debug, Clone, Copy)]
enum Op {
    Output {
        size: u32,
        off: u32,
        flags: i32,
    },
    /// A submitted record is filled with words first (the kernel does not clear a
    /// reservation, and its stale bytes differ from spine's); a discarded one is not.
    Reserve {
        size: u32,
        flags: i32,
        discard: bool,
        seed: i32,
    },
    Query {
        flag: i32,
    },
}

/// xorshift64*.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u32 {
        (self.next() % n) as u32
    }
}

fn script(rng: &mut Rng) -> Vec<Op> {
    (0..36)
        .map(|_| match rng.below(20) {
            0..=8 => Op::Output {
                size: if rng.below(8) == 0 { 600 + rng.below(424) } else { rng.below(300) },
                off: rng.below(64),
                flags: if rng.below(6) == 0 { 4 } else { rng.below(4) as i32 },
            },
            9..=14 => Op::Reserve {
                size: 8 * (1 + rng.below(8)),
                flags: i32::from(rng.below(10) == 0),
                discard: false,
                seed: rng.next() as i32,
            },
            15..=17 => Op::Reserve {
                size: if rng.below(6) == 0 { 4081 } else { rng.below(200) },
                flags: 0,
                discard: true,
                seed: 0,
            },
            _ => Op::Query { flag: rng.below(5) as i32 },
        })
        .collect()
}

fn mov(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::K, dst, 0, 0, imm)
}

fn mov_reg(dst: u8, src: u8) -> Insn {
    Insn::new(op::ALU64 | op::MOV | op::X, dst, src, 0, 0)
}

fn add(dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | op::ADD | op::K, dst, 0, 0, imm)
}

fn call(h: u32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, 0, 0, h as i32)
}

fn st64(dst: u8, off: i16, imm: i32) -> Insn {
    Insn::new(op::ST | op::MEM | op::DW, dst, 0, off, imm)
}

fn stx64(dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::STX | op::MEM | op::DW, dst, src, off, 0)
}

/// The word a submitted record's `w`-th 8 bytes hold (`ST DW` sign-extends its imm).
fn word(seed: i32, w: u32) -> u64 {
    seed.wrapping_add(w as i32) as i64 as u64
}

/// An XDP program running `ops` on the ring, storing each result in `results` (r6);
/// r8 points at the source bytes.
fn program(ops: &[Op], ring: &KernelMap, results: &KernelMap, src: &KernelMap) -> Vec<Insn> {
    let map = |p: &mut Vec<Insn>| {
        p.extend(Insn::lddw(1, op::PSEUDO_MAP_FD, ring.fd().as_raw_fd() as u64));
    };
    let mut p = vec![];
    p.extend(Insn::lddw(6, op::PSEUDO_MAP_VALUE, results.fd().as_raw_fd() as u64));
    p.extend(Insn::lddw(8, op::PSEUDO_MAP_VALUE, src.fd().as_raw_fd() as u64));
    for (i, o) in ops.iter().enumerate() {
        let res = (8 * i) as i16;
        match *o {
            Op::Output { size, off, flags } => {
                map(&mut p);
                p.extend([mov_reg(2, 8), add(2, off as i32), mov(3, size as i32), mov(4, flags)]);
                p.extend([call(helper::RINGBUF_OUTPUT), stx64(6, 0, res)]);
            }
            Op::Reserve { size, flags, discard, seed } => {
                map(&mut p);
                p.extend([mov(2, size as i32), mov(3, flags), call(helper::RINGBUF_RESERVE)]);
                let words: Vec<Insn> = if discard {
                    vec![]
                } else {
                    (0..size / 8).map(|w| st64(0, 8 * w as i16, word(seed, w) as i32)).collect()
                };
                let release =
                    if discard { helper::RINGBUF_DISCARD } else { helper::RINGBUF_SUBMIT };
                let skip = words.len() as i16 + 5;
                p.push(Insn::new(op::JMP | op::JEQ | op::K, 0, 0, skip, 0));
                p.extend(words);
                p.extend([mov_reg(1, 0), mov(2, 0), call(release), st64(6, res, 1)]);
                p.extend([Insn::new(op::JMP | op::JA, 0, 0, 1, 0), st64(6, res, 0)]);
            }
            Op::Query { flag } => {
                map(&mut p);
                p.extend([mov(2, flag), call(helper::RINGBUF_QUERY), stx64(6, 0, res)]);
            }
        }
    }
    p.extend([mov(0, xdp_action::PASS as i32), Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)]);
    p
}

fn src_bytes() -> Vec<u8> {
    (0..SRC).map(|i| (i * 7 + 3) as u8).collect()
}

/// The same script on spine's ring; results as the program stores them.
fn run_spine(rb: &RingBuf, m: &Map, ops: &[Op]) -> Vec<u64> {
    let src = src_bytes();
    let span = m.value_spans()[0];
    ops.iter()
        .map(|o| match *o {
            Op::Output { size, off, flags } => {
                let data = &src[off as usize..(off + size) as usize];
                match rb.output(data, flags as u64) {
                    Ok(()) => 0,
                    Err(e) => e.errno() as u64,
                }
            }
            Op::Reserve { size, flags, discard, seed } => {
                let Some(rec) = rb.reserve(u64::from(size), flags as u64) else { return 0 };
                let a = rec.as_ptr() as u64;
                assert!(span.contains(a, u64::from(size)));
                if discard {
                    rb.discard(a, 0).unwrap();
                } else {
                    for w in 0..size / 8 {
                        let p = (a + 8 * u64::from(w)) as *const AtomicU64;
                        // SAFETY: `rec` is a live reservation of `size` bytes inside the
                        // ring's value span (checked above), 8-aligned; this thread owns it
                        // until the submit below, and the ring only accesses it atomically.
                        unsafe { &*p }.store(word(seed, w), Relaxed);
                    }
                    rb.submit(a, 0).unwrap();
                }
                1
            }
            Op::Query { flag } => rb.query(flag as u64),
        })
        .collect()
}

/// The kernel ring as libbpf's consumer maps it: the consumer page read-write, the
/// producer page and the data pages (mapped twice by the kernel) read-only.
struct KernelRing {
    cons: *mut u8,
    prod: *mut u8,
    mask: u64,
}

impl KernelRing {
    fn map(ring: &KernelMap) -> KernelRing {
        let fd = ring.fd().as_raw_fd();
        // SAFETY: mmap of a ring buffer fd at the kernel's offsets (consumer page at 0,
        // producer page and data at one page); results are checked below.
        let cons = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        // SAFETY: as above; the length covers the producer page and the doubled data.
        let prod = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE + 2 * RING as usize,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                PAGE as libc::off_t,
            )
        };
        assert!(cons != libc::MAP_FAILED && prod != libc::MAP_FAILED, "mmap of the ring");
        KernelRing { cons: cons.cast(), prod: prod.cast(), mask: u64::from(RING) - 1 }
    }

    fn pos(p: *mut u8) -> &'static AtomicU64 {
        // SAFETY: `p` is the start of a mapped page (8-aligned) that the kernel only
        // accesses atomically; the mapping outlives every use (dropped with `self`).
        unsafe { AtomicU64::from_ptr(p.cast()) }
    }

    /// libbpf's `ringbuf_process_ring`: every committed record, skipping discarded ones.
    fn consume(&self) -> Vec<Vec<u8>> {
        let mut out = vec![];
        let cons_pos = Self::pos(self.cons);
        let mut cons = cons_pos.load(Acquire);
        let prod = Self::pos(self.prod).load(Acquire);
        // SAFETY: the data area starts one page into the second mapping.
        let data = unsafe { self.prod.add(PAGE) };
        while cons < prod {
            let off = (cons & self.mask) as usize;
            // SAFETY: `off < RING`, inside the mapped data; the header is a u32 the kernel
            // writes atomically.
            let len = unsafe { AtomicU32::from_ptr(data.add(off).cast()) }.load(Acquire);
            if len & BUSY_BIT != 0 {
                break;
            }
            let n = (len & !(BUSY_BIT | DISCARD_BIT)) as usize;
            if len & DISCARD_BIT == 0 {
                // SAFETY: the record's `n` bytes follow its header; the data pages are
                // mapped twice, so they are contiguous even across the end of the ring,
                // and the kernel does not touch a committed record until it is consumed.
                out.push(unsafe { std::slice::from_raw_parts(data.add(off + 8), n) }.to_vec());
            }
            cons += ((n + 8) as u64).next_multiple_of(8);
            cons_pos.store(cons, Release);
        }
        out
    }
}

impl Drop for KernelRing {
    fn drop(&mut self) {
        // SAFETY: both mappings were made in `map` with these lengths and are unused now.
        unsafe {
            libc::munmap(self.cons.cast(), PAGE);
            libc::munmap(self.prod.cast(), PAGE + 2 * RING as usize);
        }
    }
}

#[test]
fn scripts_match_the_kernel() {
    require_bpf!();
    let def = |t, k, v, n| spine_sys::MapDef::new(t, k, v, n);
    let kring = KernelMap::create("rb", def(map_type::RINGBUF, 0, 0, RING), None).unwrap();
    let src = KernelMap::create("src", def(map_type::ARRAY, 4, SRC as u32, 1), None).unwrap();
    src.update(&0u32.to_ne_bytes(), &src_bytes(), 0).unwrap();
    let consumer = KernelRing::map(&kring);
    let sdef = MapDef::new("rb", map_type::RINGBUF, 0, 0, RING, 0);
    let m = Map::create(sdef, &MapOptions::default()).unwrap();
    let rb = m.ringbuf().unwrap();
    let mut rng = Rng(0x5eed_1234);
    let mut records = 0;
    for round in 0..12 {
        let ops = script(&mut rng);
        let n = ops.len() as u32;
        let results = KernelMap::create("res", def(map_type::ARRAY, 4, 8 * n, 1), None).unwrap();
        let insns = program(&ops, &kring, &results, &src);
        let prog = load_program(prog_type::XDP, &insns, "GPL", "rb_script", 0)
            .unwrap_or_else(|e| panic!("round {round}: the kernel refuses the program: {e:?}"));
        prog.test_run(&TestRun::new(&[0u8; 64])).unwrap();
        let raw = results.lookup_vec(&0u32.to_ne_bytes()).unwrap().unwrap();
        let kernel: Vec<u64> =
            raw.chunks(8).map(|c| u64::from_ne_bytes(c.try_into().unwrap())).collect();
        let spine = run_spine(rb, &m, &ops);
        for (i, (k, s)) in kernel.iter().zip(&spine).enumerate() {
            assert_eq!(s, k, "round {round}, op {i}: {:?}", ops[i]);
        }
        // Consume all but every third round, so the ring fills up sometimes.
        if round % 3 != 1 {
            let want = consumer.consume();
            let mut got = vec![];
            rb.consume(|r| got.push(r.to_vec()));
            assert_eq!(got.len(), want.len(), "round {round}: records");
            assert!(got == want, "round {round}: record bytes differ");
            records += got.len();
        }
        let pos = |f| rb.query(f);
        let kpos = [
            KernelRing::pos(consumer.cons).load(Acquire),
            KernelRing::pos(consumer.prod).load(Acquire),
        ];
        assert_eq!([pos(2), pos(3)], kpos, "round {round}: consumer and producer positions");
    }
    assert!(rb.query(3) > 3 * u64::from(RING), "the ring went round several times");
    assert!(records > 100, "{records} records compared");
}
