//! Routing on a `Multiplex` stream: which call each channel's messages are for, and when a
//! channel is over. Sans-IO: the stream's reader feeds it `ChannelUplink`s and hands the events
//! it returns to the route (the call's handler) it returns them with.

use std::collections::HashMap;

use tonic::{Code, Status};
use voxgate_proto::bridge::ChannelUplink;

use crate::call_event::CallEvent;

/// The open channels of one stream, each with its route.
#[derive(Debug)]
pub struct ChannelTable<T> {
    open: HashMap<u64, T>,
}

impl<T> Default for ChannelTable<T> {
    fn default() -> Self {
        ChannelTable {
            open: HashMap::new(),
        }
    }
}

/// The events of one `ChannelUplink`, in order: its uplink, then its `closed` (no allocation
/// per message).
pub type ChannelEvents =
    std::iter::Chain<std::option::IntoIter<CallEvent>, std::option::IntoIter<CallEvent>>;

/// A channel's route as [`ChannelTable::route`] hands it out.
#[derive(Debug)]
pub enum Route<'a, T> {
    /// The channel stays open.
    Open(&'a mut T),
    /// The channel's last message: the route has left the table.
    Last(T),
}

impl<T> ChannelTable<T> {
    pub fn insert(&mut self, channel: u64, route: T) {
        self.open.insert(channel, route);
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The route of `m`'s channel and the events `m` carries for it, in order (its uplink, then
    /// its `closed`). `None` for a channel the table does not hold: one given up, whose release
    /// the transceiver had not yet heard when it sent `m`.
    pub fn route(&mut self, m: ChannelUplink) -> Option<(Route<'_, T>, ChannelEvents)> {
        let uplink = m.uplink.map(CallEvent::Uplink).into_iter();
        match m.closed {
            Some(closed) => {
                let route = self.open.remove(&m.channel)?;
                let status = Status::new(Code::from_i32(closed.code), closed.message);
                let events = uplink.chain(Some(CallEvent::Closed(status)));
                Some((Route::Last(route), events))
            }
            None => {
                let route = self.open.get_mut(&m.channel)?;
                Some((Route::Open(route), uplink.chain(None)))
            }
        }
    }

    /// Every route still open, the table left empty (the stream is over).
    pub fn drain(&mut self) -> Vec<T> {
        self.open.drain().map(|(_, route)| route).collect()
    }
}

#[cfg(test)]
mod tests;
