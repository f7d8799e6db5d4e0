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

/// `nexthop_select_path`, a nexthop group's member for flow hash `hash`: for a
/// resilient group (`buckets`, [`crate::FibState::res_buckets`]) the member the
/// flow's bucket holds, whatever its neighbour's state (`nexthop_select_path_res`);
/// otherwise (`nexthop_select_path_mp`) the first good member whose upper bound the
/// hash does not pass, else the first good member, else the first. `good(i)`: member
/// `i` has no neighbour entry in a state that is not valid (`ipv4_good_nh`,
/// `ipv6_good_nh`). Shared by `bpf_fib_lookup`'s general path and its forwarding
/// records.
#[inline]
pub fn select_group(
    buckets: Option<&[u16]>,
    bounds: impl Iterator<Item = i32>,
    good: impl Fn(usize) -> bool,
    hash: u32,
) -> usize {
    if let Some(b) = buckets.filter(|b| !b.is_empty()) {
        return usize::from(b[hash as usize % b.len()]);
    }
    let mut first_good = None;
    for (i, bound) in bounds.enumerate() {
        if !good(i) {
            continue;
        }
        first_good.get_or_insert(i);
        if hash as i32 <= bound {
            return i;
        }
    }
    first_good.unwrap_or(0)
}

/// `fib_select_multipath` for an IPv4 multipath route: each next hop scores 2 when
/// its own source address (`nh_saddr`) is the lookup's source (`owns_src(i)`, asked
/// only when the lookup has a source, `has_saddr`) and 1 when the hash falls under
/// its upper bound; the first with the best score wins. Shared by `bpf_fib_lookup`'s
/// general path and its forwarding records.
#[inline]
pub fn select_preferring_src(
    bounds: impl Iterator<Item = i32>,
    owns_src: impl Fn(usize) -> bool,
    hash: u32,
    has_saddr: bool,
) -> usize {
    let mut chosen = 0;
    let mut score = -1;
    for (i, bound) in bounds.enumerate() {
        let mut s = 0;
        if has_saddr && owns_src(i) {
            s += 2;
        }
        if hash as i32 <= bound {
            s += 1;
        }
        if score < s {
            chosen = i;
            if s == 3 || (!has_saddr && s == 1) {
                break;
            }
            score = s;
        }
    }
    chosen
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
