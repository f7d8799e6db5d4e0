//! pyasn's `ipasn` files: `prefix<TAB>origin-asn`; lines starting with `;` are comments.

use super::{err, lines, ParseError, ParseErrorKind};
use crate::prefix::IpPrefix;

/// Every (prefix, origin AS) of `text`.
pub fn parse(text: &str) -> impl Iterator<Item = Result<(IpPrefix, u32), ParseError>> + '_ {
    lines(text).filter(|(_, l)| !l.starts_with(';')).map(|(n, l)| {
        let mut f = l.split_whitespace();
        let (Some(p), Some(asn), None) = (f.next(), f.next(), f.next()) else {
            return Err(err(
                n,
                ParseErrorKind::Format { expected: "prefix<TAB>asn", found: l.into() },
            ));
        };
        let prefix = p.parse::<IpPrefix>().map_err(|e| err(n, e))?;
        let asn = asn
            .parse::<u32>()
            .map_err(|_| err(n, ParseErrorKind::Number { what: "AS number", text: asn.into() }))?;
        Ok((prefix, asn))
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn comments_entries_and_errors() {
        let t = "; IP-ASN32-DAT file\n; comment\n1.0.0.0/24\t13335\n\n2001:db8::/32\t64496\n1.0.0.0/24\tx\n";
        let v: Vec<_> = super::parse(t).collect();
        assert_eq!(v.len(), 3);
        let (p, a) = v[0].clone().unwrap();
        assert_eq!((p.to_string(), a), ("1.0.0.0/24".into(), 13335));
        assert_eq!(v[1].clone().unwrap().1, 64496);
        assert_eq!(v[2].clone().unwrap_err().line, 6);
    }
}
