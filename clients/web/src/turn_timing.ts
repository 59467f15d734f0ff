// A call's turn timing (turns.ts has the rules): while connected, the microphone and the reply
// are sampled every 10 ms through WebAudio (a LevelTap) into a TurnDetector; each turn found
// goes to the transceiver as a `turn.report` on the connection's `voxgate.turns` channel, and
// its `turn.latency` answer goes to the call (its `turn` event). The detector and the
// receive-delay counters start again on each new connection (`adopt`): a turn heard on the old
// one cannot be matched by the new session.

import {
  ReceiveDelays,
  TurnDetector,
  VOICED_DBFS,
  levelDbfs,
  parseTurnLatency,
  reportMessage,
  turnReportOf,
  type Delays,
  type HeardTurn,
  type TurnLatency,
  type TurnReport,
} from "./turns";

/** A running level sampler (see `LevelTapFactory`). */
export interface LevelTap {
  close(): void;
}

/**
 * Starts sampling the microphone and the reply (whatever track `remote` holds now) every 10 ms:
 * `onSample(performance.now(), micDbfs, remoteDbfs)`, RMS levels of the last ~10 ms.
 */
export type LevelTapFactory = (
  mic: MediaStream,
  remote: MediaStream,
  onSample: (tMs: number, micDbfs: number, remoteDbfs: number) => void,
) => LevelTap;

/**
 * The browser's LevelTap: one AudioContext, an AnalyserNode (512 samples) on the microphone and
 * one on the reply's current track, polled every 10 ms. Chromium feeds a remote WebRTC track to
 * WebAudio only while a media element plays it too (the app's `<audio>`, which it has anyway
 * to hear the reply); the context is resumed until it runs (a page without a user gesture may
 * keep it suspended: no samples then, no turns).
 */
export const webAudioTap: LevelTapFactory = (mic, remote, onSample) => {
  const ctx = new AudioContext();
  const analyser = () => {
    const a = ctx.createAnalyser();
    a.fftSize = 512;
    return a;
  };
  const [micAnalyser, remoteAnalyser] = [analyser(), analyser()];
  const micSource = ctx.createMediaStreamSource(mic);
  micSource.connect(micAnalyser);
  const buf = new Float32Array(512);
  const level = (a: AnalyserNode) => {
    a.getFloatTimeDomainData(buf);
    return levelDbfs(buf);
  };
  let track: MediaStreamTrack | null = null;
  let source: MediaStreamAudioSourceNode | null = null;
  let resumedAt = -Infinity;
  const timer = setInterval(() => {
    const t = performance.now();
    if (ctx.state === "suspended") {
      if (t - resumedAt >= 1000) {
        resumedAt = t;
        ctx.resume().catch(() => {});
      }
      return;
    }
    // The reply's track changes when the call resumes on a new connection: follow it.
    const now = remote.getAudioTracks()[0] ?? null;
    if (now !== track) {
      source?.disconnect();
      source = now ? ctx.createMediaStreamSource(new MediaStream([now])) : null;
      source?.connect(remoteAnalyser);
      track = now;
    }
    onSample(t, level(micAnalyser), source ? level(remoteAnalyser) : -Infinity);
  }, 10);
  return {
    close() {
      clearInterval(timer);
      micSource.disconnect();
      source?.disconnect();
      ctx.close().catch(() => {});
    },
  };
};

/** What turn timing reports to its call. */
export interface TurnTimingSink {
  /** The transceiver's split of a reported turn. */
  turn(split: TurnLatency): void;
  /** A turn this browser measured, as reported (or not: `sent`). */
  report(report: TurnReport): void;
  /** Whether the call has ended (nothing is reported then). */
  ended(): boolean;
}

/** One call's turn timing across its connections. */
export class TurnTiming {
  private readonly detector = new TurnDetector();
  /** The receive-delay counters at the last report, of the current connection. */
  private delays = new ReceiveDelays();
  private tap: LevelTap | null = null;
  private pc: RTCPeerConnection | null = null;
  private turns: RTCDataChannel | null = null;

  constructor(
    private readonly sink: TurnTimingSink,
    private readonly remoteStream: MediaStream,
    private readonly levelTap: LevelTapFactory = webAudioTap,
  ) {}

  /** The call's connection is now `pc` (with its turns channel): starts over; returns what
   * removes its listener. */
  adopt(pc: RTCPeerConnection, turns: RTCDataChannel | null): () => void {
    this.pc = pc;
    this.turns = turns;
    this.detector.reset();
    this.delays = new ReceiveDelays();
    const onTurns = (e: MessageEvent) => this.onTurnsMessage(e.data);
    turns?.addEventListener("message", onTurns);
    return () => turns?.removeEventListener("message", onTurns);
  }

  /** Starts sampling `mic` (once; not without a mic track). */
  start(mic: MediaStream | null): void {
    if (this.tap || this.sink.ended() || !mic || mic.getAudioTracks().length === 0) return;
    try {
      this.tap = this.levelTap(mic, this.remoteStream, (t, m, r) => this.onLevels(t, m, r));
    } catch (e) {
      console.debug("voxgate: no turn timing", e);
    }
  }

  close(): void {
    this.tap?.close();
    this.tap = null;
  }

  private onLevels(tMs: number, micDbfs: number, remoteDbfs: number): void {
    const spoke = this.detector.mic(tMs, micDbfs);
    // The packet playing matters only at a sample that may be the onset.
    const rtp = remoteDbfs >= VOICED_DBFS && this.detector.watching ? this.playingRtpTimestamp() : null;
    const heard = this.detector.remote(tMs, remoteDbfs, rtp);
    for (const turn of [spoke, heard]) if (turn) void this.reportTurn(turn);
  }

  /** The RTP timestamp of the reply's most recently played packet (null if none yet). */
  private playingRtpTimestamp(): number | null {
    try {
      const receiver = this.pc?.getReceivers().find((r) => r.track?.kind === "audio");
      let latest: { timestamp: number; rtpTimestamp?: unknown } | null = null;
      for (const s of receiver?.getSynchronizationSources() ?? []) {
        if (!latest || s.timestamp > latest.timestamp) latest = s;
      }
      return typeof latest?.rtpTimestamp === "number" ? latest.rtpTimestamp : null;
    } catch {
      return null;
    }
  }

  /** Sends a turn's report with the receive delays since the last one, and hands it on. */
  private async reportTurn(turn: HeardTurn): Promise<void> {
    const [pc, counters] = [this.pc, this.delays];
    if (!pc) return;
    let delays: Delays = { jitterBufferMs: null, playoutMs: null, rttMs: null };
    try {
      delays = counters.take((await pc.getStats()) as unknown as { values(): Iterable<never> });
    } catch {
      // Reported without them.
    }
    // A new connection meanwhile: the turn was the old session's, the new one cannot match it.
    if (this.sink.ended() || pc !== this.pc) return;
    const report = turnReportOf(turn, delays);
    const channel = this.turns;
    if (channel && channel.readyState === "open") {
      try {
        channel.send(reportMessage(report));
        report.sent = true;
      } catch {
        // Closing: the report is lost with the connection.
      }
    }
    this.sink.report(report);
  }

  /** The turns channel carries the transceiver's splits only; anything else is dropped. */
  private onTurnsMessage(data: unknown): void {
    if (this.sink.ended()) return;
    const split = parseTurnLatency(data);
    if (split) this.sink.turn(split);
    else console.debug("voxgate: dropped a malformed message on voxgate.turns", data);
  }
}
