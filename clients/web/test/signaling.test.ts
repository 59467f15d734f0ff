import { describe, expect, it } from "vitest";
import { Signaling, parseLinkIceServers, sessionIdOf, sessionsUrl } from "../src/signaling";
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
