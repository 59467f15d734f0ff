//! Sessions through the relay: the architecture's full path. The transceiver advertises the
//! relay, so every client's ICE, DTLS and SRTP cross it; passthrough echo backend.

use std::fmt::Write as _;

use voxgate_proto::bridge::AudioMode;

use crate::backend::Behaviour;
use crate::report::cells::{med, num};
use crate::report::runs::us_per_packet;
use crate::session_load::{self, LoadResult};
use crate::suite::runner::{Ledger, Runner};
use crate::suite::servers::TransceiverOpts;

/// The parts of the results this scenario writes: its runs, and why it could not run.
pub type ViaRelaySlots<R> = fn(&mut R) -> (&mut Vec<LoadResult>, &mut Option<String>);

/// The planned sessions through a fresh relay and transceiver, once per repetition.
pub fn run<R: Ledger>(s: &mut Runner<R>, slots: ViaRelaySlots<R>) {
    let n = s.plan.via_relay_sessions;
    if n == 0 {
        return;
    }
    let key = hex::encode(rand::random::<[u8; 32]>());
    for rep in 0..s.plan.reps {
        s.say(&format!(
            "sessions through the relay: {n} passthrough echo (rep {})",
            rep + 1
        ));
        let r = (|| {
            let (relay, public) = s.start_relay(&key)?;
            let o = TransceiverOpts {
                relay: Some((public, &key)),
                ..TransceiverOpts::default()
            };
            let t = s.start_transceiver("via-relay", &o)?;
            let mut cfg = s.load_config(&t, n, 50.0);
            cfg.backend = Some(s.backend(&t, n, AudioMode::OpusPassthrough, Behaviour::Echo));
            let r = session_load::run(&cfg);
            drop(t);
            drop(relay);
            r
        })();
        match r {
            Ok(r) => slots(&mut s.results).0.push(r),
            Err(e) => {
                *slots(&mut s.results).1 = Some(format!("{e:#}"));
                s.record_error("via relay", e);
            }
        }
    }
}

/// The "Sessions through the relay" section.
pub fn section(md: &mut String, runs: &[LoadResult], skipped: Option<&String>) {
    let _ = writeln!(md, "## Sessions through the relay\n");
    if let Some(s) = skipped {
        let _ = writeln!(md, "Not measured: {s}\n");
    }
    if runs.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "The full path of the architecture: the transceiver advertises the relay (`--advertise`, shared fleet key), every \
         client's ICE, DTLS and SRTP go through the relay (`--workers 1`), passthrough echo backend. Transceiver CPU as above.\n"
    );
    let _ = writeln!(md, "| sessions | connected | DTLS p50 / p99 ms | first frame p50 ms | transceiver CPU µs per packet | echoed / sent | uplink loss % | downlink loss % |");
    let _ = writeln!(md, "|---|---|---|---|---|---|---|---|");
    let _ = writeln!(
        md,
        "| {} | {} | {} / {} | {} | {} | {} | {} | {} |\n",
        runs[0].sessions_requested,
        num(med(runs, |x| x.sessions_connected_window_end as f64), 0),
        num(med(runs, |x| x.setup.dtls_connected.p50), 2),
        num(med(runs, |x| x.setup.dtls_connected.p99), 2),
        num(med(runs, |x| x.setup.first_frame.p50), 2),
        num(us_per_packet(runs), 2),
        num(
            med(runs, |x| x.window_audio_received as f64
                / x.window_audio_sent.max(1) as f64),
            3
        ),
        num(med(runs, |x| 100.0 * x.loss.uplink_loss_ratio), 3),
        num(med(runs, |x| 100.0 * x.loss.downlink_loss_ratio), 3),
    );
}
