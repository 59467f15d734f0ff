//! The scenarios of the benchmark suite, one module each. A scenario owns what it runs (its
//! part of the [`crate::suite::Plan`] decides how much), its results type, its report
//! section, its rows of the Targets table with their verdicts, and its "why" explanation.
//! [`crate::suite::SCENARIOS`] lists them; adding one means a module here and a line there.

pub mod cost;
pub mod encoder;
pub mod media;
pub mod memory;
pub mod micro;
pub mod peers;
pub mod relay;
pub mod relay_tcp;
pub mod setup;
pub mod soak;
pub mod via_relay;
pub mod voice;
