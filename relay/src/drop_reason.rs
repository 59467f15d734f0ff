//! Why a datagram (or a TCP frame) was not forwarded: one [`DropReason`] per rule that refuses,
//! shared by the rules that decide (the flow table, the first-packet check, the TCP
//! connections), the workers that count drops and the metrics that publish them. It sits below
//! all of them and depends on nothing.

macro_rules! drop_reasons {
    ($($(#[$doc:meta])* $variant:ident => $label:literal,)*) => {
        /// Why a datagram was not forwarded. `as_str()` is the `reason` label of the drop
        /// counter.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum DropReason { $($(#[$doc])* $variant,)* }

        impl DropReason {
            /// Every reason, in label order of declaration.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// Number of reasons (size of a per-reason counter array).
            pub const COUNT: usize = Self::ALL.len();

            /// Short snake_case label.
            pub fn as_str(self) -> &'static str {
                match self { $(DropReason::$variant => $label,)* }
            }

            /// Index into a per-reason counter array.
            pub fn index(self) -> usize {
                self as usize
            }
        }
    };
}

drop_reasons! {
    /// STUN from an unknown client that is not a well-formed binding request with a USERNAME.
    BadStun => "bad_stun",
    /// The server ufrag is not an authentic routing hint.
    BadHint => "bad_hint",
    /// The hint names a cluster that is neither ours nor a configured peer (or a peer relay
    /// delivered a flow for a cluster other than ours).
    UnknownCluster => "unknown_cluster",
    /// Non-STUN from an unknown client (no cache, or the cache said no), or a reply for a
    /// client with no flow.
    UnknownFlow => "unknown_flow",
    /// The worker's flow table is full.
    TableFull => "table_full",
    /// Too many tentative flows from this client source (IPv4 address or IPv6 /64).
    TentativeCap => "tentative_cap",
    /// The hint (of our cluster) names a loop outside `--transceivers`.
    HintDestination => "hint_destination",
    /// The hint was minted longer ago than `--hint-max-age-secs` (plus the skew allowance).
    HintExpired => "hint_expired",
    /// The hint's mint time is further in the future than the skew allowance.
    HintFromFuture => "hint_from_future",
    /// A version 1 hint (no mint time) while untimed hints are not accepted.
    HintUntimed => "hint_untimed",
    /// Return-path datagram from a source outside the transceiver networks and peers.
    SpoofedReturn => "spoofed_return",
    /// Return-path datagram from an allowed network but not the flow's own next hop.
    WrongSource => "wrong_source",
    /// A relay-framed datagram whose header is malformed or points the wrong way.
    BadHeader => "bad_header",
    /// A relay-framed datagram on the public port from a source that is not a peer relay.
    NotPeer => "not_peer",
    /// Unknown client, lookup already in flight.
    LookupPending => "lookup_pending",
    /// Unknown client, lookup rate or in-flight cap exceeded.
    LookupLimited => "lookup_limited",
    /// Unknown client, lookup started: the datagram itself is not kept.
    AwaitingRoute => "awaiting_route",
    /// The datagram did not fit the receive buffer (worker-level).
    Truncated => "truncated",
    /// The socket's send buffer was full (worker-level).
    SendBufferFull => "send_buffer_full",
    /// The kernel refused the send (worker-level).
    SendError => "send_error",
    /// A TCP reply for a connection id the relay does not hold (closed, or never opened).
    UnknownConn => "unknown_conn",
    /// A TCP reply dropped (the oldest waiting) because its connection's write queue was
    /// full: the client does not read.
    WriteQueueFull => "write_queue_full",
    /// A reply whose header says TCP reached a UDP worker for a client it serves directly:
    /// it belongs to a TCP connection (the TCP thread's), never to a UDP client.
    WrongTransport => "wrong_transport",
}
