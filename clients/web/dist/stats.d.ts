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
}
type Stat = Record<string, unknown> & {
    id: string;
    type: string;
};
/** A browser's `RTCStatsReport` (maplike: iterating it yields `[id, stat]` pairs) or a Map. */
type MapLike = {
    values(): Iterable<Stat>;
};
export declare function summarise(report: Iterable<Stat> | MapLike): CallStats;
export {};
