//! The running kernel's BTF, which CO-RE relocations are resolved against.

use std::sync::{Arc, OnceLock};

/// Where the kernel publishes its own type information.
pub const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// The kernel's BTF (`/sys/kernel/btf/vmlinux`), read once per process; `None` when the
/// kernel was built without it.
pub fn kernel_btf() -> Option<Arc<[u8]>> {
    static BTF: OnceLock<Option<Arc<[u8]>>> = OnceLock::new();
    BTF.get_or_init(|| std::fs::read(KERNEL_BTF).ok().map(Arc::from)).clone()
}
