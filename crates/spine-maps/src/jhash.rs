//! The kernel's `jhash` (Bob Jenkins' lookup3, `include/linux/jhash.h`), which its hash
//! maps use to pick a bucket. Using the same function means that with
//! `BPF_F_ZERO_SEED` a map places keys in the same buckets as the kernel, so
//! `next_key` walks them in the kernel's order.
//!
//! For keys whose length is a multiple of 4 the kernel calls `jhash2` over native-endian
//! words; on a little-endian machine that gives the same value as `jhash` over the bytes,
//! which is what this computes.

const JHASH_INITVAL: u32 = 0xdead_beef;

#[inline(always)]
fn mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(4);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(6);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(8);
    *b = b.wrapping_add(*a);
    *a = a.wrapping_sub(*c);
    *a ^= c.rotate_left(16);
    *c = c.wrapping_add(*b);
    *b = b.wrapping_sub(*a);
    *b ^= a.rotate_left(19);
    *a = a.wrapping_add(*c);
    *c = c.wrapping_sub(*b);
    *c ^= b.rotate_left(4);
    *b = b.wrapping_add(*a);
}

#[inline(always)]
fn final_mix(a: &mut u32, b: &mut u32, c: &mut u32) {
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(14));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(11));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(25));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(16));
    *a ^= *c;
    *a = a.wrapping_sub(c.rotate_left(4));
    *b ^= *a;
    *b = b.wrapping_sub(a.rotate_left(14));
    *c ^= *b;
    *c = c.wrapping_sub(b.rotate_left(24));
}

#[inline(always)]
fn le32(k: &[u8]) -> u32 {
    u32::from_le_bytes([k[0], k[1], k[2], k[3]])
}

/// `jhash(key, key.len(), initval)` exactly as the kernel computes it.
pub(crate) fn jhash(key: &[u8], initval: u32) -> u32 {
    let init = JHASH_INITVAL.wrapping_add(key.len() as u32).wrapping_add(initval);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(le32(&k[0..]));
        b = b.wrapping_add(le32(&k[4..]));
        c = c.wrapping_add(le32(&k[8..]));
        mix(&mut a, &mut b, &mut c);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    // The last 1..=12 bytes, zero-padded, as little-endian words (the kernel's switch
    // adds the same byte shifts). Assembled in registers: copying them into a padded
    // buffer and reading words back stalls on store forwarding, a cost larger than the
    // hash itself for the short keys maps mostly have. Whole words are read as words
    // (keys are mostly multiples of 4 bytes: the kernel's `jhash2` case), only a
    // partial last word byte by byte.
    a = a.wrapping_add(tail_word(k, 0));
    b = b.wrapping_add(tail_word(k, 1));
    c = c.wrapping_add(tail_word(k, 2));
    final_mix(&mut a, &mut b, &mut c);
    c
}

/// Word `i` (0..3) of the tail `k` (1..=12 bytes) zero-padded to 12 bytes.
#[inline(always)]
fn tail_word(k: &[u8], i: usize) -> u32 {
    let s = 4 * i;
    if s + 4 <= k.len() {
        le32(&k[s..])
    } else if s < k.len() {
        k[s..].iter().enumerate().fold(0, |w, (j, &b)| w | u32::from(b) << (8 * j))
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lookup3's published self-test values for `hashlittle` (identical to the kernel's
    /// jhash): "Four score and seven years ago" with initval 0 and 1, and the empty key.
    #[test]
    fn lookup3_reference_values() {
        let s = b"Four score and seven years ago";
        assert_eq!(jhash(s, 0), 0x17770551);
        assert_eq!(jhash(s, 1), 0xcd628161);
        assert_eq!(jhash(b"", 0), 0xdeadbeef);
        assert_eq!(jhash(b"", 0xdeadbeef), 0xbd5b7dde);
    }

    /// The tail written out as lookup3 does (a zero-padded copy read as words), for
    /// every length through three full rounds.
    #[test]
    fn tail_in_registers_equals_the_padded_copy() {
        fn padded(key: &[u8], initval: u32) -> u32 {
            let init = JHASH_INITVAL.wrapping_add(key.len() as u32).wrapping_add(initval);
            let (mut a, mut b, mut c) = (init, init, init);
            let mut k = key;
            while k.len() > 12 {
                a = a.wrapping_add(le32(&k[0..]));
                b = b.wrapping_add(le32(&k[4..]));
                c = c.wrapping_add(le32(&k[8..]));
                mix(&mut a, &mut b, &mut c);
                k = &k[12..];
            }
            if k.is_empty() {
                return c;
            }
            let mut tail = [0u8; 12];
            tail[..k.len()].copy_from_slice(k);
            a = a.wrapping_add(le32(&tail[0..]));
            b = b.wrapping_add(le32(&tail[4..]));
            c = c.wrapping_add(le32(&tail[8..]));
            final_mix(&mut a, &mut b, &mut c);
            c
        }
        let bytes: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(151).wrapping_add(7)).collect();
        for len in 0..=bytes.len() {
            for seed in [0, 1, 0x9e37_79b9] {
                assert_eq!(jhash(&bytes[..len], seed), padded(&bytes[..len], seed), "len {len}");
            }
        }
    }

    #[test]
    fn every_byte_counts() {
        let base = [7u8; 13];
        for i in 0..base.len() {
            let mut k = base;
            k[i] ^= 1;
            assert_ne!(jhash(&k, 0), jhash(&base, 0), "byte {i}");
        }
        assert_ne!(jhash(&base, 0), jhash(&base, 1));
    }
}
