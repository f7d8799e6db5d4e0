//! An independent frame inspector for the generator's tests: it parses what the
//! generator wrote, checks every length and checksum with its own arithmetic, and lists
//! the defects it finds. Well-formed frames must have none; each malformed shape must
//! show the defect it names.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Defect {
    /// A header is cut by the end of the frame.
    Short(&'static str),
    /// An IPv4 total length beyond the frame.
    LengthBeyondFrame,
    /// An IPv4 total length short of the frame (not explained by Ethernet padding).
    TotalLenShort,
    IhlTooSmall,
    IhlBeyond,
    PayloadLenMismatch,
    VersionMismatch,
    ChecksumWrong(&'static str),
    UnknownEthertype,
    BadOptions(&'static str),
    BadField(&'static str),
}

#[derive(Debug, Clone, Default)]
pub struct Report {
    pub tags: usize,
    pub ethertype: u16,
    pub ipv4: Option<V4>,
    pub ipv6: Option<V6>,
    pub defects: Vec<Defect>,
}

#[derive(Debug, Clone, Copy)]
pub struct V4 {
    pub ihl: usize,
    pub proto: u8,
    pub fragment: bool,
}

#[derive(Debug, Clone, Default)]
pub struct V6 {
    /// Extension headers in order (next-header values).
    pub exts: Vec<u8>,
    pub upper: u8,
    pub fragment: bool,
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// Ones'-complement sum of the concatenation of `parts`, folded to 16 bits; a region
/// holding its correct checksum sums to 0xffff. Byte-at-a-time, unlike the crate's.
fn ones_sum(parts: &[&[u8]]) -> u16 {
    let mut total: u64 = 0;
    let mut index = 0usize;
    for part in parts {
        for &b in *part {
            total += if index.is_multiple_of(2) { u64::from(b) << 8 } else { u64::from(b) };
            index += 1;
        }
    }
    while total > 0xffff {
        total = (total >> 16) + (total & 0xffff);
    }
    total as u16
}

/// Ethernet padding: the frame is exactly 60 bytes and everything after `end` is zero.
fn padded(f: &[u8], end: usize) -> bool {
    f.len() == 60 && f[end..].iter().all(|&b| b == 0)
}

pub fn inspect(f: &[u8]) -> Report {
    let mut r = Report::default();
    if f.len() < 14 {
        r.defects.push(Defect::Short("ethernet"));
        return r;
    }
    let mut at = 12;
    let mut et = be16(f, at);
    while et == 0x8100 || et == 0x88a8 {
        if f.len() < at + 6 {
            r.defects.push(Defect::Short("vlan"));
            return r;
        }
        r.tags += 1;
        at += 4;
        et = be16(f, at);
    }
    r.ethertype = et;
    let l3 = at + 2;
    match et {
        0x0800 => ipv4(f, l3, &mut r),
        0x86dd => ipv6(f, l3, &mut r),
        0x0806 => arp(f, l3, &mut r),
        _ => r.defects.push(Defect::UnknownEthertype),
    }
    r
}

fn arp(f: &[u8], l3: usize, r: &mut Report) {
    if f.len() < l3 + 28 {
        r.defects.push(Defect::Short("arp"));
        return;
    }
    let a = &f[l3..];
    if be16(a, 0) != 1 || be16(a, 2) != 0x0800 || a[4] != 6 || a[5] != 4 {
        r.defects.push(Defect::BadField("arp hardware/protocol"));
    }
    if !matches!(be16(a, 6), 1 | 2) {
        r.defects.push(Defect::BadField("arp op"));
    }
    if f[l3 + 28..].iter().any(|&b| b != 0) {
        r.defects.push(Defect::BadField("arp trailer not zero padding"));
    }
}

fn ipv4(f: &[u8], l3: usize, r: &mut Report) {
    let rem = f.len() - l3;
    if rem == 0 {
        r.defects.push(Defect::Short("ipv4"));
        return;
    }
    if f[l3] >> 4 != 4 {
        r.defects.push(Defect::VersionMismatch);
        return;
    }
    if rem < 20 {
        r.defects.push(Defect::Short("ipv4"));
        return;
    }
    let ihl = usize::from(f[l3] & 0x0f) * 4;
    if ihl < 20 {
        r.defects.push(Defect::IhlTooSmall);
        if ones_sum(&[&f[l3..l3 + 20]]) != 0xffff {
            r.defects.push(Defect::ChecksumWrong("ipv4 header"));
        }
        return;
    }
    if ihl > rem {
        // The checksum covers bytes that are not there: nothing to verify.
        r.defects.push(Defect::IhlBeyond);
        return;
    }
    if ones_sum(&[&f[l3..l3 + ihl]]) != 0xffff {
        r.defects.push(Defect::ChecksumWrong("ipv4 header"));
    }
    if !options_ok(&f[l3 + 20..l3 + ihl], false) {
        r.defects.push(Defect::BadOptions("ipv4"));
    }
    let total = usize::from(be16(f, l3 + 2));
    let frag = be16(f, l3 + 6);
    let (more, offset) = (frag & 0x2000 != 0, usize::from(frag & 0x1fff) * 8);
    let proto = f[l3 + 9];
    r.ipv4 = Some(V4 { ihl, proto, fragment: more || offset > 0 });
    if total > rem {
        r.defects.push(Defect::LengthBeyondFrame);
        return;
    }
    if total < rem && !padded(f, l3 + total) {
        r.defects.push(Defect::TotalLenShort);
        return;
    }
    if total < ihl {
        r.defects.push(Defect::TotalLenShort);
        return;
    }
    let seg = &f[l3 + ihl..l3 + total];
    if more || offset > 0 {
        if more && !seg.len().is_multiple_of(8) {
            r.defects.push(Defect::BadField("non-last fragment not a multiple of 8"));
        }
        if offset == 0 {
            l4_header_fits(seg, proto, r);
        }
        return;
    }
    let src_dst = &f[l3 + 12..l3 + 20];
    let len = (seg.len() as u16).to_be_bytes();
    let pseudo = [src_dst, &[0, proto], &len[..]].concat();
    l4(seg, proto, &pseudo, false, r);
}

fn ipv6(f: &[u8], l3: usize, r: &mut Report) {
    let rem = f.len() - l3;
    if rem == 0 {
        r.defects.push(Defect::Short("ipv6"));
        return;
    }
    if f[l3] >> 4 != 6 {
        r.defects.push(Defect::VersionMismatch);
        return;
    }
    if rem < 40 {
        r.defects.push(Defect::Short("ipv6"));
        return;
    }
    let plen = usize::from(be16(f, l3 + 4));
    if plen != rem - 40 && !(plen < rem - 40 && padded(f, l3 + 40 + plen)) {
        r.defects.push(Defect::PayloadLenMismatch);
        return;
    }
    let end = l3 + 40 + plen;
    let dst = &f[l3 + 24..l3 + 40];
    let mut v6 = V6::default();
    let mut nh = f[l3 + 6];
    let mut at = l3 + 40;
    let mut frag = None;
    loop {
        match nh {
            0 | 60 | 43 => {
                if nh == 0 && !v6.exts.is_empty() {
                    r.defects.push(Defect::BadField("hop-by-hop not first"));
                }
                if at + 2 > end {
                    r.defects.push(Defect::Short("ipv6 extension"));
                    return;
                }
                let len = 8 * (usize::from(f[at + 1]) + 1);
                if at + len > end {
                    r.defects.push(Defect::Short("ipv6 extension"));
                    return;
                }
                let h = &f[at..at + len];
                if nh == 43 {
                    // Segment routing at its last segment: segment 0 is the destination.
                    let segments = usize::from(h[1]) / 2;
                    if h[2] != 4 || h[3] != 0 || usize::from(h[4]) + 1 != segments {
                        r.defects.push(Defect::BadField("segment routing header"));
                    } else if &h[8..24] != dst {
                        r.defects.push(Defect::BadField("segment 0 is not the destination"));
                    }
                } else if !options_ok(&h[2..], true) {
                    r.defects.push(Defect::BadOptions("ipv6 options header"));
                }
                v6.exts.push(nh);
                nh = h[0];
                at += len;
            }
            44 => {
                if at + 8 > end {
                    r.defects.push(Defect::Short("ipv6 fragment"));
                    return;
                }
                let field = be16(f, at + 2);
                frag = Some((usize::from(field & 0xfff8), field & 1 != 0));
                v6.exts.push(nh);
                v6.fragment = true;
                nh = f[at];
                at += 8;
                break;
            }
            _ => break,
        }
    }
    v6.upper = nh;
    r.ipv6 = Some(v6);
    let seg = &f[at..end];
    if let Some((offset, more)) = frag {
        if more && !seg.len().is_multiple_of(8) {
            r.defects.push(Defect::BadField("non-last fragment not a multiple of 8"));
        }
        if offset == 0 {
            l4_header_fits(seg, nh, r);
        }
        return;
    }
    let len = (seg.len() as u32).to_be_bytes();
    let pseudo = [&f[l3 + 8..l3 + 40], &len[..], &[0, 0, 0, nh]].concat();
    l4(seg, nh, &pseudo, true, r);
}

/// A first fragment must hold its L4 header whole.
fn l4_header_fits(seg: &[u8], proto: u8, r: &mut Report) {
    let need = match proto {
        17 | 1 | 58 => 8,
        6 if seg.len() > 12 => usize::from(seg[12] >> 4) * 4,
        6 => 20,
        _ => 0,
    };
    if seg.len() < need {
        r.defects.push(Defect::Short("l4 in first fragment"));
    }
}

fn l4(seg: &[u8], proto: u8, pseudo: &[u8], v6: bool, r: &mut Report) {
    match proto {
        17 => {
            if seg.len() < 8 {
                r.defects.push(Defect::Short("udp"));
                return;
            }
            if usize::from(be16(seg, 4)) != seg.len() {
                r.defects.push(Defect::BadField("udp length"));
            }
            let csum = be16(seg, 6);
            if csum == 0 && !v6 {
                return;
            }
            if csum == 0 || ones_sum(&[pseudo, seg]) != 0xffff {
                r.defects.push(Defect::ChecksumWrong("udp"));
            }
        }
        6 => {
            if seg.len() < 20 {
                r.defects.push(Defect::Short("tcp"));
                return;
            }
            let doff = usize::from(seg[12] >> 4) * 4;
            if doff < 20 || doff > seg.len() {
                r.defects.push(Defect::BadField("tcp data offset"));
                return;
            }
            if !options_ok(&seg[20..doff], false) {
                r.defects.push(Defect::BadOptions("tcp"));
            }
            if ones_sum(&[pseudo, seg]) != 0xffff {
                r.defects.push(Defect::ChecksumWrong("tcp"));
            }
        }
        1 | 58 => {
            if seg.len() < 8 {
                r.defects.push(Defect::Short("icmp"));
                return;
            }
            let echo: &[u8] = if v6 { &[128, 129] } else { &[0, 8] };
            if !echo.contains(&seg[0]) || seg[1] != 0 {
                r.defects.push(Defect::BadField("icmp echo type/code"));
            }
            let sum = if v6 { ones_sum(&[pseudo, seg]) } else { ones_sum(&[seg]) };
            if sum != 0xffff {
                r.defects.push(Defect::ChecksumWrong("icmp"));
            }
        }
        _ => r.defects.push(Defect::BadField("unexpected upper-layer protocol")),
    }
}

/// Walks a TLV option area: IPv4/TCP style (`tlv6 == false`: 0 ends, 1 is one byte,
/// others carry a total length >= 2) or IPv6 style (0 is one byte, others carry a data
/// length). True if every option lies inside the area.
fn options_ok(area: &[u8], tlv6: bool) -> bool {
    let mut i = 0;
    while i < area.len() {
        match (area[i], tlv6) {
            (0, false) => return area[i..].iter().all(|&b| b == 0),
            (1, false) | (0, true) => i += 1,
            _ => {
                if i + 1 >= area.len() {
                    return false;
                }
                let len = usize::from(area[i + 1]);
                let total = if tlv6 { 2 + len } else { len };
                if total < 2 || i + total > area.len() {
                    return false;
                }
                i += total;
            }
        }
    }
    true
}
