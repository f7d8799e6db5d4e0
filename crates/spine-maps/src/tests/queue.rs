//! Queue and stack maps: the program-side operations and concurrent workers. (Their
//! user-side behaviour is compared with the kernel's in `tests/kernel_queue.rs`.)

use std::collections::HashSet;
use std::sync::Arc;

use spine_abi::map_flags as mf;
use spine_abi::map_type::{ARRAY, QUEUE, STACK};
use spine_abi::update_flags::{ANY, EXIST, NOEXIST};

use super::{errno, map};

#[test]
fn a_queue_is_fifo_and_a_stack_lifo_with_the_kernels_errors() {
    for (t, order) in [(QUEUE, [1u32, 2, 3]), (STACK, [3, 2, 1])] {
        let m = map(t, 0, 4, 3, 0, 1);
        let mut out = [0xffu8; 4];
        assert_eq!(errno(m.pop_or_peek(&mut out, false)), -2, "empty peek");
        assert_eq!(out, [0; 4], "an empty peek zeroes the buffer, as the kernel");
        for v in 1u32..=3 {
            m.push(&v.to_ne_bytes(), ANY).unwrap();
        }
        assert_eq!(errno(m.push(&9u32.to_ne_bytes(), ANY)), -7, "full: E2BIG");
        assert_eq!(errno(m.push(&9u32.to_ne_bytes(), NOEXIST)), -22);
        assert_eq!(errno(m.push(&9u32.to_ne_bytes(), EXIST | 4)), -22);
        m.pop_or_peek(&mut out, false).unwrap();
        assert_eq!(u32::from_ne_bytes(out), order[0], "peek");
        for want in order {
            m.pop_or_peek(&mut out, true).unwrap();
            assert_eq!(u32::from_ne_bytes(out), want);
        }
        assert_eq!(errno(m.pop_or_peek(&mut out, true)), -2, "empty pop");
        assert!(m.is_empty());
        // BPF_EXIST on a full map drops the oldest element (a stack's bottom one).
        for v in 1u32..=4 {
            m.push(&v.to_ne_bytes(), EXIST).unwrap();
        }
        assert_eq!(m.len(), 3);
        let got: Vec<u32> = (0..3)
            .map(|_| {
                m.pop_or_peek(&mut out, true).unwrap();
                u32::from_ne_bytes(out)
            })
            .collect();
        let want = if t == QUEUE { vec![2, 3, 4] } else { vec![4, 3, 2] };
        assert_eq!(got, want, "type {t}");
        // No keys: lookup, update and delete with a key are not queue operations.
        assert!(m.lookup(&[], 0).is_none());
        assert_eq!(errno(m.update(&[], &[0; 4], 0, 0)), -22);
        assert_eq!(errno(m.delete(&[], 0)), -22);
        assert_eq!(errno(m.delete_user(&[])), -22);
        assert!(m.value_spans().is_empty(), "programs never address the elements");
    }
    let ro = map(QUEUE, 0, 4, 3, mf::RDONLY_PROG, 1);
    assert_eq!(errno(ro.push(&[0; 4], 0)), -1);
    assert_eq!(errno(ro.pop_or_peek(&mut [0; 4], true)), -1);
    assert_eq!(errno(ro.pop_or_peek(&mut [0; 4], false)), -2, "peeking is reading");
    let array = map(ARRAY, 4, 4, 3, 0, 1);
    assert_eq!(errno(array.push(&[0; 4], 0)), -22);
    assert_eq!(errno(array.pop_or_peek(&mut [0; 4], true)), -22);
    assert_eq!(errno(array.lookup_and_delete_user(&0u32.to_ne_bytes(), &mut [0; 4], 0)), -524);
}

#[test]
fn workers_pushing_and_popping_at_once_lose_and_duplicate_nothing() {
    // Four threads each push their own 2,000 distinct values and pop as many as they
    // can; every value pushed comes out exactly once (popped by someone or left).
    for t in [QUEUE, STACK] {
        let m = Arc::new(map(t, 0, 8, 64, 0, 4));
        let threads: Vec<_> = (0..4u64)
            .map(|w| {
                let m = m.clone();
                std::thread::spawn(move || {
                    let mut popped = Vec::new();
                    let mut out = [0u8; 8];
                    for i in 0..2000u64 {
                        let v = (w << 32 | i).to_ne_bytes();
                        while m.push(&v, ANY).is_err() {
                            if m.pop_or_peek(&mut out, true).is_ok() {
                                popped.push(u64::from_ne_bytes(out));
                            }
                        }
                        if i % 2 == 0 && m.pop_or_peek(&mut out, true).is_ok() {
                            popped.push(u64::from_ne_bytes(out));
                        }
                    }
                    popped
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for th in threads {
            for v in th.join().unwrap() {
                assert!(seen.insert(v), "{v:#x} popped twice");
            }
        }
        let mut out = [0u8; 8];
        while m.pop_or_peek(&mut out, true).is_ok() {
            assert!(seen.insert(u64::from_ne_bytes(out)), "left twice");
        }
        assert_eq!(seen.len(), 4 * 2000, "type {t}");
    }
}
