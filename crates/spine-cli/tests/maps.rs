//! `spine prog run --map`: a configured program tried without an adapter configuration.
//! The bundled parser drops UDP to the ports in its `blocked_udp_ports` map; with the
//! entry written from the command line it drops, without it it passes, and (as root) the
//! kernel's run with the same entry gives the same verdict and bytes.

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

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Ethernet, IPv4 (20 bytes) and UDP from port 4000 to `dport` with 18 bytes of payload.
fn udp_frame(dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + 18];
    f[..12].copy_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
    let udp = &mut f[34..42];
    udp[..2].copy_from_slice(&4000u16.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&26u16.to_be_bytes());
    f
}

fn root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

#[test]
fn map_entries_from_the_command_line_configure_the_program() {
    let dir = Dir(std::env::temp_dir().join(format!("spine-maparg-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let obj = dir.0.join("parser.o");
    std::fs::write(&obj, spine_progs::get("parser").expect("bundled").object).unwrap();
    let pkt = dir.0.join("udp53.bin");
    std::fs::write(&pkt, udp_frame(53)).unwrap();
    let rules = dir.0.join("rules.txt");
    std::fs::write(&rules, "# DNS and NTP\nblocked_udp_ports:53=1\nblocked_udp_ports:123=1\n")
        .unwrap();
    let (obj, pkt) = (obj.to_str().unwrap(), pkt.to_str().unwrap());
    let run = |extra: &[&str]| {
        let mut args = vec!["prog", "run", "--data-in", pkt, obj];
        args.extend_from_slice(extra);
        spine(&args)
    };

    let open = run(&[]);
    assert!(text(&open).contains("XDP_PASS"), "{}", text(&open));
    let blocked = run(&["--map", "blocked_udp_ports:53=1"]);
    assert!(text(&blocked).contains("XDP_DROP"), "{}", text(&blocked));
    let from_file = run(&["--maps", rules.to_str().unwrap()]);
    assert!(text(&from_file).contains("XDP_DROP"), "{}", text(&from_file));
    let other = run(&["--map", "blocked_udp_ports:0x0035=1"]); // bytes 00 35: port 13568
    assert!(text(&other).contains("XDP_PASS"), "{}", text(&other));

    for (arg, says) in [
        ("no_such_map:1=1", "no map 'no_such_map'"),
        ("blocked_udp_ports:70000=1", "key does not fit its 2 bytes"),
        ("blocked_udp_ports:53", "NAME:KEY=VALUE"),
    ] {
        let r = run(&["--map", arg]);
        assert!(!r.status.success(), "{arg} must be refused");
        assert!(text(&r).contains(says), "{arg}: {}", text(&r));
    }

    if !root() {
        eprintln!("SKIP: the kernel comparison needs root");
        return;
    }
    let both = run(&["--map", "blocked_udp_ports:53=1", "--kernel"]);
    let out = text(&both);
    assert!(out.contains("kernel: retval 1 (XDP_DROP)"), "{out}");
    assert!(out.contains("output identical"), "{out}");
}
