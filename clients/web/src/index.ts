// @voxgate/client: a browser client for voxgate. `connect()` gets the microphone (unless given a
// stream), opens a WebRTC call to the transceiver with WHIP-shaped signaling, and resolves once
// the call is connected. The Call recovers from network changes with ICE restarts, and from a
// lost, drained or shut-down transceiver by resuming on a new session (docs/continuity.md).

import { Call } from "./call";
import { micConstraints } from "./mic";
import type { ReconnectOptions } from "./reconnect";
import { Signaling, type Fetch } from "./signaling";

export { Call, type CallEvents, type Resumed } from "./call";
export {
  Continuity,
  restartResultOf,
  resumeResultOf,
  type RestartResult,
  type ResumeResult,
  type Step,
} from "./continuity";
export { VoxgateError, type ErrorCode } from "./errors";
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
export { summarise, type CallStats, type UplinkReport } from "./stats";

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
  connectTimeoutMs?: number;
  gatherTimeoutMs?: number;
  /** How long a PATCH, GET, DELETE or credential refresh may wait for its answer (5000 ms). */
  requestTimeoutMs?: number;
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
  // A resume builds its new PeerConnection here too: the same track, transceiver and label.
  const newPeer = (iceServers: RTCIceServer[]) => {
    const pc = new RTCPeerConnection({ iceServers });
    const track = micStream.getAudioTracks()[0];
    if (track) pc.addTrack(track, micStream);
    else pc.addTransceiver("audio", { direction: "recvonly" });
    const channel = pc.createDataChannel(opts.channelLabel ?? "oai-events");
    return { pc, channel };
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
    answerTransform: opts.answerTransform,
    gatherTimeoutMs: opts.gatherTimeoutMs ?? 1500,
  });
  await call.start(url, opts.connectTimeoutMs ?? 15_000);
  return call;
}
