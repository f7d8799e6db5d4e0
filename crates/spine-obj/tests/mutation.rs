//! Random byte mutations, truncations and splices of the compiled fixtures: `parse`
//! must return (never panic), and whatever it accepts must still honour the loader's
//! guarantees (every reference resolved inside the object).

mod common;

use std::collections::HashSet;

use common::elf_builder::{get_u64, shdr};
use common::{fixture, FIXTURES};
use proptest::prelude::*;
use proptest::sample::Index;
use spine_isa::op;
use spine_obj::{MapOrigin, Object, SlotTarget, MAX_INSNS, MAX_TOTAL_INSNS};

/// Fixture bytes and the byte ranges worth aiming at: the ELF header, the section
/// header table and every section's data (symbols, relocations, BTF, code, maps).
struct Target {
    bytes: Vec<u8>,
    regions: Vec<(usize, usize)>,
}

fn targets() -> Vec<Target> {
    FIXTURES
        .iter()
        .map(|name| {
            let (_, bytes) = fixture(name);
            let shnum = u16::from_le_bytes([bytes[60], bytes[61]]) as usize;
            let mut regions = vec![(0, 64), (shdr(&bytes, 0), 64 * shnum)];
            for i in 1..shnum {
                let h = shdr(&bytes, i);
                let (off, size) =
                    (get_u64(&bytes, h + 24) as usize, get_u64(&bytes, h + 32) as usize);
                if size > 0 && off + size <= bytes.len() {
                    regions.push((off, size));
                }
            }
            Target { bytes, regions }
        })
        .collect()
}

/// Values that sit on the boundaries parsers get wrong.
const INTERESTING: &[u64] = &[
    0,
    1,
    2,
    3,
    4,
    7,
    8,
    12,
    16,
    24,
    63,
    64,
    0x7f,
    0x80,
    0xff,
    0x100,
    0xfff1,
    0xfff2,
    0xff00,
    0xffff,
    0x1_0000,
    0x7fff_ffff,
    0x8000_0000,
    0xffff_ffff,
    0x1_0000_0000,
    u64::MAX / 2,
    u64::MAX,
];

#[derive(Debug, Clone)]
enum Mutation {
    /// Overwrite one byte anywhere.
    Byte(Index, u8),
    /// Write a boundary value (1, 2, 4 or 8 bytes wide) inside a chosen region.
    Field { region: Index, at: Index, width: u8, value: Index },
    /// Flip one bit inside a chosen region.
    Flip { region: Index, at: Index, bit: u8 },
    /// Copy bytes from one place (possibly of another fixture) over another.
    Splice { from: Index, src: Index, dst: Index, len: usize },
    /// Cut the file short.
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (any::<Index>(), any::<u8>()).prop_map(|(a, v)| Mutation::Byte(a, v)),
        5 => (any::<Index>(), any::<Index>(), prop::sample::select(vec![1u8, 2, 4, 8]), any::<Index>())
            .prop_map(|(region, at, width, value)| Mutation::Field { region, at, width, value }),
        3 => (any::<Index>(), any::<Index>(), 0u8..8)
            .prop_map(|(region, at, bit)| Mutation::Flip { region, at, bit }),
        1 => (any::<Index>(), any::<Index>(), any::<Index>(), 1usize..256)
            .prop_map(|(from, src, dst, len)| Mutation::Splice { from, src, dst, len }),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation, me: &Target, all: &[Target]) {
    if bytes.is_empty() {
        return;
    }
    let in_region = |region: &Index, at: &Index| {
        let (off, size) = me.regions[region.index(me.regions.len())];
        off + at.index(size)
    };
    match m {
        Mutation::Byte(at, v) => {
            let i = at.index(bytes.len());
            bytes[i] = *v;
        }
        Mutation::Field { region, at, width, value } => {
            let i = in_region(region, at);
            let v = INTERESTING[value.index(INTERESTING.len())].to_le_bytes();
            for (k, b) in v.iter().take(*width as usize).enumerate() {
                if let Some(slot) = bytes.get_mut(i + k) {
                    *slot = *b;
                }
            }
        }
        Mutation::Flip { region, at, bit } => {
            let i = in_region(region, at);
            if let Some(b) = bytes.get_mut(i) {
                *b ^= 1 << bit;
            }
        }
        Mutation::Splice { from, src, dst, len } => {
            let other = &all[from.index(all.len())].bytes;
            let s = src.index(other.len());
            let d = dst.index(bytes.len());
            let n = (*len).min(other.len() - s).min(bytes.len() - d);
            bytes[d..d + n].copy_from_slice(&other[s..s + n]);
        }
        Mutation::Truncate(to) => {
            let n = to.index(bytes.len());
            bytes.truncate(n);
        }
    }
}

/// What every accepted object guarantees, however odd its input.
fn check_invariants(obj: &Object) {
    let names: HashSet<&str> = obj.programs.iter().map(|p| p.name.as_str()).collect();
    let mut total = 0;
    for p in &obj.programs {
        total += p.insns.len();
        assert!(p.insns.len() <= MAX_INSNS);
        assert_eq!(p.functions.first().map(|f| (f.0, f.1.as_str())), Some((0, p.name.as_str())));
        assert!(p.functions.windows(2).all(|w| w[0].0 < w[1].0), "function slots ascend");
        assert!(p.functions.last().unwrap().0 < p.insns.len());
        let starts: HashSet<usize> = p.functions.iter().map(|f| f.0).collect();
        let mut pc = 0;
        while pc < p.insns.len() {
            let i = p.insns[pc];
            let target = pc as i64 + 1 + i64::from(i.imm);
            if i.is_lddw() {
                assert!(pc + 1 < p.insns.len(), "{}: lddw at the end", p.name);
                match i.src {
                    op::PSEUDO_MAP_FD => assert!((i.imm as usize) < obj.maps.len()),
                    op::PSEUDO_MAP_VALUE => {
                        let m = &obj.maps[i.imm as usize];
                        assert!(matches!(m.origin, MapOrigin::GlobalData { .. }));
                        assert!((p.insns[pc + 1].imm as u32) < m.value_size);
                    }
                    op::PSEUDO_FUNC => assert!(starts.contains(&(target as usize)) && target >= 0),
                    src => assert_eq!(src, op::PSEUDO_NONE),
                }
                pc += 2;
                continue;
            }
            if i.is_local_call() {
                assert!(
                    target >= 0 && starts.contains(&(target as usize)),
                    "{}: call {pc}",
                    p.name
                );
            }
            pc += 1;
        }
    }
    assert!(total <= MAX_TOTAL_INSNS);
    for m in &obj.maps {
        if let MapOrigin::GlobalData { .. } = m.origin {
            assert_eq!(m.initial.as_ref().map(Vec::len), Some(m.value_size as usize));
        }
        for (slot, t) in &m.init_slots {
            assert!(*slot < m.max_entries);
            match t {
                SlotTarget::Map(i) => assert!(*i < obj.maps.len()),
                SlotTarget::Program(n) => assert!(names.contains(n.as_str())),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 20_000, ..ProptestConfig::default() })]

    #[test]
    fn mutated_objects_never_panic(
        which in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..8),
    ) {
        let all = targets_cached();
        let me = &all[which.index(all.len())];
        let mut bytes = me.bytes.clone();
        for m in &mutations {
            apply(&mut bytes, m, me, all);
        }
        if let Ok(obj) = spine_obj::parse(&bytes) {
            check_invariants(&obj);
        }
    }

}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn every_truncation_and_header_splice_is_refused_cleanly(
        which in any::<Index>(),
        cut in any::<Index>(),
        from in any::<Index>(),
        src in any::<Index>(),
    ) {
        let all = targets_cached();
        let me = &all[which.index(all.len())];
        let n = cut.index(me.bytes.len());
        prop_assert!(spine_obj::parse(&me.bytes[..n]).is_err());
        // A section header of another fixture pasted over one of ours.
        let other = &all[from.index(all.len())].bytes;
        let ours = (shdr(&me.bytes, 0), u16::from_le_bytes([me.bytes[60], me.bytes[61]]) as usize);
        let theirs = (shdr(other, 0), u16::from_le_bytes([other[60], other[61]]) as usize);
        let s = theirs.0 + 64 * src.index(theirs.1);
        let d = ours.0 + 64 * cut.index(ours.1);
        let mut bytes = me.bytes.clone();
        bytes[d..d + 64].copy_from_slice(&other[s..s + 64]);
        if let Ok(obj) = spine_obj::parse(&bytes) {
            check_invariants(&obj);
        }
    }
}

fn targets_cached() -> &'static [Target] {
    static T: std::sync::OnceLock<Vec<Target>> = std::sync::OnceLock::new();
    T.get_or_init(targets)
}

#[test]
fn unmutated_fixtures_satisfy_the_invariants() {
    for t in targets_cached() {
        check_invariants(&spine_obj::parse(&t.bytes).unwrap());
    }
}
