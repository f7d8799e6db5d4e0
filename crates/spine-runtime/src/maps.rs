//! An object's maps as its extensions see them: data maps (`spine_maps`) and program
//! arrays (tail-call tables, which hold extensions and so live in the runtime). One table
//! per loaded object; every program of the object shares it, as with libbpf.

use std::sync::{Arc, PoisonError, RwLock};

use spine_abi::map_type;
use spine_maps::{Map, MapDef, MapError, MapOptions};
use spine_obj::{MapOrigin, MapSpec, Object};

use crate::domain::{Domain, DomainError};
use crate::ext::{Extension, LoadError};

/// Register value a program holds for a map (`lddw rX, map`): opaque to the program (no
/// region covers it) and decoded only by helpers.
pub const MAP_HANDLE_BASE: u64 = 0xffff_5350_0000_0000;
/// Most maps one object may declare.
pub const MAX_MAPS: usize = 4096;

/// Decodes a map handle into a map index, if it is one.
pub fn map_index(handle: u64) -> Option<usize> {
    let idx = handle.wrapping_sub(MAP_HANDLE_BASE);
    (idx < MAX_MAPS as u64).then_some(idx as usize)
}

/// One map of the table.
#[derive(Debug, Clone)]
pub enum RtMap {
    Data(Arc<Map>),
    Progs(Arc<ProgArray>),
}

impl RtMap {
    pub fn name(&self) -> &str {
        match self {
            RtMap::Data(m) => &m.def().name,
            RtMap::Progs(p) => &p.name,
        }
    }
}

/// The maps of one object, by the index its programs' `lddw` uses.
#[derive(Debug)]
pub struct MapTable {
    maps: Vec<RtMap>,
    domain: Arc<Domain>,
}

impl MapTable {
    /// Creates the object's maps in `domain`: shared names resolve to the domain's
    /// instance, everything else is created and charged to the domain's quota.
    pub fn create(
        obj: &Object,
        domain: &Arc<Domain>,
        ncpus: usize,
        seed: u64,
    ) -> Result<MapTable, LoadError> {
        if obj.maps.len() > MAX_MAPS {
            return Err(LoadError::TooManyMaps(obj.maps.len()));
        }
        let mut maps = Vec::with_capacity(obj.maps.len());
        for spec in &obj.maps {
            maps.push(Self::create_one(spec, domain, ncpus, seed)?);
        }
        Ok(MapTable { maps, domain: domain.clone() })
    }

    fn create_one(
        spec: &MapSpec,
        domain: &Arc<Domain>,
        ncpus: usize,
        seed: u64,
    ) -> Result<RtMap, LoadError> {
        let map_err = |source| LoadError::Map { map: spec.name.clone(), source };
        if spec.map_type == map_type::PROG_ARRAY {
            if spec.key_size != 4 || spec.value_size != 4 || spec.max_entries == 0 {
                return Err(map_err(MapError::KeySize {
                    map: Arc::from(spec.name.as_str()),
                    key_size: spec.key_size,
                    min: 4,
                    max: 4,
                }));
            }
            return Ok(RtMap::Progs(Arc::new(ProgArray::new(&spec.name, spec.max_entries))));
        }
        let def = MapDef {
            name: Arc::from(spec.name.as_str()),
            map_type: spec.map_type,
            key_size: spec.key_size,
            value_size: spec.value_size,
            max_entries: spec.max_entries,
            flags: spec.flags,
        };
        let is_data = matches!(spec.origin, MapOrigin::GlobalData { .. });
        if !is_data {
            if let Some(shared) = domain.shared(&spec.name) {
                let d = shared.def();
                if (d.map_type, d.key_size, d.value_size, d.max_entries, d.flags)
                    != (def.map_type, def.key_size, def.value_size, def.max_entries, def.flags)
                {
                    return Err(LoadError::Domain(DomainError::MapMismatch {
                        domain: domain.name().to_string(),
                        map: spec.name.clone(),
                        existing: describe(d),
                        wanted: describe(&def),
                    }));
                }
                return Ok(RtMap::Data(shared));
            }
        }
        let opts = MapOptions { ncpus, seed, max_bytes: domain.map_bytes_left() };
        let map = Map::create(def, &opts).map_err(|e| match e {
            MapError::TooLarge { bytes, .. } => LoadError::Domain(DomainError::MapBytes {
                domain: domain.name().to_string(),
                map: spec.name.clone(),
                bytes,
                left: domain.map_bytes_left(),
                quota: domain.spec().quota.map_bytes,
            }),
            e => map_err(e),
        })?;
        if let Some(init) = &spec.initial {
            map.write_initial(init).map_err(map_err)?;
        }
        // As libbpf does: read-only global data is frozen once initialised.
        if matches!(spec.origin, MapOrigin::GlobalData { read_only: true, .. }) {
            map.freeze();
        }
        let map = domain.adopt(Arc::new(map)).map_err(LoadError::Domain)?;
        Ok(RtMap::Data(map))
    }

    pub fn get(&self, index: usize) -> Option<&RtMap> {
        self.maps.get(index)
    }

    pub fn len(&self) -> usize {
        self.maps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.maps.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &RtMap> {
        self.maps.iter()
    }

    /// The data maps, in table order (program arrays left out).
    pub fn data_maps(&self) -> impl Iterator<Item = &Arc<Map>> {
        self.maps.iter().filter_map(|m| match m {
            RtMap::Data(d) => Some(d),
            RtMap::Progs(_) => None,
        })
    }

    /// The data map at `index`.
    pub fn data(&self, index: usize) -> Option<&Map> {
        match self.maps.get(index)? {
            RtMap::Data(m) => Some(m),
            RtMap::Progs(_) => None,
        }
    }

    /// The program array at `index`.
    pub fn progs(&self, index: usize) -> Option<&ProgArray> {
        match self.maps.get(index)? {
            RtMap::Progs(p) => Some(p),
            RtMap::Data(_) => None,
        }
    }

    /// The map called `name`.
    pub fn by_name(&self, name: &str) -> Option<&RtMap> {
        self.maps.iter().find(|m| m.name() == name)
    }
}

impl Drop for MapTable {
    /// Returns the bytes of maps nobody else holds to the domain's quota (maps the
    /// domain shares stay registered, and charged, while the domain lives).
    fn drop(&mut self) {
        for m in &self.maps {
            if let RtMap::Data(map) = m {
                if Arc::strong_count(map) == 1 {
                    self.domain.release(map);
                }
            }
        }
    }
}

fn describe(d: &MapDef) -> String {
    format!(
        "{} key {} value {} max_entries {} flags {:#x}",
        map_type::name(d.map_type),
        d.key_size,
        d.value_size,
        d.max_entries,
        d.flags
    )
}

/// A program array: the targets of `bpf_tail_call`. Its programs share the array's
/// object, so slots and programs form a cycle; as in the kernel, the array is cleared
/// when the object's user handle ([`crate::LoadedObject`]) goes away, which breaks it.
#[derive(Debug)]
pub struct ProgArray {
    name: String,
    /// Written only from the control side; tail calls take the read lock briefly.
    slots: RwLock<Vec<Option<Arc<Extension>>>>,
}

/// Why a program-array update was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgArrayError {
    #[error("program array '{map}': index {index} out of range (max_entries {max_entries})")]
    Index { map: String, index: u32, max_entries: u32 },
    #[error(
        "program array '{map}': tail-call targets must come from the same object as the array"
    )]
    ForeignProgram { map: String },
}

impl ProgArray {
    pub fn new(name: &str, max_entries: u32) -> Self {
        ProgArray { name: name.to_string(), slots: RwLock::new(vec![None; max_entries as usize]) }
    }

    pub fn max_entries(&self) -> u32 {
        self.slots.read().unwrap_or_else(PoisonError::into_inner).len() as u32
    }

    /// Puts `prog` into `index` (`None` empties it). Targets must share `table` (the
    /// array's own object), so a tail call never changes which maps are reachable.
    pub fn set(
        &self,
        index: u32,
        prog: Option<&Arc<Extension>>,
        table: &Arc<MapTable>,
    ) -> Result<(), ProgArrayError> {
        if let Some(p) = prog {
            if !Arc::ptr_eq(p.maps(), table) {
                return Err(ProgArrayError::ForeignProgram { map: self.name.clone() });
            }
        }
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        let max_entries = slots.len() as u32;
        let slot = slots.get_mut(index as usize).ok_or(ProgArrayError::Index {
            map: self.name.clone(),
            index,
            max_entries,
        })?;
        *slot = prog.cloned();
        Ok(())
    }

    /// The program in `index`, if any.
    pub fn get(&self, index: u32) -> Option<Arc<Extension>> {
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        slots.get(index as usize)?.clone()
    }

    /// Empties every slot.
    pub fn clear(&self) {
        self.slots
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .iter_mut()
            .for_each(|s| *s = None);
    }
}
