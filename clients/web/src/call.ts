// One call: an RTCPeerConnection to the transceiver, its data channel, and the recovery loop.
// Owns the PeerConnection, the timers and the Location; decisions come from CallStateMachine
// (which states) and ReconnectPolicy (when to restart ICE); HTTP goes through Signaling.
//
// Server-side ends reach the app at once: the transceiver sends
// `{"type":"session.ended","reason":...}` on the data channel before it closes DTLS, and the
// call ends with that reason (without it, a browser learns only when consent expires).

import { Emitter } from "./emitter";
import { VoxgateError } from "./errors";
import { CallStateMachine, type CallState, type EndReason } from "./state";
import { ReconnectPolicy, type ReconnectOptions } from "./reconnect";
import { Signaling, sessionIdOf } from "./signaling";
import { summarise, type CallStats } from "./stats";

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

export class Call extends Emitter<CallEvents> {
  /** The audio the backend sends. */
  readonly remoteStream: MediaStream;
  private readonly sm = new CallStateMachine();
  private readonly policy: ReconnectPolicy;
  private location = "";
  private timer: ReturnType<typeof setTimeout> | null = null;
  private readonly unhook: Array<() => void> = [];
  /** `hangup()` sent its DELETE: whatever ends the call now, the app asked for it. */
  private hangingUp = false;
  /**
   * Where a resume on another transceiver (issue 38 item 3) plugs in: called when this
   * transceiver no longer has the session. Returning true means the call carries on.
   */
  onSessionLost: (() => Promise<boolean>) | null = null;

  constructor(private readonly p: CallParts) {
    super();
    this.policy = new ReconnectPolicy(p.reconnect);
    this.remoteStream = new MediaStream();
    p.pc.addEventListener("track", (e) => this.remoteStream.addTrack(e.track));
    p.pc.addEventListener("iceconnectionstatechange", () => this.onIce());
    p.channel.addEventListener("message", (e) => this.onMessage(e.data));
    p.channel.addEventListener("open", () => this.onIce());
    this.watchNetwork();
  }

  get state(): CallState {
    return this.sm.state;
  }
  get endReason(): EndReason | null {
    return this.sm.endReason;
  }
  /** The session id the transceiver gave the call. */
  get sessionId(): string {
    return this.location ? sessionIdOf(this.location) : "";
  }
  /** The session's URL (GET for its JSON, PATCH for ICE restarts, DELETE to end it). */
  get sessionUrl(): string {
    return this.location;
  }
  /** ICE restarts tried in the current outage. */
  get reconnectAttempts(): number {
    return this.policy.attempts;
  }

  /**
   * Sends the offer and waits for `connected`: ICE connected and the data channel open (or
   * throws, having ended the call).
   */
  async start(base: string, timeoutMs: number): Promise<void> {
    try {
      const offer = await this.offer(false);
      const created = await this.p.signaling.create(base, offer);
      this.location = created.location;
      if (created.iceServers.length) {
        this.p.pc.setConfiguration({ ...this.p.pc.getConfiguration(), iceServers: created.iceServers });
      }
      await this.applyAnswer(created.answer);
      await this.untilConnected(timeoutMs);
    } catch (e) {
      this.finish("failed");
      throw e;
    }
  }

  /** Sends a message on the data channel (objects as JSON). */
  send(message: string | object): void {
    if (this.p.channel.readyState !== "open") {
      throw new VoxgateError("closed", `data channel is ${this.p.channel.readyState}`);
    }
    this.p.channel.send(typeof message === "string" ? message : JSON.stringify(message));
  }

  mute(): void {
    this.setMic(false);
  }
  unmute(): void {
    this.setMic(true);
  }
  get muted(): boolean {
    return !!this.p.micStream && this.p.micStream.getAudioTracks().every((t) => !t.enabled);
  }

  /**
   * Ends the call: DELETE on the session, then closes the connection. In that order: a
   * connection closed first makes the server end the session itself, and the DELETE then
   * finds none (a 404 the browser logs as an error).
   */
  async hangup(): Promise<void> {
    const location = this.location;
    if (this.ended()) return;
    this.hangingUp = true;
    if (location) {
      try {
        await this.p.signaling.hangup(location);
      } catch {
        // The call is over either way; the session expires on the server.
      }
    }
    this.finish("hangup");
  }

  async stats(): Promise<CallStats> {
    const report = await this.p.pc.getStats();
    return summarise(report as unknown as { values(): Iterable<never> });
  }

  /** The server's JSON view of the session. */
  async session(): Promise<unknown> {
    return this.p.signaling.session(this.location);
  }

  // ---- internals ---------------------------------------------------------------------------

  private setMic(enabled: boolean): void {
    // A disabled track sends silence frames the browser may suppress: the backend hears none.
    for (const t of this.p.micStream?.getAudioTracks() ?? []) t.enabled = enabled;
  }

  private async offer(iceRestart: boolean): Promise<string> {
    const pc = this.p.pc;
    if (iceRestart) pc.restartIce();
    await pc.setLocalDescription(await pc.createOffer({ iceRestart }));
    await this.gathered();
    return pc.localDescription?.sdp ?? "";
  }

  private gathered(): Promise<void> {
    const pc = this.p.pc;
    if (pc.iceGatheringState === "complete") return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        pc.removeEventListener("icegatheringstatechange", check);
        resolve();
      };
      const check = () => pc.iceGatheringState === "complete" && done();
      const t = setTimeout(done, this.p.gatherTimeoutMs);
      pc.addEventListener("icegatheringstatechange", check);
    });
  }

  private async applyAnswer(sdp: string): Promise<void> {
    const answer = this.p.answerTransform ? this.p.answerTransform(sdp) : sdp;
    await this.p.pc.setRemoteDescription({ type: "answer", sdp: answer });
  }

  private untilConnected(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.sm.state === "connected") return finish(null);
        if (this.sm.state === "ended") {
          return finish(new VoxgateError("closed", `call ended (${this.sm.endReason}) before connecting`));
        }
        const ice = this.p.pc.iceConnectionState;
        if (ice === "failed" || ice === "closed") {
          return finish(new VoxgateError("network", `ICE ${ice} before connecting`));
        }
      };
      const finish = (err: Error | null) => {
        clearTimeout(t);
        off();
        this.p.pc.removeEventListener("iceconnectionstatechange", check);
        if (err) reject(err);
        else resolve();
      };
      const t = setTimeout(
        () => finish(new VoxgateError("network", `not connected after ${timeoutMs} ms`)),
        timeoutMs,
      );
      const off = this.on("state", check);
      this.p.pc.addEventListener("iceconnectionstatechange", check);
      check();
    });
  }

  private onIce(): void {
    const ice = this.p.pc.iceConnectionState;
    if (this.sm.state === "ended") return;
    if (ice === "connected" || ice === "completed") {
      // The first `connected` waits for the data channel too (SCTP opens a round trip after
      // ICE): it carries the server's end of the call, and `send()` right after `connect()`
      // must work.
      if (this.sm.state === "connecting" && this.p.channel.readyState !== "open") return;
      if (this.sm.to("connected")) this.emit("state", "connected");
    } else if ((ice === "disconnected" || ice === "failed") && this.sm.state === "connecting") {
      if (ice === "failed") this.finish("failed");
      return;
    }
    if (this.sm.state === "connecting") return;
    this.policy.onIceState(Date.now(), ice);
    this.step();
  }

  private watchNetwork(): void {
    const changed = () => {
      if (this.sm.state !== "connected") return;
      this.policy.onNetworkChange(Date.now());
      this.step();
    };
    if (typeof window !== "undefined") {
      window.addEventListener("online", changed);
      this.unhook.push(() => window.removeEventListener("online", changed));
    }
    const conn = (globalThis.navigator as { connection?: EventTarget } | undefined)?.connection;
    if (conn && typeof conn.addEventListener === "function") {
      conn.addEventListener("change", changed);
      this.unhook.push(() => conn.removeEventListener("change", changed));
    }
  }

  /** Acts on the policy's decision at the current time. */
  private step(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.sm.state === "ended") return;
    const d = this.policy.poll(Date.now());
    if (d.kind === "wait") {
      this.timer = setTimeout(() => this.step(), Math.max(0, d.at - Date.now()));
    } else if (d.kind === "restart") {
      if (this.sm.to("reconnecting")) this.emit("state", "reconnecting");
      void this.restart();
    } else if (d.kind === "give_up") {
      void this.lost();
    }
  }

  private async restart(): Promise<void> {
    let outcome: "ok" | "not_found" | "error" = "ok";
    try {
      const offer = await this.offer(true);
      if (this.ended()) return;
      const answer = await this.p.signaling.restart(this.location, offer);
      if (this.ended()) return;
      await this.applyAnswer(answer);
    } catch (e) {
      outcome = e instanceof VoxgateError && e.code === "not_found" ? "not_found" : "error";
      // An offer left pending (PATCH failed) must be rolled back before the next one.
      if (this.p.pc.signalingState === "have-local-offer") {
        try {
          await this.p.pc.setLocalDescription({ type: "rollback" });
        } catch {
          /* the next attempt's createOffer reports it */
        }
      }
    }
    this.policy.onRestartDone(Date.now(), outcome);
    const ice = this.p.pc.iceConnectionState;
    if (ice === "connected" || ice === "completed") this.policy.onIceState(Date.now(), ice);
    this.step();
  }

  /** Whether the call has ended (a method, so a check after an await is not narrowed away). */
  private ended(): boolean {
    return this.sm.state === "ended";
  }

  private async lost(): Promise<void> {
    if (this.onSessionLost && (await this.onSessionLost())) return;
    this.finish("lost");
  }

  private onMessage(data: unknown): void {
    let parsed: unknown = data;
    if (typeof data === "string") {
      try {
        parsed = JSON.parse(data);
      } catch {
        parsed = data;
      }
    }
    const m = parsed as { type?: unknown; reason?: unknown } | null;
    if (m && typeof m === "object" && m.type === "session.ended") {
      // The server's goodbye to our own DELETE is still our hang-up.
      this.finish(this.hangingUp ? "hangup" : typeof m.reason === "string" ? m.reason : "deleted");
      return;
    }
    this.emit("message", parsed);
  }

  /** Ends the call once: closes everything and emits `state` then `ended`. */
  private finish(reason: EndReason): boolean {
    if (!this.sm.end(reason)) return false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const u of this.unhook.splice(0)) u();
    try {
      this.p.channel.close();
    } catch {
      /* already closed */
    }
    this.p.pc.close();
    this.emit("state", "ended");
    this.emit("ended", reason);
    return true;
  }
}
