//! Random sequences of pool operations checked against a model: reference counts,
//! contents, lending and reclaiming, exhaustion, and no leak once everything is freed.

use proptest::prelude::*;
use spine_pool::{Buf, Pool, PoolCache, PoolConfig, PoolError};

const CAPACITY: u32 = 12;

#[derive(Debug, Clone)]
enum Op {
    Alloc { cache: usize },
    Free { cache: usize, pick: usize },
    Share { pick: usize },
    Write { pick: usize, byte: u8 },
    Lend { pick: usize },
    Reclaim { pick: usize, within: u64 },
    ReclaimBogus { offset: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..2usize).prop_map(|cache| Op::Alloc { cache }),
        3 => (0..2usize, any::<usize>()).prop_map(|(cache, pick)| Op::Free { cache, pick }),
        1 => any::<usize>().prop_map(|pick| Op::Share { pick }),
        2 => (any::<usize>(), any::<u8>()).prop_map(|(pick, byte)| Op::Write { pick, byte }),
        1 => any::<usize>().prop_map(|pick| Op::Lend { pick }),
        1 => (any::<usize>(), 0..2048u64).prop_map(|(pick, within)| Op::Reclaim { pick, within }),
        1 => any::<u64>().prop_map(|offset| Op::ReclaimBogus { offset }),
    ]
}

/// The model: every live handle with the content byte its buffer must hold, and the
/// offsets of lent buffers with theirs.
struct Model {
    live: Vec<(Buf, u8)>,
    lent: Vec<(u64, u8)>,
}

impl Model {
    fn refs(&self, index: u32) -> u32 {
        self.live.iter().filter(|(b, _)| b.index() == index).count() as u32
    }

    fn used(&self) -> usize {
        let mut idx: Vec<u32> = self.live.iter().map(|(b, _)| b.index()).collect();
        idx.sort_unstable();
        idx.dedup();
        idx.len() + self.lent.len()
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let pool = Pool::new(PoolConfig { cache_batch: 3, ..PoolConfig::new(CAPACITY) }).unwrap();
    let lender = pool.new_lender();
    let mut caches: [PoolCache; 2] = [pool.cache(), pool.cache()];
    let mut m = Model { live: Vec::new(), lent: Vec::new() };
    for op in ops {
        match op {
            Op::Alloc { cache } => match caches[cache].alloc() {
                Some(mut b) => {
                    prop_assert!(m.refs(b.index()) == 0, "handed out a buffer in use");
                    prop_assert!(!m.lent.iter().any(|(o, _)| *o == pool.offset(&b).unwrap()));
                    prop_assert_eq!(pool.data(&b).unwrap().len(), 0);
                    pool.write(&mut b, &[0u8; 4]).unwrap();
                    m.live.push((b, 0));
                }
                None => {
                    let other = caches[1 - cache].cached();
                    prop_assert_eq!(m.used() + other, CAPACITY as usize, "None with room left");
                }
            },
            Op::Free { cache, pick } if !m.live.is_empty() => {
                let (b, _) = m.live.swap_remove(pick % m.live.len());
                caches[cache].free(b).unwrap();
            }
            Op::Share { pick } if !m.live.is_empty() => {
                let i = pick % m.live.len();
                let (b, byte) = &m.live[i];
                let s = pool.share(b).unwrap();
                let byte = *byte;
                m.live.push((s, byte));
            }
            Op::Write { pick, byte } if !m.live.is_empty() => {
                let i = pick % m.live.len();
                let index = m.live[i].0.index();
                let shared = m.refs(index) > 1;
                let res = pool.data_mut(&mut m.live[i].0).map(|d| d.fill(byte));
                if shared {
                    prop_assert!(
                        matches!(res, Err(PoolError::Shared { .. })),
                        "write to a shared buffer"
                    );
                } else {
                    prop_assert!(res.is_ok());
                    m.live[i].1 = byte;
                }
            }
            Op::Lend { pick } if !m.live.is_empty() => {
                let i = pick % m.live.len();
                let (b, byte) = m.live.swap_remove(i);
                let index = b.index();
                let others = m.refs(index);
                match pool.lend(b, lender) {
                    Ok(off) => {
                        prop_assert_eq!(others, 0);
                        m.lent.push((off, byte));
                    }
                    Err(e) => {
                        let why = e.error.to_string();
                        prop_assert!(others > 0, "{}", why);
                        m.live.push((e.buf, byte));
                    }
                }
            }
            Op::Reclaim { pick, within } if !m.lent.is_empty() => {
                let (off, byte) = m.lent.swap_remove(pick % m.lent.len());
                let b = pool.reclaim(off + within, lender).unwrap();
                prop_assert_eq!(pool.offset(&b).unwrap(), off);
                // Reclaiming again is refused and changes nothing.
                prop_assert!(pool.reclaim(off, lender).is_err());
                m.live.push((b, byte));
            }
            Op::ReclaimBogus { offset } => {
                // Only offsets of lent chunks may succeed; the rest must be refused.
                let chunk = offset - offset % 2048;
                let lent = m.lent.iter().position(|(o, _)| *o == chunk);
                match (pool.reclaim(offset, lender), lent) {
                    (Ok(b), Some(i)) => {
                        let (_, byte) = m.lent.swap_remove(i);
                        m.live.push((b, byte));
                    }
                    (Err(_), None) => {}
                    (r, l) => prop_assert!(false, "reclaim {offset:#x}: {r:?} with lent {l:?}"),
                }
            }
            _ => {}
        }
        for (b, byte) in &m.live {
            prop_assert_eq!(pool.refs(b).unwrap(), m.refs(b.index()));
            prop_assert!(pool.data(b).unwrap().iter().all(|x| x == byte));
        }
    }
    for (off, _) in std::mem::take(&mut m.lent) {
        let b = pool.reclaim(off, lender).unwrap();
        caches[0].free(b).unwrap();
    }
    for (b, _) in m.live.drain(..) {
        caches[1].free(b).unwrap();
    }
    drop(caches);
    prop_assert_eq!(pool.shared_free(), CAPACITY, "leak: not every buffer came back");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn pool_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        run(ops)?;
    }
}
