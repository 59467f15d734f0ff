//! The report's SVG plots: CPU per session against the codec floor, and the latency CDFs of
//! setup, media and the relay's middle hop.

use crate::report::cells::med;
use crate::report::runs::cpu_per_session;
use crate::suite::SuiteResults;
use crate::svg::{Chart, Series};

/// The SVG plots, by file name.
pub fn charts(r: &SuiteResults) -> Vec<(&'static str, String)> {
    vec![
        ("cpu_per_session.svg", cpu_per_session_chart(r)),
        ("setup_latency_cdf.svg", setup_chart(r)),
        ("media_latency_cdf.svg", media_chart(r)),
        ("relay_latency_cdf.svg", relay_chart(r)),
    ]
}

/// CPU per session vs sessions.
fn cpu_per_session_chart(r: &SuiteResults) -> String {
    // CPU per session vs sessions.
    let mut series = Vec::new();
    for mode in ["pcm", "passthrough"] {
        let pts: Vec<(f64, f64)> = r
            .cost
            .iter()
            .filter(|p| p.mode == mode)
            // Plotted at the sessions actually connected (an overloaded run has fewer).
            .filter_map(|p| {
                let up = med(&p.runs, |x| x.sessions_connected_window_end as f64)?;
                cpu_per_session(&p.runs).map(|c| (up, c * 1e3))
            })
            .collect();
        series.push(Series {
            label: format!("transceiver, {mode}"),
            points: pts,
            markers: true,
            dashed: false,
        });
    }
    if let Some(f) = &r.codec_floor {
        let xs: Vec<f64> = r.cost.iter().map(|p| p.sessions as f64).collect();
        let (lo, hi) = xs
            .iter()
            .fold((f64::MAX, 0.0f64), |(a, b), &x| (a.min(x), b.max(x)));
        if hi > 0.0 {
            series.push(Series {
                label: "codec floor (libopus only)".into(),
                points: vec![
                    (lo, f.cpu_per_session_sec * 1e3),
                    (hi, f.cpu_per_session_sec * 1e3),
                ],
                markers: false,
                dashed: true,
            });
            series.push(Series {
                label: "target: 1.3 × floor".into(),
                points: vec![
                    (lo, 1.3 * f.cpu_per_session_sec * 1e3),
                    (hi, 1.3 * f.cpu_per_session_sec * 1e3),
                ],
                markers: false,
                dashed: true,
            });
        }
    }
    Chart {
        title: "Transceiver CPU per session-second",
        x_label: "concurrent sessions connected in the window",
        y_label: "CPU-ms per session-second",
        log_x: false,
        series,
    }
    .render()
}

/// DTLS connected and first PCM frame, per arrival rate.
fn setup_chart(r: &SuiteResults) -> String {
    let mut series = Vec::new();
    for s in &r.setup {
        if let Some(run) = s.runs.first() {
            for (what, samples) in [
                ("DTLS", &run.setup.samples.dtls_connected),
                ("first PCM", &run.setup.samples.first_frame),
            ] {
                series.push(Series {
                    label: format!("{what}, {}/s", s.rate),
                    points: crate::stats::cdf_points(samples, 300),
                    markers: false,
                    dashed: what == "first PCM",
                });
            }
        }
    }
    Chart {
        title: "Setup latency CDF (from POST)",
        x_label: "ms (log scale)",
        y_label: "fraction of sessions",
        log_x: true,
        series,
    }
    .render()
}

/// Backend-side media latency, per PCM point.
fn media_chart(r: &SuiteResults) -> String {
    let series = r
        .cost
        .iter()
        .filter(|p| p.mode == "pcm")
        .filter_map(|p| {
            p.runs.first().map(|run| Series {
                label: format!("{} sessions", p.sessions),
                points: run
                    .media_latency_cdf
                    .iter()
                    .map(|&(x, y)| (x / 1e3, y))
                    .collect(),
                markers: false,
                dashed: false,
            })
        })
        .collect();
    Chart {
        title: "Media latency CDF: transceiver socket → PCM at the backend",
        x_label: "ms (log scale)",
        y_label: "fraction of frames",
        log_x: true,
        series,
    }
    .render()
}

/// One-way latency of each middle hop at the same rate.
fn relay_chart(r: &SuiteResults) -> String {
    let rl = &r.relay;
    let series = [
        ("direct", &rl.direct_lat),
        ("bare forwarder", &rl.forwarder_lat),
        ("voxgate relay", &rl.relay_lat),
        ("coturn", &rl.coturn_lat),
    ]
    .into_iter()
    .filter_map(|(name, runs)| {
        runs.first().map(|f| Series {
            label: name.to_string(),
            points: f.latency_cdf.clone(),
            markers: false,
            dashed: false,
        })
    })
    .collect();
    Chart {
        title: "One-way latency through the middle hop (same rate)",
        x_label: "µs (log scale)",
        y_label: "fraction of datagrams",
        log_x: true,
        series,
    }
    .render()
}
