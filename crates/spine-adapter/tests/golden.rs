//! Golden pcap-in/pcap-out tests: every bundled program runs over the committed input
//! capture in a pcap→pcap adapter (XDP_TX into `<name>.tx.pcap`, XDP_PASS through the
//! host path into `<name>.pass.pcap`), and what it writes must equal the committed
//! captures byte for byte. `SPINE_BLESS=1` rewrites them (and the input).
//!
//! The goldens are checked twice over so that blessing cannot enshrine a wrong output:
//! against the runtime run packet by packet without the adapter (the verdict decides
//! the file, the bytes must match), and by hand for a few programs whose effect on a
//! packet is easy to state (MACs swapped, frames cut to 128 bytes, echo replies).

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use common::TempDir;
use spine_adapter::{Adapter, AdapterOptions, Config};
use spine_ports::craft::{icmp4_echo, tcp4, udp4, udp6, Flow4, Flow6};
use spine_ports::gen::{GenConfig, Generator};
use spine_ports::{read_capture, Packet, PcapWriter};
use spine_runtime::{load_object, Bounds, Domain, Geometry, LoadOptions, RxInfo, XdpRunner};

/// Capture records: (timestamp in ns, bytes).
type Records = Vec<(u64, Vec<u8>)>;

const TS0: u64 = 1_700_000_000_000_000_000;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn bless() -> bool {
    std::env::var_os("SPINE_BLESS").is_some_and(|v| v == "1")
}

/// The input: the generator's mix plus frames each program has a rule for.
fn make_input() -> Vec<Vec<u8>> {
    let gen = GenConfig { seed: 11, max_len: 600, ..GenConfig::default() };
    let mut frames = Generator::new(gen).unwrap().take(120);
    let flow = Flow4 { dst: "10.0.0.2".parse().unwrap(), ..Flow4::default() };
    let mut f = Vec::new();
    for seq in 0..3 {
        icmp4_echo(&mut f, &flow, 0x77, seq, 24).unwrap();
        frames.push(f.clone());
    }
    // global_data's probe: a UDP payload starting with "spine-probe".
    udp4(&mut f, &flow, 20).unwrap();
    f[42..53].copy_from_slice(b"spine-probe");
    // The UDP checksum no longer matches; nothing here checks it.
    frames.push(f.clone());
    udp4(&mut f, &Flow4 { src_port: 19, ..flow }, 30).unwrap();
    frames.push(f.clone()); // chargen: parser drops it
    udp4(&mut f, &Flow4 { dst_port: 53, ..flow }, 30).unwrap();
    frames.push(f.clone()); // blocked by the map: parser drops it
    tcp4(&mut f, &flow, 0x18, 300).unwrap();
    frames.push(f.clone()); // long: trim cuts it
    udp4(&mut f, &flow, 0).unwrap();
    frames.push(f.clone()); // 42 bytes: trim pads it
    udp6(&mut f, &Flow6::default(), 64).unwrap();
    frames.push(f.clone());
    frames.push(vec![0xff; 12]); // shorter than an Ethernet header
    frames
}

fn input_path() -> PathBuf {
    golden_dir().join("input.pcap")
}

fn write_pcap(path: &Path, packets: &[(u64, Vec<u8>)]) {
    let mut w = PcapWriter::ethernet(std::fs::File::create(path).unwrap()).unwrap();
    for (ts, p) in packets {
        w.write(*ts, p).unwrap();
    }
    w.finish().unwrap();
}

/// The committed input (written first, once per run, when blessing).
fn input() -> Vec<Packet> {
    static INPUT: OnceLock<Vec<Packet>> = OnceLock::new();
    INPUT
        .get_or_init(|| {
            if bless() {
                std::fs::create_dir_all(golden_dir()).unwrap();
                let frames: Vec<(u64, Vec<u8>)> = make_input()
                    .into_iter()
                    .enumerate()
                    .map(|(i, f)| (TS0 + i as u64 * 1000, f))
                    .collect();
                write_pcap(&input_path(), &frames);
            }
            let bytes = std::fs::read(input_path())
                .expect("committed input capture (SPINE_BLESS=1 makes it)");
            read_capture(&bytes).unwrap().packets
        })
        .clone()
}

/// Held while golden files are written or read, so no test reads a half-written one.
static GOLDEN_FILES: Mutex<()> = Mutex::new(());

/// Map contents the control plane would set, per program.
fn maps(name: &str) -> &'static str {
    match name {
        "parser" => "[[map]]\nextension = \"parser\"\nname = \"blocked_udp_ports\"\nentries = [{ key = 53, value = 1 }]\n",
        "rewrite" => "[[map]]\nextension = \"rewrite\"\nname = \"nat_rules\"\nentries = [{ key = \"0a000002\", value = \"c0a80064\" }]\n",
        "vlan" => "[[map]]\nextension = \"vlan\"\nname = \"vlan_config\"\nentries = [{ key = 0, value = 42 }]\n",
        _ => "",
    }
}

/// Runs `name` over the input in a pcap→pcap adapter; returns (tx, pass) captures.
fn run_adapter(name: &str, dir: &TempDir) -> (Vec<u8>, Vec<u8>) {
    let text = format!(
        "[adapter]\nworkers = 1\npin = false\n\
         [[port]]\nname = \"wire\"\nkind = \"pcap\"\ninput = \"{}\"\noutput = \"tx.pcap\"\nhost_path = \"host\"\n\
         [[port]]\nname = \"host\"\nkind = \"pcap\"\noutput = \"pass.pcap\"\n\
         [[extension]]\nbundled = \"{name}\"\n\
         [[attach]]\nextension = \"{name}\"\nport = \"wire\"\n{}",
        input_path().display(),
        maps(name)
    );
    let cfg = Config::parse(&text, dir.path()).unwrap();
    let mut a = Adapter::from_config(&cfg, AdapterOptions::from_config(&cfg.adapter)).unwrap();
    a.run_to_completion(100_000);
    let report = a.finish().unwrap();
    assert!(report.close_errors.is_empty(), "{:?}", report.close_errors);
    let w = report.totals.port("wire").unwrap();
    assert_eq!(w.rx_packets, input().len() as u64);
    assert_eq!(w.verdicts.total(), w.rx_packets, "{name}: one verdict per packet");
    (std::fs::read(dir.join("tx.pcap")).unwrap(), std::fs::read(dir.join("pass.pcap")).unwrap())
}

/// The same program run directly on the runtime, packet by packet, without the adapter:
/// which packets should come out where, with which bytes.
fn oracle(name: &str, packets: &[Packet]) -> (Records, Records) {
    let obj = spine_obj::parse(spine_progs::get(name).unwrap().object).unwrap();
    let opts = LoadOptions {
        map_seed: 0x5eed,
        domain: Domain::default_domain(),
        ..LoadOptions::default()
    };
    let loaded = load_object(&obj, &opts).unwrap();
    let ext = loaded.program(None).unwrap().clone();
    // The same map contents the adapter's configuration sets.
    let cfg = Config::parse(
        &format!("[[extension]]\nbundled = \"{name}\"\n{}", maps(name)),
        Path::new("/"),
    )
    .unwrap();
    for m in &cfg.maps {
        let map = ext.map(&m.map).unwrap();
        for e in &m.entries {
            let k = e.key.to_size(map.def().key_size as usize).unwrap();
            let v = e.value.to_size(map.def().value_size as usize).unwrap();
            map.update_user(&k, &v, 0).unwrap();
        }
    }
    let mut runner = XdpRunner::new(ext, 0).unwrap();
    let mut host = spine_runtime::FixedHost::new(1);
    let g = Geometry::pool(2048, 256);
    let (mut tx, mut pass) = (Vec::new(), Vec::new());
    for p in packets {
        let mut buf = vec![0u8; 2048];
        buf[256..256 + p.data.len()].copy_from_slice(&p.data);
        let mut b = Bounds { meta: 256, data: 256, end: 256 + p.data.len() };
        let rx = RxInfo { ingress_ifindex: spine_adapter::VIRTUAL_IFINDEX_BASE, rx_queue_index: 0 };
        let out = (p.ts_ns, buf[b.data..b.end].to_vec());
        let verdict = runner.run_raw(&mut buf, g, &mut b, rx, &mut host);
        let out = (out.0, buf[b.data..b.end].to_vec());
        match verdict {
            Ok(spine_abi::xdp_action::TX) => tx.push(out),
            Ok(spine_abi::xdp_action::PASS) => pass.push(out),
            _ => {}
        }
    }
    (tx, pass)
}

fn records(bytes: &[u8]) -> Vec<(u64, Vec<u8>)> {
    read_capture(bytes).unwrap().packets.into_iter().map(|p| (p.ts_ns, p.data)).collect()
}

#[test]
fn bundled_programs_write_their_golden_captures() {
    let packets = input();
    assert!(packets.len() > 100);
    let _files = GOLDEN_FILES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut failures = Vec::new();
    for b in spine_progs::all() {
        let dir = TempDir::new(b.name);
        let (tx, pass) = run_adapter(b.name, &dir);
        let (want_tx, want_pass) = oracle(b.name, &packets);
        if records(&tx) != want_tx || records(&pass) != want_pass {
            failures.push(format!(
                "{}: the adapter's output differs from the runtime run directly",
                b.name
            ));
            continue;
        }
        for (kind, got) in [("tx", &tx), ("pass", &pass)] {
            let path = golden_dir().join(format!("{}.{kind}.pcap", b.name));
            if bless() {
                std::fs::write(&path, got).unwrap();
            }
            match std::fs::read(&path) {
                Ok(want) if &want == got => {}
                Ok(_) => failures.push(format!("{}: differs from {}", b.name, path.display())),
                Err(e) => {
                    failures.push(format!("{}: {e} (SPINE_BLESS=1 writes it)", path.display()))
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn golden(name: &str, kind: &str) -> Vec<(u64, Vec<u8>)> {
    let _files = GOLDEN_FILES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    records(&std::fs::read(golden_dir().join(format!("{name}.{kind}.pcap"))).unwrap())
}

fn by_ts() -> HashMap<u64, Vec<u8>> {
    input().into_iter().map(|p| (p.ts_ns, p.data)).collect()
}

fn csum(b: &[u8]) -> u16 {
    let mut s: u32 =
        b.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[test]
fn mac_swap_golden_is_every_frame_with_its_macs_swapped() {
    let inputs = input();
    let tx = golden("mac_swap", "tx");
    let want: Vec<(u64, Vec<u8>)> = inputs
        .iter()
        .filter(|p| p.data.len() >= 14)
        .map(|p| {
            let mut d = p.data.clone();
            d[..6].copy_from_slice(&p.data[6..12]);
            d[6..12].copy_from_slice(&p.data[..6]);
            (p.ts_ns, d)
        })
        .collect();
    assert_eq!(tx.len(), inputs.len() - 1, "all but the 12-byte frame");
    assert!(tx == want);
    assert!(golden("mac_swap", "pass").is_empty());
}

#[test]
fn trim_golden_cuts_long_frames_and_pads_runts() {
    let inputs = by_ts();
    let tx = golden("trim", "tx");
    assert!(!tx.is_empty());
    for (ts, d) in &tx {
        let orig = &inputs[ts];
        assert!(orig.len() > 128);
        assert_eq!(d.as_slice(), &orig[..128], "cut to the snap length, bytes kept");
    }
    let pass = golden("trim", "pass");
    let runt = pass.iter().find(|(ts, _)| inputs[ts].len() == 42).expect("the 42-byte frame");
    assert_eq!(runt.1.len(), 60);
    assert_eq!(&runt.1[..42], inputs[&runt.0].as_slice());
    assert!(runt.1[42..].iter().all(|&b| b == 0xa5), "padded with the pad byte");
}

#[test]
fn icmp_echo_golden_holds_valid_replies_to_the_requests() {
    let inputs = by_ts();
    let replies: Vec<(u64, Vec<u8>)> = golden("icmp_echo", "tx")
        .into_iter()
        .filter(|(ts, _)| {
            let q = &inputs[ts];
            q.len() > 42 && q[23] == 1 && q[34] == 8 && q[38..40] == [0, 0x77]
        })
        .collect();
    assert_eq!(replies.len(), 3, "one reply per request");
    for (ts, r) in &replies {
        let q = &inputs[ts];
        assert_eq!(&r[..6], &q[6..12], "to the requester");
        assert_eq!(&r[26..30], &q[30..34], "from the address asked");
        assert_eq!(&r[30..34], &q[26..30]);
        assert_eq!(r[34], 0, "echo reply");
        assert_eq!(csum(&r[14..34]), 0, "IPv4 header checksum valid");
        assert_eq!(csum(&r[34..]), 0, "ICMP checksum valid");
        assert_eq!(&r[42..], &q[42..], "payload echoed");
    }
}

#[test]
fn rewrite_golden_sends_nat_rule_traffic_to_its_new_address() {
    let inputs = by_ts();
    let tx = golden("rewrite", "tx");
    let ours: Vec<&(u64, Vec<u8>)> =
        tx.iter().filter(|(ts, _)| inputs[ts].get(30..34) == Some(&[10, 0, 0, 2])).collect();
    assert!(ours.len() >= 5, "the crafted frames to 10.0.0.2");
    for (ts, r) in ours {
        let q = &inputs[ts];
        assert_eq!(&r[30..34], &[192, 168, 0, 100], "destination from the rule");
        assert_eq!(r[22], q[22] - 1, "TTL decremented");
        assert_eq!(csum(&r[14..34]), 0, "IPv4 header checksum still valid");
    }
}

#[test]
fn parser_golden_drops_blocked_udp() {
    let inputs = by_ts();
    let pass = golden("parser", "pass");
    let udp_dport = |d: &Vec<u8>| {
        (d.len() > 42 && d[12..14] == [8, 0] && d[23] == 17)
            .then(|| u16::from_be_bytes([d[36], d[37]]))
    };
    let udp_sport = |d: &Vec<u8>| {
        (d.len() > 42 && d[12..14] == [8, 0] && d[23] == 17)
            .then(|| u16::from_be_bytes([d[34], d[35]]))
    };
    assert!(inputs.values().any(|d| udp_dport(d) == Some(53)));
    assert!(pass.iter().all(|(_, d)| udp_dport(d) != Some(53)), "blocked by the control plane");
    assert!(pass.iter().all(|(_, d)| udp_sport(d) != Some(19)), "chargen dropped");
    assert!(pass.iter().any(|(_, d)| udp_dport(d) == Some(5678)), "other UDP passes");
}
