//! The `[fib]` table: the routes, interfaces and neighbours `bpf_fib_lookup` answers
//! from when the adapter runs a router. Routes are `ip route`-like lines
//! (`spine_fib::parse::routes`), inline or in files; interfaces are ports.

use std::net::IpAddr;
use std::path::Path;

use spine_fib::{Route, Rule};

use super::reader::Table;
use super::{ConfigError, Problem};

/// `[fib]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FibConfig {
    /// `net.ipv4.fib_multipath_hash_seed`: with the host's seed, ECMP picks the host's
    /// next hop for every flow.
    pub multipath_seed: u32,
    /// Follow the host's routing and neighbour tables live (over rtnetlink), on top of
    /// the routes and neighbours given here.
    pub mirror: bool,
    /// Inline lines first, then the files' lines, in order.
    pub routes: Vec<Route>,
    /// Policy rules (`ip rule`-like lines, `spine_fib::parse::rules`) with their family
    /// (true: IPv6), added to the family's default rules. Refused with `mirror`, which
    /// follows the host's rules instead.
    pub rules: Vec<(bool, Rule)>,
    pub interfaces: Vec<FibInterface>,
    pub neighbours: Vec<FibNeighbour>,
}

/// `[[fib.interface]]`: a port as the router sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FibInterface {
    pub port: String,
    pub mac: [u8; 6],
    /// Addresses with prefix lengths, primary first.
    pub addresses: Vec<(IpAddr, u8)>,
    pub mtu: u32,
    /// Forwarding enabled on it (both families).
    pub forwarding: bool,
}

/// `[[fib.neighbour]]`: a permanent neighbour entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FibNeighbour {
    pub port: String,
    pub ip: IpAddr,
    pub mac: [u8; 6],
}

fn mac(t: &Table<'_>, key: &'static str, s: &str) -> Result<[u8; 6], ConfigError> {
    spine_fib::parse::parse_mac(s).ok_or_else(|| {
        t.err(key, Problem::Invalid("a MAC address is six hex bytes, ':'-separated"))
    })
}

fn ip(t: &Table<'_>, key: &'static str, s: &str) -> Result<IpAddr, ConfigError> {
    s.parse().map_err(|_| t.err(key, Problem::Invalid("not an IP address")))
}

/// The optional `addresses` list of a table: `"192.0.2.7/24"`, `"2001:db8::7/64"` (no
/// length: a host address).
pub(super) fn addresses(t: &mut Table<'_>) -> Result<Vec<(IpAddr, u8)>, ConfigError> {
    let mut out = Vec::new();
    for a in t.opt_strs("addresses")?.unwrap_or_default() {
        let (addr, len) = a.split_once('/').unwrap_or((a.as_str(), ""));
        let addr = ip(t, "addresses", addr)?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            "" => max,
            l => l.parse::<u8>().ok().filter(|&l| l <= max).ok_or_else(|| {
                t.err("addresses", Problem::Invalid("a prefix length past the address"))
            })?,
        };
        out.push((addr, len));
    }
    Ok(out)
}

pub(super) fn parse_fib(mut t: Table<'_>, base: &Path) -> Result<FibConfig, ConfigError> {
    let multipath_seed =
        t.opt_int("multipath_seed", 0, i64::from(u32::MAX))?.map_or(0, |v| v as u32);
    let mirror = t.opt_bool("mirror")?.unwrap_or(false);
    let mut routes = Vec::new();
    let mut lines = |what: String, text: &str, key: &'static str, t: &Table<'_>| {
        for r in spine_fib::parse::routes::parse(text) {
            match r {
                Ok(r) => routes.push(r),
                Err(e) => {
                    let reason = format!("{what}: {e}");
                    return Err(t.err(key, Problem::Conflict { reason: "bad route", name: reason }));
                }
            }
        }
        Ok(())
    };
    for (i, l) in t.opt_strs("routes")?.unwrap_or_default().iter().enumerate() {
        lines(format!("routes[{i}]"), l, "routes", &t)?;
    }
    for f in t.opt_strs("route_files")?.unwrap_or_default() {
        let path = base.join(&f);
        let text =
            std::fs::read_to_string(&path).map_err(|e| t.err("route_files", Problem::Io(e)))?;
        lines(path.display().to_string(), &text, "route_files", &t)?;
    }
    let mut rules = Vec::new();
    for (i, l) in t.opt_strs("rules")?.unwrap_or_default().iter().enumerate() {
        for r in spine_fib::parse::rules::parse(l) {
            let r = r.map_err(|e| {
                let name = format!("rules[{i}]: {e}");
                t.err("rules", Problem::Conflict { reason: "bad rule", name })
            })?;
            rules.push(r);
        }
    }
    if mirror && !rules.is_empty() {
        let name = "the host's rules are mirrored with `mirror = true`".to_string();
        return Err(t.err("rules", Problem::Conflict { reason: "rules and mirror", name }));
    }
    let mut interfaces = Vec::new();
    for mut it in t.tables("interface")? {
        let port = it.req_str("port")?.to_string();
        let m = it.req_str("mac")?;
        let mac = mac(&it, "mac", m)?;
        let addresses = addresses(&mut it)?;
        let mtu = it.opt_int("mtu", 68, 65535)?.map_or(1500, |v| v as u32);
        let forwarding = it.opt_bool("forwarding")?.unwrap_or(true);
        it.finish()?;
        interfaces.push(FibInterface { port, mac, addresses, mtu, forwarding });
    }
    let mut neighbours = Vec::new();
    for mut n in t.tables("neighbour")? {
        let port = n.req_str("port")?.to_string();
        let a = n.req_str("ip")?;
        let addr = ip(&n, "ip", a)?;
        let m = n.req_str("mac")?;
        let mac = mac(&n, "mac", m)?;
        n.finish()?;
        neighbours.push(FibNeighbour { port, ip: addr, mac });
    }
    t.finish()?;
    Ok(FibConfig { multipath_seed, mirror, routes, rules, interfaces, neighbours })
}
