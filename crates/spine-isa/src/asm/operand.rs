//! Operand syntax: registers, numbers, memory references and jump targets.

use super::AsmErrorKind;

/// Parses `123`, `-8`, `+0x10`, `0xFFFF`: an optional sign, then decimal or `0x` hex.
/// `None` when the text is not a number or exceeds `i128`.
pub(crate) fn int(s: &str) -> Option<i128> {
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (digits, radix) = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (body, 10),
    };
    // `from_str_radix` accepts its own leading sign; a second one is malformed here.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let v = i128::from_str_radix(digits, radix).ok()?;
    Some(if neg { -v } else { v })
}

/// A number that must lie in `[min, max]`; `bits` names the field in the error.
fn ranged(s: &str, min: i128, max: i128, bits: u8) -> Result<i128, AsmErrorKind> {
    let v = int(s).ok_or_else(|| AsmErrorKind::BadOperand(s.to_string()))?;
    if v < min || v > max {
        return Err(AsmErrorKind::ImmOutOfRange { text: s.to_string(), bits });
    }
    Ok(v)
}

/// A 32-bit immediate, signed or unsigned spelling (`-1` and `0xffffffff` are the same).
pub(crate) fn imm32(s: &str) -> Result<i32, AsmErrorKind> {
    ranged(s, i32::MIN.into(), u32::MAX.into(), 32).map(|v| v as u32 as i32)
}

/// A 64-bit immediate, signed or unsigned spelling.
pub(crate) fn imm64(s: &str) -> Result<u64, AsmErrorKind> {
    ranged(s, i64::MIN.into(), u64::MAX.into(), 64).map(|v| v as u64)
}

/// An unsigned 32-bit number (map indices, value offsets).
pub(crate) fn uimm32(s: &str) -> Result<u32, AsmErrorKind> {
    ranged(s, 0, u32::MAX.into(), 32).map(|v| v as u32)
}

/// A signed 16-bit offset.
pub(crate) fn off16(s: &str) -> Result<i16, AsmErrorKind> {
    let v = int(s).ok_or_else(|| AsmErrorKind::BadOperand(s.to_string()))?;
    i16::try_from(v).map_err(|_| AsmErrorKind::OffsetOutOfRange(s.to_string()))
}

/// `%r0`..`%r15` (or without `%`). Numbers past r10 are encodable, so they assemble;
/// [`crate::validate`] refuses them.
pub(crate) fn reg(s: &str) -> Result<u8, AsmErrorKind> {
    let bad = || AsmErrorKind::BadRegister(s.to_string());
    let n = s.strip_prefix('%').unwrap_or(s).strip_prefix('r').ok_or_else(bad)?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || (n.len() > 1 && n.starts_with('0'))
    {
        return Err(bad());
    }
    match n.parse::<u8>() {
        Ok(r) if r < 16 => Ok(r),
        _ => Err(bad()),
    }
}

/// True if the operand is spelled as a register (so `mov %r0, %r1` picks the X form).
pub(crate) fn is_reg(s: &str) -> bool {
    s.starts_with('%') || (s.starts_with('r') && s[1..].bytes().all(|b| b.is_ascii_digit()))
}

/// `[%rN]`, `[%rN+off]`, `[%rN-off]` (spaces allowed inside the brackets).
pub(crate) fn mem(s: &str) -> Result<(u8, i16), AsmErrorKind> {
    let bad = || AsmErrorKind::BadOperand(s.to_string());
    let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')).ok_or_else(bad)?;
    let inner: String = inner.chars().filter(|c| !c.is_whitespace()).collect();
    match inner.find(['+', '-']) {
        None => Ok((reg(&inner)?, 0)),
        Some(at) => {
            let (r, off) = inner.split_at(at);
            // A second sign (`+-8`) is not an offset we print; refuse it.
            if off[1..].starts_with(['+', '-']) {
                return Err(bad());
            }
            Ok((reg(r)?, off16(off)?))
        }
    }
}

/// A label name: a letter, `_` or `.` first, then letters, digits, `_` or `.`.
pub(crate) fn is_label(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_' || c == b'.')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'.')
}

/// Where a branch goes: a signed slot distance (`+3`, `-1`) or a label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Rel(i128),
    Label(String),
}

pub(crate) fn target(s: &str) -> Result<Target, AsmErrorKind> {
    if s.starts_with(['+', '-']) {
        int(s).map(Target::Rel).ok_or_else(|| AsmErrorKind::BadOperand(s.to_string()))
    } else if is_label(s) {
        Ok(Target::Label(s.to_string()))
    } else {
        Err(AsmErrorKind::BadOperand(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(int("0x1F"), Some(31));
        assert_eq!(int("-0x10"), Some(-16));
        assert_eq!(int("+7"), Some(7));
        assert_eq!(int("--7"), None);
        assert_eq!(int("0x"), None);
        assert_eq!(int("12a"), None);
        assert_eq!(imm32("-1"), Ok(-1));
        assert_eq!(imm32("0xffffffff"), Ok(-1));
        assert_eq!(imm32("0x80000000"), Ok(i32::MIN));
        assert!(matches!(imm32("0x100000000"), Err(AsmErrorKind::ImmOutOfRange { .. })));
        assert!(matches!(imm32("-2147483649"), Err(AsmErrorKind::ImmOutOfRange { .. })));
        assert_eq!(imm64("0xffffffffffffffff"), Ok(u64::MAX));
        assert_eq!(imm64("-1"), Ok(u64::MAX));
        assert!(imm64("0x10000000000000000").is_err());
        assert_eq!(off16("-32768"), Ok(i16::MIN));
        assert!(matches!(off16("32768"), Err(AsmErrorKind::OffsetOutOfRange(_))));
    }

    #[test]
    fn registers_and_memory() {
        assert_eq!(reg("%r10"), Ok(10));
        assert_eq!(reg("r3"), Ok(3));
        assert_eq!(reg("%r15"), Ok(15));
        for bad in ["%r16", "%r", "%x1", "%r01", "%r1a", ""] {
            assert!(matches!(reg(bad), Err(AsmErrorKind::BadRegister(_))), "{bad}");
        }
        assert_eq!(mem("[%r1]"), Ok((1, 0)));
        assert_eq!(mem("[%r10-8]"), Ok((10, -8)));
        assert_eq!(mem("[%r1+0x2]"), Ok((1, 2)));
        assert_eq!(mem("[ %r1 + 2 ]"), Ok((1, 2)));
        assert!(mem("%r1+2").is_err());
        assert!(mem("[%r1+-2]").is_err());
        assert!(matches!(mem("[%r1+40000]"), Err(AsmErrorKind::OffsetOutOfRange(_))));
    }

    #[test]
    fn targets() {
        assert_eq!(target("+3"), Ok(Target::Rel(3)));
        assert_eq!(target("-1"), Ok(Target::Rel(-1)));
        assert_eq!(target("exit"), Ok(Target::Label("exit".into())));
        assert!(target("3").is_err());
        assert!(target("a-b").is_err());
    }
}
