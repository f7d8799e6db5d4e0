//! The kernel's tables as iproute2 prints them: `ip -j -d route show table all` (one
//! family at a time), `ip -j neigh show nud all`, and the text of `ip route show table
//! all` for what the JSON leaves out (whether an MTU is locked). Turns a host's routing
//! state into routes and neighbour entries; running `ip` is the caller's business.
//!
//! Interfaces are named in iproute2's output; the caller maps names to indexes. Route
//! types the FIB does not hold (nat, xresolve) are skipped. An MTU is kept only when
//! locked (`Route::mtu`).

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::Value;

use crate::neigh::{Neigh, NudState};
use crate::prefix::IpPrefix;
use crate::route::{table_id, NextHop, Route, RouteType};

/// Why iproute2's output could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpRouteError {
    #[error("not iproute2's JSON: {0}")]
    Json(String),
    #[error("entry {index}: {what}")]
    Entry { index: usize, what: String },
    #[error("entry {index}: no interface named `{name}`")]
    Device { index: usize, name: String },
}

fn entries(json: &str) -> Result<Vec<Value>, IpRouteError> {
    // `ip -j` prints nothing at all for an empty table.
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    match serde_json::from_str(json) {
        Ok(Value::Array(v)) => Ok(v),
        Ok(_) => Err(IpRouteError::Json("not an array".into())),
        Err(e) => Err(IpRouteError::Json(e.to_string())),
    }
}

fn table(name: Option<&str>) -> Option<u32> {
    match name {
        None | Some("main") => Some(table_id::MAIN),
        Some("local") => Some(table_id::LOCAL),
        Some("default") => Some(table_id::DEFAULT),
        Some(n) => n.parse().ok(),
    }
}

/// `dst` as iproute2 writes it: `default`, a prefix, or a host address.
fn prefix(dst: &str, v6: bool) -> Option<IpPrefix> {
    match (dst, v6) {
        ("default", false) => "0.0.0.0/0".parse().ok(),
        ("default", true) => "::/0".parse().ok(),
        (d, false) if !d.contains('/') => format!("{d}/32").parse().ok(),
        (d, true) if !d.contains('/') => format!("{d}/128").parse().ok(),
        (d, _) => d.parse().ok(),
    }
}

/// The (table, prefix) of every route with a locked MTU in the text of
/// `ip [-6] route show table all`.
pub fn locked_mtus(text: &str, v6: bool) -> BTreeSet<(u32, IpPrefix)> {
    text.lines()
        .filter(|l| l.contains(" mtu lock "))
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let first = *w.first()?;
            let dst = if RouteType::from_name(first).is_some() { *w.get(1)? } else { first };
            let t = match w.iter().position(|&x| x == "table") {
                Some(i) => table(Some(w.get(i + 1)?))?,
                None => table_id::MAIN,
            };
            Some((t, prefix(dst, v6)?))
        })
        .collect()
}

/// The routes of `ip -j -d [-6] route show table all`; `locked` from [`locked_mtus`].
pub fn routes(
    json: &str,
    v6: bool,
    locked: &BTreeSet<(u32, IpPrefix)>,
    ifindex: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<Route>, IpRouteError> {
    let mut out = Vec::new();
    for (index, r) in entries(json)?.iter().enumerate() {
        let bad = |what: String| IpRouteError::Entry { index, what };
        let Some(kind) = RouteType::from_name(r["type"].as_str().unwrap_or("unicast")) else {
            continue;
        };
        let dst = r["dst"].as_str().ok_or_else(|| bad("no dst".into()))?;
        let pfx = prefix(dst, v6).ok_or_else(|| bad(format!("dst `{dst}`")))?;
        let tbl = table(r["table"].as_str()).ok_or_else(|| bad(format!("table {}", r["table"])))?;
        let dev = |v: &Value| -> Result<u32, IpRouteError> {
            let name = v["dev"].as_str().ok_or_else(|| bad("a next hop without dev".into()))?;
            ifindex(name).ok_or_else(|| IpRouteError::Device { index, name: name.into() })
        };
        let gw = |v: &Value| -> Result<Option<IpAddr>, IpRouteError> {
            match v["gateway"].as_str().or_else(|| v["via"]["host"].as_str()) {
                None => Ok(None),
                Some(g) => g.parse().map(Some).map_err(|_| bad(format!("gateway `{g}`"))),
            }
        };
        let nexthops = if !kind.takes_nexthop() {
            Vec::new()
        } else if let Some(list) = r["nexthops"].as_array() {
            let mut v = Vec::with_capacity(list.len());
            for n in list {
                let weight = n["weight"].as_u64().unwrap_or(1).clamp(1, 256) as u16;
                v.push(NextHop { gateway: gw(n)?, ifindex: dev(n)?, weight });
            }
            v
        } else {
            vec![NextHop { gateway: gw(r)?, ifindex: dev(r)?, weight: 1 }]
        };
        let mtu = r["metrics"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|m| m["mtu"].as_u64())
            .filter(|_| locked.contains(&(tbl, pfx)))
            .unwrap_or(0) as u32;
        let prefsrc = match r["prefsrc"].as_str() {
            None => None,
            Some(a) => Some(a.parse().map_err(|_| bad(format!("prefsrc `{a}`")))?),
        };
        out.push(Route {
            table: tbl,
            prefix: pfx,
            kind,
            metric: r["metric"].as_u64().unwrap_or(0) as u32,
            nexthops,
            mtu,
            prefsrc,
            nhid: 0,
        });
    }
    Ok(out)
}

/// The entries of `ip -j neigh show nud all` that carry a link-layer address.
pub fn neighbours(
    json: &str,
    ifindex: impl Fn(&str) -> Option<u32>,
) -> Result<Vec<(u32, IpAddr, Neigh)>, IpRouteError> {
    let mut out = Vec::new();
    for (index, n) in entries(json)?.iter().enumerate() {
        let bad = |what: String| IpRouteError::Entry { index, what };
        let Some(ll) = n["lladdr"].as_str() else { continue };
        let mac = parse_mac(ll).ok_or_else(|| bad(format!("lladdr `{ll}`")))?;
        let state = n["state"].as_array().into_iter().flatten().fold(0u16, |s, x| {
            s | match x.as_str() {
                Some("PERMANENT") => NudState::PERMANENT.0,
                Some("NOARP") => NudState::NOARP.0,
                Some("REACHABLE") => NudState::REACHABLE.0,
                Some("STALE") => NudState::STALE.0,
                Some("DELAY") => NudState::DELAY.0,
                Some("PROBE") => NudState::PROBE.0,
                Some("FAILED") => NudState::FAILED.0,
                Some("INCOMPLETE") => NudState::INCOMPLETE.0,
                _ => 0,
            }
        });
        let name = n["dev"].as_str().ok_or_else(|| bad("no dev".into()))?;
        let dev = ifindex(name).ok_or_else(|| IpRouteError::Device { index, name: name.into() })?;
        let dst = n["dst"].as_str().ok_or_else(|| bad("no dst".into()))?;
        let ip = dst.parse().map_err(|_| bad(format!("dst `{dst}`")))?;
        out.push((dev, ip, Neigh { mac, state: NudState(state) }));
    }
    Ok(out)
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str) -> Option<u32> {
        match name {
            "dn0" => Some(3),
            "dn1" => Some(4),
            "lo" => Some(1),
            _ => None,
        }
    }

    #[test]
    fn routes_of_every_shape() {
        let json = r#"[{"type":"unicast","dst":"172.18.0.0/16","flags":[],"nexthops":[{"gateway":"10.1.0.2","dev":"dn0","weight":1,"flags":[]},{"gateway":"10.2.0.2","dev":"dn1","weight":3,"flags":[]}]},
            {"type":"blackhole","dst":"172.20.0.0/16","flags":[]},
            {"type":"unicast","dst":"172.23.0.0/16","gateway":"10.1.0.2","dev":"dn0","flags":[],"metrics":[{"mtu":1400}]},
            {"type":"unicast","dst":"172.24.0.0/16","gateway":"10.1.0.2","dev":"dn0","table":"100","flags":[],"metrics":[{"mtu":1300}]},
            {"type":"unicast","dst":"172.26.0.0/16","via":{"family":"inet6","host":"fe80::2"},"dev":"dn0","flags":[]},
            {"type":"local","dst":"10.1.0.1","dev":"dn0","table":"local","prefsrc":"10.1.0.1","flags":[]},
            {"type":"nat","dst":"10.9.0.0/16","flags":[]}]"#;
        let text = "172.23.0.0/16 via 10.1.0.2 dev dn0 mtu lock 1400\n\
                    172.24.0.0/16 via 10.1.0.2 dev dn0 table 100 mtu 1300\n";
        let locked = locked_mtus(text, false);
        let r = routes(json, false, &locked, dev).unwrap();
        assert_eq!(r.len(), 6, "nat is skipped");
        assert_eq!(
            r[0].nexthops.iter().map(|n| (n.ifindex, n.weight)).collect::<Vec<_>>(),
            [(3, 1), (4, 3)]
        );
        assert_eq!((r[1].kind, r[1].nexthops.len()), (RouteType::Blackhole, 0));
        assert_eq!((r[2].mtu, r[3].mtu, r[3].table), (1400, 0, 100));
        assert_eq!(r[4].nexthops[0].gateway, Some("fe80::2".parse().unwrap()));
        assert_eq!(
            (r[5].table, r[5].prefix.len(), r[5].prefsrc),
            (255, 32, Some("10.1.0.1".parse().unwrap()))
        );
    }

    #[test]
    fn bad_output_is_a_typed_error() {
        let none = BTreeSet::new();
        assert!(matches!(routes("{", false, &none, dev), Err(IpRouteError::Json(_))));
        assert!(routes("", false, &none, dev).unwrap().is_empty());
        let unknown = r#"[{"dst":"10.0.0.0/8","gateway":"10.1.0.2","dev":"eth9"}]"#;
        assert_eq!(
            routes(unknown, false, &none, dev),
            Err(IpRouteError::Device { index: 0, name: "eth9".into() })
        );
        let bad = r#"[{"dst":"10.0.0.0/88","dev":"dn0"}]"#;
        assert!(matches!(routes(bad, false, &none, dev), Err(IpRouteError::Entry { .. })));
    }

    #[test]
    fn neighbours_with_their_states() {
        let json = r#"[{"dst":"10.1.0.2","dev":"dn0","lladdr":"02:00:00:00:00:02","state":["PERMANENT"]},
            {"dst":"fe80::2","dev":"dn1","lladdr":"02:00:00:00:00:03","state":["STALE"]},
            {"dst":"10.1.0.9","dev":"dn0","state":["FAILED"]}]"#;
        let n = neighbours(json, dev).unwrap();
        assert_eq!(n.len(), 2, "an entry without lladdr is skipped");
        assert_eq!(n[0].2, Neigh { mac: [2, 0, 0, 0, 0, 2], state: NudState::PERMANENT });
        assert_eq!((n[1].0, n[1].2.state), (4, NudState::STALE));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:02:03"), None);
    }
}
