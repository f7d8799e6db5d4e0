//! The interfaces a lookup answers with (`bpf_fib_lookup`'s input and output devices):
//! MAC, MTU, addresses and forwarding switches. A FIB mirrored from the kernel holds
//! them next to the routes, so a change to a device is published with the routes it
//! changes (see `spine_rtnl`).

use std::net::IpAddr;

/// One interface of the router as the lookup needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub ifindex: u32,
    pub mtu: u32,
    pub mac: [u8; 6],
    /// `net.ipv4.conf.<dev>.forwarding`.
    pub forward_v4: bool,
    /// `net.ipv6.conf.<dev>.forwarding`.
    pub forward_v6: bool,
    /// Addresses with their prefix lengths, primary first (for `BPF_FIB_LOOKUP_SRC`).
    pub addrs: Vec<(IpAddr, u8)>,
}

/// Interfaces by index, sorted.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ifaces(Vec<Iface>);

impl Ifaces {
    pub(crate) fn get(&self, ifindex: u32) -> Option<&Iface> {
        self.0.binary_search_by_key(&ifindex, |i| i.ifindex).ok().map(|i| &self.0[i])
    }

    pub(crate) fn set(&mut self, iface: Iface) {
        match self.0.binary_search_by_key(&iface.ifindex, |i| i.ifindex) {
            Ok(i) => self.0[i] = iface,
            Err(i) => self.0.insert(i, iface),
        }
    }

    pub(crate) fn remove(&mut self, ifindex: u32) {
        self.0.retain(|i| i.ifindex != ifindex);
    }

    pub(crate) fn all(&self) -> &[Iface] {
        &self.0
    }
}
