//! Route files: one route a line, in the words of `ip route`:
//!
//! ```text
//! # comment (also after a route)
//! 10.0.0.0/8                                   a prefix alone: no next hop given
//! 10.0.0.0/8 via 192.0.2.1 dev 3               gateway and output interface index
//! 192.0.2.0/24 dev 3 metric 10 mtu 1400        directly connected, metric, path MTU
//!                                              (honoured as `mtu lock 1400`; `lock` may
//!                                              be written)
//! default via 192.0.2.1 dev 3 table 100        default = 0.0.0.0/0 (write ::/0 for IPv6)
//! blackhole 10.1.0.0/16 table local            a type first: unicast (the default),
//!                                              local, broadcast, blackhole,
//!                                              unreachable, prohibit, throw
//! 2001:db8::/32 nexthop via fe80::1 dev 2 weight 3 nexthop via fe80::2 dev 4
//! 198.51.100.0/24 via 192.0.2.1 dev 3 src 192.0.2.7   a preferred source address
//! ```
//!
//! `dev` takes an interface index (the FIB knows no names); `table` a number or
//! `main`, `local`, `default`; an address without `/len` is a host route. A unicast
//! line without next hop parses (lists of bare prefixes are route files too) and the
//! caller supplies the next hop; the FIB refuses such a route on its own.

use std::net::IpAddr;

use super::{err, lines, ParseError, ParseErrorKind as K};
use crate::prefix::IpPrefix;
use crate::route::{table_id, NextHop, Route, RouteType};

/// Every route of `text`.
pub fn parse(text: &str) -> impl Iterator<Item = Result<Route, ParseError>> + '_ {
    lines(text).filter_map(|(n, l)| {
        let l = l.split('#').next().unwrap_or("").trim();
        (!l.is_empty()).then(|| line(l).map_err(|k| err(n, k)))
    })
}

fn number(what: &'static str, s: Option<&str>, keyword: &'static str) -> Result<u32, K> {
    let s = s.ok_or(K::MissingValue { keyword })?;
    s.parse().map_err(|_| K::Number { what, text: s.into() })
}

/// A next hop being parsed: gateway, interface, weight.
type Hop = (Option<IpAddr>, Option<u32>, u16);

/// The next hop `via`/`dev`/`weight` apply to: the last `nexthop`, or the route's own.
fn slot<'a>(in_group: bool, group: &'a mut [Hop], single: &'a mut Option<Hop>) -> &'a mut Hop {
    match group.last_mut() {
        Some(h) if in_group => h,
        _ => single.get_or_insert((None, None, 1)),
    }
}

/// One route line (without comment).
pub fn line(l: &str) -> Result<Route, K> {
    let mut w = l.split_whitespace().peekable();
    let mut kind = RouteType::Unicast;
    let first = w.next().unwrap_or("");
    let p = match RouteType::from_name(first) {
        Some(t) => {
            kind = t;
            w.next().ok_or(K::MissingValue { keyword: "type" })?
        }
        None => first,
    };
    let prefix: IpPrefix = if p == "default" { "0.0.0.0/0".parse()? } else { p.parse()? };
    let mut r = Route {
        table: table_id::MAIN,
        prefix,
        kind,
        metric: 0,
        nexthops: Vec::new(),
        mtu: 0,
        prefsrc: None,
        nhid: 0,
    };
    // The route's own next hop (`via`/`dev`/`weight` before any `nexthop`).
    let mut single: Option<Hop> = None;
    let mut group: Vec<Hop> = Vec::new();
    let mut in_group = false;
    while let Some(word) = w.next() {
        match word {
            "via" => {
                let a = w.next().ok_or(K::MissingValue { keyword: "via" })?;
                let a = a.strip_prefix("inet6 ").unwrap_or(a);
                let gw = a.parse::<IpAddr>().map_err(|_| K::Address(a.into()))?;
                let slot = slot(in_group, &mut group, &mut single);
                slot.0 = Some(gw);
            }
            "src" => {
                let a = w.next().ok_or(K::MissingValue { keyword: "src" })?;
                r.prefsrc = Some(a.parse::<IpAddr>().map_err(|_| K::Address(a.into()))?);
            }
            "dev" => {
                let d = number("interface index", w.next(), "dev")?;
                let slot = slot(in_group, &mut group, &mut single);
                slot.1 = Some(d);
            }
            "weight" => {
                let x = number("weight", w.next(), "weight")?;
                if !(1..=256).contains(&x) {
                    return Err(K::Number { what: "weight (1..=256)", text: x.to_string() });
                }
                let slot = slot(in_group, &mut group, &mut single);
                slot.2 = x as u16;
            }
            "nexthop" => {
                in_group = true;
                group.push((None, None, 1));
            }
            "metric" | "priority" | "preference" => {
                r.metric = number("metric", w.next(), "metric")?
            }
            "mtu" => {
                // `mtu lock N` as `ip route` writes it; a route file's MTU is always
                // one forwarding honours (see `Route::mtu`).
                let mut v = w.next();
                if v == Some("lock") {
                    v = w.next();
                }
                r.mtu = number("mtu", v, "mtu")?
            }
            "table" => {
                let t = w.next().ok_or(K::MissingValue { keyword: "table" })?;
                r.table = match t {
                    "main" => table_id::MAIN,
                    "local" => table_id::LOCAL,
                    "default" => table_id::DEFAULT,
                    _ => number("table", Some(t), "table")?,
                };
            }
            other => return Err(K::Unexpected(other.into())),
        }
    }
    let hops = group.into_iter().chain(single).map(|(gw, dev, weight)| {
        let ifindex = dev.ok_or(K::NoDevice)?;
        Ok(NextHop { gateway: gw, ifindex, weight, encap: false })
    });
    r.nexthops = hops.collect::<Result<_, K>>()?;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_lines() {
        let t = "# routes\n10.0.0.0/8\n10.0.0.0/8 via 192.0.2.1 dev 3\n\
                 192.0.2.0/24 dev 3 metric 10 mtu 1400 # connected\n\
                 default via 192.0.2.1 dev 3 table 100\nblackhole 10.1.0.0/16 table local\n\
                 2001:db8::/32 nexthop via fe80::1 dev 2 weight 3 nexthop via fe80::2 dev 4\n\
                 10.0.0.0/8 via 192.0.2.1\n10.0.0.0/8 dev x\n10.0.0.0/8 color red\n192.0.2.1\n";
        let v: Vec<_> = parse(t).collect();
        assert_eq!(v.len(), 10);
        let r = v[0].clone().unwrap();
        assert!(r.nexthops.is_empty() && r.kind == RouteType::Unicast && r.table == 254);
        let r = v[1].clone().unwrap();
        assert_eq!(r.nexthops, [NextHop::via("192.0.2.1".parse().unwrap(), 3)]);
        let r = v[2].clone().unwrap();
        assert_eq!((r.metric, r.mtu, r.nexthops[0]), (10, 1400, NextHop::dev(3)));
        let r = line("10.0.0.0/8 via 192.0.2.1 dev 3 mtu lock 1280 src 192.0.2.7").unwrap();
        assert_eq!((r.mtu, r.prefsrc), (1280, Some("192.0.2.7".parse().unwrap())));
        let r = v[3].clone().unwrap();
        assert_eq!((r.prefix.to_string().as_str(), r.table), ("0.0.0.0/0", 100));
        let r = v[4].clone().unwrap();
        assert_eq!((r.kind, r.table), (RouteType::Blackhole, 255));
        let r = v[5].clone().unwrap();
        assert_eq!(r.nexthops.len(), 2);
        assert_eq!(r.nexthops[0].weight, 3);
        assert_eq!(r.nexthops[1].ifindex, 4);
        assert_eq!(v[6].clone().unwrap_err(), ParseError { line: 8, kind: K::NoDevice });
        assert_eq!(v[7].clone().unwrap_err().line, 9);
        assert_eq!(v[8].clone().unwrap_err().kind, K::Unexpected("color".into()));
        assert_eq!(v[9].clone().unwrap().prefix.len(), 32);
    }
}
