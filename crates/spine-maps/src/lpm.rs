//! `BPF_MAP_TYPE_LPM_TRIE` (`kernel/bpf/lpm_trie.c`): the kernel's path-compressed
//! binary trie, node for node, so lookups, errors and `next_key` order (post-order:
//! more specific prefixes first) are the kernel's.
//!
//! Keys are `struct bpf_lpm_trie_key_u8`: a native-endian `u32` prefix length and
//! `key_size - 4` data bytes, most significant bit first. Data bits past the prefix are
//! stored as given (the kernel does not mask them, and `next_key` returns them).
//! `update` fails with `ENOSPC` when `max_entries` real entries exist and with `EINVAL`
//! for a prefix length beyond `8 * (key_size - 4)`; a lookup with such a length finds
//! nothing.
//!
//! Storage: a pool of `2 * max_entries + 1` nodes (entries plus the intermediate nodes,
//! which never outnumber them, plus one node in flight), reserved at creation and
//! committed on first use (the kernel requires `BPF_F_NO_PREALLOC` here). Writers take
//! the trie's lock, as in the kernel. Readers take none: every link carries the target
//! node's generation, bumped when the node is freed, and a reader that finds a node's
//! generation changed under it restarts from the root (where the kernel relies on RCU
//! to delay the free). IPv4 and IPv6 tries (4- and 16-byte data) of `lpm_index_at`
//! entries or more also answer full-length lookups from a Poptrie index
//! (`lpm_index`), with the same results. A value pointer handed to a program stays inside the map's value
//! memory, though its node may be deleted and reused meanwhile, as in the hash maps.

use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};

use spine_abi::update_flags::{EXIST, NOEXIST};

use crate::def::{round8, MapDef};
use crate::lpm_index::{self, IndexReader, IndexWriter};
use crate::storage::{zeroed_slice, Arena};
use crate::MapError;

/// `LPM_TREE_NODE_FLAG_IM`: an intermediate node, holding no entry.
const IM: u32 = 1;

/// A link: the node's generation in the high half and its index + 1 in the low half;
/// 0 is "no node", so zeroed memory is an empty trie.
type Link = u64;
const NONE: Link = 0;

const fn link(idx: u32, gen: u32) -> Link {
    ((gen as u64) << 32) | (idx as u64 + 1)
}

const fn target(l: Link) -> Option<(u32, u32)> {
    match l as u32 {
        0 => None,
        i => Some((i - 1, (l >> 32) as u32)),
    }
}

/// Writer state, behind the trie lock.
#[derive(Debug)]
struct Writer {
    /// Freed nodes (capacity reserved for the whole pool: pushing never allocates).
    free: Vec<u32>,
    /// Nodes never used yet are `bump..pool`.
    bump: u32,
    n_entries: u32,
    /// The lookup index, kept in step with every change once `indexed`.
    index: Option<IndexWriter>,
    /// Entries at which the index is built.
    index_at: u32,
    /// Nodes unlinked by the current operation, freed once the index no longer
    /// names them (capacity reserved: at most two per operation).
    retired: Vec<u32>,
}

/// Where a link lives: the root, or child `bit` of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Root,
    Child(u32, usize),
}

#[derive(Debug)]
pub(crate) struct LpmTrie {
    name: Arc<str>,
    data_size: usize,
    data_words: usize,
    max_prefixlen: u32,
    value_size: usize,
    stride: usize,
    max_entries: u32,
    pool: u32,
    root: AtomicU64,
    /// Two links per node.
    child: Box<[AtomicU64]>,
    prefixlen: Box<[AtomicU32]>,
    flags: Box<[AtomicU32]>,
    gens: Box<[AtomicU32]>,
    data: Box<[AtomicU64]>,
    values: Arena,
    writer: Mutex<Writer>,
    index: Option<IndexReader>,
    /// Set (once) when the index holds every entry and lookups may use it.
    indexed: AtomicBool,
}

/// The prefix length and data of a key of the right size.
fn split_key(key: &[u8]) -> (u32, &[u8]) {
    (u32::from_ne_bytes([key[0], key[1], key[2], key[3]]), &key[4..])
}

fn key_bit(data: &[u8], index: u32) -> usize {
    ((data[index as usize / 8] >> (7 - index % 8)) & 1) as usize
}

impl LpmTrie {
    fn pool_size(def: &MapDef) -> Option<u32> {
        let n = (def.max_entries as u64).checked_mul(2)?.checked_add(1)?;
        // Index + 1 must fit the low half of a link.
        (n < u32::MAX as u64).then_some(n as u32)
    }

    /// Bytes the trie reserves, or `None` if that overflows.
    pub(crate) fn bytes(def: &MapDef) -> Option<u128> {
        let pool = Self::pool_size(def)? as u128;
        let data_words = ((def.key_size - 4) as u128).div_ceil(8);
        let per_node = 16 + 12 + data_words * 8 + round8(def.value_size as u64) as u128 + 4;
        Some(pool * per_node)
    }

    /// A trie as the kernel's; with 4- or 16-byte data it builds the Poptrie index
    /// (see `lpm_index`) once it holds `index_at` entries.
    pub(crate) fn new(def: &MapDef, index_at: Option<u32>) -> Result<LpmTrie, MapError> {
        let too_large = || MapError::TooLarge { map: def.name.clone(), bytes: u64::MAX, limit: 0 };
        let pool = Self::pool_size(def).ok_or_else(too_large)?;
        let data_size = def.key_size as usize - 4;
        let data_words = data_size.div_ceil(8);
        let stride = round8(def.value_size as u64) as usize;
        let n = pool as usize;
        let oom = || MapError::OutOfMemory { map: def.name.clone(), bytes: n as u64 * 32 };
        let values = Arena::new(n * stride, def.value_size as usize, false).ok_or_else(|| {
            MapError::OutOfMemory { map: def.name.clone(), bytes: (n * stride) as u64 }
        })?;
        let mut free = Vec::new();
        free.try_reserve_exact(n).map_err(|_| oom())?;
        let (index_w, index_r) = match index_at.and_then(|_| lpm_index::new(data_size, pool)) {
            Some((w, r)) => (Some(w), Some(r)),
            None => (None, None),
        };
        Ok(LpmTrie {
            name: def.name.clone(),
            data_size,
            data_words,
            max_prefixlen: data_size as u32 * 8,
            value_size: def.value_size as usize,
            stride,
            max_entries: def.max_entries,
            pool,
            root: AtomicU64::new(NONE),
            child: zeroed_slice(n * 2).ok_or_else(oom)?,
            prefixlen: zeroed_slice(n).ok_or_else(oom)?,
            flags: zeroed_slice(n).ok_or_else(oom)?,
            gens: zeroed_slice(n).ok_or_else(oom)?,
            data: zeroed_slice(n * data_words).ok_or_else(oom)?,
            values,
            writer: Mutex::new(Writer {
                free,
                bump: 0,
                n_entries: 0,
                index: index_w,
                index_at: index_at.unwrap_or(u32::MAX),
                retired: Vec::with_capacity(4),
            }),
            index: index_r,
            indexed: AtomicBool::new(false),
        })
    }

    pub(crate) fn values(&self) -> &Arena {
        &self.values
    }

    fn lock(&self) -> MutexGuard<'_, Writer> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn slot(&self, s: Slot) -> &AtomicU64 {
        match s {
            Slot::Root => &self.root,
            Slot::Child(idx, bit) => &self.child[idx as usize * 2 + bit],
        }
    }

    fn node_words(&self, idx: u32) -> &[AtomicU64] {
        let start = idx as usize * self.data_words;
        &self.data[start..start + self.data_words]
    }

    fn node_bit(&self, idx: u32, index: u32) -> usize {
        let w = self.node_words(idx)[index as usize / 64].load(Relaxed).to_ne_bytes();
        key_bit(&w, index % 64)
    }

    /// `__longest_prefix_match`: leading bits node `idx` and `data` share, at most
    /// `limit`.
    fn match_len(&self, idx: u32, data: &[u8], limit: u32) -> u32 {
        let mut matched = 0u32;
        for (word, chunk) in self.node_words(idx).iter().zip(data.chunks(8)) {
            let mut k = [0u8; 8];
            k[..chunk.len()].copy_from_slice(chunk);
            let x = u64::from_be_bytes(word.load(Relaxed).to_ne_bytes()) ^ u64::from_be_bytes(k);
            if x != 0 {
                return (matched + x.leading_zeros()).min(limit);
            }
            matched += 64;
            if matched >= limit {
                break;
            }
        }
        matched.min(limit)
    }

    /// Lock-free longest-prefix search; the node whose value a lookup returns.
    fn find(&self, key: &[u8]) -> Option<u32> {
        self.find_stepping(key, |_| {})
    }

    /// [`LpmTrie::find`], calling `step` with each node after reading it and before
    /// validating it (tests use it to free a node under a reader).
    #[inline(always)]
    fn find_stepping(&self, key: &[u8], mut step: impl FnMut(u32)) -> Option<u32> {
        let (plen, data) = split_key(key);
        if plen > self.max_prefixlen {
            return None;
        }
        'restart: loop {
            let mut cur = self.root.load(Acquire);
            let mut found = None;
            let mut steps = 0;
            while let Some((idx, gen)) = target(cur) {
                steps += 1;
                if steps > self.max_prefixlen + 2 {
                    continue 'restart;
                }
                let node_plen = self.prefixlen[idx as usize].load(Relaxed);
                let flags = self.flags[idx as usize].load(Relaxed);
                let matchlen = self.match_len(idx, data, node_plen.min(plen));
                let children = [
                    self.child[idx as usize * 2].load(Acquire),
                    self.child[idx as usize * 2 + 1].load(Acquire),
                ];
                step(idx);
                fence(Acquire);
                if self.gens[idx as usize].load(Relaxed) != gen {
                    continue 'restart;
                }
                if matchlen == self.max_prefixlen {
                    found = Some(idx);
                    break;
                }
                if matchlen < node_plen {
                    break;
                }
                if flags & IM == 0 {
                    found = Some(idx);
                }
                cur = children[key_bit(data, node_plen)];
            }
            return found;
        }
    }

    /// The node a lookup returns: from the index for a full-length key, else by
    /// walking the trie.
    #[inline]
    fn find_indexed(&self, key: &[u8]) -> Option<u32> {
        if let Some(ix) = &self.index {
            let (plen, data) = split_key(key);
            if plen == self.max_prefixlen && self.indexed.load(Acquire) {
                return ix.lookup(data);
            }
        }
        self.find(key)
    }

    pub(crate) fn lookup(&self, key: &[u8]) -> Option<NonNull<u8>> {
        let idx = self.find_indexed(key)?;
        Some(self.values.ptr_at(idx as usize * self.stride))
    }

    pub(crate) fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        let idx =
            self.find_indexed(key).ok_or_else(|| MapError::NotFound { map: self.name.clone() })?;
        self.values.read(idx as usize * self.stride, &mut out[..self.value_size]);
        Ok(())
    }

    fn alloc(&self, w: &mut Writer) -> Option<u32> {
        if let Some(i) = w.free.pop() {
            return Some(i);
        }
        (w.bump < self.pool).then(|| {
            w.bump += 1;
            w.bump - 1
        })
    }

    /// Frees `idx`: readers holding a link to it will see the generation change. The
    /// fence orders the bump before whatever the next owner writes into the node.
    fn free_node(&self, w: &mut Writer, idx: u32) {
        self.gens[idx as usize].fetch_add(1, Relaxed);
        fence(Release);
        w.free.push(idx);
    }

    /// Unlinks `idx` for freeing by [`LpmTrie::settle`].
    fn release(&self, w: &mut Writer, idx: u32) {
        w.retired.push(idx);
    }

    /// Ends a successful change of `plen`/`data` (now at node `node`, or gone): the
    /// index follows it, then unlinked nodes are freed.
    fn settle(&self, w: &mut Writer, plen: u32, data: &[u8], node: Option<u32>) {
        if self.indexed.load(Relaxed) {
            if let Some(ix) = &mut w.index {
                ix.set(plen, data, node);
            }
        } else if w.n_entries >= w.index_at && w.index.is_some() {
            self.build_index(w);
        }
        while let Some(idx) = w.retired.pop() {
            self.free_node(w, idx);
        }
    }

    /// Fills the index with every entry (a walk of the trie under the lock), then
    /// lets lookups use it.
    fn build_index(&self, w: &mut Writer) {
        let mut entries = Vec::new();
        let mut stack: Vec<u32> =
            target(self.root.load(Relaxed)).map(|t| t.0).into_iter().collect();
        while let Some(idx) = stack.pop() {
            if !self.is_im(idx) {
                let mut key = vec![0u8; 4 + self.data_size];
                self.copy_key(idx, &mut key);
                entries.push((idx, key));
            }
            stack.extend((0..2).filter_map(|bit| self.kid(idx, bit)));
        }
        let Some(ix) = &mut w.index else { return };
        ix.fill(entries.iter().map(|(idx, key)| {
            let (plen, data) = split_key(key);
            (plen, data, *idx)
        }));
        self.indexed.store(true, Release);
    }

    fn link_to(&self, idx: u32) -> Link {
        link(idx, self.gens[idx as usize].load(Relaxed))
    }

    /// Fills a fresh node (not yet reachable).
    fn init_node(&self, idx: u32, plen: u32, flags: u32, data: &NodeData<'_>) {
        self.prefixlen[idx as usize].store(plen, Relaxed);
        self.flags[idx as usize].store(flags, Relaxed);
        self.child[idx as usize * 2].store(NONE, Relaxed);
        self.child[idx as usize * 2 + 1].store(NONE, Relaxed);
        let words = self.node_words(idx);
        match data {
            NodeData::Key(bytes) => {
                for (w, chunk) in words.iter().zip(bytes.chunks(8)) {
                    let mut b = [0u8; 8];
                    b[..chunk.len()].copy_from_slice(chunk);
                    w.store(u64::from_ne_bytes(b), Relaxed);
                }
            }
            NodeData::CopyOf(src) => {
                for (w, s) in words.iter().zip(self.node_words(*src)) {
                    w.store(s.load(Relaxed), Relaxed);
                }
            }
        }
    }

    /// `trie_check_add_elem`.
    fn check_add(&self, w: &mut Writer, flags: u64) -> Result<(), MapError> {
        if flags == EXIST {
            return Err(MapError::NotFound { map: self.name.clone() });
        }
        if w.n_entries == self.max_entries {
            return Err(MapError::NoSpace {
                map: self.name.clone(),
                max_entries: self.max_entries,
            });
        }
        w.n_entries += 1;
        Ok(())
    }

    /// `trie_update_elem`.
    pub(crate) fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: self.name.clone(), flags });
        }
        let (plen, data) = split_key(key);
        if plen > self.max_prefixlen {
            let max = self.max_prefixlen;
            return Err(MapError::PrefixLen { map: self.name.clone(), prefixlen: plen, max });
        }
        let mut w = self.lock();
        let no_space =
            || MapError::NoSpace { map: self.name.clone(), max_entries: self.max_entries };
        let new = self.alloc(&mut w).ok_or_else(no_space)?;
        self.init_node(new, plen, 0, &NodeData::Key(data));
        self.values.write(new as usize * self.stride, value);
        let res = self.attach(&mut w, new, plen, data, flags);
        match res {
            Ok(()) => self.settle(&mut w, plen, data, Some(new)),
            Err(_) => {
                // Never linked: nothing can reach it.
                w.retired.clear();
                self.free_node(&mut w, new);
            }
        }
        res
    }

    fn attach(
        &self,
        w: &mut Writer,
        new: u32,
        plen: u32,
        data: &[u8],
        flags: u64,
    ) -> Result<(), MapError> {
        let mut slot = Slot::Root;
        let mut matchlen = 0;
        let mut node = None;
        while let Some((idx, _)) = target(self.slot(slot).load(Relaxed)) {
            node = Some(idx);
            let node_plen = self.prefixlen[idx as usize].load(Relaxed);
            matchlen = self.match_len(idx, data, node_plen.min(plen));
            if node_plen != matchlen || node_plen == plen {
                break;
            }
            slot = Slot::Child(idx, key_bit(data, node_plen));
            node = None;
        }
        let Some(node) = node else {
            self.check_add(w, flags)?;
            self.slot(slot).store(self.link_to(new), Release);
            return Ok(());
        };
        let node_plen = self.prefixlen[node as usize].load(Relaxed);
        if node_plen == matchlen {
            // Same prefix: replace the node, keeping its children.
            if self.flags[node as usize].load(Relaxed) & IM == 0 {
                if flags == NOEXIST {
                    return Err(MapError::Exists { map: self.name.clone() });
                }
            } else {
                self.check_add(w, flags)?;
            }
            for bit in 0..2 {
                let c = self.slot(Slot::Child(node, bit)).load(Relaxed);
                self.slot(Slot::Child(new, bit)).store(c, Relaxed);
            }
            self.slot(slot).store(self.link_to(new), Release);
            self.release(w, node);
            return Ok(());
        }
        self.check_add(w, flags)?;
        if matchlen == plen {
            // The new prefix covers the node: insert it as the node's parent.
            let bit = self.node_bit(node, matchlen);
            self.slot(Slot::Child(new, bit)).store(self.link_to(node), Relaxed);
            self.slot(slot).store(self.link_to(new), Release);
            return Ok(());
        }
        let Some(im) = self.alloc(w) else {
            w.n_entries -= 1;
            return Err(MapError::NoSpace {
                map: self.name.clone(),
                max_entries: self.max_entries,
            });
        };
        self.init_node(im, matchlen, IM, &NodeData::CopyOf(node));
        let (left, right) = if key_bit(data, matchlen) == 1 { (node, new) } else { (new, node) };
        self.slot(Slot::Child(im, 0)).store(self.link_to(left), Relaxed);
        self.slot(Slot::Child(im, 1)).store(self.link_to(right), Relaxed);
        self.slot(slot).store(self.link_to(im), Release);
        Ok(())
    }

    /// `trie_delete_elem`.
    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        let (plen, data) = split_key(key);
        if plen > self.max_prefixlen {
            let max = self.max_prefixlen;
            return Err(MapError::PrefixLen { map: self.name.clone(), prefixlen: plen, max });
        }
        let mut w = self.lock();
        let res = self.unlink(&mut w, plen, data);
        if res.is_ok() {
            self.settle(&mut w, plen, data, None);
        }
        res
    }

    fn unlink(&self, w: &mut Writer, plen: u32, data: &[u8]) -> Result<(), MapError> {
        let (mut trim, mut trim2) = (Slot::Root, Slot::Root);
        let mut parent = None;
        let mut matchlen = 0;
        let mut node = None;
        while let Some((idx, _)) = target(self.slot(trim).load(Relaxed)) {
            node = Some(idx);
            let node_plen = self.prefixlen[idx as usize].load(Relaxed);
            matchlen = self.match_len(idx, data, node_plen.min(plen));
            if node_plen != matchlen || node_plen == plen {
                break;
            }
            parent = Some(idx);
            trim2 = trim;
            trim = Slot::Child(idx, key_bit(data, node_plen));
            node = None;
        }
        let not_found = || MapError::NotFound { map: self.name.clone() };
        let node = node.ok_or_else(not_found)?;
        let node_plen = self.prefixlen[node as usize].load(Relaxed);
        if node_plen != plen
            || node_plen != matchlen
            || self.flags[node as usize].load(Relaxed) & IM != 0
        {
            return Err(not_found());
        }
        w.n_entries -= 1;
        let kids = [
            self.slot(Slot::Child(node, 0)).load(Relaxed),
            self.slot(Slot::Child(node, 1)).load(Relaxed),
        ];
        if kids[0] != NONE && kids[1] != NONE {
            self.flags[node as usize].store(IM, Release);
            return Ok(());
        }
        if let Some(p) = parent {
            if self.flags[p as usize].load(Relaxed) & IM != 0 && kids == [NONE, NONE] {
                let first = target(self.slot(Slot::Child(p, 0)).load(Relaxed)).map(|t| t.0);
                let other = if first == Some(node) { 1 } else { 0 };
                let promoted = self.slot(Slot::Child(p, other)).load(Relaxed);
                self.slot(trim2).store(promoted, Release);
                self.release(w, p);
                self.release(w, node);
                return Ok(());
            }
        }
        let moved = if kids[0] != NONE { kids[0] } else { kids[1] };
        self.slot(trim).store(moved, Release);
        self.release(w, node);
        Ok(())
    }

    fn copy_key(&self, idx: u32, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.prefixlen[idx as usize].load(Relaxed).to_ne_bytes());
        let data = &mut out[4..4 + self.data_size];
        for (w, chunk) in self.node_words(idx).iter().zip(data.chunks_mut(8)) {
            let n = chunk.len();
            chunk.copy_from_slice(&w.load(Relaxed).to_ne_bytes()[..n]);
        }
    }

    fn is_im(&self, idx: u32) -> bool {
        self.flags[idx as usize].load(Relaxed) & IM != 0
    }

    fn kid(&self, idx: u32, bit: usize) -> Option<u32> {
        target(self.slot(Slot::Child(idx, bit)).load(Relaxed)).map(|t| t.0)
    }

    /// `trie_get_next_key`: post-order (more specific prefixes before the prefixes that
    /// contain them); a missing or invalid key starts from the first. Holds the writer
    /// lock so that it walks a stable trie (user-side slow path).
    pub(crate) fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<(), MapError> {
        let _w = self.lock();
        let not_found = || MapError::NotFound { map: self.name.clone() };
        let root = target(self.root.load(Relaxed)).map(|t| t.0).ok_or_else(not_found)?;
        let mut search_root = Some(root);
        if let Some((plen, data)) = key.map(split_key).filter(|(p, _)| *p <= self.max_prefixlen) {
            let mut stack = Vec::new();
            let mut node = Some(root);
            let mut matchlen = 0;
            while let Some(idx) = node {
                stack.push(idx);
                let node_plen = self.prefixlen[idx as usize].load(Relaxed);
                matchlen = self.match_len(idx, data, node_plen.min(plen));
                if node_plen != matchlen || node_plen == plen {
                    break;
                }
                node = self.kid(idx, key_bit(data, node_plen));
            }
            let exact = node.is_some_and(|idx| {
                self.prefixlen[idx as usize].load(Relaxed) == matchlen && !self.is_im(idx)
            });
            if exact {
                let mut node = stack.pop().expect("the matched node");
                search_root = None;
                while let Some(&parent) = stack.last() {
                    if self.kid(parent, 0) == Some(node) {
                        if let Some(right) = self.kid(parent, 1) {
                            search_root = Some(right);
                            break;
                        }
                    }
                    if !self.is_im(parent) {
                        self.copy_key(parent, out);
                        return Ok(());
                    }
                    node = parent;
                    stack.pop();
                }
                if search_root.is_none() {
                    return Err(not_found());
                }
            }
        }
        // Leftmost non-intermediate node below `search_root` (post-order first).
        let mut next = None;
        let mut node = search_root;
        while let Some(idx) = node {
            if self.is_im(idx) {
                node = self.kid(idx, 0);
            } else {
                next = Some(idx);
                node = self.kid(idx, 0).or_else(|| self.kid(idx, 1));
            }
        }
        self.copy_key(next.ok_or_else(not_found)?, out);
        Ok(())
    }

    /// Number of entries (intermediate nodes excluded).
    pub(crate) fn len(&self) -> usize {
        self.lock().n_entries as usize
    }
}

/// Where a fresh node's data comes from.
enum NodeData<'a> {
    Key(&'a [u8]),
    CopyOf(u32),
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_abi::map_flags::NO_PREALLOC;
    use spine_abi::map_type::LPM_TRIE;

    fn v4(plen: u32, a: [u8; 4]) -> [u8; 8] {
        let mut k = [0u8; 8];
        k[..4].copy_from_slice(&plen.to_ne_bytes());
        k[4..].copy_from_slice(&a);
        k
    }

    /// A reader has read a node that is then deleted and reused for another prefix:
    /// the generation check must send it back to the root, or it would return the
    /// reused node (now another prefix's entry) as the match.
    #[test]
    fn reader_restarts_when_its_node_is_reused() {
        let t = LpmTrie::new(&MapDef::new("l", LPM_TRIE, 8, 4, 8, NO_PREALLOC), Some(0)).unwrap();
        t.update(&v4(8, [10, 0, 0, 0]), &[8; 4], 0).unwrap();
        t.update(&v4(24, [10, 1, 1, 0]), &[24; 4], 0).unwrap();
        let slash8 = t.find(&v4(8, [10, 0, 0, 0])).unwrap();
        let doomed = t.find(&v4(24, [10, 1, 1, 0])).unwrap();
        let mut reused = false;
        let found = t.find_stepping(&v4(32, [10, 1, 1, 1]), |idx| {
            if idx == doomed && !reused {
                reused = true;
                t.delete(&v4(24, [10, 1, 1, 0])).unwrap();
                t.update(&v4(16, [172, 16, 0, 0]), &[16; 4], 0).unwrap();
                assert_eq!(t.find(&v4(16, [172, 16, 0, 0])), Some(doomed), "reused at once");
            }
        });
        assert!(reused);
        assert_eq!(found, Some(slash8), "10.1.1.1 now only matches 10.0.0.0/8");
        let p = t.lookup(&v4(32, [10, 1, 1, 1])).unwrap();
        assert_eq!(p, t.values.ptr_at(slash8 as usize * t.stride));
    }
}
