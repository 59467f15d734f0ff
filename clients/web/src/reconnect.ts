// When to restart ICE, and when to give up: a Sans-IO policy (time in, decisions out) so the
// decisions are unit-tested with a fake clock. The call owns the timers and the PeerConnection.
//
// Triggers: ICE `failed` (at once), ICE `disconnected` that lasts `disconnectGraceMs` (Chromium
// reports it after ~2.5 s without packets, and a short blip often recovers by itself), a
// network change the browser reports (`online`, `navigator.connection` change) while connected,
// and a path known broken before ICE says so (`restartNow`: the liveness probe found the session
// alive while nothing arrives, liveness.ts).
// Attempts are bounded (`maxAttempts` per outage) with exponential backoff; a `not_found`
// answer (the transceiver no longer knows the session) gives up at once. What follows giving up
// (a resume on a new session, or the end) is Continuity's decision (continuity.ts).

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

export const DEFAULT_RECONNECT: ReconnectOptions = {
  disconnectGraceMs: 1000,
  maxAttempts: 5,
  backoffMs: 500,
  maxBackoffMs: 4000,
  resumeWindowMs: 25_000,
};

export type IceState = RTCIceConnectionState;

export type Decision =
  | { kind: "none" }
  | { kind: "wait"; at: number } // call `poll(now)` again at `at`
  | { kind: "restart"; attempt: number } // restart ICE now (PATCH a new offer)
  | { kind: "give_up"; reason: "lost" };

export type RestartOutcome = "ok" | "not_found" | "error";

export class ReconnectPolicy {
  private readonly o: ReconnectOptions;
  private disconnectedSince: number | null = null;
  private wanted = false;
  private attempt = 0;
  private nextAt = 0;
  private inFlight = false;
  private gaveUp = false;
  private notFound = false;

  constructor(opts: Partial<ReconnectOptions> = {}) {
    this.o = { ...DEFAULT_RECONNECT, ...opts };
  }

  /** Whether the call is between losing its path and getting it back. */
  get recovering(): boolean {
    return this.wanted || this.inFlight;
  }

  get attempts(): number {
    return this.attempt;
  }

  onIceState(now: number, state: IceState): void {
    if (state === "connected" || state === "completed") {
      // Back (by itself or after a restart): a new outage starts counting afresh.
      this.disconnectedSince = null;
      this.wanted = false;
      if (!this.inFlight) this.attempt = 0;
    } else if (state === "disconnected") {
      this.disconnectedSince ??= now;
    } else if (state === "failed") {
      this.want(now);
    }
  }

  /** The browser says the network changed (a new interface, `online`). */
  onNetworkChange(now: number): void {
    this.restartNow(now);
  }

  /** The path is broken, whatever ICE says yet: restart at once, without the grace. */
  restartNow(now: number): void {
    this.want(now);
  }

  private want(now: number): void {
    if (!this.wanted) {
      this.wanted = true;
      this.nextAt = Math.max(this.nextAt, now);
    }
  }

  /** What to do at `now`. */
  poll(now: number): Decision {
    if (this.gaveUp) return { kind: "none" };
    if (this.notFound) {
      this.gaveUp = true;
      return { kind: "give_up", reason: "lost" };
    }
    if (!this.wanted && this.disconnectedSince !== null) {
      const due = this.disconnectedSince + this.o.disconnectGraceMs;
      if (now < due) return { kind: "wait", at: due };
      this.want(now);
    }
    if (!this.wanted || this.inFlight) return { kind: "none" };
    if (this.attempt >= this.o.maxAttempts) {
      this.gaveUp = true;
      return { kind: "give_up", reason: "lost" };
    }
    if (now < this.nextAt) return { kind: "wait", at: this.nextAt };
    this.attempt += 1;
    this.inFlight = true;
    return { kind: "restart", attempt: this.attempt };
  }

  /** How the restart's PATCH went. `ok` means an answer was applied, not that ICE is back. */
  onRestartDone(now: number, outcome: RestartOutcome): void {
    this.inFlight = false;
    if (outcome === "not_found") {
      this.notFound = true;
      return;
    }
    const backoff = Math.min(this.o.backoffMs * 2 ** (this.attempt - 1), this.o.maxBackoffMs);
    this.nextAt = now + backoff;
    // After an applied answer, ICE gets `backoff` to come back before the next attempt.
    this.wanted = true;
  }

  /** Whether a `not_found` (or running out of attempts) ended recovery for good. */
  get lost(): boolean {
    return this.gaveUp || this.notFound;
  }
}
