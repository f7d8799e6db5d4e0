//! Next-hop selection in a multipath route, as the kernel's `fib_select_multipath`
//! does it (hash-threshold, RFC 2992): each next hop owns the hash interval up to its
//! upper bound `round(w_cum * 2^31 / w_total) - 1` (`fib_rebalance`), and the first
//! next hop whose bound is at least the flow's hash is used.

/// Upper bounds for next hops of weights `weights` (`fib_rebalance`).
pub fn upper_bounds(weights: impl Iterator<Item = u16> + Clone) -> Vec<i32> {
    let total: u64 = weights.clone().map(u64::from).sum();
    let mut w = 0u64;
    weights
        .map(|x| {
            w += u64::from(x);
            // DIV_ROUND_CLOSEST_ULL(w << 31, total) - 1
            ((((w << 31) + total / 2) / total.max(1)) as i64 - 1) as i32
        })
        .collect()
}

/// Index of the next hop for `hash`, the kernel's 31-bit `fib_multipath_hash` value
/// (compared as the kernel's `int`); 0 if none qualifies, as the kernel leaves it.
#[inline]
pub fn select(bounds: impl Iterator<Item = i32>, hash: u32) -> usize {
    let h = hash as i32;
    bounds.enumerate().find(|&(_, b)| h <= b).map_or(0, |(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_split_the_hash_space_by_weight() {
        assert_eq!(upper_bounds([1u16].into_iter()), [i32::MAX]);
        let b = upper_bounds([1u16, 1].into_iter());
        assert_eq!(b, [(1 << 30) - 1, i32::MAX]);
        let b = upper_bounds([1u16, 3].into_iter());
        assert_eq!(b, [(1 << 29) - 1, i32::MAX]);
        assert_eq!(select(b.iter().copied(), 0), 0);
        assert_eq!(select(b.iter().copied(), (1 << 29) - 1), 0);
        assert_eq!(select(b.iter().copied(), 1 << 29), 1);
        assert_eq!(select(b.iter().copied(), 0x7fff_ffff), 1);
        // A hash past 31 bits is a negative int to the kernel: the first next hop.
        assert_eq!(select(b.iter().copied(), 0xffff_ffff), 0);
        // Three equal weights: thirds, rounded to the closest.
        let b = upper_bounds([1u16, 1, 1].into_iter());
        assert_eq!(b, [715_827_882, 1_431_655_764, i32::MAX]);
    }
}
