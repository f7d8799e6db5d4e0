//! The AF_XDP kernel side on a real interface: the redirect program loads, attaches to
//! a veth in native and in generic mode through netlink, is seen by RTM_GETLINK, is not
//! clobbered by a second attach, and detaches only when it is still the one attached.

mod common;

use common::require_bpf;
use spine_sys::{attach_xdp, detach_xdp, query_xdp, XdpAttachment, XdpMode, XskRedirect};
use spine_testnet::netns::{ifindex, NetNs};

#[test]
fn redirect_program_attaches_and_detaches_on_veth() {
    require_bpf!();
    let Some(ns) = NetNs::new() else { return };
    ns.veth("xa", "xb");
    ns.enter(|| {
        let idx = ifindex("xa");
        let k = XskRedirect::load("spine_xsk", 4).expect("the kernel verifies the program");
        assert_eq!(k.map().max_entries(), 4);
        let id = k.prog().info().unwrap().id;
        assert_eq!(query_xdp(idx).unwrap(), XdpAttachment { mode: None, prog_id: 0 });

        for mode in [XdpMode::Native, XdpMode::Skb] {
            attach_xdp(idx, k.prog().fd(), mode, false).unwrap();
            assert_eq!(query_xdp(idx).unwrap(), XdpAttachment { mode: Some(mode), prog_id: id });
            // A second program is refused rather than replacing ours.
            let other = XskRedirect::load("spine_xsk2", 1).unwrap();
            let e = attach_xdp(idx, other.prog().fd(), mode, false).unwrap_err();
            assert!(e.is(libc::EBUSY), "{e}");
            // Detaching "if it is still `other`" leaves ours in place.
            let e = detach_xdp(idx, mode, Some(other.prog().fd())).unwrap_err();
            assert!(e.is(libc::EEXIST), "{e}");
            assert_eq!(query_xdp(idx).unwrap().prog_id, id);
            detach_xdp(idx, mode, Some(k.prog().fd())).unwrap();
            assert_eq!(query_xdp(idx).unwrap().mode, None);
        }
    });
}

#[test]
fn errors_name_the_problem() {
    require_bpf!();
    let Some(ns) = NetNs::new() else { return };
    ns.veth("ya", "yb");
    ns.enter(|| {
        let k = XskRedirect::load("spine_xsk", 1).unwrap();
        let e = attach_xdp(999_999, k.prog().fd(), XdpMode::Skb, false).unwrap_err();
        assert!(e.is(libc::ENODEV), "{e}");
        assert!(e.to_string().contains("ifindex 999999"), "{e}");
        // Generic and native at once: the kernel says why in its extended ack.
        let idx = ifindex("ya");
        attach_xdp(idx, k.prog().fd(), XdpMode::Skb, false).unwrap();
        let e = attach_xdp(idx, k.prog().fd(), XdpMode::Native, false).unwrap_err();
        assert!(e.message.is_some(), "no extended ack: {e}");
        detach_xdp(idx, XdpMode::Skb, None).unwrap();
        // An xskmap takes only bound AF_XDP sockets.
        let e = k.insert(0, k.map().fd()).unwrap_err();
        assert!(e.is(libc::ENOTSOCK), "{e}");
    });
}
