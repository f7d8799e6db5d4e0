//! Test support for crates whose tests touch real interfaces (spine-sys, spine-ports,
//! spine-adapter): [`netns::NetNs`], a network namespace of the test run that is removed
//! when its guard drops (also when the test fails), with veth pairs inside it; and
//! [`raw::Raw`], a plain AF_PACKET socket, independent of the ports under test, that
//! injects frames at one end of a pair and observes what arrives at the other; and
//! [`daemons`], BIRD and FRR run inside such a namespace, with their files in a
//! temporary folder, killed and removed when their guards drop.
//!
//! Only ever a dev-dependency. Tests that need root skip loudly without it.

pub mod daemons;
pub mod netns;
pub mod raw;
