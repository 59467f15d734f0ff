//! How a worker's calls reach the transceiver.

/// The stream a call rides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A `Session` stream per call.
    Session,
    /// One `Multiplex` stream per worker subscription, a numbered channel per call: the cheaper
    /// one for a process that owns many calls (one stream's wakeups and writes carry them all).
    Multiplex,
}

impl Transport {
    /// The stream's name, as logs say it.
    pub fn stream_name(self) -> &'static str {
        match self {
            Transport::Session => "session",
            Transport::Multiplex => "multiplex",
        }
    }
}
