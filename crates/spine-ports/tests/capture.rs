//! Capture files: reading classic pcap and pcapng as other tools write them, writing
//! what tcpdump reads, and refusing hostile input with located, typed errors.

mod common;

use std::io::Read;

use proptest::prelude::*;
use spine_ports::{
    read_capture, CaptureError, CaptureErrorKind, CaptureFormat, CaptureReader, Packet, PcapWriter,
    LINKTYPE_ETHERNET, MAX_PACKET_LEN,
};

use common::{tcpdump, tcpdump_packets, TempFile};

/// Writes a classic pcap file by hand in either byte order and resolution.
fn classic(
    big_endian: bool,
    nanos: bool,
    linktype: u32,
    records: &[(u32, u32, &[u8], u32)],
) -> Vec<u8> {
    let w32 = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let w16 = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
    let mut out = Vec::new();
    out.extend(w32(if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
    out.extend(w16(2));
    out.extend(w16(4));
    out.extend(w32(0));
    out.extend(w32(0));
    out.extend(w32(65_535));
    out.extend(w32(linktype));
    for &(sec, frac, data, orig) in records {
        out.extend(w32(sec));
        out.extend(w32(frac));
        out.extend(w32(data.len() as u32));
        out.extend(w32(orig));
        out.extend_from_slice(data);
    }
    out
}

/// Builds pcapng files block by block; each method returns the block's offset.
struct Ng {
    buf: Vec<u8>,
    be: bool,
}

impl Ng {
    fn new() -> Self {
        Ng { buf: Vec::new(), be: false }
    }

    fn w32(&self, v: u32) -> [u8; 4] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    fn w16(&self, v: u16) -> [u8; 2] {
        if self.be {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    }

    /// Appends a block of `btype` with `body` padded to 32 bits.
    fn block(&mut self, btype: u32, body: &[u8]) -> usize {
        let start = self.buf.len();
        let padded = body.len().div_ceil(4) * 4;
        let len = (12 + padded) as u32;
        self.buf.extend(self.w32(btype));
        self.buf.extend(self.w32(len));
        self.buf.extend_from_slice(body);
        self.buf.resize(start + 8 + padded, 0);
        self.buf.extend(self.w32(len));
        start
    }

    fn options(&self, opts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(code, value) in opts {
            out.extend(self.w16(code));
            out.extend(self.w16(value.len() as u16));
            out.extend_from_slice(value);
            out.resize(out.len().div_ceil(4) * 4, 0);
        }
        if !opts.is_empty() {
            out.extend([0, 0, 0, 0]);
        }
        out
    }

    fn section(&mut self, be: bool) -> usize {
        self.be = be;
        let mut body = Vec::new();
        body.extend(self.w32(0x1a2b_3c4d));
        body.extend(self.w16(1));
        body.extend(self.w16(0));
        body.extend([0xff; 8]);
        body.extend(self.options(&[(4, b"spine-tests")]));
        self.block(0x0a0d_0d0a, &body)
    }

    fn idb(&mut self, linktype: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> usize {
        let mut body = Vec::new();
        body.extend(self.w16(linktype));
        body.extend(self.w16(0));
        body.extend(self.w32(snaplen));
        body.extend(self.options(opts));
        self.block(1, &body)
    }

    fn epb(&mut self, iface: u32, ts: u64, data: &[u8], orig_len: u32) -> usize {
        let mut body = Vec::new();
        body.extend(self.w32(iface));
        body.extend(self.w32((ts >> 32) as u32));
        body.extend(self.w32(ts as u32));
        body.extend(self.w32(data.len() as u32));
        body.extend(self.w32(orig_len));
        body.extend_from_slice(data);
        body.resize(body.len().div_ceil(4) * 4, 0);
        // An epb_flags option (inbound), which the reader must step over.
        body.extend(self.options(&[(2, &self.w32(1))]));
        self.block(6, &body)
    }

    fn spb(&mut self, orig_len: u32, data: &[u8]) -> usize {
        let mut body = Vec::new();
        body.extend(self.w32(orig_len));
        body.extend_from_slice(data);
        self.block(3, &body)
    }

    fn obsolete_pb(&mut self, iface: u16, ts: u64, data: &[u8]) -> usize {
        let mut body = Vec::new();
        body.extend(self.w16(iface));
        body.extend(self.w16(0));
        body.extend(self.w32((ts >> 32) as u32));
        body.extend(self.w32(ts as u32));
        body.extend(self.w32(data.len() as u32));
        body.extend(self.w32(data.len() as u32));
        body.extend_from_slice(data);
        self.block(2, &body)
    }
}

fn frame(len: usize, tag: u8) -> Vec<u8> {
    (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
}

/// A pcapng file exercising every supported block, two sections in the given byte
/// orders, and blocks that must be skipped; with the packets it must read as.
fn rich_pcapng(first_be: bool, second_be: bool) -> (Vec<u8>, Vec<Packet>) {
    let mut ng = Ng::new();
    ng.section(first_be);
    // libpcap insists that every interface share one snap length.
    ng.idb(1, 96, &[(2, b"eth0"), (9, &[9])]);
    ng.idb(1, 96, &[]);
    let offset = if first_be { 2i64.to_be_bytes() } else { 2i64.to_le_bytes() };
    ng.idb(1, 96, &[(9, &[0x80 | 10]), (14, &offset)]);
    let (a, b, c, d, e) = (frame(60, 1), frame(150, 2), frame(42, 3), frame(1514, 4), frame(80, 5));
    ng.epb(0, 1_700_000_000_123_456_789, &a, 60);
    ng.block(5, &[0; 20]); // Interface Statistics Block: skipped
    ng.epb(1, 1_700_000_000_000_001, &b[..96], 150);
    ng.block(0x0000_0bad, &[7; 33]); // unknown: skipped
    ng.epb(2, 3 * 1024 + 512, &c, 42);
    ng.section(second_be);
    ng.idb(1, 96, &[]);
    ng.spb(1514, &d[..96]);
    ng.obsolete_pb(0, 1_000_000, &e);
    ng.spb(30, &e[..30]);
    let p = |ts_ns, data: &[u8], orig_len| Packet { ts_ns, data: data.to_vec(), orig_len };
    let packets = vec![
        p(1_700_000_000_123_456_789, &a, 60),
        p(1_700_000_000_000_001_000, &b[..96], 150),
        p(5_500_000_000, &c, 42),
        p(0, &d[..96], 1514),
        p(1_000_000_000, &e, 80),
        p(0, &e[..30], 30),
    ];
    (ng.buf, packets)
}

#[test]
fn classic_pcap_in_every_byte_order_and_resolution() {
    let (a, b) = (frame(60, 0), frame(0, 0));
    for big_endian in [false, true] {
        for nanos in [false, true] {
            let file = classic(big_endian, nanos, 1, &[(10, 500, &a, 60), (11, 7, &b, 1500)]);
            let cap = read_capture(&file).expect("valid");
            let unit = if nanos { 1 } else { 1000 };
            assert_eq!(cap.linktype, 1);
            assert_eq!(cap.packets.len(), 2);
            assert_eq!(cap.packets[0].ts_ns, 10_000_000_000 + 500 * unit);
            assert_eq!(cap.packets[0].data, a);
            assert_eq!(cap.packets[1].ts_ns, 11_000_000_000 + 7 * unit);
            assert_eq!(cap.packets[1].orig_len, 1500);
            assert!(cap.packets[1].data.is_empty());
            let reader = CaptureReader::new(&file[..]).expect("valid");
            assert_eq!(reader.format(), CaptureFormat::Pcap { nanos, big_endian, snaplen: 65_535 });
        }
    }
}

#[test]
fn classic_pcap_linktype_drops_fcs_bits_and_version_is_checked() {
    // Bits 26-31 of the link-type field describe the FCS, not the link type.
    let file = classic(false, false, 0x1400_0000 | 101, &[]);
    assert_eq!(read_capture(&file).expect("valid").linktype, 101);
    let mut file = classic(true, false, 1, &[]);
    file[5] = 3;
    let err = read_capture(&file).expect_err("version 3");
    assert!(
        matches!(err.kind, CaptureErrorKind::UnsupportedVersion { major: 3, minor: 4 }),
        "{err}"
    );
    assert_eq!((err.record, err.offset), (None, 0));
}

#[test]
fn writer_round_trips_through_our_reader() {
    let mut w = PcapWriter::new(Vec::new(), LINKTYPE_ETHERNET, 100).expect("vec");
    let big = frame(300, 9);
    w.write(1_700_000_000_999_999_999, &frame(64, 1)).expect("vec");
    w.write(0, &[]).expect("vec");
    w.write(5, &big).expect("vec");
    w.write_packet(&Packet { ts_ns: 7, data: frame(10, 2), orig_len: 1000 }).expect("vec");
    assert_eq!(w.count(), 4);
    let bytes = w.finish().expect("vec");
    assert_eq!(&bytes[..4], &[0x4d, 0x3c, 0xb2, 0xa1], "nanosecond magic, little-endian");
    let cap = read_capture(&bytes).expect("valid");
    assert_eq!(cap.linktype, LINKTYPE_ETHERNET);
    let p = &cap.packets;
    assert_eq!(p.len(), 4);
    assert_eq!((p[0].ts_ns, p[0].data.len(), p[0].orig_len), (1_700_000_000_999_999_999, 64, 64));
    assert_eq!((p[1].data.len(), p[1].orig_len), (0, 0));
    assert_eq!(p[2].data, big[..100], "cut to the snap length");
    assert_eq!(p[2].orig_len, 300);
    assert_eq!((p[3].ts_ns, p[3].orig_len), (7, 1000));
}

#[test]
fn writer_rejects_timestamps_past_2106() {
    let mut w = PcapWriter::ethernet(Vec::new()).expect("vec");
    let err = w.write(u64::MAX, &[0; 14]).expect_err("out of range");
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
    assert_eq!(w.count(), 0);
}

#[test]
fn tcpdump_reads_what_we_write() {
    let file = TempFile::new("written.pcap");
    let mut w = PcapWriter::ethernet(std::io::BufWriter::new(
        std::fs::File::create(file.path()).expect("create"),
    ))
    .expect("header");
    for i in 0..25u64 {
        w.write(1_700_000_000_000_000_000 + i * 1_000_001, &frame(60 + i as usize, i as u8))
            .expect("write");
    }
    w.finish().expect("flush");
    let Some(lines) = tcpdump_packets(file.path()) else { return };
    assert_eq!(lines.len(), 25, "{lines:?}");
    assert!(lines[0].starts_with("1700000000.000000000 "), "{}", lines[0]);
    assert!(lines[24].starts_with("1700000000.024000024 "), "{}", lines[24]);
}

#[test]
fn pcapng_every_block_kind_both_byte_orders() {
    for (first_be, second_be) in [(false, false), (false, true), (true, false), (true, true)] {
        let (file, expect) = rich_pcapng(first_be, second_be);
        let cap = read_capture(&file).expect("valid");
        assert_eq!(cap.linktype, 1);
        assert_eq!(cap.packets, expect, "{first_be} {second_be}");
        let reader = CaptureReader::new(&file[..]).expect("valid");
        assert_eq!(reader.format(), CaptureFormat::Pcapng);
    }
}

#[test]
fn pcapng_agrees_with_libpcap() {
    // libpcap reads our hand-built file (so the builder follows the format), and its
    // classic-pcap rewrite of it reads back as the same packets. libpcap cannot read
    // sections of different byte orders, so both sections share one here.
    for be in [false, true] {
        libpcap_agrees(be);
    }
}

fn libpcap_agrees(big_endian: bool) {
    let (bytes, expect) = rich_pcapng(big_endian, big_endian);
    let ng = TempFile::new("rich.pcapng");
    std::fs::write(ng.path(), &bytes).expect("write");
    let Some(lines) = tcpdump_packets(ng.path()) else { return };
    assert_eq!(lines.len(), expect.len(), "{lines:?}");
    let classic = TempFile::new("rich.pcap");
    let args = ["-r".as_ref(), ng.path().as_os_str(), "-w".as_ref(), classic.path().as_os_str()];
    tcpdump(&args).expect("tcpdump ran before");
    let theirs = read_capture(&std::fs::read(classic.path()).expect("read")).expect("valid");
    assert_eq!(theirs.packets.len(), expect.len());
    for (t, e) in theirs.packets.iter().zip(&expect) {
        assert_eq!((&t.data, t.orig_len), (&e.data, e.orig_len));
        if e.ts_ns != 0 {
            // libpcap writes microseconds.
            assert_eq!(t.ts_ns, e.ts_ns / 1000 * 1000);
        }
    }
}

/// A reader that hands out at most one byte per call.
struct Trickle<'a>(&'a [u8]);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&b, rest)), Some(slot)) => {
                *slot = b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn streaming_reader_handles_short_reads_and_reuses_its_buffer() {
    let (file, expect) = rich_pcapng(true, false);
    let got: Vec<Packet> =
        CaptureReader::new(Trickle(&file)).expect("valid").map(|p| p.expect("valid")).collect();
    assert_eq!(got, expect);
    let mut reader = CaptureReader::new(Trickle(&file)).expect("valid");
    let mut packet = Packet::default();
    let mut n = 0;
    while reader.read_next(&mut packet).expect("valid") {
        assert_eq!(packet, expect[n]);
        assert_eq!(reader.linktype(), Some(1));
        n += 1;
    }
    assert_eq!(n, expect.len());
}

#[test]
fn mixed_link_types_need_the_streaming_reader() {
    let mut ng = Ng::new();
    ng.section(false);
    ng.idb(1, 0, &[]);
    ng.idb(101, 0, &[]);
    ng.epb(0, 1, &frame(20, 0), 20);
    let second = ng.epb(1, 2, &frame(20, 0), 20);
    let err = read_capture(&ng.buf).expect_err("mixed");
    assert!(matches!(err.kind, CaptureErrorKind::MixedLinktypes { first: 1, found: 101 }), "{err}");
    assert_eq!((err.record, err.offset), (Some(4), second as u64));
    let mut reader = CaptureReader::new(&ng.buf[..]).expect("valid");
    let mut p = Packet::default();
    let mut types = Vec::new();
    while reader.read_next(&mut p).expect("valid") {
        types.push(reader.linktype());
    }
    assert_eq!(types, [Some(1), Some(101)]);
}

#[test]
fn empty_pcapng_reports_its_first_interface() {
    let mut ng = Ng::new();
    ng.section(true);
    ng.idb(105, 0, &[]);
    assert_eq!(read_capture(&ng.buf).expect("valid").linktype, 105);
}

fn err_of(bytes: &[u8]) -> CaptureError {
    read_capture(bytes).expect_err("must be rejected")
}

#[test]
fn header_errors() {
    let e = err_of(&[]);
    assert!(matches!(e.kind, CaptureErrorKind::Truncated { needed: 4, available: 0 }), "{e}");
    assert_eq!((e.record, e.offset), (None, 0));
    let e = err_of(b"GIF89a....");
    assert!(matches!(e.kind, CaptureErrorKind::BadMagic { magic: 0x4749_4638 }), "{e}");
    let e = err_of(&classic(false, true, 1, &[])[..10]);
    assert!(matches!(e.kind, CaptureErrorKind::Truncated { needed: 24, available: 10 }), "{e}");
    assert_eq!(e.to_string(), "file header at byte 0: truncated: needs 24 bytes, only 10 present");
}

#[test]
fn classic_record_errors_name_record_and_offset() {
    let a = frame(100, 0);
    let file = classic(false, false, 1, &[(1, 0, &a, 100), (2, 0, &a, 100)]);
    let second = 24 + 16 + 100;
    let e = err_of(&file[..second + 10]);
    assert!(matches!(e.kind, CaptureErrorKind::Truncated { needed: 16, available: 10 }), "{e}");
    assert_eq!((e.record, e.offset), (Some(1), second as u64));
    let e = err_of(&file[..file.len() - 1]);
    assert!(matches!(e.kind, CaptureErrorKind::Truncated { needed: 116, available: 115 }), "{e}");
    assert_eq!((e.record, e.offset), (Some(1), second as u64));
    assert_eq!(
        e.to_string(),
        format!("record 1 at byte {second}: truncated: needs 116 bytes, only 115 present")
    );
    let mut absurd = file.clone();
    absurd[second + 8..second + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let e = err_of(&absurd);
    assert!(
        matches!(e.kind, CaptureErrorKind::TooLarge { len: 0x7fff_ffff, max } if max == u64::from(MAX_PACKET_LEN)),
        "{e}"
    );
    assert_eq!((e.record, e.offset), (Some(1), second as u64));
}

#[test]
fn pcapng_block_errors_name_block_and_offset() {
    let base = || {
        let mut ng = Ng::new();
        ng.section(false);
        ng.idb(1, 0, &[]);
        ng
    };
    let check =
        |bytes: &[u8], record: u64, offset: usize, want: &dyn Fn(&CaptureErrorKind) -> bool| {
            let e = err_of(bytes);
            assert!(want(&e.kind), "unexpected {e}");
            assert_eq!((e.record, e.offset), (Some(record), offset as u64), "{e}");
        };

    // Zero, short and unaligned block lengths.
    for len in [0u32, 8, 13] {
        let mut ng = base();
        let at = ng.epb(0, 0, &frame(20, 0), 20);
        ng.buf[at + 4..at + 8].copy_from_slice(&len.to_le_bytes());
        check(
            &ng.buf,
            2,
            at,
            &|k| matches!(k, CaptureErrorKind::BadBlockLength { len: l, .. } if *l == len),
        );
    }
    // Header length and trailer disagree.
    let mut ng = base();
    let at = ng.epb(0, 0, &frame(20, 0), 20);
    let end = ng.buf.len();
    ng.buf[end - 4..].copy_from_slice(&99u32.to_le_bytes());
    check(&ng.buf, 2, at, &|k| matches!(k, CaptureErrorKind::LengthMismatch { trailer: 99, .. }));
    // The same for a block that is skipped rather than parsed.
    let mut ng = base();
    let at = ng.block(0x0bad, &[0; 8]);
    let end = ng.buf.len();
    ng.buf[end - 4..].copy_from_slice(&24u32.to_le_bytes());
    check(&ng.buf, 2, at, &|k| {
        matches!(k, CaptureErrorKind::LengthMismatch { header: 20, trailer: 24 })
    });
    // Captured length beyond the block.
    let mut ng = base();
    let at = ng.epb(0, 0, &frame(20, 0), 20);
    ng.buf[at + 20..at + 24].copy_from_slice(&200u32.to_le_bytes());
    check(&ng.buf, 2, at, &|k| {
        matches!(k, CaptureErrorKind::BadCapturedLength { captured: 200, .. })
    });
    // Absurd captured length.
    ng.buf[at + 20..at + 24].copy_from_slice(&(MAX_PACKET_LEN + 1).to_le_bytes());
    check(&ng.buf, 2, at, &|k| matches!(k, CaptureErrorKind::TooLarge { .. }));
    // Absurd block length: refused before anything is allocated or read.
    let mut ng = base();
    let at = ng.epb(0, 0, &frame(20, 0), 20);
    ng.buf[at + 4..at + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    check(&ng.buf, 2, at, &|k| matches!(k, CaptureErrorKind::TooLarge { len: 0xffff_fff0, .. }));
    // A skipped block claiming more than the file holds.
    let mut ng = base();
    let at = ng.block(0x0bad, &[0; 8]);
    ng.buf[at + 4..at + 8].copy_from_slice(&0xffff_fff0u32.to_le_bytes());
    check(&ng.buf, 2, at, &|k| {
        matches!(k, CaptureErrorKind::Truncated { needed: 0xffff_fff0, available: 20 })
    });
    // Packets on interfaces that were never described.
    let mut ng = base();
    let at = ng.epb(3, 0, &frame(20, 0), 20);
    check(&ng.buf, 2, at, &|k| {
        matches!(k, CaptureErrorKind::UnknownInterface { interface: 3, known: 1 })
    });
    let mut ng = Ng::new();
    ng.section(false);
    let at = ng.spb(20, &frame(20, 0));
    check(&ng.buf, 1, at, &|k| {
        matches!(k, CaptureErrorKind::UnknownInterface { interface: 0, known: 0 })
    });
    // A Simple Packet Block holding less than its original length (snap length 0).
    let mut ng = base();
    let at = ng.spb(100, &frame(20, 0));
    check(&ng.buf, 2, at, &|k| {
        matches!(k, CaptureErrorKind::BadCapturedLength { captured: 100, room: 20 })
    });
    // Options overrunning their block, or of the wrong size.
    let mut ng = Ng::new();
    ng.section(false);
    let at = ng.idb(1, 0, &[(2, b"eth0")]);
    ng.buf[at + 18..at + 20].copy_from_slice(&200u16.to_le_bytes());
    check(&ng.buf, 1, at, &|k| matches!(k, CaptureErrorKind::BadOption { code: 2, len: 200 }));
    let mut ng = Ng::new();
    ng.section(false);
    let at = ng.idb(1, 0, &[(9, &[6, 6])]);
    check(&ng.buf, 1, at, &|k| matches!(k, CaptureErrorKind::BadOption { code: 9, len: 2 }));
    // Bad byte-order magic and unsupported version in a later section.
    let mut ng = base();
    let at = ng.section(false);
    ng.buf[at + 8] ^= 0xff;
    check(&ng.buf, 2, at, &|k| matches!(k, CaptureErrorKind::BadMagic { .. }));
    let mut ng = base();
    let at = ng.section(true);
    ng.buf[at + 13] = 2;
    check(&ng.buf, 2, at, &|k| {
        matches!(k, CaptureErrorKind::UnsupportedVersion { major: 2, minor: 0 })
    });
}

#[test]
fn the_reader_stops_after_the_first_error() {
    let a = frame(10, 0);
    let mut file = classic(false, false, 1, &[(1, 0, &a, 10), (2, 0, &a, 10)]);
    file.truncate(file.len() - 3);
    let results: Vec<_> = CaptureReader::new(&file[..]).expect("valid").collect();
    assert_eq!(results.len(), 2);
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(CaptureError { record: Some(1), .. })));
}

/// Every prefix of a valid capture reads as the packets it holds in full when cut on a
/// record boundary (`(cut, packets before it)`) and as `Truncated` otherwise; never
/// anything else, never a panic.
fn check_every_prefix(file: &[u8], boundaries: &[(usize, usize)]) {
    let packets = read_capture(file).expect("valid").packets;
    for cut in 0..file.len() {
        let result = read_capture(&file[..cut]);
        match boundaries.iter().find(|&&(b, _)| b == cut) {
            Some(&(_, count)) => {
                let cap = result.unwrap_or_else(|e| panic!("cut {cut} is a boundary: {e}"));
                assert_eq!(cap.packets, packets[..count], "cut {cut}");
            }
            None => {
                let e = result.err().unwrap_or_else(|| panic!("cut {cut} must fail"));
                assert!(matches!(e.kind, CaptureErrorKind::Truncated { .. }), "cut {cut}: {e}");
            }
        }
    }
}

#[test]
fn every_truncation_of_a_classic_pcap_is_detected() {
    let (a, b) = (frame(33, 0), frame(7, 1));
    let file = classic(true, true, 1, &[(1, 2, &a, 33), (3, 4, &b, 7)]);
    check_every_prefix(&file, &[(24, 0), (24 + 16 + 33, 1)]);
}

#[test]
fn every_truncation_of_a_pcapng_is_detected() {
    let mut ng = Ng::new();
    ng.section(false);
    let idb = ng.idb(1, 0, &[(9, &[9])]);
    let epb = ng.epb(0, 5, &frame(21, 0), 21);
    let skipped = ng.block(0x0bad, &[1; 8]);
    let spb = ng.spb(30, &frame(30, 1));
    assert_eq!(read_capture(&ng.buf).expect("valid").packets.len(), 2);
    check_every_prefix(&ng.buf, &[(idb, 0), (epb, 0), (skipped, 1), (spb, 1)]);
}

proptest! {
    // Integration tests have no lib.rs beside them for proptest to persist failures in;
    // a failure prints its minimal input instead.
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random damage to valid captures (byte changes, cuts, insertions, deletions) never
    /// panics, and whatever is accepted respects the packet size limit.
    #[test]
    fn damaged_captures_never_panic(
        ng in any::<bool>(),
        edits in prop::collection::vec((any::<u32>(), any::<u8>(), 0u8..4), 0..8),
        cut in any::<u32>(),
    ) {
        let mut bytes = if ng {
            rich_pcapng(false, true).0
        } else {
            let (a, b) = (frame(60, 0), frame(200, 7));
            classic(false, false, 1, &[(1, 0, &a, 60), (2, 0, &b, 200), (3, 0, &a, 60)])
        };
        for (pos, val, op) in edits {
            if bytes.is_empty() {
                break;
            }
            let at = pos as usize % bytes.len();
            match op {
                0 => bytes[at] = val,
                1 => bytes[at] ^= 1 << (val % 8),
                2 => bytes.insert(at, val),
                _ => { bytes.remove(at); }
            }
        }
        if cut % 3 == 0 {
            let keep = cut as usize % (bytes.len() + 1);
            bytes.truncate(keep);
        }
        if let Ok(cap) = read_capture(&bytes) {
            for p in &cap.packets {
                prop_assert!(p.data.len() <= MAX_PACKET_LEN as usize);
            }
        }
        let streamed = CaptureReader::new(&bytes[..]).map(|r| r.count());
        prop_assert!(streamed.is_ok() || read_capture(&bytes).is_err());
    }

    /// Random bytes behind a valid magic never panic either.
    #[test]
    fn random_bodies_never_panic(ng in any::<bool>(), body in prop::collection::vec(any::<u8>(), 0..600)) {
        let mut bytes = if ng { vec![0x0a, 0x0d, 0x0d, 0x0a] } else { vec![0xd4, 0xc3, 0xb2, 0xa1] };
        bytes.extend(body);
        let _ = read_capture(&bytes);
    }
}
