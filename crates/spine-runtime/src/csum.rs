//! The Internet checksum as the kernel computes it on x86-64, for `bpf_csum_diff`, whose
//! return value programs fold into headers: it must match the kernel bit for bit.

/// `csum_partial`: the ones'-complement sum of `buf` (16-bit words in memory order, read
/// as this little-endian host reads them) added to `seed`, folded to 32 bits. Summing in
/// 64 bits with end-around carry and folding gives exactly the kernel's x86-64 result.
pub fn csum_partial(buf: &[u8], seed: u32) -> u32 {
    let mut acc: u64 = u64::from(seed);
    let mut add = |v: u64| {
        let (s, c) = acc.overflowing_add(v);
        acc = s + u64::from(c);
    };
    let mut chunks = buf.chunks_exact(8);
    for c in &mut chunks {
        add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
    }
    let rest = chunks.remainder();
    let mut tail = [0u8; 8];
    tail[..rest.len()].copy_from_slice(rest);
    add(u64::from_le_bytes(tail));
    fold64(acc)
}

/// Folds a 64-bit ones'-complement sum to 32 bits with end-around carry.
fn fold64(x: u64) -> u32 {
    let (s, c) = (x as u32).overflowing_add((x >> 32) as u32);
    s + u32::from(c)
}

/// `csum_add`: ones'-complement addition of two 32-bit partial sums.
pub fn csum_add(a: u32, b: u32) -> u32 {
    let (s, c) = a.overflowing_add(b);
    s + u32::from(c)
}

/// `csum_sub`.
pub fn csum_sub(a: u32, b: u32) -> u32 {
    csum_add(a, !b)
}

/// `csum_from32to16`: folds a 32-bit partial sum to 16 bits (not complemented).
pub fn from32to16(sum: u32) -> u32 {
    sum.wrapping_add(sum.rotate_right(16)) >> 16
}

/// `bpf_csum_diff` on already-fetched bytes (sizes are checked by the caller).
pub fn csum_diff(from: &[u8], to: &[u8], seed: u32) -> u32 {
    match (from.is_empty(), to.is_empty()) {
        (false, false) => from32to16(csum_sub(csum_partial(to, seed), csum_partial(from, 0))),
        (true, false) => from32to16(csum_partial(to, seed)),
        (false, true) => from32to16(!csum_partial(from, !seed)),
        (true, true) => seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 1071's worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2 (as
    /// big-endian words); read little-endian the folded sum is byte-swapped.
    #[test]
    fn rfc1071_example() {
        let b = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(from32to16(csum_partial(&b, 0)), 0xf2dd);
    }

    #[test]
    fn diff_of_equal_data_is_negative_zero_and_empty_is_seed() {
        let a = [1u8, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(csum_diff(&a, &a, 0), 0xffff);
        assert_eq!(csum_diff(&[], &[], 0x1234_5678), 0x1234_5678);
        assert_eq!(csum_diff(&[], &[0; 4], 0), 0);
    }

    #[test]
    fn odd_lengths_pad_with_zero() {
        assert_eq!(csum_partial(&[0xab], 0), 0xab);
        assert_eq!(csum_partial(&[0xab, 0xcd, 0xef], 0), 0xefcdab);
    }

    #[test]
    fn incremental_update_matches_recomputation() {
        // Changing a 4-byte field and applying the diff to the old sum gives the new sum.
        let mut pkt =
            [0x45u8, 0, 0, 0x54, 0x12, 0x34, 0x40, 0, 0x40, 0x11, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        let old = from32to16(csum_partial(&pkt, 0));
        let from = [10u8, 0, 0, 2];
        let to = [192u8, 168, 1, 1];
        pkt[16..20].copy_from_slice(&to);
        let new = from32to16(csum_partial(&pkt, 0));
        let diff = csum_diff(&from, &to, 0);
        assert_eq!(from32to16(csum_add(old, diff)), new);
    }
}
