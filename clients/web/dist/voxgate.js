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
  constructor(code, message, status, retryAfterMs) {
    super(message);
    this.name = "VoxgateError";
    this.code = code;
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }
};
function errorForStatus(status, what, body, retryAfterMs) {
  const detail = `${what} answered ${status}: ${body.trim().slice(0, 200)}`;
  if (status === 401 || status === 403) return new VoxgateError("unauthorized", detail, status);
  if (status === 404 || status === 410) return new VoxgateError("not_found", detail, status);
  if (status === 429 || status === 503) return new VoxgateError("busy", detail, status, retryAfterMs);
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
  maxBackoffMs: 4e3,
  resumeWindowMs: 25e3
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
    this.restartNow(now);
  }
  /** The path is broken, whatever ICE says yet: restart at once, without the grace. */
  restartNow(now) {
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

// src/continuity.ts
function restartResultOf(e) {
  if (!(e instanceof VoxgateError)) return "error";
  if (e.code === "not_found") return "not_found";
  if (e.code === "network") return "unreachable";
  if (e.status !== void 0 && e.status >= 500) return "server_error";
  return "error";
}
function resumeResultOf(e) {
  if (e instanceof VoxgateError) {
    if (e.code === "resume_expired" || e.code === "resume_invalid" || e.code === "resume_refused" || e.code === "call_gone") {
      return { kind: "final", reason: e.code };
    }
    if (e.code === "network" || e.code === "busy" || e.status !== void 0 && e.status >= 500) {
      return { kind: "retry", afterMs: e.retryAfterMs ?? null };
    }
    return { kind: "final", reason: "lost" };
  }
  return { kind: "retry", afterMs: null };
}
var Continuity = class {
  constructor(opts = {}) {
    this.mode = "ice";
    this.lastRestart = null;
    this.endWith = null;
    this.attempt = 0;
    this.inFlight = false;
    this.nextAt = 0;
    this.deadline = 0;
    /** Whether the call holds a resume credential (the call says so as answers arrive). */
    this.canResume = false;
    this.o = { ...DEFAULT_RECONNECT, ...opts };
    this.ice = new ReconnectPolicy(this.o);
  }
  /** Whether a resume is under way (between its trigger and the new session connecting). */
  get resuming() {
    return this.mode === "resume";
  }
  /** Whether the call is recovering: an ICE restart wanted or under way, or a resume. */
  get recovering() {
    return this.mode === "resume" || this.mode === "ice" && this.ice.recovering;
  }
  /** ICE restarts tried in the current outage. */
  get restartAttempts() {
    return this.ice.attempts;
  }
  /** Resume attempts in the current resume. */
  get resumeAttempts() {
    return this.attempt;
  }
  onIceState(now, state) {
    if (this.mode === "ice") this.ice.onIceState(now, state);
  }
  onNetworkChange(now) {
    if (this.mode === "ice") this.ice.onNetworkChange(now);
  }
  onRestartDone(now, result) {
    if (this.mode !== "ice") return;
    this.lastRestart = result;
    if (result === "not_found" || result === "unreachable") {
      this.startResume(now, "lost");
      return;
    }
    this.ice.onRestartDone(now, result === "ok" ? "ok" : "error");
  }
  /** Nothing arrived for `livenessMs`, and the probe of the session said `why`. */
  onSilentPath(now, why) {
    if (this.mode !== "ice") return;
    if (why === "alive") this.ice.restartNow(now);
    else if (why === "gone") this.startResume(now, "lost");
    else this.startResume(now, null);
  }
  /** The transceiver asked the call to move (`session.migrate`). */
  onMigrate(now) {
    if (this.mode === "ice") this.startResume(now, null);
  }
  /** The server's `session.ended` on the current session's data channel. */
  onSessionEnded(now, reason) {
    if (this.mode !== "ice") return;
    if (reason === "shutdown") this.startResume(now, "shutdown");
    else this.end(reason);
  }
  onResumeDone(now, result) {
    if (this.mode !== "resume") return;
    this.inFlight = false;
    if (result.kind === "ok") {
      this.mode = "ice";
      this.ice = new ReconnectPolicy(this.o);
      this.lastRestart = null;
      this.attempt = 0;
    } else if (result.kind === "final") {
      this.end(result.reason);
    } else {
      const backoff = Math.min(this.o.backoffMs * 2 ** (this.attempt - 1), this.o.maxBackoffMs);
      this.nextAt = now + Math.max(backoff, result.afterMs ?? 0);
    }
  }
  /** What to do at `now`. `end` comes once; after it, `none`. */
  poll(now) {
    if (this.mode === "ended") {
      if (this.endWith === null) return { kind: "none" };
      const reason = this.endWith;
      this.endWith = null;
      return { kind: "end", reason };
    }
    if (this.mode === "ice") {
      const d = this.ice.poll(now);
      if (d.kind !== "give_up") return d;
      if (this.lastRestart !== "server_error") {
        this.end("lost");
        return this.poll(now);
      }
      this.startResume(now, "lost");
      return this.poll(now);
    }
    if (this.inFlight) return { kind: "none" };
    if (this.nextAt > this.deadline) {
      this.end("lost");
      return this.poll(now);
    }
    if (now < this.nextAt) return { kind: "wait", at: this.nextAt };
    this.attempt += 1;
    this.inFlight = true;
    return { kind: "resume", attempt: this.attempt };
  }
  /** The latest time the current resume may still try (meaningful while `resuming`). */
  get resumeDeadline() {
    return this.deadline;
  }
  /** `orEnd`: the reason to end with when there is no credential (null: carry on as before). */
  startResume(now, orEnd) {
    if (!this.canResume) {
      if (orEnd !== null) this.end(orEnd);
      return;
    }
    this.mode = "resume";
    this.attempt = 0;
    this.inFlight = false;
    this.nextAt = now;
    this.deadline = now + this.o.resumeWindowMs;
  }
  /** Ends the recovery (the call's own hang-up, or a decision above). */
  end(reason) {
    if (this.mode === "ended") return;
    this.mode = "ended";
    this.endWith = reason;
  }
};

// src/liveness.ts
var DEFAULT_LIVENESS = {
  livenessPollMs: 200,
  livenessMs: 1200,
  probeTimeoutMs: 800
};
var MAX_SPACING = 8;
function probeResultOf(answer) {
  if (typeof answer === "number") {
    if (answer === 200) return "alive";
    if (answer === 404 || answer === 410) return "gone";
    return "other";
  }
  if (answer instanceof VoxgateError && answer.code === "network") return "unreachable";
  return "other";
}
var Liveness = class {
  /** `false` turns the watchdog off: `poll` never asks for anything. */
  constructor(opts = {}) {
    this.active = false;
    this.ids = 0;
    this.sampling = null;
    this.probing = null;
    this.nextSampleAt = 0;
    /** The last total seen since activation (null: none yet). */
    this.last = null;
    /** When a sample last saw the total change (or activation). */
    this.changedAt = 0;
    /** When the last sample came back. */
    this.sampledAt = 0;
    this.nextProbeAt = 0;
    /** Probes answered since the last traffic. */
    this.streak = 0;
    this.verdict = null;
    this.moved = false;
    this.enabled = opts !== false;
    this.o = { ...DEFAULT_LIVENESS, ...opts || {} };
  }
  get options() {
    return this.o;
  }
  /** Whether a sample since activation saw traffic (or had no counter to tell). */
  get traffic() {
    return this.moved;
  }
  /** Whether the call is connected and not recovering; a change starts the measure afresh. */
  setActive(now, active) {
    if (active === this.active) return;
    this.active = active;
    this.sampling = null;
    this.probing = null;
    this.verdict = null;
    this.moved = false;
    this.last = null;
    this.changedAt = now;
    this.sampledAt = now;
    this.nextSampleAt = now;
  }
  /** A sample's received total (null: the report had no counter). Stale ids are ignored. */
  onSample(now, id, total) {
    if (!this.active || id !== this.sampling) return;
    this.sampling = null;
    this.sampledAt = now;
    this.nextSampleAt = now + this.o.livenessPollMs;
    if (total === null || this.last !== null && total !== this.last) this.moved = true;
    if (total === null || total !== this.last) {
      this.last = total;
      this.changedAt = now;
      this.probing = null;
      this.streak = 0;
    }
  }
  /** How the probe went. Stale ids (traffic came meanwhile, or the call moved on) are ignored. */
  onProbeDone(now, id, result) {
    if (!this.active || id !== this.probing) return;
    this.probing = null;
    this.streak += 1;
    this.nextProbeAt = now + this.o.livenessMs * Math.min(2 ** (this.streak - 1), MAX_SPACING);
    if (result !== "other") this.verdict = { why: result, since: this.changedAt };
  }
  /** What to do at `now`. */
  poll(now) {
    if (!this.enabled || !this.active) return { kind: "none" };
    if (this.verdict) {
      const v = this.verdict;
      this.verdict = null;
      return { kind: "silent", why: v.why, since: v.since };
    }
    const silent = this.last !== null && this.sampledAt - this.changedAt >= this.o.livenessMs;
    if (silent && this.probing === null && this.sampledAt >= this.nextProbeAt) {
      this.probing = ++this.ids;
      return { kind: "probe", id: this.probing };
    }
    if (this.sampling !== null) return { kind: "none" };
    if (now < this.nextSampleAt) return { kind: "wait", at: this.nextSampleAt };
    this.sampling = ++this.ids;
    return { kind: "sample", id: this.sampling };
  }
};

// src/refresh.ts
var MIN_REFRESH_MS = 5e3;
var DEFAULT_RESUME_TTL_SECS = 120;
function refreshIntervalMs(ttlSecs) {
  const ttl = ttlSecs > 0 ? ttlSecs : DEFAULT_RESUME_TTL_SECS;
  return Math.max(MIN_REFRESH_MS, ttl * 1e3 / 3);
}
var RefreshSchedule = class {
  constructor() {
    this.at = null;
    this.interval = refreshIntervalMs(0);
    this.stopped = false;
  }
  /** A credential arrived at `now` (a 201, a 200 to PATCH, or a refresh). */
  onCredential(now, ttlSecs) {
    this.interval = refreshIntervalMs(ttlSecs);
    if (!this.stopped) this.at = now + this.interval;
  }
  /** A refresh failed: the next tick tries again (the credential in hand is still valid). */
  onRefreshFailed(now) {
    if (!this.stopped) this.at = now + this.interval;
  }
  /** When the next refresh is due; null before the first credential and after `stop`. */
  get nextAt() {
    return this.at;
  }
  /** The call ended: nothing is due any more. */
  stop() {
    this.stopped = true;
    this.at = null;
  }
};

// src/signaling.ts
var DEFAULT_REQUEST_TIMEOUT_MS = 5e3;
function parseResumeHeaders(headers) {
  const credential = headers.get("X-Voxgate-Resume")?.trim();
  if (!credential) return null;
  const ttl = Number(headers.get("X-Voxgate-Resume-Ttl") ?? "");
  return { credential, ttlSecs: Number.isFinite(ttl) && ttl > 0 ? ttl : 0 };
}
function credentialClaims(credential) {
  const parts = credential.split(".");
  if (parts.length !== 3 || parts[0] !== "vr1") return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims = JSON.parse(atob(b64 + "=".repeat((4 - b64.length % 4) % 4)));
    return claims && typeof claims === "object" ? claims : null;
  } catch {
    return null;
  }
}
function credentialGeneration(credential) {
  const g = credentialClaims(credential)?.g;
  return typeof g === "number" ? g : null;
}
function credentialExpiry(credential) {
  const exp = credentialClaims(credential)?.exp;
  return typeof exp === "number" ? exp : null;
}
function supersedes(next, held) {
  if (!held) return true;
  const a = credentialGeneration(next.credential);
  const b = credentialGeneration(held.credential);
  return a === null || b === null || a >= b;
}
function parseRetryAfter(value, now = Date.now()) {
  if (value === null || !value.trim()) return void 0;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1e3;
  const at = Date.parse(v);
  return Number.isNaN(at) ? void 0 : Math.max(0, at - now);
}
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
    /** The POST endpoint of `create` (a resume goes there too, not to a Location). */
    this.endpoint = "";
    this.latest = null;
    this.fetch = opts.fetch ?? ((i, init) => globalThis.fetch(i, init));
  }
  /** The latest resume credential the server sent, or null before the first (or from an old server). */
  get credential() {
    return this.latest;
  }
  headers(contentType, bearer) {
    const h = {};
    if (contentType) h["Content-Type"] = contentType;
    const token = bearer ?? this.latest?.credential ?? this.opts.token;
    if (token) h["Authorization"] = `Bearer ${token}`;
    return h;
  }
  /** Keeps the answer's credential, if it carries one that is not older than the one held. */
  remember(resp) {
    const r = parseResumeHeaders(resp.headers);
    if (r && supersedes(r, this.latest)) this.latest = r;
    return r;
  }
  /** Fetches with a deadline (`null`: none); no answer in time is a `network` error. */
  async send(what, url, init, timeoutMs = this.opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS) {
    const abort = timeoutMs === null ? null : new AbortController();
    const timer = abort ? setTimeout(() => abort.abort(), timeoutMs ?? 0) : null;
    try {
      return await this.fetch(url, abort ? { ...init, signal: abort.signal } : init);
    } catch (e) {
      const why = abort?.signal.aborted ? `no answer in ${timeoutMs} ms` : e instanceof Error ? e.message : String(e);
      throw new VoxgateError("network", `${what} ${url} failed: ${why}`);
    } finally {
      if (timer) clearTimeout(timer);
    }
  }
  /** POSTs the offer; the answer, the session's absolute Location and any ICE servers. */
  async create(base, offer) {
    this.endpoint = sessionsUrl(base, this.opts.metadata);
    const resp = await this.send(
      "POST",
      this.endpoint,
      { method: "POST", headers: this.headers("application/sdp"), body: offer },
      null
    );
    const body = await resp.text();
    if (resp.status !== 201) throw errorForStatus(resp.status, "POST", body, retryAfterOf(resp));
    return this.created("POST", resp, body);
  }
  created(what, resp, body) {
    const loc = resp.headers.get("Location");
    if (!loc) throw new VoxgateError("signaling", `${what} answered 201 without a Location`, 201);
    const links = resp.headers.get("Link");
    return {
      location: new URL(loc, this.endpoint).toString(),
      answer: body,
      iceServers: links ? parseLinkIceServers([links]) : [],
      resume: this.remember(resp)
    };
  }
  /**
   * Resumes the call on a new session: POSTs a new offer (of a new RTCPeerConnection) with the
   * credential as bearer to the endpoint `create` used. 201 → the new session; 401 →
   * `resume_expired` (the credential's `exp` has passed by this clock, or the answer says
   * "expired") or `resume_invalid`, 409 → `resume_refused`, 410 → `call_gone` (final); 429/503
   * → `busy` with `retryAfterMs`, other 5xx → `signaling`, a fetch that throws or gets no answer
   * within `timeoutMs` (default: none) → `network` (worth retrying).
   */
  async resume(offer, credential = this.latest?.credential, timeoutMs = null) {
    if (!this.endpoint) throw new VoxgateError("closed", "resume before the call was created");
    if (!credential) throw new VoxgateError("resume_invalid", "no resume credential");
    const resp = await this.send(
      "POST (resume)",
      this.endpoint,
      { method: "POST", headers: this.headers("application/sdp", credential), body: offer },
      timeoutMs
    );
    const body = await resp.text();
    if (resp.status === 201) return this.created("POST (resume)", resp, body);
    const detail = `POST (resume) answered ${resp.status}: ${body.trim().slice(0, 200)}`;
    if (resp.status === 401) {
      const exp = credentialExpiry(credential);
      const expired = /expired/i.test(body) || exp !== null && exp <= Date.now() / 1e3;
      throw new VoxgateError(expired ? "resume_expired" : "resume_invalid", detail, 401);
    }
    if (resp.status === 409) throw new VoxgateError("resume_refused", detail, 409);
    if (resp.status === 410) throw new VoxgateError("call_gone", detail, 410);
    throw errorForStatus(resp.status, "POST (resume)", body, retryAfterOf(resp));
  }
  /** Renews the resume credential (`GET {location}/resume`); the new one. */
  async refreshResume(location) {
    const url = location.replace(/\/+$/, "") + "/resume";
    const resp = await this.send("GET", url, { method: "GET", headers: this.headers() });
    const body = (await resp.text()).trim();
    if (resp.status !== 200) throw errorForStatus(resp.status, "GET /resume", body);
    const fromHeaders = parseResumeHeaders(resp.headers);
    const credential = body || fromHeaders?.credential;
    if (!credential) throw new VoxgateError("signaling", "GET /resume answered 200 without a credential", 200);
    const fresh = { credential, ttlSecs: fromHeaders?.ttlSecs ?? this.latest?.ttlSecs ?? 0 };
    if (supersedes(fresh, this.latest)) this.latest = fresh;
    return fresh;
  }
  /** ICE restart: PATCHes a new offer to the session; the answer. 404 → `not_found`. */
  async restart(location, offer) {
    const resp = await this.send("PATCH", location, {
      method: "PATCH",
      headers: this.headers("application/sdp"),
      body: offer
    });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "PATCH", body, retryAfterOf(resp));
    this.remember(resp);
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
  /**
   * The liveness probe (liveness.ts): `GET` on the Location with its own short deadline; the
   * status (the body is not read). No answer in `timeoutMs`, or none at all → `network`.
   */
  async probe(location, timeoutMs) {
    const resp = await this.send(
      "GET (probe)",
      location,
      { method: "GET", headers: this.headers(), cache: "no-store" },
      timeoutMs
    );
    resp.body?.cancel().catch(() => {
    });
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
function retryAfterOf(resp) {
  return parseRetryAfter(resp.headers.get("Retry-After"));
}

// src/stats.ts
var num = (v) => typeof v === "number" && Number.isFinite(v) ? v : 0;
function statsOf(report) {
  const all = [];
  const values = typeof report.values === "function" ? report.values() : report;
  for (const r of values) all.push(r);
  return all;
}
function receivedTotal(report) {
  const all = statsOf(report);
  const counter = (r) => {
    if (!r) return null;
    if (typeof r.bytesReceived === "number") return r.bytesReceived;
    if (typeof r.packetsReceived === "number") return r.packetsReceived;
    return null;
  };
  const transport = all.find((r) => r.type === "transport" && typeof r.selectedCandidatePairId === "string");
  const pair = transport ? all.find((r) => r.id === transport.selectedCandidatePairId) : all.find((r) => r.type === "candidate-pair" && r.nominated === true && r.state === "succeeded");
  return counter(pair) ?? counter(transport ?? all.find((r) => r.type === "transport"));
}
function summarise(report) {
  const all = statsOf(report);
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

// src/turns.ts
var TURNS_LABEL = "voxgate.turns";
var VOICED_DBFS = -50;
var MIN_SPURT_MS = 100;
var HANGOVER_MS = 250;
var QUIET_BEFORE_ONSET_MS = 100;
var MAX_SAMPLE_MS = 20;
var FIRST_SAMPLE_MS = 10;
var TurnDetector = class {
  constructor() {
    this.lastMicAt = null;
    /** Voiced time since the last HANGOVER_MS of quiet. */
    this.voicedMs = 0;
    this.lastVoicedAt = null;
    /** The end of speech, tentative until `confirmed`. */
    this.end = null;
    this.confirmed = false;
    this.onset = null;
    this.lastRemoteLoudAt = null;
  }
  /** A microphone sample at `tMs`; returns the turn it completes, if any. */
  mic(tMs, dbfs) {
    const dt = this.lastMicAt === null ? FIRST_SAMPLE_MS : Math.min(Math.max(tMs - this.lastMicAt, 0), MAX_SAMPLE_MS);
    this.lastMicAt = tMs;
    if (dbfs >= VOICED_DBFS) {
      this.voicedMs += dt;
      this.lastVoicedAt = tMs;
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
  remote(tMs, dbfs, rtpTimestamp) {
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
  get watching() {
    return this.end !== null && this.onset === null;
  }
  /** Forgets everything (a new connection: what was under way is not a turn of it). */
  reset() {
    this.lastMicAt = null;
    this.voicedMs = 0;
    this.lastVoicedAt = null;
    this.lastRemoteLoudAt = null;
    this.cancel();
  }
  cancel() {
    this.end = null;
    this.confirmed = false;
    this.onset = null;
  }
  complete() {
    const { end, onset } = this;
    if (end === null || onset === null || !this.confirmed) return null;
    this.cancel();
    return { speechEndAt: end, heardAt: onset.at, speechEndToHeardMs: onset.at - end, rtpTimestamp: onset.rtp };
  }
};
function levelDbfs(samples) {
  if (samples.length === 0) return -Infinity;
  let sum = 0;
  for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
  return 10 * Math.log10(sum / samples.length);
}
var finite = (v) => typeof v === "number" && Number.isFinite(v);
var round1 = (v) => v === null || !Number.isFinite(v) ? null : Math.round(v * 10) / 10;
var ReceiveDelays = class {
  constructor() {
    this.jb = { delay: 0, count: 0 };
    this.playout = { delay: 0, count: 0 };
  }
  take(report) {
    const all = [...typeof report.values === "function" ? report.values() : report];
    const inbound = all.find((s) => s.type === "inbound-rtp" && (s.kind ?? s.mediaType) === "audio");
    const playout = all.find((s) => s.type === "media-playout" && inbound && s.id === inbound.playoutId) ?? all.find((s) => s.type === "media-playout" && (s.kind === void 0 || s.kind === "audio"));
    const mean = (prev, delay, count) => {
      if (!finite(delay) || !finite(count)) return null;
      const [dd, dc] = [delay - prev.delay, count - prev.count];
      prev.delay = delay;
      prev.count = count;
      return dc > 0 && dd >= 0 ? dd / dc * 1e3 : null;
    };
    return {
      jitterBufferMs: inbound ? mean(this.jb, inbound.jitterBufferDelay, inbound.jitterBufferEmittedCount) : null,
      playoutMs: playout ? mean(this.playout, playout.totalPlayoutDelay, playout.totalSamplesCount) : null,
      rttMs: selectedRtt(all)
    };
  }
};
function selectedRtt(all) {
  const transport = all.find((s) => s.type === "transport" && typeof s.selectedCandidatePairId === "string");
  const pair = transport ? all.find((s) => s.type === "candidate-pair" && s.id === transport.selectedCandidatePairId) : all.find((s) => s.type === "candidate-pair" && s.nominated === true && s.state === "succeeded");
  return pair && finite(pair.currentRoundTripTime) ? pair.currentRoundTripTime * 1e3 : null;
}
function turnReportOf(turn, delays, sent = false) {
  const nonNegative = (v) => v !== null && v >= 0 ? round1(v) : null;
  const ts = turn.rtpTimestamp;
  return {
    speechEndToHeardMs: Math.max(0, round1(turn.speechEndToHeardMs) ?? 0),
    rtpTimestamp: ts !== null && Number.isInteger(ts) && ts >= 0 && ts <= 4294967295 ? ts : null,
    jitterBufferMs: nonNegative(delays.jitterBufferMs),
    playoutMs: nonNegative(delays.playoutMs),
    rttMs: nonNegative(delays.rttMs),
    sent
  };
}
function reportMessage(r) {
  return JSON.stringify({
    type: "turn.report",
    speech_end_to_heard_ms: r.speechEndToHeardMs,
    rtp_timestamp: r.rtpTimestamp,
    jitter_buffer_ms: r.jitterBufferMs,
    playout_ms: r.playoutMs,
    rtt_ms: r.rttMs
  });
}
var SOURCES = ["measured", "estimated", "client"];
var MAX_TURN_PARTS = 16;
function parseTurnLatency(data) {
  let m = data;
  if (typeof data === "string") {
    try {
      m = JSON.parse(data);
    } catch {
      return null;
    }
  }
  if (!m || typeof m !== "object") return null;
  const o = m;
  if (o.type !== "turn.latency" || !Number.isSafeInteger(o.turn) || o.turn < 0) return null;
  if (!finite(o.total_ms) || o.total_ms < 0) return null;
  if (!Array.isArray(o.parts) || o.parts.length === 0 || o.parts.length > MAX_TURN_PARTS) return null;
  const parts = [];
  for (const p of o.parts) {
    const q = p ?? {};
    if (typeof q.name !== "string" || q.name.length === 0 || q.name.length > 64) return null;
    if (!finite(q.ms) || q.ms < 0 && q.name !== "capture_send") return null;
    if (typeof q.source !== "string" || !SOURCES.includes(q.source)) return null;
    parts.push({ name: q.name, ms: q.ms, source: q.source });
  }
  return { turn: o.turn, totalMs: o.total_ms, parts };
}

// src/turn_timing.ts
var webAudioTap = (mic, remote, onSample) => {
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
  const level = (a) => {
    a.getFloatTimeDomainData(buf);
    return levelDbfs(buf);
  };
  let track = null;
  let source = null;
  let resumedAt = -Infinity;
  const timer = setInterval(() => {
    const t = performance.now();
    if (ctx.state === "suspended") {
      if (t - resumedAt >= 1e3) {
        resumedAt = t;
        ctx.resume().catch(() => {
        });
      }
      return;
    }
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
      ctx.close().catch(() => {
      });
    }
  };
};
var TurnTiming = class {
  constructor(sink, remoteStream, levelTap = webAudioTap) {
    this.sink = sink;
    this.remoteStream = remoteStream;
    this.levelTap = levelTap;
    this.detector = new TurnDetector();
    /** The receive-delay counters at the last report, of the current connection. */
    this.delays = new ReceiveDelays();
    this.tap = null;
    this.pc = null;
    this.turns = null;
  }
  /** The call's connection is now `pc` (with its turns channel): starts over; returns what
   * removes its listener. */
  adopt(pc, turns) {
    this.pc = pc;
    this.turns = turns;
    this.detector.reset();
    this.delays = new ReceiveDelays();
    const onTurns = (e) => this.onTurnsMessage(e.data);
    turns?.addEventListener("message", onTurns);
    return () => turns?.removeEventListener("message", onTurns);
  }
  /** Starts sampling `mic` (once; not without a mic track). */
  start(mic) {
    if (this.tap || this.sink.ended() || !mic || mic.getAudioTracks().length === 0) return;
    try {
      this.tap = this.levelTap(mic, this.remoteStream, (t, m, r) => this.onLevels(t, m, r));
    } catch (e) {
      console.debug("voxgate: no turn timing", e);
    }
  }
  close() {
    this.tap?.close();
    this.tap = null;
  }
  onLevels(tMs, micDbfs, remoteDbfs) {
    const spoke = this.detector.mic(tMs, micDbfs);
    const rtp = remoteDbfs >= VOICED_DBFS && this.detector.watching ? this.playingRtpTimestamp() : null;
    const heard = this.detector.remote(tMs, remoteDbfs, rtp);
    for (const turn of [spoke, heard]) if (turn) void this.reportTurn(turn);
  }
  /** The RTP timestamp of the reply's most recently played packet (null if none yet). */
  playingRtpTimestamp() {
    try {
      const receiver = this.pc?.getReceivers().find((r) => r.track?.kind === "audio");
      let latest = null;
      for (const s of receiver?.getSynchronizationSources() ?? []) {
        if (!latest || s.timestamp > latest.timestamp) latest = s;
      }
      return typeof latest?.rtpTimestamp === "number" ? latest.rtpTimestamp : null;
    } catch {
      return null;
    }
  }
  /** Sends a turn's report with the receive delays since the last one, and hands it on. */
  async reportTurn(turn) {
    const [pc, counters] = [this.pc, this.delays];
    if (!pc) return;
    let delays = { jitterBufferMs: null, playoutMs: null, rttMs: null };
    try {
      delays = counters.take(await pc.getStats());
    } catch {
    }
    if (this.sink.ended() || pc !== this.pc) return;
    const report = turnReportOf(turn, delays);
    const channel = this.turns;
    if (channel && channel.readyState === "open") {
      try {
        channel.send(reportMessage(report));
        report.sent = true;
      } catch {
      }
    }
    this.sink.report(report);
  }
  /** The turns channel carries the transceiver's splits only; anything else is dropped. */
  onTurnsMessage(data) {
    if (this.sink.ended()) return;
    const split = parseTurnLatency(data);
    if (split) this.sink.turn(split);
    else console.debug("voxgate: dropped a malformed message on voxgate.turns", data);
  }
};

// src/call.ts
var isUp = (ice) => ice === "connected" || ice === "completed";
var MAX_QUEUED_WHILE_RESUMING = 256;
function closePeer(peer) {
  for (const channel of [peer.channel, peer.turns]) {
    try {
      channel?.close();
    } catch {
    }
  }
  peer.pc.close();
}
var Call = class extends Emitter {
  constructor(p) {
    super();
    this.p = p;
    this.sm = new CallStateMachine();
    this.liveTimer = null;
    /**
     * An ICE restart's answer applied while ICE still says connected: `reconnecting` until the
     * watchdog sees traffic, since no ICE event may come to say the new path works.
     */
    this.awaitingTraffic = false;
    this.refresh = new RefreshSchedule();
    this.turns = null;
    this.detach = () => {
    };
    /** A resume's PeerConnection before its 201 (closed if the call ends meanwhile). */
    this.pending = null;
    this.location = "";
    this.timer = null;
    this.refreshTimer = null;
    this.refreshing = false;
    /** When the current connection stopped carrying media (null while it does). */
    this.pathLostAt = null;
    /** Where the current resume's gap started (set at its first swap). */
    this.gapFrom = null;
    this.unhook = [];
    /** `hangup()` sent its DELETE: whatever ends the call now, the app asked for it. */
    this.hangingUp = false;
    /** What `send()` got while resuming: sent on the new data channel once it is open. */
    this.queued = [];
    this.flow = new Continuity(p.reconnect);
    this.live = new Liveness(p.liveness ?? {});
    this.remoteStream = new MediaStream();
    const sink = {
      turn: (split) => this.emit("turn", split),
      report: (report) => this.emit("turnReport", report),
      ended: () => this.ended()
    };
    this.turnTimer = new TurnTiming(sink, this.remoteStream, p.levelTap);
    this.pc = p.pc;
    this.channel = p.channel;
    this.adopt({ pc: p.pc, channel: p.channel, turns: p.turns });
    this.watchNetwork();
  }
  /** Makes `peer` the call's connection; the previous one's listeners are removed. */
  adopt(peer) {
    this.detach();
    this.pc = peer.pc;
    this.channel = peer.channel;
    this.turns = peer.turns ?? null;
    const detachTurns = this.turnTimer.adopt(peer.pc, this.turns);
    const onTrack = (e) => {
      for (const t of this.remoteStream.getTracks()) {
        if (t.kind === e.track.kind && t !== e.track) this.remoteStream.removeTrack(t);
      }
      this.remoteStream.addTrack(e.track);
    };
    const onIce = () => this.onIce();
    const onMessage = (e) => this.onMessage(e.data);
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
  get state() {
    return this.sm.state;
  }
  get endReason() {
    return this.sm.endReason;
  }
  /** The id of the session that carries the call now (it changes on a resume). */
  get sessionId() {
    return this.location ? sessionIdOf(this.location) : "";
  }
  /** The session's URL (GET for its JSON, PATCH for ICE restarts, DELETE to end it). */
  get sessionUrl() {
    return this.location;
  }
  /** Attempts in the current outage: ICE restarts, or resume attempts once resuming. */
  get reconnectAttempts() {
    return this.flow.resuming ? this.flow.resumeAttempts : this.flow.restartAttempts;
  }
  /**
   * Sends the offer and waits for `connected`: ICE connected and the data channel open (or
   * throws, having ended the call).
   */
  async start(base, timeoutMs) {
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
  send(message) {
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
   * finds none (a 404 the browser logs as an error). A resume under way is abandoned; a session
   * its POST creates after this is DELETEd as soon as it is known.
   */
  async hangup() {
    const location = this.location;
    if (this.ended() || this.hangingUp) return;
    this.hangingUp = true;
    if (location) {
      try {
        await this.p.signaling.hangup(location);
      } catch {
      }
    }
    this.finish("hangup");
  }
  /** The current connection's stats: after a resume, the new one's (its counters start at 0). */
  async stats() {
    const report = await this.pc.getStats();
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
  async offer(pc, iceRestart) {
    if (iceRestart) pc.restartIce();
    await pc.setLocalDescription(await pc.createOffer({ iceRestart }));
    await this.gathered(pc);
    return pc.localDescription?.sdp ?? "";
  }
  gathered(pc) {
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
  async applyAnswer(pc, sdp) {
    const answer = this.p.answerTransform ? this.p.answerTransform(sdp) : sdp;
    await pc.setRemoteDescription({ type: "answer", sdp: answer });
  }
  /** A new credential arrived: the call can resume, and the next refresh is a third of its TTL away. */
  noteCredential(r) {
    if (!r) return;
    this.flow.canResume = !!this.p.newPeer;
    this.refresh.onCredential(Date.now(), r.ttlSecs);
    this.armRefresh();
  }
  armRefresh() {
    if (this.refreshTimer) clearTimeout(this.refreshTimer);
    this.refreshTimer = null;
    const at = this.refresh.nextAt;
    if (at === null || this.ended()) return;
    this.refreshTimer = setTimeout(() => void this.refreshTick(), Math.max(0, at - Date.now()));
  }
  /** Renews the credential while connected; a failure waits for the next tick, the call goes on. */
  async refreshTick() {
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
  untilConnected(timeoutMs) {
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
      const finish = (err) => {
        clearTimeout(t);
        off();
        this.pc.removeEventListener("iceconnectionstatechange", check);
        if (err) reject(err);
        else resolve();
      };
      const t = setTimeout(
        () => finish(new VoxgateError("network", `not connected after ${timeoutMs} ms`)),
        timeoutMs
      );
      const off = this.on("state", check);
      this.pc.addEventListener("iceconnectionstatechange", check);
      check();
    });
  }
  /** Waits until `peer` carries the call (ICE up, channel open); rejects on failure or the end. */
  untilPeerUp(peer, timeoutMs) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const ice = peer.pc.iceConnectionState;
        if (this.ended()) return finish(new VoxgateError("closed", "call ended during a resume"));
        if (isUp(ice) && peer.channel.readyState === "open") return finish(null);
        if (ice === "failed" || ice === "closed") finish(new Error(`resumed connection: ICE ${ice}`));
      };
      const finish = (err) => {
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
  onIce() {
    const ice = this.pc.iceConnectionState;
    if (this.ended()) return;
    if (isUp(ice)) this.pathLostAt = null;
    else this.pathLostAt ?? (this.pathLostAt = Date.now());
    if (this.flow.resuming) return;
    if (isUp(ice)) {
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
  watchNetwork() {
    const changed = () => {
      if (this.sm.state !== "connected") return;
      this.flow.onNetworkChange(Date.now());
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
  /** Acts on Continuity's decision at the current time. */
  step() {
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
  watch() {
    if (this.liveTimer) clearTimeout(this.liveTimer);
    this.liveTimer = null;
    if (this.aborted()) return;
    const now = Date.now();
    const watching = this.sm.state === "connected" || this.sm.state === "reconnecting" && this.awaitingTraffic;
    this.live.setActive(now, watching && !this.flow.recovering);
    for (; ; ) {
      const s = this.live.poll(now);
      if (s.kind === "sample") void this.sample(s.id);
      else if (s.kind === "probe") void this.probe(s.id);
      else if (s.kind === "silent") {
        this.flow.onSilentPath(now, s.why);
        if (this.flow.resuming) this.pathLostAt ?? (this.pathLostAt = s.since);
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
  async sample(id) {
    let total = null;
    try {
      total = receivedTotal(await this.pc.getStats());
    } catch {
    }
    this.live.onSample(Date.now(), id, total);
    if (this.awaitingTraffic && this.live.traffic && !this.flow.recovering && this.sm.to("connected")) {
      this.awaitingTraffic = false;
      this.emit("state", "connected");
    }
    this.watch();
  }
  async probe(id) {
    let result;
    try {
      result = probeResultOf(await this.p.signaling.probe(this.location, this.live.options.probeTimeoutMs));
    } catch (e) {
      result = probeResultOf(e);
    }
    this.live.onProbeDone(Date.now(), id, result);
    this.watch();
  }
  async restart() {
    const pc = this.pc;
    const before = this.p.signaling.credential;
    let outcome = "ok";
    try {
      const offer = await this.offer(pc, true);
      if (this.ended() || pc !== this.pc) return;
      const answer = await this.p.signaling.restart(this.location, offer);
      if (this.ended() || pc !== this.pc) return;
      await this.applyAnswer(pc, answer);
    } catch (e) {
      if (this.ended() || pc !== this.pc) return;
      outcome = restartResultOf(e);
      if (pc.signalingState === "have-local-offer") {
        try {
          await pc.setLocalDescription({ type: "rollback" });
        } catch {
        }
      }
    }
    const fresh = this.p.signaling.credential;
    if (fresh && fresh !== before) this.noteCredential(fresh);
    this.flow.onRestartDone(Date.now(), outcome);
    const ice = pc.iceConnectionState;
    if (isUp(ice)) {
      this.flow.onIceState(Date.now(), ice);
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
  async resume() {
    const newPeer = this.p.newPeer;
    if (!newPeer) return;
    const previousSessionId = this.sessionId;
    const peer = newPeer(this.pc.getConfiguration().iceServers ?? []);
    this.pending = peer;
    let result = { kind: "ok" };
    try {
      const offer = await this.offer(peer.pc, false);
      if (this.aborted()) return;
      const created = await this.p.signaling.resume(
        offer,
        void 0,
        Math.max(this.flow.resumeDeadline - Date.now(), 2e3)
      );
      if (this.aborted()) {
        await this.p.signaling.hangup(created.location).catch(() => 0);
        return;
      }
      this.gapFrom ?? (this.gapFrom = this.pathLostAt ?? Date.now());
      const old = { pc: this.pc, channel: this.channel, turns: this.turns };
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
      await this.untilPeerUp(peer, Math.max(left, 2e3));
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
  ended() {
    return this.sm.state === "ended";
  }
  /** Ended, or ending at the app's request: a resume under way stops. */
  aborted() {
    return this.ended() || this.hangingUp;
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
      const reason = typeof m.reason === "string" ? m.reason : "deleted";
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
  finish(reason) {
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
  const track = micStream.getAudioTracks()[0];
  const turnTiming = opts.turnTiming !== false && typeof AudioContext !== "undefined" && !!track;
  const newPeer = (iceServers) => {
    const pc = new RTCPeerConnection({ iceServers });
    if (track) pc.addTrack(track, micStream);
    else pc.addTransceiver("audio", { direction: "recvonly" });
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
      requestTimeoutMs: opts.requestTimeoutMs
    }),
    reconnect: opts.reconnect,
    liveness: opts.liveness,
    answerTransform: opts.answerTransform,
    gatherTimeoutMs: opts.gatherTimeoutMs ?? 1500,
    turnTiming
  });
  await call.start(url, opts.connectTimeoutMs ?? 15e3);
  return call;
}
export {
  Call,
  CallStateMachine,
  Continuity,
  DEFAULT_LIVENESS,
  DEFAULT_MIC,
  DEFAULT_RECONNECT,
  DEFAULT_RESUME_TTL_SECS,
  HANGOVER_MS,
  Liveness,
  MIN_SPURT_MS,
  QUIET_BEFORE_ONSET_MS,
  ReceiveDelays,
  ReconnectPolicy,
  RefreshSchedule,
  Signaling,
  TURNS_LABEL,
  TurnDetector,
  TurnTiming,
  VOICED_DBFS,
  VoxgateError,
  connect,
  credentialExpiry,
  credentialGeneration,
  levelDbfs,
  micConstraints,
  parseLinkIceServers,
  parseResumeHeaders,
  parseRetryAfter,
  parseTurnLatency,
  probeResultOf,
  receivedTotal,
  refreshIntervalMs,
  reportMessage,
  restartResultOf,
  resumeResultOf,
  sessionIdOf,
  sessionsUrl,
  summarise,
  webAudioTap
};
