export interface ReconnectOptions {
    disconnectGraceMs: number;
    maxAttempts: number;
    backoffMs: number;
    maxBackoffMs: number;
    /**
     * How long a resume may take, from its first attempt: retryable refusals are retried (with the
     * same backoff, or the server's `Retry-After`) until then. The backend keeps a call whose
     * session broke for 30 s by default.
     */
    resumeWindowMs: number;
}
export declare const DEFAULT_RECONNECT: ReconnectOptions;
export type IceState = RTCIceConnectionState;
export type Decision = {
    kind: "none";
} | {
    kind: "wait";
    at: number;
} | {
    kind: "restart";
    attempt: number;
} | {
    kind: "give_up";
    reason: "lost";
};
export type RestartOutcome = "ok" | "not_found" | "error";
export declare class ReconnectPolicy {
    private readonly o;
    private disconnectedSince;
    private wanted;
    private attempt;
    private nextAt;
    private inFlight;
    private gaveUp;
    private notFound;
    constructor(opts?: Partial<ReconnectOptions>);
    /** Whether the call is between losing its path and getting it back. */
    get recovering(): boolean;
    get attempts(): number;
    onIceState(now: number, state: IceState): void;
    /** The browser says the network changed (a new interface, `online`). */
    onNetworkChange(now: number): void;
    /** The path is broken, whatever ICE says yet: restart at once, without the grace. */
    restartNow(now: number): void;
    private want;
    /** What to do at `now`. */
    poll(now: number): Decision;
    /** How the restart's PATCH went. `ok` means an answer was applied, not that ICE is back. */
    onRestartDone(now: number, outcome: RestartOutcome): void;
    /** Whether a `not_found` (or running out of attempts) ended recovery for good. */
    get lost(): boolean;
}
