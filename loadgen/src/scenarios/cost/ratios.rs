//! The ratios the cost targets judge: a PCM run's CPU over the libopus cost of the frames it
//! handled (target 3), a passthrough run's CPU per packet over the bare forwarder's (target
//! 1), each repetition against the baseline measured beside it; and a loop's PCM capacity.

use voxgate_proto::bridge::AudioMode;

use crate::codec_floor::{floor_at, CodecFloor, EncoderSettings};
use crate::report::cells::med;
use crate::report::runs::us_per_packet;
use crate::scenarios::cost::{cost_mode, measured, target3_mode, CostPoint, CAPACITY_ARRIVALS};
use crate::session_load::LoadResult;
use crate::stats::median;

/// Server CPU over the libopus cost of the frames it actually handled in the window: every
/// uplink packet the clients sent decoded, every downlink packet they received encoded.
pub fn work_floor_ratio(runs: &[LoadResult], floor: Option<&CodecFloor>) -> Option<f64> {
    let f = floor?;
    let ratios: Vec<f64> = runs.iter().filter_map(|r| run_floor_ratio(r, f)).collect();
    median(&ratios)
}

/// One run's CPU over the libopus cost of the frames it handled, at floor `f`.
fn run_floor_ratio(r: &LoadResult, f: &CodecFloor) -> Option<f64> {
    let cpu = r.server.as_ref()?.cpu_secs;
    let work = (r.window_audio_sent as f64 * f.decode_us_per_frame
        + r.window_audio_received as f64 * f.encode_us_per_frame)
        / 1e6;
    (work > 0.0).then_some(cpu / work)
}

/// Each run's ratio to the codec floor measured right after it (runs whose floor failed are
/// left out). Empty for a point measured without floors beside it.
pub fn paired_floor_ratios(p: &CostPoint) -> Vec<f64> {
    p.runs
        .iter()
        .zip(&p.beside)
        .filter_map(|(r, b)| run_floor_ratio(r, b.floor.as_ref()?))
        .collect()
}

/// Each run's CPU per packet over that of the forwarder flat out right after it (target 1).
/// Empty for a point measured without the forwarder beside it.
pub fn paired_forwarder_ratios(p: &CostPoint) -> Vec<f64> {
    p.runs
        .iter()
        .zip(&p.beside)
        .filter_map(|(r, b)| {
            let fwd = b.forwarder.as_ref()?.us_per_packet;
            let ours = us_per_packet(std::slice::from_ref(r))?;
            (fwd > 0.0).then_some(ours / fwd)
        })
        .collect()
}

/// The floor a point of `mode` is compared with: the one at its backend rate, measured with
/// its encoder settings. `None` for passthrough and for an encoder the floors were not
/// measured with.
pub fn floor_for<'a>(mode: &str, floors: &'a [CodecFloor]) -> Option<&'a CodecFloor> {
    let m = cost_mode(mode)?;
    let f = floor_at(floors, m.sample_rate)?;
    let measured_with = EncoderSettings {
        bitrate: f.bitrate,
        complexity: f.complexity,
        application: f.application,
    };
    (m.audio == AudioMode::Pcm && m.encoder == measured_with).then_some(f)
}

/// A PCM point's ratio to the codec floor (target 3).
#[derive(Debug, Clone, PartialEq)]
pub struct FloorRatio {
    /// The median of `reps`.
    pub ratio: f64,
    pub sessions: usize,
    /// Each repetition's ratio.
    pub reps: Vec<f64>,
    /// Whether each repetition was compared with the floor measured right after it (else
    /// with the floor measured before the cost runs).
    pub paired: bool,
}

/// PCM CPU against the codec floor at backend rate `rate` (same rate, same encoder settings):
/// the worst point measured at that rate with the default encoder. Each repetition is
/// compared with the floor measured beside it when the point has them, else with the one of
/// `floors` measured before the cost runs. For the Targets table (issue 12: ≤ 1.3 × at 16 and
/// 24 kHz, ≤ 1.5 × at 48 kHz).
pub fn pcm_floor_ratio(cost: &[CostPoint], floors: &[CodecFloor], rate: u32) -> Option<FloorRatio> {
    cost.iter()
        .filter(|p| !p.runs.is_empty())
        .filter(|p| cost_mode(&p.mode).is_some_and(|m| target3_mode(m) && m.sample_rate == rate))
        .filter_map(|p| {
            let paired = paired_floor_ratios(p);
            let (reps, paired) = if paired.is_empty() {
                let f = floor_for(&p.mode, floors)?;
                let reps: Vec<f64> = p
                    .runs
                    .iter()
                    .filter_map(|r| run_floor_ratio(r, f))
                    .collect();
                (reps, false)
            } else {
                (paired, true)
            };
            Some(FloorRatio {
                ratio: median(&reps)?,
                sessions: p.sessions,
                reps,
                paired,
            })
        })
        .max_by(|a, b| a.ratio.total_cmp(&b.ratio))
}

/// The PCM sessions one loop admitted in mode `mode` (`"pcm"`: the default encoder,
/// `"pcm-lowdelay-c0"`: the cheapest) when [`CAPACITY_ARRIVALS`] sessions arrived: its
/// capacity at `--max-loop-busy` (the median over repetitions). For the Targets table
/// (issue 12: ≥ 1.3 × 238 with the default encoder).
pub fn pcm_capacity(cost: &[CostPoint], mode: &str) -> Option<usize> {
    let p = measured(cost, mode).find(|p| p.sessions == CAPACITY_ARRIVALS)?;
    med(&p.runs, |r| r.sessions_signaled as f64).map(|v| v.round() as usize)
}

#[cfg(test)]
mod tests {
    use crate::relay_load::FlowResult;
    use crate::scenarios::cost::fixtures::{floor, point};
    use crate::scenarios::cost::ratios::*;
    use crate::scenarios::cost::Beside;
    use crate::session_load::ServerUsage;

    #[test]
    fn floor_ratio_uses_the_floor_at_the_points_rate_and_the_worst_point() {
        // 16 kHz floor: 1,000 × 10 µs + 500 × 20 µs = 0.02 s; 48 kHz: 0.04 s.
        let floors = [floor(16_000, 10.0, 20.0), floor(48_000, 20.0, 40.0)];
        let cost = [
            point("pcm16k", 100, 0.024, 100),
            point("pcm16k", 250, 0.030, 250),
            point("pcm", 100, 0.05, 100),
            // Another encoder: not compared with the default encoder's floor.
            point("pcm-lowdelay-c0", 500, 0.01, 500),
        ];
        let w = pcm_floor_ratio(&cost, &floors, 16_000).unwrap();
        assert!(
            (w.ratio - 1.5).abs() < 1e-9 && w.sessions == 250 && !w.paired,
            "{w:?}"
        );
        let w = pcm_floor_ratio(&cost, &floors, 48_000).unwrap();
        assert!(
            (w.ratio - 1.25).abs() < 1e-9 && w.sessions == 100 && !w.paired,
            "{w:?}"
        );
        assert!(
            pcm_floor_ratio(&cost, &floors, 24_000).is_none(),
            "no points"
        );
        assert!(floor_for("pcm-lowdelay-c0", &floors).is_none());
        assert!(floor_for("passthrough", &floors).is_none());
    }

    /// `point` with three runs of `cpu` seconds each, every one with a floor measured beside
    /// it (decode `decode[i]` µs, encode twice that).
    fn paired_point(mode: &str, cpu: [f64; 3], decode: [f64; 3]) -> CostPoint {
        let one = point(mode, 100, 0.0, 100).runs.remove(0);
        CostPoint {
            mode: mode.into(),
            sessions: 100,
            runs: cpu
                .iter()
                .map(|&c| LoadResult {
                    server: Some(ServerUsage {
                        cpu_secs: c,
                        ..ServerUsage::default()
                    }),
                    ..one.clone()
                })
                .collect(),
            beside: decode
                .iter()
                .map(|&d| Beside {
                    forwarder: None,
                    floor: Some(floor(16_000, d, 2.0 * d)),
                })
                .collect(),
        }
    }

    #[test]
    fn each_repetition_is_compared_with_the_floor_measured_beside_it() {
        // The machine slows down by half between repetitions, runs and floors alike: each
        // repetition's own ratio is 1.2, while its CPU against the up-front floor (10 µs
        // decode, 20 µs encode: 0.02 s of work) reads 1.2, 1.5 and 1.8.
        let cost = [paired_point(
            "pcm16k",
            [0.024, 0.030, 0.036],
            [10.0, 12.5, 15.0],
        )];
        let w = pcm_floor_ratio(&cost, &[floor(16_000, 10.0, 20.0)], 16_000).unwrap();
        assert!(w.paired, "{w:?}");
        assert!((w.ratio - 1.2).abs() < 1e-9, "{w:?}");
        assert!(w.reps.iter().all(|r| (r - 1.2).abs() < 1e-9), "{w:?}");
        // A failed floor leaves its repetition out of the pairing.
        let mut gap = cost.clone();
        gap[0].beside[1].floor = None;
        assert_eq!(paired_floor_ratios(&gap[0]).len(), 2);
        // Without floors beside, the up-front floor.
        let mut none = cost.clone();
        none[0].beside.clear();
        let w = pcm_floor_ratio(&none, &[floor(16_000, 10.0, 20.0)], 16_000).unwrap();
        assert!(!w.paired && (w.ratio - 1.5).abs() < 1e-9, "{w:?}");
    }

    #[test]
    fn passthrough_runs_are_compared_with_the_forwarder_run_beside_them() {
        // 1,500 audio packets per run: 0.015 s is 10 µs a packet.
        let mut p = point("passthrough", 100, 0.0, 100);
        let one = p.runs.remove(0);
        for cpu in [0.015, 0.030] {
            p.runs.push(LoadResult {
                server: Some(ServerUsage {
                    cpu_secs: cpu,
                    ..ServerUsage::default()
                }),
                ..one.clone()
            });
        }
        p.beside = [5.0, 10.0]
            .iter()
            .map(|&us| Beside {
                forwarder: Some(FlowResult {
                    us_per_packet: us,
                    ..FlowResult::default()
                }),
                floor: None,
            })
            .collect();
        let r = paired_forwarder_ratios(&p);
        assert!(
            r.len() == 2 && r.iter().all(|x| (x - 2.0).abs() < 1e-9),
            "{r:?}"
        );
        p.beside.clear();
        assert!(paired_forwarder_ratios(&p).is_empty());
    }

    #[test]
    fn capacity_is_the_admitted_sessions_of_the_500_arrival_point() {
        let cost = [
            point("pcm", 250, 0.1, 250),
            point("pcm", CAPACITY_ARRIVALS, 0.1, 238),
            point("pcm-lowdelay-c0", CAPACITY_ARRIVALS, 0.1, 410),
        ];
        assert_eq!(pcm_capacity(&cost, "pcm"), Some(238));
        assert_eq!(pcm_capacity(&cost, "pcm-lowdelay-c0"), Some(410));
        assert_eq!(pcm_capacity(&cost, "pcm16k"), None);
    }
}
