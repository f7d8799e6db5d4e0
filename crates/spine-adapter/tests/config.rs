//! Configuration files as a user writes them: the shipped example and the documented one
//! parse (and the example runs), and mistakes found only while building still name the
//! entry they are about.

mod common;

use std::path::{Path, PathBuf};

use common::TempDir;
use spine_adapter::{Adapter, AdapterError, AdapterOptions, Config};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn build(text: &str, dir: &Path) -> Result<Adapter, AdapterError> {
    let cfg = Config::parse(text, dir)?;
    Adapter::from_config(
        &cfg,
        AdapterOptions { cpus: None, ..AdapterOptions::from_config(&cfg.adapter) },
    )
}

fn build_err(text: &str, dir: &Path) -> String {
    match build(text, dir) {
        Ok(_) => panic!("must be refused:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_shipped_example_runs_without_hardware() {
    let path = repo().join("examples/adapter.toml");
    let cfg = Config::load(&path).unwrap();
    let mut a = Adapter::from_config(
        &cfg,
        AdapterOptions { cpus: None, ..AdapterOptions::from_config(&cfg.adapter) },
    )
    .unwrap();
    for _ in 0..200 {
        a.step();
    }
    let report = a.finish().unwrap();
    assert!(report.close_errors.is_empty());
    let t = &report.totals;
    let edge = t.port("edge").unwrap();
    assert!(edge.rx_packets > 0);
    assert_eq!(edge.verdicts.total(), edge.rx_packets, "the parser ran on everything");
    assert!(t.port("host").unwrap().tx_packets > 0, "passed packets reached the host path");
    assert!(t.port("reflector").unwrap().tx_packets > 0, "mac_swap reflected");
    assert_eq!(t.port("pcap").unwrap().rx_packets, 1000, "the whole capture");
}

#[test]
fn the_documented_example_parses() {
    let doc = std::fs::read_to_string(repo().join("docs/CONFIG.md")).unwrap();
    let start = doc.rfind("```toml\n[adapter]").expect("the complete example") + "```toml\n".len();
    let end = start + doc[start..].find("```").unwrap();
    let cfg = Config::parse(&doc[start..end], Path::new("/etc/spine")).unwrap();
    assert_eq!(cfg.ports.len(), 4);
    assert_eq!(cfg.extensions.len(), 2);
    assert_eq!(cfg.partition.len(), 2);
}

#[test]
fn build_errors_name_the_entry() {
    let dir = TempDir::new("cfg");
    let port = "[[port]]\nname = \"wire\"\nkind = \"mem\"\nudp4 = {}\n";
    let cases: Vec<(String, &str)> = vec![
        (
            format!("{port}[[extension]]\nbundled = \"parser\"\n[[map]]\nextension = \"parser\"\nname = \"nope\"\n"),
            "map[0].name: extension 'parser' has no map 'nope'",
        ),
        (
            format!("{port}[[extension]]\nbundled = \"parser\"\n[[map]]\nextension = \"parser\"\nname = \"blocked_udp_ports\"\nentries = [{{ key = \"003500\", value = 1 }}]\n"),
            "map[0].entries[0].key: does not fit the map's 2-byte key",
        ),
        (
            format!("{port}[[extension]]\nbundled = \"parser\"\n[[map]]\nextension = \"parser\"\nname = \"blocked_udp_ports\"\nentries = [{{ key = 53, value = 256 }}]\n"),
            "map[0].entries[0].value: does not fit the map's 1-byte value",
        ),
        ("[[extension]]\nfile = \"missing.o\"\n".to_string(), "extension[0].file: reading"),
        (
            "[[port]]\nname = \"in\"\nkind = \"pcap\"\ninput = \"missing.pcap\"\n".to_string(),
            "port[0]: port",
        ),
        (
            "[[port]]\nname = \"w\"\nkind = \"afpacket\"\ninterface = \"nosuch0\"\n".to_string(),
            "port[0]: port nosuch0: no such interface",
        ),
        (
            format!("{port}[[domain]]\nname = \"t\"\nports = []\n[[extension]]\nbundled = \"mac_swap\"\ndomain = \"t\"\n[[attach]]\nextension = \"mac_swap\"\nport = \"wire\"\n"),
            "attach[0].port: domain 't' of extension 'mac_swap' may not use this port",
        ),
        (
            format!("{port}[[domain]]\nname = \"t\"\nhelpers = [\"csum_diff\"]\n[[extension]]\nbundled = \"parser\"\ndomain = \"t\"\n"),
            "extension[0]: program 'parser' refused by the verifier",
        ),
        (
            format!("{port}[[extension]]\nbundled = \"parser\"\nsection = \"tc\"\n"),
            "extension[0]: no program 'tc'",
        ),
    ];
    for (text, want) in cases {
        let got = build_err(&text, dir.path());
        assert!(got.starts_with(want), "{text}\n→ {got}\n(wanted '{want}…')");
    }
    std::fs::write(dir.join("junk.o"), b"not an elf").unwrap();
    let got = build_err("[[extension]]\nfile = \"junk.o\"\n", dir.path());
    assert!(got.starts_with("extension[0]: not a BPF object"), "{got}");
}

/// A tunnel port's `key_file` is read when the port opens: a missing file, or one that
/// does not hold exactly 32 bytes, refuses the configuration with an error naming the
/// port and the file and never the bytes; a good one opens. Paths are relative to the
/// configuration's folder.
#[test]
fn a_tunnel_key_file_must_exist_and_hold_32_bytes() {
    let dir = TempDir::new("tunkey");
    let cfg = |key: &str| {
        format!(
            "[[port]]\nname = \"tun9\"\nkind = \"udp\"\nlocal = \"127.0.0.1:0\"\n\
             peer = \"127.0.0.1:9\"\nkey_file = \"{key}\"\n"
        )
    };
    let got = build_err(&cfg("missing.key"), dir.path());
    assert!(got.starts_with("port[0]: port tun9: tunnel key file "), "{got}");
    assert!(got.contains(&format!("{}", dir.join("missing.key").display())), "{got}");
    assert!(got.contains("No such file"), "{got}");
    std::fs::write(dir.join("short.key"), b"hunter2").unwrap();
    let got = build_err(&cfg("short.key"), dir.path());
    assert!(got.contains("port tun9: tunnel key file ") && got.contains("short.key"), "{got}");
    assert!(got.contains("holds 7 bytes; it must hold exactly 32"), "{got}");
    assert!(!got.contains("hunter2"), "{got}");
    std::fs::write(dir.join("good.key"), [0x77u8; 32]).unwrap();
    build(&cfg("good.key"), dir.path()).expect("a 32-byte key opens");
    let got = build_err(&cfg("good.key").replace("kind = \"udp\"", "kind = \"mem\""), dir.path());
    assert!(got.contains("key_file"), "only a udp port takes a key: {got}");
}

/// An object as real projects ship them: one program's refusal or another program's type
/// never blocks the program asked for, and a section whose name says no type loads as XDP
/// when the configuration says so (as `ip link ... sec S` does).
#[test]
fn one_program_of_a_mixed_object_loads_alone() {
    let dir = TempDir::new("sections");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sections.c");
    let obj = dir.join("sections.o");
    spine_progs::compile_c(&src, &obj, &[]).expect("clang builds the fixture");
    let cfg = |ext: &str| {
        format!(
            "[[port]]\nname = \"in\"\nkind = \"mem\"\n[port.udp4]\nflows = 4\nsize = 64\n\
             [[extension]]\nname = \"x\"\nfile = \"{}\"\n{ext}\n\
             [[attach]]\nextension = \"x\"\nport = \"in\"\n",
            obj.display()
        )
    };
    let run = |ext: &str| {
        let mut a = build(&cfg(ext), dir.path()).unwrap_or_else(|e| panic!("{ext}: {e}"));
        for _ in 0..20 {
            a.step();
        }
        a.finish().unwrap().totals.port("in").unwrap().verdicts
    };
    let v = run("section = \"drop_all\"");
    assert!(v.drop > 0 && v.drop == v.total(), "{v:?}");
    let v = run("section = \"xdp_patch_ports\"\ntype = \"xdp\"");
    assert!(v.tx > 0 && v.tx == v.total(), "{v:?}");

    let e = build_err(&cfg("section = \"xdp_patch_ports\""), dir.path());
    assert!(e.contains("patch_ports") && e.contains("not loaded"), "{e}");
    let e = build_err(&cfg("section = \"unchecked\""), dir.path());
    assert!(e.contains("unchecked") && e.contains("verifier"), "{e}");
    let e = build_err(&cfg("section = \"tc\""), dir.path());
    assert!(e.contains("classifier"), "{e}");
    let e = build_err(&cfg("type = \"xdp\""), dir.path());
    assert!(e.contains("needs a section"), "{e}");
}

#[test]
fn the_shipped_router_example_parses_with_its_twins_as_host_paths() {
    let cfg = Config::load(&repo().join("examples/router.toml")).unwrap();
    assert_eq!(cfg.ports.len(), 4);
    assert_eq!(cfg.ports[0].host_path.as_deref(), Some("eth1-host"));
    assert_eq!(cfg.ports[1].host_path.as_deref(), Some("eth2-host"));
    assert!(cfg.fib.as_ref().is_some_and(|f| f.mirror));
}

/// `[adapter] bulk_expiry_ms`: the default is one second, a value is taken, and 0 or a
/// non-integer is refused naming the key.
#[test]
fn the_bulk_expiry_is_configurable_and_checked() {
    let dir = Path::new("/etc/spine");
    let cfg = Config::parse("[adapter]\nworkers = 1\n", dir).unwrap();
    assert_eq!(cfg.adapter.bulk_expiry_ms, 1000);
    assert_eq!(AdapterOptions::from_config(&cfg.adapter).bulk_expiry_ms, 1000);
    let cfg = Config::parse("[adapter]\nbulk_expiry_ms = 250\n", dir).unwrap();
    assert_eq!(AdapterOptions::from_config(&cfg.adapter).bulk_expiry_ms, 250);
    for bad in ["0", "\"1s\""] {
        let err = Config::parse(&format!("[adapter]\nbulk_expiry_ms = {bad}\n"), dir)
            .expect_err(bad)
            .to_string();
        assert!(err.contains("adapter.bulk_expiry_ms"), "{bad}: {err}");
    }
}

/// `[adapter] bulk_nack_ms`, `bulk_retx_slots`, `bulk_retx_max` (retransmission of bulk
/// messages over tunnels): the defaults (20 ms, 8, 8), values taken, and a NACK delay
/// not below the expiry, or values out of range, refused naming the key.
#[test]
fn the_bulk_retransmission_settings_are_configurable_and_checked() {
    let dir = Path::new("/etc/spine");
    let cfg = Config::parse("[adapter]\nworkers = 1\n", dir).unwrap();
    let o = AdapterOptions::from_config(&cfg.adapter);
    assert_eq!((o.bulk_nack_ms, o.bulk_retx_slots, o.bulk_retx_max), (20, 8, 8));
    let text = "[adapter]\nbulk_expiry_ms = 500\nbulk_nack_ms = 50\nbulk_retx_slots = 0\nbulk_retx_max = 64\n";
    let o = AdapterOptions::from_config(&Config::parse(text, dir).unwrap().adapter);
    assert_eq!((o.bulk_nack_ms, o.bulk_retx_slots, o.bulk_retx_max), (50, 0, 64));
    let o = Config::parse("[adapter]\nbulk_nack_ms = 0\n", dir).unwrap();
    assert_eq!(o.adapter.bulk_nack_ms, 0, "0: no NACKs");
    for (text, key) in [
        ("bulk_expiry_ms = 100\nbulk_nack_ms = 100", "adapter.bulk_nack_ms"),
        ("bulk_nack_ms = 5000", "adapter.bulk_nack_ms"),
        ("bulk_nack_ms = -1", "adapter.bulk_nack_ms"),
        ("bulk_retx_slots = 257", "adapter.bulk_retx_slots"),
        ("bulk_retx_max = 65", "adapter.bulk_retx_max"),
        ("bulk_retx_max = \"8\"", "adapter.bulk_retx_max"),
    ] {
        let err = Config::parse(&format!("[adapter]\n{text}\n"), dir).expect_err(text).to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
}

/// `[adapter] bulk_reasm_slots` and `bulk_reasm_bytes`: the defaults (4 slots of
/// 16,384 bytes), values taken, and values out of range refused naming the key.
#[test]
fn the_reassembly_limits_are_configurable_and_checked() {
    let dir = Path::new("/etc/spine");
    let o = AdapterOptions::from_config(&Config::parse("", dir).unwrap().adapter);
    assert_eq!((o.bulk_reasm_slots, o.bulk_reasm_bytes), (4, 16384));
    let text = "[adapter]\nbulk_reasm_slots = 64\nbulk_reasm_bytes = 1024\n";
    let o = AdapterOptions::from_config(&Config::parse(text, dir).unwrap().adapter);
    assert_eq!((o.bulk_reasm_slots, o.bulk_reasm_bytes), (64, 1024));
    for (text, key) in [
        ("bulk_reasm_slots = 0", "adapter.bulk_reasm_slots"),
        ("bulk_reasm_slots = 65", "adapter.bulk_reasm_slots"),
        ("bulk_reasm_bytes = 1023", "adapter.bulk_reasm_bytes"),
        ("bulk_reasm_bytes = 16385", "adapter.bulk_reasm_bytes"),
    ] {
        let err = Config::parse(&format!("[adapter]\n{text}\n"), dir).expect_err(text).to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
}
