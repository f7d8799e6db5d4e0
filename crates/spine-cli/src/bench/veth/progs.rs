//! The two XDP programs of the bench, compiled by clang when it runs. The forwarding
//! program is one object loaded both by spine (`file = …` in its configuration) and by
//! the kernel (`ip link set … xdpdrv obj …`), so both do exactly the same work per packet.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Every frame to the interface `TARGET_IFINDEX` (the dut namespace's o1), untouched:
/// the work a port-to-port forwarder does at the least.
const FORWARD_C: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int forward(struct xdp_md *ctx)
{
	return bpf_redirect(TARGET_IFINDEX, 0);
}

char LICENSE[] SEC("license") = "GPL";
"#;

/// The sink on o0: counts nothing itself (the interface counts), drops everything.
const SINK_C: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int sink(struct xdp_md *ctx)
{
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
"#;

fn build(dir: &Path, name: &str, src: &str, extra: &[&str]) -> Result<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    let o = dir.join(format!("{name}.o"));
    std::fs::write(&c, src)?;
    spine_progs::compile_c(&c, &o, extra).with_context(|| format!("building {name}.o"))?;
    Ok(o)
}

/// The forwarding object for a network whose o1 has index `o1_ifindex`.
pub fn forward(dir: &Path, k: usize, o1_ifindex: u32) -> Result<PathBuf> {
    let define = format!("-DTARGET_IFINDEX={o1_ifindex}");
    build(dir, &format!("forward{k}"), FORWARD_C, &[&define])
}

pub fn sink(dir: &Path) -> Result<PathBuf> {
    build(dir, "sink", SINK_C, &[])
}

#[cfg(test)]
mod tests {
    use spine_runtime::{FixedHost, Frame, Geometry, Redirect, RxInfo, XdpRunner};

    /// The verdict spine's runtime gives `obj`'s program on one frame, and the target.
    fn verdict(obj: &[u8]) -> (u32, Option<Redirect>) {
        let obj = spine_obj::parse(obj).unwrap();
        let loaded = spine_runtime::load_object(&obj, &Default::default()).unwrap();
        assert_eq!(loaded.programs.len(), 1);
        let mut runner = XdpRunner::new(loaded.program(None).unwrap().clone(), 0).unwrap();
        let mut frame = Frame::new(Geometry::TEST_RUN);
        frame.load(&[0u8; 60]).unwrap();
        let v = runner.run(&mut frame, RxInfo::default(), &mut FixedHost::new(1)).unwrap();
        (v, runner.redirect())
    }

    /// Both objects build, pass spine's verifier and do what they say: every frame to
    /// the compiled-in ifindex, every frame dropped.
    #[test]
    fn the_programs_build_and_do_what_they_say() {
        let dir = std::env::temp_dir().join(format!("spine-vb-progs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fwd = std::fs::read(super::forward(&dir, 0, 7).unwrap()).unwrap();
        let sink = std::fs::read(super::sink(&dir).unwrap()).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        use spine_abi::xdp_action::{DROP, REDIRECT};
        assert_eq!(verdict(&fwd), (REDIRECT, Some(Redirect::Port { ifindex: 7 })));
        assert_eq!(verdict(&sink), (DROP, None));
    }
}
