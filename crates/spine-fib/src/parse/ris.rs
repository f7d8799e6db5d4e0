//! A BGP mutation trace: `A prefix` (announce) or `W prefix` (withdraw), in order.

use super::{err, lines, ParseError, ParseErrorKind};
use crate::prefix::IpPrefix;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    Announce(IpPrefix),
    Withdraw(IpPrefix),
}

impl Mutation {
    pub fn prefix(&self) -> IpPrefix {
        match self {
            Mutation::Announce(p) | Mutation::Withdraw(p) => *p,
        }
    }
}

pub fn parse(text: &str) -> impl Iterator<Item = Result<Mutation, ParseError>> + '_ {
    lines(text).filter(|(_, l)| !l.starts_with('#')).map(|(n, l)| {
        let bad = || {
            err(n, ParseErrorKind::Format { expected: "`A prefix` or `W prefix`", found: l.into() })
        };
        let (action, p) = l.split_once(char::is_whitespace).ok_or_else(bad)?;
        let p = p.trim().parse::<IpPrefix>().map_err(|e| err(n, e))?;
        match action {
            "A" => Ok(Mutation::Announce(p)),
            "W" => Ok(Mutation::Withdraw(p)),
            _ => Err(bad()),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announces_withdraws_and_errors() {
        let v: Vec<_> =
            parse("A 10.0.0.0/8\nW 2001:db8::/32\nX 10.0.0.0/8\nA 10.0.0.1/8\n").collect();
        assert_eq!(v[0], Ok(Mutation::Announce("10.0.0.0/8".parse().unwrap())));
        assert_eq!(v[1], Ok(Mutation::Withdraw("2001:db8::/32".parse().unwrap())));
        assert_eq!(v[2].clone().unwrap_err().line, 3);
        let e = v[3].clone().unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.to_string().contains("bits set past the prefix length"), "{e}");
    }
}
