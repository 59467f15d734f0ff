import { Emitter } from "./emitter";
import { type CallState, type EndReason } from "./state";
import { type ReconnectOptions } from "./reconnect";
import { Signaling } from "./signaling";
import { type CallStats } from "./stats";
export type CallEvents = {
    state: [CallState];
    message: [unknown];
    ended: [EndReason];
};
/** What the call needs from its creator (see `connect`). */
export interface CallParts {
    pc: RTCPeerConnection;
    channel: RTCDataChannel;
    signaling: Signaling;
    micStream: MediaStream | null;
    reconnect?: Partial<ReconnectOptions>;
    /** Test hook: rewrites each answer before it is applied. */
    answerTransform?: (sdp: string) => string;
    /** How long to wait for ICE gathering before sending what is gathered. */
    gatherTimeoutMs: number;
}
export declare class Call extends Emitter<CallEvents> {
    private readonly p;
    /** The audio the backend sends. */
    readonly remoteStream: MediaStream;
    private readonly sm;
    private readonly policy;
    private location;
    private timer;
    private readonly unhook;
    /** `hangup()` sent its DELETE: whatever ends the call now, the app asked for it. */
    private hangingUp;
    /**
     * Where a resume on another transceiver (issue 38 item 3) plugs in: called when this
     * transceiver no longer has the session. Returning true means the call carries on.
     */
    onSessionLost: (() => Promise<boolean>) | null;
    constructor(p: CallParts);
    get state(): CallState;
    get endReason(): EndReason | null;
    /** The session id the transceiver gave the call. */
    get sessionId(): string;
    /** The session's URL (GET for its JSON, PATCH for ICE restarts, DELETE to end it). */
    get sessionUrl(): string;
    /** ICE restarts tried in the current outage. */
    get reconnectAttempts(): number;
    /**
     * Sends the offer and waits for `connected`: ICE connected and the data channel open (or
     * throws, having ended the call).
     */
    start(base: string, timeoutMs: number): Promise<void>;
    /** Sends a message on the data channel (objects as JSON). */
    send(message: string | object): void;
    mute(): void;
    unmute(): void;
    get muted(): boolean;
    /**
     * Ends the call: DELETE on the session, then closes the connection. In that order: a
     * connection closed first makes the server end the session itself, and the DELETE then
     * finds none (a 404 the browser logs as an error).
     */
    hangup(): Promise<void>;
    stats(): Promise<CallStats>;
    /** The server's JSON view of the session. */
    session(): Promise<unknown>;
    private setMic;
    private offer;
    private gathered;
    private applyAnswer;
    private untilConnected;
    private onIce;
    private watchNetwork;
    /** Acts on the policy's decision at the current time. */
    private step;
    private restart;
    /** Whether the call has ended (a method, so a check after an await is not narrowed away). */
    private ended;
    private lost;
    private onMessage;
    /** Ends the call once: closes everything and emits `state` then `ended`. */
    private finish;
}
