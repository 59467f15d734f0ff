import { Emitter } from "./emitter";
import { type CallState, type EndReason } from "./state";
import type { ReconnectOptions } from "./reconnect";
import { type LivenessOptions } from "./liveness";
import { Signaling } from "./signaling";
import { type CallStats } from "./stats";
import { type LevelTapFactory } from "./turn_timing";
import type { TurnLatency, TurnReport } from "./turns";
export type CallEvents = {
    state: [CallState];
    message: [unknown];
    resumed: [Resumed];
    ended: [EndReason];
    /** The transceiver's split of a turn this client reported. */
    turn: [TurnLatency];
    /** A turn this browser measured, as reported (or not: `sent`) to the transceiver. */
    turnReport: [TurnReport];
};
/** The call moved to a new session (a resume): what the `resumed` event carries. */
export interface Resumed {
    sessionId: string;
    previousSessionId: string;
    /** How long no connection carried the call: from the old one's loss (or close) to the new one's. */
    gapMs: number;
}
/** A PeerConnection, its app data channel and its turns channel (`voxgate.turns`), if any. */
export interface Peer {
    pc: RTCPeerConnection;
    channel: RTCDataChannel;
    turns?: RTCDataChannel | null;
}
/** What the call needs from its creator (see `connect`). */
export interface CallParts {
    pc: RTCPeerConnection;
    channel: RTCDataChannel;
    /** The first connection's `voxgate.turns` channel (`newPeer` makes one for each resume). */
    turns?: RTCDataChannel | null;
    /**
     * A new PeerConnection set up like the first (same mic track, transceivers, channel label),
     * for a resume; without it the call cannot resume.
     */
    newPeer?: (iceServers: RTCIceServer[]) => Peer;
    signaling: Signaling;
    micStream: MediaStream | null;
    reconnect?: Partial<ReconnectOptions>;
    /** The liveness watchdog's settings (liveness.ts); `false` turns it off. */
    liveness?: Partial<LivenessOptions> | false;
    /** Test hook: rewrites each answer before it is applied. */
    answerTransform?: (sdp: string) => string;
    /** How long to wait for ICE gathering before sending what is gathered. */
    gatherTimeoutMs: number;
    /** Measure turns once connected (needs a mic track and the turns channels). */
    turnTiming?: boolean;
    /** Test hook: what samples the levels for turn timing (the WebAudio one by default). */
    levelTap?: LevelTapFactory;
}
/** Messages `send()` holds while the call resumes; one more is refused (`busy`). */
export declare const MAX_QUEUED_WHILE_RESUMING = 256;
export declare class Call extends Emitter<CallEvents> {
    private readonly p;
    /** The audio the backend sends (the same object across resumes). */
    readonly remoteStream: MediaStream;
    private readonly sm;
    private readonly flow;
    private readonly live;
    private liveTimer;
    /**
     * An ICE restart's answer applied while ICE still says connected: `reconnecting` until the
     * watchdog sees traffic, since no ICE event may come to say the new path works.
     */
    private awaitingTraffic;
    private readonly refresh;
    private pc;
    private channel;
    private turns;
    private detach;
    private readonly turnTimer;
    /** A resume's PeerConnection before its 201 (closed if the call ends meanwhile). */
    private pending;
    private location;
    private timer;
    private refreshTimer;
    private refreshing;
    /** When the current connection stopped carrying media (null while it does). */
    private pathLostAt;
    /** Where the current resume's gap started (set at its first swap). */
    private gapFrom;
    private readonly unhook;
    /** `hangup()` sent its DELETE: whatever ends the call now, the app asked for it. */
    private hangingUp;
    /** What `send()` got while resuming: sent on the new data channel once it is open. */
    private queued;
    constructor(p: CallParts);
    /** Makes `peer` the call's connection; the previous one's listeners are removed. */
    private adopt;
    get state(): CallState;
    get endReason(): EndReason | null;
    /** The id of the session that carries the call now (it changes on a resume). */
    get sessionId(): string;
    /** The session's URL (GET for its JSON, PATCH for ICE restarts, DELETE to end it). */
    get sessionUrl(): string;
    /** Attempts in the current outage: ICE restarts, or resume attempts once resuming. */
    get reconnectAttempts(): number;
    /**
     * Sends the offer and waits for `connected`: ICE connected and the data channel open (or
     * throws, having ended the call).
     */
    start(base: string, timeoutMs: number): Promise<void>;
    /**
     * Sends a message on the data channel (objects as JSON). While the call resumes, messages are
     * held and sent on the new channel once it opens (as SCTP holds them through an ICE restart);
     * they are dropped if the call ends instead.
     */
    send(message: string | object): void;
    mute(): void;
    unmute(): void;
    get muted(): boolean;
    /**
     * Ends the call: DELETE on the session, then closes the connection. In that order: a
     * connection closed first makes the server end the session itself, and the DELETE then
     * finds none (a 404 the browser logs as an error). A resume under way is abandoned; a session
     * its POST creates after this is DELETEd as soon as it is known.
     */
    hangup(): Promise<void>;
    /** The current connection's stats: after a resume, the new one's (its counters start at 0). */
    stats(): Promise<CallStats>;
    /** The server's JSON view of the session. */
    session(): Promise<unknown>;
    private setMic;
    private offer;
    private gathered;
    private applyAnswer;
    /** A new credential arrived: the call can resume, and the next refresh is a third of its TTL away. */
    private noteCredential;
    private armRefresh;
    /** Renews the credential while connected; a failure waits for the next tick, the call goes on. */
    private refreshTick;
    private untilConnected;
    /** Waits until `peer` carries the call (ICE up, channel open); rejects on failure or the end. */
    private untilPeerUp;
    private onIce;
    private watchNetwork;
    /** Acts on Continuity's decision at the current time. */
    private step;
    /**
     * Acts on Liveness at the current time: active while connected and not recovering, it
     * samples the received total, probes the session when it stands still, and hands what the
     * probe found to Continuity.
     */
    private watch;
    private sample;
    private probe;
    private restart;
    /**
     * One resume attempt: a new PeerConnection, its offer POSTed with the credential, the swap on
     * 201, then its connection. Continuity hears how it went.
     */
    private resume;
    /** Whether the call has ended (a method, so a check after an await is not narrowed away). */
    private ended;
    /** Ended, or ending at the app's request: a resume under way stops. */
    private aborted;
    private onMessage;
    /** Ends the call once: closes everything and emits `state` then `ended`. */
    private finish;
}
