//! The lookup index of an IPv4 or IPv6 LPM trie (4- or 16-byte data): a Poptrie from
//! `spine-fib` mapping each entry's prefix to its trie node, published to readers
//! through `spine_fib::publish`. A full-length lookup (the prefix length equal to the
//! key's bits, what a program doing its own routing asks) reads the index: a few
//! cache lines instead of the ~20 dependent node loads of a trie walk over a full
//! table. Shorter lookup lengths, and other data sizes, walk the trie.
//!
//! Writers keep it in step under the trie's lock: after the trie changes, the index
//! changes, is published, and the copy readers left is brought up to date, so no
//! reader can still find a node the trie then frees. Like the kernel's `lpm_trie`,
//! which allocates a node per update, an update allocates (the index's nodes).

use spine_fib::publish::{LpmOp, Reader, Writer};
use spine_fib::{Lpm4, Lpm6, Prefix, MAX_VALUE};

#[derive(Debug)]
pub(crate) enum IndexWriter {
    V4(Writer<Lpm4, LpmOp<u32>>),
    V6(Writer<Lpm6, LpmOp<u128>>),
}

#[derive(Debug)]
pub(crate) enum IndexReader {
    V4(Reader<Lpm4>),
    V6(Reader<Lpm6>),
}

/// An index for a trie of `data_size`-byte keys and `pool` nodes, if one applies.
pub(crate) fn new(data_size: usize, pool: u32) -> Option<(IndexWriter, IndexReader)> {
    if pool > MAX_VALUE {
        return None;
    }
    match data_size {
        4 => {
            let (w, r) = Writer::new(<Lpm4 as spine_fib::Lpm<u32>>::new());
            Some((IndexWriter::V4(w), IndexReader::V4(r)))
        }
        16 => {
            let (w, r) = Writer::new(<Lpm6 as spine_fib::Lpm<u128>>::new());
            Some((IndexWriter::V6(w), IndexReader::V6(r)))
        }
        _ => None,
    }
}

fn v4(data: &[u8]) -> u32 {
    u32::from_be_bytes([data[0], data[1], data[2], data[3]])
}

fn v6(data: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    b.copy_from_slice(&data[..16]);
    u128::from_be_bytes(b)
}

impl IndexReader {
    /// The node of the longest entry matching `data` (full length).
    #[inline]
    pub(crate) fn lookup(&self, data: &[u8]) -> Option<u32> {
        use spine_fib::Lpm;
        match self {
            IndexReader::V4(r) => r.load().lookup(v4(data)),
            IndexReader::V6(r) => r.load().lookup(v6(data)),
        }
    }
}

impl IndexWriter {
    /// Points `plen`/`data` (host bits ignored, as the trie ignores them) at `node`,
    /// or removes it, and publishes; returns once no reader can see the old mapping.
    pub(crate) fn set(&mut self, plen: u32, data: &[u8], node: Option<u32>) {
        match self {
            IndexWriter::V4(w) => {
                let p = Prefix::truncating(v4(data), plen).expect("length checked by the trie");
                sync(w, p, node)
            }
            IndexWriter::V6(w) => {
                let p = Prefix::truncating(v6(data), plen).expect("length checked by the trie");
                sync(w, p, node)
            }
        }
    }
}

impl IndexWriter {
    /// Adds every `(prefix length, data, node)` and publishes once.
    pub(crate) fn fill<'a>(&mut self, entries: impl Iterator<Item = (u32, &'a [u8], u32)>) {
        match self {
            IndexWriter::V4(w) => {
                fill(w, entries.map(|(l, d, n)| (Prefix::truncating(v4(d), l), n)))
            }
            IndexWriter::V6(w) => {
                fill(w, entries.map(|(l, d, n)| (Prefix::truncating(v6(d), l), n)))
            }
        }
    }
}

fn fill<A: spine_fib::Address, L: spine_fib::Lpm<A>>(
    w: &mut Writer<L, LpmOp<A>>,
    entries: impl Iterator<Item = (Result<Prefix<A>, spine_fib::PrefixError>, u32)>,
) {
    for (p, n) in entries {
        let p = p.expect("length checked by the trie");
        if w.apply(LpmOp::Insert(p, n)).is_err() {
            unreachable!("node indices are below MAX_VALUE");
        }
    }
    w.publish();
    w.view();
}

fn sync<A: spine_fib::Address, L: spine_fib::Lpm<A>>(
    w: &mut Writer<L, LpmOp<A>>,
    p: Prefix<A>,
    node: Option<u32>,
) {
    let op = match node {
        Some(n) => LpmOp::Insert(p, n),
        None => LpmOp::Remove(p),
    };
    if w.apply(op).is_err() {
        unreachable!("node indices are below MAX_VALUE");
    }
    w.publish();
    // Waits for readers of the previous copy and brings it up to date.
    w.view();
}
