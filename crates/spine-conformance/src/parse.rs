//! The `.data` test-file format of the `bpf_conformance` suite.
//!
//! Sections start with a line `-- NAME`: `asm` (the program), `raw` (the same program as
//! 64-bit little-endian words), `mem` (hex bytes), `result` (expected r0) or `error`
//! (the program must be refused or fault); `c` and `no register offset` are comments.
//! Lines before the first section are the file's header comment.

use spine_isa::Insn;

/// One parsed test file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestCase {
    /// The file name without `.data`, or whatever the caller named it.
    pub name: String,
    /// The `-- asm` section, verbatim (the assembler strips its `#` comments).
    pub asm: String,
    /// The `-- raw` section, when the file has one.
    pub raw: Option<Vec<Insn>>,
    /// The `-- mem` bytes; empty when the file has none.
    pub mem: Vec<u8>,
    pub expected: Expected,
}

/// What the program must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Exit with this r0.
    Result(u64),
    /// Be refused at load or fault at run time; the text is a hint, not a message to match.
    Error(String),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}")]
pub struct ParseError {
    /// 1-based line in the file (0 for problems of the file as a whole).
    pub line: usize,
    pub kind: ParseErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseErrorKind {
    #[error("unknown section `-- {0}`")]
    UnknownSection(String),
    #[error("section `-- {0}` appears twice")]
    DuplicateSection(String),
    #[error("bad instruction word `{0}` in -- raw")]
    BadRawWord(String),
    #[error("bad byte `{0}` in -- mem (expected two hex digits)")]
    BadMemByte(String),
    #[error("bad -- result `{0}` (expected one number, 0x-prefixed for hex)")]
    BadResult(String),
    #[error("no -- asm section")]
    MissingAsm,
    #[error("neither -- result nor -- error")]
    MissingExpectation,
    #[error("both -- result and -- error")]
    ConflictingExpectation,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Header,
    Asm,
    Raw,
    Mem,
    Result,
    Error,
    Comment,
}

impl Section {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "asm" => Section::Asm,
            "raw" => Section::Raw,
            "mem" => Section::Mem,
            "result" => Section::Result,
            "error" => Section::Error,
            "c" | "no register offset" => Section::Comment,
            _ => return None,
        })
    }
}

/// Parses a whole test file. The result is a number, hex when `0x`-prefixed and
/// decimal otherwise (as the suite's own runner reads it; the suite writes `0x..` or `0`).
pub fn parse(name: impl Into<String>, text: &str) -> Result<TestCase, ParseError> {
    let mut asm: Option<String> = None;
    let mut raw: Option<Vec<Insn>> = None;
    let mut mem: Option<Vec<u8>> = None;
    let mut result: Option<(usize, String)> = None;
    let mut error: Option<String> = None;
    let mut seen: Vec<String> = Vec::new();
    let mut section = Section::Header;

    for (idx, line) in text.lines().enumerate() {
        let n = idx + 1;
        let err = |kind| ParseError { line: n, kind };
        let line = line.strip_suffix('\r').unwrap_or(line);
        if let Some(name) = line.strip_prefix("--").filter(|r| r.is_empty() || r.starts_with(' ')) {
            let name = name.trim();
            section = Section::from_name(name)
                .ok_or_else(|| err(ParseErrorKind::UnknownSection(name.to_string())))?;
            if section != Section::Comment {
                if seen.iter().any(|s| s == name) {
                    return Err(err(ParseErrorKind::DuplicateSection(name.to_string())));
                }
                seen.push(name.to_string());
            }
            match section {
                Section::Asm => asm = Some(String::new()),
                Section::Raw => raw = Some(Vec::new()),
                Section::Mem => mem = Some(Vec::new()),
                Section::Result => result = Some((n, String::new())),
                Section::Error => error = Some(String::new()),
                Section::Header | Section::Comment => {}
            }
            continue;
        }
        match section {
            Section::Header | Section::Comment => {}
            Section::Asm => {
                let a = asm.get_or_insert_with(String::new);
                a.push_str(line);
                a.push('\n');
            }
            Section::Raw => {
                let words = raw.get_or_insert_with(Vec::new);
                for tok in line.split_whitespace() {
                    let w = number(tok)
                        .ok_or_else(|| err(ParseErrorKind::BadRawWord(tok.to_string())))?;
                    words.push(Insn::from_bytes(w.to_le_bytes()));
                }
            }
            Section::Mem => {
                let bytes = mem.get_or_insert_with(Vec::new);
                for tok in line.split_whitespace() {
                    let b = (tok.len() <= 2)
                        .then(|| u8::from_str_radix(tok, 16).ok())
                        .flatten()
                        .ok_or_else(|| err(ParseErrorKind::BadMemByte(tok.to_string())))?;
                    bytes.push(b);
                }
            }
            Section::Result => {
                if let Some((_, r)) = result.as_mut() {
                    r.push_str(line);
                    r.push(' ');
                }
            }
            Section::Error => {
                if let Some(e) = error.as_mut() {
                    if !e.is_empty() && !line.trim().is_empty() {
                        e.push(' ');
                    }
                    e.push_str(line.trim());
                }
            }
        }
    }

    let whole = |kind| ParseError { line: 0, kind };
    let expected = match (result, error) {
        (Some(_), Some(_)) => return Err(whole(ParseErrorKind::ConflictingExpectation)),
        (None, None) => return Err(whole(ParseErrorKind::MissingExpectation)),
        (None, Some(e)) => Expected::Error(e),
        (Some((line, r)), None) => {
            let toks: Vec<&str> = r.split_whitespace().collect();
            match toks[..] {
                [t] => Expected::Result(number(t).ok_or_else(|| ParseError {
                    line,
                    kind: ParseErrorKind::BadResult(t.to_string()),
                })?),
                _ => {
                    return Err(ParseError {
                        line,
                        kind: ParseErrorKind::BadResult(r.trim().to_string()),
                    })
                }
            }
        }
    };
    Ok(TestCase {
        name: name.into(),
        asm: asm.ok_or_else(|| whole(ParseErrorKind::MissingAsm))?,
        raw,
        mem: mem.unwrap_or_default(),
        expected,
    })
}

/// `0x`-prefixed hex or plain decimal, unsigned 64-bit.
fn number(t: &str) -> Option<u64> {
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) if !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            u64::from_str_radix(h, 16).ok()
        }
        Some(_) => None,
        None if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) => t.parse().ok(),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LDDW: &str = "\
# Copyright (c) Big Switch Networks, Inc
# SPDX-License-Identifier: Apache-2.0
-- asm
lddw %r0, 0x1122334455667788
exit
-- raw
0x5566778800000018
0x1122334400000000
0x0000000000000095
-- result
0x1122334455667788
";

    #[test]
    fn parses_asm_raw_and_result() {
        let t = parse("lddw", LDDW).unwrap();
        assert_eq!(t.name, "lddw");
        assert_eq!(t.asm, "lddw %r0, 0x1122334455667788\nexit\n");
        let raw = t.raw.unwrap();
        assert_eq!(raw.len(), 3);
        assert_eq!(raw[0], Insn::new(0x18, 0, 0, 0, 0x55667788));
        assert_eq!(raw[1], Insn::new(0, 0, 0, 0, 0x11223344));
        assert_eq!(raw[2], Insn::new(0x95, 0, 0, 0, 0));
        assert!(t.mem.is_empty());
        assert_eq!(t.expected, Expected::Result(0x1122334455667788));
    }

    #[test]
    fn parses_mem_and_skips_comment_sections() {
        let text = "\
-- c
int x = y--;
--x;
-- no register offset
-- asm
mov %r0, %r2 # length
exit
-- mem
00 0a ff
7F
-- no register offset
call instruction
-- result
8
";
        let t = parse("m", text).unwrap();
        assert_eq!(t.mem, [0x00, 0x0a, 0xff, 0x7f]);
        assert_eq!(t.asm, "mov %r0, %r2 # length\nexit\n");
        assert_eq!(t.raw, None);
        // Without 0x the result is decimal, as the suite's runner reads it.
        assert_eq!(t.expected, Expected::Result(8));
    }

    #[test]
    fn parses_error_expectations_and_crlf() {
        let t = parse("e", "-- asm\r\nmov %r11, 1\r\nexit\r\n-- error\r\ninvalid\r\n register\r\n")
            .unwrap();
        assert_eq!(t.expected, Expected::Error("invalid register".into()));
        assert_eq!(t.asm, "mov %r11, 1\nexit\n");
    }

    #[test]
    fn reports_malformed_files() {
        let kind = |text: &str| parse("x", text).unwrap_err();
        assert_eq!(
            kind("-- asm\nexit\n-- bogus\n"),
            ParseError { line: 3, kind: ParseErrorKind::UnknownSection("bogus".into()) }
        );
        assert_eq!(
            kind("-- asm\nexit\n-- result\n0x1\n-- asm\nexit\n").kind,
            ParseErrorKind::DuplicateSection("asm".into())
        );
        assert_eq!(
            kind("-- asm\nexit\n-- raw\n0xzz\n-- result\n1\n"),
            ParseError { line: 4, kind: ParseErrorKind::BadRawWord("0xzz".into()) }
        );
        assert_eq!(
            kind("-- asm\nexit\n-- mem\n00 100\n-- result\n1\n").kind,
            ParseErrorKind::BadMemByte("100".into())
        );
        assert_eq!(
            kind("-- asm\nexit\n-- result\n0x1 0x2\n"),
            ParseError { line: 3, kind: ParseErrorKind::BadResult("0x1 0x2".into()) }
        );
        assert_eq!(
            kind("-- asm\nexit\n-- result\nabc\n").kind,
            ParseErrorKind::BadResult("abc".into())
        );
        assert_eq!(kind("-- asm\nexit\n-- result\n\n").kind, ParseErrorKind::BadResult("".into()));
        assert_eq!(kind("-- asm\nexit\n").kind, ParseErrorKind::MissingExpectation);
        assert_eq!(kind("-- result\n0x0\n").kind, ParseErrorKind::MissingAsm);
        assert_eq!(
            kind("-- asm\nexit\n-- result\n0\n-- error\nx\n").kind,
            ParseErrorKind::ConflictingExpectation
        );
    }

    mod fuzz {
        use super::*;
        use proptest::prelude::*;

        fn line() -> impl Strategy<Value = String> {
            prop_oneof![
                prop::sample::select(vec![
                    "-- asm",
                    "-- raw",
                    "-- mem",
                    "-- result",
                    "-- error",
                    "-- c",
                    "--",
                    "-- no register offset",
                    "exit",
                    "0x",
                    "0x1 0x2",
                    "ff 100",
                    "\r",
                    "",
                ])
                .prop_map(String::from),
                "\\PC{0,20}",
            ]
        }

        proptest! {
            #[test]
            fn never_panics(lines in prop::collection::vec(line(), 0..16)) {
                let _ = parse("f", &lines.join("\n"));
            }
        }
    }
}
