//! One worker process's capacity: the sessions it owns at once, across every transceiver it
//! serves. Each subscription watches the count and reports it as `Load`, so every transceiver
//! sees the process's whole load, not only its own sessions.

use std::sync::Arc;

use tokio::sync::watch;

/// Sessions owned at once, against one capacity.
#[derive(Debug)]
pub struct Slots {
    capacity: u32,
    active: watch::Sender<u32>,
}

impl Slots {
    pub fn new(capacity: u32) -> Self {
        Slots {
            capacity,
            active: watch::Sender::new(0),
        }
    }

    pub fn capacity(&self) -> u32 {
        self.capacity
    }

    /// Slots taken now.
    pub fn active(&self) -> u32 {
        *self.active.borrow()
    }

    /// The count of slots taken, to watch for changes.
    pub fn watch(&self) -> watch::Receiver<u32> {
        self.active.subscribe()
    }

    /// Takes a slot if there is room; it is given back when the guard drops.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Slot> {
        let capacity = self.capacity;
        self.active
            .send_if_modified(|n| {
                let room = *n < capacity;
                if room {
                    *n += 1;
                }
                room
            })
            .then(|| Slot(Arc::clone(self)))
    }
}

/// One owned session's share of the capacity.
#[derive(Debug)]
pub struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.active.send_modify(|n| *n = n.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests;
