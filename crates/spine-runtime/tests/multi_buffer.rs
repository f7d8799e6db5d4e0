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
