export declare const MIN_REFRESH_MS = 5000;
/** The server's default lifetime, assumed when an answer names none. */
export declare const DEFAULT_RESUME_TTL_SECS = 120;
/** How long after a credential with lifetime `ttlSecs` arrived the next refresh is due. */
export declare function refreshIntervalMs(ttlSecs: number): number;
export declare class RefreshSchedule {
    private at;
    private interval;
    private stopped;
    /** A credential arrived at `now` (a 201, a 200 to PATCH, or a refresh). */
    onCredential(now: number, ttlSecs: number): void;
    /** A refresh failed: the next tick tries again (the credential in hand is still valid). */
    onRefreshFailed(now: number): void;
    /** When the next refresh is due; null before the first credential and after `stop`. */
    get nextAt(): number | null;
    /** The call ended: nothing is due any more. */
    stop(): void;
}
