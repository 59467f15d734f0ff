//! Medians over the repetitions of a session scenario ([`LoadResult`]s) that several sections
//! of the report print.

use crate::session_load::{LoadResult, ServerUsage};
use crate::stats::median;

/// The median server CPU-seconds per session-second.
pub fn cpu_per_session(runs: &[LoadResult]) -> Option<f64> {
    server(runs, |s| s.cpu_per_session_sec)
}

/// The median server CPU µs per RTP audio packet the clients sent or received. Audio packets
/// only: the control traffic around them (RTCP, congestion-control feedback, STUN consent) is
/// cost, not work, so a configuration that sends less of it is not penalised for the smaller
/// count (`ServerUsage::us_per_packet` keeps the per-datagram figure).
pub fn us_per_packet(runs: &[LoadResult]) -> Option<f64> {
    median(
        &runs
            .iter()
            .filter_map(|r| {
                let audio = r.window_audio_sent + r.window_audio_received;
                Some(r.server.as_ref()?.cpu_secs * 1e6 / (audio > 0).then_some(audio)? as f64)
            })
            .collect::<Vec<_>>(),
    )
}

/// The median of `f` over the runs that read the server's usage.
pub fn server<T>(runs: &[LoadResult], f: impl Fn(&ServerUsage) -> T) -> Option<f64>
where
    T: Into<f64>,
{
    median(
        &runs
            .iter()
            .filter_map(|r| r.server.as_ref().map(|s| f(s).into()))
            .collect::<Vec<_>>(),
    )
}
