//! Map contents from the command line, as `bpftool map update` writes them: `--map
//! NAME:KEY=VALUE` (repeatable) and `--maps FILE` (one such entry per line, `#` comments),
//! so a configured program (a filter's rule table, a balancer's VIPs) can be tried without
//! an adapter configuration. Keys and values are written as in `adapter.toml`: a decimal
//! integer stored little-endian in the key's or value's size, or hex bytes in memory order
//! (`0x0a000001`, `0a:00:00:01`).

use std::path::Path;

use anyhow::{bail, Context, Result};
use spine_adapter::config::{parse_hex, Bytes};

/// One entry to write before the program runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapArg {
    pub map: String,
    pub key: Bytes,
    pub value: Bytes,
    /// Where it was written, for errors: `--map` or `FILE:LINE`.
    pub at: String,
}

/// A decimal integer (stored little-endian in the size it is given) or hex bytes.
pub fn bytes(s: &str) -> Option<Bytes> {
    let s = s.trim();
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok().map(Bytes::Int);
    }
    parse_hex(s).map(Bytes::Hex)
}

/// Parses `NAME:KEY=VALUE`.
pub fn parse(spec: &str, at: &str) -> Result<MapArg> {
    let form = "expected NAME:KEY=VALUE";
    let (map, rest) = spec.split_once(':').with_context(|| format!("{at}: '{spec}': {form}"))?;
    let (key, value) = rest.split_once('=').with_context(|| format!("{at}: '{spec}': {form}"))?;
    let map = map.trim();
    if map.is_empty() {
        bail!("{at}: '{spec}': no map name");
    }
    let parsed = |what: &str, s: &str| {
        bytes(s).with_context(|| {
            format!("{at}: map '{map}': {what} '{s}' is neither a decimal integer nor hex bytes")
        })
    };
    Ok(MapArg {
        map: map.to_string(),
        key: parsed("key", key)?,
        value: parsed("value", value)?,
        at: at.to_string(),
    })
}

/// Every `--map` and the entries of the `--maps` file, in that order.
pub fn collect(specs: &[String], file: Option<&Path>) -> Result<Vec<MapArg>> {
    let mut out: Vec<MapArg> = specs.iter().map(|s| parse(s, "--map")).collect::<Result<_>>()?;
    if let Some(f) = file {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if !line.is_empty() {
                out.push(parse(line, &format!("{}:{}", f.display(), i + 1))?);
            }
        }
    }
    Ok(out)
}

/// `key` and `value` sized for a map of `key_size`/`value_size` bytes, or an error naming
/// the entry.
pub fn sized(a: &MapArg, key_size: usize, value_size: usize) -> Result<(Vec<u8>, Vec<u8>)> {
    let key = a.key.to_size(key_size).with_context(|| {
        format!("{}: map '{}': the key does not fit its {key_size} bytes", a.at, a.map)
    })?;
    let value = a.value.to_size(value_size).with_context(|| {
        format!("{}: map '{}': the value does not fit its {value_size} bytes", a.at, a.map)
    })?;
    Ok((key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_as_adapter_toml_writes_them() {
        let a = parse("blocked:53=1", "--map").unwrap();
        assert_eq!(
            (a.map.as_str(), &a.key, &a.value),
            ("blocked", &Bytes::Int(53), &Bytes::Int(1))
        );
        let a = parse("vips:0a:00:00:01=0x01000000", "--map").unwrap();
        assert_eq!(a.key, Bytes::Hex(vec![10, 0, 0, 1]));
        assert_eq!(a.value, Bytes::Hex(vec![1, 0, 0, 0]));
        assert_eq!(sized(&a, 4, 4).unwrap(), (vec![10, 0, 0, 1], vec![1, 0, 0, 0]));
        let e = sized(&a, 8, 4).unwrap_err().to_string();
        assert!(e.contains("'vips'") && e.contains("8 bytes"), "{e}");
        for bad in ["nomap", "m:1", ":1=2", "m:zz=1", "m:1=0xabc"] {
            assert!(parse(bad, "--map").is_err(), "{bad}");
        }
    }
}
