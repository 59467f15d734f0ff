//! The transceiver's limit on one gRPC message, and what a downlink message weighs against it.
//!
//! The transceiver drops a call's message over 256 KiB (and counts it); transceivers before
//! issue 37 ended the stream that carried it, on a `Multiplex` stream every call on it, and
//! refused a batch over 256 KiB the same way. So the kit weighs each downlink message by its
//! encoded size (prost's `encoded_len`: the bytes gRPC frames, whatever the payload, so a data
//! message that JSON escaping grew counts at its real size), refuses one that could fit no
//! message at all, and fills each `MultiplexDownlink` only up to the limit.

use voxgate_proto::bridge::{ChannelDownlink, Downlink};

/// The most bytes one gRPC message to the transceiver may have (its
/// `max_decoding_message_size`; a message of exactly this size is taken).
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024;

/// A downlink message no stream message could carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a {bytes}-byte message is over the transceiver's {limit}-byte limit")]
pub struct TooLarge {
    pub bytes: usize,
    pub limit: usize,
}

/// Bytes `m` adds to a `MultiplexDownlink`: its field key, its length and its body. A batch's
/// encoded size is the sum of its entries'.
pub fn channel_entry_len(m: &ChannelDownlink) -> usize {
    prost::encoding::message::encoded_len(1, m)
}

/// `m`'s entry length, if a `MultiplexDownlink` holding only `m` is within `limit`.
pub fn check_channel_downlink(m: &ChannelDownlink, limit: usize) -> Result<usize, TooLarge> {
    within(channel_entry_len(m), limit)
}

/// `m`'s encoded length, if it is within `limit` as a `Session` stream message.
pub fn check_session_downlink(m: &Downlink, limit: usize) -> Result<usize, TooLarge> {
    within(prost::Message::encoded_len(m), limit)
}

fn within(bytes: usize, limit: usize) -> Result<usize, TooLarge> {
    if bytes > limit {
        Err(TooLarge { bytes, limit })
    } else {
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests;
