// WHIP-shaped signaling (RFC 9725) against the voxgate transceiver, with no WebRTC in it:
// POST the offer (201, Location, answer), PATCH a new offer to the Location for an ICE restart
// (200, answer), DELETE the Location to hang up. ICE servers from the answer's `Link` headers
// (RFC 9725 section 4.6) are parsed when present. `fetch` is injectable for tests.

import { VoxgateError, errorForStatus } from "./errors";

export type Fetch = (input: string, init: RequestInit) => Promise<Response>;

export interface SignalingOptions {
  /** Bearer token (a static token or a per-call token minted by the app). */
  token?: string;
  /** Metadata for the backend: sent as query parameters of the POST. */
  metadata?: Record<string, string>;
  fetch?: Fetch;
}

export interface Created {
  /** Absolute URL of the session resource. */
  location: string;
  answer: string;
  iceServers: RTCIceServer[];
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
  constructor(private readonly opts: SignalingOptions = {}) {
    this.fetch = opts.fetch ?? ((i, init) => globalThis.fetch(i, init));
  }

  private headers(contentType?: string): Record<string, string> {
    const h: Record<string, string> = {};
    if (contentType) h["Content-Type"] = contentType;
    if (this.opts.token) h["Authorization"] = `Bearer ${this.opts.token}`;
    return h;
  }

  private async send(what: string, url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.fetch(url, init);
    } catch (e) {
      throw new VoxgateError("network", `${what} ${url} failed: ${e instanceof Error ? e.message : e}`);
    }
  }

  /** POSTs the offer; the answer, the session's absolute Location and any ICE servers. */
  async create(base: string, offer: string): Promise<Created> {
    const url = sessionsUrl(base, this.opts.metadata);
    const resp = await this.send("POST", url, {
      method: "POST",
      headers: this.headers("application/sdp"),
      body: offer,
    });
    const body = await resp.text();
    if (resp.status !== 201) throw errorForStatus(resp.status, "POST", body);
    const loc = resp.headers.get("Location");
    if (!loc) throw new VoxgateError("signaling", "POST answered 201 without a Location", 201);
    const links = resp.headers.get("Link");
    return {
      location: new URL(loc, url).toString(),
      answer: body,
      iceServers: links ? parseLinkIceServers([links]) : [],
    };
  }

  /** ICE restart: PATCHes a new offer to the session; the answer. 404 → `not_found`. */
  async restart(location: string, offer: string): Promise<string> {
    const resp = await this.send("PATCH", location, {
      method: "PATCH",
      headers: this.headers("application/sdp"),
      body: offer,
    });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "PATCH", body);
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

  /** The server's view of the session (`GET` on the Location), as parsed JSON. */
  async session(location: string): Promise<unknown> {
    const resp = await this.send("GET", location, { method: "GET", headers: this.headers() });
    const body = await resp.text();
    if (resp.status !== 200) throw errorForStatus(resp.status, "GET", body);
    return JSON.parse(body);
  }
}
