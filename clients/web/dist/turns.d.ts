/** The label of the data channel turn reports and their splits travel on. */
export declare const TURNS_LABEL = "voxgate.turns";
/** A 10 ms sample at this RMS level (dBFS) or more is voiced (mic) or loud (reply). */
export declare const VOICED_DBFS = -50;
/** Voiced time before a spurt counts: a cough or a click is not a turn. */
export declare const MIN_SPURT_MS = 100;
/** Unvoiced time after the last voiced sample before the caller has stopped speaking. */
export declare const HANGOVER_MS = 250;
/** Remote quiet before a loud remote sample is the reply's onset. */
export declare const QUIET_BEFORE_ONSET_MS = 100;
/** A turn the detector found: the caller's end of speech and the reply's onset, in ms. */
export interface HeardTurn {
    /** The last voiced mic sample's time. */
    speechEndAt: number;
    /** The reply's first loud sample's time. */
    heardAt: number;
    /** `heardAt - speechEndAt`. */
    speechEndToHeardMs: number;
    /** The RTP timestamp of the packet playing when the onset was heard, if known. */
    rtpTimestamp: number | null;
}
/** Finds turns in 10 ms level samples of the microphone and the reply (see the header). */
export declare class TurnDetector {
    private lastMicAt;
    /** Voiced time since the last HANGOVER_MS of quiet. */
    private voicedMs;
    private lastVoicedAt;
    /** The end of speech, tentative until `confirmed`. */
    private end;
    private confirmed;
    private onset;
    private lastRemoteLoudAt;
    /** A microphone sample at `tMs`; returns the turn it completes, if any. */
    mic(tMs: number, dbfs: number): HeardTurn | null;
    /**
     * A sample of the reply at `tMs`, with the RTP timestamp of the packet playing (read by the
     * caller for loud samples; null otherwise or if unknown); returns the turn it completes.
     */
    remote(tMs: number, dbfs: number, rtpTimestamp: number | null): HeardTurn | null;
    /** Whether a loud remote sample now could be the reply's onset (its RTP timestamp matters). */
    get watching(): boolean;
    /** Forgets everything (a new connection: what was under way is not a turn of it). */
    reset(): void;
    private cancel;
    private complete;
}
/** The RMS level of `samples` (in [-1, 1]) in dBFS; -Infinity for digital silence. */
export declare function levelDbfs(samples: ArrayLike<number>): number;
/** What the client reports of a turn (`turn.report`); ms rounded to 0.1, null where unknown. */
export interface TurnReport {
    /** The reply's onset minus the end of speech, on this browser's clock (the analysers'). */
    speechEndToHeardMs: number;
    /** The RTP timestamp of the packet playing at the onset (`getSynchronizationSources`). */
    rtpTimestamp: number | null;
    /** Mean jitter-buffer delay of the received audio since the previous report (or call start). */
    jitterBufferMs: number | null;
    /** Mean playout delay (`media-playout` stats) since the previous report; null without them. */
    playoutMs: number | null;
    /** The selected candidate pair's current round trip. */
    rttMs: number | null;
    /** Whether it went out on the turns channel (it was open). */
    sent: boolean;
}
/** The browser's receive delays at a report, from getStats. */
export interface Delays {
    jitterBufferMs: number | null;
    playoutMs: number | null;
    rttMs: number | null;
}
type Stat = Record<string, unknown> & {
    type: string;
};
type MapLike = {
    values(): Iterable<Stat>;
};
/** To 0.1 ms; null for anything not a finite number. */
export declare const round1: (v: number | null) => number | null;
/**
 * Mean receive delays between two reports: jitter buffer (`inbound-rtp` audio
 * `jitterBufferDelay` / `jitterBufferEmittedCount`) and playout (`media-playout`
 * `totalPlayoutDelay` / `totalSamplesCount`), each over what changed since the previous `take`;
 * RTT from the selected candidate pair. One per connection: a new one's counters start at zero.
 */
export declare class ReceiveDelays {
    private jb;
    private playout;
    take(report: MapLike | Iterable<Stat>): Delays;
}
/** A report as it goes out, fields rounded (see `reportMessage`). */
export declare function turnReportOf(turn: HeardTurn, delays: Delays, sent?: boolean): TurnReport;
/** The `turn.report` text sent on the turns channel. */
export declare function reportMessage(r: TurnReport): string;
/** Who measured a part of a turn: the transceiver, an estimate from RTT, or this browser. */
export type TurnPartSource = "measured" | "estimated" | "client";
/** One part of a turn's split. `ms` is negative only for `capture_send` (the remainder). */
export interface TurnPart {
    /** `capture_send`, `network_up`, `transceiver_up`, `backend`, `transceiver_down`, `network_down`, `jitter_buffer`, `playout`. */
    name: string;
    ms: number;
    source: TurnPartSource;
}
/** The transceiver's split of a reported turn: what the `turn` event carries. */
export interface TurnLatency {
    /** The session's turn number, from 1. */
    turn: number;
    /** Mouth to ear: the reported time plus the playout delay; the parts sum to it. */
    totalMs: number;
    /** In the order the time passes. */
    parts: TurnPart[];
}
/** The most parts a split may have. */
export declare const MAX_TURN_PARTS = 16;
/**
 * A `turn.latency` message (text or parsed JSON) as a TurnLatency; null when it is anything
 * else or malformed: numbers not finite, a negative total or part (but `capture_send`), an
 * unknown source, no parts or more than MAX_TURN_PARTS.
 */
export declare function parseTurnLatency(data: unknown): TurnLatency | null;
export {};
