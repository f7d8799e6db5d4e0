//! `spine prog run` and `spine prog test` take packets longer than one buffer and run
//! them as multi-buffer frames, as the kernel's test run does: the `wide` program of the
//! difftest fixture copies 5,000 bytes from the head's end across the first fragment and
//! stores them back across the head's end, and what comes out is the whole packet
//! (the kernel's bytes too, as root).

use std::path::PathBuf;
use std::process::{Command, Output};

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn spine(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_spine")).args(args).output().expect("run spine")
}

fn ok(o: Output) -> String {
    let t = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{t}");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: Output) -> serde_json::Value {
    serde_json::from_str(&ok(o)).expect("JSON")
}

fn root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// A probe for `wide` (tests/fixtures/frags.c in spine-difftest): load 5,000 bytes at
/// 3,500, store them at 3,000, no tail or head moves.
fn probe(size: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    for w in [3500u32, 4999, 3000, 0, 0, 0] {
        p.extend_from_slice(&w.to_le_bytes());
    }
    p.extend((p.len()..size).map(|i| (i % 251) as u8));
    p
}

fn expected(p: &[u8]) -> Vec<u8> {
    let mut want = p.to_vec();
    if p.len() >= 8500 {
        want[3000..8000].copy_from_slice(&p[3500..8500]);
        want[3000] ^= 0x5a;
    }
    want
}

#[test]
fn prog_run_and_test_take_multi_buffer_packets() {
    let dir = Dir(std::env::temp_dir().join(format!("spine-multibuf-cli-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let src =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spine-difftest/tests/fixtures/frags.c");
    let obj = dir.0.join("frags.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let pkt = probe(9000);
    let (pin, pout) = (dir.0.join("in.bin"), dir.0.join("out.bin"));
    std::fs::write(&pin, &pkt).unwrap();
    let (objs, pins, pouts) =
        (obj.to_str().unwrap(), pin.to_str().unwrap(), pout.to_str().unwrap());

    let mut args = vec!["prog", "run", objs, "--section", "wide", "--data-in", pins];
    args.extend(["--data-out", pouts, "--json"]);
    if root() {
        args.push("--kernel");
    }
    let v = json(spine(&args));
    assert_eq!(v["retval"], 3, "{v}");
    assert_eq!(std::fs::read(&pout).unwrap(), expected(&pkt));
    if root() {
        assert_eq!(v["kernel"]["retval"], 3, "{v}");
        assert_eq!(v["kernel"]["data_out"], v["data_out"], "spine and the kernel differ");
    } else {
        eprintln!("SKIP: the kernel comparison needs root");
    }

    // A capture of a linear, a two-fragment and a five-fragment packet, and one past the
    // 17 fragments a frame may have (not run).
    let cap = dir.0.join("in.pcap");
    let sizes = [64usize, 9000, 20_000, 3520 + 17 * 4096 + 1];
    let mut w = spine_ports::PcapWriter::ethernet(Vec::new()).unwrap();
    for (i, &size) in sizes.iter().enumerate() {
        w.write(i as u64 * 1000, &probe(size)).unwrap();
    }
    std::fs::write(&cap, w.finish().unwrap()).unwrap();
    let capout = dir.0.join("out.pcap");
    let v = json(spine(&[
        "prog",
        "test",
        objs,
        "--section",
        "wide",
        "--pcap-in",
        cap.to_str().unwrap(),
        "--pcap-out",
        capout.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!((v["verdicts"]["XDP_TX"].as_u64(), v["unfit"].as_u64()), (Some(3), Some(1)), "{v}");
    let out = spine_ports::read_capture(&std::fs::read(&capout).unwrap()).unwrap();
    let got: Vec<Vec<u8>> = out.packets.iter().map(|p| p.data.clone()).collect();
    let want: Vec<Vec<u8>> = sizes[..3].iter().map(|&s| expected(&probe(s))).collect();
    assert_eq!(got, want);
    ok(spine(&["prog", "verify", objs, "--section", "wide"]));
}
