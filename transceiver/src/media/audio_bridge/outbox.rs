//! Where a bridge's messages to backends go: the owner's uplink (its `Session` stream or
//! `Multiplex` channel) and the taps. Both directions write here: the uplink decoder its frames
//! and the caller's data messages, the downlink pacer its progress reports and clear answers,
//! and for the taps that asked for the downlink (a call recorder), each frame it sent.
//!
//! Every offer is non-blocking: a full queue costs the message (counted in `uplink_dropped` or
//! `tap_dropped`), never a blocked loop. A tap whose subscriber is gone is dropped. The outbox
//! also notices an owner that stays behind: one whose queue has been full of audio for its stall
//! time ([`Outbox::owner_stalled`]).

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use voxgate_proto::bridge::Uplink;

use super::owner_uplink::{self, CloseReason, OwnerUplink, Refused};
use crate::metrics::BridgeCounters;

/// Who hears an uplink message: everyone live, or only a new owner catching up on what was
/// held for it (taps heard those live already).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    All,
    OwnerOnly,
}

/// The owner's uplink and how long it may stay full before it counts as stalled.
struct OwnerLink {
    uplink: OwnerUplink,
    stall_after: Duration,
    /// Since when the uplink queue has been full of audio (seen on a tick), if it is.
    full_since: Option<Instant>,
}

/// A listen-only subscriber of a session: its queue, and whether it also hears what is sent to
/// the caller (`TapRequest.downlink`: `SentAudio`, `Cleared`).
#[derive(Debug)]
pub struct TapSubscriber {
    pub tx: mpsc::Sender<Uplink>,
    pub downlink: bool,
}

#[derive(Default)]
pub struct Outbox {
    owner: Option<OwnerLink>,
    taps: Vec<TapSubscriber>,
    /// How many of `taps` want the downlink (so the pacer builds no frame for none).
    downlink_taps: usize,
    /// `uplink_dropped` and `tap_dropped`.
    counters: BridgeCounters,
}

impl Outbox {
    pub fn counters(&self) -> &BridgeCounters {
        &self.counters
    }

    /// Makes `uplink` the owner's (the caller checked there was none).
    pub fn attach(&mut self, mut uplink: OwnerUplink, stall_after: Duration) {
        uplink.mark_attached();
        self.owner = Some(OwnerLink {
            uplink,
            stall_after,
            full_since: None,
        });
    }

    /// Ends the owner's uplink (a `Multiplex` channel is told `why`); returns whether there
    /// was an owner.
    pub fn detach(&mut self, why: CloseReason) -> bool {
        match self.owner.take() {
            Some(o) => {
                o.uplink.close(why);
                true
            }
            None => false,
        }
    }

    pub fn has_owner(&self) -> bool {
        self.owner.is_some()
    }

    /// The owner's stream is gone (its backend died, or dropped it).
    pub fn owner_is_closed(&self) -> bool {
        self.owner.as_ref().is_some_and(|o| o.uplink.is_closed())
    }

    /// Checked on each tick: whether the owner's uplink queue has stayed full (of audio) for
    /// its stall time, which means it is stuck (a frozen process, or a dead connection not yet
    /// noticed). No allocation: a capacity read and an `Instant` comparison.
    pub fn owner_stalled(&mut self, now: Instant) -> bool {
        let Some(o) = self.owner.as_mut() else {
            return false;
        };
        // Full for audio: what is left is the control reserve.
        if o.uplink.has_audio_room() {
            o.full_since = None;
            return false;
        }
        let since = *o.full_since.get_or_insert(now);
        now.saturating_duration_since(since) >= o.stall_after
    }

    pub fn add_tap(&mut self, tap: TapSubscriber) {
        self.downlink_taps += usize::from(tap.downlink);
        self.taps.push(tap);
    }

    /// Whether a tap wants the downlink's frames.
    pub fn has_downlink_taps(&self) -> bool {
        self.downlink_taps > 0
    }

    pub fn tap_count(&self) -> usize {
        self.taps.len()
    }

    pub fn has_taps(&self) -> bool {
        !self.taps.is_empty()
    }

    /// Taps whose subscriber is still there (gone ones are dropped first, so a client that
    /// hangs up its taps can open new ones).
    pub fn live_tap_count(&mut self) -> usize {
        self.retain_taps(|t| !t.tx.is_closed());
        self.taps.len()
    }

    /// Keeps the taps `keep` says to, and the downlink count true.
    fn retain_taps(&mut self, mut keep: impl FnMut(&TapSubscriber) -> bool) {
        let mut downlink = 0;
        self.taps.retain(|t| {
            let kept = keep(t);
            downlink += usize::from(kept && t.downlink);
            kept
        });
        self.downlink_taps = downlink;
    }

    /// The session ended: the owner's uplink closes and the taps go.
    pub fn close_all(&mut self) {
        self.detach(CloseReason::Ended);
        self.taps.clear();
        self.downlink_taps = 0;
    }

    pub fn send(&mut self, audience: Audience, msg: Uplink) {
        match audience {
            Audience::All => self.broadcast(msg),
            Audience::OwnerOnly => self.send_owner(msg),
        }
    }

    pub fn send_owner(&mut self, msg: Uplink) {
        if let Some(o) = &self.owner {
            match o.uplink.offer(msg) {
                Ok(()) => {}
                Err(Refused::Full) => self.counters.uplink_dropped += 1,
                Err(Refused::Closed) => {} // noticed by the downlink side
            }
        }
    }

    pub fn broadcast(&mut self, msg: Uplink) {
        self.offer_taps(false, &msg);
        self.send_owner(msg);
    }

    /// What the downlink did that the owner hears (a clear's answer): the downlink taps too.
    pub fn send_owner_and_downlink_taps(&mut self, msg: Uplink) {
        self.offer_taps(true, &msg);
        self.send_owner(msg);
    }

    /// A frame sent to the caller, for the downlink taps only.
    pub fn send_downlink_taps(&mut self, msg: Uplink) {
        self.offer_taps(true, &msg);
    }

    /// Offers `msg` to every tap (`downlink_only`: to those that want the downlink); a full
    /// tap loses it (counted), a gone one is dropped.
    fn offer_taps(&mut self, downlink_only: bool, msg: &Uplink) {
        if self.taps.is_empty() || (downlink_only && self.downlink_taps == 0) {
            return;
        }
        let mut dropped = 0;
        self.retain_taps(|t| {
            if downlink_only && !t.downlink {
                return true;
            }
            match owner_uplink::offer_bounded(&t.tx, msg.clone()) {
                Ok(()) => true,
                Err(Refused::Full) => {
                    dropped += 1;
                    true
                }
                Err(Refused::Closed) => false,
            }
        });
        self.counters.tap_dropped += dropped;
    }
}
