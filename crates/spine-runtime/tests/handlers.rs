//! Active-message handlers (`SEC("spine/handler/N")`): loaded beside the object's XDP
//! program with its maps, verified against `struct spine_msg_md` and the handler helper
//! set, run on a message by `XdpRunner::run_message`; `spine_msg_send` queues replies in
//! the runner's outbox, bounds-checked, and so does `spine_msg_post` (extension →
//! extension, for the adapter to run later); a domain that does not grant them refuses
//! the program at load, naming the helper.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use spine_runtime::{
    load_object, Dest, Domain, DomainSpec, EngineKind, FixedHost, Frame, Geometry, LoadError,
    LoadOptions, LoadedObject, RxInfo, XdpRunner, MSG_MAX,
};

fn compile(name: &str) -> spine_obj::Object {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}.c"));
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let out =
        std::env::temp_dir().join(format!("spine-handlers-{}-{seq}-{name}.o", std::process::id()));
    let bytes = spine_progs::compile_c(&src, &out, &[]).expect("clang");
    std::fs::remove_file(&out).ok();
    spine_obj::parse(&bytes).expect("parse")
}

fn granting(helpers: &[&str]) -> Arc<Domain> {
    let names: Vec<String> = helpers.iter().map(|s| s.to_string()).collect();
    let ids = DomainSpec::helper_ids(&names).unwrap();
    Domain::new(DomainSpec {
        name: "msgs".into(),
        helpers: Some(ids),
        ..DomainSpec::default_domain()
    })
}

fn load(
    obj: &spine_obj::Object,
    engine: EngineKind,
    domain: Arc<Domain>,
) -> Result<LoadedObject, LoadError> {
    load_object(obj, &LoadOptions { engine, domain, ..LoadOptions::default() })
}

/// Runs `handler` on `payload` from endpoint `source`: r0 and the messages it sent.
fn run(r: &mut XdpRunner, payload: &[u8], source: u32) -> (u32, Vec<(u32, u8, Vec<u8>)>) {
    let mut f = Frame::new(Geometry::TEST_RUN);
    f.load_message(payload).unwrap();
    let mut host = FixedHost::new(1);
    let r0 = r.run_message(&mut f, source, &mut host).expect("no fault");
    let sent = r
        .outbox()
        .iter()
        .map(|m| {
            let Dest::Endpoint(e) = m.to else { panic!("a send, not a post") };
            (e, m.handler, m.payload().to_vec())
        })
        .collect();
    (r0, sent)
}

#[test]
fn handler_7_counts_and_replies_to_its_sender_on_both_engines() {
    let obj = compile("handler");
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let domain = granting(&["map_lookup_elem", "spine_msg_send"]);
        let loaded = load(&obj, engine, domain).unwrap();
        assert_eq!(loaded.programs.len(), 1, "the XDP program");
        let handlers: Vec<Option<u8>> = loaded.handlers.iter().map(|h| h.handler()).collect();
        assert_eq!(handlers, [Some(7), Some(8)]);
        assert!(loaded.programs[0].handler().is_none());
        let mut r = XdpRunner::new(loaded.handlers[0].clone(), 0).unwrap();
        for (i, len) in [1usize, 5, 64, 65, 200, MSG_MAX].into_iter().enumerate() {
            let msg: Vec<u8> = (0..len).map(|b| (b * 3 + i) as u8).collect();
            let (r0, sent) = run(&mut r, &msg, 40 + i as u32);
            assert_eq!(r0, 0, "{engine:?}: spine_msg_send succeeded");
            let want: Vec<u8> = msg.iter().map(|b| b ^ 0x20).collect();
            assert_eq!(sent, vec![(40 + i as u32, 7, want)], "{engine:?}: len {len}");
        }
        let at = obj.maps.iter().position(|m| m.name == "counts").unwrap();
        let counts = loaded.maps.data(at).unwrap();
        let mut v = [0u8; 8];
        counts.lookup_user(&0u32.to_ne_bytes(), &mut v).unwrap();
        assert_eq!(u64::from_ne_bytes(v), 6, "{engine:?}: every message counted");
        // A handler number out of range: -EINVAL, nothing sent.
        let mut bad = XdpRunner::new(loaded.handlers[1].clone(), 0).unwrap();
        let (r0, sent) = run(&mut bad, b"x", 3);
        assert_eq!(r0 as i32, -22);
        assert!(sent.is_empty());
    }
}

#[test]
fn a_domain_that_does_not_grant_spine_msg_send_refuses_the_handler() {
    let obj = compile("handler");
    for domain in [granting(&["map_lookup_elem"]), Domain::default_domain()] {
        let name = domain.name().to_string();
        let err = load(&obj, EngineKind::Jit, domain).unwrap_err().to_string();
        // The XDP program calls it too, and is verified first.
        assert!(err.contains("'pass'"), "{name}: names the program: {err}");
        assert!(
            err.contains("0x53500001") || err.contains("spine_msg_send"),
            "{name}: names the helper: {err}"
        );
    }
}

/// `spine_msg_post` from an XDP program and from a handler queues the message in the
/// outbox for handler 9 of the domain (`Dest::Handlers`), runs nothing itself, and
/// answers 0; a handler number out of range gets -EINVAL and queues nothing; on both
/// engines.
#[test]
fn spine_msg_post_queues_messages_for_the_domains_handlers_on_both_engines() {
    let obj = compile("post_a");
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let loaded = load(&obj, engine, granting(&["spine_msg_post"])).unwrap();
        let numbers: Vec<Option<u8>> = loaded.handlers.iter().map(|h| h.handler()).collect();
        assert_eq!(numbers, [Some(8), Some(6)]);
        let mut xdp = XdpRunner::new(loaded.programs[0].clone(), 0).unwrap();
        let frame: Vec<u8> = (0..60u8).collect();
        let mut f = Frame::new(Geometry::TEST_RUN);
        f.load(&frame).unwrap();
        let mut host = FixedHost::new(1);
        let v = xdp.run(&mut f, RxInfo::default(), &mut host).unwrap();
        assert_eq!(v, spine_abi::xdp_action::DROP, "{engine:?}: posted, then dropped");
        let out: Vec<(Dest, u8, Vec<u8>)> =
            xdp.outbox().iter().map(|m| (m.to, m.handler, m.payload().to_vec())).collect();
        assert_eq!(out, vec![(Dest::Handlers, 9, frame[..16].to_vec())], "{engine:?}");
        let mut fwd = XdpRunner::new(loaded.handlers[0].clone(), 0).unwrap();
        let mut m = Frame::new(Geometry::TEST_RUN);
        m.load_message(b"hello").unwrap();
        assert_eq!(fwd.run_message(&mut m, 3, &mut host).unwrap(), 0);
        let out: Vec<(Dest, u8, Vec<u8>)> =
            fwd.outbox().iter().map(|m| (m.to, m.handler, m.payload().to_vec())).collect();
        let mut want = b"hello".to_vec();
        want.resize(16, 0);
        assert_eq!(out, vec![(Dest::Handlers, 9, want)], "{engine:?}");
        let mut bad = XdpRunner::new(loaded.handlers[1].clone(), 0).unwrap();
        let mut m = Frame::new(Geometry::TEST_RUN);
        m.load_message(b"x").unwrap();
        assert_eq!(bad.run_message(&mut m, 3, &mut host).unwrap() as i32, -22);
        assert!(bad.outbox().is_empty());
    }
}

#[test]
fn a_domain_that_does_not_grant_spine_msg_post_refuses_the_program() {
    let obj = compile("post_a");
    for domain in [granting(&["spine_msg_send"]), Domain::default_domain()] {
        let name = domain.name().to_string();
        let err = load(&obj, EngineKind::Jit, domain).unwrap_err().to_string();
        assert!(err.contains("'post'"), "{name}: names the program: {err}");
        assert!(
            err.contains("0x53500002") || err.contains("spine_msg_post"),
            "{name}: names the helper: {err}"
        );
    }
}

/// A host with bulk data, checking each read as the adapter's does.
struct BulkHost {
    inner: FixedHost,
    data: Vec<u8>,
    reads: usize,
}

impl spine_runtime::Host for BulkHost {
    /// A clock that stands still: the watchdog never cuts a run short here.
    fn now_ns(&mut self) -> u64 {
        0
    }
    fn prandom_u32(&mut self) -> u32 {
        self.inner.prandom_u32()
    }
    fn trace(&mut self, cpu: usize, line: &[u8]) {
        self.inner.trace(cpu, line)
    }
    fn bulk_len(&self) -> u64 {
        self.data.len() as u64
    }
    fn bulk_read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), i64> {
        self.reads += 1;
        let end = offset.checked_add(out.len() as u64).filter(|&e| e <= self.data.len() as u64);
        let Some(end) = end else { return Err(spine_abi::errno::EFAULT) };
        out.copy_from_slice(&self.data[offset as usize..end as usize]);
        Ok(())
    }
}

/// The answer `bulk.c` sends: the word sum, the length, and its four probe reads'
/// results.
fn answer(b: &[u8]) -> (u64, [i64; 5]) {
    assert_eq!(b.len(), 32);
    let word = |i: usize| u32::from_ne_bytes(b[8 + i * 4..12 + i * 4].try_into().unwrap());
    let sum = u64::from_ne_bytes(b[..8].try_into().unwrap());
    (
        sum,
        [0, 1, 2, 3, 4]
            .map(|i| if i == 0 { i64::from(word(0)) } else { i64::from(word(i) as i32) }),
    )
}

/// What `bulk.c` sums: each 64-byte chunk of `data`, zero padded, as native u64 words.
fn word_sum(data: &[u8]) -> u64 {
    data.chunks(64)
        .flat_map(|c| {
            let mut padded = [0u8; 64];
            padded[..c.len()].copy_from_slice(c);
            (0..8).map(move |i| u64::from_ne_bytes(padded[i * 8..i * 8 + 8].try_into().unwrap()))
        })
        .fold(0u64, u64::wrapping_add)
}

/// Bulk messages at the runtime: handler 12 (`bulk.c`) reads bulk data through
/// `spine_msg_bulk_len`/`spine_msg_bulk_read` in chunks and adds it up exactly, for
/// lengths on and off the 64-byte chunk size; its reads past the end, at the end and at
/// a wrapping offset answer -EFAULT (the host checks each), and a message without bulk
/// data answers -EINVAL to every read; on both engines. A domain that does not grant
/// the helpers refuses the handler.
#[test]
fn bulk_reads_are_bounded_to_the_bulk_data_on_both_engines() {
    let obj = compile("bulk");
    let grants = ["map_lookup_elem", "spine_msg_send", "spine_msg_bulk_len", "spine_msg_bulk_read"];
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let loaded = load(&obj, engine, granting(&grants)).unwrap();
        let mut r = XdpRunner::new(loaded.handlers[0].clone(), 0).unwrap();
        for len in [1usize, 63, 64, 65, 300, 4096] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let sum = word_sum(&data);
            let mut host = BulkHost { inner: FixedHost::new(1), data, reads: 0 };
            let mut f = Frame::new(Geometry::TEST_RUN);
            f.load_message(&[]).unwrap();
            let r0 = r.run_message(&mut f, 5, &mut host).expect("no fault");
            assert_eq!(r0, 0, "{engine:?} len {len}");
            let sent = r
                .outbox()
                .iter()
                .map(|m| {
                    let Dest::Endpoint(e) = m.to else { panic!("a send") };
                    (e, m.handler, m.payload().to_vec())
                })
                .collect::<Vec<_>>();
            assert_eq!(sent.len(), 1, "one answer");
            assert_eq!(sent[0].0, 5, "to the source");
            let want = (sum, [len as i64, -14, -14, -14, 0]);
            assert_eq!(answer(&sent[0].2), want, "{engine:?} len {len}");
            assert_eq!(host.reads, len.div_ceil(64) + 4, "{engine:?}: every read reached the host");
        }
        // No bulk data: every read is -EINVAL.
        let mut host = BulkHost { inner: FixedHost::new(1), data: Vec::new(), reads: 0 };
        let mut f = Frame::new(Geometry::TEST_RUN);
        f.load_message(&[]).unwrap();
        r.run_message(&mut f, 5, &mut host).expect("no fault");
        let m = r.outbox()[0];
        assert_eq!(answer(m.payload()), (0, [0, -14, -14, -14, -14]), "{engine:?}: empty data");
        let (_, sent) = run(&mut r, &[], 5);
        assert_eq!(answer(&sent[0].2), (0, [0, -22, -22, -22, -22]), "{engine:?}: no bulk data");
    }
    let err = load(&obj, EngineKind::Jit, granting(&["map_lookup_elem", "spine_msg_send"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("spine_msg_bulk"), "names the helper: {err}");
}

/// Bulk messages sent by an extension, at the runtime (`bulk_reply.c`, handler 13):
/// without an endpoint behind the run (the default host) `spine_msg_bulk_write`
/// answers -EINVAL and nothing is sent; `spine_msg_send_bulk` queues a bulk message,
/// its reference and no payload, for the adapter to check and deliver; on both
/// engines. A domain that does not grant the helpers refuses the handler.
#[test]
fn spine_msg_send_bulk_queues_a_reference_and_bulk_write_needs_an_endpoint() {
    let obj = compile("bulk_reply");
    let grants = ["map_lookup_elem", "spine_msg_bulk_write", "spine_msg_send_bulk"];
    let request = |off: u64, len: u32, seed: u8| {
        let mut r = off.to_ne_bytes().to_vec();
        r.extend_from_slice(&len.to_ne_bytes());
        r.extend_from_slice(&[seed, 0, 0, 0]);
        r
    };
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let loaded = load(&obj, engine, granting(&grants)).unwrap();
        let mut r = XdpRunner::new(loaded.handlers[0].clone(), 0).unwrap();
        let mut host = FixedHost::new(1);
        let mut f = Frame::new(Geometry::TEST_RUN);
        f.load_message(&request(4096, 100, 1)).unwrap();
        assert_eq!(r.run_message(&mut f, 9, &mut host), Ok(1), "{engine:?}: the write failed");
        assert!(r.outbox().is_empty(), "{engine:?}: nothing sent");
        let stats = loaded.handlers[0].map("stats").unwrap().clone();
        let mut v = [0u8; 8];
        stats.lookup_user(&3u32.to_ne_bytes(), &mut v).unwrap();
        assert_eq!(i64::from_ne_bytes(v), -22, "{engine:?}: -EINVAL with no endpoint");
        f.load_message(&request(4096, 100, 0xff)).unwrap();
        assert_eq!(r.run_message(&mut f, 9, &mut host), Ok(0), "{engine:?}");
        let sent: Vec<_> =
            r.outbox().iter().map(|m| (m.to, m.handler, m.payload().len(), m.bulk())).collect();
        assert_eq!(sent, [(Dest::Endpoint(9), 13, 0, Some((4096, 100)))], "{engine:?}");
    }
    let err = load(&obj, EngineKind::Jit, granting(&["map_lookup_elem", "spine_msg_send_bulk"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("spine_msg_bulk_write"), "names the helper: {err}");
}

/// `spine_msg_post_to` (`post_to.c`, handler 8 posting to the `to` and with the delay
/// its message carries): a named target queues `Dest::Extension(id)`, `to` 0 in bits
/// 16..32 `Dest::Handlers`; a delay makes the message due that long after the call
/// (read on the host's clock after the handler's own `bpf_ktime_get_ns`); a reserved bit
/// of `to` and a delay past `DELAY_MAX_NS` queue nothing; on both engines. A domain
/// granting only `spine_msg_post` refuses the object, naming the helper.
#[test]
fn spine_msg_post_to_queues_a_named_or_delayed_post_on_both_engines() {
    let obj = compile("post_to");
    let grants = ["map_lookup_elem", "ktime_get_ns", "spine_msg_post_to"];
    let order = |to: u64, delay: u64| {
        let mut o = to.to_ne_bytes().to_vec();
        o.extend_from_slice(&delay.to_ne_bytes());
        o
    };
    let max = spine_abi::msg_post::DELAY_MAX_NS;
    for engine in [EngineKind::Interpreter, EngineKind::Jit] {
        let loaded = load(&obj, engine, granting(&grants)).unwrap();
        let numbers: Vec<Option<u8>> = loaded.handlers.iter().map(|h| h.handler()).collect();
        assert_eq!(numbers, [Some(8), Some(5)]);
        let mut post = XdpRunner::new(loaded.handlers[0].clone(), 0).unwrap();
        let mut send = |to: u64, delay: u64| {
            let mut m = Frame::new(Geometry::TEST_RUN);
            m.load_message(&order(to, delay)).unwrap();
            // The clock reads 1000, 2000, ...: the handler's stamp, then the helper's.
            let mut host = FixedHost::new(1);
            assert_eq!(post.run_message(&mut m, 3, &mut host).unwrap(), 0);
            post.outbox()
                .iter()
                .map(|m| (m.to, m.handler, m.due_ns(), m.payload().to_vec()))
                .collect::<Vec<_>>()
        };
        let stamped = |delay: u64| {
            let mut p = 1000u64.to_ne_bytes().to_vec();
            p.extend_from_slice(&delay.to_ne_bytes());
            p
        };
        let to = spine_abi::msg_post::to;
        assert_eq!(send(to(4, 5), 0), [(Dest::Extension(4), 5, None, stamped(0))], "{engine:?}");
        assert_eq!(send(9, 0), [(Dest::Handlers, 9, None, stamped(0))], "{engine:?}");
        assert_eq!(
            send(to(4, 5), 500),
            [(Dest::Extension(4), 5, Some(2500), stamped(500))],
            "{engine:?}: due 500 ns after the helper's clock reading"
        );
        assert!(send(to(4, 5) | 1 << 12, 0).is_empty(), "{engine:?}: a reserved bit");
        assert!(send(to(4, 5), max + 1).is_empty(), "{engine:?}: past the longest delay");
        assert_eq!(send(to(4, 5), max).len(), 1, "{engine:?}: the longest delay");
    }
    let err = load(&obj, EngineKind::Jit, granting(&["map_lookup_elem", "ktime_get_ns"]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("spine_msg_post_to") || err.contains("0x53500007"), "{err}");
}
