//! Small formatting helpers shared by the subcommands.

use std::fmt::Write;

pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// A hex dump in the style of `xxd`: offset, 16 bytes, printable characters.
pub fn hexdump(bytes: &[u8]) -> String {
    let mut s = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let _ = write!(s, "{:08x}:", i * 16);
        for (j, b) in chunk.iter().enumerate() {
            if j % 2 == 0 {
                s.push(' ');
            }
            let _ = write!(s, "{b:02x}");
        }
        for j in chunk.len()..16 {
            s.push_str(if j % 2 == 0 { "   " } else { "  " });
        }
        s.push_str("  ");
        s.extend(
            chunk.iter().map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' }),
        );
        s.push('\n');
    }
    s
}

/// The name of an XDP verdict, or the raw number for values outside the enum.
pub fn verdict_name(v: u32) -> String {
    spine_abi::xdp_action::name(u64::from(v))
        .map_or_else(|| format!("unknown({v})"), str::to_string)
}
