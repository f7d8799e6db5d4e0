//! Why a pool operation was refused.

/// A refused pool operation. Every variant means the caller (or the memory a descriptor
/// came from) broke a rule; the pool's state is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    #[error("invalid pool configuration: {reason}")]
    BadConfig { reason: &'static str },
    #[error("cannot allocate {bytes} bytes of buffer memory")]
    OutOfMemory { bytes: usize },
    #[error("buffer handle {index} belongs to another pool")]
    Foreign { index: u32 },
    #[error("buffer {index} is not owned (free or lent); a double free or a stale handle")]
    NotOwned { index: u32 },
    #[error("buffer {index} has {refs} references; writing needs the only one")]
    Shared { index: u32, refs: u32 },
    #[error("buffer {index} already has the maximum number of references")]
    TooManyRefs { index: u32 },
    #[error("offset {offset:#x} is outside the pool's {len:#x} bytes")]
    OffsetOutOfRange { offset: u64, len: u64 },
    #[error("buffer {index} was not lent (a descriptor returned it twice or never had it)")]
    NotLent { index: u32 },
    #[error("buffer {index} was lent by another lender")]
    WrongLender { index: u32 },
    #[error(
        "buffer {index} heads a chain of fragments; it cannot be lent or chained as one buffer"
    )]
    Chained { index: u32 },
    #[error("a chain holds at most {max} buffers")]
    ChainTooLong { max: usize },
    #[error(
        "data range {offset}+{len} (metadata {meta_len}) does not fit a {buf_size}-byte buffer"
    )]
    BadRange { offset: u32, len: u32, meta_len: u32, buf_size: u32 },
}
