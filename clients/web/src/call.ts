// One call: its current RTCPeerConnection to a transceiver, its data channel, and the recovery
// loop. Owns the PeerConnection (replaced on a resume), the timers and the Location; decisions
// come from CallStateMachine (which states), Continuity (restart ICE, resume, or end),
// Liveness (when to read the received total and probe the session: a dead transceiver is
// noticed in ~1.2 s, not at ICE's `disconnected` plus the grace) and RefreshSchedule (when to
// renew the resume credential); HTTP goes through Signaling, which keeps the credential.
//
// Server-side ends reach the app at once: the transceiver sends
// `{"type":"session.ended","reason":...}` on the data channel before it closes DTLS, and the
// call ends with that reason (without it, a browser learns only when consent expires), unless
// the reason is `shutdown`: then the call resumes elsewhere, as on `{"type":"session.migrate"}`.
//
// A resume (docs/continuity.md) builds a new PeerConnection the way connect() built the first
// (`newPeer`: the same mic track, transceivers and data-channel label), POSTs its offer with the
// credential, and on 201 swaps it in: the old one is closed and its listeners removed, so
// nothing of it reaches the call any more; `remoteStream` stays the same object, its track
// replaced by the new connection's.
//
// Turn timing (turn_timing.ts) starts once connected and follows each new connection; its
// splits are the `turn` event, its reports the `turnReport` event.

import { Emitter } from "./emitter";
import { VoxgateError } from "./errors";
import { CallStateMachine, type CallState, type EndReason } from "./state";
import type { ReconnectOptions } from "./reconnect";
import { Continuity, restartResultOf, resumeResultOf, type RestartResult, type ResumeResult } from "./continuity";
import { Liveness, probeResultOf, type LivenessOptions, type ProbeResult } from "./liveness";
import { RefreshSchedule } from "./refresh";
import { Signaling, sessionIdOf, type ResumeCredential } from "./signaling";
import { receivedTotal, summarise, type CallStats } from "./stats";
import { TurnTiming, type LevelTapFactory } from "./turn_timing";
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

const isUp = (ice: RTCIceConnectionState) => ice === "connected" || ice === "completed";

/** Messages `send()` holds while the call resumes; one more is refused (`busy`). */
export const MAX_QUEUED_WHILE_RESUMING = 256;

function closePeer(peer: Peer): void {
  for (const channel of [peer.channel, peer.turns]) {
    try {
      channel?.close();
    } catch {
      /* already closed */
    }
  }
  peer.pc.close();
}

export class Call extends Emitter<CallEvents> {
  /** The audio the backend sends (the same object across resumes). */
  readonly remoteStream: MediaStream;
  private readonly sm = new CallStateMachine();
  private readonly flow: Continuity;
  private readonly live: Liveness;
  private liveTimer: ReturnType<typeof setTimeout> | null = null;
  /**
   * An ICE restart's answer applied while ICE still says connected: `reconnecting` until the
   * watchdog sees traffic, since no ICE event may come to say the new path works.
   */
  private awaitingTraffic = false;
  private readonly refresh = new RefreshSchedule();
  private pc: RTCPeerConnection;
  private channel: RTCDataChannel;
  private turns: RTCDataChannel | null = null;
  private detach: () => void = () => {};
  private readonly turnTimer: TurnTiming;
  /** A resume's PeerConnection before its 201 (closed if the call ends meanwhile). */
  private pending: Peer | null = null;
  private location = "";
  private timer: ReturnType<typeof setTimeout> | null = null;
  private refreshTimer: ReturnType<typeof setTimeout> | null = null;
  private refreshing = false;
  /** When the current connection stopped carrying media (null while it does). */
  private pathLostAt: number | null = null;
  /** Where the current resume's gap started (set at its first swap). */
  private gapFrom: number | null = null;
  private readonly unhook: Array<() => void> = [];
  /** `hangup()` sent its DELETE: whatever ends the call now, the app asked for it. */
  private hangingUp = false;
  /** What `send()` got while resuming: sent on the new data channel once it is open. */
  private queued: string[] = [];

  constructor(private readonly p: CallParts) {
    super();
    this.flow = new Continuity(p.reconnect);
    this.live = new Liveness(p.liveness ?? {});
    this.remoteStream = new MediaStream();
    const sink = {
      turn: (split: TurnLatency) => this.emit("turn", split),
      report: (report: TurnReport) => this.emit("turnReport", report),
      ended: () => this.ended(),
    };
    this.turnTimer = new TurnTiming(sink, this.remoteStream, p.levelTap);
    this.pc = p.pc;
    this.channel = p.channel;
    this.adopt({ pc: p.pc, channel: p.channel, turns: p.turns });
    this.watchNetwork();
  }

  /** Makes `peer` the call's connection; the previous one's listeners are removed. */
  private adopt(peer: Peer): void {
    this.detach();
    this.pc = peer.pc;
    this.channel = peer.channel;
    this.turns = peer.turns ?? null;
    const detachTurns = this.turnTimer.adopt(peer.pc, this.turns);
    const onTrack = (e: RTCTrackEvent) => {
      for (const t of this.remoteStream.getTracks()) {
        if (t.kind === e.track.kind && t !== e.track) this.remoteStream.removeTrack(t);
      }
      this.remoteStream.addTrack(e.track);
    };
    const onIce = () => this.onIce();
    const onMessage = (e: MessageEvent) => this.onMessage(e.data);
    peer.pc.addEventListener("track", onTrack);
    peer.pc.addEventListener("iceconnectionstatechange", onIce);
    peer.channel.addEventListener("message", onMessage);
    peer.channel.addEventListener("open", onIce);
    this.detach = () => {
      peer.pc.removeEventListener("track", onTrack);
      peer.pc.removeEventListener("iceconnectionstatechange", onIce);
      peer.channel.removeEventListener("message", onMessage);
      peer.channel.removeEventListener("open", onIce);
      detachTurns();
    };
  }

  get state(): CallState {
    return this.sm.state;
  }
  get endReason(): EndReason | null {
    return this.sm.endReason;
  }
  /** The id of the session that carries the call now (it changes on a resume). */
  get sessionId(): string {
    return this.location ? sessionIdOf(this.location) : "";
  }
  /** The session's URL (GET for its JSON, PATCH for ICE restarts, DELETE to end it). */
  get sessionUrl(): string {
    return this.location;
  }
  /** Attempts in the current outage: ICE restarts, or resume attempts once resuming. */
  get reconnectAttempts(): number {
    return this.flow.resuming ? this.flow.resumeAttempts : this.flow.restartAttempts;
  }

  /**
   * Sends the offer and waits for `connected`: ICE connected and the data channel open (or
   * throws, having ended the call).
   */
  async start(base: string, timeoutMs: number): Promise<void> {
    try {
      const offer = await this.offer(this.pc, false);
      const created = await this.p.signaling.create(base, offer);
      this.location = created.location;
      this.noteCredential(created.resume);
      if (created.iceServers.length) {
        this.pc.setConfiguration({ ...this.pc.getConfiguration(), iceServers: created.iceServers });
      }
      await this.applyAnswer(this.pc, created.answer);
      await this.untilConnected(timeoutMs);
    } catch (e) {
      this.finish("failed");
      throw e;
    }
    if (this.p.turnTiming) this.turnTimer.start(this.p.micStream);
  }

  /**
   * Sends a message on the data channel (objects as JSON). While the call resumes, messages are
   * held and sent on the new channel once it opens (as SCTP holds them through an ICE restart);
   * they are dropped if the call ends instead.
   */
  send(message: string | object): void {
    const text = typeof message === "string" ? message : JSON.stringify(message);
    if (this.flow.resuming && !this.ended()) {
      if (this.queued.length >= MAX_QUEUED_WHILE_RESUMING) {
        throw new VoxgateError("busy", `${this.queued.length} messages already wait for the call to resume`);
      }
      this.queued.push(text);
      return;
    }
    if (this.channel.readyState !== "open") {
      throw new VoxgateError("closed", `data channel is ${this.channel.readyState}`);
    }
    this.channel.send(text);
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
   * finds none (a 404 the browser logs as an error). A resume under way is abandoned; a session
   * its POST creates after this is DELETEd as soon as it is known.
   */
  async hangup(): Promise<void> {
    const location = this.location;
    if (this.ended() || this.hangingUp) return;
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

  /** The current connection's stats: after a resume, the new one's (its counters start at 0). */
  async stats(): Promise<CallStats> {
    const report = await this.pc.getStats();
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

  private async offer(pc: RTCPeerConnection, iceRestart: boolean): Promise<string> {
    if (iceRestart) pc.restartIce();
    await pc.setLocalDescription(await pc.createOffer({ iceRestart }));
    await this.gathered(pc);
    return pc.localDescription?.sdp ?? "";
  }

  private gathered(pc: RTCPeerConnection): Promise<void> {
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

  private async applyAnswer(pc: RTCPeerConnection, sdp: string): Promise<void> {
    const answer = this.p.answerTransform ? this.p.answerTransform(sdp) : sdp;
    await pc.setRemoteDescription({ type: "answer", sdp: answer });
  }

  /** A new credential arrived: the call can resume, and the next refresh is a third of its TTL away. */
  private noteCredential(r: ResumeCredential | null): void {
    if (!r) return;
    this.flow.canResume = !!this.p.newPeer;
    this.refresh.onCredential(Date.now(), r.ttlSecs);
    this.armRefresh();
  }

  private armRefresh(): void {
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
    const at = this.refresh.nextAt;
    if (at === null || this.ended()) return;
    this.refreshTimer = setTimeout(() => void this.refreshTick(), Math.max(0, at - Date.now()));
  }

  /** Renews the credential while connected; a failure waits for the next tick, the call goes on. */
  private async refreshTick(): Promise<void> {
    this.refreshTimer = null;
    if (this.ended() || this.refreshing) return;
    if (this.sm.state !== "connected") {
      this.refresh.onRefreshFailed(Date.now());
      this.armRefresh();
      return;
    }
    this.refreshing = true;
    const before = this.p.signaling.credential;
    try {
      await this.p.signaling.refreshResume(this.location);
    } catch {
      // Not fatal: the credential in hand is valid for a while yet.
    }
    this.refreshing = false;
    if (this.ended()) return;
    const now = this.p.signaling.credential;
    if (now && now !== before) this.noteCredential(now);
    else {
      this.refresh.onRefreshFailed(Date.now());
      this.armRefresh();
    }
  }

  private untilConnected(timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        if (this.sm.state === "connected") return finish(null);
        if (this.sm.state === "ended") {
          return finish(new VoxgateError("closed", `call ended (${this.sm.endReason}) before connecting`));
        }
        const ice = this.pc.iceConnectionState;
        if (ice === "failed" || ice === "closed") {
          return finish(new VoxgateError("network", `ICE ${ice} before connecting`));
        }
      };
      const finish = (err: Error | null) => {
        clearTimeout(t);
        off();
        this.pc.removeEventListener("iceconnectionstatechange", check);
        if (err) reject(err);
        else resolve();
      };
      const t = setTimeout(
        () => finish(new VoxgateError("network", `not connected after ${timeoutMs} ms`)),
        timeoutMs,
      );
      const off = this.on("state", check);
      this.pc.addEventListener("iceconnectionstatechange", check);
      check();
    });
  }

  /** Waits until `peer` carries the call (ICE up, channel open); rejects on failure or the end. */
  private untilPeerUp(peer: Peer, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const ice = peer.pc.iceConnectionState;
        if (this.ended()) return finish(new VoxgateError("closed", "call ended during a resume"));
        if (isUp(ice) && peer.channel.readyState === "open") return finish(null);
        if (ice === "failed" || ice === "closed") finish(new Error(`resumed connection: ICE ${ice}`));
      };
      const finish = (err: Error | null) => {
        clearTimeout(t);
        off();
        peer.pc.removeEventListener("iceconnectionstatechange", check);
        peer.channel.removeEventListener("open", check);
        if (err) reject(err);
        else resolve();
      };
      const t = setTimeout(() => finish(new Error(`resumed connection not up after ${timeoutMs} ms`)), timeoutMs);
      const off = this.on("state", check);
      peer.pc.addEventListener("iceconnectionstatechange", check);
      peer.channel.addEventListener("open", check);
      check();
    });
  }

  private onIce(): void {
    const ice = this.pc.iceConnectionState;
    if (this.ended()) return;
    if (isUp(ice)) this.pathLostAt = null;
    else this.pathLostAt ??= Date.now();
    // A resume waits for its own connection (untilPeerUp); the old one's fate no longer matters.
    if (this.flow.resuming) return;
    if (isUp(ice)) {
      // The first `connected` waits for the data channel too (SCTP opens a round trip after
      // ICE): it carries the server's end of the call, and `send()` right after `connect()`
      // must work.
      if (this.sm.state === "connecting" && this.channel.readyState !== "open") return;
      this.awaitingTraffic = false;
      if (this.sm.to("connected")) this.emit("state", "connected");
    } else if ((ice === "disconnected" || ice === "failed") && this.sm.state === "connecting") {
      if (ice === "failed") this.finish("failed");
      return;
    }
    if (this.sm.state === "connecting") return;
    this.flow.onIceState(Date.now(), ice);
    this.step();
  }

  private watchNetwork(): void {
    const changed = () => {
      if (this.sm.state !== "connected") return;
      this.flow.onNetworkChange(Date.now());
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

  /** Acts on Continuity's decision at the current time. */
  private step(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.aborted()) return;
    const d = this.flow.poll(Date.now());
    if (d.kind === "wait") {
      this.timer = setTimeout(() => this.step(), Math.max(0, d.at - Date.now()));
    } else if (d.kind === "restart" || d.kind === "resume") {
      this.awaitingTraffic = false;
      if (this.sm.to("reconnecting")) this.emit("state", "reconnecting");
      void (d.kind === "restart" ? this.restart() : this.resume());
    } else if (d.kind === "end") {
      this.finish(d.reason);
      return;
    }
    this.watch();
  }

  /**
   * Acts on Liveness at the current time: active while connected and not recovering, it
   * samples the received total, probes the session when it stands still, and hands what the
   * probe found to Continuity.
   */
  private watch(): void {
    if (this.liveTimer) clearTimeout(this.liveTimer);
    this.liveTimer = null;
    if (this.aborted()) return;
    const now = Date.now();
    const watching = this.sm.state === "connected" || (this.sm.state === "reconnecting" && this.awaitingTraffic);
    this.live.setActive(now, watching && !this.flow.recovering);
    for (;;) {
      const s = this.live.poll(now);
      if (s.kind === "sample") void this.sample(s.id);
      else if (s.kind === "probe") void this.probe(s.id);
      else if (s.kind === "silent") {
        this.flow.onSilentPath(now, s.why);
        // The gap the caller hears began with the silence, not with what is done about it.
        if (this.flow.resuming) this.pathLostAt ??= s.since;
        this.step();
        return;
      } else {
        if (s.kind === "wait") {
          this.liveTimer = setTimeout(() => this.watch(), Math.max(0, s.at - Date.now()));
        }
        return;
      }
    }
  }

  private async sample(id: number): Promise<void> {
    let total: number | null = null;
    try {
      total = receivedTotal((await this.pc.getStats()) as unknown as { values(): Iterable<never> });
    } catch {
      // No report: no evidence of silence either.
    }
    this.live.onSample(Date.now(), id, total);
    if (this.awaitingTraffic && this.live.traffic && !this.flow.recovering && this.sm.to("connected")) {
      this.awaitingTraffic = false;
      this.emit("state", "connected");
    }
    this.watch();
  }

  private async probe(id: number): Promise<void> {
    let result: ProbeResult;
    try {
      result = probeResultOf(await this.p.signaling.probe(this.location, this.live.options.probeTimeoutMs));
    } catch (e) {
      result = probeResultOf(e);
    }
    this.live.onProbeDone(Date.now(), id, result);
    this.watch();
  }

  private async restart(): Promise<void> {
    const pc = this.pc;
    const before = this.p.signaling.credential;
    let outcome: RestartResult = "ok";
    try {
      const offer = await this.offer(pc, true);
      if (this.ended() || pc !== this.pc) return;
      const answer = await this.p.signaling.restart(this.location, offer);
      if (this.ended() || pc !== this.pc) return;
      await this.applyAnswer(pc, answer);
    } catch (e) {
      if (this.ended() || pc !== this.pc) return;
      outcome = restartResultOf(e);
      // An offer left pending (PATCH failed) must be rolled back before the next one.
      if (pc.signalingState === "have-local-offer") {
        try {
          await pc.setLocalDescription({ type: "rollback" });
        } catch {
          /* the next attempt's createOffer reports it */
        }
      }
    }
    const fresh = this.p.signaling.credential;
    if (fresh && fresh !== before) this.noteCredential(fresh);
    this.flow.onRestartDone(Date.now(), outcome);
    const ice = pc.iceConnectionState;
    if (isUp(ice)) {
      this.flow.onIceState(Date.now(), ice);
      // ICE never went down (a restart on a network change or a silent path): no state event
      // may say the new path works; traffic does (or, without the watchdog, the answer).
      if (!this.flow.recovering && this.sm.state === "reconnecting") {
        if (this.live.enabled) this.awaitingTraffic = true;
        else if (this.sm.to("connected")) this.emit("state", "connected");
      }
    }
    this.step();
  }

  /**
   * One resume attempt: a new PeerConnection, its offer POSTed with the credential, the swap on
   * 201, then its connection. Continuity hears how it went.
   */
  private async resume(): Promise<void> {
    const newPeer = this.p.newPeer;
    if (!newPeer) return; // canResume is false without it: Continuity never asks
    const previousSessionId = this.sessionId;
    const peer = newPeer(this.pc.getConfiguration().iceServers ?? []);
    this.pending = peer;
    let result: ResumeResult = { kind: "ok" };
    try {
      const offer = await this.offer(peer.pc, false);
      if (this.aborted()) return;
      // No longer than the resume may take: a POST answered after it would come too late.
      const created = await this.p.signaling.resume(
        offer,
        undefined,
        Math.max(this.flow.resumeDeadline - Date.now(), 2000),
      );
      if (this.aborted()) {
        // hangup() came first: the session this POST made must not outlive the call.
        await this.p.signaling.hangup(created.location).catch(() => 0);
        return;
      }
      this.gapFrom ??= this.pathLostAt ?? Date.now();
      const old: Peer = { pc: this.pc, channel: this.channel, turns: this.turns };
      this.pending = null;
      this.adopt(peer);
      closePeer(old);
      this.location = created.location;
      this.noteCredential(created.resume);
      if (created.iceServers.length) {
        peer.pc.setConfiguration({ ...peer.pc.getConfiguration(), iceServers: created.iceServers });
      }
      await this.applyAnswer(peer.pc, created.answer);
      const left = this.flow.resumeDeadline - Date.now();
      await this.untilPeerUp(peer, Math.max(left, 2000));
    } catch (e) {
      if (this.aborted()) return;
      result = resumeResultOf(e);
    } finally {
      if (this.pending === peer) {
        this.pending = null;
        closePeer(peer);
      }
    }
    if (this.aborted()) return;
    this.flow.onResumeDone(Date.now(), result);
    if (result.kind === "ok") {
      const now = Date.now();
      const gapMs = Math.max(0, now - (this.gapFrom ?? now));
      this.gapFrom = null;
      this.pathLostAt = null;
      this.awaitingTraffic = false;
      const moved = this.sm.to("connected");
      // Held messages first: an app answering `connected` sends after them, in order.
      for (const text of this.queued.splice(0)) {
        try {
          this.channel.send(text);
        } catch (e) {
          console.error("voxgate: a message held during the resume could not be sent", e);
        }
      }
      if (moved) this.emit("state", "connected");
      this.emit("resumed", { sessionId: this.sessionId, previousSessionId, gapMs });
    }
    this.step();
  }

  /** Whether the call has ended (a method, so a check after an await is not narrowed away). */
  private ended(): boolean {
    return this.sm.state === "ended";
  }

  /** Ended, or ending at the app's request: a resume under way stops. */
  private aborted(): boolean {
    return this.ended() || this.hangingUp;
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
      const reason = typeof m.reason === "string" ? m.reason : "deleted";
      // The server's goodbye to our own DELETE is still our hang-up.
      if (this.hangingUp) this.finish("hangup");
      else if (this.sm.state === "connecting") this.finish(reason);
      else {
        this.flow.onSessionEnded(Date.now(), reason);
        this.step();
      }
      return;
    }
    if (m && typeof m === "object" && m.type === "session.migrate") {
      if (this.sm.state !== "connecting") {
        this.flow.onMigrate(Date.now());
        this.step();
      }
      return;
    }
    this.emit("message", parsed);
  }

  /** Ends the call once: closes everything and emits `state` then `ended`. */
  private finish(reason: EndReason): boolean {
    if (!this.sm.end(reason)) return false;
    this.flow.end(reason);
    this.refresh.stop();
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.liveTimer) clearTimeout(this.liveTimer);
    this.liveTimer = null;
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
    this.turnTimer.close();
    for (const u of this.unhook.splice(0)) u();
    if (this.pending) closePeer(this.pending);
    this.pending = null;
    this.queued = [];
    closePeer({ pc: this.pc, channel: this.channel, turns: this.turns });
    this.emit("state", "ended");
    this.emit("ended", reason);
    return true;
  }
}
