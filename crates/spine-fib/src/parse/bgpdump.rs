//! `bgpdump -m` output: one `|`-separated record a line. RIB entries
//! (`TABLE_DUMP2|time|B|peer|peer_as|prefix|as_path|origin|next_hop|…`, also
//! `TABLE_DUMP|…`) and updates (`BGP4MP|time|A|peer|peer_as|prefix|as_path|origin|
//! next_hop|…`, `BGP4MP|time|W|peer|peer_as|prefix`). State changes (`STATE`) are
//! skipped.

use std::net::IpAddr;

use super::{err, lines, ParseError, ParseErrorKind};
use crate::prefix::IpPrefix;

/// One RIB entry or update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub time: u64,
    pub withdraw: bool,
    pub peer: IpAddr,
    pub prefix: IpPrefix,
    /// The last AS of the path (the origin); `None` for a withdrawal or an empty
    /// path (a route of the peer's own AS) or an AS set at the origin.
    pub origin_as: Option<u32>,
    pub next_hop: Option<IpAddr>,
}

pub fn parse(text: &str) -> impl Iterator<Item = Result<Record, ParseError>> + '_ {
    lines(text).filter_map(|(n, l)| {
        let f: Vec<&str> = l.split('|').collect();
        if f.len() > 2 && f[2] == "STATE" {
            return None;
        }
        Some(record(n, l, &f))
    })
}

fn record(n: usize, l: &str, f: &[&str]) -> Result<Record, ParseError> {
    let fmt =
        || err(n, ParseErrorKind::Format { expected: "a bgpdump -m record", found: l.into() });
    if f.len() < 6 || !f[0].starts_with("TABLE_DUMP") && f[0] != "BGP4MP" && f[0] != "BGP4MP_ET" {
        return Err(fmt());
    }
    let time = f[1]
        .split('.')
        .next()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| err(n, ParseErrorKind::Number { what: "time", text: f[1].into() }))?;
    let withdraw = match f[2] {
        "B" | "A" => false,
        "W" => true,
        _ => return Err(fmt()),
    };
    let addr = |s: &str| s.parse::<IpAddr>().map_err(|_| err(n, ParseErrorKind::Address(s.into())));
    let peer = addr(f[3])?;
    let prefix = f[5].parse::<IpPrefix>().map_err(|e| err(n, e))?;
    if withdraw {
        return Ok(Record { time, withdraw, peer, prefix, origin_as: None, next_hop: None });
    }
    if f.len() < 9 {
        return Err(fmt());
    }
    let origin_as = f[6].split_whitespace().last().and_then(|a| a.parse().ok());
    let next_hop = if f[8].is_empty() { None } else { Some(addr(f[8])?) };
    Ok(Record { time, withdraw, peer, prefix, origin_as, next_hop })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rib_updates_withdrawals_state_and_errors() {
        let t = "TABLE_DUMP2|1367193600|B|202.12.28.1|4777|1.0.0.0/24|4777 2516 15169|IGP|202.12.28.1|0|0||NAG||\n\
                 BGP4MP|1367193601|A|2001:db8::1|65000|2001:db8:1::/48|65000 64512|IGP|2001:db8::1|0|0||NAG||\n\
                 BGP4MP|1367193602|W|2001:db8::1|65000|2001:db8:1::/48\n\
                 BGP4MP|1367193603|STATE|10.0.0.1|65000|3|6\n\
                 BGP4MP|x|A|10.0.0.1|65000|10.0.0.0/8|1|IGP|10.0.0.1\n";
        let v: Vec<_> = parse(t).collect();
        assert_eq!(v.len(), 4);
        let r = v[0].clone().unwrap();
        assert_eq!(r.prefix.to_string(), "1.0.0.0/24");
        assert_eq!(r.origin_as, Some(15169));
        assert_eq!(r.next_hop, Some("202.12.28.1".parse().unwrap()));
        assert!(!v[1].clone().unwrap().withdraw && v[2].clone().unwrap().withdraw);
        assert_eq!(v[3].clone().unwrap_err().line, 5);
    }
}
