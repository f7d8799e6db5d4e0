//! `ip rule`-like lines, one policy rule a line:
//!
//! ```text
//! [not] [from PREFIX|all] [to PREFIX|all] [iif IFINDEX] [oif IFINDEX]
//!     [fwmark MARK[/MASK]] [tos|dsfield TOS] [ipproto N|tcp|udp|icmp|icmpv6]
//!     [sport P[-P]] [dport P[-P]] [uidrange U-U] pref|priority|order N
//!     (lookup|table TABLE [suppress_prefixlength N] | goto N | nop |
//!      blackhole | unreachable | prohibit)
//! ```
//!
//! The family is IPv6 when a prefix is, or the line starts with `-6`; `pref` is
//! required (the kernel's default priorities depend on the rules already there);
//! `TABLE` is a number, `main`, `local` or `default`; `iif`/`oif` are interface
//! indexes. A mark without a mask compares all bits (the kernel's compatibility rule
//! for a non-zero mark); numbers take `0x` too.

use super::{err, lines, ParseError, ParseErrorKind};
use crate::prefix::IpPrefix;
use crate::route::table_id;
use crate::rule::{Rule, RuleAction};

/// Every rule of `text` with its family (true: IPv6), or the first error.
pub fn parse(text: &str) -> impl Iterator<Item = Result<(bool, Rule), ParseError>> + '_ {
    lines(text).map(|(n, l)| parse_line(l).map_err(|k| err(n, k)))
}

fn num(what: &'static str, s: &str) -> Result<u32, ParseErrorKind> {
    let bad = || ParseErrorKind::Number { what, text: s.to_string() };
    match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16).map_err(|_| bad()),
        None => s.parse().map_err(|_| bad()),
    }
}

fn small<T: TryFrom<u32>>(what: &'static str, s: &str) -> Result<T, ParseErrorKind> {
    T::try_from(num(what, s)?).map_err(|_| ParseErrorKind::Number { what, text: s.to_string() })
}

fn range(what: &'static str, s: &str) -> Result<(u32, u32), ParseErrorKind> {
    match s.split_once('-') {
        Some((a, b)) => Ok((num(what, a)?, num(what, b)?)),
        None => num(what, s).map(|a| (a, a)),
    }
}

fn port_range(what: &'static str, s: &str) -> Result<(u16, u16), ParseErrorKind> {
    let (a, b) = range(what, s)?;
    let p = |v: u32| u16::try_from(v).map_err(|_| ParseErrorKind::Number { what, text: s.into() });
    Ok((p(a)?, p(b)?))
}

fn table(s: &str) -> Result<u32, ParseErrorKind> {
    Ok(match s {
        "main" => table_id::MAIN,
        "local" => table_id::LOCAL,
        "default" => table_id::DEFAULT,
        n => num("table", n)?,
    })
}

fn parse_line(l: &str) -> Result<(bool, Rule), ParseErrorKind> {
    let mut w = l.split_whitespace().peekable();
    let mut v6 = w.next_if_eq(&"-6").is_some();
    let mut rule = Rule::lookup(0, table_id::MAIN);
    let (mut pref, mut action) = (None, None);
    while let Some(k) = w.next() {
        let mut val =
            |keyword: &'static str| w.next().ok_or(ParseErrorKind::MissingValue { keyword });
        match k {
            "not" => rule.invert = true,
            "from" | "to" => {
                let s = val(if k == "from" { "from" } else { "to" })?;
                let p = if s == "all" {
                    None
                } else {
                    let p: IpPrefix = s.parse().or_else(|_| {
                        // A bare address is a host prefix.
                        let a: std::net::IpAddr =
                            s.parse().map_err(|_| ParseErrorKind::Address(s.to_string()))?;
                        let len = if a.is_ipv4() { 32 } else { 128 };
                        format!("{a}/{len}").parse::<IpPrefix>().map_err(ParseErrorKind::from)
                    })?;
                    v6 |= matches!(p, IpPrefix::V6(_));
                    Some(p)
                };
                if k == "from" {
                    rule.src = p;
                } else {
                    rule.dst = p;
                }
            }
            "iif" => rule.iif = num("iif", val("iif")?)?,
            "oif" => rule.oif = num("oif", val("oif")?)?,
            "fwmark" => {
                let s = val("fwmark")?;
                let (m, mask) = match s.split_once('/') {
                    Some((m, k)) => (num("fwmark", m)?, num("fwmark mask", k)?),
                    None => {
                        let m = num("fwmark", s)?;
                        (m, if m != 0 { u32::MAX } else { 0 })
                    }
                };
                (rule.mark, rule.mark_mask) = (m, mask);
            }
            "tos" | "dsfield" => rule.tos = small("tos", val("tos")?)?,
            "ipproto" => {
                rule.ip_proto = match val("ipproto")? {
                    "tcp" => 6,
                    "udp" => 17,
                    "icmp" => 1,
                    "icmpv6" | "ipv6-icmp" => 58,
                    n => small("ipproto", n)?,
                }
            }
            "sport" => rule.sport = Some(port_range("sport", val("sport")?)?),
            "dport" => rule.dport = Some(port_range("dport", val("dport")?)?),
            "uidrange" => rule.uid_range = Some(range("uidrange", val("uidrange")?)?),
            "pref" | "priority" | "order" => pref = Some(num("pref", val("pref")?)?),
            "lookup" | "table" => action = Some(RuleAction::Lookup(table(val("lookup")?)?)),
            "suppress_prefixlength" => {
                rule.suppress_prefixlen =
                    small("suppress_prefixlength", val("suppress_prefixlength")?)?
            }
            "goto" => action = Some(RuleAction::Goto(num("goto", val("goto")?)?)),
            "nop" => action = Some(RuleAction::Nop),
            "blackhole" => action = Some(RuleAction::Blackhole),
            "unreachable" => action = Some(RuleAction::Unreachable),
            "prohibit" => action = Some(RuleAction::Prohibit),
            other => return Err(ParseErrorKind::Unexpected(other.to_string())),
        }
    }
    rule.priority = pref.ok_or(ParseErrorKind::MissingValue { keyword: "pref" })?;
    rule.action = action.ok_or(ParseErrorKind::Format {
        expected: "an action (lookup, goto, nop, blackhole, unreachable, prohibit)",
        found: l.to_string(),
    })?;
    if matches!(rule.action, RuleAction::Goto(t) if t <= rule.priority) {
        return Err(ParseErrorKind::Format {
            expected: "a goto to a later priority",
            found: l.to_string(),
        });
    }
    Ok((v6, rule))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_rules() {
        let text =
            "from 10.0.0.0/8 to 192.0.2.1 iif 3 fwmark 0x10/0xf0 tos 0x10 lookup 100 pref 10\n\
                    \n\
                    -6 not ipproto tcp sport 1000-2000 dport 80 uidrange 0-0 pref 20 blackhole\n\
                    from all fwmark 7 table main suppress_prefixlength 0 priority 30\n\
                    from 2001:db8::/32 goto 100 pref 40";
        let got: Vec<_> = parse(text).collect::<Result<_, _>>().unwrap();
        let (v6, r) = &got[0];
        assert!(!v6);
        assert_eq!(r.src, Some("10.0.0.0/8".parse().unwrap()));
        assert_eq!(r.dst, Some("192.0.2.1/32".parse().unwrap()));
        assert_eq!((r.iif, r.mark, r.mark_mask, r.tos), (3, 0x10, 0xf0, 0x10));
        assert_eq!((r.priority, r.action), (10, RuleAction::Lookup(100)));
        let (v6, r) = &got[1];
        assert!(*v6 && r.invert);
        assert_eq!((r.ip_proto, r.sport, r.dport), (6, Some((1000, 2000)), Some((80, 80))));
        assert_eq!((r.uid_range, r.action), (Some((0, 0)), RuleAction::Blackhole));
        let (_, r) = &got[2];
        assert_eq!((r.mark, r.mark_mask, r.suppress_prefixlen), (7, u32::MAX, 0));
        assert_eq!(r.action, RuleAction::Lookup(table_id::MAIN));
        assert!(got[3].0, "an IPv6 prefix makes an IPv6 rule");
        assert_eq!(got[3].1.action, RuleAction::Goto(100));
    }

    #[test]
    fn rules_print_as_lines_that_read_back() {
        let text = "not from 10.0.0.0/8 to 192.0.2.1 iif 3 oif 4 fwmark 0x10/0xf0 tos 0x10 \
                    ipproto 17 sport 1000-2000 dport 53 uidrange 5-9 pref 10 lookup 100 \
                    suppress_prefixlength 8\n\
                    -6 pref 20 blackhole\n\
                    from 2001:db8::/32 pref 40 goto 100\n\
                    pref 50 nop\npref 60 unreachable\npref 70 prohibit\npref 80 lookup main";
        for (v6, r) in parse(text).map(Result::unwrap) {
            let line = if v6 { format!("-6 {r}") } else { r.to_string() };
            let back = parse(&line).next().unwrap().unwrap();
            assert_eq!(back, (v6, r), "{line}");
        }
        let (_, r) = parse("from all fwmark 7 pref 1 lookup 2").next().unwrap().unwrap();
        assert_eq!(r.to_string(), "from all fwmark 0x7/0xffffffff pref 1 lookup 2");
    }

    #[test]
    fn bad_lines_name_their_line() {
        let e = |t: &str| parse(t).find_map(Result::err).expect("an error");
        assert_eq!(e("lookup 5").kind, ParseErrorKind::MissingValue { keyword: "pref" });
        assert_eq!(e("ok\npref 5 lookup 5").line, 1);
        assert!(matches!(e("pref 5").kind, ParseErrorKind::Format { .. }));
        assert!(matches!(e("pref 5 goto 5").kind, ParseErrorKind::Format { .. }));
        assert!(matches!(e("pref 5 lookup x").kind, ParseErrorKind::Number { .. }));
        assert!(matches!(e("from nowhere pref 5 lookup 1").kind, ParseErrorKind::Address(_)));
        assert!(matches!(e("pref 5 tos 300 lookup 1").kind, ParseErrorKind::Number { .. }));
    }
}
