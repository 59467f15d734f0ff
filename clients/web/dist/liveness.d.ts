export interface LivenessOptions {
    /** How often the call reads the received total while connected. */
    livenessPollMs: number;
    /** How long the total may stand still before a probe (above the server's 1 s RTCP interval). */
    livenessMs: number;
    /** How long a probe (`GET {sessionUrl}`) may wait for its answer. */
    probeTimeoutMs: number;
}
export declare const DEFAULT_LIVENESS: LivenessOptions;
/** What a probe found. */
export type ProbeResult = "alive" | "gone" | "unreachable" | "other";
/** What a probe that found the path silent means: resume (`gone`, `unreachable`) or restart. */
export type SilentPath = "alive" | "gone" | "unreachable";
export type LivenessStep = {
    kind: "none";
} | {
    kind: "wait";
    at: number;
} | {
    kind: "sample";
    id: number;
} | {
    kind: "probe";
    id: number;
} | {
    kind: "silent";
    why: SilentPath;
    since: number;
};
/** What a probe's answer (an HTTP status) or its failure means. */
export declare function probeResultOf(answer: unknown): ProbeResult;
export declare class Liveness {
    private readonly o;
    /** Whether the watchdog runs at all (`false` in the options turns it off). */
    readonly enabled: boolean;
    private active;
    private ids;
    private sampling;
    private probing;
    private nextSampleAt;
    /** The last total seen since activation (null: none yet). */
    private last;
    /** When a sample last saw the total change (or activation). */
    private changedAt;
    /** When the last sample came back. */
    private sampledAt;
    private nextProbeAt;
    /** Probes answered since the last traffic. */
    private streak;
    private verdict;
    private moved;
    /** `false` turns the watchdog off: `poll` never asks for anything. */
    constructor(opts?: Partial<LivenessOptions> | false);
    get options(): LivenessOptions;
    /** Whether a sample since activation saw traffic (or had no counter to tell). */
    get traffic(): boolean;
    /** Whether the call is connected and not recovering; a change starts the measure afresh. */
    setActive(now: number, active: boolean): void;
    /** A sample's received total (null: the report had no counter). Stale ids are ignored. */
    onSample(now: number, id: number, total: number | null): void;
    /** How the probe went. Stale ids (traffic came meanwhile, or the call moved on) are ignored. */
    onProbeDone(now: number, id: number, result: ProbeResult): void;
    /** What to do at `now`. */
    poll(now: number): LivenessStep;
}
