//! `spine fib lookup|rules|show` on a namespace's own tables and policy rules, dumped
//! over netlink as spine's mirror reads them, against the kernel's `ip route get` for
//! the same flows: sources, marks, protocols and ports, TOS, rule actions, suppressed
//! default routes, and both families.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use spine_testnet::netns::NetNs;

/// `spine ARGS` run inside namespace `ns`.
fn spine_in(ns: &NetNs, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_spine")])
        .args(args)
        .output()
        .expect("run spine")
}

/// One flow: destination, then `ip route get`'s selector words (`from`, `mark`,
/// `ipproto`, `dport`, `tos`), which `spine fib lookup` takes as `--WORD`.
const FLOWS: &[(&str, &[(&str, &str)])] = &[
    ("10.1.1.1", &[]),
    ("10.1.1.1", &[("from", "198.51.100.2")]),
    ("10.1.1.1", &[("from", "192.0.2.2")]),
    ("10.1.1.1", &[("mark", "7")]),
    ("10.1.1.1", &[("mark", "6")]),
    ("10.1.1.1", &[("ipproto", "17"), ("dport", "53")]),
    ("10.1.1.1", &[("ipproto", "17"), ("dport", "54")]),
    ("10.1.1.1", &[("ipproto", "6"), ("dport", "53")]),
    ("10.1.1.1", &[("tos", "0x10")]),
    ("10.9.9.9", &[]),
    ("10.66.0.1", &[]),
    ("10.66.0.1", &[("mark", "7")]),
    // Main's default route is suppressed (suppress_prefixlength 0): table 200 answers.
    ("11.2.3.4", &[]),
    ("11.2.3.4", &[("from", "198.51.100.2")]),
    ("203.0.113.77", &[]),
    ("2001:db8:1::1", &[]),
    ("2001:db8:1::1", &[("from", "2001:db8:b::2")]),
    ("2001:db8:1::1", &[("mark", "7")]),
    ("2001:db8:1::1", &[("ipproto", "17"), ("dport", "53")]),
    ("2001:db8:99::1", &[]),
];

/// The kernel's answer, in the words both sides are reduced to: `via GW dev IFINDEX`,
/// `dev IFINDEX`, or an errno name.
fn kernel(ns: &NetNs, dst: &str, sel: &[(&str, &str)], ifindex: &BTreeMap<String, u64>) -> String {
    let mut args = vec!["netns", "exec", ns.name(), "ip", "-j", "route", "get", dst];
    for (k, v) in sel {
        args.extend([*k, *v]);
    }
    let out = Command::new("ip").args(&args).output().expect("ip route get");
    if !out.status.success() {
        let e = String::from_utf8_lossy(&out.stderr);
        return match () {
            _ if e.contains("Network is unreachable") => "ENETUNREACH".into(),
            _ if e.contains("No route to host") => "EHOSTUNREACH".into(),
            _ if e.contains("Permission denied") => "EACCES".into(),
            _ if e.contains("Invalid argument") => "EINVAL".into(),
            _ => panic!("ip {}: {e}", args.join(" ")),
        };
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("ip -j");
    let r = &v[0];
    let dev = ifindex[r["dev"].as_str().expect("dev")];
    match r["gateway"].as_str() {
        Some(g) => format!("via {g} dev {dev}"),
        None => format!("dev {dev}"),
    }
}

/// spine's answer for the same flow, reduced the same way.
fn spine(ns: &NetNs, dst: &str, sel: &[(&str, &str)]) -> String {
    let mut args = vec!["fib".to_string(), "lookup".into(), dst.into(), "--json".into()];
    for (k, v) in sel {
        args.extend([format!("--{k}"), v.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = spine_in(ns, &args);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let r = &v["route"];
    if r.is_null() {
        return match v["refused"].as_str().expect("refused") {
            "no route" | "unreachable (rule)" => "ENETUNREACH",
            "prohibit (rule)" => "EACCES",
            "blackhole (rule)" => "EINVAL",
            other => panic!("{other}"),
        }
        .into();
    }
    match r["type"].as_str().expect("type") {
        "blackhole" => return "EINVAL".into(),
        "unreachable" => return "EHOSTUNREACH".into(),
        "prohibit" => return "EACCES".into(),
        _ => {}
    }
    let nh = &r["nexthops"][0];
    let dev = nh["ifindex"].as_u64().expect("ifindex");
    match nh["gateway"].as_str() {
        Some(g) => format!("via {g} dev {dev}"),
        None => format!("dev {dev}"),
    }
}

#[test]
fn lookups_through_the_hosts_rules_agree_with_ip_route_get() {
    let Some(ns) = NetNs::new() else { return };
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=0"]);
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=0"]);
    ns.veth("ra", "pa");
    ns.veth("rb", "pb");
    for cmd in [
        "addr add 192.0.2.2/24 dev ra",
        "addr add 198.51.100.2/24 dev rb",
        "addr add 2001:db8:a::2/64 dev ra nodad",
        "addr add 2001:db8:b::2/64 dev rb nodad",
        "route add 10.0.0.0/8 via 192.0.2.1",
        "route add default via 192.0.2.1",
        "route add blackhole 10.9.0.0/16",
        "route add 10.0.0.0/8 via 198.51.100.1 table 100",
        "route add default via 198.51.100.1 table 200",
        "route add 10.0.0.0/8 via 198.51.100.9 table 300",
        "route add unreachable 10.66.0.0/16 table 300",
        "-6 route add 2001:db8:1::/48 via 2001:db8:a::1",
        "-6 route add 2001:db8:1::/48 via 2001:db8:b::1 table 100",
        "-6 route add 2001:db8:1::/48 via 2001:db8:b::7 table 300",
        "rule add from 198.51.100.2 lookup 100 pref 100",
        "rule add fwmark 7 lookup 300 pref 110",
        "rule add ipproto udp dport 53 prohibit pref 120",
        "rule add tos 0x10 lookup 100 pref 130",
        "rule add to 203.0.113.0/24 blackhole pref 140",
        "rule add lookup main suppress_prefixlength 0 pref 150",
        "rule add lookup 200 pref 160",
        "-6 rule add from 2001:db8:b::2 lookup 100 pref 100",
        "-6 rule add fwmark 7 lookup 300 pref 110",
        "-6 rule add ipproto udp dport 53 prohibit pref 120",
    ] {
        ns.ip(cmd);
    }
    let links: serde_json::Value = serde_json::from_str(&ns.ip("-j link show")).unwrap();
    let ifindex: BTreeMap<String, u64> = links
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["ifname"].as_str().unwrap().to_string(), l["ifindex"].as_u64().unwrap()))
        .collect();

    let mut answers = BTreeMap::new();
    for (dst, sel) in FLOWS {
        let (k, s) = (kernel(&ns, dst, sel, &ifindex), spine(&ns, dst, sel));
        assert_eq!(s, k, "{dst} {sel:?}: spine (left) and ip route get (right)");
        *answers.entry(k).or_insert(0) += 1;
    }
    // The flows reach every kind of answer: each table's route, and each rule action.
    for want in ["via 192.0.2.1", "via 198.51.100.1", "via 198.51.100.9", "via 2001:db8:b::7"] {
        assert!(answers.keys().any(|k| k.starts_with(want)), "{want}: {answers:?}");
    }
    for want in ["EACCES", "EINVAL", "EHOSTUNREACH", "ENETUNREACH"] {
        assert!(answers.contains_key(want), "{want}: {answers:?}");
    }

    // `spine fib rules` lists both families in the kernel's order; `show` a table.
    let out = spine_in(&ns, &["fib", "rules"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10 + 5, "{text}");
    assert_eq!(lines[0], "from all pref 0 lookup local", "{text}");
    assert_eq!(lines[1], "from 198.51.100.2/32 pref 100 lookup 100", "{text}");
    assert!(lines.contains(&"from all pref 150 lookup main suppress_prefixlength 0"), "{text}");
    assert!(lines.contains(&"-6 from all ipproto 17 dport 53-53 pref 120 prohibit"), "{text}");
    let out = spine_in(&ns, &["fib", "show", "--table", "300"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("unreachable 10.66.0.0/16 table 300"), "{text}");
    assert!(text.contains("2001:db8:1::/48 via 2001:db8:b::7 dev"), "{text}");
}
