// The call's state machine: connecting → connected → reconnecting → connected … → ended(reason).
// Pure: it only decides whether a transition is allowed; the call emits what it returns.
// `ended` is final: nothing leaves it, and the first reason wins.

export type CallState = "connecting" | "connected" | "reconnecting" | "ended";

/** Why a call ended. Server reasons come from the `session.ended` data-channel message. */
export type EndReason =
  | "hangup" // this client hung up
  | "lost" // neither an ICE restart nor a resume brought the call back
  | "resume_expired" // a resume was refused: the credential expired (401)
  | "resume_invalid" // a resume was refused: the credential is forged or malformed (401)
  | "resume_refused" // a resume was refused: the credential was used already (409)
  | "call_gone" // a resume was refused: no backend serves the call any more (410)
  | "failed" // the first connection never came up
  | "deleted" // the operator or app deleted the session on the server
  | "backend_hangup" // the backend ended the call
  | "shutdown" // the transceiver shut down (and the call could not resume elsewhere)
  | "no_backend"
  | "max_duration"
  | (string & {}); // a reason a newer server sends

const ALLOWED: Record<CallState, CallState[]> = {
  connecting: ["connected", "ended"],
  connected: ["reconnecting", "ended"],
  reconnecting: ["connected", "ended"],
  ended: [],
};

export class CallStateMachine {
  private current: CallState = "connecting";
  private why: EndReason | null = null;

  get state(): CallState {
    return this.current;
  }

  get endReason(): EndReason | null {
    return this.why;
  }

  /** Moves to `next` if allowed; returns whether the state changed. */
  to(next: Exclude<CallState, "ended">): boolean {
    if (!ALLOWED[this.current].includes(next)) return false;
    this.current = next;
    return true;
  }

  /** Ends the call with `reason` unless it has ended already; returns whether it ended now. */
  end(reason: EndReason): boolean {
    if (this.current === "ended") return false;
    this.current = "ended";
    this.why = reason;
    return true;
  }
}
