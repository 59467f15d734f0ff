//! A graceful drain, an extension of the control plane that `main` runs on SIGTERM: new
//! sessions are refused (`/readyz` and POST answer 503), every connected caller is asked to
//! carry its call to another transceiver (`{"type":"session.migrate"}` on its data channel:
//! the reference client resumes elsewhere at once with its resume credential, and the backend,
//! once the call resumed, hangs up the session here), and the drain waits until no session is
//! left, for at most `--drain-timeout-secs` or until a second signal.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::control::plane::ControlPlane;
use crate::media::command::Command;

impl ControlPlane {
    /// Asks every connected caller of every loop to move its call; returns how many were told.
    pub async fn ask_callers_to_move(&self) -> usize {
        let mut replies = Vec::with_capacity(self.loops().len());
        for (i, l) in self.loops().iter().enumerate() {
            let (reply, rx) = oneshot::channel();
            match l.send(Command::Migrate { reply }) {
                Ok(()) => replies.push(rx),
                Err(_) => tracing::warn!(
                    loop_index = i,
                    "could not ask a loop's callers to move: its queue is full"
                ),
            }
        }
        let mut told = 0;
        for rx in replies {
            told += rx.await.unwrap_or(0);
        }
        told
    }

    /// Drains (see the module doc); `interrupted` resolves on a second signal.
    pub async fn drain(&self, limit: Duration, interrupted: impl Future<Output = ()>) {
        self.start_draining();
        if limit.is_zero() || self.session_count() == 0 {
            return;
        }
        let started = Instant::now();
        let sessions = self.session_count();
        let told = self.ask_callers_to_move().await;
        tracing::info!(
            sessions,
            asked_to_move = told,
            limit_secs = limit.as_secs(),
            "draining: refusing new sessions, asked callers to move, waiting for sessions to end"
        );
        let wait_empty = async {
            while self.session_count() > 0 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            _ = wait_empty => tracing::info!(took_ms = started.elapsed().as_millis() as u64, "drained: every session ended or moved"),
            _ = tokio::time::sleep(limit) => tracing::info!(left = self.session_count(), "drain timeout reached"),
            _ = interrupted => tracing::info!("second signal: ending sessions now"),
        }
    }
}
