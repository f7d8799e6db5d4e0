//! Giving an interface addresses, as `ip addr add` does: how a router port's TAP twin
//! gets the router's addresses, so the kernel's stack answers for them.

use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE,
    NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressFlags, AddressMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::RtnlError;

/// The `RTM_NEWADDR` request for `ip/prefix_len` on `ifindex`. IPv6 addresses skip
/// duplicate address detection (`nodad`): spine owns the twin, and a tentative address
/// would not answer for a second or more.
pub fn address_message(ifindex: u32, ip: IpAddr, prefix_len: u8) -> AddressMessage {
    let mut m = AddressMessage::default();
    m.header.index = ifindex;
    m.header.prefix_len = prefix_len;
    match ip {
        IpAddr::V4(_) => {
            m.header.family = AddressFamily::Inet;
            m.attributes.push(AddressAttribute::Local(ip));
            m.attributes.push(AddressAttribute::Address(ip));
        }
        IpAddr::V6(_) => {
            m.header.family = AddressFamily::Inet6;
            m.attributes.push(AddressAttribute::Address(ip));
            m.attributes.push(AddressAttribute::Flags(AddressFlags::Nodad));
        }
    }
    m
}

/// Adds `ip/prefix_len` to interface `ifindex` of the calling thread's namespace (an
/// address it already has is replaced), and waits for the kernel's answer.
pub fn add_address(ifindex: u32, ip: IpAddr, prefix_len: u8) -> Result<(), RtnlError> {
    let refused = |errno| RtnlError::AddressRefused { ifindex, ip, prefix_len, errno };
    let mut sock =
        Socket::new(NETLINK_ROUTE).map_err(|source| RtnlError::Io { op: "socket", source })?;
    sock.bind_auto().map_err(|source| RtnlError::Io { op: "bind", source })?;
    sock.connect(&SocketAddr::new(0, 0))
        .map_err(|source| RtnlError::Io { op: "connect", source })?;
    let mut hdr = NetlinkHeader::default();
    hdr.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE;
    hdr.sequence_number = 1;
    let msg = RouteNetlinkMessage::NewAddress(address_message(ifindex, ip, prefix_len));
    let mut req = NetlinkMessage::new(hdr, NetlinkPayload::from(msg));
    req.finalize();
    let mut out = vec![0; req.header.length as usize];
    req.serialize(&mut out);
    sock.send(&out, 0).map_err(|source| RtnlError::Io { op: "send", source })?;
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = sock
            .recv(&mut &mut buf[..], 0)
            .map_err(|source| RtnlError::Io { op: "recv", source })?;
        let mut off = 0;
        while off < n {
            let m: NetlinkMessage<RouteNetlinkMessage> = NetlinkMessage::deserialize(&buf[off..n])
                .map_err(|e| RtnlError::Decode(e.to_string()))?;
            if let NetlinkPayload::Error(e) = m.payload {
                return match e.code {
                    None => Ok(()),
                    Some(c) => Err(refused(-c.get())),
                };
            }
            let len = m.header.length as usize;
            if len == 0 {
                break;
            }
            off += len.next_multiple_of(4);
        }
    }
}

/// Turns IPv6 on for interface `name` (`net.ipv6.conf.NAME.disable_ipv6 = 0`), which an
/// interface needs before it can hold an IPv6 address; a namespace may default to off.
pub fn enable_ipv6(name: &str) -> Result<(), RtnlError> {
    let path = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    std::fs::write(&path, b"0").map_err(|source| RtnlError::Io { op: "enable IPv6", source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_family_address_and_flags() {
        let m = address_message(7, "192.0.2.1".parse().unwrap(), 24);
        assert_eq!((m.header.index, m.header.prefix_len), (7, 24));
        assert_eq!(m.header.family, AddressFamily::Inet);
        assert!(m.attributes.contains(&AddressAttribute::Local("192.0.2.1".parse().unwrap())));
        let m = address_message(7, "2001:db8::1".parse().unwrap(), 64);
        assert_eq!(m.header.family, AddressFamily::Inet6);
        assert!(m.attributes.contains(&AddressAttribute::Flags(AddressFlags::Nodad)));
        assert!(!m.attributes.iter().any(|a| matches!(a, AddressAttribute::Local(_))));
    }
}
