// What a call in trouble does next: restart ICE on the same transceiver, resume the call on a new
// session with the resume credential (docs/continuity.md), or end. Sans-IO: events and time go
// in, one `Step` comes out of `poll(now)`; the call owns the PeerConnections, the HTTP and the
// timers. ICE restarts themselves (when, how many) are ReconnectPolicy's; this adds the rest.
//
// Rules:
// - ICE trouble (failed, a long disconnect, a network change) → ICE restarts.
// - A PATCH answered 404 (the transceiver no longer knows the session) → resume at once.
// - A PATCH that does not reach the server (network error) → resume at once; one answered 5xx
//   counts as a failed attempt, and once the attempts are used up after it → resume.
// - Attempts used up otherwise (answers applied, ICE never came back) → end `lost`.
// - Nothing arrived for a while (liveness.ts) and a GET of the session says: `gone` (404) →
//   resume at once, as after a PATCH 404; `unreachable` → resume at once (without a credential:
//   nothing, ICE decides, since one failed GET is no reason to end a call); `alive` → restart
//   ICE at once, without the disconnect grace.
// - `session.migrate` (the transceiver drains) → resume at once; `session.ended` with reason
//   `shutdown` → resume at once instead of ending; any other `session.ended` → end with it.
// - During a resume, ICE events and the old session's own end are ignored (the old session is
//   expected to end; the backend hangs it up once the call moved).
// - A resume answered with a retryable refusal (network, 429/503/5xx) → again after the backoff
//   or the server's `Retry-After`, within `resumeWindowMs` of the first attempt, else end
//   `lost`; a final one ends the call: 401 `resume_expired` or `resume_invalid`, 409
//   `resume_refused`, 410 `call_gone`, anything else `lost`.
// - Without a credential (an old server) a resume is impossible: what would resume ends the call
//   (`lost`, or the server's `shutdown`); a `session.migrate` is ignored.

import { VoxgateError } from "./errors";
import type { SilentPath } from "./liveness";
import { DEFAULT_RECONNECT, ReconnectPolicy, type IceState, type ReconnectOptions } from "./reconnect";
import type { EndReason } from "./state";

export type Step =
  | { kind: "none" }
  | { kind: "wait"; at: number } // call `poll(now)` again at `at`
  | { kind: "restart"; attempt: number } // restart ICE now (PATCH a new offer)
  | { kind: "resume"; attempt: number } // resume now (a new PeerConnection, POST with the credential)
  | { kind: "end"; reason: EndReason };

/** How a restart's PATCH went: `unreachable` is a network error, `server_error` a 5xx. */
export type RestartResult = "ok" | "not_found" | "unreachable" | "server_error" | "error";

/** How a resume went: `ok` means the new session is connected. */
export type ResumeResult =
  | { kind: "ok" }
  | { kind: "retry"; afterMs: number | null }
  | { kind: "final"; reason: EndReason };

/** What a failed PATCH means for the decision. */
export function restartResultOf(e: unknown): RestartResult {
  if (!(e instanceof VoxgateError)) return "error";
  if (e.code === "not_found") return "not_found";
  if (e.code === "network") return "unreachable";
  if (e.status !== undefined && e.status >= 500) return "server_error";
  return "error";
}

/** What a failed resume means: retry (network, busy, 5xx) or end with a reason. */
export function resumeResultOf(e: unknown): ResumeResult {
  if (e instanceof VoxgateError) {
    if (
      e.code === "resume_expired" ||
      e.code === "resume_invalid" ||
      e.code === "resume_refused" ||
      e.code === "call_gone"
    ) {
      return { kind: "final", reason: e.code };
    }
    if (e.code === "network" || e.code === "busy" || (e.status !== undefined && e.status >= 500)) {
      return { kind: "retry", afterMs: e.retryAfterMs ?? null };
    }
    return { kind: "final", reason: "lost" };
  }
  // Not a signaling answer: the new connection did not come up (ICE, a timeout). The credential
  // of its 201 resumes again.
  return { kind: "retry", afterMs: null };
}

export class Continuity {
  private readonly o: ReconnectOptions;
  private ice: ReconnectPolicy;
  private mode: "ice" | "resume" | "ended" = "ice";
  private lastRestart: RestartResult | null = null;
  private endWith: EndReason | null = null;
  private attempt = 0;
  private inFlight = false;
  private nextAt = 0;
  private deadline = 0;
  /** Whether the call holds a resume credential (the call says so as answers arrive). */
  canResume = false;

  constructor(opts: Partial<ReconnectOptions> = {}) {
    this.o = { ...DEFAULT_RECONNECT, ...opts };
    this.ice = new ReconnectPolicy(this.o);
  }

  /** Whether a resume is under way (between its trigger and the new session connecting). */
  get resuming(): boolean {
    return this.mode === "resume";
  }
  /** Whether the call is recovering: an ICE restart wanted or under way, or a resume. */
  get recovering(): boolean {
    return this.mode === "resume" || (this.mode === "ice" && this.ice.recovering);
  }
  /** ICE restarts tried in the current outage. */
  get restartAttempts(): number {
    return this.ice.attempts;
  }
  /** Resume attempts in the current resume. */
  get resumeAttempts(): number {
    return this.attempt;
  }

  onIceState(now: number, state: IceState): void {
    if (this.mode === "ice") this.ice.onIceState(now, state);
  }

  onNetworkChange(now: number): void {
    if (this.mode === "ice") this.ice.onNetworkChange(now);
  }

  onRestartDone(now: number, result: RestartResult): void {
    if (this.mode !== "ice") return;
    this.lastRestart = result;
    if (result === "not_found" || result === "unreachable") {
      this.startResume(now, "lost");
      return;
    }
    this.ice.onRestartDone(now, result === "ok" ? "ok" : "error");
  }

  /** Nothing arrived for `livenessMs`, and the probe of the session said `why`. */
  onSilentPath(now: number, why: SilentPath): void {
    if (this.mode !== "ice") return;
    if (why === "alive") this.ice.restartNow(now);
    else if (why === "gone") this.startResume(now, "lost");
    else this.startResume(now, null);
  }

  /** The transceiver asked the call to move (`session.migrate`). */
  onMigrate(now: number): void {
    if (this.mode === "ice") this.startResume(now, null);
  }

  /** The server's `session.ended` on the current session's data channel. */
  onSessionEnded(now: number, reason: EndReason): void {
    if (this.mode !== "ice") return;
    if (reason === "shutdown") this.startResume(now, "shutdown");
    else this.end(reason);
  }

  onResumeDone(now: number, result: ResumeResult): void {
    if (this.mode !== "resume") return;
    this.inFlight = false;
    if (result.kind === "ok") {
      // A new session: a new outage gets the full set of ICE restarts.
      this.mode = "ice";
      this.ice = new ReconnectPolicy(this.o);
      this.lastRestart = null;
      this.attempt = 0;
    } else if (result.kind === "final") {
      this.end(result.reason);
    } else {
      const backoff = Math.min(this.o.backoffMs * 2 ** (this.attempt - 1), this.o.maxBackoffMs);
      this.nextAt = now + Math.max(backoff, result.afterMs ?? 0);
    }
  }

  /** What to do at `now`. `end` comes once; after it, `none`. */
  poll(now: number): Step {
    if (this.mode === "ended") {
      if (this.endWith === null) return { kind: "none" };
      const reason = this.endWith;
      this.endWith = null;
      return { kind: "end", reason };
    }
    if (this.mode === "ice") {
      const d = this.ice.poll(now);
      if (d.kind !== "give_up") return d;
      if (this.lastRestart !== "server_error") {
        this.end("lost");
        return this.poll(now);
      }
      this.startResume(now, "lost");
      return this.poll(now);
    }
    if (this.inFlight) return { kind: "none" };
    if (this.nextAt > this.deadline) {
      this.end("lost");
      return this.poll(now);
    }
    if (now < this.nextAt) return { kind: "wait", at: this.nextAt };
    this.attempt += 1;
    this.inFlight = true;
    return { kind: "resume", attempt: this.attempt };
  }

  /** The latest time the current resume may still try (meaningful while `resuming`). */
  get resumeDeadline(): number {
    return this.deadline;
  }

  /** `orEnd`: the reason to end with when there is no credential (null: carry on as before). */
  private startResume(now: number, orEnd: EndReason | null): void {
    if (!this.canResume) {
      if (orEnd !== null) this.end(orEnd);
      return;
    }
    this.mode = "resume";
    this.attempt = 0;
    this.inFlight = false;
    this.nextAt = now;
    this.deadline = now + this.o.resumeWindowMs;
  }

  /** Ends the recovery (the call's own hang-up, or a decision above). */
  end(reason: EndReason): void {
    if (this.mode === "ended") return;
    this.mode = "ended";
    this.endWith = reason;
  }
}
