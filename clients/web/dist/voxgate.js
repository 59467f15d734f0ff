// src/emitter.ts
var Emitter = class {
  constructor() {
    this.handlers = {};
  }
  on(event, handler) {
    var _a;
    ((_a = this.handlers)[event] ?? (_a[event] = [])).push(handler);
    return () => this.off(event, handler);
  }
  off(event, handler) {
    const list = this.handlers[event];
    if (list) this.handlers[event] = list.filter((h) => h !== handler);
  }
  emit(event, ...args) {
    for (const h of this.handlers[event] ?? []) {
      try {
        h(...args);
      } catch (e) {
        console.error(`voxgate: "${String(event)}" handler threw`, e);
      }
    }
  }
};

// src/errors.ts
var VoxgateError = class extends Error {
  constructor(code, message, status) {
    super(message);
    this.name = "VoxgateError";
    this.code = code;
    this.status = status;
  }
};
function errorForStatus(status, what, body) {
  const detail = `${what} answered ${status}: ${body.trim().slice(0, 200)}`;
  if (status === 401 || status === 403) return new VoxgateError("unauthorized", detail, status);
  if (status === 404 || status === 410) return new VoxgateError("not_found", detail, status);
  if (status === 429 || status === 503) return new VoxgateError("busy", detail, status);
  return new VoxgateError("signaling", detail, status);
}

// src/state.ts
var ALLOWED = {
  connecting: ["connected", "ended"],
  connected: ["reconnecting", "ended"],
  reconnecting: ["connected", "ended"],
  ended: []
};
var CallStateMachine = class {
  constructor() {
    this.current = "connecting";
    this.why = null;
  }
  get state() {
    return this.current;
  }
  get endReason() {
    return this.why;
  }
  /** Moves to `next` if allowed; returns whether the state changed. */
  to(next) {
    if (!ALLOWED[this.current].includes(next)) return false;
    this.current = next;
    return true;
  }
  /** Ends the call with `reason` unless it has ended already; returns whether it ended now. */
  end(reason) {
    if (this.current === "ended") return false;
    this.current = "ended";
    this.why = reason;
    return true;
  }
};

// src/reconnect.ts
var DEFAULT_RECONNECT = {
  disconnectGraceMs: 1e3,
  maxAttempts: 5,
  backoffMs: 500,
  maxBackoffMs: 4e3
};
var ReconnectPolicy = class {
  constructor(opts = {}) {
    this.disconnectedSince = null;
    this.wanted = false;
    this.attempt = 0;
    this.nextAt = 0;
    this.inFlight = false;
    this.gaveUp = false;
    this.notFound = false;
    this.o = { ...DEFAULT_RECONNECT, ...opts };
  }
  /** Whether the call is between losing its path and getting it back. */
  get recovering() {
    return this.wanted || this.inFlight;
  }
  get attempts() {
    return this.attempt;
  }
  onIceState(now, state) {
    if (state === "connected" || state === "completed") {
      this.disconnectedSince = null;
      this.wanted = false;
      if (!this.inFlight) this.attempt = 0;
    } else if (state === "disconnected") {
      this.disconnectedSince ?? (this.disconnectedSince = now);
    } else if (state === "failed") {
      this.want(now);
    }
  }
  /** The browser says the network changed (a new interface, `online`). */
  onNetworkChange(now) {
    this.want(now);
  }
  want(now) {
    if (!this.wanted) {
      this.wanted = true;
      this.nextAt = Math.max(this.nextAt, now);
    }
  }
  /** What to do at `now`. */
  poll(now) {
    if (this.gaveUp) return { kind: "none" };
    if (this.notFound) {
      this.gaveUp = true;
      return { kind: "give_up", reason: "lost" };
    }
    if (!this.wanted && this.disconnectedSince !== null) {
      const due = this.disconnectedSince + this.o.disconnectGraceMs;
      if (now < due) return { kind: "wait", at: due };
      this.want(now);
    }
    if (!this.wanted || this.inFlight) return { kind: "none" };
    if (this.attempt >= this.o.maxAttempts) {
      this.gaveUp = true;
      return { kind: "give_up", reason: "lost" };
    }
    if (now < this.nextAt) return { kind: "wait", at: this.nextAt };
    this.attempt += 1;
    this.inFlight = true;
    return { kind: "restart", attempt: this.attempt };
  }
  /** How the restart's PATCH went. `ok` means an answer was applied, not that ICE is back. */
  onRestartDone(now, outcome) {
    this.inFlight = false;
    if (outcome === "not_found") {
      this.notFound = true;
      return;
    }
    const backoff = Math.min(this.o.backoffMs * 2 ** (this.attempt - 1), this.o.maxBackoffMs);
    this.nextAt = now + backoff;
    this.wanted = true;
  }
  /** Whether a `not_found` (or running out of attempts) ended recovery for good. */
  get lost() {
    return this.gaveUp || this.notFound;
  }
};

// src/signaling.ts
function sessionIdOf(location) {
  const path = new URL(location, "http://x").pathname;
  return path.slice(path.lastIndexOf("/") + 1);
}
function sessionsUrl(base, metadata) {
  const url = new URL(base);
  if (!/\/v1\/sessions\/?$/.test(url.pathname)) {
    url.pathname = url.pathname.replace(/\/+$/, "") + "/v1/sessions";
  }
  for (const [k, v] of Object.entries(metadata ?? {})) url.searchParams.set(k, v);
  return url.toString();
}
function parseLinkIceServers(values) {
  const servers = [];
  for (const value of values) {
    for (const entry of splitOutside(value, ",")) {
      const m = /^\s*<([^>]*)>(.*)$/.exec(entry);
      if (!m) continue;
      const params = {};
      for (const p of splitOutside(m[2], ";")) {
        const kv = /^\s*([A-Za-z-]+)\s*=\s*("([^"]*)"|[^\s;]*)\s*$/.exec(p);
        if (kv) params[kv[1].toLowerCase()] = kv[3] ?? kv[2];
      }
      if (params["rel"] !== "ice-server") continue;
      const server = { urls: m[1] };
      if (params["username"] !== void 0) server.username = params["username"];
      if (params["credential"] !== void 0) server.credential = params["credential"];
      servers.push(server);
    }
  }
  return servers;
}
function splitOutside(s, sep) {
  const out = [];
  let cur = "";
  let angle = false;
  let quote = false;
  for (const ch of s) {
    if (ch === "<" && !quote) angle = true;
    else if (ch === ">" && !quote) angle = false;
    else if (ch === '"' && !angle) quote = !quote;
    if (ch === sep && !angle && !quote) {
      out.push(cur);
      cur = "";
    } else cur += ch;
  }
  if (cur.trim()) out.push(cur);
  return out;
}
var Signaling = class {
  constructor(opts = {}) {
    this.opts = opts;
    this.fetch = opts.fetch ?? ((i, init) => globalThis.fetch(i, init));
  }
  headers(contentType) {
    const h = {};
    if (contentType) h["Content-Type"] = contentType;
    if (this.opts.token) h["Authorization"] = `Bearer ${this.opts.token}`;
    return h;
  }
  async send(what, url, init) {
    try {
      return await this.fetch(url, init);
    } catch (e) {
      throw new VoxgateError("network", `${what} ${url} failed: ${e instanceof Error ? e.message : e}`);
    }
  }
  /** POSTs the offer; the answer, the session's absolute Location and any ICE servers. */
  async create(base, offer) {
    const url = sessionsUrl(base, this.opts.metadata);
    const resp = await this.send("POST", url, {
      method: "POST",
      headers: this.headers("application/sdp"),
      body: offer
    });
    const body = await resp.text();
    if (resp.status !== 201) throw errorForStatus(resp.status, "POST", body);
    const loc = resp.headers.get("Location");
    if (!loc) throw new VoxgateError("signaling", "POST answered 201 without a Location", 201);
    const links = resp.headers.get("Link");
    return {
      location: new URL(loc, url).toString(),
      answer: body,
      iceServers: links ? parseLinkIceServers([links]) : []
    };
  }
  /** ICE restart: PATCHes a new offer to the session; the answer. 404 → `not_found`. */
  async restart(location, offer) {
    const resp = await this.send("PATCH", location, {
      method: "PATCH",
      headers: this.headers("application/sdp"),
      body: offer
    });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "PATCH", body);
    return body;
  }
  /** Ends the session (best effort: a session already gone is not an error). */
  async hangup(location) {
    const resp = await this.send("DELETE", location, { method: "DELETE", headers: this.headers() });
    if (resp.status !== 204 && resp.status !== 404 && resp.status !== 410) {
      throw errorForStatus(resp.status, "DELETE", await resp.text());
    }
    return resp.status;
  }
  /** The server's view of the session (`GET` on the Location), as parsed JSON. */
  async session(location) {
    const resp = await this.send("GET", location, { method: "GET", headers: this.headers() });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "GET", body);
    return JSON.parse(body);
  }
};

// src/stats.ts
var num = (v) => typeof v === "number" && Number.isFinite(v) ? v : 0;
function summarise(report) {
  const all = [];
  const values = typeof report.values === "function" ? report.values() : report;
  for (const r of values) all.push(r);
  const byId = new Map(all.map((r) => [r.id, r]));
  const s = {
    packetsSent: 0,
    bytesSent: 0,
    packetsReceived: 0,
    packetsLost: 0,
    jitter: null,
    rtt: null,
    totalAudioEnergy: 0,
    micLevel: null,
    jitterBufferDelayMs: null,
    selectedPair: null,
    uplink: null
  };
  let selected = null;
  for (const r of all) {
    if (r.type === "transport" && typeof r.selectedCandidatePairId === "string") {
      selected = r.selectedCandidatePairId;
    }
  }
  const where = (id) => {
    const c = typeof id === "string" ? byId.get(id) : void 0;
    if (!c) return null;
    return `${String(c.protocol ?? "?")} ${String(c.address ?? c.ip ?? "?")}:${String(c.port ?? "?")}`;
  };
  for (const r of all) {
    const kind = r.kind ?? r.mediaType;
    if (r.type === "outbound-rtp" && kind === "audio") {
      s.packetsSent += num(r.packetsSent);
      s.bytesSent += num(r.bytesSent);
    } else if (r.type === "inbound-rtp" && kind === "audio") {
      s.packetsReceived += num(r.packetsReceived);
      s.packetsLost += num(r.packetsLost);
      s.totalAudioEnergy += num(r.totalAudioEnergy);
      if (typeof r.jitter === "number") s.jitter = r.jitter;
      const emitted = num(r.jitterBufferEmittedCount);
      if (emitted > 0) s.jitterBufferDelayMs = num(r.jitterBufferDelay) / emitted * 1e3;
    } else if (r.type === "remote-inbound-rtp" && kind === "audio") {
      s.uplink = {
        rtt: typeof r.roundTripTime === "number" ? r.roundTripTime : null,
        jitter: typeof r.jitter === "number" ? r.jitter : null,
        packetsLost: num(r.packetsLost),
        fractionLost: typeof r.fractionLost === "number" ? r.fractionLost : null
      };
    } else if (r.type === "media-source" && kind === "audio" && typeof r.audioLevel === "number") {
      s.micLevel = r.audioLevel;
    } else if (r.type === "candidate-pair" && (selected ? r.id === selected : r.nominated === true && r.state === "succeeded")) {
      if (typeof r.currentRoundTripTime === "number") s.rtt = r.currentRoundTripTime;
      s.selectedPair = { local: where(r.localCandidateId), remote: where(r.remoteCandidateId) };
    }
  }
  return s;
}

// src/call.ts
var Call = class extends Emitter {
  constructor(p) {
    super();
    this.p = p;
    this.sm = new CallStateMachine();
    this.location = "";
    this.timer = null;
    this.unhook = [];
    /** `hangup()` sent its DELETE: whatever ends the call now, the app asked for it. */
    this.hangingUp = false;
    /**
     * Where a resume on another transceiver (issue 38 item 3) plugs in: called when this
     * transceiver no longer has the session. Returning true means the call carries on.
     */
    this.onSessionLost = null;
    this.policy = new ReconnectPolicy(p.reconnect);
    this.remoteStream = new MediaStream();
    p.pc.addEventListener("track", (e) => this.remoteStream.addTrack(e.track));
    p.pc.addEventListener("iceconnectionstatechange", () => this.onIce());
    p.channel.addEventListener("message", (e) => this.onMessage(e.data));
    p.channel.addEventListener("open", () => this.onIce());
    this.watchNetwork();
  }
  get state() {
    return this.sm.state;
  }
  get endReason() {
    return this.sm.endReason;
  }
  /** The session id the transceiver gave the call. */
  get sessionId() {
    return this.location ? sessionIdOf(this.location) : "";
  }
  /** The session's URL (GET for its JSON, PATCH for ICE restarts, DELETE to end it). */
  get sessionUrl() {
    return this.location;
  }
  /** ICE restarts tried in the current outage. */
  get reconnectAttempts() {
    return this.policy.attempts;
  }
  /**
   * Sends the offer and waits for `connected`: ICE connected and the data channel open (or
   * throws, having ended the call).
   */
  async start(base, timeoutMs) {
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
  send(message) {
    if (this.p.channel.readyState !== "open") {
      throw new VoxgateError("closed", `data channel is ${this.p.channel.readyState}`);
    }
    this.p.channel.send(typeof message === "string" ? message : JSON.stringify(message));
  }
  mute() {
    this.setMic(false);
  }
  unmute() {
    this.setMic(true);
  }
  get muted() {
    return !!this.p.micStream && this.p.micStream.getAudioTracks().every((t) => !t.enabled);
  }
  /**
   * Ends the call: DELETE on the session, then closes the connection. In that order: a
   * connection closed first makes the server end the session itself, and the DELETE then
   * finds none (a 404 the browser logs as an error).
   */
  async hangup() {
    const location = this.location;
    if (this.ended()) return;
    this.hangingUp = true;
    if (location) {
      try {
        await this.p.signaling.hangup(location);
      } catch {
      }
    }
    this.finish("hangup");
  }
  async stats() {
    const report = await this.p.pc.getStats();
    return summarise(report);
  }
  /** The server's JSON view of the session. */
  async session() {
    return this.p.signaling.session(this.location);
  }
  // ---- internals ---------------------------------------------------------------------------
  setMic(enabled) {
    for (const t of this.p.micStream?.getAudioTracks() ?? []) t.enabled = enabled;
  }
  async offer(iceRestart) {
    const pc = this.p.pc;
    if (iceRestart) pc.restartIce();
    await pc.setLocalDescription(await pc.createOffer({ iceRestart }));
    await this.gathered();
    return pc.localDescription?.sdp ?? "";
  }
  gathered() {
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
  async applyAnswer(sdp) {
    const answer = this.p.answerTransform ? this.p.answerTransform(sdp) : sdp;
    await this.p.pc.setRemoteDescription({ type: "answer", sdp: answer });
  }
  untilConnected(timeoutMs) {
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
      const finish = (err) => {
        clearTimeout(t);
        off();
        this.p.pc.removeEventListener("iceconnectionstatechange", check);
        if (err) reject(err);
        else resolve();
      };
      const t = setTimeout(
        () => finish(new VoxgateError("network", `not connected after ${timeoutMs} ms`)),
        timeoutMs
      );
      const off = this.on("state", check);
      this.p.pc.addEventListener("iceconnectionstatechange", check);
      check();
    });
  }
  onIce() {
    const ice = this.p.pc.iceConnectionState;
    if (this.sm.state === "ended") return;
    if (ice === "connected" || ice === "completed") {
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
  watchNetwork() {
    const changed = () => {
      if (this.sm.state !== "connected") return;
      this.policy.onNetworkChange(Date.now());
      this.step();
    };
    if (typeof window !== "undefined") {
      window.addEventListener("online", changed);
      this.unhook.push(() => window.removeEventListener("online", changed));
    }
    const conn = globalThis.navigator?.connection;
    if (conn && typeof conn.addEventListener === "function") {
      conn.addEventListener("change", changed);
      this.unhook.push(() => conn.removeEventListener("change", changed));
    }
  }
  /** Acts on the policy's decision at the current time. */
  step() {
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
  async restart() {
    let outcome = "ok";
    try {
      const offer = await this.offer(true);
      if (this.ended()) return;
      const answer = await this.p.signaling.restart(this.location, offer);
      if (this.ended()) return;
      await this.applyAnswer(answer);
    } catch (e) {
      outcome = e instanceof VoxgateError && e.code === "not_found" ? "not_found" : "error";
      if (this.p.pc.signalingState === "have-local-offer") {
        try {
          await this.p.pc.setLocalDescription({ type: "rollback" });
        } catch {
        }
      }
    }
    this.policy.onRestartDone(Date.now(), outcome);
    const ice = this.p.pc.iceConnectionState;
    if (ice === "connected" || ice === "completed") this.policy.onIceState(Date.now(), ice);
    this.step();
  }
  /** Whether the call has ended (a method, so a check after an await is not narrowed away). */
  ended() {
    return this.sm.state === "ended";
  }
  async lost() {
    if (this.onSessionLost && await this.onSessionLost()) return;
    this.finish("lost");
  }
  onMessage(data) {
    let parsed = data;
    if (typeof data === "string") {
      try {
        parsed = JSON.parse(data);
      } catch {
        parsed = data;
      }
    }
    const m = parsed;
    if (m && typeof m === "object" && m.type === "session.ended") {
      this.finish(this.hangingUp ? "hangup" : typeof m.reason === "string" ? m.reason : "deleted");
      return;
    }
    this.emit("message", parsed);
  }
  /** Ends the call once: closes everything and emits `state` then `ended`. */
  finish(reason) {
    if (!this.sm.end(reason)) return false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    for (const u of this.unhook.splice(0)) u();
    try {
      this.p.channel.close();
    } catch {
    }
    this.p.pc.close();
    this.emit("state", "ended");
    this.emit("ended", reason);
    return true;
  }
};

// src/mic.ts
var DEFAULT_MIC = {
  echoCancellation: true,
  noiseSuppression: false,
  autoGainControl: false,
  channelCount: 1,
  sampleRate: 48e3
};
function micConstraints(overrides) {
  return { ...DEFAULT_MIC, ...overrides === true || !overrides ? {} : overrides };
}

// src/index.ts
async function connect(url, opts = {}) {
  const micStream = opts.audio instanceof MediaStream ? opts.audio : await navigator.mediaDevices.getUserMedia({ audio: micConstraints(opts.audio) });
  const pc = new RTCPeerConnection({ iceServers: opts.iceServers ?? [] });
  const track = micStream.getAudioTracks()[0];
  if (track) pc.addTrack(track, micStream);
  else pc.addTransceiver("audio", { direction: "recvonly" });
  const channel = pc.createDataChannel(opts.channelLabel ?? "oai-events");
  const call = new Call({
    pc,
    channel,
    micStream,
    signaling: new Signaling({ token: opts.token, metadata: opts.metadata, fetch: opts.fetch }),
    reconnect: opts.reconnect,
    answerTransform: opts.answerTransform,
    gatherTimeoutMs: opts.gatherTimeoutMs ?? 1500
  });
  await call.start(url, opts.connectTimeoutMs ?? 15e3);
  return call;
}
export {
  Call,
  CallStateMachine,
  DEFAULT_MIC,
  DEFAULT_RECONNECT,
  ReconnectPolicy,
  Signaling,
  VoxgateError,
  connect,
  micConstraints,
  parseLinkIceServers,
  sessionIdOf,
  sessionsUrl,
  summarise
};
