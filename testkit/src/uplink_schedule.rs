//! When a client's uplink frames are due: one every 20 ms from the moment media starts, for
//! `send_for`, on an RTP clock of 960 ticks per frame. An owner that wakes the session late
//! gets the frames due since, unless it is more than [`MAX_CATCH_UP`] behind: then the
//! schedule jumps to the current frame (counting what it skipped) instead of bursting a
//! backlog no real microphone would send. Sans-IO: instants in, frames due out.

use std::time::{Duration, Instant};

use crate::signal::{FRAME_DURATION, FRAME_SAMPLES};

/// Behind schedule by more than this, the uplink skips frames instead of bursting them.
pub const MAX_CATCH_UP: Duration = Duration::from_millis(100);

/// The uplink's schedule: when the next frame is due and when to stop.
#[derive(Debug, Default)]
pub struct UplinkSchedule {
    send_for: Duration,
    next_at: Option<Instant>,
    stop_at: Option<Instant>,
    rtp_time: u64,
    frames_written: u64,
    frames_skipped: u64,
}

impl UplinkSchedule {
    /// A stopped schedule that sends for `send_for` once started.
    pub fn new(send_for: Duration) -> Self {
        UplinkSchedule {
            send_for,
            ..UplinkSchedule::default()
        }
    }

    /// How long the next [`UplinkSchedule::start`] sends (`Duration::MAX`: until stopped).
    pub fn set_send_for(&mut self, send_for: Duration) {
        self.send_for = send_for;
    }

    /// Starts (again) at `now`; a schedule that sends for zero stays stopped. The RTP clock
    /// continues where it stopped.
    pub fn start(&mut self, now: Instant) {
        if self.send_for.is_zero() {
            self.next_at = None;
            return;
        }
        self.next_at = Some(now);
        self.stop_at = now.checked_add(self.send_for);
    }

    pub fn stop(&mut self) {
        self.next_at = None;
    }

    pub fn is_running(&self) -> bool {
        self.next_at.is_some()
    }

    /// When the next frame is due (`None`: stopped).
    pub fn next_at(&self) -> Option<Instant> {
        self.next_at
    }

    /// The next frame due by `now`, as (when it was due, its RTP time); `None` when no frame is
    /// due yet or the schedule ended. Report each written frame with
    /// [`UplinkSchedule::frame_written`] before polling again.
    pub fn poll_frame(&mut self, now: Instant) -> Option<(Instant, u64)> {
        loop {
            let due = self.next_at?;
            if due > now {
                return None;
            }
            if self.stop_at.is_some_and(|stop| due >= stop) {
                self.next_at = None;
                return None;
            }
            let behind = now - due;
            if behind <= MAX_CATCH_UP {
                return Some((due, self.rtp_time));
            }
            // Woken late (stalled loop): jump to the current frame instead of bursting.
            let skip = (behind.as_nanos() / FRAME_DURATION.as_nanos()) as u32;
            self.next_at = Some(due + FRAME_DURATION * skip);
            self.rtp_time += FRAME_SAMPLES as u64 * u64::from(skip);
            self.frames_skipped += u64::from(skip);
        }
    }

    /// The frame due at `due` was written: the clock moves one frame, the next is due 20 ms on.
    pub fn frame_written(&mut self, due: Instant) {
        self.rtp_time += FRAME_SAMPLES as u64;
        self.frames_written += 1;
        if let Some(next) = self.next_at.as_mut() {
            *next = due + FRAME_DURATION;
        }
    }

    pub fn frames_written(&self) -> u64 {
        self.frames_written
    }

    /// Frames skipped because the owner woke the session too late.
    pub fn frames_skipped(&self) -> u64 {
        self.frames_skipped
    }
}

#[cfg(test)]
mod tests;
