// @voxgate/client: a browser client for voxgate. `connect()` gets the microphone (unless given a
// stream), opens a WebRTC call to the transceiver with WHIP-shaped signaling, and resolves once
// the call is connected. The Call recovers from network changes with ICE restarts, and from a
// lost, drained or shut-down transceiver by resuming on a new session (docs/continuity.md); a
// connection that stops receiving is noticed by the liveness watchdog (src/liveness.ts). Each
// turn's mouth-to-ear time is measured here and split by the transceiver (src/turns.ts).

import { Call } from "./call";
import type { LivenessOptions } from "./liveness";
import { micConstraints } from "./mic";
import type { ReconnectOptions } from "./reconnect";
import { Signaling, type Fetch } from "./signaling";
import { TURNS_LABEL } from "./turns";

export { Call, type CallEvents, type Resumed } from "./call";
export { TurnTiming, webAudioTap, type LevelTap, type LevelTapFactory, type TurnTimingSink } from "./turn_timing";
export {
  Continuity,
  restartResultOf,
  resumeResultOf,
  type RestartResult,
  type ResumeResult,
  type Step,
} from "./continuity";
export { VoxgateError, type ErrorCode } from "./errors";
export {
  DEFAULT_LIVENESS,
  Liveness,
  probeResultOf,
  type LivenessOptions,
  type LivenessStep,
  type ProbeResult,
  type SilentPath,
} from "./liveness";
export { DEFAULT_MIC, micConstraints } from "./mic";
export { DEFAULT_RECONNECT, ReconnectPolicy, type ReconnectOptions, type Decision } from "./reconnect";
export { DEFAULT_RESUME_TTL_SECS, RefreshSchedule, refreshIntervalMs } from "./refresh";
export {
  Signaling,
  credentialExpiry,
  credentialGeneration,
  parseLinkIceServers,
  parseResumeHeaders,
  parseRetryAfter,
  sessionIdOf,
  sessionsUrl,
  type Created,
  type ResumeCredential,
} from "./signaling";
export { CallStateMachine, type CallState, type EndReason } from "./state";
export { receivedTotal, summarise, type CallStats, type UplinkReport } from "./stats";
export {
  HANGOVER_MS,
  MIN_SPURT_MS,
  QUIET_BEFORE_ONSET_MS,
  ReceiveDelays,
  TURNS_LABEL,
  TurnDetector,
  VOICED_DBFS,
  levelDbfs,
  parseTurnLatency,
  reportMessage,
  type HeardTurn,
  type TurnLatency,
  type TurnPart,
  type TurnPartSource,
  type TurnReport,
} from "./turns";

export interface ConnectOptions {
  /** Bearer token for signaling. */
  token?: string;
  /** Metadata handed to the backend (query parameters of the POST). */
  metadata?: Record<string, string>;
  /** The microphone: a stream to send, or constraints to merge over the defaults. */
  audio?: MediaStream | MediaTrackConstraints | true;
  /** Label of the data channel (the transceiver relays every label to the backend). */
  channelLabel?: string;
  /** ICE servers before the answer names any (the transceiver is ICE-lite; rarely needed). */
  iceServers?: RTCIceServer[];
  reconnect?: Partial<ReconnectOptions>;
  /**
   * The liveness watchdog: while connected the call reads what it has received every
   * `livenessPollMs` (200); when nothing arrived for `livenessMs` (1200) it probes the session
   * (`GET`, `probeTimeoutMs` 800) and resumes (404, no answer) or restarts ICE (200) at once,
   * rather than waiting for ICE to report `disconnected`. `false` turns it off (a server that
   * may send nothing for longer than `livenessMs`: voxgate sends RTCP every second).
   */
  liveness?: Partial<LivenessOptions> | false;
  connectTimeoutMs?: number;
  gatherTimeoutMs?: number;
  /** How long a PATCH, GET, DELETE or credential refresh may wait for its answer (5000 ms). */
  requestTimeoutMs?: number;
  /**
   * Measure each turn's mouth-to-ear time (the caller's end of speech to the reply heard) and
   * report it to the transceiver on a `voxgate.turns` data channel; its split comes back as the
   * `turn` event. Default: on where `AudioContext` exists and there is a microphone track.
   */
  turnTiming?: boolean;
  /** Test hook: rewrites every answer SDP before it is applied. */
  answerTransform?: (sdp: string) => string;
  fetch?: Fetch;
}

/** Opens a call to the transceiver at `url` (its base URL, or its `/v1/sessions`). */
export async function connect(url: string, opts: ConnectOptions = {}): Promise<Call> {
  const micStream =
    opts.audio instanceof MediaStream
      ? opts.audio
      : await navigator.mediaDevices.getUserMedia({ audio: micConstraints(opts.audio) });
  const track = micStream.getAudioTracks()[0];
  const turnTiming = opts.turnTiming !== false && typeof AudioContext !== "undefined" && !!track;
  // A resume builds its new PeerConnection here too: the same track, transceiver and labels.
  const newPeer = (iceServers: RTCIceServer[]) => {
    const pc = new RTCPeerConnection({ iceServers });
    if (track) pc.addTrack(track, micStream);
    else pc.addTransceiver("audio", { direction: "recvonly" });
    // The app channel first: a transceiver that knows no turns channel takes the first one
    // opened for its own messages (and relays the turns channel to the backend like any other).
    const channel = pc.createDataChannel(opts.channelLabel ?? "oai-events");
    const turns = turnTiming ? pc.createDataChannel(TURNS_LABEL) : null;
    return { pc, channel, turns };
  };
  const first = newPeer(opts.iceServers ?? []);
  const call = new Call({
    ...first,
    newPeer,
    micStream,
    signaling: new Signaling({
      token: opts.token,
      metadata: opts.metadata,
      fetch: opts.fetch,
      requestTimeoutMs: opts.requestTimeoutMs,
    }),
    reconnect: opts.reconnect,
    liveness: opts.liveness,
    answerTransform: opts.answerTransform,
    gatherTimeoutMs: opts.gatherTimeoutMs ?? 1500,
    turnTiming,
  });
  await call.start(url, opts.connectTimeoutMs ?? 15_000);
  return call;
}
