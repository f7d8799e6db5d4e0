//! Policy routing rules (`ip rule`): an ordered list per family, walked as the kernel's
//! `fib_rules_lookup` walks it for a lookup that `bpf_fib_lookup` makes.
//!
//! Each rule has a priority, selectors (source and destination prefixes, input and
//! output interface, firewall mark under a mask, TOS/DSCP, layer-4 protocol, port
//! ranges, a uid range) and an action: look up a table, jump (`goto`) to the first rule
//! of a later priority, do nothing (`nop`), or drop (blackhole, unreachable, prohibit).
//! A table lookup that finds nothing (or a `throw` route, or a result the rule
//! suppresses) falls through to the next rule. The walk itself is [`RuleSet::walk`];
//! what a table lookup answers is the caller's (the two families map results to
//! `bpf_fib_lookup` codes differently: `spine_runtime::fib_lookup`).
//!
//! While a family has only its default rules ([`RuleSet::is_default`]), the lookup
//! takes the FIB's fast path instead (IPv4: local and main merged into one LPM).

use std::net::IpAddr;

use crate::prefix::IpPrefix;
use crate::route::table_id;

/// `iif`/`oif` of a rule naming a device that does not exist (the kernel's -1): never
/// equal to a lookup's interface.
pub const NO_DEVICE: u32 = u32::MAX;

/// What a rule does when it matches (`FR_ACT_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleAction {
    /// `lookup TABLE` (`FR_ACT_TO_TBL`); table 0 is main.
    Lookup(u32),
    /// `goto PRIORITY`: continue at the first rule of that priority (none: ignored).
    Goto(u32),
    /// `nop`: nothing; the walk continues.
    Nop,
    /// `blackhole`: the lookup fails as a blackhole route does.
    Blackhole,
    /// `unreachable`: the network is unreachable (`-ENETUNREACH`).
    Unreachable,
    /// `prohibit`: administratively prohibited (`-EACCES`).
    Prohibit,
}

/// One rule. A selector left at its default matches every lookup.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Rule {
    pub priority: u32,
    /// `not`: the selectors' verdict is inverted (`FIB_RULE_INVERT`).
    pub invert: bool,
    /// `from PREFIX`.
    pub src: Option<IpPrefix>,
    /// `to PREFIX`.
    pub dst: Option<IpPrefix>,
    /// `iif`: an ifindex, 0 for any, [`NO_DEVICE`] for a device that does not exist.
    pub iif: u32,
    /// `oif`, as `iif`.
    pub oif: u32,
    /// `fwmark MARK/MASK`: matches when `(mark ^ flow mark) & mask` is 0.
    pub mark: u32,
    pub mark_mask: u32,
    /// `tos`/`dsfield`: the DS field the rule selects (DSCP bits only), 0 for any.
    pub tos: u8,
    /// `ipproto`: 0 for any.
    pub ip_proto: u8,
    /// `sport`, `dport`: inclusive ranges in host order.
    pub sport: Option<(u16, u16)>,
    pub dport: Option<(u16, u16)>,
    /// `uidrange`: lookups from `bpf_fib_lookup` carry uid 0.
    pub uid_range: Option<(u32, u32)>,
    /// `suppress_prefixlength`: a table's answer with a prefix this long or shorter is
    /// refused and the walk continues (-1: none).
    pub suppress_prefixlen: i32,
    /// A selector a `bpf_fib_lookup` never satisfies (a tunnel id, `l3mdev` without
    /// VRF devices): the rule matches only when inverted.
    pub unmatchable: bool,
    pub action: RuleAction,
}

impl Rule {
    /// A rule of priority `priority` that looks up `table` for every lookup.
    pub fn lookup(priority: u32, table: u32) -> Rule {
        Rule {
            priority,
            invert: false,
            src: None,
            dst: None,
            iif: 0,
            oif: 0,
            mark: 0,
            mark_mask: 0,
            tos: 0,
            ip_proto: 0,
            sport: None,
            dport: None,
            uid_range: None,
            suppress_prefixlen: -1,
            unmatchable: false,
            action: RuleAction::Lookup(table),
        }
    }

    /// `fib_rule_match` with the family's `match`: whether this rule applies to `f`.
    #[inline]
    pub fn matches(&self, f: &Flow) -> bool {
        self.selects(f) != self.invert
    }

    fn selects(&self, f: &Flow) -> bool {
        if self.unmatchable {
            return false;
        }
        if self.iif != 0 && self.iif != f.iif {
            return false;
        }
        if self.oif != 0 && self.oif != f.oif {
            return false;
        }
        if (self.mark ^ f.mark) & self.mark_mask != 0 {
            return false;
        }
        if self.uid_range.is_some_and(|(lo, _)| lo > 0) {
            return false;
        }
        if let Some(p) = self.src {
            // IPv6 compares the source only when the lookup has one
            // (`RT6_LOOKUP_F_HAS_SADDR`: not with `BPF_FIB_LOOKUP_OUTPUT`).
            if !f.has_saddr || !contains(p, f.src) {
                return false;
            }
        }
        if self.dst.is_some_and(|p| !contains(p, f.dst)) {
            return false;
        }
        if self.tos != 0 && self.tos != f.dscp {
            return false;
        }
        if self.ip_proto != 0 && self.ip_proto != f.proto {
            return false;
        }
        let in_range = |r: Option<(u16, u16)>, port: u16| {
            // `fib_rule_port_range_set`: a range with a zero end selects nothing.
            r.is_none_or(|(lo, hi)| lo == 0 || hi == 0 || (lo..=hi).contains(&port))
        };
        in_range(self.sport, f.sport) && in_range(self.dport, f.dport)
    }
}

fn contains(p: IpPrefix, a: IpAddr) -> bool {
    match (p, a) {
        (IpPrefix::V4(p), IpAddr::V4(a)) => p.contains(u32::from(a)),
        (IpPrefix::V6(p), IpAddr::V6(a)) => p.contains(u128::from(a)),
        _ => false,
    }
}

/// A rule in the words `spine_fib::parse::rules` reads back (`ip rule`'s, interfaces
/// by index; an IPv6 rule without a prefix needs the caller's `-6` in front).
impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.invert {
            f.write_str("not ")?;
        }
        match &self.src {
            Some(p) => write!(f, "from {p}")?,
            None => f.write_str("from all")?,
        }
        if let Some(p) = &self.dst {
            write!(f, " to {p}")?;
        }
        for (word, dev) in [("iif", self.iif), ("oif", self.oif)] {
            if dev != 0 {
                write!(f, " {word} {dev}")?;
            }
        }
        if self.mark_mask != 0 {
            write!(f, " fwmark {:#x}/{:#x}", self.mark, self.mark_mask)?;
        }
        if self.tos != 0 {
            write!(f, " tos {:#x}", self.tos)?;
        }
        if self.ip_proto != 0 {
            write!(f, " ipproto {}", self.ip_proto)?;
        }
        for (word, range) in [("sport", self.sport), ("dport", self.dport)] {
            if let Some((a, b)) = range {
                write!(f, " {word} {a}-{b}")?;
            }
        }
        if let Some((a, b)) = self.uid_range {
            write!(f, " uidrange {a}-{b}")?;
        }
        write!(f, " pref {}", self.priority)?;
        match self.action {
            RuleAction::Lookup(table_id::LOCAL) => f.write_str(" lookup local")?,
            RuleAction::Lookup(table_id::MAIN) => f.write_str(" lookup main")?,
            RuleAction::Lookup(table_id::DEFAULT) => f.write_str(" lookup default")?,
            RuleAction::Lookup(t) => write!(f, " lookup {t}")?,
            RuleAction::Goto(t) => write!(f, " goto {t}")?,
            RuleAction::Nop => f.write_str(" nop")?,
            RuleAction::Blackhole => f.write_str(" blackhole")?,
            RuleAction::Unreachable => f.write_str(" unreachable")?,
            RuleAction::Prohibit => f.write_str(" prohibit")?,
        }
        if self.suppress_prefixlen >= 0 {
            write!(f, " suppress_prefixlength {}", self.suppress_prefixlen)?;
        }
        Ok(())
    }
}

/// What the rules see of one lookup (`struct flowi4`/`flowi6` as `bpf_fib_lookup` fills
/// it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    /// The input interface: the lookup's ifindex, or 1 (loopback) with
    /// `BPF_FIB_LOOKUP_OUTPUT`.
    pub iif: u32,
    /// The output interface with `BPF_FIB_LOOKUP_OUTPUT`, else 0.
    pub oif: u32,
    /// The lookup's mark with `BPF_FIB_LOOKUP_MARK`, else 0.
    pub mark: u32,
    /// The DS field as rules compare it: IPv4 `tos & 0x1c`, IPv6 the traffic class's
    /// DSCP bits.
    pub dscp: u8,
    pub proto: u8,
    /// Ports in host order.
    pub sport: u16,
    pub dport: u16,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// False for an IPv6 lookup without a source (`BPF_FIB_LOOKUP_OUTPUT`).
    pub has_saddr: bool,
}

/// How the walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleResult<T> {
    /// A rule's table lookup answered.
    Table(T),
    /// A rule's action dropped the lookup.
    Blackhole,
    Unreachable,
    Prohibit,
    /// No rule answered (`-ESRCH`).
    None,
}

/// One family's rules, in the kernel's order: by priority, rules of one priority in
/// the order they were added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    rules: Vec<Rule>,
    /// Per rule: the index a `goto` jumps to.
    targets: Vec<Option<usize>>,
    default: bool,
}

impl RuleSet {
    /// The rules a new network namespace has: local 0, main 32766, and for IPv4
    /// default 32767.
    pub fn default_for(v6: bool) -> RuleSet {
        RuleSet::new(v6, RuleSet::defaults(v6))
    }

    /// The set of `rules`, kept in the order given after a stable sort by priority.
    pub fn new(v6: bool, mut rules: Vec<Rule>) -> RuleSet {
        rules.sort_by_key(|r| r.priority);
        let targets = rules
            .iter()
            .map(|r| match r.action {
                // The kernel refuses a goto to its own or an earlier priority.
                RuleAction::Goto(t) if t > r.priority => rules.iter().position(|x| x.priority == t),
                _ => None,
            })
            .collect();
        let default = rules == RuleSet::defaults(v6);
        RuleSet { rules, targets, default }
    }

    fn defaults(v6: bool) -> Vec<Rule> {
        let mut r = vec![Rule::lookup(0, table_id::LOCAL), Rule::lookup(32766, table_id::MAIN)];
        if !v6 {
            r.push(Rule::lookup(32767, table_id::DEFAULT));
        }
        r
    }

    /// True while the set is exactly the family's default rules and the FIB never had
    /// custom ones: the lookup may then take the FIB's merged fast path. (The kernel
    /// unmerges IPv4's local table from main at the first custom rule and never merges
    /// them again, so the rules are walked from then on, as here.)
    #[inline]
    pub fn is_default(&self) -> bool {
        self.default
    }

    /// Marks the set as walked even if it holds only the default rules (the FIB has
    /// had custom ones: see [`RuleSet::is_default`]).
    pub(crate) fn unmerge(&mut self) {
        self.default = false;
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// `fib_rules_lookup`: walks the rules in order; each matching rule's action runs.
    /// `table(id, rule)` looks up table `id` (0 already mapped to main) for the rule and
    /// answers `None` to continue with the next rule (nothing found, a `throw`, a
    /// suppressed result).
    #[inline]
    pub fn walk<T>(
        &self,
        f: &Flow,
        mut table: impl FnMut(u32, &Rule) -> Option<T>,
    ) -> RuleResult<T> {
        let mut i = 0;
        while let Some(r) = self.rules.get(i) {
            i += 1;
            if !r.matches(f) {
                continue;
            }
            match r.action {
                RuleAction::Lookup(id) => {
                    let id = if id == table_id::UNSPEC { table_id::MAIN } else { id };
                    if let Some(t) = table(id, r) {
                        return RuleResult::Table(t);
                    }
                }
                // `goto jumped`: the walk goes on at the target, whose selectors are
                // checked as any rule's.
                RuleAction::Goto(_) => {
                    if let Some(to) = self.targets[i - 1] {
                        i = to;
                    }
                }
                RuleAction::Nop => {}
                RuleAction::Blackhole => return RuleResult::Blackhole,
                RuleAction::Unreachable => return RuleResult::Unreachable,
                RuleAction::Prohibit => return RuleResult::Prohibit,
            }
        }
        RuleResult::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(src: &str, dst: &str) -> Flow {
        Flow {
            iif: 2,
            oif: 0,
            mark: 0,
            dscp: 0,
            proto: 6,
            sport: 1000,
            dport: 80,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            has_saddr: true,
        }
    }

    /// The table ids the walk looks up, in order, when every table answers nothing.
    fn visited(set: &RuleSet, f: &Flow) -> (Vec<u32>, RuleResult<()>) {
        let mut seen = Vec::new();
        let res = set.walk(f, |t, _| {
            seen.push(t);
            None::<()>
        });
        (seen, res)
    }

    #[test]
    fn the_default_rules_are_recognised_and_walk_local_main_default() {
        let v4 = RuleSet::default_for(false);
        assert!(v4.is_default());
        assert!(RuleSet::default_for(true).is_default());
        let f = flow("10.0.0.1", "10.0.0.2");
        assert_eq!(visited(&v4, &f), (vec![255, 254, 253], RuleResult::None));
        let mut rules = v4.rules().to_vec();
        rules.push(Rule::lookup(100, 100));
        let custom = RuleSet::new(false, rules);
        assert!(!custom.is_default());
        assert_eq!(visited(&custom, &f).0, vec![255, 100, 254, 253], "sorted by priority");
    }

    #[test]
    fn selectors_match_as_the_kernel_compares_them() {
        let base = flow("10.1.2.3", "192.0.2.9");
        let sel = |edit: fn(&mut Rule)| {
            let mut r = Rule::lookup(5, 7);
            edit(&mut r);
            r.matches(&base)
        };
        assert!(sel(|_| {}));
        assert!(sel(|r| r.src = Some("10.1.0.0/16".parse().unwrap())));
        assert!(!sel(|r| r.src = Some("10.2.0.0/16".parse().unwrap())));
        assert!(sel(|r| r.dst = Some("192.0.2.0/24".parse().unwrap())));
        assert!(!sel(|r| r.dst = Some("192.0.3.0/24".parse().unwrap())));
        assert!(sel(|r| r.iif = 2));
        assert!(!sel(|r| r.iif = 3));
        assert!(!sel(|r| r.iif = NO_DEVICE));
        assert!(!sel(|r| r.oif = 2), "oif is 0 without OUTPUT");
        assert!(sel(|r| r.mark_mask = 0), "fwmark 0 without a mask matches all");
        assert!(!sel(|r| {
            r.mark = 1;
            r.mark_mask = u32::MAX
        }));
        assert!(sel(|r| {
            r.mark = 0x100;
            r.mark_mask = 0xff
        }));
        assert!(!sel(|r| r.tos = 0x10));
        assert!(sel(|r| r.ip_proto = 6));
        assert!(!sel(|r| r.ip_proto = 17));
        assert!(sel(|r| r.dport = Some((80, 80))));
        assert!(!sel(|r| r.sport = Some((1, 999))));
        assert!(sel(|r| r.uid_range = Some((0, 10))));
        assert!(!sel(|r| r.uid_range = Some((1000, 2000))));
        assert!(!sel(|r| r.unmatchable = true));
        assert!(sel(|r| {
            r.unmatchable = true;
            r.invert = true
        }));
        assert!(sel(|r| {
            r.iif = 3;
            r.invert = true
        }));
        // IPv6 without a source (OUTPUT) never matches a `from` rule.
        let mut f6 = flow("2001:db8::1", "2001:db8::2");
        let mut r = Rule::lookup(5, 7);
        r.src = Some("2001:db8::/32".parse().unwrap());
        assert!(r.matches(&f6));
        f6.has_saddr = false;
        assert!(!r.matches(&f6));
    }

    #[test]
    fn actions_goto_nop_and_drops() {
        let f = flow("10.0.0.1", "10.0.0.2");
        let mut to10 = Rule::lookup(10, 0);
        to10.action = RuleAction::Goto(30);
        let mut nop = Rule::lookup(20, 0);
        nop.action = RuleAction::Nop;
        let skipped = Rule::lookup(25, 25);
        let target = Rule::lookup(30, 0); // table 0 is main
        let mut bh = Rule::lookup(40, 0);
        bh.action = RuleAction::Blackhole;
        let set = RuleSet::new(false, vec![bh, target, skipped, nop, to10]);
        assert_eq!(visited(&set, &f), (vec![254], RuleResult::Blackhole));
        // A goto without a rule of its target priority is ignored.
        let mut dangling = Rule::lookup(10, 0);
        dangling.action = RuleAction::Goto(31);
        let set = RuleSet::new(false, vec![dangling, Rule::lookup(25, 25)]);
        assert_eq!(visited(&set, &f), (vec![25], RuleResult::None));
        // A goto target that does not match is skipped; the walk goes on after it.
        let mut jump = Rule::lookup(10, 0);
        jump.action = RuleAction::Goto(30);
        let mut picky = Rule::lookup(30, 30);
        picky.iif = 9;
        let set =
            RuleSet::new(false, vec![jump, Rule::lookup(20, 20), picky, Rule::lookup(40, 40)]);
        assert_eq!(visited(&set, &f), (vec![40], RuleResult::None));
        // The first table that answers ends the walk.
        let set = RuleSet::new(false, vec![Rule::lookup(1, 1), Rule::lookup(2, 2)]);
        assert_eq!(set.walk(&f, |t, _| (t == 2).then_some(t)), RuleResult::Table(2));
        for (action, want) in [
            (RuleAction::Unreachable, RuleResult::Unreachable),
            (RuleAction::Prohibit, RuleResult::Prohibit),
        ] {
            let mut r = Rule::lookup(1, 1);
            r.action = action;
            assert_eq!(visited(&RuleSet::new(true, vec![r]), &f), (vec![], want));
        }
    }
}
