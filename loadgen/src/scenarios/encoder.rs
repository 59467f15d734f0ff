//! Encoder settings, cost beside quality: each application and complexity of
//! [`codec_quality::MATRIX`] at each backend rate, on spoken sentences, in process (before any
//! server starts, like the codec floor). The cost is the encoder's CPU per 20 ms frame; the
//! quality is the log-spectral distance of the decoded speech from the source.

use std::fmt::Write as _;

use crate::codec_floor::EncoderSettings;
use crate::codec_quality::{self, QualityError, QualityMatrix, QualityPoint};
use crate::suite::args::Profile;
use crate::suite::runner::{Ledger, Runner};

/// Measures the matrix into `slot`. Missing speech tools make it "not measured", not a failure:
/// the smoke run needs no extra package.
pub fn measure<R: Ledger>(s: &mut Runner<R>, slot: fn(&mut R) -> &mut QualityMatrix) {
    s.say("encoder settings: cost and quality on spoken sentences (in process)");
    let repeats = if s.args.profile == Profile::Smoke {
        1
    } else {
        5
    };
    match codec_quality::matrix(EncoderSettings::BENCH.bitrate, repeats) {
        Ok(points) => slot(&mut s.results).points = points,
        Err(e @ QualityError::ToolMissing(_)) => {
            s.say(&format!("encoder quality not measured: {e}"));
            slot(&mut s.results).skipped = Some(e.to_string());
        }
        Err(e) => s.record_error("encoder quality", e.into()),
    }
}

/// The "Encoder settings: cost and quality" section.
pub fn section(md: &mut String, q: &QualityMatrix) {
    if let Some(why) = &q.skipped {
        let _ = writeln!(
            md,
            "## Encoder settings: cost and quality\n\nNot measured ({why}).\n"
        );
        return;
    }
    if q.points.is_empty() {
        // Results from before this was measured.
        return;
    }
    let _ = writeln!(md, "## Encoder settings: cost and quality\n");
    let _ = writeln!(
        md,
        "The downlink encoder's CPU per 20 ms frame (thread CPU time, median of the repeats) and its quality on \
         synthetic speech: `espeak-ng` speaking {} seconds of sentences, resampled by `sox` to the backend rate, \
         encoded at {} bit/s and decoded. *LSD* is the log-spectral distance of decoded from source speech (20 ms \
         Hann-windowed frames, bins up to 11,025 Hz, the synthesizer's band; mean over non-silent frames; 0 dB is \
         identical, lower is better). *× default* compares the encode cost with today's default (`voip`, complexity 5) \
         at the same rate. `lowdelay` is libopus's RESTRICTED_LOWDELAY (CELT only).\n",
        q.points.first().map_or(0, |p| p.frames / 50),
        q.points.first().map_or(0, |p| p.bitrate),
    );
    let _ = writeln!(
        md,
        "| rate (Hz) | application | complexity | encode µs per frame | × default | LSD (dB) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for p in &q.points {
        let default = q.points.iter().find(|d| {
            d.sample_rate == p.sample_rate
                && (d.application, d.complexity)
                    == (
                        EncoderSettings::BENCH.application,
                        EncoderSettings::BENCH.complexity,
                    )
        });
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.1} | {} | {:.2} |",
            p.sample_rate,
            p.application.as_arg(),
            p.complexity,
            p.encode_us_per_frame,
            relative(p, default),
            p.lsd_db
        );
    }
    let _ = writeln!(md);
}

fn relative(p: &QualityPoint, default: Option<&QualityPoint>) -> String {
    match default {
        Some(d) if d.encode_us_per_frame > 0.0 => {
            format!("{:.2}", p.encode_us_per_frame / d.encode_us_per_frame)
        }
        _ => "–".into(),
    }
}
