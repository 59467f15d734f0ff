export type CallState = "connecting" | "connected" | "reconnecting" | "ended";
/** Why a call ended. Server reasons come from the `session.ended` data-channel message. */
export type EndReason = "hangup" | "lost" | "resume_expired" | "resume_invalid" | "resume_refused" | "call_gone" | "failed" | "deleted" | "backend_hangup" | "shutdown" | "no_backend" | "max_duration" | (string & {});
export declare class CallStateMachine {
    private current;
    private why;
    get state(): CallState;
    get endReason(): EndReason | null;
    /** Moves to `next` if allowed; returns whether the state changed. */
    to(next: Exclude<CallState, "ended">): boolean;
    /** Ends the call with `reason` unless it has ended already; returns whether it ended now. */
    end(reason: EndReason): boolean;
}
