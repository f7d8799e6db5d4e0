//! Shared segments: a memory-mappable array (`BPF_F_MMAPABLE`) of a running adapter
//! mapped by the host side, with a `bpf_spin_lock` in its value. An extension on two
//! workers and a host thread increment one counter under the lock with plain reads and
//! writes; the total is exact only if the lock excludes. A host that keeps the lock or
//! writes garbage stops only the invocations that wait for it, never the adapter.

mod common;

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::{frame, TempDir};
use spine_adapter::{AdapterBuilder, AdapterOptions, Device, LiveError, Running};
use spine_ports::{MemPort, PoolConfig};
use spine_runtime::{DomainSpec, FaultPolicy};

fn object() -> &'static [u8] {
    static OBJ: OnceLock<Vec<u8>> = OnceLock::new();
    OBJ.get_or_init(|| {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/segment.c");
        let dir = TempDir::new("segment-fixture");
        spine_progs::compile_c(&src, &dir.join("segment.o"), &[]).expect("clang builds it")
    })
}

fn endless(name: &str) -> Device {
    let frames: Vec<Vec<u8>> = (0..64).map(|i| frame(i as u8, &[i as u8])).collect();
    Device::Mem { port: MemPort::replay(name, &frames).unwrap(), sink: false }
}

/// Two workers, two endless ports, extension `seg` on both, in a domain whose
/// extensions are never detached for faults (so a stopped invocation is all a test
/// sees of a lock that is kept).
fn adapter() -> Running {
    let opts = AdapterOptions { workers: 2, pool: PoolConfig::new(2048), ..Default::default() };
    let mut b = AdapterBuilder::new(opts).unwrap();
    let p1 = b.add_port("wire", endless("wire"), None).unwrap();
    let p2 = b.add_port("wire2", endless("wire2"), None).unwrap();
    let faults = FaultPolicy { max_faults: 0, ..FaultPolicy::default() };
    b.add_domain(DomainSpec { name: "tenant".into(), faults, ..DomainSpec::default_domain() })
        .unwrap();
    let e = b.load_extension("seg", object(), None, "tenant", "test").unwrap();
    b.attach(e, p1).unwrap();
    b.attach(e, p2).unwrap();
    b.build().unwrap().start().unwrap()
}

/// The segment mapped into this process.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: &std::os::fd::OwnedFd, len: usize) -> Mapping {
        // SAFETY: a shared read-write mapping of the whole memfd the adapter handed out.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        Mapping { ptr: p.cast(), len }
    }

    fn lock_word(&self, value: usize) -> &AtomicU32 {
        // SAFETY: inside the mapping (values are 24 bytes, 8-aligned), 4-aligned.
        unsafe { AtomicU32::from_ptr(self.ptr.add(value * 24).cast()) }
    }

    fn count(&self, value: usize) -> *mut u64 {
        // SAFETY: `count` is at offset 8 of the value, inside the mapping.
        unsafe { self.ptr.add(value * 24 + 8).cast() }
    }

    fn lock(&self, value: usize) {
        let w = self.lock_word(value);
        while w.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
    }

    fn unlock(&self, value: usize) {
        self.lock_word(value).store(0, Ordering::Release);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

fn count_of(running: &Running) -> u64 {
    let v = running.live().map_lookup("seg", "shared", &0u32.to_le_bytes()).unwrap();
    assert_eq!(&v[..4], &[0; 4], "the lock word reads as zero");
    u64::from_le_bytes(v[8..16].try_into().unwrap())
}

#[test]
fn host_and_two_workers_count_into_one_segment_under_bpf_spin_lock() {
    let running = adapter();
    let live = running.live();
    let (fd, len) = live.segment("seg", "shared").unwrap();
    assert_eq!(len, 4096, "two 24-byte values in one page");
    let m = Mapping::new(&fd, len);
    let t0 = Instant::now();
    while count_of(&running) == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the extension counts");
        std::thread::yield_now();
    }
    // The host increments the same counter, under the same lock, while both workers do.
    const HOST: u64 = 200_000;
    for i in 0..HOST {
        m.lock(0);
        // SAFETY: the lock is held; plain accesses, as the extension's.
        unsafe { m.count(0).write_volatile(m.count(0).read_volatile() + 1) };
        m.unlock(0);
        if i % 1024 == 0 {
            std::thread::yield_now();
        }
    }
    let report = running.stop().unwrap();
    let runs = report.totals.extension("seg").unwrap().runs;
    // An invocation that waited past the adapter's spin limit (the host thread
    // preempted while holding the lock on a busy machine) was stopped before counting.
    let faults = report.totals.extension("seg").unwrap().faults;
    // SAFETY: the adapter has stopped; the mapping outlives it.
    let total = unsafe { m.count(0).read_volatile() };
    // How often the workers ran meanwhile depends on the machine; that they ran is
    // certain (the count was non-zero before the host started).
    assert!(runs > 0, "the extension ran");
    assert_eq!(total, runs - faults + HOST, "every increment once: {runs} runs, {faults} stopped");
}

#[test]
fn a_host_keeping_the_lock_or_writing_garbage_stops_only_waiting_invocations() {
    let running = adapter();
    let live = running.live();
    let (fd, len) = live.segment("seg", "shared").unwrap();
    let m = Mapping::new(&fd, len);
    // Garbage everywhere but the lock word: only data changes.
    // SAFETY: inside the mapping.
    unsafe { std::ptr::write_bytes(m.ptr.add(4), 0xa5, len - 4) };
    let faults = |r: &Running| r.totals().extension("seg").map_or(0, |e| e.faults);
    // The host keeps the lock: each invocation gives up after its spin limit and is
    // stopped (counted as a fault, the packet dropped), the workers go on.
    m.lock(0);
    let t0 = Instant::now();
    while faults(&running) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(60), "waiting invocations are stopped");
        std::thread::sleep(Duration::from_millis(20));
    }
    m.unlock(0);
    // Released, counting resumes from whatever the host left there.
    let before = count_of(&running);
    let garbage = 0xa5a5_a5a5_a5a5_a5a5u64;
    assert!(before >= garbage && before - garbage < 10_000_000, "counted on from {before:#x}");
    let t0 = Instant::now();
    while count_of(&running) == before {
        assert!(t0.elapsed() < Duration::from_secs(60), "counting resumes");
        std::thread::yield_now();
    }
    // Value 1's lock word holds the host's garbage: an update through the API with
    // BPF_F_LOCK waits for it, then fails with EBUSY; nothing hangs.
    let mut v = vec![0u8; 24];
    v[..4].copy_from_slice(&[9, 9, 9, 9]);
    v[8] = 42;
    let lock = spine_abi::update_flags::LOCK;
    let one = 1u32.to_le_bytes();
    let e = live.map_update("seg", "shared", &one, &v, lock).unwrap_err();
    assert_eq!(e.errno(), Some(16), "{e}");
    // A plain update writes the value around the lock word, never the word itself.
    live.map_update("seg", "shared", &one, &v, 0).unwrap();
    assert_eq!(m.lock_word(1).load(Ordering::Relaxed), 0xa5a5_a5a5);
    // SAFETY: inside the mapping.
    assert_eq!(unsafe { m.count(1).read_volatile() }, 42);
    m.unlock(1);
    v[8] = 43;
    live.map_update("seg", "shared", &one, &v, lock).unwrap();
    assert_eq!(m.lock_word(1).load(Ordering::Relaxed), 0, "released after the update");
    // SAFETY: inside the mapping.
    assert_eq!(unsafe { m.count(1).read_volatile() }, 43);
    // Not a segment: a map without BPF_F_MMAPABLE, or a map that does not exist.
    assert!(matches!(live.segment("seg", "nosuch"), Err(LiveError::NoMap { .. })));
    let report = running.stop().unwrap();
    assert!(report.totals.port("wire").unwrap().rx_packets > 0);
}
