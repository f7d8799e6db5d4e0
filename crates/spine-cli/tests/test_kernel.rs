//! `spine prog test --kernel`: a capture through spine and the kernel's
//! `BPF_PROG_TEST_RUN` side by side. The bundled parser, configured from the command
//! line, agrees with the kernel on the generator's mix (well-formed and malformed
//! frames); a program that writes a random number into each frame does not, and the
//! command says where and exits 1.

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

const RANDOM: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int scribble(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 *word = data;

	if ((void *)(word + 1) > end)
		return XDP_DROP;
	*word = bpf_get_prandom_u32();
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
"#;

#[test]
fn a_capture_runs_through_spine_and_the_kernel_side_by_side() {
    if !Command::new("id").arg("-u").output().is_ok_and(|o| o.stdout.starts_with(b"0\n")) {
        eprintln!("SKIP: the kernel comparison needs root");
        return;
    }
    let dir = Dir(std::env::temp_dir().join(format!("spine-test-kernel-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let obj = dir.0.join("parser.o");
    std::fs::write(&obj, spine_progs::get("parser").expect("bundled").object).unwrap();
    let pcap = dir.0.join("mix.pcap");
    let (obj, pcap) = (obj.to_str().unwrap(), pcap.to_str().unwrap());
    let g = spine(&["gen", pcap, "--count", "600", "--seed", "11"]);
    assert!(g.status.success(), "{}", text(&g));

    for engine in ["jit", "interp"] {
        let o = spine(&[
            "prog",
            "test",
            obj,
            "--pcap-in",
            pcap,
            "--kernel",
            "--engine",
            engine,
            "--map",
            "blocked_udp_ports:53=1",
            "--json",
        ]);
        assert!(o.status.success(), "{engine}: {}", text(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!(v["packets"], 600, "{v}");
        assert_eq!(v["mismatches"], serde_json::json!([]), "{v}");
        assert!(v["map_checks"].as_u64().unwrap() > 0, "{v}");
        for verdict in ["XDP_DROP", "XDP_PASS"] {
            assert!(v["verdicts"][verdict].as_u64().unwrap() > 0, "{engine}: no {verdict}: {v}");
        }
    }

    let src = dir.0.join("scribble.c");
    std::fs::write(&src, RANDOM).unwrap();
    let sobj = dir.0.join("scribble.o");
    spine_progs::compile_c(&src, &sobj, &[]).unwrap();
    let o = spine(&["prog", "test", sobj.to_str().unwrap(), "--pcap-in", pcap, "--kernel"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "a difference exits 1: {out}");
    assert!(out.contains("output differs") && out.contains("first difference at byte 0"), "{out}");
    assert!(out.contains("stopped after 20 mismatches"), "{out}");
}
