//! Round trips through an endpoint, and hostile clients against the adapter side.

use proptest::prelude::*;
use spine_endpoint::{AdapterEnd, ClientEnd, Desc, Layout, Taken};

fn pair(layout: Layout) -> (AdapterEnd, ClientEnd) {
    let a = AdapterEnd::create(layout).unwrap();
    let fd = a.shm().fd().try_clone_to_owned().unwrap();
    (a, ClientEnd::open(fd).unwrap())
}

#[test]
fn messages_round_trip_both_ways() {
    let (mut a, mut c) = pair(Layout::new(8, 2048, 16).unwrap());
    let mut buf = [0u8; 2048];
    for i in 0..100u8 {
        assert!(c.send(&[i; 64]));
        assert_eq!(a.take(&mut buf), Some(64));
        assert_eq!(buf[..64], [i; 64]);
        assert!(a.deliver(&[i ^ 0xff; 100]));
        let mut got = Vec::new();
        assert_eq!(c.recv(8, |m| got.extend_from_slice(m)), 1);
        assert_eq!(got, vec![i ^ 0xff; 100]);
    }
    let s = a.stats();
    assert_eq!((s.tx_taken, s.rx_delivered, s.bad_desc, s.bad_index), (100, 100, 0, 0));
}

#[test]
fn a_client_that_never_returns_frames_only_stops_its_own_receive() {
    let (mut a, mut c) = pair(Layout::new(8, 2048, 8).unwrap());
    // 4 frames on the fill ring at open; the client never reads.
    let delivered = (0..20).filter(|_| a.deliver(&[1; 100])).count();
    assert_eq!(delivered, 4);
    assert_eq!(a.stats().rx_no_room, 16);
    // Inline messages need no frame: they fill the rest of the receive ring (8 entries).
    let inline = (0..20).filter(|_| a.deliver(&[1; 60])).count();
    assert_eq!(inline, 4);
    assert_eq!(a.stats().rx_no_room, 32);
    // Reading gives frames back and receive resumes.
    assert_eq!(c.recv(64, |_| {}), 8);
    assert!(a.deliver(&[2; 100]));
}

#[test]
fn small_messages_travel_inline_without_frames_and_large_ones_in_frames() {
    // Two frames: one on the fill ring from open, one for the client to send from.
    let (mut a, mut c) = pair(Layout::new(8, 2048, 2).unwrap());
    let mut buf = [0u8; 2048];
    for i in 0..100u8 {
        let len = usize::from(i % 65);
        let msg: Vec<u8> = (0..len as u8).map(|b| b ^ i).collect();
        assert!(c.send(&msg), "inline send {i} needs no frame");
        assert_eq!(a.take(&mut buf), Some(len));
        assert_eq!(buf[..len], msg[..]);
        assert!(a.deliver(&msg), "inline receive {i} needs no fill frame");
        let mut got = None;
        assert_eq!(c.recv(8, |m| got = Some(m.to_vec())), 1);
        assert_eq!(got.as_deref(), Some(&msg[..]));
    }
    let s = a.stats();
    assert_eq!((s.tx_inline, s.rx_inline, s.tx_taken, s.rx_delivered), (100, 100, 100, 100));
    // 65 bytes is one too many for a slot: it goes in the client's frame, and comes back on
    // the completion ring before the next large send can have it.
    assert!(c.send(&[7; 65]));
    assert!(!c.send(&[8; 65]), "the only frame is in flight");
    assert!(c.send(&[9; 64]), "inline still goes");
    assert_eq!(a.take(&mut buf), Some(65));
    assert_eq!(buf[..65], [7; 65]);
    assert_eq!(a.take(&mut buf), Some(64));
    assert!(c.send(&[8; 65]), "the frame came back on completion");
    assert_eq!(a.take(&mut buf), Some(65));
    assert_eq!(buf[..65], [8; 65]);
    // Mixed order is kept on receive too (one frame on the fill ring from open).
    let (mut a, mut c) = pair(Layout::new(8, 2048, 2).unwrap());
    assert!(a.deliver(&[1; 10]) && a.deliver(&[2; 1000]) && a.deliver(&[3; 64]));
    let mut lens = Vec::new();
    assert_eq!(c.recv(8, |m| lens.push((m[0], m.len()))), 3);
    assert_eq!(lens, [(1, 10), (2, 1000), (3, 64)]);
    assert_eq!(a.stats().rx_inline, 2);
}

#[test]
fn inline_descriptors_from_a_client_are_checked_like_any_other() {
    let layout = Layout::new(8, 2048, 4).unwrap();
    let (mut a, c) = pair(layout);
    let tx_entries = RING_BASE + 128;
    let mut buf = [0u8; 2048];
    // Each bad entry alone: inline with an address, inline too long, unknown flag bits.
    let bad = [(8u64, 4u64 | 1 << 32), (0, 65 | 1 << 32), (0, 4 | 5 << 32), (0, 4 | 1 << 63)];
    for (i, (addr, word)) in bad.iter().enumerate() {
        c.poke_u64(tx_entries + i * 16, *addr);
        c.poke_u64(tx_entries + i * 16 + 8, *word);
    }
    // Then a good inline entry; the producer index says five.
    let inline = RING_BASE + layout_inline_off(8);
    c.poke_u64(tx_entries + 4 * 16, 0);
    c.poke_u64(tx_entries + 4 * 16 + 8, 8 | 1 << 32);
    c.poke_u64(inline + 4 * 64, u64::from_le_bytes(*b"inline!!"));
    c.poke_u32(RING_BASE, 5);
    assert_eq!(a.take(&mut buf), Some(8));
    assert_eq!(&buf[..8], b"inline!!");
    assert_eq!(a.stats().bad_desc, 4);
    // A valid inline message longer than the caller's buffer is dropped and counted.
    c.poke_u64(tx_entries + 5 * 16, 0);
    c.poke_u64(tx_entries + 5 * 16 + 8, 64 | 1 << 32);
    c.poke_u32(RING_BASE, 6);
    assert_eq!(a.take(&mut buf[..10]), None);
    assert_eq!((a.stats().tx_too_big, a.stats().tx_taken), (1, 1));
}

/// Where a ring's inline slots start for `entries` entries (64-byte aligned after them).
fn layout_inline_off(entries: usize) -> usize {
    (128 + entries * 16).next_multiple_of(64)
}

#[test]
fn a_dropped_client_leaves_the_adapter_side_usable() {
    let (mut a, c) = pair(Layout::new(8, 2048, 8).unwrap());
    drop(c);
    assert!(a.deliver(&[3; 60]), "fill frames given at open are still the adapter's to use");
    let mut buf = [0u8; 2048];
    assert_eq!(a.take(&mut buf), None);
}

const RING_BASE: usize = 4096;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Random words written over the rings: the adapter side neither panics nor reads
    /// or writes outside the region, and a second endpoint is untouched.
    #[test]
    fn garbage_in_the_rings_is_counted_not_trusted(
        pokes in proptest::collection::vec((0usize..4 * 768 / 8, any::<u64>()), 1..64),
        rounds in 1usize..8,
    ) {
        let layout = Layout::new(8, 256, 8).unwrap();
        let (mut bad_a, bad_c) = pair(layout);
        let (mut good_a, mut good_c) = pair(layout);
        let mut buf = [0u8; 256];
        for _ in 0..rounds {
            for &(word, v) in &pokes {
                // Four rings of 768 bytes each (128 of indices, 8 x 16 of entries, 8 x 64
                // inline slots) after the header.
                bad_c.poke_u64(RING_BASE + word * 8, v);
            }
            for _ in 0..16 {
                bad_a.deliver(&[9; 200]);
                if let Some(n) = bad_a.take(&mut buf) {
                    prop_assert!(n <= 256);
                }
            }
            for len in [32, 200] {
                prop_assert!(good_c.send(&vec![5; len]));
                prop_assert_eq!(good_a.take(&mut buf), Some(len));
                prop_assert!(good_a.deliver(&vec![6; len]));
                prop_assert_eq!(good_c.recv(8, |m| assert_eq!(m, &vec![6; len][..])), 1);
            }
        }
        let s = bad_a.stats();
        prop_assert!(s.rx_delivered + s.rx_no_room + s.rx_too_big >= 16 * rounds as u64);
    }
}

/// The region and eventfd cross a socketpair with SCM_RIGHTS; the client sleeps on
/// the eventfd until the adapter (another thread) delivers and signals.
#[test]
fn an_endpoint_handed_over_a_socket_wakes_a_blocked_client() {
    use spine_endpoint::{recv_fds, send_fds, EventFd};
    use std::os::unix::net::UnixStream;
    let (s1, s2) = UnixStream::pair().unwrap();
    let mut a = AdapterEnd::create(Layout::new(8, 2048, 8).unwrap()).unwrap();
    let ev = EventFd::new().unwrap();
    send_fds(&s1, &[a.shm().fd(), ev.fd()]).unwrap();
    let mut fds = recv_fds(&s2).unwrap();
    assert_eq!(fds.len(), 2);
    let cev = EventFd::from_fd(fds.pop().unwrap());
    let mut c = ClientEnd::open(fds.pop().unwrap()).unwrap();
    let t = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(a.deliver(b"hello"));
        ev.signal();
        a
    });
    assert!(cev.wait(5000).unwrap(), "woken by the adapter");
    let mut got = Vec::new();
    assert_eq!(c.recv(8, |m| got.extend_from_slice(m)), 1);
    assert_eq!(got, b"hello");
    t.join().unwrap();
}

/// The memfd a client receives is sealed: it cannot shrink the region under the adapter
/// (whose next access would fault with SIGBUS), grow it, or remove the seals; the
/// adapter side keeps working.
#[test]
fn a_client_cannot_resize_the_region_it_was_given() {
    use std::os::fd::AsRawFd;
    let (mut a, _c) = pair(Layout::new(8, 2048, 8).unwrap());
    let fd = a.shm().fd().try_clone_to_owned().unwrap();
    let len = a.shm().len() as libc::off_t;
    for size in [0, len / 2, len * 2] {
        // SAFETY: plain syscall on an fd this test owns.
        let rc = unsafe { libc::ftruncate(fd.as_raw_fd(), size) };
        let e = std::io::Error::last_os_error();
        assert_eq!((rc, e.raw_os_error()), (-1, Some(libc::EPERM)), "ftruncate to {size}");
    }
    // SAFETY: as above.
    let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
    assert_eq!(seals & libc::F_SEAL_SEAL, libc::F_SEAL_SEAL, "the seals cannot be lifted");
    assert!(a.deliver(&[9; 60]), "the adapter side still works");
}

/// Active messages both ways: host to adapter marked with their handler (inline up to 64
/// bytes, in a frame up to 240), adapter to host marked with handler and source; frames
/// and messages interleave in order; a caller that serves no messages drops them counted.
#[test]
fn active_messages_are_marked_both_ways_and_interleave_with_frames() {
    let (mut a, mut c) = pair(Layout::new(8, 2048, 8).unwrap());
    let mut buf = [0u8; 2048];
    for (i, len) in [0usize, 1, 64, 65, 200, 240].into_iter().enumerate() {
        let msg: Vec<u8> = (0..len).map(|b| (b + i) as u8).collect();
        assert!(c.send_message(7 + i as u8, &msg));
        assert!(c.send(&[i as u8; 100]));
        let got = a.take_entry(&mut buf);
        assert_eq!(got, Some(Taken::Message { handler: 7 + i as u8, len, to: None }));
        assert_eq!(buf[..len], msg[..]);
        assert_eq!(a.take_entry(&mut buf), Some(Taken::Frame(100)), "the frame after it");
        assert!(a.deliver_message(9, 300 + i as u16, &msg));
        assert!(a.deliver(&[i as u8; 70]));
        let mut seen = Vec::new();
        assert_eq!(c.recv_marked(8, |m, mark| seen.push((m.to_vec(), mark))), 2);
        assert_eq!(seen[0], (msg.clone(), Some((9, 300 + i as u16))));
        assert_eq!(seen[1], (vec![i as u8; 70], None));
    }
    assert!(!c.send_message(1, &[0; 241]), "over 240 bytes: refused on the client side");
    assert!(!a.deliver_message(1, 0, &[0; 241]));
    let s = a.stats();
    assert_eq!((s.msg_taken, s.tx_taken, s.msg_delivered, s.bad_desc), (6, 6, 6, 0));
    // `take` serves frames only: a message before a frame is dropped, counted.
    assert!(c.send_message(1, b"hi") && c.send(b"frame"));
    assert_eq!(a.take(&mut buf), Some(5));
    assert_eq!(a.stats().msg_dropped, 1);
}

/// Hostile message descriptors: longer than 240 bytes (inline or in a frame), a source
/// written by the client, an undefined option bit; each is skipped and counted, and the
/// good message behind them is taken.
#[test]
fn hostile_message_descriptors_are_refused_and_counted() {
    let layout = Layout::new(8, 2048, 4).unwrap();
    let (mut a, c) = pair(layout);
    let tx_entries = RING_BASE + 128;
    let mut buf = [0u8; 2048];
    let opt = |o: u32| u64::from(o) << 32;
    let m = |inline| Desc::message_options(inline, 7, 0);
    let bad = [
        (2048u64, 241 | opt(m(false))),
        (0, 65 | opt(m(true))),
        (0, 8 | opt(m(true) | Desc::FORWARD)),
        (0, 8 | opt(m(true) | 4)),
        (1 << 40, 8 | opt(m(false))),
    ];
    for (i, (addr, word)) in bad.iter().enumerate() {
        c.poke_u64(tx_entries + i * 16, *addr);
        c.poke_u64(tx_entries + i * 16 + 8, *word);
    }
    let inline = RING_BASE + layout_inline_off(8);
    c.poke_u64(tx_entries + 5 * 16, 0);
    c.poke_u64(tx_entries + 5 * 16 + 8, 8 | opt(Desc::message_options(true, 255, 0)));
    c.poke_u64(inline + 5 * 64, u64::from_le_bytes(*b"message!"));
    c.poke_u32(RING_BASE, 6);
    assert_eq!(a.take_entry(&mut buf), Some(Taken::Message { handler: 255, len: 8, to: None }));
    assert_eq!(&buf[..8], b"message!");
    assert_eq!((a.stats().bad_desc, a.stats().msg_taken), (5, 1));
}

#[test]
fn host_path_returns_are_checked_and_everything_else_is_refused() {
    use spine_endpoint::Returned;
    let layout = Layout::new(8, 2048, 4).unwrap();
    let (mut a, c) = pair(layout);
    let tx_entries = RING_BASE + 128;
    let mut buf = [0u8; 2048];
    // Each bad entry alone: a header return without INLINE, one too long for a slot, an
    // in-place return outside the area, one with INLINE set, a plain frame, a message.
    let bad = [
        (7u64, 10u64 | 4 << 32),
        (7, 65 | 5 << 32),
        (4 * 2048, 100 | 8 << 32),
        (0, 100 | 9 << 32),
        (0, 100),
        (0, 8 | 3 << 32),
    ];
    for (i, (addr, word)) in bad.iter().enumerate() {
        c.poke_u64(tx_entries + i * 16, *addr);
        c.poke_u64(tx_entries + i * 16 + 8, *word);
    }
    c.poke_u32(RING_BASE, bad.len() as u32);
    assert_eq!(a.take_returned(&mut buf), None);
    assert_eq!(a.stats().bad_desc, bad.len() as u64);
    // Good ones through the client's calls (a fresh pair: the pokes moved the producer
    // index behind the client's back): a header for handle 42 out of port 3 ...
    let (mut a, mut c) = pair(layout);
    assert!(c.return_header(42, 3, b"fourteen bytes"));
    assert_eq!(
        a.take_returned(&mut buf),
        Some(Returned::Header { handle: 42, egress: 3, len: 14 })
    );
    assert_eq!(&buf[..14], b"fourteen bytes");
    // ... and a frame rewritten in place, out of port 2; its frame comes back.
    assert!(a.deliver_in_frame(&[7u8; 40]), "a small frame still goes into a frame");
    let n = c.forward_in_place(8, |f| {
        f[0] = 9;
        Some(2)
    });
    assert_eq!(n, 1);
    assert_eq!(a.take_returned(&mut buf), Some(Returned::Forward { egress: 2, len: 40 }));
    assert_eq!(buf[..2], [9, 7]);
    assert_eq!(a.stats().bad_desc, 0);
    // Headers delivered with their handle and the whole length.
    assert!(a.deliver_header(&[5u8; 64], 0x1_0000_0003, 1500));
    let mut got = Vec::new();
    c.recv_headers(8, |h| got.push((h.handle, h.total, h.header.len())));
    assert_eq!(got, vec![(0x1_0000_0003, 1500, 64)]);
}

/// Bulk message descriptors (a reference to bytes of the buffer area): valid ones are
/// taken as `Taken::Bulk` with nothing copied and nothing completed, whatever frames they
/// span; hostile ones (past the area, reaching one byte past it, wrapping around 2^64,
/// empty, with the inline bit, with another option bit) are skipped and
/// counted, and the good one behind them is taken. `read_area` refuses any range not
/// wholly inside the area, whatever the offset, and reads what the client wrote.
#[test]
fn bulk_message_references_are_checked_against_the_area() {
    let layout = Layout::new(16, 2048, 4).unwrap();
    let area = layout.area_bytes() as u64;
    let (mut a, mut c) = pair(layout);
    let mut buf = [0u8; 2048];
    // A region of two frames the client keeps for bulk data.
    let at = c.reserve_area(2).expect("two consecutive free frames");
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();
    assert!(c.write_area(at, &data));
    assert!(!c.write_area(area - 10, &[0; 11]), "past the area: refused by the client");
    assert!(c.send_bulk(12, at, 3000));
    let got = a.take_entry(&mut buf);
    assert_eq!(got, Some(Taken::Bulk { handler: 12, off: at, len: 3000, to: None }));
    let mut out = vec![0u8; 3000];
    assert!(a.read_area(at, &mut out));
    assert_eq!(out, data);
    // The whole area, one byte short of it, and one byte at its very end are fine.
    assert!(c.send_bulk(1, 0, area as u32));
    assert_eq!(
        a.take_entry(&mut buf),
        Some(Taken::Bulk { handler: 1, off: 0, len: area as u32, to: None })
    );
    assert!(c.send_bulk(2, area - 1, 1));
    assert_eq!(
        a.take_entry(&mut buf),
        Some(Taken::Bulk { handler: 2, off: area - 1, len: 1, to: None })
    );
    let s = a.stats();
    assert_eq!((s.msg_taken, s.bad_desc, s.tx_taken), (3, 0, 0));
    // Hostile references.
    let bulk = |h: u32| Desc::MESSAGE | Desc::BULK | h << 8;
    let hostile: [(u64, u32, u32); 8] = [
        (area, 1, bulk(3)),
        (area - 10, 11, bulk(3)),
        (u64::MAX - 4, 10, bulk(3)),
        (1 << 63, 4096, bulk(3)),
        (0, 0, bulk(3)),
        (0, 10, bulk(3) | Desc::INLINE),
        (0, 10, bulk(3) | Desc::FORWARD),
        (0, 10, bulk(3) | Desc::HEADER),
    ];
    let tx_entries = RING_BASE + 128;
    let base = 3; // entries already used
    for (i, (addr, len, options)) in hostile.iter().enumerate() {
        let e = tx_entries + ((base + i) % 16) * 16;
        c.poke_u64(e, *addr);
        c.poke_u64(e + 8, u64::from(*len) | u64::from(*options) << 32);
    }
    let e = tx_entries + ((base + 8) % 16) * 16;
    c.poke_u64(e, at);
    c.poke_u64(e + 8, 100 | u64::from(bulk(9)) << 32);
    c.poke_u32(RING_BASE, (base + 9) as u32);
    assert_eq!(
        a.take_entry(&mut buf),
        Some(Taken::Bulk { handler: 9, off: at, len: 100, to: None })
    );
    let s = a.stats();
    assert_eq!((s.msg_taken, s.bad_desc), (4, 8));
    assert_eq!(a.take_entry(&mut buf), None);
    // `read_area` itself: every range outside the area is refused.
    for (off, len) in
        [(area, 1usize), (area - 1, 2), (u64::MAX, 1), (u64::MAX - 2, 8), (0, area as usize + 1)]
    {
        let mut out = vec![0u8; len];
        assert!(!a.read_area(off, &mut out), "{off} + {len}");
    }
    let mut last = [0u8; 1];
    assert!(a.read_area(area - 1, &mut last));
    c.release_area(at, 2);
    assert!(c.reserve_area(2).is_some(), "released frames can be reserved again");
}

/// A message for one extension carries its id + 1 in bits 16..32 of the transmit
/// descriptor, small (inline or in a frame) or bulk, and the adapter side takes it back
/// as the id; 0 there is every extension; id 0xffff cannot be named (refused before
/// anything is written).
#[test]
fn a_message_for_one_extension_carries_its_id_to_the_adapter() {
    let (mut a, mut c) = pair(Layout::new(8, 2048, 8).unwrap());
    let mut buf = [0u8; 2048];
    assert!(c.send_message_to(Some(5), 7, b"five"));
    assert_eq!(a.take_entry(&mut buf), Some(Taken::Message { handler: 7, len: 4, to: Some(5) }));
    assert!(c.send_message_to(Some(0), 8, &[1; 200]), "in a frame");
    assert_eq!(a.take_entry(&mut buf), Some(Taken::Message { handler: 8, len: 200, to: Some(0) }));
    assert!(c.send_message_to(None, 9, b"all"));
    assert_eq!(a.take_entry(&mut buf), Some(Taken::Message { handler: 9, len: 3, to: None }));
    assert!(c.send_bulk_to(Some(0xfffe), 10, 0, 100));
    let want = Taken::Bulk { handler: 10, off: 0, len: 100, to: Some(0xfffe) };
    assert_eq!(a.take_entry(&mut buf), Some(want));
    assert!(!c.send_message_to(Some(0xffff), 7, b"x"), "id 0xffff cannot be named");
    assert!(!c.send_bulk_to(Some(0xffff), 7, 0, 1));
    assert_eq!(a.take_entry(&mut buf), None, "nothing was written for them");
    assert_eq!((a.stats().bad_desc, a.stats().msg_taken), (0, 4));
}

/// Grants ([`Desc::GRANT`]): the client lends regions of its area for bulk messages
/// from tunnels; the adapter takes them off the transmit ring (nothing completed, no
/// entry handed on), writes a message at the start of the oldest grant that holds it
/// and posts a bulk receive descriptor the client reads in place. A message longer
/// than every grant, or with the receive ring full, is refused and keeps the grants;
/// grants outside the area, empty, with other bits, or past [`spine_endpoint::GRANTS`]
/// are refused and counted.
#[test]
fn granted_regions_receive_bulk_messages_and_bad_grants_are_refused() {
    let layout = Layout::new(16, 2048, 8).unwrap();
    let area = layout.area_bytes() as u64;
    let (mut a, mut c) = pair(layout);
    let mut buf = [0u8; 2048];
    let big = c.reserve_area(2).expect("two frames");
    let small = c.reserve_area(1).expect("one frame");
    assert!(c.grant_area(small, 100));
    assert!(c.grant_area(big, 4096));
    assert_eq!(a.take_entry(&mut buf), None, "grants are no entries");
    assert_eq!(a.grants(), 2);
    assert_eq!(a.stats().tx_taken + a.stats().msg_taken, 0);
    // 3,000 bytes fit only the second grant; 50 then fit the first.
    let m1: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    assert!(!a.deliver_bulk_granted(4, 9, &vec![1; 4097]), "longer than every grant");
    assert!(a.deliver_bulk_granted(4, 9, &m1));
    assert!(a.deliver_bulk_granted(5, 10, &[0x5a; 50]));
    assert!(!a.deliver_bulk_granted(5, 10, b"x"), "no grant left");
    assert!(!a.deliver_bulk_granted(5, 10, b""), "empty");
    let mut got = Vec::new();
    assert_eq!(c.recv_marked(8, |d, m| got.push((d.to_vec(), m))), 2);
    assert_eq!(got, vec![(m1, Some((4, 9))), (vec![0x5a; 50], Some((5, 10)))]);
    let s = a.stats();
    assert_eq!((s.msg_delivered, s.rx_no_room, s.rx_too_big, s.bad_desc), (2, 2, 1, 0));
    // More than GRANTS grants: the extra ones refused.
    for i in 0..spine_endpoint::GRANTS as u64 + 2 {
        assert!(c.grant_area(i * 8, 8));
    }
    assert_eq!(a.take_entry(&mut buf), None);
    assert_eq!((a.grants(), a.stats().bad_desc), (spine_endpoint::GRANTS, 2));
    // The receive ring full: refused, the grant kept.
    let mut delivered = 0;
    while a.deliver_bulk_granted(1, 1, b"12345678") {
        delivered += 1;
    }
    assert_eq!(delivered, spine_endpoint::GRANTS);
    assert_eq!(a.stats().rx_no_room, 3, "the loop's last try found no grant");
    assert!(c.grant_area(0, 8));
    assert_eq!(a.take_entry(&mut buf), None);
    for _ in 0..8 {
        assert!(a.deliver(b"f"));
    }
    assert!(!a.deliver_bulk_granted(1, 1, b"y"), "the receive ring is full");
    assert_eq!((a.grants(), a.stats().rx_no_room), (1, 4), "the grant is kept");
    // Hostile grants: past the area, wrapping, empty, with another bit.
    let head = 2 + spine_endpoint::GRANTS + 2 + 1; // transmit entries written so far
    let hostile: [(u64, u32, u32); 4] = [
        (area - 10, 11, Desc::GRANT),
        (u64::MAX - 4, 10, Desc::GRANT),
        (0, 0, Desc::GRANT),
        (0, 10, Desc::GRANT | Desc::MESSAGE),
    ];
    for (i, (addr, len, options)) in hostile.iter().enumerate() {
        let e = RING_BASE + 128 + ((head + i) % 16) * 16;
        c.poke_u64(e, *addr);
        c.poke_u64(e + 8, u64::from(*len) | u64::from(*options) << 32);
    }
    c.poke_u32(RING_BASE, (head + hostile.len()) as u32);
    assert_eq!(a.take_entry(&mut buf), None);
    assert_eq!((a.grants(), a.stats().bad_desc), (1, 2 + 4));
}

/// A grant the adapter has not taken off the transmit ring yet is still used when a
/// message arrives first (grants at the ring's head are taken then); a grant behind a
/// frame stays in order behind it until the frame is taken.
#[test]
fn a_grant_posted_before_a_message_is_used_even_before_the_ring_is_served() {
    let layout = Layout::new(16, 2048, 8).unwrap();
    let (mut a, mut c) = pair(layout);
    let region = c.reserve_area(1).expect("a frame");
    assert!(c.grant_area(region, 2048));
    assert!(a.deliver_bulk_granted(3, 4, b"first"), "the grant at the head is seen");
    assert!(c.send(&[9; 100]));
    let other = c.reserve_area(1).expect("another frame");
    assert!(c.grant_area(other, 2048));
    assert!(!a.deliver_bulk_granted(3, 4, b"second"), "the grant is behind a frame");
    let mut buf = [0u8; 2048];
    assert_eq!(a.take_entry(&mut buf), Some(Taken::Frame(100)));
    assert_eq!(a.grants(), 0, "the grant is now at the head, not taken yet");
    assert!(a.deliver_bulk_granted(3, 4, b"second"));
    assert_eq!(a.grants(), 0);
    let mut got = Vec::new();
    c.recv_marked(8, |d, m| got.push((d.to_vec(), m)));
    assert_eq!(got, vec![(b"first".to_vec(), Some((3, 4))), (b"second".to_vec(), Some((3, 4)))]);
}

/// A bulk message for another adapter ([`Desc::REMOTE`]) is taken with its
/// destination; its reference is checked as any bulk message's, and the bit with
/// anything but `MESSAGE | BULK` is refused.
#[test]
fn remote_bulk_descriptors_carry_their_destination_and_are_checked() {
    let layout = Layout::new(16, 2048, 4).unwrap();
    let area = layout.area_bytes() as u64;
    let (mut a, mut c) = pair(layout);
    let mut buf = [0u8; 2048];
    assert!(c.send_bulk_remote(7, 12, 100, 3000));
    assert!(c.send_bulk_remote(Desc::REMOTE_HANDLERS, 3, 0, area as u32));
    assert!(c.send_bulk_remote(7, 12, area - 10, 11), "past the area");
    assert!(c.send_bulk_remote(7, 12, 0, 0), "empty");
    assert!(c.send_bulk_remote(7, 12, u64::MAX - 4, 10), "wraps");
    assert_eq!(
        a.take_entry(&mut buf),
        Some(Taken::RemoteBulk { handler: 12, off: 100, len: 3000, dest: 7 })
    );
    assert_eq!(
        a.take_entry(&mut buf),
        Some(Taken::RemoteBulk { handler: 3, off: 0, len: area as u32, dest: 0xffff })
    );
    assert_eq!(a.take_entry(&mut buf), None);
    assert_eq!((a.stats().msg_taken, a.stats().bad_desc), (2, 3));
    // The bit with INLINE, or without BULK: refused.
    let e = RING_BASE + 128 + 5 * 16; // entry 5 (the client wrote 0..5)
    let bad = Desc::MESSAGE | Desc::BULK | Desc::REMOTE | Desc::INLINE | 12 << 8;
    c.poke_u64(e, 0);
    c.poke_u64(e + 8, 8 | u64::from(bad) << 32);
    let e = RING_BASE + 128 + 6 * 16;
    c.poke_u64(e, 0);
    c.poke_u64(e + 8, 8 | u64::from(Desc::MESSAGE | Desc::REMOTE | 12 << 8) << 32);
    c.poke_u32(RING_BASE, 7);
    assert_eq!(a.take_entry(&mut buf), None);
    assert_eq!((a.stats().msg_taken, a.stats().bad_desc), (2, 5));
}

/// A frame of `len` bytes whose every byte depends on its position, split into pieces
/// as a pool chain holds it: a head of `head` bytes, then fragments of `frag` bytes.
fn chained(len: usize, head: usize, frag: usize) -> (Vec<u8>, Vec<Vec<u8>>) {
    let f: Vec<u8> = (0..len).map(|i| (i * 7 + i / 251) as u8).collect();
    let mut pieces = vec![f[..head].to_vec()];
    pieces.extend(f[head..].chunks(frag).map(<[u8]>::to_vec));
    (f, pieces)
}

/// Reads every entry: (bytes, CONTD) each.
fn pieces_of(c: &mut ClientEnd) -> Vec<(Vec<u8>, bool)> {
    let mut got = Vec::new();
    c.recv_pieces(64, |d, m, more| {
        assert!(m.is_none());
        got.push((d.to_vec(), more));
    });
    got
}

#[test]
fn a_multi_buffer_endpoint_gets_a_chained_frame_as_several_descriptors_marked_contd() {
    let (mut a, mut c) = pair(Layout::new(16, 2048, 16).unwrap());
    a.set_multi_buffer(true);
    let (f, pieces) = chained(9000, 1792, 2048);
    let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&refs));
    let got = pieces_of(&mut c);
    // Each fill frame (2,048 bytes from its start) filled to its end: 5 descriptors.
    let lens: Vec<usize> = got.iter().map(|(d, _)| d.len()).collect();
    assert_eq!(lens, [2048, 2048, 2048, 2048, 808]);
    let marks: Vec<bool> = got.iter().map(|&(_, m)| m).collect();
    assert_eq!(marks, [true, true, true, true, false]);
    assert!(got.iter().flat_map(|(d, _)| d.iter().copied()).eq(f.iter().copied()));
    // A short chained frame travels inline, a one-frame one in one descriptor.
    let (small, sp) = chained(60, 20, 20);
    let sp: Vec<&[u8]> = sp.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&sp));
    let (mid, mp) = chained(1900, 1792, 2048);
    let mp: Vec<&[u8]> = mp.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&mp));
    assert_eq!(pieces_of(&mut c), vec![(small, false), (mid, false)]);
    let s = a.stats();
    assert_eq!((s.rx_delivered, s.rx_multi, s.rx_inline, s.bad_desc), (3, 1, 1, 0));
}

#[test]
fn a_multi_buffer_frame_is_delivered_whole_or_not_at_all() {
    // 8 frames: 4 on the fill ring at open, the client reads nothing yet.
    let (mut a, mut c) = pair(Layout::new(8, 2048, 8).unwrap());
    a.set_multi_buffer(true);
    let (_, big) = chained(9000, 1792, 2048);
    let big: Vec<&[u8]> = big.iter().map(Vec::as_slice).collect();
    // Needs 5 fill frames; 4 are there: nothing taken, nothing posted.
    assert!(!a.deliver_pieces(&big));
    assert_eq!((a.stats().rx_no_room, a.stats().rx_delivered), (1, 0));
    assert!(pieces_of(&mut c).is_empty(), "no piece of it was posted");
    // The 4 fill frames are all still there for a frame that needs exactly 4.
    let (f, four) = chained(7000, 1792, 2048);
    let four: Vec<&[u8]> = four.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&four));
    let got = pieces_of(&mut c);
    assert_eq!(got.len(), 4);
    assert!(got.iter().flat_map(|(d, _)| d.iter().copied()).eq(f.iter().copied()));

    // A receive ring too short for the pieces: 4 entries, a 5-piece frame.
    let (mut a, mut c) = pair(Layout::new(4, 2048, 64).unwrap());
    a.set_multi_buffer(true);
    assert!(!a.deliver_pieces(&big));
    assert_eq!(a.stats().rx_no_room, 1);
    assert!(pieces_of(&mut c).is_empty());
    // A bad fill entry among those a frame uses is skipped and counted.
    let (mut a, mut c) = pair(Layout::new(8, 2048, 8).unwrap());
    a.set_multi_buffer(true);
    let fill_entries = RING_BASE + 2 * (layout_inline_off(8) + 8 * 64) + 128;
    c.poke_u64(fill_entries + 8, 1 << 40);
    let (f, three) = chained(5000, 1792, 2048);
    let three: Vec<&[u8]> = three.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&three));
    let got = pieces_of(&mut c);
    assert_eq!(got.iter().map(|(d, _)| d.len()).collect::<Vec<_>>(), [2048, 2048, 904]);
    assert!(got.iter().flat_map(|(d, _)| d.iter().copied()).eq(f.iter().copied()));
    assert_eq!(a.stats().bad_desc, 1);
}

#[test]
fn an_endpoint_not_opted_in_gets_a_chained_frame_in_one_frame_when_it_fits() {
    let (mut a, mut c) = pair(Layout::new(8, 4096, 8).unwrap());
    assert!(!a.multi_buffer());
    let (f, p) = chained(3000, 1792, 2048);
    let p: Vec<&[u8]> = p.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&p));
    assert_eq!(pieces_of(&mut c), vec![(f, false)]);
    // Longer than a frame: dropped and counted, no fill frame used.
    let (_, big) = chained(9000, 1792, 2048);
    let big: Vec<&[u8]> = big.iter().map(Vec::as_slice).collect();
    assert!(!a.deliver_pieces(&big));
    assert_eq!((a.stats().rx_too_big, a.stats().rx_delivered, a.stats().rx_multi), (1, 1, 0));
    let (g, p) = chained(4000, 1792, 2048);
    let p: Vec<&[u8]> = p.iter().map(Vec::as_slice).collect();
    assert!(a.deliver_pieces(&p));
    assert_eq!(pieces_of(&mut c), vec![(g, false)]);
}

#[test]
fn the_transmit_ring_refuses_contd() {
    let (mut a, c) = pair(Layout::new(8, 2048, 8).unwrap());
    let tx_entries = RING_BASE + 128;
    // Frame 0 is the client's (the fill ring got the last four).
    c.poke_u64(tx_entries, 0);
    c.poke_u64(tx_entries + 8, 100 | u64::from(Desc::CONTD) << 32);
    c.poke_u32(RING_BASE, 1);
    let mut buf = [0u8; 2048];
    assert_eq!(a.take(&mut buf), None);
    assert_eq!((a.stats().bad_desc, a.stats().tx_taken), (1, 0));
}
