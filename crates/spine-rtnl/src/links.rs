//! The host's interfaces as `bpf_fib_lookup` needs them: index, name, MAC, MTU,
//! addresses (primary first) and whether each family forwards on it.

use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::RtnlError;

/// One interface of the calling thread's network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    pub ifindex: u32,
    pub name: String,
    pub mac: [u8; 6],
    pub mtu: u32,
    /// Addresses with prefix lengths, in the kernel's order (primary first).
    pub addrs: Vec<(IpAddr, u8)>,
    /// `net.ipv4.conf.<name>.forwarding`, `net.ipv6.conf.<name>.forwarding`.
    pub forward_v4: bool,
    pub forward_v6: bool,
}

fn dump(
    sock: &Socket,
    msg: RouteNetlinkMessage,
    seq: u32,
) -> Result<Vec<RouteNetlinkMessage>, RtnlError> {
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_DUMP | NLM_F_REQUEST;
    hdr.sequence_number = seq;
    let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
    req.finalize();
    let mut out = vec![0; req.header.length as usize];
    req.serialize(&mut out);
    sock.send(&out, 0).map_err(|source| RtnlError::Io { op: "send", source })?;
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = sock
            .recv(&mut &mut buf[..], 0)
            .map_err(|source| RtnlError::Io { op: "recv", source })?;
        let mut off = 0;
        while off < n {
            let m: NetlinkMessage<RouteNetlinkMessage> = NetlinkMessage::deserialize(&buf[off..n])
                .map_err(|e| RtnlError::Decode(e.to_string()))?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::Done(_) => return Ok(got),
                NetlinkPayload::Error(e) => {
                    let errno = e.code.map_or(0, |c| -c.get());
                    return Err(RtnlError::Refused { what: "link", errno });
                }
                NetlinkPayload::InnerMessage(inner) => got.push(inner),
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += len.next_multiple_of(4);
        }
    }
}

/// The address an `RTM_NEWADDR`/`RTM_DELADDR` message names. IPv4 puts the interface's
/// own address in IFA_LOCAL (IFA_ADDRESS is the peer's on point-to-point links); IPv6
/// only has IFA_ADDRESS.
pub(crate) fn message_address(a: &AddressMessage) -> Option<IpAddr> {
    let local = a.attributes.iter().find_map(|x| match x {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    local.or_else(|| {
        a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        })
    })
}

/// A link message's name, MAC and MTU, into `link` (what the message carries).
pub(crate) fn update_link(link: &mut Link, l: &LinkMessage) {
    link.ifindex = l.header.index;
    for a in &l.attributes {
        match a {
            LinkAttribute::IfName(n) => link.name = n.clone(),
            LinkAttribute::Mtu(m) => link.mtu = *m,
            LinkAttribute::Address(a) if a.len() == 6 => link.mac.copy_from_slice(a),
            _ => {}
        }
    }
}

/// netconf messages (`linux/rtnetlink.h`; netlink-packet-route has none).
pub(crate) const RTM_NEWNETCONF: u16 = 80;
pub(crate) const RTM_DELNETCONF: u16 = 81;
/// `NETCONFA_IFINDEX`: the interface a netconf message is about (negative: all, or
/// the defaults for new ones).
const NETCONFA_IFINDEX: u16 = 1;

/// The interface of a netconf message's payload (`struct netconfmsg`, 4 bytes with its
/// padding, then attributes); `None` for all interfaces, the defaults, or a message
/// without one (whoever reads it then looks at every interface).
pub(crate) fn netconf_ifindex(payload: &[u8]) -> Option<u32> {
    let mut at = 4;
    while let Some(h) = payload.get(at..at + 4) {
        let (len, kind) =
            (usize::from(u16::from_ne_bytes([h[0], h[1]])), u16::from_ne_bytes([h[2], h[3]]));
        if len < 4 {
            return None;
        }
        if kind & 0x3fff == NETCONFA_IFINDEX {
            let v = payload.get(at + 4..at + 8)?;
            let i = i32::from_ne_bytes([v[0], v[1], v[2], v[3]]);
            return u32::try_from(i).ok().filter(|&i| i > 0);
        }
        at += len.next_multiple_of(4);
    }
    None
}

/// Reads the forwarding switches of `link` from /proc (no netlink message carries them
/// with the link).
pub(crate) fn read_forwarding(link: &mut Link) {
    link.forward_v4 = sysctl_on(&format!("/proc/sys/net/ipv4/conf/{}/forwarding", link.name));
    link.forward_v6 = sysctl_on(&format!("/proc/sys/net/ipv6/conf/{}/forwarding", link.name));
}

fn sysctl_on(path: &str) -> bool {
    std::fs::read_to_string(path).is_ok_and(|s| s.trim() == "1")
}

/// Every interface of the calling thread's network namespace.
pub fn links() -> Result<Vec<Link>, RtnlError> {
    let mut sock =
        Socket::new(NETLINK_ROUTE).map_err(|source| RtnlError::Io { op: "socket", source })?;
    sock.bind_auto().map_err(|source| RtnlError::Io { op: "bind", source })?;
    sock.connect(&SocketAddr::new(0, 0))
        .map_err(|source| RtnlError::Io { op: "connect", source })?;
    let mut links = Vec::new();
    for m in dump(&sock, RouteNetlinkMessage::GetLink(LinkMessage::default()), 1)? {
        let RouteNetlinkMessage::NewLink(l) = m else { continue };
        let mut link = Link::default();
        update_link(&mut link, &l);
        read_forwarding(&mut link);
        links.push(link);
    }
    for m in dump(&sock, RouteNetlinkMessage::GetAddress(AddressMessage::default()), 2)? {
        let RouteNetlinkMessage::NewAddress(a) = m else { continue };
        if let (Some(ip), Some(link)) =
            (message_address(&a), links.iter_mut().find(|l| l.ifindex == a.header.index))
        {
            link.addrs.push((ip, a.header.prefix_len));
        }
    }
    Ok(links)
}

/// `net.ipv4.fib_multipath_hash_seed` of the calling thread's namespace (the ECMP hash
/// seed IPv6 uses too); `None` where the kernel has no such setting.
pub fn multipath_seed() -> Option<u32> {
    let s = std::fs::read_to_string("/proc/sys/net/ipv4/fib_multipath_hash_seed").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn netconf(attrs: &[(u16, i32)]) -> Vec<u8> {
        let mut m = vec![2, 0, 0, 0];
        for &(kind, v) in attrs {
            m.extend_from_slice(&8u16.to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.extend_from_slice(&v.to_ne_bytes());
        }
        m
    }

    #[test]
    fn netconf_messages_name_their_interface() {
        assert_eq!(netconf_ifindex(&netconf(&[(2, 1), (1, 7)])), Some(7));
        assert_eq!(netconf_ifindex(&netconf(&[(1, -1)])), None, "all interfaces");
        assert_eq!(netconf_ifindex(&netconf(&[(1, -2)])), None, "the defaults");
        assert_eq!(netconf_ifindex(&netconf(&[(2, 1)])), None, "none named");
        assert_eq!(netconf_ifindex(&[2, 0, 0, 0, 3, 0]), None, "a truncated attribute");
        assert_eq!(netconf_ifindex(&[2, 0, 0, 0, 0, 0, 1, 0, 9]), None, "a zero length");
    }
}
