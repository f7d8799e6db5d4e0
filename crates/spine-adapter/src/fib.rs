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
    let port = |at: String, name: &str| {
        ifindex(name).ok_or_else(|| wiring(at, format!("no port named '{name}'")))
    };
    let (mut w, r) = FibWriter::new();
    for (i, route) in cfg.routes.iter().enumerate() {
        w.add(route.clone()).map_err(|e| wiring(format!("fib.routes[{i}]"), e.to_string()))?;
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
    let env = FibEnv::new(r, ifaces).with_multipath_seed(cfg.multipath_seed);
    Ok((w, env))
}
