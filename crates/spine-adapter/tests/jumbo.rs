//! Jumbo frames on the adapter path. Ports hand the dispatcher one pool buffer per
//! frame, never fragments: a 9,000-byte frame runs as a linear frame when the pool's
//! buffers hold it (`pool.buf_size` up to 65,536), for a frags-aware (`xdp.frags`) and a
//! plain program alike (its `bpf_xdp_get_buff_len` equals `data_end - data`); when they
//! do not, the port drops it as too big before any program runs.

mod common;

use common::TempDir;
use spine_adapter::{AdapterBuilder, AdapterOptions, Device};
use spine_ports::{MemPort, PoolConfig};

const SIZE: usize = 9000;

/// A probe for the `wide` programs of spine-difftest's `tests/fixtures/frags.c`: load
/// 5,000 bytes at 3,500 and store them at 3,000.
fn probe() -> Vec<u8> {
    let mut p = vec![0u8; 14];
    for w in [3500u32, 4999, 3000, 0, 0, 0] {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p.extend((p.len()..SIZE).map(|i| (i % 251) as u8));
    p
}

fn object() -> Vec<u8> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../spine-difftest/tests/fixtures/frags.c");
    let dir = TempDir::new("jumbo");
    spine_progs::compile_c(&src, &dir.join("frags.o"), &[]).expect("clang builds the fixture")
}

/// Runs `frames` copies of the probe through `section` on a pool of `buf_size`-byte
/// buffers; returns the wire port's totals, the extension's runs and its `wide_out`.
fn run(section: &str, buf_size: u32, frames: u64) -> (spine_adapter::PortTotals, u64, Vec<i64>) {
    let pool = PoolConfig { buf_size, ..PoolConfig::new(256) };
    let mut b =
        AdapterBuilder::new(AdapterOptions { workers: 1, pool, ..Default::default() }).unwrap();
    let port = MemPort::replay("wire", &[probe()]).unwrap().with_limit(frames);
    let wire = b.add_port("wire", Device::Mem { port, sink: false }, None).unwrap();
    let e = b.load_extension("wide", &object(), Some(section), "default", "test").unwrap();
    assert_eq!(b.extension(e).frags_aware(), section == "wide");
    b.attach(e, wire).unwrap();
    let mut a = b.build().unwrap();
    a.run_to_completion(1000);
    let ext = a.extension("wide").unwrap();
    let m = ext.map("wide_out").unwrap();
    let mut v = [0u8; 8];
    let out = (0..11u32)
        .map(|k| {
            m.lookup_user(&k.to_le_bytes(), &mut v).unwrap();
            i64::from_le_bytes(v)
        })
        .collect();
    let t = a.finish().unwrap().totals;
    (t.port("wire").unwrap().clone(), t.extension("wide").unwrap().runs, out)
}

#[test]
fn jumbo_frames_run_linear_when_a_buffer_holds_them_in_either_kind_of_program() {
    for section in ["wide", "wide_linear"] {
        let (wire, runs, out) = run(section, 16_384, 10);
        assert_eq!((wire.rx_packets, runs, wire.verdicts.tx), (10, 10, 10), "{section}");
        // buff_len, load, store, ..., data_end - data: the whole frame in the head.
        assert_eq!((out[0], out[1], out[2], out[10]), (9000, 0, 0, 9000), "{section}");
    }
}

#[test]
fn jumbo_frames_a_buffer_cannot_hold_are_dropped_before_any_program_runs() {
    let (wire, runs, _) = run("wide", PoolConfig::DEFAULT_BUF_SIZE, 10);
    assert_eq!((wire.rx_packets, runs), (0, 0));
    assert_eq!(wire.device.rx_drops, 10, "counted as the port's own (too big) drops");
}
