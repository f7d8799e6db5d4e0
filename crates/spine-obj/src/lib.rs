//! Loads eBPF ELF objects as libbpf does. (being written)
#![deny(unsafe_code)]

mod error;
pub mod maps {
    pub const MAX_KEY_SIZE: u64 = 512;
    pub const MAX_VALUE_SIZE: u64 = 1 << 20;
}
mod model;

pub use error::*;
pub use model::*;

pub fn parse(_bytes: &[u8]) -> Result<Object, ObjError> {
    todo!("parser")
}
