//! The voxgate echo bot's logic, with no I/O: an energy VAD and utterance state machine that
//! turns caller audio frames into "play this back" and "stop playing" (barge-in) actions.
//!
//! The `echo-bot` binary (see `main.rs`) is the gRPC plumbing around it; tests drive
//! [`Utterances`] directly with synthetic frames and a fake clock.

pub mod utterance;

pub use utterance::{level_dbfs, Action, Utterances, VadConfig};
