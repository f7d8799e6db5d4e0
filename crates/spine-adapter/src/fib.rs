//! The FIB a configuration describes (`[fib]`), built once the ports have their
//! interface indexes: what every worker's `bpf_fib_lookup` reads.

use spine_fib::{FibOp, FibWriter, Neigh, NudState};
use spine_runtime::fib_lookup::{FibEnv, Iface};

use crate::adapter::AdapterError;
use crate::config::FibConfig;

fn wiring(at: String, reason: String) -> AdapterError {
    AdapterError::Wiring { at, reason }
}

/// The routes, neighbours and interfaces of `cfg`; `ifindex` names a port's index.
pub(crate) fn env(
    cfg: &FibConfig,
    ifindex: impl Fn(&str) -> Option<u32>,
) -> Result<(FibWriter, FibEnv), AdapterError> {
    let (w, r, ifaces) = parts(cfg, ifindex)?;
    Ok((w, FibEnv::new(r, ifaces).with_multipath_seed(cfg.multipath_seed)))
}

/// As [`env()`], and the host's tables mirrored into the FIB live (`mirror = true`): its
/// routes, nexthops and neighbours over rtnetlink, every port in `kernel` (ports that
/// are kernel interfaces) as an interface with the kernel's MAC, MTU, addresses and
/// forwarding switches, followed as they change, unless `[[fib.interface]]` describes
/// it, and the kernel's multipath seed unless one is given. `twins` pairs a TAP twin's
/// ifindex with its port's: the port is the interface, with the twin's addresses, MTU
/// and forwarding switches, and the routes and neighbours on the twin are mirrored as
/// the port's.
pub(crate) fn mirrored(
    cfg: &FibConfig,
    ifindex: impl Fn(&str) -> Option<u32>,
    kernel: &[u32],
    twins: &[(u32, u32)],
) -> Result<(spine_rtnl::Mirror, FibEnv), AdapterError> {
    let rtnl = |e: spine_rtnl::RtnlError| wiring("fib.mirror".into(), e.to_string());
    let (w, r, ifaces) = parts(cfg, ifindex)?;
    // The configured interfaces shadow the mirrored ones (`FibEnv::iface`).
    let followed: Vec<u32> =
        kernel.iter().copied().filter(|p| !ifaces.iter().any(|i| i.ifindex == *p)).collect();
    let seed = match cfg.multipath_seed {
        0 => spine_rtnl::multipath_seed().unwrap_or(0),
        s => s,
    };
    let sock = spine_rtnl::RtnlSocket::open()
        .map_err(rtnl)?
        .with_aliases(twins.to_vec())
        .with_ifaces(followed);
    let mirror = spine_rtnl::Mirror::start(sock, w).map_err(rtnl)?;
    Ok((mirror, FibEnv::new(r, ifaces).with_multipath_seed(seed)))
}

/// The writer with `cfg`'s routes and neighbours published, its reader, and the
/// configured interfaces.
fn parts(
    cfg: &FibConfig,
    ifindex: impl Fn(&str) -> Option<u32>,
) -> Result<(FibWriter, spine_fib::FibReader, Vec<Iface>), AdapterError> {
    let port = |at: String, name: &str| {
        ifindex(name).ok_or_else(|| wiring(at, format!("no port named '{name}'")))
    };
    let (mut w, r) = FibWriter::new();
    for (i, route) in cfg.routes.iter().enumerate() {
        w.add(route.clone()).map_err(|e| wiring(format!("fib.routes[{i}]"), e.to_string()))?;
    }
    // The configured rules join each family's default rules.
    for v6 in [false, true] {
        let given = cfg.rules.iter().filter(|r| r.0 == v6).map(|r| r.1.clone());
        let given: Vec<_> = given.collect();
        if given.is_empty() {
            continue;
        }
        let mut rules = spine_fib::RuleSet::default_for(v6).rules().to_vec();
        rules.extend(given);
        w.apply(FibOp::SetRules { v6, rules })
            .map_err(|e| wiring("fib.rules".into(), e.to_string()))?;
    }
    for (i, n) in cfg.neighbours.iter().enumerate() {
        let ifindex = port(format!("fib.neighbour[{i}].port"), &n.port)?;
        let neigh = Neigh { mac: n.mac, state: NudState::PERMANENT };
        w.apply(FibOp::SetNeigh { ifindex, ip: n.ip, neigh })
            .map_err(|e| wiring(format!("fib.neighbour[{i}]"), e.to_string()))?;
    }
    w.publish();
    let mut ifaces = Vec::with_capacity(cfg.interfaces.len());
    for (i, it) in cfg.interfaces.iter().enumerate() {
        ifaces.push(Iface {
            ifindex: port(format!("fib.interface[{i}].port"), &it.port)?,
            mtu: it.mtu,
            mac: it.mac,
            forward_v4: it.forwarding,
            forward_v6: it.forwarding,
            addrs: it.addresses.clone(),
        });
    }
    Ok((w, r, ifaces))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_rules_join_the_default_rules_of_their_family() {
        let rules = spine_fib::parse::rules::parse("from 10.9.0.0/16 lookup 100 pref 100")
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let cfg = FibConfig { rules, ..FibConfig::default() };
        let (_w, env) = env(&cfg, |_| Some(1)).unwrap();
        let st = env.fib.load();
        let prios: Vec<u32> = st.rules(false).rules().iter().map(|r| r.priority).collect();
        assert_eq!(prios, [0, 100, 32766, 32767]);
        assert!(st.rules(true).is_default(), "IPv6 keeps its defaults");
    }
}
