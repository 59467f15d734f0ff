//! The sizes and times of each profile (smoke, quick, full): one table, serialized into the
//! results as `plan`, so a report says what its run was asked to do.

use serde::{Deserialize, Serialize};

use crate::suite::args::Profile;

/// The sizes and times of one profile.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    pub reps: usize,
    pub cost_sessions: Vec<usize>,
    pub cost_rate: f64,
    pub hold_secs: f64,
    pub setup_rates: Vec<(f64, usize)>,
    pub memory_sessions: usize,
    pub peer_sessions: usize,
    pub via_relay_sessions: usize,
    pub relay_flows: usize,
    pub relay_secs: f64,
    pub codec_frames: usize,
    pub uplink_loss: f64,
    pub perf_secs: f64,
    /// Audio modes of the cost runs.
    pub modes: Vec<String>,
    /// Further cost modes (`scenarios::cost::COST_MODES`: backend rates, encoder settings),
    /// each at its own session counts.
    #[serde(default)]
    pub cost_extra: Vec<(String, Vec<usize>)>,
    /// Run the latency comparison of the relay against the direct path and the forwarder.
    pub relay_latency_baselines: bool,
    /// Repetitions of the relay latency legs. More than `reps`: one repetition's
    /// relay-over-forwarder ratio spreads widely on this machine with the relay unchanged
    /// (docs/SESSION_COST.md, "The full run with the new defaults (5afa9a2), and two targets at
    /// their limit"), so target 6's verdict, their median, needs more of them.
    #[serde(default)]
    pub relay_latency_reps: usize,
    /// Turns of the voice-to-voice scenario (0: not run; it loads speech models).
    #[serde(default)]
    pub voice_turns: usize,
    /// Length of the soak (0: none) and its concurrent sessions per wave.
    #[serde(default)]
    pub soak_secs: f64,
    #[serde(default)]
    pub soak_wave: usize,
}

impl Plan {
    pub fn of(p: Profile) -> Plan {
        match p {
            Profile::Smoke => Plan {
                reps: 1,
                cost_sessions: vec![4],
                cost_rate: 50.0,
                hold_secs: 1.0,
                setup_rates: vec![],
                memory_sessions: 0,
                peer_sessions: 0,
                via_relay_sessions: 0,
                relay_flows: 20,
                relay_secs: 0.5,
                codec_frames: 200,
                uplink_loss: 0.05,
                perf_secs: 0.0,
                modes: vec!["pcm".into()],
                // One run through the path a backend at another rate takes, one through target
                // 1's pairing with the forwarder, and one with a `Session` stream per call.
                cost_extra: vec![
                    ("pcm16k".into(), vec![4]),
                    ("passthrough".into(), vec![4]),
                    ("passthrough-sessions".into(), vec![4]),
                ],
                relay_latency_baselines: false,
                relay_latency_reps: 1,
                voice_turns: 0,
                soak_secs: 3.0,
                soak_wave: 3,
            },
            Profile::Quick => Plan {
                reps: 1,
                cost_sessions: vec![100, 250, 500, 1000],
                cost_rate: 100.0,
                hold_secs: 10.0,
                setup_rates: vec![(20.0, 100), (100.0, 200)],
                memory_sessions: 1000,
                peer_sessions: 100,
                via_relay_sessions: 100,
                relay_flows: 200,
                relay_secs: 3.0,
                codec_frames: 3000,
                uplink_loss: 0.0,
                perf_secs: 4.0,
                modes: vec!["pcm".into(), "passthrough".into()],
                cost_extra: rate_and_capacity_runs(),
                relay_latency_baselines: true,
                relay_latency_reps: 3,
                voice_turns: 3,
                soak_secs: 120.0,
                soak_wave: 50,
            },
            Profile::Full => Plan {
                reps: 3,
                cost_sessions: vec![100, 250, 500, 750, 1000],
                cost_rate: 100.0,
                hold_secs: 30.0,
                // Within one loop's capacity: setup latency, not saturation (the cost runs
                // measure where capacity ends). 300 listening sessions took the transceiver's
                // core past --max-process-cpu; 200 stay well under it (docs/SESSION_COST.md,
                // "Admission by the whole process's CPU").
                setup_rates: vec![(20.0, 200), (100.0, 200)],
                memory_sessions: 1000,
                peer_sessions: 200,
                via_relay_sessions: 300,
                relay_flows: 1000,
                relay_secs: 10.0,
                codec_frames: 10000,
                uplink_loss: 0.0,
                perf_secs: 10.0,
                modes: vec!["pcm".into(), "passthrough".into()],
                cost_extra: rate_and_capacity_runs(),
                relay_latency_baselines: true,
                relay_latency_reps: 7,
                voice_turns: 5,
                soak_secs: 600.0,
                soak_wave: 50,
            },
        }
    }
}

/// The cost runs of issue 12's targets beyond the 48 kHz curve: PCM at the backend rates speech
/// models use, the PCM capacity of one loop with the cheapest shipped encoder, passthrough
/// with read coalescing on (what the option saves), and a `Session` stream per call as the
/// baseline of what the `Multiplex` stream saves.
fn rate_and_capacity_runs() -> Vec<(String, Vec<usize>)> {
    vec![
        ("pcm16k".into(), vec![100, 250]),
        ("pcm24k".into(), vec![100, 250]),
        (
            "pcm-lowdelay-c0".into(),
            vec![crate::scenarios::cost::CAPACITY_ARRIVALS],
        ),
        // What read coalescing (off by default) would save, at the two points of target 1.
        ("passthrough-coalesced".into(), vec![100, 1000]),
        // What the multiplexed backend stream saves: passthrough at the points of target 1,
        // PCM at 100 sessions and at the capacity point of target 4.
        ("passthrough-sessions".into(), vec![100, 1000]),
        (
            "pcm-sessions".into(),
            vec![100, crate::scenarios::cost::CAPACITY_ARRIVALS],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use crate::scenarios::cost::cost_mode;
    use crate::suite::args::Profile;
    use crate::suite::plan::Plan;

    #[test]
    fn every_planned_cost_mode_exists() {
        for p in [Profile::Smoke, Profile::Quick, Profile::Full] {
            let plan = Plan::of(p);
            for (mode, _) in &plan.cost_extra {
                assert!(cost_mode(mode).is_some(), "{mode}");
            }
            for mode in &plan.modes {
                assert!(cost_mode(mode).is_some(), "{mode}");
            }
        }
    }
}
