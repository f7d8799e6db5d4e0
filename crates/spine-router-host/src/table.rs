//! The host router's table: IPv4 prefixes to an egress port with the next hop's MAC
//! and the egress port's own, longest prefix first (a linear walk: a small table
//! for the host paths' study, not a FIB), and the rewrite of a forwarded frame,
//! byte for byte what the bundled router (`bpf/router.c`) writes.

use std::net::Ipv4Addr;

use serde::Deserialize;

use crate::RouterError;

/// A route as written in the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// `a.b.c.d/len`.
    pub prefix: String,
    /// The egress port, one of the router's `ports`.
    pub port: String,
    /// The next hop's MAC (`02:00:00:00:01:0b`).
    pub next_hop_mac: String,
    /// The egress port's MAC (the source of forwarded frames).
    pub src_mac: String,
}

/// A route ready for lookups: `port` is an index into the router's ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    net: u32,
    mask: u32,
    pub port: usize,
    pub dmac: [u8; 6],
    pub smac: [u8; 6],
}

/// The routes, longest prefix first.
#[derive(Debug, Clone, Default)]
pub struct Table {
    routes: Vec<Route>,
}

fn mac(s: &str, route: &str) -> Result<[u8; 6], RouterError> {
    let bad = || RouterError::Route { prefix: route.to_string(), why: format!("bad MAC '{s}'") };
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        *b = u8::from_str_radix(parts.next().ok_or_else(bad)?, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(out)
}

impl Table {
    /// Builds the table from `routes`, naming ports by their index in `ports`.
    pub fn new(routes: &[RouteConfig], ports: &[String]) -> Result<Table, RouterError> {
        let mut out = Vec::with_capacity(routes.len());
        for r in routes {
            let err = |why: String| RouterError::Route { prefix: r.prefix.clone(), why };
            let (addr, len) = r.prefix.split_once('/').ok_or_else(|| err("no '/len'".into()))?;
            let addr: Ipv4Addr = addr.parse().map_err(|e| err(format!("address: {e}")))?;
            let len: u32 = len.parse().map_err(|e| err(format!("length: {e}")))?;
            if len > 32 {
                return Err(err(format!("length {len} is over 32")));
            }
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let port = ports
                .iter()
                .position(|p| *p == r.port)
                .ok_or_else(|| err(format!("port '{}' is not one of the router's", r.port)))?;
            out.push(Route {
                net: u32::from(addr) & mask,
                mask,
                port,
                dmac: mac(&r.next_hop_mac, &r.prefix)?,
                smac: mac(&r.src_mac, &r.prefix)?,
            });
        }
        out.sort_by_key(|r| std::cmp::Reverse(r.mask.count_ones()));
        Ok(Table { routes: out })
    }

    /// The longest prefix holding `dst`.
    #[inline]
    pub fn lookup(&self, dst: u32) -> Option<&Route> {
        self.routes.iter().find(|r| dst & r.mask == r.net)
    }

    /// The route of an untagged IPv4 frame the host paths forward (`f` holds at least
    /// its Ethernet and IPv4 headers): no IP options, not a fragment, a TTL above 1,
    /// and a route. Anything else is not the host's to forward (`None`).
    #[inline]
    pub fn decide(&self, f: &[u8]) -> Option<&Route> {
        if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[14] != 0x45 {
            return None;
        }
        let frag = u16::from_be_bytes([f[20], f[21]]);
        if frag & 0x3fff != 0 || f[22] <= 1 {
            return None;
        }
        self.lookup(u32::from_be_bytes([f[30], f[31], f[32], f[33]]))
    }
}

/// Rewrites a forwarded frame's first 34 bytes: the MACs, the TTL one lower and the
/// checksum updated as the kernel's `ip_decrease_ttl` (and `bpf/router.c`) does, on a
/// little-endian machine, so that every path writes the same bytes.
#[inline]
pub fn rewrite(f: &mut [u8], r: &Route) {
    f[0..6].copy_from_slice(&r.dmac);
    f[6..12].copy_from_slice(&r.smac);
    let check = u32::from(u16::from_le_bytes([f[24], f[25]])) + 0x0001;
    let check = check + u32::from(check >= 0xffff);
    f[24..26].copy_from_slice(&(check as u16).to_le_bytes());
    f[22] -= 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csum(b: &[u8]) -> u16 {
        let mut s: u32 = b.chunks(2).map(|c| u32::from(c[0]) << 8 | u32::from(c[1])).sum();
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    fn routes() -> Table {
        let r = |prefix: &str, port: &str, last: u8| RouteConfig {
            prefix: prefix.into(),
            port: port.into(),
            next_hop_mac: format!("02:00:00:00:01:{last:02x}"),
            src_mac: format!("02:00:00:00:00:{last:02x}"),
        };
        let ports = ["b".to_string(), "c".to_string()];
        Table::new(&[r("10.0.0.0/8", "b", 0xb), r("10.2.0.0/16", "c", 0xc)], &ports).unwrap()
    }

    #[test]
    fn the_longest_prefix_wins_and_bad_routes_are_named() {
        let t = routes();
        assert_eq!(t.lookup(u32::from(Ipv4Addr::new(10, 2, 3, 4))).unwrap().port, 1);
        assert_eq!(t.lookup(u32::from(Ipv4Addr::new(10, 3, 3, 4))).unwrap().port, 0);
        assert!(t.lookup(u32::from(Ipv4Addr::new(11, 0, 0, 1))).is_none());
        let bad = RouteConfig {
            prefix: "10.0.0.0/33".into(),
            port: "b".into(),
            next_hop_mac: "02:00:00:00:00:01".into(),
            src_mac: "02:00:00:00:00:01".into(),
        };
        let e = Table::new(std::slice::from_ref(&bad), &["b".into()]).unwrap_err().to_string();
        assert!(e.contains("10.0.0.0/33") && e.contains("33"), "{e}");
        let e = Table::new(&[RouteConfig { prefix: "10.0.0.0/8".into(), ..bad.clone() }], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("port 'b'"), "{e}");
        let e = Table::new(
            &[RouteConfig { prefix: "1.0.0.0/8".into(), src_mac: "zz".into(), ..bad }],
            &["b".into()],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("MAC 'zz'"), "{e}");
    }

    #[test]
    fn the_rewrite_decrements_the_ttl_and_keeps_the_checksum_right() {
        let t = routes();
        for ttl in [2u8, 64, 255] {
            for id in [0u16, 0x1234, 0xfeff, 0xffff] {
                let mut f = vec![0u8; 14];
                f[12..14].copy_from_slice(&[8, 0]);
                let mut h =
                    vec![0x45, 0, 0, 28, 0, 0, 0, 0, ttl, 17, 0, 0, 10, 0, 0, 5, 10, 2, 0, 1];
                h[4..6].copy_from_slice(&id.to_be_bytes());
                let c = csum(&h);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                f.extend_from_slice(&h);
                f.extend_from_slice(&[0; 8]);
                let r = *t.decide(&f).expect("routed");
                rewrite(&mut f, &r);
                assert_eq!(f[22], ttl - 1);
                assert_eq!(csum(&f[14..34]), 0, "the header sums to zero (ttl {ttl}, id {id:#x})");
                assert_eq!(&f[0..12], &[2, 0, 0, 0, 1, 0xc, 2, 0, 0, 0, 0, 0xc]);
            }
        }
        let mut f = vec![0u8; 42];
        f[12..15].copy_from_slice(&[8, 0, 0x45]);
        f[22] = 1;
        assert!(t.decide(&f).is_none(), "TTL 1 is the kernel's (time exceeded)");
        f[22] = 64;
        f[20] = 0x20;
        assert!(t.decide(&f).is_none(), "a fragment");
        f[20] = 0;
        f[14] = 0x46;
        assert!(t.decide(&f).is_none(), "IP options");
        assert!(t.decide(&f[..30]).is_none(), "cut short");
    }
}
