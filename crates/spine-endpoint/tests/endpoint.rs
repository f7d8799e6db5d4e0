//! Round trips through an endpoint, and hostile clients against the adapter side.

use proptest::prelude::*;
use spine_endpoint::{AdapterEnd, ClientEnd, Layout};

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
    let delivered = (0..20).filter(|_| a.deliver(&[1; 60])).count();
    assert_eq!(delivered, 4);
    assert_eq!(a.stats().rx_no_room, 16);
    // Reading gives frames back and receive resumes.
    assert_eq!(c.recv(64, |_| {}), 4);
    assert!(a.deliver(&[2; 60]));
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
        pokes in proptest::collection::vec((0usize..4 * 256 / 8, any::<u64>()), 1..64),
        rounds in 1usize..8,
    ) {
        let layout = Layout::new(8, 256, 8).unwrap();
        let (mut bad_a, bad_c) = pair(layout);
        let (mut good_a, mut good_c) = pair(layout);
        let mut buf = [0u8; 256];
        for _ in 0..rounds {
            for &(word, v) in &pokes {
                // Four rings of 256 bytes each (128 header + 8 x 16 entries) after the header.
                bad_c.poke_u64(RING_BASE + word * 8, v);
            }
            for _ in 0..16 {
                bad_a.deliver(&[9; 200]);
                if let Some(n) = bad_a.take(&mut buf) {
                    prop_assert!(n <= 256);
                }
            }
            prop_assert!(good_c.send(&[5; 32]));
            prop_assert_eq!(good_a.take(&mut buf), Some(32));
            prop_assert!(good_a.deliver(&[6; 32]));
            prop_assert_eq!(good_c.recv(8, |m| assert_eq!(m, &[6; 32])), 1);
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
