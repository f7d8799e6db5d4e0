//! Kernel maps: creation and the user-space element operations, with the kernel's own
//! semantics and errnos (`ENOENT` for a missing key, `EEXIST`/`E2BIG` from updates).

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use spine_abi::map_type;

use crate::cpus::possible_cpus_exact;
use crate::sys::{self, bpf, bpf_fd, BpfAttr, Cmd, MapCreateAttr, MapElemAttr};
use crate::SysError;

/// `BPF_MAP_TYPE_PERCPU_CGROUP_STORAGE`, also per-CPU from user space.
const PERCPU_CGROUP_STORAGE: u32 = 21;

/// What a map is: the fields of `BPF_MAP_CREATE` that fix its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MapDef {
    pub map_type: u32,
    pub key_size: u32,
    /// Bytes of one value as a program sees it (one CPU's slot, for per-CPU maps).
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    /// Used by the kernel only with `BPF_F_NUMA_NODE` in `flags`.
    pub numa_node: u32,
    /// Per-type extra, e.g. a bloom filter's hash count.
    pub map_extra: u64,
}

impl MapDef {
    /// A map with no flags and no extras.
    pub fn new(map_type: u32, key_size: u32, value_size: u32, max_entries: u32) -> Self {
        MapDef { map_type, key_size, value_size, max_entries, flags: 0, numa_node: 0, map_extra: 0 }
    }
}

/// The BTF a map is created with (`btf_fd`, `btf_key_type_id`, `btf_value_type_id`):
/// what lets the kernel find a `struct bpf_spin_lock` in the value.
#[derive(Debug, Clone, Copy)]
pub struct MapBtf<'a> {
    pub fd: BorrowedFd<'a>,
    /// 0: no key type.
    pub key_type_id: u32,
    pub value_type_id: u32,
    /// The value holds a `bpf_spin_lock` (from the object's BTF): lookups of
    /// [`KernelMap::entries`] are then made with `BPF_F_LOCK`.
    pub spin_lock: bool,
}

/// `BPF_F_LOCK` for `BPF_MAP_LOOKUP_ELEM` and `BPF_MAP_UPDATE_ELEM`.
const F_LOCK: u64 = 4;

/// A map living in the kernel, closed when dropped.
#[derive(Debug)]
pub struct KernelMap {
    fd: OwnedFd,
    def: MapDef,
    name: String,
    /// Value slots seen from user space: possible CPUs for per-CPU maps, else 1.
    slots: usize,
    /// Bytes of one slot from user space: `value_size`, rounded up to 8 for per-CPU maps.
    slot_size: usize,
    /// Created with BTF naming a `bpf_spin_lock` in the value.
    spin_lock: bool,
}

/// A `(key, value)` pair read from a map, the value in its user-space layout.
pub type Entry = (Vec<u8>, Vec<u8>);

/// What the kernel reports about a map (`struct bpf_map_info`, first fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapInfo {
    pub map_type: u32,
    /// System-wide id; also what a map-in-map lookup from user space returns.
    pub id: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub flags: u32,
    pub name: String,
}

/// True for the map types whose user-space value has one slot per possible CPU.
pub fn is_percpu(t: u32) -> bool {
    map_type::is_percpu(t) || t == PERCPU_CGROUP_STORAGE
}

impl KernelMap {
    /// Creates a map. `name` is sanitised to what the kernel accepts (see
    /// [`crate::sanitize_name`]); `inner` is the template map an `array_of_maps` or
    /// `hash_of_maps` is created with, and may be closed afterwards.
    pub fn create(
        name: &str,
        def: MapDef,
        inner: Option<BorrowedFd<'_>>,
    ) -> Result<KernelMap, SysError> {
        Self::create_with_btf(name, def, inner, None)
    }

    /// [`create`](Self::create) with the key and value types from a loaded BTF, as
    /// libbpf creates BTF-defined maps (the kernel then checks the types' sizes and
    /// finds special fields such as a `bpf_spin_lock`).
    pub fn create_with_btf(
        name: &str,
        def: MapDef,
        inner: Option<BorrowedFd<'_>>,
        btf: Option<MapBtf<'_>>,
    ) -> Result<KernelMap, SysError> {
        let (slots, slot_size) = if is_percpu(def.map_type) {
            (possible_cpus_exact()?, (def.value_size as usize).next_multiple_of(8))
        } else {
            (1, def.value_size as usize)
        };
        let mut attr = BpfAttr::zeroed();
        attr.map_create = MapCreateAttr {
            map_type: def.map_type,
            key_size: def.key_size,
            value_size: def.value_size,
            max_entries: def.max_entries,
            map_flags: def.flags,
            inner_map_fd: inner.map_or(0, |fd| fd.as_raw_fd() as u32),
            numa_node: def.numa_node,
            map_name: sys::name_field(name),
            map_extra: def.map_extra,
            btf_fd: btf.map_or(0, |b| b.fd.as_raw_fd() as u32),
            btf_key_type_id: btf.map_or(0, |b| b.key_type_id),
            btf_value_type_id: btf.map_or(0, |b| b.value_type_id),
            ..MapCreateAttr::default()
        };
        // SAFETY: BPF_MAP_CREATE reads no user pointers; it returns a new fd.
        let fd = unsafe { bpf_fd(Cmd::MapCreate, &mut attr) }?;
        let spin_lock = btf.is_some_and(|b| b.spin_lock);
        Ok(KernelMap { fd, def, name: sys::sanitize_name(name), slots, slot_size, spin_lock })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    pub fn def(&self) -> MapDef {
        self.def
    }

    pub fn map_type(&self) -> u32 {
        self.def.map_type
    }

    pub fn key_size(&self) -> u32 {
        self.def.key_size
    }

    pub fn value_size(&self) -> u32 {
        self.def.value_size
    }

    pub fn max_entries(&self) -> u32 {
        self.def.max_entries
    }

    pub fn flags(&self) -> u32 {
        self.def.flags
    }

    /// A value buffer holding one CPU's `value` in every CPU's slot of a per-CPU map, as
    /// `bpftool map update` writes one value to all; other maps take `value` as it is.
    pub fn value_for_all_cpus(&self, value: &[u8]) -> Vec<u8> {
        if self.slots == 1 || value.len() != self.def.value_size as usize {
            return value.to_vec();
        }
        let mut out = vec![0u8; self.slots * self.slot_size];
        for c in out.chunks_mut(self.slot_size) {
            c[..value.len()].copy_from_slice(value);
        }
        out
    }

    /// The name as the kernel holds it (sanitised and cut to 15 bytes).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bytes of a value buffer for [`lookup`](Self::lookup) and [`update`](Self::update):
    /// `value_size`, or for per-CPU maps `possible_cpus * round_up(value_size, 8)`, one
    /// slot per possible CPU in CPU order.
    pub fn user_value_size(&self) -> usize {
        self.slots * self.slot_size
    }

    /// Reads the value of `key` into `out`; `Ok(false)` if there is none (`ENOENT`).
    /// `key` must be `key_size` bytes and `out` [`user_value_size`](Self::user_value_size)
    /// bytes, else `EINVAL`.
    pub fn lookup(&self, key: &[u8], out: &mut [u8]) -> Result<bool, SysError> {
        self.lookup_flags(key, out, 0)
    }

    /// [`lookup`](Self::lookup) with flags: `BPF_F_LOCK` (4) copies the value under its
    /// `bpf_spin_lock` (`EINVAL` if the map's BTF names none).
    pub fn lookup_flags(&self, key: &[u8], out: &mut [u8], flags: u64) -> Result<bool, SysError> {
        self.check_key(Cmd::MapLookupElem, key)?;
        self.check_value(Cmd::MapLookupElem, out.len())?;
        let mut attr = self.elem_attr(sys::uptr(key), sys::uptr_mut(out), flags);
        // SAFETY: the kernel reads key_size bytes of `key` and writes user_value_size
        // bytes to `out`; both lengths were just checked.
        match unsafe { bpf(Cmd::MapLookupElem, &mut attr) } {
            Ok(_) => Ok(true),
            Err(e) if e.is(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `BPF_MAP_LOOKUP_AND_DELETE_ELEM`: reads the value of `key` into `out` and removes
    /// it (a queue's or stack's pop, with an empty `key`); `Ok(false)` if there is none
    /// (`ENOENT`). Lengths as for [`lookup`](Self::lookup).
    pub fn lookup_and_delete(
        &self,
        key: &[u8],
        out: &mut [u8],
        flags: u64,
    ) -> Result<bool, SysError> {
        let cmd = Cmd::MapLookupAndDeleteElem;
        self.check_key(cmd, key)?;
        self.check_value(cmd, out.len())?;
        let mut attr = self.elem_attr(sys::uptr(key), sys::uptr_mut(out), flags);
        // SAFETY: the kernel reads key_size bytes of `key` (none: the pointer is null
        // then) and writes user_value_size bytes to `out`; both lengths were checked.
        match unsafe { bpf(cmd, &mut attr) } {
            Ok(_) => Ok(true),
            Err(e) if e.is(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// [`lookup`](Self::lookup) into a new buffer.
    pub fn lookup_vec(&self, key: &[u8]) -> Result<Option<Vec<u8>>, SysError> {
        let mut out = vec![0u8; self.user_value_size()];
        Ok(self.lookup(key, &mut out)?.then_some(out))
    }

    /// Sets `key` to `value` under `flags` (`spine_abi::update_flags`): `EEXIST` for
    /// `NOEXIST` on a present key, `ENOENT` for `EXIST` on a missing one, `E2BIG` when a
    /// hash map is full or an array index is out of range.
    pub fn update(&self, key: &[u8], value: &[u8], flags: u64) -> Result<(), SysError> {
        self.check_key(Cmd::MapUpdateElem, key)?;
        self.check_value(Cmd::MapUpdateElem, value.len())?;
        let mut attr = self.elem_attr(sys::uptr(key), sys::uptr(value), flags);
        // SAFETY: the kernel reads key_size bytes of `key` and user_value_size bytes of
        // `value`; both lengths were just checked. It writes neither.
        unsafe { bpf(Cmd::MapUpdateElem, &mut attr) }.map(drop)
    }

    /// Deletes `key`: `ENOENT` if absent, `EINVAL` for arrays (their elements always exist).
    pub fn delete(&self, key: &[u8]) -> Result<(), SysError> {
        self.check_key(Cmd::MapDeleteElem, key)?;
        let mut attr = self.elem_attr(sys::uptr(key), 0, 0);
        // SAFETY: the kernel reads key_size bytes of `key`, whose length was just checked.
        unsafe { bpf(Cmd::MapDeleteElem, &mut attr) }.map(drop)
    }

    /// Writes the key after `key` (the first key for `None`) into `out`; `Ok(false)` once
    /// iteration is over (`ENOENT`). As in the kernel, a hash map restarts from its first
    /// key when `key` is absent, and an array from index 0 when `key` is out of range.
    pub fn next_key(&self, key: Option<&[u8]>, out: &mut [u8]) -> Result<bool, SysError> {
        if let Some(k) = key {
            self.check_key(Cmd::MapGetNextKey, k)?;
        }
        self.check_key(Cmd::MapGetNextKey, out)?;
        let mut attr = self.elem_attr(key.map_or(0, sys::uptr), sys::uptr_mut(out), 0);
        // SAFETY: the kernel reads key_size bytes of `key` (or none for null) and writes
        // key_size bytes to `out`; both lengths were just checked.
        match unsafe { bpf(Cmd::MapGetNextKey, &mut attr) } {
            Ok(_) => Ok(true),
            Err(e) if e.is(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every key, in the kernel's iteration order. A hash map changed concurrently may
    /// be seen partially, as with any bpf(2) iteration.
    pub fn keys(&self) -> Result<Vec<Vec<u8>>, SysError> {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut next = vec![0u8; self.def.key_size as usize];
        while self.next_key(keys.last().map(Vec::as_slice), &mut next)? {
            keys.push(next.clone());
            // An array's key space is bounded; a hash map that keeps changing could
            // otherwise make this loop forever.
            if keys.len() > self.def.max_entries as usize {
                break;
            }
        }
        Ok(keys)
    }

    /// Every `(key, value)` pair, in iteration order; keys deleted between listing and
    /// reading are left out. A value holding a `bpf_spin_lock` is read under it
    /// (`BPF_F_LOCK`); its lock word reads as 0.
    pub fn entries(&self) -> Result<Vec<Entry>, SysError> {
        let flags = if self.spin_lock { F_LOCK } else { 0 };
        let mut out = Vec::new();
        for key in self.keys()? {
            let mut v = vec![0u8; self.user_value_size()];
            if self.lookup_flags(&key, &mut v, flags)? {
                out.push((key, v));
            }
        }
        Ok(out)
    }

    /// Whether the map was created with BTF naming a `bpf_spin_lock` in its value.
    pub fn has_spin_lock(&self) -> bool {
        self.spin_lock
    }

    /// Makes the map read-only from user space: later updates, and a second freeze, are
    /// `EPERM`. Programs may still write it unless it was created with
    /// `BPF_F_RDONLY_PROG`.
    pub fn freeze(&self) -> Result<(), SysError> {
        let mut attr = self.elem_attr(0, 0, 0);
        // SAFETY: BPF_MAP_FREEZE reads only `map_fd`.
        unsafe { bpf(Cmd::MapFreeze, &mut attr) }.map(drop)
    }

    /// What the kernel reports about the map.
    pub fn info(&self) -> Result<MapInfo, SysError> {
        // struct bpf_map_info up to the end of `name`.
        let mut buf = [0u8; 40];
        sys::obj_info(self.fd.as_raw_fd(), &mut buf)?;
        let word = |i: usize| u32::from_ne_bytes(buf[i * 4..i * 4 + 4].try_into().expect("4"));
        Ok(MapInfo {
            map_type: word(0),
            id: word(1),
            key_size: word(2),
            value_size: word(3),
            max_entries: word(4),
            flags: word(5),
            name: sys::name_from_field(&buf[24..40]),
        })
    }

    fn elem_attr(&self, key: u64, value: u64, flags: u64) -> BpfAttr {
        let mut attr = BpfAttr::zeroed();
        attr.map_elem =
            MapElemAttr { map_fd: self.fd.as_raw_fd() as u32, _pad: 0, key, value, flags };
        attr
    }

    fn check_key(&self, cmd: Cmd, key: &[u8]) -> Result<(), SysError> {
        if key.len() == self.def.key_size as usize {
            Ok(())
        } else {
            Err(SysError::new(cmd.name(), libc::EINVAL))
        }
    }

    fn check_value(&self, cmd: Cmd, len: usize) -> Result<(), SysError> {
        if len == self.user_value_size() {
            Ok(())
        } else {
            Err(SysError::new(cmd.name(), libc::EINVAL))
        }
    }
}
