//! What a port's [`Slot`](crate::slot::Slot) holds: an attached extension, with one
//! runner per worker built on the control side, ready to be taken by the worker the
//! first time it runs this attachment.
//!
//! Each attach or replace publishes a fresh `Program`, so a worker takes each runner
//! at most once (on its cold pick-up path) and the packet path never builds one. The
//! `may_use` row (which ports the extension's domain may redirect to) travels with the
//! program, since the ports are fixed but extensions come and go.

use std::sync::{Arc, Mutex, PoisonError};

use spine_runtime::{Extension, RunnerError, XdpRunner};

/// An extension attached to one port.
#[derive(Debug)]
pub(crate) struct Program {
    /// The extension's id: its index in the adapter's extension table and in every
    /// worker's counters.
    pub ext: u16,
    /// `may_use[port]`: the extension's domain may redirect to the port.
    pub may_use: Box<[bool]>,
    /// One runner per worker, taken by that worker at pick-up.
    runners: Box<[Mutex<Option<XdpRunner>>]>,
}

impl Program {
    /// Builds `workers` runners of `ext` (id `id`); `ports` are the adapter's port names.
    pub fn new(
        id: u16,
        ext: &Arc<Extension>,
        workers: usize,
        ports: &[String],
    ) -> Result<Program, RunnerError> {
        let runners = (0..workers)
            .map(|w| XdpRunner::new(ext.clone(), w).map(|r| Mutex::new(Some(r))))
            .collect::<Result<Box<[_]>, _>>()?;
        let may_use = ports.iter().map(|p| ext.domain().may_use_port(p)).collect();
        Ok(Program { ext: id, may_use, runners })
    }

    /// Worker `worker`'s runner; `None` if it was taken already (never, as each
    /// program is published once and picked up once per worker).
    pub fn take_runner(&self, worker: usize) -> Option<XdpRunner> {
        self.runners.get(worker)?.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}
