import type { SilentPath } from "./liveness";
import { type IceState, type ReconnectOptions } from "./reconnect";
import type { EndReason } from "./state";
export type Step = {
    kind: "none";
} | {
    kind: "wait";
    at: number;
} | {
    kind: "restart";
    attempt: number;
} | {
    kind: "resume";
    attempt: number;
} | {
    kind: "end";
    reason: EndReason;
};
/** How a restart's PATCH went: `unreachable` is a network error, `server_error` a 5xx. */
export type RestartResult = "ok" | "not_found" | "unreachable" | "server_error" | "error";
/** How a resume went: `ok` means the new session is connected. */
export type ResumeResult = {
    kind: "ok";
} | {
    kind: "retry";
    afterMs: number | null;
} | {
    kind: "final";
    reason: EndReason;
};
/** What a failed PATCH means for the decision. */
export declare function restartResultOf(e: unknown): RestartResult;
/** What a failed resume means: retry (network, busy, 5xx) or end with a reason. */
export declare function resumeResultOf(e: unknown): ResumeResult;
export declare class Continuity {
    private readonly o;
    private ice;
    private mode;
    private lastRestart;
    private endWith;
    private attempt;
    private inFlight;
    private nextAt;
    private deadline;
    /** Whether the call holds a resume credential (the call says so as answers arrive). */
    canResume: boolean;
    constructor(opts?: Partial<ReconnectOptions>);
    /** Whether a resume is under way (between its trigger and the new session connecting). */
    get resuming(): boolean;
    /** Whether the call is recovering: an ICE restart wanted or under way, or a resume. */
    get recovering(): boolean;
    /** ICE restarts tried in the current outage. */
    get restartAttempts(): number;
    /** Resume attempts in the current resume. */
    get resumeAttempts(): number;
    onIceState(now: number, state: IceState): void;
    onNetworkChange(now: number): void;
    onRestartDone(now: number, result: RestartResult): void;
    /** Nothing arrived for `livenessMs`, and the probe of the session said `why`. */
    onSilentPath(now: number, why: SilentPath): void;
    /** The transceiver asked the call to move (`session.migrate`). */
    onMigrate(now: number): void;
    /** The server's `session.ended` on the current session's data channel. */
    onSessionEnded(now: number, reason: EndReason): void;
    onResumeDone(now: number, result: ResumeResult): void;
    /** What to do at `now`. `end` comes once; after it, `none`. */
    poll(now: number): Step;
    /** The latest time the current resume may still try (meaningful while `resuming`). */
    get resumeDeadline(): number;
    /** `orEnd`: the reason to end with when there is no credential (null: carry on as before). */
    private startResume;
    /** Ends the recovery (the call's own hang-up, or a decision above). */
    end(reason: EndReason): void;
}
