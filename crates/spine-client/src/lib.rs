//! The application's library for spine endpoints. An [`Endpoint`] is opened from the
//! fds the adapter hands out (the region, and optionally the eventfd it signals after
//! delivering); sends write in place into the endpoint's frames and receives read in
//! place. [`Endpoint::recv`] polls; [`Endpoint::recv_blocking`] sleeps on the eventfd
//! when nothing is ready. Messages of [`INLINE_BYTES`] or less travel inline in the
//! ring entry itself and use no frame.
#![deny(unsafe_code)]

use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

pub use spine_endpoint::{recv_fds, ClientEnd, EndpointError, EventFd, Layout, INLINE_BYTES};

/// An open endpoint.
#[derive(Debug)]
pub struct Endpoint {
    end: ClientEnd,
    wake: Option<EventFd>,
    /// The connection the fds came over, held so the adapter sees the endpoint in use.
    conn: Option<UnixStream>,
}

impl Endpoint {
    /// Opens the region `fd`; `wake` is the eventfd the adapter signals (blocking mode).
    pub fn open(fd: OwnedFd, wake: Option<OwnedFd>) -> Result<Self, EndpointError> {
        Ok(Endpoint { end: ClientEnd::open(fd)?, wake: wake.map(EventFd::from_fd), conn: None })
    }

    /// Opens the endpoint whose fds arrive on `sock` (region first, eventfd second).
    /// Keep `sock` open while using the endpoint: an adapter that watches the connection
    /// reclaims the endpoint once it closes. [`Endpoint::connect`] keeps it for you.
    pub fn from_socket(sock: &UnixStream) -> Result<Self, EndpointError> {
        let mut fds = recv_fds(sock)?.into_iter();
        let region = fds.next().ok_or(EndpointError::Layout("no region fd"))?;
        Self::open(region, fds.next())
    }

    /// Connects to the Unix socket at `path`, receives the endpoint's fds, and keeps the
    /// connection for as long as the endpoint lives (closing it gives the endpoint up).
    pub fn connect(path: impl AsRef<Path>) -> Result<Self, EndpointError> {
        let sock =
            UnixStream::connect(path).map_err(|err| EndpointError::Os { call: "connect", err })?;
        let mut ep = Self::from_socket(&sock)?;
        ep.conn = Some(sock);
        Ok(ep)
    }

    pub fn layout(&self) -> Layout {
        self.end.layout()
    }

    /// Sends a message of `len` bytes written in place by `write`; false when full.
    pub fn send_with(&mut self, len: usize, write: impl FnOnce(&mut [u8])) -> bool {
        self.end.send_with(len, write)
    }

    /// Sends as many of `msgs` as fit; returns how many.
    pub fn send_batch<M: AsRef<[u8]>>(&mut self, msgs: &[M]) -> usize {
        msgs.iter().take_while(|m| self.end.send(m.as_ref())).count()
    }

    /// Hands up to `max` received messages to `f` in place, without waiting.
    pub fn recv(&mut self, max: usize, f: impl FnMut(&[u8])) -> usize {
        self.end.recv(max, f)
    }

    /// As [`recv`](Self::recv), but sleeps on the eventfd up to `timeout_ms` (-1:
    /// forever) when nothing is ready. Without an eventfd it only polls once.
    pub fn recv_blocking(
        &mut self,
        max: usize,
        timeout_ms: i32,
        mut f: impl FnMut(&[u8]),
    ) -> Result<usize, EndpointError> {
        let n = self.end.recv(max, &mut f);
        if n > 0 {
            return Ok(n);
        }
        match &self.wake {
            Some(w) if w.wait(timeout_ms)? => Ok(self.end.recv(max, f)),
            _ => Ok(0),
        }
    }
}
