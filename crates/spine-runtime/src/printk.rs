//! Formatting for `bpf_trace_printk`, with the kernel's rules (`bpf_bprintf_prepare`):
//! the format must be NUL-terminated within its size, at most three conversions, each
//! one of `%d %i %u %x %X %c %s %%` with optional `l`/`ll`, flags `0 + - space` and a
//! width, plus `%px`, `%pI4`/`%pi4` and `%pI6`/`%pi6`. Anything else is refused with
//! EINVAL, as the kernel refuses it. `%s` and `%pI*` read through the checked memory;
//! an unreadable pointer prints an empty string, as the kernel's nofault copy does.

use spine_vm::Memory;

/// Longest line, as the kernel's `MAX_BPRINTF_BUF` (1,024 bytes with its NUL).
const MAX_LINE: usize = 1023;
/// Longest `%s` argument read.
const MAX_STR: usize = 512;

/// Formats `fmt` with `args`; `Err` where the kernel returns -EINVAL.
pub(crate) fn format(fmt: &[u8], args: [u64; 3], mem: &Memory) -> Result<Vec<u8>, ()> {
    let nul = fmt.iter().position(|&b| b == 0).ok_or(())?;
    let fmt = &fmt[..nul];
    let mut out = Vec::with_capacity(fmt.len() + 16);
    let mut next_arg = 0usize;
    let mut i = 0;
    while i < fmt.len() {
        let c = fmt[i];
        if c != b'%' {
            // The kernel refuses non-printable characters other than whitespace.
            if !(c.is_ascii_graphic() || c.is_ascii_whitespace()) {
                return Err(());
            }
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        if fmt.get(i) == Some(&b'%') {
            out.push(b'%');
            i += 1;
            continue;
        }
        if next_arg == args.len() {
            return Err(());
        }
        let arg = args[next_arg];
        next_arg += 1;
        let mut spec = Spec::default();
        while let Some(&f @ (b'0' | b'+' | b'-' | b' ')) = fmt.get(i) {
            match f {
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b'-' => spec.left = true,
                _ => spec.space = true,
            }
            i += 1;
        }
        while let Some(&d @ b'0'..=b'9') = fmt.get(i) {
            spec.width = spec.width.saturating_mul(10).saturating_add(usize::from(d - b'0'));
            i += 1;
        }
        if fmt.get(i) == Some(&b'p') {
            i += 1;
            let (text, used) = pointer(&fmt[i..], arg, mem)?;
            i += used;
            spec.pad(&mut out, text.as_bytes());
            continue;
        }
        let mut longs = 0;
        while fmt.get(i) == Some(&b'l') && longs < 2 {
            longs += 1;
            i += 1;
        }
        let conv = *fmt.get(i).ok_or(())?;
        i += 1;
        let wide = longs > 0;
        let text = match conv {
            b'd' | b'i' => {
                let v = if wide { arg as i64 } else { i64::from(arg as i32) };
                let mut s = v.to_string();
                if v >= 0 && spec.plus {
                    s.insert(0, '+');
                } else if v >= 0 && spec.space {
                    s.insert(0, ' ');
                }
                s
            }
            b'u' => if wide { arg } else { u64::from(arg as u32) }.to_string(),
            b'x' => format!("{:x}", if wide { arg } else { u64::from(arg as u32) }),
            b'X' => format!("{:X}", if wide { arg } else { u64::from(arg as u32) }),
            b'c' if !wide => char::from(arg as u8).to_string(),
            b's' if !wide => {
                spec.zero = false;
                String::from_utf8_lossy(&read_str(arg, mem)).into_owned()
            }
            _ => return Err(()),
        };
        spec.pad(&mut out, text.as_bytes());
    }
    out.truncate(MAX_LINE);
    Ok(out)
}

#[derive(Default)]
struct Spec {
    zero: bool,
    plus: bool,
    left: bool,
    space: bool,
    width: usize,
}

impl Spec {
    fn pad(&self, out: &mut Vec<u8>, text: &[u8]) {
        let fill = self.width.saturating_sub(text.len()).min(MAX_LINE);
        if self.left {
            out.extend_from_slice(text);
            out.extend(std::iter::repeat_n(b' ', fill));
        } else if self.zero {
            let (sign, digits) = match text.first() {
                Some(b'-' | b'+' | b' ') => text.split_at(1),
                _ => (&text[..0], text),
            };
            out.extend_from_slice(sign);
            out.extend(std::iter::repeat_n(b'0', fill));
            out.extend_from_slice(digits);
        } else {
            out.extend(std::iter::repeat_n(b' ', fill));
            out.extend_from_slice(text);
        }
    }
}

/// `%p` conversions: returns the text and how many format bytes after `p` were used.
fn pointer(rest: &[u8], arg: u64, mem: &Memory) -> Result<(String, usize), ()> {
    match rest {
        [b'x', ..] => Ok((format!("{arg:016x}"), 1)),
        [b'I' | b'i', b'4', ..] => {
            let b = mem.slice(arg, 4).unwrap_or(&[]);
            let s = if b.len() == 4 {
                format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
            } else {
                String::new()
            };
            Ok((s, 2))
        }
        [b'I' | b'i', b'6', ..] => {
            let full = rest[0] == b'I';
            let b = mem.slice(arg, 16).unwrap_or(&[]);
            if b.len() != 16 {
                return Ok((String::new(), 2));
            }
            let words: Vec<String> =
                b.chunks(2).map(|w| format!("{:02x}{:02x}", w[0], w[1])).collect();
            Ok((words.join(if full { ":" } else { "" }), 2))
        }
        _ => Err(()),
    }
}

fn read_str(addr: u64, mem: &Memory) -> Vec<u8> {
    let mut s = Vec::new();
    for k in 0..MAX_STR as u64 {
        match mem.slice(addr.wrapping_add(k), 1) {
            Some(&[0]) | None => break,
            Some(b) => s.push(b[0]),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(fmt: &str, args: [u64; 3]) -> Result<String, ()> {
        let mut v = fmt.as_bytes().to_vec();
        v.push(0);
        format(&v, args, &Memory::new()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn conversions_and_widths() {
        assert_eq!(f("n=%d u=%u x=%x", [(-5i64) as u64, 7, 255]).unwrap(), "n=-5 u=7 x=ff");
        assert_eq!(f("%d", [0xffff_ffff_0000_0001, 0, 0]).unwrap(), "1", "int truncates");
        assert_eq!(f("%lld", [(-2i64) as u64, 0, 0]).unwrap(), "-2");
        assert_eq!(f("[%5d][%-4u][%04x]", [42, 7, 0xab]).unwrap(), "[   42][7   ][00ab]");
        assert_eq!(f("%c%c 100%%", [b'o' as u64, b'k' as u64, 0]).unwrap(), "ok 100%");
        assert_eq!(f("%llx", [u64::MAX, 0, 0]).unwrap(), "ffffffffffffffff");
    }

    #[test]
    fn refuses_what_the_kernel_refuses() {
        assert!(f("%d %d %d %d", [1, 2, 3]).is_err(), "four conversions");
        assert!(f("%f", [0; 3]).is_err());
        assert!(f("%pK", [0; 3]).is_err());
        assert!(format(b"no terminator", [0; 3], &Memory::new()).is_err());
        assert!(f("bell\x07", [0; 3]).is_err());
    }

    #[test]
    fn unreadable_string_prints_empty() {
        assert_eq!(f("<%s>", [0x1000, 0, 0]).unwrap(), "<>");
    }
}
