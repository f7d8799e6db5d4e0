//! [`Poptrie`] (Asai and Ohara, SIGCOMM 2015): a direct index on the first `S` bits,
//! then 6-bit-stride nodes whose children and leaves are packed and found by
//! popcount, with runs of equal leaves stored once ("leaf compression").
//!
//! A direct-index entry is a leaf (`LEAF | value`) or a node index. A node holds
//! `vector` (bit `c` set: child `c` is a node) and `leafvec` (bit `c` set: a leaf run
//! starts at child `c`); its child nodes sit at `base1..`, its distinct leaves at
//! `base0..`. Lookup cost: one direct-index load, then one 24-byte node per 6 bits
//! past `S` that the table is more specific than, and one leaf.
//!
//! Updates rebuild the smallest region that holds the changed prefix: the deepest node
//! on its path whose stride the prefix ends in (or a run of direct-index entries for a
//! prefix of `S` bits or fewer), from the RIB. Each node remembers the value covering
//! its region (`defaults`, read only by updates), so a rebuild needs no search for it.

use crate::addr::Address;
use crate::lpm::blocks::Blocks;
use crate::lpm::{check_value, some, Lpm, LpmError, Memory, Rib, NONE};
use crate::prefix::Prefix;

const LEAF: u32 = 0x8000_0000;
/// Lookups interleaved by [`Lpm::lookup_batch`] (IPv6).
const LANES: usize = 8;
/// Lookups pipelined by [`Lpm::lookup_batch`] (IPv4); at most 64 (a lane mask).
const PIPE: usize = 32;

/// The lanes set in `mask`, lowest first.
#[inline(always)]
fn lanes(mut mask: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let l = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            l
        })
    })
}

/// Asks the processor to bring `v`'s cache line in (a hint: no fault, no effect on
/// what the program computes).
#[inline(always)]
fn prefetch<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    #[expect(unsafe_code, reason = "the prefetch intrinsic takes a raw pointer")]
    // SAFETY: a prefetch never faults and reads nothing the program sees; the pointer
    // comes from a reference, so it is valid anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (v as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}

#[derive(Debug, Clone, Copy, Default)]
struct Node {
    vector: u64,
    leafvec: u64,
    base0: u32,
    base1: u32,
}

/// Paints the children of a node at bit `pos` with the prefixes `ps` (inside the
/// node, longer than `pos`, RIB order) that end in its stride, and marks in the
/// returned vector the children that hold longer ones, whose run of `ps` goes to
/// `runs`. A covering prefix sorts before everything it covers, so painting in order
/// leaves each child the longest.
fn scan<A: Address>(
    pos: u32,
    ps: &[(A, u32, u32)],
    leaf: &mut [u32; 64],
    runs: &mut [(u32, u32); 64],
) -> u64 {
    let mut vector = 0u64;
    let mut i = 0;
    while i < ps.len() {
        let (a, len, v) = ps[i];
        let c = a.bits(pos, 6) as usize;
        if len <= pos + 6 {
            leaf[c..c + (1 << (pos + 6 - len))].fill(v);
            i += 1;
            continue;
        }
        let start = i;
        while i < ps.len() && ps[i].0.bits(pos, 6) as usize == c {
            i += 1;
        }
        vector |= 1 << c;
        runs[c] = (start as u32, i as u32);
    }
    vector
}

/// Bits `0..c` of a word.
#[inline(always)]
fn below(c: u32) -> u64 {
    (1u64 << c) - 1
}

/// Bits `0..=c` of a word.
#[inline(always)]
fn upto(c: u32) -> u64 {
    u64::MAX >> (63 - c)
}

/// Poptrie over addresses `A` with an `S`-bit direct index (`S <= 24`), allocated
/// with the first prefix (an empty Poptrie costs nothing).
#[derive(Debug, Clone)]
pub struct Poptrie<A: Address, const S: u32> {
    dp: Vec<u32>,
    nodes: Vec<Node>,
    /// Per node slot: the value covering the node's whole region (update-only).
    defaults: Vec<u32>,
    leaves: Vec<u32>,
    node_blocks: Blocks,
    leaf_blocks: Blocks,
    rib: Rib<A>,
    /// Whether the CPU has `popcnt` (x86-64), detected once when the trie is made so
    /// that a lookup tests a field of the trie it reads anyway, not the feature cache.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    popcnt: bool,
}

/// What one step of a lookup found.
#[derive(Clone, Copy)]
enum Step {
    Node(u32),
    Value(u32),
}

impl<A: Address, const S: u32> Poptrie<A, S> {
    #[inline(always)]
    fn step(&self, idx: u32, addr: A, pos: u32) -> Step {
        let n = &self.nodes[idx as usize];
        let c = addr.bits(pos, 6);
        if n.vector >> c & 1 != 0 {
            Step::Node(n.base1 + (n.vector & below(c)).count_ones())
        } else {
            Step::Value(self.leaves[(n.base0 + (n.leafvec & upto(c)).count_ones() - 1) as usize])
        }
    }

    /// The walk below a direct-index entry that names node `idx`.
    #[inline(always)]
    fn walk(&self, idx: u32, addr: A) -> u32 {
        self.walk_from(idx, addr, S)
    }

    /// The walk from node `idx`, which splits on bits `pos..pos + 6`.
    #[inline(always)]
    fn walk_from(&self, mut idx: u32, addr: A, mut pos: u32) -> u32 {
        loop {
            match self.step(idx, addr, pos) {
                Step::Node(next) => {
                    idx = next;
                    pos += 6;
                }
                Step::Value(v) => return v,
            }
        }
    }

    #[inline(always)]
    fn find_generic(&self, addr: A) -> u32 {
        // An empty structure has no direct index yet (allocated on first update).
        let e = self.dp.get(addr.bits(0, S) as usize).copied().unwrap_or(LEAF | NONE);
        if e & LEAF != 0 {
            return e & !LEAF;
        }
        self.walk(e, addr)
    }

    /// IPv4 lookups of a burst as a pipeline of stages over every lane, each stage
    /// prefetching what the next one loads, so that the cache misses of up to
    /// [`PIPE`] lookups overlap instead of the two or three a processor's window
    /// holds: the direct-index entries; then the nodes they name; then one node step
    /// each, which ends at a leaf (prefetched) or, for the few prefixes longer than
    /// `S + 6` bits, a deeper node walked on its own; then the leaves.
    #[inline(always)]
    fn pipeline(&self, addrs: &[A], out: &mut [Option<u32>]) {
        if self.dp.is_empty() {
            out.fill(None);
            return;
        }
        for (addrs, out) in addrs.chunks(PIPE).zip(out.chunks_mut(PIPE)) {
            let mut at = [0u32; PIPE];
            for a in addrs {
                prefetch(&self.dp[a.bits(0, S) as usize]);
            }
            let mut at_node = 0u64;
            for (l, a) in addrs.iter().enumerate() {
                let e = self.dp[a.bits(0, S) as usize];
                if e & LEAF != 0 {
                    out[l] = some(e & !LEAF);
                } else {
                    at[l] = e;
                    at_node |= 1 << l;
                    prefetch(&self.nodes[e as usize]);
                }
            }
            let (mut at_leaf, mut deeper) = (0u64, 0u64);
            for l in lanes(at_node) {
                let n = &self.nodes[at[l] as usize];
                let c = addrs[l].bits(S, 6);
                if n.vector >> c & 1 != 0 {
                    at[l] = n.base1 + (n.vector & below(c)).count_ones();
                    deeper |= 1 << l;
                    prefetch(&self.nodes[at[l] as usize]);
                } else {
                    at[l] = n.base0 + (n.leafvec & upto(c)).count_ones() - 1;
                    at_leaf |= 1 << l;
                    prefetch(&self.leaves[at[l] as usize]);
                }
            }
            for l in lanes(deeper) {
                out[l] = some(self.walk_from(at[l], addrs[l], S + 6));
            }
            for l in lanes(at_leaf) {
                out[l] = some(self.leaves[at[l] as usize]);
            }
        }
    }

    /// Lookups of a burst. IPv4 goes through [`Poptrie::pipeline`]. Deep walks (IPv6)
    /// go in lockstep: every lane takes its next step before any takes two, so the
    /// loads of one step are independent and their cache misses overlap (measured:
    /// 21 -> 29 M/s on the IPv6 table).
    #[inline(always)]
    fn burst_generic(&self, addrs: &[A], out: &mut [Option<u32>]) {
        if A::BITS <= 32 {
            self.pipeline(addrs, out);
            return;
        }
        for (addrs, out) in addrs.chunks(LANES).zip(out.chunks_mut(LANES)) {
            let mut idx = [0u32; LANES];
            let mut live = 0u32;
            for (l, a) in addrs.iter().enumerate() {
                let e = self.dp.get(a.bits(0, S) as usize).copied().unwrap_or(LEAF | NONE);
                if e & LEAF != 0 {
                    out[l] = some(e & !LEAF);
                } else {
                    idx[l] = e;
                    live |= 1 << l;
                }
            }
            let mut pos = S;
            while live != 0 {
                for (l, a) in addrs.iter().enumerate() {
                    if live >> l & 1 == 0 {
                        continue;
                    }
                    match self.step(idx[l], *a, pos) {
                        Step::Node(next) => idx[l] = next,
                        Step::Value(v) => {
                            out[l] = some(v);
                            live &= !(1 << l);
                        }
                    }
                }
                pos += 6;
            }
        }
    }

    #[inline]
    fn find(&self, addr: A) -> u32 {
        #[cfg(target_arch = "x86_64")]
        if self.popcnt {
            return popcnt::find(self, addr);
        }
        self.find_generic(addr)
    }

    /// Frees the blocks below node `n` (not `n`'s own slot).
    fn free_below(&mut self, n: Node) {
        let leaves = n.leafvec.count_ones() as usize;
        self.leaf_blocks.free(n.base0, leaves);
        let kids = n.vector.count_ones();
        for k in 0..kids {
            let child = self.nodes[(n.base1 + k) as usize];
            self.free_below(child);
        }
        self.node_blocks.free(n.base1, kids as usize);
    }

    fn alloc_nodes(&mut self, n: usize) -> u32 {
        let start = self.node_blocks.alloc(&mut self.nodes, n, Node::default());
        if self.defaults.len() < self.nodes.len() {
            self.defaults.resize(self.nodes.len(), NONE);
        }
        start
    }

    /// Builds the node for the region at bit `pos` whose prefixes (all longer than
    /// `pos`, in RIB order) are `ps` and whose covering value is `inherited`.
    fn build_node(&mut self, pos: u32, ps: &[(A, u32, u32)], inherited: u32) -> Node {
        let mut leaf = [inherited; 64];
        let mut runs = [(0u32, 0u32); 64];
        let vector = scan(pos, ps, &mut leaf, &mut runs);
        let mut kids = [None::<(Node, u32)>; 64];
        for c in 0..64 {
            if vector >> c & 1 != 0 {
                let (s, e) = runs[c];
                kids[c] =
                    Some((self.build_node(pos + 6, &ps[s as usize..e as usize], leaf[c]), leaf[c]));
            }
        }
        self.assemble(&leaf, &kids)
    }

    /// Rebuilds direct-index entries `d0..d0 + count`, a region whose prefixes are
    /// `ps` (RIB order) and whose covering value is `inherited`.
    fn build_dp(&mut self, d0: usize, count: usize, ps: &[(A, u32, u32)], inherited: u32) {
        for d in d0..d0 + count {
            let e = self.dp[d];
            if e & LEAF == 0 {
                let n = self.nodes[e as usize];
                self.free_below(n);
                self.node_blocks.free(e, 1);
            }
            self.dp[d] = LEAF | inherited;
        }
        let mut i = 0;
        while i < ps.len() {
            let (a, len, v) = ps[i];
            let d = a.bits(0, S) as usize;
            if len <= S {
                self.dp[d..d + (1 << (S - len))].fill(LEAF | v);
                i += 1;
                continue;
            }
            let start = i;
            while i < ps.len() && ps[i].0.bits(0, S) as usize == d {
                i += 1;
            }
            let cover = self.dp[d] & !LEAF;
            let node = self.build_node(S, &ps[start..i], cover);
            let idx = self.alloc_nodes(1);
            self.nodes[idx as usize] = node;
            self.defaults[idx as usize] = cover;
            self.dp[d] = idx;
        }
    }

    fn ensure_dp(&mut self) {
        if self.dp.is_empty() {
            self.dp = vec![LEAF | NONE; 1 << S];
        }
    }

    /// Brings the region `p` lies in up to date with the RIB.
    fn refresh(&mut self, p: Prefix<A>) {
        self.ensure_dp();
        let len = p.len();
        let d = p.addr().bits(0, S) as usize;
        if len <= S {
            let cover = if len == 0 { NONE } else { self.rib.covering(p.addr(), len - 1) };
            let ps: Vec<_> = self.rib.inside(p.addr(), len, p.last()).collect();
            self.build_dp(d, 1 << (S - len), &ps, cover);
            return;
        }
        let e = self.dp[d];
        if e & LEAF != 0 {
            let start = p.addr().mask(S);
            let ps: Vec<_> = self.rib.inside(start, S + 1, start.last_of(S)).collect();
            self.build_dp(d, 1, &ps, e & !LEAF);
            return;
        }
        let (mut idx, mut pos) = (e, S);
        while len > pos + 6 {
            match self.step(idx, p.addr(), pos) {
                Step::Node(next) => {
                    idx = next;
                    pos += 6;
                }
                Step::Value(_) => break,
            }
        }
        self.rebuild_children(idx, pos, p);
    }

    /// Rebuilds the children of node `idx` (at bit `pos`) that `p` covers, or the one
    /// it lies in; the other children, and their subtrees, stay as they are.
    fn rebuild_children(&mut self, idx: u32, pos: u32, p: Prefix<A>) {
        let old = self.nodes[idx as usize];
        let cover = self.defaults[idx as usize];
        let c0 = p.addr().bits(pos, 6) as usize;
        let c1 = if p.len() <= pos + 6 { c0 + (1 << (pos + 6 - p.len())) } else { c0 + 1 };
        let mut leaf = [NONE; 64];
        let mut kids = [None::<(Node, u32)>; 64];
        for (c, (l, k)) in leaf.iter_mut().zip(kids.iter_mut()).enumerate() {
            let c = c as u32;
            if old.vector >> c & 1 != 0 {
                let at = (old.base1 + (old.vector & below(c)).count_ones()) as usize;
                *k = Some((self.nodes[at], self.defaults[at]));
            } else {
                *l = self.leaves[(old.base0 + (old.leafvec & upto(c)).count_ones() - 1) as usize];
            }
        }
        for k in kids[c0..c1].iter_mut() {
            if let Some((n, _)) = k.take() {
                self.free_below(n);
            }
        }
        self.node_blocks.free(old.base1, old.vector.count_ones() as usize);
        self.leaf_blocks.free(old.base0, old.leafvec.count_ones() as usize);
        // The range rebuilt: `p`'s own, or the one child it lies in.
        let (start, len) = if p.len() <= pos + 6 {
            (p.addr(), p.len())
        } else {
            (p.addr().with_bits(pos, 6, c0 as u32), (pos + 6).min(A::BITS))
        };
        // Its covering value: a prefix ending in this stride, else the node's.
        let base = (pos + 1..=len)
            .rev()
            .find_map(|l| self.rib.get(Prefix::truncating(start, l).expect("l <= BITS")))
            .unwrap_or(cover);
        leaf[c0..c1].fill(base);
        let ps: Vec<_> = self.rib.inside(start, len + 1, start.last_of(len)).collect();
        let mut runs = [(0u32, 0u32); 64];
        let vector = scan(pos, &ps, &mut leaf, &mut runs);
        for c in c0..c1 {
            if vector >> c & 1 != 0 {
                let (s, e) = runs[c];
                kids[c] =
                    Some((self.build_node(pos + 6, &ps[s as usize..e as usize], leaf[c]), leaf[c]));
            }
        }
        let node = self.assemble(&leaf, &kids);
        self.nodes[idx as usize] = node;
    }

    /// A node from its 64 children: leaf values, and nodes (with their covering
    /// values) where `kids` has one.
    fn assemble(&mut self, leaf: &[u32; 64], kids: &[Option<(Node, u32)>; 64]) -> Node {
        let mut vector = 0u64;
        for (c, k) in kids.iter().enumerate() {
            if k.is_some() {
                vector |= 1 << c;
            }
        }
        let n = vector.count_ones() as usize;
        let base1 = if n > 0 { self.alloc_nodes(n) } else { 0 };
        for (i, (node, default)) in kids.iter().flatten().enumerate() {
            self.nodes[base1 as usize + i] = *node;
            self.defaults[base1 as usize + i] = *default;
        }
        let mut leafvec = 0u64;
        let mut vals = [0u32; 64];
        let mut nvals = 0;
        let mut prev = None;
        for (c, &v) in leaf.iter().enumerate() {
            if vector >> c & 1 == 0 && prev != Some(v) {
                leafvec |= 1 << c;
                vals[nvals] = v;
                nvals += 1;
                prev = Some(v);
            }
        }
        let base0 = if nvals > 0 {
            let b = self.leaf_blocks.alloc(&mut self.leaves, nvals, NONE);
            self.leaves[b as usize..b as usize + nvals].copy_from_slice(&vals[..nvals]);
            b
        } else {
            0
        };
        Node { vector, leafvec, base0, base1 }
    }

    fn rebuild_all(&mut self) {
        self.nodes.clear();
        self.defaults.clear();
        self.leaves.clear();
        self.node_blocks = Blocks::default();
        self.leaf_blocks = Blocks::default();
        self.ensure_dp();
        self.dp.fill(LEAF | NONE);
        let ps: Vec<_> = self.rib.inside(A::ZERO, 0, A::ZERO.last_of(0)).collect();
        self.build_dp(0, self.dp.len(), &ps, NONE);
    }
}

impl<A: Address, const S: u32> Lpm<A> for Poptrie<A, S> {
    const NAME: &'static str = "poptrie";

    fn new() -> Self {
        assert!(S <= 24 && S <= A::BITS, "direct index of {S} bits");
        Poptrie {
            dp: Vec::new(),
            nodes: Vec::new(),
            defaults: Vec::new(),
            leaves: Vec::new(),
            node_blocks: Blocks::default(),
            leaf_blocks: Blocks::default(),
            rib: Rib::default(),
            popcnt: popcnt_available(),
        }
    }

    #[inline]
    fn lookup(&self, addr: A) -> Option<u32> {
        some(self.find(addr))
    }

    fn lookup_batch(&self, addrs: &[A], out: &mut [Option<u32>]) {
        #[cfg(target_arch = "x86_64")]
        if self.popcnt {
            return popcnt::burst(self, addrs, out);
        }
        self.burst_generic(addrs, out)
    }

    fn insert(&mut self, prefix: Prefix<A>, value: u32) -> Result<Option<u32>, LpmError> {
        check_value(value)?;
        let old = self.rib.insert(prefix, value);
        if old != Some(value) {
            self.refresh(prefix);
        }
        Ok(old)
    }

    fn remove(&mut self, prefix: Prefix<A>) -> Option<u32> {
        let old = self.rib.remove(prefix)?;
        self.refresh(prefix);
        Some(old)
    }

    fn extend(
        &mut self,
        entries: impl IntoIterator<Item = (Prefix<A>, u32)>,
    ) -> Result<(), LpmError> {
        let entries: Vec<_> = entries.into_iter().collect();
        if let Some(&(_, v)) = entries.iter().find(|(_, v)| *v > crate::lpm::MAX_VALUE) {
            return Err(LpmError::ValueTooLarge(v));
        }
        for (p, v) in entries {
            self.rib.insert(p, v);
        }
        self.rebuild_all();
        Ok(())
    }

    fn rib(&self) -> &Rib<A> {
        &self.rib
    }

    fn memory(&self) -> Memory {
        Memory {
            lookup: self.dp.len() * 4
                + self.nodes.len() * std::mem::size_of::<Node>()
                + self.leaves.len() * 4,
            update: self.defaults.len() * 4
                + self.rib.bytes()
                + self.node_blocks.bytes()
                + self.leaf_blocks.bytes(),
        }
    }
}

/// Whether the lookups compiled for `popcnt` may run here (`Poptrie::popcnt`).
fn popcnt_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    return popcnt::available();
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The lookups compiled for CPUs with `popcnt` (every x86-64 since 2008, but not the
/// baseline target), chosen at run time: Poptrie's two popcounts per node otherwise
/// become a dozen instructions each.
#[cfg(target_arch = "x86_64")]
#[expect(unsafe_code, reason = "calling functions compiled for a detected CPU feature")]
mod popcnt {
    use super::*;

    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("popcnt")
    }

    pub(super) fn find<A: Address, const S: u32>(t: &Poptrie<A, S>, addr: A) -> u32 {
        // SAFETY: callers checked `t.popcnt`, set from `available()` when `t` was
        // made in this process: the CPU has `popcnt`.
        unsafe { find_popcnt(t, addr) }
    }

    pub(super) fn burst<A: Address, const S: u32>(
        t: &Poptrie<A, S>,
        addrs: &[A],
        out: &mut [Option<u32>],
    ) {
        // SAFETY: callers checked `t.popcnt`, set from `available()` when `t` was
        // made in this process: the CPU has `popcnt`.
        unsafe { burst_popcnt(t, addrs, out) }
    }

    #[target_feature(enable = "popcnt")]
    fn find_popcnt<A: Address, const S: u32>(t: &Poptrie<A, S>, addr: A) -> u32 {
        t.find_generic(addr)
    }

    #[target_feature(enable = "popcnt")]
    fn burst_popcnt<A: Address, const S: u32>(
        t: &Poptrie<A, S>,
        addrs: &[A],
        out: &mut [Option<u32>],
    ) {
        t.burst_generic(addrs, out)
    }
}
