//! The packet generator, checked from outside: determinism, coverage of every kind,
//! length bounds, and an independent inspector's verdict on every frame.

#[path = "../common/mod.rs"]
mod common;
mod inspect;

use std::collections::{BTreeMap, BTreeSet};

use spine_ports::craft::{tcp4, udp4, udp6, Flow4, Flow6};
use spine_ports::gen::{GenConfig, Generator, Kind, Shape, Tags};
use spine_ports::{read_capture, PcapWriter};

use common::{tcpdump_packets, TempFile};
use inspect::{inspect, Defect, Report};

fn generator(cfg: GenConfig) -> Generator {
    Generator::new(cfg).expect("valid config")
}

/// Checks one frame against what its kind promises; returns a description of the
/// first broken promise.
fn check(frame: &[u8], kind: Kind, cfg: &GenConfig) -> Result<(), String> {
    if frame.len() < cfg.min_len || frame.len() > cfg.max_len {
        return Err(format!("length {} outside {}..={}", frame.len(), cfg.min_len, cfg.max_len));
    }
    let r = inspect(frame);
    if kind.shape == Shape::RandomBytes {
        return if kind.tags == Tags::None { Ok(()) } else { Err("tagged random bytes".into()) };
    }
    let tag_ok = match kind.shape {
        // A cut inside the tags leaves fewer to parse; the rest must match exactly.
        Shape::TruncatedAtBoundary | Shape::TruncatedMidHeader => r.tags <= kind.tags.count(),
        _ => r.tags == kind.tags.count(),
    };
    if !tag_ok {
        return Err(format!("{} tags parsed", r.tags));
    }
    if !kind.shape.is_malformed() {
        if !r.defects.is_empty() {
            return Err(format!("well-formed frame has defects {:?}", r.defects));
        }
        return check_structure(&r, kind.shape);
    }
    let defects: BTreeSet<Defect> = r.defects.iter().copied().collect();
    let only = |d: Defect| {
        if defects.len() == 1 && defects.contains(&d) {
            Ok(())
        } else {
            Err(format!("expected only {d:?}, found {defects:?}"))
        }
    };
    match kind.shape {
        Shape::TruncatedAtBoundary | Shape::TruncatedMidHeader => {
            let cut = defects.iter().any(|d| {
                matches!(
                    d,
                    Defect::Short(_)
                        | Defect::IhlBeyond
                        | Defect::LengthBeyondFrame
                        | Defect::PayloadLenMismatch
                )
            });
            if cut {
                Ok(())
            } else {
                Err(format!("truncated frame shows no truncation: {defects:?}"))
            }
        }
        Shape::Ipv4IhlTooSmall => only(Defect::IhlTooSmall),
        Shape::Ipv4IhlBeyondPacket => only(Defect::IhlBeyond),
        Shape::Ipv4TotalLenTooLarge => only(Defect::LengthBeyondFrame),
        Shape::Ipv4TotalLenTooSmall => only(Defect::TotalLenShort),
        Shape::Ipv6PayloadLenWrong => only(Defect::PayloadLenMismatch),
        Shape::IpVersionMismatch => only(Defect::VersionMismatch),
        Shape::BadChecksum => match defects.iter().collect::<Vec<_>>()[..] {
            [Defect::ChecksumWrong(_)] => Ok(()),
            _ => Err(format!("expected one wrong checksum, found {defects:?}")),
        },
        Shape::UnknownEthertype => only(Defect::UnknownEthertype),
        other => Err(format!("unexpected malformed shape {other:?}")),
    }
}

/// The parsed structure matches the well-formed shape's promise.
fn check_structure(r: &Report, shape: Shape) -> Result<(), String> {
    let v4 = |proto: Option<u8>, options: bool, fragment: bool| match r.ipv4 {
        Some(h)
            if proto.is_none_or(|p| h.proto == p)
                && (h.ihl > 20) == options
                && h.fragment == fragment =>
        {
            Ok(())
        }
        _ => Err(format!("{shape:?} parsed as {:?}", r.ipv4)),
    };
    let v6 = |upper: Option<u8>, exts: bool, fragment: bool| match &r.ipv6 {
        Some(h)
            if upper.is_none_or(|p| h.upper == p)
                && h.fragment == fragment
                && (fragment || h.exts.is_empty() != exts) =>
        {
            Ok(())
        }
        other => Err(format!("{shape:?} parsed as {other:?}")),
    };
    match shape {
        Shape::Ipv4Udp => v4(Some(17), false, false),
        Shape::Ipv4Tcp => v4(Some(6), false, false),
        Shape::Ipv4IcmpEcho => v4(Some(1), false, false),
        Shape::Ipv4WithOptions => v4(None, true, false),
        Shape::Ipv4Fragment => v4(None, false, true),
        Shape::Ipv6Udp => v6(Some(17), false, false),
        Shape::Ipv6Tcp => v6(Some(6), false, false),
        Shape::Ipv6IcmpEcho => v6(Some(58), false, false),
        Shape::Ipv6WithExtensions => v6(None, true, false),
        Shape::Ipv6Fragment => v6(None, false, true),
        Shape::Arp if r.ethertype == 0x0806 => Ok(()),
        other => Err(format!("{other:?} parsed as ethertype {:#06x}", r.ethertype)),
    }
}

/// Generates `n` frames, checks each, and counts kinds.
fn run(cfg: &GenConfig, n: usize) -> BTreeMap<Kind, usize> {
    let mut g = generator(cfg.clone());
    let mut buf = Vec::new();
    let mut counts = BTreeMap::new();
    for i in 0..n {
        let kind = g.next_into(&mut buf);
        if let Err(e) = check(&buf, kind, cfg) {
            panic!("seed {} frame {i} ({kind}): {e}\n{buf:02x?}", cfg.seed);
        }
        *counts.entry(kind).or_insert(0) += 1;
    }
    counts
}

#[test]
fn same_seed_same_frames_other_seed_other_frames() {
    let cfg = GenConfig { seed: 42, ..GenConfig::default() };
    let a = generator(cfg.clone()).take(3000);
    let b = generator(cfg.clone()).take(3000);
    assert_eq!(a, b);
    let mut g1 = generator(cfg.clone());
    let mut g2 = generator(cfg);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..1000 {
        assert_eq!(g1.next_into(&mut x), g2.next_into(&mut y));
    }
    let c = generator(GenConfig { seed: 43, ..GenConfig::default() }).take(3000);
    let same = a.iter().zip(&c).filter(|(x, y)| x == y).count();
    assert!(same < 10, "{same} identical frames from different seeds");
}

#[test]
fn every_kind_appears_and_every_frame_checks_out() {
    for seed in [0, 1, 7, 0xdead_beef] {
        let cfg = GenConfig { seed, ..GenConfig::default() };
        let counts = run(&cfg, 10_000);
        let shapes: BTreeSet<Shape> = counts.keys().map(|k| k.shape).collect();
        let missing: Vec<_> = Shape::ALL.iter().filter(|s| !shapes.contains(s)).collect();
        assert!(missing.is_empty(), "seed {seed}: shapes never generated: {missing:?}");
        for tags in Tags::ALL {
            assert!(counts.keys().any(|k| k.tags == tags), "seed {seed}: no {tags:?} frames");
        }
        let malformed: usize =
            counts.iter().filter(|(k, _)| k.shape.is_malformed()).map(|(_, n)| n).sum();
        assert!(
            (1_500..=2_500).contains(&malformed),
            "seed {seed}: {malformed} malformed of 10,000"
        );
    }
}

#[test]
fn length_bounds_hold_for_every_config() {
    let configs = [
        GenConfig { min_len: 60, max_len: 128, ..GenConfig::default() },
        GenConfig { max_len: 3520, ..GenConfig::default() },
        GenConfig { min_len: 64, max_len: 64, ..GenConfig::default() },
        GenConfig { min_len: 1000, max_len: 1100, vlan_share: 0.5, ..GenConfig::default() },
        GenConfig { max_len: 42, ..GenConfig::default() },
        GenConfig { max_len: 9000, malformed_share: 0.5, ..GenConfig::default() },
        GenConfig { min_len: 14, max_len: 20, malformed_share: 1.0, ..GenConfig::default() },
        GenConfig { max_len: 65_535, vlan_share: 1.0, ..GenConfig::default() },
    ];
    for (i, cfg) in configs.iter().enumerate() {
        let cfg = GenConfig { seed: i as u64, ..cfg.clone() };
        let counts = run(&cfg, 3000);
        assert_eq!(counts.values().sum::<usize>(), 3000);
    }
}

#[test]
fn sizes_span_the_range() {
    let cfg = GenConfig { max_len: 3520, ..GenConfig::default() };
    let sizes: Vec<usize> = generator(cfg).take(10_000).iter().map(Vec::len).collect();
    assert_eq!(sizes.iter().min(), Some(&14));
    assert_eq!(sizes.iter().max(), Some(&3520));
    assert!(sizes.iter().filter(|&&s| s <= 128).count() > 2000, "small frames dominate");
    assert!(sizes.iter().filter(|&&s| s > 1514).count() > 500, "jumbo range is used");
}

#[test]
fn malformed_share_is_honoured_at_the_extremes() {
    let none = run(&GenConfig { seed: 3, malformed_share: 0.0, ..GenConfig::default() }, 3000);
    assert!(none.keys().all(|k| !k.shape.is_malformed()));
    let all = run(&GenConfig { seed: 3, malformed_share: 1.0, ..GenConfig::default() }, 3000);
    assert!(all.keys().all(|k| k.shape.is_malformed()));
    let untagged = run(&GenConfig { seed: 3, vlan_share: 0.0, ..GenConfig::default() }, 3000);
    assert!(untagged.keys().all(|k| k.tags == Tags::None));
}

#[test]
fn ten_thousand_frames_survive_tcpdump() {
    let file = TempFile::new("generated.pcap");
    let mut g = generator(GenConfig { seed: 99, max_len: 3520, ..GenConfig::default() });
    let frames = g.take(10_000);
    let mut w = PcapWriter::ethernet(std::io::BufWriter::new(
        std::fs::File::create(file.path()).expect("create"),
    ))
    .expect("header");
    for (i, f) in frames.iter().enumerate() {
        w.write(1_600_000_000_000_000_000 + i as u64 * 1000, f).expect("write");
    }
    w.finish().expect("flush");
    let back = read_capture(&std::fs::read(file.path()).expect("read")).expect("valid");
    assert_eq!(back.packets.len(), frames.len());
    assert!(back.packets.iter().zip(&frames).all(|(p, f)| &p.data == f));
    let Some(lines) = tcpdump_packets(file.path()) else { return };
    assert_eq!(lines.len(), 10_000);
}

#[test]
fn the_inspector_sees_each_defect() {
    // The checks above are only as good as the inspector: show it catches each defect.
    let defects = |f: &[u8]| inspect(f).defects;
    let mut good = Vec::new();
    udp4(&mut good, &Flow4::default(), 100).expect("fits");
    assert_eq!(defects(&good), []);
    let mut f = good.clone();
    f[60] ^= 1;
    assert_eq!(defects(&f), [Defect::ChecksumWrong("udp")]);
    let mut f = good.clone();
    f[24] ^= 1;
    assert_eq!(defects(&f), [Defect::ChecksumWrong("ipv4 header")]);
    let mut f = good.clone();
    f[14] = 0x44;
    assert!(defects(&f).contains(&Defect::IhlTooSmall));
    assert_eq!(defects(&good[..40]), [Defect::LengthBeyondFrame]);
    assert_eq!(defects(&good[..30]), [Defect::Short("ipv4")]);
    let mut f = good.clone();
    f[14] = 0x65;
    assert_eq!(defects(&f), [Defect::VersionMismatch]);
    let mut f = good.clone();
    f.push(0);
    assert_eq!(defects(&f), [Defect::TotalLenShort]);
    let mut f = good.clone();
    f[39] ^= 1; // UDP length
    assert!(defects(&f).contains(&Defect::BadField("udp length")));

    tcp4(&mut good, &Flow4::default(), 0x02, 0).expect("fits");
    assert_eq!(defects(&good), []);
    let mut f = good.clone();
    f[46] = 0x40; // data offset 16 bytes
    assert_eq!(defects(&f), [Defect::BadField("tcp data offset")]);

    udp6(&mut good, &Flow6::default(), 30).expect("fits");
    assert_eq!(defects(&good), []);
    let mut f = good.clone();
    f[19] += 1;
    assert_eq!(defects(&f), [Defect::PayloadLenMismatch]);
    let mut f = good.clone();
    f[62..64].copy_from_slice(&[0, 0]); // zero UDP checksum is not allowed over IPv6
    assert_eq!(defects(&f), [Defect::ChecksumWrong("udp")]);
    let mut f = good.clone();
    f[12..14].copy_from_slice(&[0x88, 0xcc]);
    assert_eq!(defects(&f), [Defect::UnknownEthertype]);
}
