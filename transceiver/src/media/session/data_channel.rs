//! The session's data channels. The caller's app channels carry messages between the caller
//! and the backend (the first one opened is where the transceiver's own messages, like
//! `session.ended`, go); the [`TURNS_LABEL`] channel carries the caller's turn reports and
//! their splits (`media::turn_timing`) and never reaches the backend, either way.

use std::time::Instant;

use str0m::channel::{ChannelData, ChannelId};

use super::Session;

/// The label of the web client's turn-timing channel.
pub const TURNS_LABEL: &str = "voxgate.turns";
/// Channel labels a session remembers; a caller that opens more gets the rest unlabelled.
const MAX_LABELS: usize = 16;

impl Session {
    pub(super) fn on_channel_open(&mut self, now: Instant, id: ChannelId, label: String) {
        let turns = label == TURNS_LABEL;
        if self.channel_labels.len() < MAX_LABELS {
            self.channel_labels.push((id, label));
        }
        if turns {
            return;
        }
        self.channel.get_or_insert(id);
        self.bridge.on_channel_open(now);
    }

    pub(super) fn on_channel_data(&mut self, d: ChannelData) {
        self.counters.channel_messages_in += 1;
        let label = self
            .channel_labels
            .iter()
            .find(|(id, _)| *id == d.id)
            .map_or("", |(_, l)| l.as_str());
        if label == TURNS_LABEL {
            self.on_turn_report(&d.data);
            return;
        }
        self.bridge.on_channel_data(label, d.binary, &d.data);
    }

    /// A message to the caller's turns channel, if it opened one.
    pub(super) fn send_on_turns_channel(&mut self, text: &str) -> bool {
        let id = self
            .channel_labels
            .iter()
            .find(|(_, l)| l == TURNS_LABEL)
            .map(|(id, _)| *id);
        let Some(mut channel) = id.and_then(|id| self.rtc.channel(id)) else {
            return false;
        };
        channel.write(false, text.as_bytes()).is_ok()
    }

    /// A transceiver message to the caller, on its first app data channel.
    pub(super) fn send_text(&mut self, text: String) -> bool {
        use voxgate_proto::bridge::{data_message::Payload, DataMessage};
        let (label, payload) = (String::new(), Some(Payload::Text(text)));
        self.send_data(DataMessage { label, payload })
    }

    /// Writes a message to the data channel named by its label (or the first app channel);
    /// returns whether it was queued. The turns channel is the transceiver's own.
    pub(super) fn send_data(&mut self, msg: voxgate_proto::bridge::DataMessage) -> bool {
        use voxgate_proto::bridge::data_message::Payload;
        if msg.label == TURNS_LABEL {
            return false;
        }
        let id = self
            .channel_labels
            .iter()
            .find(|(_, l)| *l == msg.label)
            .map(|(id, _)| *id)
            .or(self.channel);
        let Some(mut channel) = id.and_then(|id| self.rtc.channel(id)) else {
            return false;
        };
        let result = match &msg.payload {
            Some(Payload::Text(t)) => channel.write(false, t.as_bytes()),
            Some(Payload::Binary(b)) => channel.write(true, b),
            None => return false,
        };
        match result {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(parent: &self.span, error = %e, "data channel write failed");
                false
            }
        }
    }
}
