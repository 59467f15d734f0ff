//! Clears a backend has sent that its session has not taken yet. The gRPC edge counts one up
//! before it queues a clear and the bridge counts it down when it takes it. While one is on its
//! way the bridge takes queued audio even past its 30 s, only to drop it (a clear drops all the
//! audio before it), so a barge-in is never held up behind a full queue.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct PendingClears(Arc<AtomicUsize>);

impl PendingClears {
    /// A clear is about to be queued.
    pub fn announce(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    /// An announced clear could not be queued after all.
    pub fn withdraw(&self) {
        self.taken();
    }

    /// Whether a clear is on its way.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::Acquire) > 0
    }

    /// The bridge took a clear.
    pub fn taken(&self) {
        let _ = self
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
    }
}
