//! Policy routing rules (`ip rule`, `RTM_NEWRULE`/`RTM_DELRULE`) mirrored into the FIB.
//!
//! The FIB holds each family's rules as one ordered list ([`FibOp::SetRules`]), so the
//! mirror keeps the kernel's list here, in the kernel's order (a new rule goes after
//! the rules of its priority and lower), and answers every change with the family's
//! whole list. A rule names its `iif`/`oif` by device name: the name is resolved to an
//! index when the list is sent, again whenever a link comes or goes (the kernel
//! attaches and detaches rules the same way), and a name no device has matches nothing.
//!
//! What a `bpf_fib_lookup` can never satisfy is kept as such ([`Rule::unmatchable`]): a
//! tunnel id, `l3mdev` (spine models no VRF). Not modelled: `suppress_ifgroup`, realms,
//! and a full-DSCP selector (`FRA_DSCP`, newer than `tos`).

use netlink_packet_route::rule::{RuleAction as NlAction, RuleAttribute, RuleFlags, RuleMessage};
use netlink_packet_route::AddressFamily;
use spine_fib::rule::NO_DEVICE;
use spine_fib::{FibOp, IpPrefix, Prefix4, Prefix6, Rule, RuleAction};

/// One kernel rule: the FIB's rule with its devices still named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRule {
    pub rule: Rule,
    pub iif: Option<String>,
    pub oif: Option<String>,
}

/// Reads a rule message: the family (true for IPv6) and the rule; `None` for another
/// family.
pub fn parse_rule(m: &RuleMessage) -> Option<(bool, KernelRule)> {
    let h = &m.header;
    let v6 = match h.family {
        AddressFamily::Inet => false,
        AddressFamily::Inet6 => true,
        _ => return None,
    };
    let mut rule = Rule::lookup(0, u32::from(h.table));
    rule.invert = h.flags.contains(RuleFlags::Invert);
    rule.tos = h.tos;
    let (mut iif, mut oif, mut table, mut goto) = (None, None, u32::from(h.table), 0);
    let (mut mark, mut mask) = (None, None);
    let pfx = |a: &std::net::IpAddr, len: u8| -> Option<IpPrefix> {
        let len = u32::from(len);
        Some(match a {
            std::net::IpAddr::V4(a) => IpPrefix::V4(Prefix4::truncating(u32::from(*a), len).ok()?),
            std::net::IpAddr::V6(a) => IpPrefix::V6(Prefix6::truncating(u128::from(*a), len).ok()?),
        })
    };
    for a in &m.attributes {
        match a {
            RuleAttribute::Source(s) if h.src_len > 0 => rule.src = pfx(s, h.src_len),
            RuleAttribute::Destination(d) if h.dst_len > 0 => rule.dst = pfx(d, h.dst_len),
            RuleAttribute::Iifname(n) => iif = Some(n.clone()),
            RuleAttribute::Oifname(n) => oif = Some(n.clone()),
            RuleAttribute::Priority(p) => rule.priority = *p,
            RuleAttribute::Goto(t) => goto = *t,
            RuleAttribute::FwMark(v) => mark = Some(*v),
            RuleAttribute::FwMask(v) => mask = Some(*v),
            RuleAttribute::Table(t) => table = *t,
            RuleAttribute::SuppressPrefixLen(v) => rule.suppress_prefixlen = *v as i32,
            RuleAttribute::TunId(id) if *id != 0 => rule.unmatchable = true,
            RuleAttribute::L3MDev(true) => rule.unmatchable = true,
            RuleAttribute::UidRange(r) => rule.uid_range = Some((r.start, r.end)),
            RuleAttribute::IpProtocol(p) => rule.ip_proto = u8::from(*p),
            RuleAttribute::SourcePortRange(r) => rule.sport = Some((r.start, r.end)),
            RuleAttribute::DestinationPortRange(r) => rule.dport = Some((r.start, r.end)),
            _ => {}
        }
    }
    // The kernel reports FRA_FWMARK when a mark or mask is set and FRA_FWMASK unless
    // the mask is all ones with mark 0 (`fib_nl_fill_rule`).
    rule.mark = mark.unwrap_or(0);
    rule.mark_mask = mask.unwrap_or(if mark.is_some() { u32::MAX } else { 0 });
    rule.action = match h.action {
        NlAction::ToTable => RuleAction::Lookup(table),
        NlAction::Goto => RuleAction::Goto(goto),
        NlAction::Nop => RuleAction::Nop,
        NlAction::Unreachable => RuleAction::Unreachable,
        NlAction::Prohibit => RuleAction::Prohibit,
        // FR_ACT_BLACKHOLE, and what the kernel's action answers -EINVAL to.
        _ => RuleAction::Blackhole,
    };
    Some((v6, KernelRule { rule, iif, oif }))
}

/// The kernel's rules of both families, in its order.
#[derive(Debug, Clone, Default)]
pub struct RuleMirror {
    lists: [Vec<KernelRule>; 2],
}

impl RuleMirror {
    pub fn clear(&mut self) {
        self.lists = Default::default();
    }

    /// `RTM_NEWRULE`: the rule goes after every rule of its priority or a lower one.
    pub fn add(&mut self, v6: bool, r: KernelRule) {
        let list = &mut self.lists[usize::from(v6)];
        let at = list.partition_point(|x| x.rule.priority <= r.rule.priority);
        list.insert(at, r);
    }

    /// `RTM_DELRULE`: removes the first rule equal to `r`; false if none is.
    pub fn remove(&mut self, v6: bool, r: &KernelRule) -> bool {
        let list = &mut self.lists[usize::from(v6)];
        match list.iter().position(|x| x == r) {
            Some(i) => {
                list.remove(i);
                true
            }
            None => false,
        }
    }

    /// Whether a rule names a device (its list changes when links do).
    pub fn names_devices(&self) -> bool {
        self.lists.iter().flatten().any(|r| r.iif.is_some() || r.oif.is_some())
    }

    /// The family's rules as the FIB holds them, device names resolved by `index`
    /// (`None`: no such device).
    pub fn op(&self, v6: bool, index: impl Fn(&str) -> Option<u32>) -> FibOp {
        let dev = |n: &Option<String>| match n {
            None => 0,
            Some(n) => index(n).unwrap_or(NO_DEVICE),
        };
        let rules = self.lists[usize::from(v6)]
            .iter()
            .map(|k| Rule { iif: dev(&k.iif), oif: dev(&k.oif), ..k.rule.clone() })
            .collect();
        FibOp::SetRules { v6, rules }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_route::rule::{RuleHeader, RulePortRange};

    fn msg(action: NlAction, table: u8, attrs: Vec<RuleAttribute>) -> RuleMessage {
        let mut m = RuleMessage::default();
        m.header =
            RuleHeader { family: AddressFamily::Inet, action, table, ..RuleHeader::default() };
        m.attributes = attrs;
        m
    }

    #[test]
    fn messages_read_as_rules() {
        let mut m = msg(
            NlAction::ToTable,
            100,
            vec![
                RuleAttribute::Priority(10),
                RuleAttribute::Source("10.1.2.3".parse().unwrap()),
                RuleAttribute::Iifname("veth0".into()),
                RuleAttribute::FwMark(5),
                RuleAttribute::Table(1000),
                RuleAttribute::DestinationPortRange(RulePortRange { start: 80, end: 90 }),
                RuleAttribute::SuppressPrefixLen(u32::MAX),
            ],
        );
        m.header.src_len = 16;
        m.header.tos = 0x10;
        let (v6, k) = parse_rule(&m).unwrap();
        assert!(!v6);
        assert_eq!(k.iif.as_deref(), Some("veth0"));
        let r = k.rule;
        assert_eq!((r.priority, r.action), (10, RuleAction::Lookup(1000)));
        assert_eq!(r.src, Some("10.1.0.0/16".parse().unwrap()));
        assert_eq!((r.mark, r.mark_mask), (5, u32::MAX), "a mark without a mask: all bits");
        assert_eq!((r.tos, r.dport, r.suppress_prefixlen), (0x10, Some((80, 90)), -1));
        let m = msg(NlAction::Goto, 0, vec![RuleAttribute::Goto(50), RuleAttribute::FwMask(0)]);
        let r = parse_rule(&m).unwrap().1.rule;
        assert_eq!((r.action, r.mark, r.mark_mask), (RuleAction::Goto(50), 0, 0));
        let r = parse_rule(&msg(NlAction::Prohibit, 0, vec![])).unwrap().1.rule;
        assert_eq!(r.action, RuleAction::Prohibit);
    }

    #[test]
    fn the_list_keeps_the_kernels_order_and_resolves_devices() {
        let k = |prio: u32, table: u32, iif: Option<&str>| KernelRule {
            rule: Rule::lookup(prio, table),
            iif: iif.map(str::to_string),
            oif: None,
        };
        let mut m = RuleMirror::default();
        m.add(false, k(32766, 254, None));
        m.add(false, k(100, 1, None));
        m.add(false, k(100, 2, Some("a")));
        m.add(false, k(0, 255, Some("gone")));
        assert!(m.names_devices());
        let FibOp::SetRules { v6: false, rules } = m.op(false, |n| (n == "a").then_some(7)) else {
            panic!("SetRules")
        };
        let got: Vec<_> = rules.iter().map(|r| (r.priority, r.action, r.iif)).collect();
        assert_eq!(
            got,
            [
                (0, RuleAction::Lookup(255), NO_DEVICE),
                (100, RuleAction::Lookup(1), 0),
                (100, RuleAction::Lookup(2), 7),
                (32766, RuleAction::Lookup(254), 0),
            ]
        );
        assert!(m.remove(false, &k(100, 1, None)));
        assert!(!m.remove(false, &k(100, 1, None)));
        assert!(!m.remove(true, &k(100, 2, Some("a"))), "the other family");
    }
}
