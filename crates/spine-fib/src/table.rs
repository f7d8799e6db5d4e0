//! One routing table: the routes of each prefix ordered by metric, and an LPM per
//! family whose value is the index of each prefix's best route (in [`crate::fib`]'s
//! route store). The main table keeps no LPM of its own: its routes of each family live
//! in the LPM that merges tables local and main ([`crate::fib`]).

use rustc_hash::FxHashMap;

use crate::lpm::{Lpm, Lpm4, Lpm6, LpmError};
use crate::prefix::IpPrefix;

#[derive(Debug, Clone)]
pub(crate) struct Table {
    pub(crate) id: u32,
    /// Empty, and never updated, in the main table (see [`Table::own`]).
    pub(crate) v4: Lpm4,
    /// As `v4`.
    pub(crate) v6: Lpm6,
    /// Route indices per prefix, lowest metric first (ties: oldest first).
    pub(crate) routes: FxHashMap<IpPrefix, Vec<(u32, u32)>>,
}

impl Table {
    pub(crate) fn new(id: u32) -> Table {
        Table { id, v4: Lpm4::new(), v6: Lpm6::new(), routes: FxHashMap::default() }
    }

    /// Whether this table's routes have their own LPMs (all but main's: they live in
    /// the merged LPMs of local and main).
    pub(crate) fn own(&self) -> bool {
        self.id != crate::route::table_id::MAIN
    }

    /// The index of the prefix's best route.
    pub(crate) fn best(&self, p: &IpPrefix) -> Option<u32> {
        self.routes.get(p).and_then(|v| v.first()).map(|&(_, idx)| idx)
    }

    /// Points the LPM at the prefix's best route, or removes the prefix.
    pub(crate) fn sync(&mut self, p: IpPrefix) -> Result<(), LpmError> {
        let best = self.best(&p);
        match (p, best) {
            _ if !self.own() => Ok(()),
            (IpPrefix::V4(q), Some(i)) => self.v4.insert(q, i).map(drop),
            (IpPrefix::V4(q), None) => {
                self.v4.remove(q);
                Ok(())
            }
            (IpPrefix::V6(q), Some(i)) => self.v6.insert(q, i).map(drop),
            (IpPrefix::V6(q), None) => {
                self.v6.remove(q);
                Ok(())
            }
        }
    }

    /// Inserts `(metric, idx)` in metric order, after routes of equal metric.
    pub(crate) fn add(&mut self, p: IpPrefix, metric: u32, idx: u32) {
        let list = self.routes.entry(p).or_default();
        let at = list.partition_point(|&(m, _)| m <= metric);
        list.insert(at, (metric, idx));
    }

    /// Removes route `idx` from the prefix's list.
    pub(crate) fn unlink(&mut self, p: IpPrefix, idx: u32) {
        if let Some(list) = self.routes.get_mut(&p) {
            list.retain(|&(_, i)| i != idx);
            if list.is_empty() {
                self.routes.remove(&p);
            }
        }
    }
}
