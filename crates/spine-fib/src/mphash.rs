//! The kernel's multipath hash for a route lookup without a packet (`fib_multipath_hash`
//! and `rt6_multipath_hash` under the default policy 0, layer 3), so that spine picks
//! the same next hop of an ECMP group as a kernel with the same
//! `net.ipv4.fib_multipath_hash_seed`.
//!
//! The kernel fills a zeroed `struct flow_keys` (addresses; for IPv6 also the flow
//! label and the protocol), orders the addresses (`__flow_hash_consistentify`) and
//! hashes the bytes from `basic` through the addresses of the family with SipHash-2-4,
//! keyed by the seed repeated (`fib_multipath_hash_construct_key`); the next hop is
//! chosen by the upper 31 bits of the low word (`mhash >> 1`).

use std::hash::Hasher as _;

/// `offsetof(struct flow_keys, basic)`: `control` is 8 bytes, `basic` 8-aligned.
const HASH_OFFSET: usize = 8;
/// `sizeof(struct flow_keys)`: 76 bytes of fields, rounded to the 8-byte alignment.
const FLOW_KEYS_LEN: usize = 80;
/// Offsets in `struct flow_keys`.
const IP_PROTO: usize = 10;
const FLOW_LABEL: usize = 12;
const ADDRS: usize = 44;
/// `sizeof(flow->addrs)`: the IPv6 pair.
const ADDRS_LEN: usize = 32;

fn siphash(bytes: &[u8], seed: u32) -> u32 {
    let k = (u64::from(seed) << 32) | u64::from(seed);
    let mut h = siphasher::sip::SipHasher24::new_with_keys(k, k);
    h.write(bytes);
    let v = h.finish() as u32;
    // `__flow_hash_from_keys` never answers 0.
    (if v == 0 { 1 } else { v }) >> 1
}

/// The IPv4 hash of a lookup from `src` to `dst` (addresses in network order).
pub fn hash_v4(src: [u8; 4], dst: [u8; 4], seed: u32) -> u32 {
    let mut k = [0u8; FLOW_KEYS_LEN];
    // The addresses compared as the kernel loads them: native-endian words.
    let (a, b) =
        if u32::from_ne_bytes(dst) < u32::from_ne_bytes(src) { (dst, src) } else { (src, dst) };
    k[ADDRS..ADDRS + 4].copy_from_slice(&a);
    k[ADDRS + 4..ADDRS + 8].copy_from_slice(&b);
    let len = FLOW_KEYS_LEN - (HASH_OFFSET + ADDRS_LEN - 8);
    siphash(&k[HASH_OFFSET..HASH_OFFSET + len], seed)
}

/// The IPv6 hash of a lookup from `src` to `dst` with `flowinfo` (network order, as in
/// `struct bpf_fib_lookup`) and layer-4 protocol `proto`.
pub fn hash_v6(src: [u8; 16], dst: [u8; 16], flowinfo: [u8; 4], proto: u8, seed: u32) -> u32 {
    let mut k = [0u8; FLOW_KEYS_LEN];
    k[IP_PROTO] = proto;
    // `flowi6_get_flowlabel`: the 20-bit label, left in network order.
    let label = u32::from_be_bytes(flowinfo) & 0x000f_ffff;
    k[FLOW_LABEL..FLOW_LABEL + 4].copy_from_slice(&label.to_be_bytes());
    let (a, b) = if dst < src { (dst, src) } else { (src, dst) };
    k[ADDRS..ADDRS + 16].copy_from_slice(&a);
    k[ADDRS + 16..ADDRS + 32].copy_from_slice(&b);
    let len = FLOW_KEYS_LEN - HASH_OFFSET;
    siphash(&k[HASH_OFFSET..HASH_OFFSET + len], seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_and_31_bits() {
        let (a, b) = ([10, 0, 0, 1], [10, 0, 0, 2]);
        assert_eq!(hash_v4(a, b, 7), hash_v4(b, a, 7));
        assert_ne!(hash_v4(a, b, 7), hash_v4(a, b, 8));
        let (x, y) = ([1u8; 16], [2u8; 16]);
        assert_eq!(hash_v6(x, y, [0; 4], 6, 1), hash_v6(y, x, [0; 4], 6, 1));
        for s in 0..64 {
            assert!(hash_v4(a, [s; 4], s.into()) < 1 << 31);
        }
    }
}
