//! Knowing when an endpoint's client is gone, so its endpoint can be reclaimed.
//!
//! The adapter keeps its end of the Unix stream connection it handed the endpoint's fds
//! over, and the client keeps the other. The kernel closes the client's end when the last
//! process holding it exits, is killed, or closes it, and then reports `POLLHUP` on the
//! adapter's end. That needs no pid (so no pid-reuse race, unlike probing
//! `SO_PEERCRED`'s pid with `kill(pid, 0)`) and no cooperation: a client that is
//! SIGKILLed mid-transfer is seen exactly like one that exits cleanly. A client that
//! passed its connection to another process stays alive while that process holds it;
//! that is the contract (whoever holds the connection holds the endpoint). A half-close
//! (`shutdown(SHUT_WR)`) is not death: only `POLLHUP`/`POLLERR` count.
//!
//! The check is a `poll(2)` and belongs on a slow path (the control thread); it sets a
//! [`Liveness`] flag that the endpoint's worker reads with one relaxed load per burst.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::EndpointError;

/// Whether an endpoint's client is gone: shared by whoever watches the client and the
/// worker that serves the endpoint. Once dead, never alive again.
#[derive(Debug, Clone, Default)]
pub struct Liveness(Arc<AtomicBool>);

impl Liveness {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_dead(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// Declares the client gone (its connection closed, or the adapter's own policy).
    pub fn mark_dead(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The adapter's end of one client's connection, watched for the client going away.
#[derive(Debug)]
pub struct ClientWatch {
    conn: OwnedFd,
    live: Liveness,
}

impl ClientWatch {
    /// Watches `conn`, the adapter's end of the stream the endpoint was handed over.
    pub fn new(conn: OwnedFd) -> Self {
        ClientWatch { conn, live: Liveness::new() }
    }

    /// The flag this watch sets; give a clone to the endpoint's port.
    pub fn liveness(&self) -> Liveness {
        self.live.clone()
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.conn.as_fd()
    }

    /// Checks once without waiting; marks the client dead if its end is closed.
    /// Returns whether it is dead.
    pub fn check(&self) -> Result<bool, EndpointError> {
        Self::check_all(std::slice::from_ref(self), 0)?;
        Ok(self.live.is_dead())
    }

    /// Checks every watch in one `poll(2)`, waiting up to `timeout_ms` (-1: forever)
    /// for at least one client to go when none has yet. Marks the dead ones and
    /// returns how many are dead now.
    pub fn check_all(watches: &[ClientWatch], timeout_ms: i32) -> Result<usize, EndpointError> {
        // Slow path: one allocation per check, never on the per-packet path.
        let mut pfds: Vec<libc::pollfd> = watches
            .iter()
            .map(|w| libc::pollfd { fd: w.conn.as_raw_fd(), events: 0, revents: 0 })
            .collect();
        let timeout = if watches.iter().any(|w| w.live.is_dead()) { 0 } else { timeout_ms };
        // SAFETY: `pfds` is a live array of `pfds.len()` pollfds over fds we own.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout) };
        if n < 0 {
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(EndpointError::Os { call: "poll", err });
            }
        }
        for (w, p) in watches.iter().zip(&pfds) {
            if p.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                w.live.mark_dead();
            }
        }
        Ok(watches.iter().filter(|w| w.live.is_dead()).count())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn a_closed_peer_is_dead_and_a_half_closed_or_chatty_one_is_not() {
        use std::io::Write;
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let w = ClientWatch::new(ours.into());
        let live = w.liveness();
        assert!(!w.check().unwrap());
        theirs.write_all(b"a request the control thread has not read").unwrap();
        assert!(!w.check().unwrap(), "pending data is not death");
        theirs.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(!w.check().unwrap(), "a half-close is not death");
        drop(theirs);
        assert!(w.check().unwrap());
        assert!(live.is_dead(), "the shared flag is set");
    }

    #[test]
    fn check_all_marks_only_the_closed_ones() {
        let pairs: Vec<_> = (0..3).map(|_| UnixStream::pair().unwrap()).collect();
        let mut peers = Vec::new();
        let watches: Vec<_> = pairs
            .into_iter()
            .map(|(a, b)| {
                peers.push(Some(b));
                ClientWatch::new(a.into())
            })
            .collect();
        assert_eq!(ClientWatch::check_all(&watches, 0).unwrap(), 0);
        peers[1] = None;
        // Waits (bounded) for the one that is gone; returns at once since it is.
        assert_eq!(ClientWatch::check_all(&watches, 5000).unwrap(), 1);
        let dead: Vec<bool> = watches.iter().map(|w| w.liveness().is_dead()).collect();
        assert_eq!(dead, [false, true, false]);
    }
}
