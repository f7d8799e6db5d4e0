//! Sans-IO parsers for route files, one entry a line: the caller hands in text (read
//! and decompressed however it likes) and gets typed entries or an error naming the
//! line. Formats:
//!
//! - [`routes`]: `ip route`-like lines, documented there;
//! - [`pyasn`]: `prefix<TAB>asn`, `;` comments (pyasn's `ipasn` files);
//! - [`ris`]: a mutation trace, `A prefix` (announce) or `W prefix` (withdraw);
//! - [`bgpdump`]: `bgpdump -m` lines (`TABLE_DUMP2|…|B|…` and `BGP4MP|…|A|…`/`W`);
//! - [`rules`]: `ip rule`-like lines, one policy rule a line.
//!
//! Blank lines are skipped everywhere; line numbers count from 1.

pub mod bgpdump;
pub mod pyasn;
pub mod ris;
pub mod routes;
pub mod rules;

use crate::prefix::PrefixError;

/// A MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut m {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// A line that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct ParseError {
    pub line: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error(transparent)]
    Prefix(#[from] PrefixError),
    #[error("`{0}` is not an IP address")]
    Address(String),
    #[error("`{keyword}` needs a value")]
    MissingValue { keyword: &'static str },
    #[error("{what} `{text}` is not a number in range")]
    Number { what: &'static str, text: String },
    #[error("unexpected `{0}`")]
    Unexpected(String),
    #[error("a next hop needs `dev` (and `via` unless directly connected)")]
    NoDevice,
    #[error("expected {expected}, found `{found}`")]
    Format { expected: &'static str, found: String },
}

/// Non-empty lines with their 1-based numbers.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.trim())).filter(|(_, l)| !l.is_empty())
}

pub(crate) fn err(line: usize, kind: impl Into<ParseErrorKind>) -> ParseError {
    ParseError { line, kind: kind.into() }
}

#[cfg(test)]
mod mac_tests {
    #[test]
    fn macs_read_six_hex_bytes_only() {
        assert_eq!(super::parse_mac("02:00:0a:ff:10:01"), Some([2, 0, 0xa, 0xff, 0x10, 1]));
        for bad in ["02:00:0a:ff:10", "02:00:0a:ff:10:01:02", "02:00:0a:ff:10:zz", ""] {
            assert_eq!(super::parse_mac(bad), None, "{bad}");
        }
    }
}
