// Whether the connection still carries anything, learnt sooner than ICE says: a Sans-IO
// watchdog (time and observations in, steps out) so the decisions are unit-tested with a fake
// clock. The call owns the timers, `getStats()` and the HTTP.
//
// Why: an ICE-lite transceiver never sends consent checks of its own, so a browser notices a
// dead one only when its checks go unanswered (Chromium: ICE `disconnected` after ~2.5 s), and
// the disconnect grace comes on top. But a healthy session always sends: audio while the backend
// speaks, and RTCP reports every second while it is silent (the transceiver's report interval;
// str0m's default is 5 s). So data that stops for longer than that is news at once.
//
// Rules:
// - While active (the call is connected and not recovering; the call says), sample the
//   connection's received total (`receivedTotal`: the selected pair's or transport's data bytes
//   or packets, no STUN) every `livenessPollMs`. Any change counts as traffic (a new pair or
//   connection starts again from 0); a sample without a counter counts as traffic too (no
//   evidence of silence), so a browser that reports none never probes.
// - Silence is measured between samples, not by the clock: a probe is due when a sample finds
//   the total unchanged `livenessMs` after the sample that last saw it change. A page whose
//   timers are throttled (a background tab) samples less often and so probes later, never
//   sooner.
// - Due: probe the session (`GET {sessionUrl}`, `probeTimeoutMs`). At most one probe in flight;
//   traffic meanwhile makes its answer moot (ignored).
// - The answer: 404/410 → `gone`, a network error or no answer in time → `unreachable`; both
//   mean resume now. 200 → `alive`: the session lives and our path is broken (the client's
//   address changed, a relay went): restart ICE now. Anything else (401, 429, 5xx) → nothing,
//   ICE events decide.
// - Every answer spaces the next probe: `livenessMs` later, doubling while the silence goes on
//   without traffic in between (at most 8 × `livenessMs`), so a silent path, or a server that
//   sends nothing for longer than `livenessMs`, cannot make the client spam it.
// - Activation starts the measure afresh (a new baseline); the spacing carries over.
// - `traffic` says whether a sample since activation saw the total change: after an ICE
//   restart on a path ICE still calls connected, it is the only sign the new path works.

import { VoxgateError } from "./errors";

export interface LivenessOptions {
  /** How often the call reads the received total while connected. */
  livenessPollMs: number;
  /** How long the total may stand still before a probe (above the server's 1 s RTCP interval). */
  livenessMs: number;
  /** How long a probe (`GET {sessionUrl}`) may wait for its answer. */
  probeTimeoutMs: number;
}

export const DEFAULT_LIVENESS: LivenessOptions = {
  livenessPollMs: 200,
  livenessMs: 1200,
  probeTimeoutMs: 800,
};

/** The longest spacing between probes of one silence, in multiples of `livenessMs`. */
const MAX_SPACING = 8;

/** What a probe found. */
export type ProbeResult = "alive" | "gone" | "unreachable" | "other";

/** What a probe that found the path silent means: resume (`gone`, `unreachable`) or restart. */
export type SilentPath = "alive" | "gone" | "unreachable";

export type LivenessStep =
  | { kind: "none" } // inactive, or waiting for an answer
  | { kind: "wait"; at: number } // call `poll(now)` again at `at`
  | { kind: "sample"; id: number } // read the received total, then `onSample(now, id, total)`
  | { kind: "probe"; id: number } // GET the session, then `onProbeDone(now, id, result)`
  | { kind: "silent"; why: SilentPath; since: number }; // the path is silent since `since`

/** What a probe's answer (an HTTP status) or its failure means. */
export function probeResultOf(answer: unknown): ProbeResult {
  if (typeof answer === "number") {
    if (answer === 200) return "alive";
    if (answer === 404 || answer === 410) return "gone";
    return "other";
  }
  if (answer instanceof VoxgateError && answer.code === "network") return "unreachable";
  return "other";
}

export class Liveness {
  private readonly o: LivenessOptions;
  /** Whether the watchdog runs at all (`false` in the options turns it off). */
  readonly enabled: boolean;
  private active = false;
  private ids = 0;
  private sampling: number | null = null;
  private probing: number | null = null;
  private nextSampleAt = 0;
  /** The last total seen since activation (null: none yet). */
  private last: number | null = null;
  /** When a sample last saw the total change (or activation). */
  private changedAt = 0;
  /** When the last sample came back. */
  private sampledAt = 0;
  private nextProbeAt = 0;
  /** Probes answered since the last traffic. */
  private streak = 0;
  private verdict: { why: SilentPath; since: number } | null = null;
  private moved = false;

  /** `false` turns the watchdog off: `poll` never asks for anything. */
  constructor(opts: Partial<LivenessOptions> | false = {}) {
    this.enabled = opts !== false;
    this.o = { ...DEFAULT_LIVENESS, ...(opts || {}) };
  }

  get options(): LivenessOptions {
    return this.o;
  }

  /** Whether a sample since activation saw traffic (or had no counter to tell). */
  get traffic(): boolean {
    return this.moved;
  }

  /** Whether the call is connected and not recovering; a change starts the measure afresh. */
  setActive(now: number, active: boolean): void {
    if (active === this.active) return;
    this.active = active;
    this.sampling = null;
    this.probing = null;
    this.verdict = null;
    this.moved = false;
    this.last = null;
    this.changedAt = now;
    this.sampledAt = now;
    this.nextSampleAt = now;
  }

  /** A sample's received total (null: the report had no counter). Stale ids are ignored. */
  onSample(now: number, id: number, total: number | null): void {
    if (!this.active || id !== this.sampling) return;
    this.sampling = null;
    this.sampledAt = now;
    this.nextSampleAt = now + this.o.livenessPollMs;
    if (total === null || (this.last !== null && total !== this.last)) this.moved = true;
    if (total === null || total !== this.last) {
      // Traffic (or no way to tell): the silence, and a probe's point, are over.
      this.last = total;
      this.changedAt = now;
      this.probing = null;
      this.streak = 0;
    }
  }

  /** How the probe went. Stale ids (traffic came meanwhile, or the call moved on) are ignored. */
  onProbeDone(now: number, id: number, result: ProbeResult): void {
    if (!this.active || id !== this.probing) return;
    this.probing = null;
    this.streak += 1;
    this.nextProbeAt = now + this.o.livenessMs * Math.min(2 ** (this.streak - 1), MAX_SPACING);
    if (result !== "other") this.verdict = { why: result, since: this.changedAt };
  }

  /** What to do at `now`. */
  poll(now: number): LivenessStep {
    if (!this.enabled || !this.active) return { kind: "none" };
    if (this.verdict) {
      const v = this.verdict;
      this.verdict = null;
      return { kind: "silent", why: v.why, since: v.since };
    }
    const silent = this.last !== null && this.sampledAt - this.changedAt >= this.o.livenessMs;
    if (silent && this.probing === null && this.sampledAt >= this.nextProbeAt) {
      this.probing = ++this.ids;
      return { kind: "probe", id: this.probing };
    }
    if (this.sampling !== null) return { kind: "none" };
    if (now < this.nextSampleAt) return { kind: "wait", at: this.nextSampleAt };
    this.sampling = ++this.ids;
    return { kind: "sample", id: this.sampling };
  }
}
