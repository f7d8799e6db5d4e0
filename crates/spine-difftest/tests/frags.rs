//! The multi-buffer helpers on linear frames against the kernel
//! (`tests/fixtures/frags.c`): `bpf_xdp_get_buff_len`, `bpf_xdp_load_bytes` and
//! `bpf_xdp_store_bytes` (in range, past the end ⇒ `-EINVAL`, offsets past 0xffff ⇒
//! `-EFAULT`) and `bpf_xdp_adjust_tail`, in an `xdp.frags` program (loaded with
//! `BPF_F_XDP_HAS_FRAGS`) and in a plain one, on both engines. Needs root (bpf(2));
//! without it each test says SKIP loudly and passes.

mod common;

use common::kernel_available;

fn object(program: &str) -> Vec<u8> {
    common::fixture("frags", program, &[])
}

fn probe(off: u32, len: u32, tail: i32, size: usize) -> Vec<u8> {
    let mut p = vec![0u8; 14];
    p[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    p.extend_from_slice(&off.to_le_bytes());
    p.extend_from_slice(&len.to_le_bytes());
    p.extend_from_slice(&tail.to_le_bytes());
    p.extend_from_slice(&[0; 4]);
    p.extend_from_slice(&[0xee; 32]);
    let mut x = size as u32 ^ off;
    while p.len() < size {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        p.push((x >> 16) as u8);
    }
    p
}

fn packets() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for size in [64usize, 65, 200, 1500, 3000, 3520] {
        for off in [0u32, 1, 13, 63, 64, 100, 1400, 1499, 3000, 3519, 0xffff, 0x1_0000, u32::MAX] {
            for len in [1u32, 8, 63] {
                for tail in [0i32, -1, -50, 4, 100, 1000, -10_000, 10_000] {
                    if (i64::from(off) + i64::from(len) + i64::from(tail)) % 5 == 0 || tail == 0 {
                        v.push(probe(off, len, tail, size));
                    }
                }
            }
        }
    }
    v
}

fn check(program: &str) -> [usize; 6] {
    common::check(&object(program), program, &packets(), |_| {}).0
}

#[test]
fn frags_helpers_on_linear_frames_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let v = check("frags");
    // Tail moves that fit (XDP_TX) and that do not (XDP_PASS) both occur.
    assert!(v[3] > 0 && v[2] > 0, "{v:?}");
}

#[test]
fn the_same_helpers_in_a_plain_xdp_program_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let v = check("linear");
    assert!(v[3] > 0 && v[2] > 0, "{v:?}");
}
