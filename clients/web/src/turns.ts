// Per-turn mouth-to-ear timing, the browser's half (issue 39). Only the browser knows when the
// caller stopped speaking and when the first audio of the reply played, so it measures that and
// reports it to the transceiver, which splits the turn with its own stamps and answers.
//
// Pure, no DOM. Call (call.ts) samples the microphone and the reply every 10 ms (RMS dBFS of a
// WebAudio analyser's last ~10 ms) into a TurnDetector; a turn it finds becomes a `turn.report`
// on the `voxgate.turns` data channel, with the browser's receive delays from getStats
// (ReceiveDelays). The transceiver's `turn.latency` answer is checked here (parseTurnLatency)
// before the app sees it as a `turn` event.
//
// The thresholds are the transceiver's (transceiver/src/media/turn_timing.rs and
// audio_bridge/reply_onset.rs), so both ends find the same turns:
// - the mic is voiced at VOICED_DBFS or more; a spurt counts once it has MIN_SPURT_MS voiced;
// - the end of speech is its last voiced sample, confirmed after HANGOVER_MS unvoiced; voice
//   before that is the same speech going on (a tentative end and any onset found are dropped),
//   and after it a new spurt cancels the turn still waiting for its reply;
// - the reply's onset is the first loud remote sample after QUIET_BEFORE_ONSET_MS of remote
//   quiet, counted from the later of the end of speech and the last loud remote sample: an echo
//   of the caller's own tail, or a reply overlapping the speech, is not the answer.
// A turn is reported once, when its end is confirmed and its onset found, in either order.

/** The label of the data channel turn reports and their splits travel on. */
export const TURNS_LABEL = "voxgate.turns";
/** A 10 ms sample at this RMS level (dBFS) or more is voiced (mic) or loud (reply). */
export const VOICED_DBFS = -50;
/** Voiced time before a spurt counts: a cough or a click is not a turn. */
export const MIN_SPURT_MS = 100;
/** Unvoiced time after the last voiced sample before the caller has stopped speaking. */
export const HANGOVER_MS = 250;
/** Remote quiet before a loud remote sample is the reply's onset. */
export const QUIET_BEFORE_ONSET_MS = 100;
/** The most one mic sample counts for: a late timer tick covers audio nobody looked at. */
const MAX_SAMPLE_MS = 20;
/** What the first mic sample counts for (the sampling period). */
const FIRST_SAMPLE_MS = 10;

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
export class TurnDetector {
  private lastMicAt: number | null = null;
  /** Voiced time since the last HANGOVER_MS of quiet. */
  private voicedMs = 0;
  private lastVoicedAt: number | null = null;
  /** The end of speech, tentative until `confirmed`. */
  private end: number | null = null;
  private confirmed = false;
  private onset: { at: number; rtp: number | null } | null = null;
  private lastRemoteLoudAt: number | null = null;

  /** A microphone sample at `tMs`; returns the turn it completes, if any. */
  mic(tMs: number, dbfs: number): HeardTurn | null {
    const dt = this.lastMicAt === null ? FIRST_SAMPLE_MS : Math.min(Math.max(tMs - this.lastMicAt, 0), MAX_SAMPLE_MS);
    this.lastMicAt = tMs;
    if (dbfs >= VOICED_DBFS) {
      this.voicedMs += dt;
      this.lastVoicedAt = tMs;
      // Voice within the hangover: the pause was not the end (an onset found is overlap).
      // Voice after it: only a spurt of its own is a new turn, which cancels the waiting one.
      if (this.end !== null && (!this.confirmed || this.voicedMs >= MIN_SPURT_MS)) this.cancel();
      return null;
    }
    if (this.lastVoicedAt === null) return null;
    if (this.voicedMs >= MIN_SPURT_MS && this.end === null) this.end = this.lastVoicedAt;
    if (this.voicedMs > 0 && tMs - this.lastVoicedAt >= HANGOVER_MS) {
      this.voicedMs = 0;
      if (this.end !== null) this.confirmed = true;
    }
    return this.complete();
  }

  /**
   * A sample of the reply at `tMs`, with the RTP timestamp of the packet playing (read by the
   * caller for loud samples; null otherwise or if unknown); returns the turn it completes.
   */
  remote(tMs: number, dbfs: number, rtpTimestamp: number | null): HeardTurn | null {
    const loud = dbfs >= VOICED_DBFS;
    if (!loud) return null;
    if (this.end !== null && this.onset === null) {
      const quietFrom = Math.max(this.end, this.lastRemoteLoudAt ?? -Infinity);
      if (tMs - quietFrom >= QUIET_BEFORE_ONSET_MS) {
        this.onset = { at: tMs, rtp: rtpTimestamp };
        this.lastRemoteLoudAt = tMs;
        return this.complete();
      }
    }
    this.lastRemoteLoudAt = tMs;
    return null;
  }

  /** Whether a loud remote sample now could be the reply's onset (its RTP timestamp matters). */
  get watching(): boolean {
    return this.end !== null && this.onset === null;
  }

  /** Forgets everything (a new connection: what was under way is not a turn of it). */
  reset(): void {
    this.lastMicAt = null;
    this.voicedMs = 0;
    this.lastVoicedAt = null;
    this.lastRemoteLoudAt = null;
    this.cancel();
  }

  private cancel(): void {
    this.end = null;
    this.confirmed = false;
    this.onset = null;
  }

  private complete(): HeardTurn | null {
    const { end, onset } = this;
    if (end === null || onset === null || !this.confirmed) return null;
    this.cancel();
    return { speechEndAt: end, heardAt: onset.at, speechEndToHeardMs: onset.at - end, rtpTimestamp: onset.rtp };
  }
}

/** The RMS level of `samples` (in [-1, 1]) in dBFS; -Infinity for digital silence. */
export function levelDbfs(samples: ArrayLike<number>): number {
  if (samples.length === 0) return -Infinity;
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  return 10 * Math.log10(sum / samples.length);
}

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

type Stat = Record<string, unknown> & { type: string };
type MapLike = { values(): Iterable<Stat> };

const finite = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
/** To 0.1 ms; null for anything not a finite number. */
export const round1 = (v: number | null): number | null => (v === null || !Number.isFinite(v) ? null : Math.round(v * 10) / 10);

/**
 * Mean receive delays between two reports: jitter buffer (`inbound-rtp` audio
 * `jitterBufferDelay` / `jitterBufferEmittedCount`) and playout (`media-playout`
 * `totalPlayoutDelay` / `totalSamplesCount`), each over what changed since the previous `take`;
 * RTT from the selected candidate pair. One per connection: a new one's counters start at zero.
 */
export class ReceiveDelays {
  private jb = { delay: 0, count: 0 };
  private playout = { delay: 0, count: 0 };

  take(report: MapLike | Iterable<Stat>): Delays {
    const all = [...(typeof (report as MapLike).values === "function" ? (report as MapLike).values() : (report as Iterable<Stat>))];
    const inbound = all.find((s) => s.type === "inbound-rtp" && (s.kind ?? s.mediaType) === "audio");
    const playout =
      all.find((s) => s.type === "media-playout" && inbound && s.id === inbound.playoutId) ??
      all.find((s) => s.type === "media-playout" && (s.kind === undefined || s.kind === "audio"));
    const mean = (prev: { delay: number; count: number }, delay: unknown, count: unknown): number | null => {
      if (!finite(delay) || !finite(count)) return null;
      const [dd, dc] = [delay - prev.delay, count - prev.count];
      prev.delay = delay;
      prev.count = count;
      return dc > 0 && dd >= 0 ? (dd / dc) * 1000 : null;
    };
    return {
      jitterBufferMs: inbound ? mean(this.jb, inbound.jitterBufferDelay, inbound.jitterBufferEmittedCount) : null,
      playoutMs: playout ? mean(this.playout, playout.totalPlayoutDelay, playout.totalSamplesCount) : null,
      rttMs: selectedRtt(all),
    };
  }
}

function selectedRtt(all: Stat[]): number | null {
  const transport = all.find((s) => s.type === "transport" && typeof s.selectedCandidatePairId === "string");
  const pair = transport
    ? all.find((s) => s.type === "candidate-pair" && (s as { id?: unknown }).id === transport.selectedCandidatePairId)
    : all.find((s) => s.type === "candidate-pair" && s.nominated === true && s.state === "succeeded");
  return pair && finite(pair.currentRoundTripTime) ? pair.currentRoundTripTime * 1000 : null;
}

/** A report as it goes out, fields rounded (see `reportMessage`). */
export function turnReportOf(turn: HeardTurn, delays: Delays, sent = false): TurnReport {
  const nonNegative = (v: number | null) => (v !== null && v >= 0 ? round1(v) : null);
  const ts = turn.rtpTimestamp;
  return {
    speechEndToHeardMs: Math.max(0, round1(turn.speechEndToHeardMs) ?? 0),
    rtpTimestamp: ts !== null && Number.isInteger(ts) && ts >= 0 && ts <= 0xffff_ffff ? ts : null,
    jitterBufferMs: nonNegative(delays.jitterBufferMs),
    playoutMs: nonNegative(delays.playoutMs),
    rttMs: nonNegative(delays.rttMs),
    sent,
  };
}

/** The `turn.report` text sent on the turns channel. */
export function reportMessage(r: TurnReport): string {
  return JSON.stringify({
    type: "turn.report",
    speech_end_to_heard_ms: r.speechEndToHeardMs,
    rtp_timestamp: r.rtpTimestamp,
    jitter_buffer_ms: r.jitterBufferMs,
    playout_ms: r.playoutMs,
    rtt_ms: r.rttMs,
  });
}

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

const SOURCES: readonly string[] = ["measured", "estimated", "client"];
/** The most parts a split may have. */
export const MAX_TURN_PARTS = 16;

/**
 * A `turn.latency` message (text or parsed JSON) as a TurnLatency; null when it is anything
 * else or malformed: numbers not finite, a negative total or part (but `capture_send`), an
 * unknown source, no parts or more than MAX_TURN_PARTS.
 */
export function parseTurnLatency(data: unknown): TurnLatency | null {
  let m: unknown = data;
  if (typeof data === "string") {
    try {
      m = JSON.parse(data);
    } catch {
      return null;
    }
  }
  if (!m || typeof m !== "object") return null;
  const o = m as { type?: unknown; turn?: unknown; total_ms?: unknown; parts?: unknown };
  if (o.type !== "turn.latency" || !Number.isSafeInteger(o.turn) || (o.turn as number) < 0) return null;
  if (!finite(o.total_ms) || o.total_ms < 0) return null;
  if (!Array.isArray(o.parts) || o.parts.length === 0 || o.parts.length > MAX_TURN_PARTS) return null;
  const parts: TurnPart[] = [];
  for (const p of o.parts as unknown[]) {
    const q = (p ?? {}) as { name?: unknown; ms?: unknown; source?: unknown };
    if (typeof q.name !== "string" || q.name.length === 0 || q.name.length > 64) return null;
    if (!finite(q.ms) || (q.ms < 0 && q.name !== "capture_send")) return null;
    if (typeof q.source !== "string" || !SOURCES.includes(q.source)) return null;
    parts.push({ name: q.name, ms: q.ms, source: q.source as TurnPartSource });
  }
  return { turn: o.turn as number, totalMs: o.total_ms, parts };
}
