//! Multi-buffer frames without the kernel: a 9,000-byte packet in a frame made by
//! `Frame::with_frags` (a 3,520-byte head, fragments of 4,096 and 1,384 bytes), run by
//! the `wide` program of the difftest fixture (whose results spine-difftest's
//! `tests/frags.rs` compares with the kernel's), with the results the kernel's helpers
//! give worked out by hand, on both engines.

use std::path::PathBuf;
use std::sync::OnceLock;

use spine_runtime::{
    load_object, EngineKind, FixedHost, Frame, Geometry, LoadOptions, LoadedObject, RxInfo,
    XdpRunner, MAX_FRAGS,
};

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];
const EINVAL: i64 = -22;
const EFAULT: i64 = -14;
const SIZE: usize = 9000;

fn object() -> &'static spine_obj::Object {
    static OBJECT: OnceLock<spine_obj::Object> = OnceLock::new();
    OBJECT.get_or_init(|| {
        // The difftest's fixture: the very program checked against the kernel there.
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../spine-difftest/tests/fixtures/frags.c");
        let dir = std::env::temp_dir().join(format!("spine-multibuf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bytes = spine_progs::compile_c(&src, &dir.join("frags.o"), &[]).expect("clang");
        std::fs::remove_dir_all(&dir).ok();
        spine_obj::parse(&bytes).expect("parse")
    })
}

/// What `wide` reads after the Ethernet header.
#[derive(Clone, Copy, Default)]
struct Args {
    off: u32,
    len: u32,
    store_off: u32,
    tail1: i32,
    tail2: i32,
    head: i32,
}

fn packet(a: Args) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    for w in [a.off, a.len - 1, a.store_off, a.tail1 as u32, a.tail2 as u32, a.head as u32] {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p.extend((p.len()..SIZE).map(|i| (i % 251) as u8));
    p
}

struct Run {
    /// `wide_out`: buff_len, load, store, tail1, len, tail2, len, load of the last 8
    /// bytes, those bytes, adjust_head, data_end - data.
    out: Vec<i64>,
    bytes: Vec<u8>,
    multi_buffer: bool,
}

fn run(loaded: &LoadedObject, a: Args) -> Run {
    let ext = loaded.program(Some("wide")).unwrap().clone();
    let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
    let mut frame = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS);
    frame.load(&packet(a)).unwrap();
    assert!(frame.is_multi_buffer());
    let v = runner.run(&mut frame, RxInfo::default(), &mut FixedHost::new(1)).expect("no fault");
    assert_eq!(v, spine_abi::xdp_action::TX);
    let m = ext.map("wide_out").unwrap();
    let mut value = [0u8; 8];
    let out = (0..11u32)
        .map(|k| {
            m.lookup_user(&k.to_le_bytes(), &mut value).unwrap();
            i64::from_le_bytes(value)
        })
        .collect();
    let mut bytes = Vec::new();
    frame.copy_out(&mut bytes);
    Run { out, bytes, multi_buffer: frame.is_multi_buffer() }
}

fn each_engine(mut f: impl FnMut(&LoadedObject)) {
    for engine in ENGINES {
        f(&load_object(object(), &LoadOptions { engine, ..LoadOptions::default() }).unwrap());
    }
}

fn last8(p: &[u8]) -> i64 {
    i64::from_le_bytes(p[p.len() - 8..].try_into().unwrap())
}

#[test]
fn loads_and_stores_reach_across_the_head_and_every_fragment() {
    each_engine(|l| {
        // 5,000 bytes from the head's last 20 through the whole first fragment into
        // the second, stored back at 3,000 (head into the first fragment).
        let a = Args { off: 3500, len: 5000, store_off: 3000, ..Args::default() };
        let pkt = packet(a);
        let r = run(l, a);
        assert_eq!(r.out, [9000, 0, 0, 0, 9000, 0, 9000, 0, last8(&pkt), 0, 3520]);
        let mut want = pkt.clone();
        want[3000..8000].copy_from_slice(&pkt[3500..8500]);
        want[3000] ^= 0x5a;
        assert_eq!(r.bytes, want);
    });
}

#[test]
fn loads_past_the_end_or_0xffff_fail_as_in_the_kernel() {
    each_engine(|l| {
        let r = run(l, Args { off: 8993, len: 8, store_off: 8992, ..Args::default() });
        assert_eq!(r.out[1..3], [EINVAL, 0]);
        let r = run(l, Args { off: 0x1_0000, len: 1, store_off: u32::MAX, ..Args::default() });
        assert_eq!(r.out[1..3], [EFAULT, EFAULT]);
    });
}

#[test]
fn the_tail_grows_within_the_last_fragments_page_only() {
    each_engine(|l| {
        let room = 4096 - (SIZE - 3520 - 4096) as i32;
        let r = run(l, Args { len: 1, tail1: room, tail2: 1, ..Args::default() });
        assert_eq!(r.out[3..8], [0, 9000 + i64::from(room), EINVAL, 9000 + i64::from(room), 0]);
        assert_eq!(r.out[8], 0, "grown bytes are zeroed");
        assert_eq!(r.bytes.len(), 9000 + room as usize);
    });
}

#[test]
fn shrinking_frees_fragments_then_the_frame_is_linear_again() {
    each_engine(|l| {
        // Past the last fragment by one byte, then down to the head's end exactly.
        let a = Args { len: 1, tail1: -1385, tail2: -(7615 - 3520), ..Args::default() };
        let pkt = packet(a);
        let r = run(l, a);
        assert_eq!(r.out[3..9], [0, 7615, 0, 3520, 0, last8(&pkt[..3520])]);
        assert!(!r.multi_buffer, "no fragment left");
        // Into the head, down to the 14 bytes an Ethernet header needs, and one past.
        let r = run(l, Args { len: 1, tail1: -(9000 - 14), tail2: -1, ..Args::default() });
        assert_eq!(r.out[3..7], [0, 14, EINVAL, 14]);
        let r = run(l, Args { len: 1, tail1: -(9000 - 13), ..Args::default() });
        assert_eq!(r.out[3..5], [EINVAL, 9000]);
        assert!(r.multi_buffer);
        // The kernel negates the delta in `int`: INT_MIN stays negative and takes nothing.
        let r = run(l, Args { len: 1, tail1: i32::MIN, ..Args::default() });
        assert_eq!(r.out[3..5], [0, 9000]);
    });
}

#[test]
fn the_head_moves_only_within_the_head() {
    each_engine(|l| {
        let r = run(l, Args { len: 1, head: 3507, ..Args::default() });
        assert_eq!(r.out[9..11], [EINVAL, 3520]);
        let r = run(l, Args { len: 1, head: 3506, ..Args::default() });
        assert_eq!(r.out[9..11], [0, 14]);
        assert_eq!(r.out[6], 9000, "the fragments stay");
        assert_eq!(r.bytes.len(), 14 + 9000 - 3520);
    });
}

/// Untrusted arguments: random offsets, lengths and deltas (extremes included) on random
/// packet sizes up to the largest multi-buffer frame. The interpreter checks every
/// access, so no fault means no helper let the program reach outside its memory; both
/// engines must leave the same bytes and results.
#[test]
fn random_arguments_never_fault_and_both_engines_agree() {
    let engines: Vec<LoadedObject> = ENGINES
        .iter()
        .map(|&engine| {
            load_object(object(), &LoadOptions { engine, ..LoadOptions::default() }).unwrap()
        })
        .collect();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let extremes = [0u32, 1, 0xffff, 0x1_0000, i32::MAX as u32, i32::MIN as u32, u32::MAX];
    let max = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS).max_len();
    for _ in 0..400 {
        let size = 38 + (next() as usize) % (max - 37);
        let mut word = || {
            let r = next();
            if r % 4 == 0 {
                extremes[(r >> 8) as usize % extremes.len()]
            } else if r % 4 == 1 {
                (r >> 8) as u32 % (size as u32 + 8)
            } else {
                ((r >> 8) as u32 % 9000).wrapping_neg().wrapping_add(if r % 8 < 4 {
                    0
                } else {
                    9000
                })
            }
        };
        let mut pkt = vec![0u8; 14];
        for _ in 0..6 {
            pkt.extend_from_slice(&word().to_le_bytes());
        }
        pkt.resize(size, 0xa5);
        let mut seen: Vec<(Vec<u8>, Vec<i64>)> = Vec::new();
        for l in &engines {
            let ext = l.program(Some("wide")).unwrap().clone();
            let mut runner = XdpRunner::new(ext.clone(), 0).unwrap();
            let mut frame = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS);
            frame.load(&pkt).unwrap();
            let v = runner.run(&mut frame, RxInfo::default(), &mut FixedHost::new(1));
            assert_eq!(v, Ok(spine_abi::xdp_action::TX), "size {size}");
            let m = ext.map("wide_out").unwrap();
            let mut value = [0u8; 8];
            let out: Vec<i64> = (0..11u32)
                .map(|k| {
                    m.lookup_user(&k.to_le_bytes(), &mut value).unwrap();
                    i64::from_le_bytes(value)
                })
                .collect();
            let mut bytes = Vec::new();
            frame.copy_out(&mut bytes);
            assert_eq!(frame.packet().len() as i64, out[10], "the head as the program saw it");
            seen.push((bytes, out));
        }
        assert_eq!(seen[0], seen[1], "interpreter and JIT differ on a {size}-byte packet");
    }
}
