//! The session's side of turn timing (`media::turn_timing`): the caller's audio levels in, the
//! downlink pacer armed while the caller pauses, its reply onsets in, and each reported turn's
//! split out to the backend (a `TurnLatency` message) and to the caller's turns channel.

use std::time::Instant;

use crate::media::turn_timing::OnsetWatch;

use super::Session;

impl Session {
    /// An uplink packet's RFC 6464 audio level, as it arrived and was handed on at `now`.
    pub(super) fn on_uplink_level(&mut self, now: Instant, arrival: Instant, level: Option<i8>) {
        if let Some(watch) = self.turns.on_uplink_level(level, arrival, now) {
            self.bridge.watch_for_reply(now, watch == OnsetWatch::Arm);
        }
    }

    /// After a downlink frame went out: the reply's onset, if it was one.
    pub(super) fn after_downlink_frame(&mut self) {
        if let Some(onset) = self.bridge.take_reply_onset() {
            self.turns.on_reply_onset(onset);
        }
    }

    pub(super) fn on_turn_report(&mut self, data: &[u8]) {
        match self.turns.on_client_report(data, self.quality.now().rtt_ms) {
            Ok(split) => {
                tracing::info!(
                    parent: &self.span,
                    turn = split.turn,
                    total_ms = split.total_ms.round(),
                    backend_ms = split.backend_ms.round(),
                    "turn heard by the caller"
                );
                self.bridge.on_turn(split.to_proto());
                self.send_on_turns_channel(&split.to_client_json());
            }
            Err(why) => {
                tracing::debug!(parent: &self.span, reason = why.as_str(), "turn report dropped")
            }
        }
    }
}
