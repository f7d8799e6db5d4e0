//! The flow hash that picks a worker for each packet under software RSS: a function of
//! the addresses (and, for unfragmented TCP/UDP/SCTP, the ports) that is the same in
//! both directions, so both halves of a conversation meet the same worker and its state.
//! Reads only what the packet has; any byte string is a valid input.

const ETH_HLEN: usize = 14;

fn be16(p: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*p.get(at)?, *p.get(at + 1)?]))
}

fn mix(mut h: u64, v: u64) -> u64 {
    h ^= v.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

/// Folds two endpoints so that (a, b) and (b, a) give the same value.
fn pair(h: u64, a: &[u8], b: &[u8]) -> u64 {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let mut h = h;
    for c in lo.chunks(8).chain(hi.chunks(8)) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = mix(h, u64::from_le_bytes(w));
    }
    h
}

fn ports(p: &[u8], l4: usize, proto: u8, h: u64) -> u64 {
    if !matches!(proto, 6 | 17 | 132) {
        return h;
    }
    match (be16(p, l4), be16(p, l4 + 2)) {
        (Some(a), Some(b)) => mix(h, u64::from(a.min(b)) << 16 | u64::from(a.max(b))),
        _ => h,
    }
}

/// A symmetric hash of the packet's flow; frames that are not IP hash their MAC pair.
pub fn flow_hash(p: &[u8]) -> u32 {
    let mut off = 12;
    let mut ethertype = be16(p, off).unwrap_or(0);
    for _ in 0..2 {
        if matches!(ethertype, 0x8100 | 0x88a8) {
            off += 4;
            ethertype = be16(p, off).unwrap_or(0);
        }
    }
    let l3 = off + 2;
    let h = match ethertype {
        0x0800 if p.len() >= l3 + 20 => {
            let ihl = usize::from(p[l3] & 0x0f) * 4;
            let proto = p[l3 + 9];
            let frag = be16(p, l3 + 6).unwrap_or(0) & 0x3fff != 0;
            let h = pair(mix(0, u64::from(proto)), &p[l3 + 12..l3 + 16], &p[l3 + 16..l3 + 20]);
            if frag || ihl < 20 {
                h
            } else {
                ports(p, l3 + ihl, proto, h)
            }
        }
        0x86dd if p.len() >= l3 + 40 => {
            let proto = p[l3 + 6];
            let h = pair(mix(1, u64::from(proto)), &p[l3 + 8..l3 + 24], &p[l3 + 24..l3 + 40]);
            ports(p, l3 + 40, proto, h)
        }
        _ if p.len() >= ETH_HLEN => pair(2, &p[0..6], &p[6..12]),
        _ => mix(3, p.len() as u64),
    };
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_ports::craft::{tcp4, udp4, udp6, Flow4, Flow6};

    #[test]
    fn both_directions_hash_alike_and_flows_spread() {
        let a = Flow4::default();
        let b = Flow4 {
            src_mac: a.dst_mac,
            dst_mac: a.src_mac,
            src: a.dst,
            dst: a.src,
            src_port: a.dst_port,
            dst_port: a.src_port,
        };
        let (mut fa, mut fb) = (Vec::new(), Vec::new());
        udp4(&mut fa, &a, 10).unwrap();
        udp4(&mut fb, &b, 30).unwrap();
        assert_eq!(flow_hash(&fa), flow_hash(&fb));
        let mut t = Vec::new();
        tcp4(&mut t, &a, 0x02, 0).unwrap();
        assert_ne!(flow_hash(&fa), flow_hash(&t), "protocol is part of the flow");
        let mut buckets = [0u32; 2];
        for port in 0..1000u16 {
            let mut f = Vec::new();
            udp4(&mut f, &Flow4 { src_port: 1000 + port, ..a }, 18).unwrap();
            buckets[(flow_hash(&f) % 2) as usize] += 1;
        }
        assert!(buckets.iter().all(|&n| n > 400), "{buckets:?}");
        let mut v6 = Vec::new();
        udp6(&mut v6, &Flow6::default(), 8).unwrap();
        let _ = flow_hash(&v6);
    }

    #[test]
    fn any_bytes_hash_without_panicking() {
        for len in 0..80 {
            let p: Vec<u8> = (0..len).map(|i| (i * 37) as u8).collect();
            let _ = flow_hash(&p);
            let mut v = p.clone();
            if v.len() > 14 {
                v[12] = 0x08;
                v[13] = 0x00;
                let _ = flow_hash(&v);
                v[12] = 0x86;
                v[13] = 0xdd;
                let _ = flow_hash(&v);
                v[12] = 0x81;
                let _ = flow_hash(&v);
            }
        }
    }
}
