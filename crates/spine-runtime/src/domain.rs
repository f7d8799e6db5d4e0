//! Protection domains: SPINE's "enforced linking". Every extension loads into a named
//! domain that lists what its extensions may link against (helpers, the maps they share
//! by name, the ports and endpoints they may redirect to), what they may consume (map
//! bytes, instructions) and how long one invocation may run. Anything outside is refused
//! at load with a message naming the symbol. One default domain keeps the single-tenant
//! case simple.
//!
//! Isolation between domains needs no run-time check: an extension reaches maps only
//! through its own map table (handles are indices into it), and each domain's shared maps
//! live in that domain's registry alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use spine_maps::Map;

use crate::watchdog::FaultPolicy;
use crate::xdp::Budget;

/// Helpers spine implements for XDP extensions.
pub const XDP_HELPERS: &[u32] = {
    use spine_abi::helper::*;
    &[
        MAP_LOOKUP_ELEM,
        MAP_UPDATE_ELEM,
        MAP_DELETE_ELEM,
        MAP_PUSH_ELEM,
        MAP_POP_ELEM,
        MAP_PEEK_ELEM,
        KTIME_GET_NS,
        TRACE_PRINTK,
        GET_PRANDOM_U32,
        GET_SMP_PROCESSOR_ID,
        TAIL_CALL,
        REDIRECT,
        REDIRECT_MAP,
        PERF_EVENT_OUTPUT,
        CSUM_DIFF,
        XDP_ADJUST_HEAD,
        XDP_ADJUST_META,
        XDP_ADJUST_TAIL,
        FIB_LOOKUP,
        KTIME_GET_BOOT_NS,
        KTIME_GET_COARSE_NS,
        XDP_GET_BUFF_LEN,
        XDP_LOAD_BYTES,
        XDP_STORE_BYTES,
        MAP_LOOKUP_PERCPU_ELEM,
        RINGBUF_OUTPUT,
        RINGBUF_RESERVE,
        RINGBUF_SUBMIT,
        RINGBUF_DISCARD,
        RINGBUF_QUERY,
        FOR_EACH_MAP_ELEM,
        LOOP,
        SPIN_LOCK,
        SPIN_UNLOCK,
        JIFFIES64,
        CHECK_MTU,
        KTIME_GET_TAI_NS,
        TIMER_INIT,
        TIMER_SET_CALLBACK,
        TIMER_START,
        TIMER_CANCEL,
        DYNPTR_READ,
        DYNPTR_WRITE,
        DYNPTR_DATA,
        // The kfuncs spine offers (numbered as helpers: `spine_abi::kfunc`).
        KFUNC_DYNPTR_FROM_XDP,
        KFUNC_DYNPTR_SLICE,
        KFUNC_DYNPTR_SLICE_RDWR,
        KFUNC_DYNPTR_ADJUST,
        KFUNC_DYNPTR_IS_NULL,
        KFUNC_DYNPTR_IS_RDONLY,
        KFUNC_DYNPTR_SIZE,
        KFUNC_DYNPTR_CLONE,
    ]
};

/// spine's own helpers (numbered outside the kernel's range): only a domain that lists
/// them in `helpers` grants them; the default (every helper) does not include them.
pub const SPINE_HELPERS: &[u32] = &[
    spine_abi::helper::SPINE_MSG_SEND,
    spine_abi::helper::SPINE_MSG_POST,
    spine_abi::helper::SPINE_MSG_BULK_LEN,
    spine_abi::helper::SPINE_MSG_BULK_READ,
    spine_abi::helper::SPINE_MSG_BULK_WRITE,
    spine_abi::helper::SPINE_MSG_SEND_BULK,
    spine_abi::helper::SPINE_MSG_POST_TO,
];

/// What an active-message handler may not call: helpers that act on a packet or its
/// verdict (a handler's "packet" is its message, and its return value is no verdict).
const NOT_FOR_HANDLERS: &[u32] = {
    use spine_abi::helper::*;
    &[
        TAIL_CALL,
        REDIRECT,
        REDIRECT_MAP,
        XDP_ADJUST_HEAD,
        XDP_ADJUST_META,
        XDP_ADJUST_TAIL,
        FIB_LOOKUP,
        XDP_GET_BUFF_LEN,
        XDP_LOAD_BYTES,
        XDP_STORE_BYTES,
        CHECK_MTU,
        KFUNC_DYNPTR_FROM_XDP,
    ]
};

/// What a domain's extensions may use, all together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quota {
    /// Bytes of map storage over all maps the domain's extensions create.
    pub map_bytes: u64,
    /// Instructions in one program.
    pub insns: usize,
}

impl Default for Quota {
    /// 1 GiB of maps and the kernel's 1M-instruction program limit.
    fn default() -> Self {
        Quota { map_bytes: 1 << 30, insns: 1_000_000 }
    }
}

/// A domain's definition (from configuration).
#[derive(Debug, Clone, PartialEq)]
pub struct DomainSpec {
    pub name: String,
    /// Helper ids extensions may call; `None` = every kernel helper spine implements
    /// (spine's own, [`SPINE_HELPERS`], only when listed).
    pub helpers: Option<Vec<u32>>,
    /// Maps shared between the domain's extensions: an extension declaring a map of this
    /// name gets the domain's instance (created by the first, checked identical after).
    pub shared_maps: Vec<String>,
    /// Ports extensions may redirect to (by name); `None` = every port.
    pub ports: Option<Vec<String>>,
    /// Endpoints extensions may deliver to (by name); `None` = every endpoint.
    pub endpoints: Option<Vec<String>>,
    pub quota: Quota,
    pub budget: Budget,
    pub faults: FaultPolicy,
}

impl DomainSpec {
    /// The default domain: every helper, no shared maps, every port, default limits.
    pub fn default_domain() -> Self {
        DomainSpec {
            name: "default".to_string(),
            helpers: None,
            shared_maps: Vec::new(),
            ports: None,
            endpoints: None,
            quota: Quota::default(),
            budget: Budget::default(),
            faults: FaultPolicy::default(),
        }
    }

    /// Resolves helper names (`bpf_map_lookup_elem`, or without the `bpf_` prefix) to ids.
    pub fn helper_ids(names: &[String]) -> Result<Vec<u32>, DomainError> {
        names
            .iter()
            .map(|n| {
                let full = if n.starts_with("bpf_") { n.clone() } else { format!("bpf_{n}") };
                let name = |id| spine_abi::helper::name(id);
                SPINE_HELPERS
                    .iter()
                    .copied()
                    .find(|&id| name(id) == Some(n.as_str()))
                    .or_else(|| (0..256u32).find(|&id| name(id) == Some(full.as_str())))
                    // The kfuncs spine offers are granted by their kernel names too.
                    .or_else(|| spine_abi::kfunc::by_name(&full))
                    .ok_or_else(|| DomainError::UnknownHelper(n.clone()))
            })
            .collect()
    }
}

/// Why a domain refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DomainError {
    #[error("unknown helper '{0}'")]
    UnknownHelper(String),
    #[error("domain '{domain}': program of {insns} instructions exceeds its quota of {quota}")]
    Insns { domain: String, insns: usize, quota: usize },
    #[error("domain '{domain}': map '{map}' needs {bytes} bytes; {left} of the quota of {quota} are left")]
    MapBytes { domain: String, map: String, bytes: u64, left: u64, quota: u64 },
    #[error(
        "domain '{domain}': shared map '{map}' is already defined as {existing}, not {wanted}"
    )]
    MapMismatch { domain: String, map: String, existing: String, wanted: String },
    #[error("domain '{domain}': port '{port}' is not one its extensions may redirect to")]
    Port { domain: String, port: String },
}

/// A live domain: its definition, the maps its extensions share, and what it has used.
#[derive(Debug)]
pub struct Domain {
    spec: DomainSpec,
    /// Control path only (loading); never touched while packets run.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    shared: HashMap<String, Arc<Map>>,
    map_bytes: u64,
}

impl Domain {
    pub fn new(spec: DomainSpec) -> Arc<Domain> {
        Arc::new(Domain { spec, state: Mutex::new(State::default()) })
    }

    /// The default domain, fresh.
    pub fn default_domain() -> Arc<Domain> {
        Domain::new(DomainSpec::default_domain())
    }

    pub fn spec(&self) -> &DomainSpec {
        &self.spec
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Helper ids extensions of this domain may call on the XDP hook.
    pub fn xdp_helpers(&self) -> Vec<u32> {
        match &self.spec.helpers {
            None => XDP_HELPERS.to_vec(),
            Some(ids) => XDP_HELPERS
                .iter()
                .chain(SPINE_HELPERS)
                .copied()
                .filter(|h| ids.contains(h))
                .collect(),
        }
    }

    /// Helper ids the domain's active-message handlers may call.
    pub fn handler_helpers(&self) -> Vec<u32> {
        let mut ids = self.xdp_helpers();
        ids.retain(|h| !NOT_FOR_HANDLERS.contains(h));
        ids
    }

    /// Whether extensions may redirect to `port`.
    pub fn may_use_port(&self, port: &str) -> bool {
        self.spec.ports.as_ref().is_none_or(|p| p.iter().any(|x| x == port))
    }

    pub(crate) fn check_insns(&self, insns: usize) -> Result<(), DomainError> {
        if insns > self.spec.quota.insns {
            return Err(DomainError::Insns {
                domain: self.spec.name.clone(),
                insns,
                quota: self.spec.quota.insns,
            });
        }
        Ok(())
    }

    /// Bytes of the map quota still free.
    pub fn map_bytes_left(&self) -> u64 {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.spec.quota.map_bytes.saturating_sub(st.map_bytes)
    }

    /// The shared map called `name`, if the domain shares maps of that name and one
    /// exists already.
    pub(crate) fn shared(&self, name: &str) -> Option<Arc<Map>> {
        if !self.spec.shared_maps.iter().any(|m| m == name) {
            return None;
        }
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.shared.get(name).cloned()
    }

    /// Whether maps called `name` are shared in this domain.
    pub(crate) fn shares(&self, name: &str) -> bool {
        self.spec.shared_maps.iter().any(|m| m == name)
    }

    /// Charges a newly created map to the quota and, if its name is shared, registers it
    /// (the first definition wins; a racing second load gets the registered one back).
    pub(crate) fn adopt(&self, map: Arc<Map>) -> Result<Arc<Map>, DomainError> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let name = map.def().name.to_string();
        if self.shares(&name) {
            if let Some(existing) = st.shared.get(&name) {
                return Ok(existing.clone());
            }
        }
        let bytes = map.storage_bytes();
        let left = self.spec.quota.map_bytes.saturating_sub(st.map_bytes);
        if bytes > left {
            return Err(DomainError::MapBytes {
                domain: self.spec.name.clone(),
                map: name,
                bytes,
                left,
                quota: self.spec.quota.map_bytes,
            });
        }
        st.map_bytes += bytes;
        if self.shares(&name) {
            st.shared.insert(name, map.clone());
        }
        Ok(map)
    }

    /// Returns a map's bytes to the quota when the last extension using it is gone.
    pub(crate) fn release(&self, map: &Map) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.map_bytes = st.map_bytes.saturating_sub(map.storage_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spine_maps::{MapDef, MapOptions};

    fn map(name: &str, entries: u32) -> Arc<Map> {
        let def = MapDef {
            name: Arc::from(name),
            map_type: spine_abi::map_type::ARRAY,
            key_size: 4,
            value_size: 8,
            max_entries: entries,
            flags: 0,
            spin_lock: None,
            timer: None,
            map_extra: 0,
        };
        Arc::new(Map::create(def, &MapOptions::default()).unwrap())
    }

    #[test]
    fn helper_names_resolve_with_or_without_prefix() {
        let ids = DomainSpec::helper_ids(&["bpf_map_lookup_elem".into(), "csum_diff".into()]);
        assert_eq!(ids, Ok(vec![1, 28]));
        assert_eq!(
            DomainSpec::helper_ids(&["bpf_fork_bomb".into()]),
            Err(DomainError::UnknownHelper("bpf_fork_bomb".into()))
        );
        // Kfuncs by their kernel names; the dynptr helpers by theirs.
        let ids = DomainSpec::helper_ids(&["bpf_dynptr_from_xdp".into(), "dynptr_read".into()]);
        assert_eq!(ids, Ok(vec![spine_abi::helper::KFUNC_DYNPTR_FROM_XDP, 201]));
        assert!(DomainSpec::helper_ids(&["bpf_cast_to_kern_ctx".into()]).is_err());
    }

    #[test]
    fn helper_list_is_the_intersection_with_what_spine_implements() {
        let spec = DomainSpec { helpers: Some(vec![1, 28, 9999]), ..DomainSpec::default_domain() };
        assert_eq!(Domain::new(spec).xdp_helpers(), vec![1, 28]);
        assert_eq!(Domain::default_domain().xdp_helpers(), XDP_HELPERS.to_vec());
    }

    #[test]
    fn quota_counts_map_bytes_and_shared_maps_are_registered_once() {
        let quota = Quota { map_bytes: 10_000, insns: 10 };
        let spec =
            DomainSpec { shared_maps: vec!["flows".into()], quota, ..DomainSpec::default_domain() };
        let d = Domain::new(spec);
        let first = d.adopt(map("flows", 100)).unwrap();
        assert!(d.shared("flows").is_some_and(|m| Arc::ptr_eq(&m, &first)));
        assert!(d.shared("other").is_none());
        let used = first.storage_bytes();
        assert_eq!(d.map_bytes_left(), 10_000 - used);
        // A second map of the shared name comes back as the registered instance, free.
        let again = d.adopt(map("flows", 100)).unwrap();
        assert!(Arc::ptr_eq(&again, &first));
        assert_eq!(d.map_bytes_left(), 10_000 - used);
        let big = d.adopt(map("big", 100_000)).unwrap_err();
        assert!(matches!(big, DomainError::MapBytes { ref map, .. } if map == "big"), "{big}");
        assert!(d.check_insns(10).is_ok());
        assert!(matches!(d.check_insns(11), Err(DomainError::Insns { insns: 11, .. })));
    }

    #[test]
    fn ports_are_checked_by_name() {
        let spec = DomainSpec { ports: Some(vec!["eth0".into()]), ..DomainSpec::default_domain() };
        let d = Domain::new(spec);
        assert!(d.may_use_port("eth0"));
        assert!(!d.may_use_port("eth1"));
        assert!(Domain::default_domain().may_use_port("anything"));
    }
}
