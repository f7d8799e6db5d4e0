//! `BPF_MAP_TYPE_XSKMAP` (`net/xdp/xskmap.c`): where `bpf_redirect_map` sends packets to
//! AF_XDP sockets, keyed by index (usually the receive queue). In the kernel a value is
//! a socket's fd; spine has no kernel sockets behind a map, so an entry holds the
//! **ifindex of the spine port that stands for the socket** (an AF_XDP port, an endpoint
//! port, any port): a redirect into entry `k` goes out of that port, as a devmap entry's
//! does. The creation checks, the update flags and their errors, and the program side
//! (a missing entry gives `bpf_redirect_map` the verdict in its flags' low bits) are the
//! kernel's.
//!
//! An application's **spine endpoint** takes an entry's place of the kernel's AF_XDP
//! socket: opening an endpoint bound to slot `k` (the open request's `map`, as libxdp
//! puts its socket's fd into `xsks_map[queue]`) stores the endpoint's id with
//! [`XSK_ENDPOINT`] set, and a redirect into entry `k` delivers to the endpoint. So a
//! program written for AF_XDP (`bpf_redirect_map(&xsks_map, ctx->rx_queue_index,
//! XDP_PASS)`) feeds a spine endpoint unchanged.
//!
//! **What a program's lookup returns.** The kernel's lookup gives a `struct xdp_sock *`,
//! which its verifier types `PTR_TO_XDP_SOCK`: the program may test it for NULL, compare
//! it, and read one field, `struct bpf_xdp_sock`'s `queue_id` (a `u32` at offset 0: the
//! queue the socket is bound to). An entry here is an 8-byte record, written whole:
//!
//! | offset | field |
//! |---|---|
//! | 0 | `queue_id`: the entry's **index** |
//! | 4 | the port's ifindex, or the endpoint's id marked with [`XSK_ENDPOINT`] |
//!
//! and a lookup returns a pointer to it, which the verifier lets a program read at offset
//! 0 with 4 bytes only (the kernel's `bpf_xdp_sock_is_valid_access`). The queue is the
//! index because that is the queue the entry serves in spine: an endpoint bound to slot
//! `k` receives what the program redirects to `k`, as libxdp binds the socket of queue
//! `q` at `xsks_map[q]` (so there the kernel's `queue_id` is the index too). An entry
//! that user space pointed at a spine port keeps the index as well: the map knows only
//! the port's ifindex, not the kernel queue an AF_XDP port is bound to, so an AF_XDP port
//! bound to queue 3 stored at index 0 reads `queue_id` 0 where the kernel's socket would
//! read 3.
//!
//! Differences from the kernel:
//! - The value is an ifindex, never a socket fd (0 and values with the endpoint bit are
//!   refused with `EINVAL`, as an fd that is no socket is refused).
//! - User space may read an entry back (the kernel answers `EOPNOTSUPP`): it reads the
//!   ifindex (or the marked endpoint id), not the record.
//! - `queue_id` is the entry's index (above).
//!
//! The same storage serves spine's **endpoint map** (`SPINE_ENDPOINT`, declared as
//! `SPINE_MAP_TYPE_ENDPOINT` in `include/spine_helpers.h`): a slot holds the id of the
//! spine endpoint an application bound to it when it opened the endpoint, and
//! `bpf_redirect_map` into it delivers the frame to that endpoint. Its slots are written
//! only by the adapter ([`XskMap::bind`], [`XskMap::unbind`]): user-space updates and
//! deletes are refused as read-only, so no client can point a slot at another's endpoint.

use spine_abi::update_flags::{EXIST, NOEXIST};

/// The bit that marks an XSKMAP entry as an endpoint's id rather than a port's ifindex
/// (ifindexes are positive `int`s: none has it). Only the adapter stores it
/// ([`crate::Map::bind_endpoint`]); user space cannot.
pub const XSK_ENDPOINT: u32 = 1 << 31;

use crate::def::MapDef;
use crate::entry_array::EntryArray;
use crate::MapError;

#[derive(Debug)]
pub(crate) struct XskMap {
    entries: EntryArray,
    /// spine's endpoint map (`SPINE_ENDPOINT`): the same slots, holding endpoint ids that
    /// only the adapter binds ([`XskMap::bind`]); user space cannot write them.
    endpoint: bool,
}

impl XskMap {
    pub(crate) fn bytes(def: &MapDef) -> u128 {
        EntryArray::bytes(def)
    }

    pub(crate) fn new(def: &MapDef) -> Result<XskMap, MapError> {
        let endpoint = def.map_type == spine_abi::map_type::SPINE_ENDPOINT;
        Ok(XskMap { entries: EntryArray::new(def)?, endpoint })
    }

    fn refuse_user(&self) -> Result<(), MapError> {
        if self.endpoint {
            return Err(MapError::ReadOnly {
                map: self.entries.name(),
                why: crate::error::ReadOnlyReason::EndpointSlot,
            });
        }
        Ok(())
    }

    /// What slot `index` holds for endpoint `id`: the id in an endpoint map, the id
    /// marked with [`XSK_ENDPOINT`] in an XSKMAP.
    fn slot_value(&self, id: u32) -> u32 {
        if self.endpoint {
            id
        } else {
            id | XSK_ENDPOINT
        }
    }

    /// Binds slot `index` to endpoint `id` (non-zero, below [`XSK_ENDPOINT`]); `Exists`
    /// if the slot holds anything already, `IndexOutOfRange` past the end.
    pub(crate) fn bind(&self, index: u32, id: u32) -> Result<(), MapError> {
        let e = &self.entries;
        if index >= e.max_entries() {
            let max_entries = e.max_entries();
            return Err(MapError::IndexOutOfRange { map: e.name(), index, max_entries });
        }
        if id == 0 || id & XSK_ENDPOINT != 0 || e.lookup(&index.to_ne_bytes()).is_some() {
            return Err(MapError::Exists { map: e.name() });
        }
        e.set_pair(index, index, self.slot_value(id));
        Ok(())
    }

    /// Empties slot `index` if it still holds endpoint `id`.
    pub(crate) fn unbind(&self, index: u32, id: u32) -> bool {
        let e = &self.entries;
        if index < e.max_entries() && e.second(index) == Some(self.slot_value(id)) {
            e.clear(index);
            return true;
        }
        false
    }

    pub(crate) fn entries(&self) -> &EntryArray {
        &self.entries
    }

    /// `xsk_map_update_elem`, the checks in the kernel's order.
    pub(crate) fn update_user(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), MapError> {
        self.refuse_user()?;
        let e = &self.entries;
        let i = EntryArray::index(key);
        let ifindex = u32::from_ne_bytes([value[0], value[1], value[2], value[3]]);
        if flags > EXIST {
            return Err(MapError::InvalidFlags { map: e.name(), flags });
        }
        if i >= e.max_entries() {
            let max_entries = e.max_entries();
            return Err(MapError::IndexOutOfRange { map: e.name(), index: i, max_entries });
        }
        if ifindex == 0 || ifindex & XSK_ENDPOINT != 0 {
            return Err(MapError::InvalidFlags { map: e.name(), flags: 0 });
        }
        let present = e.lookup(key).is_some();
        if present && flags == NOEXIST {
            return Err(MapError::Exists { map: e.name() });
        }
        if !present && flags == EXIST {
            return Err(MapError::NotFound { map: e.name() });
        }
        e.set_pair(i, i, ifindex);
        Ok(())
    }

    /// `BPF_MAP_LOOKUP_ELEM` (the kernel answers `EOPNOTSUPP`): the ifindex or marked
    /// endpoint id the entry holds, `ENOENT` out of range or empty.
    pub(crate) fn lookup_user(&self, key: &[u8], out: &mut [u8]) -> Result<(), MapError> {
        let e = &self.entries;
        let v = e.second(EntryArray::index(key)).ok_or(MapError::NotFound { map: e.name() })?;
        out[..4].copy_from_slice(&v.to_ne_bytes());
        Ok(())
    }

    /// `xsk_map_delete_elem`: `EINVAL` out of range, success on an empty slot.
    pub(crate) fn delete(&self, key: &[u8]) -> Result<(), MapError> {
        self.refuse_user()?;
        self.entries.delete_user(key)
    }
}
