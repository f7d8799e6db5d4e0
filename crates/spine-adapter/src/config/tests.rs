use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/cfg"))
}

fn error(text: &str) -> (String, String) {
    let e = parse(text).expect_err("must be refused");
    (e.path.clone(), e.to_string())
}

const FULL: &str = r#"
[adapter]
workers = 2
cpus = [1, 0]
engine = "interp"
burst = 16
assign = "partition"

[pool]
buffers = 1024

[[port]]
name = "wire"
kind = "afxdp"
interface = "veth0"
queue = 0
bind = "copy"
host_path = "host"

[[port]]
name = "host"
kind = "tap"
interface = "sp0"

[[port]]
name = "gen"
kind = "mem"
udp4 = { flows = 4 }
limit = 100

[[port]]
name = "file"
kind = "pcap"
input = "in.pcap"
output = "/tmp/out.pcap"
ifindex = 77

[[domain]]
name = "tenant"
helpers = ["map_lookup_elem", "bpf_redirect"]
ports = ["wire", "gen"]
budget_us = 20
quota = { map_bytes = 65536, insns = 4096 }
faults = { max = 3, window_ms = 500 }

[[extension]]
bundled = "mac_swap"
domain = "tenant"

[[extension]]
name = "nat"
file = "rewrite.o"
section = "xdp"

[[attach]]
extension = "mac_swap"
port = "wire"

[[partition]]
port = "gen"
worker = 1

[[map]]
extension = "nat"
name = "nat_rules"
entries = [ { key = "c0:a8:00:01", value = 5 }, { key = 7, value = "0x0102" } ]
"#;

#[test]
fn a_complete_file_parses_into_what_it_says() {
    let c = parse(FULL).unwrap();
    assert_eq!(c.adapter.workers, 2);
    assert_eq!(c.adapter.cpus, Some(vec![1, 0]));
    assert_eq!(c.adapter.engine, EngineKind::Interpreter);
    assert_eq!(c.adapter.assign, Assign::Partition);
    assert_eq!(c.adapter.pool.buffers, 1024);
    assert_eq!(c.ports.len(), 4);
    assert!(matches!(c.ports[0].kind, PortKind::AfXdp { bind: BindMode::Copy, .. }));
    assert_eq!(c.ports[0].host_path.as_deref(), Some("host"));
    assert_eq!(
        c.ports[3].kind,
        PortKind::Pcap {
            input: Some(PathBuf::from("/cfg/in.pcap")),
            output: Some(PathBuf::from("/tmp/out.pcap"))
        },
        "relative names are relative to the file's folder"
    );
    assert_eq!(c.ports[3].ifindex, Some(77));
    assert_eq!(
        c.ports[2].kind,
        PortKind::Mem { packets: MemPackets::Udp4 { flows: 4, size: 60 }, limit: Some(100) }
    );
    let d = &c.domains[0];
    assert_eq!(d.helpers, Some(vec![1, 23]));
    assert_eq!(d.budget.ns, 20_000);
    assert_eq!(d.quota, Quota { map_bytes: 65536, insns: 4096 });
    assert_eq!(d.faults, FaultPolicy { max_faults: 3, window_ns: 500_000_000 });
    assert_eq!(c.extensions[0].name, "mac_swap");
    assert_eq!(c.extensions[1].object, ObjectSource::File(PathBuf::from("/cfg/rewrite.o")));
    assert_eq!(c.partition, vec![PartitionEntry { port: "gen".into(), queue: 0, worker: 1 }]);
    let e = &c.maps[0].entries;
    assert_eq!(e[0].key, Bytes::Hex(vec![0xc0, 0xa8, 0, 1]));
    assert_eq!(e[1].value.to_size(2), Some(vec![1, 2]));
    assert_eq!(e[0].value.to_size(4), Some(vec![5, 0, 0, 0]));
    assert_eq!(e[1].path, "map[0].entries[1]");
}

#[test]
fn an_empty_file_is_one_worker_and_nothing_else() {
    let c = parse("").unwrap();
    assert_eq!(c.adapter, AdapterConfig::default());
    assert!(c.ports.is_empty());
}

#[test]
fn errors_name_the_key() {
    let cases: &[(&str, &str, &str)] = &[
        ("[[port]]\nname = \"a\"\nkind = \"afxdp\"\n", "port[0].interface", "missing"),
        (
            "[[port]]\nname=\"a\"\nkind=\"mem\"\n[[port]]\nname=\"b\"\nkind=\"afpacket\"\ninterface=7\n",
            "port[1].interface",
            "expected a string, found an integer",
        ),
        ("[[port]]\nname=\"a\"\nkind=\"mem\"\ninterfase=\"x\"\n", "port[0].interfase", "unknown key"),
        ("[[port]]\nname=\"a\"\nkind=\"nic\"\n", "port[0].kind", "'nic' is not one of"),
        ("[adapter]\nworkers = 0\n", "adapter.workers", "0 is out of range 1..=64"),
        ("[adapter]\nworkers = 2\ncpus = [0]\n", "adapter.cpus", "one CPU per worker"),
        ("[adapter]\nengine = \"fast\"\n", "adapter.engine", "not one of: jit, interp"),
        ("bogus = 1\n", "bogus", "unknown key"),
        ("[pool]\nbuf_size = 300\n", "pool", "multiple of 64"),
        (
            "[[port]]\nname=\"a\"\nkind=\"mem\"\nhost_path=\"h\"\n",
            "port[0].host_path",
            "no port named 'h'",
        ),
        (
            "[[port]]\nname=\"a\"\nkind=\"mem\"\n[[port]]\nname=\"a\"\nkind=\"mem\"\n",
            "port[1].name",
            "defined twice",
        ),
        ("[[extension]]\nbundled = \"nope\"\n", "extension[0].bundled", "no bundled program named 'nope'"),
        ("[[extension]]\nsection = \"xdp\"\n", "extension[0].file", "missing"),
        (
            "[[extension]]\nbundled=\"mac_swap\"\nmax_entries = { rx_cnt = 0 }\n",
            "extension[0].max_entries.rx_cnt",
            "out of range",
        ),
        (
            "[[extension]]\nbundled=\"mac_swap\"\nmax_entries = { rx_cnt = \"4\" }\n",
            "extension[0].max_entries.rx_cnt",
            "an integer",
        ),
        (
            "[[extension]]\nbundled=\"mac_swap\"\ndomain=\"t\"\n",
            "extension[0].domain",
            "no domain named 't'",
        ),
        ("[[attach]]\nextension=\"x\"\nport=\"p\"\n", "attach[0].extension", "no extension"),
        (
            "[[port]]\nname=\"a\"\nkind=\"mem\"\n[[extension]]\nbundled=\"mac_swap\"\n[[attach]]\nextension=\"mac_swap\"\nport=\"a\"\n[[attach]]\nextension=\"mac_swap\"\nport=\"a\"\n",
            "attach[1].port",
            "already taken",
        ),
        ("[[domain]]\nname=\"t\"\nhelpers=[\"bpf_fork\"]\n", "domain[0].helpers[0]", "no helper named 'bpf_fork'"),
        ("[[domain]]\nname=\"t\"\nports=[\"x\"]\n", "domain[0].ports[0]", "no port named 'x'"),
        (
            "[[port]]\nname=\"a\"\nkind=\"mem\"\n[[partition]]\nport=\"a\"\nworker=0\n",
            "partition",
            "assign = \"partition\"",
        ),
        (
            "[adapter]\nassign=\"partition\"\n[[port]]\nname=\"a\"\nkind=\"mem\"\n[[partition]]\nport=\"a\"\nworker=3\n",
            "partition[0].worker",
            "out of range 0..=0",
        ),
        (
            "[[extension]]\nbundled=\"parser\"\n[[map]]\nextension=\"parser\"\nname=\"m\"\nentries=[{key=\"zz\", value=1}]\n",
            "map[0].entries[0].key",
            "not hex bytes",
        ),
        (
            "[[port]]\nname=\"a\"\nkind=\"afxdp\"\ninterface=\"v0\"\n[[port]]\nname=\"b\"\nkind=\"afxdp\"\ninterface=\"v0\"\n",
            "port[1].interface",
            "one AF_XDP port per interface",
        ),
        ("[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"a/b\"\n", "port[0].interface", "not an interface name"),
        ("[[port]\nname=1", "", "not valid TOML"),
        (
            "[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"w\"\n",
            "port[0].twin",
            "no port named 'w'",
        ),
        (
            "[[port]]\nname=\"m\"\nkind=\"mem\"\n[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"m\"\n",
            "port[1].twin",
            "a twin stands for an afpacket or afxdp port: 'm'",
        ),
        (
            "[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\naddresses=[\"10.0.0.1/24\"]\n",
            "port[0].addresses",
            "only a twin takes addresses",
        ),
        (
            "[[port]]\nname=\"w\"\nkind=\"afpacket\"\ninterface=\"v0\"\n[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"w\"\naddresses=[\"10.0.0.1/33\"]\n",
            "port[1].addresses",
            "a prefix length past the address",
        ),
        (
            "[[port]]\nname=\"w\"\nkind=\"afpacket\"\ninterface=\"v0\"\nhost_path=\"h\"\n[[port]]\nname=\"h\"\nkind=\"mem\"\n[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"w\"\n",
            "port[2].twin",
            "the port has another host path (or another twin)",
        ),
        (
            "[[port]]\nname=\"w\"\nkind=\"afpacket\"\ninterface=\"v0\"\n[[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"w\"\nup=false\n",
            "port[1].up",
            "a twin is always up",
        ),
    ];
    for (text, path, msg) in cases {
        let (p, m) = error(text);
        assert_eq!(&p, path, "{text}\n→ {m}");
        assert!(m.contains(msg), "{text}\n→ {m}\n(wanted '{msg}')");
        if !path.is_empty() {
            assert!(m.starts_with(&format!("{path}: ")), "{m}");
        }
    }
}

#[test]
fn hex_and_integers_encode_as_documented() {
    assert_eq!(parse_hex("0x0a000001"), Some(vec![10, 0, 0, 1]));
    assert_eq!(parse_hex("de ad_be:ef"), Some(vec![0xde, 0xad, 0xbe, 0xef]));
    assert_eq!(parse_hex("abc"), None);
    assert_eq!(parse_hex(""), None);
    assert_eq!(parse_hex("é0"), None);
    assert_eq!(Bytes::Int(0x0102).to_size(4), Some(vec![2, 1, 0, 0]));
    assert_eq!(Bytes::Int(0x010203).to_size(2), None, "does not fit");
    assert_eq!(Bytes::Int(1).to_size(12), Some([vec![1], vec![0; 11]].concat()));
    assert_eq!(Bytes::Hex(vec![1, 2]).to_size(3), None, "hex must be exact");
}

#[test]
fn a_tap_twin_is_its_ports_host_path_and_carries_addresses() {
    let c = parse(
        "[[port]]\nname=\"w\"\nkind=\"afxdp\"\ninterface=\"v0\"\n\
         [[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"w\"\n\
         addresses=[\"10.0.0.1/24\", \"2001:db8::1/64\", \"10.9.9.9\"]\n",
    )
    .unwrap();
    assert_eq!(c.ports[0].host_path.as_deref(), Some("t"), "the twin is the host path");
    let PortKind::Tap { twin: Some(t), up: true, .. } = &c.ports[1].kind else {
        panic!("a twin: {:?}", c.ports[1].kind)
    };
    assert_eq!(t.port, "w");
    let want: Vec<(std::net::IpAddr, u8)> = vec![
        ("10.0.0.1".parse().unwrap(), 24),
        ("2001:db8::1".parse().unwrap(), 64),
        ("10.9.9.9".parse().unwrap(), 32),
    ];
    assert_eq!(t.addresses, want);
    // Naming the twin as the host path as well is the same wiring.
    let c = parse(
        "[[port]]\nname=\"w\"\nkind=\"afpacket\"\ninterface=\"v0\"\nhost_path=\"t\"\n\
         [[port]]\nname=\"t\"\nkind=\"tap\"\ninterface=\"t0\"\ntwin=\"w\"\n",
    )
    .unwrap();
    assert_eq!(c.ports[0].host_path.as_deref(), Some("t"));
}

#[test]
fn extensions_size_maps_their_object_declares_without_one() {
    let c = parse("[[extension]]\nbundled = \"mac_swap\"\nmax_entries = { rx_cnt = 4, tx = 64 }\n")
        .unwrap();
    let mut sizes = c.extensions[0].max_entries.clone();
    sizes.sort();
    assert_eq!(sizes, [("rx_cnt".to_string(), 4), ("tx".to_string(), 64)]);
    let c = parse("[[extension]]\nbundled = \"mac_swap\"\n").unwrap();
    assert!(c.extensions[0].max_entries.is_empty());
}

#[test]
fn fib_rules_parse_and_are_refused_with_mirror() {
    let text = format!(
        "{FULL}\n[fib]\nrules = [\"from 10.9.0.0/16 lookup 100 pref 100\", \"-6 fwmark 5 blackhole pref 7\"]\n"
    );
    let cfg = parse(&text).expect("parses");
    let rules = &cfg.fib.expect("[fib]").rules;
    assert_eq!(rules.len(), 2);
    assert_eq!((rules[0].0, rules[0].1.priority), (false, 100));
    assert_eq!((rules[1].0, rules[1].1.action), (true, spine_fib::RuleAction::Blackhole));
    let (path, msg) = error(&format!("{FULL}\n[fib]\nrules = [\"lookup 5\"]\n"));
    assert!(path.contains("rules") && msg.contains("pref"), "{path}: {msg}");
    let (path, msg) =
        error(&format!("{FULL}\n[fib]\nmirror = true\nrules = [\"lookup 5 pref 1\"]\n"));
    assert!(path.contains("rules") && msg.contains("mirror"), "{path}: {msg}");
}
