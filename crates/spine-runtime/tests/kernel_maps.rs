//! Ring buffers and maps in maps against the kernel: the runtime's fixtures
//! (`spine-runtime/tests/fixtures/{ringbuf,inner}.c`) run packet by packet in spine, on
//! both engines, and in the kernel with `BPF_PROG_TEST_RUN`; verdicts, every map the
//! programs write, the positions `bpf_ringbuf_query` reports and the records a consumer
//! reads (the kernel's through its mmap'd ring) must agree, also after inner maps are
//! replaced from user space. Needs root (bpf(2)); without it each test says SKIP loudly
//! and passes.
//!
//! These live with the adapter's tests because this crate already links both the
//! runtime and `spine-sys`.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use spine_abi::map_type;
use spine_maps::{Map, MapDef, MapOptions};
use spine_obj::Object;
use spine_runtime::{
    load_object, Budget, EngineKind, FixedHost, Frame, Geometry, LoadOptions, LoadedObject, RxInfo,
    XdpRunner,
};
use spine_sys::{KernelMap, KernelObject, TestRun};

const ENGINES: [EngineKind; 2] = [EngineKind::Interpreter, EngineKind::Jit];

fn kernel_available() -> bool {
    match spine_sys::probe() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: kernel comparison needs bpf(2), which is unavailable: {e}");
            false
        }
    }
}

fn compile(name: &str) -> Object {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("spine-kmaps-{}-{seq}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = spine_progs::compile_c(&src, &dir.join(format!("{name}.o")), &[]).expect("clang");
    std::fs::remove_dir_all(&dir).ok();
    spine_obj::parse(&bytes).expect("parse")
}

/// One program of `obj` in spine (on `engine`) and in the kernel.
struct Pair {
    runner: XdpRunner,
    kernel: KernelObject,
    obj: Object,
    _loaded: LoadedObject,
}

impl Pair {
    fn load(obj: &Object, prog: &str, engine: EngineKind) -> Pair {
        let loaded = load_object(obj, &LoadOptions { engine, ..LoadOptions::default() }).unwrap();
        let ext = loaded.program(Some(prog)).unwrap().clone();
        let runner = XdpRunner::new(ext, 0).unwrap().with_budget(Budget::UNLIMITED);
        let p = obj.programs.iter().find(|p| p.name == prog).unwrap();
        let kernel = spine_sys::load_object_program(obj, p)
            .unwrap_or_else(|e| panic!("{prog}: the kernel refused it: {e}"));
        Pair { runner, kernel, obj: obj.clone(), _loaded: loaded }
    }

    fn spine_map(&self, name: &str) -> &Arc<Map> {
        self.runner.extension().map(name).unwrap_or_else(|| panic!("no map {name}"))
    }

    fn kernel_map(&self, name: &str) -> &KernelMap {
        let i = self.obj.maps.iter().position(|m| m.name == name).unwrap();
        &self.kernel.maps[i]
    }

    /// Runs one packet on both sides and checks the verdicts agree; returns it.
    fn run(&mut self, head: &[u8]) -> u32 {
        let mut pkt: Vec<u8> = (0..64u8).collect();
        pkt[..head.len()].copy_from_slice(head);
        let k = self.kernel.prog.test_run(&TestRun::new(&pkt)).unwrap().retval;
        let mut f = Frame::new(Geometry::TEST_RUN);
        f.load(&pkt).unwrap();
        let s = self.runner.run(&mut f, RxInfo::default(), &mut FixedHost::new(1));
        assert_eq!(s, Ok(k), "packet {head:?}: spine against the kernel");
        k
    }

    /// The contents of map `name` on both sides agree.
    fn same_map(&self, name: &str, when: &str) {
        let k: BTreeMap<Vec<u8>, Vec<u8>> =
            self.kernel_map(name).entries().unwrap().into_iter().collect();
        assert_eq!(entries(self.spine_map(name)), k, "map {name} {when}");
    }
}

/// Every entry of a spine map, as bpf(2) lists it.
fn entries(m: &Map) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut key: Option<Vec<u8>> = None;
    let mut next = vec![0u8; m.def().key_size as usize];
    while m.next_key(key.as_deref(), &mut next).is_ok() {
        let mut v = vec![0u8; m.user_value_size()];
        m.lookup_user(&next, &mut v).unwrap();
        out.insert(next.clone(), v);
        key = Some(next.clone());
    }
    out
}

fn spine_records(m: &Map) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    m.ringbuf().unwrap().consume(|r| out.push(r.to_vec()));
    out
}

/// A kernel ring buffer's consumer side, as libbpf's `ring_buffer__consume` reads it:
/// the consumer page mapped writable, the producer page and the data pages (mapped
/// twice in a row by the kernel) read-only.
struct KernelRing {
    cons: *mut u8,
    prod: *mut u8,
    size: usize,
    page: usize,
}

impl KernelRing {
    fn new(map: &KernelMap) -> KernelRing {
        let size = map.max_entries() as usize;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let fd = map.fd().as_raw_fd();
        // SAFETY: maps fresh pages of the ring's fd (offset 0: the consumer page, which
        // the kernel lets user space write); checked against MAP_FAILED below.
        let cons = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        // SAFETY: as above, the producer page and the data pages, read-only.
        let prod = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                page + 2 * size,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                page as libc::off_t,
            )
        };
        assert!(cons != libc::MAP_FAILED && prod != libc::MAP_FAILED, "mmap of the ring");
        KernelRing { cons: cons.cast(), prod: prod.cast(), size, page }
    }

    fn pos(p: *mut u8) -> &'static AtomicU64 {
        // SAFETY: `p` is the start of a mapped, 8-byte aligned page that holds the
        // position as a u64 and stays mapped until `drop`; the kernel updates it
        // atomically.
        unsafe { &*p.cast::<AtomicU64>() }
    }

    /// Consumes every committed record (skipping discarded ones) and returns them.
    fn consume(&self) -> Vec<Vec<u8>> {
        let (cons_pos, prod_pos) = (Self::pos(self.cons), Self::pos(self.prod));
        let mut cons = cons_pos.load(Ordering::Acquire);
        let mut out = Vec::new();
        while cons < prod_pos.load(Ordering::Acquire) {
            let off = self.page + (cons as usize & (self.size - 1));
            // SAFETY: the header lies in the mapped data pages (offset below one ring
            // size, 8-byte aligned); the kernel writes its length word atomically.
            let hdr = unsafe { &*self.prod.add(off).cast::<std::sync::atomic::AtomicU32>() };
            let len = hdr.load(Ordering::Acquire);
            if len & (1 << 31) != 0 {
                break;
            }
            let data_len = (len & !(3 << 30)) as usize;
            if len & (1 << 30) == 0 {
                // SAFETY: a committed record of `data_len` bytes follows its 8-byte
                // header; the double mapping keeps it contiguous inside the mapping.
                let rec = unsafe { std::slice::from_raw_parts(self.prod.add(off + 8), data_len) };
                out.push(rec.to_vec());
            }
            cons += (data_len as u64 + 8).next_multiple_of(8);
            cons_pos.store(cons, Ordering::Release);
        }
        out
    }
}

impl Drop for KernelRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; nothing refers to it afterwards.
        unsafe {
            libc::munmap(self.cons.cast(), self.page);
            libc::munmap(self.prod.cast(), self.page + 2 * self.size);
        }
    }
}

#[test]
fn ring_buffer_output_matches_the_kernel_through_a_full_ring() {
    if !kernel_available() {
        return;
    }
    let obj = compile("ringbuf");
    for engine in ENGINES {
        let mut p = Pair::load(&obj, "output", engine);
        let ring = KernelRing::new(p.kernel_map("events"));
        // Every flags value (4..7 invalid), then past full (127 records fit), then
        // consumed on both sides, then more.
        for i in 0..140u8 {
            let flags = if i < 16 { i % 8 } else { 0 };
            p.run(&[i, flags]);
            p.same_map("stats", &format!("after packet {i} ({engine:?})"));
        }
        let (s, k) = (spine_records(p.spine_map("events")), ring.consume());
        assert_eq!(s.len(), 127, "{engine:?}: 132 with valid flags, the ring full at 127");
        assert_eq!(s, k, "{engine:?}: the records");
        for i in 0..10u8 {
            p.run(&[i, 0]);
            p.same_map("stats", &format!("after consuming, packet {i} ({engine:?})"));
        }
        assert_eq!(spine_records(p.spine_map("events")), ring.consume());
    }
}

#[test]
fn reserve_submit_and_discard_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let obj = compile("ringbuf");
    for engine in ENGINES {
        let mut p = Pair::load(&obj, "reserve", engine);
        let ring = KernelRing::new(p.kernel_map("events"));
        for i in 0..140u8 {
            p.run(&[i.wrapping_mul(7)]);
            p.same_map("stats", &format!("after packet {i} ({engine:?})"));
            if i % 50 == 49 {
                assert_eq!(spine_records(p.spine_map("events")), ring.consume(), "{engine:?}");
            }
        }
        assert_eq!(spine_records(p.spine_map("events")), ring.consume(), "{engine:?}");
    }
}

fn hash_def() -> spine_sys::MapDef {
    spine_sys::MapDef::new(map_type::HASH, 4, 8, 16)
}

/// A fresh inner table on both sides, swapped into `key` of `outer`.
fn swap_in(p: &Pair, outer: &str, key: u32) -> (Arc<Map>, KernelMap) {
    let def = MapDef::new("fresh", map_type::HASH, 4, 8, 16, 0);
    let s = Arc::new(Map::create(def, &MapOptions::default()).unwrap());
    p.spine_map(outer).set_inner(&key.to_ne_bytes(), Some(s.clone()), 0).unwrap();
    let k = KernelMap::create("fresh", hash_def(), None).unwrap();
    let fd = k.fd().as_raw_fd() as u32;
    p.kernel_map(outer).update(&key.to_ne_bytes(), &fd.to_ne_bytes(), 0).unwrap();
    (s, k)
}

fn same(s: &Map, k: &KernelMap, what: &str) {
    let kernel: BTreeMap<Vec<u8>, Vec<u8>> = k.entries().unwrap().into_iter().collect();
    assert_eq!(entries(s), kernel, "{what}");
}

#[test]
fn inner_maps_match_the_kernel_before_and_after_replacement() {
    if !kernel_available() {
        return;
    }
    let obj = compile("inner");
    let ops: Vec<[u8; 3]> = (0..60u8).map(|i| [0, i % 3, i.wrapping_mul(5) % 7]).collect();
    for (prog, outer, key, inner) in
        [("via_array", "by_slot", 0u32, "table_a"), ("via_hash", "by_key", 3, "table_b")]
    {
        for engine in ENGINES {
            let mut p = Pair::load(&obj, prog, engine);
            let mut verdicts = [0usize; 5];
            for op in &ops {
                let v = p.run(&[key as u8, op[1], op[2]]);
                verdicts[v.min(4) as usize] += 1;
                p.same_map(inner, &format!("{prog} ({engine:?}) after {op:?}"));
            }
            assert!(verdicts[3] > 0 && verdicts[1] + verdicts[2] > 0, "{prog}: {verdicts:?}");
            p.run(&[key as u8 + 1, 0, 0]);
            let (s, k) = swap_in(&p, outer, key);
            for op in &ops {
                p.run(&[key as u8, op[1], op[2]]);
                same(&s, &k, &format!("{prog} ({engine:?}): the new inner map after {op:?}"));
            }
            p.same_map(inner, "untouched after the swap");
        }
    }
}

#[test]
fn inner_ring_buffers_and_devmaps_match_the_kernel() {
    if !kernel_available() {
        return;
    }
    let obj = compile("inner");
    for engine in ENGINES {
        let mut p = Pair::load(&obj, "log_inner", engine);
        let ring = KernelRing::new(p.kernel_map("ring_a"));
        for i in 0..20u8 {
            p.run(&[i, 1, 2, 3, 4, 5, 6, 7]);
        }
        let s = spine_records(p.spine_map("ring_a"));
        assert_eq!(s.len(), 40, "{engine:?}");
        assert_eq!(s, ring.consume(), "{engine:?}");

        let mut p = Pair::load(&obj, "redirect_inner", engine);
        // The kernel checks the device exists: the loopback device, ifindex 1.
        let one = 1u32.to_ne_bytes();
        p.spine_map("ports_a").update_user(&0u32.to_ne_bytes(), &one, 0).unwrap();
        p.kernel_map("ports_a").update(&0u32.to_ne_bytes(), &one, 0).unwrap();
        assert_eq!(p.run(&[0]), spine_abi::xdp_action::REDIRECT);
        assert_eq!(p.run(&[1]), spine_abi::xdp_action::DROP);
    }
}
