// WHIP-shaped signaling (RFC 9725) against the voxgate transceiver, with no WebRTC in it:
// POST the offer (201, Location, answer), PATCH a new offer to the Location for an ICE restart
// (200, answer), DELETE the Location to hang up. ICE servers from the answer's `Link` headers
// (RFC 9725 section 4.6) are parsed when present. `fetch` is injectable for tests.
//
// Owns the call's resume credential (docs/continuity.md): every 201 and 200 carries
// `X-Voxgate-Resume` and `X-Voxgate-Resume-Ttl`; the latest one is kept, and once there is one
// it is the bearer of every request (it controls every session of the call, so a per-call token
// that expired meanwhile does not matter). `refreshResume` renews it, `resume` POSTs a new offer
// with it to the endpoint the call was created at.
//
// Every request but the first POST has a deadline (`requestTimeoutMs`, or the caller's for a
// resume): a transceiver that died without a reset (a host gone, a partition) would otherwise
// hold an ICE restart's PATCH for the browser's TCP timeout, far past the backend's resume window.

import { VoxgateError, errorForStatus } from "./errors";

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export interface SignalingOptions {
  /** Bearer token (a static token or a per-call token minted by the app). */
  token?: string;
  /** Metadata for the backend: sent as query parameters of the POST. */
  metadata?: Record<string, string>;
  fetch?: Fetch;
  /** How long a PATCH, GET, DELETE or credential refresh may wait for its answer (5000 ms). */
  requestTimeoutMs?: number;
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 5000;

export interface Created {
  /** Absolute URL of the session resource. */
  location: string;
  answer: string;
  iceServers: RTCIceServer[];
  /** The answer's resume credential, when the server sent one. */
  resume: ResumeCredential | null;
}

/** A resume credential (`vr1....`) and how long it is valid from when it arrived. */
export interface ResumeCredential {
  credential: string;
  ttlSecs: number;
}

/** The resume credential of an answer's headers, or null when it carries none. */
export function parseResumeHeaders(headers: Headers): ResumeCredential | null {
  const credential = headers.get("X-Voxgate-Resume")?.trim();
  if (!credential) return null;
  const ttl = Number(headers.get("X-Voxgate-Resume-Ttl") ?? "");
  return { credential, ttlSecs: Number.isFinite(ttl) && ttl > 0 ? ttl : 0 };
}

/**
 * A credential's payload, or null when unreadable. It is signed, not encrypted
 * (docs/continuity.md): base64url-nopad JSON `{"c","g","s","w","o","exp"}`.
 */
function credentialClaims(credential: string): Record<string, unknown> | null {
  const parts = credential.split(".");
  if (parts.length !== 3 || parts[0] !== "vr1") return null;
  try {
    const b64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
    const claims: unknown = JSON.parse(atob(b64 + "=".repeat((4 - (b64.length % 4)) % 4)));
    return claims && typeof claims === "object" ? (claims as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** The call generation a credential names (`g`), or null when unreadable. */
export function credentialGeneration(credential: string): number | null {
  const g = credentialClaims(credential)?.g;
  return typeof g === "number" ? g : null;
}

/** When a credential expires (`exp`, Unix seconds), or null when unreadable. */
export function credentialExpiry(credential: string): number | null {
  const exp = credentialClaims(credential)?.exp;
  return typeof exp === "number" ? exp : null;
}

/**
 * Whether `next` may replace `held`: not when it names an older generation of the call (a late
 * answer of the session a resume replaced; resuming with it would be refused as stale).
 */
export function supersedes(next: ResumeCredential, held: ResumeCredential | null): boolean {
  if (!held) return true;
  const a = credentialGeneration(next.credential);
  const b = credentialGeneration(held.credential);
  return a === null || b === null || a >= b;
}

/**
 * `Retry-After` in milliseconds (delay-seconds or an HTTP date, RFC 9110 section 10.2.3), or
 * undefined when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null || !value.trim()) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** The session id: the last path segment of its Location. */
export function sessionIdOf(location: string): string {
  const path = new URL(location, "http://x").pathname;
  return path.slice(path.lastIndexOf("/") + 1);
}

/** The POST endpoint for a signaling base URL (`https://host` or `https://host/v1/sessions`). */
export function sessionsUrl(base: string, metadata?: Record<string, string>): string {
  const url = new URL(base);
  if (!/\/v1\/sessions\/?$/.test(url.pathname)) {
    url.pathname = url.pathname.replace(/\/+$/, "") + "/v1/sessions";
  }
  for (const [k, v] of Object.entries(metadata ?? {})) url.searchParams.set(k, v);
  return url.toString();
}

/**
 * ICE servers from `Link` header values, e.g.
 * `<turn:turn.example.net?transport=udp>; rel="ice-server"; username="u"; credential="p"`.
 * Entries without `rel="ice-server"` are ignored.
 */
export function parseLinkIceServers(values: string[]): RTCIceServer[] {
  const servers: RTCIceServer[] = [];
  for (const value of values) {
    // Split on commas outside <...> and quotes.
    for (const entry of splitOutside(value, ",")) {
      const m = /^\s*<([^>]*)>(.*)$/.exec(entry);
      if (!m) continue;
      const params: Record<string, string> = {};
      for (const p of splitOutside(m[2], ";")) {
        const kv = /^\s*([A-Za-z-]+)\s*=\s*("([^"]*)"|[^\s;]*)\s*$/.exec(p);
        if (kv) params[kv[1].toLowerCase()] = kv[3] ?? kv[2];
      }
      if (params["rel"] !== "ice-server") continue;
      const server: RTCIceServer = { urls: m[1] };
      if (params["username"] !== undefined) server.username = params["username"];
      if (params["credential"] !== undefined) server.credential = params["credential"];
      servers.push(server);
    }
  }
  return servers;
}

function splitOutside(s: string, sep: string): string[] {
  const out: string[] = [];
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

export class Signaling {
  private readonly fetch: Fetch;
  /** The POST endpoint of `create` (a resume goes there too, not to a Location). */
  private endpoint = "";
  private latest: ResumeCredential | null = null;
  constructor(private readonly opts: SignalingOptions = {}) {
    this.fetch = opts.fetch ?? ((i, init) => globalThis.fetch(i, init));
  }

  /** The latest resume credential the server sent, or null before the first (or from an old server). */
  get credential(): ResumeCredential | null {
    return this.latest;
  }

  private headers(contentType?: string, bearer?: string): Record<string, string> {
    const h: Record<string, string> = {};
    if (contentType) h["Content-Type"] = contentType;
    const token = bearer ?? this.latest?.credential ?? this.opts.token;
    if (token) h["Authorization"] = `Bearer ${token}`;
    return h;
  }

  /** Keeps the answer's credential, if it carries one that is not older than the one held. */
  private remember(resp: Response): ResumeCredential | null {
    const r = parseResumeHeaders(resp.headers);
    if (r && supersedes(r, this.latest)) this.latest = r;
    return r;
  }

  /** Fetches with a deadline (`null`: none); no answer in time is a `network` error. */
  private async send(
    what: string,
    url: string,
    init: RequestInit,
    timeoutMs: number | null = this.opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
  ): Promise<Response> {
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
  async create(base: string, offer: string): Promise<Created> {
    this.endpoint = sessionsUrl(base, this.opts.metadata);
    // No deadline of its own: connect() bounds the whole first connection.
    const resp = await this.send(
      "POST",
      this.endpoint,
      { method: "POST", headers: this.headers("application/sdp"), body: offer },
      null,
    );
    const body = await resp.text();
    if (resp.status !== 201) throw errorForStatus(resp.status, "POST", body, retryAfterOf(resp));
    return this.created("POST", resp, body);
  }

  private created(what: string, resp: Response, body: string): Created {
    const loc = resp.headers.get("Location");
    if (!loc) throw new VoxgateError("signaling", `${what} answered 201 without a Location`, 201);
    const links = resp.headers.get("Link");
    return {
      location: new URL(loc, this.endpoint).toString(),
      answer: body,
      iceServers: links ? parseLinkIceServers([links]) : [],
      resume: this.remember(resp),
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
  async resume(
    offer: string,
    credential: string | undefined = this.latest?.credential,
    timeoutMs: number | null = null,
  ): Promise<Created> {
    if (!this.endpoint) throw new VoxgateError("closed", "resume before the call was created");
    if (!credential) throw new VoxgateError("resume_invalid", "no resume credential");
    const resp = await this.send(
      "POST (resume)",
      this.endpoint,
      { method: "POST", headers: this.headers("application/sdp", credential), body: offer },
      timeoutMs,
    );
    const body = await resp.text();
    if (resp.status === 201) return this.created("POST (resume)", resp, body);
    const detail = `POST (resume) answered ${resp.status}: ${body.trim().slice(0, 200)}`;
    if (resp.status === 401) {
      // The server's 401 does not say which (it refuses before reading the call); the
      // credential's own expiry does.
      const exp = credentialExpiry(credential);
      const expired = /expired/i.test(body) || (exp !== null && exp <= Date.now() / 1000);
      throw new VoxgateError(expired ? "resume_expired" : "resume_invalid", detail, 401);
    }
    if (resp.status === 409) throw new VoxgateError("resume_refused", detail, 409);
    if (resp.status === 410) throw new VoxgateError("call_gone", detail, 410);
    throw errorForStatus(resp.status, "POST (resume)", body, retryAfterOf(resp));
  }

  /** Renews the resume credential (`GET {location}/resume`); the new one. */
  async refreshResume(location: string): Promise<ResumeCredential> {
    const url = location.replace(/\/+$/, "") + "/resume";
    const resp = await this.send("GET", url, { method: "GET", headers: this.headers() });
    const body = (await resp.text()).trim();
    if (resp.status !== 200) throw errorForStatus(resp.status, "GET /resume", body);
    // The body is the credential; the headers say the same and carry its lifetime.
    const fromHeaders = parseResumeHeaders(resp.headers);
    const credential = body || fromHeaders?.credential;
    if (!credential) throw new VoxgateError("signaling", "GET /resume answered 200 without a credential", 200);
    const fresh = { credential, ttlSecs: fromHeaders?.ttlSecs ?? this.latest?.ttlSecs ?? 0 };
    if (supersedes(fresh, this.latest)) this.latest = fresh;
    return fresh;
  }

  /** ICE restart: PATCHes a new offer to the session; the answer. 404 → `not_found`. */
  async restart(location: string, offer: string): Promise<string> {
    const resp = await this.send("PATCH", location, {
      method: "PATCH",
      headers: this.headers("application/sdp"),
      body: offer,
    });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "PATCH", body, retryAfterOf(resp));
    this.remember(resp);
    return body;
  }

  /** Ends the session (best effort: a session already gone is not an error). */
  async hangup(location: string): Promise<number> {
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
  async probe(location: string, timeoutMs: number): Promise<number> {
    const resp = await this.send(
      "GET (probe)",
      location,
      { method: "GET", headers: this.headers(), cache: "no-store" },
      timeoutMs,
    );
    resp.body?.cancel().catch(() => {});
    return resp.status;
  }

  /** The server's view of the session (`GET` on the Location), as parsed JSON. */
  async session(location: string): Promise<unknown> {
    const resp = await this.send("GET", location, { method: "GET", headers: this.headers() });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "GET", body);
    return JSON.parse(body);
  }
}

function retryAfterOf(resp: Response): number | undefined {
  return parseRetryAfter(resp.headers.get("Retry-After"));
}
