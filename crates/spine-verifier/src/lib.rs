//! spine's load-time verifier: proves an eBPF program memory-safe without the kernel,
//! in the style of the kernel's verifier (`kernel/bpf/verifier.c`) and PREVAIL.
//!
//! Every path is interpreted abstractly: scalars as tnums with signed and unsigned
//! 64- and 32-bit bounds, pointers by the region they point into (context, packet,
//! stack, map value, ...) with fixed and variable offsets, packet pointers with the
//! range a `data_end` comparison proved. Loops are allowed: at each loop head the
//! analysis joins states and widens them until they stop changing, instead of unrolling;
//! termination at run time is the watchdog's job. States already covered by an explored
//! one are pruned, so branchy straight-line code stays cheap.
//!
//! ```
//! use spine_verifier::{verify, xdp_ctx, KernelHelpers, Limits, VerifyEnv};
//! let prog = spine_isa::assemble(
//!     "ldxw %r2, [%r1+0]
//!      ldxw %r3, [%r1+4]
//!      mov %r4, %r2
//!      add %r4, 14
//!      jgt %r4, %r3, +2
//!      ldxh %r0, [%r2+12]
//!      exit
//!      mov %r0, 1
//!      exit",
//! )
//! .unwrap();
//! let ctx = xdp_ctx();
//! let helpers = KernelHelpers::xdp();
//! let env = VerifyEnv { ctx: &ctx, helpers: &helpers, maps: &[], limits: Limits::default(), log_level: 0 };
//! assert!(verify(&prog, &env).is_ok());
//! ```
//!
//! Beyond the kernel's domain, two relational facts keep clang's loops provable without
//! unrolling: a packet range may be negative (`p += len` past a checked header still
//! bounds `p`), and a loop counter may be tied to a packet range (`base + i + c <=
//! data_end`), discovered when the loop head joins two iterations. Scalars that reach
//! no comparison, address, size or spill are forgotten at prune points (a static
//! analysis), and a cached state compares only the scalars its explored future
//! depended on (the kernel's precision marks, `precise.rs`), so counters and values
//! that are only ever compared with both outcomes possible do not defeat pruning.
//!
//! What the engines must guarantee for the proofs to hold: `data_end - data <= 0xffff`
//! and `data_meta <= data <= data_end`; valid addresses are never 0; map values are
//! 8-byte aligned; when [`Verified::stack_zeroing`] is set, each frame's stack is zeroed
//! on entry; `bpf_loop` refuses more than 2^23 iterations; helpers that fill memory
//! (`ARG_PTR_TO_UNINIT_MEM`) write all of it, also when they fail.
//!
//! Pure computation: no I/O, no threads, no clock.
#![deny(unsafe_code)]

mod cfg;
pub mod cond;
mod ctx;
mod env;
mod error;
pub mod fmt;
mod helpers;
mod info;
mod precise;
mod reg;
pub mod scalar;
mod stack_live;
mod state;
pub mod tnum;
mod verifier;

pub use ctx::{spine_msg_ctx, xdp_ctx, xdp_devmap_ctx, CtxField, CtxFieldKind, CtxLayout};
pub use env::{Limits, MapInfo, VerifyEnv};
pub use error::{LeakTarget, VerifyError, VerifyErrorKind};
pub use helpers::{
    kernel_helper_proto, map_func_compatible, ArgType, CallbackKind, HelperProto, HelperTable,
    KernelHelpers, RetType, KNOWN_HELPERS,
};
pub use info::{InsnInfo, MemAccess, SubprogInfo, Verified};

use spine_isa::Insn;

/// Verifies `insns` against `env`. On success returns what was proven about each
/// instruction; on failure, the first violation found with the state at it.
pub fn verify(insns: &[Insn], env: &VerifyEnv) -> Result<Verified, VerifyError> {
    verifier::verify(insns, env)
}
