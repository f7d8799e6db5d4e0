//! Retransmission of bulk messages over a tunnel (`spine_endpoint::remote` version 3
//! frames), tested over a lossy link: adapters A and B are each tunneled to a relay on
//! the loopback interface (two UDP sockets the test owns, one the peer of each
//! adapter), which forwards every datagram to the other adapter unless the test's rule
//! drops it, and can inject datagrams of its own as if from the peer. Nothing in the
//! adapters knows of the relay: the loss is real loss on the link.

use super::*;
use spine_client::remote::{self, Ctl, CtlKind};
use spine_endpoint::Desc;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// Which way a datagram crosses the relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    AtoB,
    BtoA,
}

/// The tunnel datagram's 4-byte header (`spine_ports::udp`) before the frame.
const TUN_HEADER: usize = 4;

/// What the relay saw of one frame: a piece (message id, piece index) or an
/// acknowledgement, or something else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Piece { id: u32, index: usize },
    Ctl(Ctl),
    Other,
}

fn seen(dgram: &[u8]) -> Seen {
    let Some(frame) = dgram.get(TUN_HEADER..) else { return Seen::Other };
    if !remote::is_message(frame) {
        return Seen::Other;
    }
    if let Ok(p) = remote::parse_piece(frame) {
        return Seen::Piece { id: p.id, index: p.index() };
    }
    remote::parse_ctl(frame).map_or(Seen::Other, Seen::Ctl)
}

/// The test's rule: whether to drop a frame crossing `Way` (called once per frame, in
/// order).
type Rule = Box<dyn FnMut(Way, Seen) -> bool + Send>;

struct Relay {
    /// A's peer address (the relay's side facing A), and B's.
    for_a: SocketAddr,
    for_b: SocketAddr,
    a: SocketAddr,
    to_a: UdpSocket,
    rule: Arc<Mutex<Rule>>,
    /// Every frame that crossed or was dropped, with whether it was dropped.
    log: Arc<Mutex<Vec<(Way, Seen, bool)>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Relay {
    /// A relay between A at `a` and B at `b`, forwarding everything until
    /// [`Relay::set_rule`]: one thread each way, so each way keeps its order.
    fn new(a: SocketAddr, b: SocketAddr) -> Relay {
        let sa = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sb = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (for_a, for_b) = (sa.local_addr().unwrap(), sb.local_addr().unwrap());
        for s in [&sa, &sb] {
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        }
        let rule: Arc<Mutex<Rule>> = Arc::new(Mutex::new(Box::new(|_, _| false)));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let to_a = sa.try_clone().unwrap();
        let ways = [
            (sa.try_clone().unwrap(), sb.try_clone().unwrap(), b, Way::AtoB),
            (sb, sa, a, Way::BtoA),
        ];
        let threads = ways
            .into_iter()
            .map(|(from, to, dest, way)| {
                let (r, l, st) = (rule.clone(), log.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut buf = vec![0u8; 65536];
                    while !st.load(Ordering::Relaxed) {
                        let Ok((n, _)) = from.recv_from(&mut buf) else { continue };
                        let what = seen(&buf[..n]);
                        // Decided and logged under the rule's lock: one order for both
                        // ways.
                        let mut rule = r.lock().unwrap();
                        let lose = rule(way, what);
                        l.lock().unwrap().push((way, what, lose));
                        drop(rule);
                        if !lose {
                            let _ = to.send_to(&buf[..n], dest);
                        }
                    }
                })
            })
            .collect();
        Relay { for_a, for_b, a, to_a, rule, log, stop, threads }
    }

    fn set_rule(&self, rule: impl FnMut(Way, Seen) -> bool + Send + 'static) {
        *self.rule.lock().unwrap() = Box::new(rule);
    }

    /// Sends `frame` to A as if B had sent it.
    fn inject_to_a(&self, frame: &[u8]) {
        let mut d = vec![0x53, 0x50, 1, 0];
        d.extend_from_slice(frame);
        self.to_a.send_to(&d, self.a).unwrap();
    }

    /// The frames seen so far that match `f`: (crossed, dropped).
    fn count(&self, f: impl Fn(Way, Seen) -> bool) -> (usize, usize) {
        let log = self.log.lock().unwrap();
        let m = log.iter().filter(|(w, s, _)| f(*w, *s));
        m.fold((0, 0), |(c, d), (_, _, dropped)| if *dropped { (c, d + 1) } else { (c + 1, d) })
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Adapters A and B (`opts_a`, `opts_b`) joined through a relay; B runs `bulk_sum.c`
/// as handler 12; A's application has an endpoint with 32 KiB reserved in its area.
fn lossy_pair(
    tag: &str,
    opts_a: AdapterOptions,
    opts_b: AdapterOptions,
) -> (Running1, Running1, Relay, Endpoint, u64) {
    let (la, lb) = free_ports();
    let relay = Relay::new(la, lb);
    let a = tunnel_end_bulk_with(la, relay.for_a, &format!("{tag}-a"), opts_a);
    let b = tunnel_end_bulk_with(lb, relay.for_b, &format!("{tag}-b"), opts_b);
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("B's workers run the handler table", || b.live.handlers_settled());
    let mut ea = Endpoint::open(&a.sock, &Channel::udp4("tun", 7000)).unwrap();
    a.served(1);
    let frames = 2 * remote::BULK_MAX as u32 / ea.layout().frame_size;
    let src = ea.reserve_area(frames).expect("32 KiB of A's area");
    (a, b, relay, ea, src)
}

fn data_of(seed: usize, n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 41 + i / 269 + seed) as u8).collect()
}

/// A's application sends `data` to B's handler 12 in one bulk descriptor.
fn send_bulk(ea: &mut Endpoint, src: u64, data: &[u8]) {
    assert!(ea.write_area(src, data));
    until("room on A's ring", || {
        ea.send_bulk_remote(Desc::REMOTE_HANDLERS, 12, src, data.len() as u32)
    });
}

fn runs(r: &Running1) -> u64 {
    u64_at(&r.live.map_lookup("sum", "runs", &0u32.to_ne_bytes()).unwrap(), 0)
}

fn worker(r: &Running1) -> spine_adapter::counters::WorkerCounters {
    r.live.totals().workers[0]
}

/// Lost pieces are sent again: the link drops, once each, chosen pieces of the bulk
/// messages A's adapter sends (a middle one and the last one of an 8,000-byte message,
/// the first of a 3,000-byte one, pieces 5 and 15 of a 16 KiB one). B, seeing a gap
/// with no new piece for the NACK delay, NACKs the missing pieces (the trailing one
/// included: it knows the total); A sends just those again from its kept copy; the
/// handler then runs exactly once per message with exactly its bytes (the checksums of
/// its answer), and B ACKs each whole message, which frees A's copy: every message
/// ACKed, and none of A's copies expires even after the expiry has passed (A's store
/// held nothing any more). Nothing is refused and both pools are whole.
#[test]
fn lost_pieces_of_bulk_messages_are_nacked_and_sent_again_and_run_once() {
    let opts_a = AdapterOptions { bulk_expiry_ms: 300, ..options() };
    let (a, b, relay, mut ea, src) = lossy_pair("rt", opts_a, options());
    // Piece indexes to lose, per message, in send order.
    let plan: [(usize, &[usize]); 4] =
        [(8000, &[3, 7]), (3000, &[0]), (remote::BULK_MAX, &[5, 15]), (700, &[])];
    let lose: Vec<Vec<usize>> = plan.iter().map(|(_, l)| l.to_vec()).collect();
    let mut ids: Vec<u32> = Vec::new();
    let mut done: std::collections::HashSet<(u32, usize)> = Default::default();
    relay.set_rule(move |way, s| {
        let Seen::Piece { id, index } = s else { return false };
        if way != Way::AtoB {
            return false;
        }
        if !ids.contains(&id) {
            ids.push(id);
        }
        let k = ids.iter().position(|&i| i == id).unwrap();
        lose.get(k).is_some_and(|l| l.contains(&index)) && done.insert((id, index))
    });
    let mut pieces_sent = 0;
    for (seed, (size, _)) in plan.iter().enumerate() {
        // bulk_sum.c reads at most 8 KiB; a larger message's answer counts 8 KiB.
        let data = data_of(seed, *size);
        send_bulk(&mut ea, src, &data);
        let got = replies_n(&mut ea, 1);
        assert_eq!(got.len(), 1, "one answer to the {size}-byte message");
        let (sum, mix, len, past) = bulk_answer(&got[0].0);
        let want = bulk_sum(&data[..data.len().min(8192)]);
        assert_eq!((sum, mix, past), (want.0, want.1, want.3), "the {size}-byte message's bytes");
        assert_eq!(len as usize, *size);
        pieces_sent += size.div_ceil(remote::PIECE_MAX);
    }
    assert_eq!(runs(&b), plan.len() as u64, "one run per message");
    let lost: usize = plan.iter().map(|(_, l)| l.len()).sum();
    let is_piece = |w: Way, s: Seen| w == Way::AtoB && matches!(s, Seen::Piece { .. });
    assert_eq!(relay.count(is_piece).1, lost, "the link lost the chosen pieces");
    until("B ACKs every message and A frees them", || {
        worker(&a).msg_bulk_acks_in == plan.len() as u64
    });
    // Past A's expiry (300 ms): a copy still kept would now expire and be counted.
    std::thread::sleep(Duration::from_millis(400));
    let wa = worker(&a);
    assert_eq!((wa.msg_bulk_retx_expired, wa.msg_bulk_retx_evicted), (0, 0), "all freed by ACKs");
    assert!(wa.msg_bulk_nacks_in >= 3, "a NACK at least per message with a loss");
    assert!(wa.msg_bulk_pieces_resent >= lost as u64, "each lost piece sent again");
    assert_eq!((wa.msg_bulk_ctl_refused, wa.msg_bulk_resend_capped), (0, 0));
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    let (wa, wb) = (&ta.workers[0], &tb.workers[0]);
    assert_eq!((wa.msg_bulk_remote_out, wa.msg_bulk_acks_in), (4, 4));
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_remote_runs), (4, 4));
    assert_eq!(wb.msg_bulk_acks_out, 4 + wb.msg_bulk_piece_late, "an ACK per message, re-ACKs");
    assert!(wb.msg_bulk_nacks_out >= 3);
    assert_eq!(wb.msg_bulk_nacks_out, wa.msg_bulk_nacks_in, "every NACK reached A");
    // Every piece B took: the first copies that crossed, and the resent ones.
    assert_eq!(
        wb.msg_bulk_pieces_in,
        (pieces_sent - lost) as u64 + wa.msg_bulk_pieces_resent,
        "B received each piece A sent that the link did not drop"
    );
    // A resend beyond the lost piece (a second NACK sent before the first one's
    // resend arrived) is a duplicate, or late when it crossed B's completion (refused,
    // re-ACKed): never a second run, never a new message.
    assert_eq!(
        wb.msg_bulk_piece_refused + wb.msg_bulk_piece_late,
        wa.msg_bulk_pieces_resent - lost as u64
    );
    assert_eq!((wb.msg_bulk_expired, wb.msg_bulk_discarded), (0, 0));
}

/// The cap on resends: the link drops every copy of piece 2 of a 5,000-byte message.
/// B NACKs it again and again until its reassembly expires; A honours
/// `bulk_retx_max` = 3 NACKs (3 pieces resent, exactly 4 copies of piece 2 on the
/// link), refuses the rest (`msg_bulk_resend_capped`), and drops its copy when no
/// honoured NACK has come for the expiry (`msg_bulk_retx_expired`). The handler never
/// runs; a later message goes through; both pools whole.
#[test]
fn a_peer_nacking_forever_gets_at_most_the_capped_resends() {
    // B NACKs every 10 ms for a second: far more than the cap, with room to spare
    // on a loaded machine.
    let opts_a = AdapterOptions { bulk_expiry_ms: 500, bulk_retx_max: 3, ..options() };
    let opts_b = AdapterOptions { bulk_expiry_ms: 1000, bulk_nack_ms: 10, ..options() };
    let (a, b, relay, mut ea, src) = lossy_pair("rc", opts_a, opts_b);
    let first: Arc<Mutex<Option<u32>>> = Arc::default();
    let f = first.clone();
    relay.set_rule(move |way, s| {
        let Seen::Piece { id, index } = s else { return false };
        let first = *f.lock().unwrap().get_or_insert(id);
        way == Way::AtoB && id == first && index == 2
    });
    send_bulk(&mut ea, src, &data_of(1, 5000));
    until("B gives up on the message", || worker(&b).msg_bulk_expired == 1);
    until("A drops its copy", || worker(&a).msg_bulk_retx_expired == 1);
    let id = first.lock().unwrap().expect("the message crossed the relay");
    let copies = relay.count(|w, s| w == Way::AtoB && s == Seen::Piece { id, index: 2 });
    assert_eq!(copies, (0, 4), "the first copy and three resends, all lost");
    let (wa, wb) = (worker(&a), worker(&b));
    assert_eq!((wa.msg_bulk_nacks_in, wa.msg_bulk_pieces_resent), (3, 3));
    assert!(wb.msg_bulk_nacks_out > 3, "B NACKed past the cap ({})", wb.msg_bulk_nacks_out);
    until("A refuses every NACK past the cap", || {
        let w = worker(&a);
        w.msg_bulk_resend_capped + w.msg_bulk_ctl_refused == wb.msg_bulk_nacks_out - 3
    });
    assert!(worker(&a).msg_bulk_resend_capped >= 1, "at least one at the cap itself");
    assert_eq!(runs(&b), 0, "nothing ran for the lost message");
    // The link heals: the next message arrives whole.
    let data = data_of(2, 2500);
    send_bulk(&mut ea, src, &data);
    assert_eq!(bulk_answer(&replies_n(&mut ea, 1)[0].0), bulk_sum(&data));
    drop(ea);
    let (ta, _tb) = (a.finish(), b.finish());
    assert_eq!(ta.workers[0].msg_bulk_acks_in, 1);
}

/// Hostile acknowledgements, injected into A's tunnel as if from B while A holds a
/// message (the link drops B's ACK of it): frames cut short, a bad kind, a total over
/// 16 KiB, an ACK naming pieces, a NACK naming no piece or one past the message, a
/// NACK of an unknown id, of a worker A does not have, of the right id with another
/// total or `from` — each refused (`msg_bulk_ctl_refused`) and nothing sent. Then ten
/// valid NACKs of piece 0: exactly `bulk_retx_max` (2) honoured, each sending that one
/// piece (which B refuses as late, re-ACKing, and runs nothing), the other eight
/// refused at the cap. A forged ACK then frees the copy, and NACKs of it are refused
/// from then on. The handler ran once; both pools whole.
#[test]
fn hostile_acks_and_nacks_are_refused_and_resends_stay_capped() {
    let opts_a = AdapterOptions { bulk_retx_max: 2, ..options() };
    let (a, b, relay, mut ea, src) = lossy_pair("rn", opts_a, options());
    relay.set_rule(|way, s| {
        way == Way::BtoA && matches!(s, Seen::Ctl(Ctl { kind: CtlKind::Ack, .. }))
    });
    let data = data_of(3, 3000);
    send_bulk(&mut ea, src, &data);
    assert_eq!(bulk_answer(&replies_n(&mut ea, 1)[0].0), bulk_sum(&data));
    until("B's ACK, dropped", || {
        relay.count(|w, s| w == Way::BtoA && matches!(s, Seen::Ctl(_))).1 == 1
    });
    let ack = relay
        .log
        .lock()
        .unwrap()
        .iter()
        .find_map(|(_, s, _)| match s {
            Seen::Ctl(c) => Some(*c),
            _ => None,
        })
        .unwrap();
    assert_eq!((ack.total, ack.missing), (3000, 0));
    let me = ack.from;
    let nack = Ctl { kind: CtlKind::Nack, missing: 1, ..ack };
    let f = remote::ctl_frame;
    let mut bad: Vec<Vec<u8>> = vec![
        f(&nack)[..remote::CTL_FRAME_LEN - 1].to_vec(),
        f(&nack)[..18].to_vec(),
        {
            let mut k = f(&nack);
            k[17] = 9;
            k
        },
        f(&Ctl { total: remote::BULK_MAX as u32 + 1, ..nack }),
        f(&Ctl { missing: 1, ..ack }),
        f(&Ctl { missing: 0, ..nack }),
        f(&Ctl { missing: 1 << 3, ..nack }),
        f(&Ctl { missing: u32::MAX, ..nack }),
        f(&Ctl { id: ack.id ^ 0x55, ..nack }),
        f(&Ctl { id: ack.id | 7 << 24, ..nack }),
        f(&Ctl { total: 2999, ..nack }),
        f(&Ctl { from: me ^ 1, ..nack }),
        f(&Ctl { from: me ^ 1, ..ack }),
    ];
    bad.push(f(&Ctl { id: 12345, ..ack }));
    for frame in &bad {
        relay.inject_to_a(frame);
    }
    let n_bad = bad.len() as u64;
    until("A refuses them all", || worker(&a).msg_bulk_ctl_refused == n_bad);
    assert_eq!(worker(&a).msg_bulk_pieces_resent, 0, "nothing sent for them");
    for _ in 0..10 {
        relay.inject_to_a(&f(&nack));
    }
    until("A takes the ten NACKs", || {
        let w = worker(&a);
        w.msg_bulk_nacks_in + w.msg_bulk_resend_capped == 10
    });
    let wa = worker(&a);
    assert_eq!((wa.msg_bulk_nacks_in, wa.msg_bulk_resend_capped), (2, 8), "the cap: 2");
    assert_eq!(wa.msg_bulk_pieces_resent, 2, "piece 0, twice");
    until("B refuses the two late copies", || worker(&b).msg_bulk_piece_late == 2);
    let copies = relay.count(|w, s| w == Way::AtoB && s == Seen::Piece { id: ack.id, index: 0 });
    assert_eq!(copies, (3, 0), "the first copy and two resends");
    // A forged ACK frees the copy: NACKs of it are refused from then on.
    relay.inject_to_a(&f(&ack));
    until("A frees the message", || worker(&a).msg_bulk_acks_in == 1);
    relay.inject_to_a(&f(&nack));
    until("A refuses a NACK of it", || worker(&a).msg_bulk_ctl_refused == n_bad + 1);
    assert_eq!(runs(&b), 1, "the handler ran once");
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    let (wa, wb) = (&ta.workers[0], &tb.workers[0]);
    assert_eq!((wa.msg_bulk_pieces_resent, wa.msg_bulk_retx_expired), (2, 0));
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_bulk_acks_out), (1, 3), "one ACK + two re-ACKs");
    assert_eq!(wb.msg_bulk_nacks_out, 0);
}

/// Configured reassembly limits (`bulk_reasm_slots` 2, `bulk_reasm_bytes` 2,048 on B):
/// a 2,048-byte message arrives and runs; every piece of a 3,000-byte one is refused
/// (`msg_bulk_piece_refused`; nothing NACKed, nothing run) and A's kept copy of it
/// expires unacknowledged; three partial messages evict one (two slots).
#[test]
fn configured_reassembly_limits_refuse_longer_messages_and_bound_the_slots() {
    let opts_a = AdapterOptions { bulk_expiry_ms: 300, ..options() };
    let opts_b = AdapterOptions { bulk_reasm_slots: 2, bulk_reasm_bytes: 2048, ..options() };
    let (a, b, _relay, mut ea, src) = lossy_pair("rl", opts_a, opts_b);
    let fits = data_of(4, 2048);
    send_bulk(&mut ea, src, &fits);
    assert_eq!(bulk_answer(&replies_n(&mut ea, 1)[0].0), bulk_sum(&fits));
    send_bulk(&mut ea, src, &data_of(5, 3000));
    until("B refuses the 3,000-byte message's pieces", || worker(&b).msg_bulk_piece_refused == 3);
    until("A's copy of it expires", || worker(&a).msg_bulk_retx_expired == 1);
    let me = ea.id().unwrap() as u32;
    let firsts: Vec<Vec<u8>> = (500..503)
        .map(|id| {
            remote::bulk_frames(12, remote::TO_HANDLERS, me, id, &[1; 2000]).unwrap().remove(0)
        })
        .collect();
    send_all(&mut ea, &firsts);
    until("B evicts one of three", || worker(&b).msg_bulk_discarded == 1);
    assert_eq!(runs(&b), 1);
    drop(ea);
    let (_ta, tb) = (a.finish(), b.finish());
    let wb = &tb.workers[0];
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_bulk_acks_out), (1, 1));
}

/// A's end for [`acknowledgements_reach_the_worker_that_sent_the_message`]: two
/// workers, port 0 the tunnel (worker 0), port 1 `side` a mem sink (worker 1 serves its
/// endpoints), domain `msgs` with the message helpers and every port.
fn two_worker_end(local: SocketAddr, peer: SocketAddr, tag: &str) -> Running1 {
    let mut b = AdapterBuilder::new(options_with(2)).unwrap();
    let port = UdpPort::open("tun", local, peer, 0).unwrap();
    b.add_port("tun", Device::Udp(port), None).unwrap();
    let side = Device::Mem { port: MemPort::sink("side"), sink: true };
    b.add_port("side", side, None).unwrap();
    let names: Vec<String> = [
        "map_lookup_elem",
        "map_update_elem",
        "spine_msg_send",
        "spine_msg_bulk_len",
        "spine_msg_bulk_read",
        "spine_msg_send_bulk",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let helpers = Some(DomainSpec::helper_ids(&names).unwrap());
    b.add_domain(DomainSpec { name: "msgs".into(), helpers, ..DomainSpec::default_domain() })
        .unwrap();
    Running1::start(b, tag)
}

/// Acknowledgements reach the worker that sent the message: on A (two workers), the
/// handler `bulk_fwd.c` runs on worker 1, which serves the application's endpoint on
/// `side`, and sends a region of its area as a bulk message over the tunnel, which
/// worker 0 owns; the link loses piece 4 of it once. B's NACK and ACK arrive on worker
/// 0, which hands them (by the worker index in the message id) to worker 1; worker 1
/// resends the piece from its own store and frees it on the ACK. The answer comes back
/// with the right checksums; worker 0 keeps nothing and refuses nothing.
#[test]
fn acknowledgements_reach_the_worker_that_sent_the_message() {
    let (la, lb) = free_ports();
    let relay = Relay::new(la, lb);
    let a = two_worker_end(la, relay.for_a, "rw-a");
    let b = tunnel_end_bulk(lb, relay.for_b, "rw-b");
    a.live.load("fwd", &build("tests/fixtures", "bulk_fwd"), None, "msgs").unwrap();
    b.live.load("sum", &build("tests/fixtures", "bulk_sum"), None, "msgs").unwrap();
    until("the workers run the handler tables", || {
        a.live.handlers_settled() && b.live.handlers_settled()
    });
    let chan = Channel { domain: Some("msgs".into()), ..Channel::udp4("side", 7000) };
    let mut ea = Endpoint::open(&a.sock, &chan).unwrap();
    a.served(1);
    let mut lost = false;
    relay.set_rule(move |way, s| {
        let hit = way == Way::AtoB && matches!(s, Seen::Piece { index: 4, .. }) && !lost;
        lost |= hit;
        hit
    });
    let off = ea.reserve_area(5).expect("area frames for the data");
    let data = data_of(6, 7000);
    assert!(ea.write_area(off, &data));
    let mut request = off.to_ne_bytes().to_vec();
    request.extend_from_slice(&(data.len() as u32).to_ne_bytes());
    request.extend_from_slice(&[0; 4]);
    until("room for the request", || ea.send_message(13, &request));
    let got = replies_n(&mut ea, 1);
    assert_eq!(bulk_answer(&got[0].0), bulk_sum(&data), "the 7,000-byte region");
    until("worker 1 gets the ACK", || a.live.totals().workers[1].msg_bulk_acks_in == 1);
    drop(ea);
    let (ta, tb) = (a.finish(), b.finish());
    let (w0, w1) = (&ta.workers[0], &ta.workers[1]);
    assert_eq!((w1.msg_bulk_remote_out, w0.msg_bulk_remote_out), (1, 0), "worker 1 sent it");
    assert!(w1.msg_bulk_nacks_in >= 1 && w1.msg_bulk_pieces_resent >= 1);
    assert_eq!((w0.msg_bulk_nacks_in, w0.msg_bulk_acks_in, w0.msg_bulk_ctl_refused), (0, 0, 0));
    assert_eq!(w1.msg_bulk_ctl_refused + w1.msg_bulk_resend_capped, 0);
    assert!(w0.msg_handed >= 3, "the NACK, the ACK and the answer handed to worker 1");
    let wb = &tb.workers[0];
    assert_eq!((wb.msg_bulk_remote_in, wb.msg_remote_runs, wb.msg_bulk_acks_out), (1, 1, 1));
}
