//! Endpoint errors: setup and mapping failures with the OS error, and layouts a header
//! does not describe.

/// Why an endpoint could not be created, mapped or used.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("{call} failed: {err}")]
    Os { call: &'static str, err: std::io::Error },
    #[error("bad layout: {0}")]
    Layout(&'static str),
    #[error("shared region of {have} bytes, layout needs {need}")]
    TooSmall { have: usize, need: usize },
}

impl EndpointError {
    pub(crate) fn last_os(call: &'static str) -> Self {
        EndpointError::Os { call, err: std::io::Error::last_os_error() }
    }
}
