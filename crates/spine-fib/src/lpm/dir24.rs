//! [`Dir24`]: DIR-24-8 (Gupta, Lin and McKeown, INFOCOM 1998), the structure of DPDK's
//! `rte_lpm`: one entry per /24 (2^24 × 4 bytes = 64 MiB), and a group of 256 entries
//! for each /24 that holds longer prefixes. One load, or two for /25-/32. IPv4 only.
//!
//! Updates repaint the /24 entries a prefix of 24 bits or fewer covers (and rebuild the
//! groups under them), or the one group of a longer prefix, from the RIB.

use crate::lpm::blocks::Blocks;
use crate::lpm::{check_value, some, Lpm, LpmError, Memory, Rib, MAX_VALUE, NONE};
use crate::prefix::Prefix;

const GROUP: u32 = 0x8000_0000;

#[derive(Debug, Clone)]
pub struct Dir24 {
    tbl24: Vec<u32>,
    tbl8: Vec<u32>,
    /// Per group: the value covering its /24 (update-only).
    defaults: Vec<u32>,
    groups: Blocks,
    rib: Rib<u32>,
}

impl Dir24 {
    fn free_group(&mut self, e: u32) {
        if e & GROUP != 0 {
            self.groups.free(e & !GROUP, 1);
        }
    }

    /// Sets /24 entry `i` from its covering value and the longer prefixes in it.
    fn set_slash24(&mut self, i: usize, cover: u32, deeper: &[(u32, u32, u32)]) {
        let old = self.tbl24[i];
        if deeper.is_empty() {
            self.free_group(old);
            self.tbl24[i] = cover;
            return;
        }
        let g = if old & GROUP != 0 {
            old & !GROUP
        } else {
            let g = self.groups.alloc(&mut self.defaults, 1, NONE);
            if self.tbl8.len() < self.defaults.len() * 256 {
                self.tbl8.resize(self.defaults.len() * 256, NONE);
            }
            g
        };
        self.defaults[g as usize] = cover;
        let base = g as usize * 256;
        let group = &mut self.tbl8[base..base + 256];
        group.fill(cover);
        for &(a, len, v) in deeper {
            let c = (a & 0xff) as usize;
            group[c..c + (1 << (32 - len))].fill(v);
        }
        self.tbl24[i] = GROUP | g;
    }

    /// Repaints the /24 entries `[start, last]` (a prefix of `len <= 24` bits) from
    /// `ps`, the prefixes inside of at least `len` bits, over `cover`.
    fn paint(&mut self, start: u32, len: u32, ps: &[(u32, u32, u32)], cover: u32) {
        let i0 = (start >> 8) as usize;
        let n = 1usize << (24 - len);
        for i in i0..i0 + n {
            let old = self.tbl24[i];
            self.free_group(old);
            self.tbl24[i] = cover;
        }
        let mut k = 0;
        while k < ps.len() {
            let (a, l, v) = ps[k];
            let i = (a >> 8) as usize;
            if l <= 24 {
                self.tbl24[i..i + (1 << (24 - l))].fill(v);
                k += 1;
                continue;
            }
            let s = k;
            while k < ps.len() && (ps[k].0 >> 8) as usize == i {
                k += 1;
            }
            let cover = self.tbl24[i];
            self.set_slash24(i, cover, &ps[s..k]);
        }
    }

    fn refresh(&mut self, p: Prefix<u32>) {
        let len = p.len();
        if len <= 24 {
            let cover = if len == 0 { NONE } else { self.rib.covering(p.addr(), len - 1) };
            let ps: Vec<_> = self.rib.inside(p.addr(), len, p.last()).collect();
            self.paint(p.addr(), len, &ps, cover);
            return;
        }
        let i = (p.addr() >> 8) as usize;
        let e = self.tbl24[i];
        let cover = if e & GROUP != 0 { self.defaults[(e & !GROUP) as usize] } else { e };
        let start = p.addr() & !0xff;
        let ps: Vec<_> = self.rib.inside(start, 25, start | 0xff).collect();
        self.set_slash24(i, cover, &ps);
    }
}

impl Lpm<u32> for Dir24 {
    const NAME: &'static str = "dir-24-8";

    fn new() -> Self {
        Dir24 {
            tbl24: vec![NONE; 1 << 24],
            tbl8: Vec::new(),
            defaults: Vec::new(),
            groups: Blocks::default(),
            rib: Rib::default(),
        }
    }

    #[inline]
    fn lookup(&self, addr: u32) -> Option<u32> {
        let e = self.tbl24[(addr >> 8) as usize];
        if e & GROUP == 0 {
            return some(e);
        }
        some(self.tbl8[((e & !GROUP) as usize) << 8 | (addr & 0xff) as usize])
    }

    fn lookup_batch(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        for (addrs, out) in addrs.chunks(8).zip(out.chunks_mut(8)) {
            let mut e = [0u32; 8];
            for (l, a) in addrs.iter().enumerate() {
                e[l] = self.tbl24[(a >> 8) as usize];
            }
            for (l, a) in addrs.iter().enumerate() {
                out[l] = some(if e[l] & GROUP == 0 {
                    e[l]
                } else {
                    self.tbl8[((e[l] & !GROUP) as usize) << 8 | (a & 0xff) as usize]
                });
            }
        }
    }

    fn insert(&mut self, prefix: Prefix<u32>, value: u32) -> Result<Option<u32>, LpmError> {
        check_value(value)?;
        let old = self.rib.insert(prefix, value);
        if old != Some(value) {
            self.refresh(prefix);
        }
        Ok(old)
    }

    fn remove(&mut self, prefix: Prefix<u32>) -> Option<u32> {
        let old = self.rib.remove(prefix)?;
        self.refresh(prefix);
        Some(old)
    }

    fn extend(
        &mut self,
        entries: impl IntoIterator<Item = (Prefix<u32>, u32)>,
    ) -> Result<(), LpmError> {
        let entries: Vec<_> = entries.into_iter().collect();
        if let Some(&(_, v)) = entries.iter().find(|(_, v)| *v > MAX_VALUE) {
            return Err(LpmError::ValueTooLarge(v));
        }
        for (p, v) in entries {
            self.rib.insert(p, v);
        }
        let ps: Vec<_> = self.rib.inside(0, 0, u32::MAX).collect();
        self.paint(0, 0, &ps, NONE);
        Ok(())
    }

    fn rib(&self) -> &Rib<u32> {
        &self.rib
    }

    fn memory(&self) -> Memory {
        Memory {
            lookup: self.tbl24.len() * 4 + self.tbl8.len() * 4,
            update: self.defaults.len() * 4 + self.rib.bytes() + self.groups.bytes(),
        }
    }
}
