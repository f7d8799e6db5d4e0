//! [`Rib`]: the prefixes an LPM holds, sorted by (address, length), so that the
//! prefixes inside any prefix form one contiguous range and a covering prefix always
//! comes before the prefixes it covers. The structures rebuild regions from it.

use std::collections::BTreeMap;

use crate::addr::Address;
use crate::lpm::NONE;
use crate::prefix::Prefix;

#[derive(Debug, Clone)]
pub struct Rib<A: Address> {
    map: BTreeMap<(A, u8), u32>,
    /// Prefixes per length, so a covering search skips absent lengths.
    per_len: Vec<u32>,
}

impl<A: Address> Default for Rib<A> {
    fn default() -> Self {
        Rib { map: BTreeMap::new(), per_len: vec![0; A::BITS as usize + 1] }
    }
}

impl<A: Address> Rib<A> {
    pub fn insert(&mut self, p: Prefix<A>, v: u32) -> Option<u32> {
        let old = self.map.insert((p.addr(), p.len() as u8), v);
        if old.is_none() {
            self.per_len[p.len() as usize] += 1;
        }
        old
    }

    pub fn remove(&mut self, p: Prefix<A>) -> Option<u32> {
        let old = self.map.remove(&(p.addr(), p.len() as u8));
        if old.is_some() {
            self.per_len[p.len() as usize] -= 1;
        }
        old
    }

    pub fn get(&self, p: Prefix<A>) -> Option<u32> {
        self.map.get(&(p.addr(), p.len() as u8)).copied()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every prefix in (address, length) order.
    pub fn iter(&self) -> impl Iterator<Item = (Prefix<A>, u32)> + '_ {
        self.map.iter().map(|(&(a, l), &v)| (Prefix::truncating(a, l as u32).expect("stored"), v))
    }

    /// The value of the longest prefix of length at most `max_len` containing `addr`,
    /// or [`NONE`].
    pub(crate) fn covering(&self, addr: A, max_len: u32) -> u32 {
        for len in (0..=max_len).rev() {
            if self.per_len[len as usize] == 0 {
                continue;
            }
            if let Some(&v) = self.map.get(&(addr.mask(len), len as u8)) {
                return v;
            }
        }
        NONE
    }

    /// The prefixes inside `[start, last]` whose length is at least `min_len`, where
    /// `start/min_len` is a prefix and `last` its last address, in (address, length)
    /// order. No shorter prefix can start inside that range, so the range is exact.
    pub(crate) fn inside(
        &self,
        start: A,
        min_len: u32,
        last: A,
    ) -> impl Iterator<Item = (A, u32, u32)> + '_ {
        self.map
            .range((start, min_len as u8)..=(last, u8::MAX))
            .map(|(&(a, l), &v)| (a, l as u32, v))
    }

    /// A rough size of the B-tree: its entries at two-thirds occupancy, plus the edges.
    pub(crate) fn bytes(&self) -> usize {
        let entry = std::mem::size_of::<(A, u8)>() + 4;
        self.map.len() * entry * 3 / 2 + self.per_len.len() * 4
    }
}
