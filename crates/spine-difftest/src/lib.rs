//! Differential testing against the kernel. One program is loaded into spine and into
//! the kernel; every packet runs through both (`BPF_PROG_TEST_RUN` with repeat 1, so no
//! changes pile up), and after every packet the verdict, the output bytes (metadata and
//! packet, as the kernel copies them out) and the full contents of every map must agree.
//! Packets longer than one buffer (up to 3,520 + 17 × 4,096 bytes) run as multi-buffer
//! frames on both sides, laid out as the kernel's test run lays them out (a 3,520-byte
//! head, then page-sized fragments); the output is then the head and every fragment.
//!
//! Per-CPU maps are compared slot by slot, so the caller pins its thread to one CPU
//! (the kernel runs the test on the calling CPU) and spine runs as that CPU.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use spine_maps::Map;
use spine_runtime::{
    load_selected, Budget, EngineKind, FixedHost, Frame, Geometry, LoadOptions, LoadedObject,
    RxInfo, XdpRunner, MAX_FRAGS,
};
use spine_sys::{KernelMap, KernelObject, TestRun};

/// Why a differential run could not be carried out (as opposed to a mismatch).
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    #[error("parsing the object: {0}")]
    Parse(#[from] spine_obj::ObjError),
    #[error("no program {0:?} in the object")]
    NoProgram(Option<String>),
    #[error("loading into spine: {0}")]
    Spine(#[from] spine_runtime::LoadError),
    #[error("setting up the spine runner: {0}")]
    Runner(#[from] spine_runtime::RunnerError),
    #[error("loading into the kernel: {0}")]
    Kernel(#[from] spine_sys::LoadError),
    #[error("kernel: {0}")]
    Sys(#[from] spine_sys::SysError),
    #[error("no map '{0}' in the program")]
    NoMap(String),
    #[error("spine map '{map}': {source}")]
    Map {
        map: String,
        #[source]
        source: spine_maps::MapError,
    },
}

/// One disagreement between spine and the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Index of the packet after which it showed.
    pub packet: usize,
    pub what: MismatchKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MismatchKind {
    /// `kernel: None` when the kernel refused the packet (it does not fit its frame).
    Verdict {
        spine: Result<u32, String>,
        kernel: Option<u32>,
    },
    Output {
        spine: Vec<u8>,
        kernel: Vec<u8>,
    },
    /// A map entry present in one, absent or different in the other (`None` = absent).
    MapEntry {
        map: String,
        key: Vec<u8>,
        spine: Option<Vec<u8>>,
        kernel: Option<Vec<u8>>,
    },
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "after packet {}: ", self.packet)?;
        match &self.what {
            MismatchKind::Verdict { spine, kernel } => {
                write!(f, "verdict spine {spine:?}, kernel {kernel:?}")
            }
            MismatchKind::Output { spine, kernel } => {
                let first = spine
                    .iter()
                    .zip(kernel)
                    .position(|(a, b)| a != b)
                    .unwrap_or(spine.len().min(kernel.len()));
                write!(
                    f,
                    "output differs (spine {} bytes, kernel {} bytes, first difference at byte {first})\n  spine  {}\n  kernel {}",
                    spine.len(),
                    kernel.len(),
                    hex(spine),
                    hex(kernel)
                )
            }
            MismatchKind::MapEntry { map, key, spine, kernel } => write!(
                f,
                "map {map} key {}: spine {}, kernel {}",
                hex(key),
                spine.as_deref().map_or_else(|| "absent".to_string(), hex),
                kernel.as_deref().map_or_else(|| "absent".to_string(), hex)
            ),
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The outcome of a differential run.
#[derive(Debug, Default)]
pub struct Report {
    pub packets: usize,
    /// Verdicts both sides agreed on, by value 0..=4; 5 = anything else.
    pub verdicts: [usize; 6],
    /// Packets that ran as multi-buffer frames (longer than the 3,520-byte head).
    pub multi_buffer: usize,
    /// Packets both sides refused (shorter than 14 bytes or longer than a frame).
    pub refused: usize,
    /// Map comparisons made (maps × packets, or maps once with [`MapCheck::AtEnd`]).
    pub map_checks: usize,
    /// Maps left uncompared for their size ([`MapCheck::AtEnd`]).
    pub skipped_maps: Vec<String>,
    pub mismatches: Vec<Mismatch>,
}

/// When a [`Pair`] compares the maps of the two sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapCheck {
    /// After every packet, every map (the tests' default).
    EveryPacket,
    /// Once, after the last packet, the maps of at most `max_entries` entries (a
    /// production program's multi-million-entry tables take minutes to list through
    /// bpf(2)); the others are named in [`Report::skipped_maps`].
    AtEnd { max_entries: u32 },
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [ab, dr, pa, tx, re, other] = self.verdicts;
        write!(
            f,
            "{} packets ({} multi-buffer; aborted {ab}, drop {dr}, pass {pa}, tx {tx}, redirect {re}, \
             other {other}, refused by both {}), {} map checks, {} mismatches",
            self.packets,
            self.multi_buffer,
            self.refused,
            self.map_checks,
            self.mismatches.len()
        )
    }
}

/// One program loaded on both sides.
pub struct Pair {
    runner: XdpRunner,
    kernel: KernelObject,
    /// The object's data maps with their index in the object (the kernel's order).
    maps: Vec<(usize, Arc<Map>)>,
    host: FixedHost,
    check: MapCheck,
    /// Keeps the object's other programs (tail-call targets) loaded.
    _loaded: LoadedObject,
}

impl fmt::Debug for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pair").field("program", &self.runner.extension().name()).finish()
    }
}

impl Pair {
    /// Loads `section` of `object` (the first program if `None`) into spine (on `engine`)
    /// and into the kernel. Per-CPU maps get one slot per possible CPU on both sides;
    /// spine runs as `cpu`.
    pub fn load(
        object: &[u8],
        section: Option<&str>,
        cpu: usize,
        engine: EngineKind,
    ) -> Result<Pair, DiffError> {
        Self::load_parsed(&spine_obj::parse(object)?, section, cpu, engine)
    }

    /// [`load`](Self::load), from an object already parsed (with CO-RE relocations
    /// applied against a target BTF, or program types given for sections).
    pub fn load_parsed(
        obj: &spine_obj::Object,
        section: Option<&str>,
        cpu: usize,
        engine: EngineKind,
    ) -> Result<Pair, DiffError> {
        let prog = spine_runtime::select_program(obj, section)
            .map_err(|_| DiffError::NoProgram(section.map(str::to_string)))?;
        let opts =
            LoadOptions { ncpus: spine_sys::possible_cpus(), engine, ..LoadOptions::default() };
        // The chosen program and its tail-call targets, as the kernel side loads them:
        // a sibling of another type, or one either verifier refuses, stays out.
        let (loaded, ext) = load_selected(obj, section, &opts)?;
        let maps = (0..ext.maps().len())
            .filter_map(|i| ext.maps().data(i).map(|_| i))
            .filter_map(|i| match ext.maps().get(i) {
                // The kernel does not let user space read an XSKMAP entry or a perf
                // event array's slot back, and a ring buffer has no elements to list
                // (its records are read through mmap, not bpf(2)).
                Some(spine_runtime::RtMap::Data(m))
                    if !matches!(
                        m.def().map_type,
                        spine_abi::map_type::XSKMAP
                            | spine_abi::map_type::PERF_EVENT_ARRAY
                            | spine_abi::map_type::RINGBUF
                    ) =>
                {
                    Some((i, m.clone()))
                }
                _ => None,
            })
            .collect();
        // Fidelity runs must never be cut short by the watchdog.
        let runner = XdpRunner::new(ext, cpu)?.with_budget(Budget::UNLIMITED);
        let kernel = spine_sys::load_object_program(obj, prog)?;
        let host = FixedHost::new(1);
        Ok(Pair { runner, kernel, maps, host, check: MapCheck::EveryPacket, _loaded: loaded })
    }

    /// Compares the maps as `check` says (after every packet by default).
    pub fn with_map_check(mut self, check: MapCheck) -> Pair {
        self.check = check;
        self
    }

    /// Writes `key` → `value` into map `map` on both sides, as user space does (one value
    /// for every CPU of a per-CPU map): a configured program (a balancer's VIPs) compared.
    pub fn update(&mut self, map: &str, key: &[u8], value: &[u8]) -> Result<(), DiffError> {
        let (index, m) = self
            .maps
            .iter()
            .find(|(_, m)| &*m.def().name == map)
            .ok_or_else(|| DiffError::NoMap(map.to_string()))?;
        m.update_user(key, &m.user_value_for_all_cpus(value), 0)
            .map_err(|source| DiffError::Map { map: map.to_string(), source })?;
        let km = &self.kernel.maps[*index];
        km.update(key, &km.value_for_all_cpus(value), 0)?;
        Ok(())
    }

    /// Pops every element of queue or stack `map` on both sides, as user space does
    /// (`BPF_MAP_LOOKUP_AND_DELETE_ELEM`): spine's elements and the kernel's, in the
    /// order they came out.
    #[allow(clippy::type_complexity)]
    pub fn drain(&mut self, map: &str) -> Result<(Vec<Vec<u8>>, Vec<Vec<u8>>), DiffError> {
        let (index, m) = self
            .maps
            .iter()
            .find(|(_, m)| &*m.def().name == map)
            .ok_or_else(|| DiffError::NoMap(map.to_string()))?;
        let n = m.def().value_size as usize;
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        let mut v = vec![0u8; n];
        for _ in 0..=m.def().max_entries {
            match m.lookup_and_delete_user(&[], &mut v, 0) {
                Ok(()) => ours.push(v.clone()),
                Err(spine_maps::MapError::NotFound { .. }) => break,
                Err(source) => return Err(DiffError::Map { map: map.to_string(), source }),
            }
        }
        let km = &self.kernel.maps[*index];
        for _ in 0..=km.max_entries() {
            if !km.lookup_and_delete(&[], &mut v, 0)? {
                break;
            }
            theirs.push(v.clone());
        }
        Ok((ours, theirs))
    }

    /// Spine's host (its clock, generator and the interfaces' MTUs that
    /// `bpf_check_mtu` reads; loopback by default, as the kernel's test run).
    pub fn host_mut(&mut self) -> &mut FixedHost {
        &mut self.host
    }

    /// The kernel's side: its maps (in the object's order) and program.
    pub fn kernel(&self) -> &KernelObject {
        &self.kernel
    }

    /// Spine's map `map`, if the program has it: any data map, also one that is not
    /// compared with the kernel's (an XSKMAP, whose kernel entries are sockets).
    pub fn spine_map(&self, map: &str) -> Option<&Arc<Map>> {
        self.runner.extension().map(map)
    }

    /// Spine's array map `map` as `u64`s, key by key (the first 8 bytes of each value;
    /// empty if there is no such map): what a test asserts beyond "same as the kernel".
    pub fn spine_map_u64(&self, map: &str) -> Vec<u64> {
        let Some((_, m)) = self.maps.iter().find(|(_, m)| &*m.def().name == map) else {
            return Vec::new();
        };
        let mut value = vec![0u8; m.user_value_size()];
        (0..m.def().max_entries)
            .map(|k| match m.lookup_user(&k.to_le_bytes(), &mut value) {
                Ok(()) if value.len() >= 8 => {
                    u64::from_le_bytes(value[..8].try_into().expect("8 bytes"))
                }
                _ => 0,
            })
            .collect()
    }

    /// Runs every packet through both sides, comparing after each; stops collecting
    /// after `max_mismatches` disagreements.
    pub fn run(&mut self, packets: &[Vec<u8>], max_mismatches: usize) -> Result<Report, DiffError> {
        let mut report = Report::default();
        let mut frame = Frame::with_frags(Geometry::TEST_RUN, MAX_FRAGS);
        let mut out = Vec::new();
        for (i, pkt) in packets.iter().enumerate() {
            if report.mismatches.len() >= max_mismatches {
                break;
            }
            report.packets += 1;
            let loaded = frame.load(pkt);
            let kout = self.kernel.prog.test_run(&TestRun::new(pkt));
            let k = match (&loaded, kout) {
                (Ok(()), Ok(k)) => k,
                (Err(_), Err(_)) => {
                    report.refused += 1;
                    continue;
                }
                (Ok(()), Err(e)) if e.is(22) => {
                    // EINVAL: the kernel refused a packet spine accepted.
                    report.mismatches.push(Mismatch {
                        packet: i,
                        what: MismatchKind::Verdict { spine: Ok(0), kernel: None },
                    });
                    continue;
                }
                (Ok(()), Err(e)) => return Err(e.into()),
                (Err(e), Ok(k)) => {
                    report.mismatches.push(Mismatch {
                        packet: i,
                        what: MismatchKind::Verdict {
                            spine: Err(e.to_string()),
                            kernel: Some(k.retval),
                        },
                    });
                    continue;
                }
            };
            report.multi_buffer += usize::from(frame.is_multi_buffer());
            let spine = self.runner.run(&mut frame, RxInfo::default(), &mut self.host);
            match &spine {
                Ok(v) if *v == k.retval => report.verdicts[(*v as usize).min(5)] += 1,
                _ => report.mismatches.push(Mismatch {
                    packet: i,
                    what: MismatchKind::Verdict {
                        spine: spine.as_ref().map(|v| *v).map_err(|f| f.to_string()),
                        kernel: Some(k.retval),
                    },
                }),
            }
            frame.copy_out(&mut out);
            if out != k.data_out {
                report.mismatches.push(Mismatch {
                    packet: i,
                    what: MismatchKind::Output { spine: out.clone(), kernel: k.data_out.clone() },
                });
            }
            if self.check == MapCheck::EveryPacket {
                for (index, m) in &self.maps {
                    report.map_checks += 1;
                    compare_map(i, m, &self.kernel.maps[*index], &mut report.mismatches)?;
                }
            }
        }
        if let MapCheck::AtEnd { max_entries } = self.check {
            let last = report.packets.saturating_sub(1);
            for (index, m) in &self.maps {
                if m.def().max_entries > max_entries {
                    report.skipped_maps.push(m.def().name.to_string());
                    continue;
                }
                report.map_checks += 1;
                compare_map(last, m, &self.kernel.maps[*index], &mut report.mismatches)?;
            }
        }
        Ok(report)
    }
}

fn is_queue(m: &Map) -> bool {
    matches!(m.def().map_type, spine_abi::map_type::QUEUE | spine_abi::map_type::STACK)
}

/// The element a queue or stack would give next, as `bpf(2)`'s lookup (a peek).
fn peek_spine(m: &Map) -> Result<Option<Vec<u8>>, spine_maps::MapError> {
    let mut v = vec![0u8; m.def().value_size as usize];
    match m.lookup_user(&[], &mut v) {
        Ok(()) => Ok(Some(v)),
        Err(spine_maps::MapError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Every entry of a spine map as bpf(2) would list it (per-CPU values: all CPUs).
pub fn spine_entries(m: &Map) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, spine_maps::MapError> {
    let d = m.def();
    let mut out = BTreeMap::new();
    let mut key: Option<Vec<u8>> = None;
    let mut next = vec![0u8; d.key_size as usize];
    // A broken iteration must not loop forever: no map lists more than max_entries keys.
    for _ in 0..=d.max_entries {
        match m.next_key(key.as_deref(), &mut next) {
            Ok(()) => {}
            Err(spine_maps::MapError::NotFound { .. }) => break,
            Err(e) => return Err(e),
        }
        let mut value = vec![0u8; m.user_value_size()];
        // An empty slot (a devmap's or cpumap's) is listed but has no value: skipped, as
        // the kernel side skips it.
        match m.lookup_user(&next, &mut value) {
            Ok(()) => {
                out.insert(next.clone(), value);
            }
            Err(spine_maps::MapError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
        key = Some(next.clone());
    }
    Ok(out)
}

fn compare_map(
    packet: usize,
    m: &Map,
    km: &KernelMap,
    out: &mut Vec<Mismatch>,
) -> Result<(), DiffError> {
    let name = m.def().name.to_string();
    if m.def().map_type == spine_abi::map_type::BLOOM_FILTER {
        // Neither side can list a bloom filter: tests compare its answers (the
        // program's peeks, and user-side lookups of values they choose).
        return Ok(());
    }
    if is_queue(m) {
        // No keys to list: the element a pop would take next (a peek) and the count
        // are compared; `Pair::drain` compares every element at the end of a test.
        let ours = peek_spine(m).map_err(|source| DiffError::Map { map: name.clone(), source })?;
        let theirs = km.lookup_vec(&[])?;
        if ours != theirs {
            let (spine, kernel) = (ours, theirs);
            out.push(Mismatch {
                packet,
                what: MismatchKind::MapEntry { map: name, key: Vec::new(), spine, kernel },
            });
        }
        return Ok(());
    }
    let ours = spine_entries(m).map_err(|source| DiffError::Map { map: name.clone(), source })?;
    let theirs: BTreeMap<Vec<u8>, Vec<u8>> = km.entries()?.into_iter().collect();
    if ours == theirs {
        return Ok(());
    }
    let keys: BTreeSet<&Vec<u8>> = ours.keys().chain(theirs.keys()).collect();
    if let Some(key) = keys.into_iter().find(|k| ours.get(*k) != theirs.get(*k)) {
        out.push(Mismatch {
            packet,
            what: MismatchKind::MapEntry {
                map: name,
                key: key.clone(),
                spine: ours.get(key).cloned(),
                kernel: theirs.get(key).cloned(),
            },
        });
    }
    Ok(())
}
