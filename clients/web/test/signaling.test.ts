import { describe, expect, it } from "vitest";
import {
  Signaling,
  credentialExpiry,
  credentialGeneration,
  parseLinkIceServers,
  parseResumeHeaders,
  parseRetryAfter,
  sessionIdOf,
  sessionsUrl,
} from "../src/signaling";
import { VoxgateError } from "../src/errors";

interface Seen {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: unknown;
}

function fakeFetch(status: number, body: string, headers: Record<string, string> = {}) {
  const seen: Seen[] = [];
  const fetch = async (url: string, init: RequestInit) => {
    seen.push({
      url,
      method: String(init.method),
      headers: (init.headers ?? {}) as Record<string, string>,
      body: init.body,
    });
    return new Response(status === 204 ? null : body, { status, headers });
  };
  return { fetch, seen };
}

describe("Signaling", () => {
  it("POSTs the offer as application/sdp with the bearer token and metadata", async () => {
    const f = fakeFetch(201, "v=0 answer", { Location: "/v1/sessions/abc123" });
    const s = new Signaling({ token: "t0k", metadata: { room: "r1" }, fetch: f.fetch });
    const created = await s.create("http://host:8080", "v=0 offer");
    expect(f.seen).toHaveLength(1);
    expect(f.seen[0].method).toBe("POST");
    expect(f.seen[0].url).toBe("http://host:8080/v1/sessions?room=r1");
    expect(f.seen[0].headers["Content-Type"]).toBe("application/sdp");
    expect(f.seen[0].headers["Authorization"]).toBe("Bearer t0k");
    expect(f.seen[0].body).toBe("v=0 offer");
    expect(created.location).toBe("http://host:8080/v1/sessions/abc123");
    expect(created.answer).toBe("v=0 answer");
    expect(created.iceServers).toEqual([]);
  });

  it("a 201 without Location is a signaling error", async () => {
    const f = fakeFetch(201, "v=0");
    await expect(new Signaling({ fetch: f.fetch }).create("http://h", "o")).rejects.toMatchObject({
      code: "signaling",
    });
  });

  it("maps refusals to typed errors with the status", async () => {
    for (const [status, code] of [
      [401, "unauthorized"],
      [503, "busy"],
      [429, "busy"],
      [400, "signaling"],
    ] as const) {
      const f = fakeFetch(status, "no");
      const err = await new Signaling({ fetch: f.fetch }).create("http://h", "o").catch((e) => e);
      expect(err).toBeInstanceOf(VoxgateError);
      expect(err.code).toBe(code);
      expect(err.status).toBe(status);
    }
  });

  it("a fetch that throws is a network error", async () => {
    const s = new Signaling({
      fetch: async () => {
        throw new TypeError("Failed to fetch");
      },
    });
    await expect(s.create("http://h", "o")).rejects.toMatchObject({ code: "network" });
  });

  it("PATCHes the ICE-restart offer to the Location and returns the answer", async () => {
    const f = fakeFetch(200, "v=0 new answer");
    const s = new Signaling({ token: "t", fetch: f.fetch });
    const answer = await s.restart("http://h/v1/sessions/abc", "v=0 restart offer");
    expect(answer).toBe("v=0 new answer");
    expect(f.seen[0]).toMatchObject({
      method: "PATCH",
      url: "http://h/v1/sessions/abc",
      body: "v=0 restart offer",
    });
    expect(f.seen[0].headers["Content-Type"]).toBe("application/sdp");
    expect(f.seen[0].headers["Authorization"]).toBe("Bearer t");
  });

  it("a PATCH answered 404 is not_found (the session is gone)", async () => {
    const f = fakeFetch(404, "not found");
    const err = await new Signaling({ fetch: f.fetch }).restart("http://h/v1/sessions/x", "o").catch((e) => e);
    expect(err.code).toBe("not_found");
  });

  it("DELETEs the Location; a session already gone is fine", async () => {
    const f = fakeFetch(204, "");
    expect(await new Signaling({ fetch: f.fetch }).hangup("http://h/v1/sessions/x")).toBe(204);
    expect(f.seen[0].method).toBe("DELETE");
    const g = fakeFetch(404, "gone");
    expect(await new Signaling({ fetch: g.fetch }).hangup("http://h/v1/sessions/x")).toBe(404);
  });

  it("reads ICE servers from the answer's Link header", async () => {
    const f = fakeFetch(201, "v=0", {
      Location: "/v1/sessions/a",
      Link: '<turn:turn.example.net:3478?transport=udp>; rel="ice-server"; username="u1"; credential="p,1"',
    });
    const created = await new Signaling({ fetch: f.fetch }).create("http://h", "o");
    expect(created.iceServers).toEqual([
      { urls: "turn:turn.example.net:3478?transport=udp", username: "u1", credential: "p,1" },
    ]);
  });
});

describe("Link and URL helpers", () => {
  it("keeps only rel=ice-server entries, several per header", () => {
    expect(
      parseLinkIceServers([
        '<stun:stun.example.net>; rel="ice-server", <https://x/doc>; rel="help", <turns:t.example.net>; rel=ice-server; username=a; credential=b',
      ]),
    ).toEqual([
      { urls: "stun:stun.example.net" },
      { urls: "turns:t.example.net", username: "a", credential: "b" },
    ]);
  });

  it("builds the sessions endpoint from a base URL or takes it as given", () => {
    expect(sessionsUrl("https://h")).toBe("https://h/v1/sessions");
    expect(sessionsUrl("https://h/")).toBe("https://h/v1/sessions");
    expect(sessionsUrl("https://h/v1/sessions")).toBe("https://h/v1/sessions");
    expect(sessionsUrl("https://h/voice", { a: "1 2" })).toBe("https://h/voice/v1/sessions?a=1+2");
  });

  it("the session id is the Location's last segment", () => {
    expect(sessionIdOf("http://h/v1/sessions/0123abcd")).toBe("0123abcd");
    expect(sessionIdOf("/v1/sessions/ff")).toBe("ff");
  });
});

/** A credential as the server mints it (the MAC is not checked by the client). */
function cred(g: number, exp = 9e9): string {
  const payload = Buffer.from(JSON.stringify({ c: "call1", g, s: "s", w: "", o: "o", exp }))
    .toString("base64url");
  return `vr1.${payload}.mac`;
}

/** A fetch answering each request with the next of `answers`. */
function scripted(answers: Array<[number, string, Record<string, string>?] | Error>) {
  const seen: Seen[] = [];
  const fetch = async (url: string, init: RequestInit) => {
    seen.push({ url, method: String(init.method), headers: (init.headers ?? {}) as Record<string, string>, body: init.body });
    const a = answers.shift();
    if (!a) throw new Error("no more answers");
    if (a instanceof Error) throw a;
    return new Response(a[0] === 204 ? null : a[1], { status: a[0], headers: a[2] ?? {} });
  };
  return { fetch, seen };
}

describe("resume credential", () => {
  it("reads X-Voxgate-Resume and its TTL from an answer's headers", () => {
    expect(parseResumeHeaders(new Headers({ "X-Voxgate-Resume": "vr1.a.b", "X-Voxgate-Resume-Ttl": "90" }))).toEqual({
      credential: "vr1.a.b",
      ttlSecs: 90,
    });
    expect(parseResumeHeaders(new Headers({ "x-voxgate-resume": "vr1.a.b" }))).toEqual({ credential: "vr1.a.b", ttlSecs: 0 });
    expect(parseResumeHeaders(new Headers())).toBeNull();
  });

  it("reads the generation from the payload", () => {
    expect(credentialGeneration(cred(3))).toBe(3);
    expect(credentialGeneration("vr1.!!!.x")).toBeNull();
    expect(credentialGeneration("token")).toBeNull();
  });

  it("Retry-After: seconds or an HTTP date", () => {
    expect(parseRetryAfter("2")).toBe(2000);
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4000)).toBe(6000);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter("soon")).toBeUndefined();
  });

  it("after the first answer the latest credential is the bearer of PATCH, GET, /resume and DELETE", async () => {
    const c0 = cred(0);
    const f = scripted([
      [201, "answer", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": c0, "X-Voxgate-Resume-Ttl": "120" }],
      [200, "answer2", { "X-Voxgate-Resume": c0 + "b", "X-Voxgate-Resume-Ttl": "60" }],
      [200, "{}"],
      [200, c0 + "c\n", { "X-Voxgate-Resume": c0 + "c", "X-Voxgate-Resume-Ttl": "30" }],
      [204, ""],
    ]);
    const s = new Signaling({ token: "tok", fetch: f.fetch });
    const created = await s.create("http://h", "offer");
    expect(f.seen[0].headers["Authorization"]).toBe("Bearer tok");
    expect(created.resume).toEqual({ credential: c0, ttlSecs: 120 });
    await s.restart(created.location, "offer2");
    expect(f.seen[1].headers["Authorization"]).toBe(`Bearer ${c0}`);
    expect(s.credential).toEqual({ credential: c0 + "b", ttlSecs: 60 });
    await s.session(created.location);
    expect(f.seen[2].headers["Authorization"]).toBe(`Bearer ${c0}b`);
    expect(await s.refreshResume(created.location)).toEqual({ credential: c0 + "c", ttlSecs: 30 });
    expect(f.seen[3]).toMatchObject({ method: "GET", url: "http://h/v1/sessions/s1/resume" });
    expect(s.credential?.credential).toBe(c0 + "c");
    await s.hangup(created.location);
    expect(f.seen[4].headers["Authorization"]).toBe(`Bearer ${c0}c`);
  });

  it("a server that sends no credential keeps the token as bearer", async () => {
    const f = scripted([[201, "a", { Location: "/v1/sessions/s1" }], [200, "a2"]]);
    const s = new Signaling({ token: "tok", fetch: f.fetch });
    const created = await s.create("http://h", "o");
    expect(created.resume).toBeNull();
    await s.restart(created.location, "o2");
    expect(f.seen[1].headers["Authorization"]).toBe("Bearer tok");
  });

  it("a failed refresh is an error and keeps the credential in hand", async () => {
    const c0 = cred(0);
    const f = scripted([
      [201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": c0 }],
      [503, "busy"],
    ]);
    const s = new Signaling({ fetch: f.fetch });
    const created = await s.create("http://h", "o");
    await expect(s.refreshResume(created.location)).rejects.toMatchObject({ code: "busy" });
    expect(s.credential?.credential).toBe(c0);
  });

  it("resume POSTs the new offer to the create endpoint with the credential, and takes the new session", async () => {
    const c0 = cred(0);
    const c1 = cred(1);
    const f = scripted([
      [201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": c0, "X-Voxgate-Resume-Ttl": "120" }],
      [201, "a-new", { Location: "/v1/sessions/s2", "X-Voxgate-Resume": c1, "X-Voxgate-Resume-Ttl": "120" }],
    ]);
    const s = new Signaling({ token: "tok", metadata: { room: "r" }, fetch: f.fetch });
    await s.create("http://lb", "o");
    const resumed = await s.resume("new offer");
    expect(f.seen[1]).toMatchObject({ method: "POST", url: "http://lb/v1/sessions?room=r", body: "new offer" });
    expect(f.seen[1].headers["Authorization"]).toBe(`Bearer ${c0}`);
    expect(f.seen[1].headers["Content-Type"]).toBe("application/sdp");
    expect(resumed.location).toBe("http://lb/v1/sessions/s2");
    expect(resumed.answer).toBe("a-new");
    expect(s.credential?.credential).toBe(c1);
  });

  it("maps resume refusals: 401/409/410 final codes, 429/503 busy with Retry-After, network", async () => {
    for (const [status, code, retry] of [
      [401, "resume_invalid", undefined],
      [409, "resume_refused", undefined],
      [410, "call_gone", undefined],
      [429, "busy", 3000],
      [503, "busy", 1000],
      [500, "signaling", undefined],
    ] as const) {
      const headers: Record<string, string> = retry ? { "Retry-After": String(retry / 1000) } : {};
      const f = scripted([[201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": cred(0) }], [status, "no", headers]]);
      const s = new Signaling({ fetch: f.fetch });
      await s.create("http://h", "o");
      const err = await s.resume("o2").catch((e) => e);
      expect(err).toBeInstanceOf(VoxgateError);
      expect(err.code).toBe(code);
      expect(err.status).toBe(status);
      expect(err.retryAfterMs).toBe(retry);
    }
    const f = scripted([[201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": cred(0) }], new TypeError("Failed to fetch")]);
    const s = new Signaling({ fetch: f.fetch });
    await s.create("http://h", "o");
    await expect(s.resume("o2")).rejects.toMatchObject({ code: "network" });
  });

  it("a 401 to a resume is resume_expired when the credential's exp has passed (or the answer says so), else resume_invalid", async () => {
    const now = Math.floor(Date.now() / 1000);
    for (const [credential, body, code] of [
      [cred(1, now - 5), "missing or invalid bearer token", "resume_expired"],
      [cred(1, now + 60), "resume credential has expired", "resume_expired"],
      [cred(1, now + 60), "missing or invalid bearer token", "resume_invalid"],
      ["vr1.garbage.mac", "missing or invalid bearer token", "resume_invalid"],
    ] as const) {
      const f = scripted([[201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": credential }], [401, body]]);
      const s = new Signaling({ fetch: f.fetch });
      await s.create("http://h", "o");
      await expect(s.resume("o2")).rejects.toMatchObject({ code, status: 401 });
    }
    expect(credentialExpiry(cred(1, 1234))).toBe(1234);
    expect(credentialExpiry("token")).toBeNull();
  });

  it("PATCH, GET, DELETE and refresh give up after requestTimeoutMs as a network error; the first POST waits", async () => {
    const signals: Array<AbortSignal | undefined> = [];
    const hanging = (url: string, init: RequestInit) => {
      signals.push(init.signal ?? undefined);
      if (init.method === "POST") {
        return Promise.resolve(new Response("a", { status: 201, headers: { Location: "/v1/sessions/s1" } }));
      }
      return new Promise<Response>((_, reject) =>
        init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
      );
    };
    const s = new Signaling({ fetch: hanging, requestTimeoutMs: 20 });
    const created = await s.create("http://h", "o");
    expect(signals[0]).toBeUndefined();
    for (const attempt of [
      () => s.restart(created.location, "o2"),
      () => s.session(created.location),
      () => s.hangup(created.location),
      () => s.refreshResume(created.location),
    ]) {
      const err = await attempt().catch((e) => e);
      expect(err).toBeInstanceOf(VoxgateError);
      expect(err.code).toBe("network");
      expect(err.message).toMatch(/no answer in 20 ms/);
    }
  });

  it("probe: GET on the Location with the credential, its status; no answer in its own timeout → network", async () => {
    const f = fakeFetch(201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": cred(1) });
    const s = new Signaling({ token: "tok", fetch: f.fetch });
    const created = await s.create("http://h", "o");
    expect(await s.probe(created.location, 800)).toBe(201); // the fake answers every request alike
    expect(f.seen[1]).toMatchObject({ method: "GET", url: "http://h/v1/sessions/s1" });
    expect(f.seen[1].headers["Authorization"]).toBe(`Bearer ${cred(1)}`);

    const gone = new Signaling({ fetch: fakeFetch(404, "no such session").fetch });
    expect(await gone.probe("http://h/v1/sessions/s1", 800)).toBe(404);

    const hanging = (_url: string, init: RequestInit) =>
      new Promise<Response>((_, reject) =>
        init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
      );
    const silent = new Signaling({ fetch: hanging, requestTimeoutMs: 60_000 });
    const t0 = Date.now();
    await expect(silent.probe("http://h/v1/sessions/s1", 20)).rejects.toMatchObject({ code: "network" });
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("a resume POST waits as long as its caller allows", async () => {
    const hanging = (url: string, init: RequestInit) =>
      init.headers && (init.headers as Record<string, string>)["Authorization"]?.startsWith("Bearer vr1.")
        ? new Promise<Response>((_, reject) =>
            init.signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
          )
        : Promise.resolve(
            new Response("a", { status: 201, headers: { Location: "/v1/sessions/s1", "X-Voxgate-Resume": cred(1) } }),
          );
    const s = new Signaling({ fetch: hanging });
    await s.create("http://h", "o");
    const t0 = Date.now();
    await expect(s.resume("o2", undefined, 30)).rejects.toMatchObject({ code: "network" });
    expect(Date.now() - t0).toBeLessThan(1000);
  });

  it("a late answer of the replaced session does not take back the newer credential", async () => {
    const f = scripted([
      [201, "a", { Location: "/v1/sessions/s1", "X-Voxgate-Resume": cred(0) }],
      [201, "a2", { Location: "/v1/sessions/s2", "X-Voxgate-Resume": cred(1) }],
      [200, "late", { "X-Voxgate-Resume": cred(0) }],
    ]);
    const s = new Signaling({ fetch: f.fetch });
    const first = await s.create("http://h", "o");
    await s.resume("o2");
    await s.restart(first.location, "o3");
    expect(credentialGeneration(s.credential!.credential)).toBe(1);
  });
});
