//! Policy routing rules (`ip rule`) mirrored from a namespace this test creates: the
//! first dump, then rules added and deleted live, and a rule naming a device that
//! appears later. The FIB's list must be the kernel's, in the kernel's order.

mod common;

use spine_fib::rule::NO_DEVICE;
use spine_fib::{FibState, FibWriter, Rule, RuleAction};
use spine_rtnl::{Mirror, RtnlSocket};
use spine_testnet::netns::{ifindex, NetNs};

fn summary(st: &FibState, v6: bool) -> Vec<(u32, RuleAction)> {
    st.rules(v6).rules().iter().map(|r| (r.priority, r.action)).collect()
}

fn find(st: &FibState, v6: bool, prio: u32) -> Rule {
    st.rules(v6).rules().iter().find(|r| r.priority == prio).expect("the rule").clone()
}

#[test]
fn rules_follow_the_kernel() {
    let Some(ns) = NetNs::new() else { return };
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"]);
    ns.veth("ru0a", "ru0b");
    ns.ip("rule add from 10.1.0.0/16 lookup 100 pref 100");
    ns.ip("rule add to 10.2.0.0/16 iif ru0a fwmark 0x10/0xf0 tos 0x10 lookup 200 pref 200");
    ns.ip("rule add ipproto tcp dport 80-90 sport 1000 blackhole pref 300");
    ns.ip("rule add not from 10.3.0.0/16 goto 500 pref 400");
    ns.ip("rule add prohibit pref 500");
    ns.ip("rule add iif later0 unreachable pref 600");
    ns.ip("rule add lookup main suppress_prefixlength 0 pref 700");
    ns.ip("-6 rule add from 2001:db8::/32 lookup 100 pref 100");
    let a = ns.enter(|| ifindex("ru0a"));

    let (fib, reader) = FibWriter::new();
    let mirror = ns.enter(|| Mirror::start(RtnlSocket::open().expect("rtnetlink"), fib)).unwrap();
    let st = reader.load();
    assert_eq!(
        summary(&st, false),
        [
            (0, RuleAction::Lookup(255)),
            (100, RuleAction::Lookup(100)),
            (200, RuleAction::Lookup(200)),
            (300, RuleAction::Blackhole),
            (400, RuleAction::Goto(500)),
            (500, RuleAction::Prohibit),
            (600, RuleAction::Unreachable),
            (700, RuleAction::Lookup(254)),
            (32766, RuleAction::Lookup(254)),
            (32767, RuleAction::Lookup(253)),
        ]
    );
    assert!(!st.rules(false).is_default());
    let r = find(&st, false, 100);
    assert_eq!(r.src, Some("10.1.0.0/16".parse().unwrap()));
    let r = find(&st, false, 200);
    assert_eq!((r.dst, r.iif), (Some("10.2.0.0/16".parse().unwrap()), a));
    assert_eq!((r.mark, r.mark_mask, r.tos), (0x10, 0xf0, 0x10));
    let r = find(&st, false, 300);
    assert_eq!((r.ip_proto, r.dport, r.sport), (6, Some((80, 90)), Some((1000, 1000))));
    assert!(find(&st, false, 400).invert);
    assert_eq!(find(&st, false, 600).iif, NO_DEVICE, "no device is named later0 yet");
    assert_eq!(find(&st, false, 700).suppress_prefixlen, 0);
    assert_eq!(find(&st, false, 32766).suppress_prefixlen, -1);
    assert_eq!(
        summary(&st, true),
        [
            (0, RuleAction::Lookup(255)),
            (100, RuleAction::Lookup(100)),
            (32766, RuleAction::Lookup(254))
        ]
    );
    drop(st);

    // Live: a device the rule names appears; a rule added; rules deleted.
    ns.veth("later0", "later0p");
    let later = ns.enter(|| ifindex("later0"));
    common::eventually(&reader, "the rule's device resolved", |s| find(s, false, 600).iif == later);
    ns.ip("rule add fwmark 7 lookup 300 pref 150");
    common::eventually(&reader, "an added rule", |s| {
        s.rules(false).rules().get(2).is_some_and(|r| r.priority == 150 && r.mark == 7)
    });
    ns.ip("rule add fwmark 8 lookup 301 pref 150");
    common::eventually(&reader, "a second rule of one priority goes after the first", |s| {
        s.rules(false).rules().get(3).is_some_and(|r| r.priority == 150 && r.mark == 8)
    });
    for pref in [100, 150, 150, 200, 300, 400, 500, 600, 700] {
        ns.ip(&format!("rule del pref {pref}"));
    }
    ns.ip("-6 rule del pref 100");
    // The default rules again; IPv4's tables stay unmerged, as the kernel's.
    common::eventually(&reader, "the default rules again", |s| {
        let v4: Vec<(u32, RuleAction)> =
            s.rules(false).rules().iter().map(|r| (r.priority, r.action)).collect();
        let defaults = [
            (0, RuleAction::Lookup(255)),
            (32766, RuleAction::Lookup(254)),
            (32767, RuleAction::Lookup(253)),
        ];
        v4[..] == defaults && !s.rules(false).is_default() && s.rules(true).is_default()
    });
    mirror.stop().expect("the mirror ran without error");
}
