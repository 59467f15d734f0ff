#![cfg(all(feature = "aws-lc-rs", feature = "_internal_test_exports"))]

//! Bandwidth Estimation (BWE) integration tests.

mod common;

mod alr;
mod changing;
mod delay;
mod estimate;
mod loss;
mod minimum;
mod probes;
mod queue_time;
mod recovery;
mod simple;
