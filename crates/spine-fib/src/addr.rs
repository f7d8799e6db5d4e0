//! [`Address`]: what the LPM structures need from an IPv4 (`u32`) or IPv6 (`u128`)
//! address, held as an unsigned integer whose most significant bit is the first bit of
//! the address on the wire.

use std::fmt::Debug;
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An address family's key: `u32` for IPv4, `u128` for IPv6.
pub trait Address: Copy + Ord + Eq + Hash + Debug + Send + Sync + 'static {
    /// Bits in an address (32 or 128).
    const BITS: u32;
    /// The all-zero address.
    const ZERO: Self;
    /// The address family's standard type, for display and parsing.
    type Std: Copy + Debug + std::fmt::Display + std::str::FromStr + Eq;

    /// The first `len` bits kept, the rest cleared (`len <= BITS`).
    fn mask(self, len: u32) -> Self;
    /// The last address of the `len`-bit prefix starting at `self` (`len <= BITS`).
    fn last_of(self, len: u32) -> Self;
    /// `n` bits starting at bit `pos` (0 = most significant) as an integer; bits past
    /// the end read as zero. `n <= 32`, `pos < BITS`.
    fn bits(self, pos: u32, n: u32) -> u32;
    /// Bit `pos` (0 = most significant).
    fn bit(self, pos: u32) -> bool {
        self.bits(pos, 1) == 1
    }
    /// `self + (k << (BITS - pos - n))`-style stepping: the address whose `n` bits at
    /// `pos` are `k`, the bits before `pos` taken from `self` and the bits after zero.
    fn with_bits(self, pos: u32, n: u32, k: u32) -> Self;
    /// `self` with its bits past `len` taken from `host` (an address inside the
    /// prefix `self/len`).
    fn with_host(self, len: u32, host: Self) -> Self;
    /// Low 64 bits mixed with the high ones, for hashing into a few buckets.
    fn fold(self) -> u64;
    fn to_std(self) -> Self::Std;
    fn from_std(a: Self::Std) -> Self;
}

impl Address for u32 {
    const BITS: u32 = 32;
    const ZERO: u32 = 0;
    type Std = Ipv4Addr;

    #[inline(always)]
    fn mask(self, len: u32) -> u32 {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - len))
        }
    }
    #[inline(always)]
    fn last_of(self, len: u32) -> u32 {
        self | !u32::MAX.checked_shl(32 - len).unwrap_or(0)
    }
    #[inline(always)]
    fn bits(self, pos: u32, n: u32) -> u32 {
        ((((self as u64) << 32) << pos) >> (64 - n)) as u32
    }
    fn with_bits(self, pos: u32, n: u32, k: u32) -> u32 {
        let wide = ((self as u64) << 32).mask_u64(pos) | ((k as u64) << (64 - pos - n));
        (wide >> 32) as u32
    }
    fn with_host(self, len: u32, host: u32) -> u32 {
        self.mask(len) | (host & !u32::MAX.checked_shl(32 - len).unwrap_or(0))
    }
    fn fold(self) -> u64 {
        self as u64
    }
    fn to_std(self) -> Ipv4Addr {
        Ipv4Addr::from(self)
    }
    fn from_std(a: Ipv4Addr) -> u32 {
        u32::from(a)
    }
}

impl Address for u128 {
    const BITS: u32 = 128;
    const ZERO: u128 = 0;
    type Std = Ipv6Addr;

    #[inline(always)]
    fn mask(self, len: u32) -> u128 {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - len))
        }
    }
    #[inline(always)]
    fn last_of(self, len: u32) -> u128 {
        self | !u128::MAX.checked_shl(128 - len).unwrap_or(0)
    }
    #[inline(always)]
    fn bits(self, pos: u32, n: u32) -> u32 {
        // Bits past the end read as zero: shift the window left by what overhangs.
        let over = (pos + n).saturating_sub(128);
        let v = (self << pos) >> (128 - (n - over));
        (v as u32) << over
    }
    fn with_bits(self, pos: u32, n: u32, k: u32) -> u128 {
        let over = (pos + n).saturating_sub(128);
        let kept = self.mask(pos);
        kept | (((k >> over) as u128) << (128 - pos - (n - over)))
    }
    fn with_host(self, len: u32, host: u128) -> u128 {
        self.mask(len) | (host & !u128::MAX.checked_shl(128 - len).unwrap_or(0))
    }
    fn fold(self) -> u64 {
        (self as u64) ^ ((self >> 64) as u64).rotate_left(29)
    }
    fn to_std(self) -> Ipv6Addr {
        Ipv6Addr::from(self)
    }
    fn from_std(a: Ipv6Addr) -> u128 {
        u128::from(a)
    }
}

trait MaskU64 {
    fn mask_u64(self, len: u32) -> u64;
}

impl MaskU64 for u64 {
    fn mask_u64(self, len: u32) -> u64 {
        if len == 0 {
            0
        } else {
            self & (u64::MAX << (64 - len))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Address;

    #[test]
    fn bit_windows_pad_with_zeros() {
        let a: u32 = 0xC0A8_0101; // 192.168.1.1
        assert_eq!(a.bits(0, 8), 192);
        assert_eq!(a.bits(24, 8), 1);
        assert_eq!(a.bits(30, 6), 0b01_0000, "two real bits, four of padding");
        assert_eq!(a.with_bits(24, 8, 7), 0xC0A8_0107);
        assert_eq!(a.with_bits(30, 6, 0b11_0000), 0xC0A8_0103);
        let b: u128 = 0x2001_0db8 << 96 | 0xff;
        assert_eq!(b.bits(0, 16), 0x2001);
        assert_eq!(b.bits(124, 6), 0b11_1100);
        assert_eq!(b.with_bits(124, 6, 0b00_1100), (0x2001_0db8 << 96) | 0xf3);
        assert_eq!(b.with_bits(16, 16, 0xabcd) >> 96, 0x2001_abcd);
        assert_eq!(0u32.last_of(0), u32::MAX);
        assert_eq!(0x0a00_0000u32.last_of(8), 0x0aff_ffff);
        assert_eq!(u128::MAX.mask(0), 0);
        assert_eq!(0x0a00_0000u32.with_host(8, 0xffff_ff01), 0x0aff_ff01);
        assert_eq!(0x0a00_0000u32.with_host(32, 7), 0x0a00_0000);
        assert_eq!(0u32.with_host(0, 7), 7);
        assert_eq!((1u128 << 127).with_host(1, u128::MAX), u128::MAX);
    }
}
