import { Call } from "./call";
import type { LivenessOptions } from "./liveness";
import type { ReconnectOptions } from "./reconnect";
import { type Fetch } from "./signaling";
export { Call, type CallEvents, type Resumed } from "./call";
export { TurnTiming, webAudioTap, type LevelTap, type LevelTapFactory, type TurnTimingSink } from "./turn_timing";
export { Continuity, restartResultOf, resumeResultOf, type RestartResult, type ResumeResult, type Step, } from "./continuity";
export { VoxgateError, type ErrorCode } from "./errors";
export { DEFAULT_LIVENESS, Liveness, probeResultOf, type LivenessOptions, type LivenessStep, type ProbeResult, type SilentPath, } from "./liveness";
export { DEFAULT_MIC, micConstraints } from "./mic";
export { DEFAULT_RECONNECT, ReconnectPolicy, type ReconnectOptions, type Decision } from "./reconnect";
export { DEFAULT_RESUME_TTL_SECS, RefreshSchedule, refreshIntervalMs } from "./refresh";
export { Signaling, credentialExpiry, credentialGeneration, parseLinkIceServers, parseResumeHeaders, parseRetryAfter, sessionIdOf, sessionsUrl, type Created, type ResumeCredential, } from "./signaling";
export { CallStateMachine, type CallState, type EndReason } from "./state";
export { receivedTotal, summarise, type CallStats, type UplinkReport } from "./stats";
export { HANGOVER_MS, MIN_SPURT_MS, QUIET_BEFORE_ONSET_MS, ReceiveDelays, TURNS_LABEL, TurnDetector, VOICED_DBFS, levelDbfs, parseTurnLatency, reportMessage, type HeardTurn, type TurnLatency, type TurnPart, type TurnPartSource, type TurnReport, } from "./turns";
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
export declare function connect(url: string, opts?: ConnectOptions): Promise<Call>;
