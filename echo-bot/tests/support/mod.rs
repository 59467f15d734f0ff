//! Test helpers shared by the echo-bot tests.

pub mod reset_proxy;
