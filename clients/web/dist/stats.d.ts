export interface CallStats {
    packetsSent: number;
    bytesSent: number;
    packetsReceived: number;
    packetsLost: number;
    /** Seconds, from the inbound audio stream. */
    jitter: number | null;
    /** Seconds, of the selected candidate pair. */
    rtt: number | null;
    /** Chromium's total energy of the received audio (grows while audio plays). */
    totalAudioEnergy: number;
    /** Outbound audio level 0..1 of the microphone track, where the browser reports it. */
    micLevel: number | null;
    jitterBufferDelayMs: number | null;
    selectedPair: {
        local: string | null;
        remote: string | null;
    } | null;
    /**
     * The uplink as the server sees it (`remote-inbound-rtp`, from its RTCP receiver reports):
     * null until the first report. `rtt` is the RTCP round trip (LSR/DLSR), in seconds.
     */
    uplink: UplinkReport | null;
}
export interface UplinkReport {
    /** Seconds, from the server's last receiver report. */
    rtt: number | null;
    /** Seconds: the interarrival jitter the server measured of our audio. */
    jitter: number | null;
    /** Packets of our audio the server has reported lost, since the call began. */
    packetsLost: number;
    /** Fraction lost in the server's last report interval, 0..1. */
    fractionLost: number | null;
}
type Stat = Record<string, unknown> & {
    id: string;
    type: string;
};
/** A browser's `RTCStatsReport` (maplike: iterating it yields `[id, stat]` pairs) or a Map. */
type MapLike = {
    values(): Iterable<Stat>;
};
/**
 * What the connection has received so far, for the liveness watchdog: the selected candidate
 * pair's `bytesReceived` (or `packetsReceived`), else the transport's. These count data only
 * (SRTP, SRTCP, DTLS, SCTP), never ICE checks. Null when the report has neither.
 */
export declare function receivedTotal(report: Iterable<Stat> | MapLike): number | null;
export declare function summarise(report: Iterable<Stat> | MapLike): CallStats;
export {};
