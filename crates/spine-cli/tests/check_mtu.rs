//! `spine prog run` answers `bpf_check_mtu` as the kernel's test run does: the program
//! receives on loopback, whose MTU (from this namespace's sysfs) it reads back; an
//! interface that does not exist is `-ENODEV`.

use std::path::PathBuf;
use std::process::Command;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn prog_run_checks_the_mtu_of_loopback_and_refuses_a_missing_device() {
    let Some(lo_mtu) = std::fs::read_to_string("/sys/class/net/lo/mtu")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
    else {
        eprintln!("SKIP: no /sys/class/net/lo/mtu");
        return;
    };
    let dir = Dir(std::env::temp_dir().join(format!("spine-cli-mtu-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../spine-difftest/tests/fixtures/check_mtu.c");
    let obj = dir.0.join("check_mtu.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    // (ifindex, mtu_len, len_diff) → (return value, mtu_len after, verdict).
    let cases = [
        (0u32, 0u32, 0i32, 0i64, lo_mtu, "XDP_PASS"),
        (1, lo_mtu + 1, 0, 1, lo_mtu, "XDP_TX"),
        (0x7fff_fff0, 0, 0, -19, 0, "XDP_DROP"),
    ];
    for (ifindex, mtu_len, len_diff, ret, mtu_out, verdict) in cases {
        let mut pkt = vec![0u8; 14];
        pkt[12..14].copy_from_slice(&[0x88, 0xb5]);
        pkt.extend_from_slice(&ifindex.to_le_bytes());
        pkt.extend_from_slice(&mtu_len.to_le_bytes());
        pkt.extend_from_slice(&len_diff.to_le_bytes());
        pkt.extend_from_slice(&[0; 12]);
        pkt.extend_from_slice(&[0; 16]);
        let (pin, pout) = (dir.0.join("in.bin"), dir.0.join("out.bin"));
        std::fs::write(&pin, &pkt).unwrap();
        let r = Command::new(env!("CARGO_BIN_EXE_spine"))
            .args(["prog", "run", obj.to_str().unwrap(), "--section", "check_mtu"])
            .args(["--data-in", pin.to_str().unwrap(), "--data-out", pout.to_str().unwrap()])
            .args(["--repeat", "1"])
            .output()
            .expect("run spine");
        let (stdout, stderr) =
            (String::from_utf8_lossy(&r.stdout), String::from_utf8_lossy(&r.stderr));
        assert!(r.status.success(), "{stderr}");
        assert!(stdout.contains(verdict) || stderr.contains(verdict), "{stdout}{stderr}");
        let out = std::fs::read(&pout).unwrap();
        let got_ret = i64::from_le_bytes(out[38..46].try_into().unwrap());
        let got_mtu = u32::from_le_bytes(out[46..50].try_into().unwrap());
        assert_eq!(got_ret, ret, "ifindex {ifindex}");
        if ret == 0 || ret == 1 {
            assert_eq!(got_mtu, mtu_out, "ifindex {ifindex}");
        }
    }
}
